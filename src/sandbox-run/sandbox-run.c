/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandbox-run: runs an AWS-Lambda-style handler(event, context) once in an ephemeral
 * sandbox and prints what it returned (seed 003, sandbox-run(1)). A client of sandboxd's
 * varlink interface (io.sandboxd.Sandbox) that holds no sandbox logic: CreateSandbox
 * (Ephemeral), WriteFile (the handler), Exec with "more" (a small bootstrap, bootstrap.py
 * or bootstrap.js, that loads the handler, calls it and writes the result on a channel of
 * its own: the process's stdout, its own stdout being moved to stderr), and Destroy when
 * anything went wrong or a signal came. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-event.h>
#include <systemd/sd-id128.h>

#include "base64-util.h"
#include "bootstrap.js.h"
#include "bootstrap.py.h"
#include "config.h"
#include "fd-util.h"
#include "json-util.h"
#include "parse-util.h"
#include "run-args.h"
#include "run-outcome.h"
#include "sandbox-api.h"
#include "run-report.h"
#include "strv.h"
#include "time-util.h"
#include "varlink.h"

#define IFACE "io.sandboxd.Sandbox."
#define ADDRESS_DEFAULT "unix:" SANDBOX_RUNTIME_DIR "/io.sandboxd.Sandbox"
#define ADDRESS_ENV "SANDBOXD_VARLINK_ADDRESS"
/* The handler file is one WriteFile (so at most what that takes); the event one Exec's Stdin. */
#define HANDLER_FILE_MAX ((unsigned) FILE_PART_MAX)
#define EVENT_MAX RUN_RESPONSE_MAX
/* The sandbox's own lifetime beyond the handler's timeout: a sandbox-run killed before its
 * Exec leaves nothing behind for longer than that. */
#define LIFETIME_SLACK_SEC UINT64_C(120)
/* CreateSandbox may boot a Docker container; every other call is quick. */
#define CALL_TIMEOUT_USEC (300U * 1000000U)
#define WORK_DIR "/work"
/* The bootstrap's channel: fd 3 is the Exec's stdout, and its stdout is the Exec's stderr. */
#define CHANNEL_WRAPPER "exec 3>&1 1>&2; exec \"$@\""

/* They end the run, never the process: the sandbox goes first. */
static const int run_signals[] = { SIGINT, SIGTERM, SIGHUP };

static void run_signals_set(sigset_t *set) {
        sigemptyset(set);
        for (size_t i = 0; i < ELEMENTSOF(run_signals); i++)
                sigaddset(set, run_signals[i]);
}

typedef struct Run {
        RunArgs args;
        RunLanguage language;
        const char *template;
        char *handler_data;
        size_t handler_size;
        char *target_path;              /* the handler file in the sandbox */
        json_object *event;
        json_object *context_overrides;
        uint64_t timeout_sec;
        char request_id[SD_ID128_UUID_STRING_MAX];
        char *function_name;

        VarlinkClient *client;
        char *sandbox_id;
        bool sandbox_gone;              /* the ephemeral sandbox's Exec answered: destroyed */
        RunProfile profile;

        sd_event *loop;
        char *channel;                  /* the Exec's stdout: the bootstrap's messages */
        size_t channel_size;
        bool channel_overflow;
        bool exec_done;
        char *exec_error;               /* the Exec failed: why */
        RunExecEnd end;
        int signal;                     /* SIGINT, SIGTERM or SIGHUP came */

        RunOutcome outcome;
        bool outcome_from_sandbox;      /* the runtime's error (printed as JSON) */
} Run;

static void run_done(Run *r) {
        free(r->handler_data);
        free(r->target_path);
        json_object_putp(&r->event);
        json_object_putp(&r->context_overrides);
        free(r->function_name);
        r->client = varlink_client_unref(r->client);
        free(r->sandbox_id);
        r->loop = sd_event_unref(r->loop);
        free(r->channel);
        free(r->exec_error);
        run_outcome_done(&r->outcome);
}

/* Sets the outcome to a failure of sandbox-run's own (not the handler's). */
static int fail(Run *r, RunExit exit, const char *type, const char *fmt, ...) _printf_(4, 5);
static int fail(Run *r, RunExit exit, const char *type, const char *fmt, ...) {
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = run_outcome_set_errorv(&r->outcome, exit, type, fmt, ap);
        va_end(ap);
        if (k < 0) {
                r->outcome.exit = exit;   /* reported without its message */
                return k;
        }
        return -EIO;
}

static void help(void) {
        printf("sandbox-run HANDLER_FILE [OPTIONS...]\n\n"
               "Run an AWS-Lambda-style handler(event, context) once in an ephemeral sandbox of\n"
               "sandboxd and print its return value as JSON. See sandbox-run(1).\n\n"
               "  -h --help             Show this help\n"
               "     --version          Show the version\n"
               "     --handler NAME     The function to call (default: handler)\n"
               "     --event JSON       The event (default: {}); \"__timeout\": seconds, removed\n"
               "     --event-file FILE  The event from FILE (- for standard input)\n"
               "     --context JSON     Fields of the context object (function_name, ...)\n"
               "     --template NAME    The sandbox's template (default: python or node,\n"
               "                        by the file's extension: .py, .js/.cjs/.mjs)\n"
               "     --timeout SECONDS  The handler's timeout (default: the event's __timeout,\n"
               "                        else 300; at most 3600)\n"
               "     --memory SIZE      The sandbox's memory limit (default: the template's)\n"
               "     --profile          Report wall and CPU time, peak memory, cold/warm start\n"
               "     --json             Print one JSON object: exit code, result or error,\n"
               "                        profile\n\n"
               "Exit status: 0 success, 1 the handler raised (or another error), 2 file not\n"
               "found or unreadable, 3 syntax error or no such handler, 4 timeout, 5 sandbox\n"
               "initialisation failed.\n");
}

/* ---- before sandboxd: the handler file, the event ---- */

/* Reads path whole, at most max bytes: 0, or -errno (-EFBIG when larger, -EISDIR, …). */
static int read_file(const char *path, size_t max, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, allocated = 0;
        struct stat st;
        ssize_t n;

        fd = streq(path, "-") ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        for (;;) {
                if (size + 1 >= allocated) {
                        size_t want = allocated ? allocated * 2 : 64 * 1024;
                        char *b;
                        if (allocated > max + 1)
                                return -EFBIG;
                        b = realloc(buf, want);
                        if (!b)
                                return -ENOMEM;
                        buf = b;
                        allocated = want;
                }
                n = read(fd, buf + size, allocated - size - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                size += (size_t) n;
                if (size > max)
                        return -EFBIG;
        }
        buf[size] = 0;
        *ret = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

static int load_handler(Run *r) {
        const char *base;
        int k;

        k = read_file(r->args.handler_file, HANDLER_FILE_MAX, &r->handler_data, &r->handler_size);
        if (k == -EFBIG)
                return fail(r, RUN_EXIT_FILE, "Runtime.FileNotFound", "%s: larger than %u MiB.",
                            r->args.handler_file, HANDLER_FILE_MAX >> 20);
        if (k < 0)
                return fail(r, RUN_EXIT_FILE, "Runtime.FileNotFound", "%s: %s", r->args.handler_file, strerror(-k));

        r->language = run_language_from_path(r->args.handler_file);
        if (r->language < 0 && r->args.template)
                r->language = run_language_from_template(r->args.template);
        if (r->language < 0)
                return fail(r, RUN_EXIT_ERROR, "Runtime.InvalidArgument",
                            "%s: not a .py, .js, .cjs or .mjs file, and --template names no python or node "
                            "template: which language is it?", r->args.handler_file);
        r->template = r->args.template ?: run_language_to_string(r->language);

        /* In the sandbox under its own name (a module's name is the file's), unless that
         * is not UTF-8, which a JSON string cannot carry. */
        base = strrchr(r->args.handler_file, '/');
        base = base ? base + 1 : r->args.handler_file;
        if (!utf8_is_valid_n(base, strlen(base)))
                base = r->language == RUN_LANGUAGE_PYTHON ? "handler.py" : "handler.js";
        if (asprintf(&r->target_path, WORK_DIR "/%s", base) < 0)
                return -ENOMEM;
        return 0;
}

static int load_event(Run *r) {
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        uint64_t sec;
        int k;

        if (r->args.event_file) {
                k = read_file(r->args.event_file, EVENT_MAX, &text, &size);
                if (k == -EFBIG)
                        return fail(r, RUN_EXIT_ERROR, "Runtime.InvalidArgument", "%s: an event is at most %u MiB.",
                                    r->args.event_file, EVENT_MAX >> 20);
                if (k < 0)
                        return fail(r, RUN_EXIT_FILE, "Runtime.FileNotFound", "%s: %s", r->args.event_file,
                                    strerror(-k));
        } else {
                text = strdup(r->args.event ?: "{}");
                if (!text)
                        return -ENOMEM;
                size = strlen(text);
                if (size > EVENT_MAX)
                        return fail(r, RUN_EXIT_ERROR, "Runtime.InvalidArgument", "--event: at most %u MiB.",
                                    EVENT_MAX >> 20);
        }

        /* Strictly, as every face reads JSON: NaN, a key twice or an integer beyond 64 bits
         * would reach the handler other than it was written. */
        k = json_parse_strict(text, size, JSON_TOKENER_DEFAULT_DEPTH, &r->event);
        if (k == -ENOMEM)
                return k;
        if (k < 0)
                return fail(r, RUN_EXIT_ERROR, "Runtime.InvalidArgument", "The event is not JSON: %s",
                            json_strict_strerror(k));
        k = run_event_take_timeout(r->event, &sec);
        if (k < 0)
                return fail(r, RUN_EXIT_ERROR, "Runtime.InvalidArgument",
                            "The event's " RUN_EVENT_TIMEOUT_KEY " is not a number of seconds from 1 to %" PRIu64 ".",
                            RUN_TIMEOUT_MAX_SEC);
        r->timeout_sec = run_timeout_resolve(r->args.timeout_sec, sec);

        if (r->args.context && run_context_parse(r->args.context, &r->context_overrides) < 0)
                return fail(r, RUN_EXIT_ERROR, "Runtime.InvalidArgument", "--context: not a JSON object.");
        free(r->function_name);
        r->function_name = run_function_name(r->args.handler_file, r->context_overrides);
        return r->function_name ? 0 : -ENOMEM;
}

/* ---- sandboxd ---- */

/* Calls method synchronously: 0 with the reply, or the error reply's name and message as
 * the outcome (type) and -EIO; *ret may be NULL. */
static int call(Run *r, VarlinkClient *c, const char *method, json_object *parameters, RunExit exit,
                const char *type, json_object **ret) {
        _cleanup_json_ json_object *reply = NULL;
        _cleanup_free_ char *error = NULL;
        json_object *m = NULL;
        int k;

        k = varlink_client_call_sync(c, method, parameters, &reply, &error);
        if (k < 0)
                return fail(r, exit, type, "%s: %s", method + strlen(IFACE), strerror(-k));
        if (k > 0) {
                (void) json_object_object_get_ex(reply, "message", &m);
                return fail(r, exit, type, "%s: %s%s%s", method + strlen(IFACE),
                            startswith_str(error, IFACE) ? error + strlen(IFACE) : error, m ? ": " : "",
                            m ? json_object_get_string(m) : "");
        }
        if (ret)
                *ret = TAKE_PTR(reply);
        return 0;
}

static uint64_t json_u64(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) ? (uint64_t) json_object_get_int64(v) : 0;
}

static bool json_get_bool(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

static int connect_sandboxd(VarlinkClient **ret) {
        const char *address = getenv(ADDRESS_ENV);
        int k;

        k = varlink_client_connect_address(ret, isempty(address) ? ADDRESS_DEFAULT : address);
        if (k < 0)
                return k;
        varlink_client_set_timeout(*ret, CALL_TIMEOUT_USEC);
        return 0;
}

static int create_sandbox(Run *r) {
        _cleanup_json_ json_object *p = json_object_new_object(), *o = json_object_new_object(), *reply = NULL;
        json_object *id, *sandbox;
        uint64_t start;
        int k;

        if (!p || !o ||
            json_add(o, "Ephemeral", json_object_new_boolean(true)) < 0 ||
            json_add(o, "Timeout", json_object_new_uint64(r->timeout_sec + LIFETIME_SLACK_SEC)) < 0 ||
            (r->args.memory_max && json_add(o, "MemoryMax", json_object_new_uint64(r->args.memory_max)) < 0) ||
            json_add(p, "template", json_object_new_string(r->template)) < 0 ||
            json_add(p, "options", json_object_get(o)) < 0)
                return -ENOMEM;

        start = now_usec(CLOCK_MONOTONIC);
        k = call(r, r->client, IFACE "CreateSandbox", p, RUN_EXIT_SANDBOX, "Sandbox.InitError", &reply);
        if (k < 0)
                return k;
        r->profile.init_usec = now_usec(CLOCK_MONOTONIC) - start;
        if (!json_object_object_get_ex(reply, "id", &id) || !json_object_is_type(id, json_type_string))
                return fail(r, RUN_EXIT_SANDBOX, "Sandbox.InitError", "CreateSandbox: no id in the reply.");
        r->sandbox_id = strdup(json_object_get_string(id));
        if (!r->sandbox_id)
                return -ENOMEM;
        r->profile.sandbox_id = r->sandbox_id;
        r->profile.template = r->template;

        /* Its limit (the context's memory_limit_in_mb) and whether the warm pool gave it. */
        json_object_putp(&reply);
        json_object_putp(&p);
        p = json_object_new_object();
        if (!p || json_add(p, "id", json_object_new_string(r->sandbox_id)) < 0)
                return -ENOMEM;
        k = call(r, r->client, IFACE "GetSandbox", p, RUN_EXIT_SANDBOX, "Sandbox.InitError", &reply);
        if (k < 0)
                return k;
        if (!json_object_object_get_ex(reply, "sandbox", &sandbox))
                return fail(r, RUN_EXIT_SANDBOX, "Sandbox.InitError", "GetSandbox: no sandbox in the reply.");
        r->profile.memory_limit_bytes = json_u64(sandbox, "memoryMax");
        r->profile.from_pool = json_get_bool(sandbox, "fromPool");
        return 0;
}

static int write_handler(Run *r) {
        _cleanup_json_ json_object *p = json_object_new_object(), *o = json_object_new_object();

        if (!p || !o ||
            json_add(o, "Mode", json_object_new_int(0644)) < 0 ||
            json_add(p, "id", json_object_new_string(r->sandbox_id)) < 0 ||
            json_add(p, "path", json_object_new_string(r->target_path)) < 0 ||
            json_add(p, "data", json_object_new_base64(r->handler_data, r->handler_size)) < 0 ||
            json_add(p, "options", json_object_get(o)) < 0)
                return -ENOMEM;
        return call(r, r->client, IFACE "WriteFile", p, RUN_EXIT_SANDBOX, "Sandbox.InitError", NULL);
}

/* What the bootstrap reads on its standard input. */
static json_object *request_new(Run *r) {
        _cleanup_json_ json_object *q = json_object_new_object(), *context = NULL;
        uint64_t deadline_ms = now_usec(CLOCK_REALTIME) / 1000 + r->timeout_sec * 1000;

        if (!q || run_context_build(r->function_name, r->profile.memory_limit_bytes, r->request_id,
                                    r->context_overrides, &context) < 0 ||
            json_add(q, "file", json_object_new_string(r->target_path)) < 0 ||
            json_add(q, "handler", json_object_new_string(r->args.handler)) < 0 ||
            json_object_object_add(q, "event", json_object_get(r->event)) < 0 ||
            json_add(q, "context", TAKE_PTR(context)) < 0 ||
            json_add(q, "deadlineMs", json_object_new_uint64(deadline_ms)) < 0)
                return NULL;
        return TAKE_PTR(q);
}

static json_object *exec_parameters_new(Run *r) {
        _cleanup_json_ json_object *p = json_object_new_object(), *o = json_object_new_object(),
                                   *request = request_new(r), *argv = NULL, *env = NULL;
        _cleanup_free_ char *name = NULL, *mb = NULL, *handler = NULL;
        const char *text;
        bool python = r->language == RUN_LANGUAGE_PYTHON;

        if (!p || !o || !request ||
            asprintf(&name, "AWS_LAMBDA_FUNCTION_NAME=%s", r->function_name) < 0 ||
            asprintf(&mb, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=%" PRIu64, r->profile.memory_limit_bytes >> 20) < 0 ||
            asprintf(&handler, "_HANDLER=%s.%s", r->function_name, r->args.handler) < 0)
                return NULL;
        argv = strv_to_json((char *const *) (const char *const[]) {
                "sh", "-c", CHANNEL_WRAPPER, "sandbox-run",
                python ? "python3" : "node", python ? "-c" : "-e",
                python ? sandbox_run_bootstrap_py : sandbox_run_bootstrap_js, NULL });
        env = strv_to_json((char *const *) (const char *const[]) {
                name, mb, handler, "AWS_LAMBDA_FUNCTION_VERSION=$LATEST", "LAMBDA_TASK_ROOT=" WORK_DIR,
                "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1", NULL });
        text = json_object_to_json_string_ext(request, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!argv || !env || !text ||
            json_add(o, "Timeout", json_object_new_uint64(r->timeout_sec)) < 0 ||
            json_add(o, "Stdin", json_object_new_base64(text, strlen(text))) < 0 ||
            json_add(o, "Environment", TAKE_PTR(env)) < 0 ||
            json_add(o, "WorkingDirectory", json_object_new_string(WORK_DIR)) < 0 ||
            json_add(p, "id", json_object_new_string(r->sandbox_id)) < 0 ||
            json_add(p, "argv", TAKE_PTR(argv)) < 0 ||
            json_add(p, "options", json_object_get(o)) < 0)
                return NULL;
        return TAKE_PTR(p);
}

static void channel_append(Run *r, const char *data, size_t size) {
        char *b;

        if (r->channel_overflow || r->channel_size + size > RUN_RESPONSE_MAX + 4096) {
                r->channel_overflow = true;   /* the rest is dropped; the outcome says so */
                return;
        }
        b = realloc(r->channel, r->channel_size + size + 1);
        if (!b) {
                r->channel_overflow = true;
                return;
        }
        memcpy(b + r->channel_size, data, size);
        r->channel = b;
        r->channel_size += size;
        b[r->channel_size] = 0;
}

/* Decodes the base64 in p's key, if there is one: 1 with the bytes, 0 if none. */
static int take_bytes(json_object *p, const char *key, void **ret, size_t *ret_size) {
        json_object *v;
        int k;

        if (!json_object_object_get_ex(p, key, &v) || !json_object_is_type(v, json_type_string))
                return 0;
        k = base64_decode(json_object_get_string(v), ret, ret_size);
        return k < 0 ? k : 1;
}

static int on_exec_reply(VarlinkClient *c, json_object *p, const char *error, VarlinkReplyFlags flags,
                         void *userdata) {
        Run *r = userdata;
        json_object *info, *message;
        void *data = NULL;
        size_t size;

        if (error) {
                message = NULL;
                if (p)
                        (void) json_object_object_get_ex(p, "message", &message);
                if (asprintf(&r->exec_error, "Exec: %s%s%s",
                             startswith_str(error, IFACE) ? error + strlen(IFACE) : error, message ? ": " : "",
                             message ? json_object_get_string(message) : "") < 0)
                        r->exec_error = NULL;
                r->exec_done = true;
                /* sandboxd answered: the ephemeral sandbox's one Exec was refused, and
                 * sandboxd lets it go itself. Only a lost connection leaves it to us. */
                r->sandbox_gone = !streq(error, VARLINK_ERROR_DISCONNECTED);
                return sd_event_exit(r->loop, 0);
        }
        if (take_bytes(p, "stdout", &data, &size) > 0)
                channel_append(r, data, size);
        data = mfree(data);
        if (take_bytes(p, "stderr", &data, &size) > 0)
                (void) write_all(STDERR_FILENO, data, size);   /* the handler's logs */
        free(data);
        if (flags & VARLINK_REPLY_CONTINUES)
                return 0;

        r->exec_done = true;
        r->sandbox_gone = true;   /* an ephemeral sandbox's Exec answers once it is gone */
        r->end.exit_status = (int) json_u64(p, "exitStatus");
        if (json_object_object_get_ex(p, "info", &info)) {
                r->end.signal = (int) json_u64(info, "signal");
                r->end.timed_out = json_get_bool(info, "timedOut");
                r->end.oom_killed = json_get_bool(info, "oomKilled");
                r->profile.duration_usec = json_u64(info, "durationUSec");
                r->profile.cpu_usec = json_u64(info, "cpuUSec");
                r->profile.max_rss_bytes = json_u64(info, "maxRSSBytes");
        }
        return sd_event_exit(r->loop, 0);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Run *r = userdata;

        r->signal = (int) si->ssi_signo;
        return sd_event_exit(r->loop, 0);
}

static int exec_handler(Run *r) {
        _cleanup_json_ json_object *p = exec_parameters_new(r);
        int k;

        if (!p)
                return -ENOMEM;
        k = sd_event_new(&r->loop);
        if (k < 0)
                return k;
        for (size_t i = 0; i < ELEMENTSOF(run_signals); i++) {
                k = sd_event_add_signal(r->loop, NULL, run_signals[i], on_signal, r);
                if (k < 0)
                        return k;
        }
        k = varlink_client_attach_event(r->client, r->loop, 0);
        if (k < 0)
                return k;
        k = varlink_client_call_async(r->client, IFACE "Exec", p, VARLINK_CALL_MORE, on_exec_reply, r);
        if (k < 0)
                return fail(r, RUN_EXIT_SANDBOX, "Sandbox.InitError", "Exec: %s", strerror(-k));
        k = sd_event_loop(r->loop);
        if (k < 0)
                return k;
        if (r->signal)
                return -EINTR;
        if (r->exec_error)
                return fail(r, RUN_EXIT_SANDBOX, "Sandbox.InitError", "%s", r->exec_error);
        if (!r->exec_done)
                return fail(r, RUN_EXIT_SANDBOX, "Sandbox.InitError", "Exec: no answer.");
        r->outcome_from_sandbox = true;
        return run_outcome_from_channel(r->channel, r->channel_size, r->channel_overflow, &r->end, r->timeout_sec,
                                        r->language == RUN_LANGUAGE_PYTHON ? "python3" : "node", &r->outcome);
}

/* The execution's record (ListExecutions): the sandbox's cgroup's peak memory and CPU
 * time. Without it (Record=no) the profile has Exec's numbers only. */
static void read_record(Run *r) {
        _cleanup_json_ json_object *p = json_object_new_object(), *f = json_object_new_object(), *reply = NULL;
        _cleanup_free_ char *error = NULL;
        json_object *list, *e;

        if (!p || !f ||
            json_add(f, "SandboxId", json_object_new_string(r->sandbox_id)) < 0 ||
            json_add(f, "Limit", json_object_new_int(1)) < 0 ||
            json_add(p, "filter", json_object_get(f)) < 0)
                return;
        if (varlink_client_call_sync(r->client, IFACE "ListExecutions", p, &reply, &error) != 0)
                return;
        if (!json_object_object_get_ex(reply, "executions", &list) || json_object_array_length(list) < 1)
                return;
        e = json_object_array_get_idx(list, 0);
        r->profile.recorded = true;
        r->profile.memory_peak_bytes = json_u64(e, "memoryPeak");
        r->profile.cgroup_cpu_nsec = json_u64(e, "cgroupCPUNSec");
}

/* Destroys the sandbox unless its ephemeral Exec did: on a connection of its own, as the
 * first may have the Exec outstanding. One already gone is fine. */
static void destroy_sandbox(Run *r) {
        _cleanup_(varlink_client_unrefp) VarlinkClient *c = NULL;
        _cleanup_json_ json_object *p = NULL;
        _cleanup_free_ char *error = NULL;
        int k;

        if (!r->sandbox_id || r->sandbox_gone)
                return;
        p = json_object_new_object();
        if (!p || json_add(p, "id", json_object_new_string(r->sandbox_id)) < 0 || connect_sandboxd(&c) < 0)
                return (void) fprintf(stderr, "sandbox-run: could not destroy sandbox %s.\n", r->sandbox_id);
        k = varlink_client_call_sync(c, IFACE "Destroy", p, NULL, &error);
        if (k < 0 || (k > 0 && !streq(error, IFACE "NoSuchSandbox")))
                fprintf(stderr, "sandbox-run: could not destroy sandbox %s: %s\n", r->sandbox_id,
                        k < 0 ? strerror(-k) : error);
        else
                r->sandbox_gone = true;
}

/* A signal that came while a call was under way (they are blocked throughout). */
static int signal_pending(void) {
        sigset_t set;
        int sig = 0;

        run_signals_set(&set);
        sig = sigtimedwait(&set, NULL, &(struct timespec) {});
        return sig > 0 ? sig : 0;
}

static int run_in_sandbox(Run *r) {
        int k;

        k = connect_sandboxd(&r->client);
        if (k < 0)
                return fail(r, RUN_EXIT_SANDBOX, "Sandbox.InitError", "Cannot reach sandboxd at %s: %s",
                            getenv(ADDRESS_ENV) ?: ADDRESS_DEFAULT, strerror(-k));
        k = create_sandbox(r);
        if (k < 0)
                return k;
        if ((r->signal = signal_pending()))
                return -EINTR;
        k = write_handler(r);
        if (k < 0)
                return k;
        if ((r->signal = signal_pending()))
                return -EINTR;
        k = exec_handler(r);
        if (k < 0)
                return k;
        if (r->args.profile)
                read_record(r);
        return 0;
}

static void print_outcome(Run *r, bool ran) {
        _cleanup_free_ char *text = NULL, *line = NULL;
        const RunProfile *profile = r->args.profile && ran ? &r->profile : NULL;

        if (r->args.json) {
                text = run_report_json(&r->outcome, r->request_id, strempty(r->function_name), profile);
                if (text)
                        printf("%s\n", text);
        } else if (r->outcome.exit == RUN_EXIT_SUCCESS)
                printf("%s\n", r->outcome.result);
        else if (r->outcome_from_sandbox)
                /* The runtime's error, as AWS Lambda prints it; stdout stays the result's. */
                fprintf(stderr, "%s\n",
                        json_object_to_json_string_ext(r->outcome.error,
                                                       JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        else {
                json_object *m = NULL;
                (void) json_object_object_get_ex(r->outcome.error, "errorMessage", &m);
                fprintf(stderr, "sandbox-run: %s\n", m ? json_object_get_string(m) : "out of memory");
        }
        if (profile && !r->args.json) {
                line = run_report_profile_line(r->request_id, profile);
                if (line)
                        fprintf(stderr, "%s\n", line);
        }
        fflush(stdout);
}

int main(int argc, char *argv[]) {
        _cleanup_(run_done) Run r = {};
        sigset_t mask;
        int k;

        if (run_args_parse(argc, argv, &r.args) < 0)
                return RUN_EXIT_ERROR;
        if (r.args.help) {
                help();
                return RUN_EXIT_SUCCESS;
        }
        if (r.args.version) {
                printf("sandbox-run %s\n", PACKAGE_VERSION);
                return RUN_EXIT_SUCCESS;
        }

        run_signals_set(&mask);
        (void) sigprocmask(SIG_BLOCK, &mask, NULL);
        (void) signal(SIGPIPE, SIG_IGN);

        sd_id128_t id;
        k = sd_id128_randomize(&id);
        if (k < 0) {
                fprintf(stderr, "sandbox-run: %s\n", strerror(-k));
                return RUN_EXIT_ERROR;
        }
        sd_id128_to_uuid_string(id, r.request_id);

        r.function_name = run_function_name(r.args.handler_file, NULL);   /* --context's may replace it */
        k = r.function_name ? load_handler(&r) : -ENOMEM;
        if (k >= 0)
                k = load_event(&r);
        if (k >= 0)
                k = run_in_sandbox(&r);
        destroy_sandbox(&r);
        if (k == -EINTR && r.signal) {
                fprintf(stderr, "sandbox-run: %s; sandbox %s destroyed.\n", strsignal(r.signal),
                        strna(r.sandbox_id));
                return 128 + r.signal;
        }
        if (k == -ENOMEM)
                (void) run_outcome_set_error(&r.outcome, RUN_EXIT_ERROR, "Runtime.OutOfMemory", strerror(ENOMEM));
        else if (k < 0 && k != -EIO && !r.outcome.error)
                (void) fail(&r, RUN_EXIT_SANDBOX, "Sandbox.InitError", "%s", strerror(-k));
        print_outcome(&r, k >= 0);
        return r.outcome.exit;
}
