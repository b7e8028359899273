/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A caller's own output descriptor (D-Bus StandardOutput=, varlink's streamed pipes),
 * given to the process through a pipe of ours that is forwarded to it, so that the bytes
 * are counted (the record's and the answer's stdout/stderr bytes) without holding them:
 * a pipe is spliced, a socket sent to without blocking, /dev/null read and dropped. A
 * terminal is given to the process as it is (it must stay its terminal) and a regular
 * file too (counted by how far it grew): exec_forward_new() says so by returning 0. */

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

typedef struct ExecForward ExecForward;

/* Called when the forward has moved everything there was after exec_forward_finish():
 * its source at its end or empty, nothing held back. */
typedef void (*exec_forward_done_t)(ExecForward *f, void *userdata);

/* dst: the caller's descriptor (taken). On 1, *ret is the forward and *ret_process_fd the
 * descriptor to give the process (a pipe's write end); on 0 (a terminal, a regular file,
 * another character device), *ret_process_fd is dst itself, to give as it is, and *ret a
 * forward that only counts what a regular file grew by (or NULL). counter: where the
 * bytes are added up. */
int exec_forward_new(sd_event *event, int dst, uint64_t *counter, exec_forward_done_t done, void *userdata,
                     ExecForward **ret, int *ret_process_fd);
ExecForward *exec_forward_free(ExecForward *f);
/* The process ended: move what is in the pipe (not waiting for writers that live on) and
 * call done once it is out. Returns true if it is out already (done is not called then). */
bool exec_forward_finish(ExecForward *f);
/* Gives up on what is left (the caller's reader took nothing for too long). */
void exec_forward_abandon(ExecForward *f);
