/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The systemd client (scope.c) against a fake systemd (fake-peer.h: the client's bus on
 * one end of a socketpair, the fake on the other, both on one event loop). The fake holds every call
 * until the test answers it, so a test decides the order of replies and JobRemoved
 * signals, answers with errors, or drops the connection; it then asserts on the
 * properties that were sent and on the callbacks (which, with what, how often). */

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "fake-peer.h"
#include "macro.h"
#include "scope.h"

#define SYSTEMD_DEST "org.freedesktop.systemd1"
#define SYSTEMD_PATH "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER "org.freedesktop.systemd1.Manager"
#define UNIT "sandbox-abc.scope"
#define SLICE_UNIT "sandbox-abc.slice"
#define JOB1 "/org/freedesktop/systemd1/job/101"
#define JOB2 "/org/freedesktop/systemd1/job/102"
#define JOB3 "/org/freedesktop/systemd1/job/103"
#define CALLS_MAX 16
#define PROPS_MAX 32

static sd_bus *client_bus, *fake_bus;
static SystemdClient *client;

/* Calls to the fake, unanswered, oldest first. */
static sd_bus_message *calls[CALLS_MAX];
static unsigned n_calls, n_subscribe;

/* Sent, and a callback will come (positive values are success too, as in sd-bus). */
#define assert_queued(...) assert_true((__VA_ARGS__) >= 0)

/* ---- what the client's callbacks saw ---- */

typedef struct Outcome {
        unsigned n;             /* how often the callback ran */
        bool has_result;
        char result[256];
        char error_name[128];
        char error_message[256];
        /* What the callback does besides recording (a caller reacting to its answer). */
        void (*then)(struct Outcome *o);
} Outcome;

static void on_done(const char *result, const sd_bus_error *error, void *userdata) {
        Outcome *o = userdata;

        /* Exactly one of the two, always. */
        assert_true(!!result != !!(error && sd_bus_error_is_set(error)));
        o->n++;
        o->has_result = result;
        snprintf(o->result, sizeof(o->result), "%s", strempty(result));
        if (error) {
                snprintf(o->error_name, sizeof(o->error_name), "%s", strempty(error->name));
                snprintf(o->error_message, sizeof(o->error_message), "%s", strempty(error->message));
        }
        if (o->then)
                o->then(o);
}

static void assert_result(const Outcome *o, const char *result) {
        assert_int_equal(o->n, 1);
        assert_true(o->has_result);
        assert_string_equal(o->result, result);
        assert_string_equal(o->error_name, "");
}

static void assert_error(const Outcome *o, const char *name) {
        assert_int_equal(o->n, 1);
        assert_false(o->has_result);
        assert_string_equal(o->error_name, name);
        assert_true(o->error_message[0] != '\0');
}

/* ---- the fake systemd ---- */

/* Holds every method call for the test to answer; a Subscribe (which must not come) is
 * answered at once, and counted. */
static int fake_filter(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        if (!sd_bus_message_is_method_call(m, NULL, NULL))
                return 0;
        assert_string_equal(sd_bus_message_get_destination(m), SYSTEMD_DEST);
        if (sd_bus_message_is_method_call(m, SYSTEMD_MANAGER, "Subscribe")) {
                n_subscribe++;
                assert_true(sd_bus_reply_method_return(m, NULL) >= 0);
                return 1;
        }
        assert_true(n_calls < CALLS_MAX);
        calls[n_calls++] = sd_bus_message_ref(m);
        return 1;
}

/* The oldest unanswered call, which must be interface.member; the caller unrefs it. */
static sd_bus_message *take_call(const char *interface, const char *member) {
        sd_bus_message *m;

        RUN_UNTIL(n_calls > 0);
        m = calls[0];
        memmove(calls, calls + 1, --n_calls * sizeof(calls[0]));
        assert_string_equal(sd_bus_message_get_member(m), member);
        assert_string_equal(sd_bus_message_get_interface(m), interface);
        return m;
}

static sd_bus_message *take_manager_call(const char *member) {
        sd_bus_message *m = take_call(SYSTEMD_MANAGER, member);

        assert_string_equal(sd_bus_message_get_path(m), SYSTEMD_PATH);
        return m;
}

static void reply_job(sd_bus_message *m, const char *job) {
        assert_true(sd_bus_reply_method_return(m, "o", job) >= 0);
}

static void reply_error(sd_bus_message *m, const char *name, const char *message) {
        assert_true(sd_bus_reply_method_errorf(m, name, "%s", message) >= 0);
}

static void emit_job_removed(const char *job, const char *unit, const char *result) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *s = NULL;
        uint32_t id = 0;

        (void) sscanf(job, "/org/freedesktop/systemd1/job/%u", &id);
        assert_true(sd_bus_message_new_signal(fake_bus, &s, SYSTEMD_PATH, SYSTEMD_MANAGER, "JobRemoved") >= 0);
        /* What the bus daemon would stamp on it. */
        assert_true(sd_bus_message_set_sender(s, SYSTEMD_DEST) >= 0);
        assert_true(sd_bus_message_append(s, "uoss", id, job, unit, result) >= 0);
        assert_true(sd_bus_send(fake_bus, s, NULL) >= 0);
}

/* ---- StartTransientUnit's arguments, read back ---- */

typedef struct Prop {
        char name[64];
        char type[8];
        uint64_t u;             /* t, b, i */
        char s[256];            /* s */
        uint32_t pids[8];       /* au */
        size_t n_pids;
} Prop;

typedef struct StartCall {
        char unit[128];
        char mode[32];
        Prop props[PROPS_MAX];
        size_t n_props;
} StartCall;

static void read_start_call(sd_bus_message *m, StartCall *ret) {
        const char *unit, *mode;

        *ret = (StartCall) {};
        assert_true(sd_bus_message_has_signature(m, "ssa(sv)a(sa(sv))"));
        assert_int_equal(sd_bus_message_read(m, "ss", &unit, &mode), 1);
        snprintf(ret->unit, sizeof(ret->unit), "%s", unit);
        snprintf(ret->mode, sizeof(ret->mode), "%s", mode);

        assert_int_equal(sd_bus_message_enter_container(m, 'a', "(sv)"), 1);
        while (sd_bus_message_enter_container(m, 'r', "sv") > 0) {
                Prop *p = &ret->props[ret->n_props];
                const char *name, *contents, *s;
                const void *a;
                size_t l;
                char type;
                int b;
                int32_t i;

                assert_true(ret->n_props < PROPS_MAX);
                assert_int_equal(sd_bus_message_read(m, "s", &name), 1);
                for (size_t k = 0; k < ret->n_props; k++)
                        assert_string_not_equal(ret->props[k].name, name);   /* each once */
                snprintf(p->name, sizeof(p->name), "%s", name);
                assert_int_equal(sd_bus_message_peek_type(m, &type, &contents), 1);
                assert_int_equal(type, 'v');
                snprintf(p->type, sizeof(p->type), "%s", contents);
                assert_int_equal(sd_bus_message_enter_container(m, 'v', contents), 1);
                if (streq(contents, "s")) {
                        assert_int_equal(sd_bus_message_read(m, "s", &s), 1);
                        snprintf(p->s, sizeof(p->s), "%s", s);
                } else if (streq(contents, "t"))
                        assert_int_equal(sd_bus_message_read(m, "t", &p->u), 1);
                else if (streq(contents, "b")) {
                        assert_int_equal(sd_bus_message_read(m, "b", &b), 1);
                        p->u = b;
                } else if (streq(contents, "i")) {
                        assert_int_equal(sd_bus_message_read(m, "i", &i), 1);
                        p->u = (uint64_t) (int64_t) i;
                } else if (streq(contents, "au")) {
                        assert_true(sd_bus_message_read_array(m, 'u', &a, &l) >= 0);
                        assert_true(l % sizeof(uint32_t) == 0 && l <= sizeof(p->pids));
                        memcpy(p->pids, a, l);
                        p->n_pids = l / sizeof(uint32_t);
                } else
                        fail_msg("property %s of unexpected type %s", name, contents);
                assert_int_equal(sd_bus_message_exit_container(m), 1);
                assert_int_equal(sd_bus_message_exit_container(m), 1);
                ret->n_props++;
        }
        assert_int_equal(sd_bus_message_exit_container(m), 1);

        /* No auxiliary units. */
        assert_int_equal(sd_bus_message_enter_container(m, 'a', "(sa(sv))"), 1);
        assert_int_equal(sd_bus_message_enter_container(m, 'r', "sa(sv)"), 0);
        assert_int_equal(sd_bus_message_exit_container(m), 1);
        assert_true(sd_bus_message_at_end(m, true) > 0);
}

static const Prop *prop_find(const StartCall *c, const char *name) {
        for (size_t i = 0; i < c->n_props; i++)
                if (streq(c->props[i].name, name))
                        return &c->props[i];
        return NULL;
}

static const Prop *prop_get(const StartCall *c, const char *name, const char *type) {
        const Prop *p = prop_find(c, name);

        if (!p)
                fail_msg("property %s was not sent", name);
        if (!streq(p->type, type))
                fail_msg("property %s sent as %s, systemd wants %s", name, p->type, type);
        return p;
}

static void assert_prop_s(const StartCall *c, const char *name, const char *value) {
        assert_string_equal(prop_get(c, name, "s")->s, value);
}

static void assert_prop_t(const StartCall *c, const char *name, uint64_t value) {
        assert_int_equal(prop_get(c, name, "t")->u, value);
}

static void assert_prop_b(const StartCall *c, const char *name, bool value) {
        assert_int_equal(prop_get(c, name, "b")->u, value);
}

static void assert_no_prop(const StartCall *c, const char *name) {
        if (prop_find(c, name))
                fail_msg("property %s must not be sent", name);
}

/* ---- setup ---- */

static int setup(void **state) {
        n_calls = n_subscribe = 0;
        fake_peer_new(&client_bus, &fake_bus);
        assert_true(sd_bus_add_filter(fake_bus, NULL, fake_filter, NULL) >= 0);
        fake_peer_start(client_bus, fake_bus);

        assert_true(systemd_client_new(client_bus, &client) >= 0);
        return 0;
}

static int teardown(void **state) {
        /* Never Subscribe: systemd sends the job signals to the client that queued the
         * job anyway, and a subscriber makes it emit every unit's changes besides. */
        assert_int_equal(n_subscribe, 0);
        client = systemd_client_free(client);
        while (n_calls > 0)
                sd_bus_message_unref(calls[--n_calls]);
        fake_peer_done(&client_bus, &fake_bus);
        return 0;
}

static const SandboxLimits limits = {
        .memory_max = 512ULL << 20,
        .cpu_quota_per_sec_usec = 1500000,
        .tasks_max = 256,
};

static void start_scope(Outcome *o) {
        pid_t pid = 4242;

        assert_queued(scope_start_transient(client, &(ScopeParams) {
                                 .unit = UNIT,
                                 .slice = "sandbox.slice",
                                 .description = "Sandbox abc",
                                 .pids = &pid,
                                 .n_pids = 1,
                                 .limits = limits,
                         }, on_done, o));
}

/* Two starts, both waiting for their replies. */
static void start_two(Outcome *oa, Outcome *ob, sd_bus_message **ret_a, sd_bus_message **ret_b) {
        start_scope(oa);
        start_scope(ob);
        *ret_a = take_manager_call("StartTransientUnit");
        *ret_b = take_manager_call("StartTransientUnit");
}

/* ---- StartTransientUnit ---- */

static void test_start_scope_properties_and_job(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        StartCall c;
        const Prop *p;
        Outcome o = {};

        start_scope(&o);
        m = take_manager_call("StartTransientUnit");
        read_start_call(m, &c);
        assert_string_equal(c.unit, UNIT);
        assert_string_equal(c.mode, "fail");
        assert_prop_s(&c, "Description", "Sandbox abc");
        assert_prop_s(&c, "Slice", "sandbox.slice");
        p = prop_get(&c, "PIDs", "au");
        assert_int_equal(p->n_pids, 1);
        assert_int_equal(p->pids[0], 4242);
        assert_prop_b(&c, "MemoryAccounting", true);
        assert_prop_t(&c, "MemoryMax", 512ULL << 20);
        /* Or the sandbox goes on in the host's swap. */
        assert_prop_t(&c, "MemorySwapMax", 0);
        assert_prop_b(&c, "CPUAccounting", true);
        assert_prop_t(&c, "CPUQuotaPerSecUSec", 1500000);
        assert_prop_b(&c, "TasksAccounting", true);
        assert_prop_t(&c, "TasksMax", 256);
        assert_prop_b(&c, "Delegate", true);
        assert_int_equal((int) prop_get(&c, "KillSignal", "i")->u, SIGKILL);
        assert_prop_b(&c, "SendSIGHUP", false);
        assert_prop_s(&c, "CollectMode", "inactive-or-failed");
        assert_prop_s(&c, "OOMPolicy", "continue");
        assert_int_equal(c.n_props, 15);

        /* Queued is not done: the callback waits for the job. */
        reply_job(m, JOB1);
        run_idle();
        assert_int_equal(o.n, 0);

        /* Another job of the same unit, and someone else's job, are not ours. */
        emit_job_removed(JOB2, UNIT, "failed");
        emit_job_removed(JOB3, "other.service", "done");
        run_idle();
        assert_int_equal(o.n, 0);

        emit_job_removed(JOB1, UNIT, "done");
        RUN_UNTIL(o.n > 0);
        assert_result(&o, "done");

        /* A repeated signal finds nothing to call back. */
        emit_job_removed(JOB1, UNIT, "done");
        run_idle();
        assert_int_equal(o.n, 1);
}

static void test_start_slice_properties(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        StartCall c;
        Outcome o = {};

        assert_queued(scope_start_transient(client, &(ScopeParams) {
                                 .unit = SLICE_UNIT,
                                 .description = "Sandbox abc",
                                 .limits = limits,
                         }, on_done, &o));
        m = take_manager_call("StartTransientUnit");
        read_start_call(m, &c);
        assert_string_equal(c.unit, SLICE_UNIT);
        assert_prop_t(&c, "MemoryMax", 512ULL << 20);
        assert_prop_t(&c, "MemorySwapMax", 0);
        assert_prop_t(&c, "CPUQuotaPerSecUSec", 1500000);
        assert_prop_t(&c, "TasksMax", 256);
        assert_prop_s(&c, "CollectMode", "inactive-or-failed");
        /* A slice is placed by its name, holds no processes itself, and systemd refuses
         * what only scopes know. */
        assert_no_prop(&c, "Slice");
        assert_no_prop(&c, "PIDs");
        assert_no_prop(&c, "Delegate");
        assert_no_prop(&c, "KillSignal");
        assert_no_prop(&c, "SendSIGHUP");
        assert_no_prop(&c, "OOMPolicy");

        reply_job(m, JOB1);
        emit_job_removed(JOB1, SLICE_UNIT, "done");
        RUN_UNTIL(o.n > 0);
        assert_result(&o, "done");
}

static void test_start_job_failed_or_canceled(void **state) {
        const char *results[] = { "failed", "canceled", "timeout" };

        for (size_t i = 0; i < ELEMENTSOF(results); i++) {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
                Outcome o = {};

                start_scope(&o);
                m = take_manager_call("StartTransientUnit");
                reply_job(m, JOB1);
                emit_job_removed(JOB1, UNIT, results[i]);
                RUN_UNTIL(o.n > 0);
                /* The job's result as systemd said it, not an error. */
                assert_result(&o, results[i]);
                run_idle();
                assert_int_equal(o.n, 1);
        }
}

static void test_start_unit_exists(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        Outcome o = {};

        start_scope(&o);
        m = take_manager_call("StartTransientUnit");
        reply_error(m, "org.freedesktop.systemd1.UnitExists", "Unit " UNIT " was already loaded or has a fragment file.");
        RUN_UNTIL(o.n > 0);
        assert_error(&o, "org.freedesktop.systemd1.UnitExists");
        assert_string_equal(o.error_message, "Unit " UNIT " was already loaded or has a fragment file.");
        /* No retry of anything but OOMPolicy=. */
        run_idle();
        assert_int_equal(n_calls, 0);
        assert_int_equal(o.n, 1);
}

static void test_start_retried_without_oom_policy(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *again = NULL;
        StartCall first, second;
        Outcome o = {};

        start_scope(&o);
        m = take_manager_call("StartTransientUnit");
        read_start_call(m, &first);
        assert_prop_s(&first, "OOMPolicy", "continue");
        /* What systemd < 253 says of a property it does not know for scopes. */
        reply_error(m, SD_BUS_ERROR_PROPERTY_READ_ONLY, "Cannot set property OOMPolicy, or unknown property.");

        again = take_manager_call("StartTransientUnit");
        assert_int_equal(o.n, 0);
        read_start_call(again, &second);
        assert_no_prop(&second, "OOMPolicy");
        /* Everything else as before. */
        assert_string_equal(second.unit, UNIT);
        assert_string_equal(second.mode, "fail");
        assert_int_equal(second.n_props, first.n_props - 1);
        for (size_t i = 0; i < second.n_props; i++) {
                const Prop *p = prop_find(&first, second.props[i].name);

                assert_non_null(p);
                assert_memory_equal(&second.props[i], p, sizeof(Prop));
        }

        reply_job(again, JOB2);
        emit_job_removed(JOB2, UNIT, "done");
        RUN_UNTIL(o.n > 0);
        assert_result(&o, "done");
}

static void test_start_refused_twice_not_retried_again(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *again = NULL;
        Outcome o = {};

        start_scope(&o);
        m = take_manager_call("StartTransientUnit");
        reply_error(m, SD_BUS_ERROR_INVALID_ARGS, "Unknown assignment OOMPolicy=continue.");
        again = take_manager_call("StartTransientUnit");
        /* Refused again (it was not OOMPolicy= after all): that is the answer. */
        reply_error(again, SD_BUS_ERROR_INVALID_ARGS, "Unknown assignment OOMPolicy=continue.");
        RUN_UNTIL(o.n > 0);
        assert_error(&o, SD_BUS_ERROR_INVALID_ARGS);
        run_idle();
        assert_int_equal(n_calls, 0);
}

static void test_start_other_invalid_args_not_retried(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        Outcome o = {};

        start_scope(&o);
        m = take_manager_call("StartTransientUnit");
        reply_error(m, SD_BUS_ERROR_INVALID_ARGS, "CPUQuotaPerSecUSec= value out of range");
        RUN_UNTIL(o.n > 0);
        assert_error(&o, SD_BUS_ERROR_INVALID_ARGS);
        assert_string_equal(o.error_message, "CPUQuotaPerSecUSec= value out of range");
        run_idle();
        assert_int_equal(n_calls, 0);
}

static void test_start_too_many_pids(void **state) {
        pid_t pids[5] = { 1, 2, 3, 4, 5 };
        Outcome o = {};

        assert_int_equal(scope_start_transient(client, &(ScopeParams) {
                                 .unit = UNIT, .description = "x", .pids = pids, .n_pids = 5, .limits = limits,
                         }, on_done, &o), -EINVAL);
        run_idle();
        assert_int_equal(n_calls, 0);
        assert_int_equal(o.n, 0);
}

/* Nothing in the protocol orders the JobRemoved of a job before or after the reply that
 * names it: the result must not be lost either way. */
static void test_job_removed_before_reply(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *a = NULL, *b = NULL;
        Outcome oa = {}, ob = {};

        start_two(&oa, &ob, &a, &b);
        emit_job_removed(JOB1, UNIT, "done");
        reply_job(a, JOB1);
        RUN_UNTIL(oa.n > 0);
        assert_result(&oa, "done");

        /* A busy systemd: many other jobs end meanwhile (kept only as long as useful). */
        for (unsigned i = 0; i < 40; i++) {
                char job[64];

                snprintf(job, sizeof(job), "/org/freedesktop/systemd1/job/%u", 1000 + i);
                emit_job_removed(job, "other.service", "done");
        }
        emit_job_removed(JOB2, UNIT, "failed");
        reply_job(b, JOB2);
        RUN_UNTIL(ob.n > 0);
        assert_result(&ob, "failed");
        run_idle();
        assert_int_equal(oa.n, 1);
        assert_int_equal(ob.n, 1);
}

static void test_job_removed_before_reply_then_cancel(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        Outcome o = {};

        start_scope(&o);
        m = take_manager_call("StartTransientUnit");
        emit_job_removed(JOB1, UNIT, "done");
        run_idle();
        /* Its owner goes between the two: no callback, and what was kept is freed (ASan). */
        systemd_client_cancel(client, &o);
        reply_job(m, JOB1);
        run_idle();
        assert_int_equal(o.n, 0);
}

static void test_concurrent_starts_routed_by_job(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *a = NULL, *b = NULL;
        Outcome oa = {}, ob = {};

        start_two(&oa, &ob, &a, &b);
        /* Answered and finished in the other order. */
        reply_job(b, JOB2);
        reply_job(a, JOB1);
        emit_job_removed(JOB2, UNIT, "done");
        RUN_UNTIL(ob.n > 0);
        assert_int_equal(oa.n, 0);
        emit_job_removed(JOB1, UNIT, "canceled");
        RUN_UNTIL(oa.n > 0);
        assert_result(&oa, "canceled");
        assert_result(&ob, "done");
}

/* ---- the caller goes away ---- */

static void test_cancel_before_reply(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *a = NULL, *b = NULL;
        Outcome oa = {}, ob = {};

        start_two(&oa, &ob, &a, &b);
        /* oa's owner is freed (sandbox_free_internal() does this); the answers come all the
         * same, and only ob hears of its own. */
        systemd_client_cancel(client, &oa);
        reply_job(a, JOB1);
        reply_job(b, JOB2);
        emit_job_removed(JOB1, UNIT, "done");
        emit_job_removed(JOB2, UNIT, "done");
        RUN_UNTIL(ob.n > 0);
        run_idle();
        assert_int_equal(oa.n, 0);
        assert_result(&ob, "done");
}

static void test_cancel_while_job_runs(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        Outcome o = {};

        start_scope(&o);
        m = take_manager_call("StartTransientUnit");
        reply_job(m, JOB1);
        run_idle();
        systemd_client_cancel(client, &o);
        emit_job_removed(JOB1, UNIT, "done");
        run_idle();
        assert_int_equal(o.n, 0);
}

static void test_cancel_simple_call(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        Outcome o = {};

        assert_queued(unit_freeze(client, UNIT, true, on_done, &o));
        m = take_manager_call("FreezeUnit");
        systemd_client_cancel(client, &o);
        assert_true(sd_bus_reply_method_return(m, NULL) >= 0);
        run_idle();
        assert_int_equal(o.n, 0);
}

/* What a sandbox does when its unit could not be started: it goes away (and cancels its
 * calls), or stops the unit. Both from within the callback. */
static Outcome reentrant_stop;

static void cancel_self_and_stop(Outcome *o) {
        systemd_client_cancel(client, o);
        assert_queued(unit_stop(client, UNIT, on_done, &reentrant_stop));
}

static void test_callback_may_cancel_and_call_again(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *stop = NULL;
        Outcome o = { .then = cancel_self_and_stop };

        reentrant_stop = (Outcome) {};
        start_scope(&o);
        m = take_manager_call("StartTransientUnit");
        reply_job(m, JOB1);
        emit_job_removed(JOB1, UNIT, "failed");
        RUN_UNTIL(o.n > 0);
        assert_result(&o, "failed");

        stop = take_manager_call("StopUnit");
        reply_job(stop, JOB2);
        emit_job_removed(JOB2, UNIT, "done");
        RUN_UNTIL(reentrant_stop.n > 0);
        assert_result(&reentrant_stop, "done");
        assert_int_equal(o.n, 1);
}

/* Three calls in flight: a start waiting for its reply, a start waiting for its job
 * (JOB2), a FreezeUnit waiting for its reply. */
typedef struct InFlight {
        sd_bus_message *start, *freeze;
        Outcome queued, job, frozen;
} InFlight;

static void in_flight_begin(InFlight *t) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *b = NULL;

        *t = (InFlight) {};
        start_two(&t->queued, &t->job, &t->start, &b);
        assert_queued(unit_freeze(client, UNIT, true, on_done, &t->frozen));
        t->freeze = take_manager_call("FreezeUnit");
        reply_job(b, JOB2);
        run_idle();
        assert_int_equal(t->queued.n + t->job.n + t->frozen.n, 0);
}

static void in_flight_done(InFlight *t) {
        sd_bus_message_unref(t->start);
        sd_bus_message_unref(t->freeze);
}

static void test_client_freed_with_calls_in_flight(void **state) {
        _cleanup_(in_flight_done) InFlight t;

        in_flight_begin(&t);
        /* What sandboxd's exit does: everything let go of (ASan: nothing leaks), no callback
         * then or later. */
        client = systemd_client_free(client);
        reply_job(t.start, JOB1);
        assert_true(sd_bus_reply_method_return(t.freeze, NULL) >= 0);
        emit_job_removed(JOB1, UNIT, "done");
        emit_job_removed(JOB2, UNIT, "done");
        run_idle();
        assert_int_equal(t.queued.n, 0);
        assert_int_equal(t.job.n, 0);
        assert_int_equal(t.frozen.n, 0);
}

/* systemd (or the bus) goes away: every call in flight hears of it, once, whether it was
 * waiting for its reply or for its job. */
static void test_connection_dropped(void **state) {
        _cleanup_(in_flight_done) InFlight t;
        Outcome late = {};

        in_flight_begin(&t);
        sd_bus_close(fake_bus);
        /* sd-bus itself fails the calls still waiting for their reply ... */
        RUN_UNTIL(t.queued.n > 0 && t.frozen.n > 0);
        /* ... but the job's JobRemoved will never come. */
        RUN_UNTIL(t.job.n > 0);
        assert_error(&t.queued, SD_BUS_ERROR_NO_REPLY);
        assert_error(&t.job, SD_BUS_ERROR_NO_REPLY);
        assert_error(&t.frozen, SD_BUS_ERROR_NO_REPLY);
        run_idle();
        assert_int_equal(t.queued.n, 1);
        assert_int_equal(t.job.n, 1);
        assert_int_equal(t.frozen.n, 1);

        /* Nothing can be asked any more; that is said at once, with no callback. */
        assert_true(unit_stop(client, UNIT, on_done, &late) < 0);
        run_idle();
        assert_int_equal(late.n, 0);
}

/* ---- StopUnit ---- */

static void test_stop(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        const char *unit, *mode;
        Outcome o = {};

        assert_queued(unit_stop(client, UNIT, on_done, &o));
        m = take_manager_call("StopUnit");
        assert_true(sd_bus_message_has_signature(m, "ss"));
        assert_int_equal(sd_bus_message_read(m, "ss", &unit, &mode), 1);
        assert_string_equal(unit, UNIT);
        /* Replaces a start job still queued (a sandbox destroyed while starting). */
        assert_string_equal(mode, "replace");
        reply_job(m, JOB1);
        run_idle();
        assert_int_equal(o.n, 0);
        emit_job_removed(JOB1, UNIT, "done");
        RUN_UNTIL(o.n > 0);
        assert_result(&o, "done");
}

static void test_stop_no_such_unit_is_done(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *denied = NULL;
        Outcome o = {}, od = {};

        assert_queued(unit_stop(client, UNIT, on_done, &o));
        m = take_manager_call("StopUnit");
        reply_error(m, "org.freedesktop.systemd1.NoSuchUnit", "Unit " UNIT " not loaded.");
        RUN_UNTIL(o.n > 0);
        assert_result(&o, "done");

        /* Any other error is one. */
        assert_queued(unit_stop(client, UNIT, on_done, &od));
        denied = take_manager_call("StopUnit");
        reply_error(denied, SD_BUS_ERROR_ACCESS_DENIED, "Access denied");
        RUN_UNTIL(od.n > 0);
        assert_error(&od, SD_BUS_ERROR_ACCESS_DENIED);
}

/* A sandbox destroyed while its unit starts: StopUnit(replace) cancels the start job, and
 * systemd says so before it answers the StopUnit. */
static void test_stop_cancels_start(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *start = NULL, *stop = NULL;
        Outcome os = {}, ot = {};

        start_scope(&os);
        start = take_manager_call("StartTransientUnit");
        reply_job(start, JOB1);
        assert_queued(unit_stop(client, UNIT, on_done, &ot));
        stop = take_manager_call("StopUnit");
        emit_job_removed(JOB1, UNIT, "canceled");
        reply_job(stop, JOB2);
        RUN_UNTIL(os.n > 0);
        assert_result(&os, "canceled");
        run_idle();
        assert_int_equal(ot.n, 0);
        emit_job_removed(JOB2, UNIT, "done");
        RUN_UNTIL(ot.n > 0);
        assert_result(&ot, "done");
        assert_int_equal(os.n, 1);
}

/* ---- calls answered without a job ---- */

static void test_freeze_and_thaw(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *f = NULL, *t = NULL, *k = NULL;
        const char *unit;
        Outcome of = {}, ot = {}, ok = {};

        assert_queued(unit_freeze(client, UNIT, true, on_done, &of));
        f = take_manager_call("FreezeUnit");
        assert_true(sd_bus_message_has_signature(f, "s"));
        assert_int_equal(sd_bus_message_read(f, "s", &unit), 1);
        assert_string_equal(unit, UNIT);

        /* systemd answers FreezeUnit once the cgroup is frozen, which takes a while; the
         * loop serves others meanwhile. */
        assert_queued(unit_kill(client, "other.scope", SIGCONT, on_done, &ok));
        k = take_manager_call("KillUnit");
        assert_true(sd_bus_reply_method_return(k, NULL) >= 0);
        RUN_UNTIL(ok.n > 0);
        assert_int_equal(of.n, 0);
        assert_true(sd_bus_reply_method_return(f, NULL) >= 0);
        RUN_UNTIL(of.n > 0);
        assert_result(&of, "done");

        assert_queued(unit_freeze(client, UNIT, false, on_done, &ot));
        t = take_manager_call("ThawUnit");
        assert_int_equal(sd_bus_message_read(t, "s", &unit), 1);
        assert_string_equal(unit, UNIT);
        assert_true(sd_bus_reply_method_return(t, NULL) >= 0);
        RUN_UNTIL(ot.n > 0);
        assert_result(&ot, "done");
}

static void test_freeze_not_supported(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *f = NULL;
        Outcome o = {};

        assert_queued(unit_freeze(client, UNIT, true, on_done, &o));
        f = take_manager_call("FreezeUnit");
        /* The name must come through: sandbox.c falls back to SIGSTOP on it. */
        reply_error(f, SD_BUS_ERROR_NOT_SUPPORTED, "Unit does not support freeze action.");
        RUN_UNTIL(o.n > 0);
        assert_error(&o, SD_BUS_ERROR_NOT_SUPPORTED);
}

static void test_kill(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *k = NULL, *e = NULL;
        const char *unit, *whom;
        int32_t signo;
        Outcome o = {}, oe = {};

        assert_queued(unit_kill(client, UNIT, SIGSTOP, on_done, &o));
        k = take_manager_call("KillUnit");
        assert_true(sd_bus_message_has_signature(k, "ssi"));
        assert_int_equal(sd_bus_message_read(k, "ssi", &unit, &whom, &signo), 1);
        assert_string_equal(unit, UNIT);
        assert_string_equal(whom, "all");
        assert_int_equal(signo, SIGSTOP);
        assert_true(sd_bus_reply_method_return(k, NULL) >= 0);
        RUN_UNTIL(o.n > 0);
        assert_result(&o, "done");

        assert_queued(unit_kill(client, UNIT, SIGCONT, on_done, &oe));
        e = take_manager_call("KillUnit");
        reply_error(e, "org.freedesktop.systemd1.NoSuchUnit", "Unit " UNIT " not loaded.");
        RUN_UNTIL(oe.n > 0);
        assert_error(&oe, "org.freedesktop.systemd1.NoSuchUnit");
}

static void test_attach_processes(void **state) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        const pid_t pids[] = { 100, 200 };
        const char *unit, *subcgroup;
        const void *a;
        size_t l;
        Outcome o = {};

        assert_queued(unit_attach_processes(client, UNIT, pids, ELEMENTSOF(pids), on_done, &o));
        m = take_manager_call("AttachProcessesToUnit");
        assert_true(sd_bus_message_has_signature(m, "ssau"));
        assert_int_equal(sd_bus_message_read(m, "ss", &unit, &subcgroup), 1);
        assert_string_equal(unit, UNIT);
        assert_string_equal(subcgroup, "");
        assert_true(sd_bus_message_read_array(m, 'u', &a, &l) >= 0);
        assert_int_equal(l, 2 * sizeof(uint32_t));
        assert_int_equal(((const uint32_t *) a)[0], 100);
        assert_int_equal(((const uint32_t *) a)[1], 200);
        assert_true(sd_bus_reply_method_return(m, NULL) >= 0);
        RUN_UNTIL(o.n > 0);
        assert_result(&o, "done");
}

/* ---- ControlGroup ---- */

static void answer_control_group(const char *path, const char *interface, const char *cgroup) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        const char *iface, *property;

        m = take_call("org.freedesktop.DBus.Properties", "Get");
        assert_string_equal(sd_bus_message_get_path(m), path);
        assert_int_equal(sd_bus_message_read(m, "ss", &iface, &property), 1);
        assert_string_equal(iface, interface);
        assert_string_equal(property, "ControlGroup");
        if (cgroup)
                assert_true(sd_bus_reply_method_return(m, "v", "s", cgroup) >= 0);
        else
                assert_true(sd_bus_reply_method_return(m, "v", "u", 7) >= 0);   /* nonsense */
}

static void test_control_group(void **state) {
        Outcome scope = {}, slice = {}, bad = {}, missing = {};
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;

        assert_queued(unit_get_control_group(client, UNIT, on_done, &scope));
        answer_control_group("/org/freedesktop/systemd1/unit/sandbox_2dabc_2escope",
                             "org.freedesktop.systemd1.Scope", "/sandbox.slice/" UNIT);
        RUN_UNTIL(scope.n > 0);
        assert_result(&scope, "/sandbox.slice/" UNIT);

        assert_queued(unit_get_control_group(client, SLICE_UNIT, on_done, &slice));
        answer_control_group("/org/freedesktop/systemd1/unit/sandbox_2dabc_2eslice",
                             "org.freedesktop.systemd1.Slice", "/sandbox.slice/" SLICE_UNIT);
        RUN_UNTIL(slice.n > 0);
        assert_result(&slice, "/sandbox.slice/" SLICE_UNIT);

        /* A reply it cannot read is an error, not a cgroup. */
        assert_queued(unit_get_control_group(client, UNIT, on_done, &bad));
        answer_control_group("/org/freedesktop/systemd1/unit/sandbox_2dabc_2escope",
                             "org.freedesktop.systemd1.Scope", NULL);
        RUN_UNTIL(bad.n > 0);
        assert_false(bad.has_result);
        assert_true(bad.error_name[0] != '\0');

        assert_queued(unit_get_control_group(client, UNIT, on_done, &missing));
        m = take_call("org.freedesktop.DBus.Properties", "Get");
        reply_error(m, SD_BUS_ERROR_UNKNOWN_OBJECT, "Unknown object.");
        RUN_UNTIL(missing.n > 0);
        assert_error(&missing, SD_BUS_ERROR_UNKNOWN_OBJECT);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_start_scope_properties_and_job, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_slice_properties, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_job_failed_or_canceled, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_unit_exists, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_retried_without_oom_policy, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_refused_twice_not_retried_again, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_other_invalid_args_not_retried, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_too_many_pids, setup, teardown),
                cmocka_unit_test_setup_teardown(test_job_removed_before_reply, setup, teardown),
                cmocka_unit_test_setup_teardown(test_job_removed_before_reply_then_cancel, setup, teardown),
                cmocka_unit_test_setup_teardown(test_concurrent_starts_routed_by_job, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel_before_reply, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel_while_job_runs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel_simple_call, setup, teardown),
                cmocka_unit_test_setup_teardown(test_callback_may_cancel_and_call_again, setup, teardown),
                cmocka_unit_test_setup_teardown(test_client_freed_with_calls_in_flight, setup, teardown),
                cmocka_unit_test_setup_teardown(test_connection_dropped, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_no_such_unit_is_done, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_cancels_start, setup, teardown),
                cmocka_unit_test_setup_teardown(test_freeze_and_thaw, setup, teardown),
                cmocka_unit_test_setup_teardown(test_freeze_not_supported, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kill, setup, teardown),
                cmocka_unit_test_setup_teardown(test_attach_processes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_control_group, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
