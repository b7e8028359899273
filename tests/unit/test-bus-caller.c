/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The caller's uid, learnt without blocking: the daemon's side (bus-caller.c, bus-util.c)
 * on one end of a socketpair, a fake bus daemon on the other, both on one event loop. The
 * fake answers GetConnectionUnixUser only when the test says so; meanwhile the daemon must
 * go on serving. (A synchronous lookup would wait for an answer that this single thread
 * can never give: the test would fail.) */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "bus-caller.h"
#include "bus-util.h"
#include "fake-peer.h"
#include "macro.h"

#define TEST_PATH "/test"
#define TEST_INTERFACE "io.sandboxd.Test"
#define PENDING_MAX 8

static sd_bus *daemon_bus, *fake_bus;

/* The fake bus daemon's GetConnectionUnixUser calls, unanswered. */
static sd_bus_message *pending[PENDING_MAX];
static unsigned n_pending, n_lookups;

typedef struct Reply {
        bool done;
        uint32_t uid;
        char error[128];
} Reply;

/* ---- the fake bus daemon ---- */

static int driver_get_uid(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        assert_true(n_pending < PENDING_MAX);
        pending[n_pending++] = sd_bus_message_ref(m);
        n_lookups++;
        return 1; /* answered by answer_lookup() */
}

static const sd_bus_vtable driver_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("GetConnectionUnixUser", "s", "u", driver_get_uid, 0),
        SD_BUS_VTABLE_END
};

/* Answers the oldest lookup: with uid, or with error_name. */
static void answer_lookup(const char *expected_name, uint32_t uid, const char *error_name) {
        sd_bus_message *m;
        const char *name;

        assert_true(n_pending > 0);
        m = pending[0];
        memmove(pending, pending + 1, --n_pending * sizeof(pending[0]));
        assert_int_equal(sd_bus_message_read(m, "s", &name), 1);
        assert_string_equal(name, expected_name);
        if (error_name)
                assert_true(sd_bus_reply_method_errorf(m, error_name, "No %s.", name) >= 0);
        else
                assert_true(sd_bus_reply_method_return(m, "u", uid) >= 0);
        sd_bus_message_unref(m);
}

static int on_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        const sd_bus_error *e = sd_bus_message_get_error(m);
        Reply *r = userdata;

        r->done = true;
        if (e)
                snprintf(r->error, sizeof(r->error), "%s", e->name);
        else if (sd_bus_message_has_signature(m, "v")) /* Properties.Get */
                assert_int_equal(sd_bus_message_read(m, "v", "u", &r->uid), 1);
        else
                assert_int_equal(sd_bus_message_read(m, "u", &r->uid), 1);
        return 0;
}

/* A call from sender (a unique name the fake gives it) to the daemon. */
static void call_as(const char *sender, const char *interface, const char *member, Reply *r) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;

        *r = (Reply) {};
        assert_true(sd_bus_message_new_method_call(fake_bus, &m, NULL, TEST_PATH, interface, member) >= 0);
        assert_true(sd_bus_message_set_sender(m, sender) >= 0);
        if (streq(member, "Get"))
                assert_true(sd_bus_message_append(m, "ss", TEST_INTERFACE, "Caller") >= 0);
        assert_true(sd_bus_call_async(fake_bus, NULL, m, on_reply, r, 0) >= 0);
}

/* ---- the daemon's side ---- */

static int who_authorized(sd_bus_message *call, const SandboxCaller *caller, void *userdata, SandboxError *error) {
        return sd_bus_reply_method_return(call, "u", (uint32_t) caller->uid);
}

static int method_who(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return bus_authorize_then(m, NULL, 0, who_authorized, NULL, NULL);
}

static int method_echo(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sd_bus_reply_method_return(m, "u", UINT32_MAX);
}

/* Answered by sd-bus at once, like the sandboxes' properties: the uid must be known. */
static int property_get_caller(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        uid_t uid;
        int r;

        r = bus_caller_uid_now(sd_bus_get_current_message(bus), &uid);
        if (r < 0)
                return r;
        return sd_bus_message_append(reply, "u", (uint32_t) uid);
}

static const sd_bus_vtable test_vtable[] = {
        SD_BUS_VTABLE_START(0),
        /* (Not unprivileged, sd-bus would ask for the sender's capabilities itself.) */
        SD_BUS_METHOD("Who", NULL, "u", method_who, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Echo", NULL, "u", method_echo, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_PROPERTY("Caller", "u", property_get_caller, 0, 0),
        SD_BUS_VTABLE_END
};

static bool needs_uid(sd_bus_message *m) {
        return !streq_ptr(sd_bus_message_get_interface(m), TEST_INTERFACE);
}

static int setup(void **state) {
        fake_peer_new(&daemon_bus, &fake_bus);
        assert_true(sd_bus_add_object_vtable(fake_bus, NULL, "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                             driver_vtable, NULL) >= 0);
        assert_true(bus_caller_add_filter(daemon_bus, needs_uid) >= 0);
        assert_true(sd_bus_add_object_vtable(daemon_bus, NULL, TEST_PATH, TEST_INTERFACE, test_vtable, NULL) >= 0);
        fake_peer_start(daemon_bus, fake_bus);
        return 0;
}

static int teardown(void **state) {
        bus_authorize_cancel_all();
        bus_caller_done();
        while (n_pending > 0)
                sd_bus_message_unref(pending[--n_pending]);
        fake_peer_done(&daemon_bus, &fake_bus);
        return 0;
}

static void test_method_waits_for_uid_and_loop_serves_meanwhile(void **state) {
        Reply who, echo, again;

        call_as(":1.42", TEST_INTERFACE, "Who", &who);
        RUN_UNTIL(n_pending == 1);
        /* The lookup is out: the daemon answers others meanwhile. */
        call_as(":1.43", TEST_INTERFACE, "Echo", &echo);
        RUN_UNTIL(echo.done);
        assert_int_equal(echo.uid, UINT32_MAX);
        assert_false(who.done);

        answer_lookup(":1.42", 1000, NULL);
        RUN_UNTIL(who.done);
        assert_string_equal(who.error, "");
        assert_int_equal(who.uid, 1000);

        /* Known now: no second question. */
        call_as(":1.42", TEST_INTERFACE, "Who", &again);
        RUN_UNTIL(again.done);
        assert_int_equal(again.uid, 1000);
        assert_int_equal(n_lookups, 1);
}

static void test_property_call_held_until_uid_known(void **state) {
        Reply get, echo, again;

        call_as(":1.44", "org.freedesktop.DBus.Properties", "Get", &get);
        RUN_UNTIL(n_pending == 1);
        call_as(":1.45", TEST_INTERFACE, "Echo", &echo);
        RUN_UNTIL(echo.done);
        run_idle();
        assert_false(get.done);

        answer_lookup(":1.44", 2000, NULL);
        RUN_UNTIL(get.done);
        assert_string_equal(get.error, "");
        assert_int_equal(get.uid, 2000);

        call_as(":1.44", "org.freedesktop.DBus.Properties", "Get", &again);
        RUN_UNTIL(again.done);
        assert_int_equal(again.uid, 2000);
        assert_int_equal(n_pending, 0);
}

static void test_held_calls_keep_their_own_uid(void **state) {
        Reply a, b;

        /* Two new callers at once, answered in order: each call gets its caller's uid. */
        call_as(":1.50", "org.freedesktop.DBus.Properties", "Get", &a);
        call_as(":1.51", "org.freedesktop.DBus.Properties", "Get", &b);
        RUN_UNTIL(n_pending == 2);
        answer_lookup(":1.50", 3000, NULL);
        answer_lookup(":1.51", 3001, NULL);
        RUN_UNTIL(a.done && b.done);
        assert_int_equal(a.uid, 3000);
        assert_int_equal(b.uid, 3001);
}

static void test_caller_gone(void **state) {
        Reply who, get;

        call_as(":1.60", TEST_INTERFACE, "Who", &who);
        call_as(":1.61", "org.freedesktop.DBus.Properties", "Get", &get);
        RUN_UNTIL(n_pending == 2);
        answer_lookup(":1.60", 0, SD_BUS_ERROR_NAME_HAS_NO_OWNER);
        answer_lookup(":1.61", 0, SD_BUS_ERROR_NAME_HAS_NO_OWNER);
        RUN_UNTIL(who.done && get.done);
        assert_string_equal(who.error, SD_BUS_ERROR_NAME_HAS_NO_OWNER);
        assert_string_equal(get.error, SD_BUS_ERROR_NAME_HAS_NO_OWNER);
}

static void test_exit_with_lookups_in_flight(void **state) {
        Reply who, get;

        call_as(":1.70", TEST_INTERFACE, "Who", &who);
        call_as(":1.71", "org.freedesktop.DBus.Properties", "Get", &get);
        RUN_UNTIL(n_pending == 2);
        /* What exit does: both are let go of (ASan: nothing leaks), and late answers are
         * dropped. */
        bus_authorize_cancel_all();
        bus_caller_done();
        answer_lookup(":1.70", 4000, NULL);
        answer_lookup(":1.71", 4001, NULL);
        run_idle();
        assert_false(who.done);
        assert_false(get.done);
}

/* The core's errors as D-Bus errors: the documented names, the messages as they are, and
 * an errno with its standard name (file errors: sandboxd-api(7)). */
static void test_error_names(void **state) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        sd_bus_error b = SD_BUS_ERROR_NULL;

        assert_int_equal(sandbox_error_set(&e, SANDBOX_ERR_NO_SUCH_SANDBOX, "No sandbox '%s'.", "x"), -ENXIO);
        /* The first error stands. */
        assert_int_equal(sandbox_error_set(&e, SANDBOX_ERR_BUSY, "later"), -EBUSY);
        assert_int_equal(bus_error_from_sandbox(&b, &e), -ENXIO);
        assert_string_equal(b.name, SANDBOX_ERROR_NO_SUCH_SANDBOX);
        assert_string_equal(b.message, "No sandbox 'x'.");
        assert_string_equal(sandbox_error_code_to_name(e.code), "NoSuchSandbox");
        sd_bus_error_free(&b);
        sandbox_error_done(&e);

        assert_int_equal(sandbox_error_set_errno(&e, ENOENT, "/work/%s: %m", "gone"), -ENOENT);
        assert_int_equal(bus_error_from_sandbox(&b, &e), -ENOENT);
        assert_string_equal(b.name, SD_BUS_ERROR_FILE_NOT_FOUND);
        assert_string_equal(b.message, "/work/gone: No such file or directory");
        sd_bus_error_free(&b);
        sandbox_error_done(&e);

        sandbox_error_set(&e, SANDBOX_ERR_ACCESS_DENIED, "Not authorized for %s.", "it");
        assert_int_equal(bus_error_from_sandbox(&b, &e), -EACCES);
        assert_string_equal(b.name, SD_BUS_ERROR_ACCESS_DENIED);
        sd_bus_error_free(&b);

        /* Every code has a name, and its D-Bus name stands for the same errno. */
        for (SandboxErrorCode c = SANDBOX_ERR_NONE + 1; c < SANDBOX_ERR_ERRNO; c++) {
                assert_non_null(sandbox_error_code_to_name(c));
                assert_int_equal(sandbox_error_code_from_name(sandbox_error_code_to_name(c)), c);
        }
        assert_true(sd_bus_error_add_map(bus_sandbox_error_map) >= 0);
        for (size_t i = 0; bus_sandbox_error_map[i].name; i++) {
                sd_bus_error n = { .name = bus_sandbox_error_map[i].name };
                assert_int_equal(sd_bus_error_get_errno(&n), bus_sandbox_error_map[i].code);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_error_names),
                cmocka_unit_test_setup_teardown(test_method_waits_for_uid_and_loop_serves_meanwhile, setup, teardown),
                cmocka_unit_test_setup_teardown(test_property_call_held_until_uid_known, setup, teardown),
                cmocka_unit_test_setup_teardown(test_held_calls_keep_their_own_uid, setup, teardown),
                cmocka_unit_test_setup_teardown(test_caller_gone, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exit_with_lookups_in_flight, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
