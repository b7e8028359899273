/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

/* Logging for the daemon's event-driven paths, where no caller is left to return an
 * error to. Goes to the journal with structured fields (SANDBOX_ID=) when stderr is
 * connected to it, to stderr otherwise. */

#include <syslog.h>

#include "macro.h"

void log_set_max_level(int level);
int log_get_max_level(void);
/* Returns -abs(error) (or 0 if error is 0), so callers can log and return in one step;
 * %m in fmt is replaced by strerror(error). sandbox_id may be NULL. The journal entry
 * names where it was logged (CODE_FILE=, CODE_LINE=, CODE_FUNC=), and a fault (an error
 * at LOG_ERR or worse) says so in its text on stderr too: a bare "Invalid argument" tells
 * which function met it. */
int log_internal_full(int level, int error, const char *sandbox_id, const char *file, int line, const char *func,
                      const char *fmt, ...) _printf_(7, 8);
#define log_internal(level, error, sandbox_id, ...)                                     \
        log_internal_full(level, error, sandbox_id, __FILE__, __LINE__, __func__, __VA_ARGS__)

/* A caller's programming error at a public entry point (systemd's assert_return()): a
 * NULL where an object must be, an argument out of its domain. Logged with where it was
 * met, and r returned, rather than a crash of the daemon or a silent -EINVAL. */
void log_assert_failed_return(const char *text, const char *file, int line, const char *func);
#define assert_return(expr, r)                                                          \
        do {                                                                            \
                if (_unlikely_(!(expr))) {                                              \
                        log_assert_failed_return(#expr, __FILE__, __LINE__, __func__);  \
                        return (r);                                                     \
                }                                                                       \
        } while (0)
/* Whether messages go to the journal (stderr is the stream systemd connected us to) rather
 * than to stderr: a program writing structured entries of its own asks. */
bool log_uses_journal(void);

#define log_full_errno(level, error, ...) log_internal(level, error, NULL, __VA_ARGS__)
#define log_error_errno(error, ...) log_internal(LOG_ERR, error, NULL, __VA_ARGS__)
#define log_warning_errno(error, ...) log_internal(LOG_WARNING, error, NULL, __VA_ARGS__)
#define log_error(...) log_internal(LOG_ERR, 0, NULL, __VA_ARGS__)
#define log_warning(...) log_internal(LOG_WARNING, 0, NULL, __VA_ARGS__)
#define log_info(...) log_internal(LOG_INFO, 0, NULL, __VA_ARGS__)
#define log_debug(...) log_internal(LOG_DEBUG, 0, NULL, __VA_ARGS__)

/* What a payload's own processes (bwrap, the agent) wrote to their stderr, read by us
 * from a pipe (payload.c): each line of buf[0..n) logged at LOG_WARNING under
 * SYSLOG_IDENTIFIER=identifier (the sandbox's unit) and SANDBOX_ID=sandbox_id, as long
 * as *budget lasts (one off per line); a line is cut at LOG_PAYLOAD_LINE_MAX, a chunk's
 * last line need not end in a newline. Returns the number of lines logged. */
#define LOG_PAYLOAD_LINE_MAX 2000
size_t log_payload_output(const char *identifier, const char *sandbox_id, const char *buf, size_t n,
                          unsigned *budget);
