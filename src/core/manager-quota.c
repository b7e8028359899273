/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The manager's side of quota.h: sandbox.slice's ceilings applied at start, the admin's
 * maxima and defaults applied to every sandbox, and each owner's and tenant's quota counted
 * over the live sandboxes at each create (docs/QUOTAS.md says why no slice per tenant). */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "list.h"
#include "log.h"
#include "manager-quota.h"
#include "sandbox-internal.h"
#include "snapshot.h"
#include "strv.h"
#include "time-util.h"

#define SANDBOX_SLICE "sandbox.slice"
/* Buckets kept before the full (idle) ones are dropped. */
#define QUOTA_BUCKETS_KEEP 256U

/* One owner's or tenant's: its creates-per-second bucket, its starts in flight. */
typedef struct QuotaBucket {
        bool tenant;
        uid_t uid;
        char name[SANDBOX_NAME_MAX + 1];
        TokenBucket bucket;
        unsigned starting;
} QuotaBucket;

/* A create waiting for its turn (template_name set), or another expensive operation
 * (run set: a snapshot, its fork's or hibernation's), of owner's, for config.tenant. */
typedef struct StartWaiter {
        char *template_name;
        SandboxConfig config;  /* resolved; of another operation, only its tenant */
        uid_t owner;
        sandbox_callback_t cb;
        void *userdata;
        turn_run_t run;
        turn_fail_t fail;
        void *data;
        struct StartWaiter *next, *prev;
} StartWaiter;

static void on_slice_limits_set(const char *result, const sd_bus_error *error, void *userdata) {
        Manager *m = userdata;

        if (error)
                log_error("Failed to set the ceilings of %s (MemoryMax=%" PRIu64 ", TasksMax=%" PRIu64
                          ", CPUWeight=%" PRIu64 "): %s", SANDBOX_SLICE, m->settings.tenancy.node.memory_max,
                          m->settings.tenancy.node.tasks_max, m->settings.tenancy.node.cpu_weight, error->message);
        else
                log_info("%s: MemoryMax=%" PRIu64 ", TasksMax=%" PRIu64 ", CPUWeight=%" PRIu64 ".", SANDBOX_SLICE,
                         m->settings.tenancy.node.memory_max, m->settings.tenancy.node.tasks_max, m->settings.tenancy.node.cpu_weight);
}

int manager_quota_setup(Manager *m) {
        char why[256];
        int r;

        r = host_resources_read(&m->host);
        if (r < 0)
                return log_error_errno(r, "Failed to read the host's memory and PIDs: %m");
        r = node_ceiling_resolve(&m->settings.tenancy.node, &m->host, why, sizeof(why));
        if (r < 0)
                return log_error_errno(r, "sandboxd.conf [Node]: %s; the host cannot honour it, refusing to start.",
                                       why);
        if (!m->settings.tenancy.node.apply)
                return 0;
        /* One sandbox can have no more than all of them together. */
        m->bounds.memory_total = MIN(m->bounds.memory_total, m->settings.tenancy.node.memory_max);
        /* Asynchronous: nothing waits for it; a failure is logged (the unit file's own limits,
         * if any, hold meanwhile). */
        r = unit_set_limits(m->systemd, SANDBOX_SLICE, m->settings.tenancy.node.memory_max, m->settings.tenancy.node.tasks_max,
                            m->settings.tenancy.node.cpu_weight, on_slice_limits_set, m);
        if (r < 0)
                return log_error_errno(r, "Failed to ask systemd to set the ceilings of %s: %m", SANDBOX_SLICE);
        return 0;
}

void manager_quota_done(Manager *m) {
        m->start_pump = sd_event_source_disable_unref(m->start_pump);
        systemd_client_cancel(m->systemd, m);
        m->buckets = mfree(m->buckets);
        m->n_buckets = 0;
        manager_fleet_uses_set(m, NULL, 0);
}

const NodeCeiling *manager_get_node_ceiling(Manager *m) {
        return &m->settings.tenancy.node;
}

int manager_config_resolve(Manager *m, const Template *t, SandboxConfig *config, SandboxError *error) {
        LimitSettings l;
        char where[TEMPLATE_NAME_MAX + 64];
        int r;

        limit_settings_merge(&l, &m->settings.tenancy.limits, &t->maxima);
        snprintf(where, sizeof(where), "sandboxd.conf [Limits] and template %s", t->name);
        r = limit_settings_check_sandbox(&l, config, where, error);
        if (r < 0)
                return r;
        return sandbox_config_finalize(config, &t->limits, &m->bounds, error);
}

uint64_t manager_timeout_default(Manager *m, const char *template_name) {
        const Template *t = template_set_find(&m->templates, template_name);
        SandboxConfig c = {};
        LimitSettings l;

        if (t)
                limit_settings_merge(&l, &m->settings.tenancy.limits, &t->maxima);
        else
                l = m->settings.tenancy.limits;
        /* Only the lifetime is looked at; nothing of c is owned. */
        (void) limit_settings_check_sandbox(&l, &c, "", NULL);
        return c.timeout_sec;
}

/* Whose quota a sandbox of owner for tenant counts against: the tenant's, else its owner's
 * (root's own have none). */
static const QuotaLimits *quota_limits_for(Manager *m, uid_t owner, const char *tenant) {
        static const QuotaLimits none = {};

        if (!isempty(tenant))
                return &m->settings.tenancy.quota.tenant;
        return owner == 0 ? &none : &m->settings.tenancy.quota.owner;
}

static void quota_whom(uid_t owner, const char *tenant, char *buf, size_t size) {
        if (!isempty(tenant))
                snprintf(buf, size, "tenant %s", tenant);
        else
                snprintf(buf, size, "owner %u", owner);
}

/* What owner (tenant) holds on this node. */
static void quota_use_local(Manager *m, uid_t owner, const char *tenant, QuotaUse *ret) {
        *ret = (QuotaUse) {};
        /* A walk over the live sandboxes: a few µs with thousands, and never out of step. The
         * warm pool's are nobody's; a kept one (recycling) holds no quota until handed out. */
        for (Sandbox *s = m->sandboxes; s; s = s->next) {
                if (sandbox_is_pooled(s))
                        continue;
                if (!isempty(tenant) ? !streq(s->config.tenant, tenant) : (s->owner != owner || !isempty(s->config.tenant)))
                        continue;
                quota_use_add(ret, &s->config);
        }
        /* Those waiting for their turn to start count already. */
        for (StartWaiter *w = m->start_waiters; w; w = w->next)
                if (!w->run && (!isempty(tenant) ? streq(w->config.tenant, tenant)
                                                 : (w->owner == owner && isempty(w->config.tenant))))
                        quota_use_add(ret, &w->config);
}

/* … and a tenant's on the fleet's other nodes, as last read. */
static void quota_use_count(Manager *m, uid_t owner, const char *tenant, QuotaUse *ret) {
        quota_use_local(m, owner, tenant, ret);
        for (size_t i = 0; !isempty(tenant) && i < m->n_fleet_uses; i++)
                if (streq(m->fleet_uses[i].tenant, tenant)) {
                        const QuotaUse *u = &m->fleet_uses[i].use;
                        ret->sandboxes += u->sandboxes;
                        ret->memory += u->memory;
                        ret->tasks += u->tasks;
                        ret->disk += u->disk;
                        ret->cpu += u->cpu;
                }
}

static int tenant_uses_add(TenantUse **list, size_t *n, const char *tenant) {
        TenantUse *p;

        if (isempty(tenant))
                return 0;
        for (size_t i = 0; i < *n; i++)
                if (streq((*list)[i].tenant, tenant))
                        return 0;
        p = reallocarray(*list, *n + 1, sizeof(TenantUse));
        if (!p)
                return -ENOMEM;
        *list = p;
        p[*n] = (TenantUse) {};
        snprintf(p[*n].tenant, sizeof(p[*n].tenant), "%s", tenant);
        (*n)++;
        return 0;
}

int manager_tenant_uses(Manager *m, TenantUse **ret, size_t *ret_n) {
        _cleanup_free_ TenantUse *list = NULL;
        size_t n = 0;
        int r = 0;

        for (Sandbox *s = m->sandboxes; s && r >= 0; s = s->next)
                if (!sandbox_is_pooled(s))
                        r = tenant_uses_add(&list, &n, s->config.tenant);
        for (StartWaiter *w = m->start_waiters; w && r >= 0; w = w->next)
                if (!w->run)
                        r = tenant_uses_add(&list, &n, w->config.tenant);
        if (r < 0)
                return r;
        /* Each as this node's quota check counts it. */
        for (size_t i = 0; i < n; i++)
                quota_use_local(m, 0, list[i].tenant, &list[i].use);
        *ret = TAKE_PTR(list);
        *ret_n = n;
        return 0;
}

void manager_fleet_uses_set(Manager *m, TenantUse *uses, size_t n) {
        free(m->fleet_uses);
        m->fleet_uses = uses;
        m->n_fleet_uses = uses ? n : 0;
}

static QuotaBucket *quota_bucket(Manager *m, uid_t owner, const char *tenant, bool create) {
        bool by_tenant = !isempty(tenant);
        QuotaBucket *b;

        for (size_t i = 0; i < m->n_buckets; i++) {
                b = &m->buckets[i];
                if (b->tenant == by_tenant && (by_tenant ? streq(b->name, tenant) : b->uid == owner))
                        return b;
        }
        if (!create)
                return NULL;
        if (m->n_buckets >= QUOTA_BUCKETS_KEEP) {
                /* Forget those that are full again: they would start full anyway. */
                const QuotaLimits *l;
                uint64_t now = now_usec(CLOCK_MONOTONIC);
                size_t k = 0;

                for (size_t i = 0; i < m->n_buckets; i++) {
                        b = &m->buckets[i];
                        l = b->tenant ? &m->settings.tenancy.quota.tenant : &m->settings.tenancy.quota.owner;
                        if (b->starting > 0 ||
                            token_bucket_in_use(&b->bucket, l->creates_per_sec, l->creates_burst, now) > 0)
                                m->buckets[k++] = *b;
                }
                m->n_buckets = k;
        }
        b = realloc(m->buckets, (m->n_buckets + 1) * sizeof(QuotaBucket));
        if (!b)
                return NULL;
        m->buckets = b;
        b = &m->buckets[m->n_buckets++];
        *b = (QuotaBucket) { .tenant = by_tenant, .uid = owner };
        if (by_tenant)
                snprintf(b->name, sizeof(b->name), "%s", tenant);
        return b;
}

static int quota_check_full(Manager *m, const Template *t, uid_t owner, const SandboxConfig *config, bool take_token,
                            SandboxError *error) {
        _cleanup_(sandbox_config_done) SandboxConfig c = {};
        const QuotaLimits *l = quota_limits_for(m, owner, config->tenant);
        char whom[SANDBOX_NAME_MAX + 16];
        QuotaBucket *b;
        QuotaUse use;
        int r;

        /* Checked as the sandbox would be made: defaults filled in, maxima applied. */
        r = sandbox_config_copy(&c, config);
        if (r < 0)
                return sandbox_error_set_errno(error, r, "Out of memory.");
        r = manager_config_resolve(m, t, &c, error);
        if (r < 0)
                return r;

        /* The use is counted only where something bounds it: the count walks every sandbox,
         * which at 10,000 idle ones was ~2 ms of each create (root's, say, have no quota). */
        quota_whom(owner, config->tenant, whom, sizeof(whom));
        if (quota_limits_bound_use(l)) {
                quota_use_count(m, owner, config->tenant, &use);
                r = quota_check(l, &use, &c, whom, error);
                if (r < 0)
                        return r;
        }

        /* Last: a create refused for another reason takes no token. */
        if (l->creates_per_sec == 0 || !take_token)
                return 0;
        b = quota_bucket(m, owner, config->tenant, true);
        if (!b)
                return sandbox_error_set_errno(error, ENOMEM, "Out of memory.");
        if (!token_bucket_take(&b->bucket, l->creates_per_sec, l->creates_burst, now_usec(CLOCK_MONOTONIC)))
                return sandbox_error_set_quota(error, quota_item_to_string(QUOTA_CREATES_PER_SEC), l->creates_per_sec,
                                               l->creates_burst ?: l->creates_per_sec,
                                               "Quota exceeded: %s may create %" PRIu64 " sandboxes a second "
                                               "(CreatesPerSecond=, a burst of %" PRIu64 "); try again later.",
                                               whom, l->creates_per_sec, l->creates_burst ?: l->creates_per_sec);
        return 0;
}

int manager_quota_check(Manager *m, const Template *t, uid_t owner, const SandboxConfig *config,
                        SandboxError *error) {
        return quota_check_full(m, t, owner, config, true, error);
}

int manager_quota_recheck(Manager *m, const Template *t, uid_t owner, const SandboxConfig *config,
                          SandboxError *error) {
        return quota_check_full(m, t, owner, config, false, error);
}

/* ---- starts in flight, per owner or tenant ---- */

static bool start_slot_free(Manager *m, uid_t owner, const char *tenant) {
        QuotaBucket *b = quota_bucket(m, owner, tenant, false);
        return !b || b->starting < m->settings.tenancy.node.starts_in_flight;
}

void manager_start_counted(Manager *m, Sandbox *s) {
        QuotaBucket *b = quota_bucket(m, s->owner, s->config.tenant, true);

        /* Out of memory for the bucket: the start goes uncounted, not refused. */
        if (!b)
                return;
        b->starting++;
        s->start_counted = true;
}

static void start_waiter_free(StartWaiter *w) {
        free(w->template_name);
        sandbox_config_done(&w->config);
        free(w);
}

static int on_start_pump(sd_event_source *source, void *userdata) {
        Manager *m = userdata;

        /* In the order they came, each whose owner (tenant) has a slot free again; a
         * callback may create or destroy, so the walk starts over after each. */
        for (bool again = true; again;) {
                again = false;
                for (StartWaiter *w = m->start_waiters; w; w = w->next) {
                        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
                        const Template *t;
                        int r;

                        if (!start_slot_free(m, w->owner, w->config.tenant))
                                continue;
                        LIST_REMOVE_WITH_TAIL(m->start_waiters, m->start_waiters_tail, w);
                        if (w->run) {
                                r = w->run(m, w->data, &error);
                                if (r < 0) {
                                        if (!sandbox_error_is_set(&error))
                                                sandbox_error_set_errno(&error, -r, "Failed to start: %m");
                                        w->fail(w->data, &error);
                                }
                                start_waiter_free(w);
                                again = true;
                                break;
                        }
                        t = template_set_find(&m->templates, w->template_name);
                        if (!t)
                                r = sandbox_error_set(&error, SANDBOX_ERR_NO_SUCH_TEMPLATE,
                                                      "Template '%s' was removed while the create waited.",
                                                      w->template_name);
                        else
                                r = manager_start_sandbox_now(m, t, &w->config, w->owner, false, w->cb, w->userdata,
                                                              &error);
                        if (r < 0)
                                w->cb(NULL, &error, w->userdata);
                        start_waiter_free(w);
                        again = true;
                        break;
                }
        }
        return 0;
}

void manager_start_done(Manager *m, Sandbox *s) {
        s->start_counted = false;
        manager_turn_done(m, s->owner, s->config.tenant);
}

size_t manager_creates_waiting(Manager *m) {
        size_t n = 0;

        for (StartWaiter *w = m->start_waiters; w; w = w->next)
                if (!w->run)
                        n++;
        return n;
}

bool manager_turn_free(Manager *m, uid_t owner, const char *tenant) {
        for (StartWaiter *w = m->start_waiters; w; w = w->next)
                if (w->owner == owner && streq(w->config.tenant, tenant ?: ""))
                        return false;
        return start_slot_free(m, owner, tenant);
}

void manager_turn_taken(Manager *m, uid_t owner, const char *tenant) {
        QuotaBucket *b = quota_bucket(m, owner, tenant, true);

        /* Out of memory for the bucket: the operation goes uncounted, not refused. */
        if (b)
                b->starting++;
}

int manager_turn_wait(Manager *m, uid_t owner, const char *tenant, turn_run_t run, turn_fail_t fail, void *data,
                      SandboxError *error) {
        StartWaiter *w = calloc(1, sizeof(StartWaiter));

        if (!w)
                return sandbox_error_set_errno(error, ENOMEM, "Out of memory.");
        w->owner = owner;
        snprintf(w->config.tenant, sizeof(w->config.tenant), "%s", tenant ?: "");
        w->run = run;
        w->fail = fail;
        w->data = data;
        LIST_APPEND(m->start_waiters, m->start_waiters_tail, w);
        return 0;
}

void manager_turn_done(Manager *m, uid_t owner, const char *tenant) {
        QuotaBucket *b = quota_bucket(m, owner, tenant, false);

        if (b && b->starting > 0)
                b->starting--;
        if (!m->start_waiters || !m->event)
                return;
        /* Not from within the state change: the next start goes from the loop. */
        if (m->start_pump)
                (void) sd_event_source_set_enabled(m->start_pump, SD_EVENT_ONESHOT);
        else
                (void) sd_event_add_defer(m->event, &m->start_pump, on_start_pump, m);
}

int manager_start_admitted(Manager *m, const Template *t, SandboxConfig *config, uid_t owner,
                           sandbox_callback_t cb, void *userdata, SandboxError *error) {
        StartWaiter *w;
        int r;

        /* Behind its own owner's (tenant's) waiting operations, never behind another's. */
        if (manager_turn_free(m, owner, config->tenant))
                return manager_start_sandbox_now(m, t, config, owner, false, cb, userdata, error);

        w = calloc(1, sizeof(StartWaiter));
        if (!w)
                return sandbox_error_set_errno(error, ENOMEM, "Out of memory.");
        w->template_name = strdup(t->name);
        r = w->template_name ? sandbox_config_copy(&w->config, config) : -ENOMEM;
        if (r < 0) {
                free(w->template_name);
                free(w);
                return sandbox_error_set_errno(error, ENOMEM, "Out of memory.");
        }
        w->owner = owner;
        w->cb = cb;
        w->userdata = userdata;
        LIST_APPEND(m->start_waiters, m->start_waiters_tail, w);
        return 0;
}

void manager_start_waiters_abandon(Manager *m, const SandboxError *error) {
        while (m->start_waiters) {
                StartWaiter *w = m->start_waiters;

                LIST_REMOVE_WITH_TAIL(m->start_waiters, m->start_waiters_tail, w);
                if (w->run)
                        w->fail(w->data, error);
                else
                        w->cb(NULL, error, w->userdata);
                start_waiter_free(w);
        }
}

int manager_get_quota(Manager *m, const SandboxCaller *caller, QuotaReport *ret) {
        const char *tenant = isempty(caller->tenant) ? NULL : caller->tenant;
        const QuotaLimits *l = quota_limits_for(m, caller->uid, tenant);
        uint64_t snapshots = 0, snapshot_bytes = 0;
        QuotaBucket *b;
        QuotaUse use;
        int r;

        quota_use_count(m, caller->uid, tenant, &use);
        *ret = (QuotaReport) {};
        quota_whom(caller->uid, tenant, ret->scope, sizeof(ret->scope));
        /* Snapshots: an owner's by sandboxd.conf [Snapshots], a tenant's by [TenantQuota]. */
        if (tenant)
                r = snapshot_usage_tenant(m, tenant, &snapshot_bytes, &snapshots);
        else
                r = snapshot_usage_owner(m, caller->uid, &snapshot_bytes, &snapshots);
        if (r < 0 && r != -ENOENT)
                return r;
        b = quota_bucket(m, caller->uid, tenant, false);

        ret->entries[QUOTA_SANDBOXES] = (QuotaEntry) { QUOTA_SANDBOXES, l->sandboxes, use.sandboxes };
        ret->entries[QUOTA_MEMORY] = (QuotaEntry) { QUOTA_MEMORY, l->memory, use.memory };
        ret->entries[QUOTA_TASKS] = (QuotaEntry) { QUOTA_TASKS, l->tasks, use.tasks };
        ret->entries[QUOTA_DISK] = (QuotaEntry) { QUOTA_DISK, l->disk, use.disk };
        ret->entries[QUOTA_CPU] = (QuotaEntry) { QUOTA_CPU, l->cpu, use.cpu };
        ret->entries[QUOTA_SNAPSHOTS] = (QuotaEntry) { QUOTA_SNAPSHOTS,
                                                       tenant ? l->snapshots : m->settings.snapshots.max_per_owner,
                                                       snapshots };
        ret->entries[QUOTA_SNAPSHOT_BYTES] = (QuotaEntry) {
                QUOTA_SNAPSHOT_BYTES, tenant ? l->snapshot_bytes : m->settings.snapshots.max_bytes_per_owner,
                snapshot_bytes };
        ret->entries[QUOTA_CREATES_PER_SEC] = (QuotaEntry) {
                QUOTA_CREATES_PER_SEC, l->creates_per_sec,
                b ? token_bucket_in_use(&b->bucket, l->creates_per_sec, l->creates_burst,
                                        now_usec(CLOCK_MONOTONIC)) : 0 };
        return 0;
}
