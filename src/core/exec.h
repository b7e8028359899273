/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One execution in a sandbox: its output pipes, timeout and result. */

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "agent-protocol.h"
#include "options.h"

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
typedef void (*exec_callback_t)(Exec *e, const ExecResult *result, const sd_bus_error *error, void *userdata);

/* Maps the agent's report, our timeout flag and the cgroup's OOM count to a result. */
void exec_result_from_exit(ExecResult *r, const struct agent_exit *x, bool timed_out, bool oom_killed);
/* Appends to a capped buffer; returns true if something was dropped. */
bool output_buffer_append(OutputBuffer *b, const void *data, size_t n);
void output_buffer_done(OutputBuffer *b);

uint64_t exec_get_id(const Exec *e);

/* Background processes (Start): they run until they end, are signalled, or the sandbox
 * ends; their output so far and, once ended, their result stay readable. */
int sandbox_start_process(Sandbox *s, ExecConfig *c, uint64_t *ret_id, sd_bus_error *error);
Exec *sandbox_find_process(Sandbox *s, uint64_t id);
/* Iterates the sandbox's background processes, running ones first: pass NULL to start. */
Exec *sandbox_next_process(Sandbox *s, Exec *prev);
int exec_signal(Exec *e, int sig, sd_bus_error *error);
/* cb runs once the process has ended (at once if it has), or with StillRunning after
 * timeout_usec (0: no timeout). */
int exec_wait(Exec *e, uint64_t timeout_usec, exec_callback_t cb, void *userdata, sd_bus_error *error);
bool exec_is_running(const Exec *e);
int exec_resize_terminal(Exec *e, uint16_t rows, uint16_t cols, sd_bus_error *error);
pid_t exec_get_pid(const Exec *e);               /* inside the sandbox; 0 if not known yet */
char * const *exec_get_argv(const Exec *e);
const ExecResult *exec_get_result(const Exec *e); /* output so far; exit fields once ended */
