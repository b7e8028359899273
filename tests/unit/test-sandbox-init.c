/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The real sandbox-init ($SANDBOX_INIT), driven over its control socket as sandboxd does,
 * but without bwrap: it is not PID 1 here, so it reaps orphans as a child subreaper.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent-protocol.h"
#include "macro.h"
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
                if (o && o->as_nobody && geteuid() == 0 &&
                    (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0))
                        _exit(92);
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
};

static void run_close(struct run *r) {
        r->in = safe_close(r->in);
        r->out = safe_close(r->out);
        r->err = safe_close(r->err);
}

static void exec_start(struct agent *a, uint64_t id, char **argv, char **env, const char *cwd,
                       struct run *ret) {
        _cleanup_json_ json_object *msg = NULL;
        int in[2], out[2], err[2], fds[3];

        assert_return_code(pipe2(in, O_CLOEXEC), errno);
        assert_return_code(pipe2(out, O_CLOEXEC), errno);
        assert_return_code(pipe2(err, O_CLOEXEC), errno);

        msg = agent_msg_exec(id, argv, env, cwd);
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

static void test_sigterm_ends_agent(void **state) {
        struct agent a;
        int status;

        /* As "docker stop" would: the agent ends, and as PID 1 the sandbox with it. */
        agent_start_with(&a, NULL);
        assert_return_code(kill(a.pid, SIGTERM), errno);
        assert_int_equal(waitpid(a.pid, &status, 0), a.pid);
        a.pid = 0;
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 128 + SIGTERM);
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
                cmocka_unit_test(test_socket_close_ends_agent),
                cmocka_unit_test(test_sigterm_ends_agent),
                cmocka_unit_test(test_not_dumpable),
                cmocka_unit_test(test_agent_closes_inherited_fds),
                cmocka_unit_test(test_not_a_socket),
        };
        ssize_t n;

        if (argc == 2 && streq(argv[1], "--report"))
                return report();

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
