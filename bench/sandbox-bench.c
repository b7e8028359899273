/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * sandbox-bench: latency of sandboxd's API against its floors, measured in one process over
 * one system-bus connection, so that no process start of a client is in the figures.
 *
 *   sandbox-bench [--runs N] [--warmup N] [--template NAME] [--uid UID] [--only LIST]
 *                 [--samples] [-- BWRAP-ARGV…]
 *
 * BWRAP-ARGV is the bwrap command line sandboxd would run, with /bin/true in place of the
 * agent (bench/bench.py builds it as the daemon does); without it the bwrap floors are
 * skipped. It runs as --uid (default 0x70000000, the first of sandboxd's sandbox uids),
 * dropped to in a forked child just as the daemon's held payload does.
 *
 * The measurements are interleaved (each round runs each once), so that load that comes
 * and goes on the machine shifts them alike. Prints one JSON object: for each measurement
 * its runs, median, p90, min, max and mean in µs.
 *
 * --trace N instead runs N ephemeral create + exec cycles and splits each into phases by
 * the bus signals the client sees (sandboxd's SandboxNew, State changes, SandboxRemoved;
 * systemd's JobNew and JobRemoved for the scope): medians of each phase.
 *
 * --upload FILE --cp-dir DIR instead times, --runs times each and interleaved, Upload of
 * FILE from a descriptor of ours into a running sandbox (its /work, a tmpfs) against cp(1)
 * of FILE into DIR (a tmpfs of the caller's): "upload" and "cp", plus "upload_bytes".
 *
 * The varlink_* measurements make the same calls on sandboxd's varlink socket (--varlink,
 * default /run/sandboxd/io.sandboxd.Sandbox), over one connection, in the same rounds:
 * the JSON is written and read by hand (blocking write, read to the NUL), as sd-bus
 * marshals D-Bus's.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <inttypes.h>
#include <math.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

#include "bench-util.h"

#define BUS_NAME "io.sandboxd.Sandbox1"
#define MANAGER_PATH "/io/sandboxd/Sandbox1"
#define MANAGER_IFACE "io.sandboxd.Sandbox1.Manager"
#define SANDBOX_IFACE "io.sandboxd.Sandbox1.Sandbox"
#define CALL_TIMEOUT_USEC (60ULL * 1000000ULL)
#define SANDBOX_UID_DEFAULT 0x70000000U

#define _cleanup_(f) __attribute__((cleanup(f)))
#define streq(a, b) (strcmp((a), (b)) == 0)
#define streq_ptr(a, b) ((a) && (b) && streq((a), (b)))

extern char **environ;

static unsigned arg_runs = 200;
static unsigned arg_warmup = 5;
static const char *arg_template = "shell";
static uid_t arg_uid = SANDBOX_UID_DEFAULT;
static const char *arg_only = NULL;
static bool arg_samples = false;
static unsigned arg_trace = 0;
static const char *arg_upload = NULL;
static const char *arg_cp_dir = NULL;
static const char *arg_varlink = "/run/sandboxd/io.sandboxd.Sandbox";
static char **arg_bwrap = NULL;      /* points into argv */
static int devnull = -1;

typedef struct Series {
        const char *name;
        double *us;
        unsigned n;
} Series;

static void fail_bus(const char *what, const sd_bus_error *e, int r) {
        fprintf(stderr, "sandbox-bench: %s: %s\n", what,
                e && sd_bus_error_is_set(e) ? e->message : strerror(r < 0 ? -r : r));
        exit(EXIT_FAILURE);
}

static bool wanted(const char *name) {
        size_t l = strlen(name);

        if (!arg_only)
                return true;
        for (const char *p = arg_only; *p;) {
                const char *end = strchrnul(p, ',');
                if ((size_t) (end - p) == l && strncmp(p, name, l) == 0)
                        return true;
                p = *end ? end + 1 : end;
        }
        return false;
}

static Series *series_new(const char *name) {
        Series *s = calloc(1, sizeof(Series));

        if (!s || !(s->us = calloc(arg_runs, sizeof(double))))
                fail("Out of memory", ENOMEM);
        s->name = name;
        return s;
}

static void series_add(Series *s, double us) {
        if (s->n < arg_runs)
                s->us[s->n++] = us;
}

static void series_print(const Series *s, bool first) {
        double *v, sum = 0, median, p90;
        unsigned n = s->n;

        if (n == 0)
                return;
        v = malloc(n * sizeof(double));
        if (!v)
                fail("Out of memory", ENOMEM);
        memcpy(v, s->us, n * sizeof(double));
        qsort(v, n, sizeof(double), cmp_double);
        for (unsigned i = 0; i < n; i++)
                sum += v[i];
        median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
        /* Nearest rank. */
        p90 = v[(9 * n + 9) / 10 - 1];
        printf("%s\n    \"%s\": {\"runs\": %u, \"median_us\": %.1f, \"p90_us\": %.1f, "
               "\"min_us\": %.1f, \"max_us\": %.1f, \"mean_us\": %.1f",
               first ? "" : ",", s->name, n, median, p90, v[0], v[n - 1], sum / n);
        if (arg_samples) {
                printf(", \"samples_us\": [");
                for (unsigned i = 0; i < n; i++)
                        printf("%s%.1f", i ? ", " : "", s->us[i]);
                printf("]");
        }
        printf("}");
        free(v);
}

/* ---- floors ------------------------------------------------------------------------ */

static void wait_ok(pid_t pid, const char *what) {
        int status;

        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        fail("waitpid", errno);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "sandbox-bench: %s failed (status 0x%x)\n", what, status);
                exit(EXIT_FAILURE);
        }
}

static void spawn_wait(char **argv) {
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int r;

        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, devnull, STDIN_FILENO);
        posix_spawn_file_actions_adddup2(&fa, devnull, STDOUT_FILENO);

        r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
        if (r != 0)
                fail(argv[0], r);
        wait_ok(pid, argv[0]);
        posix_spawn_file_actions_destroy(&fa);
}

/* As sandboxd's held payload does it (src/core/payload-bwrap.c): fork, drop to the
 * sandbox's host uid and gid, exec bwrap with an empty environment. */
static void spawn_wait_as_uid(char **argv) {
        pid_t pid;

        pid = fork();
        if (pid < 0)
                fail("fork", errno);
        if (pid == 0)
                exec_as_uid(argv, devnull, arg_uid);
        wait_ok(pid, argv[0]);
}

/* ---- sandboxd ---------------------------------------------------------------------- */

static char *create_sandbox(sd_bus *bus, bool ephemeral) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        const char *id, *path;
        char *ret;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, "CreateSandbox");
        if (r >= 0)
                r = ephemeral ? sd_bus_message_append(m, "sa{sv}", arg_template, 1, "Ephemeral", "b", 1)
                              : sd_bus_message_append(m, "sa{sv}", arg_template, 0);
        if (r < 0)
                fail("Failed to build CreateSandbox", r);
        r = sd_bus_call(bus, m, CALL_TIMEOUT_USEC, &error, &reply);
        if (r < 0)
                fail_bus("CreateSandbox", &error, r);
        r = sd_bus_message_read(reply, "so", &id, &path);
        if (r < 0)
                fail("Failed to parse CreateSandbox reply", r);
        ret = strdup(path);
        if (!ret)
                fail("Out of memory", ENOMEM);
        return ret;
}

/* Exec argv in the sandbox at path: its output captured in the reply (the default), or,
 * with fds, written straight to our /dev/null (StandardOutput, StandardError). Checks the
 * exit status and that a captured stdout has want_stdout bytes. */
static void exec_cmd(sd_bus *bus, const char *path, char **argv, bool fds, size_t want_stdout) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        const void *out;
        size_t out_size;
        int32_t status;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, BUS_NAME, path, SANDBOX_IFACE, "Exec");
        if (r >= 0)
                r = sd_bus_message_append_strv(m, argv);
        if (r >= 0)
                r = fds ? sd_bus_message_append(m, "a{sv}", 2, "StandardOutput", "h", devnull,
                                                "StandardError", "h", devnull)
                        : sd_bus_message_append(m, "a{sv}", 0);
        if (r < 0)
                fail("Failed to build Exec", r);
        r = sd_bus_call(bus, m, CALL_TIMEOUT_USEC, &error, &reply);
        if (r < 0)
                fail_bus("Exec", &error, r);
        r = sd_bus_message_read(reply, "i", &status);
        if (r >= 0)
                r = sd_bus_message_read_array(reply, 'y', &out, &out_size);
        if (r < 0)
                fail("Failed to parse Exec reply", r);
        if (status != 0 || out_size != (fds ? 0 : want_stdout)) {
                fprintf(stderr, "sandbox-bench: %s in %s returned %" PRIi32 " with %zu bytes of output\n",
                        argv[0], path, status, out_size);
                exit(EXIT_FAILURE);
        }
}

static void exec_true(sd_bus *bus, const char *path) {
        exec_cmd(bus, path, (char *[]) { (char *) "/bin/true", NULL }, false, 0);
}

#define OUTPUT_BYTES (1024U * 1024U)
static char *output_argv[] = { (char *) "head", (char *) "-c", (char *) "1048576", (char *) "/dev/zero", NULL };

static void destroy_sandbox(sd_bus *bus, const char *path) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_call_method(bus, BUS_NAME, path, SANDBOX_IFACE, "Destroy", &error, NULL, "");
        if (r < 0)
                fail_bus("Destroy", &error, r);
}

static void ping(sd_bus *bus) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_call_method(bus, BUS_NAME, MANAGER_PATH, "org.freedesktop.DBus.Peer", "Ping", &error, NULL,
                               "");
        if (r < 0)
                fail_bus("Ping", &error, r);
}

/* ---- varlink ----------------------------------------------------------------------- */

#define VARLINK_IFACE "io.sandboxd.Sandbox"

static int varlink_fd = -1;
static char *vl_buf;                 /* what was read: messages, each ended by a NUL */
static size_t vl_size, vl_start, vl_end;

static void varlink_connect(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        if (strlen(arg_varlink) >= sizeof(sa.sun_path))
                fail(arg_varlink, ENAMETOOLONG);
        strcpy(sa.sun_path, arg_varlink);
        varlink_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (varlink_fd < 0 || connect(varlink_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                fail(arg_varlink, errno);
}

static void varlink_send(const char *json) {
        size_t n = strlen(json) + 1, done = 0;   /* with its NUL */

        while (done < n) {
                ssize_t k = write(varlink_fd, json + done, n - done);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        fail("varlink write", k < 0 ? errno : EPIPE);
                done += (size_t) k;
        }
}

/* The next message, NUL-terminated in the buffer: valid until the next call. */
static const char *varlink_receive(void) {
        for (;;) {
                char *nul = vl_start < vl_end ? memchr(vl_buf + vl_start, 0, vl_end - vl_start) : NULL;
                if (nul) {
                        const char *m = vl_buf + vl_start;
                        vl_start = (size_t) (nul - vl_buf) + 1;
                        return m;
                }
                if (vl_start > 0) {
                        memmove(vl_buf, vl_buf + vl_start, vl_end - vl_start);
                        vl_end -= vl_start;
                        vl_start = 0;
                }
                if (vl_size - vl_end < 65536) {
                        vl_size = vl_size ? vl_size * 2 : 1024 * 1024;
                        vl_buf = realloc(vl_buf, vl_size);
                        if (!vl_buf)
                                fail("Out of memory", ENOMEM);
                }
                ssize_t k = read(varlink_fd, vl_buf + vl_end, vl_size - vl_end);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        fail("varlink read", k < 0 ? errno : ECONNRESET);
                vl_end += (size_t) k;
        }
}

/* A reply, or exit with the error it carries. */
static const char *varlink_reply(const char *what) {
        const char *m = varlink_receive();

        if (strstr(m, "\"error\":")) {
                fprintf(stderr, "sandbox-bench: %s: %.500s\n", what, m);
                exit(EXIT_FAILURE);
        }
        return m;
}

/* The bytes of the base64 string after key in m (0 if none). */
static size_t base64_size(const char *m, const char *key) {
        const char *p = strstr(m, key), *end;
        size_t n;

        if (!p)
                return 0;
        p += strlen(key);
        end = strchr(p, '"');
        n = end ? (size_t) (end - p) : 0;
        if (n >= 1 && p[n - 1] == '=')
                n--;
        if (n >= 1 && p[n - 1] == '=')
                n--;
        return n * 3 / 4;
}

static void varlink_ping(void) {
        varlink_send("{\"method\":\"org.varlink.service.GetInfo\"}");
        (void) varlink_reply("GetInfo");
}

/* CreateSandbox: its id (16 hex digits) into id. */
static void varlink_create(bool ephemeral, char id[static 17]) {
        char call[256];
        const char *m, *p;

        snprintf(call, sizeof(call),
                 "{\"method\":\"" VARLINK_IFACE ".CreateSandbox\","
                 "\"parameters\":{\"template\":\"%s\",\"options\":{%s}}}",
                 arg_template, ephemeral ? "\"Ephemeral\":true" : "");
        varlink_send(call);
        m = varlink_reply("CreateSandbox");
        p = strstr(m, "\"id\":\"");
        if (!p || strlen(p + 6) < 16)
                fail("CreateSandbox reply without id", EBADMSG);
        memcpy(id, p + 6, 16);
        id[16] = 0;
}

/* Exec argv (a JSON array) in sandbox id, with "more" or not: checks exit status 0 and
 * that want_stdout bytes came, in the reply or streamed. */
static void varlink_exec(const char *id, const char *argv, bool more, size_t want_stdout) {
        char call[512];
        const char *m;
        size_t out = 0;

        snprintf(call, sizeof(call),
                 "{\"method\":\"" VARLINK_IFACE ".Exec\",%s\"parameters\":{\"id\":\"%s\",\"argv\":%s}}",
                 more ? "\"more\":true," : "", id, argv);
        varlink_send(call);
        for (;;) {
                m = varlink_reply("Exec");
                out += base64_size(m, "\"stdout\":\"");
                if (!strstr(m, "\"continues\":true"))
                        break;
        }
        if (!strstr(m, "\"exitStatus\":0,") || out != want_stdout) {
                fprintf(stderr, "sandbox-bench: varlink Exec %s in %s: %zu bytes of output, %.300s\n", argv, id,
                        out, m);
                exit(EXIT_FAILURE);
        }
}

static void varlink_destroy(const char *id) {
        char call[128];

        snprintf(call, sizeof(call), "{\"method\":\"" VARLINK_IFACE ".Destroy\",\"parameters\":{\"id\":\"%s\"}}", id);
        varlink_send(call);
        (void) varlink_reply("Destroy");
}

#define VARLINK_TRUE "[\"/bin/true\"]"
#define VARLINK_OUTPUT "[\"head\",\"-c\",\"1048576\",\"/dev/zero\"]"

/* ---- --trace: where the time of one ephemeral create + exec goes --------------------- */

/* What the client sees on the bus, stamped when it arrives: sandboxd's own signals and
 * systemd's job signals for the sandbox's scope. Cheap enough not to disturb the figures
 * (no ptrace), and coarse enough to need no daemon change. */
typedef struct TraceEvent {
        double t;
        char what[40];
        char arg[96];
} TraceEvent;

#define TRACE_MAX 64
static TraceEvent trace_events[TRACE_MAX];
static unsigned n_trace_events;

static void trace_add(const char *what, const char *arg) {
        if (n_trace_events >= TRACE_MAX)
                return;
        TraceEvent *e = &trace_events[n_trace_events++];
        e->t = now_us();
        snprintf(e->what, sizeof(e->what), "%s", what);
        snprintf(e->arg, sizeof(e->arg), "%s", arg ?: "");
}

static int on_sandbox_signal(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        const char *id = NULL;

        (void) sd_bus_message_read(m, "s", &id);
        trace_add(sd_bus_message_get_member(m), id);
        return 0;
}

static int on_job_signal(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        const char *job, *unit, *result = NULL;
        uint32_t id;
        char what[40];

        if (sd_bus_message_read(m, "uos", &id, &job, &unit) < 0)
                return 0;
        if (strncmp(unit, "sandbox-", 8) != 0)
                return 0;
        if (streq_ptr(sd_bus_message_get_member(m), "JobRemoved"))
                (void) sd_bus_message_read(m, "s", &result);
        snprintf(what, sizeof(what), "%s%s%s", sd_bus_message_get_member(m), result ? ":" : "", result ?: "");
        trace_add(what, unit);
        return 0;
}

static int on_properties_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        const char *iface, *name, *state;
        char what[40];

        if (sd_bus_message_read(m, "s", &iface) < 0 || sd_bus_message_enter_container(m, 'a', "{sv}") < 0)
                return 0;
        while (sd_bus_message_enter_container(m, 'e', "sv") > 0) {
                if (sd_bus_message_read(m, "s", &name) < 0)
                        return 0;
                if (streq_ptr(name, "State") && sd_bus_message_read(m, "v", "s", &state) >= 0) {
                        snprintf(what, sizeof(what), "State=%s", state);
                        trace_add(what, sd_bus_message_get_path(m));
                } else if (sd_bus_message_skip(m, "v") < 0)
                        return 0;
                if (sd_bus_message_exit_container(m) < 0)
                        return 0;
        }
        return 0;
}

typedef struct AsyncReply {
        sd_bus_message *reply;
        double t;
} AsyncReply;

static int on_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        AsyncReply *a = userdata;

        a->t = now_us();
        a->reply = sd_bus_message_ref(m);
        return 0;
}

static void wait_reply(sd_bus *bus, AsyncReply *a, const char *what) {
        int r;

        while (!a->reply) {
                r = sd_bus_process(bus, NULL);
                if (r < 0)
                        fail("sd_bus_process", r);
                if (r > 0)
                        continue;
                r = sd_bus_wait(bus, UINT64_MAX);
                if (r < 0 && r != -EINTR)
                        fail("sd_bus_wait", r);
        }
        if (sd_bus_message_is_method_error(a->reply, NULL))
                fail_bus(what, sd_bus_message_get_error(a->reply), -EIO);
}

/* The phases, each from the previous event to this one. */
static const char * const trace_phases[] = {
        "SandboxNew",            /* D-Bus in, authorization, sandbox object made */
        "JobNew",                /* fork of the held payload, StartTransientUnit to systemd */
        "JobRemoved:done",       /* systemd made the scope and moved the payload in */
        "State=running",         /* release; bwrap builds the sandbox; agent says ready */
        "CreateSandbox reply",   /* reply to the client */
        "Exec sent",             /* client turnaround */
        "State=stopping",        /* Exec to agent, /bin/true runs, result back; destroy starts */
        "JobNew(stop)",          /* StopUnit to systemd */
        "JobRemoved:done(stop)", /* systemd killed the scope's processes and removed it */
        "SandboxRemoved",        /* the daemon finalizes */
        "Exec reply",            /* reply to the client */
};
#define N_PHASES (sizeof(trace_phases) / sizeof(trace_phases[0]))

static void trace_run(sd_bus *bus, unsigned cycles) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        double (*phase)[N_PHASES] = calloc(cycles, sizeof(*phase));
        int r;

        if (!phase)
                fail("Out of memory", ENOMEM);
        r = sd_bus_match_signal(bus, NULL, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, "SandboxNew",
                                on_sandbox_signal, NULL);
        if (r >= 0)
                r = sd_bus_match_signal(bus, NULL, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, "SandboxRemoved",
                                        on_sandbox_signal, NULL);
        if (r >= 0)
                r = sd_bus_match_signal(bus, NULL, BUS_NAME, NULL, "org.freedesktop.DBus.Properties",
                                        "PropertiesChanged", on_properties_changed, NULL);
        if (r >= 0)
                r = sd_bus_match_signal(bus, NULL, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                        "org.freedesktop.systemd1.Manager", "JobNew", on_job_signal, NULL);
        if (r >= 0)
                r = sd_bus_match_signal(bus, NULL, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                        "org.freedesktop.systemd1.Manager", "JobRemoved", on_job_signal, NULL);
        if (r < 0)
                fail("Failed to add matches", r);
        r = sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "Subscribe", &error, NULL, "");
        if (r < 0)
                fail_bus("Subscribe", &error, r);

        for (unsigned c = 0; c < cycles; c++) {
                AsyncReply create = {}, exec = {};
                const char *id, *path;
                double t0, t_exec, at[N_PHASES];
                bool stop_seen = false;

                n_trace_events = 0;
                t0 = now_us();
                r = sd_bus_call_method_async(bus, NULL, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, "CreateSandbox",
                                             on_reply, &create, "sa{sv}", arg_template, 1, "Ephemeral", "b", 1);
                if (r < 0)
                        fail("CreateSandbox", r);
                wait_reply(bus, &create, "CreateSandbox");
                if (sd_bus_message_read(create.reply, "so", &id, &path) < 0)
                        fail("Failed to parse CreateSandbox reply", EBADMSG);
                t_exec = now_us();
                r = sd_bus_call_method_async(bus, NULL, BUS_NAME, path, SANDBOX_IFACE, "Exec", on_reply, &exec,
                                             "asa{sv}", 1, "/bin/true", 0);
                if (r < 0)
                        fail("Exec", r);
                wait_reply(bus, &exec, "Exec");

                /* Lay the events of this sandbox out in the order of trace_phases. */
                for (size_t i = 0; i < N_PHASES; i++)
                        at[i] = NAN;
                for (unsigned i = 0; i < n_trace_events; i++) {
                        TraceEvent *e = &trace_events[i];
                        if (!strstr(e->arg, id))
                                continue;
                        const char *w = e->what;
                        if (streq(w, "JobNew") && stop_seen)
                                w = "JobNew(stop)";
                        else if (streq(w, "JobRemoved:done") && stop_seen)
                                w = "JobRemoved:done(stop)";
                        if (streq(w, "State=stopping"))
                                stop_seen = true;
                        for (size_t j = 0; j < N_PHASES; j++)
                                if (streq(w, trace_phases[j]) && isnan(at[j]))
                                        at[j] = e->t;
                }
                at[4] = create.t;
                at[5] = t_exec;
                at[10] = exec.t;
                /* Signals of different senders may arrive out of order: a phase whose end
                 * came before its start counts as zero, and the next one takes it up. */
                double prev = t0;
                for (size_t j = 0; j < N_PHASES; j++) {
                        if (isnan(at[j]))
                                at[j] = prev;
                        phase[c][j] = at[j] > prev ? at[j] - prev : 0;
                        if (at[j] > prev)
                                prev = at[j];
                }
                sd_bus_message_unref(create.reply);
                sd_bus_message_unref(exec.reply);
        }

        printf("{\"trace_cycles\": %u, \"phases\": [", cycles);
        for (size_t j = 0; j < N_PHASES; j++) {
                double *v = malloc(cycles * sizeof(double)), sum = 0;
                if (!v)
                        fail("Out of memory", ENOMEM);
                for (unsigned c = 0; c < cycles; c++) {
                        v[c] = phase[c][j];
                        sum += v[c];
                }
                qsort(v, cycles, sizeof(double), cmp_double);
                printf("%s\n    {\"until\": \"%s\", \"median_us\": %.1f, \"p90_us\": %.1f, \"mean_us\": %.1f}",
                       j ? "," : "", trace_phases[j],
                       cycles % 2 ? v[cycles / 2] : (v[cycles / 2 - 1] + v[cycles / 2]) / 2,
                       v[(9 * cycles + 9) / 10 - 1], sum / cycles);
                free(v);
        }
        printf("\n]}\n");
        free(phase);
}

/* ---- --upload: file upload throughput against cp ----------------------------------- */

static char *create_sandbox_with_memory(sd_bus *bus, uint64_t memory_max) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        const char *id, *path;
        char *ret;
        int r;

        r = sd_bus_call_method(bus, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, "CreateSandbox", &error, &reply,
                               "sa{sv}", arg_template, 1, "MemoryMax", "t", memory_max);
        if (r < 0)
                fail_bus("CreateSandbox", &error, r);
        r = sd_bus_message_read(reply, "so", &id, &path);
        if (r < 0)
                fail("Failed to parse CreateSandbox reply", r);
        ret = strdup(path);
        if (!ret)
                fail("Out of memory", ENOMEM);
        return ret;
}

static uint64_t upload_file(sd_bus *bus, const char *path, int fd, const char *dest) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        uint64_t bytes;
        int r;

        r = sd_bus_call_method(bus, BUS_NAME, path, SANDBOX_IFACE, "Upload", &error, &reply, "sha{sv}", dest, fd, 0);
        if (r < 0)
                fail_bus("Upload", &error, r);
        r = sd_bus_message_read(reply, "t", &bytes);
        if (r < 0)
                fail("Failed to parse Upload reply", r);
        return bytes;
}

static void remove_file(sd_bus *bus, const char *path, const char *name) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_call_method(bus, BUS_NAME, path, SANDBOX_IFACE, "Remove", &error, NULL, "sb", name, 0);
        if (r < 0)
                fail_bus("Remove", &error, r);
}

static void upload_run(sd_bus *bus) {
        struct stat st;
        char *path, *copy;
        Series *up, *cp;
        int fd;

        fd = open(arg_upload, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                fail(arg_upload, errno);
        if (asprintf(&copy, "%s/cp.bin", arg_cp_dir) < 0)
                fail("Out of memory", ENOMEM);
        /* The file lands in the sandbox's /work, a tmpfs whose pages count against its
         * memory: room for it, twice. */
        path = create_sandbox_with_memory(bus, 2 * (uint64_t) st.st_size + 256ULL * 1024 * 1024);
        up = series_new("upload");
        cp = series_new("cp");

        for (unsigned i = 0; i < arg_warmup + arg_runs; i++) {
                bool keep = i >= arg_warmup;
                uint64_t bytes;
                double t0, t1;

                if (lseek(fd, 0, SEEK_SET) < 0)
                        fail("lseek", errno);
                t0 = now_us();
                bytes = upload_file(bus, path, fd, "bench-upload.bin");
                t1 = now_us();
                if (bytes != (uint64_t) st.st_size) {
                        fprintf(stderr, "sandbox-bench: Upload wrote %" PRIu64 " of %jd bytes\n", bytes,
                                (intmax_t) st.st_size);
                        exit(EXIT_FAILURE);
                }
                remove_file(bus, path, "bench-upload.bin");
                if (keep)
                        series_add(up, t1 - t0);

                t0 = now_us();
                spawn_wait((char *[]) { (char *) "/bin/cp", (char *) arg_upload, copy, NULL });
                t1 = now_us();
                if (unlink(copy) < 0)
                        fail(copy, errno);
                if (keep)
                        series_add(cp, t1 - t0);
        }
        destroy_sandbox(bus, path);

        printf("{\"runs\": %u, \"upload_bytes\": %jd, \"results\": {", arg_runs, (intmax_t) st.st_size);
        series_print(up, true);
        series_print(cp, false);
        printf("\n}}\n");
        free(path);
        free(copy);
        close(fd);
}

/* ---- main -------------------------------------------------------------------------- */

static void usage(void) {
        printf("usage: sandbox-bench [--runs N] [--warmup N] [--template NAME] [--uid UID]\n"
               "                     [--only NAME,…] [--samples] [-- BWRAP-ARGV…]\n"
               "       sandbox-bench --trace N [--template NAME]\n"
               "       sandbox-bench --upload FILE --cp-dir DIR [--runs N] [--warmup N] [--template NAME]\n"
               "                     [--varlink PATH]\n"
               "measurements: ping create_exec create_exec_persistent create create_first_exec destroy exec\n"
               "              exec_fds exec_output exec_output_fds\n"
               "              varlink_ping varlink_create_exec varlink_create_exec_persistent varlink_create\n"
               "              varlink_create_first_exec varlink_destroy varlink_exec varlink_exec_output\n"
               "              varlink_exec_output_more\n"
               "              fork_exec bwrap systemd_run_scope_bwrap systemd_run_scope_bwrap_props\n");
}

static unsigned parse_unsigned(const char *s, const char *what) {
        char *end;
        unsigned long v;

        errno = 0;
        v = strtoul(s, &end, 0);
        if (errno || !*s || *end || v > UINT32_MAX) {
                fprintf(stderr, "sandbox-bench: invalid %s: %s\n", what, s);
                exit(2);
        }
        return (unsigned) v;
}

static void parse_argv(int argc, char *argv[]) {
        static const struct option options[] = {
                { "runs", required_argument, NULL, 'n' },
                { "warmup", required_argument, NULL, 'w' },
                { "template", required_argument, NULL, 't' },
                { "uid", required_argument, NULL, 'u' },
                { "only", required_argument, NULL, 'o' },
                { "samples", no_argument, NULL, 's' },
                { "trace", required_argument, NULL, 'T' },
                { "upload", required_argument, NULL, 'U' },
                { "cp-dir", required_argument, NULL, 'C' },
                { "varlink", required_argument, NULL, 'V' },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "+n:w:t:u:o:sh", options, NULL)) >= 0)
                switch (c) {
                case 'n':
                        arg_runs = parse_unsigned(optarg, "--runs");
                        if (arg_runs == 0)
                                arg_runs = 1;
                        break;
                case 'w':
                        arg_warmup = parse_unsigned(optarg, "--warmup");
                        break;
                case 't':
                        arg_template = optarg;
                        break;
                case 'u':
                        arg_uid = parse_unsigned(optarg, "--uid");
                        break;
                case 'o':
                        arg_only = optarg;
                        break;
                case 's':
                        arg_samples = true;
                        break;
                case 'T':
                        arg_trace = parse_unsigned(optarg, "--trace");
                        break;
                case 'U':
                        arg_upload = optarg;
                        break;
                case 'C':
                        arg_cp_dir = optarg;
                        break;
                case 'V':
                        arg_varlink = optarg;
                        break;
                case 'h':
                        usage();
                        exit(EXIT_SUCCESS);
                default:
                        usage();
                        exit(2);
                }
        if (optind < argc)
                arg_bwrap = argv + optind;
}

int main(int argc, char *argv[]) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        Series *all[32];
        size_t n_all = 0;
        bool need_bus;
        int r;

        parse_argv(argc, argv);
        devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull < 0)
                fail("/dev/null", errno);

        if (arg_trace > 0) {
                r = sd_bus_open_system(&bus);
                if (r < 0)
                        fail("Failed to connect to the system bus", r);
                trace_run(bus, arg_trace);
                return 0;
        }
        if (arg_upload) {
                if (!arg_cp_dir) {
                        fprintf(stderr, "sandbox-bench: --upload needs --cp-dir\n");
                        return 2;
                }
                r = sd_bus_open_system(&bus);
                if (r < 0)
                        fail("Failed to connect to the system bus", r);
                upload_run(bus);
                return 0;
        }

        need_bus = wanted("ping") || wanted("create_exec") || wanted("create_exec_persistent") ||
                   wanted("create") || wanted("create_first_exec") ||
                   wanted("destroy") || wanted("exec") || wanted("exec_fds") || wanted("exec_output") ||
                   wanted("exec_output_fds");
        if (need_bus) {
                r = sd_bus_open_system(&bus);
                if (r < 0)
                        fail("Failed to connect to the system bus", r);
        }

        /* Interleaved: each round runs every measurement once, so that a change of load on
         * the machine during the run shifts all of them alike and the ratios hold. */
        Series *ping_s = NULL, *ce = NULL, *cep = NULL, *c = NULL, *cfe = NULL, *d = NULL, *ex = NULL,
               *fe = NULL, *bw = NULL, *sr = NULL, *srp = NULL,
               *exf = NULL, *exo = NULL, *exof = NULL;
        Series *vping = NULL, *vce = NULL, *vcep = NULL, *vc = NULL, *vcfe = NULL, *vd = NULL, *vex = NULL,
               *vexo = NULL, *vexom = NULL;
        char *exec_path = NULL, **sr_argv = NULL, **srp_argv = NULL;
        const char *exec_id = NULL;

        if (wanted("ping"))
                ping_s = all[n_all++] = series_new("ping");
        if (wanted("create_exec"))
                ce = all[n_all++] = series_new("create_exec");
        if (wanted("create_exec_persistent") || wanted("create") || wanted("create_first_exec") ||
            wanted("destroy")) {
                cep = all[n_all++] = series_new("create_exec_persistent");
                c = all[n_all++] = series_new("create");
                cfe = all[n_all++] = series_new("create_first_exec");
                d = all[n_all++] = series_new("destroy");
        }
        if (wanted("exec"))
                ex = all[n_all++] = series_new("exec");
        /* The same Exec with StandardOutput/StandardError given as our own descriptors (to
         * /dev/null), for /bin/true and for 1 MiB of output. */
        if (wanted("exec_fds"))
                exf = all[n_all++] = series_new("exec_fds");
        if (wanted("exec_output"))
                exo = all[n_all++] = series_new("exec_output");
        if (wanted("exec_output_fds"))
                exof = all[n_all++] = series_new("exec_output_fds");
        /* The same calls over varlink, the execs in the same sandbox as D-Bus's. */
        if (wanted("varlink_ping"))
                vping = all[n_all++] = series_new("varlink_ping");
        if (wanted("varlink_create_exec"))
                vce = all[n_all++] = series_new("varlink_create_exec");
        if (wanted("varlink_create_exec_persistent") || wanted("varlink_create") ||
            wanted("varlink_create_first_exec") || wanted("varlink_destroy")) {
                vcep = all[n_all++] = series_new("varlink_create_exec_persistent");
                vc = all[n_all++] = series_new("varlink_create");
                vcfe = all[n_all++] = series_new("varlink_create_first_exec");
                vd = all[n_all++] = series_new("varlink_destroy");
        }
        if (wanted("varlink_exec"))
                vex = all[n_all++] = series_new("varlink_exec");
        if (wanted("varlink_exec_output"))
                vexo = all[n_all++] = series_new("varlink_exec_output");
        if (wanted("varlink_exec_output_more"))
                vexom = all[n_all++] = series_new("varlink_exec_output_more");
        if (vping || vce || vcep || vex || vexo || vexom)
                varlink_connect();
        if ((vex || vexo || vexom) && !bus) {
                r = sd_bus_open_system(&bus);
                if (r < 0)
                        fail("Failed to connect to the system bus", r);
        }
        if (ex || exf || exo || exof || vex || vexo || vexom) {
                exec_path = create_sandbox(bus, false);
                exec_id = strrchr(exec_path, '/') + 1;
        }
        if (wanted("fork_exec"))
                fe = all[n_all++] = series_new("fork_exec");
        if (arg_bwrap && wanted("bwrap"))
                bw = all[n_all++] = series_new("bwrap");
        if (arg_bwrap) {
                if (wanted("systemd_run_scope_bwrap")) {
                        sr = all[n_all++] = series_new("systemd_run_scope_bwrap");
                        sr_argv = systemd_run_argv(false, arg_uid, arg_bwrap);
                }
                if (wanted("systemd_run_scope_bwrap_props")) {
                        srp = all[n_all++] = series_new("systemd_run_scope_bwrap_props");
                        srp_argv = systemd_run_argv(true, arg_uid, arg_bwrap);
                }
        }

        for (unsigned i = 0; i < arg_warmup + arg_runs; i++) {
                bool keep = i >= arg_warmup;
                double t0, t1, t2;

                if (i % 20 == 0)
                        fprintf(stderr, "sandbox-bench: round %u/%u\n", i, arg_warmup + arg_runs);
                /* D-Bus and varlink alternate which goes first, so that neither always
                 * follows the same step (a sandbox just gone, say). */
                for (unsigned pass = 0; pass < 2; pass++) {
                        if ((pass == 0) == (i % 2 == 0)) {
                                if (ping_s) {
                                        t0 = now_us();
                                        ping(bus);
                                        if (keep)
                                                series_add(ping_s, now_us() - t0);
                                }
                                if (ce) {
                                        t0 = now_us();
                                        char *path = create_sandbox(bus, true);
                                        exec_true(bus, path);
                                        t1 = now_us();
                                        free(path);
                                        if (keep)
                                                series_add(ce, t1 - t0);
                                }
                                if (cep) {
                                        t0 = now_us();
                                        char *path = create_sandbox(bus, false);
                                        t1 = now_us();
                                        exec_true(bus, path);
                                        t2 = now_us();
                                        destroy_sandbox(bus, path); /* not in create_exec_persistent */
                                        free(path);
                                        if (keep) {
                                                series_add(cep, t2 - t0);
                                                series_add(c, t1 - t0);
                                                series_add(cfe, t2 - t1);
                                                series_add(d, now_us() - t2);
                                        }
                                }
                                if (ex) {
                                        t0 = now_us();
                                        exec_true(bus, exec_path);
                                        if (keep)
                                                series_add(ex, now_us() - t0);
                                }
                                if (exf) {
                                        t0 = now_us();
                                        exec_cmd(bus, exec_path, (char *[]) { (char *) "/bin/true", NULL }, true, 0);
                                        if (keep)
                                                series_add(exf, now_us() - t0);
                                }
                                if (exo) {
                                        t0 = now_us();
                                        exec_cmd(bus, exec_path, output_argv, false, OUTPUT_BYTES);
                                        if (keep)
                                                series_add(exo, now_us() - t0);
                                }
                                if (exof) {
                                        t0 = now_us();
                                        exec_cmd(bus, exec_path, output_argv, true, 0);
                                        if (keep)
                                                series_add(exof, now_us() - t0);
                                }
                                continue;
                        }
                        if (vping) {
                                t0 = now_us();
                                varlink_ping();
                                if (keep)
                                        series_add(vping, now_us() - t0);
                        }
                        if (vce) {
                                char id[17];
                                t0 = now_us();
                                varlink_create(true, id);
                                varlink_exec(id, VARLINK_TRUE, false, 0);
                                if (keep)
                                        series_add(vce, now_us() - t0);
                        }
                        if (vcep) {
                                char id[17];
                                t0 = now_us();
                                varlink_create(false, id);
                                t1 = now_us();
                                varlink_exec(id, VARLINK_TRUE, false, 0);
                                t2 = now_us();
                                varlink_destroy(id);
                                if (keep) {
                                        series_add(vcep, t2 - t0);
                                        series_add(vc, t1 - t0);
                                        series_add(vcfe, t2 - t1);
                                        series_add(vd, now_us() - t2);
                                }
                        }
                        if (vex) {
                                t0 = now_us();
                                varlink_exec(exec_id, VARLINK_TRUE, false, 0);
                                if (keep)
                                        series_add(vex, now_us() - t0);
                        }
                        if (vexo) {
                                t0 = now_us();
                                varlink_exec(exec_id, VARLINK_OUTPUT, false, OUTPUT_BYTES);
                                if (keep)
                                        series_add(vexo, now_us() - t0);
                        }
                        if (vexom) {
                                t0 = now_us();
                                varlink_exec(exec_id, VARLINK_OUTPUT, true, OUTPUT_BYTES);
                                if (keep)
                                        series_add(vexom, now_us() - t0);
                        }
                }
                if (fe) {
                        t0 = now_us();
                        spawn_wait((char *[]) { (char *) "/bin/true", NULL });
                        if (keep)
                                series_add(fe, now_us() - t0);
                }
                if (bw) {
                        t0 = now_us();
                        spawn_wait_as_uid(arg_bwrap);
                        if (keep)
                                series_add(bw, now_us() - t0);
                }
                if (sr) {
                        t0 = now_us();
                        spawn_wait(sr_argv);
                        if (keep)
                                series_add(sr, now_us() - t0);
                }
                if (srp) {
                        t0 = now_us();
                        spawn_wait(srp_argv);
                        if (keep)
                                series_add(srp, now_us() - t0);
                }
        }
        if (exec_path) {
                destroy_sandbox(bus, exec_path);
                free(exec_path);
        }
        free(sr_argv);
        free(srp_argv);

        printf("{\"runs\": %u, \"warmup\": %u, \"template\": \"%s\", \"bwrap_uid\": %u, \"results\": {",
               arg_runs, arg_warmup, arg_template, (unsigned) arg_uid);
        for (size_t i = 0; i < n_all; i++)
                series_print(all[i], i == 0);
        printf("\n}}\n");
        return 0;
}
