/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "pool-status.h"
#include "sandbox-internal.h"
#include "statistics.h"
#include "workspace.h"

void histogram_init(Histogram *h, const double *bounds, size_t n) {
        *h = (Histogram) { .bounds = bounds, .n = MIN(n, (size_t) STATISTICS_LATENCY_N_BOUNDS) };
}

void histogram_observe(Histogram *h, double value) {
        /* The first bound at or above value; above them all it is only in count (+Inf). */
        for (size_t i = 0; i < h->n; i++)
                if (value <= h->bounds[i]) {
                        h->buckets[i]++;
                        break;
                }
        h->count++;
        h->sum += value;
}

uint64_t histogram_cumulative(const Histogram *h, size_t i) {
        uint64_t c = 0;

        for (size_t k = 0; k <= i && k < h->n; k++)
                c += h->buckets[k];
        return c;
}

void statistics_init(SandboxStatistics *s, uint64_t now) {
        static const double latency_bounds[] = STATISTICS_LATENCY_BOUNDS;

        *s = (SandboxStatistics) { .started_at = now };
        histogram_init(&s->exec_latency, latency_bounds, ELEMENTSOF(latency_bounds));
}

void statistics_exec_done(SandboxStatistics *s, uint64_t duration_usec, bool timed_out, bool oom_killed) {
        s->execs++;
        if (timed_out)
                s->exec_timeouts++;
        if (oom_killed)
                s->oom_kills++;
        histogram_observe(&s->exec_latency, (double) duration_usec / 1e6);
}

void statistics_exec_done_for(Manager *m, const char *tenant, uint64_t duration_usec, bool timed_out,
                              bool oom_killed) {
        SandboxStatistics *t = statistics_of_tenant(m, tenant);

        statistics_exec_done(&m->statistics, duration_usec, timed_out, oom_killed);
        if (t)
                statistics_exec_done(t, duration_usec, timed_out, oom_killed);
}

static TenantStatistics *tenant_find(Manager *m, const char *tenant) {
        for (size_t i = 0; i < m->n_tenant_statistics; i++)
                if (streq(m->tenant_statistics[i].tenant, tenant))
                        return &m->tenant_statistics[i];
        return NULL;
}

/* An entry of a tenant that has no sandbox (the oldest such), to be reused; NULL when
 * every tenant kept has one. */
static TenantStatistics *tenant_reclaim(Manager *m) {
        for (size_t i = 0; i < m->n_tenant_statistics; i++) {
                TenantStatistics *t = &m->tenant_statistics[i];
                bool live = false;

                for (Sandbox *s = m->sandboxes; s && !live; s = s->next)
                        live = streq(sandbox_get_tenant(s), t->tenant);
                if (!live) {
                        /* The newest at the end, as a new one is added. */
                        TenantStatistics keep = *t;

                        memmove(t, t + 1, (m->n_tenant_statistics - i - 1) * sizeof(TenantStatistics));
                        m->tenant_statistics[m->n_tenant_statistics - 1] = keep;
                        return &m->tenant_statistics[m->n_tenant_statistics - 1];
                }
        }
        return NULL;
}

SandboxStatistics *statistics_of_tenant(Manager *m, const char *tenant) {
        TenantStatistics *t, *a;
        char *copy;

        if (!tenant || !*tenant)
                return NULL;
        t = tenant_find(m, tenant);
        if (t)
                return &t->statistics;
        if (m->n_tenant_statistics >= STATISTICS_TENANTS_MAX) {
                t = tenant_reclaim(m);
                if (!t)
                        return NULL;
                copy = strdup(tenant);
                if (!copy)
                        return NULL;
                free(t->tenant);
                t->tenant = copy;
                statistics_init(&t->statistics, m->statistics.started_at);
                return &t->statistics;
        }
        copy = strdup(tenant);
        a = copy ? reallocarray(m->tenant_statistics, m->n_tenant_statistics + 1, sizeof(TenantStatistics)) : NULL;
        if (!a) {
                free(copy);
                return NULL;
        }
        m->tenant_statistics = a;
        t = &a[m->n_tenant_statistics++];
        t->tenant = copy;
        statistics_init(&t->statistics, m->statistics.started_at);
        return &t->statistics;
}

void statistics_tenants_free(Manager *m) {
        for (size_t i = 0; i < m->n_tenant_statistics; i++)
                free(m->tenant_statistics[i].tenant);
        m->tenant_statistics = mfree(m->tenant_statistics);
        m->n_tenant_statistics = 0;
}

void statistics_counters(const SandboxStatistics *s, StatisticsCounter ret[static STATISTICS_N_COUNTERS]) {
        const StatisticsCounter c[STATISTICS_N_COUNTERS] = {
                { "StartedAt",          "startedAt",          s->started_at          },
                { "SandboxesCreated",   "sandboxesCreated",   s->sandboxes_created   },
                { "CreateFailures",     "createFailures",     s->create_failures     },
                { "SandboxesDestroyed", "sandboxesDestroyed", s->sandboxes_destroyed },
                { "Execs",              "execs",              s->execs               },
                { "ExecFailures",       "execFailures",       s->exec_failures       },
                { "ExecTimeouts",       "execTimeouts",       s->exec_timeouts       },
                { "OOMKills",           "oomKills",           s->oom_kills           },
                { "SandboxesRecycled",  "sandboxesRecycled",  s->sandboxes_recycled  },
                { "RecycleFailures",    "recycleFailures",    s->recycle_failures    },
        };

        memcpy(ret, c, sizeof(c));
}

static int count_sandbox(StatisticsReport *r, const char *state, const char *template_name, uint64_t n) {
        SandboxCount *a;

        for (size_t i = 0; i < r->n_sandboxes; i++)
                if (r->sandboxes[i].state == state && streq(r->sandboxes[i].template_name, template_name)) {
                        r->sandboxes[i].count += n;
                        return 0;
                }
        a = reallocarray(r->sandboxes, r->n_sandboxes + 1, sizeof(SandboxCount));
        if (!a)
                return -ENOMEM;
        r->sandboxes = a;
        r->sandboxes[r->n_sandboxes++] = (SandboxCount) { state, template_name, n };
        return 0;
}

int statistics_report(Manager *m, const char *tenant, uint64_t spool_backlog, StatisticsReport *ret) {
        _cleanup_(statistics_report_done) StatisticsReport r = {
                .counters = &m->statistics,
                .spool_backlog = spool_backlog,
                .sandboxes_max = m->settings.max_sandboxes,
                .sandboxes_live = m->n_sandboxes,
                .node = m->settings.fleet_node,
        };
        int k;

        if (tenant && *tenant) {
                TenantStatistics *t = tenant_find(m, tenant);

                statistics_init(&r.none, m->statistics.started_at);
                r.tenant = tenant;
                r.counters = t ? &t->statistics : &r.none;
                r.spool_backlog = 0;
        }
        /* Every live state of every template, at 0 until counted. */
        for (size_t i = 0; i < m->templates.n; i++)
                for (SandboxState st = SANDBOX_STARTING; st < SANDBOX_DEAD; st++) {
                        k = count_sandbox(&r, sandbox_state_to_string(st), m->templates.templates[i]->name, 0);
                        if (k < 0)
                                return k;
                }
        for (Sandbox *s = m->sandboxes; s; s = s->next) {
                /* A dead one is on its way out: the next look will not find it. */
                if (s->state == SANDBOX_DEAD)
                        continue;
                if (r.tenant && !streq(sandbox_get_tenant(s), r.tenant))
                        continue;
                k = count_sandbox(&r, sandbox_state_to_string(s->state), s->template_name, 1);
                if (k < 0)
                        return k;
                if (m->workspaces && (s->workspace || s->state == SANDBOX_STOPPED)) {
                        uint64_t used;
                        /* One sysfs read per workspace once its qgroup is known. */
                        if (workspace_usage(m->workspaces, s->id, &s->workspace_qgroup, &used, NULL) >= 0)
                                r.workspace_bytes_used += used;
                        r.workspace_bytes_max += s->config.disk_max;
                }
        }
        if (!r.tenant && m->workspaces)
                (void) workspace_pool_space(m->workspaces, &r.pool_bytes, &r.pool_bytes_free);
        if (!r.tenant) {
                k = manager_pool_status(m, NULL, &r.pools, &r.n_pools);
                if (k < 0)
                        return k;
        }
        *ret = r;
        /* The report is moved: its counters may point into it. */
        if (r.counters == &r.none)
                ret->counters = &ret->none;
        r = (StatisticsReport) {};
        return 0;
}

void statistics_report_done(StatisticsReport *r) {
        r->sandboxes = mfree(r->sandboxes);
        r->pools = mfree(r->pools);
        r->n_sandboxes = r->n_pools = 0;
}
