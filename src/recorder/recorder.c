/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The recorder. The event loop formats each record and appends it to the spool with one
 * write(2) to a file opened O_APPEND (microseconds; the page cache has it when write()
 * returns, so a crash of sandboxd loses nothing). Everything that may take long happens
 * on the writer thread (recorder-writer.c); queries run on threads of their own
 * (recorder-query.c). This file is the event loop's side and the lifecycle. */

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mysql.h>

#include "fd-util.h"
#include "log.h"
#include "macro.h"
#include "recorder-internal.h"
#include "recorder-spool.h"

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

/* Our threads take no signals: the event loop handles them. */
int recorder_thread_start(pthread_t *ret, const char *name, void *(*fn)(void *), void *userdata) {
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

/* Appends what spool_format_*() made of a record (k its result) in *line and *size
 * (pointers: they are read once the call that fills them has returned), WHAT ID naming it
 * in the log if it could not. */
static void recorder_add(Recorder *r, int k, char *const *line, const size_t *size, const char *what,
                         const char *id) {
        if (k < 0) {
                log_error_errno(k, "Failed to record %s %s: %m", what, id);
                return;
        }
        r->next_seq++;
        recorder_append(r, *line, *size);
}

void recorder_sandbox_event(Recorder *r, const SandboxRecordEvent *ev) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;

        if (r)
                recorder_add(r, spool_format_sandbox(r->next_seq, ev, &line, &size), &line, &size, "sandbox",
                             ev->sandbox_id);
}

void recorder_template_event(Recorder *r, const TemplateRecordEvent *ev) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;

        if (r)
                recorder_add(r, spool_format_template(r->next_seq, ev, &line, &size), &line, &size, "template",
                             ev->name);
}

void recorder_snapshot_event(Recorder *r, const SnapshotRecordEvent *ev) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;

        if (r)
                recorder_add(r, spool_format_snapshot(r->next_seq, ev, &line, &size), &line, &size, "snapshot",
                             ev->snapshot_id);
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
        int k;

        if (!event || !settings->spool_dir || settings->spool_dir[0] != '/')
                return -EINVAL;
        r = calloc(1, sizeof(Recorder));
        if (!r)
                return -ENOMEM;
        r->dir_fd = r->spool_fd = r->query_fd = -EBADF;
        r->event = event;
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
        atomic_store(&r->committed_seq, cursor);

        k = recorder_queries_init(r, event);
        if (k < 0)
                return k;

        k = writer_new(r, cursor, &r->writer);
        if (k < 0)
                return k;

        if (r->use_db && mysql_library_init(0, NULL, NULL) != 0)
                return -ENOMEM;

        k = recorder_thread_start(&r->thread, "sandboxd-record", writer_thread, r->writer);
        if (k < 0)
                return k;
        r->thread_started = true;

        *ret = TAKE_PTR(r);
        return 0;
}

Recorder *recorder_free(Recorder *r) {
        if (!r)
                return NULL;

        recorder_fleet_quota_stop(r);
        recorder_queries_done(r);

        if (r->thread_started) {
                pthread_mutex_lock(&r->lock);
                atomic_store(&r->stop, true);
                pthread_cond_signal(&r->cond);
                pthread_mutex_unlock(&r->lock);
                pthread_join(r->thread, NULL);
        }
        r->writer = writer_free(r->writer);
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

static void on_sandbox_record(const SandboxRecordEvent *ev, void *userdata) {
        recorder_sandbox_event(userdata, ev);
}

static void on_exec_record(const ExecRecordEvent *ev, void *userdata) {
        recorder_exec_event(userdata, ev);
}

static void on_template_record(const TemplateRecordEvent *ev, void *userdata) {
        recorder_template_event(userdata, ev);
}

static void on_snapshot_record(const SnapshotRecordEvent *ev, void *userdata) {
        recorder_snapshot_event(userdata, ev);
}

int recorder_subscribe(Recorder *r, Manager *m, ManagerSubscription **ret) {
        static const ManagerHooks hooks = {
                .sandbox_record = on_sandbox_record,
                .exec_record = on_exec_record,
                .template_record = on_template_record,
                .snapshot_record = on_snapshot_record,
        };

        return manager_subscribe(m, &hooks, r, ret);
}

uint64_t recorder_spool_backlog(Recorder *r) {
        uint64_t committed, last;

        if (!r || !r->use_db)
                return 0;
        committed = atomic_load(&r->committed_seq);
        last = r->next_seq - 1;
        return last > committed ? last - committed : 0;
}
