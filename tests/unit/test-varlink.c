/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The varlink layer (src/varlink/varlink.h): our server on one end of a socketpair, the
 * test on the other writing raw bytes and reading raw replies, both on one sd-event loop;
 * then our client half against the same server. */

#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <cmocka.h>

#include <systemd/sd-event.h>

#include "json-util.h"
#include "strv.h"
#include "time-util.h"
#include "varlink-idl.h"
#include "varlink-stream.h"
#include "varlink.h"

#define TEST_INTERFACE "io.sandboxd.Test"
#define PUMP_MARK (32U * 1024U)

static const char test_idl[] =
        "# For tests.\n"
        "interface io.sandboxd.Test\n"
        "\n"
        "method Echo(x: ?int) -> (x: ?int)\n"
        "method Stream(n: int) -> (i: int)\n"
        "method Later(usec: int) -> (done: bool)\n"
        "method Hold() -> ()\n"
        "method Forget() -> ()\n"
        "method Fail() -> ()\n"
        "method Notify() -> ()\n"
        "method Flood(n: int, size: int) -> (data: string)\n"
        "method Pump(n: int, size: int) -> (i: int, data: string)\n"
        "method Peer() -> (uid: int, pid: int, pidfd_pid: int)\n"
        "method Oneway() -> ()\n"
        "method Big() -> ()\n"
        "method Twice() -> ()\n"
        "method Group(tag: string) -> ()\n"
        "# Declared, never bound: (MethodNotImplemented)\n"
        "method Unbound() -> ()\n"
        "error Refused (errno: int)\n"
        "error TooBig ()\n"
        "error Full ()\n";

static sd_event *event;
static VarlinkServer *server;
static int peer = -EBADF;              /* the test's raw end of the connection */
static char rbuf[1024 * 1024];
static size_t rlen;

/* What the methods saw. */
static struct {
        unsigned n_echo, n_oneway, n_disconnects, n_drained;
        unsigned echo_before_later;     /* Echo calls dispatched when Later replied */
        int notify_result, flood_result, big_result, twice_result, twice_error_result;
        VarlinkCall *held;
} seen;

#define RUN_UNTIL(cond)                                                         \
        do {                                                                    \
                uint64_t _deadline = now_usec(CLOCK_MONOTONIC) + 10 * 1000000ULL; \
                while (!(cond)) {                                               \
                        assert_true(now_usec(CLOCK_MONOTONIC) < _deadline);     \
                        assert_true(sd_event_run(event, 10 * 1000) >= 0);       \
                }                                                               \
        } while (0)

static void run_idle(void) {
        for (int i = 0; i < 20; i++)
                assert_true(sd_event_run(event, 5 * 1000) >= 0);
}

static int64_t param_int(json_object *o, const char *key) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v))
                return -1;
        return json_object_get_int64(v);
}

static char *string_of(size_t size) {
        char *s = malloc(size + 1);

        assert_non_null(s);
        memset(s, 'x', size);
        s[size] = 0;
        return s;
}

/* ---- the methods ---- */

static int method_echo(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        seen.n_echo++;
        return varlink_call_reply(call, parameters);
}

static int method_stream(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        int64_t n = param_int(parameters, "n");
        int r;

        if (!(flags & VARLINK_CALL_MORE))
                return varlink_call_error(call, VARLINK_ERROR_EXPECTED_MORE, NULL);
        for (int64_t i = 0; i < n; i++) {
                _cleanup_json_ json_object *p = json_object_new_object();
                assert_int_equal(json_add(p, "i", json_object_new_int64(i)), 0);
                r = i + 1 < n ? varlink_call_notify(call, p) : varlink_call_reply(call, p);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int on_later(sd_event_source *s, uint64_t usec, void *userdata) {
        VarlinkCall *call = userdata;
        _cleanup_json_ json_object *p = json_object_new_object();

        seen.echo_before_later = seen.n_echo;
        assert_int_equal(json_add(p, "done", json_object_new_boolean(true)), 0);
        assert_int_equal(varlink_call_reply(call, p), 0);
        varlink_call_unref(call);
        sd_event_source_disable_unref(s);
        return 0;
}

static int method_later(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        sd_event_source *s;
        int r;

        r = sd_event_add_time_relative(event, &s, CLOCK_MONOTONIC, (uint64_t) param_int(parameters, "usec"), 0,
                                       on_later, varlink_call_ref(call));
        assert_true(r >= 0);
        return 0;
}

static void on_held_disconnect(VarlinkCall *call, void *userdata) {
        assert_ptr_equal(call, seen.held);
        seen.n_disconnects++;
}

static int method_hold(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        assert_null(seen.held);
        seen.held = varlink_call_ref(call);
        varlink_call_set_disconnect_callback(call, on_held_disconnect, NULL);
        return 0;
}

static int method_forget(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        return 0;
}

static int method_fail(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        return -EIO;
}

static int method_notify(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        _cleanup_json_ json_object *p = json_object_new_object();

        seen.notify_result = varlink_call_notify(call, NULL);
        assert_int_equal(json_add(p, "errno", json_object_new_int(-seen.notify_result)), 0);
        return varlink_call_error(call, TEST_INTERFACE ".Refused", p);
}

static int method_flood(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        _cleanup_free_ char *data = string_of((size_t) param_int(parameters, "size"));
        _cleanup_json_ json_object *p = json_object_new_object();

        assert_int_equal(json_add(p, "data", json_object_new_string(data)), 0);
        varlink_call_set_disconnect_callback(call, on_held_disconnect, NULL);
        seen.held = varlink_call_ref(call);
        for (int64_t i = 0; i < param_int(parameters, "n"); i++) {
                seen.flood_result = varlink_call_notify(call, p);
                if (seen.flood_result < 0)
                        break;
        }
        return 0;
}

/* Pump: n chunks, sent only while the peer keeps up; resumed by the drained callback. */
static struct {
        VarlinkCall *call;
        int64_t next, n;
        char *data;
        size_t max_pending;
} pump;

static void pump_fill(VarlinkCall *call, void *userdata) {
        if (userdata)
                seen.n_drained++;
        while (pump.call && varlink_call_get_pending_output(call) < PUMP_MARK) {
                _cleanup_json_ json_object *p = json_object_new_object();

                assert_int_equal(json_add(p, "i", json_object_new_int64(pump.next)), 0);
                assert_int_equal(json_add(p, "data", json_object_new_string(pump.data)), 0);
                if (++pump.next == pump.n) {
                        assert_int_equal(varlink_call_reply(call, p), 0);
                        pump.call = varlink_call_unref(pump.call);
                        break;
                }
                assert_int_equal(varlink_call_notify(call, p), 0);
                pump.max_pending = MAX(pump.max_pending, varlink_call_get_pending_output(call));
        }
}

static int method_pump(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        pump.call = varlink_call_ref(call);
        pump.n = param_int(parameters, "n");
        pump.data = string_of((size_t) param_int(parameters, "size"));
        varlink_call_set_drained_callback(call, pump_fill, &pump);
        pump_fill(call, NULL);
        return 0;
}

static pid_t pidfd_pid(int pidfd) {
        _cleanup_free_ char *path = NULL, *line = NULL;
        size_t size = 0;
        pid_t pid = -1;
        FILE *f;

        assert_true(asprintf(&path, "/proc/self/fdinfo/%i", pidfd) > 0);
        f = fopen(path, "re");
        assert_non_null(f);
        while (getline(&line, &size, f) > 0)
                if (sscanf(line, "Pid: %d", &pid) == 1)
                        break;
        fclose(f);
        return pid;
}

static int method_peer(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        _cleanup_json_ json_object *p = json_object_new_object();
        struct ucred ucred;
        int pidfd;

        assert_int_equal(varlink_call_get_peer_ucred(call, &ucred), 0);
        pidfd = varlink_call_get_peer_pidfd(call);
        assert_true(pidfd >= 0 || pidfd == -ENODATA);
        assert_int_equal(json_add(p, "uid", json_object_new_int64(ucred.uid)), 0);
        assert_int_equal(json_add(p, "pid", json_object_new_int64(ucred.pid)), 0);
        assert_int_equal(json_add(p, "pidfd_pid", json_object_new_int64(pidfd >= 0 ? pidfd_pid(pidfd) : -1)), 0);
        return varlink_call_reply(call, p);
}

static int method_oneway(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        assert_true(flags & VARLINK_CALL_ONEWAY);
        seen.n_oneway++;
        return varlink_call_reply(call, NULL);   /* dropped */
}

static int method_big(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        _cleanup_free_ char *data = string_of(VARLINK_MESSAGE_SIZE_MAX_DEFAULT);
        _cleanup_json_ json_object *p = json_object_new_object();

        assert_int_equal(json_add(p, "data", json_object_new_string(data)), 0);
        seen.big_result = varlink_call_reply(call, p);
        return varlink_call_error(call, TEST_INTERFACE ".TooBig", NULL);
}

static int method_twice(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        assert_int_equal(varlink_call_error(call, "NotQualified", NULL), -EINVAL);
        assert_int_equal(varlink_call_reply(call, NULL), 0);
        seen.twice_result = varlink_call_reply(call, NULL);
        seen.twice_error_result = varlink_call_error(call, TEST_INTERFACE ".Refused", NULL);
        return 0;
}

static int method_group(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        json_object *t;
        int r;

        assert_true(json_object_object_get_ex(parameters, "tag", &t));
        r = varlink_call_set_connection_group(call, json_object_get_string(t));
        if (r == -EUSERS)
                return varlink_call_error(call, TEST_INTERFACE ".Full", NULL);
        assert_int_equal(r, 0);
        assert_string_equal(varlink_call_get_connection_tag(call), json_object_get_string(t));
        return varlink_call_reply(call, NULL);
}

static int server_make(sd_event *e, VarlinkServer **ret) {
        static const struct {
                const char *name;
                varlink_method_t callback;
        } methods[] = {
                { "Echo", method_echo },     { "Stream", method_stream }, { "Later", method_later },
                { "Hold", method_hold },     { "Forget", method_forget }, { "Fail", method_fail },
                { "Notify", method_notify }, { "Flood", method_flood },   { "Pump", method_pump },
                { "Peer", method_peer },     { "Oneway", method_oneway }, { "Big", method_big },
                { "Twice", method_twice },   { "Group", method_group },
        };
        VarlinkServer *s;
        char name[64];
        int r;

        r = varlink_server_new(&s);
        if (r < 0)
                return r;
        assert_int_equal(varlink_server_set_info(s, "sandboxd", "test-varlink", "1", "https://example.org"), 0);
        assert_int_equal(varlink_server_add_interface(s, test_idl), 0);
        for (size_t i = 0; i < ELEMENTSOF(methods); i++) {
                snprintf(name, sizeof(name), TEST_INTERFACE ".%s", methods[i].name);
                assert_int_equal(varlink_server_bind_method(s, name, methods[i].callback, NULL), 0);
        }
        assert_int_equal(varlink_server_attach_event(s, e, 0), 0);
        *ret = s;
        return 0;
}

/* ---- the raw peer ---- */

/* A new connection (the old one, if any, is closed) under limits (NULL: the defaults). */
static void reconnect(const VarlinkLimits *limits) {
        int fds[2];

        peer = safe_close(peer);
        rlen = 0;
        assert_int_equal(varlink_server_set_limits(server, limits ?: &VARLINK_LIMITS_DEFAULT), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds), 0);
        assert_int_equal(varlink_server_add_connection(server, fds[0]), 0);
        peer = fds[1];
}

static int setup(void **state) {
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(sd_event_new(&event), 0);
        assert_int_equal(server_make(event, &server), 0);
        reconnect(NULL);
        return 0;
}

static int teardown(void **state) {
        peer = safe_close(peer);
        seen.held = varlink_call_unref(seen.held);
        pump.call = varlink_call_unref(pump.call);
        pump.data = mfree(pump.data);
        server = varlink_server_unref(server);
        event = sd_event_unref(event);
        return 0;
}

static void raw_send(const char *data, size_t size) {
        while (size > 0) {
                ssize_t n = send(peer, data, size, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0) {
                        assert_int_equal(errno, EAGAIN);
                        assert_true(sd_event_run(event, 10 * 1000) >= 0);
                        continue;
                }
                data += n;
                size -= (size_t) n;
        }
}

/* Sends s and its NUL. */
static void raw_send_msg(const char *s) {
        raw_send(s, strlen(s) + 1);
}

/* 1 and the next message in *ret, 0 at EOF; runs the loop meanwhile. */
static int raw_next(json_object **ret) {
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + 10 * 1000000ULL;

        for (;;) {
                char *nul = memchr(rbuf, 0, rlen);
                ssize_t n;

                if (nul) {
                        size_t size = (size_t) (nul - rbuf) + 1;
                        *ret = json_tokener_parse(rbuf);
                        assert_non_null(*ret);
                        memmove(rbuf, rbuf + size, rlen - size);
                        rlen -= size;
                        return 1;
                }
                assert_true(rlen < sizeof(rbuf));
                n = recv(peer, rbuf + rlen, sizeof(rbuf) - rlen, MSG_DONTWAIT);
                if (n == 0 || (n < 0 && errno == ECONNRESET))
                        return 0;
                if (n > 0) {
                        rlen += (size_t) n;
                        continue;
                }
                assert_int_equal(errno, EAGAIN);
                assert_true(now_usec(CLOCK_MONOTONIC) < deadline);
                assert_true(sd_event_run(event, 10 * 1000) >= 0);
        }
}

static json_object *raw_recv(void) {
        json_object *m = NULL;

        assert_int_equal(raw_next(&m), 1);
        return m;
}

/* The server closes the connection; whatever comes before the EOF is skipped. */
static void raw_expect_eof(void) {
        json_object *m;

        for (;;) {
                rlen = 0;   /* big replies need not fit */
                if (raw_next(&m) == 0)
                        return;
                json_object_put(m);
        }
}

static void raw_expect_nothing(void) {
        char c;

        run_idle();
        assert_null(memchr(rbuf, 0, rlen));
        assert_int_equal(recv(peer, &c, 1, MSG_DONTWAIT | MSG_PEEK), -1);
        assert_int_equal(errno, EAGAIN);
}

static json_object *raw_call(const char *msg) {
        raw_send_msg(msg);
        return raw_recv();
}

static void assert_reply_int(json_object *m, const char *key, int64_t value, bool continues) {
        json_object *p, *c = NULL;

        assert_false(json_object_object_get_ex(m, "error", NULL));
        assert_true(json_object_object_get_ex(m, "parameters", &p));
        assert_int_equal(param_int(p, key), value);
        (void) json_object_object_get_ex(m, "continues", &c);
        assert_int_equal(c && json_object_get_boolean(c), continues);
        json_object_put(m);
}

/* An error reply error, with parameters {key: value} if key. */
static void assert_error(json_object *m, const char *error, const char *key, const char *value) {
        json_object *e, *p, *v;

        assert_true(json_object_object_get_ex(m, "error", &e));
        assert_string_equal(json_object_get_string(e), error);
        assert_true(json_object_object_get_ex(m, "parameters", &p));
        assert_true(json_object_is_type(p, json_type_object));
        if (key) {
                assert_true(json_object_object_get_ex(p, key, &v));
                assert_string_equal(json_object_get_string(v), value);
        }
        json_object_put(m);
}

#define ECHO(x) "{\"method\":\"io.sandboxd.Test.Echo\",\"parameters\":{\"x\":" #x "}}"

/* idl declares interface and exactly the methods m1 and m2. */
static void assert_idl_scans(const char *idl, const char *interface, const char *m1, const char *m2) {
        _cleanup_strv_free_ char **methods = NULL;
        _cleanup_free_ char *name = NULL;

        assert_int_equal(varlink_idl_scan(idl, &name, &methods), 0);
        assert_string_equal(name, interface);
        assert_string_equal(methods[0], m1);
        assert_string_equal(methods[1], m2);
        assert_null(methods[2]);
}

/* ---- framing ---- */

static void test_framing_split(void **state) {
        const char *msg = ECHO(7);
        size_t half = strlen(msg) / 2;

        raw_send(msg, half);
        raw_expect_nothing();
        raw_send(msg + half, strlen(msg) - half);
        raw_expect_nothing();          /* complete but for its NUL */
        raw_send("", 1);
        assert_reply_int(raw_recv(), "x", 7, false);
}

/* A buffer that one large message grew is given back once it is empty, either way: an
 * idle connection keeps none of its largest message's memory (issue 27). */
/* Descriptors go with the first byte of their message (OpenPort's reply): a message
 * without any before it, one with a pipe's write end, and the receiver gets exactly that
 * one, working, after it read the second message. */
static void test_stream_passes_fds(void **state) {
        VarlinkStream a, b;
        json_object *m;
        int sv[2], p[2], fd = -EBADF, got[VARLINK_STREAM_FDS_MAX], messages = 0;
        char c = 0;

        assert_return_code(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), errno);
        assert_return_code(pipe(p), errno);
        assert_return_code(varlink_stream_init(&a, sv[0], 4096), errno);
        assert_return_code(varlink_stream_init(&b, sv[1], 4096), errno);

        m = json_object_new_object();
        assert_int_equal(varlink_stream_enqueue(&a, m), 0);
        assert_int_equal(varlink_stream_enqueue_with_fds(&a, m, &p[1], 1), 0);
        json_object_put(m);
        safe_close(p[1]); /* the stream holds its own copy until it is sent */
        assert_int_equal(varlink_stream_flush(&a), 0);
        assert_int_equal(varlink_stream_pending_output(&a), 0);
        assert_int_equal(a.n_fd_batches, 0);

        while (messages < 2) {
                ssize_t n = varlink_stream_read(&b);
                assert_true(n > 0 || n == -EAGAIN);
                while (varlink_stream_next(&b, &m) > 0) {
                        json_object_put(m);
                        messages++;
                }
        }
        assert_int_equal(varlink_stream_take_fds(&b, got, ELEMENTSOF(got)), 1);
        assert_int_equal(varlink_stream_take_fds(&b, got + 1, ELEMENTSOF(got) - 1), 0);
        fd = got[0];
        assert_int_equal(write(fd, "x", 1), 1);
        assert_int_equal(read(p[0], &c, 1), 1);
        assert_int_equal(c, 'x');
        safe_close(fd);
        safe_close(p[0]);
        varlink_stream_done(&a);
        varlink_stream_done(&b);
}

static void test_stream_large_buffers_released(void **state) {
        const size_t size = 3 * VARLINK_STREAM_KEEP_MAX;
        _cleanup_free_ char *big = malloc(size + 1);
        VarlinkStream a, b;
        json_object *m = NULL;
        int sv[2], r;
        ssize_t n;

        assert_non_null(big);
        assert_return_code(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), errno);
        assert_return_code(varlink_stream_init(&a, sv[0], 8 * VARLINK_STREAM_KEEP_MAX), errno);
        assert_return_code(varlink_stream_init(&b, sv[1], 8 * VARLINK_STREAM_KEEP_MAX), errno);

        /* {"s":"xxx…"}, about 3 MiB, from a to b. */
        memset(big, 'x', size);
        big[size] = 0;
        m = json_object_new_object();
        assert_int_equal(json_object_object_add(m, "s", json_object_new_string(big)), 0);
        assert_int_equal(varlink_stream_enqueue(&a, m), 0);
        json_object_put(m);
        assert_true(a.output.allocated > VARLINK_STREAM_KEEP_MAX);

        m = NULL;
        while (!m) {
                while (varlink_stream_write(&a) > 0)
                        ;
                n = varlink_stream_read(&b);
                assert_true(n > 0 || n == -EAGAIN);
                r = varlink_stream_next(&b, &m);
                assert_true(r >= 0);
        }
        assert_int_equal(strlen(json_object_get_string(json_object_object_get(m, "s"))), size);
        json_object_put(m);
        assert_int_equal(a.output.allocated, 0);
        assert_int_equal(b.input.allocated, 0);
        assert_null(b.input.data);

        /* Small ones keep their buffer: no allocation per message. */
        m = json_object_new_object();
        assert_int_equal(json_object_object_add(m, "s", json_object_new_string("small")), 0);
        assert_int_equal(varlink_stream_enqueue(&a, m), 0);
        json_object_put(m);
        assert_int_equal(varlink_stream_flush(&a), 0);
        assert_true(a.output.allocated > 0);

        varlink_stream_done(&a);
        varlink_stream_done(&b);
}

static void test_framing_two_in_one_read(void **state) {
        static const char two[] = ECHO(1) "\0" ECHO(2);

        raw_send(two, sizeof(two));
        assert_reply_int(raw_recv(), "x", 1, false);
        assert_reply_int(raw_recv(), "x", 2, false);
        assert_int_equal(seen.n_echo, 2);
}

static void test_framing_oversized(void **state) {
        VarlinkLimits l = VARLINK_LIMITS_DEFAULT;
        _cleanup_free_ char *big = string_of(2048);

        l.message_size_max = 1024;
        /* No NUL in sight: refused as soon as it passes the bound. */
        reconnect(&l);
        raw_send(big, 2048);
        raw_expect_eof();

        /* A complete message over the bound, after one within. */
        reconnect(&l);
        memcpy(big, ECHO(1), strlen(ECHO(1)) + 1);
        raw_send(big, 2048);
        raw_send("", 1);
        assert_reply_int(raw_recv(), "x", 1, false);
        raw_expect_eof();
        RUN_UNTIL(varlink_server_n_connections(server) == 0);
}

/* With an error for it, a call over the bound is read to its end and answered (the sender
 * sees why, not a broken pipe), after the calls before it; then the connection closes. */
static void test_framing_oversized_answered(void **state) {
        VarlinkLimits l = VARLINK_LIMITS_DEFAULT;
        _cleanup_free_ char *big = string_of(4096);
        json_object *m;

        l.message_size_max = 1024;
        l.oversized_error = "io.sandboxd.Test.TooLarge";
        l.oversized_message = "at most 1 KiB";
        reconnect(&l);
        raw_send_msg(ECHO(1));
        /* In parts, as a sender writes it: the rest after the bound is passed is read too. */
        raw_send(big, 2048);
        raw_send(big, 2048);
        raw_send("", 1);
        assert_reply_int(raw_recv(), "x", 1, false);
        assert_error(raw_recv(), "io.sandboxd.Test.TooLarge", "message", "at most 1 KiB");
        raw_expect_eof();
        RUN_UNTIL(varlink_server_n_connections(server) == 0);

        /* A complete one over the bound in a single read. */
        reconnect(&l);
        big[2000] = 0;
        raw_send(big, 2001);
        assert_error(raw_recv(), "io.sandboxd.Test.TooLarge", "message", "at most 1 KiB");
        raw_expect_eof();

        /* A sender that never ends it is cut off by the message timeout. */
        l.message_timeout_usec = 200 * 1000;
        reconnect(&l);
        raw_send(big, 1500);
        m = raw_recv();
        assert_error(m, "io.sandboxd.Test.TooLarge", "message", "at most 1 KiB");
        RUN_UNTIL(varlink_server_n_connections(server) == 0);
}

static void test_framing_malformed_json(void **state) {
        raw_send_msg("{\"method\": nope");
        raw_expect_eof();

        reconnect(NULL);
        raw_send_msg("{\"method\":\"io.sandboxd.Test.Echo\"} trailing");
        raw_expect_eof();

        reconnect(NULL);
        raw_send_msg("{\"x\":\"\xff\"}");   /* not UTF-8 */
        raw_expect_eof();
}

/* ---- what the server answers by itself ---- */

static void test_invalid_fields(void **state) {
        static const struct {
                const char *message, *parameter;
        } cases[] = {
                { "[1,2]", "method" },
                { "\"Echo\"", "method" },
                { "null", "method" },
                { "{}", "method" },
                { "{\"method\":1}", "method" },
                { "{\"method\":\"Echo\"}", "method" },
                { "{\"method\":\"io.sandboxd.Test.echo\"}", "method" },
                { "{\"method\":\"io.sandboxd.Test.Echo\",\"more\":\"yes\"}", "more" },
                { "{\"method\":\"io.sandboxd.Test.Echo\",\"oneway\":1}", "oneway" },
                { "{\"method\":\"io.sandboxd.Test.Echo\",\"parameters\":[1]}", "parameters" },
                { "{\"method\":\"io.sandboxd.Test.Echo\",\"parameters\":\"x\"}", "parameters" },
                { "{\"method\":\"io.sandboxd.Test.Echo\",\"upgrade\":true}", "upgrade" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                assert_error(raw_call(cases[i].message), VARLINK_ERROR_INVALID_PARAMETER, "parameter",
                             cases[i].parameter);
        assert_int_equal(seen.n_echo, 0);

        /* null fields are absent ones; unknown fields are ignored; the connection lives on. */
        assert_reply_int(raw_call("{\"method\":\"io.sandboxd.Test.Echo\",\"parameters\":null,\"more\":null,"
                                  "\"oneway\":false,\"future\":[1]}"), "x", -1, false);
        assert_reply_int(raw_call(ECHO(3)), "x", 3, false);
}

static void test_unknown(void **state) {
        assert_error(raw_call("{\"method\":\"org.example.Nope.Do\"}"), VARLINK_ERROR_INTERFACE_NOT_FOUND,
                     "interface", "org.example.Nope");
        assert_error(raw_call("{\"method\":\"io.sandboxd.Test.Nope\"}"), VARLINK_ERROR_METHOD_NOT_FOUND,
                     "method", "io.sandboxd.Test.Nope");
        assert_error(raw_call("{\"method\":\"io.sandboxd.Test.Unbound\"}"), VARLINK_ERROR_METHOD_NOT_IMPLEMENTED,
                     "method", "io.sandboxd.Test.Unbound");
        assert_error(raw_call("{\"method\":\"org.varlink.service.Nope\"}"), VARLINK_ERROR_METHOD_NOT_FOUND,
                     "method", "org.varlink.service.Nope");
}

static void test_get_info(void **state) {
        json_object *m = raw_call("{\"method\":\"org.varlink.service.GetInfo\"}"), *p, *v;

        assert_true(json_object_object_get_ex(m, "parameters", &p));
        assert_true(json_object_object_get_ex(p, "vendor", &v));
        assert_string_equal(json_object_get_string(v), "sandboxd");
        assert_true(json_object_object_get_ex(p, "product", &v));
        assert_string_equal(json_object_get_string(v), "test-varlink");
        assert_true(json_object_object_get_ex(p, "version", &v));
        assert_string_equal(json_object_get_string(v), "1");
        assert_true(json_object_object_get_ex(p, "url", &v));
        assert_string_equal(json_object_get_string(v), "https://example.org");
        assert_true(json_object_object_get_ex(p, "interfaces", &v));
        assert_int_equal(json_object_array_length(v), 2);
        assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 0)), "org.varlink.service");
        assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 1)), TEST_INTERFACE);
        json_object_put(m);
}

static void test_get_interface_description(void **state) {
        json_object *m, *p, *v;

        m = raw_call("{\"method\":\"org.varlink.service.GetInterfaceDescription\","
                     "\"parameters\":{\"interface\":\"io.sandboxd.Test\"}}");
        assert_true(json_object_object_get_ex(m, "parameters", &p));
        assert_true(json_object_object_get_ex(p, "description", &v));
        assert_string_equal(json_object_get_string(v), test_idl);
        json_object_put(m);

        /* The built-in interface's description reads as one. */
        m = raw_call("{\"method\":\"org.varlink.service.GetInterfaceDescription\","
                     "\"parameters\":{\"interface\":\"org.varlink.service\"}}");
        assert_true(json_object_object_get_ex(m, "parameters", &p));
        assert_true(json_object_object_get_ex(p, "description", &v));
        assert_idl_scans(json_object_get_string(v), "org.varlink.service", "GetInfo", "GetInterfaceDescription");
        json_object_put(m);

        assert_error(raw_call("{\"method\":\"org.varlink.service.GetInterfaceDescription\","
                              "\"parameters\":{\"interface\":\"org.example.Nope\"}}"),
                     VARLINK_ERROR_INTERFACE_NOT_FOUND, "interface", "org.example.Nope");
        assert_error(raw_call("{\"method\":\"org.varlink.service.GetInterfaceDescription\"}"),
                     VARLINK_ERROR_INVALID_PARAMETER, "parameter", "interface");
}

/* ---- replies ---- */

static void test_more(void **state) {
        raw_send_msg("{\"method\":\"io.sandboxd.Test.Stream\",\"parameters\":{\"n\":3},\"more\":true}");
        assert_reply_int(raw_recv(), "i", 0, true);
        assert_reply_int(raw_recv(), "i", 1, true);
        assert_reply_int(raw_recv(), "i", 2, false);

        assert_error(raw_call("{\"method\":\"io.sandboxd.Test.Stream\",\"parameters\":{\"n\":3}}"),
                     VARLINK_ERROR_EXPECTED_MORE, NULL, NULL);
        /* A "continues" without "more" is refused: the method answers otherwise. */
        assert_error(raw_call("{\"method\":\"io.sandboxd.Test.Notify\"}"), TEST_INTERFACE ".Refused", NULL, NULL);
        assert_int_equal(seen.notify_result, -EPROTO);
}

static void test_oneway(void **state) {
        raw_send_msg("{\"method\":\"io.sandboxd.Test.Oneway\",\"oneway\":true}");
        /* Not even errors are sent to a oneway call. */
        raw_send_msg("{\"method\":\"org.example.Nope.Do\",\"oneway\":true}");
        raw_send_msg("{\"method\":\"io.sandboxd.Test.Echo\",\"oneway\":true,\"parameters\":[]}");
        assert_reply_int(raw_call(ECHO(5)), "x", 5, false);
        assert_int_equal(seen.n_oneway, 1);
        assert_int_equal(seen.n_echo, 1);
}

static void test_pipelined_in_order(void **state) {
        static const char calls[] =
                "{\"method\":\"io.sandboxd.Test.Later\",\"parameters\":{\"usec\":20000}}\0"
                "{\"method\":\"io.sandboxd.Test.Stream\",\"parameters\":{\"n\":2},\"more\":true}\0"
                ECHO(2);

        raw_send(calls, sizeof(calls));
        assert_reply_int(raw_recv(), "done", 1, false);
        assert_int_equal(seen.echo_before_later, 0);   /* not dispatched before the first was answered */
        assert_reply_int(raw_recv(), "i", 0, true);
        assert_reply_int(raw_recv(), "i", 1, false);
        assert_reply_int(raw_recv(), "x", 2, false);
}

static void test_reply_misuse(void **state) {
        assert_error(raw_call("{\"method\":\"io.sandboxd.Test.Big\"}"), TEST_INTERFACE ".TooBig", NULL, NULL);
        assert_int_equal(seen.big_result, -EMSGSIZE);

        assert_reply_int(raw_call("{\"method\":\"io.sandboxd.Test.Twice\"}"), "x", -1, false);
        assert_int_equal(seen.twice_result, -EALREADY);
        assert_int_equal(seen.twice_error_result, -EALREADY);
        assert_reply_int(raw_call(ECHO(1)), "x", 1, false);   /* nothing extra was sent */
}

static void test_method_faults_close(void **state) {
        raw_send_msg("{\"method\":\"io.sandboxd.Test.Forget\"}");
        raw_expect_eof();
        reconnect(NULL);
        raw_send_msg("{\"method\":\"io.sandboxd.Test.Fail\"}");
        raw_expect_eof();
        RUN_UNTIL(varlink_server_n_connections(server) == 0);
}

/* ---- the peer ---- */

static void test_disconnect_callback(void **state) {
        raw_send_msg("{\"method\":\"io.sandboxd.Test.Hold\"}");
        RUN_UNTIL(seen.held);
        run_idle();
        assert_int_equal(seen.n_disconnects, 0);

        peer = safe_close(peer);
        RUN_UNTIL(seen.n_disconnects == 1);
        assert_int_equal(varlink_call_reply(seen.held, NULL), -ECONNRESET);
        assert_int_equal(varlink_server_n_connections(server), 0);
        run_idle();
        assert_int_equal(seen.n_disconnects, 1);
}

static void test_half_close(void **state) {
        /* The peer is done writing, not reading: its calls are still answered. */
        raw_send_msg("{\"method\":\"io.sandboxd.Test.Oneway\",\"oneway\":true}");
        raw_send_msg("{\"method\":\"io.sandboxd.Test.Later\",\"parameters\":{\"usec\":10000}}");
        assert_int_equal(shutdown(peer, SHUT_WR), 0);
        assert_reply_int(raw_recv(), "done", 1, false);
        raw_expect_eof();
        assert_int_equal(seen.n_oneway, 1);
}

static void test_peer_credentials(void **state) {
        json_object *m = raw_call("{\"method\":\"io.sandboxd.Test.Peer\"}"), *p;
        int64_t pidfd_pid;

        assert_true(json_object_object_get_ex(m, "parameters", &p));
        assert_int_equal(param_int(p, "uid"), getuid());
        assert_int_equal(param_int(p, "pid"), getpid());
        pidfd_pid = param_int(p, "pidfd_pid");
        assert_true(pidfd_pid == -1 || pidfd_pid == getpid());
        json_object_put(m);
}

/* ---- limits ---- */

static void test_output_bound(void **state) {
        VarlinkLimits l = VARLINK_LIMITS_DEFAULT;

        l.message_size_max = 16 * 1024;
        l.output_buffer_max = 64 * 1024;
        reconnect(&l);
        /* 1000 × 8 KiB to a peer that reads nothing. */
        raw_send_msg("{\"method\":\"io.sandboxd.Test.Flood\",\"parameters\":{\"n\":1000,\"size\":8192},\"more\":true}");
        RUN_UNTIL(seen.n_disconnects == 1);
        assert_int_equal(seen.flood_result, -ENOBUFS);
        raw_expect_eof();
}

static void test_backpressure(void **state) {
        VarlinkLimits l = VARLINK_LIMITS_DEFAULT;
        json_object *m;

        l.message_size_max = 16 * 1024;
        l.output_buffer_max = 64 * 1024;
        reconnect(&l);
        /* 200 × 4 KiB, far more than the bound, to a peer that reads: the method paces
         * itself by the pending output and the drained callback. */
        raw_send_msg("{\"method\":\"io.sandboxd.Test.Pump\",\"parameters\":{\"n\":200,\"size\":4096},\"more\":true}");
        for (int64_t i = 0; i < 200; i++) {
                json_object *p;

                m = raw_recv();
                assert_true(json_object_object_get_ex(m, "parameters", &p));
                assert_int_equal(param_int(p, "i"), i);
                json_object_put(m);
        }
        assert_null(pump.call);
        assert_true(seen.n_drained > 0);
        assert_true(pump.max_pending <= l.output_buffer_max);
        assert_reply_int(raw_call(ECHO(9)), "x", 9, false);
}

static void test_idle_timeout(void **state) {
        VarlinkLimits l = VARLINK_LIMITS_DEFAULT;
        uint64_t start;

        l.idle_timeout_usec = 100 * 1000;
        reconnect(&l);
        /* A call in progress is not idleness. */
        raw_send_msg("{\"method\":\"io.sandboxd.Test.Hold\"}");
        RUN_UNTIL(seen.held);
        start = now_usec(CLOCK_MONOTONIC);
        while (now_usec(CLOCK_MONOTONIC) < start + 300 * 1000)
                assert_true(sd_event_run(event, 10 * 1000) >= 0);
        assert_int_equal(seen.n_disconnects, 0);

        assert_int_equal(varlink_call_reply(seen.held, NULL), 0);
        assert_reply_int(raw_recv(), "x", -1, false);
        start = now_usec(CLOCK_MONOTONIC);
        raw_expect_eof();
        assert_true(now_usec(CLOCK_MONOTONIC) >= start + 50 * 1000);
}

static void test_message_timeout(void **state) {
        VarlinkLimits l = VARLINK_LIMITS_DEFAULT;

        l.message_timeout_usec = 100 * 1000;
        reconnect(&l);
        assert_reply_int(raw_call(ECHO(1)), "x", 1, false);   /* complete messages are fine */
        raw_send("{\"method\":", 10);
        raw_expect_eof();
}

static void test_read_ahead_bound(void **state) {
        VarlinkLimits l = VARLINK_LIMITS_DEFAULT;
        int unread = 0;

        l.queued_calls_max = 2;
        reconnect(&l);
        raw_send_msg("{\"method\":\"io.sandboxd.Test.Hold\"}");
        RUN_UNTIL(seen.held);
        /* One at a time, each given its chance to be read: two are read ahead, the rest
         * stay in the socket, unread. */
        for (int i = 0; i < 50; i++) {
                raw_send_msg(ECHO(1));
                run_idle();
        }
        assert_int_equal(seen.n_echo, 0);
        assert_int_equal(ioctl(peer, SIOCOUTQ, &unread), 0);
        assert_true(unread > 0);

        /* Left in the socket, not lost: all answered, in order, once the first is. */
        assert_int_equal(varlink_call_reply(seen.held, NULL), 0);
        assert_reply_int(raw_recv(), "x", -1, false);
        for (int i = 0; i < 50; i++)
                assert_reply_int(raw_recv(), "x", 1, false);
}

static void test_connection_limits(void **state) {
        VarlinkLimits l = VARLINK_LIMITS_DEFAULT;
        int fds[3][2];
        char c;

        l.connections_per_uid_max = 3;   /* the setup's connection and two more */
        assert_int_equal(varlink_server_set_limits(server, &l), 0);
        for (int i = 0; i < 3; i++) {
                assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds[i]), 0);
                assert_int_equal(varlink_server_add_connection(server, fds[i][0]), 0);
        }
        assert_int_equal(varlink_server_n_connections(server), 3);
        assert_int_equal(recv(fds[2][1], &c, 1, 0), 0);   /* closed at once */

        l.connections_max = 1;
        l.connections_per_uid_max = 100;
        assert_int_equal(varlink_server_set_limits(server, &l), 0);
        safe_close(fds[2][1]);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds[2]), 0);
        assert_int_equal(varlink_server_add_connection(server, fds[2][0]), 0);
        assert_int_equal(recv(fds[2][1], &c, 1, 0), 0);
        for (int i = 0; i < 3; i++)
                safe_close(fds[i][1]);
        RUN_UNTIL(varlink_server_n_connections(server) == 1);
}

/* A connection in a group (varlink_call_set_connection_group()) leaves its uid's room to
 * others and counts against the same limit with its group's only. */
static void test_connection_groups(void **state) {
        VarlinkLimits l = VARLINK_LIMITS_DEFAULT;
        int setup_peer, fds[4][2];
        char c;

        l.connections_per_uid_max = 2;
        assert_int_equal(varlink_server_set_limits(server, &l), 0);
        /* The setup's connection joins group a: two more of the uid fit, not three. */
        assert_reply_int(raw_call("{\"method\":\"io.sandboxd.Test.Group\",\"parameters\":{\"tag\":\"a\"}}"),
                         "x", -1, false);
        for (int i = 0; i < 3; i++) {
                assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds[i]), 0);
                assert_int_equal(varlink_server_add_connection(server, fds[i][0]), 0);
        }
        assert_int_equal(varlink_server_n_connections(server), 3);
        assert_int_equal(recv(fds[2][1], &c, 1, 0), 0);   /* the uid's third: closed at once */
        safe_close(fds[2][1]);

        /* The second of group a fits (and makes room for one more of the uid); a third
         * does not, and stays counted as its uid. */
        setup_peer = peer;
        peer = fds[0][1];
        assert_reply_int(raw_call("{\"method\":\"io.sandboxd.Test.Group\",\"parameters\":{\"tag\":\"a\"}}"),
                         "x", -1, false);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds[2]), 0);
        assert_int_equal(varlink_server_add_connection(server, fds[2][0]), 0);
        assert_int_equal(varlink_server_n_connections(server), 4);
        peer = fds[1][1];
        assert_error(raw_call("{\"method\":\"io.sandboxd.Test.Group\",\"parameters\":{\"tag\":\"a\"}}"),
                     TEST_INTERFACE ".Full", NULL, NULL);
        /* Another group has its own room. */
        assert_reply_int(raw_call("{\"method\":\"io.sandboxd.Test.Group\",\"parameters\":{\"tag\":\"b\"}}"),
                         "x", -1, false);
        /* The uid's own are now fds[2] alone: one more fits, then no more. */
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds[3]), 0);
        assert_int_equal(varlink_server_add_connection(server, fds[3][0]), 0);
        assert_int_equal(varlink_server_n_connections(server), 5);
        peer = setup_peer;
        for (int i = 0; i < 4; i++)
                safe_close(fds[i][1]);
        RUN_UNTIL(varlink_server_n_connections(server) == 1);
}

/* ---- set-up errors ---- */

static void test_idl_scan(void **state) {
        static const char *const bad[] = {
                "",
                "method Foo() -> ()",
                "interface foo\nmethod Foo() -> ()",                    /* one part */
                "interface org.example\ninterface org.example2",
                "interface org.example\nmethod foo() -> ()",           /* lower case */
                "interface org.example\nmethod Foo() -> ()\nmethod Foo() -> ()",
                "interface org.example\nmethod Foo(a: (b: int) -> ()",
                "interface org.example\nmethod Foo() -> ())",
                "interface org.example\nmethod (a: int) -> ()",
                "interface org.-example\n",
                "interface org.example.\n",
        };
        char *name, **methods;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(varlink_idl_scan(bad[i], &name, &methods), -EINVAL);

        assert_idl_scans("# a (comment\ninterface org.example.a-b\n"
                         "type T (a: ?[]string, b: (c, d))\n"
                         "# parentheses ) in ( a comment\n"
                         "method A(t: T) -> (x: [string]())\n"
                         "error E ()\nmethod B2() -> ()\n", "org.example.a-b", "A", "B2");

        assert_true(varlink_interface_name_is_valid("io.systemd.UserDatabase"));
        assert_true(varlink_interface_name_is_valid("org.varlink.service"));
        assert_false(varlink_interface_name_is_valid("org..varlink"));
        assert_false(varlink_interface_name_is_valid("1org.varlink"));
        assert_true(varlink_qualified_name_is_valid("org.varlink.service.GetInfo"));
        assert_false(varlink_qualified_name_is_valid("org.GetInfo"));
        assert_false(varlink_qualified_name_is_valid("org.varlink.service."));
}

static void test_server_setup_errors(void **state) {
        VarlinkLimits l = VARLINK_LIMITS_DEFAULT;

        assert_int_equal(varlink_server_add_interface(server, test_idl), -EEXIST);
        assert_int_equal(varlink_server_add_interface(server, "not an interface"), -EINVAL);
        assert_int_equal(varlink_server_bind_method(server, "org.example.Nope.Do", method_echo, NULL), -ENXIO);
        assert_int_equal(varlink_server_bind_method(server, TEST_INTERFACE ".Nope", method_echo, NULL), -ENOENT);
        assert_int_equal(varlink_server_bind_method(server, TEST_INTERFACE ".Echo", method_echo, NULL), -EEXIST);
        assert_int_equal(varlink_server_bind_method(server, "org.varlink.service.GetInfo", method_echo, NULL), -EEXIST);
        assert_int_equal(varlink_server_bind_method(server, "Echo", method_echo, NULL), -EINVAL);
        l.output_buffer_max = l.message_size_max - 1;
        assert_int_equal(varlink_server_set_limits(server, &l), -EINVAL);
        assert_int_equal(varlink_server_listen_address(server, "tcp:1.2.3.4:5", 0600), -EINVAL);
}

/* ---- the client half ---- */

typedef struct Replies {
        unsigned n, n_continues;
        int64_t last;
        char *error;
        bool done;
} Replies;

static int on_reply(VarlinkClient *c, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                    void *userdata) {
        Replies *r = userdata;

        assert_false(r->done);
        r->n++;
        if (flags & VARLINK_REPLY_CONTINUES)
                r->n_continues++;
        if (error && streq(error, VARLINK_ERROR_DISCONNECTED))
                assert_null(parameters);
        else
                assert_non_null(parameters);
        if (error)
                r->error = strdup(error);
        else
                r->last = param_int(parameters, "i");
        r->done = error || !(flags & VARLINK_REPLY_CONTINUES);
        return 0;
}

static void test_client_async(void **state) {
        _cleanup_(varlink_client_unrefp) VarlinkClient *c = NULL;
        _cleanup_json_ json_object *p = json_object_new_object();
        Replies stream = {}, unknown = {}, held = {};
        int fds[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        assert_int_equal(varlink_server_add_connection(server, fds[0]), 0);
        assert_int_equal(varlink_client_connect_fd(&c, fds[1]), 0);
        assert_int_equal(varlink_client_attach_event(c, event, 0), 0);

        assert_int_equal(json_add(p, "n", json_object_new_int(5)), 0);
        assert_int_equal(varlink_client_call_async(c, TEST_INTERFACE ".Stream", p, VARLINK_CALL_MORE, on_reply, &stream), 0);
        assert_int_equal(varlink_client_call_async(c, TEST_INTERFACE ".Oneway", NULL, VARLINK_CALL_ONEWAY, NULL, NULL), 0);
        assert_int_equal(varlink_client_call_async(c, "org.example.Nope.Do", NULL, 0, on_reply, &unknown), 0);
        assert_int_equal(varlink_client_call_async(c, TEST_INTERFACE ".Stream", p, VARLINK_CALL_MORE | VARLINK_CALL_ONEWAY,
                                                   on_reply, &unknown), -EINVAL);
        RUN_UNTIL(unknown.done);
        assert_true(stream.done);
        assert_int_equal(stream.n, 5);
        assert_int_equal(stream.n_continues, 4);
        assert_int_equal(stream.last, 4);
        assert_null(stream.error);
        assert_string_equal(unknown.error, VARLINK_ERROR_INTERFACE_NOT_FOUND);
        assert_int_equal(seen.n_oneway, 1);

        /* The server goes: what is outstanding learns so. */
        assert_int_equal(varlink_client_call_async(c, TEST_INTERFACE ".Hold", NULL, 0, on_reply, &held), 0);
        RUN_UNTIL(seen.held);
        server = varlink_server_unref(server);
        assert_int_equal(seen.n_disconnects, 1);   /* the held call, from within the unref */
        RUN_UNTIL(held.done);
        assert_string_equal(held.error, VARLINK_ERROR_DISCONNECTED);
        assert_false(varlink_client_is_connected(c));
        assert_int_equal(varlink_client_call_async(c, TEST_INTERFACE ".Echo", NULL, 0, on_reply, &held), -ENOTCONN);
        free(unknown.error);
        free(held.error);
}

/* A server in a child process, serving the listening socket fd until killed. */
static pid_t fork_server(int fd) {
        pid_t pid = fork();

        assert_true(pid >= 0);
        if (pid == 0) {
                sd_event *e = NULL;
                VarlinkServer *s = NULL;

                if (sd_event_new(&e) < 0 || server_make(e, &s) < 0 || varlink_server_listen_fd(s, fd) < 0)
                        _exit(1);
                (void) sd_event_loop(e);
                _exit(0);
        }
        safe_close(fd);
        return pid;
}

static void test_client_sync(void **state) {
        _cleanup_(varlink_client_unrefp) VarlinkClient *c = NULL;
        _cleanup_json_ json_object *p = json_object_new_object(), *reply = NULL;
        char template[] = "/tmp/test-varlink.XXXXXX", *dir = mkdtemp(template), *error = NULL;
        _cleanup_free_ char *address = NULL;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd, status;
        pid_t pid;

        assert_non_null(dir);
        assert_true(asprintf(&address, "unix:%s/socket;mode=0600", dir) > 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/socket", dir);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(fd, 16), 0);
        pid = fork_server(fd);

        assert_int_equal(varlink_client_connect_address(&c, address), 0);
        assert_int_equal(json_add(p, "x", json_object_new_int(42)), 0);
        assert_int_equal(varlink_client_call_sync(c, TEST_INTERFACE ".Echo", p, &reply, &error), 0);
        assert_null(error);
        assert_int_equal(param_int(reply, "x"), 42);
        reply = (json_object_put(reply), NULL);

        assert_int_equal(varlink_client_call_sync(c, TEST_INTERFACE ".Stream", p, &reply, &error), 1);
        assert_string_equal(error, VARLINK_ERROR_EXPECTED_MORE);
        error = mfree(error);
        reply = (json_object_put(reply), NULL);

        /* No answer in time: the connection is given up (a late reply would be misread). */
        varlink_client_set_timeout(c, 100 * 1000);
        assert_int_equal(varlink_client_call_sync(c, TEST_INTERFACE ".Hold", NULL, NULL, NULL), -ETIMEDOUT);
        assert_false(varlink_client_is_connected(c));
        assert_int_equal(varlink_client_call_sync(c, TEST_INTERFACE ".Echo", NULL, NULL, NULL), -ENOTCONN);

        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        unlink(sa.sun_path);
        rmdir(dir);
}

static void test_listen_address(void **state) {
        _cleanup_(varlink_client_unrefp) VarlinkClient *c = NULL;
        char template[] = "/tmp/test-varlink.XXXXXX", *dir = mkdtemp(template);
        _cleanup_free_ char *path = NULL;
        Replies r = {};
        struct stat st;

        assert_non_null(dir);
        assert_true(asprintf(&path, "%s/socket", dir) > 0);
        assert_int_equal(varlink_server_listen_address(server, path, 0666), 0);
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISSOCK(st.st_mode));
        assert_int_equal(st.st_mode & 0777, 0666);
        /* A stale socket is replaced. */
        assert_int_equal(varlink_server_listen_address(server, path, 0600), 0);
        assert_int_equal(lstat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);

        assert_int_equal(varlink_client_connect_address(&c, path), 0);
        assert_int_equal(varlink_client_attach_event(c, event, 0), 0);
        assert_int_equal(varlink_client_call_async(c, "org.varlink.service.GetInfo", NULL, 0, on_reply, &r), 0);
        RUN_UNTIL(r.done);
        assert_null(r.error);
        assert_int_equal(varlink_server_n_connections(server), 2);
        unlink(path);
        rmdir(dir);
}

/* "unix:" + address, in a static buffer. */
static const char *strjoina_unix(const char *address) {
        static char buf[128];

        snprintf(buf, sizeof(buf), "unix:%s", address);
        return buf;
}

static void test_listen_abstract(void **state) {
        _cleanup_(varlink_client_unrefp) VarlinkClient *c = NULL;
        _cleanup_free_ char *address = NULL;
        Replies r = {};

        assert_true(asprintf(&address, "@test-varlink-%i", getpid()) > 0);
        assert_int_equal(varlink_server_listen_address(server, address, 0600), 0);
        assert_int_equal(varlink_client_connect_address(&c, strjoina_unix(address)), 0);
        assert_int_equal(varlink_client_attach_event(c, event, 0), 0);
        assert_int_equal(varlink_client_call_async(c, "org.varlink.service.GetInfo", NULL, 0, on_reply, &r), 0);
        RUN_UNTIL(r.done);
        assert_null(r.error);
        assert_int_equal(varlink_client_connect_address(&c, "unix:relative/path"), -EINVAL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_framing_split, setup, teardown),
                cmocka_unit_test(test_stream_large_buffers_released),
                cmocka_unit_test(test_stream_passes_fds),
                cmocka_unit_test_setup_teardown(test_framing_two_in_one_read, setup, teardown),
                cmocka_unit_test_setup_teardown(test_framing_oversized, setup, teardown),
                cmocka_unit_test_setup_teardown(test_framing_oversized_answered, setup, teardown),
                cmocka_unit_test_setup_teardown(test_framing_malformed_json, setup, teardown),
                cmocka_unit_test_setup_teardown(test_invalid_fields, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unknown, setup, teardown),
                cmocka_unit_test_setup_teardown(test_get_info, setup, teardown),
                cmocka_unit_test_setup_teardown(test_get_interface_description, setup, teardown),
                cmocka_unit_test_setup_teardown(test_more, setup, teardown),
                cmocka_unit_test_setup_teardown(test_oneway, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pipelined_in_order, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reply_misuse, setup, teardown),
                cmocka_unit_test_setup_teardown(test_method_faults_close, setup, teardown),
                cmocka_unit_test_setup_teardown(test_disconnect_callback, setup, teardown),
                cmocka_unit_test_setup_teardown(test_half_close, setup, teardown),
                cmocka_unit_test_setup_teardown(test_peer_credentials, setup, teardown),
                cmocka_unit_test_setup_teardown(test_output_bound, setup, teardown),
                cmocka_unit_test_setup_teardown(test_backpressure, setup, teardown),
                cmocka_unit_test_setup_teardown(test_idle_timeout, setup, teardown),
                cmocka_unit_test_setup_teardown(test_message_timeout, setup, teardown),
                cmocka_unit_test_setup_teardown(test_read_ahead_bound, setup, teardown),
                cmocka_unit_test_setup_teardown(test_connection_limits, setup, teardown),
                cmocka_unit_test_setup_teardown(test_connection_groups, setup, teardown),
                cmocka_unit_test_setup_teardown(test_idl_scan, setup, teardown),
                cmocka_unit_test_setup_teardown(test_server_setup_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_client_async, setup, teardown),
                cmocka_unit_test_setup_teardown(test_client_sync, setup, teardown),
                cmocka_unit_test_setup_teardown(test_listen_address, setup, teardown),
                cmocka_unit_test_setup_teardown(test_listen_abstract, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
