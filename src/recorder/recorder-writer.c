/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The writer thread: everything of the recorder that may take long. fdatasync() of the
 * spool (at most every FSYNC_INTERVAL while records come), the replay into MariaDB
 * (batches, one transaction each, then the cursor), retries with backoff while MariaDB
 * is away, and retention (compaction of the spool, DELETE of old rows). It touches
 * nothing of sd-event or sd-bus; it shares struct Recorder with the event loop under one
 * mutex, which the loop holds for its write(2) alone. */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mysql.h>

#include "fd-util.h"
#include "json-util.h"
#include "log.h"
#include "macro.h"
#include "recorder-internal.h"
#include "recorder-mariadb.h"
#include "recorder-spool.h"
#include "time-util.h"

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
#define WRITER_NICE_INCREMENT 10

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
        atomic_store(&w->r->committed_seq, w->cursor);
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

void *writer_thread(void *userdata) {
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

int writer_new(Recorder *r, uint64_t cursor, Writer **ret) {
        Writer *w;
        int k;

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
        *ret = w;
        return 0;
}

Writer *writer_free(Writer *w) {
        if (!w)
                return NULL;
        if (w->read_fd >= 0) {
                (void) fdatasync(w->read_fd);
                safe_close(w->read_fd);
        }
        free(w);
        return NULL;
}
