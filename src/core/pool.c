/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The warm pool and the hand-outs: sandboxes nobody sees (SANDBOX_POOLED, started ahead of
 * any create; SANDBOX_RESETTING and SANDBOX_KEPT, released by their user, recycle.c),
 * chained apart from the rest, topped up by a timer, and handed to a create as its
 * answer. */

#include <assert.h>

#include "log.h"
#include "manager-quota.h"
#include "pool.h"
#include "sandbox-errors.h"
#include "sandbox-internal.h"
#include "strv.h"

/* The warm pool's sandboxes of a template that changed or went were made from what it was:
 * they go, and the pool is filled from what it is now. Those in use stay theirs, but are
 * not recycled (recycle.c): the next user of the template must get what it is now. */
void pool_drop_template(Manager *m, const char *template_name) {
        for (Sandbox *s = m->sandboxes, *next; s; s = next) {
                next = s->next;
                if (!streq(s->template_name, template_name))
                        continue;
                if (sandbox_is_pooled(s))
                        (void) sandbox_destroy(s, NULL, NULL);
                else
                        s->template_changed = true;
        }
}

bool pool_has_sandboxes(Manager *m) {
        return m->pooled;
}

void pool_chain_add(Manager *m, Sandbox *s) {
        s->pool_next = m->pooled;
        m->pooled = s;
}

void pool_chain_remove(Manager *m, Sandbox *s) {
        for (Sandbox **p = &m->pooled; *p; p = &(*p)->pool_next)
                if (*p == s) {
                        *p = s->pool_next;
                        break;
                }
        s->pool_next = NULL;
}

void pool_unlinked(Manager *m, Sandbox *s) {
        assert(sandbox_is_pooled(s));
        pool_chain_remove(m, s);
        if (m->draining) {
                if (m->pool_drained_cb && !pool_has_sandboxes(m)) {
                        void (*cb)(void *) = m->pool_drained_cb;
                        m->pool_drained_cb = NULL;
                        cb(m->pool_drained_userdata);
                }
                return;
        }
        /* One that never came up (failed, or refused while still starting) is retried
         * slowly: Docker may be down, descriptors may have run out. */
        pool_schedule_refill(m, s->state == SANDBOX_STARTING ||
                                (s->state == SANDBOX_DEAD && s->failure) ? 30 * 1000000ULL : 0);
}

int pool_drain(Manager *m, void (*cb)(void *userdata), void *userdata) {
        unsigned n = 0;

        for (Sandbox *s = m->sandboxes, *next; s; s = next) {
                next = s->next;
                if (sandbox_is_pooled(s)) {
                        (void) sandbox_destroy(s, NULL, NULL);
                        n++;
                }
        }
        m->pool_drained_cb = cb;
        m->pool_drained_userdata = userdata;
        m->draining = true;
        if (n == 0 || !pool_has_sandboxes(m)) {
                m->pool_drained_cb = NULL;
                cb(userdata);
        }
        return (int) n;
}

/* A running pooled sandbox of t, if the request takes the template's defaults. */
static Sandbox *pool_take(Manager *m, const Template *t, const SandboxConfig *c) {
        if (c->limits.memory_max || c->limits.cpu_quota_per_sec_usec || c->limits.tasks_max || c->disk_max ||
            c->limits.storage != STORAGE_DEFAULT ||
            c->egress_allow_set || c->egress_deny_set || c->secrets_set)
                return NULL; /* what a pooled sandbox was started with cannot be changed */
        for (Sandbox *s = m->pooled; s; s = s->pool_next)
                if (s->custody == SANDBOX_POOLED && s->state == SANDBOX_RUNNING && streq(s->template_name, t->name))
                        return s;
        return NULL;
}

static bool limits_equal(const SandboxConfig *a, const SandboxConfig *b) {
        return a->limits.memory_max == b->limits.memory_max &&
               a->limits.cpu_quota_per_sec_usec == b->limits.cpu_quota_per_sec_usec &&
               a->limits.tasks_max == b->limits.tasks_max && a->disk_max == b->disk_max &&
               a->limits.storage == b->limits.storage &&
               sandbox_config_egress_equal(a, b);
}

Sandbox *pool_find_kept(Manager *m, uid_t owner, const Template *t, const SandboxConfig *config,
                        bool resetting) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        _cleanup_(sandbox_config_done) SandboxConfig c = {};

        /* Not with secrets: they are read as a sandbox starts, and may have changed since. */
        if (!t->recycle || !isempty(config->secrets) || sandbox_config_copy(&c, config) < 0)
                return NULL;
        /* Compared as the sandbox would be made: the template's values filled in. */
        if (manager_config_resolve(m, t, &c, &error) < 0 ||
            sandbox_config_egress_defaults(&c, t->egress_allow, t->egress_deny, &error) < 0)
                return NULL;
        Sandbox *found = NULL;
        unsigned n = 0;
        for (Sandbox *s = m->pooled; s; s = s->pool_next) {
                /* Never another owner's or another tenant's: only who released it may have it. */
                if (!sandbox_is_released(s) || s->owner != owner || !streq(s->config.tenant, c.tenant) ||
                    !streq(s->template_name, t->name) || !limits_equal(&s->config, &c))
                        continue;
                if (!resetting) {
                        if (sandbox_is_kept(s))
                                return s;
                        continue;
                }
                n++;
                if (!found && sandbox_is_resetting(s) && !s->recycle_waiter)
                        found = s;
        }
        /* One that works a sandbox at a time (one released, being reset) gets a second one
         * rather than wait: its creates then alternate between the two, each reset done
         * while it uses the other. With more of them in play, a new unit's cost (tens of
         * milliseconds, of systemd's and the kernel's CPU) is not worth a reset's wait. */
        return n >= 2 ? found : NULL;
}

bool pool_evict_kept(Manager *m) {
        Sandbox *oldest = NULL;

        /* The chain is newest first: the last kept one is the one kept longest. */
        for (Sandbox *s = m->pooled; s; s = s->pool_next)
                if (sandbox_is_kept(s))
                        oldest = s;
        if (!oldest)
                return false;
        log_sandbox(oldest, LOG_INFO, 0, "Sandbox %s, kept for reuse, makes room for a new one.", oldest->id);
        sandbox_payload_failed(oldest, "kept for reuse, and destroyed to make room at the maximum of sandboxes.");
        return true;
}

unsigned pool_count_released(Manager *m, const Sandbox *like) {
        unsigned n = 0;

        for (Sandbox *s = m->pooled; s; s = s->pool_next)
                if (sandbox_is_released(s) && s->owner == like->owner && streq(s->config.tenant, like->config.tenant) &&
                    streq(s->template_name, like->template_name))
                        n++;
        return n;
}

void pool_add_released(Manager *m, Sandbox *s) {
        /* Gone for everyone, as a destroyed one: nothing of it is to be touched meanwhile. */
        manager_notify_removed(m, s);
        sandbox_set_custody(s, SANDBOX_RESETTING);
        pool_chain_add(m, s);
}

int pool_hand_out(Manager *m, Sandbox *s, uid_t owner, const SandboxConfig *config, SandboxError *error) {
        bool recycled = sandbox_is_released(s);
        _cleanup_strv_free_ char **labels = NULL;
        int r;

        if (config->labels && !(labels = strv_copy(config->labels)))
                return -ENOMEM;
        if (recycled) {
                r = sandbox_take_new_id(s);
                if (r < 0)
                        return sandbox_error_set_errno(error, r, "Failed to give a recycled sandbox a new id: %m");
        }
        /* Saved and announced below, with the rest. No Timeout asked: the admin's default
         * (or maximum), as a new one would have. */
        r = sandbox_apply_timeout(s, config->timeout_sec ?: manager_timeout_default(m, s->template_name),
                                  config->idle_timeout_sec, error);
        if (r < 0)
                return r;
        pool_chain_remove(m, s);
        sandbox_set_custody(s, SANDBOX_OWNED);
        s->from_pool = true;
        if (recycled)
                s->recycles++;
        s->owner = owner;
        s->config.ephemeral = config->ephemeral;
        s->config.idle_action = config->idle_action;
        memcpy(s->config.name, config->name, sizeof(s->config.name));
        memcpy(s->config.tenant, config->tenant, sizeof(s->config.tenant));
        if (labels || s->config.labels) {
                /* The new owner's labels, and the unit's description that shows them. */
                strv_free(s->config.labels);
                s->config.labels = TAKE_PTR(labels);
                r = sandbox_update_description(s);
                if (r < 0)
                        log_sandbox(s, LOG_WARNING, r, "Failed to update the description of %s: %m", s->unit);
        }
        s->record_closed = false;
        sandbox_save(s);
        manager_notify_added(m, s);
        manager_record_sandbox(m, s, NULL);
        if (recycled)
                log_sandbox(s, LOG_DEBUG, 0, "Sandbox %s (template %s, %s) recycled for owner %u.", s->id,
                            s->template_name, s->unit, owner);
        else {
                log_sandbox(s, LOG_INFO, 0, "Sandbox %s (template %s) handed from the pool to owner %u.", s->id,
                            s->template_name, owner);
                pool_schedule_refill(m, 0);
        }
        return 0;
}

int pool_acquire_or_start(Manager *m, uid_t owner, const Template *t, SandboxConfig *config,
                          bool may_wait, sandbox_callback_t cb, void *userdata, SandboxError *error) {
        Sandbox *s;
        int r;

        /* Recycled first (the caller's own, reset), then from the warm pool: an acquire,
         * not a boot. */
        s = pool_find_kept(m, owner, t, config, false) ?: pool_take(m, t, config);
        if (s) {
                r = pool_hand_out(m, s, owner, config, error);
                if (r < 0)
                        return r;
                cb(s, NULL, userdata);
                return 0;
        }
        /* One of the caller's own being reset is ready in a millisecond or so; a new one
         * takes tens of milliseconds and a unit of its own. */
        /* Not a named one: its name is checked as it is asked for, and another create of
         * that name could come meanwhile. */
        s = may_wait && isempty(config->name) ? pool_find_kept(m, owner, t, config, true) : NULL;
        if (s) {
                r = recycle_wait(s, owner, config, cb, userdata);
                if (r >= 0)
                        return 0;
                log_sandbox(s, LOG_DEBUG, r, "Cannot wait for sandbox %s to be reset, starting another: %m", s->id);
        }

        /* The creates waiting for their turn (StartsInFlight=) count: one caller cannot queue
         * more than the daemon would hold. */
        if (m->n_sandboxes + manager_creates_waiting(m) >= m->settings.max_sandboxes && !pool_evict_kept(m))
                return manager_error_too_many(m, error);
        return manager_start_sandbox(m, t, config, owner, false, cb, userdata, error);
}

static int on_pool_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        if (m->draining)
                return 0;
        for (size_t i = 0; i < m->templates.n; i++) {
                const Template *t = m->templates.templates[i];
                unsigned have = 0;

                for (Sandbox *s = m->pooled; s; s = s->pool_next)
                        if (s->custody == SANDBOX_POOLED && streq(s->template_name, t->name))
                                have++;
                for (; have < t->pool && m->n_sandboxes < m->settings.max_sandboxes; have++) {
                        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
                        _cleanup_(sandbox_config_done) SandboxConfig c = {};

                        if (manager_start_sandbox(m, t, &c, 0, true, NULL, NULL, &error) < 0) {
                                log_warning("Failed to start a pooled sandbox of template %s: %s", t->name,
                                            error.message ?: "unknown error");
                                pool_schedule_refill(m, 30 * 1000000ULL);
                                return 0;
                        }
                }
        }
        return 0;
}

void pool_schedule_refill(Manager *m, uint64_t delay_usec) {
        uint64_t usec;

        if (!m->event)
                return;
        if (m->pool_timer) {
                /* Sooner wins over later; an earlier request stands. */
                if (sd_event_source_get_enabled(m->pool_timer, NULL) > 0 && delay_usec > 0)
                        return;
                (void) sd_event_now(m->event, CLOCK_MONOTONIC, &usec);
                (void) sd_event_source_set_time(m->pool_timer, usec + delay_usec);
                (void) sd_event_source_set_enabled(m->pool_timer, SD_EVENT_ONESHOT);
                return;
        }
        (void) sd_event_add_time_relative(m->event, &m->pool_timer, CLOCK_MONOTONIC, delay_usec, 0, on_pool_timer, m);
}
