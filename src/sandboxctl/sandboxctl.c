/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxctl: the command line face of sandboxd's D-Bus API (sandboxd-api(7)). It only
 * translates: arguments into method calls, replies into text or JSON. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <locale.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "macro.h"
#include "parse-util.h"
#include "sandboxctl-files.h"
#include "sandboxctl-history.h"
#include "sandboxctl-process.h"
#include "sandboxctl-util.h"
#include "strv.h"

/* Slack over the exec timeout for the method call itself: the daemon kills at the
 * timeout, then still has to collect the process and reply. */
#define EXEC_CALL_SLACK_SEC             UINT64_C(30)
/* Lifetime of run's ephemeral sandbox beyond its one exec: a backstop should
 * sandboxctl die before it can call Destroy. */
#define RUN_LIFETIME_SLACK_SEC          UINT64_C(60)
#define RUN_TTY_IDLE_SEC                UINT64_C(60)
/* Creating may pull or start a payload; destroying waits for the unit to go. */
#define CREATE_CALL_TIMEOUT_USEC        (UINT64_C(120) * USEC_PER_SEC)
#define DESTROY_CALL_TIMEOUT_USEC       (UINT64_C(120) * USEC_PER_SEC)
/* --json passes standard input as bytes in the call (the output is captured, so the
 * input is too); streaming passes the descriptor and has no limit. */

#define EXIT_TIMED_OUT          124
#define EXIT_SANDBOXCTL_FAILED  125
#define EXIT_OOM_KILLED         137

typedef enum OptionFlag {
        OPT_TEMPLATE    = 1 << 0,
        OPT_MEMORY      = 1 << 1,
        OPT_CPU         = 1 << 2,
        OPT_TASKS       = 1 << 3,
        OPT_TIMEOUT     = 1 << 4,
        OPT_ENV         = 1 << 5,
        OPT_WORKDIR     = 1 << 6,
        OPT_OUTPUT_MAX  = 1 << 7,
        OPT_NO_STDIN    = 1 << 8,
        OPT_IDLE        = 1 << 9,
        OPT_DISK        = 1 << 10,
        OPT_TTY         = 1 << 11,
        OPT_PARENTS     = 1 << 12,
        OPT_MODE        = 1 << 13,
        OPT_MAX         = 1 << 14,
        OPT_DEPTH       = 1 << 15,
        OPT_SIGNAL      = 1 << 16,
        OPT_SINCE       = 1 << 17,
        OPT_LIMIT       = 1 << 18,
        _OPT_MAX        = 1 << 19,
} OptionFlag;

#define OPTS_SANDBOX (OPT_TEMPLATE | OPT_MEMORY | OPT_CPU | OPT_TASKS | OPT_DISK)
#define OPTS_CREATE (OPTS_SANDBOX | OPT_TIMEOUT | OPT_IDLE)
#define OPTS_EXEC (OPT_TIMEOUT | OPT_ENV | OPT_WORKDIR | OPT_OUTPUT_MAX | OPT_NO_STDIN | OPT_TTY)
#define OPTS_START (OPT_TIMEOUT | OPT_ENV | OPT_WORKDIR | OPT_OUTPUT_MAX)

/* Indexed by the bit number of the OptionFlag. */
static const char *const option_names[] = {
        "--template", "--memory", "--cpu", "--tasks", "--timeout",
        "--env", "--workdir", "--output-max", "--no-stdin", "--idle-timeout",
        "--disk", "--tty", "--parents", "--mode", "--max", "--depth", "--signal",
        "--since", "--limit",
};
_Static_assert(_OPT_MAX == 1 << ELEMENTSOF(option_names), "option_names[] does not match OptionFlag");

static unsigned arg_set = 0;            /* OptionFlag: which options were given */
static bool arg_json = false;
static const char *arg_template = NULL;
static uint64_t arg_memory_max = 0;
static uint64_t arg_cpu_quota = 0;
static uint64_t arg_tasks_max = 0;
static uint64_t arg_timeout = 0;
static char **arg_env = NULL;
static const char *arg_workdir = NULL;
static uint64_t arg_output_max = 0;
static uint64_t arg_idle_timeout = 0;
static uint64_t arg_disk_max = 0;
static uint64_t arg_max = UINT64_MAX;  /* cp, cat: Download's Max */
static mode_t arg_mode = 0644;
static uint64_t arg_depth = 1;
static int arg_signal = SIGTERM;
static const char *arg_since = NULL;  /* history; parsed by sandboxctl-history.c */
static const char *arg_limit = NULL;

static void arg_env_freep(void) {
        arg_env = strv_free(arg_env);
}


static uint64_t sec_to_usec_add(uint64_t sec, uint64_t slack_sec) {
        /* Saturating: UINT64_MAX is "no timeout" to sd-bus anyway. */
        if (sec > UINT64_MAX / USEC_PER_SEC - slack_sec)
                return UINT64_MAX;
        return (sec + slack_sec) * USEC_PER_SEC;
}

static uint64_t sec_add(uint64_t a, uint64_t b) {
        return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}


static char *format_owner(uid_t uid) {
        struct passwd *pw;
        char *s;

        pw = getpwuid(uid);
        if (pw && pw->pw_name)
                s = strdup(pw->pw_name);
        else if (asprintf(&s, "%" PRIu32, (uint32_t) uid) < 0)
                s = NULL;
        return s;
}


static int help(void) {
        printf("%1$s [OPTIONS...] COMMAND ...\n"
               "\n"
               "Create sandboxes, run untrusted commands in them, and destroy them.\n"
               "\n"
               "Sandbox Commands:\n"
               "  list                        List sandboxes (default)\n"
               "  status ID                   Show the properties of a sandbox\n"
               "  create                      Create a sandbox and print its ID\n"
               "  exec ID [--] CMD...         Run a command in a sandbox\n"
               "  run [--] CMD...             Run a command in a new ephemeral sandbox\n"
               "  destroy ID...               Destroy one or more sandboxes\n"
               "  pause ID...                 Freeze all processes of sandboxes\n"
               "  resume ID...                Let paused sandboxes run again\n"
               "  set-timeout ID SECONDS      Destroy a sandbox SECONDS from now (0: never)\n"
               "\n"
               "Process Commands:\n"
               "  start ID [--] CMD...        Start a command in the background, print its ID\n"
               "  ps ID                       List the background processes of a sandbox\n"
               "  kill ID PROCESS             Send a signal (--signal, default TERM) to a process\n"
               "\n"
               "File Commands:\n"
               "  cp SRC DEST                 Copy a file into or out of a sandbox; one side is\n"
               "                              ID:PATH, the other a host path or - (stdin/stdout)\n"
               "  cat ID PATH...              Write files of a sandbox to standard output\n"
               "  ls ID [PATH]                List a directory of a sandbox (default: /work)\n"
               "  stat ID PATH                Show the type, size, mode and time of a file\n"
               "\n"
               "Template Commands:\n"
               "  templates                   List the templates sandboxes are made from\n"
               "  history [ID] [--since=TIME] [--limit=N]\n"
               "                              List recorded executions (of one sandbox)\n"
               "\n"
               "Options:\n"
               "  -h --help                   Show this help\n"
               "     --version                Show package version\n"
               "     --json                   Print machine-readable JSON\n"
               "     --template=NAME          Template for create and run (default: shell)\n"
               "     --memory=SIZE            Memory limit, e.g. 256M or 1.5G\n"
               "     --cpu=PERCENT            CPU quota, e.g. 50%% or 200%%\n"
               "     --tasks=N                Limit on processes and threads\n"
               "     --disk=SIZE              Size of /work and of /tmp each (default: 1G)\n"
               "     --timeout=SECONDS        create: lifetime of the sandbox (0: none)\n"
               "                              exec, run: limit on the command (default: %2$" PRIu64 ")\n"
               "     --idle-timeout=SECONDS   create, set-timeout: destroy the sandbox after\n"
               "                              SECONDS without a running command (0: never)\n"
               "  -E --env=NAME=VALUE         Set an environment variable for the command\n"
               "     --workdir=PATH           Working directory inside the sandbox\n"
               "     --output-max=SIZE        Bytes kept of stdout and of stderr each\n"
               "  -n --no-stdin               Give the command /dev/null as standard input\n"
               "     --tty                    exec, run: on a pseudo-terminal, interactively\n"
               "  -p --parents                cp: create the missing directories in the sandbox\n"
               "     --mode=MODE              cp: mode of a created host file (default: 0644)\n"
               "     --max=SIZE               cp, cat: refuse files larger than SIZE\n"
               "     --depth=N                ls: list N levels deep (1-16, default: 1)\n"
               "  -s --signal=SIGNAL          kill: the signal to send (default: TERM)\n"
               "\n"
               "exec and run exit with the command's status, 124 when it timed out, 137 when\n"
               "it was killed for exceeding its memory, and 125 when sandboxctl failed.\n"
               "\n"
               "See the sandboxctl(1) man page for details.\n",
               program_invocation_short_name,
               (uint64_t) EXEC_TIMEOUT_DEFAULT_SEC);

        return 0;
}

static int bus_append_environment(sd_bus_message *m, char **env) {
        int r;

        r = sd_bus_message_open_container(m, 'e', "sv");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "s", "Environment");
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'v', "as");
        if (r < 0)
                return r;
        r = sd_bus_message_append_strv(m, env);
        if (r < 0)
                return r;
        r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(m);
}

static int bus_append_bytes(sd_bus_message *m, const char *name, const void *data, size_t size) {
        int r;

        r = sd_bus_message_open_container(m, 'e', "sv");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "s", name);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(m, 'v', "ay");
        if (r < 0)
                return r;
        r = sd_bus_message_append_array(m, 'y', data, size);
        if (r < 0)
                return r;
        r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(m);
}

/* One entry of an a{sv} (reply or properties) we want: where to store it in a struct. */
typedef struct BusField {
        const char *name;
        const char *signature;
        size_t offset;
} BusField;

/* Reads a{sv} into the struct at base; *seen gets a bit per field found. Entries with
 * unknown names or unexpected types are skipped: newer daemons may send more. */
static int bus_read_fields(sd_bus_message *m, const BusField *fields, size_t n_fields, void *base, unsigned *seen) {
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;

        for (;;) {
                const char *name, *contents;
                size_t i;
                char type;

                r = sd_bus_message_enter_container(m, 'e', "sv");
                if (r < 0)
                        return r;
                if (r == 0)
                        break;

                r = sd_bus_message_read(m, "s", &name);
                if (r < 0)
                        return r;

                r = sd_bus_message_peek_type(m, &type, &contents);
                if (r < 0)
                        return r;

                for (i = 0; i < n_fields; i++)
                        if (streq(fields[i].name, name) && streq(fields[i].signature, contents))
                                break;

                if (i < n_fields) {
                        r = sd_bus_message_read(m, "v", fields[i].signature, (uint8_t *) base + fields[i].offset);
                        if (r < 0)
                                return r;
                        *seen |= 1U << i;
                } else {
                        r = sd_bus_message_skip(m, "v");
                        if (r < 0)
                                return r;
                }

                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }

        return sd_bus_message_exit_container(m);
}


static int create_sandbox(sd_bus *bus, bool ephemeral, uint64_t lifetime, char **ret_id, char **ret_path) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *id = NULL, *path = NULL;
        const char *i, *p;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SANDBOX_BUS_NAME, SANDBOX_MANAGER_PATH, SANDBOX_MANAGER_INTERFACE, "CreateSandbox");
        if (r < 0)
                goto fail;

        /* An empty name selects the default template. */
        r = sd_bus_message_append(m, "s", strempty(arg_template));
        if (r < 0)
                goto fail;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r < 0)
                goto fail;
        if (arg_set & OPT_MEMORY) {
                r = sd_bus_message_append(m, "{sv}", "MemoryMax", "t", arg_memory_max);
                if (r < 0)
                        goto fail;
        }
        if (arg_set & OPT_CPU) {
                r = sd_bus_message_append(m, "{sv}", "CPUQuotaPerSecUSec", "t", arg_cpu_quota);
                if (r < 0)
                        goto fail;
        }
        if (arg_set & OPT_TASKS) {
                r = sd_bus_message_append(m, "{sv}", "TasksMax", "t", arg_tasks_max);
                if (r < 0)
                        goto fail;
        }
        if (arg_set & OPT_DISK) {
                r = sd_bus_message_append(m, "{sv}", "DiskMax", "t", arg_disk_max);
                if (r < 0)
                        goto fail;
        }
        if (lifetime > 0) {
                r = sd_bus_message_append(m, "{sv}", "Timeout", "t", lifetime);
                if (r < 0)
                        goto fail;
        }
        if (arg_set & OPT_IDLE) {
                r = sd_bus_message_append(m, "{sv}", "IdleTimeout", "t", arg_idle_timeout);
                if (r < 0)
                        goto fail;
        }
        if (ephemeral) {
                r = sd_bus_message_append(m, "{sv}", "Ephemeral", "b", 1);
                if (r < 0)
                        goto fail;
        }
        r = sd_bus_message_close_container(m);
        if (r < 0)
                goto fail;

        r = sd_bus_call(bus, m, CREATE_CALL_TIMEOUT_USEC, &error, &reply);
        if (r < 0)
                goto fail;

        r = sd_bus_message_read(reply, "so", &i, &p);
        if (r < 0)
                goto fail;

        id = strdup(i);
        path = strdup(p);
        if (!id || !path)
                return log_oom();

        *ret_id = TAKE_PTR(id);
        *ret_path = TAKE_PTR(path);
        return 0;

fail:
        return log_error_errno(r, "Failed to create sandbox: %s", bus_error_message(&error, r));
}

typedef enum DestroyMode {
        DESTROY_EXPLICIT,       /* the user asked: any error is reported */
        /* run's own ephemeral sandbox, after its command: gone already is fine, and the
         * call never starts sandboxd. A sandboxd that went away (stopped, crashed) mid-
         * command must stay stopped: bus-activating a new one here would replace a pending
         * `systemctl stop` (its job would end "canceled"); the next sandboxd destroys the
         * ephemeral sandboxes it finds interrupted. */
        DESTROY_CLEANUP,
} DestroyMode;

static int destroy_sandbox_path(sd_bus *bus, const char *id, const char *path, DestroyMode mode) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SANDBOX_BUS_NAME, path, SANDBOX_INTERFACE, "Destroy");
        if (r < 0)
                return log_error_errno(r, "Failed to destroy sandbox %s: %m", id);
        if (mode == DESTROY_CLEANUP) {
                r = sd_bus_message_set_auto_start(m, false);
                if (r < 0)
                        return log_error_errno(r, "Failed to destroy sandbox %s: %m", id);
        }

        r = sd_bus_call(bus, m, DESTROY_CALL_TIMEOUT_USEC, &error, &reply);
        if (r < 0) {
                if (mode == DESTROY_CLEANUP && sd_bus_error_has_names(&error, SANDBOX_ERROR_NO_SUCH_SANDBOX,
                                                                       SD_BUS_ERROR_SERVICE_UNKNOWN,
                                                                       SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                        return 0;
                return log_error_errno(r, "Failed to destroy sandbox %s: %s", id, bus_error_message(&error, r));
        }

        return 0;
}

typedef struct ExecResult {
        /* Pointers into the reply message. */
        const void *stdout_data;
        size_t stdout_size;
        const void *stderr_data;
        size_t stderr_size;

        int32_t exit_status;
        int32_t exit_code;
        int32_t signal;
        int timed_out;
        int oom_killed;
        int truncated;
        uint64_t duration_usec;
        uint64_t cpu_usec;
        uint64_t max_rss_bytes;
        uint64_t stdout_bytes;
        uint64_t stderr_bytes;
        unsigned seen;          /* bit per exec_info_fields[] entry */
} ExecResult;

enum {
        EXEC_INFO_TIMED_OUT,
        EXEC_INFO_OOM_KILLED,
        EXEC_INFO_SIGNAL,
        EXEC_INFO_EXIT_CODE,
        EXEC_INFO_DURATION,
        EXEC_INFO_CPU,
        EXEC_INFO_MAX_RSS,
        EXEC_INFO_TRUNCATED,
        EXEC_INFO_STDOUT_BYTES,
        EXEC_INFO_STDERR_BYTES,
};

static const BusField exec_info_fields[] = {
        [EXEC_INFO_TIMED_OUT]     = { "TimedOut",     "b", offsetof(ExecResult, timed_out)     },
        [EXEC_INFO_OOM_KILLED]    = { "OOMKilled",    "b", offsetof(ExecResult, oom_killed)    },
        [EXEC_INFO_SIGNAL]        = { "Signal",       "i", offsetof(ExecResult, signal)        },
        [EXEC_INFO_EXIT_CODE]     = { "ExitCode",     "i", offsetof(ExecResult, exit_code)     },
        [EXEC_INFO_DURATION]      = { "DurationUSec", "t", offsetof(ExecResult, duration_usec) },
        [EXEC_INFO_CPU]           = { "CPUUSec",      "t", offsetof(ExecResult, cpu_usec)      },
        [EXEC_INFO_MAX_RSS]       = { "MaxRSSBytes",  "t", offsetof(ExecResult, max_rss_bytes) },
        [EXEC_INFO_TRUNCATED]     = { "Truncated",    "b", offsetof(ExecResult, truncated)     },
        [EXEC_INFO_STDOUT_BYTES]  = { "StdoutBytes",  "t", offsetof(ExecResult, stdout_bytes)  },
        [EXEC_INFO_STDERR_BYTES]  = { "StderrBytes",  "t", offsetof(ExecResult, stderr_bytes)  },
};

/* The a{sv} info of Exec's and Wait's replies; ExitCode as older sandboxd imply it. */
static int exec_info_read(sd_bus_message *reply, ExecResult *res) {
        int r;

        r = bus_read_fields(reply, exec_info_fields, ELEMENTSOF(exec_info_fields), res, &res->seen);
        if (r < 0)
                return r;
        if (!(res->seen & (1U << EXEC_INFO_EXIT_CODE)))
                res->exit_code = res->signal > 0 ? -1 : res->exit_status;
        return 0;
}

static int exec_result_read(sd_bus_message *reply, ExecResult *ret) {
        ExecResult res = {};
        int r;

        r = sd_bus_message_read(reply, "i", &res.exit_status);
        if (r < 0)
                return r;
        r = sd_bus_message_read_array(reply, 'y', &res.stdout_data, &res.stdout_size);
        if (r < 0)
                return r;
        r = sd_bus_message_read_array(reply, 'y', &res.stderr_data, &res.stderr_size);
        if (r < 0)
                return r;
        r = exec_info_read(reply, &res);
        if (r < 0)
                return r;
        *ret = res;
        return 0;
}

static int exec_result_exit_status(const ExecResult *res) {
        if (res->timed_out)
                return EXIT_TIMED_OUT;
        if (res->oom_killed)
                return EXIT_OOM_KILLED;
        if (res->exit_status < 0 || res->exit_status > 255)
                return log_error_errno(EBADMSG, "Command ended with invalid exit status %" PRIi32 ".",
                                       res->exit_status);
        return res->exit_status;
}

static int exec_result_print_json(const ExecResult *res) {
        _cleanup_json_ json_object *j = NULL;
        int r;

        j = json_object_new_object();
        if (!j)
                return log_oom();

        r = json_add(j, "exit_status", json_object_new_int(res->exit_status));
        if (r >= 0)
                r = json_add(j, "exit_code", json_object_new_int(res->exit_code));
        if (r >= 0)
                r = json_add(j, "signal", json_object_new_int(res->signal));
        if (r >= 0)
                r = json_add(j, "timed_out", json_object_new_boolean(res->timed_out));
        if (r >= 0)
                r = json_add(j, "oom_killed", json_object_new_boolean(res->oom_killed));
        if (r >= 0)
                r = json_add(j, "truncated", json_object_new_boolean(res->truncated));
        if (r >= 0)
                r = json_add(j, "duration_usec", json_object_new_uint64(res->duration_usec));
        if (r >= 0)
                r = json_add(j, "cpu_usec", json_object_new_uint64(res->cpu_usec));
        if (r >= 0)
                r = json_add(j, "max_rss_bytes", json_object_new_uint64(res->max_rss_bytes));
        if (r >= 0)
                r = json_add(j, "stdout_bytes", json_object_new_uint64(res->stdout_bytes));
        if (r >= 0)
                r = json_add(j, "stderr_bytes", json_object_new_uint64(res->stderr_bytes));
        if (r >= 0)
                r = json_add_bytes(j, "stdout", res->stdout_data, res->stdout_size);
        if (r >= 0)
                r = json_add_bytes(j, "stderr", res->stderr_data, res->stderr_size);
        if (r < 0)
                return log_error_errno(r, "Failed to build JSON output: %m");

        return print_json(j);
}

/* Prints the result and returns the exit status sandboxctl should end with. */
static int exec_result_output(const ExecResult *res) {
        int r;

        if (arg_json)
                r = exec_result_print_json(res);
        else {
                r = loop_write(STDOUT_FILENO, res->stdout_data, res->stdout_size);
                if (r < 0)
                        return log_error_errno(r, "Failed to write standard output: %m");

                r = loop_write(STDERR_FILENO, res->stderr_data, res->stderr_size);
                if (r < 0)
                        return log_error_errno(r, "Failed to write standard error: %m");

                /* The stream that was cut holds exactly OutputMax bytes, the other no more. */
                if (res->truncated)
                        fprintf(stderr, "%s: output truncated at %zu bytes\n",
                                program_invocation_short_name, MAX(res->stdout_size, res->stderr_size));
        }
        if (r < 0)
                return r;

        return exec_result_exit_status(res);
}

static int read_stdin(void **ret, size_t *ret_size) {
        _cleanup_free_ uint8_t *buf = NULL;
        size_t size = 0, allocated = 0;

        *ret = NULL;
        *ret_size = 0;

        /* Only input that was redirected or piped is meant for the command: a terminal
         * would wait for input no one means to type. */
        if ((arg_set & OPT_NO_STDIN) || isatty(STDIN_FILENO))
                return 0;

        for (;;) {
                ssize_t k;

                if (size >= allocated) {
                        size_t n = allocated == 0 ? 64 * 1024 : allocated * 2;
                        uint8_t *p;

                        /* One byte beyond the limit tells "exactly 16 MiB" from "more". */
                        n = MIN(n, (size_t) EXEC_STDIN_MAX + 1);
                        p = realloc(buf, n);
                        if (!p)
                                return log_oom();
                        buf = p;
                        allocated = n;
                }

                k = read(STDIN_FILENO, buf + size, allocated - size);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EBADF)     /* stdin closed: nothing to pass */
                                break;
                        return log_error_errno(errno, "Failed to read standard input: %m");
                }
                if (k == 0)
                        break;

                size += (size_t) k;
                if (size > EXEC_STDIN_MAX)
                        return log_error_errno(EFBIG,
                                               "Standard input is larger than 16 MiB, refusing. "
                                               "Use --no-stdin (or </dev/null) to pass none.");
        }

        if (size > 0) {
                *ret = TAKE_PTR(buf);
                *ret_size = size;
        }
        return 0;
}

/* The command's standard streams. Streaming (the default): our own descriptors, given to
 * the command as they are, so that its output appears as it is written and it reads our
 * input, a terminal included (as systemd-run --pipe does). With --json the output is
 * captured for the JSON, and standard input passed as bytes. */
typedef struct ExecStdio {
        int fd[3];              /* passed as StandardInput/Output/Error; -EBADF: not passed */
        int null_fd[3];         /* /dev/null for --no-stdin or a closed stream; owned */
        void *input;            /* --json: standard input, read to its end */
        size_t input_size;
} ExecStdio;

#define EXEC_STDIO_INIT {                                       \
                .fd = { -EBADF, -EBADF, -EBADF },               \
                .null_fd = { -EBADF, -EBADF, -EBADF },          \
        }

static void exec_stdio_done(ExecStdio *io) {
        for (size_t i = 0; i < ELEMENTSOF(io->null_fd); i++)
                io->null_fd[i] = safe_close(io->null_fd[i]);
        io->input = mfree(io->input);
        io->input_size = 0;
}

static int exec_stdio_prepare(ExecStdio *io) {
        if (arg_json)
                return read_stdin(&io->input, &io->input_size);

        for (int i = STDIN_FILENO; i <= STDERR_FILENO; i++) {
                /* A closed stream cannot be passed: the command gets /dev/null instead. */
                if ((i == STDIN_FILENO && (arg_set & OPT_NO_STDIN)) || fcntl(i, F_GETFD) < 0) {
                        io->null_fd[i] = open("/dev/null",
                                              (i == STDIN_FILENO ? O_RDONLY : O_WRONLY) | O_CLOEXEC | O_NOCTTY);
                        if (io->null_fd[i] < 0)
                                return log_error_errno(errno, "Failed to open /dev/null: %m");
                        io->fd[i] = io->null_fd[i];
                } else
                        io->fd[i] = i;
        }

        return 0;
}

static uint64_t exec_timeout(void) {
        return (arg_set & OPT_TIMEOUT) ? arg_timeout : EXEC_TIMEOUT_DEFAULT_SEC;
}

/* Builds an Exec or Start call. timeout 0: none given (Start only; Exec always has one).
 * tty: a Start with a pseudo-terminal of the local terminal's size. */
static int exec_message_new(
                sd_bus *bus,
                const char *path,
                const char *member,
                char **cmd,
                const ExecStdio *io,
                uint64_t timeout,
                bool tty,
                sd_bus_message **ret) {

        static const char *const stdio_options[] = { "StandardInput", "StandardOutput", "StandardError" };
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        unsigned rows = 0, cols = 0;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SANDBOX_BUS_NAME, path, SANDBOX_INTERFACE, member);
        if (r < 0)
                return r;

        r = sd_bus_message_append_strv(m, cmd);
        if (r < 0)
                return r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r < 0)
                return r;

        if (timeout > 0)
                r = sd_bus_message_append(m, "{sv}", "Timeout", "t", timeout);
        if (r >= 0 && arg_env)
                r = bus_append_environment(m, arg_env);
        if (r >= 0 && arg_workdir)
                r = sd_bus_message_append(m, "{sv}", "WorkingDirectory", "s", arg_workdir);
        if (r >= 0 && (arg_set & OPT_OUTPUT_MAX))
                r = sd_bus_message_append(m, "{sv}", "OutputMax", "t", arg_output_max);
        if (r >= 0 && io && io->input_size > 0)
                r = bus_append_bytes(m, "Stdin", io->input, io->input_size);
        for (size_t i = 0; r >= 0 && io && i < ELEMENTSOF(stdio_options); i++)
                if (io->fd[i] >= 0)
                        r = sd_bus_message_append(m, "{sv}", stdio_options[i], "h", io->fd[i]);
        if (r >= 0 && tty)
                r = sd_bus_message_append(m, "{sv}", "TTY", "b", 1);
        /* A terminal that does not know its size gets the daemon's default. */
        if (r >= 0 && tty && terminal_get_size(STDIN_FILENO, &rows, &cols) >= 0)
                r = sd_bus_message_append(m, "{sv}{sv}", "TerminalRows", "t", (uint64_t) rows,
                                          "TerminalColumns", "t", (uint64_t) cols);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(m);
        return 0;
}

/* Calls Exec. On a D-Bus failure returns negative with error set; when a signal ended the
 * wait, -EINTR and the signal in *ret_signal. */
static int exec_sandbox(
                sd_bus *bus,
                const char *path,
                char **cmd,
                const ExecStdio *io,
                sd_bus_error *error,
                sd_bus_message **ret_reply,
                int *ret_signal) {

        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        uint64_t timeout = exec_timeout();
        int r;

        /* Timeout always explicit, so that the call timeout below matches the daemon's. */
        r = exec_message_new(bus, path, "Exec", cmd, io, timeout, /* tty= */ false, &m);
        if (r < 0)
                return sd_bus_error_set_errno(error, r);

        return bus_call_interruptible(bus, m, sec_to_usec_add(timeout, EXEC_CALL_SLACK_SEC),
                                      error, ret_reply, ret_signal);
}

/* exec --tty: Start on a pseudo-terminal relayed to our terminal, then Wait. Without
 * --timeout the session has none (an interactive shell lasts as long as its user). */
static int exec_sandbox_tty(
                sd_bus *bus,
                const char *path,
                char **cmd,
                sd_bus_error *error,
                sd_bus_message **ret_reply,
                int *ret_signal) {

        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        const ExecStdio io = { .fd = { STDIN_FILENO, STDOUT_FILENO, -EBADF } };
        uint64_t timeout = (arg_set & OPT_TIMEOUT) ? arg_timeout : 0;
        int r;

        r = exec_message_new(bus, path, "Start", cmd, &io, timeout, /* tty= */ true, &m);
        if (r < 0)
                return sd_bus_error_set_errno(error, r);

        return tty_session(bus, path, m, timeout > 0 ? sec_to_usec_add(timeout, EXEC_CALL_SLACK_SEC) : UINT64_MAX,
                           error, ret_reply, ret_signal);
}

/* Wait's reply: (i exit_status, a{sv} info), the info as Exec's. */
static int wait_result_read(sd_bus_message *reply, ExecResult *ret) {
        ExecResult res = {};
        int r;

        r = sd_bus_message_read(reply, "i", &res.exit_status);
        if (r < 0)
                return r;
        r = exec_info_read(reply, &res);
        if (r < 0)
                return r;
        *ret = res;
        return 0;
}

/* Says why Exec failed, with what the user can do about it. */
static int exec_log_error(sd_bus *bus, const char *id, const char *path, const sd_bus_error *error, int r) {
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_NO_REPLY))
                return log_error_errno(r, "No answer from sandboxd about the command in sandbox %s (%s); "
                                       "the command may have run, entirely or in part.",
                                       id, bus_error_message(error, r));

        if (sd_bus_error_has_name(error, SANDBOX_ERROR_NOT_RUNNING)) {
                _cleanup_free_ char *state = NULL;

                if (sd_bus_get_property_string(bus, SANDBOX_BUS_NAME, path, SANDBOX_INTERFACE, "State", NULL, &state) >= 0 &&
                    streq(state, "paused"))
                        return log_error_errno(r, "Sandbox %s is paused; resume it with '%s resume %s' first.",
                                               id, program_invocation_short_name, id);
        }

        return log_error_errno(r, "Failed to execute command in sandbox %s: %s", id, bus_error_message(error, r));
}

static int verb_exec(int argc, char *argv[], sd_bus *bus) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(exec_stdio_done) ExecStdio io = EXEC_STDIO_INIT;
        _cleanup_free_ char *path = NULL;
        const char *id = argv[1];
        bool tty = arg_set & OPT_TTY;
        ExecResult res;
        int sig = 0, r;

        if (!tty) {
                r = exec_stdio_prepare(&io);
                if (r < 0)
                        return r;
        }

        r = get_sandbox_path(bus, id, &error, &path);
        if (r < 0)
                return log_error_errno(r, "Failed to get sandbox %s: %s", id, bus_error_message(&error, r));

        if (tty)
                r = exec_sandbox_tty(bus, path, argv + 2, &error, &reply, &sig);
        else
                r = exec_sandbox(bus, path, argv + 2, &io, &error, &reply, &sig);
        if (r == -EINTR && sig > 0)
                return 128 + sig;
        if (r < 0)
                return exec_log_error(bus, id, path, &error, r);

        r = tty ? wait_result_read(reply, &res) : exec_result_read(reply, &res);
        if (r < 0)
                return log_error_errno(r, "Failed to parse %s reply: %m", tty ? "Wait" : "Exec");

        return tty ? exec_result_exit_status(&res) : exec_result_output(&res);
}

/* run --tty: an ephemeral sandbox ends after its first Exec, and a session is a Start: this
 * one is destroyed here, and after RUN_TTY_IDLE_SEC without a process should sandboxctl
 * die first (and at the end of --timeout's lifetime, if given). */
static int verb_run_tty(int argc, char *argv[], sd_bus *bus) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *id = NULL, *path = NULL;
        ExecResult res;
        int sig = 0, r, k;

        arg_idle_timeout = RUN_TTY_IDLE_SEC;
        arg_set |= OPT_IDLE;
        r = create_sandbox(bus, /* ephemeral= */ false,
                           (arg_set & OPT_TIMEOUT) ? sec_add(arg_timeout, RUN_LIFETIME_SLACK_SEC) : 0, &id, &path);
        if (r < 0)
                return r;

        r = exec_sandbox_tty(bus, path, argv + 1, &error, &reply, &sig);
        if (r >= 0) {
                r = wait_result_read(reply, &res);
                if (r < 0)
                        log_error_errno(r, "Failed to parse Wait reply: %m");
        } else if (!(r == -EINTR && sig > 0))
                exec_log_error(bus, id, path, &error, r);

        k = destroy_sandbox_path(bus, id, path, DESTROY_CLEANUP);
        if (r == -EINTR && sig > 0)
                return 128 + sig;
        if (r < 0)
                return r;
        if (k < 0)
                return k;
        return exec_result_exit_status(&res);
}

static int verb_run(int argc, char *argv[], sd_bus *bus) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(exec_stdio_done) ExecStdio io = EXEC_STDIO_INIT;
        _cleanup_free_ char *id = NULL, *path = NULL;
        ExecResult res;
        int sig = 0, r;

        if (arg_set & OPT_TTY)
                return verb_run_tty(argc, argv, bus);

        r = exec_stdio_prepare(&io);
        if (r < 0)
                return r;

        r = create_sandbox(bus, /* ephemeral= */ true,
                           sec_add(exec_timeout(), RUN_LIFETIME_SLACK_SEC), &id, &path);
        if (r < 0)
                return r;

        r = exec_sandbox(bus, path, argv + 1, &io, &error, &reply, &sig);
        if (r < 0) {
                /* The daemon destroys an ephemeral sandbox after its exec returned; when
                 * the exec never did, nothing else will before its lifetime ends. */
                if (r == -EINTR && sig > 0) {
                        (void) destroy_sandbox_path(bus, id, path, DESTROY_CLEANUP);
                        return 128 + sig;
                }

                exec_log_error(bus, id, path, &error, r);
                (void) destroy_sandbox_path(bus, id, path, DESTROY_CLEANUP);
                return r;
        }

        r = exec_result_read(reply, &res);
        if (r < 0)
                return log_error_errno(r, "Failed to parse Exec reply: %m");

        return exec_result_output(&res);
}

static int verb_create(int argc, char *argv[], sd_bus *bus) {
        _cleanup_free_ char *id = NULL, *path = NULL;
        int r;

        r = create_sandbox(bus, /* ephemeral= */ false, (arg_set & OPT_TIMEOUT) ? arg_timeout : 0, &id, &path);
        if (r < 0)
                return r;

        if (arg_json) {
                _cleanup_json_ json_object *j = NULL;

                j = json_object_new_object();
                if (!j)
                        return log_oom();

                r = json_add_string(j, "id", id);
                if (r >= 0)
                        r = json_add_string(j, "path", path);
                if (r < 0)
                        return log_oom();

                return print_json(j);
        }

        puts(id);
        return 0;
}

static int verb_destroy(int argc, char *argv[], sd_bus *bus) {
        int ret = 0, r;

        for (int i = 1; i < argc; i++) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                _cleanup_free_ char *path = NULL;

                r = get_sandbox_path(bus, argv[i], &error, &path);
                if (r < 0) {
                        r = log_error_errno(r, "Failed to destroy sandbox %s: %s",
                                            argv[i], bus_error_message(&error, r));
                        if (ret == 0)
                                ret = r;
                        continue;
                }

                r = destroy_sandbox_path(bus, argv[i], path, DESTROY_EXPLICIT);
                if (r < 0 && ret == 0)
                        ret = r;
        }

        return ret;
}

/* pause ID… and resume ID…: Pause or Resume, which answer once the sandbox is so. */
static int verb_pause(int argc, char *argv[], sd_bus *bus) {
        bool pause = streq(argv[0], "pause");
        int ret = 0, r;

        for (int i = 1; i < argc; i++) {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                _cleanup_free_ char *path = NULL;

                r = get_sandbox_path(bus, argv[i], &error, &path);
                if (r >= 0)
                        r = sd_bus_call_method(bus, SANDBOX_BUS_NAME, path, SANDBOX_INTERFACE, pause ? "Pause" : "Resume",
                                               &error, &reply, NULL);
                if (r < 0) {
                        r = log_error_errno(r, "Failed to %s sandbox %s: %s", argv[0], argv[i],
                                            bus_error_message(&error, r));
                        if (ret == 0)
                                ret = r;
                }
        }

        return ret;
}

/* set-timeout ID SECONDS [--idle-timeout SECONDS]: without --idle-timeout, the idle
 * timeout stays as it is (SetTimeout sets both). */
static int verb_set_timeout(int argc, char *argv[], sd_bus *bus) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        const char *id = argv[1];
        uint64_t lifetime, idle = arg_idle_timeout;
        int r;

        r = parse_seconds(argv[2], &lifetime);
        if (r < 0)
                return log_error_errno(r, "Invalid lifetime '%s', expected seconds (0: none), optionally "
                                       "with a unit (s, min, h, d): %m", argv[2]);

        r = get_sandbox_path(bus, id, &error, &path);
        if (r < 0)
                return log_error_errno(r, "Failed to get sandbox %s: %s", id, bus_error_message(&error, r));

        if (!(arg_set & OPT_IDLE)) {
                r = sd_bus_get_property_trivial(bus, SANDBOX_BUS_NAME, path, SANDBOX_INTERFACE, "IdleTimeout",
                                                &error, 't', &idle);
                if (r < 0)
                        return log_error_errno(r, "Failed to get the idle timeout of sandbox %s: %s",
                                               id, bus_error_message(&error, r));
        }

        r = sd_bus_call_method(bus, SANDBOX_BUS_NAME, path, SANDBOX_INTERFACE, "SetTimeout",
                               &error, &reply, "tt", lifetime, idle);
        if (r < 0)
                return log_error_errno(r, "Failed to set the timeouts of sandbox %s: %s",
                                       id, bus_error_message(&error, r));

        return 0;
}

typedef struct SandboxInfo {
        const char *id;
        const char *template;
        uint32_t owner;
        const char *state;
        const char *path;
        uint64_t created_at;
        char *owner_name;
} SandboxInfo;

static int sandbox_info_compare(const void *a, const void *b) {
        const SandboxInfo *x = a, *y = b;

        if (x->created_at != y->created_at)
                return x->created_at < y->created_at ? -1 : 1;
        return strcmp(x->id, y->id);
}

typedef struct SandboxList {
        SandboxInfo *items;
        size_t n, allocated;
} SandboxList;

static void sandbox_list_done(SandboxList *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->items[i].owner_name);
        l->items = mfree(l->items);
        l->n = l->allocated = 0;
}

static int sandbox_list_add(SandboxList *l, const SandboxInfo *s) {
        if (l->n >= l->allocated) {
                size_t k = l->allocated == 0 ? 16 : l->allocated * 2;
                SandboxInfo *p;

                p = reallocarray(l->items, k, sizeof(SandboxInfo));
                if (!p)
                        return -ENOMEM;
                l->items = p;
                l->allocated = k;
        }

        l->items[l->n++] = *s;
        return 0;
}

static int sandbox_list_print_json(const SandboxList *l) {
        _cleanup_json_ json_object *ja = NULL;
        int r;

        ja = json_object_new_array();
        if (!ja)
                return log_oom();

        for (size_t i = 0; i < l->n; i++) {
                const SandboxInfo *s = l->items + i;
                json_object *o = json_object_new_object();

                if (!o || json_object_array_add(ja, o) < 0) {
                        json_object_put(o);
                        return log_oom();
                }

                r = json_add_string(o, "id", s->id);
                if (r >= 0)
                        r = json_add_string(o, "template", s->template);
                if (r >= 0)
                        r = json_add(o, "owner", json_object_new_int64(s->owner));
                if (r >= 0)
                        r = json_add_string(o, "state", s->state);
                if (r >= 0)
                        r = json_add_string(o, "path", s->path);
                if (r >= 0)
                        r = json_add(o, "created_at", json_object_new_uint64(s->created_at));
                if (r < 0)
                        return log_oom();
        }

        return print_json(ja);
}

static void sandbox_list_print_table(const SandboxList *l) {
        int w_id = (int) strlen("ID"), w_template = (int) strlen("TEMPLATE"),
            w_owner = (int) strlen("OWNER"), w_state = (int) strlen("STATE");

        if (l->n > 0) {
                for (size_t i = 0; i < l->n; i++) {
                        w_id = MAX(w_id, (int) strlen(l->items[i].id));
                        w_template = MAX(w_template, (int) strlen(l->items[i].template));
                        w_owner = MAX(w_owner, (int) strlen(l->items[i].owner_name));
                        w_state = MAX(w_state, (int) strlen(l->items[i].state));
                }

                printf("%-*s %-*s %-*s %-*s %s\n",
                       w_id, "ID", w_template, "TEMPLATE", w_owner, "OWNER", w_state, "STATE", "CREATED");

                for (size_t i = 0; i < l->n; i++) {
                        const SandboxInfo *s = l->items + i;
                        char ts[64];

                        printf("%-*s %-*s %-*s %-*s %s\n",
                               w_id, s->id, w_template, s->template, w_owner, s->owner_name,
                               w_state, s->state, format_timestamp(ts, sizeof(ts), s->created_at) ?: "n/a");
                }
                putchar('\n');
        }

        printf("%zu %s listed.\n", l->n, l->n == 1 ? "sandbox" : "sandboxes");
}

static int verb_list(int argc, char *argv[], sd_bus *bus) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sandbox_list_done) SandboxList list = {};
        int r;

        r = sd_bus_call_method(bus, SANDBOX_BUS_NAME, SANDBOX_MANAGER_PATH, SANDBOX_MANAGER_INTERFACE, "ListSandboxes",
                               &error, &reply, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to list sandboxes: %s", bus_error_message(&error, r));

        r = sd_bus_message_enter_container(reply, 'a', "(ssusot)");
        if (r < 0)
                return log_error_errno(r, "Failed to parse ListSandboxes reply: %m");

        for (;;) {
                SandboxInfo s = {};

                r = sd_bus_message_read(reply, "(ssusot)", &s.id, &s.template, &s.owner,
                                        &s.state, &s.path, &s.created_at);
                if (r < 0)
                        return log_error_errno(r, "Failed to parse ListSandboxes reply: %m");
                if (r == 0)
                        break;

                s.owner_name = format_owner((uid_t) s.owner);
                if (!s.owner_name)
                        return log_oom();

                r = sandbox_list_add(&list, &s);
                if (r < 0) {
                        free(s.owner_name);
                        return log_oom();
                }
        }

        r = sd_bus_message_exit_container(reply);
        if (r < 0)
                return log_error_errno(r, "Failed to parse ListSandboxes reply: %m");

        if (list.n > 0)
                qsort(list.items, list.n, sizeof(SandboxInfo), sandbox_info_compare);

        if (arg_json)
                return sandbox_list_print_json(&list);

        sandbox_list_print_table(&list);
        return 0;
}

typedef struct SandboxStatus {
        const char *id;
        const char *template;
        uint32_t owner;
        const char *state;
        const char *unit;
        uint64_t created_at;
        uint64_t memory_max;
        uint64_t cpu_quota_per_sec_usec;
        uint64_t tasks_max;
        uint64_t disk_max;
        uint64_t timeout;
        uint64_t idle_timeout;
        uint64_t deadline;
        int ephemeral;
} SandboxStatus;

enum {
        PROP_ID,
        PROP_TEMPLATE,
        PROP_OWNER,
        PROP_STATE,
        PROP_UNIT,
        PROP_CREATED_AT,
        PROP_MEMORY_MAX,
        PROP_CPU_QUOTA,
        PROP_TASKS_MAX,
        PROP_DISK_MAX,
        PROP_TIMEOUT,
        PROP_IDLE_TIMEOUT,
        PROP_DEADLINE,
        PROP_EPHEMERAL,
};

static const BusField sandbox_properties[] = {
        [PROP_ID]         = { "Id",                 "s", offsetof(SandboxStatus, id)                     },
        [PROP_TEMPLATE]   = { "Template",           "s", offsetof(SandboxStatus, template)               },
        [PROP_OWNER]      = { "Owner",              "u", offsetof(SandboxStatus, owner)                  },
        [PROP_STATE]      = { "State",              "s", offsetof(SandboxStatus, state)                  },
        [PROP_UNIT]       = { "Unit",               "s", offsetof(SandboxStatus, unit)                   },
        [PROP_CREATED_AT] = { "CreatedAt",          "t", offsetof(SandboxStatus, created_at)             },
        [PROP_MEMORY_MAX] = { "MemoryMax",          "t", offsetof(SandboxStatus, memory_max)             },
        [PROP_CPU_QUOTA]  = { "CPUQuotaPerSecUSec", "t", offsetof(SandboxStatus, cpu_quota_per_sec_usec) },
        [PROP_TASKS_MAX]  = { "TasksMax",           "t", offsetof(SandboxStatus, tasks_max)              },
        [PROP_DISK_MAX]   = { "DiskMax",            "t", offsetof(SandboxStatus, disk_max)               },
        [PROP_TIMEOUT]    = { "Timeout",            "t", offsetof(SandboxStatus, timeout)                },
        [PROP_IDLE_TIMEOUT] = { "IdleTimeout",      "t", offsetof(SandboxStatus, idle_timeout)           },
        [PROP_DEADLINE]   = { "Deadline",           "t", offsetof(SandboxStatus, deadline)               },
        [PROP_EPHEMERAL]  = { "Ephemeral",          "b", offsetof(SandboxStatus, ephemeral)              },
};

static const char *const sandbox_property_json_keys[] = {
        [PROP_ID]         = "id",
        [PROP_TEMPLATE]   = "template",
        [PROP_OWNER]      = "owner",
        [PROP_STATE]      = "state",
        [PROP_UNIT]       = "unit",
        [PROP_CREATED_AT] = "created_at",
        [PROP_MEMORY_MAX] = "memory_max",
        [PROP_CPU_QUOTA]  = "cpu_quota_per_sec_usec",
        [PROP_TASKS_MAX]  = "tasks_max",
        [PROP_DISK_MAX]   = "disk_max",
        [PROP_TIMEOUT]    = "timeout",
        [PROP_IDLE_TIMEOUT] = "idle_timeout",
        [PROP_DEADLINE]   = "deadline",
        [PROP_EPHEMERAL]  = "ephemeral",
};

static int status_print_json(const SandboxStatus *s, unsigned seen, const char *path) {
        _cleanup_json_ json_object *j = NULL;
        int r;

        j = json_object_new_object();
        if (!j)
                return log_oom();

        r = json_add_string(j, "path", path);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(sandbox_properties); i++) {
                const void *p = (const uint8_t *) s + sandbox_properties[i].offset;
                json_object *v;

                if (!(seen & (1U << i)))
                        continue;

                switch (sandbox_properties[i].signature[0]) {
                case 's':
                        v = json_object_new_string(strempty(*(const char * const *) p));
                        break;
                case 'u':
                        v = json_object_new_int64(*(const uint32_t *) p);
                        break;
                case 't':
                        v = json_object_new_uint64(*(const uint64_t *) p);
                        break;
                case 'b':
                        v = json_object_new_boolean(*(const int *) p);
                        break;
                default:
                        v = NULL;
                }

                r = json_add(j, sandbox_property_json_keys[i], v);
        }
        if (r < 0)
                return log_oom();

        return print_json(j);
}

static const char *format_limit_u64(char *buf, size_t l, uint64_t v) {
        if (v == UINT64_MAX)
                return "infinity";
        snprintf(buf, l, "%" PRIu64, v);
        return buf;
}

/* 5025 → "1h 23min 45s"; 0 → "0s". */
static char *format_seconds(char *buf, size_t l, uint64_t sec) {
        static const struct { const char *suffix; uint64_t sec; } units[] = {
                { "d", 86400 }, { "h", 3600 }, { "min", 60 }, { "s", 1 },
        };
        size_t n = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                uint64_t k = sec / units[i].sec;
                int w;

                if (k == 0 && !(i == ELEMENTSOF(units) - 1 && n == 0))
                        continue;
                sec -= k * units[i].sec;
                w = snprintf(buf + n, l - n, "%s%" PRIu64 "%s", n > 0 ? " " : "", k, units[i].suffix);
                if (w < 0 || (size_t) w >= l - n)
                        return NULL;
                n += (size_t) w;
        }
        return buf;
}

static int status_print_text(const SandboxStatus *s, unsigned seen) {
        char buf[64], span[64];

#define SEEN(p) (seen & (1U << (p)))
        if (SEEN(PROP_ID))
                printf("         Id: %s\n", s->id);
        if (SEEN(PROP_TEMPLATE))
                printf("   Template: %s\n", s->template);
        if (SEEN(PROP_OWNER)) {
                _cleanup_free_ char *name = format_owner((uid_t) s->owner);

                if (!name)
                        return log_oom();
                if (streq(name, format_limit_u64(buf, sizeof(buf), s->owner)))
                        printf("      Owner: %s\n", name);
                else
                        printf("      Owner: %s (%" PRIu32 ")\n", name, s->owner);
        }
        if (SEEN(PROP_STATE))
                printf("      State: %s\n", s->state);
        if (SEEN(PROP_UNIT))
                printf("       Unit: %s\n", s->unit);
        if (SEEN(PROP_CREATED_AT))
                printf("    Created: %s\n", format_timestamp(buf, sizeof(buf), s->created_at) ?: "n/a");
        if (SEEN(PROP_TIMEOUT))
                printf("    Timeout: %s\n", s->timeout == 0 ? "none" :
                       format_seconds(buf, sizeof(buf), s->timeout) ?: "n/a");
        if (SEEN(PROP_DEADLINE)) {
                struct timespec ts;
                uint64_t now = 0;

                if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
                        now = (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
                if (s->deadline == 0)
                        printf("   Deadline: never\n");
                else if (s->deadline > now)
                        printf("   Deadline: %s; in %s\n", format_timestamp(buf, sizeof(buf), s->deadline) ?: "n/a",
                               format_seconds(span, sizeof(span), (s->deadline - now + USEC_PER_SEC - 1) / USEC_PER_SEC) ?: "n/a");
                else
                        printf("   Deadline: %s\n", format_timestamp(buf, sizeof(buf), s->deadline) ?: "n/a");
        }
        if (SEEN(PROP_IDLE_TIMEOUT))
                printf("IdleTimeout: %s\n", s->idle_timeout == 0 ? "none" :
                       format_seconds(buf, sizeof(buf), s->idle_timeout) ?: "n/a");
        if (SEEN(PROP_MEMORY_MAX))
                printf("  MemoryMax: %s\n",
                       s->memory_max == UINT64_MAX ? "infinity" :
                       format_bytes(buf, sizeof(buf), s->memory_max) ?: "n/a");
        if (SEEN(PROP_CPU_QUOTA))
                printf("   CPUQuota: %s\n",
                       s->cpu_quota_per_sec_usec == UINT64_MAX ? "infinity" :
                       format_cpu_quota(buf, sizeof(buf), s->cpu_quota_per_sec_usec) ?: "n/a");
        if (SEEN(PROP_TASKS_MAX))
                printf("   TasksMax: %s\n", format_limit_u64(buf, sizeof(buf), s->tasks_max));
        if (SEEN(PROP_DISK_MAX))
                printf("    DiskMax: %s\n",
                       s->disk_max == UINT64_MAX ? "infinity" :
                       format_bytes(buf, sizeof(buf), s->disk_max) ?: "n/a");
        if (SEEN(PROP_EPHEMERAL))
                printf("  Ephemeral: %s\n", s->ephemeral ? "yes" : "no");
#undef SEEN

        return 0;
}

static int verb_status(int argc, char *argv[], sd_bus *bus) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        const char *id = argv[1];
        SandboxStatus s = {};
        unsigned seen = 0;
        int r;

        r = get_sandbox_path(bus, id, &error, &path);
        if (r < 0)
                return log_error_errno(r, "Failed to get sandbox %s: %s", id, bus_error_message(&error, r));

        r = sd_bus_call_method(bus, SANDBOX_BUS_NAME, path, "org.freedesktop.DBus.Properties", "GetAll",
                               &error, &reply, "s", SANDBOX_INTERFACE);
        if (r < 0)
                return log_error_errno(r, "Failed to get properties of sandbox %s: %s",
                                       id, bus_error_message(&error, r));

        r = bus_read_fields(reply, sandbox_properties, ELEMENTSOF(sandbox_properties), &s, &seen);
        if (r < 0)
                return log_error_errno(r, "Failed to parse properties of sandbox %s: %m", id);

        if (arg_json)
                return status_print_json(&s, seen, path);

        return status_print_text(&s, seen);
}

typedef struct TemplateInfo {
        const char *name;
        const char *payload;
        const char *description;
} TemplateInfo;

static int template_info_compare(const void *a, const void *b) {
        const TemplateInfo *x = a, *y = b;

        return strcmp(x->name, y->name);
}

static int verb_templates(int argc, char *argv[], sd_bus *bus) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ TemplateInfo *list = NULL;
        size_t n = 0, allocated = 0;
        int r;

        r = sd_bus_call_method(bus, SANDBOX_BUS_NAME, SANDBOX_MANAGER_PATH, SANDBOX_MANAGER_INTERFACE, "ListTemplates",
                               &error, &reply, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to list templates: %s", bus_error_message(&error, r));

        r = sd_bus_message_enter_container(reply, 'a', "(sss)");
        if (r < 0)
                return log_error_errno(r, "Failed to parse ListTemplates reply: %m");

        for (;;) {
                TemplateInfo t;

                r = sd_bus_message_read(reply, "(sss)", &t.name, &t.payload, &t.description);
                if (r < 0)
                        return log_error_errno(r, "Failed to parse ListTemplates reply: %m");
                if (r == 0)
                        break;

                if (n >= allocated) {
                        size_t k = allocated == 0 ? 16 : allocated * 2;
                        TemplateInfo *p;

                        p = reallocarray(list, k, sizeof(TemplateInfo));
                        if (!p)
                                return log_oom();
                        list = p;
                        allocated = k;
                }
                list[n++] = t;
        }

        r = sd_bus_message_exit_container(reply);
        if (r < 0)
                return log_error_errno(r, "Failed to parse ListTemplates reply: %m");

        if (n > 0)
                qsort(list, n, sizeof(TemplateInfo), template_info_compare);

        if (arg_json) {
                _cleanup_json_ json_object *ja = NULL;

                ja = json_object_new_array();
                if (!ja)
                        return log_oom();

                for (size_t i = 0; i < n; i++) {
                        json_object *o = json_object_new_object();

                        if (!o || json_object_array_add(ja, o) < 0) {
                                json_object_put(o);
                                return log_oom();
                        }

                        r = json_add_string(o, "name", list[i].name);
                        if (r >= 0)
                                r = json_add_string(o, "payload", list[i].payload);
                        if (r >= 0)
                                r = json_add_string(o, "description", list[i].description);
                        if (r < 0)
                                return log_oom();
                }

                return print_json(ja);
        }

        if (n > 0) {
                int w_name = (int) strlen("NAME"), w_payload = (int) strlen("PAYLOAD");

                for (size_t i = 0; i < n; i++) {
                        w_name = MAX(w_name, (int) strlen(list[i].name));
                        w_payload = MAX(w_payload, (int) strlen(list[i].payload));
                }

                printf("%-*s %-*s %s\n", w_name, "NAME", w_payload, "PAYLOAD", "DESCRIPTION");
                for (size_t i = 0; i < n; i++)
                        printf("%-*s %-*s %s\n", w_name, list[i].name, w_payload, list[i].payload,
                               list[i].description);
                putchar('\n');
        }

        printf("%zu %s listed.\n", n, n == 1 ? "template" : "templates");
        return 0;
}

static int verb_history(int argc, char *argv[], sd_bus *bus) {
        return history_show(bus, argc > 1 ? argv[1] : NULL, arg_since, arg_limit, arg_json);
}

/* start ID -- CMD…: a background process; its output is kept by sandboxd (ReadOutput). */
static int verb_start(int argc, char *argv[], sd_bus *bus) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        const char *id = argv[1];
        uint64_t process;
        int r;

        r = get_sandbox_path(bus, id, &error, &path);
        if (r < 0)
                return log_error_errno(r, "Failed to get sandbox %s: %s", id, bus_error_message(&error, r));

        r = exec_message_new(bus, path, "Start", argv + 2, NULL, (arg_set & OPT_TIMEOUT) ? arg_timeout : 0,
                             /* tty= */ false, &m);
        if (r < 0)
                return log_error_errno(r, "Failed to build Start call: %m");

        r = sd_bus_call(bus, m, 0, &error, &reply);
        if (r < 0)
                return exec_log_error(bus, id, path, &error, r);

        r = sd_bus_message_read(reply, "t", &process);
        if (r < 0)
                return log_error_errno(r, "Failed to parse Start reply: %m");

        if (arg_json) {
                _cleanup_json_ json_object *j = json_object_new_object();

                if (!j || json_add(j, "process", json_object_new_uint64(process)) < 0)
                        return log_oom();
                return print_json(j);
        }

        printf("%" PRIu64 "\n", process);
        return 0;
}

static int verb_ps(int argc, char *argv[], sd_bus *bus) {
        return processes_list(bus, argv[1], arg_json);
}

static int verb_kill(int argc, char *argv[], sd_bus *bus) {
        return process_signal(bus, argv[1], argv[2], arg_signal);
}

static int verb_cp(int argc, char *argv[], sd_bus *bus) {
        CopyOptions o = {
                .parents = arg_set & OPT_PARENTS,
                .mode_set = arg_set & OPT_MODE,
                .mode = arg_mode,
                .max = arg_max,
        };

        return files_copy(bus, argv[1], argv[2], &o);
}

static int verb_cat(int argc, char *argv[], sd_bus *bus) {
        return files_cat(bus, argv[1], argv + 2, arg_max);
}

static int verb_ls(int argc, char *argv[], sd_bus *bus) {
        return files_list(bus, argv[1], argc > 2 ? argv[2] : "/work", (unsigned) arg_depth, arg_json);
}

static int verb_stat(int argc, char *argv[], sd_bus *bus) {
        return files_stat(bus, argv[1], argv[2], arg_json);
}

static int verb_help(int argc, char *argv[], sd_bus *bus) {
        return help();
}

#define ARGS_ANY UINT_MAX

static bool str_in_set_internal(const char *s, const char *const *set) {
        for (; *set; set++)
                if (streq(s, *set))
                        return true;
        return false;
}
#define STR_IN_SET(s, ...) str_in_set_internal((s), (const char *const[]) { __VA_ARGS__, NULL })

typedef struct Verb {
        const char *name;
        unsigned min_args, max_args;    /* counting the verb itself */
        unsigned options;               /* OptionFlag: the options that apply */
        bool exec_like;                 /* fails with 125, to tell from the command's own status */
        bool needs_bus;
        int (*dispatch)(int argc, char *argv[], sd_bus *bus);
} Verb;

static const Verb verbs[] = {
        { "list",      1, 1,        0,                      false, true,  verb_list      },
        { "status",    2, 2,        0,                      false, true,  verb_status    },
        { "create",    1, 1,        OPTS_CREATE,            false, true,  verb_create    },
        { "exec",      3, ARGS_ANY, OPTS_EXEC,              true,  true,  verb_exec      },
        { "run",       2, ARGS_ANY, OPTS_SANDBOX|OPTS_EXEC, true,  true,  verb_run       },
        { "destroy",   2, ARGS_ANY, 0,                      false, true,  verb_destroy   },
        { "pause",     2, ARGS_ANY, 0,                      false, true,  verb_pause     },
        { "resume",    2, ARGS_ANY, 0,                      false, true,  verb_pause     },
        { "set-timeout", 3, 3,      OPT_IDLE,               false, true,  verb_set_timeout },
        { "templates", 1, 1,        0,                      false, true,  verb_templates },
        { "history",   1, 2,        OPT_SINCE|OPT_LIMIT,    false, true,  verb_history   },
        { "start",     3, ARGS_ANY, OPTS_START,             false, true,  verb_start     },
        { "ps",        2, 2,        0,                      false, true,  verb_ps        },
        { "kill",      3, 3,        OPT_SIGNAL,             false, true,  verb_kill      },
        { "cp",        3, 3,        OPT_PARENTS|OPT_MODE|OPT_MAX, false, true, verb_cp   },
        { "cat",       3, ARGS_ANY, OPT_MAX,                false, true,  verb_cat       },
        { "ls",        2, 3,        OPT_DEPTH,              false, true,  verb_ls        },
        { "stat",      3, 3,        0,                      false, true,  verb_stat      },
        { "help",      1, ARGS_ANY, 0,                      false, false, verb_help      },
};

static const Verb *verb_find(const char *name) {
        /* Without a verb, list, as machinectl does. */
        if (!name)
                return &verbs[0];

        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (streq(verbs[i].name, name))
                        return &verbs[i];
        return NULL;
}

static int verb_dispatch(const Verb *verb, int argc, char *argv[]) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        char *default_argv[] = { (char *) verb->name, NULL };
        unsigned n;
        int r;

        if (argc == 0) {
                argc = 1;
                argv = default_argv;
        }
        n = (unsigned) argc;

        if (n < verb->min_args) {
                if (STR_IN_SET(verb->name, "status", "destroy", "exec", "pause", "resume", "set-timeout",
                               "start", "ps", "kill", "cat", "ls", "stat") && n == 1)
                        return log_error("Missing sandbox ID. See '%s --help'.", program_invocation_short_name);
                if (streq(verb->name, "set-timeout"))
                        return log_error("Missing lifetime: %s set-timeout ID SECONDS [--idle-timeout SECONDS]",
                                         program_invocation_short_name);
                if (streq(verb->name, "exec"))
                        return log_error("Missing command to execute: %s exec ID -- CMD...", program_invocation_short_name);
                if (streq(verb->name, "run"))
                        return log_error("Missing command to run: %s run -- CMD...", program_invocation_short_name);
                if (streq(verb->name, "start"))
                        return log_error("Missing command to start: %s start ID -- CMD...", program_invocation_short_name);
                if (streq(verb->name, "kill"))
                        return log_error("Missing process: %s kill ID PROCESS [--signal SIGNAL]", program_invocation_short_name);
                if (streq(verb->name, "cp"))
                        return log_error("Missing destination: %s cp SOURCE DESTINATION, one of them ID:PATH",
                                         program_invocation_short_name);
                if (STR_IN_SET(verb->name, "cat", "stat"))
                        return log_error("Missing path: %s %s ID PATH", program_invocation_short_name, verb->name);
                return log_error("Too few arguments for '%s'.", verb->name);
        }
        if (verb->max_args != ARGS_ANY && n > verb->max_args)
                return log_error("Too many arguments for '%s'.", verb->name);

        for (unsigned i = 0; i < ELEMENTSOF(option_names); i++)
                if ((arg_set & (1U << i)) && !(verb->options & (1U << i)))
                        return log_error("Option %s does not apply to '%s'.", option_names[i], verb->name);

        /* Checked here rather than by the verb, so that it precedes connecting. */
        if ((verb->exec_like || streq(verb->name, "start")) && (arg_set & OPT_TIMEOUT) && arg_timeout == 0)
                return log_error("The command timeout must be at least 1 second.");
        if (arg_set & OPT_TTY) {
                if (arg_json)
                        return log_error("--tty and --json cannot be combined: a terminal session is not captured.");
                if (arg_set & OPT_NO_STDIN)
                        return log_error("--tty and --no-stdin cannot be combined: the terminal is the input.");
                if (!isatty(STDIN_FILENO))
                        return log_error("--tty needs a terminal on standard input; without --tty the command "
                                         "gets standard input and output as they are.");
        }

        if (verb->needs_bus) {
                r = sd_bus_default_system(&bus);
                if (r < 0)
                        return log_error_errno(r, "Failed to connect to system bus: %m");

                /* Let polkit ask for a password (through an agent) when someone can answer. */
                if (isatty(STDIN_FILENO))
                        (void) sd_bus_set_allow_interactive_authorization(bus, true);
        }

        return verb->dispatch(argc, argv, bus);
}

static int parse_argv(int argc, char *argv[]) {
        enum {
                ARG_VERSION = 0x100,
                ARG_JSON,
                ARG_TEMPLATE,
                ARG_MEMORY,
                ARG_CPU,
                ARG_TASKS,
                ARG_TIMEOUT,
                ARG_WORKDIR,
                ARG_OUTPUT_MAX,
                ARG_IDLE_TIMEOUT,
                ARG_DISK,
                ARG_SINCE,
                ARG_LIMIT,
                ARG_TTY,
                ARG_MODE,
                ARG_MAX,
                ARG_DEPTH,
        };

        static const struct option options[] = {
                { "help",       no_argument,       NULL, 'h'            },
                { "version",    no_argument,       NULL, ARG_VERSION    },
                { "json",       no_argument,       NULL, ARG_JSON       },
                { "template",   required_argument, NULL, ARG_TEMPLATE   },
                { "memory",     required_argument, NULL, ARG_MEMORY     },
                { "cpu",        required_argument, NULL, ARG_CPU        },
                { "tasks",      required_argument, NULL, ARG_TASKS      },
                { "timeout",    required_argument, NULL, ARG_TIMEOUT    },
                { "env",        required_argument, NULL, 'E'            },
                { "workdir",    required_argument, NULL, ARG_WORKDIR    },
                { "output-max", required_argument, NULL, ARG_OUTPUT_MAX },
                { "no-stdin",   no_argument,       NULL, 'n'            },
                { "idle-timeout", required_argument, NULL, ARG_IDLE_TIMEOUT },
                { "idle",       required_argument, NULL, ARG_IDLE_TIMEOUT },
                { "disk",       required_argument, NULL, ARG_DISK       },
                { "since",      required_argument, NULL, ARG_SINCE      },
                { "limit",      required_argument, NULL, ARG_LIMIT      },
                { "tty",        no_argument,       NULL, ARG_TTY        },
                { "parents",    no_argument,       NULL, 'p'            },
                { "mode",       required_argument, NULL, ARG_MODE       },
                { "max",        required_argument, NULL, ARG_MAX        },
                { "depth",      required_argument, NULL, ARG_DEPTH      },
                { "signal",     required_argument, NULL, 's'            },
                {}
        };

        bool failed = false;
        int c, r;

        /* Every bad argument is reported, and parsing goes on to the end: getopt has then
         * moved the verb to argv[optind], which decides the exit status of the failure. */
        while ((c = getopt_long(argc, argv, "hE:nps:", options, NULL)) >= 0) {
                switch (c) {

                case 'h':
                        return help();

                case ARG_VERSION:
                        puts("sandboxctl " PACKAGE_VERSION);
                        return 0;

                case ARG_JSON:
                        arg_json = true;
                        break;

                case ARG_TEMPLATE:
                        arg_template = optarg;
                        arg_set |= OPT_TEMPLATE;
                        break;

                case ARG_MEMORY:
                        r = parse_size(optarg, &arg_memory_max);
                        if (r < 0) {
                                log_error_errno(r, "Invalid --memory '%s', expected a size such as 256M or 1.5G: %m", optarg);
                                failed = true;
                        }
                        arg_set |= OPT_MEMORY;
                        break;

                case ARG_CPU:
                        r = parse_cpu_quota(optarg, &arg_cpu_quota);
                        if (r < 0) {
                                log_error_errno(r, "Invalid --cpu '%s', expected a percentage above 0 such as 50%% or 200%%: %m", optarg);
                                failed = true;
                        }
                        arg_set |= OPT_CPU;
                        break;

                case ARG_TASKS:
                        r = parse_uint64(optarg, &arg_tasks_max);
                        if (r < 0) {
                                log_error_errno(r, "Invalid --tasks '%s', expected a number of processes: %m", optarg);
                                failed = true;
                        }
                        arg_set |= OPT_TASKS;
                        break;

                case ARG_TIMEOUT:
                        r = parse_seconds(optarg, &arg_timeout);
                        if (r < 0) {
                                log_error_errno(r, "Invalid --timeout '%s', expected seconds, optionally with a unit (s, min, h, d): %m", optarg);
                                failed = true;
                        }
                        arg_set |= OPT_TIMEOUT;
                        break;

                case 'E':
                        if (!env_assignment_is_valid(optarg)) {
                                log_error("Invalid --env '%s', expected NAME=VALUE.", optarg);
                                failed = true;
                        } else if (strv_extend(&arg_env, optarg) < 0)
                                return log_oom();
                        arg_set |= OPT_ENV;
                        break;

                case ARG_WORKDIR:
                        if (optarg[0] != '/') {
                                log_error("Invalid --workdir '%s', expected an absolute path.", optarg);
                                failed = true;
                        }
                        arg_workdir = optarg;
                        arg_set |= OPT_WORKDIR;
                        break;

                case ARG_OUTPUT_MAX:
                        r = parse_size(optarg, &arg_output_max);
                        if (r < 0) {
                                log_error_errno(r, "Invalid --output-max '%s', expected a size such as 64K: %m", optarg);
                                failed = true;
                        }
                        arg_set |= OPT_OUTPUT_MAX;
                        break;

                case 'n':
                        arg_set |= OPT_NO_STDIN;
                        break;

                case ARG_IDLE_TIMEOUT:
                        r = parse_seconds(optarg, &arg_idle_timeout);
                        if (r < 0) {
                                log_error_errno(r, "Invalid --idle-timeout '%s', expected seconds (0: none), optionally with a unit (s, min, h, d): %m", optarg);
                                failed = true;
                        }
                        arg_set |= OPT_IDLE;
                        break;

                case ARG_DISK:
                        r = parse_size(optarg, &arg_disk_max);
                        if (r < 0) {
                                log_error_errno(r, "Invalid --disk '%s', expected a size such as 512M or 2G: %m", optarg);
                                failed = true;
                        }
                        arg_set |= OPT_DISK;
                        break;

                case ARG_SINCE:
                        arg_since = optarg;
                        arg_set |= OPT_SINCE;
                        break;

                case ARG_LIMIT:
                        arg_limit = optarg;
                        arg_set |= OPT_LIMIT;
                        break;

                case ARG_TTY:
                        arg_set |= OPT_TTY;
                        break;

                case 'p':
                        arg_set |= OPT_PARENTS;
                        break;

                case ARG_MODE: {
                        char *end;
                        unsigned long m;

                        errno = 0;
                        m = strtoul(optarg, &end, 8);
                        if (errno != 0 || end == optarg || *end != '\0' || optarg[0] == '-' || m > 07777) {
                                log_error("Invalid --mode '%s', expected an octal mode such as 0600.", optarg);
                                failed = true;
                        } else
                                arg_mode = (mode_t) m;
                        arg_set |= OPT_MODE;
                        break;
                }

                case ARG_MAX:
                        r = parse_size(optarg, &arg_max);
                        if (r < 0) {
                                log_error_errno(r, "Invalid --max '%s', expected a size such as 100M: %m", optarg);
                                failed = true;
                        }
                        arg_set |= OPT_MAX;
                        break;

                case ARG_DEPTH:
                        r = parse_uint64(optarg, &arg_depth);
                        if (r < 0 || arg_depth < 1 || arg_depth > 16) {
                                log_error("Invalid --depth '%s', expected a number from 1 to 16.", optarg);
                                failed = true;
                        }
                        arg_set |= OPT_DEPTH;
                        break;

                case 's':
                        r = signal_from_string(optarg, &arg_signal);
                        if (r < 0) {
                                log_error("Invalid --signal '%s', expected a name such as TERM or KILL, or a number.",
                                          optarg);
                                failed = true;
                        }
                        arg_set |= OPT_SIGNAL;
                        break;

                case '?':
                        /* getopt_long() explained already. */
                        failed = true;
                        break;

                default:
                        return log_error_errno(EINVAL, "Unhandled option");
                }
        }

        return failed ? -EINVAL : 1;
}

int main(int argc, char *argv[]) {
        const Verb *verb;
        int r;

        setlocale(LC_ALL, "");
        atexit(arg_env_freep);

        r = parse_argv(argc, argv);
        verb = verb_find(optind < argc ? argv[optind] : NULL);
        if (r == 0)
                return EXIT_SUCCESS;
        if (!verb) {
                log_error("Unknown command '%s'. See '%s --help'.", argv[optind], program_invocation_short_name);
                return EXIT_FAILURE;
        }
        if (r > 0)
                r = verb_dispatch(verb, argc - optind, argv + optind);

        if (r < 0)
                return verb->exec_like ? EXIT_SANDBOXCTL_FAILED : EXIT_FAILURE;
        return r;
}
