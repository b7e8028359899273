/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Logging for the daemon's event-driven paths, where no caller is left to return an
 * error to. Goes to the journal with structured fields (SANDBOX_ID=) when stderr is
 * connected to it, to stderr otherwise. */

#include <syslog.h>

#include "macro.h"

void log_set_max_level(int level);
int log_get_max_level(void);
/* Returns -abs(error) (or 0 if error is 0), so callers can log and return in one step;
 * %m in fmt is replaced by strerror(error). sandbox_id may be NULL. */
int log_internal(int level, int error, const char *sandbox_id, const char *fmt, ...) _printf_(4, 5);

#define log_full_errno(level, error, ...) log_internal(level, error, NULL, __VA_ARGS__)
#define log_error_errno(error, ...) log_internal(LOG_ERR, error, NULL, __VA_ARGS__)
#define log_warning_errno(error, ...) log_internal(LOG_WARNING, error, NULL, __VA_ARGS__)
#define log_error(...) log_internal(LOG_ERR, 0, NULL, __VA_ARGS__)
#define log_warning(...) log_internal(LOG_WARNING, 0, NULL, __VA_ARGS__)
#define log_info(...) log_internal(LOG_INFO, 0, NULL, __VA_ARGS__)
#define log_debug(...) log_internal(LOG_DEBUG, 0, NULL, __VA_ARGS__)

#define JOURNAL_STREAM_SOCKET "/run/systemd/journal/stdout"

/* A stream to journald (at socket_path, normally JOURNAL_STREAM_SOCKET) whose lines are
 * logged under identifier at priority: what sd_journal_stream_fd() gives, but connected
 * without ever blocking. journald accepts connections on its event loop; while it does not
 * (busy, hung, restarting) they queue in the socket's backlog (systemd-journald.socket has
 * no Backlog=: the kernel's somaxconn, 4096), and once that is full the blocking connect()
 * of sd_journal_stream_fd() waits until journald is back. Here that is -EAGAIN. Returns
 * the fd (blocking again, close-on-exec) or a negative errno. */
int log_open_journal_stream(const char *socket_path, const char *identifier, int priority);

#define log_sandbox(s, level, error, ...) log_internal(level, error, sandbox_get_id(s), __VA_ARGS__)
