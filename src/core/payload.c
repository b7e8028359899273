/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "payload.h"
#include "sandbox.h"

static const PayloadOps * const payload_ops_table[_PAYLOAD_KIND_MAX] = {
        [PAYLOAD_BWRAP] = &payload_bwrap_ops,
        [PAYLOAD_DOCKER] = &payload_docker_ops,
};

const PayloadOps *payload_ops_get(PayloadKind k) {
        return k >= 0 && k < _PAYLOAD_KIND_MAX ? payload_ops_table[k] : NULL;
}

const char *payload_kind_to_string(PayloadKind k) {
        return k >= 0 && k < _PAYLOAD_KIND_MAX ? payload_ops_table[k]->name : NULL;
}

PayloadKind payload_kind_from_string(const char *s) {
        for (PayloadKind k = 0; k < _PAYLOAD_KIND_MAX; k++)
                if (s && streq(s, payload_ops_table[k]->name))
                        return k;
        return _PAYLOAD_KIND_INVALID;
}

int payload_release(PayloadProcess *p) {
        static const char go = 'G';
        ssize_t n;

        if (p->release_fd < 0)
                return -EBADF;
        n = write(p->release_fd, &go, 1);
        p->release_fd = safe_close(p->release_fd);
        return n == 1 ? 0 : -EPIPE;
}

static int on_payload_process_exit(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        /* Off, not freed: the source is the PayloadProcess's, which goes later. */
        (void) sd_event_source_set_enabled(source, SD_EVENT_OFF);
        sandbox_payload_exited(userdata);
        return 0;
}

int payload_process_watch(PayloadProcess *p, sd_event *event, Sandbox *s) {
        return sd_event_add_io(event, &p->exit_source, p->pidfd, EPOLLIN, on_payload_process_exit, s);
}

bool payload_pid_in_unit(pid_t pid, const char *unit) {
        char path[64], buf[4096], needle[128];
        _cleanup_close_ int fd = -EBADF;
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/%i/cgroup", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return false;
        buf[n] = 0;
        snprintf(needle, sizeof(needle), "/%s\n", unit);
        return strstr(buf, needle) != NULL;
}

/* Whether pid's parent is ppid (the PPid line of /proc/PID/status). */
static bool pid_parent_is(pid_t pid, pid_t ppid) {
        char path[64], buf[4096];
        _cleanup_close_ int fd = -EBADF;
        const char *l;
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/%i/status", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return false;
        buf[n] = 0;
        l = strstr(buf, "\nPPid:");
        return l && atoi(l + sizeof("\nPPid:") - 1) == (int) ppid;
}

/* bwrap's child, once bwrap named it, while p->pid is still bwrap's monitor (its pidfd
 * open): SIGKILLed if it is in unit (attached) or still the monitor's child (held, not
 * yet attached). Not left to the monitor's death: bwrap sets no parent-death signal
 * without --die-with-parent, and a child still held would read the release pipe's EOF
 * once we close it as "go" (docs/ARCHITECTURE.md, "Many sandboxes"). */
static void payload_process_kill_child(PayloadProcess *p, const char *unit) {
        _cleanup_close_ int pidfd = -EBADF;

        if (p->child_pid <= 0 || p->pidfd < 0)
                return;
        /* Opened first, checked after, as below: a pid reused meanwhile is neither in the
         * unit nor a child of the monitor (whose only child is the sandbox's PID 1). */
        pidfd = (int) syscall(SYS_pidfd_open, p->child_pid, 0);
        if (pidfd >= 0 && ((unit && payload_pid_in_unit(p->child_pid, unit)) || pid_parent_is(p->child_pid, p->pid)))
                (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
}

int payload_pid_start_time(pid_t pid, uint64_t *ret) {
        char path[64], buf[1024];
        _cleanup_close_ int fd = -EBADF;
        unsigned long long start;
        const char *p;
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/%i/stat", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        /* After the command's closing parenthesis (the command may hold any): state is
         * field 3, starttime field 22. */
        p = strrchr(buf, ')');
        if (!p)
                return -EBADMSG;
        p++;
        for (int field = 3; field < 22; field++) {
                p += strspn(p, " ");
                p += strcspn(p, " ");
        }
        if (sscanf(p, " %llu", &start) != 1)
                return -EBADMSG;
        *ret = start;
        return 0;
}

void payload_process_kill(PayloadProcess *p, const char *unit) {
        _cleanup_close_ int pidfd = -EBADF;

        if (p->pidfd >= 0) {
                /* The child first: its check needs the monitor alive. */
                payload_process_kill_child(p, unit);
                (void) syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
                return;
        }
        if (p->pid <= 0 || !unit)
                return;
        /* Opened first, checked after: the pidfd holds the process the check was about.
         * One gone, its pid taken by another, is not in the unit (and then not ours). */
        pidfd = (int) syscall(SYS_pidfd_open, p->pid, 0);
        if (pidfd >= 0 && payload_pid_in_unit(p->pid, unit))
                (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
}

void payload_process_abort(PayloadProcess *p, const char *unit) {
        /* Kill first: EOF on the block pipe would let bwrap go on (it reads "anything"
         * as go). Its child too, once named (payload_process_kill_child()). */
        payload_process_kill(p, unit);
        payload_process_done(p);
}

void payload_process_done(PayloadProcess *p) {
        /* The watches first: their fds are among those closed here. */
        p->exit_source = sd_event_source_disable_unref(p->exit_source);
        p->log_source = sd_event_source_disable_unref(p->log_source);
        p->log_fd = safe_close(p->log_fd);
        p->release_fd = safe_close(p->release_fd);
        p->info_fd = safe_close(p->info_fd);
        p->child_pid = 0;
        p->pidfd = safe_close(p->pidfd);
        p->pid = 0;
}

int payload_log_pipe(int ret[2]) {
        return pipe2(ret, O_CLOEXEC | O_NONBLOCK) < 0 ? -errno : 0;
}

/* One read of p's stderr pipe, logged: > 0 while there may be more, 0 once there is none
 * for now, < 0 once it is closed (every writer gone; EOF or a failed read). */
static int payload_log_read(PayloadProcess *p) {
        Sandbox *s = p->log_sandbox;
        char buf[4096];
        ssize_t n;

        n = read(p->log_fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n > 0) {
                sandbox_payload_log(s, buf, (size_t) n);
                return 1;
        }
        /* EOF (every writer gone) or a failed read: nothing more will come. */
        p->log_source = sd_event_source_disable_unref(p->log_source);
        p->log_fd = safe_close(p->log_fd);
        return -EPIPE;
}

static int on_payload_log(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        (void) payload_log_read(userdata);
        return 0;
}

void payload_process_running(PayloadProcess *p) {
        /* What bwrap and the agent said before "ready" is in the pipe by now: logged, and
         * the pipe goes. The agent's messages come over the control socket from here on,
         * and the payload's end shows as that socket's: its other end is the agent's
         * alone (bwrap's monitor closed its copy before the agent ran, and is gone by
         * now, bwrap_running(); Docker's holder never had one). */
        while (p->log_fd >= 0 && payload_log_read(p) > 0)
                ;
        p->log_source = sd_event_source_disable_unref(p->log_source);
        p->log_fd = safe_close(p->log_fd);
        p->exit_source = sd_event_source_disable_unref(p->exit_source);
        p->pidfd = safe_close(p->pidfd);
}

int payload_process_forward_log(PayloadProcess *p, int fd, sd_event *event, Sandbox *s) {
        int r;

        p->log_source = sd_event_source_disable_unref(p->log_source);
        safe_close(p->log_fd);
        p->log_fd = fd;
        p->log_sandbox = s;
        r = sd_event_add_io(event, &p->log_source, fd, EPOLLIN, on_payload_log, p);
        if (r < 0)
                p->log_fd = safe_close(p->log_fd);
        return r;
}

typedef struct HolderArgs {
        const char *agent_path;
        uid_t uid;
        int null_fd;
} HolderArgs;

/* A spawn_vfork() child: async-signal-safe calls only. */
static int holder_child(void *userdata) {
        const HolderArgs *a = userdata;
        int r;

        if (dup2(a->null_fd, 0) < 0 || dup2(a->null_fd, 1) < 0 || dup2(a->null_fd, 2) < 0)
                return -errno;
        if (close_range(3, ~0U, 0) < 0)
                return -errno;
        r = drop_to_uid(a->uid, a->uid);
        if (r < 0)
                return r;
        execve(a->agent_path, (char *[]) { (char *) a->agent_path, (char *) "--hold", NULL }, (char *[]) { NULL });
        return -errno;
}

int payload_spawn_holder(const char *agent_path, uid_t holder_uid, PayloadProcess *ret) {
        _cleanup_close_ int null_fd = -EBADF;
        int pidfd = -EBADF, r;
        pid_t pid;

        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0)
                return -errno;
        /* As a payload: a child of the service manager (SPAWN_PARENT), so it outlives us. */
        r = spawn_vfork(SPAWN_PARENT, holder_child,
                        &(HolderArgs) { .agent_path = agent_path, .uid = holder_uid, .null_fd = null_fd },
                        &pid, &pidfd);
        if (r < 0)
                return r;
        *ret = PAYLOAD_PROCESS_NULL;
        ret->pid = pid;
        ret->pidfd = pidfd;
        return 0;
}
