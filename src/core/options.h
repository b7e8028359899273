/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What a caller may ask of a sandbox, of an exec, of a file operation and of the record,
 * by the option names of the API (systemd's property names where one exists), with their
 * types and bounds. A front end decodes its wire format into OptionValue, a value tagged
 * with a type of its own (D-Bus: bus_read_options(); JSON: options_from_json()), and
 * hands each to option_set_apply(); every check is here. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "caller.h"
#include "sandbox-api.h"
#include "sandbox-errors.h"

#define SANDBOX_MEMORY_MIN (16ULL * 1024 * 1024)
#define SANDBOX_MEMORY_DEFAULT (512ULL * 1024 * 1024)
#define SANDBOX_CPU_QUOTA_MIN_USEC 10000ULL
#define SANDBOX_CPU_QUOTA_DEFAULT_USEC 1000000ULL
#define SANDBOX_TASKS_MIN 4ULL
#define SANDBOX_TASKS_MAX 65536ULL
#define SANDBOX_TASKS_DEFAULT 256ULL
#define SANDBOX_LIFETIME_MAX_SEC (30ULL * 24 * 3600)
/* DiskMax: on disk (Storage=disk), the bytes of /work and /tmp together, a quota of the file
 * system; in memory (Storage=tmpfs), the size of each of the two tmpfs, whose pages count
 * against MemoryMax (docs/WORKSPACES.md). */
#define SANDBOX_DISK_MIN (1ULL * 1024 * 1024)
#define SANDBOX_DISK_DEFAULT (1024ULL * 1024 * 1024)
#define SANDBOX_DISK_MAX (1024ULL * 1024 * 1024 * 1024)

/* EgressAllow=, EgressDeny= (egress-policy.h): each list in its canonical form, one rule a
 * line, at most this size with its NUL. */
#define SANDBOX_EGRESS_TEXT_MAX 8192U

#define EXEC_ARGS_MAX (128U * 1024) /* argv + environment, bytes: one agent datagram */
#define EXEC_ARGC_MAX 4096U
#define EXEC_ENVC_MAX 4096U
#define SANDBOX_WORKDIR "/work"

/* Where /work and /tmp live: a workspace on disk (workspace.h) or two tmpfs in memory. */
typedef enum SandboxStorage {
        STORAGE_DEFAULT,  /* not asked for: the template's, else disk unless ephemeral */
        STORAGE_DISK,
        STORAGE_TMPFS,
        _STORAGE_MAX,
        _STORAGE_INVALID = -EINVAL,
} SandboxStorage;

const char *sandbox_storage_to_string(SandboxStorage s);
SandboxStorage sandbox_storage_from_string(const char *s);

typedef struct SandboxLimits {
        uint64_t memory_max;
        uint64_t cpu_quota_per_sec_usec;
        uint64_t tasks_max;
        SandboxStorage storage;
} SandboxLimits;

/* What a sandbox's idle timeout does (IdleAction): destroy it, pause it (freeze, kept in
 * memory), or hibernate it (snapshot to disk, then destroy; Wake brings it back). */
typedef enum IdleAction {
        IDLE_ACTION_DESTROY,
        IDLE_ACTION_PAUSE,
        IDLE_ACTION_HIBERNATE,
        _IDLE_ACTION_MAX,
        _IDLE_ACTION_INVALID = -EINVAL,
} IdleAction;

const char *idle_action_to_string(IdleAction a);
IdleAction idle_action_from_string(const char *s);

#define SNAPSHOT_ID_STRING_MAX 16

typedef struct SandboxConfig {
        SandboxLimits limits;  /* 0 = not asked for: the template's value, else the default */
        uint64_t disk_max;     /* bytes, each of /work and /tmp; 0 = default */
        uint64_t timeout_sec;  /* lifetime, 0 = none */
        uint64_t idle_timeout_sec; /* destroyed after this long without a running exec, 0 = none */
        bool ephemeral;
        /* Kept in the struct: "" = none. */
        char name[SANDBOX_NAME_MAX + 1];    /* unique among the live sandboxes of one owner and tenant */
        char tenant[SANDBOX_NAME_MAX + 1];  /* whom the sandbox is for (access.h) */
        bool reuse_existing;  /* CreateSandbox only: the live sandbox of that name is the answer */
        /* Egress by name (sandboxd-egress(8)): NULL or "" = none; an empty allow list = no
         * network. Owned, on the heap and only as long as the rules: a sandbox keeps its
         * config, and thousands of sandboxes with two fixed 8 KiB buffers each were most of
         * sandboxd's memory. So a config is no plain value to copy: sandbox_config_copy(),
         * sandbox_config_done(). */
        char *egress_allow;
        char *egress_deny;
        bool egress_allow_set, egress_deny_set;  /* given: the template's list does not apply */
        /* Secrets= (secret-store.h): the bindings, canonical, a line each; NULL = none.
         * Names only: the values are read from the store as the sandbox starts. */
        char *secrets;
        bool secrets_set;       /* given: the template's bindings do not apply */
        IdleAction idle_action;  /* what IdleTimeout does */
        /* Given by the caller (Fork: what is not given is the source's; 0 is a value). */
        bool timeout_set, idle_timeout_set, idle_action_set;
        /* CreateSandbox only: the snapshot (snapshot.h) whose files the new sandbox starts
         * with; "": none. */
        char from_snapshot[SNAPSHOT_ID_STRING_MAX + 1];
        /* Wake only (not an option): the id the sandbox had before it hibernated. */
        char wake_id[SNAPSHOT_ID_STRING_MAX + 1];
        /* Fork on disk only (not an option): the sandbox whose workspace it starts with, as
         * a snapshot. */
        char fork_from[SNAPSHOT_ID_STRING_MAX + 1];
        /* Labels (labels.h): "key=value", sorted by key; NULL: none. Owned. */
        char **labels;
} SandboxConfig;

/* Snapshot's and Hibernate's options. */
typedef struct SnapshotOptions {
        bool include_tmp;     /* /tmp as well as /work */
} SnapshotOptions;

typedef struct ExecConfig {
        char **argv;
        char **environment;
        char *working_directory;
        uint64_t timeout_usec;    /* Timeout= (seconds) or TimeoutUSec= */
        uint64_t output_max;
        bool output_max_set;  /* asked for (OutputMax=): refused beyond the admin's maximum */
        void *stdin_data;
        size_t stdin_size;
        /* The caller's own descriptors, given straight to the process (no copy through
         * the daemon); -EBADF: not given. Owned. */
        int stdin_fd;
        int stdout_fd;
        int stderr_fd;
        bool tty;         /* a pseudo-terminal inside, relayed to StandardInput/Output (a
                           * background process without them: to pipes of the core's) */
        bool stdin_pipe;  /* StdinPipe: the input is a pipe fed by exec_write_stdin() */
        uint16_t tty_rows, tty_cols;
        bool background;  /* Start(), not Exec(): no timeout unless asked, no reply */
        uid_t caller;     /* who asked, for the record */
        bool timeout_set;
        /* The face could not decode the call's arguments or options (exec_config_refuse()):
         * sandbox_exec() answers with this, once the call is authorized. 0: none. */
        int refused;
        SandboxError refused_error;
} ExecConfig;

/* An Exec whose arguments or options could not be decoded (r, error: taken) still goes
 * through the caller's authorization to sandbox_exec(), which refuses it with that error
 * there, where refusing the first Exec of an ephemeral sandbox lets the sandbox go. */
void exec_config_refuse(ExecConfig *c, int r, SandboxError *error);

/* The machine the limits are checked against. */
typedef struct SystemBounds {
        uint64_t memory_total;
        unsigned n_cpus;
        bool workspaces;  /* a workspace pool: Storage=disk can be had */
} SystemBounds;

/* WriteFile's, Upload's and Download's options. */
typedef struct FileOptions {
        uint32_t mode;    /* AGENT_FILE_MODE_DEFAULT: 0644 */
        bool append;
        bool parents;
        uint64_t max;     /* Download: refuse a larger file; AGENT_FILE_UNLIMITED: DiskMax */
} FileOptions;

/* Which executions a record query returns (ListExecutions). */
typedef struct ExecutionFilter {
        const char *sandbox_id;   /* NULL: any */
        bool any_owner;           /* false: only what uid may see (its sandboxes, its execs) */
        uid_t uid;
        bool owner_set;           /* the Owner filter: execs in sandboxes owned by owner */
        uid_t owner;
        uint64_t since;           /* µs CLOCK_REALTIME, started at or after; 0: any */
        unsigned limit;           /* 0: the recorder's default */
        char tenant[SANDBOX_NAME_MAX + 1];        /* the Tenant filter; "": any */
        char caller_tenant[SANDBOX_NAME_MAX + 1]; /* the tenant the caller acts for: only its */
} ExecutionFilter;

/* ListExecutions' filter as a caller gives it, with the strings filter points to. */
typedef struct ExecutionQuery {
        ExecutionFilter filter;
        char *sandbox_id;
} ExecutionQuery;

/* Which sandboxes ListSandboxes returns: those the caller sees that match every filter
 * given, in the order they were created, from the offset-th on, at most limit of them. */
typedef struct SandboxListQuery {
        uint64_t offset;          /* matching sandboxes skipped */
        uint32_t limit;           /* 0: all */
        int state;                /* a SandboxState; -1: any */
        char template_name[SANDBOX_NAME_MAX + 1]; /* "": any (TEMPLATE_NAME_MAX is the same) */
        char name[SANDBOX_NAME_MAX + 1]; /* "": any */
        char **labels;            /* selectors (labels.h), all to match; NULL: any. Owned */
} SandboxListQuery;

#define SANDBOX_LIST_QUERY_INIT { .state = -1 }
#define SANDBOX_LIST_LIMIT_MAX 10000U

/* The types of option values, as every wire format has them. */
typedef enum OptionType {
        OPTION_STRING,
        OPTION_BOOL,
        OPTION_UINT32,
        OPTION_UINT64,
        OPTION_INT32,
        OPTION_INT64,
        OPTION_DOUBLE,
        OPTION_STRV,
        OPTION_STRMAP,    /* string to string: key, value, key, value, …, NULL in .strv */
        OPTION_BYTES,
        OPTION_FD,
        OPTION_OTHER,     /* a type no option has; named by the wire format, for the message */
        _OPTION_TYPE_MAX,
        _OPTION_TYPE_INVALID = -EINVAL,
} OptionType;

const char *option_type_to_string(OptionType t);

/* One decoded option; what it points to is the front end's, for the duration of the
 * call. */
typedef struct OptionValue {
        OptionType type;
        union {
                const char *s;
                bool b;
                uint32_t u32;
                uint64_t u64;
                int32_t i32;
                int64_t i64;
                double d;
                char * const *strv;
                struct {
                        const void *data;
                        size_t size;
                } bytes;
                int fd;            /* borrowed; the setter dups it */
                const char *other; /* OPTION_OTHER: the type's name in the wire format */
        };
} OptionValue;

/* The sets of options, each with its own names, types and target. */
typedef enum OptionSet {
        OPTION_SET_SANDBOX,     /* CreateSandbox: SandboxConfig */
        OPTION_SET_EXEC,        /* Exec, Start: ExecConfig */
        OPTION_SET_FILE,        /* WriteFile, Upload, Download: FileOptions */
        OPTION_SET_EXECUTIONS,  /* ListExecutions: ExecutionQuery */
        OPTION_SET_SANDBOX_LIST, /* ListSandboxes' filter: SandboxListQuery */
        OPTION_SET_SNAPSHOT,    /* Snapshot, Hibernate: SnapshotOptions */
        _OPTION_SET_MAX,
} OptionSet;

/* The type option name has in set, or _OPTION_TYPE_INVALID if set has no such option. */
OptionType option_set_lookup(OptionSet set, const char *name);
/* The i-th option name of set, in its table's order; NULL past the last. */
const char *option_set_name(OptionSet set, size_t i);
/* Sets one option of set in target (the set's struct); InvalidOption (-EINVAL) when the
 * name is unknown, the type wrong or the value out of range. */
int option_set_apply(OptionSet set, void *target, const char *name, const OptionValue *v, SandboxError *error);
/* Applies every member of a JSON object (varlink's, HTTP's) as an option of set: the
 * values are taken as the types the options have (integers in range, a base64 string for
 * bytes, an index into fds for a descriptor); a null member is an option not given. */
int options_from_json(json_object *o, OptionSet set, void *target, const int *fds, size_t n_fds,
                      SandboxError *error);

int system_bounds_read(SystemBounds *ret);

/* A Tenant: 1 to SANDBOX_NAME_MAX characters of A-Z a-z 0-9 . _ -. A Name: the same, and
 * not of the form of a sandbox id (16 lowercase hex digits), so that an argument that
 * names a sandbox is either, unambiguously. */
bool sandbox_tenant_is_valid(const char *s);
bool sandbox_name_is_valid(const char *s);
/* The same as InvalidOption, for a tenant a caller says it acts for. */
int sandbox_tenant_check(const char *s, SandboxError *error);

/* The setters of each set, for callers that know theirs. */
/* Fork: what c leaves unset is source's (limits, DiskMax, Timeout, IdleTimeout, IdleAction,
 * EgressAllow, EgressDeny); Name, Tenant and the rest are the caller's business. */
int sandbox_config_inherit(SandboxConfig *c, const SandboxConfig *source);
int sandbox_config_set(SandboxConfig *c, const char *name, const OptionValue *v, SandboxError *error);
/* Fill what was not asked for from defaults (template first), then check the limits
 * against the machine. */
int sandbox_config_finalize(SandboxConfig *c, const SandboxLimits *template_defaults,
                            const SystemBounds *bounds, SandboxError *error);

/* EgressAllow or EgressDeny (deny) as a list of rules (canonical text, as stored). */
int sandbox_config_egress_strv(const SandboxConfig *c, bool deny, char ***ret);
/* A deep copy into dest (which holds nothing owned yet); -ENOMEM leaves dest empty. */
int sandbox_config_copy(SandboxConfig *dest, const SandboxConfig *src);
/* Frees what c owns (the egress texts, the labels); c stays valid, without them. */
void sandbox_config_done(SandboxConfig *c);
/* Whether a and b have the same egress rules (NULL and "" alike: none). */
bool sandbox_config_egress_equal(const SandboxConfig *a, const SandboxConfig *b);
/* Whether the sandbox has egress through the proxy (a non-empty EgressAllow). */
bool sandbox_config_has_egress(const SandboxConfig *c);
/* Takes the template's lists for those the caller did not give. InvalidOption if the
 * template's rules are bad (a template is checked when loaded: not expected). */
int sandbox_config_egress_defaults(SandboxConfig *c, char * const *allow, char * const *deny, SandboxError *error);
/* Takes the template's secret bindings if the caller gave none. */
int sandbox_config_secrets_defaults(SandboxConfig *c, char * const *bindings, SandboxError *error);
/* The bindings of Secrets= (secret-store.h), parsed: an array of *ret_n. */
struct SecretBinding;
int sandbox_config_secret_bindings(const SandboxConfig *c, struct SecretBinding **ret, size_t *ret_n);

void exec_config_init(ExecConfig *c);
/* Moves everything src owns to dst (which must hold nothing); src is left empty. */
void exec_config_move(ExecConfig *dst, ExecConfig *src);
void exec_config_done(ExecConfig *c);
int exec_config_set(ExecConfig *c, const char *name, const OptionValue *v, SandboxError *error);
/* Takes ownership of argv (also on failure); validates argv and sizes. */
int exec_config_set_argv(ExecConfig *c, char **argv, SandboxError *error);
int exec_config_finalize(ExecConfig *c, SandboxError *error);

int snapshot_options_set(SnapshotOptions *o, const char *name, const OptionValue *v, SandboxError *error);

void file_options_init(FileOptions *o);
int file_options_set(FileOptions *o, const char *name, const OptionValue *v, SandboxError *error);

int execution_query_set(ExecutionQuery *q, const char *name, const OptionValue *v, SandboxError *error);
int sandbox_list_query_set(SandboxListQuery *q, const char *name, const OptionValue *v, SandboxError *error);
void sandbox_list_query_done(SandboxListQuery *q);
/* What caller may see: its own sandboxes' executions and its own, or with the manage grant
 * (caller->granted, see access.h) all; of the tenant it acts for only, if it does. */
void execution_query_authorize(ExecutionQuery *q, const SandboxCaller *caller);
void execution_query_done(ExecutionQuery *q);
