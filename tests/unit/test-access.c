/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Who may do what and who sees what (access.c), who is calling (caller.c), and
 * sandbox_authorize(): which polkit action it asks of a fake polkit (fake-peer.h), with
 * interaction or not, or that it asks nothing. polkit's question itself: test-polkit. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <cmocka.h>

#include "access.h"
#include "caller.h"
#include "fake-peer.h"
#include "macro.h"

static sd_bus *core_bus, *fake_bus;

/* What the fake polkit was asked last, and how often; it says yes to everything but
 * "manage". */
static struct {
        unsigned n;
        char action[128];
        uint32_t flags;
} asked;

static int fake_check(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *action, *cancel_id;

        asked.n++;
        assert_true(sd_bus_message_skip(m, "(sa{sv})") >= 0);
        assert_true(sd_bus_message_read(m, "s", &action) >= 0);
        snprintf(asked.action, sizeof(asked.action), "%s", action);
        assert_true(sd_bus_message_skip(m, "a{ss}") >= 0);
        assert_true(sd_bus_message_read(m, "us", &asked.flags, &cancel_id) >= 0);
        return sd_bus_reply_method_return(m, "(bba{ss})", !streq(action, SANDBOX_ACTION_MANAGE), false, 0);
}

static const sd_bus_vtable authority_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("CheckAuthorization", "(sa{sv})sa{ss}us", "(bba{ss})", fake_check, 0),
        SD_BUS_VTABLE_END
};

typedef struct Answer {
        unsigned n;
        int authorized;
        SandboxErrorCode code;
} Answer;

static void on_answer(int authorized, const SandboxError *error, void *userdata) {
        Answer *a = userdata;

        a->n++;
        a->authorized = authorized;
        a->code = error ? error->code : SANDBOX_ERR_NONE;
}

static int setup(void **state) {
        asked = (typeof(asked)) {};
        fake_peer_new(&core_bus, &fake_bus);
        assert_true(sd_bus_add_object_vtable(fake_bus, NULL, "/org/freedesktop/PolicyKit1/Authority",
                                             "org.freedesktop.PolicyKit1.Authority", authority_vtable, NULL) >= 0);
        fake_peer_start(core_bus, fake_bus);
        return 0;
}

static int teardown(void **state) {
        fake_peer_done(&core_bus, &fake_bus);
        return 0;
}

static void test_actions_and_visibility(void **state) {
        assert_null(sandbox_access_action(SANDBOX_OP_EXEC, 0, 1000, NULL));          /* root needs nothing */
        assert_null(sandbox_access_action(SANDBOX_OP_CREATE, 0, 0, "a"));
        assert_string_equal(sandbox_access_action(SANDBOX_OP_CREATE, 1000, 0, NULL), SANDBOX_ACTION_CREATE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_CREATE, 1000, 0, ""), SANDBOX_ACTION_CREATE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_EXEC, 1000, 1000, NULL), SANDBOX_ACTION_EXEC);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_EXEC, 1000, 1001, NULL), SANDBOX_ACTION_MANAGE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_DESTROY, 1000, 1000, NULL), SANDBOX_ACTION_CREATE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_DESTROY, 1000, 1001, NULL), SANDBOX_ACTION_MANAGE);
        assert_null(sandbox_access_action(SANDBOX_OP_INSPECT, 1000, 1000, NULL));
        assert_string_equal(sandbox_access_action(SANDBOX_OP_INSPECT, 1000, 1001, NULL), SANDBOX_ACTION_MANAGE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_LIST_ALL, 1000, 0, NULL), SANDBOX_ACTION_MANAGE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_TEMPLATES, 1000, 1000, NULL), SANDBOX_ACTION_MANAGE);
        assert_null(sandbox_access_action(SANDBOX_OP_TEMPLATES, 0, 0, NULL));

        /* A sandbox for a tenant: what one's own needs, "delegate" does; another's stays
         * "manage"; looking at one's own needs nothing. */
        assert_string_equal(sandbox_access_action(SANDBOX_OP_CREATE, 1000, 0, "a"), SANDBOX_ACTION_DELEGATE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_EXEC, 1000, 1000, "a"), SANDBOX_ACTION_DELEGATE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_DESTROY, 1000, 1000, "a"), SANDBOX_ACTION_DELEGATE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_EXEC, 1000, 1001, "a"), SANDBOX_ACTION_MANAGE);
        assert_string_equal(sandbox_access_action(SANDBOX_OP_DESTROY, 1000, 1001, "a"), SANDBOX_ACTION_MANAGE);
        assert_null(sandbox_access_action(SANDBOX_OP_INSPECT, 1000, 1000, "a"));

        assert_true(sandbox_access_visible(&(SandboxCaller) { .uid = 0 }, 1000, ""));
        assert_true(sandbox_access_visible(&(SandboxCaller) { .uid = 1000 }, 1000, ""));
        assert_false(sandbox_access_visible(&(SandboxCaller) { .uid = 1001 }, 1000, ""));
        assert_true(sandbox_access_visible(&(SandboxCaller) { .uid = 1001, .granted = true }, 1000, ""));
}

/* Every method of the interface (and the D-Bus-only ones) has its operation in the
 * core's table, but those that need no authorization; a name not in the table has none. */
static void test_method_operations(void **state) {
        static const char *const unauthorized[] = { "ListTemplates", NULL };
        static const char *const dbus_only[] = { "Upload", "ReadOutputFrom", "ListSandboxesFiltered", "Release", NULL };
        char path[4096], line[512];
        SandboxOperation op;
        unsigned n = 0;
        FILE *f;

        assert_non_null(getenv("SANDBOXD_SOURCE_DIR"));
        snprintf(path, sizeof(path), "%s/src/sandboxd/io.sandboxd.Sandbox.varlink", getenv("SANDBOXD_SOURCE_DIR"));
        f = fopen(path, "re");
        assert_non_null(f);
        while (fgets(line, sizeof(line), f)) {
                char name[128];
                bool skip = false;

                if (sscanf(line, " method %127[A-Za-z](", name) != 1)
                        continue;
                for (size_t i = 0; unauthorized[i]; i++)
                        skip = skip || streq(name, unauthorized[i]);
                if (skip)
                        continue;
                if (sandbox_method_operation(name, &op) < 0)
                        fail_msg("method %s has no operation in the core's table", name);
                n++;
        }
        fclose(f);
        assert_true(n >= 30); /* the interface was read */
        for (size_t i = 0; dbus_only[i]; i++)
                assert_int_equal(sandbox_method_operation(dbus_only[i], &op), 0);

        /* The rights the methods need: the ones a hostile review would check first. */
        assert_int_equal(sandbox_method_operation("io.sandboxd.Sandbox.Hibernate", &op), 0);
        assert_int_equal(op, SANDBOX_OP_DESTROY);
        assert_int_equal(sandbox_method_operation("Snapshot", &op), 0);
        assert_int_equal(op, SANDBOX_OP_EXEC);
        assert_int_equal(sandbox_method_operation("Wake", &op), 0);
        assert_int_equal(op, SANDBOX_OP_CREATE);
        assert_int_equal(sandbox_method_operation("ReleaseSandbox", &op), 0);
        assert_int_equal(op, SANDBOX_OP_DESTROY);
        assert_int_equal(sandbox_method_operation("GetSandbox", &op), 0);
        assert_int_equal(op, SANDBOX_OP_INSPECT);
        assert_int_equal(sandbox_method_operation("ListExecutions", &op), 0);
        assert_int_equal(op, SANDBOX_OP_LIST_ALL);
        assert_int_equal(sandbox_method_operation("ListExecutionsEx", &op), 0);
        assert_int_equal(op, SANDBOX_OP_LIST_ALL);
        /* Asked optionally: whether the caller is counted apart per tenant. */
        assert_int_equal(sandbox_method_operation("ActForTenant", &op), 0);
        assert_int_equal(op, SANDBOX_OP_CREATE);
        assert_int_equal(sandbox_method_operation("Frobnicate", &op), -ENOENT);
        assert_int_equal(sandbox_method_operation("ListTemplates", &op), -ENOENT);
}

static int access_of_root(const SandboxCaller *caller, void *userdata, uid_t *ret_owner, const char **ret_tenant,
                          SandboxError *error) {
        unsigned *n = userdata;

        (*n)++;
        *ret_owner = 0;
        return 0;
}

static int access_refused(const SandboxCaller *caller, void *userdata, uid_t *ret_owner, const char **ret_tenant,
                          SandboxError *error) {
        return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_SANDBOX, "No sandbox 'x'.");
}

/* Every face's authorize-then: the method's operation, whose the call is, then polkit. */
static void test_authorize_method(void **state) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxCaller root = { .kind = SANDBOX_CALLER_UNIX_PROCESS, .uid = 0 };
        unsigned n = 0;

        /* Root is not asked: granted at once. */
        assert_int_equal(sandbox_authorize_method(NULL, &root, "io.sandboxd.Sandbox.Exec", access_of_root, &n, 0,
                                                  NULL, NULL, NULL, &error), 1);
        assert_int_equal(n, 1);
        /* A method the table lacks is refused before anything is looked up. */
        assert_int_equal(sandbox_authorize_method(NULL, &root, "Frobnicate", access_of_root, &n, 0, NULL, NULL, NULL,
                                                  &error), -EPERM);
        assert_int_equal(n, 1);
        /* What access refuses is the answer. */
        assert_int_equal(sandbox_authorize_method(NULL, &root, "Destroy", access_refused, NULL, 0, NULL, NULL, NULL,
                                                  &error), -ENXIO);
        assert_int_equal(error.code, SANDBOX_ERR_NO_SUCH_SANDBOX);
}

static void test_tenants(void **state) {
        SandboxCaller plain = { .uid = 1000 }, a = { .uid = 1000, .tenant = "a" }, root_a = { .uid = 0, .tenant = "a" },
                manager_a = { .uid = 1001, .tenant = "a", .granted = true };
        SandboxConfig c = {};
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;

        /* Not acting for a tenant: one's own, whatever tenant they are for. */
        assert_true(sandbox_access_tenant_matches(&plain, ""));
        assert_true(sandbox_access_tenant_matches(&plain, "a"));
        assert_true(sandbox_access_visible(&plain, 1000, "b"));
        /* Acting for one: that tenant's only, even one's own and even for root or with
         * "manage"; and of that tenant still only what the uid may see. */
        assert_true(sandbox_access_tenant_matches(&a, "a"));
        assert_false(sandbox_access_tenant_matches(&a, "b"));
        assert_false(sandbox_access_tenant_matches(&a, ""));
        assert_false(sandbox_access_tenant_matches(&a, NULL));
        assert_true(sandbox_access_visible(&a, 1000, "a"));
        assert_false(sandbox_access_visible(&a, 1000, "b"));
        assert_false(sandbox_access_visible(&a, 1000, ""));
        assert_false(sandbox_access_visible(&a, 1001, "a"));
        assert_true(sandbox_access_visible(&root_a, 1001, "a"));
        assert_false(sandbox_access_visible(&root_a, 1001, "b"));
        assert_true(sandbox_access_visible(&manager_a, 1000, "a"));
        assert_false(sandbox_access_visible(&manager_a, 1000, ""));

        /* Creating: for the Tenant option's tenant, else the caller's; never for another. */
        assert_int_equal(sandbox_access_create(&plain, &c, &e), 0);
        assert_string_equal(c.tenant, "");
        strcpy(c.tenant, "b");
        assert_int_equal(sandbox_access_create(&plain, &c, &e), 0);
        assert_string_equal(c.tenant, "b");
        c = (SandboxConfig) {};
        assert_int_equal(sandbox_access_create(&a, &c, &e), 0);
        assert_string_equal(c.tenant, "a");
        assert_int_equal(sandbox_access_create(&a, &c, &e), 0);
        assert_false(sandbox_error_is_set(&e));
        strcpy(c.tenant, "b");
        assert_int_equal(sandbox_access_create(&a, &c, &e), -EACCES);
        assert_int_equal(e.code, SANDBOX_ERR_ACCESS_DENIED);
}

static void test_caller_from_socket(void **state) {
        SandboxCaller c = {};
        uint64_t start, again;
        char comm[17] = {};
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

static void test_authorize(void **state) {
        SandboxCaller c = { .kind = SANDBOX_CALLER_BUS_NAME, .uid = 0, .bus_name = ":1.43", .interactive = true };
        Answer a = {}, b = {}, d = {};

        /* Root, and inspecting one's own: nothing to ask. */
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_DESTROY, 1000, NULL, 0, on_answer, &a, NULL), 1);
        c.uid = 1000;
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_INSPECT, 1000, NULL, 0, on_answer, &a, NULL), 1);
        run_idle();
        assert_int_equal(asked.n, 0);
        assert_int_equal(a.n, 0);

        /* Exec in one's own: "exec", interactively as the caller allows. */
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_EXEC, 1000, NULL, 0, on_answer, &a, NULL), 0);
        RUN_UNTIL(a.n > 0);
        assert_string_equal(asked.action, SANDBOX_ACTION_EXEC);
        assert_int_equal(asked.flags, 1);
        assert_int_equal(a.authorized, 1);

        /* In another's: "manage", refused. */
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_EXEC, 1001, NULL, 0, on_answer, &b, NULL), 0);
        RUN_UNTIL(b.n > 0);
        assert_string_equal(asked.action, SANDBOX_ACTION_MANAGE);
        assert_int_equal(b.authorized, -EACCES);
        assert_int_equal(b.code, SANDBOX_ERR_ACCESS_DENIED);

        /* Listing all, optionally: never interactive, and a no is no refusal. */
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_LIST_ALL, 0, NULL, SANDBOX_AUTHORIZE_OPTIONAL,
                                           on_answer, &d, NULL), 0);
        RUN_UNTIL(d.n > 0);
        assert_int_equal(asked.flags, 0);
        assert_int_equal(d.authorized, 0);
        assert_int_equal(d.code, SANDBOX_ERR_NONE);
        assert_int_equal(asked.n, 3);

        /* In one's own sandbox for a tenant: "delegate". */
        Answer t = {};
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_EXEC, 1000, "a", 0, on_answer, &t, NULL), 0);
        RUN_UNTIL(t.n > 0);
        assert_string_equal(asked.action, SANDBOX_ACTION_DELEGATE);
        assert_int_equal(t.authorized, 1);
        assert_int_equal(asked.n, 4);

        /* The statistics: "manage" (refused here), then "delegate" (granted); manage is
         * asked without interaction, the last as the caller allows. Root is not asked. */
        Answer st = {}, held = {}, cancelled = {};
        sd_bus_slot *slot = NULL;
        assert_null(sandbox_access_alternative(SANDBOX_OP_EXEC));
        assert_string_equal(sandbox_access_alternative(SANDBOX_OP_STATISTICS), SANDBOX_ACTION_DELEGATE);
        assert_null(sandbox_access_action(SANDBOX_OP_STATISTICS, 0, 0, NULL));
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_STATISTICS, 0, NULL, 0, on_answer, &st, NULL), 0);
        RUN_UNTIL(st.n > 0);
        assert_int_equal(asked.n, 6);
        assert_string_equal(asked.action, SANDBOX_ACTION_DELEGATE);
        assert_int_equal(asked.flags, 1);
        assert_int_equal(st.authorized, 1);
        /* With a slot the caller holds: the same, once. */
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_STATISTICS, 0, NULL, 0, on_answer, &held, &slot), 0);
        RUN_UNTIL(held.n > 0);
        assert_int_equal(asked.n, 8);
        assert_int_equal(held.authorized, 1);
        slot = sd_bus_slot_unref(slot);
        /* Unreferencing the slot while the second question is under way cancels it. */
        assert_int_equal(sandbox_authorize(core_bus, &c, SANDBOX_OP_STATISTICS, 0, NULL, 0, on_answer, &cancelled,
                                           &slot), 0);
        RUN_UNTIL(asked.n == 9);
        RUN_UNTIL(asked.n == 10);
        slot = sd_bus_slot_unref(slot);
        run_idle();
        assert_int_equal(cancelled.n, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_actions_and_visibility),
                cmocka_unit_test(test_tenants),
                cmocka_unit_test(test_method_operations),
                cmocka_unit_test(test_authorize_method),
                cmocka_unit_test(test_caller_from_socket),
                cmocka_unit_test_setup_teardown(test_authorize, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
