/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "options.h"
#include <inttypes.h>

#include "sandbox-errors.h"
#include "strv.h"

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

static int option_type_error(const char *name, const OptionValue *v, const char *want, sd_bus_error *error) {
        return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                 "Option %s must be of type '%s', got '%s'.", name, want, v->signature);
}

static bool option_is(const OptionValue *v, const char *sig) {
        return v->signature && streq(v->signature, sig);
}

static int option_get_u64(const char *name, const OptionValue *v, uint64_t *ret, sd_bus_error *error) {
        if (!option_is(v, "t"))
                return option_type_error(name, v, "t", error);
        *ret = v->u64;
        return 0;
}

static int check_range(const char *name, uint64_t value, uint64_t min, uint64_t max, sd_bus_error *error) {
        if (value < min || value > max)
                return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
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

int sandbox_config_set(SandboxConfig *c, const char *name, const OptionValue *v, sd_bus_error *error) {
        uint64_t u = 0;
        int r;

        if (streq(name, "MemoryMax") || streq(name, "CPUQuotaPerSecUSec") || streq(name, "TasksMax") ||
            streq(name, "Timeout") || streq(name, "DiskMax") || streq(name, "IdleTimeout")) {
                r = option_get_u64(name, v, &u, error);
                if (r < 0)
                        return r;
                /* Absolute bounds here; the machine's bounds in finalize. */
                if (streq(name, "MemoryMax")) {
                        r = check_range(name, u, SANDBOX_MEMORY_MIN, UINT64_MAX - 1, error);
                        c->limits.memory_max = u;
                } else if (streq(name, "CPUQuotaPerSecUSec")) {
                        r = check_range(name, u, SANDBOX_CPU_QUOTA_MIN_USEC, UINT64_MAX - 1, error);
                        c->limits.cpu_quota_per_sec_usec = u;
                } else if (streq(name, "TasksMax")) {
                        r = check_range(name, u, SANDBOX_TASKS_MIN, SANDBOX_TASKS_MAX, error);
                        c->limits.tasks_max = u;
                } else if (streq(name, "IdleTimeout")) {
                        r = check_range(name, u, 0, SANDBOX_LIFETIME_MAX_SEC, error);
                        c->idle_timeout_sec = u;
                } else if (streq(name, "DiskMax")) {
                        r = check_range(name, u, SANDBOX_DISK_MIN, SANDBOX_DISK_MAX, error);
                        c->disk_max = u;
                } else {
                        r = check_range(name, u, 0, SANDBOX_LIFETIME_MAX_SEC, error);
                        c->timeout_sec = u;
                }
                return r;
        }
        if (streq(name, "Ephemeral")) {
                if (!option_is(v, "b"))
                        return option_type_error(name, v, "b", error);
                c->ephemeral = v->b;
                return 0;
        }

        return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION, "Unknown sandbox option '%.64s'.", name);
}

int sandbox_config_finalize(SandboxConfig *c, const SandboxLimits *template_defaults,
                            const SystemBounds *bounds, sd_bus_error *error) {
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

        if (c->disk_max == 0)
                c->disk_max = SANDBOX_DISK_DEFAULT;

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
                .timeout_sec = EXEC_TIMEOUT_DEFAULT_SEC,
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

void exec_config_done(ExecConfig *c) {
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

int exec_config_set(ExecConfig *c, const char *name, const OptionValue *v, sd_bus_error *error) {
        int r;

        if (streq(name, "Timeout")) {
                r = option_get_u64(name, v, &c->timeout_sec, error);
                if (r < 0)
                        return r;
                c->timeout_set = true;
                return check_range(name, c->timeout_sec, 1, EXEC_TIMEOUT_MAX_SEC, error);
        }
        if (streq(name, "OutputMax")) {
                r = option_get_u64(name, v, &c->output_max, error);
                if (r < 0)
                        return r;
                return check_range(name, c->output_max, 0, EXEC_OUTPUT_MAX, error);
        }
        if (streq(name, "WorkingDirectory")) {
                if (!option_is(v, "s"))
                        return option_type_error(name, v, "s", error);
                if (v->s[0] != '/' || !string_is_clean(v->s, 4096))
                        return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                                 "WorkingDirectory must be an absolute path without control characters.");
                free(c->working_directory);
                c->working_directory = strdup(v->s);
                return c->working_directory ? 0 : -ENOMEM;
        }
        if (streq(name, "Environment")) {
                if (!option_is(v, "as"))
                        return option_type_error(name, v, "as", error);
                if (strv_length(v->strv) > EXEC_ENVC_MAX)
                        return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                                 "Too many Environment entries (at most %u).", EXEC_ENVC_MAX);
                for (char * const *e = v->strv; *e; e++)
                        if (!env_assignment_is_valid(*e))
                                return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                                         "Environment entry is not NAME=VALUE: '%.64s'", *e);
                char **copy = strv_copy(v->strv);
                if (!copy)
                        return -ENOMEM;
                strv_free(c->environment);
                c->environment = copy;
                return 0;
        }
        if (streq(name, "Stdin")) {
                if (!option_is(v, "ay"))
                        return option_type_error(name, v, "ay", error);
                if (v->bytes.size > EXEC_STDIN_MAX)
                        return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                                 "Stdin is larger than %llu bytes.", EXEC_STDIN_MAX);
                void *d = malloc(v->bytes.size ?: 1);
                if (!d)
                        return -ENOMEM;
                memcpy(d, v->bytes.data, v->bytes.size);
                free(c->stdin_data);
                c->stdin_data = d;
                c->stdin_size = v->bytes.size;
                return 0;
        }

        if (streq(name, "TTY")) {
                if (!option_is(v, "b"))
                        return option_type_error(name, v, "b", error);
                c->tty = v->b;
                return 0;
        }
        if (streq(name, "TerminalRows") || streq(name, "TerminalColumns")) {
                uint64_t n = 0;
                r = option_get_u64(name, v, &n, error);
                if (r < 0)
                        return r;
                r = check_range(name, n, 1, UINT16_MAX, error);
                if (r < 0)
                        return r;
                *(streq(name, "TerminalRows") ? &c->tty_rows : &c->tty_cols) = (uint16_t) n;
                return 0;
        }
        if (streq(name, "StandardInput") || streq(name, "StandardOutput") || streq(name, "StandardError")) {
                int *dest = streq(name, "StandardInput") ? &c->stdin_fd :
                            streq(name, "StandardOutput") ? &c->stdout_fd : &c->stderr_fd;
                int fd;

                if (!option_is(v, "h"))
                        return option_type_error(name, v, "h", error);
                /* A directory (or O_PATH) descriptor would be a way out of the sandbox's
                 * mount namespace (openat() relative to it): only streams and files. */
                struct stat st;
                int flags = fcntl(v->fd, F_GETFL);
                if (flags < 0 || fstat(v->fd, &st) < 0)
                        return -errno;
                if ((flags & O_PATH) || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) ||
                                          S_ISCHR(st.st_mode) || S_ISREG(st.st_mode)))
                        return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                                  "%s must be a pipe, socket, terminal or regular file.", name);
                fd = fcntl(v->fd, F_DUPFD_CLOEXEC, 3);
                if (fd < 0)
                        return -errno;
                safe_close(*dest);
                *dest = fd;
                return 0;
        }

        return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION, "Unknown exec option '%.64s'.", name);
}

int exec_config_set_argv(ExecConfig *c, char **argv, sd_bus_error *error) {
        _cleanup_strv_free_ char **l = argv;

        if (strv_isempty(l))
                return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION, "argv must not be empty.");
        if (isempty(l[0]))
                return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION, "argv[0] must not be empty.");
        if (strv_length(l) > EXEC_ARGC_MAX)
                return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                         "Too many arguments (at most %u).", EXEC_ARGC_MAX);

        strv_free(c->argv);
        c->argv = TAKE_PTR(l);
        return 0;
}

int exec_config_finalize(ExecConfig *c, sd_bus_error *error) {
        /* A terminal is relayed between the caller's descriptors and the process: without
         * them there is no one at the other end. */
        if (c->tty && (c->stdin_fd < 0 || c->stdout_fd < 0))
                return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                          "TTY needs StandardInput and StandardOutput.");
        if (c->stdin_fd >= 0 && c->stdin_data)
                return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                          "Stdin and StandardInput cannot both be given.");
        if (strv_isempty(c->argv))
                return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION, "argv must not be empty.");
        if (strv_bytes(c->argv) + strv_bytes(c->environment) > EXEC_ARGS_MAX)
                return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                         "argv and Environment together exceed %u bytes.", EXEC_ARGS_MAX);
        if (!c->working_directory) {
                c->working_directory = strdup(SANDBOX_WORKDIR);
                if (!c->working_directory)
                        return -ENOMEM;
        }
        return 0;
}
