/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A sandbox's journal entries: what its payload wrote to its journald stream (identifier
 * sandbox-<id>.scope), what sandboxd logged about it (SANDBOX_ID=<id>), what systemd logged
 * about its unit, and a Docker container's own output when dockerd logs to the journal.
 * The journal is read with sd-journal on a thread of the reader's own, never on the event
 * loop; entries reach the loop through a socket and are handed to the front end one by
 * one, as they come. Front ends render them (a line on a pipe, a varlink reply). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"
#include "sandbox-api.h"
#include "sandbox-errors.h"

/* sandboxd's last line about a sandbox (sandbox.c logs it as the sandbox goes): a follower
 * of its logs ends once journald has written it. */
#define SANDBOX_REMOVED_FORMAT "Sandbox %s removed."

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;
typedef struct LogReader LogReader;

/* Longer messages are cut (SandboxLogEntry.truncated); identifiers too. */
#define SANDBOX_LOG_MESSAGE_MAX (64U * 1024U)
#define SANDBOX_LOG_IDENTIFIER_MAX 256U

typedef struct SandboxLogEntry {
        uint64_t realtime_usec;     /* when journald received it, µs CLOCK_REALTIME */
        int priority;               /* 0 (emerg) … 7 (debug); -1: none given */
        const char *identifier;     /* SYSLOG_IDENTIFIER, else _COMM; "" if neither */
        const void *message;        /* MESSAGE: bytes, not NUL-terminated, not necessarily UTF-8 */
        size_t message_size;
        bool truncated;             /* message was longer than SANDBOX_LOG_MESSAGE_MAX */
} SandboxLogEntry;

/* An entry, valid during the call. Return 0 for more, 1 to pause the reader (the consumer
 * is full; log_reader_resume() when it has room), or a negative errno to end it: the end
 * callback follows with that error. */
typedef int (*log_entry_callback_t)(LogReader *r, const SandboxLogEntry *e, void *userdata);
/* The reader is done: error 0 when all was read (followed: the sandbox is gone), else a
 * negative errno (-ECANCELED: sandboxd is stopping). r is freed when this returns. */
typedef void (*log_end_callback_t)(LogReader *r, int error, void *userdata);

/* Starts reading s's entries for caller: the last lines (0: all, up to
 * SANDBOX_LOGS_LINES_MAX), then, with follow, new ones as they come until the sandbox is
 * gone, the consumer ends the reader, or sandboxd stops. Errors a front end maps:
 * InvalidOption: lines above SANDBOX_LOGS_LINES_MAX; Busy: too many readers, of caller's or
 * in all (error set); anything else is a fault. Callbacks never run from within
 * this call. */
int sandbox_logs_open(Sandbox *s, uid_t caller, unsigned lines, bool follow, log_entry_callback_t entry_cb,
                      log_end_callback_t end_cb, void *userdata, LogReader **ret, SandboxError *error);
/* The consumer has room again after its entry callback returned 1. */
int log_reader_resume(LogReader *r);
/* The consumer went away: ends r without calling back. NULL is fine. Never from within
 * r's callbacks. */
LogReader *log_reader_free(LogReader *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(LogReader *, log_reader_free);

/* For the core: s is going, its followers end once the journal has caught up; sandboxd
 * stops, every reader ends now (-ECANCELED). */
void sandbox_logs_sandbox_gone(Sandbox *s);
void manager_logs_done(Manager *m);

/* The matches of a sandbox's entries, as journalctl takes them: "FIELD=value" terms, "+"
 * between alternatives (terms of different fields within one are ANDed). The reader ANDs
 * all of it with _UID=0, so that only what journald knows came from root (sandboxd, PID 1,
 * dockerd) counts: anyone may log a SANDBOX_ID= field. Pure, for the tests. */
int sandbox_logs_matches(const char *id, const char *unit, char ***ret);
