/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-bus.h>

/* Background processes of a sandbox (sandboxd-api(7)) and terminal sessions. */

/* ps ID: ListProcesses as a table or JSON. Returns 0 or a negative errno (logged). */
int processes_list(sd_bus *bus, const char *id, bool json);
/* kill ID PROCESS: Signal. */
int process_signal(sd_bus *bus, const char *id, const char *process, int sig);
/* "TERM", "SIGTERM", "term" or "15" → 15. Returns 0 or -EINVAL. */
int signal_from_string(const char *s, int *ret);

/* The size of the terminal on fd: 0, or -ENOTTY. */
int terminal_get_size(int fd, unsigned *ret_rows, unsigned *ret_cols);

/* Runs start (a sealed Start call with TTY, StandardInput and StandardOutput) with the
 * terminal on standard input in raw mode, then Wait(process, 0) with the call timeout
 * wait_usec: returns its reply. The terminal is restored on every way out (also at exit).
 * SIGWINCH resizes the session's terminal (ResizeTerminal). SIGINT, SIGTERM and SIGHUP
 * hang up the session (SIGHUP to the process) and return -EINTR with the signal in
 * *ret_signal. A failed call returns negative with error set. */
int tty_session(sd_bus *bus, const char *path, sd_bus_message *start, uint64_t wait_usec,
                sd_bus_error *error, sd_bus_message **ret_reply, int *ret_signal);
