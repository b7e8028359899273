/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The wire contract between sandboxd and sandbox-init, over a real socketpair. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent-protocol.h"
#include "macro.h"
#include "strv.h"

static void json_object_putp(json_object **p) {
        if (*p)
                json_object_put(*p);
}
#define _cleanup_json_ _cleanup_(json_object_putp)

struct pair {
        int a, b;
};

static int pair_setup(void **state) {
        struct pair *p = malloc(sizeof(*p));
        int sv[2];

        if (!p || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -1;
        *p = (struct pair) { sv[0], sv[1] };
        *state = p;
        return 0;
}

static int pair_teardown(void **state) {
        struct pair *p = *state;

        safe_close(p->a);
        safe_close(p->b);
        free(p);
        return 0;
}

static unsigned count_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        unsigned n = 0;

        assert_non_null(d);
        while (readdir(d))
                n++;
        closedir(d);
        return n;
}

static void set_nonblock(int fd) {
        assert_return_code(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), errno);
}

/* Sends bytes that agent_send() would never produce. */
static void send_raw(int sock, const void *data, size_t len, const int *fds, size_t n_fds) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * 8)];
        } control = {};
        struct iovec iov = { .iov_base = (void *) data, .iov_len = len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        assert_true(n_fds <= 8);
        if (n_fds > 0) {
                struct cmsghdr *c;

                mh.msg_control = &control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        assert_int_equal(sendmsg(sock, &mh, MSG_NOSIGNAL), (ssize_t) len);
}

static void assert_strv_equal(char **a, char * const *b) {
        assert_int_equal(strv_length(a), strv_length(b));
        for (size_t i = 0; b && b[i]; i++)
                assert_string_equal(a[i], b[i]);
}

static void assert_same_file(int a, int b) {
        struct stat sa, sb;

        assert_return_code(fstat(a, &sa), errno);
        assert_return_code(fstat(b, &sb), errno);
        assert_int_equal(sa.st_dev, sb.st_dev);
        assert_int_equal(sa.st_ino, sb.st_ino);
}

static void test_reset_messages(void **state) {
        _cleanup_json_ json_object *m = agent_msg_reset(7), *ok = agent_msg_reset_result(7, 0),
                                   *bad = agent_msg_reset_result(8, ETIMEDOUT), *junk = NULL;
        uint64_t id;
        int error;

        assert_non_null(m);
        assert_string_equal(json_object_to_json_string_ext(m, JSON_C_TO_STRING_PLAIN), "{\"type\":\"reset\",\"id\":7}");
        assert_int_equal(agent_parse_reset_result(ok, &id, &error), 0);
        assert_int_equal(id, 7);
        assert_int_equal(error, 0);
        assert_int_equal(agent_parse_reset_result(bad, &id, &error), 0);
        assert_int_equal(id, 8);
        assert_int_equal(error, ETIMEDOUT);
        assert_null(agent_msg_reset_result(1, -EIO));
        junk = json_tokener_parse("{\"type\":\"reset-result\",\"id\":1,\"errno\":99999}");
        assert_int_equal(agent_parse_reset_result(junk, &id, &error), -EBADMSG);
        json_object_put(junk);
        junk = json_tokener_parse("{\"type\":\"reset-result\",\"errno\":0}");
        assert_true(agent_parse_reset_result(junk, &id, &error) < 0);
}

/* "log": what the agent's stderr got, any bytes (a NUL, a line cut short), through a real
 * socket; at most AGENT_LOG_CHUNK a message. */
static void test_log_roundtrip(void **state) {
        struct pair *p = *state;
        static const char data[] = "sandbox-init: reset: \"/etc\" was changed\n\0tail";
        _cleanup_json_ json_object *m = agent_msg_log(data, sizeof(data) - 1), *got = NULL, *junk = NULL;
        char big[AGENT_LOG_CHUNK + 1];
        const char *type, *d;
        size_t n;

        assert_non_null(m);
        assert_int_equal(agent_send(p->b, m, NULL, 0), 0);
        assert_int_equal(agent_recv(p->a, &got, NULL, 0, NULL), 0);
        assert_int_equal(agent_get_string(got, "type", &type), 0);
        assert_string_equal(type, "log");
        assert_int_equal(agent_parse_log(got, &d, &n), 0);
        assert_int_equal(n, sizeof(data) - 1);
        assert_memory_equal(d, data, n);

        memset(big, 'x', sizeof(big));
        assert_null(agent_msg_log(big, sizeof(big)));
        json_object *full = agent_msg_log(big, AGENT_LOG_CHUNK);
        assert_non_null(full);
        json_object_put(full);
        junk = json_tokener_parse("{\"type\":\"log\",\"data\":7}");
        assert_int_equal(agent_parse_log(junk, &d, &n), -EBADMSG);
        json_object_put(junk);
        junk = json_tokener_parse("{\"type\":\"log\"}");
        assert_int_equal(agent_parse_log(junk, &d, &n), -EBADMSG);
}

static void test_exec_roundtrip(void **state) {
        struct pair *p = *state;
        _cleanup_json_ json_object *msg = NULL, *got = NULL;
        _cleanup_strv_free_ char **argv = NULL, **env = NULL;
        char *want_argv[] = { "sh", "-c", "echo \"hi\" / ünïcode", NULL };
        char *want_env[] = { "PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL };
        int pin[2], pout[2], perr[2], fds[AGENT_EXEC_NFDS], sent[AGENT_EXEC_NFDS];
        size_t n_fds = 99;
        const char *s;
        int64_t i;
        char c;

        assert_return_code(pipe2(pin, O_CLOEXEC), errno);
        assert_return_code(pipe2(pout, O_CLOEXEC), errno);
        assert_return_code(pipe2(perr, O_CLOEXEC), errno);
        sent[0] = pin[0];
        sent[1] = pout[1];
        sent[2] = perr[1];

        msg = agent_msg_exec(42, want_argv, want_env, "/work");
        assert_non_null(msg);
        assert_int_equal(agent_send(p->a, msg, sent, 3), 0);
        assert_int_equal(agent_recv(p->b, &got, fds, AGENT_EXEC_NFDS, &n_fds), 0);
        assert_int_equal(n_fds, 3);

        assert_int_equal(agent_get_string(got, "type", &s), 0);
        assert_string_equal(s, "exec");
        assert_int_equal(agent_get_int64(got, "id", &i), 0);
        assert_int_equal(i, 42);
        assert_int_equal(agent_get_strv(got, "argv", &argv), 0);
        assert_strv_equal(argv, want_argv);
        assert_int_equal(agent_get_strv(got, "env", &env), 0);
        assert_strv_equal(env, want_env);
        assert_int_equal(agent_get_string(got, "cwd", &s), 0);
        assert_string_equal(s, "/work");

        for (size_t k = 0; k < 3; k++) {
                assert_true(fds[k] != sent[k]);
                assert_same_file(fds[k], sent[k]);
                assert_true(fcntl(fds[k], F_GETFD) & FD_CLOEXEC);
        }

        /* The descriptors work: write into what we received, read from what we kept. */
        assert_int_equal(write(pin[1], "i", 1), 1);
        assert_int_equal(read(fds[0], &c, 1), 1);
        assert_int_equal(c, 'i');
        assert_int_equal(write(fds[1], "o", 1), 1);
        assert_int_equal(read(pout[0], &c, 1), 1);
        assert_int_equal(c, 'o');
        assert_int_equal(write(fds[2], "e", 1), 1);
        assert_int_equal(read(perr[0], &c, 1), 1);
        assert_int_equal(c, 'e');

        for (size_t k = 0; k < 3; k++)
                safe_close(fds[k]);
        close_pair(pin);
        close_pair(pout);
        close_pair(perr);
}

static void test_exec_defaults(void **state) {
        struct pair *p = *state;
        _cleanup_json_ json_object *msg = NULL, *got = NULL;
        _cleanup_strv_free_ char **argv = NULL, **env = NULL;
        const char *s;
        size_t n_fds = 99;

        /* NULL vectors are empty arrays; a NULL cwd leaves the key out. */
        msg = agent_msg_exec(0, NULL, NULL, NULL);
        assert_non_null(msg);
        assert_int_equal(agent_send(p->a, msg, NULL, 0), 0);
        assert_int_equal(agent_recv(p->b, &got, NULL, 0, &n_fds), 0);
        assert_int_equal(n_fds, 0);
        assert_int_equal(agent_get_strv(got, "argv", &argv), 0);
        assert_non_null(argv);
        assert_null(argv[0]);
        assert_int_equal(agent_get_strv(got, "env", &env), 0);
        assert_null(env[0]);
        assert_int_equal(agent_get_string(got, "cwd", &s), -EBADMSG);
}

static void test_kill_ready_roundtrip(void **state) {
        struct pair *p = *state;
        _cleanup_json_ json_object *kill_msg = NULL, *ready = NULL, *got1 = NULL, *got2 = NULL;
        const char *s;
        int64_t i;

        kill_msg = agent_msg_kill(7, 9);
        ready = agent_msg_ready();
        assert_non_null(kill_msg);
        assert_non_null(ready);

        /* Sent in one direction, received in order, with no descriptors asked for. */
        assert_int_equal(agent_send(p->b, ready, NULL, 0), 0);
        assert_int_equal(agent_send(p->b, kill_msg, NULL, 0), 0);

        assert_int_equal(agent_recv(p->a, &got1, NULL, 0, NULL), 0);
        assert_int_equal(agent_get_string(got1, "type", &s), 0);
        assert_string_equal(s, "ready");
        assert_int_equal(agent_get_int64(got1, "version", &i), 0);
        assert_int_equal(i, AGENT_PROTOCOL_VERSION);

        assert_int_equal(agent_recv(p->a, &got2, NULL, 0, NULL), 0);
        assert_int_equal(agent_get_string(got2, "type", &s), 0);
        assert_string_equal(s, "kill");
        assert_int_equal(agent_get_int64(got2, "id", &i), 0);
        assert_int_equal(i, 7);
        assert_int_equal(agent_get_int64(got2, "signal", &i), 0);
        assert_int_equal(i, 9);
}

static void test_exit_roundtrip(void **state) {
        struct pair *p = *state;
        const struct agent_exit cases[] = {
                { .id = 1, .code = 3, .signal = 0, .duration_usec = 1234567, .utime_usec = 1000,
                  .stime_usec = 2000, .maxrss_kb = 4096 },
                { .id = (uint64_t) INT64_MAX, .code = -1, .signal = 9,
                  .duration_usec = UINT64_C(3600) * 1000000U * 24 * 365, .utime_usec = 0,
                  .stime_usec = 0, .maxrss_kb = UINT64_C(1) << 40 },
                { .id = 0, .code = 255, .signal = 0 },
        };

        for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
                _cleanup_json_ json_object *msg = NULL, *got = NULL;
                struct agent_exit e;
                const char *s;

                msg = agent_msg_exit(&cases[k]);
                assert_non_null(msg);
                assert_int_equal(agent_send(p->b, msg, NULL, 0), 0);
                assert_int_equal(agent_recv(p->a, &got, NULL, 0, NULL), 0);
                assert_int_equal(agent_get_string(got, "type", &s), 0);
                assert_string_equal(s, "exit");

                memset(&e, 0xaa, sizeof(e));
                assert_int_equal(agent_parse_exit(got, &e), 0);
                assert_int_equal(e.id, cases[k].id);
                assert_int_equal(e.code, cases[k].code);
                assert_int_equal(e.signal, cases[k].signal);
                assert_int_equal(e.duration_usec, cases[k].duration_usec);
                assert_int_equal(e.utime_usec, cases[k].utime_usec);
                assert_int_equal(e.stime_usec, cases[k].stime_usec);
                assert_int_equal(e.maxrss_kb, cases[k].maxrss_kb);
        }
}

static void test_parse_exit_refuses(void **state) {
        static const char *bad[] = {
                /* a field missing */
                "{\"id\":1,\"code\":0,\"signal\":0,\"duration_usec\":1,\"utime_usec\":1,\"stime_usec\":1}",
                /* mistyped */
                "{\"id\":\"1\",\"code\":0,\"signal\":0,\"duration_usec\":1,\"utime_usec\":1,\"stime_usec\":1,\"maxrss_kb\":1}",
                "{\"id\":1,\"code\":0.5,\"signal\":0,\"duration_usec\":1,\"utime_usec\":1,\"stime_usec\":1,\"maxrss_kb\":1}",
                "{\"id\":1,\"code\":0,\"signal\":false,\"duration_usec\":1,\"utime_usec\":1,\"stime_usec\":1,\"maxrss_kb\":1}",
                "{\"id\":1,\"code\":0,\"signal\":0,\"duration_usec\":null,\"utime_usec\":1,\"stime_usec\":1,\"maxrss_kb\":1}",
                /* out of range */
                "{\"id\":-1,\"code\":0,\"signal\":0,\"duration_usec\":1,\"utime_usec\":1,\"stime_usec\":1,\"maxrss_kb\":1}",
                "{\"id\":18446744073709551615,\"code\":0,\"signal\":0,\"duration_usec\":1,\"utime_usec\":1,\"stime_usec\":1,\"maxrss_kb\":1}",
                "{\"id\":1,\"code\":0,\"signal\":0,\"duration_usec\":-5,\"utime_usec\":1,\"stime_usec\":1,\"maxrss_kb\":1}",
                "{\"id\":1,\"code\":256,\"signal\":0,\"duration_usec\":1,\"utime_usec\":1,\"stime_usec\":1,\"maxrss_kb\":1}",
                "{\"id\":1,\"code\":4294967296,\"signal\":0,\"duration_usec\":1,\"utime_usec\":1,\"stime_usec\":1,\"maxrss_kb\":1}",
                "{\"id\":1,\"code\":-1,\"signal\":65,\"duration_usec\":1,\"utime_usec\":1,\"stime_usec\":1,\"maxrss_kb\":1}",
                /* neither or both of code and signal */
                "{\"id\":1,\"code\":-1,\"signal\":0,\"duration_usec\":1,\"utime_usec\":1,\"stime_usec\":1,\"maxrss_kb\":1}",
                "{\"id\":1,\"code\":3,\"signal\":9,\"duration_usec\":1,\"utime_usec\":1,\"stime_usec\":1,\"maxrss_kb\":1}",
        };
        static const char *good =
                "{\"id\":1,\"code\":-1,\"signal\":64,\"duration_usec\":1,\"utime_usec\":1,\"stime_usec\":1,\"maxrss_kb\":1}";

        for (size_t k = 0; k < ELEMENTSOF(bad); k++) {
                _cleanup_json_ json_object *obj = json_tokener_parse(bad[k]);
                struct agent_exit e = { .id = 77 };

                assert_non_null(obj);
                assert_int_equal(agent_parse_exit(obj, &e), -EBADMSG);
                assert_int_equal(e.id, 77); /* untouched on failure */
        }

        _cleanup_json_ json_object *obj = json_tokener_parse(good);
        struct agent_exit e = {};
        assert_int_equal(agent_parse_exit(obj, &e), 0);
        assert_int_equal(e.signal, 64);
}

static void test_builders_refuse_unrepresentable(void **state) {
        json_object *o;

        /* Integers are int64 on the wire; a larger id must not come out negative. */
        assert_null(agent_msg_kill(UINT64_MAX, 9));
        assert_null(agent_msg_exec((uint64_t) INT64_MAX + 1, NULL, NULL, NULL));
        assert_null(agent_msg_exit(&(struct agent_exit) { .id = 1, .duration_usec = UINT64_MAX }));

        o = agent_msg_kill((uint64_t) INT64_MAX, 9);
        assert_non_null(o);
        json_object_put(o);
}

static void test_field_helpers(void **state) {
        _cleanup_json_ json_object *obj = json_tokener_parse(
                "{\"s\":\"str\",\"i\":-5,\"max\":9223372036854775807,\"big\":9223372036854775808,"
                "\"d\":5.0,\"b\":true,\"n\":null,\"si\":\"5\",\"nul\":\"a\\u0000b\","
                "\"v\":[\"a\",\"\",\"c\"],\"ve\":[],\"vi\":[\"a\",1],\"vn\":[null],"
                "\"vnul\":[\"a\\u0000b\"],\"o\":{}}");
        _cleanup_strv_free_ char **v = NULL, **ve = NULL;
        char **untouched = (char **) 0x1;
        const char *s = NULL;
        int64_t i = 0;

        assert_non_null(obj);

        assert_int_equal(agent_get_string(obj, "s", &s), 0);
        assert_string_equal(s, "str");
        assert_int_equal(agent_get_string(obj, "missing", &s), -EBADMSG);
        assert_int_equal(agent_get_string(obj, "i", &s), -EBADMSG);
        assert_int_equal(agent_get_string(obj, "n", &s), -EBADMSG);
        assert_int_equal(agent_get_string(obj, "v", &s), -EBADMSG);
        assert_int_equal(agent_get_string(obj, "nul", &s), -EBADMSG);
        assert_string_equal(s, "str");

        assert_int_equal(agent_get_int64(obj, "i", &i), 0);
        assert_int_equal(i, -5);
        assert_int_equal(agent_get_int64(obj, "max", &i), 0);
        assert_true(i == INT64_MAX);
        assert_int_equal(agent_get_int64(obj, "big", &i), -EBADMSG);
        assert_int_equal(agent_get_int64(obj, "d", &i), -EBADMSG);
        assert_int_equal(agent_get_int64(obj, "b", &i), -EBADMSG);
        assert_int_equal(agent_get_int64(obj, "n", &i), -EBADMSG);
        assert_int_equal(agent_get_int64(obj, "si", &i), -EBADMSG);
        assert_int_equal(agent_get_int64(obj, "missing", &i), -EBADMSG);
        assert_true(i == INT64_MAX);

        assert_int_equal(agent_get_strv(obj, "v", &v), 0);
        assert_strv_equal(v, (char *[]) { "a", "", "c", NULL });
        assert_int_equal(agent_get_strv(obj, "ve", &ve), 0);
        assert_non_null(ve);
        assert_null(ve[0]);
        assert_int_equal(agent_get_strv(obj, "vi", &untouched), -EBADMSG);
        assert_int_equal(agent_get_strv(obj, "vn", &untouched), -EBADMSG);
        assert_int_equal(agent_get_strv(obj, "vnul", &untouched), -EBADMSG);
        assert_int_equal(agent_get_strv(obj, "s", &untouched), -EBADMSG);
        assert_int_equal(agent_get_strv(obj, "o", &untouched), -EBADMSG);
        assert_int_equal(agent_get_strv(obj, "missing", &untouched), -EBADMSG);
        assert_ptr_equal(untouched, (char **) 0x1);
}

static void test_send_too_big(void **state) {
        struct pair *p = *state;
        _cleanup_json_ json_object *obj = json_object_new_object(), *got = NULL;
        _cleanup_free_ char *big = malloc(AGENT_MESSAGE_MAX + 1);

        assert_non_null(obj);
        assert_non_null(big);
        memset(big, 'x', AGENT_MESSAGE_MAX);
        big[AGENT_MESSAGE_MAX] = 0;
        assert_int_equal(json_object_object_add(obj, "data", json_object_new_string(big)), 0);

        assert_int_equal(agent_send(p->a, obj, NULL, 0), -EMSGSIZE);

        /* Nothing went out. */
        set_nonblock(p->b);
        assert_int_equal(agent_recv(p->b, &got, NULL, 0, NULL), -EAGAIN);
}

static void send_and_receive_size(struct pair *p, size_t size, bool must_fit) {
        _cleanup_json_ json_object *obj = json_object_new_object(), *got = NULL;
        _cleanup_free_ char *big = NULL;
        const char *s;
        int r;

        /* {"data":"xxx…"} is 11 bytes of framing around the string. */
        assert_true(size > 11);
        big = malloc(size - 11 + 1);
        assert_non_null(big);
        memset(big, 'y', size - 11);
        big[size - 11] = 0;
        assert_int_equal(json_object_object_add(obj, "data", json_object_new_string(big)), 0);
        assert_int_equal(strlen(json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN)), size);

        r = agent_send(p->a, obj, NULL, 0);
        if (!must_fit && r == -EMSGSIZE)
                return;
        assert_int_equal(r, 0);
        assert_int_equal(agent_recv(p->b, &got, NULL, 0, NULL), 0);
        assert_int_equal(agent_get_string(got, "data", &s), 0);
        assert_string_equal(s, big);
}

static void test_send_large(void **state) {
        /* Beyond the default socket buffer (~208 KiB), within what any user may raise it to. */
        send_and_receive_size(*state, 300 * 1024, true);
        /* Exactly the maximum needs SO_SNDBUFFORCE (root) or a generous net.core.wmem_max. */
        send_and_receive_size(*state, AGENT_MESSAGE_MAX, geteuid() == 0);
}

static void test_eof(void **state) {
        struct pair *p = *state;
        json_object *got = NULL;

        p->b = safe_close(p->b);
        assert_int_equal(agent_recv(p->a, &got, NULL, 0, NULL), -ECONNRESET);
        assert_null(got);
}

static void test_eagain(void **state) {
        struct pair *p = *state;
        json_object *got = NULL;
        int fds[3];
        size_t n = 99;

        set_nonblock(p->b);
        assert_int_equal(agent_recv(p->b, &got, fds, 3, &n), -EAGAIN);
        assert_null(got);
        assert_int_equal(n, 99);
}

static void test_not_an_object(void **state) {
        static const char *bad[] = {
                "hello",
                "[1,2]",
                "\"a string\"",
                "42",
                "{\"a\":",      /* truncated */
                "{\"a\":1}x",   /* trailing bytes */
                "{\"a\":1}{}",  /* two objects in one datagram */
                "{\"a\":1}\0",
        };
        static const size_t len[] = { 5, 5, 10, 2, 5, 8, 9, 8 };
        struct pair *p = *state;
        _cleanup_json_ json_object *ok = agent_msg_ready(), *got = NULL;
        unsigned before;
        int fd = -EBADF;
        const char *s;
        size_t n;

        before = count_fds();
        for (size_t k = 0; k < ELEMENTSOF(bad); k++) {
                json_object *o = NULL;
                int fds[3] = { -1, -1, -1 };

                /* Send one descriptor along: it must not stay behind in our table. */
                fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
                assert_true(fd >= 0);
                send_raw(p->a, bad[k], len[k], &fd, 1);
                fd = safe_close(fd);

                assert_int_equal(agent_recv(p->b, &o, fds, 3, &n), -EBADMSG);
                assert_null(o);
                assert_int_equal(count_fds(), before);
        }

        /* A bad datagram is consumed whole: the stream stays in step. */
        assert_int_equal(agent_send(p->a, ok, NULL, 0), 0);
        assert_int_equal(agent_recv(p->b, &got, NULL, 0, NULL), 0);
        assert_int_equal(agent_get_string(got, "type", &s), 0);
        assert_string_equal(s, "ready");
}

static void test_too_many_fds(void **state) {
        struct pair *p = *state;
        _cleanup_json_ json_object *msg = agent_msg_kill(1, 9);
        int nul[5], fds[3];
        unsigned before;
        size_t n;

        assert_non_null(msg);
        for (size_t k = 0; k < ELEMENTSOF(nul); k++) {
                nul[k] = open("/dev/null", O_RDONLY | O_CLOEXEC);
                assert_true(nul[k] >= 0);
        }
        before = count_fds();

        /* 4 fds fit in the control buffer sized for 3 (alignment); 5 do not (MSG_CTRUNC);
         * any fd at all is too many when none is expected. */
        for (size_t sent = 4; sent <= 5; sent++) {
                json_object *got = NULL;

                assert_int_equal(agent_send(p->a, msg, nul, sent), 0);
                assert_int_equal(agent_recv(p->b, &got, fds, 3, &n), -EBADMSG);
                assert_null(got);
                assert_int_equal(count_fds(), before);
        }
        {
                json_object *got = NULL;

                assert_int_equal(agent_send(p->a, msg, nul, 1), 0);
                assert_int_equal(agent_recv(p->b, &got, NULL, 0, NULL), -EBADMSG);
                assert_null(got);
                assert_int_equal(count_fds(), before);
        }

        /* And exactly as many as allowed is fine. */
        {
                _cleanup_json_ json_object *got = NULL;

                assert_int_equal(agent_send(p->a, msg, nul, 3), 0);
                assert_int_equal(agent_recv(p->b, &got, fds, 3, &n), 0);
                assert_int_equal(n, 3);
                assert_int_equal(count_fds(), before + 3);
                for (size_t k = 0; k < 3; k++) {
                        assert_same_file(fds[k], nul[k]);
                        safe_close(fds[k]);
                }
        }

        for (size_t k = 0; k < ELEMENTSOF(nul); k++)
                safe_close(nul[k]);
}

static void test_oversized_datagram(void **state) {
        struct pair *p = *state;
        _cleanup_json_ json_object *ok = agent_msg_ready(), *got = NULL;
        _cleanup_free_ char *big = malloc(AGENT_MESSAGE_MAX + 2);
        int want = 4 * 1024 * 1024, fd, fds[3];
        json_object *o = NULL;
        unsigned before;
        const char *s;
        size_t n;

        /* A valid object one byte over the limit, sent past agent_send()'s own check. */
        assert_non_null(big);
        big[0] = '{';
        memset(big + 1, ' ', AGENT_MESSAGE_MAX - 1);
        big[AGENT_MESSAGE_MAX] = '}';
        if (setsockopt(p->a, SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof(want)) < 0)
                (void) setsockopt(p->a, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want));

        before = count_fds();
        fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        {
                struct iovec iov = { .iov_base = big, .iov_len = AGENT_MESSAGE_MAX + 1 };
                union {
                        struct cmsghdr align;
                        char buf[CMSG_SPACE(sizeof(int))];
                } control = {};
                struct msghdr mh = {
                        .msg_iov = &iov, .msg_iovlen = 1,
                        .msg_control = &control, .msg_controllen = sizeof(control.buf),
                };
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof(int));
                if (sendmsg(p->a, &mh, MSG_NOSIGNAL) < 0) {
                        assert_int_equal(errno, EMSGSIZE);
                        safe_close(fd);
                        skip(); /* net.core.wmem_max too small and no CAP_NET_ADMIN */
                }
        }
        safe_close(fd);

        assert_int_equal(agent_recv(p->b, &o, fds, 3, &n), -EBADMSG);
        assert_null(o);
        assert_int_equal(count_fds(), before);

        assert_int_equal(agent_send(p->a, ok, NULL, 0), 0);
        assert_int_equal(agent_recv(p->b, &got, NULL, 0, NULL), 0);
        assert_int_equal(agent_get_string(got, "type", &s), 0);
        assert_string_equal(s, "ready");
}

static void test_send_invalid(void **state) {
        struct pair *p = *state;
        _cleanup_json_ json_object *arr = json_object_new_array(), *obj = agent_msg_ready();

        assert_int_equal(agent_send(p->a, arr, NULL, 0), -EINVAL);
        assert_int_equal(agent_send(p->a, NULL, NULL, 0), -EINVAL);
        assert_int_equal(agent_send(p->a, obj, NULL, 1), -EINVAL);
        assert_int_equal(agent_send(-1, obj, NULL, 0), -EINVAL);

        /* The peer gone: an error, and no SIGPIPE that would kill us. */
        p->b = safe_close(p->b);
        assert_int_equal(agent_send(p->a, obj, NULL, 0), -EPIPE);
}

/* Sends msg from a to b, and returns what b received. */
static json_object *roundtrip(struct pair *p, json_object *msg, const char *want_type) {
        json_object *got = NULL;
        const char *s;

        assert_non_null(msg);
        assert_int_equal(agent_send(p->a, msg, NULL, 0), 0);
        assert_int_equal(agent_recv(p->b, &got, NULL, 0, NULL), 0);
        assert_int_equal(agent_get_string(got, "type", &s), 0);
        assert_string_equal(s, want_type);
        return got;
}

static void test_started_roundtrip(void **state) {
        _cleanup_json_ json_object *msg = agent_msg_started(12, 345), *got = NULL;
        uint64_t id = 0;
        pid_t pid = 0;

        got = roundtrip(*state, msg, "started");
        assert_int_equal(agent_parse_started(got, &id, &pid), 0);
        assert_int_equal(id, 12);
        assert_int_equal(pid, 345);

        /* No pid 0 or below; and what the agent sends is checked. */
        assert_null(agent_msg_started(1, 0));
        assert_null(agent_msg_started(1, -5));
        assert_null(agent_msg_started(UINT64_MAX, 5));
        static const char *bad[] = {
                "{\"id\":1}",
                "{\"pid\":1}",
                "{\"id\":1,\"pid\":0}",
                "{\"id\":1,\"pid\":2147483648}",
                "{\"id\":-1,\"pid\":1}",
                "{\"id\":1,\"pid\":\"1\"}",
        };
        for (size_t k = 0; k < ELEMENTSOF(bad); k++) {
                _cleanup_json_ json_object *o = json_tokener_parse(bad[k]);

                assert_non_null(o);
                id = 77;
                assert_int_equal(agent_parse_started(o, &id, &pid), -EBADMSG);
                assert_int_equal(id, 77);
        }
}

static void test_tty_roundtrip(void **state) {
        _cleanup_json_ json_object *exec = NULL, *got = NULL, *plain = NULL, *gotp = NULL,
                                   *resize = NULL, *gotr = NULL;
        _cleanup_strv_free_ char **argv = NULL;
        struct agent_winsize ws = {}, ws2 = { .rows = 9, .cols = 9 };
        uint64_t id;

        exec = agent_msg_exec_tty(5, (char *[]) { "bash", NULL }, NULL, "/work",
                                  &(struct agent_winsize) { .rows = 24, .cols = 65535 });
        got = roundtrip(*state, exec, "exec");
        assert_int_equal(agent_parse_exec_tty(got, &ws), 1);
        assert_int_equal(ws.rows, 24);
        assert_int_equal(ws.cols, 65535);
        /* Otherwise an ordinary exec. */
        assert_int_equal(agent_get_strv(got, "argv", &argv), 0);
        assert_string_equal(argv[0], "bash");

        plain = agent_msg_exec(6, (char *[]) { "true", NULL }, NULL, NULL);
        gotp = roundtrip(*state, plain, "exec");
        assert_int_equal(agent_parse_exec_tty(gotp, &ws2), 0);
        assert_int_equal(ws2.rows, 9); /* untouched */

        resize = agent_msg_resize(5, &(struct agent_winsize) { .rows = 0, .cols = 132 });
        gotr = roundtrip(*state, resize, "resize");
        assert_int_equal(agent_parse_resize(gotr, &id, &ws), 0);
        assert_int_equal(id, 5);
        assert_int_equal(ws.rows, 0);
        assert_int_equal(ws.cols, 132);

        /* Version 6: the answer, with the exec's id. */
        {
                _cleanup_json_ json_object *resized = agent_msg_resized(5), *gotd = NULL, *bad = NULL;
                uint64_t rid = 0;

                gotd = roundtrip(*state, resized, "resized");
                assert_int_equal(agent_parse_resized(gotd, &rid), 0);
                assert_int_equal(rid, 5);
                bad = json_tokener_parse("{\"type\":\"resized\",\"id\":-1}");
                assert_int_equal(agent_parse_resized(bad, &rid), -EBADMSG);
        }

        assert_null(agent_msg_exec_tty(1, NULL, NULL, NULL, NULL));
        assert_null(agent_msg_resize(1, NULL));

        static const char *bad_tty[] = {
                "{\"tty\":true}",
                "{\"tty\":null}",
                "{\"tty\":{}}",
                "{\"tty\":{\"rows\":24}}",
                "{\"tty\":{\"rows\":-1,\"cols\":80}}",
                "{\"tty\":{\"rows\":24,\"cols\":65536}}",
                "{\"tty\":{\"rows\":\"24\",\"cols\":80}}",
        };
        for (size_t k = 0; k < ELEMENTSOF(bad_tty); k++) {
                _cleanup_json_ json_object *o = json_tokener_parse(bad_tty[k]);

                assert_non_null(o);
                assert_int_equal(agent_parse_exec_tty(o, &ws2), -EBADMSG);
                assert_int_equal(ws2.rows, 9);
        }
        static const char *bad_resize[] = {
                "{\"rows\":1,\"cols\":1}",
                "{\"id\":1,\"rows\":1}",
                "{\"id\":1,\"rows\":70000,\"cols\":1}",
                "{\"id\":-1,\"rows\":1,\"cols\":1}",
        };
        for (size_t k = 0; k < ELEMENTSOF(bad_resize); k++) {
                _cleanup_json_ json_object *o = json_tokener_parse(bad_resize[k]);

                assert_non_null(o);
                id = 77;
                assert_int_equal(agent_parse_resize(o, &id, &ws2), -EBADMSG);
                assert_int_equal(id, 77);
        }
}

static void test_file_op_names(void **state) {
        for (int op = 0; op < _AGENT_FILE_OP_MAX; op++) {
                const char *s = agent_file_op_to_string(op);

                assert_non_null(s);
                assert_int_equal(agent_file_op_from_string(s), op);
        }
        assert_null(agent_file_op_to_string(_AGENT_FILE_OP_MAX));
        assert_null(agent_file_op_to_string(-1));
        assert_int_equal(agent_file_op_from_string("chmod"), _AGENT_FILE_OP_INVALID);
        assert_int_equal(agent_file_op_from_string(NULL), _AGENT_FILE_OP_INVALID);
        assert_int_equal(agent_file_op_nfds(AGENT_FILE_READ), 1);
        assert_int_equal(agent_file_op_nfds(AGENT_FILE_WRITE), 1);
        assert_int_equal(agent_file_op_nfds(AGENT_FILE_LIST), 0);
        assert_int_equal(agent_file_op_nfds(AGENT_FILE_MOVE), 0);
        assert_int_equal(agent_file_op_nfds(AGENT_FILE_ARCHIVE), 1);
        assert_int_equal(agent_file_op_nfds(AGENT_FILE_EXTRACT), 1);
        assert_int_equal(agent_file_op_from_string("archive"), AGENT_FILE_ARCHIVE);
        assert_int_equal(agent_file_op_from_string("extract"), AGENT_FILE_EXTRACT);

        assert_string_equal(agent_file_type_to_string(S_IFREG | 0644), "file");
        assert_string_equal(agent_file_type_to_string(S_IFLNK), "link");
        assert_null(agent_file_type_to_string(0));
        assert_int_equal(agent_file_type_from_string("block"), S_IFBLK);
        assert_int_equal(agent_file_type_from_string("door"), 0);
}

static void test_file_roundtrip(void **state) {
        struct pair *p = *state;
        struct agent_file cases[] = {
                AGENT_FILE_INIT(1, AGENT_FILE_READ, "/work/a"),
                AGENT_FILE_INIT(2, AGENT_FILE_READ, "rel/ünï"),
                AGENT_FILE_INIT(3, AGENT_FILE_WRITE, "/work/b"),
                AGENT_FILE_INIT(4, AGENT_FILE_WRITE, "b"),
                AGENT_FILE_INIT(5, AGENT_FILE_LIST, "/"),
                AGENT_FILE_INIT(6, AGENT_FILE_LIST, "/"),
                AGENT_FILE_INIT(7, AGENT_FILE_STAT, "x"),
                AGENT_FILE_INIT(8, AGENT_FILE_MKDIR, "d"),
                AGENT_FILE_INIT(9, AGENT_FILE_REMOVE, "d"),
                AGENT_FILE_INIT(10, AGENT_FILE_MOVE, "from"),
                AGENT_FILE_INIT(11, AGENT_FILE_WRITE, "m0"),
                AGENT_FILE_INIT(12, AGENT_FILE_ARCHIVE, "/work"),
                AGENT_FILE_INIT(13, AGENT_FILE_EXTRACT, "/work"),
                AGENT_FILE_INIT(14, AGENT_FILE_ARCHIVE, "/work"),
        };

        cases[1].offset = 10;
        cases[1].length = 0;
        cases[1].max = (uint64_t) INT64_MAX;
        cases[3].mode = 0600;
        cases[3].append = true;
        cases[3].parents = true;
        cases[5].depth = AGENT_FILE_DEPTH_MAX;
        cases[7].mode = 0700;
        cases[7].parents = true;
        cases[8].recursive = true;
        cases[9].to = "to";
        cases[10].mode = 0;
        cases[11].tmp = true;
        cases[11].max = 1 << 20;
        cases[12].max = 5;

        for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
                _cleanup_json_ json_object *msg = agent_msg_file(cases + k), *got = NULL;
                struct agent_file f;

                got = roundtrip(p, msg, "file");
                memset(&f, 0xaa, sizeof(f));
                assert_int_equal(agent_parse_file(got, &f), 0);
                assert_int_equal(f.id, cases[k].id);
                assert_int_equal(f.op, cases[k].op);
                assert_string_equal(f.path, cases[k].path);
                if (cases[k].to)
                        assert_string_equal(f.to, cases[k].to);
                else
                        assert_null(f.to);
                assert_true(f.offset == cases[k].offset);
                assert_true(f.length == cases[k].length);
                assert_true(f.max == cases[k].max);
                assert_int_equal(f.mode, cases[k].mode);
                assert_int_equal(f.depth, cases[k].depth);
                assert_int_equal(f.append, cases[k].append);
                assert_int_equal(f.parents, cases[k].parents);
                assert_int_equal(f.recursive, cases[k].recursive);
                assert_int_equal(f.tmp, cases[k].tmp);
        }

        /* Defaults stay out of the message; what does not apply to the op too. */
        {
                struct agent_file f = AGENT_FILE_INIT(1, AGENT_FILE_STAT, "x");
                _cleanup_json_ json_object *msg = NULL;

                f.append = f.recursive = true;
                f.offset = 5;
                msg = agent_msg_file(&f);
                assert_non_null(msg);
                assert_string_equal(json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN),
                                    "{\"type\":\"file\",\"id\":1,\"op\":\"stat\",\"path\":\"x\"}");
        }
        {
                /* "tmp" is archive's and extract's only. */
                struct agent_file f = AGENT_FILE_INIT(2, AGENT_FILE_READ, "x");
                _cleanup_json_ json_object *msg = NULL;

                f.tmp = true;
                msg = agent_msg_file(&f);
                assert_non_null(msg);
                assert_false(json_object_object_get_ex(msg, "tmp", NULL));
        }
}

static void test_file_refused(void **state) {
        struct agent_file f;

        /* The builder refuses what the agent would refuse. */
        f = AGENT_FILE_INIT(1, AGENT_FILE_STAT, NULL);
        assert_null(agent_msg_file(&f));
        f.path = "";
        assert_null(agent_msg_file(&f));
        f = AGENT_FILE_INIT(1, AGENT_FILE_MOVE, "a");
        assert_null(agent_msg_file(&f));
        f.to = "";
        assert_null(agent_msg_file(&f));
        f = AGENT_FILE_INIT(1, AGENT_FILE_LIST, "a");
        f.depth = 0;
        assert_null(agent_msg_file(&f));
        f.depth = AGENT_FILE_DEPTH_MAX + 1;
        assert_null(agent_msg_file(&f));
        f = AGENT_FILE_INIT(1, AGENT_FILE_MKDIR, "a");
        f.mode = 010000;
        assert_null(agent_msg_file(&f));
        f = AGENT_FILE_INIT(1, AGENT_FILE_READ, "a");
        f.offset = (uint64_t) INT64_MAX + 1;
        assert_null(agent_msg_file(&f));
        f = AGENT_FILE_INIT(1, _AGENT_FILE_OP_MAX, "a");
        assert_null(agent_msg_file(&f));
        f = AGENT_FILE_INIT(UINT64_MAX, AGENT_FILE_STAT, "a");
        assert_null(agent_msg_file(&f));

        static const char *bad[] = {
                "{\"op\":\"stat\",\"path\":\"x\"}",
                "{\"id\":1,\"path\":\"x\"}",
                "{\"id\":1,\"op\":\"stat\"}",
                "{\"id\":1,\"op\":\"stat\",\"path\":\"\"}",
                "{\"id\":1,\"op\":\"stat\",\"path\":\"a\\u0000b\"}",
                "{\"id\":1,\"op\":\"chmod\",\"path\":\"x\"}",
                "{\"id\":1,\"op\":5,\"path\":\"x\"}",
                "{\"id\":1,\"op\":\"read\",\"path\":\"x\",\"offset\":-1}",
                "{\"id\":1,\"op\":\"read\",\"path\":\"x\",\"max\":\"5\"}",
                "{\"id\":1,\"op\":\"write\",\"path\":\"x\",\"mode\":4096}",
                "{\"id\":1,\"op\":\"write\",\"path\":\"x\",\"mode\":-1}",
                "{\"id\":1,\"op\":\"write\",\"path\":\"x\",\"append\":1}",
                "{\"id\":1,\"op\":\"mkdir\",\"path\":\"x\",\"parents\":\"yes\"}",
                "{\"id\":1,\"op\":\"list\",\"path\":\"x\",\"depth\":0}",
                "{\"id\":1,\"op\":\"list\",\"path\":\"x\",\"depth\":17}",
                "{\"id\":1,\"op\":\"remove\",\"path\":\"x\",\"recursive\":null}",
                "{\"id\":1,\"op\":\"move\",\"path\":\"x\"}",
                "{\"id\":1,\"op\":\"move\",\"path\":\"x\",\"to\":\"\"}",
        };
        for (size_t k = 0; k < ELEMENTSOF(bad); k++) {
                _cleanup_json_ json_object *o = json_tokener_parse(bad[k]);

                assert_non_null(o);
                f.id = 77;
                assert_int_equal(agent_parse_file(o, &f), -EBADMSG);
                assert_int_equal(f.id, 77);
        }
}

static void test_file_result_roundtrip(void **state) {
        struct agent_file_entry entries[] = {
                { .path = "a", .type = S_IFREG, .mode = 0644, .size = 5, .mtime_usec = 1700000000123456 },
                { .path = "b/c", .type = S_IFDIR, .mode = 01777, .size = 4096, .mtime_usec = -1000000 },
                { .path = "l", .type = S_IFLNK, .mode = 0777, .size = 3, .mtime_usec = 0, .target = "../ü" },
        };
        const struct agent_file_result cases[] = {
                { .id = 1, .error = 0, .has_bytes = true, .bytes = UINT64_C(1) << 40 },
                { .id = 2, .error = ENOENT },
                { .id = 3, .error = 0, .has_stat = true, .stat = entries[2] },
                { .id = 4, .error = 0, .has_entries = true, .entries = entries, .n_entries = 3 },
                { .id = 5, .error = 0, .has_entries = true, .entries = NULL, .n_entries = 0 },
                { .id = 6, .error = EPIPE, .has_bytes = true, .bytes = 3 },
                { .id = 7, .error = EINVAL, .has_bytes = true, .bytes = 0, .not_regular = S_IFIFO },
                { .id = 8, .error = EINVAL, .not_regular = S_IFCHR },
        };

        for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
                _cleanup_json_ json_object *msg = agent_msg_file_result(cases + k), *got = NULL;
                _cleanup_(agent_file_result_done) struct agent_file_result r = {};
                const struct agent_file_result *c = cases + k;

                got = roundtrip(*state, msg, "file-result");
                assert_int_equal(agent_parse_file_result(got, &r), 0);
                assert_int_equal(r.id, c->id);
                assert_int_equal(r.error, c->error);
                assert_int_equal(r.has_bytes, c->has_bytes);
                assert_true(r.bytes == c->bytes);
                assert_int_equal(r.has_stat, c->has_stat);
                assert_int_equal(r.has_entries, c->has_entries);
                assert_int_equal(r.n_entries, c->n_entries);
                assert_int_equal(r.not_regular, c->not_regular);
                for (size_t i = 0; i < r.n_entries + (r.has_stat ? 1 : 0); i++) {
                        const struct agent_file_entry *want = i < r.n_entries ? c->entries + i : &c->stat;
                        const struct agent_file_entry *e = i < r.n_entries ? r.entries + i : &r.stat;

                        assert_string_equal(e->path, want->path);
                        assert_int_equal(e->type, want->type);
                        assert_int_equal(e->mode, want->mode);
                        assert_true(e->size == want->size);
                        assert_true(e->mtime_usec == want->mtime_usec);
                        if (want->target)
                                assert_string_equal(e->target, want->target);
                        else
                                assert_null(e->target);
                }
                agent_file_result_done(&r);
                agent_file_result_done(&r); /* idempotent */
        }

        /* What the wire cannot carry. */
        assert_null(agent_msg_file_result(&(struct agent_file_result) { .id = 1, .error = -1 }));
        assert_null(agent_msg_file_result(&(struct agent_file_result) { .id = 1, .error = 4096 }));
        assert_null(agent_msg_file_result(&(struct agent_file_result) {
                .id = 1, .has_stat = true, .stat = { .path = "x", .type = 0 } }));
        assert_null(agent_msg_file_result(&(struct agent_file_result) {
                .id = 1, .has_stat = true, .stat = { .path = NULL, .type = S_IFREG } }));
        assert_null(agent_msg_file_result(&(struct agent_file_result) {
                .id = 1, .has_bytes = true, .bytes = UINT64_MAX }));
        agent_file_result_done(NULL);

        /* The words of the messages that name what a path is. */
        assert_string_equal(agent_file_type_describe(S_IFIFO), "FIFO");
        assert_string_equal(agent_file_type_describe(S_IFCHR | 0666), "character device");
        assert_string_equal(agent_file_type_describe(agent_file_type_from_string("dir")), "directory");
        assert_string_equal(agent_file_type_describe(0), "file of an unknown type");
}

static void test_parse_file_result_refuses(void **state) {
        static const char *bad[] = {
                "{\"errno\":0}",
                "{\"id\":1}",
                "{\"id\":1,\"errno\":-1}",
                "{\"id\":1,\"errno\":4096}",
                "{\"id\":1,\"errno\":0,\"bytes\":-1}",
                "{\"id\":1,\"errno\":0,\"stat\":5}",
                "{\"id\":1,\"errno\":0,\"stat\":{\"path\":\"a\",\"type\":\"door\",\"size\":1,\"mode\":1,\"mtime_usec\":1}}",
                "{\"id\":1,\"errno\":0,\"stat\":{\"type\":\"file\",\"size\":1,\"mode\":1,\"mtime_usec\":1}}",
                "{\"id\":1,\"errno\":0,\"stat\":{\"path\":\"a\",\"type\":\"file\",\"size\":1,\"mtime_usec\":1}}",
                "{\"id\":1,\"errno\":0,\"stat\":{\"path\":\"a\",\"type\":\"file\",\"size\":1,\"mode\":65536,\"mtime_usec\":1}}",
                "{\"id\":1,\"errno\":0,\"stat\":{\"path\":\"a\",\"type\":\"file\",\"size\":1,\"mode\":1,\"mtime_usec\":1,\"target\":7}}",
                "{\"id\":1,\"errno\":0,\"entries\":{}}",
                "{\"id\":1,\"errno\":22,\"not_regular\":1}",
                /* a bad entry after good ones: what was parsed is freed (ASan would tell) */
                "{\"id\":1,\"errno\":0,\"entries\":[{\"path\":\"a\",\"type\":\"link\",\"size\":1,\"mode\":1,\"mtime_usec\":1,\"target\":\"t\"},{\"path\":\"b\"}]}",
        };

        for (size_t k = 0; k < ELEMENTSOF(bad); k++) {
                _cleanup_json_ json_object *o = json_tokener_parse(bad[k]);
                struct agent_file_result r = { .id = 77 };

                assert_non_null(o);
                assert_int_equal(agent_parse_file_result(o, &r), -EBADMSG);
                assert_int_equal(r.id, 77);
                assert_null(r.entries);
        }
}

#define T(f) cmocka_unit_test_setup_teardown(f, pair_setup, pair_teardown)

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_reset_messages),
                T(test_log_roundtrip),
                T(test_exec_roundtrip),
                T(test_exec_defaults),
                T(test_kill_ready_roundtrip),
                T(test_exit_roundtrip),
                T(test_parse_exit_refuses),
                T(test_builders_refuse_unrepresentable),
                T(test_field_helpers),
                T(test_send_too_big),
                T(test_send_large),
                T(test_eof),
                T(test_eagain),
                T(test_not_an_object),
                T(test_too_many_fds),
                T(test_oversized_datagram),
                T(test_send_invalid),
                T(test_started_roundtrip),
                T(test_tty_roundtrip),
                T(test_file_op_names),
                T(test_file_roundtrip),
                T(test_file_refused),
                T(test_file_result_roundtrip),
                T(test_parse_file_result_refuses),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
