/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the recorder's three parts share: recorder.c (the event loop's side, settings and
 * lifecycle), recorder-writer.c (the writer thread: fdatasync, replay into MariaDB,
 * retention) and recorder-query.c (ListExecutions, a thread per query). */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "recorder.h"

typedef struct Writer Writer;
typedef struct ListQuery ListQuery;
typedef struct FleetQuota FleetQuota;

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
        /* The last record committed to MariaDB (the writer's cursor), for the backlog. */
        _Atomic uint64_t committed_seq;
        atomic_bool stop;            /* also read without the lock, by long work that stops early */
        bool write_failed;           /* to log a failing disk once, not per record */
        bool writer_idle;            /* the writer waits for records (nothing else to do) */
        bool writer_woken;           /* … and a record came: it starts a coalescing window */

        /* The event loop's alone: the queries under way, and the eventfd their threads
         * signal when they are done. */
        ListQuery *queries[RECORDER_LIST_QUERIES_MAX];
        int query_fd;
        sd_event_source *query_source;

        sd_event *event;             /* the loop's (it outlives the recorder) */
        FleetQuota *fleet;           /* recorder-fleet.c: a fleet's tenant quotas, or NULL */
};

/* Starts a thread that takes no signals (the event loop handles them), named NAME. */
int recorder_thread_start(pthread_t *ret, const char *name, void *(*fn)(void *), void *userdata);

/* recorder-writer.c: the writer's state, reading the spool from its own descriptor;
 * writer_thread() is the thread's function. writer_free() syncs and closes the spool. */
int writer_new(Recorder *r, uint64_t cursor, Writer **ret);
Writer *writer_free(Writer *w);
void *writer_thread(void *userdata);

/* recorder-query.c: the eventfd the query threads wake the loop with; done() cancels the
 * queries under way and answers each with -ECANCELED. */
int recorder_queries_init(Recorder *r, sd_event *event);
void recorder_queries_done(Recorder *r);
