/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "mount-renew.h"

struct MountRenewal {
        sd_event *event;
        int pidfd;                     /* the helper, until reaped */
        int done_fd;                   /* its stdout: "ok" once the mounts are new */
        sd_event_source *done_source, *exit_source;
        bool finished;                 /* done was called */
        mount_renewal_done_t done;
        void *userdata;
};

/* The helper's exit status: 0, the errno of the step that failed, EINTR if killed. */
static int helper_status(int pidfd) {
        siginfo_t si = {};

        if (waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED) < 0)
                return errno;
        if (si.si_code != CLD_EXITED)
                return EINTR;
        return si.si_status;
}

static int on_reaped_later(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        (void) helper_status(fd);
        /* Floating, owning fd: this frees it and closes fd. */
        (void) sd_event_source_set_enabled(source, SD_EVENT_OFF);
        sd_event_source_unref(source);
        return 0;
}

/* Takes pidfd: reaped whenever the helper ends, by a source the event loop owns. */
static void reap_later(sd_event *event, int pidfd) {
        sd_event_source *source = NULL;

        if (sd_event_add_io(event, &source, pidfd, EPOLLIN, on_reaped_later, NULL) < 0) {
                /* Cannot watch it (out of memory): wait now rather than leave a zombie. */
                (void) helper_status(pidfd);
                safe_close(pidfd);
                return;
        }
        (void) sd_event_source_set_io_fd_own(source, true);
        (void) sd_event_source_set_floating(source, true);
        sd_event_source_unref(source);
}

static void finish(MountRenewal *r, int error) {
        r->finished = true;
        r->done_source = sd_event_source_disable_unref(r->done_source);
        r->done_fd = safe_close(r->done_fd);
        /* Last: done may free r. */
        r->done(error, r->userdata);
}

static int on_helper_exit(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        MountRenewal *r = userdata;
        int status;

        status = helper_status(r->pidfd);
        r->exit_source = sd_event_source_disable_unref(r->exit_source);
        r->pidfd = safe_close(r->pidfd);
        /* It exits 0 only after it said "ok", which we may not have read yet: its exit
         * and its pipe can be seen in either order. */
        if (!r->finished)
                finish(r, status);
        return 0;
}

static int on_done(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        MountRenewal *r = userdata;
        char buf[8];
        ssize_t n;

        n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n >= 2 && memcmp(buf, "ok", 2) == 0) {
                finish(r, 0);
                return 0;
        }
        /* EOF (or anything else): it failed; its exit status says how (on_helper_exit). */
        r->done_source = sd_event_source_disable_unref(r->done_source);
        return 0;
}

MountRenewal *mount_renewal_free(MountRenewal *r) {
        if (!r)
                return NULL;
        r->done_source = sd_event_source_disable_unref(r->done_source);
        r->exit_source = sd_event_source_disable_unref(r->exit_source);
        if (r->pidfd >= 0) {
                if (!r->finished)
                        (void) syscall(SYS_pidfd_send_signal, r->pidfd, SIGKILL, NULL, 0);
                reap_later(r->event, TAKE_FD(r->pidfd));
        }
        safe_close(r->done_fd);
        sd_event_unref(r->event);
        free(r);
        return NULL;
}

static int spawn_helper(const char *agent_path, char **argv, int stdout_fd, pid_t *ret) {
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t none, all;
        int r;

        sigemptyset(&none);
        sigfillset(&all);
        r = posix_spawn_file_actions_init(&fa);
        if (r != 0)
                return -r;
        r = posix_spawnattr_init(&attr);
        if (r != 0) {
                posix_spawn_file_actions_destroy(&fa);
                return -r;
        }
        /* Nothing of ours goes in but its stdout (our pipe) and stderr (the journal: what
         * failed); no signal blocked or caught, as for any new program. */
        if ((r = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0)) == 0 &&
            (r = posix_spawn_file_actions_adddup2(&fa, stdout_fd, STDOUT_FILENO)) == 0 &&
            (r = posix_spawn_file_actions_addclosefrom_np(&fa, 3)) == 0 &&
            (r = posix_spawnattr_setsigmask(&attr, &none)) == 0 &&
            (r = posix_spawnattr_setsigdefault(&attr, &all)) == 0 &&
            (r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) == 0)
                r = posix_spawn(ret, agent_path, &fa, &attr, argv, (char *[]) { NULL });
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        return -r;
}

int mount_renewal_start(sd_event *event, const char *agent_path, pid_t agent_pid, uid_t uid, gid_t gid,
                        const MountRenew *mounts, size_t n_mounts, mount_renewal_done_t done, void *userdata,
                        MountRenewal **ret) {
        _cleanup_close_pair_ int pipe_fds[2] = { -EBADF, -EBADF };
        char target[64], specs[MOUNT_RENEW_MAX][128];
        char *argv[3 + MOUNT_RENEW_MAX + 1];
        MountRenewal *r;
        size_t n = 0;
        pid_t pid;
        int k;

        if (!agent_path || agent_pid <= 0 || n_mounts == 0 || n_mounts > MOUNT_RENEW_MAX || !done)
                return -EINVAL;
        snprintf(target, sizeof(target), "%d:%u:%u", (int) agent_pid, (unsigned) uid, (unsigned) gid);
        argv[n++] = (char *) agent_path;
        argv[n++] = (char *) "--renew-mounts";
        argv[n++] = target;
        for (size_t i = 0; i < n_mounts; i++) {
                if (!mounts[i].path || mounts[i].path[0] != '/' ||
                    (mounts[i].mode & ~07777) != 0 ||
                    (size_t) snprintf(specs[i], sizeof(specs[i]), "%s=%" PRIu64 ":%o", mounts[i].path, mounts[i].size,
                                      (unsigned) mounts[i].mode) >= sizeof(specs[i]))
                        return -EINVAL;
                argv[n++] = specs[i];
        }
        argv[n] = NULL;

        if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        k = spawn_helper(agent_path, argv, pipe_fds[1], &pid);
        if (k < 0)
                return k;
        pipe_fds[1] = safe_close(pipe_fds[1]);

        r = calloc(1, sizeof(MountRenewal));
        if (!r) {
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                return -ENOMEM;
        }
        *r = (MountRenewal) { .event = sd_event_ref(event), .pidfd = -EBADF, .done_fd = TAKE_FD(pipe_fds[0]),
                              .done = done, .userdata = userdata };
        /* Our child, not yet reaped: its pid cannot name another process meanwhile. */
        r->pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (r->pidfd < 0) {
                k = -errno;
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                mount_renewal_free(r);
                return k;
        }
        if ((k = sd_event_add_io(event, &r->done_source, r->done_fd, EPOLLIN, on_done, r)) < 0 ||
            (k = sd_event_add_io(event, &r->exit_source, r->pidfd, EPOLLIN, on_helper_exit, r)) < 0) {
                mount_renewal_free(r); /* kills it: not started, as far as the caller knows */
                return k;
        }
        *ret = r;
        return 0;
}
