/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "parse-util.h"
#include "quota.h"

static int read_sysctl_u64(const char *path, uint64_t *ret) {
        char buf[64];
        ssize_t n;

        n = read_small_file_at(AT_FDCWD, path, buf, sizeof(buf));
        if (n < 0)
                return (int) n;
        buf[MIN((size_t) n, sizeof(buf) - 1)] = 0;
        buf[strcspn(buf, "\n")] = 0;
        return parse_uint64(buf, ret);
}

int host_resources_read(HostResources *ret) {
        long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
        uint64_t pid_max, threads_max;
        int r;

        if (pages <= 0 || page_size <= 0)
                return -EIO;
        r = read_sysctl_u64("/proc/sys/kernel/pid_max", &pid_max);
        if (r < 0)
                return r;
        /* Every task is a thread too: the smaller of the two runs out first. */
        if (read_sysctl_u64("/proc/sys/kernel/threads-max", &threads_max) >= 0)
                pid_max = MIN(pid_max, threads_max);
        *ret = (HostResources) {
                .memory_total = (uint64_t) pages * (uint64_t) page_size,
                .pid_max = pid_max,
        };
        return 0;
}

int node_ceiling_resolve(NodeCeiling *c, const HostResources *host, char *ret_why, size_t why_size) {
        uint64_t reserve;

        if (c->memory_max == 0) {
                reserve = c->memory_reserve ?: MAX(host->memory_total / 8, NODE_MEMORY_RESERVE_MIN);
                if (reserve + NODE_MEMORY_HEADROOM_MIN > host->memory_total) {
                        snprintf(ret_why, why_size, "MemoryReserve=%" PRIu64 " leaves less than %llu bytes of "
                                 "the host's %" PRIu64 " for sandboxes", reserve, NODE_MEMORY_HEADROOM_MIN,
                                 host->memory_total);
                        return -ERANGE;
                }
                c->memory_max = host->memory_total - reserve;
        } else if (c->memory_max + NODE_MEMORY_HEADROOM_MIN > host->memory_total) {
                snprintf(ret_why, why_size, "MemoryMax=%" PRIu64 " leaves less than %llu bytes of the host's "
                         "%" PRIu64 " to the rest of the system", c->memory_max, NODE_MEMORY_HEADROOM_MIN,
                         host->memory_total);
                return -ERANGE;
        }

        if (c->tasks_max == 0) {
                reserve = MAX(c->tasks_reserve ?: host->pid_max / 8, NODE_TASKS_RESERVE_MIN);
                if (reserve >= host->pid_max) {
                        snprintf(ret_why, why_size, "TasksReserve=%" PRIu64 " leaves no PID of the host's %" PRIu64
                                 " for sandboxes", reserve, host->pid_max);
                        return -ERANGE;
                }
                c->tasks_max = host->pid_max - reserve;
        } else if (c->tasks_max + NODE_TASKS_RESERVE_MIN > host->pid_max) {
                snprintf(ret_why, why_size, "TasksMax=%" PRIu64 " leaves less than %llu of the host's %" PRIu64
                         " PIDs (kernel.pid_max, kernel.threads-max) to the rest of the system", c->tasks_max,
                         NODE_TASKS_RESERVE_MIN, host->pid_max);
                return -ERANGE;
        }

        if (c->starts_in_flight == 0)
                c->starts_in_flight = NODE_STARTS_IN_FLIGHT_DEFAULT;
        if (c->cpu_weight == 0)
                c->cpu_weight = NODE_CPU_WEIGHT_DEFAULT;
        else if (c->cpu_weight >= NODE_CPU_WEIGHT_SYSTEM) {
                snprintf(ret_why, why_size, "CPUWeight=%" PRIu64 " is not below system.slice's %llu",
                         c->cpu_weight, NODE_CPU_WEIGHT_SYSTEM);
                return -ERANGE;
        }
        return 0;
}

static uint64_t stricter(uint64_t a, uint64_t b) {
        if (a == 0)
                return b;
        if (b == 0)
                return a;
        return MIN(a, b);
}

void limit_settings_merge(LimitSettings *ret, const LimitSettings *a, const LimitSettings *b) {
        *ret = (LimitSettings) {
                .max = {
                        .memory_max = stricter(a->max.memory_max, b->max.memory_max),
                        .cpu_quota_per_sec_usec = stricter(a->max.cpu_quota_per_sec_usec,
                                                           b->max.cpu_quota_per_sec_usec),
                        .tasks_max = stricter(a->max.tasks_max, b->max.tasks_max),
                },
                .def = {
                        .memory_max = b->def.memory_max ?: a->def.memory_max,
                        .cpu_quota_per_sec_usec = b->def.cpu_quota_per_sec_usec ?: a->def.cpu_quota_per_sec_usec,
                        .tasks_max = b->def.tasks_max ?: a->def.tasks_max,
                },
                .disk_max = stricter(a->disk_max, b->disk_max),
                .disk_default = b->disk_default ?: a->disk_default,
                .timeout_max = stricter(a->timeout_max, b->timeout_max),
                .timeout_default = b->timeout_default ?: a->timeout_default,
                .output_max = stricter(a->output_max, b->output_max),
                .stdin_max = stricter(a->stdin_max, b->stdin_max),
                .snapshot_max = stricter(a->snapshot_max, b->snapshot_max),
        };
}

static int check_max(const char *name, uint64_t value, uint64_t max, const char *where, SandboxError *error) {
        if (max == 0 || value <= max)
                return 0;
        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                 "%s=%" PRIu64 " exceeds the maximum of %" PRIu64 " (%s).", name, value, max, where);
}

int limit_settings_check_sandbox(const LimitSettings *l, SandboxConfig *c, const char *where, SandboxError *error) {
        SandboxLimits *v = &c->limits;
        int r;

        /* A default is clamped to the maximum: only what the caller asked for is refused. */
        if (v->memory_max == 0 && l->def.memory_max)
                v->memory_max = stricter(l->def.memory_max, l->max.memory_max);
        if (v->cpu_quota_per_sec_usec == 0 && l->def.cpu_quota_per_sec_usec)
                v->cpu_quota_per_sec_usec = stricter(l->def.cpu_quota_per_sec_usec, l->max.cpu_quota_per_sec_usec);
        if (v->tasks_max == 0 && l->def.tasks_max)
                v->tasks_max = stricter(l->def.tasks_max, l->max.tasks_max);
        if (c->disk_max == 0 && l->disk_default)
                c->disk_max = stricter(l->disk_default, l->disk_max);
        if (c->timeout_sec == 0)
                c->timeout_sec = l->timeout_default ? stricter(l->timeout_default, l->timeout_max) : l->timeout_max;

        r = check_max("MemoryMax", v->memory_max, l->max.memory_max, where, error);
        if (r >= 0)
                r = check_max("CPUQuotaPerSecUSec", v->cpu_quota_per_sec_usec, l->max.cpu_quota_per_sec_usec,
                              where, error);
        if (r >= 0)
                r = check_max("TasksMax", v->tasks_max, l->max.tasks_max, where, error);
        if (r >= 0)
                r = check_max("DiskMax", c->disk_max, l->disk_max, where, error);
        if (r >= 0)
                r = check_max("Timeout", c->timeout_sec, l->timeout_max, where, error);
        return r;
}

int limit_settings_check_exec(const LimitSettings *l, ExecConfig *c, SandboxError *error) {
        static const char where[] = "sandboxd.conf [Limits]";
        int r;

        /* As for a sandbox's limits: the default is clamped, only what was asked is refused. */
        if (!c->output_max_set)
                c->output_max = stricter(c->output_max, l->output_max);
        r = check_max("OutputMax", c->output_max, l->output_max, where, error);
        if (r >= 0)
                r = check_max("Stdin", c->stdin_size, l->stdin_max, where, error);
        return r;
}

/* Saturating: DiskMax has no upper bound, and sandboxes made before a quota was set
 * hold what they were given; a sum that wrapped would read as little or no use. */
static void add_saturating(uint64_t *sum, uint64_t v) {
        if (__builtin_add_overflow(*sum, v, sum))
                *sum = UINT64_MAX;
}

void quota_use_add(QuotaUse *u, const SandboxConfig *c) {
        add_saturating(&u->sandboxes, 1);
        add_saturating(&u->memory, c->limits.memory_max);
        add_saturating(&u->tasks, c->limits.tasks_max);
        add_saturating(&u->disk, c->disk_max);
        add_saturating(&u->cpu, c->limits.cpu_quota_per_sec_usec);
}

static const char * const quota_item_table[_QUOTA_ITEM_MAX] = {
        [QUOTA_SANDBOXES]       = "Sandboxes",
        [QUOTA_MEMORY]          = "MemoryMax",
        [QUOTA_TASKS]           = "TasksMax",
        [QUOTA_DISK]            = "DiskMax",
        [QUOTA_CPU]             = "CPUQuotaPerSecUSec",
        [QUOTA_SNAPSHOTS]       = "Snapshots",
        [QUOTA_SNAPSHOT_BYTES]  = "SnapshotBytes",
        [QUOTA_CREATES_PER_SEC] = "CreatesPerSecond",
};

const char *quota_item_to_string(QuotaItem i) {
        return i >= 0 && i < _QUOTA_ITEM_MAX ? quota_item_table[i] : NULL;
}

bool quota_limits_bound_use(const QuotaLimits *l) {
        return l->sandboxes > 0 || l->memory > 0 || l->tasks > 0 || l->disk > 0 || l->cpu > 0;
}

int quota_check(const QuotaLimits *l, const QuotaUse *use, const SandboxConfig *c, const char *whom,
                SandboxError *error) {
        const struct {
                QuotaItem item;
                uint64_t limit, use, add;
        } items[] = {
                { QUOTA_SANDBOXES, l->sandboxes, use->sandboxes, 1 },
                { QUOTA_MEMORY,    l->memory,    use->memory,    c->limits.memory_max },
                { QUOTA_TASKS,     l->tasks,     use->tasks,     c->limits.tasks_max },
                { QUOTA_DISK,      l->disk,      use->disk,      c->disk_max },
                { QUOTA_CPU,       l->cpu,       use->cpu,       c->limits.cpu_quota_per_sec_usec },
        };

        for (size_t i = 0; i < ELEMENTSOF(items); i++) {
                if (items[i].limit == 0 || items[i].add <= items[i].limit - MIN(items[i].use, items[i].limit))
                        continue;
                if (items[i].item == QUOTA_SANDBOXES)
                        return sandbox_error_set_quota(error, quota_item_to_string(items[i].item), items[i].limit,
                                                       items[i].use, "Quota exceeded: %s has %" PRIu64 " of %"
                                                       PRIu64 " sandboxes (Sandboxes=).", whom, items[i].use,
                                                       items[i].limit);
                return sandbox_error_set_quota(error, quota_item_to_string(items[i].item), items[i].limit,
                                               items[i].use, "Quota exceeded: %s=%" PRIu64 " does not fit the %s "
                                               "quota of %s: limit %" PRIu64 ", in use %" PRIu64 ".",
                                               quota_item_to_string(items[i].item), items[i].add,
                                               quota_item_to_string(items[i].item), whom, items[i].limit,
                                               items[i].use);
        }
        return 0;
}

static void token_bucket_refill(TokenBucket *b, uint64_t rate, uint64_t burst, uint64_t now_usec) {
        double cap = (double) (burst ?: rate);

        if (!b->used) {
                *b = (TokenBucket) { .tokens = cap, .last_usec = now_usec, .used = true };
                return;
        }
        if (now_usec > b->last_usec)
                b->tokens = MIN(cap, b->tokens + (double) (now_usec - b->last_usec) * (double) rate / 1e6);
        b->last_usec = MAX(b->last_usec, now_usec);
}

bool token_bucket_take(TokenBucket *b, uint64_t rate, uint64_t burst, uint64_t now_usec) {
        if (rate == 0)
                return true;
        token_bucket_refill(b, rate, burst, now_usec);
        if (b->tokens < 1.0)
                return false;
        b->tokens -= 1.0;
        return true;
}

uint64_t token_bucket_in_use(const TokenBucket *b, uint64_t rate, uint64_t burst, uint64_t now_usec) {
        TokenBucket copy = *b;
        double cap = (double) (burst ?: rate);

        if (rate == 0 || !b->used)
                return 0;
        token_bucket_refill(&copy, rate, burst, now_usec);
        return (uint64_t) (cap - copy.tokens + 0.5);
}
