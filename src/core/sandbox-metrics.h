/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A running sandbox's live metrics: what its unit's cgroup accounted so far, and how full
 * its /work and /tmp are. */

#include <stdint.h>

#include "sandbox-errors.h"

typedef struct Sandbox Sandbox;

/* A value that could not be had (e.g. no pids controller on the host). */
#define SANDBOX_METRIC_UNKNOWN UINT64_MAX

typedef struct SandboxMetrics {
        uint64_t cpu_usage_nsec;        /* CPU time of the whole unit so far */
        uint64_t memory_current;        /* bytes, page cache and tmpfs included */
        uint64_t memory_peak;           /* bytes */
        uint64_t tasks_current;         /* processes and threads */
        uint64_t work_bytes_used;       /* of the /work tmpfs */
        uint64_t tmp_bytes_used;        /* of the /tmp tmpfs */
        /* What its files take of its disk, /work and /tmp together, and the limit: on disk
         * its workspace's qgroup (data and metadata), in memory the two tmpfs. */
        uint64_t disk_bytes_used;
        uint64_t disk_bytes_max;
} SandboxMetrics;

/* The one id of key ("Uid", "Gid") in /proc/<pid>/status text, if its real, effective,
 * saved and file system ids are the same (-EPERM if not). Pure, for the tests. */
int proc_status_parse_id(const char *text, const char *key, uint32_t *ret);

/* Whether /proc/<pid>/status text puts the process in a pid namespace below the reader's
 * (its NSpid: line has more than one pid): 1 or 0. Pure, for the tests. */
int proc_status_nested(const char *text);

/* Reads them now: small files of the cgroup and of /proc, nothing that waits (also while
 * the sandbox is paused). NotRunning: s is not running or paused. */
int sandbox_get_metrics(Sandbox *s, SandboxMetrics *ret, SandboxError *error);

/* The metrics by name, as D-Bus (dbus) and varlink (varlink) name them, in the order
 * documented; a value of SANDBOX_METRIC_UNKNOWN is left out by both. */
typedef struct SandboxMetricField {
        const char *dbus, *varlink;
        uint64_t value;
} SandboxMetricField;
#define SANDBOX_N_METRICS 8U
void sandbox_metrics_fields(const SandboxMetrics *m, SandboxMetricField ret[static SANDBOX_N_METRICS]);
