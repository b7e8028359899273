/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * sandbox-init: PID 1 of every sandbox. It runs what sandboxd asks for over the control
 * socket on fd 3 (see agent-protocol.h), reports how each exec ended, reaps every orphan
 * of the sandbox, and exits when sandboxd closes the socket, which ends the sandbox.
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent-protocol.h"
#include "macro.h"
#include "strv.h"

struct exec_child {
        uint64_t id;
        pid_t pid;
        uint64_t start_usec;
};

struct agent {
        struct exec_child *children;
        size_t n_children;
};

static void json_object_putp(json_object **p) {
        if (*p)
                json_object_put(*p);
}
#define _cleanup_json_ _cleanup_(json_object_putp)

static _noreturn_ void die(const char *what, int error) {
        fprintf(stderr, "sandbox-init: %s: %s\n", what, strerror(error));
        exit(EXIT_FAILURE);
}

static uint64_t now_usec(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000U + (uint64_t) ts.tv_nsec / 1000U;
}

static uint64_t timeval_usec(const struct timeval *tv) {
        return (uint64_t) tv->tv_sec * 1000000U + (uint64_t) tv->tv_usec;
}

static int close_from(int fd) {
        /* close_range() is Linux 5.9+; Docker hosts may be older. */
        if (close_range(fd, ~0U, 0) >= 0)
                return 0;
        if (errno != ENOSYS)
                return -errno;
        for (long i = fd, m = sysconf(_SC_OPEN_MAX); i < m; i++)
                (void) close(i);
        return 0;
}

static void send_or_die(json_object *msg) {
        int r;

        if (!msg)
                die("Failed to build message", ENOMEM);
        r = agent_send(AGENT_CONTROL_FD, msg, NULL, 0);
        json_object_put(msg);
        /* sandboxd is gone: nothing left to report to, so end the sandbox as on EOF. */
        if (r == -EPIPE || r == -ECONNRESET)
                exit(EXIT_SUCCESS);
        if (r < 0)
                die("Failed to send message", -r);
}

static void send_exit(const struct agent_exit *e) {
        send_or_die(agent_msg_exit(e));
}

static _noreturn_ void child_fail(const char *what, int status) {
        dprintf(STDERR_FILENO, "sandbox-init: %s: %s\n", what, strerror(errno));
        _exit(status);
}

static _noreturn_ void exec_child(char **argv, char **env, const char *cwd, const int fds[static 3]) {
        extern char **environ;
        sigset_t mask;
        int moved[3];

        /* What we blocked or ignored would otherwise survive execve(). Dispositions first,
         * so that a "kill" already pending acts as it would on the command. */
        for (int sig = 1; sig < _NSIG; sig++)
                (void) signal(sig, SIG_DFL);
        sigemptyset(&mask);
        (void) sigprocmask(SIG_SETMASK, &mask, NULL);

        /* Own session and process group, so that "kill" reaches everything it started. */
        if (setsid() < 0)
                _exit(125);

        /* Move the descriptors above 2 first: one of them may already be 0, 1 or 2. */
        for (size_t i = 0; i < 3; i++) {
                moved[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
                if (moved[i] < 0)
                        _exit(125);
        }
        for (int i = 0; i < 3; i++)
                if (dup2(moved[i], i) < 0)
                        _exit(125);
        if (close_from(3) < 0)
                _exit(125);

        if (cwd && chdir(cwd) < 0)
                child_fail(cwd, 125);

        /* execvpe() searches the PATH of environ, and it is the caller's PATH that counts. */
        environ = env;
        execvpe(argv[0], argv, env);
        child_fail(argv[0], errno == ENOENT ? 127 : 126);
}

static void handle_exec(struct agent *a, json_object *msg, int fds[], size_t n_fds) {
        _cleanup_strv_free_ char **argv = NULL, **env = NULL;
        struct exec_child *c;
        const char *cwd = NULL;
        uint64_t start;
        int64_t id;
        pid_t pid;

        if (agent_get_int64(msg, "id", &id) < 0 || id < 0)
                return;

        /* A bad request still gets its "exit", so sandboxd does not wait for it forever. */
        if (n_fds != AGENT_EXEC_NFDS ||
            agent_get_strv(msg, "argv", &argv) < 0 || !argv[0] ||
            agent_get_strv(msg, "env", &env) < 0 ||
            (json_object_object_get_ex(msg, "cwd", NULL) && agent_get_string(msg, "cwd", &cwd) < 0))
                goto fail;

        c = realloc(a->children, (a->n_children + 1) * sizeof(struct exec_child));
        if (!c)
                goto fail;
        a->children = c;

        start = now_usec();
        pid = fork();
        if (pid < 0)
                goto fail; /* most likely the unit's TasksMax */
        if (pid == 0)
                exec_child(argv, env, cwd, fds);

        a->children[a->n_children++] = (struct exec_child) { .id = id, .pid = pid, .start_usec = start };
        return;

fail:
        send_exit(&(struct agent_exit) { .id = id, .code = 125 });
}

static void handle_kill(struct agent *a, json_object *msg) {
        int64_t id, sig;

        if (agent_get_int64(msg, "id", &id) < 0 || agent_get_int64(msg, "signal", &sig) < 0)
                return;
        if (sig < 1 || sig > 64)
                return;

        for (size_t i = 0; i < a->n_children; i++)
                if (a->children[i].id == (uint64_t) id) {
                        pid_t pid = a->children[i].pid;

                        /* Before its setsid() the child has no group of its own yet; it is
                         * then also alone, not having exec'd anything that could fork. */
                        if (kill(-pid, (int) sig) < 0 && errno == ESRCH)
                                (void) kill(pid, (int) sig);
                        return;
                }
}

static void handle_message(struct agent *a) {
        _cleanup_json_ json_object *msg = NULL;
        int fds[AGENT_EXEC_NFDS + 1];
        size_t n_fds = 0;
        const char *type;
        int r;

        /* One slot more than exec needs, so that "too many" can be told from "exactly 3". */
        r = agent_recv(AGENT_CONTROL_FD, &msg, fds, ELEMENTSOF(fds), &n_fds);
        if (r == -ECONNRESET)
                exit(EXIT_SUCCESS);
        if (r == -EAGAIN || r == -EINTR || r == -EBADMSG)
                return; /* spurious wakeup, or a datagram not worth acting on */
        if (r < 0)
                die("Failed to receive message", -r);

        if (agent_get_string(msg, "type", &type) >= 0) {
                if (streq(type, "exec"))
                        handle_exec(a, msg, fds, n_fds);
                else if (streq(type, "kill"))
                        handle_kill(a, msg);
        }

        for (size_t i = 0; i < n_fds; i++)
                safe_close(fds[i]);
}

static void reap_children(struct agent *a) {
        for (;;) {
                struct rusage ru;
                int status;
                pid_t pid;

                pid = wait4(-1, &status, WNOHANG, &ru);
                if (pid <= 0)
                        return; /* 0: none left exited; ECHILD: no children at all */

                for (size_t i = 0; i < a->n_children; i++) {
                        struct exec_child *c = a->children + i;

                        if (c->pid != pid)
                                continue;

                        send_exit(&(struct agent_exit) {
                                .id = c->id,
                                .code = WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                                .signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0,
                                .duration_usec = now_usec() - c->start_usec,
                                .utime_usec = timeval_usec(&ru.ru_utime),
                                .stime_usec = timeval_usec(&ru.ru_stime),
                                .maxrss_kb = ru.ru_maxrss > 0 ? (uint64_t) ru.ru_maxrss : 0,
                        });
                        *c = a->children[--a->n_children];
                        break;
                }
        }
}

/* Returns the signal that asks the agent to terminate, or 0. */
static int handle_signals(struct agent *a, int sfd) {
        struct signalfd_siginfo si;
        bool reap = false;

        while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                if (si.ssi_signo == SIGCHLD)
                        reap = true;
                else
                        return (int) si.ssi_signo;
        }
        if (reap)
                reap_children(a);
        return 0;
}

int main(void) {
        struct agent a = {};
        sigset_t mask;
        int sfd, type, r;
        socklen_t sl = sizeof(type);

        /* Sandboxed code runs as our uid: without this it could ptrace us, or open our fds
         * through /proc/1/fd, and so speak to sandboxd in our name. */
        if (prctl(PR_SET_DUMPABLE, 0) < 0)
                die("PR_SET_DUMPABLE", errno);

        if (getsockopt(AGENT_CONTROL_FD, SOL_SOCKET, SO_TYPE, &type, &sl) < 0)
                die("control socket (fd 3)", errno);
        if (type != SOCK_SEQPACKET)
                die("control socket (fd 3)", ENOTSOCK);

        r = close_from(AGENT_CONTROL_FD + 1);
        if (r < 0)
                die("Failed to close inherited descriptors", -r);

        /* As PID 1 we get only the signals we handle; those are read from a signalfd, so
         * that SIGCHLD is seen by the same poll() as the socket. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                die("sigprocmask", errno);
        (void) signal(SIGPIPE, SIG_IGN);

        sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
        if (sfd < 0)
                die("signalfd", errno);

        /* When not PID 1 (a test, docker --init), still be the one that reaps orphans. */
        (void) prctl(PR_SET_CHILD_SUBREAPER, 1);

        send_or_die(agent_msg_ready());

        for (;;) {
                struct pollfd p[] = {
                        { .fd = sfd, .events = POLLIN },
                        { .fd = AGENT_CONTROL_FD, .events = POLLIN },
                };

                if (poll(p, ELEMENTSOF(p), -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        die("poll", errno);
                }

                if (p[0].revents) {
                        r = handle_signals(&a, sfd);
                        /* Asked to stop (docker stop, say): our exit takes the sandbox with it. */
                        if (r > 0)
                                exit(128 + r);
                }
                if (p[1].revents)
                        handle_message(&a);
        }
}
