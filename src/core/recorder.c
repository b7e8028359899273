/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The recorder. The event loop formats each record and appends it to the spool with one
 * write(2) to a file opened O_APPEND (microseconds; the page cache has it when write()
 * returns, so a crash of sandboxd loses nothing). A writer thread does everything that
 * may take long: fdatasync() of the spool (at most every FSYNC_INTERVAL while records
 * come), the replay into MariaDB (batches, one transaction each, then the cursor), the
 * retries with backoff while MariaDB is away, and retention (compaction of the spool,
 * DELETE of old rows). The thread touches nothing of sd-event or sd-bus; the two share
 * only this struct, under one mutex that the event loop holds for the write(2) alone.
 *
 * Queries (ListExecutions) read the spool on a thread each, never behind the writer,
 * which may wait on MariaDB for seconds. A query's thread fills plain structs and wakes
 * the event loop through an eventfd; the loop joins it and hands the result on. */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>

#include "json-util.h"
#include "conf-parser.h"
#include "config.h"
#include "log.h"
#include "parse-util.h"
#include "recorder-mariadb.h"
#include "recorder-spool.h"
#include "recorder.h"
#include "strv.h"

#define BATCH_MAX 256U
#define BACKOFF_MIN_USEC (250ULL * 1000)
#define BACKOFF_MAX_USEC (30ULL * 1000 * 1000)
#define FSYNC_INTERVAL_USEC (1000ULL * 1000)
/* Gather records this long before a transaction, also while they keep coming: one
 * transaction a second for many records, not a commit (and a server-side log flush) per
 * exec. 100 ms cost a busy sandboxd measurably more (bench/bench_records.py: mariadbd 48
 * against 33 us of CPU per exec, and a wake-up of the writer ten times as often). */
#define COALESCE_USEC (1000ULL * 1000)
#define RETENTION_INTERVAL_USEC (3600ULL * 1000 * 1000)
#define PASSWORD_MAX 4096
#define WRITER_NICE_INCREMENT 10

typedef struct Writer Writer;
typedef struct ListQuery ListQuery;

struct Recorder {
        Writer *writer;              /* the thread's state; touched by the thread alone */
        RecorderSettings settings;   /* a copy; the thread reads it, nobody writes it */
        bool use_db;
        int dir_fd;

        pthread_mutex_t lock;
        pthread_cond_t cond;
        pthread_t thread;
        bool thread_started;
        /* Under lock (the event loop reads spool_fd without it: only the thread changes it,
         * under the lock, and the event loop's own use is under the lock too): */
        int spool_fd;                /* O_RDWR|O_APPEND; replaced by compaction */
        uint64_t next_seq;           /* the event loop's alone */
        uint64_t appended;           /* count of appends, to tell the thread there is work */
        atomic_bool stop;            /* also read without the lock, by long work that stops early */
        bool write_failed;           /* to log a failing disk once, not per record */
        bool writer_idle;            /* the writer waits for records (nothing else to do) */
        bool writer_woken;           /* … and a record came: it starts a coalescing window */

        /* The event loop's alone: the queries under way, and the eventfd their threads
         * signal when they are done. */
        ListQuery *queries[RECORDER_LIST_QUERIES_MAX];
        int query_fd;
        sd_event_source *query_source;
};

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
};

/* ---- settings ------------------------------------------------------------------- */

int recorder_settings_init(RecorderSettings *s) {
        *s = (RecorderSettings) {
                .mariadb_port = 3306,
                .enabled = true,
        };
        return 0;
}

void recorder_settings_done(RecorderSettings *s) {
        free(s->spool_dir);
        free(s->mariadb_socket);
        free(s->mariadb_host);
        free(s->mariadb_database);
        free(s->mariadb_user);
        if (s->mariadb_password) {
                explicit_bzero(s->mariadb_password, strlen(s->mariadb_password));
                free(s->mariadb_password);
        }
        *s = (RecorderSettings) {};
}

typedef struct SettingsFile {
        RecorderSettings s;
        char *password_file;
} SettingsFile;

static const ConfigTableItem recorder_table[] = {
        { "Recording", "Record",         config_parse_bool,    offsetof(SettingsFile, s.enabled),          "yes or no" },
        { "Recording", "SpoolDirectory", config_parse_path,    offsetof(SettingsFile, s.spool_dir),        "an absolute path" },
        { "Recording", "MariaDBSocket",  config_parse_path,    offsetof(SettingsFile, s.mariadb_socket),   "an absolute path" },
        { "Recording", "MariaDBHost",    config_parse_string,  offsetof(SettingsFile, s.mariadb_host),     "a host name or address" },
        { "Recording", "MariaDBPort",    config_parse_port,    offsetof(SettingsFile, s.mariadb_port),     "a port, 1…65535" },
        { "Recording", "Database",       config_parse_string,  offsetof(SettingsFile, s.mariadb_database), "a database name" },
        { "Recording", "User",           config_parse_string,  offsetof(SettingsFile, s.mariadb_user),     "a user name" },
        { "Recording", "PasswordFile",   config_parse_path,    offsetof(SettingsFile, password_file),      "an absolute path" },
        { "Recording", "Retention",      config_parse_seconds, offsetof(SettingsFile, s.retention_sec),    "seconds with an optional unit (s, min, h, d)" },
};

static int read_password(const char *path, char **ret) {
        char buf[PASSWORD_MAX + 2];
        ssize_t n;
        int fd;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, sizeof(buf) - 1);
        safe_close(fd);
        if (n < 0)
                return -errno;
        if (n > PASSWORD_MAX)
                return -E2BIG;
        buf[n] = 0;
        /* One line: a trailing newline (as editors and echo leave) is not part of it. */
        if (n > 0 && buf[n - 1] == '\n')
                buf[--n] = 0;
        if (n > 0 && buf[n - 1] == '\r')
                buf[--n] = 0;
        if (memchr(buf, 0, (size_t) n)) {
                explicit_bzero(buf, sizeof(buf));
                return -EINVAL;
        }
        *ret = strdup(buf);
        explicit_bzero(buf, sizeof(buf));
        return *ret ? 0 : -ENOMEM;
}

int recorder_settings_load(RecorderSettings *s, const char *path) {
        _cleanup_free_ char *dropins = NULL, *cred = NULL;
        SettingsFile f = { .s = *s };
        const char *main_path = path ?: SANDBOX_CONF_FILE;
        const char *creds;
        int r;

        if (asprintf(&dropins, "%s.d", main_path) < 0)
                return -ENOMEM;
        r = config_parse_with_dropins(main_path, dropins, recorder_table, ELEMENTSOF(recorder_table), &f);
        *s = f.s;
        if (r < 0) {
                free(f.password_file);
                return r;
        }
        if (path && access(path, F_OK) < 0) {
                free(f.password_file);
                return log_error_errno(errno, "Cannot read %s: %m", path);
        }

        /* systemd's LoadCredential=mariadb-password:… wins over PasswordFile=. */
        creds = getenv("CREDENTIALS_DIRECTORY");
        if (creds && asprintf(&cred, "%s/mariadb-password", creds) < 0) {
                free(f.password_file);
                return -ENOMEM;
        }
        if (cred && access(cred, F_OK) >= 0) {
                free(f.password_file);
                f.password_file = TAKE_PTR(cred);
        }
        if (f.password_file) {
                char *pw = NULL;
                r = read_password(f.password_file, &pw);
                if (r < 0) {
                        log_error_errno(r, "Failed to read the MariaDB password from %s: %m", f.password_file);
                        free(f.password_file);
                        return r;
                }
                free(s->mariadb_password);
                s->mariadb_password = pw;
        }
        free(f.password_file);

        if (s->mariadb_socket && s->mariadb_host)
                log_warning("Both MariaDBSocket= and MariaDBHost= are set; using the socket.");
        if ((s->mariadb_socket || s->mariadb_host) && !s->mariadb_database)
                return log_error_errno(EINVAL, "MariaDB is configured but Database= is not.");
        return 0;
}

static int settings_copy(const RecorderSettings *src, RecorderSettings *dst) {
        *dst = *src;
        dst->spool_dir = dst->mariadb_socket = dst->mariadb_host = NULL;
        dst->mariadb_database = dst->mariadb_user = dst->mariadb_password = NULL;
#define DUP(field)                                                      \
        if (src->field && !(dst->field = strdup(src->field)))           \
                return -ENOMEM
        DUP(spool_dir);
        DUP(mariadb_socket);
        DUP(mariadb_host);
        DUP(mariadb_database);
        DUP(mariadb_user);
        DUP(mariadb_password);
#undef DUP
        return 0;
}

/* ---- time ----------------------------------------------------------------------- */

static uint64_t now_usec(clockid_t clock) {
        struct timespec ts;
        clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000ULL;
}

/* Our threads take no signals: the event loop handles them. */
static int thread_start(pthread_t *ret, const char *name, void *(*fn)(void *), void *userdata) {
        sigset_t all, old;
        int k;

        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        k = -pthread_create(ret, NULL, fn, userdata);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (k < 0)
                return k;
        (void) pthread_setname_np(*ret, name);
        return 0;
}

/* ---- the event loop's side ------------------------------------------------------- */

static void recorder_append(Recorder *r, char *line, size_t size) {
        ssize_t n;

        pthread_mutex_lock(&r->lock);
        n = write(r->spool_fd, line, size);
        if (n != (ssize_t) size) {
                int e = n < 0 ? errno : ENOSPC;
                /* A line cut short: end it, so that the next record starts on its own line
                 * (readers skip what does not parse). */
                if (n > 0 && write(r->spool_fd, "\n", 1) != 1)
                        e = errno;
                if (!r->write_failed)
                        log_error_errno(e, "Failed to append to the record spool in %s, records are being lost: %m",
                                        r->settings.spool_dir);
                r->write_failed = true;
        } else if (r->write_failed) {
                log_info("Appending to the record spool works again.");
                r->write_failed = false;
        }
        r->appended++;
        /* Wake the writer only when it sleeps with nothing to do, and only when there is a
         * database to write to (the spool alone needs just the periodic fdatasync()): a
         * wake-up per exec costs more than the write(2) itself on a busy machine. */
        if (r->use_db && r->writer_idle) {
                r->writer_idle = false;
                r->writer_woken = true;
                pthread_cond_signal(&r->cond);
        }
        pthread_mutex_unlock(&r->lock);
}

void recorder_exec_event(Recorder *r, const ExecRecordEvent *ev) {
        _cleanup_free_ char *line = NULL;
        size_t size;
        int k;

        if (!r)
                return;
        k = spool_format_exec(r->next_seq, ev, &line, &size);
        if (k < 0) {
                log_error_errno(k, "Failed to record exec %s/%llu: %m", ev->sandbox_id,
                                (unsigned long long) ev->exec_id);
                return;
        }
        r->next_seq++;
        recorder_append(r, line, size);
}

void recorder_sandbox_event(Recorder *r, const SandboxRecordEvent *ev) {
        _cleanup_free_ char *line = NULL;
        size_t size;
        int k;

        if (!r)
                return;
        k = spool_format_sandbox(r->next_seq, ev, &line, &size);
        if (k < 0) {
                log_error_errno(k, "Failed to record sandbox %s: %m", ev->sandbox_id);
                return;
        }
        r->next_seq++;
        recorder_append(r, line, size);
}

void recorder_template_event(Recorder *r, const TemplateRecordEvent *ev) {
        _cleanup_free_ char *line = NULL;
        size_t size;
        int k;

        if (!r)
                return;
        k = spool_format_template(r->next_seq, ev, &line, &size);
        if (k < 0) {
                log_error_errno(k, "Failed to record template %s: %m", ev->name);
                return;
        }
        r->next_seq++;
        recorder_append(r, line, size);
}

/* ---- the writer thread ----------------------------------------------------------- */

struct Writer {
        Recorder *r;
        RecorderDB *db;
        int read_fd;                 /* the spool, for reading; same file as spool_fd */
        uint64_t read_offset;        /* the first record not yet in MariaDB */
        uint64_t cursor;             /* its seq - 1: the last record committed */
        bool positioned;
        uint64_t backoff_usec;
        uint64_t retry_at;           /* CLOCK_MONOTONIC µs */
        uint64_t next_fsync, next_retention;
        uint64_t synced;             /* r->appended when last fdatasync()ed */
        uint64_t replay_seen;        /* r->appended when the last replay began */
        bool outage_logged;
        /* the batch being built */
        json_object *batch[BATCH_MAX];
        size_t n_batch;
        uint64_t batch_end, batch_last_seq;
        unsigned skipped;
};

static void writer_batch_clear(Writer *w) {
        for (size_t i = 0; i < w->n_batch; i++)
                json_object_put(w->batch[i]);
        w->n_batch = 0;
}

static int batch_cb(const char *line, size_t size, uint64_t end_offset, void *userdata) {
        Writer *w = userdata;
        json_object *o;

        if (spool_line_parse(line, size, &o) < 0) {
                w->skipped++;
                w->batch_end = end_offset;  /* not a record: nothing to replay */
                return 0;
        }
        w->batch[w->n_batch++] = o;
        w->batch_end = end_offset;
        w->batch_last_seq = spool_get_u64(o, "seq");
        return w->n_batch >= BATCH_MAX ? 1 : 0;
}

static void writer_disconnect(Writer *w, const char *why) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        if (w->db) {
                recorder_db_rollback(w->db);
                w->db = recorder_db_free(w->db);
        }
        if (!w->outage_logged) {
                log_warning("MariaDB is not reachable (%s); records wait in the spool and are written when it is back.",
                            why);
                w->outage_logged = true;
        }
        w->backoff_usec = w->backoff_usec ? MIN(w->backoff_usec * 2, BACKOFF_MAX_USEC) : BACKOFF_MIN_USEC;
        w->retry_at = now + w->backoff_usec;
}

static int writer_connect(Writer *w) {
        _cleanup_free_ char *error = NULL;
        int k;

        k = recorder_db_connect(&w->r->settings, &w->db, &error);
        if (k < 0) {
                writer_disconnect(w, error ?: "out of memory");
                return k;
        }
        k = recorder_db_migrate(w->db);
        if (k < 0) {
                _cleanup_free_ char *why = strdup(recorder_db_error(w->db));
                writer_disconnect(w, why ?: "schema migration failed");
                return k;
        }
        if (k > 0)
                log_warning("%s", recorder_db_error(w->db));
        if (w->outage_logged)
                log_info("MariaDB is back; replaying the spool.");
        else
                log_info("Recording to MariaDB%s%s.", w->r->settings.mariadb_socket ? " at " : "",
                         strempty(w->r->settings.mariadb_socket));
        w->outage_logged = false;
        w->backoff_usec = 0;
        return 0;
}

static void log_bad_record(json_object *record, const char *why, void *userdata) {
        /* It stays in the spool. */
        log_error("Record %llu of the spool cannot be stored in MariaDB, skipping it: %s",
                  (unsigned long long) spool_get_u64(record, "seq"), why);
}

/* Replays one batch; returns 2 if it was a full one (more may wait), 1 if it was not, 0
 * if there was nothing to do, < 0 on failure (retry_at says when to try again). */
static int writer_replay(Writer *w) {
        bool full;
        int k;

        if (!w->positioned) {
                k = spool_offset_after(w->read_fd, w->cursor, &w->read_offset);
                if (k < 0) {
                        w->retry_at = now_usec(CLOCK_MONOTONIC) + BACKOFF_MAX_USEC;
                        return log_error_errno(k, "Failed to find the cursor's place in the spool: %m");
                }
                w->positioned = true;
        }

        w->batch_end = w->read_offset;
        k = spool_scan(w->read_fd, w->read_offset, batch_cb, w, NULL);
        if (k < 0) {
                writer_batch_clear(w);
                w->retry_at = now_usec(CLOCK_MONOTONIC) + BACKOFF_MAX_USEC;
                return log_error_errno(k, "Failed to read the spool: %m");
        }
        if (w->n_batch == 0) {
                w->read_offset = w->batch_end;  /* only lines that are not records */
                return 0;
        }

        if (!w->db && writer_connect(w) < 0) {
                writer_batch_clear(w);
                return -EAGAIN;
        }

        k = recorder_db_begin(w->db);
        if (k >= 0)
                k = recorder_db_apply(w->db, w->batch, w->n_batch, log_bad_record, NULL);
        if (k >= 0)
                k = recorder_db_commit(w->db);
        if (k < 0) {
                _cleanup_free_ char *why = strdup(w->db ? recorder_db_error(w->db) : "");
                writer_batch_clear(w);
                writer_disconnect(w, why ?: "?");
                return -EAGAIN;
        }

        /* Committed: move the cursor. A crash before this only replays the batch again,
         * which the idempotent keys absorb. */
        k = spool_cursor_write(w->r->dir_fd, w->batch_last_seq);
        if (k < 0)
                log_warning_errno(k, "Failed to update the spool cursor, ignoring: %m");
        w->cursor = w->batch_last_seq;
        w->read_offset = w->batch_end;
        full = w->n_batch == BATCH_MAX;
        writer_batch_clear(w);
        return full ? 2 : 1;
}

static int copy_range(int from, int to, uint64_t start, uint64_t end, const atomic_bool *stop) {
        char buf[64 * 1024];

        while (start < end) {
                if (stop && atomic_load(stop))
                        return -ECANCELED;
                ssize_t n = pread(from, buf, (size_t) MIN((uint64_t) sizeof(buf), end - start), (off_t) start);
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -EIO;
                for (ssize_t done = 0; done < n; ) {
                        ssize_t m = write(to, buf + done, (size_t) (n - done));
                        if (m < 0)
                                return -errno;
                        done += m;
                }
                start += (uint64_t) n;
        }
        return 0;
}

/* Rewrites the spool from offset cut on. The bulk is copied without the lock; the lock
 * is held only to copy what was appended meanwhile and to swap the files, so that the
 * event loop waits at most for that tail. */
static int writer_compact(Writer *w, uint64_t cut) {
        Recorder *r = w->r;
        _cleanup_close_ int tmp = -EBADF, rd = -EBADF;
        struct stat st;
        uint64_t snapshot;
        int k;

        if (fstat(w->read_fd, &st) < 0)
                return -errno;
        snapshot = (uint64_t) st.st_size;
        tmp = openat(r->dir_fd, SPOOL_FILE ".new", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (tmp < 0)
                return -errno;
        k = copy_range(w->read_fd, tmp, cut, snapshot, &r->stop);
        if (k >= 0 && fdatasync(tmp) < 0)
                k = -errno;
        if (k < 0)
                goto fail;

        pthread_mutex_lock(&r->lock);
        if (fstat(r->spool_fd, &st) < 0)
                k = -errno;
        if (k >= 0)
                k = copy_range(w->read_fd, tmp, snapshot, (uint64_t) st.st_size, NULL);
        if (k >= 0 && fcntl(tmp, F_SETFL, O_APPEND) < 0)
                k = -errno;
        if (k >= 0 && renameat(r->dir_fd, SPOOL_FILE ".new", r->dir_fd, SPOOL_FILE) < 0)
                k = -errno;
        if (k >= 0) {
                rd = openat(r->dir_fd, SPOOL_FILE, O_RDONLY | O_CLOEXEC);
                if (rd < 0) {
                        /* Renamed already: the new file is the spool now; read through tmp. */
                        rd = fcntl(tmp, F_DUPFD_CLOEXEC, 3);
                }
                safe_close(r->spool_fd);
                r->spool_fd = TAKE_FD(tmp);
                safe_close(w->read_fd);
                w->read_fd = TAKE_FD(rd);
                w->read_offset = w->read_offset > cut ? w->read_offset - cut : 0;
        }
        pthread_mutex_unlock(&r->lock);
        if (k < 0)
                goto fail;
        (void) fsync(r->dir_fd);
        return 0;

fail:
        (void) unlinkat(r->dir_fd, SPOOL_FILE ".new", 0);
        return k;
}

static void writer_retention(Writer *w) {
        Recorder *r = w->r;
        uint64_t keep_since, cut;
        int k;

        if (r->settings.retention_sec == 0)
                return;
        keep_since = now_usec(CLOCK_REALTIME) - MIN(r->settings.retention_sec * 1000000ULL, now_usec(CLOCK_REALTIME));

        /* Nothing MariaDB has not got yet leaves the spool. */
        if (r->use_db && !w->positioned)
                return;
        k = spool_cut_offset(w->read_fd, keep_since, r->use_db ? w->cursor : UINT64_MAX, &cut);
        if (k < 0) {
                log_warning_errno(k, "Failed to scan the spool for retention, ignoring: %m");
                return;
        }
        if (cut > 0) {
                k = writer_compact(w, cut);
                if (k == -ECANCELED)
                        return;  /* sandboxd is stopping; the next start compacts */
                if (k < 0)
                        log_warning_errno(k, "Failed to compact the spool, ignoring: %m");
                else
                        log_info("Pruned %llu bytes of records older than the retention from the spool.",
                                 (unsigned long long) cut);
        }
        if (w->db) {
                k = recorder_db_prune(w->db, keep_since, &r->stop);
                if (k < 0 && k != -ECANCELED) {
                        _cleanup_free_ char *why = strdup(recorder_db_error(w->db));
                        writer_disconnect(w, why ?: "?");
                }
        }
}

static void *writer_thread(void *userdata) {
        Writer *w = userdata;
        Recorder *r = w->r;
        bool again = true;    /* the spool may hold more than was replayed, or a retry is due */

        mysql_thread_init();
        /* Records are never urgent: the thread yields to the event loop (and to what the
         * sandboxes run) whenever both want a CPU. */
        errno = 0;
        int nice = getpriority(PRIO_PROCESS, (id_t) gettid());
        if (errno == 0 && setpriority(PRIO_PROCESS, (id_t) gettid(), MIN(nice + WRITER_NICE_INCREMENT, 19)) < 0)
                log_debug("Failed to lower the priority of the record writer, ignoring: %m");
        w->next_retention = now_usec(CLOCK_MONOTONIC) + 10ULL * 1000 * 1000;

        for (;;) {
                uint64_t appended, now, wake;
                bool stop, replay = false;

                pthread_mutex_lock(&r->lock);
                for (;;) {
                        struct timespec ts;
                        uint64_t delay;

                        now = now_usec(CLOCK_MONOTONIC);
                        stop = atomic_load(&r->stop);
                        appended = r->appended;
                        replay = r->use_db && (again || appended != w->replay_seen) && now >= w->retry_at;
                        if (stop || replay)
                                break;
                        if (appended != w->synced && now >= w->next_fsync)
                                break;
                        if (now >= w->next_retention)
                                break;

                        wake = w->next_retention;
                        if (appended != w->synced)
                                wake = MIN(wake, w->next_fsync);
                        if (r->use_db && (again || appended != w->replay_seen))
                                wake = MIN(wake, w->retry_at);
                        /* Idle: the event loop wakes us for the next record (DB only). */
                        r->writer_idle = r->use_db && !again && appended == w->replay_seen;
                        delay = wake - now;
                        clock_gettime(CLOCK_MONOTONIC, &ts);
                        ts.tv_sec += (time_t) (delay / 1000000ULL);
                        ts.tv_nsec += (long) (delay % 1000000ULL) * 1000L;
                        if (ts.tv_nsec >= 1000000000L) {
                                ts.tv_sec++;
                                ts.tv_nsec -= 1000000000L;
                        }
                        (void) pthread_cond_timedwait(&r->cond, &r->lock, &ts);
                        if (r->writer_woken)
                                w->retry_at = MAX(w->retry_at, now_usec(CLOCK_MONOTONIC) + COALESCE_USEC);
                        r->writer_idle = r->writer_woken = false;
                }
                if (replay)
                        w->replay_seen = appended;
                pthread_mutex_unlock(&r->lock);
                if (stop)
                        break;

                /* Durable within FSYNC_INTERVAL: the event loop never waits for the disk. */
                if (appended != w->synced && now >= w->next_fsync) {
                        if (fdatasync(w->read_fd) < 0)
                                log_warning_errno(errno, "Failed to sync the spool: %m");
                        w->synced = appended;
                        w->next_fsync = now + FSYNC_INTERVAL_USEC;
                }

                if (replay) {
                        int k = writer_replay(w);
                        /* A full batch: more is waiting, go on. Failed: again at retry_at.
                         * Otherwise the spool is replayed up to what was there when the batch
                         * was read; what came meanwhile waits for the next window, so that
                         * records arriving steadily go in one transaction per COALESCE, not
                         * one small transaction each. */
                        again = k == 2 || k < 0;
                        if (k == 1)
                                w->retry_at = now_usec(CLOCK_MONOTONIC) + COALESCE_USEC;
                }

                if (now >= w->next_retention) {
                        writer_retention(w);
                        w->next_retention = now_usec(CLOCK_MONOTONIC) + RETENTION_INTERVAL_USEC;
                }
        }

        writer_batch_clear(w);
        w->db = recorder_db_free(w->db);
        mysql_thread_end();
        return NULL;
}

/* ---- queries --------------------------------------------------------------------- */

static void execution_record_done(ExecutionRecord *e) {
        free(e->sandbox_id);
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

static int list_cb(const char *line, size_t size, uint64_t end_offset, void *userdata) {
        static const char exec_type[] = ",\"type\":\"exec\",";
        _cleanup_json_ json_object *o = NULL;
        ListQuery *q = userdata;
        const ExecutionFilter *f = &q->filter;
        ExecutionRecord *e;
        json_object *argv;
        uint64_t owner, caller;
        const char *s;
        size_t l, n;
        int k;

        if (atomic_load_explicit(&q->cancel, memory_order_relaxed))
                return -ECANCELED;
        /* Cheap test first: most lines of a busy spool are someone else's. */
        if (!memmem(line, MIN(size, (size_t) 48), exec_type, sizeof(exec_type) - 1))
                return 0;
        if (spool_line_parse(line, size, &o) < 0)
                return 0;

        if (f->since > 0 && spool_get_u64(o, "time") < f->since)
                return 1;  /* ended before since: so did everything before it */
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

        if (q->n_records == q->n_allocated) {
                size_t a = MIN(MAX(q->n_allocated * 2, (size_t) 16), (size_t) q->limit);
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
                .stdout_bytes = spool_get_u64(o, "stdout_bytes"),
                .stderr_bytes = spool_get_u64(o, "stderr_bytes"),
        };
        k = text_dup(s, l, &e->sandbox_id);
        if (k < 0)
                return k;
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
        return q->n_records >= q->limit ? 1 : 0;
}

static void *list_query_thread(void *userdata) {
        ListQuery *q = userdata;
        int fd = q->r->query_fd;  /* q may be gone once finished is set */

        q->error = spool_scan_backwards(q->spool_fd, RECORDER_LIST_SCAN_MAX, list_cb, q);
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

        k = thread_start(&q->thread, "sandboxd-query", list_query_thread, q);
        if (k < 0)
                return k;
        r->queries[slot] = TAKE_PTR(q);
        return 0;
}

/* ---- lifecycle ------------------------------------------------------------------- */

static int mkdir_p(const char *path, mode_t mode) {
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return -ENOMEM;
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = 0;
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

int recorder_new(sd_event *event, const RecorderSettings *settings, Recorder **ret) {
        _cleanup_(recorder_freep) Recorder *r = NULL;
        uint64_t last = 0, cursor = 0;
        Writer *w;
        int k;

        if (!event || !settings->spool_dir || settings->spool_dir[0] != '/')
                return -EINVAL;
        r = calloc(1, sizeof(Recorder));
        if (!r)
                return -ENOMEM;
        r->dir_fd = r->spool_fd = r->query_fd = -EBADF;
        pthread_mutex_init(&r->lock, NULL);
        {
                pthread_condattr_t a;
                pthread_condattr_init(&a);
                pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
                pthread_cond_init(&r->cond, &a);
                pthread_condattr_destroy(&a);
        }
        k = settings_copy(settings, &r->settings);
        if (k < 0)
                return k;
        r->use_db = settings->mariadb_socket || settings->mariadb_host;

        k = mkdir_p(settings->spool_dir, 0700);
        if (k < 0)
                return k;
        r->dir_fd = open(settings->spool_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (r->dir_fd < 0)
                return -errno;
        (void) unlinkat(r->dir_fd, SPOOL_FILE ".new", 0);  /* an interrupted compaction */
        r->spool_fd = openat(r->dir_fd, SPOOL_FILE, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (r->spool_fd < 0)
                return -errno;

        /* seq goes on from the newest record, or from the cursor if compaction emptied
         * the spool, so that the cursor never points past a new record. */
        k = spool_last_seq(r->spool_fd, &last);
        if (k < 0)
                return k;
        k = spool_cursor_read(r->dir_fd, &cursor);
        if (k < 0 && k != -ENOENT)
                log_warning_errno(k, "Ignoring the unreadable spool cursor, replaying the whole spool: %m");
        if (k < 0)
                cursor = 0;
        r->next_seq = MAX(last, cursor) + 1;

        r->query_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (r->query_fd < 0)
                return -errno;
        k = sd_event_add_io(event, &r->query_source, r->query_fd, EPOLLIN, on_query_done, r);
        if (k < 0)
                return k;
        (void) sd_event_source_set_description(r->query_source, "recorder-query");

        w = calloc(1, sizeof(Writer));
        if (!w)
                return -ENOMEM;
        w->r = r;
        w->cursor = cursor;
        w->read_fd = openat(r->dir_fd, SPOOL_FILE, O_RDONLY | O_CLOEXEC);
        if (w->read_fd < 0) {
                k = -errno;
                free(w);
                return k;
        }
        r->writer = w;

        if (r->use_db && mysql_library_init(0, NULL, NULL) != 0)
                return -ENOMEM;

        k = thread_start(&r->thread, "sandboxd-record", writer_thread, w);
        if (k < 0)
                return k;
        r->thread_started = true;

        *ret = TAKE_PTR(r);
        return 0;
}

Recorder *recorder_free(Recorder *r) {
        Writer *w;

        if (!r)
                return NULL;

        /* Stop all the queries first, then wait for each. */
        for (size_t i = 0; i < RECORDER_LIST_QUERIES_MAX; i++)
                if (r->queries[i])
                        atomic_store(&r->queries[i]->cancel, true);
        for (size_t i = 0; i < RECORDER_LIST_QUERIES_MAX; i++)
                if (r->queries[i])
                        list_query_finish(r, i, -ECANCELED);
        sd_event_source_disable_unref(r->query_source);
        safe_close(r->query_fd);

        w = r->writer;
        if (r->thread_started) {
                pthread_mutex_lock(&r->lock);
                atomic_store(&r->stop, true);
                pthread_cond_signal(&r->cond);
                pthread_mutex_unlock(&r->lock);
                pthread_join(r->thread, NULL);
        }
        if (w) {
                if (w->read_fd >= 0) {
                        (void) fdatasync(w->read_fd);
                        safe_close(w->read_fd);
                }
                free(w);
        }
        safe_close(r->spool_fd);
        safe_close(r->dir_fd);
        recorder_settings_done(&r->settings);
        pthread_cond_destroy(&r->cond);
        pthread_mutex_destroy(&r->lock);
        if (r->use_db)
                mysql_library_end();
        free(r);
        return NULL;
}
