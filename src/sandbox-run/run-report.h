/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What sandbox-run prints: --json's object and --profile's REPORT line. Pure. */

#include <stdbool.h>
#include <stdint.h>

#include "run-outcome.h"

/* The numbers of one run, as sandboxd reported them (Exec's info, the execution's record
 * from ListExecutions, the sandbox's FromPool), beside the one sandbox-run measures: how
 * long CreateSandbox took to answer. */
typedef struct RunProfile {
        const char *sandbox_id;
        const char *template;
        bool from_pool;                 /* a warm start */
        uint64_t init_usec;             /* CreateSandbox's round trip */
        uint64_t duration_usec;         /* the handler's process: wall time */
        uint64_t cpu_usec;              /*   user + system CPU time */
        uint64_t max_rss_bytes;         /*   peak resident memory */
        uint64_t memory_limit_bytes;    /* the sandbox's MemoryMax */
        bool recorded;                  /* the record was found; then: */
        uint64_t memory_peak_bytes;     /*   the sandbox's cgroup's high-water mark */
        uint64_t cgroup_cpu_nsec;       /*   the sandbox's cgroup's CPU time during the exec */
} RunProfile;

/* The peak memory to report: the record's cgroup peak, else the process's max RSS. */
uint64_t run_profile_peak_memory(const RunProfile *p);

/* --json's object, one line: {"exitCode", "requestId", "functionName", "result" (the
 * text verbatim) or "error", and "profile" when p is not NULL}. NULL when out of memory. */
char *run_report_json(const RunOutcome *o, const char *request_id, const char *function_name,
                      const RunProfile *p);

/* --profile's line, in the manner of AWS Lambda's REPORT (tab-separated fields). */
char *run_report_profile_line(const char *request_id, const RunProfile *p);
