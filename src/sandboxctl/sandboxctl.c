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

#include "config.h"
#include "macro.h"
#include "parse-util.h"
#include "sandboxctl-code.h"
#include "sandboxctl-files.h"
#include "sandboxctl-fleet.h"
#include "sandboxctl-history.h"
#include "sandboxctl-observe.h"
#include "sandboxctl-ports.h"
#include "sandboxctl-process.h"
#include "sandboxctl-snapshots.h"
#include "sandboxctl-util.h"
#include "strv.h"
#include "time-util.h"

/* Slack over the exec timeout for the method call itself: the daemon kills at the
 * timeout, then still has to collect the process and reply. */
#define EXEC_CALL_SLACK_SEC             UINT64_C(30)
#define RUN_TTY_IDLE_SEC                UINT64_C(60)
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
        OPT_LINES       = 1 << 19,
        OPT_FOLLOW      = 1 << 20,
        OPT_NAME        = 1 << 21,
        OPT_REUSE       = 1 << 22,
        OPT_ALLOW_HOST  = 1 << 23,
        OPT_DENY_HOST   = 1 << 24,
        OPT_TMP         = 1 << 25,
        OPT_FROM_SNAPSHOT = 1 << 26,
        OPT_IDLE_ACTION = 1 << 27,
        OPT_STORAGE     = 1 << 28,
        OPT_SECRET      = 1 << 29,
        OPT_LABEL       = 1 << 30,
        _OPT_MAX        = 1U << 31,
} OptionFlag;

#define OPTS_SANDBOX (OPT_TEMPLATE | OPT_MEMORY | OPT_CPU | OPT_TASKS | OPT_DISK | OPT_ALLOW_HOST | OPT_DENY_HOST | \
                      OPT_SECRET | \
                      OPT_STORAGE | OPT_LABEL)
#define OPTS_CREATE (OPTS_SANDBOX | OPT_TIMEOUT | OPT_IDLE | OPT_NAME | OPT_REUSE | OPT_FROM_SNAPSHOT | OPT_IDLE_ACTION)
#define OPTS_FORK (OPT_MEMORY | OPT_CPU | OPT_TASKS | OPT_DISK | OPT_TIMEOUT | OPT_IDLE | OPT_NAME | OPT_IDLE_ACTION)
#define OPTS_EXEC (OPT_TIMEOUT | OPT_ENV | OPT_WORKDIR | OPT_OUTPUT_MAX | OPT_NO_STDIN | OPT_TTY)
#define OPTS_START (OPT_TIMEOUT | OPT_ENV | OPT_WORKDIR | OPT_OUTPUT_MAX)

/* Indexed by the bit number of the OptionFlag. */
static const char *const option_names[] = {
        "--template", "--memory", "--cpu", "--tasks", "--timeout",
        "--env", "--workdir", "--output-max", "--no-stdin", "--idle-timeout",
        "--disk", "--tty", "--parents", "--mode", "--max", "--depth", "--signal",
        "--since", "--limit", "--lines", "--follow", "--name", "--reuse", "--allow-host", "--deny-host",
        "--tmp", "--from-snapshot", "--idle-action", "--storage", "--secret", "--label",
};
_Static_assert(_OPT_MAX == 1U << ELEMENTSOF(option_names), "option_names[] does not match OptionFlag");

static unsigned arg_set = 0;            /* OptionFlag: which options were given */
static bool arg_json = false;
static bool arg_stdin_pipe = false;   /* start --stdin-pipe */
static const char *arg_template = NULL;
static const char *arg_from_snapshot = NULL;
static const char *arg_idle_action = NULL;
static const char *arg_storage = NULL;
static const char *arg_context = NULL;
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
static uint64_t arg_lines = 0;         /* logs: 0 all, or with --follow 10 */
static const char *arg_name = NULL;
static char **arg_allow_host = NULL;   /* EgressAllow=, EgressDeny= (sandboxd-egress(8)) */
static char **arg_deny_host = NULL;
static char **arg_secrets = NULL;      /* Secrets= (docs/SECRETS.md) */
static char **arg_label = NULL;        /* create, run: Labels; list: the Label filter */

static void arg_env_freep(void) {
        arg_env = strv_free(arg_env);
        arg_allow_host = strv_free(arg_allow_host);
        arg_deny_host = strv_free(arg_deny_host);
        arg_secrets = strv_free(arg_secrets);
        arg_label = strv_free(arg_label);
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
               "  status ID                   Show the properties and live metrics of a sandbox\n"
               "  create [--name=NAME [--reuse]]\n"
               "                              Create a sandbox and print its ID\n"
               "  exec ID [--] CMD...         Run a command in a sandbox\n"
               "  run [--] CMD...             Run a command in a new ephemeral sandbox\n"
               "  destroy ID...               Destroy one or more sandboxes\n"
               "  release ID...               Done with them: reset and kept for reuse (a template whose\n"
               "                              pool recycles), or destroyed\n"
               "  pause ID...                 Freeze all processes of sandboxes\n"
               "  resume ID...                Let paused sandboxes run again\n"
               "  set-timeout ID SECONDS      Destroy a sandbox SECONDS from now (0: never)\n"
               "  logs ID [-n N] [-f]         Show the journal entries of a sandbox\n"
               "\n"
               "Snapshot Commands:\n"
               "  snapshot ID... [--tmp]      Save the files of /work (and /tmp) of sandboxes\n"
               "  hibernate ID... [--tmp]     Stop, files kept on disk (or a snapshot); wake brings\n"
               "                              them back\n"
               "  wake ID|NAME                Start a hibernated or stopped sandbox again, same ID\n"
               "                              and name\n"
               "  fork ID [--name=NAME]       Start a new sandbox with the files of ID\n"
               "  snapshots                   List snapshots\n"
               "  snapshot-remove SNAPSHOT... Remove snapshots\n"
               "\n"
               "Process Commands:\n"
               "  start ID [--] CMD...        Start a command in the background, print its ID\n"
               "  ps ID                       List the background processes of a sandbox\n"
               "  kill ID PROCESS             Send a signal (--signal, default TERM) to a process\n"
               "  run-code ID CODE|-          Run a cell of a code context (--context ID|LANGUAGE)\n"
               "  send-stdin ID PROCESS       Copy standard input to a process started with\n"
               "                              --stdin-pipe, as it comes\n"
               "  close-stdin ID PROCESS      Close the input of a process: it reads end of file\n"
               "  output ID PROCESS [-f]      Show what a process wrote; -f: follow it to its end\n"
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
               "  quota                       Show your quota on this node and what you use of it\n"
               "  secret set NAME             Store a secret, its value read from standard input\n"
               "  secret list                 List the names of your secrets\n"
               "  secret remove NAME          Remove a secret\n"
               "  pool                        Show the warm pool of each template that has one\n"
               "  ports ID                    Show what listens on TCP inside a sandbox\n"
               "  watch ID PATH               Print a JSON line for each change under PATH\n"
               "  port-forward ID PORT [LOCAL]\n"
               "                              Listen on LOCAL (a socket path, or [ADDR:]PORT;\n"
               "                              default 127.0.0.1:PORT) and connect each client\n"
               "                              to PORT of the sandbox's loopback\n"
               "  template-create NAME FILE|- Create or replace a template from its JSON\n"
               "  template-remove NAME...     Remove templates (a shipped one stays)\n"
               "  history [ID] [--since=TIME] [--limit=N]\n"
               "                              List recorded executions (of one sandbox)\n"
               "\n"
               "Fleet Commands (see '%1$s fleet --help'):\n"
               "  fleet haproxy-config|list|drain|undrain|draining|move|backup|restore ...\n"
               "                              Many nodes behind HAProxy: its configuration,\n"
               "                              every node's sandboxes, moving them\n"
               "\n"
               "Options:\n"
               "  -h --help                   Show this help\n"
               "     --version                Show package version\n"
               "     --json                   Print machine-readable JSON\n"
               "     --template=NAME          Template for create and run (default: shell)\n"
               "     --name=NAME              create: a name for the sandbox, unique among one's\n"
               "                              own; commands take it where they take an ID\n"
               "     --reuse                  create: print the ID of the sandbox of that name\n"
               "                              if there is one, rather than fail\n"
               "     --allow-host=RULE        create, run: let the sandbox reach RULE (example.com,\n"
               "                              *.pypi.org, host:8443, 10.0.0.0/8) over HTTPS\n"
               "                              through the egress proxy; repeatable\n"
               "     --deny-host=RULE         create, run: refuse RULE even so (wins)\n"
               "     --secret=BINDING         create, run: bind a secret of yours: NAME (an\n"
               "                              environment variable), NAME:file (/run/secrets),\n"
               "                              NAME@HOST:HEADER (added by the egress proxy);\n"
               "                              repeatable\n"
               "  -l --label=KEY=VALUE        create, run: label the sandbox; list: only those\n"
               "                              with that label (KEY alone: any value); repeatable\n"
               "     --memory=SIZE            Memory limit, e.g. 256M or 1.5G\n"
               "     --cpu=PERCENT            CPU quota, e.g. 50%% or 200%%\n"
               "     --tasks=N                Limit on processes and threads\n"
               "     --disk=SIZE              On disk: the bytes of /work and /tmp together;\n"
               "                              in memory: the size of each (default: 1G)\n"
               "     --storage=disk|tmpfs     create, run: /work and /tmp on disk, within\n"
               "                              --disk (default for create), or in memory\n"
               "                              (default for run)\n"
               "     --timeout=SECONDS        create: lifetime of the sandbox (0: none)\n"
               "                              exec, run: limit on the command (default: %2$" PRIu64 ")\n"
               "     --idle-timeout=SECONDS   create, set-timeout: destroy the sandbox after\n"
               "                              SECONDS without a running command (0: never)\n"
               "     --idle-action=ACTION     create: what the idle timeout does: destroy\n"
               "                              (default), pause or hibernate\n"
               "     --from-snapshot=SNAPSHOT create: start with the files of a snapshot\n"
               "     --tmp                    snapshot, hibernate: /tmp as well as /work\n"
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
               "     --stdin-pipe             start: keep the input open for send-stdin\n"
               "  -n --lines=N                logs: the last N entries (default: all; with\n"
               "                              --follow 10)\n"
               "  -f --follow                 logs: go on showing new entries until the\n"
               "                              sandbox is gone\n"
               "\n"
               "Where a command takes an ID, the name of one's own sandbox does as well.\n"
               "\n"
               "exec and run exit with the command's status, 124 when it timed out, 137 when\n"
               "it was killed for exceeding its memory, and 125 when sandboxctl failed.\n"
               "\n"
               "See the sandboxctl(1) man page for details.\n",
               program_invocation_short_name,
               (uint64_t) EXEC_TIMEOUT_DEFAULT_SEC);

        return 0;
}

static SandboxCreateOptions create_options(uint64_t lifetime) {
        static const struct {
                OptionFlag option;
                SandboxCreateField field;
        } fields[] = {
                { OPT_MEMORY, SANDBOX_CREATE_MEMORY_MAX   },
                { OPT_CPU,    SANDBOX_CREATE_CPU_QUOTA    },
                { OPT_TASKS,  SANDBOX_CREATE_TASKS_MAX    },
                { OPT_DISK,   SANDBOX_CREATE_DISK_MAX     },
                { OPT_IDLE,   SANDBOX_CREATE_IDLE_TIMEOUT },
                { OPT_NAME,   SANDBOX_CREATE_NAME         },
                { OPT_REUSE,  SANDBOX_CREATE_REUSE_EXISTING },
                { OPT_ALLOW_HOST, SANDBOX_CREATE_EGRESS_ALLOW },
                { OPT_DENY_HOST,  SANDBOX_CREATE_EGRESS_DENY },
                { OPT_FROM_SNAPSHOT, SANDBOX_CREATE_FROM_SNAPSHOT },
                { OPT_IDLE_ACTION, SANDBOX_CREATE_IDLE_ACTION },
                { OPT_STORAGE, SANDBOX_CREATE_STORAGE },
                { OPT_SECRET, SANDBOX_CREATE_SECRETS },
                { OPT_LABEL,   SANDBOX_CREATE_LABELS },
        };
        SandboxCreateOptions o = {
                .memory_max = arg_memory_max,
                .cpu_quota_per_sec_usec = arg_cpu_quota,
                .tasks_max = arg_tasks_max,
                .disk_max = arg_disk_max,
                .timeout_sec = lifetime,
                .idle_timeout_sec = arg_idle_timeout,
                .name = arg_name,
                .reuse_existing = arg_set & OPT_REUSE,
                .egress_allow = arg_allow_host,
                .egress_deny = arg_deny_host,
                .secrets = arg_secrets,
                .from_snapshot = arg_from_snapshot,
                .idle_action = arg_idle_action,
                .storage = arg_storage,
                .labels = arg_label,
        };

        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                if (arg_set & fields[i].option)
                        o.set |= fields[i].field;
        if (lifetime > 0)
                o.set |= SANDBOX_CREATE_TIMEOUT;
        return o;
}

static int create_sandbox(SandboxClient *c, uint64_t lifetime, char **ret_id, SandboxHandle **ret) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        SandboxCreateOptions o = create_options(lifetime);
        int r;

        r = sandbox_client_create(c, arg_template, &o, ret_id, ret, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to create sandbox: %s", sandbox_client_error_message(&error, r));
        return 0;
}

static int log_destroy_error(const char *id, const SandboxClientError *error, int r) {
        return log_error_errno(r, "Failed to destroy sandbox %s: %s", id, sandbox_client_error_message(error, r));
}

/* DESTROY_CLEANUP: run's own sandbox, after its command (see SandboxDestroyMode). */
static int destroy_sandbox(SandboxHandle *h, SandboxDestroyMode mode) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        int r;

        r = sandbox_handle_destroy(h, mode, &error);
        if (r < 0)
                return log_destroy_error(sandbox_handle_id(h), &error, r);
        return 0;
}

static int exec_result_exit_status(const SandboxExecResult *res) {
        if (res->timed_out)
                return EXIT_TIMED_OUT;
        if (res->oom_killed) {
                /* Said even when the command itself exited 0 (a pipeline whose first member
                 * was killed), as systemd-run says a unit's "Finished with result: oom-kill". */
                (void) log_error("The command finished with result: oom-kill (a process of the sandbox was killed "
                          "for exceeding its memory limit; the command's own status was %" PRIi32 ").",
                          res->exit_status);
                return EXIT_OOM_KILLED;
        }
        if (res->exit_status < 0 || res->exit_status > 255)
                return log_error_errno(EBADMSG, "Command ended with invalid exit status %" PRIi32 ".",
                                       res->exit_status);
        return res->exit_status;
}

static int exec_result_print_json(const SandboxExecResult *res) {
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
static int exec_result_output(const SandboxExecResult *res) {
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

/* The options of an Exec or a Start. timeout 0: none given (Start only; Exec always has
 * one). io: the streams (NULL: none passed). */
static SandboxExecOptions exec_options(const ExecStdio *io, uint64_t timeout) {
        SandboxExecOptions o = SANDBOX_EXEC_OPTIONS_INIT;

        o.environment = arg_env;
        o.working_directory = arg_workdir;
        o.timeout_sec = timeout;
        o.output_max_set = arg_set & OPT_OUTPUT_MAX;
        o.output_max = arg_output_max;
        if (io) {
                o.stdin_data = io->input;
                o.stdin_size = io->input_size;
                o.stdin_fd = io->fd[STDIN_FILENO];
                o.stdout_fd = io->fd[STDOUT_FILENO];
                o.stderr_fd = io->fd[STDERR_FILENO];
        }
        return o;
}

/* Exec; when a signal ended the wait, -EINTR and the signal in *ret_signal. */
static int exec_sandbox(SandboxHandle *h, char **cmd, const ExecStdio *io, SandboxExecResult *ret,
                        SandboxClientError *error, int *ret_signal) {
        SandboxClient *c = sandbox_handle_client(h);
        SandboxExecOptions o = exec_options(io, exec_timeout());
        int r;

        r = sandbox_client_interrupt_begin(c, NULL, NULL);
        if (r < 0)
                return r;
        r = sandbox_handle_exec(h, cmd, &o, ret, error);
        *ret_signal = sandbox_client_interrupted(c);
        sandbox_client_interrupt_end(c);
        return r;
}

/* exec --tty: Start on a pseudo-terminal relayed to our terminal, then Wait. Without
 * --timeout the session has none (an interactive shell lasts as long as its user). */
static int exec_sandbox_tty(SandboxHandle *h, char **cmd, SandboxExecResult *ret, SandboxClientError *error,
                            int *ret_signal) {
        const ExecStdio io = { .fd = { STDIN_FILENO, STDOUT_FILENO, -EBADF } };
        uint64_t timeout = (arg_set & OPT_TIMEOUT) ? arg_timeout : 0;
        SandboxExecOptions o = exec_options(&io, timeout);

        o.tty = true;
        /* A terminal that does not know its size gets the daemon's default. */
        (void) terminal_get_size(STDIN_FILENO, &o.tty_rows, &o.tty_cols);

        return tty_session(h, cmd, &o, timeout > 0 ? sec_to_usec_add(timeout, EXEC_CALL_SLACK_SEC) : UINT64_MAX,
                           ret, error, ret_signal);
}

/* Says why Exec failed, with what the user can do about it. h: to ask whether it is paused. */
static int exec_log_error(const char *id, SandboxHandle *h, const SandboxClientError *error, int r) {
        if (sandbox_client_error_has_name(error, SD_BUS_ERROR_NO_REPLY))
                return log_error_errno(r, "No answer from sandboxd about the command in sandbox %s (%s); "
                                       "the command may have run, entirely or in part.",
                                       id, sandbox_client_error_message(error, r));

        if (h && sandbox_client_error_has_name(error, SANDBOX_ERROR_NOT_RUNNING)) {
                _cleanup_(sandbox_status_done) SandboxStatus s = {};

                if (sandbox_handle_status(h, &s, NULL) >= 0 && streq_ptr(s.state, "paused"))
                        return log_error_errno(r, "Sandbox %s is paused; resume it with '%s resume %s' first.",
                                               id, program_invocation_short_name, id);
        }

        return log_error_errno(r, "Failed to execute command in sandbox %s: %s", id,
                               sandbox_client_error_message(error, r));
}

static int verb_exec(int argc, char *argv[], SandboxClient *c) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_exec_result_done) SandboxExecResult res = {};
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        _cleanup_(exec_stdio_done) ExecStdio io = EXEC_STDIO_INIT;
        const char *id = argv[1];
        bool tty = arg_set & OPT_TTY;
        int sig = 0, r;

        if (!tty) {
                r = exec_stdio_prepare(&io);
                if (r < 0)
                        return r;
        }

        r = sandbox_get(c, id, &h);
        if (r < 0)
                return r;

        if (tty)
                r = exec_sandbox_tty(h, argv + 2, &res, &error, &sig);
        else
                r = exec_sandbox(h, argv + 2, &io, &res, &error, &sig);
        if (r == -EINTR && sig > 0)
                return 128 + sig;
        if (r < 0)
                return exec_log_error(id, h, &error, r);

        return tty ? exec_result_exit_status(&res) : exec_result_output(&res);
}

/* run --tty: an ephemeral sandbox ends after its first Exec, and a session is a Start: this
 * one is destroyed here, and after RUN_TTY_IDLE_SEC without a process should sandboxctl
 * die first (and at the end of --timeout's lifetime, if given). */
static int verb_run_tty(int argc, char *argv[], SandboxClient *c) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_exec_result_done) SandboxExecResult res = {};
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        _cleanup_free_ char *id = NULL;
        int sig = 0, r, k;

        arg_idle_timeout = RUN_TTY_IDLE_SEC;
        arg_set |= OPT_IDLE;
        r = create_sandbox(c, (arg_set & OPT_TIMEOUT) ? sec_add(arg_timeout, SANDBOX_RUN_LIFETIME_SLACK_SEC) : 0,
                           &id, &h);
        if (r < 0)
                return r;

        r = exec_sandbox_tty(h, argv + 1, &res, &error, &sig);
        if (r < 0 && !(r == -EINTR && sig > 0))
                exec_log_error(id, h, &error, r);

        k = destroy_sandbox(h, SANDBOX_DESTROY_CLEANUP);
        if (r == -EINTR && sig > 0)
                return 128 + sig;
        if (r < 0)
                return r;
        if (k < 0)
                return k;
        return exec_result_exit_status(&res);
}

static int verb_run(int argc, char *argv[], SandboxClient *c) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(exec_stdio_done) ExecStdio io = EXEC_STDIO_INIT;
        _cleanup_(sandbox_run_done) SandboxRun run = {};
        SandboxCreateOptions co;
        SandboxExecOptions eo;
        int sig, r;

        if (arg_set & OPT_TTY)
                return verb_run_tty(argc, argv, c);

        r = exec_stdio_prepare(&io);
        if (r < 0)
                return r;

        co = create_options(0);
        eo = exec_options(&io, exec_timeout());
        r = sandbox_client_interrupt_begin(c, NULL, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to run command: %m");
        r = sandbox_client_run(c, arg_template, &co, argv + 1, &eo, &run, &error);
        sig = sandbox_client_interrupted(c);
        sandbox_client_interrupt_end(c);

        if (r < 0 && run.step == SANDBOX_RUN_CREATE)
                return log_error_errno(r, "Failed to create sandbox: %s", sandbox_client_error_message(&error, r));
        if (r < 0) {
                if (!(r == -EINTR && sig > 0))
                        exec_log_error(run.id, NULL, &error, r);
                if (run.cleanup < 0)
                        log_destroy_error(run.id, &run.cleanup_error, run.cleanup);
                return r == -EINTR && sig > 0 ? 128 + sig : r;
        }

        return exec_result_output(&run.result);
}

static int verb_create(int argc, char *argv[], SandboxClient *c) {
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        _cleanup_free_ char *id = NULL;
        int r;

        if ((arg_set & OPT_REUSE) && !(arg_set & OPT_NAME))
                return log_error("--reuse needs --name: it is the sandbox of that name that is reused.");

        r = create_sandbox(c, (arg_set & OPT_TIMEOUT) ? arg_timeout : 0, &id, &h);
        if (r < 0)
                return r;

        if (arg_json) {
                _cleanup_json_ json_object *j = NULL;

                j = json_object_new_object();
                if (!j)
                        return log_oom();

                r = json_add_string(j, "id", id);
                if (r >= 0)
                        r = json_add_string(j, "path", sandbox_handle_path(h));
                if (r < 0)
                        return log_oom();

                return print_json(j);
        }

        puts(id);
        return 0;
}

static int verb_destroy(int argc, char *argv[], SandboxClient *c) {
        int ret = 0, r;

        for (int i = 1; i < argc; i++) {
                _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
                _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;

                r = sandbox_client_get(c, argv[i], &h, &error);
                if (r < 0)
                        r = log_destroy_error(argv[i], &error, r);
                else
                        r = destroy_sandbox(h, SANDBOX_DESTROY_EXPLICIT);
                if (r < 0 && ret == 0)
                        ret = r;
        }

        return ret;
}

/* release ID…: Release, which answers once the sandbox is reset and kept, or gone. */
static int verb_release(int argc, char *argv[], SandboxClient *c) {
        int ret = 0, r;

        for (int i = 1; i < argc; i++) {
                _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
                _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
                bool recycled = false;

                r = sandbox_client_get(c, argv[i], &h, &error);
                if (r >= 0)
                        r = sandbox_handle_release(h, &recycled, &error);
                if (r < 0) {
                        r = log_error_errno(r, "Failed to release sandbox %s: %s", argv[i],
                                            sandbox_client_error_message(&error, r));
                        if (ret == 0)
                                ret = r;
                        continue;
                }
                if (arg_json)
                        printf("{\"id\": \"%s\", \"recycled\": %s}\n", argv[i], recycled ? "true" : "false");
                else
                        printf("%s %s\n", argv[i], recycled ? "recycled" : "destroyed");
        }
        return ret;
}

/* pause ID… and resume ID…: Pause or Resume, which answer once the sandbox is so. */
static int verb_pause(int argc, char *argv[], SandboxClient *c) {
        bool pause = streq(argv[0], "pause");
        int ret = 0, r;

        for (int i = 1; i < argc; i++) {
                _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
                _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;

                r = sandbox_client_get(c, argv[i], &h, &error);
                if (r >= 0)
                        r = pause ? sandbox_handle_pause(h, &error) : sandbox_handle_resume(h, &error);
                if (r < 0) {
                        r = log_error_errno(r, "Failed to %s sandbox %s: %s", argv[0], argv[i],
                                            sandbox_client_error_message(&error, r));
                        if (ret == 0)
                                ret = r;
                }
        }

        return ret;
}

/* set-timeout ID SECONDS [--idle-timeout SECONDS]: without --idle-timeout, the idle
 * timeout stays as it is (SetTimeout sets both). */
static int verb_set_timeout(int argc, char *argv[], SandboxClient *c) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        const char *id = argv[1];
        uint64_t lifetime, idle = arg_idle_timeout;
        int r;

        r = parse_seconds(argv[2], &lifetime);
        if (r < 0)
                return log_error_errno(r, "Invalid lifetime '%s', expected seconds (0: none), optionally "
                                       "with a unit (s, min, h, d): %m", argv[2]);

        r = sandbox_get(c, id, &h);
        if (r < 0)
                return r;

        if (!(arg_set & OPT_IDLE)) {
                _cleanup_(sandbox_status_done) SandboxStatus s = {};

                r = sandbox_handle_status(h, &s, &error);
                if (r >= 0 && !SANDBOX_STATUS_HAS(&s, SANDBOX_PROPERTY_IDLE_TIMEOUT))
                        r = -ENODATA;
                if (r < 0)
                        return log_error_errno(r, "Failed to get the idle timeout of sandbox %s: %s",
                                               id, sandbox_client_error_message(&error, r));
                idle = s.idle_timeout;
        }

        r = sandbox_handle_set_timeout(h, lifetime, idle, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to set the timeouts of sandbox %s: %s",
                                       id, sandbox_client_error_message(&error, r));

        return 0;
}

static int sandbox_info_compare(const void *a, const void *b) {
        const SandboxInfo *x = a, *y = b;

        if (x->created_at != y->created_at)
                return x->created_at < y->created_at ? -1 : 1;
        return strcmp(x->id, y->id);
}

/* ListSandboxes' entries, oldest first, and the names of their owners. */
typedef struct SandboxList {
        SandboxInfo *items;
        char **owner_names;
        size_t n;
} SandboxList;

static void sandbox_list_done(SandboxList *l) {
        for (size_t i = 0; l->owner_names && i < l->n; i++)
                free(l->owner_names[i]);
        free(l->owner_names);
        sandbox_info_array_free(l->items, l->n);
        *l = (SandboxList) {};
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
                if (r >= 0)
                        r = json_add_string(o, "name", s->name);
                if (r >= 0)
                        r = json_add(o, "labels", assignments_to_json(s->labels));
                if (r < 0)
                        return log_oom();
        }

        return print_json(ja);
}

static void sandbox_list_print_table(const SandboxList *l) {
        int w_id = (int) strlen("ID"), w_name = (int) strlen("NAME"), w_template = (int) strlen("TEMPLATE"),
            w_owner = (int) strlen("OWNER"), w_state = (int) strlen("STATE");

        if (l->n > 0) {
                for (size_t i = 0; i < l->n; i++) {
                        w_id = MAX(w_id, (int) strlen(l->items[i].id));
                        w_name = MAX(w_name, (int) strlen(strempty(l->items[i].name)));
                        w_template = MAX(w_template, (int) strlen(l->items[i].template));
                        w_owner = MAX(w_owner, (int) strlen(l->owner_names[i]));
                        w_state = MAX(w_state, (int) strlen(l->items[i].state));
                }

                printf("%-*s %-*s %-*s %-*s %-*s %s\n", w_id, "ID", w_name, "NAME", w_template, "TEMPLATE",
                       w_owner, "OWNER", w_state, "STATE", "CREATED");

                for (size_t i = 0; i < l->n; i++) {
                        const SandboxInfo *s = l->items + i;
                        char ts[64];

                        /* Names are of A-Z a-z 0-9 . _ - only: nothing to quote. */
                        printf("%-*s %-*s %-*s %-*s %-*s %s\n",
                               w_id, s->id, w_name, isempty(s->name) ? "-" : s->name, w_template, s->template,
                               w_owner, l->owner_names[i], w_state, s->state,
                               format_timestamp(ts, sizeof(ts), s->created_at) ?: "n/a");
                }
                putchar('\n');
        }

        printf("%zu %s listed.\n", l->n, l->n == 1 ? "sandbox" : "sandboxes");
}

static int verb_list(int argc, char *argv[], SandboxClient *c) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_list_done) SandboxList list = {};
        int r;

        r = sandbox_client_list(c, arg_label, &list.items, &list.n, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to list sandboxes: %s", sandbox_client_error_message(&error, r));

        if (list.n > 0)
                qsort(list.items, list.n, sizeof(SandboxInfo), sandbox_info_compare);

        list.owner_names = calloc(MAX(list.n, (size_t) 1), sizeof(char *));
        if (!list.owner_names)
                return log_oom();
        for (size_t i = 0; i < list.n; i++) {
                list.owner_names[i] = format_owner((uid_t) list.items[i].owner);
                if (!list.owner_names[i])
                        return log_oom();
        }

        if (arg_json)
                return sandbox_list_print_json(&list);

        sandbox_list_print_table(&list);
        return 0;
}

static const char *const status_json_keys[_SANDBOX_PROPERTY_MAX] = {
        [SANDBOX_PROPERTY_ID]           = "id",
        [SANDBOX_PROPERTY_TEMPLATE]     = "template",
        [SANDBOX_PROPERTY_OWNER]        = "owner",
        [SANDBOX_PROPERTY_STATE]        = "state",
        [SANDBOX_PROPERTY_UNIT]         = "unit",
        [SANDBOX_PROPERTY_CREATED_AT]   = "created_at",
        [SANDBOX_PROPERTY_MEMORY_MAX]   = "memory_max",
        [SANDBOX_PROPERTY_CPU_QUOTA]    = "cpu_quota_per_sec_usec",
        [SANDBOX_PROPERTY_TASKS_MAX]    = "tasks_max",
        [SANDBOX_PROPERTY_DISK_MAX]     = "disk_max",
        [SANDBOX_PROPERTY_TIMEOUT]      = "timeout",
        [SANDBOX_PROPERTY_IDLE_TIMEOUT] = "idle_timeout",
        [SANDBOX_PROPERTY_DEADLINE]     = "deadline",
        [SANDBOX_PROPERTY_EPHEMERAL]    = "ephemeral",
        [SANDBOX_PROPERTY_NAME]         = "name",
        [SANDBOX_PROPERTY_TENANT]       = "tenant",
        [SANDBOX_PROPERTY_STORAGE]      = "storage",
        [SANDBOX_PROPERTY_FORK_METHOD]  = "fork_method",
        [SANDBOX_PROPERTY_LABELS]       = "labels",
};

static int status_print_json(const SandboxStatus *s, const SandboxMetricsInfo *m, const char *path) {
        _cleanup_json_ json_object *j = NULL;
        int r;

        j = json_object_new_object();
        if (!j)
                return log_oom();

        r = json_add_string(j, "path", path);
        for (SandboxProperty i = 0; r >= 0 && i < _SANDBOX_PROPERTY_MAX; i++) {
                const void *p = sandbox_status_field(s, i);
                json_object *v;

                if (!SANDBOX_STATUS_HAS(s, i))
                        continue;

                switch (sandbox_property_signature(i)[0]) {
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
                        v = json_object_new_boolean(*(const bool *) p);
                        break;
                case 'a':
                        v = assignments_to_json(*(char * const * const *) p);
                        break;
                default:
                        v = NULL;
                }

                r = json_add(j, status_json_keys[i], v);
        }
        if (r >= 0)
                r = metrics_add_json(j, m);
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

static int status_print_text(const SandboxStatus *s) {
        char buf[64], span[64];

#define SEEN(p) SANDBOX_STATUS_HAS(s, SANDBOX_PROPERTY_##p)
        if (SEEN(ID))
                printf("         Id: %s\n", s->id);
        if (SEEN(NAME) && !isempty(s->name))
                printf("       Name: %s\n", s->name);
        if (SEEN(TENANT) && !isempty(s->tenant))
                printf("     Tenant: %s\n", s->tenant);
        if (SEEN(LABELS) && !strv_isempty(s->labels)) {
                /* Values are text (no control characters): shown as they are. */
                printf("     Labels:");
                for (char * const *l = s->labels; *l; l++)
                        printf(" %s", *l);
                putchar('\n');
        }
        if (SEEN(TEMPLATE))
                printf("   Template: %s\n", s->template);
        if (SEEN(OWNER)) {
                _cleanup_free_ char *name = format_owner((uid_t) s->owner);

                if (!name)
                        return log_oom();
                if (streq(name, format_limit_u64(buf, sizeof(buf), s->owner)))
                        printf("      Owner: %s\n", name);
                else
                        printf("      Owner: %s (%" PRIu32 ")\n", name, s->owner);
        }
        if (SEEN(STATE))
                printf("      State: %s\n", s->state);
        if (SEEN(UNIT))
                printf("       Unit: %s\n", s->unit);
        if (SEEN(CREATED_AT))
                printf("    Created: %s\n", format_timestamp(buf, sizeof(buf), s->created_at) ?: "n/a");
        if (SEEN(TIMEOUT))
                printf("    Timeout: %s\n", s->timeout == 0 ? "none" :
                       format_seconds(buf, sizeof(buf), s->timeout) ?: "n/a");
        if (SEEN(DEADLINE)) {
                uint64_t now = now_usec(CLOCK_REALTIME);

                if (s->deadline == 0)
                        printf("   Deadline: never\n");
                else if (s->deadline > now)
                        printf("   Deadline: %s; in %s\n", format_timestamp(buf, sizeof(buf), s->deadline) ?: "n/a",
                               format_seconds(span, sizeof(span), (s->deadline - now + USEC_PER_SEC - 1) / USEC_PER_SEC) ?: "n/a");
                else
                        printf("   Deadline: %s\n", format_timestamp(buf, sizeof(buf), s->deadline) ?: "n/a");
        }
        if (SEEN(IDLE_TIMEOUT))
                printf("IdleTimeout: %s\n", s->idle_timeout == 0 ? "none" :
                       format_seconds(buf, sizeof(buf), s->idle_timeout) ?: "n/a");
        if (SEEN(MEMORY_MAX))
                printf("  MemoryMax: %s\n",
                       s->memory_max == UINT64_MAX ? "infinity" :
                       format_bytes(buf, sizeof(buf), s->memory_max) ?: "n/a");
        if (SEEN(CPU_QUOTA))
                printf("   CPUQuota: %s\n",
                       s->cpu_quota_per_sec_usec == UINT64_MAX ? "infinity" :
                       format_cpu_quota(buf, sizeof(buf), s->cpu_quota_per_sec_usec) ?: "n/a");
        if (SEEN(TASKS_MAX))
                printf("   TasksMax: %s\n", format_limit_u64(buf, sizeof(buf), s->tasks_max));
        if (SEEN(DISK_MAX))
                printf("    DiskMax: %s\n",
                       s->disk_max == UINT64_MAX ? "infinity" :
                       format_bytes(buf, sizeof(buf), s->disk_max) ?: "n/a");
        if (SEEN(STORAGE))
                printf("    Storage: %s%s%s%s\n", s->storage,
                       streq(s->storage, "disk") ? " (a workspace on disk, within DiskMax)" :
                       streq(s->storage, "tmpfs") ? " (in memory, within MemoryMax)" : "",
                       SEEN(FORK_METHOD) ? "; fork: " : "", SEEN(FORK_METHOD) ? s->fork_method : "");
        if (SEEN(EPHEMERAL))
                printf("  Ephemeral: %s\n", s->ephemeral ? "yes" : "no");
#undef SEEN

        return 0;
}

static int templates_print(const SandboxTemplate *list, size_t n) {
        int r;

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

static int verb_status(int argc, char *argv[], SandboxClient *c) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        _cleanup_(sandbox_status_done) SandboxStatus s = {};
        SandboxMetricsInfo metrics = {};
        const char *id = argv[1];
        int r;

        r = sandbox_get(c, id, &h);
        if (r < 0)
                return r;

        r = sandbox_handle_status(h, &s, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to get properties of sandbox %s: %s",
                                       id, sandbox_client_error_message(&error, r));
        /* While it runs or is paused; none from a sandboxd without GetMetrics. */
        if (sandbox_handle_metrics(h, &metrics, NULL) < 0)
                metrics = (SandboxMetricsInfo) {};

        if (arg_json)
                return status_print_json(&s, &metrics, sandbox_handle_path(h));

        r = status_print_text(&s);
        if (r >= 0)
                metrics_print_text(&metrics);
        return r;
}

static int template_compare(const void *a, const void *b) {
        const SandboxTemplate *x = a, *y = b;

        return strcmp(x->name, y->name);
}

/* snapshot ID… [--tmp], hibernate ID… [--tmp], fork ID [options], wake ID|NAME, snapshots,
 * snapshot-remove SNAPSHOT… (sandboxctl-snapshots.c). */
static int verb_snapshot(int argc, char *argv[], SandboxClient *c) {
        return snapshots_take(c, argc, argv, streq(argv[0], "hibernate"), arg_set & OPT_TMP, arg_json);
}

static int verb_fork(int argc, char *argv[], SandboxClient *c) {
        SandboxCreateOptions o = create_options((arg_set & OPT_TIMEOUT) ? arg_timeout : 0);

        return snapshots_fork(c, argv[1], &o, arg_json);
}

static int verb_wake(int argc, char *argv[], SandboxClient *c) {
        return snapshots_wake(c, argv[1], arg_json);
}

static int verb_snapshots(int argc, char *argv[], SandboxClient *c) {
        return snapshots_list(c, arg_json);
}

static int verb_snapshot_remove(int argc, char *argv[], SandboxClient *c) {
        return snapshots_remove(c, argc, argv);
}

static int verb_templates(int argc, char *argv[], SandboxClient *c) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        SandboxTemplate *list = NULL;
        size_t n = 0;
        int r;

        r = sandbox_client_templates(c, &list, &n, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to list templates: %s", sandbox_client_error_message(&error, r));

        if (n > 0)
                qsort(list, n, sizeof(SandboxTemplate), template_compare);

        r = templates_print(list, n);
        sandbox_template_array_free(list, n);
        return r;
}

static bool quota_item_is_bytes(const char *what) {
        return streq(what, "MemoryMax") || streq(what, "DiskMax") || streq(what, "SnapshotBytes");
}

static int verb_quota(int argc, char *argv[], SandboxClient *c) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_quota_done) SandboxQuota q = {};
        int r;

        r = sandbox_client_quota(c, &q, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to get the quota: %s", sandbox_client_error_message(&error, r));

        if (arg_json) {
                _cleanup_json_ json_object *o = json_object_new_object(), *a = json_object_new_array();

                if (!o || !a)
                        return log_oom();
                for (size_t i = 0; i < q.n_entries; i++) {
                        json_object *e = json_object_new_object();

                        if (!e || json_object_array_add(a, e) < 0) {
                                json_object_put(e);
                                return log_oom();
                        }
                        if (json_add_string(e, "what", q.entries[i].what) < 0 ||
                            json_add(e, "limit", json_object_new_uint64(q.entries[i].limit)) < 0 ||
                            json_add(e, "use", json_object_new_uint64(q.entries[i].use)) < 0)
                                return log_oom();
                }
                if (json_add_string(o, "scope", q.scope) < 0 || json_add(o, "quota", TAKE_PTR(a)) < 0)
                        return log_oom();
                return print_json(o);
        }

        printf("Quota of %s:\n", q.scope);
        printf("%-20s %12s %12s\n", "WHAT", "USE", "LIMIT");
        for (size_t i = 0; i < q.n_entries; i++) {
                char use[32], limit[32];
                bool bytes = quota_item_is_bytes(q.entries[i].what);

                if (bytes)
                        format_bytes(use, sizeof(use), q.entries[i].use);
                else
                        snprintf(use, sizeof(use), "%" PRIu64, q.entries[i].use);
                if (q.entries[i].limit == 0)
                        snprintf(limit, sizeof(limit), "-");
                else if (bytes)
                        format_bytes(limit, sizeof(limit), q.entries[i].limit);
                else
                        snprintf(limit, sizeof(limit), "%" PRIu64, q.entries[i].limit);
                printf("%-20s %12s %12s\n", q.entries[i].what, use, limit);
        }
        return 0;
}

static int verb_logs(int argc, char *argv[], SandboxClient *c) {
        bool follow = arg_set & OPT_FOLLOW;
        uint64_t lines = (arg_set & OPT_LINES) ? arg_lines : follow ? 10 : 0;

        /* Its bound is sandboxd's (InvalidOption); only what fits the call is checked here. */
        if (lines > UINT32_MAX)
                return log_error("Invalid --lines %" PRIu64 ", expected a number.", lines);
        return logs_show(c, argv[1], (unsigned) lines, follow, arg_json);
}

static int verb_ports(int argc, char *argv[], SandboxClient *c) {
        return ports_show(c, argv[1], arg_json);
}

static int verb_port_forward(int argc, char *argv[], SandboxClient *c) {
        return port_forward(c, argv[1], argv[2], argc > 3 ? argv[3] : NULL);
}

static int verb_watch(int argc, char *argv[], SandboxClient *c) {
        return watch_show(c, argv[1], argv[2]);
}

static int verb_pool(int argc, char *argv[], SandboxClient *c) {
        return pools_show(c, arg_json);
}

/* The text of FILE, or of standard input for "-", as the daemon takes a template's: no NUL
 * (the daemon bounds the size, as it does a template file's). */
static int read_template_text(const char *path, char **ret) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, allocated = 0;

        if (!streq(path, "-")) {
                fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        return log_error_errno(errno, "Failed to open %s: %m", path);
        }
        for (;;) {
                ssize_t k;

                if (size + 1 >= allocated) {
                        /* A template is at most 64 KiB; beyond 1 MiB it is not one. */
                        if (allocated >= 1024 * 1024)
                                return log_error_errno(EFBIG, "%s is too large for a template.", path);
                        allocated = allocated == 0 ? 16 * 1024 : allocated * 2;
                        char *p = realloc(buf, allocated);
                        if (!p)
                                return log_oom();
                        buf = p;
                }
                k = read(fd >= 0 ? fd : STDIN_FILENO, buf + size, allocated - size - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return log_error_errno(errno, "Failed to read %s: %m", path);
                }
                if (k == 0)
                        break;
                size += (size_t) k;
        }
        buf[size] = 0;
        if (strlen(buf) != size)
                return log_error("%s contains a NUL byte: it is not a template's JSON.", path);
        *ret = TAKE_PTR(buf);
        return 0;
}

static int verb_template_create(int argc, char *argv[], SandboxClient *c) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_free_ char *json = NULL;
        int r;

        r = read_template_text(argv[2], &json);
        if (r < 0)
                return r;
        r = sandbox_client_create_template(c, argv[1], json, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to create template %s: %s", argv[1],
                                       sandbox_client_error_message(&error, r));
        return 0;
}

static int verb_template_remove(int argc, char *argv[], SandboxClient *c) {
        int ret = 0, r;

        for (int i = 1; i < argc; i++) {
                _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;

                r = sandbox_client_remove_template(c, argv[i], &error);
                if (r < 0) {
                        r = log_error_errno(r, "Failed to remove template %s: %s", argv[i],
                                            sandbox_client_error_message(&error, r));
                        if (ret == 0)
                                ret = r;
                }
        }
        return ret;
}

/* secret set NAME (the value from standard input: never an argument, which every user
 * of the machine can read in /proc), secret list, secret remove NAME. */
static int verb_secret(int argc, char *argv[], SandboxClient *c) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        const char *what = argv[1];
        int r;

        if (streq(what, "list")) {
                _cleanup_strv_free_ char **names = NULL;

                if (argc != 2)
                        return log_error_errno(-EINVAL, "secret list takes no argument.");
                r = sandbox_client_list_secrets(c, &names, &error);
                if (r < 0)
                        return log_error_errno(r, "Failed to list secrets: %s", sandbox_client_error_message(&error, r));
                if (arg_json) {
                        _cleanup_json_ json_object *a = json_object_new_array();
                        for (char **n = names; a && n && *n; n++)
                                if (json_object_array_add(a, json_object_new_string(*n)) < 0)
                                        return log_oom();
                        if (!a)
                                return log_oom();
                        return print_json(a);
                }
                for (char **i = names; i && *i; i++)
                        puts(*i);
                return 0;
        }
        if (argc != 3)
                return log_error_errno(-EINVAL, "Usage: sandboxctl secret set|remove NAME");
        if (streq(what, "remove") || streq(what, "rm")) {
                r = sandbox_client_remove_secret(c, argv[2], &error);
                if (r < 0)
                        return log_error_errno(r, "Failed to remove secret %s: %s", argv[2],
                                               sandbox_client_error_message(&error, r));
                return 0;
        }
        if (!streq(what, "set"))
                return log_error_errno(-EINVAL, "Unknown secret command '%s' (set, list, remove).", what);

        char buf[16 * 1024 + 2];
        size_t n = 0;

        if (isatty(STDIN_FILENO))
                fprintf(stderr, "Value of secret %s (then Enter and Ctrl-D): ", argv[2]);
        for (;;) {
                ssize_t k = read(STDIN_FILENO, buf + n, sizeof(buf) - n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return log_error_errno(errno, "Failed to read the value from standard input: %m");
                }
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n == sizeof(buf))
                        break;
        }
        /* One final newline is the terminal's or echo's, not the secret's. */
        if (n > 0 && buf[n - 1] == '\n')
                n--;
        if (n > 0 && buf[n - 1] == '\r')
                n--;
        r = sandbox_client_set_secret(c, argv[2], buf, n, &error);
        explicit_bzero(buf, sizeof(buf));
        if (r < 0)
                return log_error_errno(r, "Failed to set secret %s: %s", argv[2], sandbox_client_error_message(&error, r));
        return 0;
}

static int verb_history(int argc, char *argv[], SandboxClient *c) {
        return history_show(c, argc > 1 ? argv[1] : NULL, arg_since, arg_limit, arg_json);
}

/* start ID -- CMD…: a background process; its output is kept by sandboxd (ReadOutput). */
static int verb_start(int argc, char *argv[], SandboxClient *c) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        SandboxExecOptions o = exec_options(NULL, (arg_set & OPT_TIMEOUT) ? arg_timeout : 0);
        const char *id = argv[1];
        uint64_t process;
        int r;

        o.stdin_pipe = arg_stdin_pipe;
        r = sandbox_get(c, id, &h);
        if (r < 0)
                return r;

        r = sandbox_handle_start(h, argv + 2, &o, &process, &error);
        if (r < 0)
                return exec_log_error(id, h, &error, r);

        if (arg_json) {
                _cleanup_json_ json_object *j = json_object_new_object();

                if (!j || json_add(j, "process", json_object_new_uint64(process)) < 0)
                        return log_oom();
                return print_json(j);
        }

        printf("%" PRIu64 "\n", process);
        return 0;
}

static int verb_ps(int argc, char *argv[], SandboxClient *c) {
        return processes_list(c, argv[1], arg_json);
}

static int verb_kill(int argc, char *argv[], SandboxClient *c) {
        return process_signal(c, argv[1], argv[2], arg_signal);
}

static int verb_send_stdin(int argc, char *argv[], SandboxClient *c) {
        return process_send_stdin(c, argv[1], argv[2]);
}

static int verb_close_stdin(int argc, char *argv[], SandboxClient *c) {
        return process_close_stdin(c, argv[1], argv[2]);
}

static int verb_output(int argc, char *argv[], SandboxClient *c) {
        return process_output(c, argv[1], argv[2], arg_set & OPT_FOLLOW);
}

static int verb_cp(int argc, char *argv[], SandboxClient *c) {
        CopyOptions o = {
                .parents = arg_set & OPT_PARENTS,
                .mode_set = arg_set & OPT_MODE,
                .mode = arg_mode,
                .max = arg_max,
        };

        return files_copy(c, argv[1], argv[2], &o);
}

static int verb_cat(int argc, char *argv[], SandboxClient *c) {
        return files_cat(c, argv[1], argv + 2, arg_max);
}

static int verb_ls(int argc, char *argv[], SandboxClient *c) {
        return files_list(c, argv[1], argc > 2 ? argv[2] : "/work", (unsigned) arg_depth, arg_json);
}

static int verb_stat(int argc, char *argv[], SandboxClient *c) {
        return files_stat(c, argv[1], argv[2], arg_json);
}

static int verb_run_code(int argc, char *argv[], SandboxClient *c) {
        _cleanup_free_ char *code = NULL;
        int r;

        if (streq(argv[2], "-")) {
                r = read_template_text("-", &code);
                if (r < 0)
                        return r;
        }
        /* --context: a context's id, or a language's name (python, javascript): the sandbox's
         * default context of it. */
        return code_run(c, argv[1], arg_context, code ?: argv[2], arg_timeout, arg_output_max,
                        arg_json);
}

static int verb_help(int argc, char *argv[], SandboxClient *c) {
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
        int (*dispatch)(int argc, char *argv[], SandboxClient *c);
} Verb;

static const Verb verbs[] = {
        { "list",      1, 1,        OPT_LABEL,              false, true,  verb_list      },
        { "status",    2, 2,        0,                      false, true,  verb_status    },
        { "create",    1, 1,        OPTS_CREATE,            false, true,  verb_create    },
        { "exec",      3, ARGS_ANY, OPTS_EXEC,              true,  true,  verb_exec      },
        { "run",       2, ARGS_ANY, OPTS_SANDBOX|OPTS_EXEC, true,  true,  verb_run       },
        { "destroy",   2, ARGS_ANY, 0,                      false, true,  verb_destroy   },
        { "release",   2, ARGS_ANY, 0,                      false, true,  verb_release   },
        { "pause",     2, ARGS_ANY, 0,                      false, true,  verb_pause     },
        { "resume",    2, ARGS_ANY, 0,                      false, true,  verb_pause     },
        { "set-timeout", 3, 3,      OPT_IDLE,               false, true,  verb_set_timeout },
        { "templates", 1, 1,        0,                      false, true,  verb_templates },
        { "quota",     1, 1,        0,                      false, true,  verb_quota },
        { "secret",    2, 3,        0,                      false, true,  verb_secret },
        { "logs",      2, 2,        OPT_LINES|OPT_FOLLOW,   false, true,  verb_logs      },
        { "pool",      1, 1,        0,                      false, true,  verb_pool      },
        { "ports",     2, 2,        0,                      false, true,  verb_ports     },
        { "port-forward", 3, 4,     0,                      false, true,  verb_port_forward },
        { "watch",     3, 3,        0,                      false, true,  verb_watch     },
        { "template-create", 3, 3,  0,                      false, true,  verb_template_create },
        { "template-remove", 2, ARGS_ANY, 0,                false, true,  verb_template_remove },
        { "history",   1, 2,        OPT_SINCE|OPT_LIMIT,    false, true,  verb_history   },
        { "start",     3, ARGS_ANY, OPTS_START,             false, true,  verb_start     },
        { "ps",        2, 2,        0,                      false, true,  verb_ps        },
        { "kill",      3, 3,        OPT_SIGNAL,             false, true,  verb_kill      },
        { "send-stdin", 3, 3,       0,                      false, true,  verb_send_stdin },
        { "close-stdin", 3, 3,      0,                      false, true,  verb_close_stdin },
        { "output",    3, 3,        OPT_FOLLOW,             false, true,  verb_output    },
        { "cp",        3, 3,        OPT_PARENTS|OPT_MODE|OPT_MAX, false, true, verb_cp   },
        { "cat",       3, ARGS_ANY, OPT_MAX,                false, true,  verb_cat       },
        { "ls",        2, 3,        OPT_DEPTH,              false, true,  verb_ls        },
        { "stat",      3, 3,        0,                      false, true,  verb_stat      },
        { "snapshot",  2, ARGS_ANY, OPT_TMP,                false, true,  verb_snapshot  },
        { "hibernate", 2, ARGS_ANY, OPT_TMP,                false, true,  verb_snapshot  },
        { "wake",      2, 2,        0,                      false, true,  verb_wake      },
        { "fork",      2, 2,        OPTS_FORK,              false, true,  verb_fork      },
        { "snapshots", 1, 1,        0,                      false, true,  verb_snapshots },
        { "snapshot-remove", 2, ARGS_ANY, 0,                false, true,  verb_snapshot_remove },
        { "run-code",  3, 3,        OPT_TIMEOUT|OPT_OUTPUT_MAX, false, true, verb_run_code },
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
        _cleanup_(sandbox_client_freep) SandboxClient *client = NULL;
        char *default_argv[] = { (char *) verb->name, NULL };
        unsigned n;
        int r;

        if (argc == 0) {
                argc = 1;
                argv = default_argv;
        }
        n = (unsigned) argc;

        if (n < verb->min_args) {
                if (STR_IN_SET(verb->name, "status", "destroy", "release", "exec", "pause", "resume", "set-timeout",
                               "start", "ps", "kill", "cat", "ls", "stat", "logs", "snapshot", "hibernate",
                               "fork", "wake") && n == 1)
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
                if (STR_IN_SET(verb->name, "template-create", "template-remove"))
                        return log_error("Missing template: %s template-create NAME FILE|-, %s template-remove NAME...",
                                         program_invocation_short_name, program_invocation_short_name);
                return log_error("Too few arguments for '%s'.", verb->name);
        }
        if (verb->max_args != ARGS_ANY && n > verb->max_args)
                return log_error("Too many arguments for '%s'.", verb->name);

        if (arg_context && !streq(verb->name, "run-code"))
                return log_error("Option --context does not apply to '%s'.", verb->name);
        for (unsigned i = 0; i < ELEMENTSOF(option_names); i++)
                if ((arg_set & (1U << i)) && !(verb->options & (1U << i)))
                        return log_error("Option %s does not apply to '%s'.", option_names[i], verb->name);
        if (arg_stdin_pipe && !streq(verb->name, "start"))
                return log_error("Option %s does not apply to '%s'.", "--stdin-pipe", verb->name);

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
                r = sandbox_client_open_system(&client);
                if (r < 0)
                        return log_error_errno(r, "Failed to connect to system bus: %m");

                /* Let polkit ask for a password (through an agent) when someone can answer. */
                if (isatty(STDIN_FILENO))
                        (void) sandbox_client_set_interactive(client, true);
        }

        return verb->dispatch(argc, argv, client);
}

typedef enum OptionKind {
        KIND_HELP,
        KIND_VERSION,
        KIND_TRUE,      /* a switch: arg_set only, or *(bool *) target */
        KIND_STRING,
        KIND_SIZE,
        KIND_CPU,
        KIND_UINT64,
        KIND_SECONDS,
        KIND_ENV,
        KIND_LIST,      /* each use adds to the char ** target */
        KIND_PATH,
        KIND_MODE,
        KIND_DEPTH,
        KIND_SIGNAL,
} OptionKind;

/* One command line option: how getopt_long() knows it, what it sets, and what a bad value
 * is told. In getopt_long()'s order, which its messages about ambiguous prefixes follow. */
typedef struct Option {
        const char *name;
        int has_arg;
        char short_name;        /* or 0 */
        OptionFlag flag;        /* recorded in arg_set (0: none) */
        OptionKind kind;
        void *target;
        const char *expected;   /* "Invalid --NAME 'VALUE', expected …" */
        bool show_errno;        /* …": %m" rather than "." */
} Option;

static const Option options[] = {
        { "help",         no_argument,       'h', 0,              KIND_HELP                                                   },
        { "version",      no_argument,       0,   0,              KIND_VERSION                                                },
        { "json",         no_argument,       0,   0,              KIND_TRUE,    &arg_json                                     },
        { "template",     required_argument, 0,   OPT_TEMPLATE,   KIND_STRING,  &arg_template                                 },
        { "memory",       required_argument, 0,   OPT_MEMORY,     KIND_SIZE,    &arg_memory_max,
          "a size such as 256M or 1.5G", true },
        { "cpu",          required_argument, 0,   OPT_CPU,        KIND_CPU,     &arg_cpu_quota,
          "a percentage above 0 such as 50% or 200%", true },
        { "tasks",        required_argument, 0,   OPT_TASKS,      KIND_UINT64,  &arg_tasks_max,
          "a number of processes", true },
        { "timeout",      required_argument, 0,   OPT_TIMEOUT,    KIND_SECONDS, &arg_timeout,
          "seconds, optionally with a unit (s, min, h, d)", true },
        { "env",          required_argument, 'E', OPT_ENV,        KIND_ENV,     &arg_env,
          "NAME=VALUE", false },
        { "workdir",      required_argument, 0,   OPT_WORKDIR,    KIND_PATH,    &arg_workdir,
          "an absolute path", false },
        { "output-max",   required_argument, 0,   OPT_OUTPUT_MAX, KIND_SIZE,    &arg_output_max,
          "a size such as 64K", true },
        { "no-stdin",     no_argument,       'n', OPT_NO_STDIN,   KIND_TRUE                                                   },
        { "idle-timeout", required_argument, 0,   OPT_IDLE,       KIND_SECONDS, &arg_idle_timeout,
          "seconds (0: none), optionally with a unit (s, min, h, d)", true },
        { "idle",         required_argument, 0,   OPT_IDLE,       KIND_SECONDS, &arg_idle_timeout,
          "seconds (0: none), optionally with a unit (s, min, h, d)", true },
        { "disk",         required_argument, 0,   OPT_DISK,       KIND_SIZE,    &arg_disk_max,
          "a size such as 512M or 2G", true },
        { "since",        required_argument, 0,   OPT_SINCE,      KIND_STRING,  &arg_since                                    },
        { "limit",        required_argument, 0,   OPT_LIMIT,      KIND_STRING,  &arg_limit                                    },
        { "name",         required_argument, 0,   OPT_NAME,       KIND_STRING,  &arg_name                                     },
        { "reuse",        no_argument,       0,   OPT_REUSE,      KIND_TRUE                                                   },
        { "tty",          no_argument,       0,   OPT_TTY,        KIND_TRUE                                                   },
        { "parents",      no_argument,       'p', OPT_PARENTS,    KIND_TRUE                                                   },
        { "mode",         required_argument, 0,   OPT_MODE,       KIND_MODE,    &arg_mode,
          "an octal mode such as 0600", false },
        { "max",          required_argument, 0,   OPT_MAX,        KIND_SIZE,    &arg_max,
          "a size such as 100M", true },
        { "depth",        required_argument, 0,   OPT_DEPTH,      KIND_DEPTH,   &arg_depth,
          "a number", false },
        { "signal",       required_argument, 's', OPT_SIGNAL,     KIND_SIGNAL,  &arg_signal,
          "a name such as TERM or KILL, or a number", false },
        /* -n is --no-stdin, but for logs --lines (parse_argv()). */
        { "lines",        required_argument, 0,   OPT_LINES,      KIND_UINT64,  &arg_lines,
          "a number of entries", true },
        { "follow",       no_argument,       'f', OPT_FOLLOW,     KIND_TRUE                                                   },
        { "allow-host",   required_argument, 0,   OPT_ALLOW_HOST, KIND_LIST,    &arg_allow_host                               },
        { "deny-host",    required_argument, 0,   OPT_DENY_HOST,  KIND_LIST,    &arg_deny_host                                },
        { "tmp",          no_argument,       0,   OPT_TMP,        KIND_TRUE                                                   },
        { "from-snapshot", required_argument, 0,  OPT_FROM_SNAPSHOT, KIND_STRING, &arg_from_snapshot                           },
        { "idle-action",  required_argument, 0,   OPT_IDLE_ACTION, KIND_STRING, &arg_idle_action                              },
        { "storage",      required_argument, 0,   OPT_STORAGE,    KIND_STRING,  &arg_storage                                  },
        { "secret",       required_argument, 0,   OPT_SECRET,     KIND_LIST,    &arg_secrets                                  },
        { "label",        required_argument, 'l', OPT_LABEL,      KIND_LIST,    &arg_label                                    },
        /* No bit of its own (OptionFlag is full): checked by verb_dispatch(). */
        { "stdin-pipe",   no_argument,       0,   0,              KIND_TRUE,    &arg_stdin_pipe                               },
        /* No flag of its own (OptionFlag is full): run-code's alone, checked there. */
        { "context",      required_argument, 0,   0,              KIND_STRING,  &arg_context                                  },
};

#define OPTION_VAL_BASE 0x100

/* Stores arg in o's target: 0, -ENOMEM, or another negative errno for a bad value. */
static int option_parse(const Option *o, const char *arg) {
        uint64_t u;
        char *end;
        int r;

        switch (o->kind) {
        case KIND_TRUE:
                if (o->target)
                        *(bool *) o->target = true;
                return 0;
        case KIND_STRING:
                *(const char **) o->target = arg;
                return 0;
        case KIND_SIZE:
                return parse_size(arg, o->target);
        case KIND_CPU:
                return parse_cpu_quota(arg, o->target);
        case KIND_UINT64:
                return parse_uint64(arg, o->target);
        case KIND_SECONDS:
                return parse_seconds(arg, o->target);
        case KIND_ENV:
                if (!env_assignment_is_valid(arg))
                        return -EINVAL;
                return strv_extend(o->target, arg) < 0 ? -ENOMEM : 0;
        case KIND_LIST:
                /* Checked by sandboxd, which says which rule it does not take. */
                return strv_extend(o->target, arg) < 0 ? -ENOMEM : 0;
        case KIND_PATH:
                *(const char **) o->target = arg;
                return arg[0] == '/' ? 0 : -EINVAL;
        case KIND_MODE:
                errno = 0;
                u = strtoul(arg, &end, 8);
                /* Its bounds are sandboxd's: only what fits is checked here. */
                if (errno != 0 || end == arg || *end != '\0' || arg[0] == '-' || u > UINT32_MAX)
                        return -EINVAL;
                *(mode_t *) o->target = (mode_t) u;
                return 0;
        case KIND_DEPTH:
                r = parse_uint64(arg, o->target);
                return r < 0 || *(uint64_t *) o->target > UINT32_MAX ? -EINVAL : 0;
        case KIND_SIGNAL:
                return signal_from_string(arg, o->target);
        default:
                return -EINVAL;
        }
}

static const char *option_display_name(const Option *o) {
        /* The alias --idle is reported as --idle-timeout. */
        for (unsigned i = 0; i < ELEMENTSOF(option_names); i++)
                if (o->flag == 1U << i)
                        return option_names[i];
        return o->name;
}

/* Whether the verb is logs, whose -n is --lines (as journalctl's) rather than --no-stdin:
 * the first argument that names a verb, found by a silent pass of getopt_long() over a copy
 * of argv, which it reorders: the options first, then the other arguments in their order. */
static bool verb_is_logs(int argc, char *argv[], const struct option *long_options) {
        _cleanup_free_ char **copy = NULL;
        bool logs = false;

        copy = calloc((size_t) argc + 1, sizeof(char *));
        if (!copy)
                return false;
        memcpy(copy, argv, (size_t) argc * sizeof(char *));
        opterr = 0;
        while (getopt_long(argc, copy, "hE:nps:fl:", long_options, NULL) >= 0)
                ;
        for (int i = optind; i < argc; i++)
                if (verb_find(copy[i])) {
                        logs = streq(copy[i], "logs");
                        break;
                }
        opterr = 1;
        optind = 0;
        return logs;
}

static int parse_argv(int argc, char *argv[]) {
        struct option long_options[ELEMENTSOF(options) + 1] = {};
        bool failed = false, logs;
        int c, r;

        for (size_t i = 0; i < ELEMENTSOF(options); i++)
                long_options[i] = (struct option) {
                        .name = options[i].name,
                        .has_arg = options[i].has_arg,
                        .val = options[i].short_name ?: OPTION_VAL_BASE + (int) i,
                };

        logs = verb_is_logs(argc, argv, long_options);
        /* Every bad argument is reported, and parsing goes on to the end: getopt has then
         * moved the verb to argv[optind], which decides the exit status of the failure. */
        while ((c = getopt_long(argc, argv, logs ? "hE:n:ps:fl:" : "hE:nps:fl:", long_options, NULL)) >= 0) {
                const Option *o = NULL;

                for (size_t i = 0; logs && c == 'n' && !o; i++)
                        if (streq(options[i].name, "lines"))
                                o = &options[i];
                if (!o && c >= OPTION_VAL_BASE && c < OPTION_VAL_BASE + (int) ELEMENTSOF(options))
                        o = &options[c - OPTION_VAL_BASE];
                for (size_t i = 0; !o && i < ELEMENTSOF(options); i++)
                        if (options[i].short_name != 0 && options[i].short_name == c)
                                o = &options[i];
                if (!o) {
                        if (c != '?')
                                return log_error_errno(EINVAL, "Unhandled option");
                        /* getopt_long() explained already. */
                        failed = true;
                        continue;
                }

                if (o->kind == KIND_HELP)
                        return help();
                if (o->kind == KIND_VERSION) {
                        puts("sandboxctl " PACKAGE_VERSION);
                        return 0;
                }

                r = option_parse(o, optarg);
                if (r == -ENOMEM)
                        return log_oom();
                if (r < 0) {
                        if (o->show_errno)
                                log_error_errno(r, "Invalid %s '%s', expected %s: %m", option_display_name(o),
                                                optarg, o->expected);
                        else
                                log_error("Invalid %s '%s', expected %s.", option_display_name(o), optarg,
                                          o->expected);
                        failed = true;
                }
                arg_set |= o->flag;
        }

        return failed ? -EINVAL : 1;
}

int main(int argc, char *argv[]) {
        const Verb *verb;
        int r;

        setlocale(LC_ALL, "");
        atexit(arg_env_freep);

        /* The fleet's commands take options of their own, and no bus. */
        if (argc >= 2 && streq(argv[1], "fleet")) {
                r = fleet_main(argc - 1, argv + 1);
                return r < 0 ? EXIT_FAILURE : r;
        }

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
