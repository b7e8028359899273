/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/syscall.h>

#include "payload.h"

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

void payload_process_kill(PayloadProcess *p) {
        if (p->pidfd >= 0)
                (void) syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
}

void payload_process_abort(PayloadProcess *p) {
        /* Kill first: EOF on the block pipe would let bwrap go on (it reads "anything"
         * as go). The child dies with its monitor (--die-with-parent). */
        payload_process_kill(p);
        payload_process_done(p);
}

void payload_process_done(PayloadProcess *p) {
        /* The watch first: its fd is one of those closed here. */
        p->exit_source = sd_event_source_disable_unref(p->exit_source);
        p->release_fd = safe_close(p->release_fd);
        p->info_fd = safe_close(p->info_fd);
        p->child_pid = 0;
        p->pidfd = safe_close(p->pidfd);
        p->pid = 0;
}

int payload_spawn_holder(const char *agent_path, uid_t holder_uid, PayloadProcess *ret) {
        int pidfd = -EBADF, null_fd;
        pid_t pid;

        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0)
                return -errno;
        /* As a payload: a child of the service manager (CLONE_PARENT), so it outlives us. */
        pid = (pid_t) syscall(SYS_clone, CLONE_PARENT | CLONE_PIDFD, NULL, &pidfd, NULL, 0);
        if (pid < 0) {
                safe_close(null_fd);
                return -errno;
        }
        if (pid == 0) {
                sigset_t none;
                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
                if (dup2(null_fd, 0) < 0 || dup2(null_fd, 1) < 0 || dup2(null_fd, 2) < 0)
                        _exit(EXIT_FAILURE);
                (void) close_range(3, ~0U, 0);
                if (drop_to_uid(holder_uid, holder_uid) < 0)
                        _exit(EXIT_FAILURE);
                execve(agent_path, (char *[]) { (char *) agent_path, (char *) "--hold", NULL }, (char *[]) { NULL });
                _exit(127);
        }
        safe_close(null_fd);
        *ret = PAYLOAD_PROCESS_NULL;
        ret->pid = pid;
        ret->pidfd = pidfd;
        return 0;
}
