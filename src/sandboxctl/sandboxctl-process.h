/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sandbox-client.h"

/* Background processes of a sandbox (sandboxd-api(7)) and terminal sessions. */

/* ps ID: ListProcesses as a table or JSON. Returns 0 or a negative errno (logged). */
int processes_list(SandboxClient *c, const char *id, bool json);
/* kill ID PROCESS: Signal. */
int process_signal(SandboxClient *c, const char *id, const char *process, int sig);
/* send-stdin ID PROCESS: standard input to the process's (WriteStdin) as it comes, to its
 * end; close-stdin ID PROCESS: CloseStdin. */
int process_send_stdin(SandboxClient *c, const char *id, const char *process);
int process_close_stdin(SandboxClient *c, const char *id, const char *process);
/* output ID PROCESS [-f]: what it wrote (ReadOutputFrom), stdout to stdout and stderr to
 * stderr; follow: on until it ended. */
int process_output(SandboxClient *c, const char *id, const char *process, bool follow);

/* The size of the terminal on fd: 0, or -ENOTTY. */
int terminal_get_size(int fd, unsigned *ret_rows, unsigned *ret_cols);

/* Starts argv with o (TTY, StandardInput and StandardOutput: the terminal on standard input,
 * in raw mode meanwhile), then waits for it with the call timeout wait_usec. The terminal is
 * restored on every way out (also at exit). SIGWINCH resizes the session's terminal
 * (ResizeTerminal). SIGINT, SIGTERM and SIGHUP hang up the session (SIGHUP to the process)
 * and return -EINTR with the signal in *ret_signal. A failed call returns negative with
 * error set. */
int tty_session(SandboxHandle *h, char **argv, const SandboxExecOptions *o, uint64_t wait_usec,
                SandboxExecResult *ret, SandboxClientError *error, int *ret_signal);
