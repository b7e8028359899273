/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "agent-protocol.h"
#include "cgroup.h"
#include "etc-tree.h"
#include "fd-util.h"
#include "json-util.h"
#include "log.h"
#include "mount-renew.h"
#include "options.h"
#include "payload-backend.h"
#include "payload-bwrap.h"
#include "sandbox-persist.h"
#include "sandbox-secrets.h"
#include "strv.h"
#include "template.h"

#include <json-c/json.h>
#include <syslog.h>

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define STRLEN(s) (sizeof(s) - 1)

/* Where the agent appears inside the sandbox. */
#define SANDBOX_AGENT_INSIDE "/run/sandbox-init"

/* The modes of the writable tmpfs mounts, as made and as renewed (bwrap_renew()); /tmp's
 * is bwrap's default for --tmpfs. */
#define WORKDIR_MODE 0700
#define TMP_MODE 0755
#define SHM_MODE 01777

int bwrap_build_argv(const PayloadParams *p, char ***ret) {
        _cleanup_strv_free_ char **a = NULL;
        char disk[32], shm[32];
        int r = 0;

        snprintf(disk, sizeof(disk), "%" PRIu64, p->disk_max);
        snprintf(shm, sizeof(shm), "%" PRIu64, p->template->shm_max ?: (uint64_t) TEMPLATE_SHM_DEFAULT);

#define ARG(s)                                                  \
        do {                                                    \
                if (r >= 0)                                     \
                        r = strv_extend(&a, (s));               \
        } while (0)

        ARG(p->bwrap_path);
        /* Every namespace. No more user namespaces inside: the seccomp policy refuses
         * every way to one (unshare, clone, clone3, setns; foreign ABIs killed), and is
         * never left out. Not bwrap's --disable-userns besides: it nests a second user
         * namespace in every sandbox and looks up /proc/sys/user/max_user_namespaces, one
         * hash chain holding every user namespace's entry, so each sandbox made cost more
         * with every sandbox present (docs/ARCHITECTURE.md, "Many sandboxes"). */
        ARG("--unshare-all");
        ARG("--unshare-user");
        ARG("--uid"); ARG(STRINGIFY(SANDBOX_UID));
        ARG("--gid"); ARG(STRINGIFY(SANDBOX_GID));
        ARG("--hostname"); ARG(SANDBOX_HOSTNAME);
        ARG("--cap-drop"); ARG("ALL");
        ARG("--new-session");
        /* Not --die-with-parent: the agent outlives bwrap's monitor, which sandboxd kills
         * once the sandbox is ready (bwrap_running()). What the flag did before that,
         * killing an agent whose monitor was killed, the scope does (docs/ARCHITECTURE.md,
         * "Many sandboxes"). */
        ARG("--as-pid-1");
        ARG("--clearenv");
        /* Held after its setup until the daemon has put it into its scope. */
        ARG("--block-fd"); ARG(STRINGIFY(PAYLOAD_BLOCK_FD));
        ARG("--info-fd"); ARG(STRINGIFY(PAYLOAD_INFO_FD));
        /* Never without the policy: it is what refuses user namespaces (above). */
        if (p->seccomp_fd < 0)
                return -EINVAL;
        ARG("--seccomp"); ARG(STRINGIFY(PAYLOAD_SECCOMP_FD));

        /* Its own /etc, before the template's binds into it (the tree has their mount
         * points), with its own machine id over the tree's empty one. */
        if (p->etc_dir) {
                ARG("--ro-bind"); ARG(p->etc_dir); ARG("/etc");
                if (p->machine_id) {
                        ARG("--ro-bind-data"); ARG(STRINGIFY(PAYLOAD_MACHINE_ID_FD)); ARG("/etc/machine-id");
                }
        }
        for (char * const *b = p->template->ro_binds; b && *b; b++) {
                ARG("--ro-bind-try"); ARG(*b); ARG(*b);
        }
        ARG("--proc"); ARG("/proc");
        for (char * const *m = p->proc_masks; m && *m; m++) {
                ARG("--ro-bind"); ARG("/dev/null"); ARG(*m);
        }
        /* The same empty directory bound read-only over each: a tmpfs each would be a
         * superblock each, and every superblock is a memory-cgroup-aware shrinker for which
         * the kernel keeps state in every memory cgroup, each sandbox's scope included: the
         * kernel memory of one more sandbox grows with the superblocks of all the others
         * (issue 17; docs/ARCHITECTURE.md, "Many sandboxes"). */
        for (char * const *m = p->proc_mask_dirs; m && *m; m++) {
                if (p->empty_dir) {
                        ARG("--ro-bind"); ARG(p->empty_dir); ARG(*m);
                } else {
                        ARG("--tmpfs"); ARG(*m);
                        ARG("--remount-ro"); ARG(*m);
                }
        }
        /* /dev read-only: bwrap cannot size the tmpfs of --dev, so the only place to write
         * there is /dev/shm, bounded like /tmp: on disk, the workspace's shm/ (within its
         * quota, and no superblock of its own: see the proc masks above), else a tmpfs.
         * (The --remount-ro of /dev is of that mount only, not of the one on /dev/shm.) */
        ARG("--dev"); ARG("/dev");
        if (p->shm_dir) {
                ARG("--bind"); ARG(p->shm_dir); ARG("/dev/shm");
        } else {
                ARG("--size"); ARG(shm); ARG("--perms"); ARG("1777"); ARG("--tmpfs"); ARG("/dev/shm"); /* SHM_MODE */
        }
        ARG("--remount-ro"); ARG("/dev");
        if (p->workspace_dir) {
                /* On disk, within its quota: the workspace's own directories (its root
                 * stays out of reach, as root's). */
                _cleanup_free_ char *work = NULL, *tmp = NULL;
                if (asprintf(&work, "%s/work", p->workspace_dir) < 0 || asprintf(&tmp, "%s/tmp", p->workspace_dir) < 0)
                        return -ENOMEM;
                ARG("--bind"); ARG(work); ARG(SANDBOX_WORKDIR);
                ARG("--bind"); ARG(tmp); ARG("/tmp");
        } else {
                /* In memory: the work directory lives as long as the sandbox, and nowhere on
                 * the host. */
                ARG("--size"); ARG(disk); ARG("--perms"); ARG(STRINGIFY(WORKDIR_MODE)); ARG("--tmpfs"); ARG(SANDBOX_WORKDIR);
                ARG("--size"); ARG(disk); ARG("--tmpfs"); ARG("/tmp");
        }
        ARG("--ro-bind"); ARG(p->agent_path); ARG(SANDBOX_AGENT_INSIDE);
        if (p->n_data_files > PAYLOAD_DATA_FILES_MAX)
                return -E2BIG;
        for (size_t i = 0; i < p->n_data_files; i++) {
                char fd[12], mode[8];

                snprintf(fd, sizeof(fd), "%zu", PAYLOAD_DATA_FD + i);
                snprintf(mode, sizeof(mode), "%04o", p->data_files[i].mode & 07777);
                ARG("--perms"); ARG(mode);
                ARG("--ro-bind-data"); ARG(fd); ARG(p->data_files[i].path);
        }
        ARG("--remount-ro"); ARG("/");
        ARG("--chdir"); ARG(SANDBOX_WORKDIR);
        ARG("--");
        ARG(SANDBOX_AGENT_INSIDE);
        /* Its messages over the control socket once it is ready: no pipe of ours a sandbox. */
        ARG("--log-over-control");
        /* POSIX shared memory does not outlive the processes (as after a boot): what a
         * sandbox on disk left in /dev/shm was set aside by workspace_shm_dir(), so the
         * agent finds it empty; if it could not be, the agent empties it as it starts. */
        if (p->shm_dir)
                ARG("--empty-dev-shm");
        if (p->egress)
                ARG("--egress");
#undef ARG
        if (r < 0)
                return r;

        *ret = TAKE_PTR(a);
        return 0;
}

/* Like the masks of container runtimes: kernel and hardware details of the host that
 * procfs shows in every PID namespace. Masked only where they exist on this kernel and
 * the sandbox could read them at all: it runs as an unprivileged host uid, so what only
 * root may open stays closed to it anyway (each mask costs bwrap a mount). */
static const char * const proc_mask_candidates[] = {
        "/proc/kcore", "/proc/keys", "/proc/key-users", "/proc/timer_list", "/proc/timer_stats",
        "/proc/sched_debug", "/proc/latency_stats", "/proc/kallsyms", "/proc/config.gz",
        "/proc/kpagecount", "/proc/kpageflags", "/proc/kpagecgroup", "/proc/iomem", "/proc/ioports",
        "/proc/vmallocinfo", "/proc/slabinfo", "/proc/mtrr", "/proc/sysrq-trigger", "/proc/modules",
        "/proc/buddyinfo", "/proc/pagetypeinfo", "/proc/zoneinfo",
};
static const char * const proc_mask_dir_candidates[] = {
        "/proc/acpi", "/proc/scsi", "/proc/asound", "/proc/bus", "/proc/driver", "/proc/fs", "/proc/irq",
        "/proc/tty",
};

int bwrap_find_proc_masks(char ***ret_files, char ***ret_dirs) {
        _cleanup_strv_free_ char **files = NULL, **dirs = NULL;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(proc_mask_candidates); i++) {
                struct stat st;

                if (stat(proc_mask_candidates[i], &st) < 0 || !(st.st_mode & (S_IROTH | S_IWOTH)))
                        continue;
                r = strv_extend(&files, proc_mask_candidates[i]);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < ELEMENTSOF(proc_mask_dir_candidates); i++)
                if (access(proc_mask_dir_candidates[i], F_OK) >= 0) {
                        r = strv_extend(&dirs, proc_mask_dir_candidates[i]);
                        if (r < 0)
                                return r;
                }
        *ret_files = TAKE_PTR(files);
        *ret_dirs = TAKE_PTR(dirs);
        return 0;
}

static int move_fd_high(int fd) {
        /* Out of the way of the numbers the child dup2()s onto. */
        int n = fcntl(fd, F_DUPFD_CLOEXEC, 10);
        return n < 0 ? -errno : n;
}

/* What the payload's child (payload_child) gets: all ours, read in place. */
typedef struct PayloadChildArgs {
        const PayloadParams *params;
        char **argv;
        int control_fd, block_fd, info_fd, seccomp_fd, machine_id_fd, null_fd, stderr_fd;
        int *data_fds;  /* n_data_files of them */
} PayloadChildArgs;

/* Runs in a spawn_vfork() child, on our memory: async-signal-safe calls only, and nothing
 * of ours written. A failure is returned, and spawn_vfork() hands it on. */
static int payload_child(void *userdata) {
        const PayloadChildArgs *a = userdata;
        int control_fd, block_fd, info_fd, seccomp_fd = a->seccomp_fd, machine_id_fd = a->machine_id_fd;

        /* Nothing of the daemon's standard streams goes in. */
        if (dup2(a->null_fd, STDIN_FILENO) < 0 || dup2(a->null_fd, STDOUT_FILENO) < 0 ||
            dup2(a->stderr_fd, STDERR_FILENO) < 0)
                return -errno;

        if ((control_fd = move_fd_high(a->control_fd)) < 0)
                return control_fd;
        if ((block_fd = move_fd_high(a->block_fd)) < 0)
                return block_fd;
        if ((info_fd = move_fd_high(a->info_fd)) < 0)
                return info_fd;
        if (seccomp_fd >= 0 && (seccomp_fd = move_fd_high(seccomp_fd)) < 0)
                return seccomp_fd;
        if (machine_id_fd >= 0 && (machine_id_fd = move_fd_high(machine_id_fd)) < 0)
                return machine_id_fd;
        /* The data files' above everything else first, each then onto its number. */
        size_t n_data = a->params->n_data_files;
        int data_fds[PAYLOAD_DATA_FILES_MAX];
        for (size_t i = 0; i < n_data; i++)
                if ((data_fds[i] = fcntl(a->data_fds[i], F_DUPFD_CLOEXEC, PAYLOAD_DATA_FD + (int) n_data)) < 0)
                        return -errno;
        for (size_t i = 0; i < n_data; i++)
                if (dup2(data_fds[i], PAYLOAD_DATA_FD + (int) i) < 0)
                        return -errno;
        if (dup2(control_fd, AGENT_CONTROL_FD) < 0 ||
            dup2(block_fd, PAYLOAD_BLOCK_FD) < 0 ||
            dup2(info_fd, PAYLOAD_INFO_FD) < 0 ||
            (seccomp_fd >= 0 && dup2(seccomp_fd, PAYLOAD_SECCOMP_FD) < 0) ||
            (machine_id_fd >= 0 && dup2(machine_id_fd, PAYLOAD_MACHINE_ID_FD) < 0))
                return -errno;
        /* Nothing else of the daemon's goes in either. (bwrap closes the seccomp and
         * machine-id fds once it has read them.) */
        if (close_range(PAYLOAD_DATA_FD + (unsigned) n_data, ~0U, 0) < 0)
                return -errno;

        int r = drop_to_uid(a->params->host_uid, a->params->host_gid);
        if (r < 0)
                return r;

        execve(a->argv[0], a->argv, a->params->environment ?: (char *[]) { NULL });
        return -errno;
}

typedef struct DataFds {
        int fds[PAYLOAD_DATA_FILES_MAX];
        size_t n;
} DataFds;

static void data_fds_closep(DataFds *d) {
        for (size_t i = 0; i < d->n; i++)
                safe_close(d->fds[i]);
}

int payload_spawn_held(const PayloadParams *p, int control_fd, PayloadProcess *ret) {
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_close_ int null_fd = -EBADF, seccomp_fd = -EBADF, machine_id_fd = -EBADF;
        _cleanup_close_pair_ int block[2] = { -EBADF, -EBADF }, info[2] = { -EBADF, -EBADF },
                                 log[2] = { -EBADF, -EBADF };
        int pidfd = -EBADF;
        pid_t pid;
        int r;

        r = bwrap_build_argv(p, &argv);
        if (r < 0)
                return r;
        if (pipe2(block, O_CLOEXEC) < 0 || pipe2(info, O_CLOEXEC) < 0)
                return -errno;
        if (fcntl(info[0], F_SETFL, O_NONBLOCK) < 0)
                return -errno;
        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0)
                return -errno;
        /* bwrap's and the agent's own complaints come to us through a pipe, and we log
         * them under the sandbox's unit and id. Not a journald stream each: journald
         * keeps every stream in PID 1's fd store, where systemd compares each new one
         * with all it holds (a cost per sandbox made that grew with the sandboxes
         * present), and it takes no more than 4,096 streams. Non-blocking for them: a
         * full pipe drops their message rather than stopping the sandbox. */
        r = payload_log_pipe(log);
        if (r < 0)
                return r;
        if (p->seccomp_fd >= 0) {
                /* A description of its own: bwrap reads to the end, and dups share offsets. */
                char path[STRLEN("/proc/self/fd/") + 12];
                snprintf(path, sizeof(path), "/proc/self/fd/%i", p->seccomp_fd);
                seccomp_fd = open(path, O_RDONLY | O_CLOEXEC);
                if (seccomp_fd < 0)
                        return -errno;
        }

        if (p->n_data_files > PAYLOAD_DATA_FILES_MAX)
                return -E2BIG;
        _cleanup_(data_fds_closep) DataFds data = { .n = 0 };
        for (; data.n < p->n_data_files; data.n++) {
                data.fds[data.n] = memfd_new_with_data("data", p->data_files[data.n].data, p->data_files[data.n].size);
                if (data.fds[data.n] < 0)
                        return data.fds[data.n];
        }

        if (p->etc_dir && p->machine_id) {
                char id[SANDBOX_MACHINE_ID_LEN + 2];

                snprintf(id, sizeof(id), "%s\n", p->machine_id);
                machine_id_fd = memfd_new_with_data("machine-id", id, strlen(id));
                if (machine_id_fd < 0)
                        return machine_id_fd;
        }

        /* SPAWN_PARENT: the payload is a child of our own parent (the service manager),
         * not of sandboxd, so that sandboxes outlive a restart of the daemon, and the
         * agent, once its monitor is killed (bwrap_running()), is reaped by the service
         * manager. The pidfd lets us watch it all the same. Nothing of our memory is
         * copied for it (spawn_vfork()). */
        r = spawn_vfork(SPAWN_PARENT, payload_child,
                        &(PayloadChildArgs) {
                                .params = p,
                                .argv = argv,
                                .control_fd = control_fd,
                                .block_fd = block[0],
                                .info_fd = info[1],
                                .seccomp_fd = seccomp_fd,
                                .machine_id_fd = machine_id_fd,
                                .null_fd = null_fd,
                                .stderr_fd = log[1],
                                .data_fds = data.fds,
                        },
                        &pid, &pidfd);
        if (r < 0)
                return r;

        *ret = PAYLOAD_PROCESS_NULL;
        ret->pid = pid;
        ret->pidfd = pidfd;
        ret->release_fd = TAKE_FD(block[1]);
        ret->info_fd = TAKE_FD(info[0]);
        ret->log_fd = TAKE_FD(log[0]);
        return 0;
}

int bwrap_parse_info(const char *json, size_t size, pid_t *ret) {
        json_tokener *tok;
        json_object *o, *v;
        int64_t pid;
        int r = -EBADMSG;

        tok = json_tokener_new();
        if (!tok)
                return -ENOMEM;
        o = json_tokener_parse_ex(tok, json, (int) size);
        if (o && json_object_object_get_ex(o, "child-pid", &v) && json_object_is_type(v, json_type_int)) {
                pid = json_object_get_int64(v);
                if (pid > 0 && pid <= INT32_MAX) {
                        *ret = (pid_t) pid;
                        r = 0;
                }
        } else if (!o && json_tokener_get_error(tok) == json_tokener_continue)
                r = -EAGAIN;
        json_object_put(o);
        json_tokener_free(tok);
        return r;
}

int payload_read_info(PayloadProcess *p) {
        int r;

        for (;;) {
                ssize_t n = read(p->info_fd, p->info + p->info_size, sizeof(p->info) - 1 - p->info_size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        return -errno;
                }
                if (n == 0) {
                        /* bwrap closes it once it has said all: now it must parse. (The
                         * caller closes the fd, after removing its event source: closed
                         * first, its epoll entry could outlive the source while a child
                         * being spawned still shares the pipe.) */
                        r = bwrap_parse_info(p->info, p->info_size, &p->child_pid);
                        return r < 0 ? -EBADMSG : 1;
                }
                p->info_size += (size_t) n;
                if (p->info_size >= sizeof(p->info) - 1)
                        return -EMSGSIZE;
        }

        /* bwrap may keep the pipe open in the held child: a complete object is the end. */
        r = bwrap_parse_info(p->info, p->info_size, &p->child_pid);
        return r == 0 ? 1 : r == -EAGAIN ? 0 : r;
}

/* The backend: bwrap's monitor, held, goes into the scope with StartTransientUnit; the
 * sandbox's PID 1 follows through AttachProcessesToUnit once bwrap has named it; only
 * then is it released to run the agent. Once the agent is ready, the monitor is killed:
 * it would only wait for its child, and cost the host a process for every idle sandbox
 * (docs/ARCHITECTURE.md, "Many sandboxes"). The agent is the payload's process from then
 * on.
 *
 * What --die-with-parent did (the agent died with its monitor), and why nothing is left
 * without it:
 * - bwrap is killed while held (abort, before the release): bwrap sets its child's
 *   parent-death signal only right before its exec, after the release, so the flag never
 *   covered a held child. payload_process_kill() kills the child itself once bwrap named
 *   it (bwrap_abort() reads what bwrap said first). One never named (bwrap killed before
 *   it wrote its info) would go on at the release pipe's end, but all it runs is the
 *   agent, which exits when sandboxd closes the other end of its control socket, as it
 *   does with the sandbox.
 * - a stop, a failure or the start timeout after the release: the unit is stopped
 *   (sandbox_payload_stopped()), and the agent, attached before its release, is in it;
 *   bwrap_stop() kills it besides.
 * - sandboxd crashes (or is killed) mid-start: no state file was written (that is done
 *   at "ready", once the monitor is gone), so the next sandboxd stops the scope as an
 *   orphan (manager_stop_orphans()), agent and monitor with it; the agent exits anyway as
 *   its control socket ends (a starting sandbox's is not kept in the fd store).
 * - sandboxd crashes after "ready": the state file names the agent; the next sandboxd
 *   adopts it, or stops its unit. */

/* How long a payload may take from release to its agent's "ready". */
#define BWRAP_START_TIMEOUT_USEC (15ULL * 1000000ULL)

typedef struct BwrapState {
        PayloadProcess process;        /* bwrap's monitor, then the agent (pid_is_agent) */
        /* process.pid is the agent's: bwrap's monitor is gone. False while starting, and
         * for a sandbox adopted from a state file written before sandboxd killed monitors
         * (its "payload_pid" is a monitor started with --die-with-parent: killed, it
         * still takes its agent with it). */
        bool pid_is_agent;
        /* bwrap's monitor, killed at "ready", until it is seen gone (reaped by the service
         * manager): its start time (/proc/PID/stat) tells it from a process given its pid
         * after it. Until then it may still be in the unit, and counts in pids.current. */
        pid_t monitor_pid;
        uint64_t monitor_start;
        sd_event_source *monitor_wait; /* a reset waiting for it to be gone */
        uint64_t monitor_wait_until;   /* CLOCK_MONOTONIC µs */
        sd_event_source *info_source;  /* bwrap's --info-fd, until it names its child */
        bool unit_running;
        bool attach_pending;           /* AttachProcessesToUnit in flight */
        MountRenewal *renewal;         /* renewing the mounts (mount-renew.h) */
} BwrapState;

static void bwrap_init(Sandbox *s) {
        BwrapState *b = sandbox_payload_state(s);

        b->process = PAYLOAD_PROCESS_NULL;
}

static void on_attached(const char *result, const sd_bus_error *error, void *userdata) {
        Sandbox *s = userdata;
        BwrapState *b = sandbox_payload_state(s);
        int r;

        b->attach_pending = false;
        if (!sandbox_payload_starting(s))
                return; /* stopping: the unit's stop takes everything down */
        if (error) {
                log_sandbox(s, LOG_ERR, 0, "Failed to move the payload into %s: %s", sandbox_payload_unit(s),
                            error->message);
                sandbox_payload_failed(s, "its payload could not be moved into its unit.");
                return;
        }

        r = payload_release(&b->process);
        if (r < 0) {
                log_sandbox(s, LOG_ERR, r, "Failed to release payload: %m");
                sandbox_payload_failed(s, "its payload exited before it was released.");
        }
}

/* Once the scope runs (with bwrap's monitor in it) and bwrap said its child's pid: the
 * child joins the scope, and only then is it released to run the agent. */
static void bwrap_attach_child(Sandbox *s) {
        BwrapState *b = sandbox_payload_state(s);
        int r;

        if (!sandbox_payload_starting(s) || !b->unit_running ||
            b->process.child_pid <= 0 || b->attach_pending)
                return;

        r = unit_attach_processes(sandbox_payload_host(s)->systemd, sandbox_payload_unit(s), &b->process.child_pid, 1,
                                  on_attached, s);
        if (r < 0) {
                log_sandbox(s, LOG_ERR, r, "Failed to ask systemd to move the payload: %m");
                sandbox_payload_failed(s, "systemd could not be asked to move its payload.");
                return;
        }
        b->attach_pending = true;
}

static int on_payload_info(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Sandbox *s = userdata;
        BwrapState *b = sandbox_payload_state(s);
        int r;

        r = payload_read_info(&b->process);
        if (r == 0)
                return 0;
        b->info_source = sd_event_source_disable_unref(b->info_source);
        b->process.info_fd = safe_close(b->process.info_fd);
        if (r < 0) {
                log_sandbox(s, LOG_ERR, r, "Failed to learn the payload's pid: %m");
                sandbox_payload_failed(s, "its payload did not start.");
                return 0;
        }
        bwrap_attach_child(s);
        return 0;
}

static int bwrap_start(Sandbox *s, const Template *t) {
        const PayloadHost *h = sandbox_payload_host(s);
        BwrapState *b = sandbox_payload_state(s);
        _cleanup_close_pair_ int pair[2] = { -EBADF, -EBADF };
        int r;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return -errno;
        /* An exec request is one datagram: ask for room for the largest (beyond
         * net.core.wmem_max only with CAP_NET_ADMIN, which the unit does not grant; the
         * default still holds EXEC_ARGS_MAX). */
        int sz = AGENT_MESSAGE_MAX + 64 * 1024;
        if (setsockopt(pair[0], SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
                (void) setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
        if (fcntl(pair[0], F_SETFL, O_NONBLOCK) < 0)
                return -errno;

        char machine_id[SANDBOX_MACHINE_ID_LEN + 1];
        r = machine_id_generate(machine_id);
        if (r < 0)
                return r;

        _cleanup_free_ char *workspace = NULL, *shm_dir = NULL;
        r = sandbox_workspace_path(s, &workspace);
        if (r >= 0)
                r = sandbox_workspace_shm_dir(s, &shm_dir);
        if (r < 0)
                return r;

        PayloadDataFile *data_files = NULL;
        size_t n_data_files = 0;
        r = sandbox_secrets_data_files(s, &data_files, &n_data_files);
        if (r < 0)
                return r;

        PayloadParams params = {
                .template = t,
                .workspace_dir = workspace,
                .shm_dir = shm_dir,
                .etc_dir = t->etc_dir,
                .machine_id = machine_id,
                .bwrap_path = h->bwrap_path,
                .agent_path = h->agent_path,
                .disk_max = sandbox_payload_config(s)->disk_max,
                .proc_masks = h->proc_masks,
                .proc_mask_dirs = h->proc_mask_dirs,
                .empty_dir = h->empty_dir,
                .seccomp_fd = h->seccomp_fd,
                .host_uid = sandbox_payload_uid(s),
                .host_gid = sandbox_payload_uid(s),
                .egress = sandbox_config_has_egress(sandbox_payload_config(s)),
                .data_files = data_files,
                .n_data_files = n_data_files,
        };
        b->pid_is_agent = false; /* a monitor again, until bwrap_running() */
        b->monitor_pid = 0;
        r = payload_spawn_held(&params, pair[1], &b->process);
        sandbox_data_files_free(data_files, n_data_files);
        if (r < 0)
                return log_sandbox(s, LOG_ERR, r, "Failed to spawn payload: %m");
        pair[1] = safe_close(pair[1]);
        r = payload_process_forward_log(&b->process, TAKE_FD(b->process.log_fd), h->event, s);
        if (r < 0)
                return r;

        r = sandbox_payload_connected(s, TAKE_FD(pair[0]));
        if (r < 0)
                return r;
        r = payload_process_watch(&b->process, h->event, s);
        if (r < 0)
                return r;
        r = sd_event_add_io(h->event, &b->info_source, b->process.info_fd, EPOLLIN, on_payload_info, s);
        if (r < 0)
                return r;

        /* systemd makes the scope while bwrap builds the sandbox: the monitor goes in
         * now, the sandbox's PID 1 as soon as bwrap names it (bwrap_attach_child). */
        return sandbox_payload_start_scope(s, b->process.pid);
}

static void bwrap_unit_started(Sandbox *s) {
        BwrapState *b = sandbox_payload_state(s);

        b->unit_running = true;
        bwrap_attach_child(s);
}

static void on_renewed(int error, void *userdata) {
        Sandbox *s = userdata;
        BwrapState *b = sandbox_payload_state(s);

        b->renewal = mount_renewal_free(b->renewal);
        if (error != 0) {
                log_sandbox(s, LOG_ERR, -error, "Failed to renew the mounts of sandbox %s: %m", sandbox_get_id(s));
                sandbox_payload_renewed(s, "its /work, /tmp and /dev/shm could not be renewed.");
                return;
        }
        sandbox_payload_renewed(s, NULL);
}

/* The agent has ended everything else: in the unit, only the agent (the sandbox's PID 1)
 * may be left, and bwrap's monitor for a sandbox adopted from an older sandboxd. Else a
 * process outlived the reset, out of the agent's reach (an outside one moved in, or one
 * of another PID namespace). */
static int bwrap_find_agent(Sandbox *s, pid_t *ret) {
        BwrapState *b = sandbox_payload_state(s);
        _cleanup_free_ pid_t *pids = NULL;
        uint64_t tasks;
        pid_t agent = 0;
        size_t n;
        int r;

        r = cgroup_read_pids(sandbox_payload_cgroup(s), 8, &pids, &n);
        if (r < 0)
                return log_sandbox(s, LOG_ERR, r, "Failed to list the processes of %s: %m", sandbox_payload_unit(s));
        pid_t known = b->pid_is_agent ? b->process.pid : b->process.child_pid;
        for (size_t i = 0; i < n; i++) {
                if (!b->pid_is_agent && pids[i] == b->process.pid)
                        continue; /* bwrap's monitor */
                /* The agent of one adopted from an older sandboxd is known only as the
                 * one process left beside its monitor. */
                if (agent == 0 && (known <= 0 || pids[i] == known)) {
                        agent = pids[i];
                        continue;
                }
                log_sandbox(s, LOG_WARNING, 0, "Process %d of sandbox %s outlived its reset.", (int) pids[i],
                            sandbox_get_id(s));
                return -EBUSY;
        }
        if (agent == 0)
                return -ESRCH;
        /* One we cannot see (of a PID namespace not below ours, moved in) still counts. */
        r = cgroup_read_tasks_current(sandbox_payload_cgroup(s), &tasks);
        if (r >= 0 && tasks > n) {
                log_sandbox(s, LOG_WARNING, 0, "Sandbox %s has %" PRIu64 " tasks after its reset, %zu expected.",
                            sandbox_get_id(s),
                            tasks, n);
                return -EBUSY;
        }
        *ret = agent;
        return 0;
}

/* Whether bwrap's monitor, killed at "ready", may still be there (alive, or a zombie that
 * pids.current counts): its pid names a process with its start time. */
static bool bwrap_monitor_lingers(BwrapState *b) {
        uint64_t start;

        if (b->monitor_pid <= 0)
                return false;
        if (payload_pid_start_time(b->monitor_pid, &start) >= 0 && start == b->monitor_start)
                return true;
        b->monitor_pid = 0;
        return false;
}

static int bwrap_renew_now(Sandbox *s) {
        BwrapState *b = sandbox_payload_state(s);
        const Template *t;
        pid_t agent = 0;
        int r;

        t = template_set_find(sandbox_payload_host(s)->templates, sandbox_get_template(s));
        if (!t)
                return -ENOENT;
        r = bwrap_find_agent(s, &agent);
        if (r < 0)
                return r;

        MountRenew mounts[] = {
                { SANDBOX_WORKDIR, sandbox_payload_config(s)->disk_max, WORKDIR_MODE },
                { "/tmp", sandbox_payload_config(s)->disk_max, TMP_MODE },
                { "/dev/shm", t->shm_max ?: (uint64_t) TEMPLATE_SHM_DEFAULT, SHM_MODE },
        };
        b->renewal = mount_renewal_free(b->renewal);
        r = mount_renewal_start(sandbox_payload_host(s)->renew_server, agent, sandbox_payload_uid(s),
                                sandbox_payload_uid(s), mounts, ELEMENTSOF(mounts), on_renewed, s, &b->renewal);
        if (r < 0)
                return log_sandbox(s, LOG_ERR, r, "Failed to start renewing the mounts of sandbox %s: %m",
                                   sandbox_get_id(s));
        return 0;
}

/* How long a reset waits for a killed monitor to be gone before it checks the unit, and
 * how often it looks. It is gone within milliseconds but on a machine out of CPU. */
#define BWRAP_MONITOR_WAIT_USEC (5ULL * 1000000ULL)
#define BWRAP_MONITOR_POLL_USEC (10ULL * 1000ULL)

static int on_monitor_wait(sd_event_source *source, uint64_t usec, void *userdata) {
        Sandbox *s = userdata;
        BwrapState *b = sandbox_payload_state(s);
        int r;

        if (bwrap_monitor_lingers(b) && usec < b->monitor_wait_until) {
                r = sd_event_source_set_time_relative(source, BWRAP_MONITOR_POLL_USEC);
                if (r >= 0)
                        r = sd_event_source_set_enabled(source, SD_EVENT_ONESHOT);
                if (r >= 0)
                        return 0;
        }
        b->monitor_wait = sd_event_source_disable_unref(b->monitor_wait);
        if (bwrap_monitor_lingers(b)) {
                log_sandbox(s, LOG_WARNING, 0, "The bwrap monitor (pid %d) of sandbox %s did not end.",
                            (int) b->monitor_pid, sandbox_get_id(s));
                sandbox_payload_renewed(s, "a process in its unit outlived the reset.");
                return 0;
        }
        r = bwrap_renew_now(s);
        if (r < 0)
                sandbox_payload_renewed(s, r == -EBUSY ? "a process in its unit outlived the reset." :
                                                         "its mounts could not be renewed.");
        return 0;
}

/* The unit is checked once bwrap's monitor, killed at "ready", is gone: a reset that
 * comes at once (a sandbox released as soon as it was made) may find it still there. */
static int bwrap_renew(Sandbox *s) {
        BwrapState *b = sandbox_payload_state(s);
        uint64_t now;
        int r;

        if (!bwrap_monitor_lingers(b))
                return bwrap_renew_now(s);
        b->monitor_wait = sd_event_source_disable_unref(b->monitor_wait);
        r = sd_event_now(sandbox_payload_host(s)->event, CLOCK_MONOTONIC, &now);
        if (r < 0)
                return r;
        b->monitor_wait_until = now + BWRAP_MONITOR_WAIT_USEC;
        return sd_event_add_time_relative(sandbox_payload_host(s)->event, &b->monitor_wait, CLOCK_MONOTONIC,
                                          BWRAP_MONITOR_POLL_USEC, 0, on_monitor_wait, s);
}

static void bwrap_abort(Sandbox *s) {
        BwrapState *b = sandbox_payload_state(s);

        b->renewal = mount_renewal_free(b->renewal);
        b->monitor_wait = sd_event_source_disable_unref(b->monitor_wait);
        /* Its child's pid, if bwrap said it and we have not read it yet: the child is
         * killed with the monitor (payload_process_kill()). */
        if (b->process.child_pid <= 0 && b->process.info_fd >= 0)
                (void) payload_read_info(&b->process);
        /* The source first: its fd is one that abort closes. */
        b->info_source = sd_event_source_disable_unref(b->info_source);
        payload_process_abort(&b->process, sandbox_payload_unit(s));
}

static void bwrap_stop(Sandbox *s) {
        BwrapState *b = sandbox_payload_state(s);

        /* Kill the payload ourselves as systemd is asked to stop the unit, so that
         * systemd mostly finds an empty cgroup and the stop job ends at once: the agent's
         * death takes the sandbox with it (PID 1 of its namespace); a monitor's (while
         * starting, or adopted from an older sandboxd, pid_is_agent false) its child too,
         * by payload_process_kill() or by --die-with-parent as the older one started it. */
        payload_process_kill(&b->process, sandbox_payload_unit(s));
        sandbox_payload_stopped(s);
}

/* The key that says payload_pid is the agent's: a state file without it was written by a
 * sandboxd that kept bwrap's monitor, and names that. */
#define BWRAP_PID_IS_AGENT "pid_is_agent"

static int bwrap_save(Sandbox *s, SandboxPersist *st) {
        BwrapState *b = sandbox_payload_state(s);

        st->payload_pid = b->process.pid;
        if (!b->pid_is_agent)
                return 0;
        st->payload_data = json_object_new_object();
        if (!st->payload_data)
                return -ENOMEM;
        return json_add(st->payload_data, BWRAP_PID_IS_AGENT, json_object_new_boolean(true));
}

/* The agent is ready, in the unit: bwrap's monitor, which would only wait for it, goes.
 * Its watch first, so that its end is not taken for the sandbox's; killed through its
 * pidfd before payload_process_running() closes that. The agent, orphaned, is the
 * service manager's child (SPAWN_PARENT), reaped by it when it ends, and the payload's
 * process from here on. */
static void bwrap_running(Sandbox *s) {
        BwrapState *b = sandbox_payload_state(s);

        b->process.exit_source = sd_event_source_disable_unref(b->process.exit_source);
        if (b->process.pidfd >= 0 && b->process.child_pid > 0) {
                /* Its start time read holding its pidfd: still the monitor's. */
                uint64_t start = 0;
                bool known = payload_pid_start_time(b->process.pid, &start) >= 0;
                if (syscall(SYS_pidfd_send_signal, b->process.pidfd, SIGKILL, NULL, 0) < 0)
                        log_sandbox(s, LOG_WARNING, errno, "Failed to end the bwrap monitor of sandbox %s, keeping it: %m",
                                    sandbox_get_id(s));
                else {
                        if (known) {
                                b->monitor_pid = b->process.pid;
                                b->monitor_start = start;
                        }
                        b->process.pid = b->process.child_pid;
                        b->pid_is_agent = true;
                }
        }
        payload_process_running(&b->process);
}

/* Running: as after bwrap_running(), its agent's messages come over its control socket,
 * and its payload's process (the agent, or an older sandboxd's monitor) is known by pid
 * only. */
static int bwrap_adopt(Sandbox *s, const SandboxPersist *st) {
        BwrapState *b = sandbox_payload_state(s);
        json_object *v;

        b->process.pid = st->payload_pid;
        if (json_object_object_get_ex(st->payload_data, BWRAP_PID_IS_AGENT, &v)) {
                if (!json_object_is_type(v, json_type_boolean))
                        return -EBADMSG;
                b->pid_is_agent = json_object_get_boolean(v);
        }
        b->unit_running = true;
        return 0;
}

static void bwrap_detach(Sandbox *s) {
        BwrapState *b = sandbox_payload_state(s);

        b->renewal = mount_renewal_free(b->renewal);
        b->monitor_wait = sd_event_source_disable_unref(b->monitor_wait);
        b->info_source = sd_event_source_disable_unref(b->info_source);
        payload_process_done(&b->process);
}

static void bwrap_free(Sandbox *s) {
        bwrap_abort(s);
}

const PayloadOps payload_bwrap_ops = {
        .name = "bwrap",
        .state_size = sizeof(BwrapState),
        .start_timeout_usec = BWRAP_START_TIMEOUT_USEC,
        .init = bwrap_init,
        .start = bwrap_start,
        .unit_started = bwrap_unit_started,
        .abort = bwrap_abort,
        .stop = bwrap_stop,
        .save = bwrap_save,
        .running = bwrap_running,
        .adopt = bwrap_adopt,
        .renew = bwrap_renew,
        .detach = bwrap_detach,
        .free = bwrap_free,
};
