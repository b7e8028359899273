/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * sandbox-init: PID 1 of every sandbox. It runs what sandboxd asks for over the control
 * socket on fd 3 (see agent-protocol.h), reports how each exec ended, reaps every orphan
 * of the sandbox, and exits when sandboxd closes the socket, which ends the sandbox.
 * Whatever could block (a terminal session's relay, a file operation) runs in a child of
 * its own, so that this loop only ever waits in poll().
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "json-util.h"
#include "sandbox-init.h"
#include "strv.h"
#include "time-util.h"

struct exec_child {
        uint64_t id;
        pid_t pid;
        uint64_t start_usec;
        int tty_fd;        /* a tty exec's master, for "resize"; -EBADF otherwise */
        pid_t relay_pid;   /* a tty exec's relay, while it runs; 0 otherwise */
};

/* A file operation in progress: its process sends the result, unless it dies first. */
struct file_child {
        uint64_t id;
        pid_t pid;
        bool stops_others;    /* "archive": it stops every other process while it runs */
};

struct agent {
        struct exec_child *children;
        size_t n_children;
        struct file_child *files;
        size_t n_files;
        /* A "reset" in progress: its id, and until when its processes may take to go. */
        bool resetting;
        uint64_t reset_id;
        uint64_t reset_deadline;
};

static _noreturn_ void die(const char *what, int error) {
        fprintf(stderr, "sandbox-init: %s: %s\n", what, strerror(error));
        exit(EXIT_FAILURE);
}

static uint64_t timeval_usec(const struct timeval *tv) {
        return (uint64_t) tv->tv_sec * 1000000U + (uint64_t) tv->tv_usec;
}

int close_between(int from, int to) {
        /* close_range() is Linux 5.9+; Docker hosts may be older. */
        if (from > to)
                return 0;
        if (close_range((unsigned) from, (unsigned) to, 0) >= 0)
                return 0;
        if (errno != ENOSYS)
                return -errno;
        for (long i = from, m = MIN((long) to + 1, sysconf(_SC_OPEN_MAX)); i < m; i++)
                (void) close((int) i);
        return 0;
}

static int close_from(int fd) {
        return close_between(fd, INT_MAX);
}

static int cmp_int(const void *a, const void *b) {
        return *(const int *) a - *(const int *) b;
}

int close_all_but(const int *keep, size_t n_keep) {
        int sorted[8], from = 3, r;
        size_t n = 0;

        if (n_keep > ELEMENTSOF(sorted))
                return -EINVAL;
        for (size_t i = 0; i < n_keep; i++)
                if (keep[i] >= 3)
                        sorted[n++] = keep[i];
        qsort(sorted, n, sizeof(int), cmp_int);

        for (size_t i = 0; i < n; i++) {
                r = close_between(from, sorted[i] - 1);
                if (r < 0)
                        return r;
                from = MAX(from, sorted[i] + 1);
        }
        return close_between(from, INT_MAX);
}

/* --log-over-control: the read end of the pipe that is our stderr once we are ready. */
static int log_fd = -EBADF;

static void forward_log(void);

static void send_or_die(json_object *msg) {
        int r;

        if (!msg)
                die("Failed to build message", ENOMEM);
        /* What was said before this message goes before it (a reset's complaints before
         * its result: sandboxd logs them under the user they were about). */
        forward_log();
        r = agent_send(AGENT_CONTROL_FD, msg, NULL, 0);
        json_object_put(msg);
        /* sandboxd is gone: nothing left to report to, so end the sandbox as on EOF. */
        if (r == -EPIPE || r == -ECONNRESET)
                exit(EXIT_SUCCESS);
        if (r < 0)
                die("Failed to send message", -r);
}

/* What we and our helper processes wrote to stderr, to sandboxd as "log" messages (a
 * bounded number at a time: a helper writing on cannot keep us here). */
static void forward_log(void) {
        char buf[AGENT_LOG_CHUNK];

        for (unsigned i = 0; log_fd >= 0 && i < 16; i++) {
                json_object *msg;
                ssize_t n;
                int r;

                n = read(log_fd, buf, sizeof(buf));
                if (n <= 0)
                        return; /* EAGAIN: nothing more for now (never EOF: fd 2 is ours) */
                msg = agent_msg_log(buf, (size_t) n);
                if (!msg)
                        return;
                r = agent_send(AGENT_CONTROL_FD, msg, NULL, 0);
                json_object_put(msg);
                if (r == -EPIPE || r == -ECONNRESET)
                        exit(EXIT_SUCCESS);
                if (r < 0)
                        return;
        }
}

/* Our stderr becomes a pipe of our own, forwarded by forward_log(): sandboxd keeps no
 * pipe of ours once we are ready. Non-blocking for the writers, as sandboxd's was: a
 * full pipe drops a message rather than stop a helper. */
static int log_over_control(void) {
        int p[2];

        if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
                return -errno;
        if (dup2(p[1], STDERR_FILENO) < 0) {
                int r = -errno;
                close(p[0]);
                close(p[1]);
                return r;
        }
        close(p[1]);
        log_fd = p[0];
        return 0;
}

static void send_exit(const struct agent_exit *e) {
        send_or_die(agent_msg_exit(e));
}

static void send_file_error(uint64_t id, int error) {
        send_or_die(agent_msg_file_result(&(struct agent_file_result) { .id = id, .error = error }));
}

static _noreturn_ void child_fail(const char *what, int status) {
        dprintf(STDERR_FILENO, "sandbox-init: %s: %s\n", what, strerror(errno));
        _exit(status);
}

static _noreturn_ void exec_child(char **argv, char **env, const char *cwd, const int fds[static 3], bool tty) {
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

        /* The terminal (0, 1 and 2 now) becomes the session's, as login(1) would have it. */
        if (tty && ioctl(STDIN_FILENO, TIOCSCTTY, 0) < 0)
                _exit(125);

        if (cwd && chdir(cwd) < 0)
                child_fail(cwd, 125);

        /* execvpe() searches the PATH of environ, and it is the caller's PATH that counts. */
        environ = env;
        execvpe(argv[0], argv, env);
        child_fail(argv[0], errno == ENOENT ? 127 : 126);
}

/* The relay of a tty exec: a process of its own, outside the exec's process group, so
 * that a "kill" of the session does not cut off what it printed last. */
static pid_t relay_spawn(int master, int in, int out) {
        pid_t pid = fork();

        if (pid == 0)
                tty_relay(master, in, out);
        return pid;
}

static void handle_exec(struct agent *a, json_object *msg, int fds[], size_t n_fds) {
        _cleanup_strv_free_ char **argv = NULL, **env = NULL;
        _cleanup_close_ int master = -EBADF, slave = -EBADF;
        struct agent_winsize ws;
        struct exec_child *c;
        const char *cwd = NULL;
        pid_t pid, relay = 0;
        uint64_t start;
        int64_t id;
        int tty;

        if (agent_get_int64(msg, "id", &id) < 0 || id < 0)
                return;

        /* A bad request still gets its "exit", so sandboxd does not wait for it forever. */
        if (n_fds != AGENT_EXEC_NFDS ||
            agent_get_strv(msg, "argv", &argv) < 0 || !argv[0] ||
            agent_get_strv(msg, "env", &env) < 0 ||
            (json_object_object_get_ex(msg, "cwd", NULL) && agent_get_string(msg, "cwd", &cwd) < 0) ||
            (tty = agent_parse_exec_tty(msg, &ws)) < 0)
                goto fail;

        c = realloc(a->children, (a->n_children + 1) * sizeof(struct exec_child));
        if (!c)
                goto fail;
        a->children = c;

        if (tty) {
                if (pty_open(&ws, &master, &slave) < 0)
                        goto fail;
                /* The relay first: should the exec not start, our closing the slave is
                 * the relay's EIO, and it ends by itself. */
                relay = relay_spawn(master, fds[0], fds[1]);
                if (relay < 0)
                        goto fail;
        }

        start = now_usec(CLOCK_MONOTONIC);
        pid = fork();
        if (pid < 0)
                goto fail; /* most likely the unit's TasksMax */
        if (pid == 0)
                exec_child(argv, env, cwd, tty ? (int[]) { slave, slave, slave } : fds, tty);

        a->children[a->n_children++] = (struct exec_child) {
                .id = id,
                .pid = pid,
                .start_usec = start,
                .tty_fd = TAKE_FD(master),
                .relay_pid = relay,
        };
        send_or_die(agent_msg_started(id, pid));
        return;

fail:
        send_exit(&(struct agent_exit) { .id = id, .code = 125 });
}

static void handle_resize(struct agent *a, json_object *msg) {
        struct agent_winsize ws;
        uint64_t id;

        if (agent_parse_resize(msg, &id, &ws) < 0)
                return;

        for (size_t i = 0; i < a->n_children; i++)
                if (a->children[i].id == id && a->children[i].tty_fd >= 0) {
                        /* The kernel sends the session's foreground SIGWINCH. */
                        (void) ioctl(a->children[i].tty_fd, TIOCSWINSZ,
                                     &(struct winsize) { .ws_row = ws.rows, .ws_col = ws.cols });
                        break;
                }
        /* Answered either way: the daemon holds the input back until then. */
        send_or_die(agent_msg_resized(id));
}

static void handle_file(struct agent *a, json_object *msg, int fds[], size_t n_fds) {
        struct agent_file f;
        struct file_child *c;
        int64_t id;
        pid_t pid;

        if (agent_get_int64(msg, "id", &id) < 0 || id < 0)
                return;

        /* As for exec: a bad request with an id is answered, here with EINVAL. */
        if (agent_parse_file(msg, &f) < 0 || n_fds != agent_file_op_nfds(f.op)) {
                send_file_error(id, EINVAL);
                return;
        }

        /* sandboxd sends at most FILE_OPS_ACTIVE_MAX at a time; this bound holds for any
         * sender, so that no number of requests makes us fork without end. */
        if (a->n_files >= AGENT_FILE_OPS_MAX) {
                send_file_error(id, EBUSY);
                return;
        }

        c = realloc(a->files, (a->n_files + 1) * sizeof(struct file_child));
        if (!c) {
                send_file_error(id, ENOMEM);
                return;
        }
        a->files = c;

        pid = fork();
        if (pid < 0) {
                send_file_error(id, errno);
                return;
        }
        if (pid == 0)
                file_op_run(&f, n_fds > 0 ? fds[0] : -EBADF);

        a->files[a->n_files++] = (struct file_child) { .id = id, .pid = pid,
                                                       .stops_others = f.op == AGENT_FILE_ARCHIVE };
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

        /* A file op whose caller went away: its result is then EIO, from reap_children(). */
        for (size_t i = 0; i < a->n_files; i++)
                if (a->files[i].id == (uint64_t) id) {
                        (void) kill(a->files[i].pid, (int) sig);
                        return;
                }
}

/* The reset is over: what we knew of execs and file ops went with their processes. */
static void reset_finish(struct agent *a, int error) {
        for (size_t i = 0; i < a->n_children; i++)
                safe_close(a->children[i].tty_fd);
        a->n_children = 0;
        a->n_files = 0;
        a->resetting = false;
        if (error == 0) {
                int r = agent_reset_ipc();
                if (r >= 0)
                        r = agent_traits_restore();
                if (r < 0)
                        error = -r;
        }
        send_or_die(agent_msg_reset_result(a->reset_id, error));
}

static void reset_progress(struct agent *a) {
        int r = agent_reset_reap();

        if (r != 0)
                reset_finish(a, r > 0 ? 0 : -r);
        else if (now_usec(CLOCK_MONOTONIC) >= a->reset_deadline)
                /* Still there: in uninterruptible sleep, say. sandboxd destroys the sandbox. */
                reset_finish(a, ETIMEDOUT);
}

/* What sandboxd needs of the sandbox's network namespace, made in it (OpenPort, ListPorts:
 * docs/PORTS.md): two TCP sockets, IPv4 and IPv6, to connect to the loopback with, or
 * /proc/self/net/tcp and tcp6 to read the listening sockets from. Making them is all the
 * agent does; sandboxd connects and reads. */
static void handle_port_fds(json_object *msg) {
        int fds[2] = { -EBADF, -EBADF };
        json_object *reply;
        const char *kind;
        int64_t id;
        size_t n = 0;
        int error = 0, r;

        if (agent_get_int64(msg, "id", &id) < 0 || agent_get_string(msg, "kind", &kind) < 0)
                return;
        if (streq(kind, "connect")) {
                fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
                fds[1] = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
        } else if (streq(kind, "list")) {
                fds[0] = open("/proc/self/net/tcp", O_RDONLY | O_CLOEXEC);
                fds[1] = open("/proc/self/net/tcp6", O_RDONLY | O_CLOEXEC);
        } else
                errno = EINVAL;
        if (fds[0] < 0)
                error = errno;
        else
                n = fds[1] >= 0 ? 2 : 1;
        reply = agent_msg_port_fds_result((uint64_t) id, error);
        if (!reply)
                die("Failed to build message", ENOMEM);
        r = agent_send(AGENT_CONTROL_FD, reply, n > 0 ? fds : NULL, n);
        json_object_put(reply);
        safe_close(fds[0]);
        safe_close(fds[1]);
        if (r == -EPIPE || r == -ECONNRESET)
                exit(EXIT_SUCCESS);
        if (r < 0)
                die("Failed to send message", -r);
}

static void handle_reset(struct agent *a, json_object *msg) {
        int64_t id;
        int r;

        if (agent_get_int64(msg, "id", &id) < 0 || id < 0 || a->resetting)
                return;
        a->resetting = true;
        a->reset_id = (uint64_t) id;
        a->reset_deadline = now_usec(CLOCK_MONOTONIC) + AGENT_RESET_TIMEOUT_USEC;
        r = agent_reset_begin();
        if (r < 0) {
                reset_finish(a, -r);
                return;
        }
        reset_progress(a);
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
                else if (streq(type, "resize"))
                        handle_resize(a, msg);
                else if (streq(type, "file"))
                        handle_file(a, msg, fds, n_fds);
                else if (streq(type, "reset"))
                        handle_reset(a, msg);
                else if (streq(type, "port-fds"))
                        handle_port_fds(msg);
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

                        /* The relay ended (the caller's side went away, or the session
                         * closed the terminal): our master goes too, and with the last of
                         * them the session gets its SIGHUP, as when a terminal closes. */
                        if (c->relay_pid == pid) {
                                c->relay_pid = 0;
                                c->tty_fd = safe_close(c->tty_fd);
                                break;
                        }

                        if (c->pid != pid)
                                continue;

                        send_exit(&(struct agent_exit) {
                                .id = c->id,
                                .code = WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                                .signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0,
                                .duration_usec = now_usec(CLOCK_MONOTONIC) - c->start_usec,
                                .utime_usec = timeval_usec(&ru.ru_utime),
                                .stime_usec = timeval_usec(&ru.ru_stime),
                                .maxrss_kb = ru.ru_maxrss > 0 ? (uint64_t) ru.ru_maxrss : 0,
                        });
                        safe_close(c->tty_fd);
                        *c = a->children[--a->n_children];
                        break;
                }

                for (size_t i = 0; i < a->n_files; i++) {
                        struct file_child *c = a->files + i;

                        if (c->pid != pid)
                                continue;
                        /* It exits 0 once it has sent its result: otherwise it died before
                         * (OOM killer, say), and sandboxd must not wait for it forever. */
                        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                                send_file_error(c->id, EIO);
                                /* An archive killed (cancelled, or by the OOM killer) before
                                 * it continued the processes it stopped: we do. */
                                if (c->stops_others)
                                        (void) kill(-1, SIGCONT);
                        }
                        *c = a->files[--a->n_files];
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
                else if (si.ssi_pid == 0)
                        /* From outside the sandbox's PID namespace (sender pid 0 here): a
                         * request to end. From inside it is the sandboxed code's, and as
                         * PID 1 we do not take orders from it. */
                        return (int) si.ssi_signo;
        }
        if (reap) {
                /* During a reset, what ends was killed by it: no "exit" is owed. */
                if (a->resetting)
                        reset_progress(a);
                else
                        reap_children(a);
        }
        return 0;
}

/* --hold: a process that only keeps a unit alive (a Docker sandbox's scope, whose real
 * processes are the container's, started by dockerd). It waits to be killed. */
_noreturn_ static void hold(void) {
        sigset_t all;

        sigfillset(&all);
        (void) sigprocmask(SIG_BLOCK, &all, NULL);
        (void) close_from(0);
        for (;;)
                (void) sigsuspend(&all);
}

/* --egress: the listener of the egress proxy (sandboxd-egress(8)), 127.0.0.1:3128 in the
 * sandbox's own network namespace, bound before any of the sandbox's code runs (so that
 * no one else has the port), handed to sandboxd with "ready", and not kept: the proxy
 * accepts on it, outside the sandbox. */
static int egress_listen(void) {
        struct sockaddr_in sa = {
                .sin_family = AF_INET,
                .sin_port = htons(AGENT_EGRESS_PORT),
                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        };
        int fd;

        /* No SO_REUSEADDR or SO_REUSEPORT: nothing else can bind the port beside it. */
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                die("egress socket", errno);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                die("egress bind 127.0.0.1:3128", errno);
        if (listen(fd, SOMAXCONN) < 0)
                die("egress listen", errno);
        return fd;
}

/* --connect PATH: where no descriptor can be inherited (a container), the control socket
 * is a SOCK_SEQPACKET socket sandboxd listens on, bind-mounted in. */
static void connect_control(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;

        if (strlen(path) >= sizeof(sa.sun_path))
                die(path, ENAMETOOLONG);
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                die("socket", errno);
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                die(path, errno);
        if (fd != AGENT_CONTROL_FD) {
                if (dup2(fd, AGENT_CONTROL_FD) < 0)
                        die("dup2", errno);
                close(fd);
        } else if (fcntl(fd, F_SETFD, 0) < 0)
                die("fcntl", errno);
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "connect",        required_argument, NULL, 'c' },
                { "user-namespace", required_argument, NULL, 'u' },
                { "seccomp",        required_argument, NULL, 's' },
                { "hold",           no_argument,       NULL, 'H' },
                { "egress",         no_argument,       NULL, 'e' },
                { "renew-server",   no_argument,       NULL, 'R' },
                { "archive-workspace", no_argument,    NULL, 'A' },
                { "log-over-control", no_argument,     NULL, 'L' },
                { "empty-dev-shm",  no_argument,       NULL, 'E' },
                {}
        };
        const char *connect_path = NULL, *seccomp_path = NULL;
        unsigned inner_uid, inner_gid;
        bool userns = false, egress = false, log_over = false, empty_shm = false;
        struct agent a = {};
        sigset_t mask;
        int sfd, type, c, r;
        socklen_t sl = sizeof(type);
        char end;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'c':
                        connect_path = optarg;
                        break;
                case 'u':
                        if (sscanf(optarg, "%u:%u%c", &inner_uid, &inner_gid, &end) != 2)
                                die("--user-namespace takes UID:GID", EINVAL);
                        userns = true;
                        break;
                case 's':
                        seccomp_path = optarg;
                        break;
                case 'e':
                        egress = true;
                        break;
                case 'L':
                        log_over = true;
                        break;
                case 'E':
                        empty_shm = true;
                        break;
                case 'H':
                        hold();
                case 'R':
                        exit(agent_renew_server());
                case 'A':
                        exit(agent_archive_workspace());
                default:
                        die("usage: sandbox-init [--connect PATH] [--user-namespace UID:GID] [--seccomp FILE] [--egress] [--log-over-control] [--empty-dev-shm] | --hold | --renew-server | --archive-workspace",
                            EINVAL);
                }
        if (optind != argc)
                die("unexpected argument", EINVAL);

        /* Before anything else: what the sandbox is confined by is in place before the
         * first of its processes starts (they are all ours). */
        if (userns) {
                r = agent_enter_user_namespace((uid_t) inner_uid, (gid_t) inner_gid);
                if (r < 0)
                        die("Failed to set up the user namespace", -r);
                if (r > 0)
                        /* The host's uid of its own still holds; only the name inside differs. */
                        fprintf(stderr, "sandbox-init: no user namespace (%s): the sandbox runs as uid %u, not %u.\n",
                                strerror(r), (unsigned) getuid(), inner_uid);
        }
        if (seccomp_path) {
                r = agent_load_seccomp(seccomp_path);
                if (r < 0)
                        die(seccomp_path, -r);
        }
        if (connect_path)
                connect_control(connect_path);

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

        /* A sandbox on disk keeps its /dev/shm (a directory of its workspace) across its
         * stops: what was there is gone once it starts again, as after a boot. sandboxd
         * sets an old one aside before the start, so this normally finds it empty; when
         * it could not, the work is here. Before "ready", so that no command of the
         * sandbox's runs meanwhile; as the sandbox's uid, in its namespaces, never
         * following a link it made. */
        if (empty_shm) {
                unsigned left = 0;

                r = agent_empty_dir("/dev/shm", &left);
                if (r < 0)
                        fprintf(stderr, "sandbox-init: cannot empty /dev/shm: %s\n", strerror(-r));
                else if (left > 0)
                        fprintf(stderr, "sandbox-init: %u entries of /dev/shm could not be removed.\n", left);
        }

        /* When not PID 1 (a test, docker --init), still be the one that reaps orphans. */
        (void) prctl(PR_SET_CHILD_SUBREAPER, 1);

        /* Last before "ready": sandboxd closes its pipe when it reads that. */
        if (log_over) {
                r = log_over_control();
                if (r < 0)
                        fprintf(stderr, "sandbox-init: cannot forward our stderr, our later messages are lost: %s\n",
                                strerror(-r));
        }

        if (egress) {
                int lfd = egress_listen();
                json_object *ready = agent_msg_ready();

                if (!ready)
                        die("Failed to build message", ENOMEM);
                r = agent_send(AGENT_CONTROL_FD, ready, &lfd, 1);
                json_object_put(ready);
                if (r < 0)
                        die("Failed to send ready", -r);
                close(lfd);
        } else
                send_or_die(agent_msg_ready());

        /* As the next user of a recycled sandbox must find us again. Not fatal: without
         * it, a reset fails (the sandbox is destroyed rather than reused). */
        r = agent_traits_save();
        if (r < 0)
                fprintf(stderr, "sandbox-init: cannot read our limits, this sandbox cannot be recycled: %s\n",
                        strerror(-r));

        for (;;) {
                struct pollfd p[] = {
                        { .fd = sfd, .events = POLLIN },
                        { .fd = AGENT_CONTROL_FD, .events = POLLIN },
                        { .fd = log_fd, .events = POLLIN }, /* ignored while -EBADF */
                };

                int timeout = -1;

                /* While a reset waits for its processes: woken to give up at its deadline. */
                if (a.resetting) {
                        uint64_t now = now_usec(CLOCK_MONOTONIC);
                        timeout = a.reset_deadline > now ? (int) ((a.reset_deadline - now + 999) / 1000) : 0;
                }
                r = poll(p, ELEMENTSOF(p), timeout);
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        die("poll", errno);
                }
                if (r == 0 && a.resetting)
                        reset_progress(&a);

                if (p[0].revents) {
                        r = handle_signals(&a, sfd);
                        /* Asked to stop (docker stop, say): our exit takes the sandbox with it. */
                        if (r > 0)
                                exit(128 + r);
                }
                if (p[1].revents)
                        handle_message(&a);
                if (p[2].revents)
                        forward_log();
        }
}
