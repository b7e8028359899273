/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The recycling pool (a template's "pool": {"recycle": true}). A sandbox its user is done
 * with (an ephemeral one whose exec ended, or one released with ReleaseSandbox) is not
 * destroyed but reset and kept, for its owner and tenant only, until a create of the same
 * template and limits takes it (pool_find_kept()). It stays the one transient unit
 * it was, with its limits; only what its user left is gone:
 *
 *   1. its execs and file operations end (their callers are answered), and it leaves the
 *      front ends' view as a destroyed one would;
 *   2. the agent kills every other process of the sandbox and waits for them, and removes
 *      the System V IPC objects ("reset", agent-protocol.h);
 *   3. the backend checks that nothing else is left in the unit and replaces /work, /tmp
 *      and /dev/shm with fresh, empty tmpfs mounts (PayloadOps.renew);
 *   4. the memory high-water mark starts afresh (where the kernel can), so that the next
 *      execs' records are theirs alone; CPU is counted per exec already.
 *
 * A create that finds none kept but two or more being reset for the same owner, tenant,
 * template and limits waits for one (recycle_wait(); RECYCLE_WAIT_USEC at most): a reset
 * takes about a millisecond, a new sandbox tens of them and a unit of its own.
 *
 * If any step fails or takes too long, the sandbox is destroyed, never kept. A kept one
 * is destroyed after its template's recycle_idle_sec, when its template changes, and
 * when sandboxd stops (a restarted sandboxd stops one it finds released).
 */

#include <assert.h>
#include <inttypes.h>
#include "agent-protocol.h"
#include "json-util.h"
#include "list.h"
#include "log.h"
#include "sandbox-internal.h"
#include "template.h"
#include "time-util.h"

/* The agent's own deadline, and time to answer on top. */
#define RECYCLE_RESET_TIMEOUT_USEC (AGENT_RESET_TIMEOUT_USEC + 3ULL * 1000000ULL)

/* How long a create waits for a sandbox being reset before it starts a new one: many
 * resets' time, a little more than a new sandbox's. */
#define RECYCLE_WAIT_USEC (100ULL * 1000ULL)

struct RecycleWaiter {
        Manager *manager;
        Sandbox *sandbox;              /* waited for; NULL once it goes on without */
        uid_t owner;
        char *template_name;
        SandboxConfig config;
        sandbox_callback_t cb;
        void *userdata;
        sd_event_source *source;       /* the wait's deadline, then the going on */
        bool going_on;                 /* in the manager's waiters_going_on */
        RecycleWaiter *prev, *next;
};

static void recycle_waiter_abandon(RecycleWaiter *w, const SandboxError *error);

/* A waiting create's answer when it gets no sandbox: always an error, the one given, or
 * one made from r (a fault: ENOMEM), so that no face is ever answered neither a sandbox
 * nor an error. */
static void recycle_create_failed(sandbox_callback_t cb, void *userdata, int r, const SandboxError *error) {
        _cleanup_(sandbox_error_done) SandboxError fallback = SANDBOX_ERROR_NULL;

        assert(cb);
        if (!sandbox_error_is_set(error)) {
                (void) sandbox_error_set_errno(&fallback, r < 0 ? -r : EIO,
                                               "Failed to go on with the create: %m");
                error = &fallback;
        }
        cb(NULL, error, userdata);
}

static RecycleWaiter *recycle_waiter_free(RecycleWaiter *w) {
        if (!w)
                return NULL;
        if (w->sandbox)
                w->sandbox->recycle_waiter = NULL;
        if (w->going_on)
                LIST_REMOVE(w->manager->waiters_going_on, w);
        sd_event_source_disable_unref(w->source);
        free(w->template_name);
        sandbox_config_done(&w->config);
        return mfree(w);
}

/* Off the loop: the create goes on as if it had never waited (it does not wait again). */
static int on_waiter_go_on(sd_event_source *source, void *userdata) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        RecycleWaiter *w = userdata;
        sandbox_callback_t cb = w->cb;
        void *cb_userdata = w->userdata;
        const Template *t;
        int r;

        t = template_set_find(manager_get_templates(w->manager), w->template_name);
        if (w->manager->draining)
                r = sandbox_error_set(&error, SANDBOX_ERR_SANDBOX_FAILED, "sandboxd is stopping.");
        else if (!t)
                r = sandbox_error_set(&error, SANDBOX_ERR_NO_SUCH_TEMPLATE, "No template '%.64s'.", w->template_name);
        else
                r = pool_acquire_or_start(w->manager, w->owner, t, &w->config, false, cb, cb_userdata, &error);
        recycle_waiter_free(w);
        if (r < 0)
                recycle_create_failed(cb, cb_userdata, r, &error);
        return 0;
}

static void recycle_waiter_go_on(RecycleWaiter *w) {
        w->sandbox->recycle_waiter = NULL;
        w->sandbox = NULL;
        LIST_PREPEND(w->manager->waiters_going_on, w);
        w->going_on = true;
        w->source = sd_event_source_disable_unref(w->source);
        if (sd_event_add_defer(w->manager->event, &w->source, on_waiter_go_on, w) < 0) {
                /* Not from here (inside a reset's failure or a sandbox's free): answered. */
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

                sandbox_error_set_errno(&error, -ENOMEM, "Failed to go on with the create: %m");
                recycle_waiter_abandon(w, &error);
        }
}

static int on_wait_expired(sd_event_source *source, uint64_t usec, void *userdata) {
        RecycleWaiter *w = userdata;

        log_sandbox(w->sandbox, LOG_DEBUG, 0, "Sandbox %s is not reset yet; a create waiting for it starts another.",
                    w->sandbox->id);
        recycle_waiter_go_on(w);
        return 0;
}

int recycle_wait(Sandbox *s, uid_t owner, const SandboxConfig *config, sandbox_callback_t cb, void *userdata) {
        RecycleWaiter *w;
        int r;

        if (!sandbox_is_resetting(s) || s->recycle_waiter)
                return -EBUSY;
        w = calloc(1, sizeof(RecycleWaiter));
        if (!w)
                return -ENOMEM;
        *w = (RecycleWaiter) { .manager = s->manager, .owner = owner, .template_name = strdup(s->template_name),
                               .cb = cb, .userdata = userdata };
        r = w->template_name ? sandbox_config_copy(&w->config, config) : -ENOMEM;
        if (r >= 0)
                r = sd_event_add_time_relative(s->manager->event, &w->source, CLOCK_MONOTONIC, RECYCLE_WAIT_USEC, 0,
                                               on_wait_expired, w);
        if (r < 0) {
                recycle_waiter_free(w);
                return r;
        }
        w->sandbox = s;
        s->recycle_waiter = w;
        return 0;
}

void recycle_waiter_release(Sandbox *s) {
        if (s->recycle_waiter)
                recycle_waiter_go_on(s->recycle_waiter);
}

static void recycle_waiter_abandon(RecycleWaiter *w, const SandboxError *error) {
        sandbox_callback_t cb = w->cb;
        void *userdata = w->userdata;

        recycle_waiter_free(w);
        recycle_create_failed(cb, userdata, -ESRCH, error);
}

void recycle_waiters_abandon(Manager *m, const SandboxError *error) {
        while (m->waiters_going_on)
                recycle_waiter_abandon(m->waiters_going_on, error);
}

/* s is reset and kept: a create waiting for it gets it now. */
static void recycle_waiter_take(Sandbox *s) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        RecycleWaiter *w = s->recycle_waiter;
        sandbox_callback_t cb;
        void *userdata;

        if (!w)
                return;
        cb = w->cb;
        userdata = w->userdata;
        if (pool_hand_out(s->manager, s, w->owner, &w->config, &error) < 0) {
                /* It stays kept; the create goes on without it. */
                recycle_waiter_go_on(w);
                return;
        }
        recycle_waiter_free(w);
        assert(s->state == SANDBOX_RUNNING);
        cb(s, NULL, userdata);
}

static void recycle_answer(Sandbox *s, const SandboxError *error) {
        sandbox_callback_t cb = TAKE_PTR(s->recycle_cb);

        if (cb)
                cb(s, error, s->recycle_userdata);
}

void recycle_abandon_caller(Sandbox *s, const SandboxError *error) {
        RecycleWaiter *w = s->recycle_waiter;

        recycle_answer(s, error);
        if (!w)
                return;
        if (error)
                /* sandboxd stops: a create waiting for it is told so, not left to go on. */
                recycle_waiter_abandon(w, error);
        else
                /* It ended: the create goes on without it. */
                recycle_waiter_go_on(w);
}

/* The sandbox cannot be used again: it goes, and the release's caller is answered once it
 * has gone, as for a destroy. */
static void recycle_fail(Sandbox *s, const char *reason) {
        sandbox_callback_t cb = TAKE_PTR(s->recycle_cb);

        log_sandbox(s, LOG_WARNING, 0, "Sandbox %s is not recycled: %s", s->id, reason);
        recycle_waiter_release(s);
        STATISTICS_COUNT(s->manager, sandbox_get_tenant(s), recycle_failures);
        sandbox_payload_failed(s, reason);
        if (cb && sandbox_destroy(s, cb, s->recycle_userdata) < 0)
                cb(s, NULL, s->recycle_userdata);
}

static int on_reset_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        recycle_fail(userdata, "its reset did not finish in time.");
        return 0;
}

static int on_kept_expired(sd_event_source *source, uint64_t usec, void *userdata) {
        Sandbox *s = userdata;

        log_sandbox(s, LOG_INFO, 0, "Sandbox %s was kept for reuse and not taken again; destroying it.", s->id);
        sandbox_payload_failed(s, "released, and not taken again in time.");
        return 0;
}

static int recycle_arm_timer(Sandbox *s, uint64_t usec, sd_event_time_handler_t handler) {
        s->timer_source = sd_event_source_disable_unref(s->timer_source);
        s->deadline_realtime = 0;
        return sd_event_add_time_relative(s->manager->event, &s->timer_source, CLOCK_MONOTONIC, usec, 0, handler, s);
}

static const char refusal_no_recycle[] = "its template does not recycle";

/* Why s cannot be recycled, or NULL. */
static const char *recycle_refusal(Sandbox *s) {
        const Template *t = template_set_find(manager_get_templates(s->manager), s->template_name);

        if (!t || !t->recycle)
                return refusal_no_recycle;
        if (s->template_changed)
                return "its template was replaced since it started";
        if (!s->payload_ops->renew)
                return "its payload cannot be reset";
        if (s->workspace)
                return "its files are on disk (Storage=disk), which a reset does not renew";
        if (s->state != SANDBOX_RUNNING || sandbox_freeze_pending(s) || s->custody != SANDBOX_OWNED || !s->cgroup)
                return "it is not running";
        if (pool_count_released(s->manager, s) >= t->recycle_max)
                return "as many of its kind are kept already";
        return NULL;
}

bool recycle_can_keep(Sandbox *s) {
        return !recycle_refusal(s);
}

int recycle_release(Sandbox *s, sandbox_callback_t cb, void *userdata) {
        _cleanup_json_ json_object *msg = NULL;
        const char *refusal;
        int r;

        refusal = recycle_refusal(s);
        if (refusal) {
                if (refusal != refusal_no_recycle)
                        log_sandbox(s, LOG_INFO, 0, "Sandbox %s released; not kept (%s).", s->id, refusal);
                return sandbox_destroy(s, cb, userdata);
        }

        msg = agent_msg_reset(s->next_exec_id);
        if (!msg)
                return -ENOMEM;
        r = agent_send(s->control_fd, msg, NULL, 0);
        if (r < 0) {
                log_sandbox(s, LOG_WARNING, r, "Failed to ask the agent of sandbox %s to reset: %m", s->id);
                return sandbox_destroy(s, cb, userdata);
        }
        s->reset_id = s->next_exec_id++;
        s->reset_started = now_usec(CLOCK_MONOTONIC);

        /* What its user still had running ends now, answered as a destroy would. */
        sandbox_contexts_free(s);
        while (s->execs)
                exec_abort(s->execs, "The sandbox was released while the command ran.");
        while (s->file_ops)
                file_op_abort(s->file_ops, "The sandbox was released during the file operation.");
        while (s->finished)
                exec_free(s->finished);

        s->idle_source = sd_event_source_disable_unref(s->idle_source);
        s->recycle_cb = cb;
        s->recycle_userdata = userdata;
        pool_add_released(s->manager, s);
        /* Its user's record of it ends here; a next user's starts under a new id. */
        manager_record_sandbox(s->manager, s, "released");
        s->record_closed = true;
        sandbox_save(s);
        r = recycle_arm_timer(s, RECYCLE_RESET_TIMEOUT_USEC, on_reset_timeout);
        if (r < 0)
                recycle_fail(s, "its reset could not be timed.");
        return 0;
}

void recycle_on_agent_reset(Sandbox *s, uint64_t id, int error) {
        int r;

        if (!sandbox_is_resetting(s) || id != s->reset_id)
                return;
        s->reset_agent_done = now_usec(CLOCK_MONOTONIC);
        if (error != 0) {
                log_sandbox(s, LOG_WARNING, -error, "The agent of sandbox %s could not reset it: %m", s->id);
                recycle_fail(s, error == ETIMEDOUT ? "a process of it did not end in time." :
                                                     "its agent could not reset it.");
                return;
        }
        /* What the last user's processes made the agent say came before this answer,
         * logged under its id: the next user gets a budget of its own. */
        s->log_budget = PAYLOAD_LOG_LINES_MAX;
        r = s->payload_ops->renew(s);
        if (r < 0)
                recycle_fail(s, r == -EBUSY ? "a process in its unit outlived the reset." :
                                              "its mounts could not be renewed.");
}

void recycle_on_renewed(Sandbox *s, const char *failure) {
        const Template *t;
        int r;

        if (!sandbox_is_resetting(s))
                return;
        if (failure) {
                recycle_fail(s, failure);
                return;
        }
        t = template_set_find(manager_get_templates(s->manager), s->template_name);
        if (!t) {
                recycle_fail(s, "its template is gone.");
                return;
        }

        /* Where the kernel cannot start the mark afresh (cgroup v2 before Linux 6.12), the
         * next execs' peaks are the unit's since it started. */
        r = cgroup_reset_memory_peak(s->cgroup, &s->cgroup_memory_peak_file);
        if (r < 0)
                log_sandbox(s, LOG_DEBUG, r, "Cannot reset the memory peak of %s: %m", s->unit);

        r = recycle_arm_timer(s, t->recycle_idle_sec * 1000000ULL, on_kept_expired);
        if (r < 0) {
                recycle_fail(s, "its keeping could not be timed.");
                return;
        }
        sandbox_set_custody(s, SANDBOX_KEPT);
        sandbox_set_use(s, SANDBOX_FRESH);
        STATISTICS_COUNT(s->manager, sandbox_get_tenant(s), sandboxes_recycled);
        log_sandbox(s, LOG_DEBUG, 0, "Sandbox %s reset in %" PRIu64 " us (its agent's part %" PRIu64 " us); kept for owner %u.",
                    s->id, now_usec(CLOCK_MONOTONIC) - s->reset_started, s->reset_agent_done - s->reset_started, s->owner);
        recycle_answer(s, NULL);
        recycle_waiter_take(s);
}
