/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * sandboxd-workspace(8): what of the workspaces on disk needs a privilege, done for
 * sandboxd, so that sandboxd.service holds none of CAP_SYS_ADMIN (a qgroup's limit, a
 * subvolume's deletion, a qgroup's destroy), CAP_CHOWN (work/ and tmp/ given to the
 * sandbox's uid) and CAP_DAC_READ_SEARCH (a fork's snapshot walked to give it to the fork's
 * uid), CAP_DAC_OVERRIDE (an old /dev/shm removed, directories the sandbox made unwritable
 * included). Started by its socket (sandboxd-workspace.socket, root's only), it answers
 * io.sandboxd.Workspace to the process of sandboxd.service and to no other, takes no path
 * (workspace-request.c), and exits once nothing has used it for a while.
 * docs/WORKSPACES.md, "Capabilities".
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/btrfs.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <systemd/sd-login.h>

#include "btrfs-util.h"
#include "conf-parser.h"
#include "config.h"
#include "fd-util.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "sandbox-api.h"
#include "spawn-util.h"
#include "varlink.h"
#include "workspace-request.h"

#define IDLE_EXIT_USEC_DEFAULT (30ULL * 1000000ULL)
#define IDLE_CHECK_USEC (1ULL * 1000000ULL)

typedef struct Helper {
        sd_event *event;
        VarlinkServer *server;
        char *pool_dir;
        int pool_fd;
        char qgroups_dir[128];
        const char *btrfs_path;
        const char *peer_unit;
        uid_t uid_base;
        unsigned children;    /* clones and removals under way */
        unsigned removals;    /* names the next removal's rename */
        struct TrashJob *trash_jobs;  /* old shm/s being removed, each by a child */
        uint64_t idle_exit_usec;
        uint64_t idle_since;
        sd_event_source *idle_timer;
} Helper;

/* ---- the peer ---------------------------------------------------------------------- */

static pid_t pidfd_pid(int pidfd) {
        char path[64], buf[1024];
        ssize_t n;
        const char *p;

        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
        n = read_small_file_at(AT_FDCWD, path, buf, sizeof(buf) - 1);
        if (n <= 0)
                return -1;
        buf[n] = 0;
        p = strstr(buf, "\nPid:");
        return p ? (pid_t) strtol(p + 5, NULL, 10) : -1;
}

/* Whether the caller is sandboxd: root, and its process in the unit peer_unit (its
 * cgroup, as systemd names units by cgroup: sd_pid_get_unit()). The pidfd the kernel gave
 * at connect time pins the process: its pid is looked up, and the process must still be
 * alive after its cgroup was read (a pid cannot have been reused meanwhile). Checked once
 * per connection. */
static int peer_check(Helper *h, VarlinkCall *call) {
        _cleanup_free_ char *unit = NULL;
        struct ucred uc;
        pid_t pid;
        int pidfd, r;

        if (varlink_call_get_connection_tag(call))
                return 0;
        r = varlink_call_get_peer_ucred(call, &uc);
        if (r < 0)
                return r;
        if (uc.uid != 0)
                return -EPERM;
        pid = uc.pid;
        pidfd = varlink_call_get_peer_pidfd(call);
        if (pidfd >= 0)
                pid = pidfd_pid(pidfd);
        if (pid <= 0)
                return -EPERM;  /* not in our pid namespace, or gone */
        r = sd_pid_get_unit(pid, &unit);
        if (r < 0 || !streq(unit, h->peer_unit))
                return -EPERM;
        if (pidfd >= 0) {
                struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
                if (poll(&pfd, 1, 0) != 0)
                        return -EPERM;  /* exited: the cgroup read may be another process's */
        }
        return varlink_call_set_connection_tag(call, unit);
}

static int reply_errno(VarlinkCall *call, int error) {
        _cleanup_json_ json_object *p = json_object_new_object();

        if (!p || json_object_object_add(p, "errno", json_object_new_int(abs(error))) < 0)
                return -ENOMEM;
        return varlink_call_error(call, WORKSPACE_ERROR_FAILED, p);
}

/* The call's parameters checked, its caller too: 1 to go on, 0 if answered (refused). */
static int request_begin(Helper *h, VarlinkCall *call, WorkspaceMethod m, json_object *parameters,
                         WorkspaceRequest *ret) {
        const char *bad = NULL;
        int r;

        r = peer_check(h, call);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                struct ucred uc = {};
                (void) varlink_call_get_peer_ucred(call, &uc);
                log_warning("Refused %s of pid %d (uid %u): only %s may call.", varlink_call_get_method(call),
                            (int) uc.pid, (unsigned) uc.uid, h->peer_unit);
                r = varlink_call_error(call, VARLINK_ERROR_PERMISSION_DENIED, NULL);
                return r < 0 ? r : 0;
        }
        if (workspace_request_parse(m, parameters, h->uid_base, ret, &bad) < 0) {
                log_warning("Refused %s: parameter %s is not valid.", varlink_call_get_method(call), bad);
                r = varlink_call_error_invalid_parameter(call, bad);
                return r < 0 ? r : 0;
        }
        return 1;
}

/* ---- children: clones and removals ------------------------------------------------- */

typedef struct ChildArgs {
        char *argv[12];
} ChildArgs;

static int child_exec(void *userdata) {
        ChildArgs *a = userdata;
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);

        if (null >= 0) {
                (void) dup2(null, STDIN_FILENO);
                (void) dup2(null, STDOUT_FILENO);
        }
        execv(a->argv[0], a->argv);
        return -errno;
}

typedef void (*child_done_t)(Helper *h, int error, void *userdata);

typedef struct Child {
        Helper *h;
        child_done_t done;
        void *userdata;
} Child;

static int on_child_exited(sd_event_source *source, const siginfo_t *si, void *userdata) {
        Child *c = userdata;
        Helper *h = c->h;

        h->children--;
        if (c->done)
                c->done(h, si->si_code == CLD_EXITED && si->si_status == 0 ? 0 : -EIO, c->userdata);
        sd_event_source_disable_unref(source);
        return 0;
}

/* Runs argv in a child of ours, done(0 or -EIO) when it exits. The service waits for its
 * children before it exits when idle: its end would kill them (the unit's cgroup). */
static int child_run(Helper *h, char **argv, child_done_t done, void *userdata) {
        _cleanup_close_ int pidfd = -EBADF;
        ChildArgs a = {};
        sd_event_source *source = NULL;
        Child *c;
        pid_t pid;
        int r;

        for (size_t i = 0; argv[i] && i < ELEMENTSOF(a.argv) - 1; i++)
                a.argv[i] = argv[i];
        c = calloc(1, sizeof(Child));
        if (!c)
                return -ENOMEM;
        *c = (Child) { .h = h, .done = done, .userdata = userdata };
        r = spawn_vfork(0, child_exec, &a, &pid, &pidfd);
        if (r < 0) {
                free(c);
                return r;
        }
        r = sd_event_add_child_pidfd(h->event, &source, pidfd, WEXITED, on_child_exited, c);
        if (r < 0) {
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                free(c);
                return r;
        }
        TAKE_FD(pidfd);
        (void) sd_event_source_set_child_pidfd_own(source, true);
        (void) sd_event_source_set_destroy_callback(source, free);
        h->children++;
        return 0;
}

/* The subvolume deleted, then, once the kernel's cleaner has dropped its tree, its qgroup
 * destroyed: a qgroup outlives its subvolume (on the kernels that do not remove it
 * themselves), and thousands of them would slow every quota rescan and commit. The
 * destroy's failure is no error: a kernel that removes the qgroup itself may be first.
 * Quotas a deletion left inconsistent are rescanned. */
#define REMOVE_SCRIPT                                                                          \
        "\"$0\" -q subvolume delete --commit-after -- \"$1\" >/dev/null || exit; "                \
        "[ \"$3\" = 0 ] && exit 0; "                                                            \
        "\"$0\" -q subvolume sync \"$2\" \"$3\" >/dev/null 2>&1; "                                 \
        "\"$0\" -q qgroup destroy \"0/$3\" \"$2\" >/dev/null 2>&1; "                                 \
        "[ \"$(cat \"$4\")\" != 1 ] || exec \"$0\" -q quota rescan \"$2\""

static int delete_subvolume(Helper *h, const char *name) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        char id[32], inconsistent[sizeof(h->qgroups_dir) + 16];
        uint64_t subvol = 0;

        if (asprintf(&path, "%s/%s", h->pool_dir, name) < 0)
                return -ENOMEM;
        fd = openat(h->pool_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (btrfs_subvol_id(fd, &subvol) < 0)
                subvol = 0;  /* its qgroup is not known: the subvolume goes all the same */
        snprintf(id, sizeof(id), "%" PRIu64, subvol);
        snprintf(inconsistent, sizeof(inconsistent), "%s/inconsistent", h->qgroups_dir);
        return child_run(h, (char *[]) { (char *) "/bin/sh", (char *) "-c", (char *) REMOVE_SCRIPT,
                                         (char *) h->btrfs_path, path, h->pool_dir, id, inconsistent, NULL },
                         NULL, NULL);
}

/* name (an id or a removal's name) out of the way if it is an id, then deleted. */
static int remove_workspace(Helper *h, const char *name) {
        char removing[sizeof(WORKSPACE_REMOVING_PREFIX) + WORKSPACE_NAME_MAX];

        if (workspace_id_is_valid(name)) {
                snprintf(removing, sizeof(removing), WORKSPACE_REMOVING_PREFIX "%s-%u-%d", name, h->removals++,
                         (int) getpid());
                if (renameat(h->pool_fd, name, h->pool_fd, removing) < 0)
                        return -errno;
                name = removing;
        }
        return delete_subvolume(h, name);
}

/* ---- a workspace's old /dev/shm --------------------------------------------------- */

/* One old shm/ being removed: asked for again (sandboxd restarted and sweeps, the sandbox
 * starts again meanwhile), it is not removed twice at once. Our children die with us (the
 * unit's cgroup), so what is not in this list is being removed by no one. */
typedef struct TrashJob {
        char id[WORKSPACE_NAME_MAX];
        char trash[WORKSPACE_NAME_MAX];
        struct TrashJob *next;
} TrashJob;

static void trash_done(Helper *h, int error, void *userdata) {
        TrashJob *j = userdata;

        if (error < 0)
                log_warning("Removing %s/%s/%s did not finish (rm failed; what is left is removed when the "
                            "sandbox starts again or sandboxd restarts).", h->pool_dir, j->id, j->trash);
        for (TrashJob **p = &h->trash_jobs; *p; p = &(*p)->next)
                if (*p == j) {
                        *p = j->next;
                        break;
                }
        free(j);
}

/* DIR/id/trash removed by rm -r in a child: the workspace's root is root's (0711) and only
 * root writes there, so no component of the path is the sandbox's; inside, rm follows no
 * link and enters no other file system (--one-file-system), and CAP_DAC_OVERRIDE lets it
 * into directories the sandbox made unreadable or unwritable. Nothing of the sandbox can
 * reach the trash meanwhile: it is not bound into the sandbox, whose processes were all
 * gone when sandboxd renamed it. */
static int remove_trash(Helper *h, const char *id, const char *trash) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        TrashJob *j;
        int r;

        for (j = h->trash_jobs; j; j = j->next)
                if (streq(j->id, id) && streq(j->trash, trash))
                        return 0;  /* under way */
        fd = openat(h->pool_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstatat(fd, trash, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        if (asprintf(&path, "%s/%s/%s", h->pool_dir, id, trash) < 0)
                return -ENOMEM;
        j = calloc(1, sizeof(TrashJob));
        if (!j)
                return -ENOMEM;
        strcpy(j->id, id);
        strcpy(j->trash, trash);
        r = child_run(h, (char *[]) { (char *) "/bin/sh", (char *) "-c",
                                      (char *) "exec rm -r -f --one-file-system -- \"$0\"", path, NULL },
                      trash_done, j);
        if (r < 0) {
                free(j);
                return r;
        }
        j->next = h->trash_jobs;
        h->trash_jobs = j;
        return 0;
}

/* ---- the methods ------------------------------------------------------------------- */

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

static int limit(Helper *h, const char *id, uint64_t max_bytes) {
        _cleanup_close_ int fd = openat(h->pool_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        uint64_t subvol = 0;
        int r;

        if (fd < 0)
                return -errno;
        r = btrfs_subvol_id(fd, &subvol);
        return r < 0 ? r : btrfs_qgroup_limit(fd, subvol, max_bytes);
}

static int answer(VarlinkCall *call, int r) {
        return r < 0 ? reply_errno(call, r) : varlink_call_reply(call, NULL);
}

static int method_create(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        Helper *h = userdata;
        struct btrfs_ioctl_vol_args args = {};
        _cleanup_close_ int fd = -EBADF;
        WorkspaceRequest q;
        uint64_t subvol = 0;
        int r;

        r = request_begin(h, call, WORKSPACE_CREATE, parameters, &q);
        if (r <= 0)
                return r;
        strcpy(args.name, q.id);
        if (ioctl(h->pool_fd, BTRFS_IOC_SUBVOL_CREATE, &args) < 0)
                return answer(call, -errno);
        fd = openat(h->pool_fd, q.id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        r = fd < 0 ? -errno : btrfs_subvol_id(fd, &subvol);
        if (r >= 0)
                r = btrfs_qgroup_limit(fd, subvol, q.max_bytes);
        if (r >= 0)
                r = workspace_fill(fd, q.uid);
        if (r < 0) {
                log_error_errno(r, "Failed to create workspace %s/%s: %m", h->pool_dir, q.id);
                (void) remove_workspace(h, q.id);
        }
        return answer(call, r);
}

static int method_remove(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        Helper *h = userdata;
        WorkspaceRequest q;
        int r;

        r = request_begin(h, call, WORKSPACE_REMOVE, parameters, &q);
        if (r <= 0)
                return r;
        r = remove_workspace(h, q.id);
        if (r < 0 && r != -ENOENT)
                log_error_errno(r, "Failed to start removing workspace %s/%s: %m", h->pool_dir, q.id);
        return answer(call, r);
}

static int method_remove_trash(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        Helper *h = userdata;
        WorkspaceRequest q;
        int r;

        r = request_begin(h, call, WORKSPACE_REMOVE_TRASH, parameters, &q);
        if (r <= 0)
                return r;
        r = remove_trash(h, q.id, q.trash);
        if (r < 0 && r != -ENOENT)
                log_error_errno(r, "Failed to start removing %s/%s/%s: %m", h->pool_dir, q.id, q.trash);
        return answer(call, r);
}

typedef struct CloneJob {
        VarlinkCall *call;
        WorkspaceRequest q;
} CloneJob;

static void clone_done(Helper *h, int error, void *userdata) {
        CloneJob *j = userdata;

        if (error >= 0)
                error = limit(h, j->q.id, j->q.max_bytes);
        if (error < 0)
                log_error_errno(error, "Failed to snapshot workspace %s/%s as %s: %m", h->pool_dir, j->q.from,
                                j->q.id);
        /* The caller may have gone meanwhile: then its workspace is an orphan, removed by
         * sandboxd at its next start. */
        (void) answer(j->call, error);
        varlink_call_unref(j->call);
        free(j);
}

static int method_clone(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        _cleanup_free_ char *script = NULL, *from = NULL, *to = NULL;
        Helper *h = userdata;
        char from_owner[32], to_owner[32];
        WorkspaceRequest q;
        CloneJob *j;
        int r;

        r = request_begin(h, call, WORKSPACE_CLONE, parameters, &q);
        if (r <= 0)
                return r;
        if (faccessat(h->pool_fd, q.from, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                return answer(call, -errno);
        if (asprintf(&from, "%s/%s", h->pool_dir, q.from) < 0 || asprintf(&to, "%s/%s", h->pool_dir, q.id) < 0)
                return -ENOMEM;
        snprintf(from_owner, sizeof(from_owner), "%u:%u", (unsigned) q.from_uid, (unsigned) q.from_uid);
        snprintf(to_owner, sizeof(to_owner), "%u:%u", (unsigned) q.uid, (unsigned) q.uid);
        j = calloc(1, sizeof(CloneJob));
        if (!j)
                return -ENOMEM;
        j->q = q;
        /* -h -P: links are changed themselves, never followed; --from: only what the source
         * sandbox owned (all of it, as nothing else can write there). shm/ (root's itself)
         * too, so that the fork's agent can empty it as it starts: a workspace made by an
         * older sandboxd has none (sandboxd makes it as the sandbox starts). */
        r = child_run(h, (char *[]) { (char *) "/bin/sh", (char *) "-c",
                                      (char *) "\"$0\" -q subvolume snapshot -- \"$1\" \"$2\" >/dev/null && "
                                               "chown -h -R -P --from=\"$3\" -- \"$4\" \"$2/work\" \"$2/tmp\" && "
                                               "{ ! [ -d \"$2/shm\" ] || "
                                               "chown -h -R -P --from=\"$3\" -- \"$4\" \"$2/shm\"; }",
                                      (char *) h->btrfs_path, from, to, from_owner, to_owner, NULL },
                      clone_done, j);
        if (r < 0) {
                free(j);
                return answer(call, r);
        }
        j->call = varlink_call_ref(call);
        return 0;
}

/* ---- idle exit --------------------------------------------------------------------- */

static int on_idle_check(sd_event_source *source, uint64_t usec, void *userdata) {
        Helper *h = userdata;

        if (varlink_server_n_connections(h->server) > 0 || h->children > 0)
                h->idle_since = usec;
        else if (usec - h->idle_since >= h->idle_exit_usec) {
                log_debug("Idle for %" PRIu64 " s: exiting (the socket starts the service again).",
                          h->idle_exit_usec / 1000000);
                return sd_event_exit(h->event, 0);
        }
        return sd_event_source_set_time(source, usec + MIN(h->idle_exit_usec, IDLE_CHECK_USEC));
}

/* ---- main -------------------------------------------------------------------------- */

typedef struct Settings {
        char *directory;
} Settings;

static const ConfigTableItem conf_table[] = {
        { "Workspaces", "Directory", config_parse_path, offsetof(Settings, directory), "an absolute path" },
};

static void help(void) {
        printf("sandboxd-workspace [OPTIONS]\n\n"
               "sandboxd's privileged workspace operations (io.sandboxd.Workspace), on the socket\n"
               "systemd passes (sandboxd-workspace.socket).\n\n"
               "  -h --help                Show this help\n"
               "     --config=PATH         sandboxd.conf (default %s): [Workspaces] Directory=\n"
               "     --workspace-dir=DIR   The pool, instead of sandboxd.conf's (default %s)\n"
               "     --peer-unit=UNIT      The only unit whose process may call (default sandboxd.service)\n"
               "     --exit-idle=SECONDS   Exit after so long without a connection or child (default %llu)\n",
               SANDBOX_CONF_FILE, SANDBOX_WORKSPACE_DIR, IDLE_EXIT_USEC_DEFAULT / 1000000ULL);
}

int main(int argc, char *argv[]) {
        enum { ARG_CONFIG = 0x100, ARG_WORKSPACE_DIR, ARG_PEER_UNIT, ARG_EXIT_IDLE };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "config", required_argument, NULL, ARG_CONFIG },
                { "workspace-dir", required_argument, NULL, ARG_WORKSPACE_DIR },
                { "peer-unit", required_argument, NULL, ARG_PEER_UNIT },
                { "exit-idle", required_argument, NULL, ARG_EXIT_IDLE },
                {}
        };
        _cleanup_free_ char *dropins = NULL;
        const char *config = SANDBOX_CONF_FILE, *dir_arg = NULL;
        Settings settings = {};
        VarlinkLimits limits = VARLINK_LIMITS_DEFAULT;
        Helper h = { .pool_fd = -EBADF, .btrfs_path = BTRFS_PATH, .peer_unit = "sandboxd.service",
                     .uid_base = SANDBOX_UID_BASE_DEFAULT, .idle_exit_usec = IDLE_EXIT_USEC_DEFAULT };
        int c, n, r, level;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_CONFIG:
                        config = optarg;
                        break;
                case ARG_WORKSPACE_DIR:
                        if (optarg[0] != '/') {
                                log_error("--workspace-dir= needs an absolute path.");
                                return 1;
                        }
                        dir_arg = optarg;
                        break;
                case ARG_PEER_UNIT:
                        h.peer_unit = optarg;
                        break;
                case ARG_EXIT_IDLE: {
                        char *end;
                        unsigned long long sec = strtoull(optarg, &end, 10);
                        if (end == optarg || *end || sec == 0 || sec > 86400) {
                                log_error("--exit-idle= needs seconds, 1…86400.");
                                return 1;
                        }
                        h.idle_exit_usec = sec * 1000000ULL;
                        break;
                }
                default:
                        return 1;
                }
        if (optind < argc) {
                log_error("No arguments expected.");
                return 1;
        }

        /* sandboxd.conf is sandboxd's: of its sections only [Workspaces] Directory= is ours,
         * every other key would be warned about as unknown. */
        if (asprintf(&dropins, "%s.d", config) < 0)
                return 1;
        level = log_get_max_level();
        log_set_max_level(LOG_ERR);
        r = config_parse_with_dropins(config, dropins, conf_table, ELEMENTSOF(conf_table), &settings);
        log_set_max_level(level);
        if (r < 0 && r != -ENOENT)
                return 1;
        h.pool_dir = strdup(dir_arg ?: settings.directory ?: SANDBOX_WORKSPACE_DIR);
        free(settings.directory);
        if (!h.pool_dir)
                return 1;

        h.pool_fd = open(h.pool_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (h.pool_fd < 0) {
                log_error_errno(errno, "Failed to open the workspace pool %s: %m", h.pool_dir);
                return 1;
        }
        if (!btrfs_is_dir_fd(h.pool_fd) || btrfs_qgroups_dir(h.pool_fd, h.qgroups_dir, sizeof(h.qgroups_dir)) < 0) {
                log_error("%s is not a btrfs file system with quotas (sandboxd-workspaces.service makes it one).",
                          h.pool_dir);
                return 1;
        }
        /* A pool left inconsistent (a deletion, a crash) holds no limit until rescanned. */
        (void) btrfs_quota_check(h.pool_fd, h.qgroups_dir);

        n = sd_listen_fds(true);
        if (n != 1) {
                log_error("Expected one socket from systemd (sandboxd-workspace.socket), got %d.", n);
                return 1;
        }
        (void) signal(SIGPIPE, SIG_IGN);
        /* sd-event watches the children (clones, removals) only with SIGCHLD blocked. */
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        (void) sigprocmask(SIG_BLOCK, &mask, NULL);
        if (sd_event_default(&h.event) < 0 || varlink_server_new(&h.server) < 0)
                return 1;
        (void) sd_event_set_signal_exit(h.event, true);
        /* Every connection is root's (sandboxd's): one per fork under way, besides one. */
        limits.connections_per_uid_max = limits.connections_max;
        r = varlink_server_set_limits(h.server, &limits);
        if (r >= 0)
                r = varlink_server_set_info(h.server, "sandboxd", "sandboxd-workspace", PACKAGE_VERSION,
                                            "man:sandboxd-workspace(8)");
        if (r >= 0)
                r = varlink_server_add_interface(h.server, workspace_interface_idl);
        if (r >= 0)
                r = varlink_server_bind_method(h.server, WORKSPACE_METHOD_CREATE, method_create, &h);
        if (r >= 0)
                r = varlink_server_bind_method(h.server, WORKSPACE_METHOD_CLONE, method_clone, &h);
        if (r >= 0)
                r = varlink_server_bind_method(h.server, WORKSPACE_METHOD_REMOVE, method_remove, &h);
        if (r >= 0)
                r = varlink_server_bind_method(h.server, WORKSPACE_METHOD_REMOVE_TRASH, method_remove_trash, &h);
        if (r >= 0)
                r = varlink_server_listen_fd(h.server, SD_LISTEN_FDS_START);
        if (r >= 0)
                r = varlink_server_attach_event(h.server, h.event, 0);
        if (r >= 0) {
                uint64_t now = 0;
                (void) sd_event_now(h.event, CLOCK_MONOTONIC, &now);
                h.idle_since = now;
                r = sd_event_add_time(h.event, &h.idle_timer, CLOCK_MONOTONIC,
                                      now + MIN(h.idle_exit_usec, IDLE_CHECK_USEC), 0, on_idle_check, &h);
        }
        if (r < 0) {
                log_error_errno(r, "Failed to set up the varlink server: %m");
                return 1;
        }
        (void) sd_event_source_set_enabled(h.idle_timer, SD_EVENT_ON);
        (void) sd_notify(false, "READY=1");
        r = sd_event_loop(h.event);

        while (h.trash_jobs) {
                TrashJob *j = h.trash_jobs;
                h.trash_jobs = j->next;
                free(j);
        }
        sd_event_source_disable_unref(h.idle_timer);
        varlink_server_unref(h.server);
        sd_event_unref(h.event);
        safe_close(h.pool_fd);
        free(h.pool_dir);
        return r < 0 ? 1 : 0;
}
