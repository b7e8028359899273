/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* polkit's CheckAuthorization, asked without waiting (polkit.c), for a bus name or a
 * process, against a fake polkit (fake-peer.h). The fake holds each query until the test answers it: authorized, not,
 * a challenge, an error, or never (the caller goes first). Asserted: what was asked, and
 * that the answer arrives once, never from within the call, and not at all once the
 * query's owner let go of it. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "fake-peer.h"
#include "macro.h"
#include "polkit.h"

#define POLKIT_DEST "org.freedesktop.PolicyKit1"
#define POLKIT_PATH "/org/freedesktop/PolicyKit1/Authority"
#define POLKIT_INTERFACE "org.freedesktop.PolicyKit1.Authority"
#define ACTION "io.sandboxd.create"
#define CALLER ":1.42"
#define QUERIES_MAX 8

static sd_bus *daemon_bus, *fake_bus;

/* Queries to the fake, unanswered, oldest first. */
static sd_bus_message *queries[QUERIES_MAX];
static unsigned n_queries;

/* ---- the answer, as the daemon's side saw it ---- */

typedef struct Answer {
        unsigned n;             /* how often the callback ran */
        int authorized;         /* > 0 yes; otherwise error says why not */
        char error_name[128];
        char error_message[256];
} Answer;

/* The D-Bus name a front end gives each of the core's error codes (sandbox-api.h). */
static const char *error_bus_name(SandboxErrorCode code) {
        static const char * const names[_SANDBOX_ERR_MAX] = {
#define BUS_NAME_ENTRY(code, name, bus_name, errno_value, http) [SANDBOX_ERR_##code] = bus_name,
                SANDBOX_ERRORS(BUS_NAME_ENTRY)
#undef BUS_NAME_ENTRY
        };
        return code >= 0 && code < _SANDBOX_ERR_MAX ? names[code] : NULL;
}

/* The one place that knows polkit.h's callback and entry point; the tests below see only
 * Answer. */
static void on_answer(int authorized, const SandboxError *error, void *userdata) {
        Answer *a = userdata;

        a->n++;
        a->authorized = authorized;
        if (error) {
                snprintf(a->error_name, sizeof(a->error_name), "%s", strempty(error_bus_name(error->code)));
                snprintf(a->error_message, sizeof(a->error_message), "%s", strempty(error->message));
        }
}

static void ask(bool interactive, Answer *a, sd_bus_slot **ret_slot) {
        SandboxCaller caller = { .kind = SANDBOX_CALLER_BUS_NAME, .uid = 1000, .bus_name = CALLER };

        *a = (Answer) {};
        assert_true(polkit_check(daemon_bus, &caller, ACTION, interactive ? POLKIT_CHECK_INTERACTIVE : 0,
                                 on_answer, a, ret_slot) >= 0);
        /* Never from within the call. */
        assert_int_equal(a->n, 0);
}

static void assert_authorized(const Answer *a) {
        assert_int_equal(a->n, 1);
        assert_true(a->authorized > 0);
        assert_string_equal(a->error_name, "");
}

/* Refused, with a D-Bus error the front end can pass on, and a message containing what. */
static void assert_refused(const Answer *a, const char *error_name, const char *what) {
        assert_int_equal(a->n, 1);
        assert_true(a->authorized <= 0);
        assert_string_equal(a->error_name, error_name);
        if (!strstr(a->error_message, what))
                fail_msg("error message \"%s\" does not say \"%s\"", a->error_message, what);
}

/* ---- the fake polkit ---- */

static int fake_filter(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        if (!sd_bus_message_is_method_call(m, NULL, NULL))
                return 0;
        assert_true(n_queries < QUERIES_MAX);
        queries[n_queries++] = sd_bus_message_ref(m);
        return 1;
}

/* The oldest query; checks it asks about CALLER's bus name and ACTION, with flags. */
static sd_bus_message *take_query(uint32_t expected_flags) {
        const char *kind, *key, *name, *action, *cancel_id;
        sd_bus_message *m;
        uint32_t flags;

        RUN_UNTIL(n_queries > 0);
        m = queries[0];
        memmove(queries, queries + 1, --n_queries * sizeof(queries[0]));

        assert_string_equal(sd_bus_message_get_destination(m), POLKIT_DEST);
        assert_string_equal(sd_bus_message_get_path(m), POLKIT_PATH);
        assert_true(sd_bus_message_is_method_call(m, POLKIT_INTERFACE, "CheckAuthorization"));
        assert_true(sd_bus_message_has_signature(m, "(sa{sv})sa{ss}us"));

        /* Subject: system-bus-name { name: CALLER }: polkit looks the caller up itself, so
         * nothing the caller claims is trusted. */
        assert_int_equal(sd_bus_message_enter_container(m, 'r', "sa{sv}"), 1);
        assert_int_equal(sd_bus_message_read(m, "s", &kind), 1);
        assert_string_equal(kind, "system-bus-name");
        assert_int_equal(sd_bus_message_enter_container(m, 'a', "{sv}"), 1);
        assert_int_equal(sd_bus_message_read(m, "{sv}", &key, "s", &name), 1);
        assert_string_equal(key, "name");
        assert_string_equal(name, CALLER);
        assert_int_equal(sd_bus_message_exit_container(m), 1);
        assert_int_equal(sd_bus_message_exit_container(m), 1);

        assert_int_equal(sd_bus_message_read(m, "s", &action), 1);
        assert_string_equal(action, ACTION);
        assert_int_equal(sd_bus_message_enter_container(m, 'a', "{ss}"), 1);
        assert_int_equal(sd_bus_message_enter_container(m, 'e', "ss"), 0);   /* no details */
        assert_int_equal(sd_bus_message_exit_container(m), 1);
        assert_int_equal(sd_bus_message_read(m, "us", &flags, &cancel_id), 1);
        assert_int_equal(flags, expected_flags);
        assert_string_equal(cancel_id, "");
        return m;
}

/* The oldest query, for a socket peer: subject unix-process { pid, start-time, uid } (what
 * every polkit reads; pid and start time name the process even if the pid is reused). */
static sd_bus_message *take_process_query(uint32_t *ret_pid, uint64_t *ret_start_time, int32_t *ret_uid) {
        const char *kind, *key;
        sd_bus_message *m;
        unsigned seen = 0;
        int r;

        RUN_UNTIL(n_queries > 0);
        m = queries[0];
        memmove(queries, queries + 1, --n_queries * sizeof(queries[0]));

        assert_int_equal(sd_bus_message_enter_container(m, 'r', "sa{sv}"), 1);
        assert_int_equal(sd_bus_message_read(m, "s", &kind), 1);
        assert_string_equal(kind, "unix-process");
        assert_int_equal(sd_bus_message_enter_container(m, 'a', "{sv}"), 1);
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                assert_int_equal(sd_bus_message_read(m, "s", &key), 1);
                if (streq(key, "pid"))
                        assert_int_equal(sd_bus_message_read(m, "v", "u", ret_pid), 1);
                else if (streq(key, "start-time"))
                        assert_int_equal(sd_bus_message_read(m, "v", "t", ret_start_time), 1);
                else if (streq(key, "uid"))
                        assert_int_equal(sd_bus_message_read(m, "v", "i", ret_uid), 1);
                else
                        fail_msg("unexpected subject key %s", key);
                seen++;
                assert_int_equal(sd_bus_message_exit_container(m), 1);
        }
        assert_int_equal(r, 0);
        assert_int_equal(seen, 3);
        assert_int_equal(sd_bus_message_exit_container(m), 1);
        assert_int_equal(sd_bus_message_exit_container(m), 1);
        return m;
}

/* polkit's AuthorizationResult: (is_authorized, is_challenge, details). */
static void reply_result(sd_bus_message *m, bool authorized, bool challenge) {
        assert_true(sd_bus_reply_method_return(m, "(bba{ss})", authorized, challenge, 0) >= 0);
}

static int setup(void **state) {
        n_queries = 0;
        fake_peer_new(&daemon_bus, &fake_bus);
        assert_true(sd_bus_add_filter(fake_bus, NULL, fake_filter, NULL) >= 0);
        fake_peer_start(daemon_bus, fake_bus);
        return 0;
}

static int teardown(void **state) {
        while (n_queries > 0)
                sd_bus_message_unref(queries[--n_queries]);
        fake_peer_done(&daemon_bus, &fake_bus);
        return 0;
}

/* ---- tests ---- */

static void test_authorized(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        Answer a;

        ask(false, &a, NULL);
        m = take_query(0);
        /* polkit may take its time (a human typing a password): nothing until it answers. */
        run_idle();
        assert_int_equal(a.n, 0);
        reply_result(m, true, false);
        RUN_UNTIL(a.n > 0);
        assert_authorized(&a);
        run_idle();
        assert_int_equal(a.n, 1);
}

static void test_interactive_flag(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        Answer a;

        ask(true, &a, NULL);
        m = take_query(1);   /* AllowUserInteraction */
        reply_result(m, true, false);
        RUN_UNTIL(a.n > 0);
        assert_authorized(&a);
}

static void test_not_authorized(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        Answer a;

        ask(false, &a, NULL);
        m = take_query(0);
        reply_result(m, false, false);
        RUN_UNTIL(a.n > 0);
        assert_refused(&a, SD_BUS_ERROR_ACCESS_DENIED, ACTION);
}

static void test_challenge(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        Answer a;

        /* Not interactive, but a password would do: the caller is told it could retry
         * with interaction allowed. */
        ask(false, &a, NULL);
        m = take_query(0);
        reply_result(m, false, true);
        RUN_UNTIL(a.n > 0);
        assert_refused(&a, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED, ACTION);
}

static void test_error_reply(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        Answer a;

        ask(false, &a, NULL);
        m = take_query(0);
        assert_true(sd_bus_reply_method_errorf(m, "org.freedesktop.PolicyKit1.Error.Failed",
                                               "Action " ACTION " is not registered") >= 0);
        RUN_UNTIL(a.n > 0);
        /* Refused, never allowed, and polkit's reason passed on. */
        assert_true(a.authorized < 0);
        assert_refused(&a, SD_BUS_ERROR_ACCESS_DENIED, "is not registered");
}

static void test_polkit_not_running(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        Answer a;

        ask(false, &a, NULL);
        m = take_query(0);
        /* What the bus daemon answers for a service nobody provides. */
        assert_true(sd_bus_reply_method_errorf(m, SD_BUS_ERROR_SERVICE_UNKNOWN,
                                               "The name " POLKIT_DEST " was not provided by any .service files") >= 0);
        RUN_UNTIL(a.n > 0);
        assert_true(a.authorized < 0);
        assert_refused(&a, SD_BUS_ERROR_ACCESS_DENIED, "polkit is not running");
}

static void test_unreadable_reply(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        Answer a;

        ask(false, &a, NULL);
        m = take_query(0);
        /* A yes in the wrong shape is no yes. */
        assert_true(sd_bus_reply_method_return(m, "b", true) >= 0);
        RUN_UNTIL(a.n > 0);
        assert_true(a.authorized < 0);
        assert_refused(&a, SD_BUS_ERROR_ACCESS_DENIED, "cannot read");
}

/* The caller goes away while polkit thinks: its front end lets go of the query. */
static void test_caller_gone_while_in_flight(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m1 = NULL, *m2 = NULL;
        sd_bus_slot *slot;
        Answer gone, other;

        ask(false, &gone, &slot);
        ask(false, &other, NULL);
        m1 = take_query(0);
        m2 = take_query(0);
        sd_bus_slot_unref(slot);   /* no callback, the query freed (ASan) */
        reply_result(m1, true, false);
        reply_result(m2, false, false);
        RUN_UNTIL(other.n > 0);
        run_idle();
        assert_int_equal(gone.n, 0);
        /* The other query is its own. */
        assert_refused(&other, SD_BUS_ERROR_ACCESS_DENIED, ACTION);
}

/* The bus goes with queries in flight: each hears of it once, as a refusal. */
static void test_connection_dropped(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m1 = NULL, *m2 = NULL;
        _cleanup_(sd_bus_slot_unrefp) sd_bus_slot *slot = NULL;
        Answer floating, owned;

        ask(false, &floating, NULL);
        ask(true, &owned, &slot);
        m1 = take_query(0);
        m2 = take_query(1);
        sd_bus_close(fake_bus);
        RUN_UNTIL(floating.n > 0 && owned.n > 0);
        assert_true(floating.authorized < 0);
        assert_refused(&floating, SD_BUS_ERROR_ACCESS_DENIED, ACTION);
        assert_refused(&owned, SD_BUS_ERROR_ACCESS_DENIED, ACTION);
        run_idle();
        assert_int_equal(floating.n, 1);
        assert_int_equal(owned.n, 1);
}

/* A socket peer (varlink's) is asked about as a process. */
static void test_unix_process_subject(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        SandboxCaller caller = {};
        uint32_t pid = 0;
        uint64_t start_time = 0;
        int32_t uid = -1;
        int pair[2];
        Answer a = {};

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
        assert_int_equal(sandbox_caller_from_socket(pair[1], &caller), 0);
        close(pair[0]);
        close(pair[1]);
        caller.uid = 1000; /* as a peer of another uid would be */
        assert_true(polkit_check(daemon_bus, &caller, ACTION, POLKIT_CHECK_INTERACTIVE, on_answer, &a, NULL) >= 0);
        m = take_process_query(&pid, &start_time, &uid);
        assert_int_equal(pid, (uint32_t) getpid());
        assert_int_equal(start_time, caller.start_time);
        assert_true(start_time > 0);
        assert_int_equal(uid, 1000);
        reply_result(m, true, false);
        RUN_UNTIL(a.n > 0);
        assert_authorized(&a);
}

/* Optional (ListSandboxes without "manage"): a no, or no polkit, is no refusal. */
static void test_optional(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m1 = NULL, *m2 = NULL;
        SandboxCaller caller = { .kind = SANDBOX_CALLER_BUS_NAME, .uid = 1000, .bus_name = CALLER };
        Answer no = {}, gone = {};

        assert_true(polkit_check(daemon_bus, &caller, ACTION, POLKIT_CHECK_OPTIONAL, on_answer, &no, NULL) >= 0);
        assert_true(polkit_check(daemon_bus, &caller, ACTION, POLKIT_CHECK_OPTIONAL, on_answer, &gone, NULL) >= 0);
        m1 = take_query(0);
        m2 = take_query(0);
        reply_result(m1, false, true);
        assert_true(sd_bus_reply_method_errorf(m2, SD_BUS_ERROR_SERVICE_UNKNOWN, "No polkit.") >= 0);
        RUN_UNTIL(no.n > 0 && gone.n > 0);
        assert_int_equal(no.authorized, 0);
        assert_string_equal(no.error_name, "");
        assert_int_equal(gone.authorized, 0);
        assert_string_equal(gone.error_name, "");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_authorized, setup, teardown),
                cmocka_unit_test_setup_teardown(test_interactive_flag, setup, teardown),
                cmocka_unit_test_setup_teardown(test_not_authorized, setup, teardown),
                cmocka_unit_test_setup_teardown(test_challenge, setup, teardown),
                cmocka_unit_test_setup_teardown(test_error_reply, setup, teardown),
                cmocka_unit_test_setup_teardown(test_polkit_not_running, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unreadable_reply, setup, teardown),
                cmocka_unit_test_setup_teardown(test_caller_gone_while_in_flight, setup, teardown),
                cmocka_unit_test_setup_teardown(test_connection_dropped, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unix_process_subject, setup, teardown),
                cmocka_unit_test_setup_teardown(test_optional, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
