/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A log reader is two halves joined by a SOCK_SEQPACKET socketpair, one datagram per
 * entry. The thread's half owns an sd_journal and nothing else (sd-journal objects are
 * not to be shared between threads) and is detached: it ends on its own once its entries
 * are out or the loop's half is gone, and never makes the loop wait. The loop's half hands
 * each datagram to the front end. The socket is the queue: when the front end is full and
 * pauses, the socket fills and the thread waits in send(); when the front end ends the
 * reader, the thread's next send() or poll() sees the socket closed. */

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <systemd/sd-event.h>
#include <systemd/sd-journal.h>

#include "sandbox-internal.h"
#include "sandbox-logs.h"
#include "strv.h"
#include "time-util.h"

/* Once the sandbox is gone a follower still reads what journald writes: until sandboxd's
 * last words about the sandbox (SANDBOX_REMOVED_FORMAT) came through journald and then
 * nothing for LOG_GONE_QUIET_USEC, and for LOG_GONE_MAX_USEC at most (journald may be slow
 * to write them on a loaded machine). */
#define LOG_GONE_QUIET_USEC (250ULL * 1000ULL)
#define LOG_GONE_MAX_USEC (5ULL * 1000000ULL)
/* Entries handed on per wakeup of the loop: other work gets its turn in between. */
#define LOG_ENTRIES_PER_DISPATCH 64U

enum {
        LOG_DATAGRAM_ENTRY,
        LOG_DATAGRAM_END,
};
/* The one note from the loop to the thread: the sandbox is gone. */
#define LOG_NOTE_GONE 'g'

/* A datagram: this header, then the identifier and the message. */
typedef struct LogDatagram {
        uint32_t type;
        int32_t value;              /* ENTRY: the priority (-1: none); END: 0 or a negative errno */
        uint64_t realtime_usec;
        uint32_t identifier_size;
        uint32_t message_size;
        uint32_t truncated;
} LogDatagram;

#define LOG_DATAGRAM_MAX (sizeof(LogDatagram) + SANDBOX_LOG_IDENTIFIER_MAX + SANDBOX_LOG_MESSAGE_MAX)

/* Threads alive in all. They may outlive their readers and the Manager (they end on their
 * own), so the count is not the Manager's. */
static atomic_uint log_threads;

typedef struct LogWorker {
        int fd;
        char **matches;
        unsigned lines;
        bool follow;
        uint64_t since;             /* µs CLOCK_REALTIME: older entries are not this sandbox's
                                     * (a recycled one's unit served earlier users) */
        bool saw_removed;           /* sandboxd's last line about the sandbox came */
        char *removed;              /* that line: SANDBOX_REMOVED_FORMAT */
        uint8_t *message;           /* SANDBOX_LOG_MESSAGE_MAX */
} LogWorker;

struct LogReader {
        Manager *manager;
        char sandbox_id[SANDBOX_ID_LEN + 1];
        uid_t uid;
        int fd;
        sd_event_source *source;
        log_entry_callback_t entry_cb;
        log_end_callback_t end_cb;
        void *userdata;
        uint8_t *buf;               /* LOG_DATAGRAM_MAX */
        LogReader *next, *prev;
};

int sandbox_logs_matches(const char *id, const char *unit, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;

        /* sandboxd's own messages about it; its payload's journald stream (bwrap and the
         * agent, payload-bwrap.c); PID 1's about its unit; a container's own output when
         * dockerd logs to the journal (its journald log driver). */
        if (strv_extendf(&l, "SANDBOX_ID=%s", id) < 0 ||
            strv_extend(&l, "+") < 0 ||
            strv_extendf(&l, "SYSLOG_IDENTIFIER=%s", unit) < 0 ||
            strv_extend(&l, "+") < 0 ||
            strv_extendf(&l, "UNIT=%s", unit) < 0 ||
            strv_extend(&l, "_PID=1") < 0 ||
            strv_extend(&l, "+") < 0 ||
            strv_extendf(&l, "CONTAINER_NAME=sandbox-%s", id) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(l);
        return 0;
}

/* ---- the thread's half ---------------------------------------------------------- */

static LogWorker *log_worker_free(LogWorker *w) {
        if (!w)
                return NULL;
        safe_close(w->fd);
        strv_free(w->matches);
        free(w->removed);
        free(w->message);
        return mfree(w);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(LogWorker *, log_worker_free);

static int worker_send(LogWorker *w, const LogDatagram *h, const void *identifier, const void *message) {
        struct iovec iov[] = {
                { .iov_base = (void *) h, .iov_len = sizeof(*h) },
                { .iov_base = (void *) identifier, .iov_len = h->identifier_size },
                { .iov_base = (void *) message, .iov_len = h->message_size },
        };
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = ELEMENTSOF(iov) };

        for (;;) {
                if (sendmsg(w->fd, &mh, MSG_NOSIGNAL) >= 0)
                        return 0;
                if (errno != EINTR)
                        return -errno;
        }
}

/* FIELD's value in the current entry: valid until the next sd_journal_get_data(). */
static int journal_field(sd_journal *j, const char *field, const void **ret, size_t *ret_size) {
        size_t k = strlen(field), l;
        const void *d;
        int r;

        r = sd_journal_get_data(j, field, &d, &l);
        if (r < 0)
                return r;
        if (l <= k || ((const char *) d)[k] != '=')
                return -EBADMSG;
        *ret = (const uint8_t *) d + k + 1;
        *ret_size = l - k - 1;
        return 0;
}

static int worker_send_entry(LogWorker *w, sd_journal *j) {
        LogDatagram h = { .type = LOG_DATAGRAM_ENTRY, .value = -1 };
        char identifier[SANDBOX_LOG_IDENTIFIER_MAX];
        const void *d;
        size_t l;
        int r;

        r = sd_journal_get_realtime_usec(j, &h.realtime_usec);
        if (r < 0)
                return r;
        if (journal_field(j, "PRIORITY", &d, &l) >= 0 && l == 1 && *(const char *) d >= '0' &&
            *(const char *) d <= '7')
                h.value = *(const char *) d - '0';
        /* Each value is copied before the next is asked for. */
        if (journal_field(j, "SYSLOG_IDENTIFIER", &d, &l) >= 0 || journal_field(j, "_COMM", &d, &l) >= 0) {
                h.identifier_size = (uint32_t) MIN(l, sizeof(identifier));
                memcpy(identifier, d, h.identifier_size);
        }
        if (journal_field(j, "MESSAGE", &d, &l) >= 0) {
                h.truncated = l > SANDBOX_LOG_MESSAGE_MAX;
                h.message_size = (uint32_t) MIN(l, (size_t) SANDBOX_LOG_MESSAGE_MAX);
                memcpy(w->message, d, h.message_size);
                if (w->removed && l == strlen(w->removed) && memcmp(d, w->removed, l) == 0)
                        w->saw_removed = true;
        }
        return worker_send(w, &h, identifier, w->message);
}

static int worker_add_matches(LogWorker *w, sd_journal *j) {
        int r;

        for (char **m = w->matches; *m; m++) {
                r = streq(*m, "+") ? sd_journal_add_disjunction(j) : sd_journal_add_match(j, *m, 0);
                if (r < 0)
                        return r;
        }
        r = sd_journal_add_conjunction(j);
        if (r < 0)
                return r;
        return sd_journal_add_match(j, "_UID=0", 0);
}

static int usec_to_poll_timeout(uint64_t usec) {
        return (int) MIN((usec + 999) / 1000, (uint64_t) INT32_MAX);
}

/* New entries as journald writes them, until the loop's half is gone or, once the sandbox
 * is, the journal has been quiet a while. */
static int worker_follow(LogWorker *w, sd_journal *j, int journal_fd) {
        uint64_t gone_at = 0, last_entry = 0;
        int r;

        for (;;) {
                struct pollfd p[2] = {
                        { .fd = journal_fd, .events = (short) sd_journal_get_events(j) },
                        { .fd = w->fd, .events = POLLIN },
                };
                uint64_t now, t;
                int timeout = -1;

                r = sd_journal_next(j);
                if (r < 0)
                        return r;
                if (r > 0) {
                        r = worker_send_entry(w, j);
                        if (r < 0)
                                return r;
                        last_entry = now_usec(CLOCK_MONOTONIC);
                        continue;
                }

                now = now_usec(CLOCK_MONOTONIC);
                if (gone_at > 0) {
                        uint64_t end = gone_at + LOG_GONE_MAX_USEC;

                        if (w->saw_removed)
                                end = MIN(MAX(gone_at, last_entry) + LOG_GONE_QUIET_USEC, end);
                        if (now >= end)
                                return 0;
                        timeout = usec_to_poll_timeout(end - now);
                }
                if (sd_journal_get_timeout(j, &t) >= 0 && t != UINT64_MAX) {
                        int k = usec_to_poll_timeout(t > now ? t - now : 0);
                        timeout = timeout < 0 ? k : MIN(timeout, k);
                }

                if (poll(p, ELEMENTSOF(p), timeout) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (p[1].revents & (POLLHUP | POLLERR))
                        return -EPIPE;
                if (p[1].revents & POLLIN) {
                        char c;
                        ssize_t n = recv(w->fd, &c, 1, MSG_DONTWAIT);

                        if (n == 0)
                                return -EPIPE;
                        if (n > 0 && c == LOG_NOTE_GONE && gone_at == 0)
                                gone_at = now_usec(CLOCK_MONOTONIC);
                }
                r = sd_journal_process(j);
                if (r < 0)
                        return r;
        }
}

static int worker_run(LogWorker *w) {
        sd_journal *j = NULL;
        int journal_fd = -EBADF, r;

        r = sd_journal_open(&j, SD_JOURNAL_LOCAL_ONLY | SD_JOURNAL_SYSTEM);
        if (r < 0)
                return r;
        if (w->follow) {
                /* Before reading: what is written from now on wakes us. */
                journal_fd = sd_journal_get_fd(j);
                if (journal_fd < 0) {
                        r = journal_fd;
                        goto finish;
                }
        }
        /* A longer (compressed) message comes cut to this, and is marked truncated. */
        (void) sd_journal_set_data_threshold(j, SANDBOX_LOG_MESSAGE_MAX + 64);
        r = worker_add_matches(w, j);
        if (r < 0)
                goto finish;

        /* The last lines, as journalctl -n does: from the tail, back, then forward. */
        r = sd_journal_seek_tail(j);
        if (r < 0)
                goto finish;
        r = sd_journal_previous_skip(j, w->lines);
        while (r > 0) {
                uint64_t t = 0;

                if (w->since == 0 || (sd_journal_get_realtime_usec(j, &t) >= 0 && t >= w->since))
                        r = worker_send_entry(w, j);
                if (r >= 0)
                        r = sd_journal_next(j);
        }
        if (r >= 0 && w->follow)
                r = worker_follow(w, j, journal_fd);
finish:
        sd_journal_close(j);
        return r;
}

static void *log_worker_thread(void *userdata) {
        _cleanup_(log_worker_freep) LogWorker *w = userdata;
        LogDatagram end = { .type = LOG_DATAGRAM_END };

        end.value = worker_run(w);
        (void) worker_send(w, &end, NULL, NULL);
        w = log_worker_free(w);
        atomic_fetch_sub(&log_threads, 1);
        return NULL;
}

static int log_worker_start(LogWorker *w) {
        pthread_attr_t attr;
        sigset_t all, old;
        pthread_t t;
        int k;

        k = -pthread_attr_init(&attr);
        if (k < 0)
                return k;
        k = -pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (k >= 0) {
                /* The loop takes the signals (signalfd); the thread none. */
                sigfillset(&all);
                pthread_sigmask(SIG_BLOCK, &all, &old);
                atomic_fetch_add(&log_threads, 1);
                k = -pthread_create(&t, &attr, log_worker_thread, w);
                if (k < 0)
                        atomic_fetch_sub(&log_threads, 1);
                pthread_sigmask(SIG_SETMASK, &old, NULL);
                if (k >= 0)
                        (void) pthread_setname_np(t, "sandboxd-logs");
        }
        pthread_attr_destroy(&attr);
        return k;
}

/* ---- the loop's half ------------------------------------------------------------ */

LogReader *log_reader_free(LogReader *r) {
        Manager *m;

        if (!r)
                return NULL;
        m = r->manager;
        if (r->prev)
                r->prev->next = r->next;
        else if (m->log_readers == r)
                m->log_readers = r->next;
        if (r->next)
                r->next->prev = r->prev;
        sd_event_source_disable_unref(r->source);
        /* The thread sees it at its next send() or poll(), and ends. */
        safe_close(r->fd);
        free(r->buf);
        return mfree(r);
}

static void log_reader_end(LogReader *r, int error) {
        r->end_cb(r, error, r->userdata);
        log_reader_free(r);
}

/* The datagram of n bytes in r->buf as an entry; -EBADMSG if it is not one. */
static int log_datagram_parse(LogReader *r, size_t n, LogDatagram *h, char *identifier, SandboxLogEntry *ret) {
        if (n < sizeof(*h))
                return -EBADMSG;
        memcpy(h, r->buf, sizeof(*h));
        if (h->type == LOG_DATAGRAM_END)
                return 0;
        if (h->type != LOG_DATAGRAM_ENTRY || h->identifier_size > SANDBOX_LOG_IDENTIFIER_MAX ||
            h->message_size > SANDBOX_LOG_MESSAGE_MAX || n != sizeof(*h) + h->identifier_size + h->message_size)
                return -EBADMSG;
        memcpy(identifier, r->buf + sizeof(*h), h->identifier_size);
        identifier[h->identifier_size] = 0;
        *ret = (SandboxLogEntry) {
                .realtime_usec = h->realtime_usec,
                .priority = h->value,
                .identifier = identifier,
                .message = r->buf + sizeof(*h) + h->identifier_size,
                .message_size = h->message_size,
                .truncated = h->truncated,
        };
        return 0;
}

static int on_reader_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        LogReader *r = userdata;

        for (unsigned i = 0; i < LOG_ENTRIES_PER_DISPATCH; i++) {
                char identifier[SANDBOX_LOG_IDENTIFIER_MAX + 1];
                SandboxLogEntry e;
                LogDatagram h;
                ssize_t n;
                int k;

                n = recv(r->fd, r->buf, LOG_DATAGRAM_MAX, MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return 0;
                if (n <= 0) {
                        /* The thread always says END before it closes its end. */
                        log_reader_end(r, n < 0 ? -errno : -EPIPE);
                        return 0;
                }
                k = log_datagram_parse(r, (size_t) n, &h, identifier, &e);
                if (k < 0 || h.type == LOG_DATAGRAM_END) {
                        log_reader_end(r, k < 0 ? k : h.value);
                        return 0;
                }
                k = r->entry_cb(r, &e, r->userdata);
                if (k < 0) {
                        log_reader_end(r, k);
                        return 0;
                }
                if (k > 0)
                        return sd_event_source_set_enabled(r->source, SD_EVENT_OFF);
        }
        return 0;
}

int log_reader_resume(LogReader *r) {
        return sd_event_source_set_enabled(r->source, SD_EVENT_ON);
}

int sandbox_logs_open(Sandbox *s, uid_t caller, unsigned lines, bool follow, log_entry_callback_t entry_cb,
                      log_end_callback_t end_cb, void *userdata, LogReader **ret, SandboxError *error) {
        _cleanup_(log_worker_freep) LogWorker *w = NULL;
        _cleanup_(log_reader_freep) LogReader *r = NULL;
        _cleanup_close_pair_ int pair[2] = { -EBADF, -EBADF };
        Manager *m = s->manager;
        unsigned mine = 0, all = 0;
        int k;

        if (lines > SANDBOX_LOGS_LINES_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "lines must be at most %u (0: all).",
                                         SANDBOX_LOGS_LINES_MAX);
        for (LogReader *i = m->log_readers; i; i = i->next) {
                all++;
                if (i->uid == caller)
                        mine++;
        }
        if (mine >= SANDBOX_LOGS_READERS_PER_UID_MAX || all >= SANDBOX_LOGS_READERS_MAX ||
            atomic_load(&log_threads) >= SANDBOX_LOGS_READERS_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_BUSY,
                                         "Too many log readers (at most %u per user, %u in all), try again later.",
                                         SANDBOX_LOGS_READERS_PER_UID_MAX, SANDBOX_LOGS_READERS_MAX);

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return -errno;

        w = calloc(1, sizeof(LogWorker));
        if (!w)
                return -ENOMEM;
        w->fd = -EBADF;
        w->lines = lines > 0 ? lines : SANDBOX_LOGS_LINES_MAX;
        w->follow = follow;
        /* The unit-level lines (its payload's stream, PID 1's) of a recycled sandbox's
         * earlier users are not this user's. */
        w->since = s->recycles > 0 ? s->created_at : 0;
        w->message = malloc(SANDBOX_LOG_MESSAGE_MAX);
        if (!w->message)
                return -ENOMEM;
        k = sandbox_logs_matches(s->id, s->unit, &w->matches);
        if (k < 0)
                return k;
        if (follow && asprintf(&w->removed, SANDBOX_REMOVED_FORMAT, s->id) < 0)
                return -ENOMEM;

        r = calloc(1, sizeof(LogReader));
        if (!r)
                return -ENOMEM;
        *r = (LogReader) {
                .manager = m,
                .uid = caller,
                .fd = TAKE_FD(pair[0]),
                .entry_cb = entry_cb,
                .end_cb = end_cb,
                .userdata = userdata,
        };
        strcpy(r->sandbox_id, s->id);
        r->buf = malloc(LOG_DATAGRAM_MAX);
        if (!r->buf)
                return -ENOMEM;
        k = sd_event_add_io(m->event, &r->source, r->fd, EPOLLIN, on_reader_io, r);
        if (k < 0)
                return k;
        (void) sd_event_source_set_description(r->source, "sandbox-logs");

        w->fd = TAKE_FD(pair[1]);
        k = log_worker_start(w);
        if (k < 0)
                return k;
        TAKE_PTR(w);

        r->next = m->log_readers;
        if (r->next)
                r->next->prev = r;
        m->log_readers = r;
        *ret = TAKE_PTR(r);
        return 0;
}

void sandbox_logs_sandbox_gone(Sandbox *s) {
        for (LogReader *r = s->manager->log_readers; r; r = r->next)
                if (streq(r->sandbox_id, s->id))
                        (void) send(r->fd, &(char) { LOG_NOTE_GONE }, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void manager_logs_done(Manager *m) {
        while (m->log_readers)
                log_reader_end(m->log_readers, -ECANCELED);
}
