/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* libsandbox-client: typed calls of sandboxd's API (sandboxd-api(7)), sandboxctl's. The
 * transport (the system bus) is hidden behind SandboxClient; results are plain structs.
 * sandbox-run, the HTTP bridge and the MCP server do not use it: they are varlink clients
 * (varlink-client.c) that build their calls' JSON themselves (docs/ARCHITECTURE.md).
 *
 * Conventions: functions return 0 (or a documented positive value) or a negative errno;
 * on failure ret_* parameters are untouched and, when the daemon answered with an error,
 * error (may be NULL) holds its name and message. Nothing here logs or prints. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "macro.h"
#include "sandbox-api.h"

typedef struct SandboxClient SandboxClient;
/* One sandbox as the transport addresses it. Borrows its client, which must outlive it. */
typedef struct SandboxHandle SandboxHandle;

/* ---- errors ---- */

typedef struct SandboxClientError {
        char *name;             /* e.g. SANDBOX_ERROR_NO_SUCH_SANDBOX or a D-Bus error name */
        char *message;
} SandboxClientError;

#define SANDBOX_CLIENT_ERROR_NULL ((SandboxClientError) {})

void sandbox_client_error_done(SandboxClientError *e);
bool sandbox_client_error_is_set(const SandboxClientError *e);
bool sandbox_client_error_has_name(const SandboxClientError *e, const char *name);
/* The daemon's message, else strerror(error). */
const char *sandbox_client_error_message(const SandboxClientError *e, int error);
/* The errno a documented (or a standard D-Bus) error name stands for; EIO if unknown. */
int sandbox_client_errno_from_name(const char *name);

/* ---- connection ---- */

/* Connects to sandboxd on the system bus. */
int sandbox_client_open_system(SandboxClient **ret);
SandboxClient *sandbox_client_free(SandboxClient *c);
/* Lets the daemon's authorization ask the user (polkit agent). */
int sandbox_client_set_interactive(SandboxClient *c, bool b);

/* Between begin and end, SIGINT, SIGTERM and SIGHUP do not end the process: they end the
 * long calls (Exec, Wait, Upload, Download, run) under way or to come with -EINTR, and
 * sandbox_client_interrupted() names the signal; calls that start something (create,
 * Start) still wait for their answer, so that the caller can undo it. SIGWINCH, when
 * on_winch is given, calls it meanwhile. */
int sandbox_client_interrupt_begin(SandboxClient *c, void (*on_winch)(void *userdata), void *userdata);
void sandbox_client_interrupt_end(SandboxClient *c);
int sandbox_client_interrupted(const SandboxClient *c);

/* ---- sandboxes ---- */

typedef enum SandboxCreateField {
        SANDBOX_CREATE_MEMORY_MAX       = 1 << 0,
        SANDBOX_CREATE_CPU_QUOTA        = 1 << 1,
        SANDBOX_CREATE_TASKS_MAX        = 1 << 2,
        SANDBOX_CREATE_DISK_MAX         = 1 << 3,
        SANDBOX_CREATE_TIMEOUT          = 1 << 4,
        SANDBOX_CREATE_IDLE_TIMEOUT     = 1 << 5,
        SANDBOX_CREATE_EPHEMERAL        = 1 << 6,
        SANDBOX_CREATE_NAME             = 1 << 7,
        SANDBOX_CREATE_REUSE_EXISTING   = 1 << 8,
        SANDBOX_CREATE_TENANT           = 1 << 9,
        SANDBOX_CREATE_EGRESS_ALLOW     = 1 << 10,
        SANDBOX_CREATE_EGRESS_DENY      = 1 << 11,
        SANDBOX_CREATE_FROM_SNAPSHOT    = 1 << 12,
        SANDBOX_CREATE_IDLE_ACTION      = 1 << 13,
        SANDBOX_CREATE_STORAGE          = 1 << 14,
        SANDBOX_CREATE_SECRETS          = 1 << 15,
        SANDBOX_CREATE_LABELS           = 1 << 16,
} SandboxCreateField;

/* CreateSandbox's options; only those in set are sent (the rest: the template's). */
typedef struct SandboxCreateOptions {
        unsigned set;                   /* SandboxCreateField */
        uint64_t memory_max;            /* bytes */
        uint64_t cpu_quota_per_sec_usec;
        uint64_t tasks_max;
        uint64_t disk_max;              /* bytes: on disk /work and /tmp together, tmpfs each */
        uint64_t timeout_sec;           /* lifetime; 0: none */
        uint64_t idle_timeout_sec;      /* 0: never */
        bool ephemeral;
        const char *name;               /* unique among the caller's live sandboxes */
        bool reuse_existing;            /* the live sandbox of that name, if there is one */
        const char *tenant;             /* for whom (the delegate action) */
        char **egress_allow;            /* EgressAllow: hosts reachable through the proxy */
        char **egress_deny;             /* EgressDeny */
        const char *from_snapshot;      /* a snapshot id: start with its files */
        const char *idle_action;        /* "destroy", "pause", "hibernate" */
        const char *storage;            /* "disk", "tmpfs" */
        char **secrets;                 /* Secrets: bindings of the caller's secrets */
        char **labels;                  /* Labels: "key=value" each (split at the first '=') */
} SandboxCreateOptions;

/* template NULL or "": the default. *ret_id may be NULL. */
int sandbox_client_create(SandboxClient *c, const char *template, const SandboxCreateOptions *o,
                          char **ret_id, SandboxHandle **ret_handle, SandboxClientError *error);
/* The sandbox named id, its id or its name (GetSandbox); the handle has its id. */
int sandbox_client_get(SandboxClient *c, const char *id, SandboxHandle **ret, SandboxClientError *error);

SandboxHandle *sandbox_handle_free(SandboxHandle *h);
const char *sandbox_handle_id(const SandboxHandle *h);
/* The transport's address of the sandbox (its D-Bus object path). */
const char *sandbox_handle_path(const SandboxHandle *h);
SandboxClient *sandbox_handle_client(const SandboxHandle *h);

typedef enum SandboxDestroyMode {
        SANDBOX_DESTROY_EXPLICIT,       /* the user asked: any error is an error */
        /* Cleaning up after a command (run's sandbox, after the command ended or failed,
         * e.g. with NoReply because sandboxd stopped): a sandbox already gone is fine,
         * and the call never starts sandboxd (no bus auto-start: activating it would
         * replace a pending `systemctl stop`; the next sandboxd destroys interrupted
         * ephemeral sandboxes itself). See sandboxd(8), "Restart". */
        SANDBOX_DESTROY_CLEANUP,
} SandboxDestroyMode;

int sandbox_handle_destroy(SandboxHandle *h, SandboxDestroyMode mode, SandboxClientError *error);
int sandbox_handle_pause(SandboxHandle *h, SandboxClientError *error);
/* Release: the caller is done with it. *ret_recycled: reset and kept for the same owner
 * (a template whose pool recycles), or destroyed. Either way it is gone for the caller. */
int sandbox_handle_release(SandboxHandle *h, bool *ret_recycled, SandboxClientError *error);
int sandbox_handle_resume(SandboxHandle *h, SandboxClientError *error);
int sandbox_handle_set_timeout(SandboxHandle *h, uint64_t lifetime_sec, uint64_t idle_sec,
                               SandboxClientError *error);

typedef struct SandboxInfo {
        char *id;
        char *template;
        uint32_t owner;
        char *state;
        char *path;
        uint64_t created_at;            /* µs since the epoch */
        char *name;                     /* "": none (or gone meanwhile) */
        char **labels;                  /* "key=value", sorted; NULL: none */
} SandboxInfo;

void sandbox_info_array_free(SandboxInfo *a, size_t n);
/* ListSandboxes, in the daemon's order, and each one's Name and Labels (its properties: the
 * calls go out together, one round trip for all). labels: selectors ("key=value", "key"),
 * all to match (ListSandboxesFiltered's Label); NULL: every sandbox. */
int sandbox_client_list(SandboxClient *c, char * const *labels, SandboxInfo **ret, size_t *ret_n,
                        SandboxClientError *error);

/* The properties of a sandbox; a daemon may lack some: seen has a bit per one given. */
typedef enum SandboxProperty {
        SANDBOX_PROPERTY_ID,
        SANDBOX_PROPERTY_TEMPLATE,
        SANDBOX_PROPERTY_OWNER,
        SANDBOX_PROPERTY_STATE,
        SANDBOX_PROPERTY_UNIT,
        SANDBOX_PROPERTY_CREATED_AT,
        SANDBOX_PROPERTY_MEMORY_MAX,
        SANDBOX_PROPERTY_CPU_QUOTA,
        SANDBOX_PROPERTY_TASKS_MAX,
        SANDBOX_PROPERTY_DISK_MAX,
        SANDBOX_PROPERTY_TIMEOUT,
        SANDBOX_PROPERTY_IDLE_TIMEOUT,
        SANDBOX_PROPERTY_DEADLINE,
        SANDBOX_PROPERTY_EPHEMERAL,
        SANDBOX_PROPERTY_NAME,
        SANDBOX_PROPERTY_TENANT,
        SANDBOX_PROPERTY_STORAGE,
        SANDBOX_PROPERTY_FORK_METHOD,
        SANDBOX_PROPERTY_LABELS,
        _SANDBOX_PROPERTY_MAX,
} SandboxProperty;

typedef struct SandboxStatus {
        char *id;
        char *template;
        uint32_t owner;
        char *state;
        char *unit;
        uint64_t created_at;
        uint64_t memory_max;
        uint64_t cpu_quota_per_sec_usec;
        uint64_t tasks_max;
        uint64_t disk_max;
        uint64_t timeout;
        uint64_t idle_timeout;
        uint64_t deadline;
        bool ephemeral;
        char *name;
        char *tenant;
        char *storage;                  /* "disk", "tmpfs" */
        char *fork_method;              /* "snapshot", "copy" */
        char **labels;                  /* "key=value", sorted */
        unsigned seen;                  /* 1 << SandboxProperty */
} SandboxStatus;

#define SANDBOX_STATUS_HAS(s, p) (!!((s)->seen & (1U << (p))))

void sandbox_status_done(SandboxStatus *s);
/* Property p of s, for a caller that walks them all: its D-Bus type signature ("s": a
 * char *, "u": uint32_t, "t": uint64_t, "b": bool, "a{ss}": char ** of "key=value") and
 * where s keeps its value. */
const char *sandbox_property_signature(SandboxProperty p);
const void *sandbox_status_field(const SandboxStatus *s, SandboxProperty p);
int sandbox_handle_status(SandboxHandle *h, SandboxStatus *ret, SandboxClientError *error);

/* Ports (docs/PORTS.md): a TCP connection to port of the sandbox's own loopback, opened by
 * sandboxd inside it (*ret_fd: the caller's), and what listens there. */
int sandbox_handle_open_port(SandboxHandle *h, uint16_t port, int *ret_fd, SandboxClientError *error);
typedef struct SandboxPortInfo {
        char *address;                  /* as bound: "127.0.0.1", "::", … */
        uint16_t port;
} SandboxPortInfo;
void sandbox_port_info_array_free(SandboxPortInfo *a, size_t n);
int sandbox_handle_list_ports(SandboxHandle *h, SandboxPortInfo **ret, size_t *ret_n, SandboxClientError *error);
/* WatchDirectory: *ret_fd (the caller's) yields a JSON line per change under path until
 * closed. */
int sandbox_handle_watch_directory(SandboxHandle *h, const char *path, bool recursive, int *ret_fd,
                                   SandboxClientError *error);

typedef struct SandboxTemplate {
        char *name;
        char *payload;
        char *description;
} SandboxTemplate;

void sandbox_template_array_free(SandboxTemplate *a, size_t n);
int sandbox_client_templates(SandboxClient *c, SandboxTemplate **ret, size_t *ret_n, SandboxClientError *error);
/* CreateTemplate: json, a template file's text, as name (created or replaced);
 * RemoveTemplate. Both need "manage". */
int sandbox_client_create_template(SandboxClient *c, const char *name, const char *json, SandboxClientError *error);
int sandbox_client_remove_template(SandboxClient *c, const char *name, SandboxClientError *error);

/* ---- quota ---- */

typedef struct SandboxQuotaEntry {
        char *what;       /* Sandboxes, MemoryMax, … (sandboxd-api(7), GetQuota) */
        uint64_t limit;   /* 0: none */
        uint64_t use;
} SandboxQuotaEntry;

typedef struct SandboxQuota {
        char *scope;      /* "owner 1000", "tenant acme" */
        SandboxQuotaEntry *entries;
        size_t n_entries;
} SandboxQuota;

void sandbox_quota_done(SandboxQuota *q);
/* GetQuota: the caller's quota and use. */
int sandbox_client_quota(SandboxClient *c, SandboxQuota *ret, SandboxClientError *error);

/* ---- snapshots ---- */

/* Snapshot / Hibernate (the sandbox then destroyed): the new snapshot's id. */
int sandbox_handle_snapshot(SandboxHandle *h, bool hibernate, bool include_tmp, char **ret_snapshot,
                            SandboxClientError *error);
/* Fork: a new sandbox with h's files (o: its options; NULL: the source's); its id. */
int sandbox_handle_fork(SandboxHandle *h, const SandboxCreateOptions *o, char **ret_id, SandboxClientError *error);
/* Wake: the hibernated sandbox id_or_name again; its id. */
int sandbox_client_wake(SandboxClient *c, const char *id_or_name, char **ret_id, SandboxClientError *error);

typedef struct SandboxSnapshotInfo {
        char *id;
        char *template_name;
        uint32_t owner;
        char *tenant;
        char *name;
        char *source;
        uint64_t size;                  /* the stream's bytes */
        uint64_t content_size;          /* the files' */
        uint64_t created;               /* µs since the epoch */
        uint64_t disk_max;
        bool includes_tmp;
        bool hibernated;
        unsigned seen;
} SandboxSnapshotInfo;

int sandbox_client_list_snapshots(SandboxClient *c, SandboxSnapshotInfo **ret, size_t *ret_n,
                                  SandboxClientError *error);
void sandbox_snapshot_info_free_array(SandboxSnapshotInfo *a, size_t n);
int sandbox_client_remove_snapshot(SandboxClient *c, const char *id, SandboxClientError *error);

/* ActForTenant: this connection's calls act for tenant from now on (NULL: for none). */
/* The secret store (SetSecret, ListSecrets, RemoveSecret): the caller's own. */
int sandbox_client_set_secret(SandboxClient *c, const char *name, const void *value, size_t size,
                              SandboxClientError *error);
int sandbox_client_list_secrets(SandboxClient *c, char ***ret_names, SandboxClientError *error);
int sandbox_client_remove_secret(SandboxClient *c, const char *name, SandboxClientError *error);
int sandbox_client_act_for_tenant(SandboxClient *c, const char *tenant, SandboxClientError *error);

/* ---- executions ---- */

/* Exec's and Start's options. */
typedef struct SandboxExecOptions {
        char **environment;             /* NAME=VALUE; NULL: none */
        const char *working_directory;  /* NULL: the default (/work) */
        uint64_t timeout_sec;           /* 0: Exec the default, Start none */
        bool output_max_set;
        uint64_t output_max;
        const void *stdin_data;         /* given as bytes */
        size_t stdin_size;
        int stdin_fd, stdout_fd, stderr_fd;     /* passed to the process; -EBADF: not */
        bool tty;                       /* a pseudo-terminal; stdin_fd and stdout_fd required */
        bool stdin_pipe;                /* Start: input written later (WriteStdin) */
        unsigned tty_rows, tty_cols;    /* 0: the daemon's default size */
} SandboxExecOptions;

#define SANDBOX_EXEC_OPTIONS_INIT \
        ((SandboxExecOptions) { .stdin_fd = -EBADF, .stdout_fd = -EBADF, .stderr_fd = -EBADF })

typedef struct SandboxExecResult {
        int32_t exit_status;            /* the exit code, or 128 + the signal */
        int32_t exit_code;              /* -1 when killed */
        int32_t signal;                 /* 0 when it exited */
        bool timed_out;
        bool oom_killed;
        bool truncated;                 /* some output exceeded OutputMax */
        uint64_t duration_usec;
        uint64_t cpu_usec;
        uint64_t max_rss_bytes;
        uint64_t stdout_bytes;          /* produced, also what was dropped */
        uint64_t stderr_bytes;
        void *stdout_data;              /* captured (empty when passed as descriptors) */
        size_t stdout_size;
        void *stderr_data;
        size_t stderr_size;
} SandboxExecResult;

void sandbox_exec_result_done(SandboxExecResult *r);

/* Exec: runs argv and returns when it ended. The call waits the exec's timeout and some. */
int sandbox_handle_exec(SandboxHandle *h, char **argv, const SandboxExecOptions *o, SandboxExecResult *ret,
                        SandboxClientError *error);
/* Start: a background process; its id. */
int sandbox_handle_start(SandboxHandle *h, char **argv, const SandboxExecOptions *o, uint64_t *ret_process,
                         SandboxClientError *error);
/* Wait: its result (no output) once it ended; timeout_sec 0: no limit (call_usec bounds the
 * call itself, UINT64_MAX: none). Fails with SANDBOX_ERROR_STILL_RUNNING after timeout_sec. */
int sandbox_handle_wait(SandboxHandle *h, uint64_t process, uint64_t timeout_sec, uint64_t call_usec,
                        SandboxExecResult *ret, SandboxClientError *error);
int sandbox_handle_signal(SandboxHandle *h, uint64_t process, int sig, SandboxClientError *error);
/* Fire and forget: a lost resize is corrected by the next. */
int sandbox_handle_resize_terminal(SandboxHandle *h, uint64_t process, unsigned rows, unsigned cols);
/* WriteStdin, CloseStdin: the input of a process started with stdin_pipe. */
int sandbox_handle_write_stdin(SandboxHandle *h, uint64_t process, const void *data, size_t size,
                               SandboxClientError *error);
int sandbox_handle_close_stdin(SandboxHandle *h, uint64_t process, SandboxClientError *error);
/* ReadOutputFrom: what is kept from the offsets on; *ret_totals the offsets to read on from. */
int sandbox_handle_read_output_from(SandboxHandle *h, uint64_t process, const uint64_t offsets[2],
                                    SandboxExecResult *ret_output, bool *ret_running, uint64_t ret_totals[2],
                                    SandboxClientError *error);
/* ReadOutput: what it wrote so far; *ret_running whether it still runs. */
int sandbox_handle_read_output(SandboxHandle *h, uint64_t process, SandboxExecResult *ret_output,
                               bool *ret_running, SandboxClientError *error);

/* RunCode: code as a cell of the code context (NULL or "": the sandbox's default Python
 * one; "python", "javascript": its default one of that language), its timeout (0: the
 * default) and output bound (0: the default). Its events (stdout, stderr, result, error) and
 * its result, as JSON objects with the reply's a{sv} names (Type, Text, Data, ...). */
int sandbox_handle_run_code(SandboxHandle *h, const char *context, const char *code, uint64_t timeout_sec,
                            uint64_t output_max, json_object **ret_events, json_object **ret_result,
                            SandboxClientError *error);
int sandbox_handle_interrupt_context(SandboxHandle *h, const char *context, SandboxClientError *error);

typedef struct SandboxProcess {
        uint64_t id;
        int32_t pid;                    /* inside the sandbox */
        char **argv;
        char *state;                    /* "running" or "exited" */
        int32_t exit_status;
} SandboxProcess;

void sandbox_process_array_free(SandboxProcess *a, size_t n);
int sandbox_handle_processes(SandboxHandle *h, SandboxProcess **ret, size_t *ret_n, SandboxClientError *error);

/* run: an ephemeral sandbox (create, exec, gone), as one call. sandboxd lets it go after
 * its exec, or when it refused the exec; when a signal interrupts the exec (during
 * sandbox_client_interrupt_begin/end) it is destroyed here, with SANDBOX_DESTROY_CLEANUP,
 * so that the command stops with it. The lifetime of the sandbox is
 * the exec's timeout plus a backstop, should the caller die first. run is filled as it
 * goes, also on failure (to tell what failed). */
typedef enum SandboxRunStep {
        SANDBOX_RUN_CREATE,
        SANDBOX_RUN_EXEC,
        SANDBOX_RUN_DONE,
} SandboxRunStep;

typedef struct SandboxRun {
        SandboxRunStep step;            /* the one that failed, or DONE */
        char *id;                       /* once created */
        SandboxExecResult result;       /* once the exec returned */
        int cleanup;                    /* the result of destroying it, when that was done here */
        SandboxClientError cleanup_error;
} SandboxRun;

#define SANDBOX_RUN_LIFETIME_SLACK_SEC UINT64_C(60)

void sandbox_run_done(SandboxRun *run);
int sandbox_client_run(SandboxClient *c, const char *template, const SandboxCreateOptions *co, char **argv,
                       const SandboxExecOptions *eo, SandboxRun *run, SandboxClientError *error);

/* ListExecutions: the recorded executions, newest first. */
typedef struct SandboxExecutionFilter {
        const char *sandbox_id;         /* NULL: all */
        bool owner_set;
        uint32_t owner;
        uint64_t since_usec;            /* 0: no bound */
        uint32_t limit;                 /* with limit_set; else the daemon's default */
        bool limit_set;
        const char *tenant;             /* NULL: any */
} SandboxExecutionFilter;

typedef struct SandboxExecution {
        char *sandbox_id;
        uint64_t exec_id;
        uint32_t owner, caller;
        char **argv;
        char *cwd;
        uint64_t started, ended;        /* µs since the epoch */
        int32_t exit_status, exit_code, signal;
        bool timed_out, oom_killed;
        uint64_t cpu_usec, cgroup_cpu_nsec, memory_peak, stdout_bytes, stderr_bytes;
        char *tenant;                   /* "" = none */
        /* Of a sandbox on disk: its workspace's bytes at the end, its DiskMax; UINT64_MAX
         * both for one in memory. */
        uint64_t disk_bytes_used, disk_bytes_max;
} SandboxExecution;

void sandbox_execution_array_free(SandboxExecution *a, size_t n);
int sandbox_client_executions(SandboxClient *c, const SandboxExecutionFilter *f, SandboxExecution **ret,
                              size_t *ret_n, SandboxClientError *error);

/* ---- files (paths resolved inside the sandbox) ---- */

typedef struct SandboxFileEntry {
        char *path;                     /* relative to the listed path; Stat: "" */
        char *type;                     /* file, dir, link, fifo, socket, char, block */
        uint64_t size;
        uint32_t mode;
        int64_t mtime;                  /* µs since the epoch */
        char *target;                   /* of a link */
        /* A path or target that is not valid UTF-8 comes as an escaped form (\xNN) in path or
         * target and its exact bytes here; NULL, 0 otherwise. */
        void *path_raw;
        size_t path_raw_size;
        void *target_raw;
        size_t target_raw_size;
} SandboxFileEntry;

void sandbox_file_entry_done(SandboxFileEntry *e);
void sandbox_file_entry_array_free(SandboxFileEntry *a, size_t n);

/* WriteFile's and Upload's options. */
typedef struct SandboxWriteOptions {
        int mode;                       /* -1: the default (0644) */
        bool append;
        bool create_parents;
} SandboxWriteOptions;

#define SANDBOX_WRITE_OPTIONS_INIT ((SandboxWriteOptions) { .mode = -1 })

/* length 0: to the end; more than FILE_PART_MAX (either way) is refused (FileTooLarge). */
int sandbox_handle_read_file(SandboxHandle *h, const char *path, uint64_t offset, uint64_t length,
                             void **ret_data, size_t *ret_size, SandboxClientError *error);
int sandbox_handle_write_file(SandboxHandle *h, const char *path, const void *data, size_t size,
                              const SandboxWriteOptions *o, uint64_t *ret_bytes, SandboxClientError *error);
/* fd: a regular file, pipe or socket, read (Upload) or written (Download) by the agent
 * itself. max: UINT64_MAX for no limit. Interruptible (see sandbox_client_interrupt_begin). */
int sandbox_handle_upload(SandboxHandle *h, const char *path, int fd, const SandboxWriteOptions *o,
                          uint64_t *ret_bytes, SandboxClientError *error);
int sandbox_handle_download(SandboxHandle *h, const char *path, int fd, uint64_t max, uint64_t *ret_bytes,
                            SandboxClientError *error);
int sandbox_handle_list_files(SandboxHandle *h, const char *path, unsigned depth, SandboxFileEntry **ret,
                              size_t *ret_n, SandboxClientError *error);
int sandbox_handle_stat(SandboxHandle *h, const char *path, SandboxFileEntry *ret, SandboxClientError *error);
int sandbox_handle_mkdir(SandboxHandle *h, const char *path, bool parents, SandboxClientError *error);
int sandbox_handle_remove(SandboxHandle *h, const char *path, bool recursive, SandboxClientError *error);
int sandbox_handle_move(SandboxHandle *h, const char *path, const char *to, SandboxClientError *error);

/* ---- what there is to see: logs, metrics, pools ---- */

/* One journal entry of a sandbox (GetLogs). */
typedef struct SandboxJournalEntry {
        uint64_t timestamp_usec;        /* µs since the epoch */
        int priority;                   /* 0 (emerg) … 7 (debug); -1: none given */
        char *identifier;               /* e.g. "sandboxd", "sandbox-<id>.scope" */
        void *message;                  /* bytes, NUL-terminated for convenience (not counted) */
        size_t message_size;
        bool truncated;                 /* the daemon cut a longer message */
} SandboxJournalEntry;

void sandbox_journal_entry_done(SandboxJournalEntry *e);
/* One line of GetLogs' stream (without its newline), as sandboxd-api(7) describes it. */
int sandbox_journal_entry_parse(const char *line, size_t size, SandboxJournalEntry *ret);

/* Return 0 for more, or a negative errno to stop (sandbox_handle_logs() returns it). */
typedef int (*sandbox_journal_callback_t)(const SandboxJournalEntry *e, void *userdata);
/* GetLogs: the last lines entries (0: all, up to SANDBOX_LOGS_LINES_MAX), then with follow
 * new ones as they come; cb gets each as it arrives. Returns 0 at the end of the stream
 * (without follow, all was sent; with it, the sandbox is gone or sandboxd stopped). Blocks
 * until then. */
int sandbox_handle_logs(SandboxHandle *h, unsigned lines, bool follow, sandbox_journal_callback_t cb,
                        void *userdata, SandboxClientError *error);

/* GetMetrics: what the sandbox uses now. The daemon leaves out what it cannot know: seen
 * has a bit per metric given. */
typedef enum SandboxMetric {
        SANDBOX_METRIC_CPU_USAGE,
        SANDBOX_METRIC_MEMORY_CURRENT,
        SANDBOX_METRIC_MEMORY_PEAK,
        SANDBOX_METRIC_TASKS_CURRENT,
        SANDBOX_METRIC_WORK_BYTES_USED,
        SANDBOX_METRIC_TMP_BYTES_USED,
        SANDBOX_METRIC_DISK_BYTES_USED,
        SANDBOX_METRIC_DISK_BYTES_MAX,
        _SANDBOX_METRIC_MAX,
} SandboxMetric;

typedef struct SandboxMetricsInfo {
        uint64_t cpu_usage_nsec;        /* CPU time of the whole sandbox so far */
        uint64_t memory_current;        /* bytes, page cache and its tmpfs included */
        uint64_t memory_peak;
        uint64_t tasks_current;         /* processes and threads */
        uint64_t work_bytes_used;       /* of /work */
        uint64_t tmp_bytes_used;        /* of /tmp */
        uint64_t disk_bytes_used;       /* of /work and /tmp together */
        uint64_t disk_bytes_max;
        unsigned seen;                  /* 1 << SandboxMetric */
} SandboxMetricsInfo;

#define SANDBOX_METRICS_HAS(m, x) (!!((m)->seen & (1U << (x))))
/* Metric x of m, for a caller that walks them all. */
uint64_t sandbox_metrics_value(const SandboxMetricsInfo *m, SandboxMetric x);

int sandbox_handle_metrics(SandboxHandle *h, SandboxMetricsInfo *ret, SandboxClientError *error);

/* ListPools: the warm pool of each template that has one. in_use counts the caller's own
 * sandboxes of the template unless it holds "manage" (root: everyone's). */
typedef struct SandboxPoolInfo {
        char *template;
        uint32_t size;                  /* the template's "pool" */
        uint32_t ready;                 /* started, waiting to be handed out */
        uint32_t starting;              /* being started to refill the pool */
        uint32_t in_use;                /* running or paused, held by callers */
        bool recycle;                   /* "pool": {"recycle": true} (GetPool) */
        uint32_t recycled;              /* released ones kept for their owners (as in_use) */
} SandboxPoolInfo;

void sandbox_pool_info_array_free(SandboxPoolInfo *a, size_t n);
int sandbox_client_pools(SandboxClient *c, SandboxPoolInfo **ret, size_t *ret_n, SandboxClientError *error);

DEFINE_TRIVIAL_CLEANUP_FUNC(SandboxClient *, sandbox_client_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(SandboxHandle *, sandbox_handle_free);
