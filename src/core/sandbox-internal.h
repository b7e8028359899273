/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The structures behind Manager, Sandbox and Exec, shared by the core's own files only. */

#include "cgroup.h"
#include "context.h"
#include "docker-api.h"
#include "egress.h"
#include "file-op.h"
#include "manager.h"
#include "mount-renew.h"
#include "payload.h"
#include "payload-backend.h"
#include "pool.h"
#include "recycle.h"
#include "sandbox-logs.h"
#include "scope.h"
#include "statistics.h"
#include "template.h"

/* Ended background processes kept for their results, per sandbox. */
#define SANDBOX_FINISHED_MAX 64U

typedef struct DestroyWaiter DestroyWaiter;
typedef struct FileOp FileOp;
typedef struct PortRequest PortRequest;
typedef struct RecycleWaiter RecycleWaiter;
/* Who a sandbox is for, beside its SandboxState (what it does). Only sandbox_set_custody()
 * changes it, along the transitions in sandbox.c, and each custody allows only some
 * states (asserted both ways): a kept sandbox is never paused nor starting. */
typedef enum SandboxCustody {
        SANDBOX_OWNED,     /* its owner's: listed, on the bus, recorded */
        SANDBOX_POOLED,    /* started for the warm pool: nobody's yet, invisible */
        SANDBOX_RESETTING, /* released by its user, being reset (recycle.c): invisible, its record closed */
        SANDBOX_KEPT,      /* released and reset: kept for the owner that released it only */
        _SANDBOX_CUSTODY_MAX,
} SandboxCustody;

/* Its systemd unit, as far as sandboxd's jobs go; only sandbox_set_unit_state() changes it. */
typedef enum SandboxUnitState {
        SANDBOX_UNIT_NONE,     /* not asked for */
        SANDBOX_UNIT_STARTING, /* StartTransientUnit in flight */
        SANDBOX_UNIT_STARTED,  /* there, or may be (a failed start can leave it): stopping asks systemd */
        SANDBOX_UNIT_STOPPING, /* StopUnit in flight */
        SANDBOX_UNIT_STOPPED,  /* the stop job ended */
        _SANDBOX_UNIT_STATE_MAX,
} SandboxUnitState;

/* A Pause or Resume in flight (FreezeUnit/ThawUnit, or SIGSTOP/SIGCONT): only
 * sandbox_set_freeze() changes it. PAUSING only while running, RESUMING only while paused
 * (either also as the sandbox goes); it settles (NONE) before the state changes, so that
 * a paused sandbox is never still pausing. */
typedef enum SandboxFreeze {
        SANDBOX_FREEZE_NONE,
        SANDBOX_FREEZE_PAUSING,
        SANDBOX_FREEZE_RESUMING,
        _SANDBOX_FREEZE_MAX,
} SandboxFreeze;

/* Whether a command (an Exec, a context's run) ran in it since it started or was last
 * reset: an ephemeral sandbox takes one only. Only sandbox_set_use() changes it: USED
 * while its owner has it, FRESH again only by a reset that kept it (recycle.c). */
typedef enum SandboxUse {
        SANDBOX_FRESH,
        SANDBOX_USED,
        _SANDBOX_USE_MAX,
} SandboxUse;

struct DestroyWaiter {
        sandbox_callback_t cb;
        void *userdata;
        DestroyWaiter *next;
};

struct Exec {
        Sandbox *sandbox;
        uint64_t id;
        ExecConfig config;
        int out_fd;
        int err_fd;
        sd_event_source *out_source;
        sd_event_source *err_source;
        sd_event_source *timeout_source;
        /* The caller's own stdout and stderr, forwarded and counted (exec-forward.h); at
         * the end the result waits (at most EXEC_FORWARD_WAIT_USEC) until they are out. */
        struct ExecForward *forward[2];
        sd_event_source *forward_timer;
        struct agent_exit pending_exit;
        bool forward_waiting;
        bool fds_stored;      /* a background process's pipes are in systemd's fd store */
        bool output_lost;     /* adopted after a crash: what sandboxd had read of it is gone */
        uint64_t oom_kills_before;
        uint64_t timeout_left_usec;   /* while the sandbox is paused */
        bool timed_out;
        bool exited;          /* result is final, waiting only to be delivered */
        pid_t pid;            /* inside the sandbox, from the agent's "started" */
        /* For the record (only while recording): taken when the exec starts and ends; the
         * record itself is written after the caller has its answer. */
        uint64_t started_at;  /* µs CLOCK_REALTIME */
        uint64_t ended_at;
        uint64_t cgroup_cpu_before;
        uint64_t cgroup_cpu;  /* the unit's CPU time while it ran */
        uint64_t cgroup_memory_peak;
        bool disk_known;      /* its sandbox's workspace, at the end */
        uint64_t disk_bytes_used;
        bool record_pending;
        ExecResult result;
        struct ExecWaiter *waiters;
        /* StdinPipe: the write end of the process's input (non-blocking), what waits for
         * room in it, and whether to close it once that is written; -EBADF otherwise. */
        int stdin_fd;
        sd_event_source *stdin_source;
        char *stdin_pending;
        size_t stdin_pending_size;
        bool stdin_close_pending;
        /* Resizes of its terminal the agent has not yet said done: input waits meanwhile
         * (so what is typed after a resize meets the new size), at most
         * EXEC_RESIZE_WAIT_USEC (an agent older than protocol version 6 never says). */
        unsigned resizes_unanswered;
        size_t stdin_unheld;  /* of stdin_pending, what was written before the resize */
        sd_event_source *resize_timer;
        /* Who reads the output live (exec_follow()); while any holds, the pipes wait. */
        struct ExecFollower *followers;
        unsigned n_holds;
        exec_callback_t cb;
        void *userdata;
        Exec *next, *prev;
};

struct Sandbox {
        Manager *manager;
        char id[SANDBOX_ID_LEN + 1];
        char *template_name;
        const PayloadOps *payload_ops;
        void *payload_state;      /* the backend's own (payload.h) */
        char *unit;               /* sandbox-<id>.scope; a Docker sandbox under systemd's cgroup driver: .slice */
        char subslice[SANDBOX_SUBSLICE_NAME_MAX]; /* sandbox-xx.slice, the scope's (sandbox_subslice_name()) */
        char *description;
        char *cgroup;
        CgroupFile cgroup_cpu_file;          /* kept open: read at every exec's start and end */
        CgroupFile cgroup_memory_peak_file;
        char **environment;   /* the template's, merged under each exec's own */
        /* Secrets= as read from the store when it was made or adopted (secret-store.h):
         * never persisted, logged or answered. The values are the bindings' own, in order;
         * secret_environment the NAME=value of those bound as variables (between the
         * template's environment and each exec's own). */
        struct SecretBinding *secret_bindings;
        char **secret_values;
        size_t n_secrets;
        char **secret_environment;
        /* With a header bound (NAME@HOST:HEADER): the CA the proxy mints its certificates
         * with, PEM; the sandbox trusts the certificate and never sees the key. */
        char *egress_ca_cert, *egress_ca_key;
        uid_t owner;
        uid_t host_uid;
        SandboxState state;
        SandboxCustody custody;
        SandboxConfig config;
        uint64_t created_at;

        int control_fd;
        unsigned log_budget;      /* lines of its payload's stderr still logged (sandbox_payload_log) */
        sd_event_source *control_source;
        int egress_fd;            /* the agent's listener of 127.0.0.1:3128 (egress.h); -EBADF */
        bool egress_pending;      /* not yet handed to sandboxd-egress */
        sd_event_source *timer_source; /* start deadline, then lifetime */
        sd_event_source *idle_source;
        sd_event_source *finalize_source;
        uint64_t deadline_realtime;
        uint64_t lifetime_left_usec;  /* paused: what was left of the lifetime (it does not run) */

        const char *pause_method;     /* while paused: "freeze" or "sigstop" */
        SandboxFreeze freeze;         /* a Pause or Resume in flight */
        unsigned snapshot_turns_waiting; /* its snapshots (forks, hibernations) queued for a turn */
        sandbox_callback_t pause_cb;
        void *pause_userdata;

        SandboxUnitState unit_state;
        SandboxUse use;       /* a command ran (an ephemeral sandbox takes one) */
        bool saved;           /* state file (and, if fd_stored, fd store entry) exist */
        bool fd_stored;       /* its control socket is in systemd's fd store */
        bool detaching;       /* sandboxd stops and leaves it running: its stored descriptors stay */
        bool workspace;       /* its /work and /tmp are its workspace on disk, removed with it */
        bool woken;           /* started again from stopped, in the workspace it had */
        bool keep_files;      /* stopping for Hibernate on disk: its workspace stays, listed stopped */
        uint64_t workspace_qgroup; /* its workspace's qgroup id once learnt (workspace_usage()); 0 */
        /* A fork on disk: its workspace a snapshot of this sandbox's ("": none), made as
         * it starts. */
        char clone_from[SANDBOX_ID_LEN + 1];
        uid_t clone_from_uid;
        WorkspaceCall *workspace_call; /* its workspace being made (created, snapshotted) */
        bool start_counted;   /* one of its owner's (tenant's) starts in flight (manager-quota.c) */
        bool from_pool;       /* handed out by the warm pool (a warm start), not started for its owner */
        /* Recycling (recycle.c): its user is done with it. It is reset (SANDBOX_RESETTING),
         * then kept (SANDBOX_KEPT) in the pooled chain for the same owner, tenant, template
         * and limits only; no one else sees it meanwhile. */
        bool template_changed;    /* its template was replaced since it started: not recycled */
        uint64_t reset_id;        /* the agent's "reset" in flight */
        uint64_t reset_started, reset_agent_done; /* µs CLOCK_MONOTONIC, for the log */
        unsigned recycles;        /* times it was reset and handed out again */
        bool record_closed;       /* its record ended at its release: none at its end */
        sandbox_callback_t recycle_cb; /* the release's caller: once it is reset, or gone */
        void *recycle_userdata;
        RecycleWaiter *recycle_waiter; /* a create of its owner's waiting for its reset */
        char *failure;        /* why it is going away, if not asked to */

        Exec *execs;          /* running */
        Exec *finished;       /* background processes that ended, newest first */
        unsigned n_finished;
        FileOp *file_ops;
        Context *contexts;       /* code contexts (context.h), newest first */
        unsigned n_contexts;
        /* Ports (port.h): the requests under way. */
        PortRequest *port_requests;
        uint64_t next_exec_id;   /* ids of execs and file operations alike */

        sandbox_callback_t create_cb;
        void *create_userdata;
        DestroyWaiter *start_waiters; /* CreateSandbox with ReuseExisting while it starts */
        DestroyWaiter *waiters;

        Sandbox *next, *prev;
        Sandbox *id_next, *uid_next;  /* in the manager's by_id and by_uid buckets */
        Sandbox *pool_next;           /* in the manager's pooled chain, while not SANDBOX_OWNED */
};

/* Changes who s is for (asserting the transition is one of sandbox.c's). */
void sandbox_set_custody(Sandbox *s, SandboxCustody custody);
void sandbox_set_unit_state(Sandbox *s, SandboxUnitState state);
void sandbox_set_freeze(Sandbox *s, SandboxFreeze freeze);
void sandbox_set_use(Sandbox *s, SandboxUse use);
/* A Pause or Resume is in flight: neither another, nor what needs it settled, may start. */
static inline bool sandbox_freeze_pending(const Sandbox *s) {
        return s->freeze != SANDBOX_FREEZE_NONE;
}
/* Nobody's to see: in the warm pool, or released (being reset or kept). */
static inline bool sandbox_is_pooled(const Sandbox *s) {
        return s->custody != SANDBOX_OWNED;
}
/* Released by its user: being reset, or kept for its owner. */
static inline bool sandbox_is_released(const Sandbox *s) {
        return s->custody == SANDBOX_RESETTING || s->custody == SANDBOX_KEPT;
}
/* Its reset is under way (not once it is stopping: then it is no longer to be kept). */
static inline bool sandbox_is_resetting(const Sandbox *s) {
        return s->custody == SANDBOX_RESETTING && s->state == SANDBOX_RUNNING;
}
/* Reset and kept, ready for its owner's next create. */
static inline bool sandbox_is_kept(const Sandbox *s) {
        return s->custody == SANDBOX_KEPT && s->state == SANDBOX_RUNNING;
}

#define MANAGER_BUCKETS 4096U

struct Manager {
        sd_event *event;
        sd_bus *bus;
        SystemdClient *systemd;
        ManagerSettings settings;
        TemplateSet templates;
        SystemBounds bounds;
        ManagerSubscription *subscriptions, *subscriptions_tail;
        unsigned notifying;     /* hooks are being called: unsubscribing only marks */
        int seccomp_fd;
        DockerClient *docker;
        /* The payload backends by kind: payload_ops_get()'s, set by manager_new(); the unit
         * tests put a fake in their place (tests/unit/fake-payload.h). */
        const PayloadOps *payload_ops[_PAYLOAD_KIND_MAX];
        EgressClient *egress;
        RenewServer *renew_server; /* started at the first recycling reset */
        WorkspacePool *workspaces; /* NULL: no pool, Storage=tmpfs only (workspaces_missing says why) */
        const char *workspaces_missing;
        RecycleWaiter *waiters_going_on; /* creates that waited for a reset, about to go on */
        PayloadHost payload_host; /* what the payload backends see (payload-backend.h) */

        char *sandboxes_dir;    /* state files of the running sandboxes */
        /* systemd's own cgroup ("" on a host, "/name" for a systemd without a cgroup
         * namespace of its own): what its ControlGroup paths start with. Learnt from the
         * first sandbox's ControlGroup; NULL until then. */
        char *systemd_cgroup_root;
        char *etc_root;         /* the templates' generated /etc trees (etc-tree.h) */
        sd_event_source *pool_timer;
        sd_event_source *snapshot_retention; /* snapshot.c */
        struct SnapshotImport *snapshot_imports; /* snapshot.c: imports under way */
        struct WorkspaceExport *workspace_exports; /* workspace-export.c: exports under way */
        bool draining;
        void (*pool_drained_cb)(void *userdata);
        void *pool_drained_userdata;
        Sandbox *sandboxes, *sandboxes_tail;
        size_t n_sandboxes;
        /* The linked sandboxes again, by id and by host uid: the lookups of every call on a
         * sandbox, and of every create, stay as cheap with thousands as with none. */
        Sandbox *by_id[MANAGER_BUCKETS], *by_uid[MANAGER_BUCKETS];
        Sandbox *pooled;        /* the pooled ones (few), chained through pool_next */
        LogReader *log_readers;     /* sandbox-logs.c */
        SandboxStatistics statistics; /* statistics.h: counted where each event happens */
        TenantStatistics *tenant_statistics; /* … and per tenant */
        size_t n_tenant_statistics;
        HostResources host;           /* quota.h: memory and PIDs, for the node's ceilings */
        /* The creates-per-second buckets of the owners and tenants that created lately
         * (quota.h), dropped once full again. */
        struct QuotaBucket *buckets;
        size_t n_buckets;
        /* Creates waiting for one of their owner's (tenant's) StartsInFlight= slots, in
         * the order they came (manager-quota.c). */
        struct StartWaiter *start_waiters, *start_waiters_tail;
        sd_event_source *start_pump;
        /* What each tenant holds on the other nodes of the fleet, as last read
         * (manager_fleet_uses_set(); sandboxd.conf [Fleet] QuotaIntervalSec=). */
        TenantUse *fleet_uses;
        size_t n_fleet_uses;

};

/* TooManySandboxes: --max-sandboxes (or what RLIMIT_NOFILE has room for) is reached. */
int manager_error_too_many(Manager *m, SandboxError *error);
/* No exec of s runs but ending (NULL: none): its kept cgroup files closed. */
void sandbox_cgroup_files_idle(Sandbox *s, const Exec *ending);
/* m's backend for k, or NULL for no such kind. */
const PayloadOps *manager_payload_ops(Manager *m, PayloadKind k);
int sandbox_new(Manager *m, const Template *t, const SandboxConfig *config, uid_t owner, Sandbox **ret);
/* s->description from its id, template and labels; and, update, told to systemd as the
 * running unit's Description= (a pooled sandbox handed out with labels). */
int sandbox_format_description(Sandbox *s);
int sandbox_update_description(Sandbox *s);
/* Takes up a sandbox a previous sandboxd left running: its state and the agent's control
 * socket (from systemd's fd store), which it takes. */
int sandbox_adopt(Manager *m, const SandboxPersist *st, int control_fd, Sandbox **ret);
/* A sandbox in state stopped: its workspace (on disk) from its record, no processes. */
int sandbox_new_stopped(Manager *m, const SandboxPersist *st, Sandbox **ret);
/* The stopped sandbox of workspace id, from its record, listed: 1, or 0 if there is none
 * to list (no workspace or record, or one nobody comes back to: ephemeral, pooled). */
int manager_load_stopped(Manager *m, const char *id);
/* The stopped sandbox id_or_name names that caller sees, or NULL. */
Sandbox *manager_find_stopped(Manager *m, const SandboxCaller *caller, const char *id_or_name);
/* Hibernate of a sandbox on disk: its processes stopped, its workspace and record kept;
 * once they are stopped it is listed as stopped (cb then). -EBUSY if not running or
 * paused, -EOPNOTSUPP if its files are not a workspace it keeps (tmpfs, ephemeral, pooled). */
int sandbox_stop_keeping_files(Sandbox *s, sandbox_callback_t cb, void *userdata);
/* Starts a stopped sandbox again in its workspace (Wake); as sandbox_start(). */
int sandbox_wake_stopped(Sandbox *s, sandbox_callback_t cb, void *userdata);
/* sandboxd is exiting: every call waiting on s (its creation, a Pause or Resume, a
 * Destroy, an exec, a Wait, a file operation) is answered with error now, so that nothing
 * is left holding what its caller passed in. */
void sandbox_abandon_callers(Sandbox *s, const SandboxError *error);
/* sandboxd is exiting: let go of s without touching its processes. */
void sandbox_detach(Sandbox *s);
/* Writes the record a restarted sandboxd adopts the sandbox from. */
void sandbox_save(Sandbox *s);
/* The level of a sandbox's routine lifecycle messages ("starting", "running as",
 * "Destroying"): LOG_DEBUG for an ephemeral one (its record says as much, and at hundreds a
 * second the journal would hold little else), LOG_INFO for the rest. Failures and
 * "Sandbox … removed." (the end of its logs for a follower) keep their levels. */
int sandbox_lifecycle_log_level(const Sandbox *s);
int sandbox_start(Sandbox *s, sandbox_callback_t cb, void *userdata);
/* cb once s runs (now, if it does already) or failed to start. */
int sandbox_wait_started(Sandbox *s, sandbox_callback_t cb, void *userdata);
Sandbox *sandbox_free_internal(Sandbox *s);
void manager_sandbox_state_changed(Manager *m, Sandbox *s);
/* The front ends' subscribers learn that s is there for them now, or no longer. */
void manager_notify_added(Manager *m, Sandbox *s);
void manager_notify_removed(Manager *m, Sandbox *s);
/* Whether anyone keeps a record of executions (then an exec's accounting is taken). */
bool manager_records_execs(Manager *m);
void manager_record_exec(Manager *m, const ExecRecordEvent *ev);
void manager_record_sandbox(Manager *m, Sandbox *s, const char *end_reason);
void manager_record_snapshot(Manager *m, const SnapshotRecordEvent *ev);
void manager_link_sandbox(Manager *m, Sandbox *s);
/* The sandbox whose unit that is (manager.c's orphan sweep). */
Sandbox *manager_find_by_unit(Manager *m, const char *unit);
/* s is known by id from now on (a valid one no other sandbox has). */
void manager_rename_sandbox(Manager *m, Sandbox *s, const char *id);
/* A recycled sandbox handed out again gets an id of its own for its new user (recycle.c):
 * what held the last user's id (a client, a request waiting for polkit) finds nothing.
 * Its unit keeps its name. */
int sandbox_take_new_id(Sandbox *s);
/* sandbox_set_timeout() without saving the state file or telling the front ends: for a
 * caller that does both itself (a hand-out). */
int sandbox_apply_timeout(Sandbox *s, uint64_t lifetime_sec, uint64_t idle_sec, SandboxError *error);
/* Any sandbox with that id, pooled ones included (manager_get_sandbox() is the bus's). */
Sandbox *manager_find_sandbox(Manager *m, const char *id);
void manager_unlink_sandbox(Manager *m, Sandbox *s);
bool manager_host_uid_in_use(Manager *m, uid_t uid);
/* The live sandbox named name of owner for tenant ("": none). */
Sandbox *manager_find_named(Manager *m, uid_t owner, const char *tenant, const char *name);
/* Starts a new sandbox of t for owner (config finalized here); cb once it runs. */
int manager_start_sandbox(Manager *m, const Template *t, SandboxConfig *config, uid_t owner, bool pooled,
                          sandbox_callback_t cb, void *userdata, SandboxError *error);
/* The same with config resolved already, at once (manager-quota.c's queue calls it). */
int manager_start_sandbox_now(Manager *m, const Template *t, SandboxConfig *config, uid_t owner, bool pooled,
                              sandbox_callback_t cb, void *userdata, SandboxError *error);

/* file-op.c */
void file_op_on_result(Sandbox *s, const struct agent_file_result *result);
void file_op_abort(FileOp *op, const char *reason);
/* Answers op's caller with error and frees it. */
void file_op_fail(FileOp *op, const SandboxError *error);
FileOp *file_op_free(FileOp *op);

/* exec.c */
int exec_start(Sandbox *s, ExecConfig *c, exec_callback_t cb, void *userdata, SandboxError *error);
void exec_on_agent_exit(Sandbox *s, const struct agent_exit *x);
void exec_on_agent_started(Sandbox *s, uint64_t id, pid_t pid);
void exec_on_agent_resized(Sandbox *s, uint64_t id);
/* The sandbox ended under the exec: a result if the OOM killer did it, else an error. */
void exec_abort(Exec *e, const char *reason);
/* Answers e's caller and those waiting on e with error; e itself stays. */
void exec_abandon_callers(Exec *e, const SandboxError *error);
/* Pausing stops the clock of every exec's timeout; resuming restarts it. */
void exec_suspend_timeout(Exec *e);
void exec_resume_timeout(Exec *e);
/* The sandbox's idle clock runs only while no exec does. */
void sandbox_update_idle_timer(Sandbox *s);
Exec *exec_free(Exec *e);
