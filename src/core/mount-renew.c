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
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fd-util.h"
#include "list.h"
#include "log.h"
#include "macro.h"
#include "mount-renew.h"

struct RenewServer {
        sd_event *event;
        char *agent_path;
        int fd;                        /* our end of its stdin; -EBADF while none runs */
        int pidfd;
        pid_t pid;
        sd_event_source *io_source, *exit_source;
        MountRenewal *renewals;        /* asked for, not answered */
        uint64_t next_id;
        uint64_t n_heard;              /* messages it sent us */
};

struct MountRenewal {
        RenewServer *server;           /* NULL once answered or abandoned */
        uint64_t id;
        uint64_t heard_before;         /* the server's n_heard when asked */
        mount_renewal_done_t done;
        void *userdata;
        MountRenewal *prev, *next;
};

/* Our child's exit status: 0, the errno of what failed, EINTR if killed. */
static int child_status(int pidfd) {
        siginfo_t si = {};

        if (waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED) < 0)
                return errno;
        if (si.si_code != CLD_EXITED)
                return EINTR;
        return si.si_status;
}

static MountRenewal *renewal_find(RenewServer *server, uint64_t id) {
        for (MountRenewal *r = server->renewals; r; r = r->next)
                if (r->id == id)
                        return r;
        return NULL;
}

/* Out of the server's list, then done (which may free r). */
static void renewal_finish(MountRenewal *r, int error) {
        LIST_REMOVE(r->server->renewals, r);
        r->server = NULL;
        r->done(error, r->userdata);
}

static void server_message(RenewServer *server, const char *msg) {
        MountRenewal *r;
        uint64_t id;
        int status;
        char end;

        if (sscanf(msg, "ok %" SCNu64 "%c", &id, &end) == 1) {
                r = renewal_find(server, id);
                if (r)
                        renewal_finish(r, 0);
        } else if (sscanf(msg, "exit %" SCNu64 " %d%c", &id, &status, &end) == 2) {
                /* After its "ok" (the child sends it before it exits, on this socket), there
                 * is nobody left to tell. Else it failed: status 0 would be a child that ended
                 * without saying so. */
                r = renewal_find(server, id);
                if (r)
                        renewal_finish(r, status > 0 ? status : EPROTO);
        } else
                log_warning("The mount renewal server said something unexpected; ignored.");
}

/* What the server said, up to now. 0, or -errno if it is gone (EOF) or cannot be read. */
static int server_read(RenewServer *server) {
        char buf[128];
        ssize_t n;

        for (;;) {
                n = recv(server->fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return errno == EAGAIN ? 0 : -errno;
                if (n == 0)
                        return -EPIPE;
                buf[n] = '\0';
                server->n_heard++;
                server_message(server, buf);
                /* A done may have stopped the server (sandboxd stopping). */
                if (server->fd < 0)
                        return 0;
        }
}

static int on_reaped_later(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        (void) child_status(fd);
        /* Floating, owning fd: this frees it and closes fd. */
        (void) sd_event_source_set_enabled(source, SD_EVENT_OFF);
        sd_event_source_unref(source);
        return 0;
}

/* Takes pidfd of a child that was sent SIGKILL: reaped now if it is gone, else whenever it
 * ends (one in uninterruptible sleep takes its time), by a source the loop owns. */
static void reap_killed(sd_event *event, int pidfd) {
        sd_event_source *source = NULL;
        siginfo_t si = {};

        if (waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED | WNOHANG) == 0 && si.si_pid != 0) {
                safe_close(pidfd);
                return;
        }
        if (sd_event_add_io(event, &source, pidfd, EPOLLIN, on_reaped_later, NULL) < 0) {
                safe_close(pidfd); /* no memory: a zombie until we exit, not a stalled loop */
                return;
        }
        (void) sd_event_source_set_io_fd_own(source, true);
        (void) sd_event_source_set_floating(source, true);
        sd_event_source_unref(source);
}

/* The server is gone, or to be: what it still said is heard, the rest fails. Started again
 * at the next renewal. */
static void server_stop(RenewServer *server, int error) {
        uint64_t cutoff = server->next_id;
        MountRenewal *r;

        if (server->fd >= 0)
                (void) server_read(server);
        server->io_source = sd_event_source_disable_unref(server->io_source);
        server->exit_source = sd_event_source_disable_unref(server->exit_source);
        server->fd = safe_close(server->fd);
        if (server->pidfd >= 0) {
                (void) syscall(SYS_pidfd_send_signal, server->pidfd, SIGKILL, NULL, 0);
                reap_killed(server->event, TAKE_FD(server->pidfd));
        }
        server->pid = 0;

        /* One at a time, each out of the list before its done: a done may free another of
         * them (mount_renewal_free() takes it out of this list) or ask for a renewal (and
         * start a new server: not one of these, by its id). */
        for (;;) {
                for (r = server->renewals; r && r->id >= cutoff; r = r->next)
                        ;
                if (!r)
                        break;
                LIST_REMOVE(server->renewals, r);
                r->server = NULL;
                if (error != 0)
                        r->done(error, r->userdata);
        }
}

static int on_server_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        RenewServer *server = userdata;
        int r;

        r = server_read(server);
        if (r < 0) {
                log_warning_errno(r, "The mount renewal server went away: %m");
                server_stop(server, EPIPE);
        }
        return 0;
}

static int on_server_exit(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        RenewServer *server = userdata;
        int status = child_status(server->pidfd);

        server->pidfd = safe_close(server->pidfd);
        log_warning("The mount renewal server (pid %d) exited (status %d); started again when needed.",
                    (int) server->pid, status);
        server_stop(server, EPIPE);
        return 0;
}

static int spawn_server(const char *agent_path, int stdin_fd, pid_t *ret) {
        char *argv[] = { (char *) agent_path, (char *) "--renew-server", NULL };
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
        /* Nothing of ours goes in but its stdin (our socket) and stderr (the journal: what
         * failed); no signal blocked or caught, as for any new program. */
        if ((r = posix_spawn_file_actions_adddup2(&fa, stdin_fd, STDIN_FILENO)) == 0 &&
            (r = posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0)) == 0 &&
            (r = posix_spawn_file_actions_addclosefrom_np(&fa, 3)) == 0 &&
            (r = posix_spawnattr_setsigmask(&attr, &none)) == 0 &&
            (r = posix_spawnattr_setsigdefault(&attr, &all)) == 0 &&
            (r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) == 0)
                r = posix_spawn(ret, agent_path, &fa, &attr, argv, (char *[]) { NULL });
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        return -r;
}

static int server_start(RenewServer *server) {
        _cleanup_close_pair_ int fds[2] = { -EBADF, -EBADF };
        pid_t pid;
        int r;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) < 0)
                return -errno;
        if (fcntl(fds[0], F_SETFL, O_NONBLOCK) < 0)
                return -errno;
        r = spawn_server(server->agent_path, fds[1], &pid);
        if (r < 0)
                return r;
        server->pid = pid;
        server->fd = TAKE_FD(fds[0]);
        /* Our child, not yet reaped: its pid cannot name another process meanwhile. */
        server->pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (server->pidfd < 0) {
                r = -errno;
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                server_stop(server, 0);
                return r;
        }
        if ((r = sd_event_add_io(server->event, &server->io_source, server->fd, EPOLLIN, on_server_io, server)) < 0 ||
            (r = sd_event_add_io(server->event, &server->exit_source, server->pidfd, EPOLLIN, on_server_exit, server)) < 0) {
                server_stop(server, 0);
                return r;
        }
        log_debug("Started the mount renewal server (pid %d).", (int) pid);
        return 0;
}

int renew_server_new(sd_event *event, const char *agent_path, RenewServer **ret) {
        RenewServer *server;

        server = calloc(1, sizeof(RenewServer));
        if (!server)
                return -ENOMEM;
        *server = (RenewServer) { .event = sd_event_ref(event), .agent_path = strdup(agent_path), .fd = -EBADF,
                                  .pidfd = -EBADF, .next_id = 1 };
        if (!server->agent_path) {
                renew_server_free(server);
                return -ENOMEM;
        }
        *ret = server;
        return 0;
}

RenewServer *renew_server_free(RenewServer *server) {
        if (!server)
                return NULL;
        server_stop(server, 0);
        free(server->agent_path);
        sd_event_unref(server->event);
        return mfree(server);
}

pid_t renew_server_pid(RenewServer *server) {
        return server && server->fd >= 0 ? server->pid : 0;
}

MountRenewal *mount_renewal_free(MountRenewal *r) {
        char msg[64];
        int n;

        if (!r)
                return NULL;
        if (r->server) {
                RenewServer *server = r->server;

                /* Still at work: its child is killed. */
                n = snprintf(msg, sizeof(msg), "cancel %" PRIu64, r->id);
                (void) send(server->fd, msg, (size_t) n, MSG_NOSIGNAL | MSG_DONTWAIT);
                LIST_REMOVE(server->renewals, r);
                /* Given up on (its reset's deadline passed) while the server said nothing
                 * at all: it is stuck, not only this child. It goes, with what it still
                 * had, and a new one is started for the next renewal. */
                if (server->n_heard == r->heard_before && server->pidfd >= 0) {
                        log_warning("The mount renewal server (pid %d) does not answer; killing it.", (int) server->pid);
                        /* Its end is seen by the loop (on_server_exit), not in here: the
                         * renewals it fails are other sandboxes'. */
                        (void) syscall(SYS_pidfd_send_signal, server->pidfd, SIGKILL, NULL, 0);
                }
        }
        return mfree(r);
}

/* The request: "renew ID PID:UID:GID PATH=SIZE:MODE...". */
static int format_request(char *buf, size_t size, uint64_t id, pid_t agent_pid, uid_t uid, gid_t gid,
                          const MountRenew *mounts, size_t n_mounts) {
        size_t len;
        int n;

        n = snprintf(buf, size, "renew %" PRIu64 " %d:%u:%u", id, (int) agent_pid, (unsigned) uid, (unsigned) gid);
        if (n < 0 || (size_t) n >= size)
                return -EINVAL;
        len = (size_t) n;
        for (size_t i = 0; i < n_mounts; i++) {
                if (!mounts[i].path || mounts[i].path[0] != '/' || strpbrk(mounts[i].path, " \n") ||
                    (mounts[i].mode & ~07777) != 0)
                        return -EINVAL;
                n = snprintf(buf + len, size - len, " %s=%" PRIu64 ":%o", mounts[i].path, mounts[i].size,
                             (unsigned) mounts[i].mode);
                if (n < 0 || (size_t) n >= size - len)
                        return -EINVAL;
                len += (size_t) n;
        }
        return (int) len;
}

int mount_renewal_start(RenewServer *server, pid_t agent_pid, uid_t uid, gid_t gid, const MountRenew *mounts,
                        size_t n_mounts, mount_renewal_done_t done, void *userdata, MountRenewal **ret) {
        _cleanup_free_ MountRenewal *r = NULL;
        char msg[512];
        int len, k;

        if (!server || agent_pid <= 0 || n_mounts == 0 || n_mounts > MOUNT_RENEW_MAX || !done)
                return -EINVAL;
        len = format_request(msg, sizeof(msg), server->next_id, agent_pid, uid, gid, mounts, n_mounts);
        if (len < 0)
                return len;
        r = calloc(1, sizeof(MountRenewal));
        if (!r)
                return -ENOMEM;

        /* Never blocks: a server that takes no request (stuck, or dead and not reaped yet)
         * is killed, and one new one asked once. */
        for (int attempt = 0;; attempt++) {
                if (server->fd < 0) {
                        k = server_start(server);
                        if (k < 0)
                                return log_error_errno(k, "Failed to start the mount renewal server: %m");
                }
                if (send(server->fd, msg, (size_t) len, MSG_NOSIGNAL | MSG_DONTWAIT) == len)
                        break;
                k = errno == 0 ? -EIO : -errno;
                log_warning_errno(k, "The mount renewal server takes no request, killing it: %m");
                server_stop(server, EPIPE);
                if (attempt > 0)
                        return k;
        }

        *r = (MountRenewal) { .server = server, .id = server->next_id++, .heard_before = server->n_heard, .done = done,
                              .userdata = userdata };
        LIST_PREPEND(server->renewals, r);
        *ret = TAKE_PTR(r);
        return 0;
}
