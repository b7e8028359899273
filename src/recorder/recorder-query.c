/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* ListExecutions. Queries read the spool on a thread each, never behind the writer, which
 * may wait on MariaDB for seconds. A query's thread fills plain structs and wakes the
 * event loop through an eventfd; the loop joins it and hands the result on. */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <mysql.h>

#include "fd-util.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "parse-util.h"
#include "recorder-internal.h"
#include "recorder-mariadb.h"
#include "recorder-spool.h"
#include "strv.h"

struct ListQuery {
        Recorder *r;
        pthread_t thread;
        recorder_list_callback_t callback;
        void *userdata;
        /* The thread's until it sets finished (and the loop's after the join): */
        int spool_fd;                /* its own: compaction may replace the spool meanwhile */
        ExecutionFilter filter;
        char *sandbox_id;
        unsigned limit;
        ExecutionRecord *records;
        size_t n_records, n_allocated;
        int error;
        atomic_bool finished;        /* set by the thread, which then only signals query_fd */
        atomic_bool cancel;          /* set by recorder_free(): stop reading */
        bool fleet;                  /* the database's records too (RecorderSettings.fleet_node) */
};

static void execution_record_done(ExecutionRecord *e) {
        free(e->sandbox_id);
        free(e->tenant);
        strv_free(e->argv);
        free(e->working_directory);
}

static ListQuery *list_query_free(ListQuery *q) {
        if (!q)
                return NULL;
        for (size_t i = 0; i < q->n_records; i++)
                execution_record_done(&q->records[i]);
        free(q->records);
        free(q->sandbox_id);
        safe_close(q->spool_fd);
        return mfree(q);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(ListQuery *, list_query_free);

/* D-Bus strings are UTF-8 without NULs: what is not is shown with U+FFFD, a NUL as '?'. */
static int text_dup(const char *s, size_t size, char **ret) {
        size_t l;
        int k;

        k = utf8_sanitize(strempty(s), s ? size : 0, ret, &l);
        if (k < 0)
                return k;
        for (size_t i = 0; i < l; i++)
                if ((*ret)[i] == 0)
                        (*ret)[i] = '?';
        return 0;
}

/* An execution's record o (the spool's, or a database row as one) added to q's if it
 * matches the filter. */
static int record_add(ListQuery *q, json_object *o) {
        const ExecutionFilter *f = &q->filter;
        ExecutionRecord *e;
        json_object *argv;
        uint64_t owner, caller;
        const char *s, *tenant;
        size_t l, n;
        int k;

        if (f->since > 0 && spool_get_u64(o, "started") < f->since)
                return 0;
        s = spool_get_string(o, "sandbox", &l);
        if (f->sandbox_id && (!s || !streq(s, f->sandbox_id)))
                return 0;
        owner = spool_get_u64(o, "owner");
        caller = spool_get_u64(o, "caller");
        if (!f->any_owner && owner != f->uid && caller != f->uid)
                return 0;
        if (f->owner_set && owner != f->owner)
                return 0;
        /* A record without a tenant is of a sandbox for none (and of a sandboxd before them). */
        tenant = spool_get_string(o, "tenant", NULL) ?: "";
        if ((!isempty(f->caller_tenant) && !streq(tenant, f->caller_tenant)) ||
            (!isempty(f->tenant) && !streq(tenant, f->tenant)))
                return 0;

        if (q->n_records == q->n_allocated) {
                /* The spool's and the database's: limit each, before the merge. */
                size_t a = MIN(MAX(q->n_allocated * 2, (size_t) 16), (size_t) q->limit * 2);
                ExecutionRecord *p = reallocarray(q->records, a, sizeof(ExecutionRecord));
                if (!p)
                        return -ENOMEM;
                q->records = p;
                q->n_allocated = a;
        }
        /* Counted at once, so that list_query_free() frees what a failure leaves half made. */
        e = &q->records[q->n_records++];
        *e = (ExecutionRecord) {
                .exec_id = spool_get_u64(o, "exec"),
                .owner = (uid_t) owner,
                .caller = (uid_t) caller,
                .started_at = spool_get_u64(o, "started"),
                .ended_at = spool_get_u64(o, "ended"),
                .exit_status = (int32_t) spool_get_i64(o, "exit_status"),
                .exit_code = (int32_t) spool_get_i64(o, "exit_code"),
                .signal = (int32_t) spool_get_i64(o, "signal"),
                .timed_out = spool_get_bool(o, "timed_out"),
                .oom_killed = spool_get_bool(o, "oom_killed"),
                .cpu_usec = spool_get_u64(o, "cpu_usec"),
                .cgroup_cpu_nsec = spool_get_u64(o, "cgroup_cpu_nsec"),
                .cgroup_memory_peak = spool_get_u64(o, "memory_peak"),
                .disk_known = json_object_object_get_ex(o, "disk_used", NULL),
                .disk_bytes_used = spool_get_u64(o, "disk_used"),
                .disk_bytes_max = spool_get_u64(o, "disk_max"),
                .stdout_bytes = spool_get_u64(o, "stdout_bytes"),
                .stderr_bytes = spool_get_u64(o, "stderr_bytes"),
        };
        k = text_dup(s, l, &e->sandbox_id);
        if (k < 0)
                return k;
        e->tenant = strdup(tenant);
        if (!e->tenant)
                return -ENOMEM;
        s = spool_get_string(o, "cwd", &l);
        k = text_dup(s, l, &e->working_directory);
        if (k < 0)
                return k;
        n = json_object_object_get_ex(o, "argv", &argv) && json_object_is_type(argv, json_type_array) ?
                json_object_array_length(argv) : 0;
        e->argv = calloc(n + 1, sizeof(char *));
        if (!e->argv)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *a = json_object_array_get_idx(argv, i);
                k = text_dup(json_object_get_string(a), (size_t) json_object_get_string_len(a), &e->argv[i]);
                if (k < 0)
                        return k;
        }
        return 0;
}

static int list_cb(const char *line, size_t size, uint64_t end_offset, void *userdata) {
        static const char exec_type[] = ",\"type\":\"exec\",";
        _cleanup_json_ json_object *o = NULL;
        ListQuery *q = userdata;
        int k;

        if (atomic_load_explicit(&q->cancel, memory_order_relaxed))
                return -ECANCELED;
        /* Cheap test first: most lines of a busy spool are someone else's. */
        if (!memmem(line, MIN(size, (size_t) 48), exec_type, sizeof(exec_type) - 1))
                return 0;
        if (spool_line_parse(line, size, &o) < 0)
                return 0;
        if (q->filter.since > 0 && spool_get_u64(o, "time") < q->filter.since)
                return 1;  /* ended before since: so did everything before it */
        k = record_add(q, o);
        if (k < 0)
                return k;
        return q->n_records >= q->limit ? 1 : 0;
}

/* ---- the fleet's: the database's records too ---- */

static int cmp_u64(uint64_t a, uint64_t b) {
        return a < b ? -1 : a > b;
}

static int by_key(const void *a, const void *b) {
        const ExecutionRecord *x = a, *y = b;
        int c = strcmp(x->sandbox_id, y->sandbox_id);

        return c != 0 ? c : cmp_u64(x->exec_id, y->exec_id);
}

static int by_end_newest_first(const void *a, const void *b) {
        const ExecutionRecord *x = a, *y = b;
        int c = cmp_u64(y->ended_at, x->ended_at);

        return c != 0 ? c : by_key(a, b);
}

static int db_row(json_object *record, void *userdata) {
        ListQuery *q = userdata;

        if (atomic_load_explicit(&q->cancel, memory_order_relaxed))
                return -ECANCELED;
        return record_add(q, record);
}

/* The other nodes' executions, from the database every node's recorder writes to: read
 * after the spool (which has this node's, the newest of them perhaps not in the database
 * yet), the two merged, one of each execution, the most recently ended first. A database
 * that does not answer leaves the spool's answer (logged): the record is there when it
 * is back. */
static void list_query_database(ListQuery *q) {
        _cleanup_free_ char *why = NULL;
        RecorderDB *db = NULL;
        size_t spool = q->n_records, kept = 0;
        int k;

        mysql_thread_init();
        k = recorder_db_connect(&q->r->settings, &db, &why);
        if (k >= 0) {
                k = recorder_db_list_executions(db, &q->filter, q->limit, db_row, q);
                if (k < 0 && k != -ECANCELED && k != -ENOMEM)
                        log_warning("ListExecutions: the fleet's records are not readable, answering with this "
                                    "node's: %s", recorder_db_error(db));
                recorder_db_free(db);
        } else if (k == -EAGAIN)
                log_warning("ListExecutions: the fleet's records are not readable, answering with this node's: %s",
                            strna(why));
        mysql_thread_end();
        if (k == -ECANCELED || k == -ENOMEM) {
                q->error = k;
                return;
        }
        if (q->n_records == spool)
                return;
        /* One of each (the two hold the same fields of it). */
        qsort(q->records, q->n_records, sizeof(ExecutionRecord), by_key);
        for (size_t i = 0; i < q->n_records; i++)
                if (kept > 0 && by_key(&q->records[kept - 1], &q->records[i]) == 0)
                        execution_record_done(&q->records[i]);
                else
                        q->records[kept++] = q->records[i];
        q->n_records = kept;
        qsort(q->records, q->n_records, sizeof(ExecutionRecord), by_end_newest_first);
        while (q->n_records > q->limit)
                execution_record_done(&q->records[--q->n_records]);
}

static void *list_query_thread(void *userdata) {
        ListQuery *q = userdata;
        int fd = q->r->query_fd;  /* q may be gone once finished is set */

        q->error = spool_scan_backwards(q->spool_fd, RECORDER_LIST_SCAN_MAX, list_cb, q);
        if (q->error >= 0 && q->fleet)
                list_query_database(q);
        atomic_store(&q->finished, true);
        (void) eventfd_write(fd, 1);
        return NULL;
}

/* On the event loop. The join waits at most for the thread's last eventfd_write(). */
static void list_query_finish(Recorder *r, size_t slot, int error) {
        _cleanup_(list_query_freep) ListQuery *q = TAKE_PTR(r->queries[slot]);

        pthread_join(q->thread, NULL);
        if (error >= 0)
                error = q->error;
        if (error < 0)
                q->callback(error, NULL, 0, q->userdata);
        else
                q->callback(0, q->records, q->n_records, q->userdata);
}

static int on_query_done(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Recorder *r = userdata;
        eventfd_t n;

        (void) eventfd_read(fd, &n);
        for (size_t i = 0; i < RECORDER_LIST_QUERIES_MAX; i++)
                if (r->queries[i] && atomic_load(&r->queries[i]->finished))
                        list_query_finish(r, i, 0);
        return 0;
}

int recorder_list_executions(Recorder *r, const ExecutionFilter *f, recorder_list_callback_t callback,
                             void *userdata) {
        _cleanup_(list_query_freep) ListQuery *q = NULL;
        size_t slot;
        int k;

        for (slot = 0; slot < RECORDER_LIST_QUERIES_MAX && r->queries[slot]; slot++)
                ;
        if (slot >= RECORDER_LIST_QUERIES_MAX)
                return -EBUSY;

        q = calloc(1, sizeof(ListQuery));
        if (!q)
                return -ENOMEM;
        *q = (ListQuery) {
                .r = r,
                .callback = callback,
                .userdata = userdata,
                .spool_fd = -EBADF,
                .filter = *f,
                .limit = f->limit == 0 ? RECORDER_LIST_LIMIT_DEFAULT : MIN(f->limit, LIST_EXECUTIONS_LIMIT_MAX),
                /* uids are a host's: another node's uid is no one in particular here, so the
                 * fleet's records are for those who may see every owner's. */
                .fleet = r->settings.fleet_node > 0 && r->use_db && f->any_owner,
        };
        if (f->sandbox_id) {
                q->sandbox_id = strdup(f->sandbox_id);
                if (!q->sandbox_id)
                        return -ENOMEM;
        }
        q->filter.sandbox_id = q->sandbox_id;

        /* A descriptor of the query's own: if compaction replaces the spool meanwhile, the
         * query goes on reading the file it started on. */
        pthread_mutex_lock(&r->lock);
        q->spool_fd = fcntl(r->spool_fd, F_DUPFD_CLOEXEC, 3);
        k = q->spool_fd < 0 ? -errno : 0;
        pthread_mutex_unlock(&r->lock);
        if (k < 0)
                return k;

        k = recorder_thread_start(&q->thread, "sandboxd-query", list_query_thread, q);
        if (k < 0)
                return k;
        r->queries[slot] = TAKE_PTR(q);
        return 0;
}

int recorder_queries_init(Recorder *r, sd_event *event) {
        int k;

        r->query_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (r->query_fd < 0)
                return -errno;
        k = sd_event_add_io(event, &r->query_source, r->query_fd, EPOLLIN, on_query_done, r);
        if (k < 0)
                return k;
        (void) sd_event_source_set_description(r->query_source, "recorder-query");
        return 0;
}

void recorder_queries_done(Recorder *r) {
        /* Stop all the queries first, then wait for each. */
        for (size_t i = 0; i < RECORDER_LIST_QUERIES_MAX; i++)
                if (r->queries[i])
                        atomic_store(&r->queries[i]->cancel, true);
        for (size_t i = 0; i < RECORDER_LIST_QUERIES_MAX; i++)
                if (r->queries[i])
                        list_query_finish(r, i, -ECANCELED);
        r->query_source = sd_event_source_disable_unref(r->query_source);
        r->query_fd = safe_close(r->query_fd);
}

int recorder_check_enabled(const Recorder *r, SandboxError *error) {
        if (!r)
                return sandbox_error_set(error, SANDBOX_ERR_NOT_SUPPORTED,
                                         "Recording is off (Record=no in sandboxd.conf).");
        return 0;
}

int recorder_query_executions(Recorder *r, const ExecutionQuery *q, recorder_list_callback_t callback,
                              void *userdata, SandboxError *error) {
        int k;

        k = recorder_check_enabled(r, error);
        if (k < 0)
                return k;
        k = recorder_list_executions(r, &q->filter, callback, userdata);
        if (k == -EBUSY)
                return sandbox_error_set(error, SANDBOX_ERR_BUSY,
                                         "%u queries of the record are under way already, try again.",
                                         RECORDER_LIST_QUERIES_MAX);
        return k;
}
