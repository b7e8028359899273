/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Who may do what (access.c), who is calling (caller.c) and polkit's question for both kinds
 * of caller (polkit.c): the core's side on one end of a socketpair, a fake polkit on the
 * other, both on one event loop. The fake records each CheckAuthorization's subject and
 * flags and answers as the test says. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <cmocka.h>

#include <systemd/sd-event.h>

#include "access.h"
#include "caller.h"
#include "macro.h"
#include "polkit.h"
#include "time-util.h"

static sd_event *event;
static sd_bus *core_bus, *fake_bus;

/* What the fake polkit saw and how it answers. */
static struct {
        unsigned n_checks;
        char kind[64];
        char name[64];
        uint32_t pid;
        uint64_t start_time;
        int32_t uid;
        bool have_uid;
        char action[128];
        uint32_t flags;
        /* The answer: */
        bool authorized, challenge;
        const char *error;  /* a D-Bus error name instead */
} fake;

/* What the core's callback got. */
typedef struct Answer {
        bool done;
        int authorized;
        SandboxErrorCode code;
        char message[256];
} Answer;

#define RUN_UNTIL(cond)                                                                 \
        do {                                                                            \
                uint64_t _deadline = now_usec(CLOCK_MONOTONIC) + 10 * 1000000ULL;       \
                while (!(cond)) {                                                       \
                        assert_true(now_usec(CLOCK_MONOTONIC) < _deadline);             \
                        assert_true(sd_event_run(event, 100 * 1000) >= 0);              \
                }                                                                       \
        } while (0)

/* ---- the fake polkit ---- */

static int read_subject(sd_bus_message *m) {
        const char *kind, *key;
        int r;

        r = sd_bus_message_enter_container(m, 'r', "sa{sv}");
        if (r < 0)
                return r;
        r = sd_bus_message_read(m, "s", &kind);
        if (r < 0)
                return r;
        snprintf(fake.kind, sizeof(fake.kind), "%s", kind);
        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                r = sd_bus_message_read(m, "s", &key);
                if (r < 0)
                        return r;
                if (streq(key, "name")) {
                        const char *n;
                        r = sd_bus_message_read(m, "v", "s", &n);
                        if (r >= 0)
                                snprintf(fake.name, sizeof(fake.name), "%s", n);
                } else if (streq(key, "pid"))
                        r = sd_bus_message_read(m, "v", "u", &fake.pid);
                else if (streq(key, "start-time"))
                        r = sd_bus_message_read(m, "v", "t", &fake.start_time);
                else if (streq(key, "uid")) {
                        r = sd_bus_message_read(m, "v", "i", &fake.uid);
                        fake.have_uid = r >= 0;
                } else
                        r = -EBADMSG;
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

static int fake_check(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *action, *cancel_id;
        int r;

        fake.n_checks++;
        r = read_subject(m);
        assert_true(r >= 0);
        assert_true(sd_bus_message_read(m, "s", &action) >= 0);
        snprintf(fake.action, sizeof(fake.action), "%s", action);
        assert_true(sd_bus_message_skip(m, "a{ss}") >= 0);
        assert_true(sd_bus_message_read(m, "us", &fake.flags, &cancel_id) >= 0);
        if (fake.error)
                return sd_bus_error_set(error, fake.error, "Polkit says no.");
        return sd_bus_reply_method_return(m, "(bba{ss})", fake.authorized, fake.challenge, 0);
}

static const sd_bus_vtable authority_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("CheckAuthorization", "(sa{sv})sa{ss}us", "(bba{ss})", fake_check, 0),
        SD_BUS_VTABLE_END
};

/* ---- the core's side ---- */

static void on_answer(int authorized, const SandboxError *error, void *userdata) {
        Answer *a = userdata;

        a->done = true;
        a->authorized = authorized;
        a->code = error ? error->code : SANDBOX_ERR_NONE;
        snprintf(a->message, sizeof(a->message), "%s", error ? sandbox_error_message(error) : "");
}

static int setup(void **state) {
        sd_id128_t id = SD_ID128_MAKE(1a,2b,3c,4d,5e,6f,70,81,92,a3,b4,c5,d6,e7,f8,09);
        int pair[2];

        fake = (typeof(fake)) {};
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair), 0);
        assert_true(sd_event_new(&event) >= 0);

        assert_true(sd_bus_new(&fake_bus) >= 0);
        assert_true(sd_bus_set_fd(fake_bus, pair[1], pair[1]) >= 0);
        assert_true(sd_bus_set_server(fake_bus, true, id) >= 0);
        assert_true(sd_bus_add_object_vtable(fake_bus, NULL, "/org/freedesktop/PolicyKit1/Authority",
                                             "org.freedesktop.PolicyKit1.Authority", authority_vtable, NULL) >= 0);
        assert_true(sd_bus_start(fake_bus) >= 0);
        assert_true(sd_bus_attach_event(fake_bus, event, 0) >= 0);

        assert_true(sd_bus_new(&core_bus) >= 0);
        assert_true(sd_bus_set_fd(core_bus, pair[0], pair[0]) >= 0);
        assert_true(sd_bus_start(core_bus) >= 0);
        assert_true(sd_bus_attach_event(core_bus, event, 0) >= 0);
        RUN_UNTIL(sd_bus_is_ready(core_bus) > 0 && sd_bus_is_ready(fake_bus) > 0);
        return 0;
}

static int teardown(void **state) {
        core_bus = sd_bus_flush_close_unref(core_bus);
        fake_bus = sd_bus_flush_close_unref(fake_bus);
        event = sd_event_unref(event);
        return 0;
}

/* ---- the rules ---- */

static void test_actions_and_visibility(void **state) {
        assert_null(sandbox_access_action(SANDBOX_OP_EXEC, 0, 1000));          /* root needs nothing */
        assert_string_equal(sandbox_access_action(SANDBOX_OP_CREATE, 1000, 0), SANDBOX_ACTION_CREATE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_EXEC, 1000, 1000), SANDBOX_ACTION_EXEC);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_EXEC, 1000, 1001), SANDBOX_ACTION_MANAGE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_DESTROY, 1000, 1000), SANDBOX_ACTION_CREATE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_DESTROY, 1000, 1001), SANDBOX_ACTION_MANAGE);
        assert_null(sandbox_access_action(SANDBOX_OP_INSPECT, 1000, 1000));
        assert_string_equal(sandbox_access_action(SANDBOX_OP_INSPECT, 1000, 1001), SANDBOX_ACTION_MANAGE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_LIST_ALL, 1000, 0), SANDBOX_ACTION_MANAGE);

        assert_true(sandbox_access_visible(0, false, 1000));
        assert_true(sandbox_access_visible(1000, false, 1000));
        assert_false(sandbox_access_visible(1001, false, 1000));
        assert_true(sandbox_access_visible(1001, true, 1000));
}

/* ---- who is calling ---- */

static void test_caller_from_socket(void **state) {
        SandboxCaller c = {};
        uint64_t start, again;
        char comm[16] = {};
        int pair[2];

        assert_int_equal(process_get_start_time(getpid(), &start), 0);
        assert_true(start > 0);
        /* A command with spaces and parentheses cannot shift the fields. */
        assert_int_equal(prctl(PR_GET_NAME, comm), 0);
        assert_int_equal(prctl(PR_SET_NAME, "a) b (c) d"), 0);
        assert_int_equal(process_get_start_time(getpid(), &again), 0);
        assert_int_equal(prctl(PR_SET_NAME, comm), 0);
        assert_int_equal(again, start);
        assert_int_equal(process_get_start_time(0, &again), -EINVAL);

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
        assert_int_equal(sandbox_caller_from_socket(pair[0], &c), 0);
        assert_int_equal(c.kind, SANDBOX_CALLER_UNIX_PROCESS);
        assert_int_equal(c.pid, getpid());
        assert_int_equal(c.uid, getuid());
        assert_int_equal(c.start_time, start);
        close(pair[0]);
        close(pair[1]);
}

/* ---- polkit, for both kinds of subject ---- */

static void test_bus_name_subject(void **state) {
        SandboxCaller c = { .kind = SANDBOX_CALLER_BUS_NAME, .uid = 1000, .bus_name = ":1.42", .interactive = true };
        Answer a = {};

        fake.authorized = true;
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_EXEC, 1000, 0, on_answer, &a, NULL), 0);
        assert_false(a.done); /* never from within the call */
        RUN_UNTIL(a.done);
        assert_int_equal(a.authorized, 1);
        assert_string_equal(fake.kind, "system-bus-name");
        assert_string_equal(fake.name, ":1.42");
        assert_string_equal(fake.action, SANDBOX_ACTION_EXEC);
        assert_int_equal(fake.flags, 1); /* AllowUserInteraction */
}

static void test_unix_process_subject(void **state) {
        SandboxCaller c = {};
        Answer a = {};
        int pair[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
        assert_int_equal(sandbox_caller_from_socket(pair[1], &c), 0);
        c.uid = 1000; /* as a peer of another uid would be */
        fake.challenge = true;
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_CREATE, 0, 0, on_answer, &a, NULL), 0);
        RUN_UNTIL(a.done);
        assert_string_equal(fake.kind, "unix-process");
        assert_int_equal(fake.pid, (uint32_t) getpid());
        assert_int_equal(fake.start_time, c.start_time);
        assert_true(fake.have_uid);
        assert_int_equal(fake.uid, 1000);
        assert_int_equal(fake.flags, 0); /* the caller did not allow interaction */
        /* Authentication would be needed: refused as such. */
        assert_int_equal(a.authorized, -EACCES);
        assert_int_equal(a.code, SANDBOX_ERR_INTERACTIVE_AUTHORIZATION_REQUIRED);
        assert_string_equal(a.message, "Authentication is required for " SANDBOX_ACTION_CREATE ".");
        close(pair[0]);
        close(pair[1]);
}

static void test_refusals(void **state) {
        SandboxCaller c = { .kind = SANDBOX_CALLER_BUS_NAME, .uid = 1000, .bus_name = ":1.43", .interactive = true };
        Answer a = {}, b = {}, d = {};

        /* Root: nothing to ask. */
        c.uid = 0;
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_DESTROY, 1000, 0, on_answer, &a, NULL), 1);
        assert_false(a.done);
        assert_int_equal(fake.n_checks, 0);
        c.uid = 1000;

        /* No. */
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_EXEC, 1001, 0, on_answer, &a, NULL), 0);
        RUN_UNTIL(a.done);
        assert_int_equal(a.authorized, -EACCES);
        assert_int_equal(a.code, SANDBOX_ERR_ACCESS_DENIED);
        assert_string_equal(fake.action, SANDBOX_ACTION_MANAGE);

        /* Optional: no is no refusal, and nobody is asked for a password. */
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_LIST_ALL, 0, SANDBOX_AUTHORIZE_OPTIONAL,
                                           on_answer, &b, NULL), 0);
        RUN_UNTIL(b.done);
        assert_int_equal(b.authorized, 0);
        assert_int_equal(b.code, SANDBOX_ERR_NONE);
        assert_int_equal(fake.flags, 0);

        /* polkit not running. */
        fake.error = SD_BUS_ERROR_SERVICE_UNKNOWN;
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_CREATE, 0, 0, on_answer, &d, NULL), 0);
        RUN_UNTIL(d.done);
        assert_int_equal(d.authorized, -EACCES);
        assert_int_equal(d.code, SANDBOX_ERR_ACCESS_DENIED);
        assert_string_equal(d.message, "polkit is not running, so only root may do this (" SANDBOX_ACTION_CREATE ").");
}

static void test_cancel(void **state) {
        SandboxCaller c = { .kind = SANDBOX_CALLER_BUS_NAME, .uid = 1000, .bus_name = ":1.44" };
        sd_bus_slot *slot = NULL;
        Answer a = {};

        fake.authorized = true;
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_CREATE, 0, 0, on_answer, &a, &slot), 0);
        assert_non_null(slot);
        sd_bus_slot_unref(slot); /* the caller went away: no callback */
        RUN_UNTIL(fake.n_checks == 1);
        for (int i = 0; i < 20; i++)
                assert_true(sd_event_run(event, 10 * 1000) >= 0);
        assert_false(a.done);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_actions_and_visibility),
                cmocka_unit_test(test_caller_from_socket),
                cmocka_unit_test_setup_teardown(test_bus_name_subject, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unix_process_subject, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
