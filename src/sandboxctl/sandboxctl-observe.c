/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json-util.h"
#include "macro.h"
#include "parse-util.h"
#include "sandboxctl-observe.h"
#include "sandboxctl-util.h"

/* "Nov 22 10:11:12", local time, as journalctl's short output begins. */
static const char *format_short_time(char *buf, size_t l, uint64_t usec) {
        time_t t = (time_t) (usec / USEC_PER_SEC);
        struct tm tm;

        if (!localtime_r(&t, &tm) || strftime(buf, l, "%b %d %H:%M:%S", &tm) == 0)
                return "-";
        return buf;
}

/* The message as text for a terminal: what is not printable (control characters, C1,
 * bytes that are not UTF-8) as \xNN; a newline starts a line indented by indent. */
static void print_message(const void *data, size_t size, int indent) {
        const unsigned char *p = data, *end = p + size;

        while (p < end) {
                size_t n = printable_length(p, end);

                if (n > 0)
                        fwrite(p, 1, n, stdout);
                else if (*p == '\t')
                        putchar('\t');
                else if (*p == '\n')
                        printf("\n%*s", indent, "");
                else
                        printf("\\x%02x", *p);
                p += n > 0 ? n : 1;
        }
        putchar('\n');
}

static int print_entry_short(const SandboxJournalEntry *e, void *userdata) {
        _cleanup_free_ char *identifier = quote_name(e->identifier, strlen(e->identifier));
        char ts[64];
        int prefix;

        if (!identifier)
                return log_oom();
        prefix = printf("%s %s: ", format_short_time(ts, sizeof(ts), e->timestamp_usec), identifier);
        print_message(e->message, e->message_size, MAX(prefix, 0));
        if (e->truncated)
                printf("%*s[message truncated]\n", MAX(prefix, 0), "");
        return fflush(stdout) == EOF ? -errno : 0;
}

static int print_entry_json(const SandboxJournalEntry *e, void *userdata) {
        _cleanup_json_ json_object *j = json_object_new_object();
        int r;

        if (!j)
                return log_oom();
        r = json_add(j, "timestamp", json_object_new_uint64(e->timestamp_usec));
        if (r >= 0 && e->priority >= 0)
                r = json_add(j, "priority", json_object_new_int(e->priority));
        if (r >= 0)
                r = json_add_string(j, "identifier", e->identifier);
        if (r >= 0)
                r = json_add_bytes(j, "message", e->message, e->message_size);
        if (r >= 0 && e->truncated)
                r = json_add(j, "truncated", json_object_new_boolean(true));
        if (r < 0)
                return log_oom();
        /* One object per line, whatever stdout is: a stream of them. */
        puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        return fflush(stdout) == EOF ? -errno : 0;
}

int logs_show(SandboxClient *c, const char *id, unsigned lines, bool follow, bool json) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        int r;

        r = sandbox_get(c, id, &h);
        if (r < 0)
                return r;
        r = sandbox_handle_logs(h, lines, follow, json ? print_entry_json : print_entry_short, NULL, &error);
        if (r == -EPIPE)
                return 0; /* our reader (a pager, head) is gone */
        if (r < 0)
                return log_error_errno(r, "Failed to get the logs of sandbox %s: %s", id,
                                       sandbox_client_error_message(&error, r));
        return 0;
}

static int pool_compare(const void *a, const void *b) {
        return strcmp(((const SandboxPoolInfo *) a)->template, ((const SandboxPoolInfo *) b)->template);
}

static int pools_print_json(const SandboxPoolInfo *l, size_t n) {
        _cleanup_json_ json_object *ja = json_object_new_array();
        int r = ja ? 0 : -ENOMEM;

        for (size_t i = 0; r >= 0 && i < n; i++) {
                json_object *o = json_object_new_object();

                r = json_object_array_add(ja, o) < 0 || !o ? -ENOMEM : 0;
                if (r < 0) {
                        json_object_put(o);
                        break;
                }
                r = json_add_string(o, "template", l[i].template);
                if (r >= 0)
                        r = json_add(o, "size", json_object_new_int64(l[i].size));
                if (r >= 0)
                        r = json_add(o, "ready", json_object_new_int64(l[i].ready));
                if (r >= 0)
                        r = json_add(o, "starting", json_object_new_int64(l[i].starting));
                if (r >= 0)
                        r = json_add(o, "in_use", json_object_new_int64(l[i].in_use));
                if (r >= 0)
                        r = json_add(o, "recycle", json_object_new_boolean(l[i].recycle));
                if (r >= 0)
                        r = json_add(o, "recycled", json_object_new_int64(l[i].recycled));
        }
        if (r < 0)
                return log_oom();
        return print_json(ja);
}

int pools_show(SandboxClient *c, bool json) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        SandboxPoolInfo *l = NULL;
        size_t n = 0;
        int w, r;

        r = sandbox_client_pools(c, &l, &n, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to list the pools: %s", sandbox_client_error_message(&error, r));
        if (n > 0)
                qsort(l, n, sizeof(SandboxPoolInfo), pool_compare);

        if (json)
                r = pools_print_json(l, n);
        else {
                w = (int) strlen("TEMPLATE");
                for (size_t i = 0; i < n; i++)
                        w = MAX(w, (int) strlen(l[i].template));
                if (n > 0) {
                        printf("%-*s %5s %5s %8s %6s %8s\n", w, "TEMPLATE", "SIZE", "READY", "STARTING", "IN USE",
                               "RECYCLED");
                        for (size_t i = 0; i < n; i++) {
                                char rc[16] = "-";
                                if (l[i].recycle)
                                        snprintf(rc, sizeof(rc), "%" PRIu32, l[i].recycled);
                                printf("%-*s %5" PRIu32 " %5" PRIu32 " %8" PRIu32 " %6" PRIu32 " %8s\n", w,
                                       l[i].template, l[i].size, l[i].ready, l[i].starting, l[i].in_use, rc);
                        }
                        putchar('\n');
                }
                printf("%zu %s with a pool.\n", n, n == 1 ? "template" : "templates");
        }
        sandbox_pool_info_array_free(l, n);
        return r;
}

/* 1234567890 → "1.234s", 12345678 → "12ms". */
static const char *format_nsec(char *buf, size_t l, uint64_t nsec) {
        if (nsec >= UINT64_C(1000000000))
                snprintf(buf, l, "%" PRIu64 ".%03" PRIu64 "s", nsec / UINT64_C(1000000000),
                         nsec / UINT64_C(1000000) % 1000);
        else
                snprintf(buf, l, "%" PRIu64 "ms", nsec / UINT64_C(1000000));
        return buf;
}

void metrics_print_text(const SandboxMetricsInfo *m) {
        char a[64], b[FORMAT_BYTES_MAX];

#define HAS(x) SANDBOX_METRICS_HAS(m, SANDBOX_METRIC_##x)
        if (HAS(CPU_USAGE))
                printf("        CPU: %s\n", format_nsec(a, sizeof(a), m->cpu_usage_nsec));
        if (HAS(MEMORY_CURRENT) && HAS(MEMORY_PEAK))
                printf("     Memory: %s (peak: %s)\n", format_bytes(a, sizeof(a), m->memory_current) ?: "n/a",
                       format_bytes(b, sizeof(b), m->memory_peak) ?: "n/a");
        else if (HAS(MEMORY_CURRENT))
                printf("     Memory: %s\n", format_bytes(a, sizeof(a), m->memory_current) ?: "n/a");
        if (HAS(TASKS_CURRENT))
                printf("      Tasks: %" PRIu64 "\n", m->tasks_current);
        if (HAS(WORK_BYTES_USED))
                printf("       Work: %s used\n", format_bytes(a, sizeof(a), m->work_bytes_used) ?: "n/a");
        if (HAS(TMP_BYTES_USED))
                printf("        Tmp: %s used\n", format_bytes(a, sizeof(a), m->tmp_bytes_used) ?: "n/a");
        if (HAS(DISK_BYTES_USED) && HAS(DISK_BYTES_MAX))
                printf("       Disk: %s used of %s\n", format_bytes(a, sizeof(a), m->disk_bytes_used) ?: "n/a",
                       format_bytes(b, sizeof(b), m->disk_bytes_max) ?: "n/a");
#undef HAS
}

int metrics_add_json(json_object *j, const SandboxMetricsInfo *m) {
        static const char *const keys[_SANDBOX_METRIC_MAX] = {
                [SANDBOX_METRIC_CPU_USAGE]       = "cpu_usage_nsec",
                [SANDBOX_METRIC_MEMORY_CURRENT]  = "memory_current",
                [SANDBOX_METRIC_MEMORY_PEAK]     = "memory_peak",
                [SANDBOX_METRIC_TASKS_CURRENT]   = "tasks_current",
                [SANDBOX_METRIC_WORK_BYTES_USED] = "work_bytes_used",
                [SANDBOX_METRIC_TMP_BYTES_USED]  = "tmp_bytes_used",
                [SANDBOX_METRIC_DISK_BYTES_USED] = "disk_bytes_used",
                [SANDBOX_METRIC_DISK_BYTES_MAX]  = "disk_bytes_max",
        };
        int r = 0;

        for (SandboxMetric i = 0; r >= 0 && i < _SANDBOX_METRIC_MAX; i++)
                if (SANDBOX_METRICS_HAS(m, i))
                        r = json_add(j, keys[i], json_object_new_uint64(sandbox_metrics_value(m, i)));
        return r;
}
