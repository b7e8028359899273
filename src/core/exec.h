/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One execution in a sandbox: its output pipes, timeout and result. */

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "agent-protocol.h"
#include "options.h"
#include "sandbox-errors.h"

typedef struct Sandbox Sandbox;
typedef struct Exec Exec;

typedef struct OutputBuffer {
        char *data;
        size_t size;    /* kept */
        uint64_t total; /* produced, including what was dropped */
        size_t max;
        bool keep_tail; /* background processes: the newest output is what matters */
} OutputBuffer;

typedef struct ExecResult {
        int exit_status; /* exit code, or 128 + signal */
        int exit_code;   /* -1 if killed */
        int signal;
        bool timed_out;
        bool oom_killed;
        bool truncated;
        uint64_t duration_usec;
        uint64_t cpu_usec;
        uint64_t max_rss_bytes;
        OutputBuffer out;
        OutputBuffer err;
} ExecResult;

/* error is set (and result NULL) when the exec could not produce a result. */
typedef void (*exec_callback_t)(Exec *e, const ExecResult *result, const SandboxError *error, void *userdata);

/* Maps the agent's report, our timeout flag and the cgroup's OOM count to a result. */
void exec_result_from_exit(ExecResult *r, const struct agent_exit *x, bool timed_out, bool oom_killed);
/* Appends to a capped buffer; returns true if something was dropped. */
bool output_buffer_append(OutputBuffer *b, const void *data, size_t n);
void output_buffer_done(OutputBuffer *b);
/* What is kept of the output at or after offset, a position in all that was produced (0 to
 * total): the bytes between offset and it that were dropped are total - offset - *ret_size.
 * -EINVAL if offset is beyond total. */
int output_buffer_from(const OutputBuffer *b, uint64_t offset, const char **ret_data, size_t *ret_size);

uint64_t exec_get_id(const Exec *e);

/* Background processes (Start): they run until they end, are signalled, or the sandbox
 * ends; their output so far and, once ended, their result stay readable. */
int sandbox_start_process(Sandbox *s, ExecConfig *c, uint64_t *ret_id, SandboxError *error);
Exec *sandbox_find_process(Sandbox *s, uint64_t id);
/* The same, or NoSuchProcess. */
int sandbox_get_process(Sandbox *s, uint64_t id, Exec **ret, SandboxError *error);
/* Iterates the sandbox's background processes, running ones first: pass NULL to start. */
Exec *sandbox_next_process(Sandbox *s, Exec *prev);
int exec_signal(Exec *e, int sig, SandboxError *error);
/* cb runs once the process has ended (at once if it has), or with StillRunning after
 * timeout_sec (0: no timeout; at most EXEC_TIMEOUT_MAX_SEC). */
int exec_wait(Exec *e, uint64_t timeout_sec, exec_callback_t cb, void *userdata, SandboxError *error);
/* Withdraws a wait not answered yet (cb and userdata as given to exec_wait()). */
void exec_wait_cancel(Exec *e, exec_callback_t cb, void *userdata);
bool exec_is_running(const Exec *e);
/* Adoption after a restart of sandboxd (exec-persist.h): a background process of s with
 * its id (argv taken), then either running (its pipes from the fd store, -EBADF if not
 * kept) or among the finished (appended after *tail, its result filled in by the caller). */
Exec *exec_new_adopted(Sandbox *s, uint64_t id, char **argv, bool tty, uint64_t output_max);
int exec_adopt_running(Exec *e, pid_t pid, uint64_t started_at, int out_fd, int err_fd, uint64_t timeout_left_usec);
void exec_adopt_finished(Exec *e, Exec **tail);
uint64_t exec_timeout_left_usec(const Exec *e);   /* 0: none */
/* rows and cols: 1 to 65535. Input written after it (exec_write_stdin()) reaches the
 * terminal once the agent has resized it, so it meets the new size; an agent that does not
 * say so (before protocol version 6) is waited for EXEC_RESIZE_WAIT_USEC at most. */
#define EXEC_RESIZE_WAIT_USEC (250U * 1000U)
int exec_resize_terminal(Exec *e, uint64_t rows, uint64_t cols, SandboxError *error);
pid_t exec_get_pid(const Exec *e);               /* inside the sandbox; 0 if not known yet */
char * const *exec_get_argv(const Exec *e);
const ExecResult *exec_get_result(const Exec *e); /* output so far; exit fields once ended */
/* ReadOutput: what is kept of each stream from an offset on (output_buffer_from()). */
typedef struct ExecOutput {
        const char *out, *err;
        size_t out_size, err_size;
        uint64_t out_total, err_total;  /* the offsets to read on from */
} ExecOutput;
int exec_read_output(const Exec *e, uint64_t out_offset, uint64_t err_offset, ExecOutput *ret, SandboxError *error);

/* The input of a process started with StdinPipe (or a terminal without descriptors):
 * data goes to it in order; what its pipe has no room for waits in the core, at most
 * EXEC_STDIN_PENDING_MAX bytes (more: Busy, nothing taken). Close ends the input (the
 * process reads EOF; a terminal's shell sees its end of input) once what waits is written.
 * InvalidOption if it has no such input or it was closed, NoSuchProcess once it ended. */
int exec_write_stdin(Exec *e, const void *data, size_t size, SandboxError *error);
int exec_close_stdin(Exec *e, SandboxError *error);

/* Live output: cb is called with each piece a background process writes, as it is
 * read, after what was there at exec_follow() (read that with exec_read_output() first,
 * in the same dispatch: nothing is missed or repeated). A held follower stops the reading
 * of the process's pipes, and so the process once they are full (back-pressure). The
 * follower does not learn of the end: wait for it (exec_wait()), and free the follower at
 * the latest when the wait is answered (also when the process goes with its sandbox). */
typedef struct ExecFollower ExecFollower;
typedef void (*exec_output_callback_t)(Exec *e, bool is_stderr, const void *data, size_t size, void *userdata);
int exec_follow(Exec *e, exec_output_callback_t cb, void *userdata, ExecFollower **ret);
void exec_follower_hold(ExecFollower *f, bool hold);
ExecFollower *exec_follower_free(ExecFollower *f);
