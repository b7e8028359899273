/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * sandbox-scale: throughput of sandboxd's ephemeral sandboxes with K calls in flight,
 * against its floors at the same concurrency, in one process over one system-bus
 * connection (the client of bench/bench_scale.py).
 *
 *   sandbox-scale --mode MODE [--inflight K] [--count N] [--template NAME] [--uid UID]
 *                 [-- BWRAP-ARGV…]
 *
 * MODE is one of
 *   ephemeral    CreateSandbox(Ephemeral) + Exec /bin/true, K such cycles in flight (each
 *                Exec returns once its sandbox is gone)
 *   bwrap        BWRAP-ARGV (the hardened argv sandboxd gave a real sandbox's bwrap, running
 *                /bin/true), K at once, each forked and dropped to --uid as sandboxd does
 *   systemd-run  systemd-run --scope in sandbox.slice with sandboxd's unit properties +
 *                BWRAP-ARGV, K at once
 *   fill         CreateSandbox (persistent) N times, K in flight; the ids, one a line, go to
 *                --ids FILE (the idle sandboxes of the scale runs)
 *   drain        Destroy each id of --ids FILE, K in flight
 *   exec         one persistent sandbox of --template, then Exec /bin/true in it N times, K in
 *                flight (the floor of a recycled ephemeral cycle: bench/bench_recycle.py)
 *
 * Prints one JSON line: count, seconds, per_sec and, for ephemeral and fill, the latency
 * (µs) of CreateSandbox (call to reply) and of the whole cycle: median, p90; for fill also
 * the median create latency of the first and of the last 100.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

#include "bench-util.h"

#define BUS_NAME "io.sandboxd.Sandbox1"
#define MANAGER_PATH "/io/sandboxd/Sandbox1"
#define MANAGER_IFACE "io.sandboxd.Sandbox1.Manager"
#define SANDBOX_IFACE "io.sandboxd.Sandbox1.Sandbox"
#define CALL_TIMEOUT_USEC (120ULL * 1000000ULL)
#define SANDBOX_UID_DEFAULT 0x70000000U
#define K_MAX 256

#define _cleanup_(f) __attribute__((cleanup(f)))
#define streq(a, b) (strcmp((a), (b)) == 0)

extern char **environ;

static const char *arg_mode = NULL;
static unsigned arg_inflight = 4;
static unsigned arg_count = 100;
static const char *arg_template = "shell";
static const char *arg_ids = NULL;
static uid_t arg_uid = SANDBOX_UID_DEFAULT;
static char **arg_bwrap = NULL; /* points into argv */
static int devnull = -1;

/* Median and nearest-rank p90 of n values (sorted in place). */
static void stats(double *v, unsigned n, double *median, double *p90) {
        *median = *p90 = 0;
        if (n == 0)
                return;
        qsort(v, n, sizeof(double), cmp_double);
        *median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
        *p90 = v[(9 * n + 9) / 10 - 1];
}

static double *samples_new(unsigned n) {
        double *v = calloc(n ? n : 1, sizeof(double));
        if (!v)
                fail("Out of memory", ENOMEM);
        return v;
}

/* ---- sandboxd, K calls in flight ----------------------------------------------------- */

typedef struct Slot {
        double t_start, t_created;
        char *path;
        bool busy;
} Slot;

typedef struct Run {
        sd_bus *bus;
        Slot slots[K_MAX];
        unsigned started, done;
        double *create_us, *cycle_us;
        unsigned n_create;
        FILE *ids;
        char **drain_ids;
        char *exec_path;   /* exec: the one sandbox's object */
} Run;

static Run run;

static void slot_start(Slot *s);

static void bus_failed(const char *what, sd_bus_message *m) {
        const sd_bus_error *e = sd_bus_message_get_error(m);
        fprintf(stderr, "sandbox-scale: %s: %s\n", what, e && e->message ? e->message : "error");
        exit(EXIT_FAILURE);
}

static void slot_finish(Slot *s) {
        run.cycle_us[run.done++] = now_us() - s->t_start;
        free(s->path);
        s->path = NULL;
        s->busy = false;
        if (run.started < arg_count)
                slot_start(s);
}

static int on_exec(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        Slot *s = userdata;
        int32_t status;

        if (sd_bus_message_is_method_error(m, NULL))
                bus_failed("Exec", m);
        if (sd_bus_message_read(m, "i", &status) < 0 || status != 0) {
                fprintf(stderr, "sandbox-scale: /bin/true in %s: status %" PRIi32 "\n", s->path, status);
                exit(EXIT_FAILURE);
        }
        slot_finish(s);
        return 0;
}

static void exec_start(Slot *s, const char *path) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = NULL;
        int r;

        r = sd_bus_message_new_method_call(run.bus, &call, BUS_NAME, path, SANDBOX_IFACE, "Exec");
        if (r >= 0)
                r = sd_bus_message_append_strv(call, (char *[]) { (char *) "/bin/true", NULL });
        if (r >= 0)
                r = sd_bus_message_append(call, "a{sv}", 0);
        if (r >= 0)
                r = sd_bus_call_async(run.bus, NULL, call, on_exec, s, CALL_TIMEOUT_USEC);
        if (r < 0)
                fail("Exec", r);
}

static int on_create(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        Slot *s = userdata;
        const char *id, *path;

        if (sd_bus_message_is_method_error(m, NULL))
                bus_failed("CreateSandbox", m);
        if (sd_bus_message_read(m, "so", &id, &path) < 0)
                fail("CreateSandbox reply", EBADMSG);
        s->t_created = now_us();
        run.create_us[run.n_create++] = s->t_created - s->t_start;
        if (run.ids) {
                fprintf(run.ids, "%s\n", id);
                slot_finish(s);
                return 0;
        }
        s->path = strdup(path);
        if (!s->path)
                fail("Out of memory", ENOMEM);
        exec_start(s, path);
        return 0;
}

static int on_destroy(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        if (sd_bus_message_is_method_error(m, NULL))
                bus_failed("Destroy", m);
        slot_finish(userdata);
        return 0;
}

static void slot_start(Slot *s) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = NULL;
        int r;

        s->busy = true;
        s->t_start = now_us();
        if (run.drain_ids) {
                char path[128];
                snprintf(path, sizeof(path), "/io/sandboxd/Sandbox1/sandbox/%s", run.drain_ids[run.started++]);
                r = sd_bus_message_new_method_call(run.bus, &call, BUS_NAME, path, SANDBOX_IFACE, "Destroy");
                if (r >= 0)
                        r = sd_bus_call_async(run.bus, NULL, call, on_destroy, s, CALL_TIMEOUT_USEC);
                if (r < 0)
                        fail("Destroy", r);
                return;
        }
        run.started++;
        if (run.exec_path) {
                exec_start(s, run.exec_path);
                return;
        }
        r = sd_bus_message_new_method_call(run.bus, &call, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, "CreateSandbox");
        if (r >= 0)
                r = run.ids ? sd_bus_message_append(call, "sa{sv}", arg_template, 0)
                            : sd_bus_message_append(call, "sa{sv}", arg_template, 1, "Ephemeral", "b", 1);
        if (r >= 0)
                r = sd_bus_call_async(run.bus, NULL, call, on_create, s, CALL_TIMEOUT_USEC);
        if (r < 0)
                fail("CreateSandbox", r);
}

static void run_bus(void) {
        int r;

        for (unsigned i = 0; i < arg_inflight && run.started < arg_count; i++)
                slot_start(&run.slots[i]);
        while (run.done < arg_count) {
                r = sd_bus_process(run.bus, NULL);
                if (r < 0)
                        fail("sd_bus_process", r);
                if (r > 0)
                        continue;
                r = sd_bus_wait(run.bus, UINT64_MAX);
                if (r < 0 && r != -EINTR)
                        fail("sd_bus_wait", r);
        }
}

/* The ids of a file, one a line; their number in *n. */
static char **read_ids(const char *file, unsigned *n) {
        FILE *f;
        char line[128], **v = NULL;
        unsigned k = 0, cap = 0;

        f = fopen(file, "re");
        if (!f)
                fail(file, errno);
        while (fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = 0;
                if (!*line)
                        continue;
                if (k == cap) {
                        cap = cap ? cap * 2 : 256;
                        v = realloc(v, cap * sizeof(char *));
                        if (!v)
                                fail("Out of memory", ENOMEM);
                }
                v[k] = strdup(line);
                if (!v[k++])
                        fail("Out of memory", ENOMEM);
        }
        fclose(f);
        *n = k;
        return v;
}

/* ---- the floors, K processes at once ------------------------------------------------- */

static pid_t spawn_bwrap(void) {
        pid_t pid = fork();

        if (pid < 0)
                fail("fork", errno);
        if (pid == 0)
                exec_as_uid(arg_bwrap, devnull, arg_uid);
        return pid;
}

static pid_t spawn_argv(char **argv) {
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int r;

        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, devnull, STDIN_FILENO);
        posix_spawn_file_actions_adddup2(&fa, devnull, STDOUT_FILENO);
        r = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0)
                fail(argv[0], r);
        return pid;
}

static void run_processes(char **sr_argv) {
        pid_t pids[K_MAX];
        double t0[K_MAX];
        unsigned started = 0;

        for (unsigned i = 0; i < arg_inflight && started < arg_count; i++, started++) {
                t0[i] = now_us();
                pids[i] = sr_argv ? spawn_argv(sr_argv) : spawn_bwrap();
        }
        while (run.done < arg_count) {
                int status;
                pid_t pid = waitpid(-1, &status, 0);
                if (pid < 0) {
                        if (errno == EINTR)
                                continue;
                        fail("waitpid", errno);
                }
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                        fprintf(stderr, "sandbox-scale: %s failed (status 0x%x)\n", sr_argv ? sr_argv[0] : arg_bwrap[0],
                                status);
                        exit(EXIT_FAILURE);
                }
                for (unsigned i = 0; i < arg_inflight; i++) {
                        if (pids[i] != pid)
                                continue;
                        run.cycle_us[run.done++] = now_us() - t0[i];
                        pids[i] = 0;
                        if (started < arg_count) {
                                started++;
                                t0[i] = now_us();
                                pids[i] = sr_argv ? spawn_argv(sr_argv) : spawn_bwrap();
                        }
                        break;
                }
        }
}

/* ---- main -------------------------------------------------------------------------- */

static void usage(void) {
        printf("sandbox-scale --mode ephemeral|bwrap|systemd-run|fill|drain|exec [--inflight K] [--count N]\n"
               "              [--template NAME] [--uid UID] [--ids FILE] [-- BWRAP-ARGV…]\n");
}

static void parse_argv(int argc, char *argv[]) {
        static const struct option options[] = {
                { "mode", required_argument, NULL, 'm' },     { "inflight", required_argument, NULL, 'k' },
                { "count", required_argument, NULL, 'n' },    { "template", required_argument, NULL, 't' },
                { "uid", required_argument, NULL, 'u' },      { "ids", required_argument, NULL, 'i' },
                { "help", no_argument, NULL, 'h' },           {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'm':
                        arg_mode = optarg;
                        break;
                case 'k':
                        arg_inflight = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 'n':
                        arg_count = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 't':
                        arg_template = optarg;
                        break;
                case 'u':
                        arg_uid = (uid_t) strtoul(optarg, NULL, 0);
                        break;
                case 'i':
                        arg_ids = optarg;
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
        if (!arg_mode || arg_inflight < 1 || arg_inflight > K_MAX) {
                usage();
                exit(2);
        }
}

/* exec: the one sandbox, made before the clock starts and gone after it stops. */
static void exec_sandbox_create(void) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *id, *path;
        int r;

        r = sd_bus_call_method(run.bus, BUS_NAME, MANAGER_PATH, MANAGER_IFACE, "CreateSandbox", &error, &reply,
                               "sa{sv}", arg_template, 0);
        if (r < 0 || sd_bus_message_read(reply, "so", &id, &path) < 0) {
                fprintf(stderr, "sandbox-scale: CreateSandbox: %s\n", error.message ?: strerror(-r));
                exit(EXIT_FAILURE);
        }
        run.exec_path = strdup(path);
        if (!run.exec_path)
                fail("Out of memory", ENOMEM);
}

static void exec_sandbox_destroy(void) {
        (void) sd_bus_call_method(run.bus, BUS_NAME, run.exec_path, SANDBOX_IFACE, "Destroy", NULL, NULL, NULL);
        free(run.exec_path);
        run.exec_path = NULL;
}

int main(int argc, char *argv[]) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        char **sr_argv = NULL;
        double t0, secs, med = 0, p90 = 0, cmed = 0, cp90 = 0, first100 = 0, last100 = 0;
        int r;

        parse_argv(argc, argv);
        devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (devnull < 0)
                fail("/dev/null", errno);

        bool on_bus = streq(arg_mode, "ephemeral") || streq(arg_mode, "fill") || streq(arg_mode, "drain") ||
                      streq(arg_mode, "exec");
        if (!on_bus && !arg_bwrap) {
                fprintf(stderr, "sandbox-scale: --mode %s needs the bwrap argv after --\n", arg_mode);
                return 2;
        }
        if (streq(arg_mode, "fill") || streq(arg_mode, "drain")) {
                if (!arg_ids) {
                        fprintf(stderr, "sandbox-scale: --mode %s needs --ids FILE\n", arg_mode);
                        return 2;
                }
                if (streq(arg_mode, "fill")) {
                        run.ids = fopen(arg_ids, "we");
                        if (!run.ids)
                                fail(arg_ids, errno);
                } else
                        run.drain_ids = read_ids(arg_ids, &arg_count);
        } else if (streq(arg_mode, "systemd-run")) {
                sr_argv = systemd_run_argv(true, arg_uid, arg_bwrap);
        } else if (!streq(arg_mode, "bwrap") && !streq(arg_mode, "ephemeral") && !streq(arg_mode, "exec")) {
                usage();
                return 2;
        }

        run.create_us = samples_new(arg_count);
        run.cycle_us = samples_new(arg_count);
        t0 = now_us();
        if (on_bus) {
                r = sd_bus_open_system(&bus);
                if (r < 0)
                        fail("Failed to connect to the system bus", r);
                run.bus = bus;
                if (streq(arg_mode, "exec"))
                        exec_sandbox_create();
                run_bus();
                if (run.exec_path)
                        exec_sandbox_destroy();
        } else
                run_processes(sr_argv);
        secs = (now_us() - t0) / 1e6;
        if (run.ids && fclose(run.ids) != 0)
                fail(arg_ids, errno);

        if (run.n_create >= 200) {
                double *a = samples_new(100), p;
                memcpy(a, run.create_us, 100 * sizeof(double));
                stats(a, 100, &first100, &p);
                memcpy(a, run.create_us + run.n_create - 100, 100 * sizeof(double));
                stats(a, 100, &last100, &p);
                free(a);
        }
        stats(run.create_us, run.n_create, &med, &p90);
        stats(run.cycle_us, run.done, &cmed, &cp90);
        printf("{\"mode\": \"%s\", \"inflight\": %u, \"count\": %u, \"seconds\": %.3f, \"per_sec\": %.2f, "
               "\"cycle_median_us\": %.1f, \"cycle_p90_us\": %.1f",
               arg_mode, arg_inflight, run.done, secs, run.done / secs, cmed, cp90);
        if (run.n_create > 0)
                printf(", \"create_median_us\": %.1f, \"create_p90_us\": %.1f", med, p90);
        if (first100 > 0)
                printf(", \"create_first100_median_us\": %.1f, \"create_last100_median_us\": %.1f", first100,
                       last100);
        printf("}\n");
        free(sr_argv);
        return 0;
}
