/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "json-util.h"
#include "macro.h"
#include "parse-util.h"
#include "sandboxctl-history.h"
#include "sandboxctl-util.h"
#include "time-util.h"

#define ARGV_COLUMN_MAX   60U

typedef SandboxExecution Execution;

/* "@EPOCH" (seconds), "YYYY-MM-DD[ HH:MM[:SS]]" (local time), or an age: "2h", "30min",
 * "7d" (ago). */
static int parse_since(const char *s, uint64_t *ret) {
        static const char *const formats[] = { "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d" };
        uint64_t v;

        if (s[0] == '@') {
                if (parse_uint64(s + 1, &v) < 0 || v > UINT64_MAX / USEC_PER_SEC)
                        return -EINVAL;
                *ret = v * USEC_PER_SEC;
                return 0;
        }
        if (parse_seconds(s[0] == '-' ? s + 1 : s, &v) >= 0) {
                uint64_t now = now_usec(CLOCK_REALTIME);
                *ret = v > now / USEC_PER_SEC ? 1 : now - v * USEC_PER_SEC;
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(formats); i++) {
                struct tm tm = { .tm_isdst = -1 };
                const char *end = strptime(s, formats[i], &tm);
                if (end && !*end) {
                        time_t t = mktime(&tm);
                        if (t < 0)
                                return -ERANGE;
                        *ret = (uint64_t) t * USEC_PER_SEC;
                        return 0;
                }
        }
        return -EINVAL;
}

static const char *format_exit(char *buf, size_t l, const Execution *e) {
        if (e->timed_out)
                return "timeout";
        if (e->oom_killed)
                return "oom-kill";
        if (e->signal > 0) {
                const char *name = sigabbrev_np(e->signal);
                if (name)
                        snprintf(buf, l, "SIG%s", name);
                else
                        snprintf(buf, l, "signal %" PRIi32, e->signal);
                return buf;
        }
        snprintf(buf, l, "%" PRIi32, e->exit_status);
        return buf;
}

static const char *format_duration(char *buf, size_t l, uint64_t usec) {
        if (usec < 1000)
                snprintf(buf, l, "%" PRIu64 "us", usec);
        else if (usec < USEC_PER_SEC)
                snprintf(buf, l, "%" PRIu64 ".%" PRIu64 "ms", usec / 1000, (usec % 1000) / 100);
        else if (usec < 60 * USEC_PER_SEC)
                snprintf(buf, l, "%" PRIu64 ".%02" PRIu64 "s", usec / USEC_PER_SEC, (usec % USEC_PER_SEC) / 10000);
        else
                snprintf(buf, l, "%" PRIu64 "min %" PRIu64 "s", usec / (60 * USEC_PER_SEC),
                         (usec / USEC_PER_SEC) % 60);
        return buf;
}

/* argv joined by spaces, arguments with spaces or quotes in '…', control characters as
 * '?', cut at max (the table is for reading; --json has every byte). */
static char *format_argv(char **argv, size_t max) {
        size_t l = 0, allocated = max + 4;
        char *s = malloc(allocated);

        if (!s)
                return NULL;
        for (char **a = argv; a && *a && l < max; a++) {
                bool quote = !**a || strpbrk(*a, " \t'\"\\$`;&|<>()*?");
                if (a != argv)
                        s[l++] = ' ';
                if (quote && l < max)
                        s[l++] = '\'';
                for (const char *c = *a; *c && l < max; c++)
                        s[l++] = ((unsigned char) *c < 0x20 || *c == 0x7f) ? '?' : *c;
                if (quote && l < max)
                        s[l++] = '\'';
        }
        if (l >= max) {
                l = max - 3;
                /* Not in the middle of a UTF-8 sequence. */
                while (l > 0 && ((unsigned char) s[l] & 0xc0) == 0x80)
                        l--;
                memcpy(s + l, "...", 3);
                l += 3;
        }
        s[l] = 0;
        return s;
}

/* A sandbox on disk's workspace at the execution's end: "USED/MAX"; "-" in memory. */
static const char *format_disk(char *buf, size_t l, const Execution *e) {
        char used[FORMAT_BYTES_MAX], max[FORMAT_BYTES_MAX];

        if (e->disk_bytes_used == UINT64_MAX || e->disk_bytes_max == UINT64_MAX)
                return "-";
        snprintf(buf, l, "%s/%s", format_bytes(used, sizeof(used), e->disk_bytes_used) ?: "?",
                 format_bytes(max, sizeof(max), e->disk_bytes_max) ?: "?");
        return buf;
}

static int print_table(const Execution *list, size_t n) {
        printf("%-19s %-32s %5s %-9s %-10s %-13s %s\n", "TIME", "SANDBOX", "EXEC", "EXIT", "DURATION", "DISK",
               "COMMAND");
        for (size_t i = n; i-- > 0; ) {
                const Execution *e = &list[i];
                char when[32] = "-", exit_buf[32], dur[32], disk[2 * FORMAT_BYTES_MAX + 2];
                _cleanup_free_ char *argv = format_argv(e->argv, ARGV_COLUMN_MAX);
                time_t t = (time_t) (e->started / USEC_PER_SEC);
                struct tm tm;

                if (!argv)
                        return -ENOMEM;
                if (localtime_r(&t, &tm))
                        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
                printf("%-19s %-32s %5" PRIu64 " %-9s %-10s %-13s %s\n", when, e->sandbox_id, e->exec_id,
                       format_exit(exit_buf, sizeof(exit_buf), e),
                       format_duration(dur, sizeof(dur), e->ended > e->started ? e->ended - e->started : 0),
                       format_disk(disk, sizeof(disk), e), argv);
        }
        printf("\n%zu %s listed.\n", n, n == 1 ? "execution" : "executions");
        return 0;
}

static int print_executions_json(const Execution *list, size_t n) {
        json_object *a = json_object_new_array();
        int r = a ? 0 : -ENOMEM;

        for (size_t i = n; r >= 0 && i-- > 0; ) {
                const Execution *e = &list[i];
                json_object *o = json_object_new_object(), *argv = json_object_new_array();

                if (!o || !argv || json_object_array_add(a, o) < 0) {
                        json_object_put(o);
                        json_object_put(argv);
                        r = -ENOMEM;
                        break;
                }
                r = json_add(o, "sandbox", json_object_new_string(e->sandbox_id));
                if (r >= 0) r = json_add(o, "exec", json_object_new_uint64(e->exec_id));
                if (r >= 0) r = json_add(o, "owner", json_object_new_uint64(e->owner));
                if (r >= 0) r = json_add(o, "caller", json_object_new_uint64(e->caller));
                if (r >= 0) r = json_add(o, "argv", argv);
                else json_object_put(argv);
                for (char **s = e->argv; r >= 0 && s && *s; s++)
                        if (json_object_array_add(argv, json_object_new_string(*s)) < 0)
                                r = -ENOMEM;
                if (r >= 0) r = json_add(o, "cwd", json_object_new_string(e->cwd));
                if (r >= 0) r = json_add(o, "started_usec", json_object_new_uint64(e->started));
                if (r >= 0) r = json_add(o, "ended_usec", json_object_new_uint64(e->ended));
                if (r >= 0) r = json_add(o, "exit_status", json_object_new_int(e->exit_status));
                if (r >= 0) r = json_add(o, "exit_code", json_object_new_int(e->exit_code));
                if (r >= 0) r = json_add(o, "signal", json_object_new_int(e->signal));
                if (r >= 0) r = json_add(o, "timed_out", json_object_new_boolean(e->timed_out));
                if (r >= 0) r = json_add(o, "oom_killed", json_object_new_boolean(e->oom_killed));
                if (r >= 0) r = json_add(o, "cpu_usec", json_object_new_uint64(e->cpu_usec));
                if (r >= 0) r = json_add(o, "cgroup_cpu_nsec", json_object_new_uint64(e->cgroup_cpu_nsec));
                if (r >= 0) r = json_add(o, "memory_peak_bytes", json_object_new_uint64(e->memory_peak));
                if (r >= 0) r = json_add(o, "stdout_bytes", json_object_new_uint64(e->stdout_bytes));
                if (r >= 0) r = json_add(o, "stderr_bytes", json_object_new_uint64(e->stderr_bytes));
                if (r >= 0) r = json_add(o, "tenant", json_object_new_string(strempty(e->tenant)));
                /* null for a sandbox in memory, as varlink's ListExecutions leaves them out. */
                if (r >= 0 && e->disk_bytes_used != UINT64_MAX && e->disk_bytes_max != UINT64_MAX) {
                        r = json_add(o, "disk_bytes_used", json_object_new_uint64(e->disk_bytes_used));
                        if (r >= 0) r = json_add(o, "disk_bytes_max", json_object_new_uint64(e->disk_bytes_max));
                } else if (r >= 0) {
                        if (json_object_object_add(o, "disk_bytes_used", NULL) < 0 ||
                            json_object_object_add(o, "disk_bytes_max", NULL) < 0)
                                r = -ENOMEM;
                }
        }
        if (r >= 0)
                r = print_json(a);
        json_object_put(a);
        return r;
}

int history_show(SandboxClient *c, const char *sandbox_id, const char *since, const char *limit, bool json) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        SandboxExecutionFilter f = { .sandbox_id = sandbox_id };
        Execution *list = NULL;
        size_t n = 0;
        uint64_t limit_n = 0;
        int r;

        if (since && parse_since(since, &f.since_usec) < 0)
                return log_error_errno(EINVAL, "Invalid --since '%s', expected @EPOCH, YYYY-MM-DD [HH:MM[:SS]] "
                                       "or an age such as 2h or 7d.", since);
        /* Its bounds are sandboxd's (InvalidOption). */
        if (limit && (parse_uint64(limit, &limit_n) < 0 || limit_n > UINT32_MAX))
                return log_error_errno(EINVAL, "Invalid --limit '%s', expected a number.", limit);
        f.limit = (uint32_t) limit_n;
        f.limit_set = limit;

        r = sandbox_client_executions(c, &f, &list, &n, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to list executions: %s", sandbox_client_error_message(&error, r));

        r = json ? print_executions_json(list, n) : print_table(list, n);
        sandbox_execution_array_free(list, n);
        return r;
}
