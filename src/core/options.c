/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <inttypes.h>

#include "agent-protocol.h"
#include "egress-policy.h"
#include "labels.h"
#include "options.h"
#include "sandbox.h"
#include "sandbox-errors.h"
#include "secret-store.h"
#include "strv.h"
#include "template.h"

/* After macro.h: <sys/param.h> defines MIN() and MAX() only where they are not yet. */
#include <resolv.h>

int system_bounds_read(SystemBounds *ret) {
        long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);

        if (pages <= 0 || page_size <= 0 || cpus <= 0)
                return -EIO;
        *ret = (SystemBounds) {
                .memory_total = (uint64_t) pages * (uint64_t) page_size,
                .n_cpus = (unsigned) cpus,
        };
        return 0;
}

static const char * const option_type_table[_OPTION_TYPE_MAX] = {
        [OPTION_STRING] = "string",
        [OPTION_BOOL]   = "boolean",
        [OPTION_UINT32] = "uint32",
        [OPTION_UINT64] = "uint64",
        [OPTION_INT32]  = "int32",
        [OPTION_INT64]  = "int64",
        [OPTION_DOUBLE] = "double",
        [OPTION_STRV]   = "string array",
        [OPTION_STRMAP] = "string map",
        [OPTION_BYTES]  = "bytes",
        [OPTION_FD]     = "file descriptor",
        [OPTION_OTHER]  = "other",
};

const char *option_type_to_string(OptionType t) {
        return t >= 0 && t < _OPTION_TYPE_MAX ? option_type_table[t] : NULL;
}

static const char *option_value_type_name(const OptionValue *v) {
        if (v->type == OPTION_OTHER && v->other)
                return v->other;
        return strna(option_type_to_string(v->type));
}

typedef struct OptionSpec {
        const char *name;
        OptionType type;
} OptionSpec;

static const OptionSpec sandbox_options[] = {
        { "MemoryMax",          OPTION_UINT64 },
        { "CPUQuotaPerSecUSec", OPTION_UINT64 },
        { "TasksMax",           OPTION_UINT64 },
        { "Timeout",            OPTION_UINT64 },
        { "DiskMax",            OPTION_UINT64 },
        { "IdleTimeout",        OPTION_UINT64 },
        { "Ephemeral",          OPTION_BOOL   },
        { "Name",               OPTION_STRING },
        { "ReuseExisting",      OPTION_BOOL   },
        { "Tenant",             OPTION_STRING },
        { "EgressAllow",        OPTION_STRV   },
        { "EgressDeny",         OPTION_STRV   },
        { "IdleAction",         OPTION_STRING },
        { "FromSnapshot",       OPTION_STRING },
        { "Storage",            OPTION_STRING },
        { "Secrets",            OPTION_STRV   },
        { "Labels",             OPTION_STRMAP },
        {}
};

static const OptionSpec snapshot_options[] = {
        { "IncludeTmp", OPTION_BOOL },
        {}
};

static const OptionSpec exec_options[] = {
        { "Timeout",          OPTION_UINT64 },
        { "TimeoutUSec",      OPTION_UINT64 },
        { "OutputMax",        OPTION_UINT64 },
        { "WorkingDirectory", OPTION_STRING },
        { "Environment",      OPTION_STRV   },
        { "Stdin",            OPTION_BYTES  },
        { "TTY",              OPTION_BOOL   },
        { "StdinPipe",        OPTION_BOOL   },
        { "TerminalRows",     OPTION_UINT64 },
        { "TerminalColumns",  OPTION_UINT64 },
        { "StandardInput",    OPTION_FD     },
        { "StandardOutput",   OPTION_FD     },
        { "StandardError",    OPTION_FD     },
        {}
};

static const OptionSpec file_options[] = {
        { "Mode",          OPTION_UINT32 },
        { "Append",        OPTION_BOOL   },
        { "CreateParents", OPTION_BOOL   },
        { "Max",           OPTION_UINT64 },
        {}
};

static const OptionSpec execution_filters[] = {
        { "SandboxId", OPTION_STRING },
        { "Owner",     OPTION_UINT32 },
        { "Since",     OPTION_UINT64 },
        { "Limit",     OPTION_UINT32 },
        { "Tenant",    OPTION_STRING },
        {}
};

static const OptionSpec sandbox_list_filters[] = {
        { "Offset",   OPTION_UINT64 },
        { "Limit",    OPTION_UINT32 },
        { "State",    OPTION_STRING },
        { "Template", OPTION_STRING },
        { "Name",     OPTION_STRING },
        { "Label",    OPTION_STRV   },
        {}
};

static const OptionSpec * const option_sets[_OPTION_SET_MAX] = {
        [OPTION_SET_SANDBOX]    = sandbox_options,
        [OPTION_SET_EXEC]       = exec_options,
        [OPTION_SET_FILE]       = file_options,
        [OPTION_SET_EXECUTIONS] = execution_filters,
        [OPTION_SET_SANDBOX_LIST] = sandbox_list_filters,
        [OPTION_SET_SNAPSHOT]   = snapshot_options,
};

OptionType option_set_lookup(OptionSet set, const char *name) {
        if (set < 0 || set >= _OPTION_SET_MAX || !name)
                return _OPTION_TYPE_INVALID;
        for (const OptionSpec *o = option_sets[set]; o->name; o++)
                if (streq(o->name, name))
                        return o->type;
        return _OPTION_TYPE_INVALID;
}

const char *option_set_name(OptionSet set, size_t i) {
        if (set < 0 || set >= _OPTION_SET_MAX)
                return NULL;
        for (const OptionSpec *o = option_sets[set]; o->name; o++, i--)
                if (i == 0)
                        return o->name;
        return NULL;
}

/* 0 if v is what set's option name takes; else InvalidOption, in each set's words. */
static int option_check(OptionSet set, const char *name, const OptionValue *v, SandboxError *error) {
        OptionType want = option_set_lookup(set, name);

        if (want < 0)
                switch (set) {
                case OPTION_SET_SANDBOX:
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Unknown sandbox option '%.64s'.", name);
                case OPTION_SET_EXEC:
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Unknown exec option '%.64s'.", name);
                case OPTION_SET_FILE:
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Unknown file option '%.64s'.", name);
                case OPTION_SET_SANDBOX_LIST:
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Unknown filter %.64s (known: Offset, Limit, State, Template, Name, Label).",
                                                 name);
                default:
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Unknown filter %s (known: SandboxId, Owner, Since, Limit, Tenant).", name);
                }
        if (v->type == want)
                return 0;
        switch (set) {
        case OPTION_SET_FILE:
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "File option %.64s has the wrong type.", name);
        case OPTION_SET_EXECUTIONS:
        case OPTION_SET_SANDBOX_LIST:
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Filter %s has the wrong type '%s'.", name, option_value_type_name(v));
        default:
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Option %s must be of type '%s', got '%s'.", name,
                                         option_type_to_string(want), option_value_type_name(v));
        }
}

static int check_range(const char *name, uint64_t value, uint64_t min, uint64_t max, SandboxError *error) {
        if (value < min || value > max)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "%s=%" PRIu64 " is out of range, must be between %" PRIu64
                                         " and %" PRIu64 ".", name, value, min, max);
        return 0;
}

static bool string_is_clean(const char *s, size_t max) {
        /* D-Bus guarantees valid UTF-8 without NUL; this bounds the length and keeps
         * control characters out of paths and names. */
        size_t n = strnlen(s, max + 1);
        if (n > max)
                return false;
        for (const char *p = s; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        return false;
        return true;
}

bool sandbox_tenant_is_valid(const char *s) {
        size_t n;

        if (!s)
                return false;
        n = strnlen(s, SANDBOX_NAME_MAX + 1);
        if (n == 0 || n > SANDBOX_NAME_MAX)
                return false;
        return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

bool sandbox_name_is_valid(const char *s) {
        return sandbox_tenant_is_valid(s) && !sandbox_id_is_valid(s);
}

/* Name and Tenant into their place in the config. */
static int set_label(char dest[static SANDBOX_NAME_MAX + 1], const char *name, const char *s, bool (*valid)(const char *),
                     SandboxError *error) {
        if (!valid(s))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "%s must be 1 to %u characters of A-Z a-z 0-9 . _ -%s, got '%.*s'.", name,
                                         SANDBOX_NAME_MAX, valid == sandbox_name_is_valid ?
                                         ", and not of the form of a sandbox id" : "", (int) SANDBOX_NAME_MAX, s);
        strcpy(dest, s);
        return 0;
}

int sandbox_tenant_check(const char *s, SandboxError *error) {
        char buf[SANDBOX_NAME_MAX + 1];

        return set_label(buf, "Tenant", s, sandbox_tenant_is_valid, error);
}

/* *dest = a copy of s, or NULL for NULL or ""; the old one freed. */
static int free_and_strdup_or_null(char **dest, const char *s) {
        char *copy = NULL;

        if (!isempty(s)) {
                copy = strdup(s);
                if (!copy)
                        return -ENOMEM;
        }
        free(*dest);
        *dest = copy;
        return 0;
}

/* Every rule checked (egress_rule_parse()) and stored in its canonical form, a line each. */
static int set_egress(char **dest, const char *name, char * const *l, bool deny, SandboxError *error) {
        char text[SANDBOX_EGRESS_TEXT_MAX] = "", rule[EGRESS_RULE_MAX + 8];
        size_t n = 0, len = 0;

        for (char * const *i = l; i && *i; i++, n++) {
                EgressRule r;
                size_t k;

                if (n >= EGRESS_RULES_MAX)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "%s: at most %u rules.", name,
                                                 EGRESS_RULES_MAX);
                if (egress_rule_parse(*i, deny, &r) < 0 || egress_rule_format(&r, deny, rule, sizeof(rule)) < 0)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "%s: '%.64s' is not a host name, *.name or address range, with an "
                                                 "optional :port.", name, *i);
                k = strlen(rule);
                if (len + k + 1 >= sizeof(text))
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "%s: more than %u bytes of rules.", name, SANDBOX_EGRESS_TEXT_MAX - 1);
                memcpy(text + len, rule, k);
                len += k;
                text[len++] = '\n';
                text[len] = 0;
        }
        return free_and_strdup_or_null(dest, len > 0 ? text : NULL);
}

/* Every binding checked (secret_binding_parse()) and stored canonical, a line each. */
static int set_secrets(char **dest, char * const *l, SandboxError *error) {
        _cleanup_free_ char *text = NULL;
        size_t n = 0, len = 0;

        for (char * const *i = l; i && *i; i++, n++) {
                char line[SECRET_NAME_MAX + SECRET_HOST_MAX + SECRET_HEADER_MAX + 8];
                SecretBinding b;

                if (n >= SANDBOX_SECRETS_MAX)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "Secrets: at most %u bindings.",
                                                 SANDBOX_SECRETS_MAX);
                if (secret_binding_parse(*i, &b) < 0 || secret_binding_format(&b, line, sizeof(line)) < 0)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Secrets: '%.128s' is not NAME, NAME:file or NAME@HOST:HEADER.", *i);
                size_t k = strlen(line);
                char *t = realloc(text, len + k + 2);
                if (!t)
                        return -ENOMEM;
                text = t;
                memcpy(text + len, line, k);
                len += k;
                text[len++] = '\n';
                text[len] = 0;
        }
        free(*dest);
        *dest = TAKE_PTR(text);
        return 0;
}

int sandbox_config_secrets_defaults(SandboxConfig *c, char * const *bindings, SandboxError *error) {
        if (c->secrets_set)
                return 0;
        return set_secrets(&c->secrets, bindings, error);
}

int sandbox_config_secret_bindings(const SandboxConfig *c, SecretBinding **ret, size_t *ret_n) {
        _cleanup_free_ SecretBinding *l = NULL;
        size_t n = 0;

        for (const char *p = c->secrets ?: ""; *p;) {
                const char *e = strchrnul(p, '\n');
                _cleanup_free_ char *line = strndup(p, (size_t) (e - p));
                SecretBinding *t;

                if (!line)
                        return -ENOMEM;
                t = reallocarray(l, n + 1, sizeof(SecretBinding));
                if (!t)
                        return -ENOMEM;
                l = t;
                if (secret_binding_parse(line, &l[n]) < 0)
                        return -EBADMSG;
                n++;
                p = *e ? e + 1 : e;
        }
        *ret = TAKE_PTR(l);
        *ret_n = n;
        return 0;
}

int sandbox_config_copy(SandboxConfig *dest, const SandboxConfig *src) {
        *dest = *src;
        dest->egress_allow = dest->egress_deny = dest->secrets = NULL;
        dest->labels = NULL;
        if (free_and_strdup_or_null(&dest->egress_allow, src->egress_allow) < 0 ||
            free_and_strdup_or_null(&dest->egress_deny, src->egress_deny) < 0 ||
            free_and_strdup_or_null(&dest->secrets, src->secrets) < 0 ||
            (src->labels && !(dest->labels = strv_copy(src->labels)))) {
                sandbox_config_done(dest);
                return -ENOMEM;
        }
        return 0;
}

int sandbox_config_inherit(SandboxConfig *c, const SandboxConfig *source) {
        if (!c->limits.memory_max)
                c->limits.memory_max = source->limits.memory_max;
        if (!c->limits.cpu_quota_per_sec_usec)
                c->limits.cpu_quota_per_sec_usec = source->limits.cpu_quota_per_sec_usec;
        if (!c->limits.tasks_max)
                c->limits.tasks_max = source->limits.tasks_max;
        if (!c->disk_max)
                c->disk_max = source->disk_max;
        if (!c->timeout_set)
                c->timeout_sec = source->timeout_sec;
        if (!c->idle_timeout_set)
                c->idle_timeout_sec = source->idle_timeout_sec;
        if (!c->idle_action_set)
                c->idle_action = source->idle_action;
        /* The source's rules as it has them (its template's included), as the fork's own:
         * a template changed since does not apply instead. */
        if (!c->egress_allow_set) {
                if (free_and_strdup_or_null(&c->egress_allow, source->egress_allow) < 0)
                        return -ENOMEM;
                c->egress_allow_set = true;
        }
        if (!c->egress_deny_set) {
                if (free_and_strdup_or_null(&c->egress_deny, source->egress_deny) < 0)
                        return -ENOMEM;
                c->egress_deny_set = true;
        }
        if (!c->secrets_set) {
                if (free_and_strdup_or_null(&c->secrets, source->secrets) < 0)
                        return -ENOMEM;
                c->secrets_set = true;
        }
        return 0;
}

bool sandbox_config_egress_equal(const SandboxConfig *a, const SandboxConfig *b) {
        return streq(a->egress_allow ?: "", b->egress_allow ?: "") && streq(a->egress_deny ?: "", b->egress_deny ?: "");
}

void sandbox_config_done(SandboxConfig *c) {
        c->egress_allow = mfree(c->egress_allow);
        c->egress_deny = mfree(c->egress_deny);
        c->secrets = mfree(c->secrets);
        c->labels = strv_free(c->labels);
}

int sandbox_config_egress_strv(const SandboxConfig *c, bool deny, char ***ret) {
        const char *text = (deny ? c->egress_deny : c->egress_allow) ?: "";
        _cleanup_strv_free_ char **l = NULL;

        l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (const char *p = text, *e; *p; p = e + 1) {
                e = strchrnul(p, '\n');
                _cleanup_free_ char *rule = strndup(p, (size_t) (e - p));
                if (!rule || strv_extend(&l, rule) < 0)
                        return -ENOMEM;
                if (!*e)
                        break;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

bool sandbox_config_has_egress(const SandboxConfig *c) {
        return !isempty(c->egress_allow);
}

int sandbox_config_egress_defaults(SandboxConfig *c, char * const *allow, char * const *deny, SandboxError *error) {
        int r = 0;

        if (!c->egress_allow_set)
                r = set_egress(&c->egress_allow, "EgressAllow", allow, false, error);
        if (r >= 0 && !c->egress_deny_set)
                r = set_egress(&c->egress_deny, "EgressDeny", deny, true, error);
        return r;
}

int sandbox_config_set(SandboxConfig *c, const char *name, const OptionValue *v, SandboxError *error) {
        uint64_t u = v->u64;
        int r;

        r = option_check(OPTION_SET_SANDBOX, name, v, error);
        if (r < 0)
                return r;

        /* Absolute bounds here; the machine's bounds in finalize. A value below the
         * minimum is refused at once, quoting the maximum finalize would (this machine's),
         * so that the range a caller is told is the one that holds. */
        if (streq(name, "MemoryMax")) {
                SystemBounds b = { .memory_total = UINT64_MAX - 1 };
                if (u < SANDBOX_MEMORY_MIN)
                        (void) system_bounds_read(&b);
                r = check_range(name, u, SANDBOX_MEMORY_MIN, u < SANDBOX_MEMORY_MIN ? b.memory_total : UINT64_MAX - 1,
                                error);
                c->limits.memory_max = u;
        } else if (streq(name, "CPUQuotaPerSecUSec")) {
                SystemBounds b = { .n_cpus = 0 };
                if (u < SANDBOX_CPU_QUOTA_MIN_USEC)
                        (void) system_bounds_read(&b);
                r = check_range(name, u, SANDBOX_CPU_QUOTA_MIN_USEC,
                                u < SANDBOX_CPU_QUOTA_MIN_USEC && b.n_cpus > 0 ? b.n_cpus * 1000000ULL : UINT64_MAX - 1,
                                error);
                c->limits.cpu_quota_per_sec_usec = u;
        } else if (streq(name, "TasksMax")) {
                r = check_range(name, u, SANDBOX_TASKS_MIN, SANDBOX_TASKS_MAX, error);
                c->limits.tasks_max = u;
        } else if (streq(name, "IdleTimeout")) {
                r = check_range(name, u, 0, SANDBOX_LIFETIME_MAX_SEC, error);
                c->idle_timeout_sec = u;
                c->idle_timeout_set = true;
        } else if (streq(name, "DiskMax")) {
                r = check_range(name, u, SANDBOX_DISK_MIN, SANDBOX_DISK_MAX, error);
                c->disk_max = u;
        } else if (streq(name, "Timeout")) {
                r = check_range(name, u, 0, SANDBOX_LIFETIME_MAX_SEC, error);
                c->timeout_sec = u;
                c->timeout_set = true;
        } else if (streq(name, "Name"))
                r = set_label(c->name, name, v->s, sandbox_name_is_valid, error);
        else if (streq(name, "Tenant"))
                r = set_label(c->tenant, name, v->s, sandbox_tenant_is_valid, error);
        else if (streq(name, "ReuseExisting"))
                c->reuse_existing = v->b;
        else if (streq(name, "EgressAllow")) {
                r = set_egress(&c->egress_allow, name, v->strv, false, error);
                c->egress_allow_set = true;
        } else if (streq(name, "EgressDeny")) {
                r = set_egress(&c->egress_deny, name, v->strv, true, error);
                c->egress_deny_set = true;
        } else if (streq(name, "Secrets")) {
                r = set_secrets(&c->secrets, v->strv, error);
                c->secrets_set = true;
        } else if (streq(name, "IdleAction")) {
                IdleAction a = idle_action_from_string(v->s);
                if (a < 0)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "IdleAction must be destroy, pause or hibernate, got '%.16s'.", v->s);
                c->idle_action = a;
                c->idle_action_set = true;
        } else if (streq(name, "Storage")) {
                SandboxStorage st = sandbox_storage_from_string(v->s);
                if (st < 0)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Storage must be disk or tmpfs, got '%.16s'.", v->s);
                c->limits.storage = st;
        } else if (streq(name, "FromSnapshot")) {
                if (!sandbox_id_is_valid(v->s))
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "FromSnapshot must be a snapshot id (16 hex digits), got '%.64s'.", v->s);
                strcpy(c->from_snapshot, v->s);
        } else if (streq(name, "Labels")) {
                char **l = NULL;
                r = labels_from_pairs(v->strv, &l, error);
                if (r < 0)
                        return r;
                strv_free(c->labels);
                c->labels = l;
        } else /* Ephemeral */
                c->ephemeral = v->b;
        return r;
}

int sandbox_config_finalize(SandboxConfig *c, const SandboxLimits *template_defaults,
                            const SystemBounds *bounds, SandboxError *error) {
        SandboxLimits *l = &c->limits;
        int r;

        /* A default bigger than a small machine is clamped rather than refused: only what
         * the caller asked for explicitly is an error. */
        if (l->memory_max == 0)
                l->memory_max = MIN(template_defaults && template_defaults->memory_max ?
                                    template_defaults->memory_max : SANDBOX_MEMORY_DEFAULT,
                                    bounds->memory_total);
        if (l->cpu_quota_per_sec_usec == 0)
                l->cpu_quota_per_sec_usec = MIN(template_defaults && template_defaults->cpu_quota_per_sec_usec ?
                                                template_defaults->cpu_quota_per_sec_usec : SANDBOX_CPU_QUOTA_DEFAULT_USEC,
                                                (uint64_t) bounds->n_cpus * 1000000ULL);
        if (l->tasks_max == 0)
                l->tasks_max = template_defaults && template_defaults->tasks_max ?
                        template_defaults->tasks_max : SANDBOX_TASKS_DEFAULT;

        if (l->storage == STORAGE_DEFAULT && template_defaults && template_defaults->storage != STORAGE_DEFAULT &&
            (template_defaults->storage != STORAGE_DISK || bounds->workspaces))
                l->storage = template_defaults->storage;
        if (l->storage == STORAGE_DEFAULT)
                /* On disk what is kept; in memory what lives for one command (bench/, "storage"). */
                l->storage = c->ephemeral || !bounds->workspaces ? STORAGE_TMPFS : STORAGE_DISK;
        if (l->storage == STORAGE_DISK && !bounds->workspaces)
                return sandbox_error_set(error, SANDBOX_ERR_NOT_SUPPORTED,
                                         "Storage=disk is not available: sandboxd has no workspace pool "
                                         "(sandboxd-workspaces.service sets it up; see its log).");
        if (l->storage == STORAGE_TMPFS && c->disk_max > l->memory_max)
                /* Each tmpfs's pages are the sandbox's memory: a disk bigger than the memory
                 * would end in an OOM kill, not in "No space left on device". */
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "DiskMax (%" PRIu64 " bytes) is above MemoryMax (%" PRIu64 " bytes) with "
                                         "Storage=tmpfs, whose files are kept in the sandbox's memory; give "
                                         "Storage=disk, a smaller DiskMax or a larger MemoryMax.",
                                         c->disk_max, l->memory_max);
        if (c->disk_max == 0)
                c->disk_max = l->storage == STORAGE_TMPFS ? MIN(SANDBOX_DISK_DEFAULT, l->memory_max) : SANDBOX_DISK_DEFAULT;

        r = check_range("MemoryMax", l->memory_max, SANDBOX_MEMORY_MIN, bounds->memory_total, error);
        if (r < 0)
                return r;
        r = check_range("CPUQuotaPerSecUSec", l->cpu_quota_per_sec_usec, SANDBOX_CPU_QUOTA_MIN_USEC,
                        (uint64_t) bounds->n_cpus * 1000000ULL, error);
        if (r < 0)
                return r;
        return check_range("TasksMax", l->tasks_max, SANDBOX_TASKS_MIN, SANDBOX_TASKS_MAX, error);
}

void exec_config_init(ExecConfig *c) {
        *c = (ExecConfig) {
                .timeout_usec = EXEC_TIMEOUT_DEFAULT_SEC * 1000000ULL,
                .output_max = EXEC_OUTPUT_DEFAULT,
                .stdin_fd = -EBADF,
                .stdout_fd = -EBADF,
                .stderr_fd = -EBADF,
        };
}

void exec_config_move(ExecConfig *dst, ExecConfig *src) {
        *dst = *src;
        exec_config_init(src);
}

void exec_config_refuse(ExecConfig *c, int r, SandboxError *error) {
        assert(c);
        assert(r < 0);
        if (c->refused < 0)
                return; /* the first refusal stands */
        c->refused = r;
        if (error) {
                c->refused_error = *error;
                *error = SANDBOX_ERROR_NULL;
        }
}

void exec_config_done(ExecConfig *c) {
        c->refused = 0;
        sandbox_error_done(&c->refused_error);
        c->argv = strv_free(c->argv);
        c->environment = strv_free(c->environment);
        c->working_directory = mfree(c->working_directory);
        c->stdin_data = mfree(c->stdin_data);
        c->stdin_size = 0;
        c->stdin_fd = safe_close(c->stdin_fd);
        c->stdout_fd = safe_close(c->stdout_fd);
        c->stderr_fd = safe_close(c->stderr_fd);
}

static size_t strv_bytes(char * const *l) {
        size_t n = 0;
        if (l)
                for (char * const *i = l; *i; i++)
                        n += strlen(*i) + 1;
        return n;
}

int exec_config_set(ExecConfig *c, const char *name, const OptionValue *v, SandboxError *error) {
        int r;

        r = option_check(OPTION_SET_EXEC, name, v, error);
        if (r < 0)
                return r;

        /* Refused out of range, never clamped: the caller learns the bound. */
        if (streq(name, "Timeout")) {
                r = check_range(name, v->u64, 1, EXEC_TIMEOUT_MAX_SEC, error);
                if (r < 0)
                        return r;
                c->timeout_usec = v->u64 * 1000000ULL;
                c->timeout_set = true;
                return 0;
        }
        if (streq(name, "TimeoutUSec")) {
                r = check_range(name, v->u64, EXEC_TIMEOUT_MIN_USEC, EXEC_TIMEOUT_MAX_USEC, error);
                if (r < 0)
                        return r;
                c->timeout_usec = v->u64;
                c->timeout_set = true;
                return 0;
        }
        if (streq(name, "OutputMax")) {
                c->output_max = v->u64;
                c->output_max_set = true;
                return check_range(name, c->output_max, 0, EXEC_OUTPUT_MAX, error);
        }
        if (streq(name, "WorkingDirectory")) {
                if (v->s[0] != '/' || !string_is_clean(v->s, 4096))
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "WorkingDirectory must be an absolute path without control characters.");
                free(c->working_directory);
                c->working_directory = strdup(v->s);
                return c->working_directory ? 0 : -ENOMEM;
        }
        if (streq(name, "Environment")) {
                if (strv_length(v->strv) > EXEC_ENVC_MAX)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Too many Environment entries (at most %u).", EXEC_ENVC_MAX);
                for (char * const *e = v->strv; e && *e; e++)
                        if (!env_assignment_is_valid(*e))
                                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                         "Environment entry is not NAME=VALUE: '%.64s'", *e);
                char **copy = strv_copy(v->strv ?: (char * const[]) { NULL });
                if (!copy)
                        return -ENOMEM;
                strv_free(c->environment);
                c->environment = copy;
                return 0;
        }
        if (streq(name, "Stdin")) {
                if (v->bytes.size > EXEC_STDIN_MAX)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Stdin is larger than %llu MiB (%llu bytes): write more to a file "
                                                 "(D-Bus Upload, varlink WriteFile, an HTTP file upload) and "
                                                 "redirect the command's input from it.",
                                                 EXEC_STDIN_MAX >> 20, EXEC_STDIN_MAX);
                void *d = malloc(v->bytes.size ?: 1);
                if (!d)
                        return -ENOMEM;
                if (v->bytes.size > 0)
                        memcpy(d, v->bytes.data, v->bytes.size);
                free(c->stdin_data);
                c->stdin_data = d;
                c->stdin_size = v->bytes.size;
                return 0;
        }
        if (streq(name, "TTY")) {
                c->tty = v->b;
                return 0;
        }
        if (streq(name, "StdinPipe")) {
                c->stdin_pipe = v->b;
                return 0;
        }
        if (streq(name, "TerminalRows") || streq(name, "TerminalColumns")) {
                r = check_range(name, v->u64, 1, UINT16_MAX, error);
                if (r < 0)
                        return r;
                *(streq(name, "TerminalRows") ? &c->tty_rows : &c->tty_cols) = (uint16_t) v->u64;
                return 0;
        }

        /* StandardInput, StandardOutput, StandardError */
        int *dest = streq(name, "StandardInput") ? &c->stdin_fd :
                    streq(name, "StandardOutput") ? &c->stdout_fd : &c->stderr_fd;
        struct stat st;
        int flags, fd;

        /* A directory (or O_PATH) descriptor would be a way out of the sandbox's mount
         * namespace (openat() relative to it): only streams and files. */
        flags = fcntl(v->fd, F_GETFL);
        if (flags < 0 || fstat(v->fd, &st) < 0)
                return -errno;
        if ((flags & O_PATH) || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) ||
                                  S_ISCHR(st.st_mode) || S_ISREG(st.st_mode)))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "%s must be a pipe, socket, terminal or regular file.", name);
        fd = fcntl(v->fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return -errno;
        safe_close(*dest);
        *dest = fd;
        return 0;
}

int exec_config_set_argv(ExecConfig *c, char **argv, SandboxError *error) {
        _cleanup_strv_free_ char **l = argv;

        if (strv_isempty(l))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "argv must not be empty.");
        if (isempty(l[0]))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "argv[0] must not be empty.");
        if (strv_length(l) > EXEC_ARGC_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Too many arguments (at most %u).", EXEC_ARGC_MAX);

        strv_free(c->argv);
        c->argv = TAKE_PTR(l);
        return 0;
}

int exec_config_finalize(ExecConfig *c, SandboxError *error) {
        /* A terminal is relayed between the caller's descriptors and the process: without
         * them there is no one at the other end, except for a background process, whose
         * terminal the core relays to its own pipes (its input from exec_write_stdin(),
         * its output read like any background process's). */
        if (c->tty && c->background && c->stdin_fd < 0 && c->stdout_fd < 0)
                c->stdin_pipe = true;
        else if (c->tty && (c->stdin_fd < 0 || c->stdout_fd < 0))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                          "TTY needs StandardInput and StandardOutput%s.",
                                          c->background ? " (or neither)" : "");
        if (c->stdin_pipe && !c->background)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                          "StdinPipe is for background processes (Start), whose input can be "
                                          "written later.");
        if (c->stdin_pipe && (c->stdin_fd >= 0 || c->stdin_data))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                          "StdinPipe cannot be given with Stdin or StandardInput.");
        if (c->stdin_fd >= 0 && c->stdin_data)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                          "Stdin and StandardInput cannot both be given.");
        if (strv_isempty(c->argv))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "argv must not be empty.");
        if (strv_bytes(c->argv) + strv_bytes(c->environment) > EXEC_ARGS_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "argv and Environment together exceed %u bytes.", EXEC_ARGS_MAX);
        if (!c->working_directory) {
                c->working_directory = strdup(SANDBOX_WORKDIR);
                if (!c->working_directory)
                        return -ENOMEM;
        }
        return 0;
}

void file_options_init(FileOptions *o) {
        *o = (FileOptions) {
                .mode = AGENT_FILE_MODE_DEFAULT,
                .max = AGENT_FILE_UNLIMITED,
        };
}

int file_options_set(FileOptions *o, const char *name, const OptionValue *v, SandboxError *error) {
        int r;

        r = option_check(OPTION_SET_FILE, name, v, error);
        if (r < 0)
                return r;
        if (streq(name, "Mode")) {
                if (v->u32 > 07777)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "Mode must be at most 07777.");
                o->mode = v->u32;
        } else if (streq(name, "Append"))
                o->append = v->b;
        else if (streq(name, "CreateParents"))
                o->parents = v->b;
        else /* Max */
                o->max = v->u64;
        return 0;
}

int execution_query_set(ExecutionQuery *q, const char *name, const OptionValue *v, SandboxError *error) {
        int r;

        r = option_check(OPTION_SET_EXECUTIONS, name, v, error);
        if (r < 0)
                return r;
        if (streq(name, "SandboxId")) {
                char *id = strdup(v->s);
                if (!id)
                        return -ENOMEM;
                free(q->sandbox_id);
                q->filter.sandbox_id = q->sandbox_id = id;
        } else if (streq(name, "Owner")) {
                q->filter.owner_set = true;
                q->filter.owner = (uid_t) v->u32;
        } else if (streq(name, "Since"))
                q->filter.since = v->u64;
        else if (streq(name, "Tenant"))
                return set_label(q->filter.tenant, name, v->s, sandbox_tenant_is_valid, error);
        else { /* Limit */
                if (v->u32 == 0 || v->u32 > LIST_EXECUTIONS_LIMIT_MAX)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Limit must be 1…%u.", LIST_EXECUTIONS_LIMIT_MAX);
                q->filter.limit = v->u32;
        }
        return 0;
}

void execution_query_authorize(ExecutionQuery *q, const SandboxCaller *caller) {
        q->filter.uid = caller->uid;
        q->filter.any_owner = caller->granted;
        /* Valid: the front end took it from a call that was checked (or "" for none). */
        snprintf(q->filter.caller_tenant, sizeof(q->filter.caller_tenant), "%s", strempty(caller->tenant));
}

void execution_query_done(ExecutionQuery *q) {
        q->sandbox_id = mfree(q->sandbox_id);
        q->filter = (ExecutionFilter) {};
}

int sandbox_list_query_set(SandboxListQuery *q, const char *name, const OptionValue *v, SandboxError *error) {
        int r;

        r = option_check(OPTION_SET_SANDBOX_LIST, name, v, error);
        if (r < 0)
                return r;
        if (streq(name, "Offset"))
                q->offset = v->u64;
        else if (streq(name, "Limit")) {
                if (v->u32 == 0 || v->u32 > SANDBOX_LIST_LIMIT_MAX)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "Limit must be 1…%u.",
                                                 SANDBOX_LIST_LIMIT_MAX);
                q->limit = v->u32;
        } else if (streq(name, "State")) {
                q->state = sandbox_state_from_string(v->s);
                if (q->state < 0)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "State must be one of starting, running, paused, stopping, dead.");
        } else if (streq(name, "Template"))
                return set_label(q->template_name, name, v->s, template_name_is_valid, error);
        else if (streq(name, "Label")) {
                char **copy;

                if (strv_length(v->strv) > SANDBOX_LABELS_MAX)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "Label: at most %u selectors.",
                                                 SANDBOX_LABELS_MAX);
                for (char * const *i = v->strv; i && *i; i++) {
                        r = label_selector_check(*i, error);
                        if (r < 0)
                                return r;
                }
                copy = strv_copy(v->strv ?: (char * const[]) { NULL });
                if (!copy)
                        return -ENOMEM;
                strv_free(q->labels);
                q->labels = copy;
        } else /* Name */
                return set_label(q->name, name, v->s, sandbox_name_is_valid, error);
        return 0;
}

void sandbox_list_query_done(SandboxListQuery *q) {
        q->labels = strv_free(q->labels);
}

static const char * const storage_table[_STORAGE_MAX] = {
        [STORAGE_DEFAULT] = "default",
        [STORAGE_DISK] = "disk",
        [STORAGE_TMPFS] = "tmpfs",
};

const char *sandbox_storage_to_string(SandboxStorage s) {
        return s >= 0 && s < _STORAGE_MAX ? storage_table[s] : NULL;
}

SandboxStorage sandbox_storage_from_string(const char *s) {
        /* "default" is no value to ask for. */
        for (size_t i = STORAGE_DISK; s && i < ELEMENTSOF(storage_table); i++)
                if (streq(storage_table[i], s))
                        return (SandboxStorage) i;
        return _STORAGE_INVALID;
}

static const char * const idle_action_table[_IDLE_ACTION_MAX] = {
        [IDLE_ACTION_DESTROY]   = "destroy",
        [IDLE_ACTION_PAUSE]     = "pause",
        [IDLE_ACTION_HIBERNATE] = "hibernate",
};

const char *idle_action_to_string(IdleAction a) {
        return a >= 0 && a < _IDLE_ACTION_MAX ? idle_action_table[a] : NULL;
}

IdleAction idle_action_from_string(const char *s) {
        for (size_t i = 0; s && i < ELEMENTSOF(idle_action_table); i++)
                if (streq(idle_action_table[i], s))
                        return (IdleAction) i;
        return _IDLE_ACTION_INVALID;
}

int snapshot_options_set(SnapshotOptions *o, const char *name, const OptionValue *v, SandboxError *error) {
        int r;

        r = option_check(OPTION_SET_SNAPSHOT, name, v, error);
        if (r < 0)
                return r;
        o->include_tmp = v->b; /* IncludeTmp */
        return 0;
}

int option_set_apply(OptionSet set, void *target, const char *name, const OptionValue *v, SandboxError *error) {
        switch (set) {
        case OPTION_SET_SANDBOX:
                return sandbox_config_set(target, name, v, error);
        case OPTION_SET_EXEC:
                return exec_config_set(target, name, v, error);
        case OPTION_SET_FILE:
                return file_options_set(target, name, v, error);
        case OPTION_SET_EXECUTIONS:
                return execution_query_set(target, name, v, error);
        case OPTION_SET_SANDBOX_LIST:
                return sandbox_list_query_set(target, name, v, error);
        case OPTION_SET_SNAPSHOT:
                return snapshot_options_set(target, name, v, error);
        default:
                return -EINVAL;
        }
}

/* ---- JSON ---- */

/* What a decoded JSON value holds on to until it is applied. */
typedef struct JsonOptionStorage {
        char **strv;
        char **pairs;             /* borrowed strings of the object */
        void *bytes;
} JsonOptionStorage;

static void json_option_storage_done(JsonOptionStorage *st) {
        st->strv = strv_free(st->strv);
        st->pairs = mfree(st->pairs);
        st->bytes = mfree(st->bytes);
}

/* An integer as the type the option has, if it fits; else as itself, for the setter to
 * refuse by type. */
static void json_integer_to_option(json_object *j, OptionType want, OptionValue *v) {
        int64_t i = json_object_get_int64(j);
        uint64_t u = i >= 0 ? json_object_get_uint64(j) : 0;

        if (i < 0) {
                if (want == OPTION_INT32 && i >= INT32_MIN)
                        *v = (OptionValue) { .type = OPTION_INT32, .i32 = (int32_t) i };
                else if (want == OPTION_DOUBLE)
                        *v = (OptionValue) { .type = OPTION_DOUBLE, .d = (double) i };
                else
                        *v = (OptionValue) { .type = OPTION_INT64, .i64 = i };
                return;
        }
        if (want == OPTION_UINT32 && u <= UINT32_MAX)
                *v = (OptionValue) { .type = OPTION_UINT32, .u32 = (uint32_t) u };
        else if (want == OPTION_INT32 && u <= INT32_MAX)
                *v = (OptionValue) { .type = OPTION_INT32, .i32 = (int32_t) u };
        else if (want == OPTION_INT64 && u <= INT64_MAX)
                *v = (OptionValue) { .type = OPTION_INT64, .i64 = (int64_t) u };
        else if (want == OPTION_DOUBLE)
                *v = (OptionValue) { .type = OPTION_DOUBLE, .d = (double) u };
        else
                *v = (OptionValue) { .type = OPTION_UINT64, .u64 = u };
}

static int json_to_option(const char *name, json_object *j, OptionType want, const int *fds, size_t n_fds,
                          OptionValue *v, JsonOptionStorage *st, SandboxError *error) {
        switch (json_object_get_type(j)) {
        case json_type_boolean:
                *v = (OptionValue) { .type = OPTION_BOOL, .b = json_object_get_boolean(j) };
                return 0;
        case json_type_double:
                *v = (OptionValue) { .type = OPTION_DOUBLE, .d = json_object_get_double(j) };
                return 0;
        case json_type_int:
                if (want == OPTION_FD) {
                        /* A descriptor is passed beside the message; the value is its index. */
                        int64_t i = json_object_get_int64(j);
                        if (i < 0 || (uint64_t) i >= n_fds)
                                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                         "%.64s: no descriptor %" PRIi64 " was passed.", name, i);
                        *v = (OptionValue) { .type = OPTION_FD, .fd = fds[i] };
                        return 0;
                }
                json_integer_to_option(j, want, v);
                return 0;
        case json_type_string: {
                const char *s = json_object_get_string(j);
                size_t n = (size_t) json_object_get_string_len(j);

                if (want != OPTION_BYTES) {
                        if (strlen(s) != n)
                                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                         "%.64s must not contain NUL bytes.", name);
                        *v = (OptionValue) { .type = OPTION_STRING, .s = s };
                        return 0;
                }
                /* Bytes are base64, as varlink has them. */
                st->bytes = malloc(n / 4 * 3 + 3);
                if (!st->bytes)
                        return -ENOMEM;
                int k = b64_pton(s, st->bytes, n / 4 * 3 + 3);
                if (k < 0)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "%.64s must be base64.", name);
                *v = (OptionValue) { .type = OPTION_BYTES, .bytes = { st->bytes, (size_t) k } };
                return 0;
        }
        case json_type_array: {
                size_t n = json_object_array_length(j), bytes = 0;

                if (n > EXEC_ENVC_MAX)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "%.64s: at most %u strings.", name, EXEC_ENVC_MAX);
                st->strv = calloc(n + 1, sizeof(char *));
                if (!st->strv)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        json_object *e = json_object_array_get_idx(j, i);

                        if (!json_object_is_type(e, json_type_string)) {
                                st->strv = strv_free(st->strv);
                                *v = (OptionValue) { .type = OPTION_OTHER, .other = "array" };
                                return 0;
                        }
                        bytes += (size_t) json_object_get_string_len(e) + 1;
                        if (bytes > EXEC_ARGS_MAX)
                                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                         "%.64s: at most %u bytes in all.", name, EXEC_ARGS_MAX);
                        st->strv[i] = strdup(json_object_get_string(e));
                        if (!st->strv[i])
                                return -ENOMEM;
                }
                *v = (OptionValue) { .type = OPTION_STRV, .strv = st->strv };
                return 0;
        }
        case json_type_object: {
                size_t n = 0;

                if (want != OPTION_STRMAP) {
                        *v = (OptionValue) { .type = OPTION_OTHER, .other = "object" };
                        return 0;
                }
                if (json_object_object_length(j) > (int) SANDBOX_LABELS_MAX)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "%.64s: at most %u members.",
                                                 name, SANDBOX_LABELS_MAX);
                st->pairs = calloc(2 * (size_t) json_object_object_length(j) + 1, sizeof(char *));
                if (!st->pairs)
                        return -ENOMEM;
                json_object_object_foreach(j, key, e) {
                        if (!json_object_is_type(e, json_type_string) ||
                            strlen(json_object_get_string(e)) != (size_t) json_object_get_string_len(e))
                                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                         "%.64s: the value of '%.64s' must be a string.", name, key);
                        st->pairs[n++] = key;
                        st->pairs[n++] = (char *) json_object_get_string(e);
                }
                *v = (OptionValue) { .type = OPTION_STRMAP, .strv = st->pairs };
                return 0;
        }
        default:
                *v = (OptionValue) { .type = OPTION_OTHER, .other = "null" };
                return 0;
        }
}

int options_from_json(json_object *o, OptionSet set, void *target, const int *fds, size_t n_fds,
                      SandboxError *error) {
        int r;

        if (!o)
                return 0;
        if (!json_object_is_type(o, json_type_object))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "Options must be a JSON object.");

        json_object_object_foreach(o, name, j) {
                JsonOptionStorage st = {};
                OptionValue v;

                /* null is an absent option, as varlink has its optional fields. */
                if (!j)
                        continue;
                r = json_to_option(name, j, option_set_lookup(set, name), fds, n_fds, &v, &st, error);
                if (r >= 0)
                        r = option_set_apply(set, target, name, &v, error);
                json_option_storage_done(&st);
                if (r < 0)
                        return r;
        }
        return 0;
}
