/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "pool-status.h"
#include "sandbox-internal.h"
#include "statistics.h"

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

static int count_sandbox(StatisticsReport *r, const char *state, const char *template_name) {
        SandboxCount *a;

        for (size_t i = 0; i < r->n_sandboxes; i++)
                if (r->sandboxes[i].state == state && streq(r->sandboxes[i].template_name, template_name)) {
                        r->sandboxes[i].count++;
                        return 0;
                }
        a = reallocarray(r->sandboxes, r->n_sandboxes + 1, sizeof(SandboxCount));
        if (!a)
                return -ENOMEM;
        r->sandboxes = a;
        r->sandboxes[r->n_sandboxes++] = (SandboxCount) { state, template_name, 1 };
        return 0;
}

int statistics_report(Manager *m, uint64_t spool_backlog, StatisticsReport *ret) {
        _cleanup_(statistics_report_done) StatisticsReport r = {
                .counters = &m->statistics,
                .spool_backlog = spool_backlog,
        };
        int k;

        for (Sandbox *s = m->sandboxes; s; s = s->next) {
                /* A dead one is on its way out: the next look will not find it. */
                if (s->state == SANDBOX_DEAD)
                        continue;
                k = count_sandbox(&r, sandbox_state_to_string(s->state), s->template_name);
                if (k < 0)
                        return k;
        }
        k = manager_pool_status(m, NULL, &r.pools, &r.n_pools);
        if (k < 0)
                return k;
        *ret = r;
        r = (StatisticsReport) {};
        return 0;
}

void statistics_report_done(StatisticsReport *r) {
        r->sandboxes = mfree(r->sandboxes);
        r->pools = mfree(r->pools);
        r->n_sandboxes = r->n_pools = 0;
}
