/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the core reports happened, for whoever keeps a record of it (the recorder, in
 * src/recorder/, subscribes through ManagerHooks). The core fills these on the event loop
 * and forgets them when the hook returns. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "options.h"

/* The most of each output stream an ExecRecordEvent carries, verbatim. */
#define EXEC_EVENT_EXCERPT_MAX 4096U

typedef struct SandboxRecordEvent {
        const char *sandbox_id;
        const char *template_name;
        const char *payload;      /* "bwrap", "docker" */
        uid_t owner;
        const SandboxConfig *config;
        uint64_t created_at;      /* µs CLOCK_REALTIME */
        uint64_t destroyed_at;    /* 0 while it runs */
        const char *end_reason;   /* NULL while it runs; "destroyed", "timeout", "failed: …" */
} SandboxRecordEvent;

typedef struct ExecRecordEvent {
        const char *sandbox_id;
        uint64_t exec_id;         /* with sandbox_id: the record's idempotent key */
        uid_t owner;              /* the sandbox's owner: who may read the record */
        const char *tenant;       /* the sandbox's tenant, "" for none: who else may */
        uid_t caller;
        char * const *argv;
        const char *working_directory;
        bool background;
        uint64_t started_at;      /* µs CLOCK_REALTIME */
        uint64_t ended_at;
        int exit_status, exit_code, signal;
        bool timed_out, oom_killed, truncated;
        uint64_t cpu_usec;        /* the process's own (rusage) */
        uint64_t cgroup_cpu_nsec; /* the sandbox unit's cgroup, during the exec */
        uint64_t cgroup_memory_peak; /* the unit's cgroup high-water mark, bytes */
        uint64_t stdout_bytes, stderr_bytes;
        const void *stdout_excerpt; size_t stdout_excerpt_size; /* capped, verbatim bytes */
        const void *stderr_excerpt; size_t stderr_excerpt_size;
} ExecRecordEvent;

/* A template as the daemon loaded it: at start, or created through the API. */
typedef struct TemplateRecordEvent {
        const char *name;
        const char *payload;
        const char *description;
        uint64_t loaded_at;       /* µs CLOCK_REALTIME */
} TemplateRecordEvent;
