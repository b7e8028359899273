/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Many tenants on one node (docs/QUOTAS.md): the ceilings of sandbox.slice, the admin's
 * maxima and defaults of every limit a caller chooses, and the quotas of each owner and
 * each tenant. The arithmetic is here, pure and unit-tested; the manager counts the use
 * and applies the ceilings to the slice. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "options.h"
#include "sandbox-errors.h"

/* sandboxd.conf [Node]: what all sandboxes together may take (sandbox.slice's MemoryMax=,
 * TasksMax=, CPUWeight=). 0 = computed from the host (node_ceiling_resolve()). */
typedef struct NodeCeiling {
        uint64_t memory_max;
        uint64_t memory_reserve;  /* kept for the rest of the host when memory_max is computed */
        uint64_t tasks_max;
        uint64_t tasks_reserve;   /* PIDs kept for the rest of the host */
        uint64_t cpu_weight;      /* below system.slice's (100 unless changed) */
        uint64_t starts_in_flight; /* per owner or tenant: the rest wait their turn; 0: default */
        bool apply;               /* Ceilings=no: leave sandbox.slice as its unit file says */
} NodeCeiling;

/* What the host has, read once at start. */
typedef struct HostResources {
        uint64_t memory_total;
        uint64_t pid_max;         /* min(kernel.pid_max, kernel.threads-max) */
} HostResources;

#define NODE_MEMORY_RESERVE_MIN (1024ULL * 1024 * 1024)
#define NODE_MEMORY_HEADROOM_MIN (256ULL * 1024 * 1024) /* a set MemoryMax= must leave this much */
#define NODE_TASKS_RESERVE_MIN 1024ULL
#define NODE_CPU_WEIGHT_DEFAULT 50ULL
#define NODE_CPU_WEIGHT_SYSTEM 100ULL
/* Starts (StartTransientUnit and the payload's boot) one owner or tenant has in flight;
 * its next creates wait in sandboxd, so that systemd's one job queue holds at most this
 * many of each and one tenant's flood does not stall another's create. */
#define NODE_STARTS_IN_FLIGHT_DEFAULT 16ULL

int host_resources_read(HostResources *ret);
/* Fills what c leaves 0 from the host: memory minus the reserve (by default an eighth of
 * it, at least NODE_MEMORY_RESERVE_MIN), the PIDs minus an eighth (at least
 * NODE_TASKS_RESERVE_MIN), NODE_CPU_WEIGHT_DEFAULT. Refuses
 * (-ERANGE, with a message for the log in ret_why) a ceiling the host cannot honour: more
 * memory than the host's minus NODE_MEMORY_HEADROOM_MIN, more tasks than its PIDs minus
 * NODE_TASKS_RESERVE_MIN, a weight outside 1…NODE_CPU_WEIGHT_SYSTEM-1. */
int node_ceiling_resolve(NodeCeiling *c, const HostResources *host, char *ret_why, size_t why_size);

/* sandboxd.conf [Limits] (and a template's "maxima"): the largest value a caller may ask for
 * and the value it gets when it asks for none; 0 = the built-in. */
typedef struct LimitSettings {
        SandboxLimits max;
        SandboxLimits def;
        uint64_t disk_max, disk_default;
        uint64_t timeout_max, timeout_default;  /* a sandbox's lifetime, s; default 0 = none */
        uint64_t output_max, stdin_max;         /* an exec's */
        uint64_t snapshot_max;                  /* bytes of one snapshot */
} LimitSettings;

/* The stricter of a and b for every maximum (0: unbounded), b's default where it sets one. */
void limit_settings_merge(LimitSettings *ret, const LimitSettings *a, const LimitSettings *b);
/* Applies the defaults to what c did not ask for, then refuses (InvalidOption, naming the
 * maximum and where it is set) what exceeds a maximum. where: "sandboxd.conf [Limits]" or the
 * template. */
int limit_settings_check_sandbox(const LimitSettings *l, SandboxConfig *c, const char *where, SandboxError *error);
int limit_settings_check_exec(const LimitSettings *l, ExecConfig *c, SandboxError *error);

/* sandboxd.conf [OwnerQuota] and [TenantQuota]: the sums every owner (uid, for its
 * sandboxes for no tenant) and every tenant may hold at once; 0 = unbounded. */
typedef struct QuotaLimits {
        uint64_t sandboxes;
        uint64_t memory;          /* the sum of MemoryMax */
        uint64_t tasks;           /* the sum of TasksMax */
        uint64_t disk;            /* the sum of DiskMax */
        uint64_t cpu;             /* the sum of CPUQuotaPerSecUSec */
        uint64_t creates_per_sec; /* a token bucket: this many per second … */
        uint64_t creates_burst;   /* … up to this many at once (0: creates_per_sec) */
        uint64_t snapshots;       /* [TenantQuota] only: snapshots stored (an owner's are */
        uint64_t snapshot_bytes;  /* sandboxd.conf [Snapshots] MaxPerOwner=, MaxBytesPerOwner=) */
} QuotaLimits;

typedef struct QuotaSettings {
        QuotaLimits owner;
        QuotaLimits tenant;
} QuotaSettings;

/* sandboxd.conf's sections of this file: [Node], [Limits], [OwnerQuota], [TenantQuota]. */
typedef struct TenancySettings {
        NodeCeiling node;
        LimitSettings limits;
        QuotaSettings quota;
} TenancySettings;

/* What one owner or tenant holds. */
typedef struct QuotaUse {
        uint64_t sandboxes, memory, tasks, disk, cpu;
} QuotaUse;

void quota_use_add(QuotaUse *u, const SandboxConfig *c);

/* One tenant's use (a fleet's quotas: manager_tenant_uses()). */
typedef struct TenantUse {
        char tenant[SANDBOX_NAME_MAX + 1];
        QuotaUse use;
} TenantUse;

/* The items GetQuota reports and QuotaExceeded names. */
typedef enum QuotaItem {
        QUOTA_SANDBOXES,
        QUOTA_MEMORY,
        QUOTA_TASKS,
        QUOTA_DISK,
        QUOTA_CPU,
        QUOTA_SNAPSHOTS,
        QUOTA_SNAPSHOT_BYTES,
        QUOTA_CREATES_PER_SEC,
        _QUOTA_ITEM_MAX,
} QuotaItem;

/* "Sandboxes", "MemoryMax", …, "CreatesPerSecond": the option's name where there is one. */
const char *quota_item_to_string(QuotaItem i);

/* Does l bound anything that is counted over the live sandboxes (quota_check() has work)? */
bool quota_limits_bound_use(const QuotaLimits *l);

/* Whether one more sandbox of config c fits under l next to use: 0, or QuotaExceeded
 * (-EDQUOT) naming the first item that does not fit, its limit and the use, for whom
 * ("owner 1000", "tenant acme"). */
int quota_check(const QuotaLimits *l, const QuotaUse *use, const SandboxConfig *c, const char *whom,
                SandboxError *error);

/* A token bucket of rate tokens a second holding at most burst; full when new. */
typedef struct TokenBucket {
        double tokens;
        uint64_t last_usec;
        bool used;
} TokenBucket;

/* Takes one token at now_usec: true, or false when the bucket is empty. rate 0: always true. */
bool token_bucket_take(TokenBucket *b, uint64_t rate, uint64_t burst, uint64_t now_usec);
/* Tokens taken and not yet refilled, at now_usec (what GetQuota reports as the use). */
uint64_t token_bucket_in_use(const TokenBucket *b, uint64_t rate, uint64_t burst, uint64_t now_usec);

/* One line of GetQuota. */
typedef struct QuotaEntry {
        QuotaItem item;
        uint64_t limit;  /* 0: unbounded */
        uint64_t use;
} QuotaEntry;

typedef struct QuotaReport {
        char scope[SANDBOX_NAME_MAX + 16];  /* "owner 1000", "tenant acme" */
        QuotaEntry entries[_QUOTA_ITEM_MAX];
} QuotaReport;
