/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What a caller may ask of a sandbox and of an exec, by the option names of the API
 * (systemd's property names where one exists), with their types and bounds. Front ends
 * decode their wire format into OptionValue and call the setters; all validation is here. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-bus.h>

#include "sandbox-api.h"

#define SANDBOX_MEMORY_MIN (16ULL * 1024 * 1024)
#define SANDBOX_MEMORY_DEFAULT (512ULL * 1024 * 1024)
#define SANDBOX_CPU_QUOTA_MIN_USEC 10000ULL
#define SANDBOX_CPU_QUOTA_DEFAULT_USEC 1000000ULL
#define SANDBOX_TASKS_MIN 4ULL
#define SANDBOX_TASKS_MAX 65536ULL
#define SANDBOX_TASKS_DEFAULT 256ULL
#define SANDBOX_LIFETIME_MAX_SEC (30ULL * 24 * 3600)
/* /work and /tmp are each a tmpfs of this size; their pages count against MemoryMax. */
#define SANDBOX_DISK_MIN (1ULL * 1024 * 1024)
#define SANDBOX_DISK_DEFAULT (1024ULL * 1024 * 1024)
#define SANDBOX_DISK_MAX (1024ULL * 1024 * 1024 * 1024)

#define EXEC_ARGS_MAX (128U * 1024) /* argv + environment, bytes: one agent datagram */
#define EXEC_ARGC_MAX 4096U
#define EXEC_ENVC_MAX 4096U
#define SANDBOX_WORKDIR "/work"

typedef struct SandboxLimits {
        uint64_t memory_max;
        uint64_t cpu_quota_per_sec_usec;
        uint64_t tasks_max;
} SandboxLimits;

typedef struct SandboxConfig {
        SandboxLimits limits;  /* 0 = not asked for: the template's value, else the default */
        uint64_t disk_max;     /* bytes, each of /work and /tmp; 0 = default */
        uint64_t timeout_sec;  /* lifetime, 0 = none */
        uint64_t idle_timeout_sec; /* destroyed after this long without a running exec, 0 = none */
        bool ephemeral;
} SandboxConfig;

typedef struct ExecConfig {
        char **argv;
        char **environment;
        char *working_directory;
        uint64_t timeout_sec;
        uint64_t output_max;
        void *stdin_data;
        size_t stdin_size;
        /* The caller's own descriptors, given straight to the process (no copy through
         * the daemon); -EBADF: not given. Owned. */
        int stdin_fd;
        int stdout_fd;
        int stderr_fd;
        bool tty;         /* a pseudo-terminal inside, relayed to StandardInput/Output */
        uint16_t tty_rows, tty_cols;
        bool background;  /* Start(), not Exec(): no timeout unless asked, no reply */
        uid_t caller;     /* who asked, for the record */
        bool timeout_set;
} ExecConfig;

/* The machine the limits are checked against. */
typedef struct SystemBounds {
        uint64_t memory_total;
        unsigned n_cpus;
} SystemBounds;

/* One decoded option. signature is its D-Bus type signature ("t", "b", "s", "as", "ay");
 * anything else is carried with the signature only, so that the setter can name it. */
typedef struct OptionValue {
        const char *signature;
        union {
                uint64_t u64;
                bool b;
                const char *s;
                char * const *strv;
                struct {
                        const void *data;
                        size_t size;
                } bytes;
                int fd; /* "h": borrowed; the setter dups it */
        };
} OptionValue;

int system_bounds_read(SystemBounds *ret);

/* Set one option; -EINVAL with SANDBOX_ERROR_INVALID_OPTION in error when the name is
 * unknown, the type wrong or the value out of range. */
int sandbox_config_set(SandboxConfig *c, const char *name, const OptionValue *v, sd_bus_error *error);
/* Fill what was not asked for from defaults (template first), then check the limits
 * against the machine. */
int sandbox_config_finalize(SandboxConfig *c, const SandboxLimits *template_defaults,
                            const SystemBounds *bounds, sd_bus_error *error);

void exec_config_init(ExecConfig *c);
/* Moves everything src owns to dst (which must hold nothing); src is left empty. */
void exec_config_move(ExecConfig *dst, ExecConfig *src);
void exec_config_done(ExecConfig *c);
int exec_config_set(ExecConfig *c, const char *name, const OptionValue *v, sd_bus_error *error);
/* Takes ownership of argv (also on failure); validates argv and sizes. */
int exec_config_set_argv(ExecConfig *c, char **argv, sd_bus_error *error);
int exec_config_finalize(ExecConfig *c, sd_bus_error *error);
