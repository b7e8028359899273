/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The real sandbox-init ($SANDBOX_INIT), driven over its control socket as sandboxd does,
 * but without bwrap: it is not PID 1 here, so it reaps orphans as a child subreaper.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <seccomp.h>

#include "agent-protocol.h"
#include "macro.h"
#include "seccomp-policy.h"
#include "strv.h"

#define TIMEOUT_MSEC 10000

static const char *agent_path;
static char self_path[PATH_MAX];
static char *default_env[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL };

static void json_object_putp(json_object **p) {
        if (*p)
                json_object_put(*p);
}
#define _cleanup_json_ _cleanup_(json_object_putp)

struct agent {
        pid_t pid;
        int sock;
};

struct agent_options {
        int leak_fd;     /* an fd left open, without CLOEXEC, across the agent's execve() */
        bool as_nobody;  /* when root, run the agent as uid 65534 */
        char **args;     /* the agent's options */
        bool no_userns;  /* the agent may not make user namespaces (as where the kernel refuses) */
        int stderr_fd;   /* > 0: the agent's stderr */
};

static uint64_t now_msec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static bool wait_readable(int fd, int timeout_msec) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int r;

        do
                r = poll(&p, 1, timeout_msec);
        while (r < 0 && errno == EINTR);
        assert_return_code(r, errno);
        return r > 0;
}

static json_object *recv_msg(struct agent *a) {
        json_object *msg = NULL;

        assert_true(wait_readable(a->sock, TIMEOUT_MSEC));
        assert_int_equal(agent_recv(a->sock, &msg, NULL, 0, NULL), 0);
        return msg;
}

static void expect_silence(struct agent *a, int msec) {
        assert_false(wait_readable(a->sock, msec));
}

static void agent_start_with(struct agent *a, const struct agent_options *o) {
        _cleanup_json_ json_object *ready = NULL;
        const char *type;
        int64_t version;
        int sv[2];

        assert_return_code(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), errno);
        a->pid = fork();
        assert_return_code(a->pid, errno);
        if (a->pid == 0) {
                /* A dirty environment, so that the tests see nothing of it leak to execs. */
                setenv("SANDBOXD_TEST_LEAK", "1", 1);
                if (dup2(sv[1], AGENT_CONTROL_FD) < 0)
                        _exit(90);
                if (o && o->leak_fd >= 0 && fcntl(o->leak_fd, F_SETFD, 0) < 0)
                        _exit(91);
                if (o && o->stderr_fd > 0 && dup2(o->stderr_fd, STDERR_FILENO) < 0)
                        _exit(96);
                if (o && o->as_nobody && geteuid() == 0 &&
                    (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0))
                        _exit(92);
                if (o && o->no_userns) {
                        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
                        if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 0) < 0 ||
                            seccomp_load(ctx) < 0)
                                _exit(95);
                }
                if (o && o->args) {
                        char *argv[16] = { (char *) "sandbox-init" };
                        for (size_t k = 1; o->args[k - 1] && k < ELEMENTSOF(argv) - 1; k++)
                                argv[k] = o->args[k - 1];
                        execv(agent_path, argv);
                } else
                        execl(agent_path, "sandbox-init", NULL);
                _exit(93);
        }
        safe_close(sv[1]);
        a->sock = sv[0];

        ready = recv_msg(a);
        assert_int_equal(agent_get_string(ready, "type", &type), 0);
        assert_string_equal(type, "ready");
        assert_int_equal(agent_get_int64(ready, "version", &version), 0);
        assert_int_equal(version, AGENT_PROTOCOL_VERSION);
}

/* Closes the socket and returns how the agent ended (a wait status), -1 on timeout. */
static int agent_stop(struct agent *a) {
        uint64_t deadline = now_msec() + TIMEOUT_MSEC;
        int status;

        a->sock = safe_close(a->sock);
        if (a->pid <= 0)
                return 0;
        for (;;) {
                pid_t p = waitpid(a->pid, &status, WNOHANG);

                if (p == a->pid)
                        break;
                if (p < 0 || now_msec() > deadline) {
                        (void) kill(a->pid, SIGKILL);
                        (void) waitpid(a->pid, NULL, 0);
                        a->pid = 0;
                        return -1;
                }
                usleep(2000);
        }
        a->pid = 0;
        return status;
}

static int agent_setup(void **state) {
        struct agent *a = calloc(1, sizeof(*a));

        if (!a)
                return -1;
        *state = a;
        agent_start_with(a, NULL);
        return 0;
}

static int agent_teardown(void **state) {
        struct agent *a = *state;
        int status = agent_stop(a);

        free(a);
        /* Every test also checks that closing the socket ends the agent, cleanly. */
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

struct run {
        int in;  /* our end of its stdin */
        int out; /* our end of its stdout */
        int err; /* our end of its stderr */
        pid_t pid; /* as "started" said */
};

static void run_close(struct run *r) {
        r->in = safe_close(r->in);
        r->out = safe_close(r->out);
        r->err = safe_close(r->err);
}

static void expect_started(struct agent *a, uint64_t id, pid_t *ret_pid) {
        _cleanup_json_ json_object *msg = recv_msg(a);
        const char *type;
        uint64_t got_id;

        assert_int_equal(agent_get_string(msg, "type", &type), 0);
        assert_string_equal(type, "started");
        assert_int_equal(agent_parse_started(msg, &got_id, ret_pid), 0);
        assert_int_equal(got_id, id);
}

/* Starts argv (on a terminal of size ws, if given) and waits for its "started". */
static void exec_start_tty(struct agent *a, uint64_t id, char **argv, char **env, const char *cwd,
                           const struct agent_winsize *ws, struct run *ret) {
        _cleanup_json_ json_object *msg = NULL;
        int in[2], out[2], err[2], fds[3];

        assert_return_code(pipe2(in, O_CLOEXEC), errno);
        assert_return_code(pipe2(out, O_CLOEXEC), errno);
        assert_return_code(pipe2(err, O_CLOEXEC), errno);

        msg = ws ? agent_msg_exec_tty(id, argv, env, cwd, ws) : agent_msg_exec(id, argv, env, cwd);
        assert_non_null(msg);
        fds[0] = in[0];
        fds[1] = out[1];
        fds[2] = err[1];
        assert_int_equal(agent_send(a->sock, msg, fds, 3), 0);

        /* Only the process holds the other ends now, so EOF means it (and its kin) are done. */
        safe_close(in[0]);
        safe_close(out[1]);
        safe_close(err[1]);
        *ret = (struct run) { .in = in[1], .out = out[0], .err = err[0] };
        expect_started(a, id, &ret->pid);
        assert_true(ret->pid > 0);
}

static void exec_start(struct agent *a, uint64_t id, char **argv, char **env, const char *cwd,
                       struct run *ret) {
        exec_start_tty(a, id, argv, env, cwd, NULL, ret);
}

static void expect_exit(struct agent *a, struct agent_exit *ret) {
        _cleanup_json_ json_object *msg = recv_msg(a);
        const char *type;

        assert_int_equal(agent_get_string(msg, "type", &type), 0);
        assert_string_equal(type, "exit");
        assert_int_equal(agent_parse_exit(msg, ret), 0);
}

/* Reads fd to EOF; returns a NUL-terminated string. */
static char *read_all(int fd) {
        size_t n = 0;
        char *buf = NULL;

        for (;;) {
                char *b;
                ssize_t k;

                b = realloc(buf, n + 4096 + 1);
                assert_non_null(b);
                buf = b;
                assert_true(wait_readable(fd, TIMEOUT_MSEC));
                k = read(fd, buf + n, 4096);
                assert_return_code(k, errno);
                if (k == 0)
                        break;
                n += k;
        }
        buf[n] = 0;
        return buf;
}

/* Runs argv to completion with empty stdin. */
static void run(struct agent *a, uint64_t id, char **argv, char **env, const char *cwd,
                struct agent_exit *ret_exit, char **ret_out, char **ret_err) {
        struct run r;

        exec_start(a, id, argv, env, cwd, &r);
        r.in = safe_close(r.in);
        expect_exit(a, ret_exit);
        assert_int_equal(ret_exit->id, id);
        *ret_out = read_all(r.out);
        *ret_err = read_all(r.err);
        run_close(&r);
}

static void send_kill(struct agent *a, uint64_t id, int sig) {
        _cleanup_json_ json_object *msg = agent_msg_kill(id, sig);

        assert_non_null(msg);
        assert_int_equal(agent_send(a->sock, msg, NULL, 0), 0);
}

static void test_ready_only(void **state) {
        /* The setup already received "ready": nothing else comes unasked. */
        expect_silence(*state, 200);
}

static void test_exit_code_and_output(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL;
        struct agent_exit e;

        run(*state, 1, (char *[]) { "sh", "-c", "echo out; echo err >&2; exit 3", NULL },
            default_env, "/", &e, &out, &err);
        assert_int_equal(e.code, 3);
        assert_int_equal(e.signal, 0);
        assert_string_equal(out, "out\n");
        assert_string_equal(err, "err\n");
        assert_true(e.duration_usec > 0);
        assert_true(e.duration_usec < TIMEOUT_MSEC * 1000U);
        assert_true(e.maxrss_kb > 0);
}

static void test_stdin(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL;
        struct agent_exit e;
        struct run r;

        exec_start(*state, 2, (char *[]) { "cat", NULL }, default_env, "/", &r);
        assert_int_equal(write(r.in, "hello\n", 6), 6);
        r.in = safe_close(r.in);
        expect_exit(*state, &e);
        assert_int_equal(e.id, 2);
        assert_int_equal(e.code, 0);
        out = read_all(r.out);
        err = read_all(r.err);
        assert_string_equal(out, "hello\n");
        assert_string_equal(err, "");
        run_close(&r);
}

static void test_not_found(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL;
        struct agent_exit e;

        run(*state, 3, (char *[]) { "sandboxd-no-such-command", NULL }, default_env, "/",
            &e, &out, &err);
        assert_int_equal(e.code, 127);
        assert_int_equal(e.signal, 0);
        assert_string_equal(out, "");
        assert_string_equal(err, "sandbox-init: sandboxd-no-such-command: No such file or directory\n");
}

static void test_not_executable(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL, *want = NULL;
        char dir[] = "/tmp/test-sandbox-init.XXXXXX", path[PATH_MAX];
        struct agent_exit e;
        int fd;

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/script", dir);
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "#!/bin/sh\n", 10), 10);
        safe_close(fd);

        run(*state, 4, (char *[]) { path, NULL }, default_env, "/", &e, &out, &err);
        assert_int_equal(e.code, 126);
        assert_true(asprintf(&want, "sandbox-init: %s: Permission denied\n", path) > 0);
        assert_string_equal(err, want);

        unlink(path);
        rmdir(dir);
}

static void test_bad_cwd(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL;
        struct agent_exit e;

        run(*state, 5, (char *[]) { "true", NULL }, default_env, "/sandboxd-no-such-dir",
            &e, &out, &err);
        assert_int_equal(e.code, 125);
        assert_string_equal(err, "sandbox-init: /sandboxd-no-such-dir: No such file or directory\n");
}

static void test_cwd(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL;
        struct agent_exit e;

        run(*state, 6, (char *[]) { "pwd", NULL }, default_env, "/usr", &e, &out, &err);
        assert_int_equal(e.code, 0);
        assert_string_equal(out, "/usr\n");
}

static void test_path_from_given_env(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL, *path_env = NULL;
        char dir[] = "/tmp/test-sandbox-init.XXXXXX", path[PATH_MAX];
        struct agent_exit e;
        int fd;

        /* A command only the exec's PATH knows of: neither ours nor the agent's has it. */
        assert_non_null(mkdtemp(dir));
        assert_return_code(chmod(dir, 0755), errno);
        snprintf(path, sizeof(path), "%s/sandboxd-test-cmd", dir);
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "#!/bin/sh\necho found\n", 21), 21);
        safe_close(fd);
        assert_true(asprintf(&path_env, "PATH=%s", dir) > 0);

        run(*state, 7, (char *[]) { "sandboxd-test-cmd", NULL }, (char *[]) { path_env, NULL }, "/",
            &e, &out, &err);
        assert_int_equal(e.code, 0);
        assert_string_equal(out, "found\n");

        run(*state, 8, (char *[]) { "sandboxd-test-cmd", NULL }, default_env, "/", &e, &out2, &err2);
        assert_int_equal(e.code, 127);

        unlink(path);
        rmdir(dir);
}

static void test_env_exact(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL;
        struct agent_exit e;

        run(*state, 9, (char *[]) { "env", NULL },
            (char *[]) { "PATH=/usr/bin:/bin", "FOO=bar baz", NULL }, "/", &e, &out, &err);
        assert_int_equal(e.code, 0);
        assert_string_equal(out, "PATH=/usr/bin:/bin\nFOO=bar baz\n");
}

/* Run by the agent, as an exec: describes what the exec inherited. */
static int report(void) {
        struct sigaction sa;
        sigset_t blocked;
        bool any;

        printf("fds:");
        for (int fd = 0; fd < 1024; fd++)
                if (fcntl(fd, F_GETFD) >= 0)
                        printf(" %d", fd);
        printf("\npgrp: %s\n", getpgrp() == getpid() ? "self" : "other");
        printf("session: %s\n", getsid(0) == getpid() ? "self" : "other");

        sigprocmask(SIG_SETMASK, NULL, &blocked);
        any = false;
        printf("blocked:");
        for (int sig = 1; sig < NSIG; sig++)
                if (sigismember(&blocked, sig) == 1) {
                        printf(" %d", sig);
                        any = true;
                }
        printf("%s\nignored:", any ? "" : " none");
        any = false;
        for (int sig = 1; sig < NSIG; sig++)
                if (sigaction(sig, NULL, &sa) >= 0 && sa.sa_handler == SIG_IGN) {
                        printf(" %d", sig);
                        any = true;
                }
        printf("%s\n", any ? "" : " none");
        return 0;
}

static void test_exec_inherits_nothing(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL;
        struct agent_exit e;

        /* The control socket, the signalfd, blocked SIGCHLD and ignored SIGPIPE of the
         * agent, and its session, must all stay behind. */
        run(*state, 10, (char *[]) { self_path, "--report", NULL }, default_env, "/", &e, &out, &err);
        assert_int_equal(e.code, 0);
        assert_string_equal(err, "");
        assert_string_equal(out,
                            "fds: 0 1 2\n"
                            "pgrp: self\n"
                            "session: self\n"
                            "blocked: none\n"
                            "ignored: none\n");
}

static void test_kill(void **state) {
        struct agent_exit e;
        struct run r;

        exec_start(*state, 11, (char *[]) { "sleep", "100", NULL }, default_env, "/", &r);
        send_kill(*state, 11, SIGKILL);
        expect_exit(*state, &e);
        assert_int_equal(e.id, 11);
        assert_int_equal(e.code, -1);
        assert_int_equal(e.signal, SIGKILL);
        assert_true(e.duration_usec < 10 * 1000000U);
        run_close(&r);
}

static void test_kill_reaches_group(void **state) {
        _cleanup_free_ char *rest = NULL;
        struct agent_exit e;
        char line[64] = {};
        struct run r;

        /* SIGTERM, blocked in the agent, must work in the exec; and the background sleep,
         * which holds stdout too, must get it as well, or stdout never reaches EOF. */
        exec_start(*state, 12, (char *[]) { "sh", "-c", "sleep 100 & echo started; wait", NULL },
                   default_env, "/", &r);
        assert_true(wait_readable(r.out, TIMEOUT_MSEC));
        assert_int_equal(read(r.out, line, sizeof(line) - 1), 8);
        assert_string_equal(line, "started\n");

        send_kill(*state, 12, SIGTERM);
        expect_exit(*state, &e);
        assert_int_equal(e.id, 12);
        assert_int_equal(e.code, -1);
        assert_int_equal(e.signal, SIGTERM);
        rest = read_all(r.out);
        assert_string_equal(rest, "");
        run_close(&r);
}

static void test_kill_refused(void **state) {
        _cleanup_json_ json_object *bad = json_tokener_parse("{\"type\":\"kill\",\"id\":13,\"signal\":\"9\"}");
        struct agent *a = *state;
        struct agent_exit e;
        struct run r;

        exec_start(a, 13, (char *[]) { "sleep", "100", NULL }, default_env, "/", &r);

        send_kill(a, 13, 0);
        send_kill(a, 13, 65);
        send_kill(a, 13, -9);
        send_kill(a, 14, SIGKILL); /* no such exec */
        assert_non_null(bad);
        assert_int_equal(agent_send(a->sock, bad, NULL, 0), 0);
        expect_silence(a, 300);

        send_kill(a, 13, SIGKILL);
        expect_exit(a, &e);
        assert_int_equal(e.id, 13);
        assert_int_equal(e.signal, SIGKILL);
        run_close(&r);
}

static char proc_state(pid_t pid, pid_t *ret_ppid) {
        char path[64], buf[512], *p;
        int fd;
        ssize_t n;
        char st;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        safe_close(fd);
        if (n <= 0)
                return 0;
        buf[n] = 0;
        p = strrchr(buf, ')');
        assert_non_null(p);
        assert_int_equal(sscanf(p + 2, "%c %d", &st, ret_ppid), 2);
        return st;
}

static void test_orphan(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL;
        struct agent *a = *state;
        struct agent_exit e;
        uint64_t deadline;
        pid_t gpid, ppid;
        char st;

        /* The exec forks a grandchild and exits at once: its exit is reported without
         * waiting for the grandchild, which is then the agent's to reap, silently. */
        run(a, 15, (char *[]) { "sh", "-c", "sleep 1 </dev/null >/dev/null 2>&1 & echo $!", NULL },
            default_env, "/", &e, &out, &err);
        assert_int_equal(e.code, 0);
        assert_true(e.duration_usec < 1000000U);

        gpid = atoi(out);
        assert_true(gpid > 0);
        st = proc_state(gpid, &ppid);
        assert_true(st != 0);
        assert_int_equal(ppid, a->pid);

        deadline = now_msec() + TIMEOUT_MSEC;
        while ((st = proc_state(gpid, &ppid)) != 0 && ppid == a->pid) {
                assert_true(now_msec() < deadline);
                usleep(10000);
        }

        /* No message about the orphan: the next one is about the next exec. */
        free(out);
        free(err);
        run(a, 16, (char *[]) { "true", NULL }, default_env, "/", &e, &out, &err);
        assert_int_equal(e.id, 16);
        assert_int_equal(e.code, 0);
}

static void test_concurrent(void **state) {
        struct agent *a = *state;
        struct agent_exit e;
        struct run r1, r2;

        /* 21 waits for us on its stdin, so 22 deterministically ends first. */
        exec_start(a, 21, (char *[]) { "sh", "-c", "read x; exit 1", NULL }, default_env, "/", &r1);
        exec_start(a, 22, (char *[]) { "sh", "-c", "exit 2", NULL }, default_env, "/", &r2);

        expect_exit(a, &e);
        assert_int_equal(e.id, 22);
        assert_int_equal(e.code, 2);

        expect_silence(a, 100);
        assert_int_equal(write(r1.in, "go\n", 3), 3);
        expect_exit(a, &e);
        assert_int_equal(e.id, 21);
        assert_int_equal(e.code, 1);

        run_close(&r1);
        run_close(&r2);
}

static void test_many_concurrent(void **state) {
        struct agent *a = *state;
        struct run r[20];
        bool seen[20] = {};
        struct agent_exit e;

        /* All end at once: SIGCHLDs coalesce, and each exit must still be reported once. */
        for (size_t i = 0; i < ELEMENTSOF(r); i++)
                exec_start(a, 100 + i, (char *[]) { "sh", "-c", "read x; exit $x", NULL },
                           default_env, "/", &r[i]);
        for (size_t i = 0; i < ELEMENTSOF(r); i++) {
                char line[16];
                int n = snprintf(line, sizeof(line), "%zu\n", i + 1);

                assert_int_equal(write(r[i].in, line, n), n);
        }
        for (size_t i = 0; i < ELEMENTSOF(r); i++) {
                expect_exit(a, &e);
                assert_true(e.id >= 100 && e.id < 100 + ELEMENTSOF(r));
                assert_false(seen[e.id - 100]);
                seen[e.id - 100] = true;
                assert_int_equal(e.code, e.id - 100 + 1);
        }
        expect_silence(a, 100);
        for (size_t i = 0; i < ELEMENTSOF(r); i++)
                run_close(&r[i]);
}

static void test_resources(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL, *out2 = NULL, *err2 = NULL;
        struct agent_exit e;

        run(*state, 30, (char *[]) { "sleep", "0.2", NULL }, default_env, "/", &e, &out, &err);
        assert_int_equal(e.code, 0);
        assert_true(e.duration_usec >= 200000U);

        run(*state, 31, (char *[]) { "sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done", NULL },
            default_env, "/", &e, &out2, &err2);
        assert_int_equal(e.code, 0);
        assert_true(e.utime_usec + e.stime_usec >= 10000U);
        assert_true(e.utime_usec + e.stime_usec <= e.duration_usec + 10000U);
}

static void send_exec_raw(struct agent *a, json_object *msg, size_t n_fds) {
        int fds[4];

        assert_true(n_fds <= 4);
        for (size_t i = 0; i < n_fds; i++) {
                fds[i] = open("/dev/null", O_RDWR | O_CLOEXEC);
                assert_true(fds[i] >= 0);
        }
        assert_int_equal(agent_send(a->sock, msg, fds, n_fds), 0);
        for (size_t i = 0; i < n_fds; i++)
                safe_close(fds[i]);
}

static void test_bad_requests(void **state) {
        static const char *junk[] = {
                "{\"type\":\"frobnicate\",\"id\":1}",
                "{\"id\":1}",
                "{\"type\":7}",
                "{\"type\":\"exec\",\"argv\":[\"true\"],\"env\":[]}",        /* no id: nothing to answer */
                "{\"type\":\"exec\",\"id\":-4,\"argv\":[\"true\"],\"env\":[]}",
        };
        struct {
                const char *json;
                size_t n_fds;
        } refused[] = {
                { "{\"type\":\"exec\",\"id\":41,\"argv\":[\"true\"],\"env\":[]}", 2 },
                { "{\"type\":\"exec\",\"id\":42,\"argv\":[\"true\"],\"env\":[]}", 4 },
                { "{\"type\":\"exec\",\"id\":43,\"argv\":[],\"env\":[]}", 3 },
                { "{\"type\":\"exec\",\"id\":44,\"argv\":[\"true\"]}", 3 },
                { "{\"type\":\"exec\",\"id\":45,\"argv\":[\"true\",1],\"env\":[]}", 3 },
                { "{\"type\":\"exec\",\"id\":46,\"argv\":[\"true\"],\"env\":[],\"cwd\":5}", 3 },
        };
        _cleanup_free_ char *out = NULL, *err = NULL;
        struct agent *a = *state;
        struct agent_exit e;

        for (size_t i = 0; i < ELEMENTSOF(junk); i++) {
                _cleanup_json_ json_object *o = json_tokener_parse(junk[i]);

                assert_non_null(o);
                send_exec_raw(a, o, 3);
        }
        assert_int_equal(send(a->sock, "not json", 8, MSG_NOSIGNAL), 8);
        assert_int_equal(send(a->sock, "[]", 2, MSG_NOSIGNAL), 2);
        expect_silence(a, 200);

        /* A request with an id is answered, with the "setup failed" code. */
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                _cleanup_json_ json_object *o = json_tokener_parse(refused[i].json);

                assert_non_null(o);
                send_exec_raw(a, o, refused[i].n_fds);
                expect_exit(a, &e);
                assert_int_equal(e.id, 41 + i);
                assert_int_equal(e.code, 125);
        }

        /* Still alive and well. */
        run(a, 47, (char *[]) { "sh", "-c", "exit 7", NULL }, default_env, "/", &e, &out, &err);
        assert_int_equal(e.code, 7);
}

static void test_socket_close_ends_agent(void **state) {
        struct agent a;
        struct run r;
        int status;

        /* Even with an exec still running: the agent does not wait for it. */
        agent_start_with(&a, NULL);
        exec_start(&a, 50, (char *[]) { "cat", NULL }, default_env, "/", &r);
        status = agent_stop(&a);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        run_close(&r); /* EOF on its stdin ends the cat, now nobody's child */
}

static void test_sigterm_from_inside_is_ignored(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL;
        struct agent_exit e;
        struct agent a;

        /* A sender in the agent's own PID namespace is what sandboxed code would be
         * (`kill -TERM 1`): PID 1 takes no orders from it and keeps serving. A request to
         * end comes from outside the namespace (sender pid 0 there) - or as SIGKILL from
         * systemd, which no handler sees. */
        agent_start_with(&a, NULL);
        assert_return_code(kill(a.pid, SIGTERM), errno);
        assert_return_code(kill(a.pid, SIGHUP), errno);
        assert_return_code(kill(a.pid, SIGINT), errno);
        run(&a, 7, (char *[]) { "sh", "-c", "echo still here", NULL }, default_env, "/", &e, &out, &err);
        assert_int_equal(e.code, 0);
        assert_string_equal(out, "still here\n");
        assert_int_equal(waitpid(a.pid, NULL, WNOHANG), 0);
        agent_stop(&a);
}

static uid_t proc_uid(pid_t pid) {
        char path[64], line[256];
        unsigned uid = UINT_MAX;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        assert_non_null(f);
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "Uid: %u", &uid) == 1)
                        break;
        fclose(f);
        return uid;
}

static void test_not_dumpable(void **state) {
        uid_t uid = geteuid() == 0 ? 65534 : geteuid();
        struct agent a;
        struct stat st;
        char path[64];
        int status;

        /* The files of /proc/PID of a non-dumpable process belong to root, not to the
         * process's user. Root could not tell the two apart, so as root the agent runs as
         * nobody here. (/proc/PID itself keeps the owner: stat a file inside.) */
        agent_start_with(&a, &(struct agent_options) { .leak_fd = -1, .as_nobody = true });
        assert_int_equal(proc_uid(a.pid), uid);
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) a.pid);
        assert_return_code(stat(path, &st), errno);
        assert_int_equal(st.st_uid, 0);

        status = agent_stop(&a);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

/* What the agent of a Docker sandbox does before anything else: a user namespace of its
 * own (its host uid is uid 1000 inside) and then the whole seccomp policy, also the rule the
 * Docker profile leaves out for it (unshare(CLONE_NEWUSER)). */
static void test_user_namespace_and_seccomp(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL;
        _cleanup_close_ int bpf = -EBADF, file = -EBADF;
        uid_t uid = geteuid() == 0 ? 65534 : geteuid();
        char path[] = "/var/tmp/test-sandbox-init-bpf.XXXXXX", buf[4096];
        struct agent_exit e;
        struct agent a;
        struct run r;
        ssize_t n;
        int status;

        assert_int_equal(seccomp_policy_export_bpf(&bpf), 0);
        file = mkstemp(path);
        assert_return_code(file, errno);
        while ((n = read(bpf, buf, sizeof(buf))) > 0)
                assert_int_equal(write(file, buf, (size_t) n), n);
        assert_return_code(fchmod(file, 0644), errno);

        agent_start_with(&a, &(struct agent_options) {
                .leak_fd = -1, .as_nobody = true,
                .args = (char *[]) { "--user-namespace", "1000:1000", "--seccomp", path, NULL },
        });
        (void) unlink(path);
        exec_start(&a, 1, (char *[]) { "sh", "-c",
                                       "id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map; "
                                       "grep -E '^(CapPrm|CapEff|CapBnd|CapAmb|Seccomp):' /proc/self/status; "
                                       "unshare --user true 2>&1 || echo refused", NULL },
                   default_env, "/", &r);
        /* The exec as the host sees it: the agent's own (unprivileged) uid. */
        assert_int_equal(proc_uid(r.pid), uid);
        r.in = safe_close(r.in);
        expect_exit(&a, &e);
        out = read_all(r.out);
        err = read_all(r.err);
        run_close(&r);
        snprintf(buf, sizeof(buf),
                 "1000\n1000\n"
                 "      1000 %10u          1\n"
                 "      1000 %10u          1\n"
                 "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
                 "CapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n"
                 "Seccomp:\t2\n"
                 "unshare: unshare failed: Too many users\nrefused\n",
                 (unsigned) uid, (unsigned) getegid() == 0 ? 65534U : (unsigned) getegid());
        assert_string_equal(out, buf);
        assert_string_equal(err, "");
        assert_int_equal(e.code, 0);

        status = agent_stop(&a);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

/* Where the kernel refuses the agent a user namespace, the sandbox still runs, as its
 * own host uid inside too. */
static void test_no_user_namespace(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL;
        uid_t uid = geteuid() == 0 ? 65534 : geteuid();
        struct agent_exit e;
        struct agent a;
        struct run r;
        char want[64];
        int status;

        agent_start_with(&a, &(struct agent_options) {
                .leak_fd = -1, .as_nobody = true, .no_userns = true,
                .args = (char *[]) { "--user-namespace", "1000:1000", NULL },
        });
        exec_start(&a, 1, (char *[]) { "id", "-u", NULL }, default_env, "/", &r);
        r.in = safe_close(r.in);
        expect_exit(&a, &e);
        out = read_all(r.out);
        err = read_all(r.err);
        run_close(&r);
        snprintf(want, sizeof(want), "%u\n", (unsigned) uid);
        assert_string_equal(out, want);
        assert_int_equal(e.code, 0);

        status = agent_stop(&a);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_agent_closes_inherited_fds(void **state) {
        int p[2], leak, status;
        struct agent a;
        char c;

        /* The write end of a pipe, left open across the agent's execve(): once the agent
         * closed what it inherited, nobody holds it and the read end sees EOF. */
        assert_return_code(pipe2(p, O_CLOEXEC), errno);
        leak = fcntl(p[1], F_DUPFD_CLOEXEC, 10);
        assert_true(leak >= 10);
        safe_close(p[1]);

        agent_start_with(&a, &(struct agent_options) { .leak_fd = leak });
        safe_close(leak);
        assert_true(wait_readable(p[0], TIMEOUT_MSEC));
        assert_int_equal(read(p[0], &c, 1), 0);
        safe_close(p[0]);

        status = agent_stop(&a);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_not_a_socket(void **state) {
        int status, fd;
        pid_t pid;

        /* Started without its socket on fd 3 (by hand, say): refuses, does not hang. */
        pid = fork();
        assert_return_code(pid, errno);
        if (pid == 0) {
                fd = open("/dev/null", O_RDONLY);
                if (fd < 0 || dup2(fd, AGENT_CONTROL_FD) < 0)
                        _exit(90);
                if (!freopen("/dev/null", "w", stderr))
                        _exit(94);
                execl(agent_path, "sandbox-init", NULL);
                _exit(93);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 1);
}


/* Version 2: sessions. */

static void test_started(void **state) {
        _cleanup_free_ char *out = NULL, *err = NULL;
        struct agent *a = *state;
        struct agent_exit e;
        pid_t ppid;
        struct run r;

        /* "started" names the exec's own process (sh, after the fork, is what exec'd),
         * a child of the agent, and comes before the "exit". */
        exec_start(a, 60, (char *[]) { "sh", "-c", "read x; echo $$", NULL }, default_env, "/", &r);
        assert_true(proc_state(r.pid, &ppid) != 0);
        assert_int_equal(ppid, a->pid);
        r.in = safe_close(r.in);
        expect_exit(a, &e);
        assert_int_equal(e.id, 60);
        out = read_all(r.out);
        err = read_all(r.err);
        assert_int_equal(atoi(out), r.pid);
        run_close(&r);

        /* A refused exec never started: its "exit" alone. */
        _cleanup_json_ json_object *bad = json_tokener_parse(
                "{\"type\":\"exec\",\"id\":61,\"argv\":[\"true\"],\"env\":[],\"tty\":{\"rows\":-1,\"cols\":80}}");
        assert_non_null(bad);
        send_exec_raw(a, bad, 3);
        expect_exit(a, &e);
        assert_int_equal(e.id, 61);
        assert_int_equal(e.code, 125);
}

/* Reads fd until marker has been seen; returns all that was read. */
static char *read_until(int fd, const char *marker) {
        size_t n = 0;
        char *buf = NULL;

        for (;;) {
                char *b;
                ssize_t k;

                b = realloc(buf, n + 4096 + 1);
                assert_non_null(b);
                buf = b;
                assert_true(wait_readable(fd, TIMEOUT_MSEC));
                k = read(fd, buf + n, 4096);
                assert_true(k > 0);
                n += k;
                buf[n] = 0;
                if (strstr(buf, marker))
                        return buf;
        }
}

/* Run by the agent, as a tty exec: describes its terminal, echoes a line, and reports
 * the size again after SIGWINCH. */
static int tty_report(void) {
        struct timespec timeout = { .tv_sec = TIMEOUT_MSEC / 1000 };
        struct winsize w = {};
        char line[256];
        sigset_t winch;
        int sig;

        sigemptyset(&winch);
        sigaddset(&winch, SIGWINCH);
        sigprocmask(SIG_BLOCK, &winch, NULL);

        printf("tty: %d %d %d\n", isatty(0), isatty(1), isatty(2));
        printf("ctty: %s\n", tcgetsid(0) == getpid() ? "own" : "other");
        if (ioctl(0, TIOCGWINSZ, &w) < 0)
                return 1;
        printf("size: %u %u\n", w.ws_row, w.ws_col);
        fflush(stdout);

        if (!fgets(line, sizeof(line), stdin))
                return 1;
        printf("got: %s", line);
        fflush(stdout);

        sig = sigtimedwait(&winch, NULL, &timeout);
        if (ioctl(0, TIOCGWINSZ, &w) < 0)
                return 1;
        printf("winch: %s, size: %u %u\n", sig == SIGWINCH ? "yes" : "no", w.ws_row, w.ws_col);
        return 3;
}

static void send_resize(struct agent *a, uint64_t id, uint16_t rows, uint16_t cols) {
        _cleanup_json_ json_object *msg = agent_msg_resize(id, &(struct agent_winsize) { rows, cols });

        assert_non_null(msg);
        assert_int_equal(agent_send(a->sock, msg, NULL, 0), 0);
}

/* Version 6: every resize is answered, once done (of an ended exec, or one without a
 * terminal, too: the daemon holds input back until then). */
static void expect_resized(struct agent *a, uint64_t id) {
        _cleanup_json_ json_object *msg = recv_msg(a);
        const char *type;
        uint64_t got;

        assert_int_equal(agent_get_string(msg, "type", &type), 0);
        assert_string_equal(type, "resized");
        assert_int_equal(agent_parse_resized(msg, &got), 0);
        assert_int_equal(got, id);
}

static unsigned proc_tty_nr(pid_t pid) {
        char path[64], buf[1024], *p;
        unsigned tty_nr = UINT_MAX;
        int fd;
        ssize_t n;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        n = read(fd, buf, sizeof(buf) - 1);
        safe_close(fd);
        assert_true(n > 0);
        buf[n] = 0;
        p = strrchr(buf, ')');
        assert_non_null(p);
        /* state ppid pgrp session tty_nr */
        assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %u", &tty_nr), 1);
        return tty_nr;
}

static void test_tty(void **state) {
        _cleanup_free_ char *o1 = NULL, *o2 = NULL, *o3 = NULL, *rest = NULL, *err = NULL;
        _cleanup_free_ char *rout = NULL, *rerr = NULL;
        struct agent *a = *state;
        struct agent_exit e;
        struct run r;

        exec_start_tty(a, 70, (char *[]) { self_path, "--tty-report", NULL }, default_env, "/",
                       &(struct agent_winsize) { .rows = 24, .cols = 80 }, &r);

        /* Through the relay: the terminal's output (with its \r\n), in order. */
        o1 = read_until(r.out, "size: 24 80\r\n");
        assert_string_equal(o1, "tty: 1 1 1\r\nctty: own\r\nsize: 24 80\r\n");

        /* Meanwhile, another exec sees nothing of the terminal, and the agent has none. */
        run(a, 71, (char *[]) { self_path, "--report", NULL }, default_env, "/", &e, &rout, &rerr);
        assert_int_equal(e.code, 0);
        assert_true(startswith_str(rout, "fds: 0 1 2\n"));
        assert_int_equal(proc_tty_nr(a->pid), 0);

        /* Input, echoed by the terminal, then read by the session. */
        assert_int_equal(write(r.in, "hello\n", 6), 6);
        o2 = read_until(r.out, "got: hello\r\n");
        assert_string_equal(o2, "hello\r\ngot: hello\r\n");

        send_resize(a, 70, 50, 132);
        expect_resized(a, 70);
        o3 = read_until(r.out, "\r\n");
        assert_string_equal(o3, "winch: yes, size: 50 132\r\n");

        expect_exit(a, &e);
        assert_int_equal(e.id, 70);
        assert_int_equal(e.code, 3);

        /* The relay ends once the session closed the terminal: EOF, and nothing on stderr,
         * which a tty exec does not use. */
        rest = read_all(r.out);
        assert_string_equal(rest, "");
        err = read_all(r.err);
        assert_string_equal(err, "");
        run_close(&r);

        /* A resize after the end, or for an exec without terminal, changes nothing; it is
         * answered all the same. */
        send_resize(a, 70, 1, 1);
        expect_resized(a, 70);
        send_resize(a, 71, 1, 1);
        expect_resized(a, 71);
        expect_silence(a, 100);
}

static void test_tty_output_after_exit(void **state) {
        _cleanup_free_ char *out = NULL;
        struct agent *a = *state;
        struct agent_exit e;
        struct run r;

        /* A background process keeps the terminal: the relay goes on after the exec's
         * "exit", until it too has closed it. (It ignores, from before it starts, the SIGHUP
         * that the end of the session leader sends to the terminal's foreground.) */
        exec_start_tty(a, 72, (char *[]) { "sh", "-c", "trap \"\" HUP; (sleep 0.3; echo late) & echo early", NULL },
                       default_env, "/", &(struct agent_winsize) { .rows = 10, .cols = 10 }, &r);
        expect_exit(a, &e);
        assert_int_equal(e.code, 0);
        out = read_all(r.out);
        assert_string_equal(out, "early\r\nlate\r\n");
        run_close(&r);
}

static void test_tty_kill(void **state) {
        struct agent *a = *state;
        struct agent_exit e;
        _cleanup_free_ char *out = NULL;
        struct run r;

        exec_start_tty(a, 73, (char *[]) { "sh", "-c", "echo ready; exec sleep 100", NULL },
                       default_env, "/", &(struct agent_winsize) { .rows = 10, .cols = 10 }, &r);
        free(read_until(r.out, "ready\r\n"));
        send_kill(a, 73, SIGKILL);
        expect_exit(a, &e);
        assert_int_equal(e.signal, SIGKILL);
        out = read_all(r.out);
        assert_string_equal(out, "");
        run_close(&r);
}

static void test_tty_caller_gone(void **state) {
        struct agent *a = *state;
        struct agent_exit e;
        struct run r;

        /* The caller closes its ends: the relay ends, and with the terminal's last master
         * the session gets SIGHUP, as when a terminal window closes. */
        exec_start_tty(a, 74, (char *[]) { "sh", "-c", "echo ready; exec sleep 100", NULL },
                       default_env, "/", &(struct agent_winsize) { .rows = 10, .cols = 10 }, &r);
        free(read_until(r.out, "ready\r\n"));
        run_close(&r);
        expect_exit(a, &e);
        assert_int_equal(e.id, 74);
        assert_int_equal(e.code, -1);
        assert_int_equal(e.signal, SIGHUP);
}

/* Version 2: files. */

static uint64_t file_id = 1000;

struct tmp {
        char dir[64];
};

static void tmp_init(struct tmp *t) {
        snprintf(t->dir, sizeof(t->dir), "/tmp/test-sandbox-init.XXXXXX");
        assert_non_null(mkdtemp(t->dir));
}

/* dir/name, in one of a ring of buffers: valid for the next seven calls. */
static const char *tp(struct tmp *t, const char *name) {
        static char ring[8][PATH_MAX];
        static unsigned next;
        char *b = ring[next++ % ELEMENTSOF(ring)];

        snprintf(b, PATH_MAX, "%s/%s", t->dir, name);
        return b;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path) < 0 ? -1 : 0;
}

static void tmp_done(struct tmp *t) {
        /* FTW_PHYS: the tests plant symlinks to outside; never follow them. */
        assert_return_code(nftw(t->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS), errno);
}

static void make_file(const char *path, const char *content) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, content, strlen(content)), (ssize_t) strlen(content));
        safe_close(fd);
}

static char *slurp(const char *path) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        char *s;

        assert_true(fd >= 0);
        s = read_all(fd);
        safe_close(fd);
        return s;
}

static void send_file(struct agent *a, const struct agent_file *f, int fd) {
        _cleanup_json_ json_object *msg = agent_msg_file(f);

        assert_non_null(msg);
        assert_int_equal(agent_send(a->sock, msg, fd >= 0 ? &fd : NULL, fd >= 0 ? 1 : 0), 0);
}

static void expect_file_result(struct agent *a, uint64_t id, struct agent_file_result *ret) {
        _cleanup_json_ json_object *msg = recv_msg(a);
        const char *type;

        assert_int_equal(agent_get_string(msg, "type", &type), 0);
        assert_string_equal(type, "file-result");
        assert_int_equal(agent_parse_file_result(msg, ret), 0);
        assert_int_equal(ret->id, id);
}

/* An op without descriptors; returns its errno. */
static int file_op(struct agent *a, struct agent_file f, struct agent_file_result *ret) {
        struct agent_file_result res = {};

        f.id = file_id++;
        send_file(a, &f, -1);
        expect_file_result(a, f.id, &res);
        if (ret)
                *ret = res;
        else
                agent_file_result_done(&res);
        return res.error;
}

static int file_stat(struct agent *a, const char *path, struct agent_file_result *ret) {
        return file_op(a, AGENT_FILE_INIT(0, AGENT_FILE_STAT, path), ret);
}

/* Reads fd to EOF, binary. */
static char *read_all_size(int fd, size_t *ret_size) {
        size_t n = 0, allocated = 0;
        char *buf = NULL;

        for (;;) {
                ssize_t k;

                if (allocated - n < 65536) {
                        allocated = MAX(allocated * 2, (size_t) 65536);
                        buf = realloc(buf, allocated);
                        assert_non_null(buf);
                }
                assert_true(wait_readable(fd, TIMEOUT_MSEC));
                k = read(fd, buf + n, allocated - n);
                assert_return_code(k, errno);
                if (k == 0)
                        break;
                n += k;
        }
        *ret_size = n;
        return buf;
}

/* A "read" (f's id is set here); returns its errno, the data in *ret_data. */
static int file_read(struct agent *a, struct agent_file f, char **ret_data, size_t *ret_size,
                     struct agent_file_result *ret) {
        struct agent_file_result res = {};
        int p[2];

        assert_return_code(pipe2(p, O_CLOEXEC), errno);
        f.id = file_id++;
        send_file(a, &f, p[1]);
        p[1] = safe_close(p[1]);
        /* The result comes after the child closed the pipe: all the data is there first. */
        *ret_data = read_all_size(p[0], ret_size);
        safe_close(p[0]);
        expect_file_result(a, f.id, &res);
        assert_true(res.has_bytes);
        assert_int_equal(res.bytes, *ret_size);
        if (ret)
                *ret = res;
        else
                agent_file_result_done(&res);
        return res.error;
}

static int file_write(struct agent *a, struct agent_file f, const void *data, size_t size,
                      struct agent_file_result *ret) {
        struct agent_file_result res = {};
        const char *d = data;
        int p[2];

        assert_return_code(pipe2(p, O_CLOEXEC), errno);
        f.id = file_id++;
        send_file(a, &f, p[0]);
        p[0] = safe_close(p[0]);
        while (size > 0) {
                ssize_t k = write(p[1], d, size);

                if (k < 0 && errno == EPIPE)
                        break; /* it failed before reading all: the result says why */
                assert_true(k > 0);
                d += k;
                size -= k;
        }
        safe_close(p[1]);
        expect_file_result(a, f.id, &res);
        assert_true(res.has_bytes);
        if (ret)
                *ret = res;
        else
                agent_file_result_done(&res);
        return res.error;
}

static uint64_t fnv1a(const unsigned char *p, size_t n) {
        uint64_t h = UINT64_C(0xcbf29ce484222325);

        for (size_t i = 0; i < n; i++)
                h = (h ^ p[i]) * UINT64_C(0x100000001b3);
        return h;
}

/* --log-over-control: once ready, the agent holds no end of the stderr it was started
 * with (sandboxd closes its reader then), and what it (or a helper of its) writes to
 * stderr comes as "log" messages on the control socket. */
static void test_log_over_control(void **state) {
        struct agent_file f = AGENT_FILE_INIT(0, AGENT_FILE_EXTRACT, "/work");
        struct agent_file_result res = {};
        bool got_log = false, got_result = false;
        _cleanup_free_ char *said = NULL;
        int err[2], in[2], status;
        struct agent a;
        char c;

        assert_return_code(pipe2(err, O_CLOEXEC), errno);
        agent_start_with(&a, &(struct agent_options) {
                .leak_fd = -1, .stderr_fd = err[1], .args = (char *[]) { "--log-over-control", NULL },
        });
        err[1] = safe_close(err[1]);
        /* EOF: no process holds the first stderr any more. */
        assert_true(wait_readable(err[0], TIMEOUT_MSEC));
        assert_int_equal(read(err[0], &c, 1), 0);
        safe_close(err[0]);

        /* Not an archive: the extract's process says why on its stderr. */
        assert_return_code(pipe2(in, O_CLOEXEC), errno);
        assert_int_equal(write(in[1], "not a tar stream at all", 23), 23);
        in[1] = safe_close(in[1]);
        f.id = 77;
        send_file(&a, &f, in[0]);
        in[0] = safe_close(in[0]);
        while (!got_log || !got_result) {
                _cleanup_json_ json_object *msg = recv_msg(&a);
                const char *type, *data;
                size_t n;

                assert_int_equal(agent_get_string(msg, "type", &type), 0);
                if (streq(type, "log")) {
                        assert_int_equal(agent_parse_log(msg, &data, &n), 0);
                        said = strndup(data, n);
                        got_log = true;
                } else {
                        assert_string_equal(type, "file-result");
                        assert_int_equal(agent_parse_file_result(msg, &res), 0);
                        assert_int_equal(res.id, 77);
                        assert_int_not_equal(res.error, 0);
                        agent_file_result_done(&res);
                        got_result = true;
                }
        }
        assert_non_null(said);
        assert_non_null(strstr(said, "sandbox-init: snapshot: "));

        status = agent_stop(&a);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_file_write_read_big(void **state) {
        struct agent *a = *state;
        const size_t size = 10 * 1024 * 1024;
        _cleanup_free_ unsigned char *data = malloc(size);
        _cleanup_free_ char *back = NULL;
        struct agent_file_result res;
        uint64_t x = 88172645463325252ULL;
        size_t n;
        struct tmp t;

        assert_non_null(data);
        for (size_t i = 0; i < size; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                data[i] = (unsigned char) x;
        }

        tmp_init(&t);
        assert_int_equal(file_write(a, AGENT_FILE_INIT(0, AGENT_FILE_WRITE, tp(&t, "big")), data, size, &res), 0);
        assert_int_equal(res.bytes, size);
        agent_file_result_done(&res);

        assert_int_equal(file_read(a, AGENT_FILE_INIT(0, AGENT_FILE_READ, tp(&t, "big")), &back, &n, NULL), 0);
        assert_int_equal(n, size);
        assert_true(fnv1a((unsigned char *) back, n) == fnv1a(data, size));
        assert_memory_equal(back, data, size);

        /* Created with the default mode, exactly (not what a umask leaves of it). */
        assert_int_equal(file_stat(a, tp(&t, "big"), &res), 0);
        assert_true(res.has_stat);
        assert_int_equal(res.stat.type, S_IFREG);
        assert_int_equal(res.stat.mode, 0644);
        assert_int_equal(res.stat.size, size);
        assert_string_equal(res.stat.path, tp(&t, "big"));
        agent_file_result_done(&res);
        tmp_done(&t);
}

static void test_file_read(void **state) {
        struct agent *a = *state;
        struct agent_file f;
        _cleanup_free_ char *d1 = NULL, *d2 = NULL, *d3 = NULL;
        size_t n;
        struct tmp t;

        tmp_init(&t);
        make_file(tp(&t, "f"), "0123456789");

        /* A range. */
        f = AGENT_FILE_INIT(0, AGENT_FILE_READ, tp(&t, "f"));
        f.offset = 3;
        f.length = 4;
        assert_int_equal(file_read(a, f, &d1, &n, NULL), 0);
        assert_int_equal(n, 4);
        assert_memory_equal(d1, "3456", 4);

        /* "max" at the size exactly is fine; the length bounds what is sent. */
        f = AGENT_FILE_INIT(0, AGENT_FILE_READ, tp(&t, "f"));
        f.max = 10;
        assert_int_equal(file_read(a, f, &d2, &n, NULL), 0);
        assert_int_equal(n, 10);

        /* An offset past the end reads nothing. */
        f = AGENT_FILE_INIT(0, AGENT_FILE_READ, tp(&t, "f"));
        f.offset = 100;
        assert_int_equal(file_read(a, f, &d3, &n, NULL), 0);
        assert_int_equal(n, 0);

        tmp_done(&t);
}

static void test_file_read_refused(void **state) {
        struct agent *a = *state;
        struct agent_file_result res = {};
        struct agent_file f;
        char *d;
        size_t n;
        uint64_t start;
        struct tmp t;
        int fd;

        tmp_init(&t);
        make_file(tp(&t, "f"), "0123456789");
        assert_return_code(symlink(tp(&t, "f"), tp(&t, "link")), errno);
        assert_return_code(mkfifo(tp(&t, "fifo"), 0644), errno);
        assert_return_code(mkdir(tp(&t, "dir"), 0755), errno);
        assert_return_code(symlink(tp(&t, "dir"), tp(&t, "dirlink")), errno);

        /* Missing; a symlink as the last component is followed, as cat(1) would, and so is
         * a directory reached through a symlink on the way; a dangling one is missing. */
        assert_int_equal(file_read(a, AGENT_FILE_INIT(0, AGENT_FILE_READ, tp(&t, "missing")), &d, &n, NULL), ENOENT);
        free(d);
        assert_int_equal(file_read(a, AGENT_FILE_INIT(0, AGENT_FILE_READ, tp(&t, "link")), &d, &n, NULL), 0);
        assert_int_equal(n, 10);
        assert_memory_equal(d, "0123456789", 10);
        free(d);
        assert_return_code(symlink(tp(&t, "nothing"), tp(&t, "dangling")), errno);
        assert_int_equal(file_read(a, AGENT_FILE_INIT(0, AGENT_FILE_READ, tp(&t, "dangling")), &d, &n, NULL), ENOENT);
        free(d);
        make_file(tp(&t, "dir/g"), "g");
        assert_int_equal(file_read(a, AGENT_FILE_INIT(0, AGENT_FILE_READ, tp(&t, "dirlink/g")), &d, &n, NULL), 0);
        assert_int_equal(n, 1);
        free(d);

        /* A FIFO nobody writes to: refused at once, not waited on, its type said. Nor a
         * directory, nor a device. */
        start = now_msec();
        assert_int_equal(file_read(a, AGENT_FILE_INIT(0, AGENT_FILE_READ, tp(&t, "fifo")), &d, &n, &res), EINVAL);
        assert_int_equal(res.not_regular, S_IFIFO);
        free(d);
        assert_true(now_msec() - start < 2000);
        assert_int_equal(file_read(a, AGENT_FILE_INIT(0, AGENT_FILE_READ, tp(&t, "dir")), &d, &n, &res), EINVAL);
        assert_int_equal(res.not_regular, S_IFDIR);
        free(d);
        assert_int_equal(file_read(a, AGENT_FILE_INIT(0, AGENT_FILE_READ, "/dev/null"), &d, &n, &res), EINVAL);
        assert_int_equal(res.not_regular, S_IFCHR);
        free(d);
        assert_int_equal(file_read(a, AGENT_FILE_INIT(0, AGENT_FILE_READ, tp(&t, "missing")), &d, &n, &res), ENOENT);
        assert_int_equal(res.not_regular, 0);
        free(d);

        /* Larger than "max": nothing is sent. */
        f = AGENT_FILE_INIT(0, AGENT_FILE_READ, tp(&t, "f"));
        f.max = 9;
        assert_int_equal(file_read(a, f, &d, &n, NULL), EFBIG);
        assert_int_equal(n, 0);
        free(d);

        /* A sparse terabyte: its size says no, at once. */
        fd = open(tp(&t, "sparse"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_return_code(ftruncate(fd, (off_t) 1 << 40), errno);
        safe_close(fd);
        f = AGENT_FILE_INIT(0, AGENT_FILE_READ, tp(&t, "sparse"));
        f.max = 1 << 20;
        start = now_msec();
        assert_int_equal(file_read(a, f, &d, &n, NULL), EFBIG);
        assert_int_equal(n, 0);
        free(d);
        assert_true(now_msec() - start < 2000);

        tmp_done(&t);
}

static void test_file_read_epipe(void **state) {
        struct agent *a = *state;
        struct agent_file f = AGENT_FILE_INIT(file_id++, AGENT_FILE_READ, NULL);
        struct agent_file_result res = {};
        const size_t size = 1024 * 1024;
        _cleanup_free_ char *data = calloc(1, size);
        struct tmp t;
        int p[2], fd;

        /* The reader is gone: EPIPE in the result (SIGPIPE would have killed the child, and
         * the agent would have said EIO). */
        tmp_init(&t);
        fd = open(tp(&t, "f"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, size), (ssize_t) size);
        safe_close(fd);

        assert_return_code(pipe2(p, O_CLOEXEC), errno);
        p[0] = safe_close(p[0]);
        f.path = tp(&t, "f");
        send_file(a, &f, p[1]);
        p[1] = safe_close(p[1]);
        expect_file_result(a, f.id, &res);
        assert_int_equal(res.error, EPIPE);
        assert_true(res.has_bytes);
        assert_int_equal(res.bytes, 0);
        tmp_done(&t);
}

static void test_file_write(void **state) {
        struct agent *a = *state;
        struct agent_file_result res;
        struct agent_file f;
        _cleanup_free_ char *c1 = NULL, *c2 = NULL, *c3 = NULL, *c4 = NULL;
        struct stat st;
        struct tmp t;

        tmp_init(&t);

        /* Replace, then append. */
        make_file(tp(&t, "f"), "old content");
        assert_int_equal(file_write(a, AGENT_FILE_INIT(0, AGENT_FILE_WRITE, tp(&t, "f")), "new", 3, NULL), 0);
        c1 = slurp(tp(&t, "f"));
        assert_string_equal(c1, "new");
        f = AGENT_FILE_INIT(0, AGENT_FILE_WRITE, tp(&t, "f"));
        f.append = true;
        assert_int_equal(file_write(a, f, "+more", 5, &res), 0);
        assert_int_equal(res.bytes, 5);
        agent_file_result_done(&res);
        c2 = slurp(tp(&t, "f"));
        assert_string_equal(c2, "new+more");

        /* A mode, exactly; missing parents, made when asked for. */
        f = AGENT_FILE_INIT(0, AGENT_FILE_WRITE, tp(&t, "a/b/c"));
        assert_int_equal(file_write(a, f, "x", 1, NULL), ENOENT);
        f.parents = true;
        f.mode = 0600;
        assert_int_equal(file_write(a, f, "x", 1, NULL), 0);
        assert_return_code(stat(tp(&t, "a/b/c"), &st), errno);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_return_code(stat(tp(&t, "a/b"), &st), errno);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0755);

        /* Through a symlink as the last component, as tee(1) would: the target is written,
         * the link stays a link. */
        make_file(tp(&t, "target"), "keep");
        assert_return_code(symlink(tp(&t, "target"), tp(&t, "link")), errno);
        assert_int_equal(file_write(a, AGENT_FILE_INIT(0, AGENT_FILE_WRITE, tp(&t, "link")), "new", 3, NULL), 0);
        c3 = slurp(tp(&t, "target"));
        assert_string_equal(c3, "new");
        assert_return_code(lstat(tp(&t, "link"), &st), errno);
        assert_true(S_ISLNK(st.st_mode));

        /* Not onto what is not a regular file; a FIFO, with or without a reader, does not
         * block the write. */
        assert_return_code(mkfifo(tp(&t, "fifo"), 0644), errno);
        assert_int_equal(file_write(a, AGENT_FILE_INIT(0, AGENT_FILE_WRITE, tp(&t, "fifo")), "x", 1, &res), EINVAL);
        assert_int_equal(res.not_regular, S_IFIFO);  /* ENXIO from open(), no reader: the type is still said */
        agent_file_result_done(&res);
        {
                int rfd = open(tp(&t, "fifo"), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
                char c;

                assert_true(rfd >= 0);
                assert_int_equal(file_write(a, AGENT_FILE_INIT(0, AGENT_FILE_WRITE, tp(&t, "fifo")), "x", 1, NULL), EINVAL);
                assert_int_equal(read(rfd, &c, 1), 0);
                safe_close(rfd);
        }
        assert_return_code(mkdir(tp(&t, "dir"), 0755), errno);
        assert_int_equal(file_write(a, AGENT_FILE_INIT(0, AGENT_FILE_WRITE, tp(&t, "dir")), "x", 1, NULL), EISDIR);

        /* An empty input makes an empty file. */
        assert_int_equal(file_write(a, AGENT_FILE_INIT(0, AGENT_FILE_WRITE, tp(&t, "empty")), "", 0, &res), 0);
        assert_int_equal(res.bytes, 0);
        agent_file_result_done(&res);
        c4 = slurp(tp(&t, "empty"));
        assert_string_equal(c4, "");

        tmp_done(&t);
}

/* An op given FD (a regular file, as Upload and Download may pass); returns its errno. */
static int file_op_fd(struct agent *a, struct agent_file f, int fd) {
        struct agent_file_result res = {};

        f.id = file_id++;
        send_file(a, &f, fd);
        expect_file_result(a, f.id, &res);
        agent_file_result_done(&res);
        return res.error;
}

static void test_file_own_descriptor_refused(void **state) {
        struct agent *a = *state;
        int refused = 0;
        struct tmp t;

        tmp_init(&t);
        /* Links to every descriptor number the op's child could hold its descriptor at. */
        for (int n = 0; n < 64; n++) {
                char target[64], name[16];

                snprintf(target, sizeof(target), "/proc/self/fd/%i", n);
                snprintf(name, sizeof(name), "w%i", n);
                assert_return_code(symlink(target, tp(&t, name)), errno);
        }
        make_file(tp(&t, "source"), "the caller's file");
        for (int n = 0; n < 64; n++) {
                _cleanup_close_ int src = open(tp(&t, "source"), O_RDWR | O_CLOEXEC);
                _cleanup_free_ char *c = NULL;
                char name[16];
                int e;

                assert_return_code(src, errno);
                snprintf(name, sizeof(name), "w%i", n);
                /* An Upload from the caller's file into the link: never into that file. */
                e = file_op_fd(a, AGENT_FILE_INIT(0, AGENT_FILE_WRITE, tp(&t, name)), src);
                refused += e == ELOOP;
                c = slurp(tp(&t, "source"));
                assert_string_equal(c, "the caller's file");
                /* A Download into the caller's file from the link: not read into itself. */
                e = file_op_fd(a, AGENT_FILE_INIT(0, AGENT_FILE_READ, tp(&t, name)), src);
                refused += e == ELOOP;
        }
        /* The op's descriptor sits at one of those numbers: both ops were refused there. */
        assert_int_equal(refused, 2);
        tmp_done(&t);
}

static void assert_entry(const struct agent_file_entry *e, const char *path, mode_t type) {
        assert_string_equal(e->path, path);
        assert_int_equal(e->type, type);
}

static void test_file_list(void **state) {
        struct agent *a = *state;
        struct agent_file_result res;
        struct agent_file f;
        struct tmp t, outside;

        tmp_init(&t);
        tmp_init(&outside);
        make_file(tp(&outside, "secret"), "s");
        make_file(tp(&t, "a"), "12345");
        assert_return_code(mkdir(tp(&t, "b"), 0750), errno);
        make_file(tp(&t, "b/c"), "");
        assert_return_code(mkdir(tp(&t, "b/e"), 0755), errno);
        make_file(tp(&t, "b/e/deep"), "");
        assert_return_code(symlink(outside.dir, tp(&t, "l")), errno);
        assert_return_code(mkfifo(tp(&t, "p"), 0600), errno);

        f = AGENT_FILE_INIT(0, AGENT_FILE_LIST, t.dir);
        assert_int_equal(file_op(a, f, &res), 0);
        assert_true(res.has_entries);
        assert_int_equal(res.n_entries, 4);
        assert_entry(res.entries + 0, "a", S_IFREG);
        assert_int_equal(res.entries[0].size, 5);
        assert_int_equal(res.entries[0].mode, 0644);
        assert_entry(res.entries + 1, "b", S_IFDIR);
        assert_int_equal(res.entries[1].mode, 0750);
        assert_entry(res.entries + 2, "l", S_IFLNK);
        assert_string_equal(res.entries[2].target, outside.dir);
        assert_entry(res.entries + 3, "p", S_IFIFO);
        assert_null(res.entries[0].target);
        agent_file_result_done(&res);

        /* Depth 2: into b, not into b/e; the symlink to a directory is not entered. */
        f.depth = 2;
        assert_int_equal(file_op(a, f, &res), 0);
        assert_int_equal(res.n_entries, 6);
        assert_entry(res.entries + 0, "a", S_IFREG);
        assert_entry(res.entries + 1, "b", S_IFDIR);
        assert_entry(res.entries + 2, "b/c", S_IFREG);
        assert_entry(res.entries + 3, "b/e", S_IFDIR);
        assert_entry(res.entries + 4, "l", S_IFLNK);
        assert_entry(res.entries + 5, "p", S_IFIFO);
        agent_file_result_done(&res);

        /* Dots and slashes on the way; not a directory; missing. */
        assert_int_equal(file_op(a, AGENT_FILE_INIT(0, AGENT_FILE_LIST, tp(&t, "b/./e/..//e/")), &res), 0);
        assert_int_equal(res.n_entries, 1);
        agent_file_result_done(&res);
        assert_int_equal(file_op(a, AGENT_FILE_INIT(0, AGENT_FILE_LIST, tp(&t, "b/c")), &res), ENOTDIR);
        assert_false(res.has_entries);
        agent_file_result_done(&res);
        assert_int_equal(file_op(a, AGENT_FILE_INIT(0, AGENT_FILE_LIST, tp(&t, "missing")), NULL), ENOENT);

        tmp_done(&t);
        tmp_done(&outside);
}

static void test_file_list_too_big(void **state) {
        struct agent *a = *state;
        struct agent_file_result res;
        char name[PATH_MAX];
        struct tmp t;

        /* 4500 names of 250 bytes: more than AGENT_MESSAGE_MAX of JSON. */
        tmp_init(&t);
        for (unsigned i = 0; i < 4500; i++) {
                int fd;

                snprintf(name, sizeof(name), "%s/%0250u", t.dir, i);
                fd = open(name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                assert_true(fd >= 0);
                safe_close(fd);
        }
        assert_int_equal(file_op(a, AGENT_FILE_INIT(0, AGENT_FILE_LIST, t.dir), &res), E2BIG);
        assert_false(res.has_entries);
        agent_file_result_done(&res);
        tmp_done(&t);
}

static void test_file_stat(void **state) {
        struct agent *a = *state;
        struct agent_file_result res, res2;
        struct stat st;
        struct tmp t;
        int r;

        tmp_init(&t);
        make_file(tp(&t, "f"), "abc");
        assert_return_code(symlink("f", tp(&t, "link")), errno);

        assert_int_equal(file_stat(a, tp(&t, "f"), &res), 0);
        assert_return_code(stat(tp(&t, "f"), &st), errno);
        assert_int_equal(res.stat.type, S_IFREG);
        assert_int_equal(res.stat.size, 3);
        assert_true(res.stat.mtime_usec == (int64_t) st.st_mtim.tv_sec * 1000000 + st.st_mtim.tv_nsec / 1000);
        assert_null(res.stat.target);
        agent_file_result_done(&res);

        /* What the link points to, as stat -L; the path as given. */
        assert_int_equal(file_stat(a, tp(&t, "link"), &res), 0);
        assert_int_equal(res.stat.type, S_IFREG);
        assert_int_equal(res.stat.size, 3);
        assert_string_equal(res.stat.path, tp(&t, "link"));
        assert_null(res.stat.target);
        agent_file_result_done(&res);

        assert_int_equal(file_stat(a, t.dir, &res), 0);
        assert_int_equal(res.stat.type, S_IFDIR);
        assert_int_equal(res.stat.mode, 0700);
        agent_file_result_done(&res);
        assert_int_equal(file_stat(a, tp(&t, "missing"), &res), ENOENT);
        assert_false(res.has_stat);
        agent_file_result_done(&res);
        assert_int_equal(file_stat(a, tp(&t, "f/x"), NULL), ENOTDIR);

        /* A relative path is relative to /work, whether or not there is one here. */
        r = file_stat(a, ".", &res);
        assert_int_equal(file_stat(a, "/work/.", &res2), r);
        if (r == 0)
                assert_true(res.stat.mtime_usec == res2.stat.mtime_usec);
        agent_file_result_done(&res);
        agent_file_result_done(&res2);

        tmp_done(&t);
}

static void test_file_mkdir(void **state) {
        struct agent *a = *state;
        struct agent_file f;
        struct stat st;
        struct tmp t;

        tmp_init(&t);
        f = AGENT_FILE_INIT(0, AGENT_FILE_MKDIR, tp(&t, "d"));
        f.mode = 0700;
        assert_int_equal(file_op(a, f, NULL), 0);
        assert_return_code(stat(tp(&t, "d"), &st), errno);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0700);
        assert_int_equal(file_op(a, f, NULL), EEXIST);

        f = AGENT_FILE_INIT(0, AGENT_FILE_MKDIR, tp(&t, "x/y/z"));
        assert_int_equal(file_op(a, f, NULL), ENOENT);
        f.parents = true;
        assert_int_equal(file_op(a, f, NULL), 0);
        assert_int_equal(file_op(a, f, NULL), 0); /* as mkdir -p */
        assert_return_code(stat(tp(&t, "x/y/z"), &st), errno);
        assert_int_equal(st.st_mode & 07777, 0755);

        make_file(tp(&t, "file"), "");
        f = AGENT_FILE_INIT(0, AGENT_FILE_MKDIR, tp(&t, "file"));
        f.parents = true;
        assert_int_equal(file_op(a, f, NULL), EEXIST);
        tmp_done(&t);
}

static void test_file_remove(void **state) {
        struct agent *a = *state;
        struct agent_file f;
        struct stat st;
        struct tmp t, outside;

        tmp_init(&t);
        tmp_init(&outside);
        make_file(tp(&outside, "precious"), "p");

        make_file(tp(&t, "f"), "");
        assert_int_equal(file_op(a, AGENT_FILE_INIT(0, AGENT_FILE_REMOVE, tp(&t, "f")), NULL), 0);
        assert_int_equal(lstat(tp(&t, "f"), &st), -1);
        assert_int_equal(file_op(a, AGENT_FILE_INIT(0, AGENT_FILE_REMOVE, tp(&t, "f")), NULL), ENOENT);

        assert_return_code(mkdir(tp(&t, "empty"), 0755), errno);
        assert_int_equal(file_op(a, AGENT_FILE_INIT(0, AGENT_FILE_REMOVE, tp(&t, "empty")), NULL), 0);
        assert_int_equal(lstat(tp(&t, "empty"), &st), -1);

        /* A symlink to a directory: the link goes, not what it points to. */
        assert_return_code(symlink(outside.dir, tp(&t, "dirlink")), errno);
        assert_int_equal(file_op(a, AGENT_FILE_INIT(0, AGENT_FILE_REMOVE, tp(&t, "dirlink")), NULL), 0);
        assert_int_equal(lstat(tp(&t, "dirlink"), &st), -1);
        assert_return_code(stat(tp(&outside, "precious"), &st), errno);

        /* A tree with a symlink to a directory outside it, and one to a file. */
        assert_return_code(mkdir(tp(&t, "tree"), 0755), errno);
        assert_return_code(mkdir(tp(&t, "tree/sub"), 0755), errno);
        make_file(tp(&t, "tree/sub/file"), "x");
        assert_return_code(mkdir(tp(&t, "tree/sub/deeper"), 0700), errno);
        assert_return_code(symlink(outside.dir, tp(&t, "tree/sub/out")), errno);
        assert_return_code(symlink(tp(&outside, "precious"), tp(&t, "tree/file-out")), errno);
        assert_return_code(mkfifo(tp(&t, "tree/fifo"), 0644), errno);

        f = AGENT_FILE_INIT(0, AGENT_FILE_REMOVE, tp(&t, "tree"));
        assert_int_equal(file_op(a, f, NULL), ENOTEMPTY);
        f.recursive = true;
        assert_int_equal(file_op(a, f, NULL), 0);
        assert_int_equal(lstat(tp(&t, "tree"), &st), -1);
        assert_int_equal(errno, ENOENT);
        assert_return_code(stat(tp(&outside, "precious"), &st), errno);
        assert_int_equal(st.st_size, 1);

        /* Recursive on a plain file is a plain remove; "x/." is refused. */
        make_file(tp(&t, "g"), "");
        f = AGENT_FILE_INIT(0, AGENT_FILE_REMOVE, tp(&t, "g"));
        f.recursive = true;
        assert_int_equal(file_op(a, f, NULL), 0);
        assert_return_code(mkdir(tp(&t, "keep"), 0755), errno);
        f = AGENT_FILE_INIT(0, AGENT_FILE_REMOVE, tp(&t, "keep/."));
        f.recursive = true;
        assert_int_equal(file_op(a, f, NULL), EINVAL);
        assert_return_code(stat(tp(&t, "keep"), &st), errno);

        tmp_done(&t);
        tmp_done(&outside);
}

static void test_file_move(void **state) {
        struct agent *a = *state;
        _cleanup_free_ char *c = NULL;
        struct agent_file f;
        struct stat st;
        struct tmp t;

        tmp_init(&t);
        make_file(tp(&t, "a"), "content");
        assert_return_code(mkdir(tp(&t, "d"), 0755), errno);

        f = AGENT_FILE_INIT(0, AGENT_FILE_MOVE, tp(&t, "a"));
        f.to = tp(&t, "d/b");
        assert_int_equal(file_op(a, f, NULL), 0);
        assert_int_equal(lstat(tp(&t, "a"), &st), -1);
        c = slurp(tp(&t, "d/b"));
        assert_string_equal(c, "content");

        assert_int_equal(file_op(a, f, NULL), ENOENT);
        f = AGENT_FILE_INIT(0, AGENT_FILE_MOVE, tp(&t, "d/b"));
        f.to = tp(&t, "missing/b");
        assert_int_equal(file_op(a, f, NULL), ENOENT);
        tmp_done(&t);
}

static void test_file_not_stalling(void **state) {
        struct agent *a = *state;
        struct agent_file f = AGENT_FILE_INIT(file_id++, AGENT_FILE_READ, NULL);
        struct agent_file_result res = {};
        const size_t size = 1024 * 1024;
        _cleanup_free_ char *data = calloc(1, size), *back = NULL;
        _cleanup_free_ char *out = NULL, *err = NULL;
        struct agent_exit e;
        struct tmp t;
        size_t n;
        int p[2], fd;

        /* A read into a pipe nobody drains blocks its own process only: a stat, an exec,
         * go on meanwhile. */
        tmp_init(&t);
        fd = open(tp(&t, "f"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, size), (ssize_t) size);
        safe_close(fd);

        assert_return_code(pipe2(p, O_CLOEXEC), errno);
        f.path = tp(&t, "f");
        send_file(a, &f, p[1]);
        p[1] = safe_close(p[1]);

        assert_int_equal(file_stat(a, tp(&t, "f"), NULL), 0);
        run(a, 80, (char *[]) { "true", NULL }, default_env, "/", &e, &out, &err);
        assert_int_equal(e.code, 0);

        back = read_all_size(p[0], &n);
        safe_close(p[0]);
        assert_int_equal(n, size);
        expect_file_result(a, f.id, &res);
        assert_int_equal(res.error, 0);
        assert_int_equal(res.bytes, size);
        tmp_done(&t);
}

static void test_file_bad_requests(void **state) {
        static const struct {
                const char *json;
                size_t n_fds;
        } refused[] = {
                { "{\"type\":\"file\",\"id\":90,\"op\":\"read\",\"path\":\"/etc/hostname\"}", 0 },
                { "{\"type\":\"file\",\"id\":91,\"op\":\"stat\",\"path\":\"/\"}", 1 },
                { "{\"type\":\"file\",\"id\":92,\"op\":\"chmod\",\"path\":\"/\"}", 0 },
                { "{\"type\":\"file\",\"id\":93,\"op\":\"stat\"}", 0 },
                { "{\"type\":\"file\",\"id\":94,\"op\":\"stat\",\"path\":\"\"}", 0 },
                { "{\"type\":\"file\",\"id\":95,\"op\":\"list\",\"path\":\"/\",\"depth\":17}", 0 },
                { "{\"type\":\"file\",\"id\":96,\"op\":\"list\",\"path\":\"/\",\"depth\":0}", 0 },
                { "{\"type\":\"file\",\"id\":97,\"op\":\"move\",\"path\":\"/x\"}", 0 },
                { "{\"type\":\"file\",\"id\":98,\"op\":\"mkdir\",\"path\":\"/x\",\"mode\":4096}", 0 },
                { "{\"type\":\"file\",\"id\":99,\"op\":\"write\",\"path\":\"/x\",\"append\":1}", 1 },
        };
        struct agent *a = *state;

        /* No id: nobody to answer. */
        {
                _cleanup_json_ json_object *o = json_tokener_parse("{\"type\":\"file\",\"op\":\"stat\",\"path\":\"/\"}");
                assert_non_null(o);
                send_exec_raw(a, o, 0);
                expect_silence(a, 100);
        }

        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                _cleanup_json_ json_object *o = json_tokener_parse(refused[i].json);
                struct agent_file_result res;

                assert_non_null(o);
                send_exec_raw(a, o, refused[i].n_fds);
                expect_file_result(a, 90 + i, &res);
                assert_int_equal(res.error, EINVAL);
                agent_file_result_done(&res);
        }
}

#define T(f) cmocka_unit_test_setup_teardown(f, agent_setup, agent_teardown)

int main(int argc, char *argv[]) {
        const struct CMUnitTest tests[] = {
                T(test_ready_only),
                T(test_exit_code_and_output),
                T(test_stdin),
                T(test_not_found),
                T(test_not_executable),
                T(test_bad_cwd),
                T(test_cwd),
                T(test_path_from_given_env),
                T(test_env_exact),
                T(test_exec_inherits_nothing),
                T(test_kill),
                T(test_kill_reaches_group),
                T(test_kill_refused),
                T(test_orphan),
                T(test_concurrent),
                T(test_many_concurrent),
                T(test_resources),
                T(test_bad_requests),
                T(test_started),
                T(test_tty),
                T(test_tty_output_after_exit),
                T(test_tty_kill),
                T(test_tty_caller_gone),
                T(test_file_write_read_big),
                T(test_file_read),
                T(test_file_read_refused),
                T(test_file_read_epipe),
                T(test_file_write),
                T(test_file_own_descriptor_refused),
                T(test_file_list),
                T(test_file_list_too_big),
                T(test_file_stat),
                T(test_file_mkdir),
                T(test_file_remove),
                T(test_file_move),
                T(test_file_not_stalling),
                T(test_file_bad_requests),
                cmocka_unit_test(test_socket_close_ends_agent),
                cmocka_unit_test(test_sigterm_from_inside_is_ignored),
                cmocka_unit_test(test_not_dumpable),
                cmocka_unit_test(test_user_namespace_and_seccomp),
                cmocka_unit_test(test_no_user_namespace),
                cmocka_unit_test(test_agent_closes_inherited_fds),
                cmocka_unit_test(test_log_over_control),
                cmocka_unit_test(test_not_a_socket),
        };
        ssize_t n;

        if (argc == 2 && streq(argv[1], "--report"))
                return report();
        if (argc == 2 && streq(argv[1], "--tty-report"))
                return tty_report();

        agent_path = getenv("SANDBOX_INIT");
        if (!agent_path) {
                fprintf(stderr, "SANDBOX_INIT= must point to the sandbox-init to test.\n");
                return 77; /* skipped */
        }
        n = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
        if (n < 0)
                return EXIT_FAILURE;
        self_path[n] = 0;

        /* A write to an exec that died must fail the test, not kill it. This is inherited by
         * the agent, too: the execs must still start with SIGPIPE at its default. */
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
