/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/loop.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "spawn-util.h"
#include "workspace.h"

/* What a removal renames a workspace to first: ".removing-ID-N". Never a sandbox id. */
#define REMOVING_PREFIX ".removing-"

struct WorkspacePool {
        char *dir;
        int dir_fd;
        char *btrfs_path;
        char qgroups_dir[128]; /* /sys/fs/btrfs/FSID/qgroups */
        unsigned removals;     /* names the next removal's rename */
};

void workspace_settings_done(WorkspaceSettings *s) {
        s->directory = mfree(s->directory);
}

static bool dir_is_btrfs(int fd) {
        struct statfs sf;

        return fstatfs(fd, &sf) >= 0 && (uint64_t) sf.f_type == (uint64_t) BTRFS_SUPER_MAGIC;
}

static int btrfs_qgroups_dir(int fd, char *ret, size_t size) {
        struct btrfs_ioctl_fs_info_args info = {};
        char uuid[37];
        const uint8_t *u = info.fsid;

        if (ioctl(fd, BTRFS_IOC_FS_INFO, &info) < 0)
                return -errno;
        snprintf(uuid, sizeof(uuid), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
        snprintf(ret, size, "/sys/fs/btrfs/%s/qgroups", uuid);
        return 0;
}

/* Quotas that are inconsistent hold no limit: a rescan brings them back. */
static int quota_check(int fd, const char *qgroups) {
        struct btrfs_ioctl_quota_rescan_args args = {};
        char path[192], buf[8];
        ssize_t n;

        snprintf(path, sizeof(path), "%s/inconsistent", qgroups);
        n = read_small_file_at(AT_FDCWD, path, buf, sizeof(buf) - 1);
        if (n <= 0 || buf[0] != '1')
                return 0;
        if (ioctl(fd, BTRFS_IOC_QUOTA_RESCAN, &args) < 0 && errno != EINPROGRESS)
                return log_warning_errno(errno, "The workspace pool's quotas are inconsistent (limits do not "
                                         "hold) and a rescan failed to start: %m");
        log_warning("The workspace pool's quotas were inconsistent (limits did not hold): rescanning.");
        return 0;
}

int workspace_pool_open(const char *dir, const char *btrfs_path, WorkspacePool **ret, const char **ret_reason) {
        _cleanup_close_ int fd = -EBADF;
        WorkspacePool *p;
        char qgroups[128];

        *ret = NULL;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                *ret_reason = "its directory does not exist (sandboxd-workspaces.service makes it)";
                return 0;
        }
        if (!dir_is_btrfs(fd)) {
                *ret_reason = "its directory is not a btrfs file system (sandboxd-workspaces.service mounts one)";
                return 0;
        }
        if (btrfs_qgroups_dir(fd, qgroups, sizeof(qgroups)) < 0 || access(qgroups, F_OK) < 0) {
                *ret_reason = "quotas are not enabled on its btrfs (sandboxd-workspaces.service enables them)";
                return 0;
        }

        p = calloc(1, sizeof(WorkspacePool));
        if (!p)
                return -ENOMEM;
        p->dir = strdup(dir);
        p->btrfs_path = strdup(btrfs_path);
        if (!p->dir || !p->btrfs_path) {
                workspace_pool_free(p);
                return -ENOMEM;
        }
        strcpy(p->qgroups_dir, qgroups);
        (void) quota_check(fd, qgroups);
        p->dir_fd = TAKE_FD(fd);
        *ret = p;
        return 0;
}

WorkspacePool *workspace_pool_free(WorkspacePool *p) {
        if (!p)
                return NULL;
        safe_close(p->dir_fd);
        free(p->dir);
        free(p->btrfs_path);
        return mfree(p);
}

const char *workspace_pool_dir(const WorkspacePool *p) {
        return p->dir;
}

char *workspace_path(const WorkspacePool *p, const char *id, const char *sub) {
        char *path;

        if ((sub ? asprintf(&path, "%s/%s/%s", p->dir, id, sub) : asprintf(&path, "%s/%s", p->dir, id)) < 0)
                return NULL;
        return path;
}

bool workspace_exists(const WorkspacePool *p, const char *id) {
        return faccessat(p->dir_fd, id, F_OK, AT_SYMLINK_NOFOLLOW) >= 0;
}

/* The subvolume id (= its qgroup's level-0 id) of the subvolume whose root fd is. */
static int btrfs_subvol_id(int fd, uint64_t *ret) {
        struct btrfs_ioctl_ino_lookup_args args = { .objectid = BTRFS_FIRST_FREE_OBJECTID };

        if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &args) < 0)
                return -errno;
        *ret = args.treeid;
        return 0;
}

static int btrfs_limit(int fd, uint64_t subvol_id, uint64_t max_bytes) {
        struct btrfs_ioctl_qgroup_limit_args args = {
                .qgroupid = subvol_id,
                .lim = { .flags = BTRFS_QGROUP_LIMIT_MAX_RFER, .max_rfer = max_bytes },
        };

        return ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &args) < 0 ? -errno : 0;
}

/* work/ (0700) and tmp/ (0755, as bwrap makes a --tmpfs) of uid in the subvolume at fd,
 * whose root stays root's: the sandbox cannot rename or remove the workspace itself. */
static int workspace_fill(int fd, uid_t uid) {
        static const struct { const char *name; mode_t mode; } dirs[] = { { "work", 0700 }, { "tmp", 0755 } };

        if (fchmod(fd, 0711) < 0)
                return -errno;
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                if (mkdirat(fd, dirs[i].name, dirs[i].mode) < 0 && errno != EEXIST)
                        return -errno;
                if (fchownat(fd, dirs[i].name, uid, uid, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
        }
        return 0;
}

typedef struct CloneJob {
        WorkspacePool *pool;
        char id[64];
        uint64_t max_bytes;
        workspace_callback_t cb;
        void *userdata;
} CloneJob;

typedef struct CloneArgs {
        char *argv[12];
} CloneArgs;

static int clone_child(void *userdata) {
        CloneArgs *a = userdata;
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);

        if (null >= 0) {
                (void) dup2(null, STDIN_FILENO);
                (void) dup2(null, STDOUT_FILENO);
        }
        execv(a->argv[0], a->argv);
        return -errno;
}

static int on_clone_exited(sd_event_source *source, const siginfo_t *si, void *userdata) {
        CloneJob *j = userdata;
        int r = si->si_code == CLD_EXITED && si->si_status == 0 ? 0 : -EIO;

        if (r >= 0) {
                _cleanup_close_ int fd = openat(j->pool->dir_fd, j->id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                uint64_t subvol = 0;

                r = fd < 0 ? -errno : btrfs_subvol_id(fd, &subvol);
                if (r >= 0)
                        r = btrfs_limit(fd, subvol, j->max_bytes);
        }
        j->cb(r, j->userdata);
        return 0;
}

int workspace_clone(WorkspacePool *p, const char *from_id, const char *id, uid_t from_uid, uid_t uid,
                    uint64_t max_bytes, sd_event *event, workspace_callback_t cb, void *userdata,
                    sd_event_source **ret_source) {
        _cleanup_free_ char *script = NULL, *from = NULL, *to = NULL;
        _cleanup_close_ int pidfd = -EBADF;
        char from_owner[32], to_owner[32];
        sd_event_source *source = NULL;
        CloneJob *j;
        pid_t pid;
        int r;

        if (strlen(id) >= sizeof(j->id))
                return -EINVAL;
        from = workspace_path(p, from_id, NULL);
        to = workspace_path(p, id, NULL);
        if (!from || !to)
                return -ENOMEM;
        snprintf(from_owner, sizeof(from_owner), "%u:%u", (unsigned) from_uid, (unsigned) from_uid);
        snprintf(to_owner, sizeof(to_owner), "%u:%u", (unsigned) uid, (unsigned) uid);
        /* -h -P: links are changed themselves, never followed; --from: only what the source
         * sandbox owned (all of it, as nothing else can write there). */
        if (asprintf(&script, "\"$0\" -q subvolume snapshot -- \"$1\" \"$2\" >/dev/null && "
                     "chown -h -R -P --from=\"$3\" -- \"$4\" \"$2/work\" \"$2/tmp\"") < 0)
                return -ENOMEM;
        CloneArgs a = { .argv = { (char *) "/bin/sh", (char *) "-c", script, p->btrfs_path, from, to, from_owner,
                                  to_owner, NULL } };

        j = calloc(1, sizeof(CloneJob));
        if (!j)
                return -ENOMEM;
        *j = (CloneJob) { .pool = p, .max_bytes = max_bytes, .cb = cb, .userdata = userdata };
        strcpy(j->id, id);
        r = spawn_vfork(0, clone_child, &a, &pid, &pidfd);
        if (r < 0) {
                free(j);
                return r;
        }
        r = sd_event_add_child_pidfd(event, &source, pidfd, WEXITED, on_clone_exited, j);
        if (r < 0) {
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                free(j);
                return r;
        }
        TAKE_FD(pidfd);
        (void) sd_event_source_set_child_pidfd_own(source, true);
        (void) sd_event_source_set_destroy_callback(source, free);
        *ret_source = source;
        return 0;
}

int workspace_create(WorkspacePool *p, const char *id, uid_t uid, uint64_t max_bytes) {
        struct btrfs_ioctl_vol_args args = {};
        _cleanup_close_ int fd = -EBADF;
        uint64_t subvol = 0;
        int r;

        if (strlen(id) >= sizeof(args.name))
                return -EINVAL;
        strcpy(args.name, id);
        if (ioctl(p->dir_fd, BTRFS_IOC_SUBVOL_CREATE, &args) < 0)
                return -errno;
        fd = openat(p->dir_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        r = fd < 0 ? -errno : btrfs_subvol_id(fd, &subvol);
        if (r >= 0)
                r = btrfs_limit(fd, subvol, max_bytes);
        if (r >= 0)
                r = workspace_fill(fd, uid);
        if (r < 0) {
                fd = safe_close(fd);
                (void) workspace_remove(p, id);
                return r;
        }
        return 0;
}

/* The subvolume deleted, then, once the kernel's cleaner has dropped its tree, its qgroup
 * destroyed: a qgroup outlives its subvolume (on the kernels that do not remove it
 * themselves), and thousands of them would slow every quota rescan and commit. The
 * destroy's failure is no error: a kernel that removes the qgroup itself may be first. */
#define REMOVE_SCRIPT                                                                          \
        "\"$0\" -q subvolume delete --commit-after -- \"$1\" >/dev/null || exit; "                \
        "[ \"$3\" != 0 ] || exit 0; "                                                              \
        "\"$0\" -q subvolume sync \"$2\" \"$3\" >/dev/null || exit; "                                \
        "\"$0\" -q qgroup destroy \"0/$3\" \"$2\" >/dev/null 2>&1; "                                 \
        "[ \"$(cat \"$4\")\" != 1 ] || exec \"$0\" -q quota rescan \"$2\""

typedef struct RemoveArgs {
        char *argv[10];
} RemoveArgs;

static int remove_child(void *userdata) {
        RemoveArgs *a = userdata;
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);

        if (null >= 0) {
                (void) dup2(null, STDIN_FILENO);
                (void) dup2(null, STDOUT_FILENO);
        }
        execv(a->argv[0], a->argv);
        return -errno;
}

/* Removes the subvolume DIR/name and its qgroup in a child of our parent (the service
 * manager reaps it): the caller goes on at once. */
static int workspace_delete_subvolume(WorkspacePool *p, const char *name) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        uint64_t subvol = 0;
        char id[32];

        if (asprintf(&path, "%s/%s", p->dir, name) < 0)
                return -ENOMEM;
        fd = openat(p->dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || btrfs_subvol_id(fd, &subvol) < 0)
                subvol = 0;  /* its qgroup is not known: the subvolume goes all the same */
        snprintf(id, sizeof(id), "%" PRIu64, subvol);
        char inconsistent[sizeof(p->qgroups_dir) + 16];
        snprintf(inconsistent, sizeof(inconsistent), "%s/inconsistent", p->qgroups_dir);
        RemoveArgs a = { .argv = { (char *) "/bin/sh", (char *) "-c", (char *) REMOVE_SCRIPT, p->btrfs_path, path,
                                   p->dir, id, inconsistent, NULL } };
        return spawn_vfork(SPAWN_PARENT, remove_child, &a, NULL, NULL);
}

int workspace_remove(WorkspacePool *p, const char *id) {
        char name[sizeof(REMOVING_PREFIX) + 64];
        int r;

        /* Its record (a stopped sandbox's) first: without it, nothing is to come back. */
        snprintf(name, sizeof(name), "%s.json", id);
        if (unlinkat(p->dir_fd, name, 0) < 0 && errno != ENOENT)
                log_warning_errno(errno, "Failed to remove %s/%s: %m", p->dir, name);
        /* Out of the way first: the id may be used again (Wake) before the kernel is done. */
        snprintf(name, sizeof(name), REMOVING_PREFIX "%s-%u-%d", id, p->removals++, (int) getpid());
        if (renameat(p->dir_fd, id, p->dir_fd, name) < 0)
                return errno == ENOENT ? 0 : -errno;
        r = workspace_delete_subvolume(p, name);
        if (r < 0)
                return log_error_errno(r, "Failed to start removing workspace %s/%s: %m", p->dir, name);
        return 1;
}

static int read_u64_file(const char *path, uint64_t *ret) {
        char buf[32];
        ssize_t n;

        n = read_small_file_at(AT_FDCWD, path, buf, sizeof(buf) - 1);
        if (n < 0)
                return (int) n;
        buf[n] = 0;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(buf, &end, 10);
        if (errno != 0 || end == buf)
                return -EINVAL;
        *ret = v;
        return 0;
}

int workspace_usage(const WorkspacePool *p, const char *id, uint64_t *qgroup, uint64_t *ret_used, uint64_t *ret_max) {
        char path[sizeof(p->qgroups_dir) + 64];
        uint64_t subvol = qgroup ? *qgroup : 0, used = 0, max = 0;
        int r;

        if (subvol == 0) {
                _cleanup_close_ int fd = openat(p->dir_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                r = btrfs_subvol_id(fd, &subvol);
                if (r < 0)
                        return r;
        }
        snprintf(path, sizeof(path), "%s/0_%" PRIu64 "/referenced", p->qgroups_dir, subvol);
        r = read_u64_file(path, &used);
        if (r < 0)
                return r;
        if (qgroup)
                *qgroup = subvol;
        if (ret_max) {
                snprintf(path, sizeof(path), "%s/0_%" PRIu64 "/max_referenced", p->qgroups_dir, subvol);
                (void) read_u64_file(path, &max);
                *ret_max = max;
        }
        if (ret_used)
                *ret_used = used;
        return 0;
}

int workspace_pool_space(const WorkspacePool *p, uint64_t *ret_size, uint64_t *ret_free) {
        struct statvfs sv;

        if (fstatvfs(p->dir_fd, &sv) < 0)
                return -errno;
        *ret_size = (uint64_t) sv.f_blocks * sv.f_frsize;
        *ret_free = (uint64_t) sv.f_bavail * sv.f_frsize;
        return 0;
}

void workspace_remove_orphans(WorkspacePool *p, bool (*is_live)(const char *id, void *userdata), void *userdata) {
        _cleanup_close_ int fd = -EBADF;
        struct dirent *de;
        DIR *d;
        unsigned n = 0;

        fd = fcntl(p->dir_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return;
        d = fdopendir(fd);
        if (!d)
                return;
        TAKE_FD(fd);
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);

                if (de->d_type == DT_REG && len > 5 && streq(de->d_name + len - 5, ".json")) {
                        /* A record whose workspace and sandbox are gone. */
                        char id[64];
                        if (len - 5 < sizeof(id)) {
                                memcpy(id, de->d_name, len - 5);
                                id[len - 5] = 0;
                                if (!is_live(id, userdata) && faccessat(p->dir_fd, id, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                                        (void) unlinkat(p->dir_fd, de->d_name, 0);
                        }
                        continue;
                }
                if (de->d_type != DT_DIR || streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (startswith_str(de->d_name, REMOVING_PREFIX)) {
                        /* A removal that sandboxd's end interrupted. */
                        if (workspace_delete_subvolume(p, de->d_name) >= 0)
                                n++;
                        continue;
                }
                if (is_live(de->d_name, userdata))
                        continue;
                if (workspace_remove(p, de->d_name) > 0)
                        n++;
        }
        closedir(d);
        if (n > 0)
                log_info("Removing %u workspace(s) of sandboxes that are gone.", n);
}

/* ---- sandboxd --setup-workspaces ---------------------------------------------------- */

static int run_wait(char * const argv[]) {
        pid_t pid;
        int status;

        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                execv(argv[0], argv);
                _exit(127);
        }
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

/* The loop device that backs image already (a pool sandboxd set up before, still mounted
 * in some namespace), as "/dev/loopN". */
static int loop_find(const char *image, char *ret, size_t size) {
        struct dirent *de;
        DIR *d;
        int r = -ENOENT;

        d = opendir("/sys/block");
        if (!d)
                return -errno;
        while (r < 0 && (de = readdir(d))) {
                char path[PATH_MAX], backing[PATH_MAX];
                ssize_t n;

                if (!startswith_str(de->d_name, "loop"))
                        continue;
                snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", de->d_name);
                n = read_small_file_at(AT_FDCWD, path, backing, sizeof(backing) - 1);
                if (n <= 0)
                        continue;
                backing[n] = 0;
                if (backing[n - 1] == '\n')
                        backing[n - 1] = 0;
                if (streq(backing, image) && strlen(de->d_name) + 6 <= size) {
                        strcpy(ret, "/dev/");
                        strcat(ret, de->d_name);
                        r = 0;
                }
        }
        closedir(d);
        return r;
}

/* Attaches image to a free loop device, detached again by the kernel once nothing uses
 * it (the mount). Returns the loop device's fd (to be kept until it is mounted). */
static int loop_attach(const char *image, char *ret, size_t size) {
        _cleanup_close_ int ctl = -EBADF, file = -EBADF;

        ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (ctl < 0)
                return -errno;
        file = open(image, O_RDWR | O_CLOEXEC);
        if (file < 0)
                return -errno;
        for (unsigned attempt = 0; attempt < 16; attempt++) {
                struct loop_config config = {
                        .fd = (uint32_t) file,
                        .info = { .lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO },
                };
                int n = ioctl(ctl, LOOP_CTL_GET_FREE);
                if (n < 0)
                        return -errno;
                snprintf(ret, size, "/dev/loop%d", n);
                int fd = open(ret, O_RDWR | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                if (ioctl(fd, LOOP_CONFIGURE, &config) >= 0)
                        return fd;
                /* Taken meanwhile by someone else: the next free one. */
                int e = errno;
                safe_close(fd);
                if (e != EBUSY)
                        return -e;
        }
        return -EBUSY;
}

static int quota_enable(const char *dir) {
        struct btrfs_ioctl_quota_ctl_args args = { .cmd = BTRFS_QUOTA_CTL_ENABLE };
        _cleanup_close_ int fd = -EBADF;
        char qgroups[128];

        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (btrfs_qgroups_dir(fd, qgroups, sizeof(qgroups)) >= 0 && access(qgroups, F_OK) >= 0)
                return 0;
        if (ioctl(fd, BTRFS_IOC_QUOTA_CTL, &args) < 0)
                return -errno;
        return 0;
}

/* Deleting a subvolume whose tree is taller than the qgroups' drop_subtree_threshold
 * (3 by default on recent kernels) skips its accounting and marks every qgroup
 * inconsistent: limits then hold no more, for every workspace, until a rescan. A
 * workspace of a few hundred thousand files, or a fork's shared tree, is that tall. The
 * threshold at its most (BTRFS_MAX_LEVEL) keeps every deletion accounted (in the kernel's
 * cleaner thread, not in anyone's way); a pool found inconsistent is rescanned. */
static int quota_keep_exact(const char *dir) {
        _cleanup_close_ int fd = -EBADF, knob = -EBADF;
        char qgroups[128], path[192];

        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return log_error_errno(errno, "Failed to open %s: %m", dir);
        if (btrfs_qgroups_dir(fd, qgroups, sizeof(qgroups)) < 0)
                return 0;
        snprintf(path, sizeof(path), "%s/drop_subtree_threshold", qgroups);
        knob = open(path, O_WRONLY | O_CLOEXEC);
        if ((knob < 0 && errno != ENOENT) || (knob >= 0 && write(knob, "8", 1) != 1))
                log_warning_errno(errno, "Failed to set %s, deleting a large workspace may stop the quotas "
                                  "until a rescan: %m", path);
        return quota_check(fd, qgroups);
}

/* A bigger image: the loop device and the file system follow. */
static int pool_grow(const char *dir, const char *loop, uint64_t size) {
        struct btrfs_ioctl_vol_args args = {};
        _cleanup_close_ int fd = -EBADF, dev = -EBADF;

        dev = open(loop, O_RDONLY | O_CLOEXEC);
        if (dev < 0)
                return -errno;
        if (ioctl(dev, LOOP_SET_CAPACITY, 0) < 0)
                return -errno;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        strcpy(args.name, "max");
        if (ioctl(fd, BTRFS_IOC_RESIZE, &args) < 0)
                return -errno;
        log_info("Grew the workspace pool %s to %" PRIu64 " bytes.", dir, size);
        return 0;
}

int workspace_pool_setup(const char *dir, uint64_t image_size, const char *mkfs_path) {
        _cleanup_free_ char *image = NULL, *parent = NULL;
        _cleanup_close_ int fd = -EBADF, loop_fd = -EBADF;
        char loop[64];
        struct stat st;
        bool grown = false;
        int r;

        if (mkdir(dir, 0711) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Failed to create %s: %m", dir);
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return log_error_errno(errno, "Failed to open %s: %m", dir);
        if (fchmod(fd, 0711) < 0)
                return log_error_errno(errno, "Failed to make %s searchable: %m", dir);

        if (asprintf(&image, "%s.img", dir) < 0)
                return -ENOMEM;
        if (!dir_is_btrfs(fd)) {
                /* Not on btrfs (or not mounted yet): the loop-backed image, sparse. */
                if (image_size == 0) {
                        struct statvfs sv;
                        parent = strdup(image);
                        if (!parent)
                                return -ENOMEM;
                        *strrchr(parent, '/') = 0;
                        if (statvfs(*parent ? parent : "/", &sv) < 0)
                                return log_error_errno(errno, "Failed to learn the size of %s: %m", parent);
                        image_size = (uint64_t) sv.f_blocks * sv.f_frsize;
                }
                image_size = MAX(image_size, 256ULL * 1024 * 1024); /* mkfs.btrfs's least, with room */
                if (stat(image, &st) < 0) {
                        if (errno != ENOENT)
                                return log_error_errno(errno, "Failed to look at %s: %m", image);
                        _cleanup_close_ int img = open(image, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                        if (img < 0)
                                return log_error_errno(errno, "Failed to create %s: %m", image);
                        if (ftruncate(img, (off_t) image_size) < 0) {
                                r = -errno;
                                (void) unlink(image);
                                return log_error_errno(r, "Failed to size %s: %m", image);
                        }
                        r = run_wait((char *[]) { (char *) mkfs_path, (char *) "-q", image, NULL });
                        if (r < 0) {
                                (void) unlink(image);
                                return log_error_errno(r, "%s %s failed.", mkfs_path, image);
                        }
                        log_info("Created the workspace pool %s (%" PRIu64 " bytes, sparse).", image, image_size);
                } else if ((uint64_t) st.st_size < image_size) {
                        if (truncate(image, (off_t) image_size) < 0)
                                return log_error_errno(errno, "Failed to grow %s: %m", image);
                        grown = true;
                }

                r = loop_find(image, loop, sizeof(loop));
                if (r < 0) {
                        loop_fd = loop_attach(image, loop, sizeof(loop));
                        if (loop_fd < 0)
                                return log_error_errno(loop_fd, "Failed to attach %s to a loop device: %m", image);
                }
                /* discard: what a removed workspace held goes back to the host's disk. */
                if (mount(loop, dir, "btrfs", MS_NOSUID | MS_NODEV, "discard=async") < 0)
                        return log_error_errno(errno, "Failed to mount %s (%s) on %s: %m", loop, image, dir);
                if (grown)
                        (void) pool_grow(dir, loop, image_size);
                fd = safe_close(fd);
                fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        return log_error_errno(errno, "Failed to open %s: %m", dir);
                if (fchmod(fd, 0711) < 0)
                        return log_error_errno(errno, "Failed to make %s searchable: %m", dir);
        }
        r = quota_enable(dir);
        if (r < 0)
                return log_error_errno(r, "Failed to enable btrfs quotas on %s: %m", dir);
        return quota_keep_exact(dir);
}
