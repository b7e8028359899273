/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The varlink front end's shared parts (src/sandboxd/varlink-util.h): parameters read by
 * table (types, ranges, NUL bytes, null, unknown and missing members), bytes as base64,
 * the core's errors as varlink errors (through our server and client on one loop), and
 * a relay's stream: every byte in order, in chunks of at most VARLINK_RELAY_CHUNK_MAX, and
 * what is left in a pipe sent by the flush; a method's start (varlink_read_authorize_then()):
 * each refusal replied, its arguments freed once on every path. */

#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <cmocka.h>

#include <systemd/sd-event.h>

#include "json-util.h"
#include "strv.h"
#include "time-util.h"
#include "varlink-util.h"

typedef struct Args {
        char *s;
        bool b;
        uint64_t u64;
        uint32_t u32;
        int32_t i32;
        char **strv;
        json_object *o;
        VarlinkBytes bytes;
} Args;

static const VarlinkParam table[] = {
        { "s",     VARLINK_PARAM_STRING, offsetof(Args, s),     true },
        { "b",     VARLINK_PARAM_BOOL,   offsetof(Args, b)            },
        { "u64",   VARLINK_PARAM_UINT64, offsetof(Args, u64)          },
        { "u32",   VARLINK_PARAM_UINT32, offsetof(Args, u32)          },
        { "i32",   VARLINK_PARAM_INT32,  offsetof(Args, i32)          },
        { "strv",  VARLINK_PARAM_STRV,   offsetof(Args, strv)         },
        { "o",     VARLINK_PARAM_OBJECT, offsetof(Args, o)            },
        { "bytes", VARLINK_PARAM_BYTES,  offsetof(Args, bytes)        },
        {}
};

/* Reads json by table: 0, or -EINVAL with the member refused, which must be want_bad
 * (the name may point into the object: checked before it goes). */
static int read_params(const char *json, Args *a, const char *want_bad) {
        _cleanup_json_ json_object *p = json_tokener_parse(json);
        const char *bad = NULL;
        int r;

        assert_non_null(p);
        *a = (Args) {};
        r = varlink_params_read(p, table, a, &bad);
        a->o = NULL; /* borrowed from p */
        if (!streq_ptr(bad, want_bad))
                fail_msg("%s: refused %s, not %s", json, strna(bad), strna(want_bad));
        return r;
}

static void test_params_good(void **state) {
        Args a;

        assert_int_equal(read_params("{\"s\": \"x\", \"b\": true, \"u64\": 18446744073709551615, \"u32\": 4294967295,"
                                     " \"i32\": -2147483648, \"strv\": [\"a\", \"b\"], \"o\": {}, \"bytes\": \"aGVsbG8=\"}",
                                     &a, NULL), 0);
        assert_string_equal(a.s, "x");
        assert_true(a.b);
        assert_true(a.u64 == UINT64_MAX);
        assert_true(a.u32 == UINT32_MAX);
        assert_int_equal(a.i32, INT32_MIN);
        assert_int_equal(strv_length(a.strv), 2);
        assert_string_equal(a.strv[1], "b");
        assert_int_equal(a.bytes.size, 5);
        assert_memory_equal(a.bytes.data, "hello", 5);
        varlink_params_done(table, &a);
        assert_null(a.s);
        assert_null(a.strv);

        /* null is absent; the optional ones may be left out. */
        assert_int_equal(read_params("{\"s\": \"\", \"b\": null, \"strv\": null, \"bytes\": \"\"}", &a, NULL), 0);
        assert_string_equal(a.s, "");
        assert_false(a.b);
        assert_null(a.strv);
        assert_int_equal(a.bytes.size, 0);
        varlink_params_done(table, &a);
}

static void test_params_bad(void **state) {
        static const struct {
                const char *json, *bad;
        } cases[] = {
                { "{}",                                   "s"     },   /* missing */
                { "{\"s\": null}",                        "s"     },   /* null: missing */
                { "{\"s\": 1}",                           "s"     },
                { "{\"s\": \"a\\u0000b\"}",               "s"     },   /* a NUL */
                { "{\"s\": \"x\", \"what\": 1}",          "what"  },   /* unknown */
                { "{\"s\": \"x\", \"b\": 1}",             "b"     },
                { "{\"s\": \"x\", \"u64\": -1}",          "u64"   },
                { "{\"s\": \"x\", \"u64\": 1.0}",         "u64"   },
                { "{\"s\": \"x\", \"u64\": \"1\"}",       "u64"   },
                { "{\"s\": \"x\", \"u32\": 4294967296}",  "u32"   },
                { "{\"s\": \"x\", \"u32\": -1}",          "u32"   },
                { "{\"s\": \"x\", \"i32\": 2147483648}",  "i32"   },
                { "{\"s\": \"x\", \"i32\": -2147483649}", "i32"   },
                { "{\"s\": \"x\", \"i32\": 18446744073709551615}", "i32" },
                { "{\"s\": \"x\", \"strv\": \"a\"}",      "strv"  },
                { "{\"s\": \"x\", \"strv\": [\"a\", 1]}", "strv"  },
                { "{\"s\": \"x\", \"strv\": [\"a\\u0000\"]}", "strv" },
                { "{\"s\": \"x\", \"o\": []}",            "o"     },
                { "{\"s\": \"x\", \"bytes\": \"!!\"}",    "bytes" },
                { "{\"s\": \"x\", \"bytes\": 5}",         "bytes" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                Args a;

                assert_int_equal(read_params(cases[i].json, &a, cases[i].bad), -EINVAL);
                varlink_params_done(table, &a);
        }
}

static void test_base64(void **state) {
        static const size_t sizes[] = { 0, 1, 2, 3, 4, 65535, 65536, 65537 };

        for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
                _cleanup_free_ char *data = malloc(sizes[i] + 1);
                _cleanup_json_ json_object *p = json_object_new_object();
                const char *bad = NULL;
                Args a = {};

                assert_non_null(data);
                for (size_t k = 0; k < sizes[i]; k++)
                        data[k] = (char) (k * 7 + 3);
                assert_int_equal(json_add(p, "s", json_object_new_string("")), 0);
                assert_int_equal(json_add(p, "bytes", json_object_new_base64(data, sizes[i])), 0);
                assert_int_equal(varlink_params_read(p, table, &a, &bad), 0);
                assert_int_equal(a.bytes.size, sizes[i]);
                if (sizes[i] > 0)
                        assert_memory_equal(a.bytes.data, data, sizes[i]);
                varlink_params_done(table, &a);
        }
}

/* ---- through a server ---- */

static const char test_idl[] =
        "interface io.sandboxd.Test\n"
        "method Fail(code: int) -> ()\n"
        "method Relay(size: int, flush: bool) -> (out: ?string, done: ?bool)\n"
        "method Start(s: ?string, oom: ?bool) -> (s: string)\n";

static sd_event *event;
static VarlinkServer *server;
static VarlinkClient *client;

#define RUN_UNTIL(cond)                                                         \
        do {                                                                    \
                uint64_t _deadline = now_usec(CLOCK_MONOTONIC) + 10 * 1000000ULL; \
                while (!(cond)) {                                               \
                        assert_true(now_usec(CLOCK_MONOTONIC) < _deadline);     \
                        assert_true(sd_event_run(event, 10 * 1000) >= 0);       \
                }                                                               \
        } while (0)

/* Fail(code): replies the core's error of that code (SANDBOX_ERR_ERRNO: ENOENT; -1: a
 * fault, EPIPE). */
static int method_fail(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        json_object *c = json_object_object_get(parameters, "code");
        int code = json_object_get_int(c);

        if (code < 0)
                return varlink_reply_error(call, NULL, -EPIPE);
        if (code == SANDBOX_ERR_ERRNO)
                sandbox_error_set_errno(&e, ENOENT, "/work/x: %m");
        else    /* a message cut in the middle of a character, as "%.64s" may */
                sandbox_error_set(&e, (SandboxErrorCode) code, "caf\xc3");
        return varlink_reply_error(call, &e, -EIO);
}

/* Relay(size, flush): size bytes (at most a pipe's worth) written into a pipe by us and
 * relayed; the last reply once the pipe is at its end; or with flush, at once after
 * varlink_relay_flush(), the write end still open (as a child the process left would
 * hold it): Exec's end. */
typedef struct RelayTest {
        VarlinkCall *call;
        VarlinkRelay *relay;
} RelayTest;

static void on_relay_eof(VarlinkRelay *r, void *userdata) {
        RelayTest *t = userdata;
        _cleanup_json_ json_object *p = json_object_new_object();

        assert_int_equal(json_add(p, "done", json_object_new_boolean(true)), 0);
        assert_int_equal(varlink_call_reply(t->call, p), 0);
        varlink_relay_free(t->relay);
        varlink_call_unref(t->call);
        free(t);
}

static int method_relay(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        size_t size = (size_t) json_object_get_int64(json_object_object_get(parameters, "size"));
        bool flush = json_object_get_boolean(json_object_object_get(parameters, "flush"));
        static const char * const names[] = { "out" };
        RelayTest *t = calloc(1, sizeof(RelayTest));
        int p[2];

        assert_non_null(t);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
        assert_int_equal(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
        for (size_t done = 0; done < size;) {
                char buf[4096];
                for (size_t k = 0; k < sizeof(buf); k++)
                        buf[k] = (char) ((done + k) % 251);
                ssize_t n = write(p[1], buf, MIN(sizeof(buf), size - done));
                if (n < 0) {
                        assert_int_equal(errno, EAGAIN);
                        break;
                }
                done += (size_t) n;
        }
        t->call = varlink_call_ref(call);
        assert_int_equal(varlink_relay_new(event, call, (int[]) { p[0] }, names, 1, on_relay_eof, t, &t->relay), 0);
        if (flush) {
                varlink_relay_flush(t->relay);
                on_relay_eof(t->relay, t);
        }
        close(p[1]);
        return 0;
}

/* Start(s, oom): varlink_read_authorize_then() with nothing to authorize; s is required
 * by the table (not by the interface), fn answers it; oom: no arguments, as if calloc()
 * failed. */
typedef struct StartArgs {
        char *s;
        bool oom;
} StartArgs;

static const VarlinkParam start_table[] = {
        { "s",   VARLINK_PARAM_STRING, offsetof(StartArgs, s), true },
        { "oom", VARLINK_PARAM_BOOL,   offsetof(StartArgs, oom)     },
        {}
};

static unsigned start_args_freed;

static void start_args_free(void *userdata) {
        StartArgs *a = userdata;

        free(a->s);
        free(a);
        start_args_freed++;
}

static int start_run(VarlinkCall *call, const SandboxCaller *caller, void *userdata, SandboxError *error) {
        _cleanup_json_ json_object *p = json_object_new_object();
        StartArgs *a = userdata;

        assert_int_equal(caller->uid, getuid());
        assert_int_equal(json_add(p, "s", json_object_new_string(a->s)), 0);
        assert_int_equal(varlink_call_reply(call, p), 0);
        return 0;
}

static int method_start(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        json_object *oom = json_object_object_get(parameters, "oom");
        StartArgs *a = oom && json_object_get_boolean(oom) ? NULL : calloc(1, sizeof(StartArgs));

        return varlink_read_authorize_then(NULL, call, parameters, start_table, a, start_args_free, NULL, 0,
                                           start_run);
}

static int setup(void **state) {
        int fds[2];

        assert_int_equal(sd_event_new(&event), 0);
        assert_int_equal(varlink_server_new(&server), 0);
        assert_int_equal(varlink_server_add_interface(server, test_idl), 0);
        assert_int_equal(varlink_server_bind_method(server, "io.sandboxd.Test.Fail", method_fail, NULL), 0);
        assert_int_equal(varlink_server_bind_method(server, "io.sandboxd.Test.Relay", method_relay, NULL), 0);
        assert_int_equal(varlink_server_bind_method(server, "io.sandboxd.Test.Start", method_start, NULL), 0);
        assert_int_equal(varlink_server_attach_event(server, event, 0), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds), 0);
        assert_int_equal(varlink_server_add_connection(server, fds[0]), 0);
        assert_int_equal(varlink_client_connect_fd(&client, fds[1]), 0);
        assert_int_equal(varlink_client_attach_event(client, event, 0), 0);
        return 0;
}

static int teardown(void **state) {
        client = varlink_client_unref(client);
        server = varlink_server_unref(server);
        event = sd_event_unref(event);
        return 0;
}

typedef struct Replies {
        char *error;
        json_object *last;
        size_t n_continues;
        size_t max_chunk;
        char *data;
        size_t size;
        bool done;
} Replies;

static int on_reply(VarlinkClient *c, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                    void *userdata) {
        Replies *r = userdata;
        json_object *out;

        if (flags & VARLINK_REPLY_CONTINUES) {
                const char *b = json_object_get_string(json_object_object_get(parameters, "out"));
                Args a = {};
                _cleanup_json_ json_object *p = json_object_new_object();
                const char *bad;

                assert_true(json_object_object_get_ex(parameters, "out", &out));
                assert_int_equal(json_add(p, "s", json_object_new_string("")), 0);
                assert_int_equal(json_add(p, "bytes", json_object_new_string(b)), 0);
                assert_int_equal(varlink_params_read(p, table, &a, &bad), 0);
                r->data = realloc(r->data, r->size + a.bytes.size);
                assert_non_null(r->data);
                memcpy(r->data + r->size, a.bytes.data, a.bytes.size);
                r->size += a.bytes.size;
                r->max_chunk = MAX(r->max_chunk, a.bytes.size);
                assert_true(a.bytes.size >= 1);
                r->n_continues++;
                varlink_params_done(table, &a);
                return 0;
        }
        r->error = error ? strdup(error) : NULL;
        r->last = json_object_get(parameters);
        r->done = true;
        return 0;
}

static void call(const char *method, json_object *parameters, VarlinkCallFlags flags, Replies *r) {
        *r = (Replies) {};
        assert_int_equal(varlink_client_call_async(client, method, parameters, flags, on_reply, r), 0);
        RUN_UNTIL(r->done);
}

static void replies_done(Replies *r) {
        free(r->error);
        free(r->data);
        json_object_put(r->last);
}

static void test_errors(void **state) {
        _cleanup_json_ json_object *p = json_object_new_object();
        Replies r;

        assert_int_equal(json_add(p, "code", json_object_new_int(SANDBOX_ERR_NO_SUCH_SANDBOX)), 0);
        call("io.sandboxd.Test.Fail", p, 0, &r);
        assert_string_equal(r.error, "io.sandboxd.Sandbox.NoSuchSandbox");
        /* The cut character is replaced: JSON strings are UTF-8. */
        assert_string_equal(json_object_get_string(json_object_object_get(r.last, "message")), "caf\xef\xbf\xbd");
        replies_done(&r);

        json_object_object_add(p, "code", json_object_new_int(SANDBOX_ERR_ACCESS_DENIED));
        call("io.sandboxd.Test.Fail", p, 0, &r);
        assert_string_equal(r.error, "io.sandboxd.Sandbox.AccessDenied");
        replies_done(&r);

        json_object_object_add(p, "code", json_object_new_int(SANDBOX_ERR_ERRNO));
        call("io.sandboxd.Test.Fail", p, 0, &r);
        assert_string_equal(r.error, "io.sandboxd.Sandbox.SystemError");
        assert_int_equal(json_object_get_int(json_object_object_get(r.last, "errno")), ENOENT);
        assert_string_equal(json_object_get_string(json_object_object_get(r.last, "errnoName")), "ENOENT");
        assert_string_equal(json_object_get_string(json_object_object_get(r.last, "message")),
                            "/work/x: No such file or directory");
        replies_done(&r);

        json_object_object_add(p, "code", json_object_new_int(-1));
        call("io.sandboxd.Test.Fail", p, 0, &r);
        assert_string_equal(r.error, "io.sandboxd.Sandbox.SystemError");
        assert_string_equal(json_object_get_string(json_object_object_get(r.last, "errnoName")), "EPIPE");
        replies_done(&r);
}

static void test_read_authorize_then(void **state) {
        _cleanup_json_ json_object *p = json_object_new_object();
        Replies r;

        /* Read and run: fn's answer, the arguments freed after it. */
        start_args_freed = 0;
        assert_int_equal(json_add(p, "s", json_object_new_string("hello")), 0);
        call("io.sandboxd.Test.Start", p, 0, &r);
        assert_null(r.error);
        assert_string_equal(json_object_get_string(json_object_object_get(r.last, "s")), "hello");
        assert_int_equal(start_args_freed, 1);
        replies_done(&r);

        /* A member the table needs: InvalidParameter naming it, the arguments freed, fn
         * not run. */
        json_object_object_del(p, "s");
        call("io.sandboxd.Test.Start", p, 0, &r);
        assert_string_equal(r.error, "org.varlink.service.InvalidParameter");
        assert_string_equal(json_object_get_string(json_object_object_get(r.last, "parameter")), "s");
        assert_int_equal(start_args_freed, 2);
        replies_done(&r);

        /* No arguments (out of memory): SystemError ENOMEM, nothing to free. */
        assert_int_equal(json_add(p, "oom", json_object_new_boolean(true)), 0);
        call("io.sandboxd.Test.Start", p, 0, &r);
        assert_string_equal(r.error, "io.sandboxd.Sandbox.SystemError");
        assert_string_equal(json_object_get_string(json_object_object_get(r.last, "errnoName")), "ENOMEM");
        assert_int_equal(start_args_freed, 2);
        replies_done(&r);
}

static void test_relay(void **state) {
        static const size_t sizes[] = { 0, 1, 65536, 65537, 3 * 65536 + 5 };

        for (size_t i = 0; i < 2 * ELEMENTSOF(sizes); i++) {
                _cleanup_json_ json_object *p = json_object_new_object();
                size_t size = MIN(sizes[i / 2], (size_t) 65536); /* a pipe's default capacity */
                Replies r;

                assert_int_equal(json_add(p, "size", json_object_new_int64((int64_t) sizes[i / 2])), 0);
                assert_int_equal(json_add(p, "flush", json_object_new_boolean(i % 2)), 0);
                call("io.sandboxd.Test.Relay", p, VARLINK_CALL_MORE, &r);
                assert_null(r.error);
                assert_true(json_object_get_boolean(json_object_object_get(r.last, "done")));
                assert_int_equal(r.size, size);
                assert_true(r.max_chunk <= VARLINK_RELAY_CHUNK_MAX);
                for (size_t k = 0; k < r.size; k++)
                        if (r.data[k] != (char) (k % 251))
                                fail_msg("byte %zu of %zu differs", k, r.size);
                replies_done(&r);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_params_good),
                cmocka_unit_test(test_params_bad),
                cmocka_unit_test(test_base64),
                cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_relay, setup, teardown),
                cmocka_unit_test_setup_teardown(test_read_authorize_then, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
