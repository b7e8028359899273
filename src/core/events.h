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
        char * const *labels;     /* the sandbox's labels (labels.h), NULL for none */
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
        /* Its workspace on disk at the end: bytes its files take, and DiskMax. Only for a
         * sandbox on disk (disk_known); in memory the files are in cgroup_memory_peak. */
        bool disk_known;
        uint64_t disk_bytes_used, disk_bytes_max;
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

/* What happened to a snapshot (snapshot.h): taken (Snapshot, and the snapshot half of Fork
 * and Hibernate), restored into a sandbox (CreateSandbox FromSnapshot, Fork's new sandbox,
 * Wake), removed (RemoveSnapshot, retention, and Fork's and Wake's once restored). */
typedef enum SnapshotEventKind {
        SNAPSHOT_EVENT_TAKEN,
        SNAPSHOT_EVENT_RESTORED,
        SNAPSHOT_EVENT_REMOVED,
        _SNAPSHOT_EVENT_KIND_MAX,
} SnapshotEventKind;

/* The operation it was part of. */
typedef enum SnapshotEventCause {
        SNAPSHOT_CAUSE_SNAPSHOT,        /* Snapshot */
        SNAPSHOT_CAUSE_FORK,
        SNAPSHOT_CAUSE_HIBERNATE,       /* Hibernate, also IdleAction=hibernate */
        SNAPSHOT_CAUSE_CREATE,          /* CreateSandbox with FromSnapshot */
        SNAPSHOT_CAUSE_WAKE,
        SNAPSHOT_CAUSE_REMOVE,          /* RemoveSnapshot */
        SNAPSHOT_CAUSE_RETENTION,       /* [Snapshots] Retention= */
        _SNAPSHOT_CAUSE_MAX,
} SnapshotEventCause;

const char *snapshot_event_kind_to_string(SnapshotEventKind k);
const char *snapshot_event_cause_to_string(SnapshotEventCause c);
/* Whether cause can be the cause of an event of kind k (the pairs the core reports). */
bool snapshot_event_cause_fits(SnapshotEventKind k, SnapshotEventCause c);

typedef struct SnapshotRecordEvent {
        SnapshotEventKind kind;
        SnapshotEventCause cause;
        const char *snapshot_id;  /* with kind and sandbox_id: the record's idempotent key */
        const char *source;       /* the sandbox it was taken of */
        const char *sandbox_id;   /* restored: the sandbox it was restored into; else NULL */
        uid_t owner;              /* the snapshot's owner */
        const char *tenant;       /* "" for none */
        uint64_t size;            /* bytes of the compressed stream */
        uint64_t content_size;    /* the files' bytes */
        uint64_t time;            /* µs CLOCK_REALTIME */
} SnapshotRecordEvent;
