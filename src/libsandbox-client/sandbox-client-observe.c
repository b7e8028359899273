/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libsandbox-client over D-Bus: what there is to see of sandboxes. GetLogs answers with a
 * pipe on which the daemon writes one JSON object per entry and line (sandboxd-api(7));
 * GetMetrics and ListPools are plain calls. */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "json-util.h"
#include "sandbox-client-internal.h"

/* A line longer than this is not one the daemon writes (a 64 KiB message as an array of
 * byte values is about 256 KiB). */
#define JOURNAL_LINE_MAX (1024U * 1024U)

void sandbox_journal_entry_done(SandboxJournalEntry *e) {
        if (!e)
                return;
        free(e->identifier);
        free(e->message);
        *e = (SandboxJournalEntry) {};
}

/* "message": a string, or an array of byte values; NUL-terminated copy. */
static int journal_message_parse(json_object *v, void **ret, size_t *ret_size) {
        uint8_t *p;
        size_t n;

        if (json_object_is_type(v, json_type_string)) {
                n = (size_t) json_object_get_string_len(v);
                p = malloc(n + 1);
                if (!p)
                        return -ENOMEM;
                memcpy(p, json_object_get_string(v), n);
        } else if (json_object_is_type(v, json_type_array)) {
                n = json_object_array_length(v);
                p = malloc(n + 1);
                if (!p)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        json_object *b = json_object_array_get_idx(v, i);
                        int64_t k = json_object_get_int64(b);

                        if (!json_object_is_type(b, json_type_int) || k < 0 || k > 255) {
                                free(p);
                                return -EBADMSG;
                        }
                        p[i] = (uint8_t) k;
                }
        } else
                return -EBADMSG;
        p[n] = 0;
        *ret = p;
        *ret_size = n;
        return 0;
}

int sandbox_journal_entry_parse(const char *line, size_t size, SandboxJournalEntry *ret) {
        _cleanup_(sandbox_journal_entry_done) SandboxJournalEntry e = { .priority = -1 };
        _cleanup_json_ json_object *o = NULL;
        json_tokener *tok;
        json_object *v;
        int r;

        if (size > JOURNAL_LINE_MAX)
                return -EBADMSG;
        tok = json_tokener_new();
        if (!tok)
                return -ENOMEM;
        o = json_tokener_parse_ex(tok, line, (int) size);
        r = o && json_tokener_get_parse_end(tok) == size ? 0 : -EBADMSG;
        json_tokener_free(tok);
        if (r < 0 || !json_object_is_type(o, json_type_object))
                return -EBADMSG;

        if (!json_object_object_get_ex(o, "timestamp", &v) || !json_object_is_type(v, json_type_int))
                return -EBADMSG;
        e.timestamp_usec = json_object_get_uint64(v);
        if (json_object_object_get_ex(o, "priority", &v)) {
                if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
                    json_object_get_int64(v) > 7)
                        return -EBADMSG;
                e.priority = (int) json_object_get_int64(v);
        }
        if (!json_object_object_get_ex(o, "identifier", &v) || !json_object_is_type(v, json_type_string))
                return -EBADMSG;
        e.identifier = strdup(json_object_get_string(v));
        if (!e.identifier)
                return -ENOMEM;
        if (!json_object_object_get_ex(o, "message", &v))
                return -EBADMSG;
        r = journal_message_parse(v, &e.message, &e.message_size);
        if (r < 0)
                return r;
        e.truncated = json_object_object_get_ex(o, "truncated", &v) && json_object_get_boolean(v);

        *ret = e;
        e = (SandboxJournalEntry) {};
        return 0;
}

/* Reads lines from fd until its end, handing each entry to cb. */
static int journal_stream_read(int fd, sandbox_journal_callback_t cb, void *userdata) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, allocated = 0;

        for (;;) {
                char *nl;
                ssize_t n;

                if (allocated - size < 64 * 1024) {
                        size_t a = MAX(allocated * 2, (size_t) 128 * 1024);
                        char *p = realloc(buf, a);

                        if (!p)
                                return -ENOMEM;
                        buf = p;
                        allocated = a;
                }
                n = read(fd, buf + size, allocated - size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return size == 0 ? 0 : -EBADMSG; /* a line cut short */
                size += (size_t) n;

                while ((nl = memchr(buf, '\n', size))) {
                        _cleanup_(sandbox_journal_entry_done) SandboxJournalEntry e = {};
                        size_t l = (size_t) (nl - buf);
                        int r;

                        r = sandbox_journal_entry_parse(buf, l, &e);
                        if (r >= 0)
                                r = cb(&e, userdata);
                        if (r < 0)
                                return r;
                        memmove(buf, nl + 1, size - l - 1);
                        size -= l + 1;
                }
                if (size > JOURNAL_LINE_MAX)
                        return -EBADMSG;
        }
}

int sandbox_handle_logs(SandboxHandle *h, unsigned lines, bool follow, sandbox_journal_callback_t cb,
                        void *userdata, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_close_ int fd = -EBADF;
        int borrowed, r;

        r = client_new_call(h->client, h, "GetLogs", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "ub", (uint32_t) lines, (int) follow);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        r = client_call(h->client, m, 0, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "h", &borrowed);
        if (r >= 0) {
                fd = fcntl(borrowed, F_DUPFD_CLOEXEC, 3);
                if (fd < 0)
                        r = -errno;
        }
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        reply = sd_bus_message_unref(reply);

        return journal_stream_read(fd, cb, userdata);
}

/* GetMetrics' a{sv}: where SandboxMetricsInfo keeps each. */
static const struct {
        const char *name;
        size_t offset;
} metric_fields[_SANDBOX_METRIC_MAX] = {
        [SANDBOX_METRIC_CPU_USAGE]       = { "CPUUsageNSec",  offsetof(SandboxMetricsInfo, cpu_usage_nsec)  },
        [SANDBOX_METRIC_MEMORY_CURRENT]  = { "MemoryCurrent", offsetof(SandboxMetricsInfo, memory_current)  },
        [SANDBOX_METRIC_MEMORY_PEAK]     = { "MemoryPeak",    offsetof(SandboxMetricsInfo, memory_peak)     },
        [SANDBOX_METRIC_TASKS_CURRENT]   = { "TasksCurrent",  offsetof(SandboxMetricsInfo, tasks_current)   },
        [SANDBOX_METRIC_WORK_BYTES_USED] = { "WorkBytesUsed", offsetof(SandboxMetricsInfo, work_bytes_used) },
        [SANDBOX_METRIC_TMP_BYTES_USED]  = { "TmpBytesUsed",  offsetof(SandboxMetricsInfo, tmp_bytes_used)  },
        [SANDBOX_METRIC_DISK_BYTES_USED] = { "DiskBytesUsed", offsetof(SandboxMetricsInfo, disk_bytes_used) },
        [SANDBOX_METRIC_DISK_BYTES_MAX]  = { "DiskBytesMax",  offsetof(SandboxMetricsInfo, disk_bytes_max)  },
};

static const char *metric_field(size_t i, const char **sig, size_t *off) {
        *sig = "t";
        *off = metric_fields[i].offset;
        return metric_fields[i].name;
}

uint64_t sandbox_metrics_value(const SandboxMetricsInfo *m, SandboxMetric x) {
        return *(const uint64_t *) ((const uint8_t *) m + metric_fields[x].offset);
}

int client_read_metrics(sd_bus_message *m, SandboxMetricsInfo *ret) {
        SandboxMetricsInfo info = {};
        int r;

        r = client_read_fields(m, ELEMENTSOF(metric_fields), metric_field, &info, &info.seen);
        if (r < 0)
                return r;
        *ret = info;
        return 0;
}

int sandbox_handle_metrics(SandboxHandle *h, SandboxMetricsInfo *ret, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = client_new_call(h->client, h, "GetMetrics", &m);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        r = client_call(h->client, m, 0, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;
        r = client_read_metrics(reply, ret);
        return r < 0 ? client_error_from_bus(error, NULL, r) : 0;
}

static void pool_info_done(void *item) {
        SandboxPoolInfo *p = item;

        free(p->template);
}

void sandbox_pool_info_array_free(SandboxPoolInfo *a, size_t n) {
        client_array_free(a, n, sizeof(SandboxPoolInfo), pool_info_done);
}

static int pool_info_read(sd_bus_message *m, void *item) {
        SandboxPoolInfo *p = item;
        const char *template;
        int r;

        r = sd_bus_message_read(m, "(suuuu)", &template, &p->size, &p->ready, &p->starting, &p->in_use);
        if (r <= 0)
                return r;
        p->template = strdup(template);
        return p->template ? 1 : -ENOMEM;
}

/* What ListPools' struct has no room for: GetPool's a{sv}. */
static int pool_info_recycle(SandboxClient *c, SandboxPoolInfo *p, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = client_new_call(c, NULL, "GetPool", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "s", p->template);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        r = client_call(c, m, 0, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        while (r > 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key;
                int b;

                r = sd_bus_message_read(reply, "s", &key);
                if (r >= 0 && streq(key, "Recycle") && (r = sd_bus_message_read(reply, "v", "b", &b)) >= 0)
                        p->recycle = b;
                else if (r >= 0 && streq(key, "Recycled"))
                        r = sd_bus_message_read(reply, "v", "u", &p->recycled);
                else if (r >= 0)
                        r = sd_bus_message_skip(reply, "v");
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r >= 0)
                        r = 1;
        }
        return r < 0 ? client_error_from_bus(error, NULL, r) : 0;
}

int sandbox_client_pools(SandboxClient *c, SandboxPoolInfo **ret, size_t *ret_n, SandboxClientError *error) {
        SandboxPoolInfo *l = NULL;
        size_t n = 0;
        int r;

        r = client_call_list(c, NULL, "ListPools", "(suuuu)", sizeof(SandboxPoolInfo), pool_info_read,
                             pool_info_done, (void **) &l, &n, error);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = pool_info_recycle(c, &l[i], error);
        if (r < 0) {
                sandbox_pool_info_array_free(l, n);
                return r;
        }
        *ret = l;
        *ret_n = n;
        return 0;
}
