/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The daemon's statistics (GetStatistics, on every front end; the HTTP bridge renders them
 * for Prometheus): counters since the daemon started, each incremented at the one place in
 * the core where its event happens, and a histogram of exec latencies. The front ends
 * translate statistics_report(); what counts as what is decided here and in the places
 * that count. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Manager Manager;
typedef struct PoolStatus PoolStatus;

/* Upper bounds of the exec latency buckets, seconds (the +Inf bucket is the count). */
#define STATISTICS_LATENCY_BOUNDS                                                       \
        { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600 }
#define STATISTICS_LATENCY_N_BOUNDS 16U

/* Prometheus's histogram: counts[i] is how many observations were ≤ bounds[i] (cumulative
 * when reported; kept per bucket here), count all of them, sum their total. */
typedef struct Histogram {
        const double *bounds;         /* ascending, n of them */
        size_t n;
        uint64_t buckets[STATISTICS_LATENCY_N_BOUNDS]; /* per bucket: (bounds[i-1], bounds[i]] */
        uint64_t count;
        double sum;
} Histogram;

void histogram_init(Histogram *h, const double *bounds, size_t n);
void histogram_observe(Histogram *h, double value);
/* The cumulative count of bucket i (observations ≤ bounds[i]). */
uint64_t histogram_cumulative(const Histogram *h, size_t i);

typedef struct SandboxStatistics {
        uint64_t started_at;          /* µs CLOCK_REALTIME, when the daemon started */
        uint64_t sandboxes_created;   /* came to run (pool sandboxes included) */
        uint64_t create_failures;     /* started, and did not come to run */
        uint64_t sandboxes_destroyed; /* ended after they ran (also those adopted at start) */
        uint64_t execs;               /* ran to a result: Exec and Start */
        uint64_t exec_failures;       /* could not be run, or lost with their sandbox */
        uint64_t exec_timeouts;       /* killed at their Timeout */
        uint64_t oom_kills;           /* ended by the OOM killer */
        uint64_t sandboxes_recycled;  /* released, reset and kept (recycle.c) */
        uint64_t recycle_failures;    /* released, and destroyed because their reset failed */
        Histogram exec_latency;       /* wall time of each exec that ran, seconds */
} SandboxStatistics;

void statistics_init(SandboxStatistics *s, uint64_t now);

/* The same counters per tenant, for a caller acting for one (GetStatistics): kept from
 * each tenant's first event on, one entry per tenant. */
typedef struct TenantStatistics {
        char *tenant;
        SandboxStatistics statistics;
} TenantStatistics;

/* Tenants whose counters are kept at once. A tenant is any name a delegate (the bridge)
 * gives: beyond this many, a tenant without a sandbox left gives up its entry to a new
 * one (its counters start again at 0 should it come back). */
#define STATISTICS_TENANTS_MAX 4096U

/* tenant's counters, made at its first event; NULL for none ("" or NULL), no memory, or
 * no room (STATISTICS_TENANTS_MAX tenants that all have a sandbox: its events are counted
 * daemon-wide only). */
SandboxStatistics *statistics_of_tenant(Manager *m, const char *tenant);
void statistics_tenants_free(Manager *m);
/* Counts an event of a sandbox of tenant: daemon-wide and the tenant's. */
#define STATISTICS_COUNT(m, tenant, field)                                              \
        do {                                                                            \
                SandboxStatistics *_t = statistics_of_tenant((m), (tenant));            \
                (m)->statistics.field++;                                                \
                if (_t)                                                                 \
                        _t->field++;                                                    \
        } while (0)
/* An exec ran to a result after duration_usec; whether it timed out, or the OOM killer
 * ended it. */
void statistics_exec_done(SandboxStatistics *s, uint64_t duration_usec, bool timed_out, bool oom_killed);
/* The same, daemon-wide and for tenant. */
void statistics_exec_done_for(Manager *m, const char *tenant, uint64_t duration_usec, bool timed_out,
                              bool oom_killed);

/* How many sandboxes are in state of template now. */
typedef struct SandboxCount {
        const char *state;            /* static */
        const char *template_name;    /* the sandbox's: valid until the loop runs again */
        uint64_t count;
} SandboxCount;

/* GetStatistics, for a front end: the counters, the sandboxes by state and template (pool
 * sandboxes included; every template's every live state, 0 when none is in it, so that a
 * gauge drops to 0 rather than vanishing; then those of templates since removed), the pools
 * (all owners'), and how many records wait in the spool for MariaDB (spool_backlog, the
 * recorder's). For a caller acting for a tenant (tenant not NULL): that tenant's counters
 * and sandboxes only, and no pools nor spool (the daemon's, not the tenant's). */
typedef struct StatisticsReport {
        const SandboxStatistics *counters;
        SandboxCount *sandboxes;
        size_t n_sandboxes;
        PoolStatus *pools;
        size_t n_pools;
        uint64_t spool_backlog;
        /* Daemon-wide only: --max-sandboxes=, the sandboxes held now (pool ones too), the
         * fleet node number (0: none). */
        uint64_t sandboxes_max, sandboxes_live;
        unsigned node;
        /* The workspaces on disk of the sandboxes counted (stopped ones included): the
         * bytes their files take, and their DiskMax added up. */
        uint64_t workspace_bytes_used, workspace_bytes_max;
        /* Daemon-wide only: the pool's file system, its size and what is free in it; 0
         * without a pool. */
        uint64_t pool_bytes, pool_bytes_free;
        const char *tenant;           /* the scope: NULL daemon-wide */
        SandboxStatistics none;       /* the counters of a tenant with no event yet */
} StatisticsReport;

/* The counters by name, as D-Bus (dbus) and varlink (varlink) name them, in the order
 * documented in sandboxd-api(7). */
typedef struct StatisticsCounter {
        const char *dbus, *varlink;
        uint64_t value;
} StatisticsCounter;
#define STATISTICS_N_COUNTERS 10U
void statistics_counters(const SandboxStatistics *s, StatisticsCounter ret[static STATISTICS_N_COUNTERS]);

int statistics_report(Manager *m, const char *tenant, uint64_t spool_backlog, StatisticsReport *ret);
void statistics_report_done(StatisticsReport *r);
