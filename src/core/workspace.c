/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/btrfs.h>
#include <linux/loop.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "btrfs-util.h"
#include "fd-util.h"
#include "json-util.h"
#include "list.h"
#include "log.h"
#include "macro.h"
#include "varlink.h"
#include "workspace-api.h"
#include "workspace.h"

/* How long the connection to sandboxd-workspace stays open with no call on it: a burst of
 * creates shares one, and the service exits once nothing is connected (its idle exit). */
#define WORKSPACE_CONNECTION_IDLE_USEC (2ULL * 1000000ULL)

struct WorkspaceCall {
        WorkspacePool *pool;
        VarlinkClient *client;  /* a clone's own connection; NULL: the pool's */
        char id[WORKSPACE_NAME_MAX];
        workspace_callback_t cb;
        void *userdata;
        bool cancelled;
        WorkspaceCall *prev, *next;
};

struct WorkspacePool {
        char *dir;
        int dir_fd;
        char *socket_path;      /* sandboxd-workspace's */
        char qgroups_dir[128];  /* /sys/fs/btrfs/FSID/qgroups */
        unsigned removals;      /* names the next removal's rename */
        sd_event *event;
        /* Create and Remove share a connection, answered in order and each at once;
         * a clone, which is answered when its snapshot is made, has one of its own so that
         * no create waits behind it. */
        VarlinkClient *client;
        unsigned pending;       /* calls outstanding on client */
        sd_event_source *close_timer;
        WorkspaceCall *calls;   /* outstanding, on either kind of connection */
};

void workspace_settings_done(WorkspaceSettings *s) {
        s->directory = mfree(s->directory);
}

int workspace_pool_open(const char *dir, const char *socket_path, sd_event *event, WorkspacePool **ret,
                        const char **ret_reason) {
        _cleanup_close_ int fd = -EBADF;
        WorkspacePool *p;
        char qgroups[128];

        *ret = NULL;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                *ret_reason = "its directory does not exist (sandboxd-workspaces.service makes it)";
                return 0;
        }
        if (!btrfs_is_dir_fd(fd)) {
                *ret_reason = "its directory is not a btrfs file system (sandboxd-workspaces.service mounts one)";
                return 0;
        }
        if (btrfs_qgroups_dir(fd, qgroups, sizeof(qgroups)) < 0 || access(qgroups, F_OK) < 0) {
                *ret_reason = "quotas are not enabled on its btrfs (sandboxd-workspaces.service enables them)";
                return 0;
        }
        if (access(socket_path, F_OK) < 0) {
                *ret_reason = "sandboxd-workspace.socket, which makes and removes workspaces, is not listening";
                return 0;
        }

        p = calloc(1, sizeof(WorkspacePool));
        if (!p)
                return -ENOMEM;
        p->dir_fd = -EBADF;
        p->dir = strdup(dir);
        p->socket_path = strdup(socket_path);
        if (!p->dir || !p->socket_path) {
                workspace_pool_free(p);
                return -ENOMEM;
        }
        strcpy(p->qgroups_dir, qgroups);
        p->event = sd_event_ref(event);
        p->dir_fd = TAKE_FD(fd);
        *ret = p;
        return 0;
}

WorkspacePool *workspace_pool_free(WorkspacePool *p) {
        if (!p)
                return NULL;
        /* Nobody waits any more: each call's callback (DISCONNECTED, from within the unref of
         * its connection) only frees it. */
        while (p->calls) {
                WorkspaceCall *c = p->calls;
                LIST_REMOVE(p->calls, c);
                c->pool = NULL;
                varlink_client_unref(c->client);
        }
        p->client = varlink_client_unref(p->client);
        sd_event_source_disable_unref(p->close_timer);
        sd_event_unref(p->event);
        safe_close(p->dir_fd);
        free(p->dir);
        free(p->socket_path);
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

/* Whether the directory name in dir_fd has anything in it: one getdents, whatever it holds. */
static int dir_is_empty_at(int dir_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        struct dirent *de;
        DIR *d;
        int r = 1;

        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d)
                return -errno;
        TAKE_FD(fd);
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..")) {
                        r = 0;
                        break;
                }
        closedir(d);
        return r;
}

static int workspace_remove_trash(WorkspacePool *p, const char *id, const char *trash);

/* Asks for the removal of every old shm/ in the root of the workspace at fd: this start's,
 * one a crash or a reboot left before it was removed, a fork's copy of its source's. The
 * root holds a handful of entries; sandboxd-workspace does not start one twice. */
static unsigned workspace_collect_trash(WorkspacePool *p, int fd, const char *id) {
        _cleanup_close_ int dfd = -EBADF;
        struct dirent *de;
        unsigned n = 0;
        DIR *d;

        dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (dfd < 0)
                return 0;
        d = fdopendir(dfd);
        if (!d)
                return 0;
        TAKE_FD(dfd);
        rewinddir(d);
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && startswith_str(de->d_name, WORKSPACE_TRASH_PREFIX) &&
                    workspace_remove_trash(p, id, de->d_name) >= 0)
                        n++;
        closedir(d);
        return n;
}

/* shm/ (not empty) renamed out of the sandbox's sight, in the workspace's root, and a new
 * one made: O(1), whatever the sandbox left in it. 1 if renewed, 0 if it was empty, -errno
 * if it could not be (then it stays as it is, and the agent empties it). */
static int workspace_shm_renew(WorkspacePool *p, int fd, const char *id) {
        char trash[sizeof(WORKSPACE_TRASH_PREFIX) + 32];
        int r;

        r = dir_is_empty_at(fd, WORKSPACE_SHM);
        if (r != 0)
                return r < 0 ? r : 0;
        for (unsigned attempt = 0;; attempt++) {
                snprintf(trash, sizeof(trash), WORKSPACE_TRASH_PREFIX "%u-%d", p->removals++, (int) getpid());
                if (renameat2(fd, WORKSPACE_SHM, fd, trash, RENAME_NOREPLACE) >= 0)
                        break;
                if (errno != EEXIST || attempt >= 16)
                        return -errno;
        }
        if (mkdirat(fd, WORKSPACE_SHM, WORKSPACE_SHM_MODE) < 0) {
                r = -errno;
                /* (The quota full, say.) Back as it was: the agent empties it as it starts. */
                if (renameat2(fd, trash, fd, WORKSPACE_SHM, RENAME_NOREPLACE) < 0)
                        log_warning_errno(errno, "Failed to put %s/%s/%s back as %s: %m", p->dir, id, trash,
                                          WORKSPACE_SHM);
                return r;
        }
        return 1;
}

int workspace_shm_dir(WorkspacePool *p, const char *id, char **ret) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        /* The workspace's root is root's, mode 0711: nothing the sandbox made can be here
         * (only in work/, tmp/ and shm/ themselves). */
        fd = openat(p->dir_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstatat(fd, WORKSPACE_SHM, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        return -errno;
                if (mkdirat(fd, WORKSPACE_SHM, WORKSPACE_SHM_MODE) < 0 && errno != EEXIST)
                        return -errno;
                if (fstatat(fd, WORKSPACE_SHM, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
        } else if (S_ISDIR(st.st_mode) && st.st_uid == 0) {
                /* What the sandbox left there: set aside, removed off the start path. */
                r = workspace_shm_renew(p, fd, id);
                if (r < 0)
                        log_warning_errno(r, "Failed to set %s/%s/%s aside, the sandbox's agent empties it as it "
                                          "starts: %m", p->dir, id, WORKSPACE_SHM);
                if (r > 0 && fstatat(fd, WORKSPACE_SHM, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
        }
        (void) workspace_collect_trash(p, fd, id);
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        if (st.st_uid != 0)
                return -EPERM;
        /* mkdir() left out what our umask masks. Not a link (checked above), in a
         * directory only root writes; the sandbox, not its owner, cannot chmod it. */
        if ((st.st_mode & 07777) != WORKSPACE_SHM_MODE && fchmodat(fd, WORKSPACE_SHM, WORKSPACE_SHM_MODE, 0) < 0)
                return -errno;
        *ret = workspace_path(p, id, WORKSPACE_SHM);
        return *ret ? 0 : -ENOMEM;
}

/* ---- sandboxd-workspace's calls ------------------------------------------------------ */

static int on_close_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        WorkspacePool *p = userdata;

        if (p->pending == 0)
                p->client = varlink_client_unref(p->client);
        return 0;
}

/* The pool's connection, made (again) if it is not up. */
static int pool_client(WorkspacePool *p, VarlinkClient **ret) {
        int r;

        if (p->client && !varlink_client_is_connected(p->client))
                p->client = varlink_client_unref(p->client);
        if (!p->client) {
                r = varlink_client_connect_address(&p->client, p->socket_path);
                if (r >= 0)
                        r = varlink_client_attach_event(p->client, p->event, 0);
                if (r < 0) {
                        p->client = varlink_client_unref(p->client);
                        return log_error_errno(r, "Failed to connect to sandboxd-workspace at %s: %m",
                                               p->socket_path);
                }
        }
        *ret = p->client;
        return 0;
}

static int reply_to_errno(json_object *parameters, const char *error) {
        json_object *v;

        if (!error)
                return 0;
        if (streq(error, WORKSPACE_ERROR_FAILED) && parameters &&
            json_object_object_get_ex(parameters, "errno", &v) && json_object_get_int(v) > 0)
                return -json_object_get_int(v);
        if (streq(error, VARLINK_ERROR_PERMISSION_DENIED))
                return -EPERM;
        if (streq(error, VARLINK_ERROR_INVALID_PARAMETER))
                return -EINVAL;
        if (streq(error, VARLINK_ERROR_DISCONNECTED))
                return -ECONNRESET;
        return -EIO;
}

static int on_reply(VarlinkClient *client, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                    void *userdata) {
        WorkspaceCall *c = userdata;
        WorkspacePool *p = c->pool;
        int r = reply_to_errno(parameters, error);

        if (!p) {
                free(c);  /* the pool is being freed (and c's connection with it) */
                return 0;
        }
        LIST_REMOVE(p->calls, c);
        if (!c->client && --p->pending == 0 && p->client) {
                (void) sd_event_source_set_time_relative(p->close_timer, WORKSPACE_CONNECTION_IDLE_USEC);
                (void) sd_event_source_set_enabled(p->close_timer, SD_EVENT_ONESHOT);
        }
        if (c->cancelled) {
                /* Its sandbox is gone meanwhile: what was made for it goes too. */
                if (r >= 0)
                        (void) workspace_remove(p, c->id);
        } else if (c->cb)
                c->cb(r, c->userdata);
        else if (r < 0 && r != -ENOENT)
                /* A removal's (no callback): nobody waits for it. */
                log_warning_errno(r, "sandboxd-workspace failed to remove workspace %s, it is removed at the next "
                                  "start: %m", c->id);
        varlink_client_unref(c->client);  /* safe here: the client holds itself while it calls us */
        free(c);
        return 0;
}

/* Calls method with parameters (taken); cb(0 or -errno) when answered, unless cancelled
 * (cb NULL: a failure is logged). own_connection: on a connection of its own, for a call
 * answered late. A call outstanding when the pool is freed (sandboxd stops) is dropped:
 * a removal's is done at the next start (workspace_remove_orphans()). */
static int workspace_call(WorkspacePool *p, const char *method, json_object *parameters, const char *id,
                          bool own_connection, workspace_callback_t cb, void *userdata, WorkspaceCall **ret) {
        _cleanup_json_ json_object *params = parameters;
        VarlinkClient *client = NULL;
        WorkspaceCall *c;
        int r;

        if (!params || strlen(id) >= WORKSPACE_NAME_MAX)
                return -ENOMEM;
        if (!p->close_timer) {
                r = sd_event_add_time(p->event, &p->close_timer, CLOCK_MONOTONIC, 0, 0, on_close_timer, p);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_enabled(p->close_timer, SD_EVENT_OFF);
        }
        c = calloc(1, sizeof(WorkspaceCall));
        if (!c)
                return -ENOMEM;
        *c = (WorkspaceCall) { .pool = p, .cb = cb, .userdata = userdata };
        strcpy(c->id, id);
        if (own_connection) {
                r = varlink_client_connect_address(&c->client, p->socket_path);
                if (r >= 0)
                        r = varlink_client_attach_event(c->client, p->event, 0);
                if (r < 0)
                        log_error_errno(r, "Failed to connect to sandboxd-workspace at %s: %m", p->socket_path);
                client = c->client;
        } else
                r = pool_client(p, &client);
        if (r >= 0)
                r = varlink_client_call_async(client, method, params, 0, on_reply, c);
        if (r < 0) {
                varlink_client_unref(c->client);
                free(c);
                return r;
        }
        LIST_PREPEND(p->calls, c);
        if (!own_connection) {
                p->pending++;
                (void) sd_event_source_set_enabled(p->close_timer, SD_EVENT_OFF);
        }
        if (ret)
                *ret = c;
        return 0;
}

void workspace_call_cancel(WorkspaceCall *c) {
        if (c)
                c->cancelled = true;
}

/* A call's parameters (NULL if out of memory); uid, from_uid -1 and max_bytes 0: absent. */
static json_object *params_new(const char *id, const char *from, int64_t uid, int64_t from_uid, uint64_t max_bytes) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o || json_add(o, "id", json_object_new_string(id)) < 0 ||
            (from && json_add(o, "from", json_object_new_string(from)) < 0) ||
            (uid >= 0 && json_add(o, "uid", json_object_new_int64(uid)) < 0) ||
            (from_uid >= 0 && json_add(o, "fromUid", json_object_new_int64(from_uid)) < 0) ||
            (max_bytes > 0 && json_add(o, "maxBytes", json_object_new_int64((int64_t) MIN(max_bytes, (uint64_t) INT64_MAX))) < 0))
                return NULL;
        return TAKE_PTR(o);
}

int workspace_create(WorkspacePool *p, const char *id, uid_t uid, uint64_t max_bytes, workspace_callback_t cb,
                     void *userdata, WorkspaceCall **ret_call) {
        return workspace_call(p, WORKSPACE_METHOD_CREATE, params_new(id, NULL, uid, -1, max_bytes), id, false, cb,
                              userdata, ret_call);
}

int workspace_clone(WorkspacePool *p, const char *from_id, const char *id, uid_t from_uid, uid_t uid,
                    uint64_t max_bytes, workspace_callback_t cb, void *userdata, WorkspaceCall **ret_call) {
        return workspace_call(p, WORKSPACE_METHOD_CLONE, params_new(id, from_id, uid, from_uid, max_bytes), id, true,
                              cb, userdata, ret_call);
}

/* Asks sandboxd-workspace to delete the subvolume DIR/name (a removal's) and its qgroup. */
static int workspace_delete_subvolume(WorkspacePool *p, const char *name) {
        return workspace_call(p, WORKSPACE_METHOD_REMOVE, params_new(name, NULL, -1, -1, 0), name, false, NULL, NULL,
                              NULL);
}

/* Asks sandboxd-workspace to remove DIR/id/trash, an old shm/ (nobody waits for it). */
static int workspace_remove_trash(WorkspacePool *p, const char *id, const char *trash) {
        _cleanup_json_ json_object *o = params_new(id, NULL, -1, -1, 0);

        if (!o || json_add(o, "trash", json_object_new_string(trash)) < 0)
                return -ENOMEM;
        return workspace_call(p, WORKSPACE_METHOD_REMOVE_TRASH, TAKE_PTR(o), id, false, NULL, NULL, NULL);
}

int workspace_remove(WorkspacePool *p, const char *id) {
        char name[sizeof(WORKSPACE_REMOVING_PREFIX) + WORKSPACE_NAME_MAX];
        int r;

        /* Its record (a stopped sandbox's) first: without it, nothing is to come back. */
        snprintf(name, sizeof(name), "%s.json", id);
        if (unlinkat(p->dir_fd, name, 0) < 0 && errno != ENOENT)
                log_warning_errno(errno, "Failed to remove %s/%s: %m", p->dir, name);
        /* Out of the way first, here (the pool is root's, as we are: no privilege needed):
         * the id may be used again (Wake) before the deletion is done. */
        snprintf(name, sizeof(name), WORKSPACE_REMOVING_PREFIX "%s-%u-%d", id, p->removals++, (int) getpid());
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
        unsigned n = 0, trash = 0;

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
                if (startswith_str(de->d_name, WORKSPACE_REMOVING_PREFIX)) {
                        /* A removal that sandboxd's end interrupted. */
                        if (workspace_delete_subvolume(p, de->d_name) >= 0)
                                n++;
                        continue;
                }
                if (is_live(de->d_name, userdata)) {
                        /* Its old /dev/shm a crash or a reboot left, still counting to its DiskMax. */
                        _cleanup_close_ int ws = openat(p->dir_fd, de->d_name,
                                                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (ws >= 0)
                                trash += workspace_collect_trash(p, ws, de->d_name);
                        continue;
                }
                if (workspace_remove(p, de->d_name) > 0)
                        n++;
        }
        closedir(d);
        if (n > 0)
                log_info("Removing %u workspace(s) of sandboxes that are gone.", n);
        if (trash > 0)
                log_info("Removing %u old /dev/shm of sandboxes (left by a crash or a reboot).", trash);
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
        return btrfs_quota_check(fd, qgroups);
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
        if (!btrfs_is_dir_fd(fd)) {
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
