/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libsandbox-client: its pure parts (options encoded, replies decoded, errors mapped) on
 * messages built here, and its calls end to end against a fake sandboxd on the other end of
 * a socketpair, served by a thread of its own (the client's calls block). */

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "sandbox-client-internal.h"
#include "strv.h"

#define TEST_ID "abc123"
#define TEST_PATH SANDBOX_OBJECT_PREFIX TEST_ID

/* ---- messages built here, read back as the daemon would ---- */

static sd_bus *bus;             /* one end of a socketpair: messages need an open bus */
static int peer_fd = -EBADF;

static int setup_bus(void **state) {
        sd_id128_t id = SD_ID128_MAKE(0a,1b,2c,3d,4e,5f,60,71,82,93,a4,b5,c6,d7,e8,f9);
        int pair[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
        assert_true(sd_bus_new(&bus) >= 0);
        assert_true(sd_bus_set_fd(bus, pair[0], pair[0]) >= 0);
        assert_true(sd_bus_set_server(bus, true, id) >= 0);
        assert_true(sd_bus_start(bus) >= 0);
        peer_fd = pair[1];
        return 0;
}

static int teardown_bus(void **state) {
        bus = sd_bus_close_unref(bus);
        peer_fd = safe_close(peer_fd);
        return 0;
}

/* A message whose body the test appends, sealed and rewound to be read. */
static sd_bus_message *message_new(void) {
        sd_bus_message *m;

        assert_true(sd_bus_message_new_signal(bus, &m, "/test", "io.sandboxd.Test", "Test") >= 0);
        return m;
}

static void message_seal(sd_bus_message *m) {
        assert_true(sd_bus_message_seal(m, 1, 0) >= 0);
        assert_true(sd_bus_message_rewind(m, true) >= 0);
}

/* Reads a{sv} of u64, bool and string entries into a string "Name=value,…" in order. */
static void read_options(sd_bus_message *m, char *buf, size_t l) {
        size_t n = 0;

        buf[0] = '\0';
        assert_true(sd_bus_message_enter_container(m, 'a', "{sv}") > 0);
        for (;;) {
                const char *name, *contents;
                char type;
                int r;

                r = sd_bus_message_enter_container(m, 'e', "sv");
                assert_true(r >= 0);
                if (r == 0)
                        break;
                assert_true(sd_bus_message_read(m, "s", &name) > 0);
                assert_true(sd_bus_message_peek_type(m, &type, &contents) > 0);
                if (streq(contents, "t")) {
                        uint64_t v;
                        assert_true(sd_bus_message_read(m, "v", "t", &v) > 0);
                        n += (size_t) snprintf(buf + n, l - n, "%s%s=%" PRIu64, n ? "," : "", name, v);
                } else if (streq(contents, "b")) {
                        int v;
                        assert_true(sd_bus_message_read(m, "v", "b", &v) > 0);
                        n += (size_t) snprintf(buf + n, l - n, "%s%s=%s", n ? "," : "", name, v ? "yes" : "no");
                } else if (streq(contents, "s")) {
                        const char *v;
                        assert_true(sd_bus_message_read(m, "v", "s", &v) > 0);
                        n += (size_t) snprintf(buf + n, l - n, "%s%s=%s", n ? "," : "", name, v);
                } else {
                        assert_true(sd_bus_message_skip(m, "v") >= 0);
                        n += (size_t) snprintf(buf + n, l - n, "%s%s:%s", n ? "," : "", name, contents);
                }
                assert_true(sd_bus_message_exit_container(m) > 0);
                assert_true(n < l);
        }
        assert_true(sd_bus_message_exit_container(m) > 0);
}

static void test_create_options_only_those_set(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = message_new();
        SandboxCreateOptions o = {
                .set = SANDBOX_CREATE_MEMORY_MAX | SANDBOX_CREATE_TASKS_MAX | SANDBOX_CREATE_EPHEMERAL,
                .memory_max = 0,        /* set: sent even when 0, for the daemon to refuse */
                .cpu_quota_per_sec_usec = 500000,       /* not set: not sent */
                .tasks_max = 64,
                .ephemeral = true,
        };
        char buf[256];

        assert_true(client_append_create_options(m, &o) >= 0);
        message_seal(m);
        read_options(m, buf, sizeof(buf));
        assert_string_equal(buf, "MemoryMax=0,TasksMax=64,Ephemeral=yes");
}

static void test_create_options_names(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = message_new();
        SandboxCreateOptions o = {
                .set = SANDBOX_CREATE_NAME | SANDBOX_CREATE_REUSE_EXISTING | SANDBOX_CREATE_TENANT,
                .name = "agent-7",
                .reuse_existing = true,
                .tenant = "acme",
        };
        char buf[256];

        assert_true(client_append_create_options(m, &o) >= 0);
        message_seal(m);
        read_options(m, buf, sizeof(buf));
        assert_string_equal(buf, "Name=agent-7,ReuseExisting=yes,Tenant=acme");
}

static void test_create_options_none(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = message_new();
        char buf[64];

        assert_true(client_append_create_options(m, NULL) >= 0);
        message_seal(m);
        read_options(m, buf, sizeof(buf));
        assert_string_equal(buf, "");
}

static void test_exec_options(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = message_new();
        SandboxExecOptions o = SANDBOX_EXEC_OPTIONS_INIT;
        char *env[] = { (char *) "A=1", NULL };
        char buf[512];

        o.environment = env;
        o.working_directory = "/tmp";
        o.output_max_set = true;
        o.output_max = 0;
        o.stdin_data = "in";
        o.stdin_size = 2;
        o.stdout_fd = STDOUT_FILENO;
        o.tty = true;
        o.tty_rows = 30;
        o.tty_cols = 100;
        o.timeout_sec = 7;      /* the caller's timeout_sec argument is what is sent */

        assert_true(client_append_exec_options(m, &o, 42) >= 0);
        message_seal(m);
        read_options(m, buf, sizeof(buf));
        assert_string_equal(buf, "Timeout=42,Environment:as,WorkingDirectory=/tmp,OutputMax=0,Stdin:ay,"
                                 "StandardOutput:h,TTY=yes,TerminalRows=30,TerminalColumns=100");
}

static void test_exec_options_defaults_send_nothing(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = message_new();
        SandboxExecOptions o = SANDBOX_EXEC_OPTIONS_INIT;
        char buf[64];

        o.tty = false;
        o.tty_rows = 30;        /* without tty: no size */
        assert_true(client_append_exec_options(m, &o, 0) >= 0);
        message_seal(m);
        read_options(m, buf, sizeof(buf));
        assert_string_equal(buf, "");
}

static void append_info(sd_bus_message *m, bool with_exit_code) {
        assert_true(sd_bus_message_open_container(m, 'a', "{sv}") >= 0);
        assert_true(sd_bus_message_append(m, "{sv}{sv}{sv}{sv}", "TimedOut", "b", 1, "Signal", "i", 9,
                                          "DurationUSec", "t", UINT64_C(1500), "Truncated", "b", 1) >= 0);
        /* Unknown names and known names of an unexpected type are skipped. */
        assert_true(sd_bus_message_append(m, "{sv}{sv}", "FutureField", "s", "x", "OOMKilled", "s", "yes") >= 0);
        if (with_exit_code)
                assert_true(sd_bus_message_append(m, "{sv}", "ExitCode", "i", 3) >= 0);
        assert_true(sd_bus_message_append(m, "{sv}", "StdoutBytes", "t", UINT64_C(5)) >= 0);
        assert_true(sd_bus_message_close_container(m) >= 0);
}

static void test_exec_result_with_output(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = message_new();
        SandboxExecResult res;

        assert_true(sd_bus_message_append(m, "i", 137) >= 0);
        assert_true(sd_bus_message_append_array(m, 'y', "hello", 5) >= 0);
        assert_true(sd_bus_message_append_array(m, 'y', "", 0) >= 0);
        append_info(m, false);
        message_seal(m);

        assert_int_equal(client_read_exec_result(m, true, &res), 0);
        assert_int_equal(res.exit_status, 137);
        assert_int_equal(res.exit_code, -1);     /* implied: killed by a signal */
        assert_int_equal(res.signal, 9);
        assert_true(res.timed_out);
        assert_false(res.oom_killed);
        assert_true(res.truncated);
        assert_int_equal(res.duration_usec, 1500);
        assert_int_equal(res.stdout_bytes, 5);
        assert_int_equal(res.stdout_size, 5);
        assert_memory_equal(res.stdout_data, "hello", 5);
        assert_int_equal(res.stderr_size, 0);
        assert_null(res.stderr_data);
        sandbox_exec_result_done(&res);
}

static void test_wait_result_without_output(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = message_new();
        SandboxExecResult res;

        assert_true(sd_bus_message_append(m, "i", 3) >= 0);
        append_info(m, true);
        message_seal(m);

        assert_int_equal(client_read_exec_result(m, false, &res), 0);
        assert_int_equal(res.exit_status, 3);
        assert_int_equal(res.exit_code, 3);
        assert_null(res.stdout_data);
        sandbox_exec_result_done(&res);
}

static void test_exec_result_bad_reply_leaves_ret(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = message_new();
        SandboxExecResult res = { .exit_status = 77 };

        assert_true(sd_bus_message_append(m, "s", "not an exec result") >= 0);
        message_seal(m);
        assert_true(client_read_exec_result(m, true, &res) < 0);
        assert_int_equal(res.exit_status, 77);
}

static void test_status(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = message_new();
        SandboxStatus s;

        assert_true(sd_bus_message_append(m, "a{sv}", 4, "Id", "s", TEST_ID, "Owner", "u", 1000,
                                          "MemoryMax", "t", UINT64_C(268435456), "Ephemeral", "b", 1) >= 0);
        message_seal(m);
        assert_int_equal(client_read_status(m, &s), 0);
        assert_string_equal(s.id, TEST_ID);
        assert_int_equal(s.owner, 1000);
        assert_int_equal(s.memory_max, 268435456);
        assert_true(s.ephemeral);
        assert_true(SANDBOX_STATUS_HAS(&s, SANDBOX_PROPERTY_ID));
        assert_true(SANDBOX_STATUS_HAS(&s, SANDBOX_PROPERTY_EPHEMERAL));
        assert_false(SANDBOX_STATUS_HAS(&s, SANDBOX_PROPERTY_STATE));
        assert_null(s.state);
        sandbox_status_done(&s);
}

static void test_error_mapping(void **state) {
        SandboxClientError e = SANDBOX_CLIENT_ERROR_NULL;
        sd_bus_error b = SD_BUS_ERROR_NULL;

        /* The documented names, each its errno (sandbox-api.h, one list). */
        assert_int_equal(sandbox_client_errno_from_name(SANDBOX_ERROR_NO_SUCH_SANDBOX), ENXIO);
        assert_int_equal(sandbox_client_errno_from_name(SANDBOX_ERROR_INVALID_OPTION), EINVAL);
        assert_int_equal(sandbox_client_errno_from_name(SANDBOX_ERROR_STILL_RUNNING), EAGAIN);
        assert_int_equal(sandbox_client_errno_from_name(SANDBOX_ERROR_BUSY), EBUSY);
        /* Standard names, and the errno names of the file methods. */
        assert_int_equal(sandbox_client_errno_from_name(SD_BUS_ERROR_ACCESS_DENIED), EACCES);
        assert_int_equal(sandbox_client_errno_from_name("System.Error.EPIPE"), EPIPE);
        assert_int_equal(sandbox_client_errno_from_name("org.example.Unknown"), EIO);
        assert_int_equal(sandbox_client_errno_from_name(NULL), EIO);

        /* Name and message kept for the caller; the errno comes from the name. */
        sd_bus_error_set_const(&b, SANDBOX_ERROR_NOT_RUNNING, "Sandbox x is paused.");
        assert_int_equal(client_error_from_bus(&e, &b, -EIO), -ESRCH);
        assert_true(sandbox_client_error_has_name(&e, SANDBOX_ERROR_NOT_RUNNING));
        assert_string_equal(sandbox_client_error_message(&e, -ESRCH), "Sandbox x is paused.");
        sandbox_client_error_done(&e);

        /* A local failure: no name, the message is strerror's. */
        assert_int_equal(client_error_from_bus(&e, NULL, -ENOMEM), -ENOMEM);
        assert_false(sandbox_client_error_is_set(&e));
        assert_string_equal(sandbox_client_error_message(&e, -ENOMEM), strerror(ENOMEM));
        /* No error to fill: still the errno. */
        assert_int_equal(client_error_from_bus(NULL, &b, -EIO), -ESRCH);
}

/* ---- end to end: a fake sandboxd ---- */

typedef struct Fake {
        pthread_t thread;
        int fd;
        pthread_mutex_t lock;
        pthread_cond_t ready_cond;
        bool ready;
        /* What it saw. */
        char template[64];
        char create_options[256];
        char exec_options[512];
        char **argv;
        unsigned n_destroy;
        int destroy_auto_start;
        /* What it does. */
        const char *exec_error;         /* Exec fails with this name */
        const char *destroy_error;      /* Destroy fails with this name */
} Fake;

static Fake fake;

static int fake_create(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *template;

        assert_true(sd_bus_message_read(m, "s", &template) > 0);
        snprintf(fake.template, sizeof(fake.template), "%s", template);
        read_options(m, fake.create_options, sizeof(fake.create_options));
        return sd_bus_reply_method_return(m, "so", TEST_ID, TEST_PATH);
}

static int fake_get(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *id;

        assert_true(sd_bus_message_read(m, "s", &id) > 0);
        if (!streq(id, TEST_ID) && !streq(id, "by-name"))
                return sd_bus_error_setf(error, SANDBOX_ERROR_NO_SUCH_SANDBOX, "No sandbox '%s'.", id);
        return sd_bus_reply_method_return(m, "o", TEST_PATH);
}

static int fake_exec(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;

        fake.argv = strv_free(fake.argv);
        assert_true(sd_bus_message_read_strv(m, &fake.argv) > 0);
        read_options(m, fake.exec_options, sizeof(fake.exec_options));
        if (fake.exec_error)
                return sd_bus_error_setf(error, fake.exec_error, "Exec failed as told.");

        assert_true(sd_bus_message_new_method_return(m, &reply) >= 0);
        assert_true(sd_bus_message_append(reply, "i", 0) >= 0);
        assert_true(sd_bus_message_append_array(reply, 'y', "out\n", 4) >= 0);
        assert_true(sd_bus_message_append_array(reply, 'y', "err\n", 4) >= 0);
        assert_true(sd_bus_message_append(reply, "a{sv}", 2, "DurationUSec", "t", UINT64_C(1234),
                                          "ExitCode", "i", 0) >= 0);
        return sd_bus_send(NULL, reply, NULL);
}

static int fake_destroy(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        pthread_mutex_lock(&fake.lock);
        fake.n_destroy++;
        fake.destroy_auto_start = sd_bus_message_get_auto_start(m);
        pthread_mutex_unlock(&fake.lock);
        if (fake.destroy_error)
                return sd_bus_error_setf(error, fake.destroy_error, "Destroy failed as told.");
        return sd_bus_reply_method_return(m, NULL);
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("CreateSandbox", "sa{sv}", "so", fake_create, 0),
        SD_BUS_METHOD("GetSandbox", "s", "o", fake_get, 0),
        SD_BUS_VTABLE_END
};

static const sd_bus_vtable sandbox_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("Exec", "asa{sv}", "iayaya{sv}", fake_exec, 0),
        SD_BUS_METHOD("Destroy", NULL, NULL, fake_destroy, 0),
        SD_BUS_VTABLE_END
};

static void *fake_run(void *userdata) {
        sd_id128_t id = SD_ID128_MAKE(5a,4b,3c,2d,1e,0f,00,11,22,33,44,55,66,77,88,99);
        sd_event *event = NULL;
        sd_bus *b = NULL;

        assert_true(sd_event_new(&event) >= 0);
        assert_true(sd_bus_new(&b) >= 0);
        assert_true(sd_bus_set_fd(b, fake.fd, fake.fd) >= 0);
        assert_true(sd_bus_set_server(b, true, id) >= 0);
        assert_true(sd_bus_add_object_vtable(b, NULL, SANDBOX_MANAGER_PATH, SANDBOX_MANAGER_INTERFACE,
                                             manager_vtable, NULL) >= 0);
        assert_true(sd_bus_add_object_vtable(b, NULL, TEST_PATH, SANDBOX_INTERFACE, sandbox_vtable, NULL) >= 0);
        assert_true(sd_bus_set_exit_on_disconnect(b, true) >= 0);
        assert_true(sd_bus_start(b) >= 0);
        assert_true(sd_bus_attach_event(b, event, 0) >= 0);

        pthread_mutex_lock(&fake.lock);
        fake.ready = true;
        pthread_cond_signal(&fake.ready_cond);
        pthread_mutex_unlock(&fake.lock);

        /* Until the client hangs up. */
        assert_true(sd_event_loop(event) >= 0);
        sd_bus_flush_close_unref(b);
        sd_event_unref(event);
        return NULL;
}

static SandboxClient *client;

static int setup_fake(void **state) {
        _cleanup_(sd_bus_unrefp) sd_bus *b = NULL;
        int pair[2];

        fake = (Fake) { .lock = PTHREAD_MUTEX_INITIALIZER, .ready_cond = PTHREAD_COND_INITIALIZER,
                        .destroy_auto_start = -1 };
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
        fake.fd = pair[1];
        assert_int_equal(pthread_create(&fake.thread, NULL, fake_run, NULL), 0);
        pthread_mutex_lock(&fake.lock);
        while (!fake.ready)
                pthread_cond_wait(&fake.ready_cond, &fake.lock);
        pthread_mutex_unlock(&fake.lock);

        assert_true(sd_bus_new(&b) >= 0);
        assert_true(sd_bus_set_fd(b, pair[0], pair[0]) >= 0);
        assert_true(sd_bus_negotiate_fds(b, true) >= 0);
        assert_true(sd_bus_start(b) >= 0);
        assert_int_equal(sandbox_client_new_bus(b, &client), 0);
        return 0;
}

static int teardown_fake(void **state) {
        client = sandbox_client_free(client);
        assert_int_equal(pthread_join(fake.thread, NULL), 0);
        fake.argv = strv_free(fake.argv);
        return 0;
}

static void test_create_exec_destroy(void **state) {
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL, *h2 = NULL;
        SandboxClientError e = SANDBOX_CLIENT_ERROR_NULL;
        SandboxCreateOptions co = { .set = SANDBOX_CREATE_MEMORY_MAX | SANDBOX_CREATE_TIMEOUT,
                                    .memory_max = 256 << 20, .timeout_sec = 3600 };
        SandboxExecOptions eo = SANDBOX_EXEC_OPTIONS_INIT;
        char *argv[] = { (char *) "echo", (char *) "hi", NULL };
        _cleanup_free_ char *id = NULL;
        SandboxExecResult res;

        assert_int_equal(sandbox_client_create(client, "python", &co, &id, &h, &e), 0);
        assert_string_equal(id, TEST_ID);
        assert_string_equal(sandbox_handle_id(h), TEST_ID);
        assert_string_equal(sandbox_handle_path(h), TEST_PATH);
        assert_string_equal(fake.template, "python");
        assert_string_equal(fake.create_options, "MemoryMax=268435456,Timeout=3600");

        /* Without a timeout, Exec still sends the default one: the call's own matches it. */
        assert_int_equal(sandbox_handle_exec(h, argv, &eo, &res, &e), 0);
        assert_int_equal(strv_length(fake.argv), 2);
        assert_string_equal(fake.argv[0], "echo");
        assert_string_equal(fake.argv[1], "hi");
        assert_string_equal(fake.exec_options, "Timeout=300");
        assert_int_equal(res.exit_status, 0);
        assert_int_equal(res.duration_usec, 1234);
        assert_memory_equal(res.stdout_data, "out\n", 4);
        assert_memory_equal(res.stderr_data, "err\n", 4);
        sandbox_exec_result_done(&res);

        /* A sandbox looked up by id, then destroyed as the user asked: auto-start allowed. */
        assert_int_equal(sandbox_client_get(client, TEST_ID, &h2, &e), 0);
        assert_string_equal(sandbox_handle_path(h2), TEST_PATH);
        assert_int_equal(sandbox_handle_destroy(h2, SANDBOX_DESTROY_EXPLICIT, &e), 0);
        assert_int_equal(fake.n_destroy, 1);
        assert_int_equal(fake.destroy_auto_start, 1);
        assert_false(sandbox_client_error_is_set(&e));

        /* By name: the handle has the id, from the path. */
        _cleanup_(sandbox_handle_freep) SandboxHandle *h3 = NULL;
        assert_int_equal(sandbox_client_get(client, "by-name", &h3, &e), 0);
        assert_string_equal(sandbox_handle_id(h3), TEST_ID);
        assert_string_equal(sandbox_handle_path(h3), TEST_PATH);
}

static void test_errors_reach_the_caller(void **state) {
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = (SandboxHandle *) 0x1;
        SandboxClientError e = SANDBOX_CLIENT_ERROR_NULL;

        assert_int_equal(sandbox_client_get(client, "nope", &h, &e), -ENXIO);
        assert_ptr_equal(h, (SandboxHandle *) 0x1);     /* untouched */
        h = NULL;
        assert_string_equal(e.name, SANDBOX_ERROR_NO_SUCH_SANDBOX);
        assert_string_equal(e.message, "No sandbox 'nope'.");
        sandbox_client_error_done(&e);
}

static void test_run_leaves_a_refused_exec_to_the_daemon(void **state) {
        SandboxClientError e = SANDBOX_CLIENT_ERROR_NULL;
        SandboxExecOptions eo = SANDBOX_EXEC_OPTIONS_INIT;
        SandboxCreateOptions co = { .set = SANDBOX_CREATE_TASKS_MAX, .tasks_max = 16 };
        char *argv[] = { (char *) "true", NULL };
        SandboxRun run;

        /* sandboxd went away mid-command: the next one stops the ephemeral sandbox, and
         * nothing here starts a new sandboxd to destroy it. */
        fake.exec_error = SD_BUS_ERROR_NO_REPLY;
        fake.destroy_error = SD_BUS_ERROR_SERVICE_UNKNOWN;
        eo.timeout_sec = 10;

        assert_int_equal(sandbox_client_run(client, NULL, &co, argv, &eo, &run, &e), -ETIMEDOUT);
        assert_string_equal(fake.template, "");
        /* Ephemeral, with the exec's timeout and the backstop as its lifetime. */
        assert_string_equal(fake.create_options, "TasksMax=16,Timeout=70,Ephemeral=yes");
        assert_string_equal(fake.exec_options, "Timeout=10");
        assert_int_equal(run.step, SANDBOX_RUN_EXEC);
        assert_string_equal(run.id, TEST_ID);
        assert_true(sandbox_client_error_has_name(&e, SD_BUS_ERROR_NO_REPLY));

        assert_int_equal(fake.n_destroy, 0);
        assert_int_equal(run.cleanup, 0);
        assert_false(sandbox_client_error_is_set(&run.cleanup_error));
        sandbox_run_done(&run);
        sandbox_client_error_done(&e);

        /* Refused (an option out of bounds): sandboxd lets the sandbox go itself. */
        fake.exec_error = SANDBOX_ERROR_INVALID_OPTION;
        assert_int_equal(sandbox_client_run(client, NULL, &co, argv, &eo, &run, &e), -EINVAL);
        assert_int_equal(run.step, SANDBOX_RUN_EXEC);
        assert_int_equal(fake.n_destroy, 0);
        sandbox_run_done(&run);
        sandbox_client_error_done(&e);
}

static void test_run_success_leaves_destroy_to_the_daemon(void **state) {
        SandboxClientError e = SANDBOX_CLIENT_ERROR_NULL;
        char *argv[] = { (char *) "true", NULL };
        SandboxRun run;

        assert_int_equal(sandbox_client_run(client, "shell", NULL, argv, NULL, &run, &e), 0);
        assert_string_equal(fake.create_options, "Timeout=360,Ephemeral=yes");
        assert_int_equal(run.step, SANDBOX_RUN_DONE);
        assert_int_equal(run.result.exit_status, 0);
        assert_int_equal(fake.n_destroy, 0);
        sandbox_run_done(&run);
}

static void test_cleanup_destroy_reports_other_errors(void **state) {
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        SandboxClientError e = SANDBOX_CLIENT_ERROR_NULL;

        assert_int_equal(sandbox_client_get(client, TEST_ID, &h, &e), 0);

        /* Gone already: fine. */
        fake.destroy_error = SANDBOX_ERROR_NO_SUCH_SANDBOX;
        assert_int_equal(sandbox_handle_destroy(h, SANDBOX_DESTROY_CLEANUP, &e), 0);
        assert_int_equal(fake.destroy_auto_start, 0);
        assert_int_equal(sandbox_handle_destroy(h, SANDBOX_DESTROY_EXPLICIT, &e), -ENXIO);
        assert_int_equal(fake.destroy_auto_start, 1);
        sandbox_client_error_done(&e);

        fake.destroy_error = SD_BUS_ERROR_ACCESS_DENIED;
        assert_int_equal(sandbox_handle_destroy(h, SANDBOX_DESTROY_CLEANUP, &e), -EACCES);
        assert_string_equal(e.name, SD_BUS_ERROR_ACCESS_DENIED);
        sandbox_client_error_done(&e);
}

static void test_metrics(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = message_new();
        SandboxMetricsInfo info = { .seen = 0xffff };

        /* What the daemon could not read is left out; unknown names and types are skipped. */
        assert_true(sd_bus_message_append(m, "a{sv}", 5,
                                          "CPUUsageNSec", "t", UINT64_C(1234567890),
                                          "MemoryCurrent", "t", UINT64_C(104857600),
                                          "Future", "s", "x",
                                          "TasksCurrent", "u", 3,
                                          "WorkBytesUsed", "t", UINT64_C(10485760)) >= 0);
        message_seal(m);
        assert_int_equal(client_read_metrics(m, &info), 0);
        assert_int_equal(info.seen, (1U << SANDBOX_METRIC_CPU_USAGE) | (1U << SANDBOX_METRIC_MEMORY_CURRENT) |
                                    (1U << SANDBOX_METRIC_WORK_BYTES_USED));
        assert_true(info.cpu_usage_nsec == UINT64_C(1234567890));
        assert_true(sandbox_metrics_value(&info, SANDBOX_METRIC_MEMORY_CURRENT) == UINT64_C(104857600));
        assert_true(info.work_bytes_used == UINT64_C(10485760));
        assert_false(SANDBOX_METRICS_HAS(&info, SANDBOX_METRIC_TASKS_CURRENT));
        assert_false(SANDBOX_METRICS_HAS(&info, SANDBOX_METRIC_TMP_BYTES_USED));
}

static void test_journal_entry_parse(void **state) {
        _cleanup_(sandbox_journal_entry_done) SandboxJournalEntry e = {};
        static const char text[] =
                "{\"timestamp\":1795543813949430,\"priority\":6,\"identifier\":\"sandboxd\","
                "\"message\":\"Sandbox a\\u0000b \\\"q\\\" \\n\"}";
        static const char bytes[] =
                "{\"timestamp\":1,\"identifier\":\"sandbox-x.scope\",\"message\":[104,255,0,10],\"truncated\":true}";

        assert_int_equal(sandbox_journal_entry_parse(text, strlen(text), &e), 0);
        assert_true(e.timestamp_usec == UINT64_C(1795543813949430));
        assert_int_equal(e.priority, 6);
        assert_string_equal(e.identifier, "sandboxd");
        assert_int_equal(e.message_size, 17);
        assert_memory_equal(e.message, "Sandbox a\0b \"q\" \n", 17);
        assert_int_equal(((char *) e.message)[17], 0);
        assert_false(e.truncated);
        sandbox_journal_entry_done(&e);

        /* Not UTF-8: byte values; no priority given. */
        assert_int_equal(sandbox_journal_entry_parse(bytes, strlen(bytes), &e), 0);
        assert_int_equal(e.priority, -1);
        assert_int_equal(e.message_size, 4);
        assert_memory_equal(e.message, "h\xff\0\n", 4);
        assert_true(e.truncated);
        sandbox_journal_entry_done(&e);

        /* What is not an entry leaves ret alone. */
        e.priority = 42;
        static const char *const bad[] = {
                "", "{", "[]", "{\"timestamp\":1,\"identifier\":\"a\"}",
                "{\"timestamp\":\"1\",\"identifier\":\"a\",\"message\":\"m\"}",
                "{\"timestamp\":1,\"identifier\":\"a\",\"message\":[256]}",
                "{\"timestamp\":1,\"identifier\":\"a\",\"message\":[\"x\"]}",
                "{\"timestamp\":1,\"priority\":8,\"identifier\":\"a\",\"message\":\"m\"}",
                "{\"timestamp\":1,\"identifier\":\"a\",\"message\":\"m\"} trailing",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(sandbox_journal_entry_parse(bad[i], strlen(bad[i]), &e), -EBADMSG);
        assert_int_equal(e.priority, 42);
        assert_null(e.identifier);
}

int main(void) {
        const struct CMUnitTest pure[] = {
                cmocka_unit_test(test_create_options_only_those_set),
                cmocka_unit_test(test_create_options_names),
                cmocka_unit_test(test_create_options_none),
                cmocka_unit_test(test_exec_options),
                cmocka_unit_test(test_exec_options_defaults_send_nothing),
                cmocka_unit_test(test_exec_result_with_output),
                cmocka_unit_test(test_wait_result_without_output),
                cmocka_unit_test(test_exec_result_bad_reply_leaves_ret),
                cmocka_unit_test(test_status),
                cmocka_unit_test(test_error_mapping),
                cmocka_unit_test(test_metrics),
                cmocka_unit_test(test_journal_entry_parse),
        };
        const struct CMUnitTest calls[] = {
                cmocka_unit_test_setup_teardown(test_create_exec_destroy, setup_fake, teardown_fake),
                cmocka_unit_test_setup_teardown(test_errors_reach_the_caller, setup_fake, teardown_fake),
                cmocka_unit_test_setup_teardown(test_run_leaves_a_refused_exec_to_the_daemon,
                                                setup_fake, teardown_fake),
                cmocka_unit_test_setup_teardown(test_run_success_leaves_destroy_to_the_daemon,
                                                setup_fake, teardown_fake),
                cmocka_unit_test_setup_teardown(test_cleanup_destroy_reports_other_errors,
                                                setup_fake, teardown_fake),
        };
        int r;

        r = cmocka_run_group_tests_name("pure", pure, setup_bus, teardown_bus);
        return r + cmocka_run_group_tests_name("calls", calls, NULL, NULL);
}
