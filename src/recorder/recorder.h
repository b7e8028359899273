/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The record of every sandbox and every execution. The core reports events here and goes
 * on at once: recording never blocks, delays or fails a sandbox or an execution. The
 * recorder appends each record to a local spool first (the embedded store when no
 * MariaDB is configured) and replays the spool, in order and idempotently, into MariaDB
 * from a writer thread when one is configured. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "events.h"
#include "macro.h"
#include "manager.h"
#include "options.h"

typedef struct Recorder Recorder;

typedef struct RecorderSettings {
        char *spool_dir;          /* default /var/lib/sandboxd/spool */
        char *mariadb_socket;     /* NULL and no host: MariaDB not configured */
        char *mariadb_host;
        unsigned mariadb_port;
        char *mariadb_database;
        char *mariadb_user;
        char *mariadb_password;   /* read from a file / credential, never argv */
        uint64_t retention_sec;   /* prune records older than this; 0 = keep */
        bool enabled;             /* Record=no: nothing recorded, ListExecutions unsupported */
        /* This node's number in a fleet (sandboxd.conf [Fleet] Node=; 0: none). A node's
         * ListExecutions for those who may see every owner's also reads MariaDB, where
         * every node's records are. */
        unsigned fleet_node;
        /* [Fleet] QuotaInterval=: this node's tenants' use goes to MariaDB and the other
         * nodes' is read back this often (recorder_fleet_quota_start()); 0: quotas are
         * per node. */
        uint64_t fleet_quota_interval_sec;
} RecorderSettings;

#define RECORDER_LIST_LIMIT_DEFAULT 100U  /* LIST_EXECUTIONS_LIMIT_MAX at most */
/* ListExecutions reads the spool backwards, at most this much per query, to bound the
 * work one query costs (a few ms of CPU per MiB). */
#define RECORDER_LIST_SCAN_MAX (16U * 1024 * 1024)
/* Queries run on threads of their own, at most this many at a time. */
#define RECORDER_LIST_QUERIES_MAX 4U

int recorder_settings_init(RecorderSettings *s);
void recorder_settings_done(RecorderSettings *s);

/* event: the loop that queries report back to (recorder_list_executions()). */
int recorder_new(sd_event *event, const RecorderSettings *settings, Recorder **ret);
/* Stops the writer thread (it finishes the statement under way, bounded by the
 * connection's timeouts); what it had not replayed stays in the spool for the next start.
 * Queries under way are stopped and their callbacks called with -ECANCELED. Call it on
 * the event loop's thread. */
Recorder *recorder_free(Recorder *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(Recorder *, recorder_free);

/* A fleet's tenant quotas (docs/SCALE-OUT.md): with [Fleet] QuotaInterval= and MariaDB,
 * every interval this node's tenants' use (manager_tenant_uses()) goes to the database
 * and the other nodes' comes back to m (manager_fleet_uses_set()), on a thread: nothing
 * waits for it. Nothing to do (returns 0) without them. Stop it before m goes. */
int recorder_fleet_quota_start(Recorder *r, Manager *m);
void recorder_fleet_quota_stop(Recorder *r);

/* Subscribes r to m's records (sandboxes, executions, templates, snapshots): one of the manager's subscribers,
 * beside the front ends. */
int recorder_subscribe(Recorder *r, Manager *m, ManagerSubscription **ret);

/* Never block, never fail the caller (problems are logged). */
void recorder_sandbox_event(Recorder *r, const SandboxRecordEvent *ev);
void recorder_exec_event(Recorder *r, const ExecRecordEvent *ev);
void recorder_template_event(Recorder *r, const TemplateRecordEvent *ev);
void recorder_snapshot_event(Recorder *r, const SnapshotRecordEvent *ev);

/* How many records (of sandboxes, executions, templates, snapshots) wait in the spool to be written
 * to MariaDB; 0 without MariaDB (nothing is to be written) or without a recorder. */
uint64_t recorder_spool_backlog(Recorder *r);

/* One execution as ListExecutions returns it (sandboxd-api(7)). The strings are UTF-8
 * without NULs: what is not is shown with U+FFFD (a NUL as '?'). */
typedef struct ExecutionRecord {
        char *sandbox_id;
        uint64_t exec_id;
        uid_t owner;
        char *tenant;             /* the sandbox's tenant; "" = none */
        uid_t caller;
        char **argv;
        char *working_directory;  /* "" = the default */
        uint64_t started_at, ended_at;  /* µs CLOCK_REALTIME */
        int exit_status, exit_code, signal;
        bool timed_out, oom_killed;
        uint64_t cpu_usec;
        uint64_t cgroup_cpu_nsec;
        uint64_t cgroup_memory_peak;
        bool disk_known;          /* its sandbox was on disk: its workspace at the end */
        uint64_t disk_bytes_used, disk_bytes_max;
        uint64_t stdout_bytes, stderr_bytes;
} ExecutionRecord;

/* error < 0, or the executions, newest first; they are the recorder's and go when this
 * returns. */
typedef void (*recorder_list_callback_t)(int error, const ExecutionRecord *records, size_t n, void *userdata);

/* Looks up the matching executions in the local spool, which holds every record whether
 * or not MariaDB is reachable; on a node of a fleet, for a filter of any owner's, in
 * MariaDB too (the other nodes' records; this node's spool answers alone when it does not
 * answer). Returns at once: the spool is read on a thread of the
 * query's own, and callback is called on the event loop when it is done, exactly once
 * (with -ECANCELED from recorder_free(), which it must not re-enter). -EBUSY:
 * RECORDER_LIST_QUERIES_MAX queries are under way; callback is not called on failure. */
int recorder_list_executions(Recorder *r, const ExecutionFilter *f, recorder_list_callback_t callback,
                             void *userdata);

/* ListExecutions for a front end. Without a recorder (r NULL: Record=no) NotSupported;
 * checked before the caller is authorized as well, so that nobody is asked for a password
 * for nothing. */
int recorder_check_enabled(const Recorder *r, SandboxError *error);
/* q is authorized already (execution_query_authorize()); Busy when
 * RECORDER_LIST_QUERIES_MAX queries are under way (callback not called). */
int recorder_query_executions(Recorder *r, const ExecutionQuery *q, recorder_list_callback_t callback,
                              void *userdata, SandboxError *error);
