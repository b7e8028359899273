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

#define T(f) cmocka_unit_test_setup_teardown(f, pair_setup, pair_teardown)

int main(void) {
        const struct CMUnitTest tests[] = {
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
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
