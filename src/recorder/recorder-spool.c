/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fd-util.h"
#include "json-util.h"
#include "labels.h"
#include "macro.h"
#include "recorder-spool.h"
#include "strv.h"

#define SCAN_CHUNK (64U * 1024)
/* A record is at most argv (EXEC_ARGS_MAX, escaped) plus two hex excerpts: far below. */
#define LINE_MAX_SIZE (4U * 1024 * 1024)

static int add_u64(json_object *o, const char *key, uint64_t v) {
        return json_add(o, key, json_object_new_uint64(v));
}

static int add_str(json_object *o, const char *key, const char *s) {
        if (!s)   /* json-c's null is the NULL object */
                return json_object_object_add(o, key, NULL) < 0 ? -ENOMEM : 0;
        return json_add(o, key, json_object_new_string(s));
}

/* A key that most records lack (a sandbox's name and tenant): only when it says something. */
static int add_str_nonempty(json_object *o, const char *key, const char *s) {
        return isempty(s) ? 0 : add_str(o, key, s);
}

/* The sandbox's labels as an object; nothing for none. */
static int add_labels(json_object *o, char * const *labels) {
        if (strv_isempty(labels))
                return 0;
        return json_add(o, "labels", labels_to_json(labels));
}

static int add_hex(json_object *o, const char *key, const void *data, size_t size) {
        _cleanup_free_ char *h = NULL;
        int r;

        r = hex_encode(data, size, &h);
        if (r < 0)
                return r;
        return json_add(o, key, json_object_new_string_len(h, (int) (size * 2)));
}

static int record_new(uint64_t seq, const char *type, uint64_t time, json_object **ret) {
        _cleanup_json_ json_object *o = NULL;
        int r;

        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        /* seq first: readers find it at a fixed place (spool_line_seq()). */
        r = add_u64(o, "seq", seq);
        if (r >= 0)
                r = add_str(o, "type", type);
        if (r >= 0)
                r = add_u64(o, "time", time);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}

static int record_finish(json_object *o, char **ret, size_t *ret_size) {
        const char *s;
        size_t l;
        char *line;

        s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &l);
        if (!s)
                return -ENOMEM;
        line = malloc(l + 2);
        if (!line)
                return -ENOMEM;
        memcpy(line, s, l);
        line[l] = '\n';
        line[l + 1] = 0;
        *ret = line;
        *ret_size = l + 1;
        return 0;
}

int spool_format_exec(uint64_t seq, const ExecRecordEvent *ev, char **ret, size_t *ret_size) {
        _cleanup_json_ json_object *o = NULL;
        json_object *argv;
        int r;

        r = record_new(seq, "exec", ev->ended_at, &o);
        if (r < 0)
                return r;
        argv = json_object_new_array();
        r = json_add(o, "argv", argv);
        for (char * const *a = ev->argv; r >= 0 && a && *a; a++) {
                json_object *s = json_object_new_string(*a);
                if (!s || json_object_array_add(argv, s) < 0) {
                        json_object_put(s);
                        r = -ENOMEM;
                }
        }
        if (r >= 0) r = add_str(o, "sandbox", ev->sandbox_id);
        if (r >= 0) r = add_u64(o, "exec", ev->exec_id);
        if (r >= 0) r = add_u64(o, "owner", ev->owner);
        if (r >= 0) r = add_str_nonempty(o, "tenant", ev->tenant);
        if (r >= 0) r = add_labels(o, ev->labels);
        if (r >= 0) r = add_u64(o, "caller", ev->caller);
        if (r >= 0) r = add_str(o, "cwd", ev->working_directory);
        if (r >= 0) r = json_add(o, "background", json_object_new_boolean(ev->background));
        if (r >= 0) r = add_u64(o, "started", ev->started_at);
        if (r >= 0) r = add_u64(o, "ended", ev->ended_at);
        if (r >= 0) r = json_add(o, "exit_status", json_object_new_int(ev->exit_status));
        if (r >= 0) r = json_add(o, "exit_code", json_object_new_int(ev->exit_code));
        if (r >= 0) r = json_add(o, "signal", json_object_new_int(ev->signal));
        if (r >= 0) r = json_add(o, "timed_out", json_object_new_boolean(ev->timed_out));
        if (r >= 0) r = json_add(o, "oom_killed", json_object_new_boolean(ev->oom_killed));
        if (r >= 0) r = json_add(o, "truncated", json_object_new_boolean(ev->truncated));
        if (r >= 0) r = add_u64(o, "cpu_usec", ev->cpu_usec);
        if (r >= 0) r = add_u64(o, "cgroup_cpu_nsec", ev->cgroup_cpu_nsec);
        if (r >= 0) r = add_u64(o, "memory_peak", ev->cgroup_memory_peak);
        if (r >= 0 && ev->disk_known) r = add_u64(o, "disk_used", ev->disk_bytes_used);
        if (r >= 0 && ev->disk_known) r = add_u64(o, "disk_max", ev->disk_bytes_max);
        if (r >= 0) r = add_u64(o, "stdout_bytes", ev->stdout_bytes);
        if (r >= 0) r = add_u64(o, "stderr_bytes", ev->stderr_bytes);
        if (r >= 0) r = add_hex(o, "stdout", ev->stdout_excerpt, MIN(ev->stdout_excerpt_size, (size_t) EXEC_EVENT_EXCERPT_MAX));
        if (r >= 0) r = add_hex(o, "stderr", ev->stderr_excerpt, MIN(ev->stderr_excerpt_size, (size_t) EXEC_EVENT_EXCERPT_MAX));
        if (r < 0)
                return r;
        return record_finish(o, ret, ret_size);
}

int spool_format_sandbox(uint64_t seq, const SandboxRecordEvent *ev, char **ret, size_t *ret_size) {
        _cleanup_json_ json_object *o = NULL;
        const SandboxConfig *c = ev->config;
        int r;

        r = record_new(seq, "sandbox", ev->destroyed_at ?: ev->created_at, &o);
        if (r >= 0) r = add_str(o, "sandbox", ev->sandbox_id);
        if (r >= 0) r = add_u64(o, "owner", ev->owner);
        if (r >= 0 && c) r = add_str_nonempty(o, "tenant", c->tenant);
        if (r >= 0 && c) r = add_str_nonempty(o, "name", c->name);
        if (r >= 0 && c) r = add_labels(o, c->labels);
        if (r >= 0) r = add_str(o, "template", ev->template_name);
        if (r >= 0) r = add_str(o, "payload", ev->payload);
        if (r >= 0) r = add_u64(o, "memory_max", c ? c->limits.memory_max : 0);
        if (r >= 0) r = add_u64(o, "cpu_quota_per_sec_usec", c ? c->limits.cpu_quota_per_sec_usec : 0);
        if (r >= 0) r = add_u64(o, "tasks_max", c ? c->limits.tasks_max : 0);
        if (r >= 0) r = add_u64(o, "disk_max", c ? c->disk_max : 0);
        if (r >= 0) r = add_u64(o, "timeout_sec", c ? c->timeout_sec : 0);
        if (r >= 0) r = add_u64(o, "idle_timeout_sec", c ? c->idle_timeout_sec : 0);
        if (r >= 0) r = json_add(o, "ephemeral", json_object_new_boolean(c && c->ephemeral));
        if (r >= 0) r = add_u64(o, "created", ev->created_at);
        if (r >= 0) r = add_u64(o, "destroyed", ev->destroyed_at);
        if (r >= 0) r = add_str(o, "end_reason", ev->end_reason);
        if (r < 0)
                return r;
        return record_finish(o, ret, ret_size);
}

int spool_format_template(uint64_t seq, const TemplateRecordEvent *ev, char **ret, size_t *ret_size) {
        _cleanup_json_ json_object *o = NULL;
        int r;

        r = record_new(seq, "template", ev->loaded_at, &o);
        if (r >= 0) r = add_str(o, "name", ev->name);
        if (r >= 0) r = add_str(o, "payload", ev->payload);
        if (r >= 0) r = add_str(o, "description", ev->description);
        if (r < 0)
                return r;
        return record_finish(o, ret, ret_size);
}

int spool_format_snapshot(uint64_t seq, const SnapshotRecordEvent *ev, char **ret, size_t *ret_size) {
        _cleanup_json_ json_object *o = NULL;
        const char *kind = snapshot_event_kind_to_string(ev->kind), *cause = snapshot_event_cause_to_string(ev->cause);
        int r;

        if (!kind || !cause || !ev->snapshot_id)
                return -EINVAL;
        r = record_new(seq, "snapshot", ev->time, &o);
        if (r >= 0) r = add_str(o, "snapshot", ev->snapshot_id);
        if (r >= 0) r = add_str(o, "event", kind);
        if (r >= 0) r = add_str(o, "cause", cause);
        if (r >= 0) r = add_str(o, "source", ev->source);
        if (r >= 0) r = add_str_nonempty(o, "sandbox", ev->sandbox_id);
        if (r >= 0) r = add_u64(o, "owner", ev->owner);
        if (r >= 0) r = add_str_nonempty(o, "tenant", ev->tenant);
        if (r >= 0) r = add_u64(o, "size", ev->size);
        if (r >= 0) r = add_u64(o, "content_size", ev->content_size);
        if (r < 0)
                return r;
        return record_finish(o, ret, ret_size);
}

int spool_line_seq(const char *line, size_t size, uint64_t *ret) {
        static const char prefix[] = "{\"seq\":";
        uint64_t v = 0;
        size_t i = sizeof(prefix) - 1;

        if (size <= i || memcmp(line, prefix, i) != 0)
                return -EBADMSG;
        if (line[i] < '0' || line[i] > '9')
                return -EBADMSG;
        for (; i < size && line[i] >= '0' && line[i] <= '9'; i++) {
                uint64_t d = (uint64_t) (line[i] - '0');
                if (v > UINT64_MAX / 10 || (v == UINT64_MAX / 10 && d > UINT64_MAX % 10))
                        return -EBADMSG;
                v = v * 10 + d;
        }
        if (i >= size || line[i] != ',')
                return -EBADMSG;
        *ret = v;
        return 0;
}

static void json_tokener_freep(json_tokener **t) {
        if (*t)
                json_tokener_free(*t);
}

int spool_line_parse(const char *line, size_t size, json_object **ret) {
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        _cleanup_json_ json_object *o = NULL;
        json_object *v;

        if (size > INT32_MAX)
                return -EBADMSG;
        tok = json_tokener_new();
        if (!tok)
                return -ENOMEM;
        o = json_tokener_parse_ex(tok, line, (int) size);
        if (!o || json_tokener_get_error(tok) != json_tokener_success ||
            json_tokener_get_parse_end(tok) != size)
                return -EBADMSG;
        if (!json_object_is_type(o, json_type_object) ||
            !json_object_object_get_ex(o, "seq", &v) || !json_object_is_type(v, json_type_int) ||
            !json_object_object_get_ex(o, "type", &v) || !json_object_is_type(v, json_type_string) ||
            !json_object_object_get_ex(o, "time", &v) || !json_object_is_type(v, json_type_int))
                return -EBADMSG;
        *ret = TAKE_PTR(o);
        return 0;
}

uint64_t spool_get_u64(json_object *o, const char *key) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return 0;
        return json_object_get_uint64(v);
}

int64_t spool_get_i64(json_object *o, const char *key) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return 0;
        return json_object_get_int64(v);
}

bool spool_get_bool(json_object *o, const char *key) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_boolean))
                return false;
        return json_object_get_boolean(v);
}

const char *spool_get_string(json_object *o, const char *key, size_t *ret_size) {
        json_object *v;
        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string)) {
                if (ret_size)
                        *ret_size = 0;
                return NULL;
        }
        if (ret_size)
                *ret_size = (size_t) json_object_get_string_len(v);
        return json_object_get_string(v);
}

int spool_get_hex(json_object *o, const char *key, void **ret, size_t *ret_size) {
        size_t l;
        const char *s = spool_get_string(o, key, &l);

        if (!s || l == 0) {
                *ret = NULL;
                *ret_size = 0;
                return 0;
        }
        return hex_decode(s, l, ret, ret_size);
}

int spool_scan(int fd, uint64_t start_offset, spool_line_cb_t cb, void *userdata, uint64_t *ret_end) {
        _cleanup_free_ char *buf = NULL;
        size_t allocated = SCAN_CHUNK, filled = 0;
        uint64_t offset = start_offset, consumed = start_offset;
        int r;

        buf = malloc(allocated);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n;
                size_t start = 0;

                if (filled == allocated) {
                        /* A line longer than the buffer: grow, up to a bound. */
                        if (allocated >= LINE_MAX_SIZE) {
                                /* Not a record; skip to its end. */
                                char *nl = NULL;
                                consumed += filled;
                                filled = 0;
                                while (!nl) {
                                        n = pread(fd, buf, allocated, (off_t) offset);
                                        if (n < 0)
                                                return -errno;
                                        if (n == 0)
                                                goto done;
                                        nl = memchr(buf, '\n', (size_t) n);
                                        offset += nl ? (uint64_t) (nl - buf + 1) : (uint64_t) n;
                                }
                                consumed = offset;
                                continue;
                        }
                        char *b = realloc(buf, allocated * 2);
                        if (!b)
                                return -ENOMEM;
                        buf = b;
                        allocated *= 2;
                }
                n = pread(fd, buf + filled, allocated - filled, (off_t) offset);
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                offset += (uint64_t) n;
                filled += (size_t) n;

                for (;;) {
                        char *nl = memchr(buf + start, '\n', filled - start);
                        if (!nl)
                                break;
                        size_t len = (size_t) (nl - (buf + start));
                        consumed += len + 1;
                        r = cb(buf + start, len, consumed, userdata);
                        if (r != 0) {
                                if (ret_end)
                                        *ret_end = consumed;
                                return r < 0 ? r : 0;
                        }
                        start += len + 1;
                }
                memmove(buf, buf + start, filled - start);
                filled -= start;
        }
done:
        if (ret_end)
                *ret_end = consumed;
        return 0;
}

/* Prepends up to one chunk from before pos to buf (which holds file[pos, pos + filled)). */
static int read_before(int fd, char **buf, size_t *allocated, size_t *filled, uint64_t *pos, uint64_t limit) {
        size_t want = (size_t) MIN((uint64_t) SCAN_CHUNK, *pos - limit);
        ssize_t n;

        if (*filled + want > *allocated) {
                size_t a = MAX(*allocated * 2, *filled + want);
                char *b;
                if (a > LINE_MAX_SIZE + SCAN_CHUNK)
                        return -E2BIG;
                b = realloc(*buf, a);
                if (!b)
                        return -ENOMEM;
                *buf = b;
                *allocated = a;
        }
        memmove(*buf + want, *buf, *filled);
        n = pread(fd, *buf, want, (off_t) (*pos - want));
        if (n < 0)
                return -errno;
        if ((size_t) n != want)
                return -EIO;  /* truncated under us */
        *pos -= want;
        *filled += want;
        return 0;
}

int spool_scan_backwards(int fd, uint64_t max_bytes, spool_line_cb_t cb, void *userdata) {
        _cleanup_free_ char *buf = NULL;
        size_t allocated = SCAN_CHUNK, filled = 0;  /* buf holds file[pos, pos + filled) */
        uint64_t pos, limit;
        struct stat st;
        char *nl;
        int r;

        if (fstat(fd, &st) < 0)
                return -errno;
        pos = (uint64_t) st.st_size;
        limit = pos > max_bytes ? pos - max_bytes : 0;
        buf = malloc(allocated);
        if (!buf)
                return -ENOMEM;

        /* A last line without its '\n' is still being written: not a record yet. */
        for (;;) {
                nl = filled > 0 ? memrchr(buf, '\n', filled) : NULL;
                if (nl)
                        break;
                if (pos <= limit)
                        return 0;
                r = read_before(fd, &buf, &allocated, &filled, &pos, limit);
                if (r == -E2BIG)
                        return 0;
                if (r < 0)
                        return r;
        }
        filled = (size_t) (nl - buf) + 1;

        /* buf[filled - 1] is the '\n' that ends the next line to report. */
        while (filled > 0) {
                size_t begin;

                nl = filled > 1 ? memrchr(buf, '\n', filled - 1) : NULL;
                if (!nl && pos > 0) {
                        if (pos <= limit)
                                return 0;  /* the line starts before what we may read */
                        r = read_before(fd, &buf, &allocated, &filled, &pos, limit);
                        if (r == -E2BIG)
                                return 0;
                        if (r < 0)
                                return r;
                        continue;
                }
                begin = nl ? (size_t) (nl - buf) + 1 : 0;
                r = cb(buf + begin, filled - 1 - begin, pos + filled, userdata);
                if (r != 0)
                        return r < 0 ? r : 0;
                filled = begin;
        }
        return 0;
}

static int last_seq_cb(const char *line, size_t size, uint64_t end_offset, void *userdata) {
        return spool_line_seq(line, size, userdata) >= 0 ? 1 : 0;
}

int spool_last_seq(int fd, uint64_t *ret) {
        uint64_t seq = 0;
        int r;

        r = spool_scan_backwards(fd, UINT64_MAX, last_seq_cb, &seq);
        if (r < 0)
                return r;
        *ret = seq;
        return 0;
}

typedef struct OffsetSearch {
        uint64_t after_seq;
        uint64_t keep_since;
        uint64_t offset;     /* start of the current line */
        bool found;
} OffsetSearch;

static int offset_after_cb(const char *line, size_t size, uint64_t end_offset, void *userdata) {
        OffsetSearch *s = userdata;
        uint64_t seq;

        if (spool_line_seq(line, size, &seq) >= 0 && seq > s->after_seq) {
                s->found = true;
                return 1;
        }
        s->offset = end_offset;
        return 0;
}

int spool_offset_after(int fd, uint64_t after_seq, uint64_t *ret) {
        OffsetSearch s = { .after_seq = after_seq };
        int r;

        r = spool_scan(fd, 0, offset_after_cb, &s, NULL);
        if (r < 0)
                return r;
        *ret = s.offset;
        return 0;
}

static int cut_cb(const char *line, size_t size, uint64_t end_offset, void *userdata) {
        _cleanup_json_ json_object *o = NULL;
        OffsetSearch *s = userdata;
        uint64_t seq;

        if (spool_line_seq(line, size, &seq) >= 0) {
                if (seq > s->after_seq)
                        return 1;
                if (spool_line_parse(line, size, &o) >= 0 && spool_get_u64(o, "time") >= s->keep_since)
                        return 1;
        }
        /* Older than the retention and committed, or not a record at all: may go. */
        s->offset = end_offset;
        return 0;
}

int spool_cut_offset(int fd, uint64_t keep_since, uint64_t committed_seq, uint64_t *ret) {
        OffsetSearch s = { .after_seq = committed_seq, .keep_since = keep_since };
        int r;

        r = spool_scan(fd, 0, cut_cb, &s, NULL);
        if (r < 0)
                return r;
        *ret = s.offset;
        return 0;
}

int spool_cursor_read(int dir_fd, uint64_t *ret) {
        char buf[32], *e;
        ssize_t n;

        n = read_small_file_at(dir_fd, SPOOL_CURSOR_FILE, buf, sizeof(buf));
        if (n < 0)
                return n == -E2BIG ? -EBADMSG : (int) n;
        errno = 0;
        unsigned long long v = strtoull(buf, &e, 10);
        if (errno != 0 || e == buf || (*e && *e != '\n'))
                return -EBADMSG;
        *ret = v;
        return 0;
}

int spool_cursor_write(int dir_fd, uint64_t seq) {
        char buf[32];
        int fd, n;

        /* Write a new file and rename it over: a crash leaves the old cursor or the new
         * one, never half of one. (Replaying a record twice is harmless: idempotent keys.) */
        fd = openat(dir_fd, SPOOL_CURSOR_FILE ".new", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", seq);
        if (write(fd, buf, (size_t) n) != n || fdatasync(fd) < 0) {
                int r = negative_errno();
                safe_close(fd);
                return r;
        }
        safe_close(fd);
        if (renameat(dir_fd, SPOOL_CURSOR_FILE ".new", dir_fd, SPOOL_CURSOR_FILE) < 0)
                return -errno;
        return 0;
}
