/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The manager's subscribers (manager.h): every event to each, in the order they
 * subscribed; pooled sandboxes told to nobody; unsubscribing from within a hook; and
 * nothing told once the manager goes. A manager of the bare struct: no systemd, no
 * templates, sandboxes that are only linked and unlinked. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sandbox-internal.h"

#define LOG_MAX 32

static char events[LOG_MAX][32];
static unsigned n_events;

typedef struct Subscriber {
        char name;
        ManagerSubscription *sub;
        bool unsubscribe_on_remove;
} Subscriber;

static void logf_event(const Subscriber *who, const char *what, const Sandbox *s) {
        assert_true(n_events < LOG_MAX);
        snprintf(events[n_events++], sizeof(events[0]), "%c %s %s", who->name, what, s ? s->id : "-");
}

static void on_added(Sandbox *s, void *userdata) {
        logf_event(userdata, "added", s);
}

static void on_state(Sandbox *s, void *userdata) {
        logf_event(userdata, "state", s);
}

static void on_removed(Sandbox *s, void *userdata) {
        Subscriber *who = userdata;

        logf_event(who, "removed", s);
        if (who->unsubscribe_on_remove)
                who->sub = manager_unsubscribe(who->sub);
}

static void on_exec_record(const ExecRecordEvent *ev, void *userdata) {
        logf_event(userdata, "exec", NULL);
}

static Manager *manager_bare(void) {
        Manager *m = calloc(1, sizeof(Manager));

        assert_non_null(m);
        m->seccomp_fd = -EBADF;
        return m;
}

static Sandbox *sandbox_bare(Manager *m, const char *id, bool pooled) {
        Sandbox *s = calloc(1, sizeof(Sandbox));

        assert_non_null(s);
        s->manager = m;
        snprintf(s->id, sizeof(s->id), "%s", id);
        s->custody = pooled ? SANDBOX_POOLED : SANDBOX_OWNED;
        s->state = SANDBOX_RUNNING;
        return s;
}

static void assert_events(const char * const *want, unsigned n) {
        assert_int_equal(n_events, n);
        for (unsigned i = 0; i < n; i++)
                assert_string_equal(events[i], want[i]);
        n_events = 0;
}

static void test_every_subscriber_in_order(void **state) {
        static const ManagerHooks sandbox_hooks = {
                .sandbox_added = on_added,
                .sandbox_state_changed = on_state,
                .sandbox_removed = on_removed,
        };
        static const ManagerHooks record_hooks = {
                .exec_record = on_exec_record,
        };
        Subscriber a = { .name = 'a' }, b = { .name = 'b' }, r = { .name = 'r' };
        Manager *m = manager_bare();
        Sandbox *s1 = sandbox_bare(m, "s1", false), *p = sandbox_bare(m, "pooled", true);

        n_events = 0;
        assert_false(manager_records_execs(m));
        assert_int_equal(manager_subscribe(m, &sandbox_hooks, &a, &a.sub), 0);
        assert_int_equal(manager_subscribe(m, &record_hooks, &r, &r.sub), 0);
        assert_int_equal(manager_subscribe(m, &sandbox_hooks, &b, &b.sub), 0);
        assert_true(manager_records_execs(m));

        manager_link_sandbox(m, s1);
        manager_link_sandbox(m, p);     /* nobody's: told to nobody */
        manager_sandbox_state_changed(m, s1);
        manager_sandbox_state_changed(m, p);
        manager_record_exec(m, &(ExecRecordEvent) { .sandbox_id = "s1" });
        assert_events((const char * const[]) {
                "a added s1", "b added s1", "a state s1", "b state s1", "r exec -",
        }, 5);

        /* b leaves; a leaves from within its hook, and b's hook is not called any more. */
        b.sub = manager_unsubscribe(b.sub);
        a.unsubscribe_on_remove = true;
        m->draining = true; /* the pooled one goes without a refill */
        manager_unlink_sandbox(m, p);
        manager_unlink_sandbox(m, s1);
        assert_null(a.sub);
        assert_events((const char * const[]) { "a removed s1" }, 1);
        manager_link_sandbox(m, s1);
        assert_events(NULL, 0);
        assert_true(manager_records_execs(m));
        r.sub = manager_unsubscribe(r.sub);
        assert_false(manager_records_execs(m));

        /* What is left goes with the manager, untold. */
        assert_int_equal(manager_subscribe(m, &sandbox_hooks, &a, &a.sub), 0);
        manager_unlink_sandbox(m, s1);
        assert_events((const char * const[]) { "a removed s1" }, 1);
        manager_free(m);
        assert_events(NULL, 0);
        free(s1);
        free(p);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_every_subscriber_in_order),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
