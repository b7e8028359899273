/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* File operations in a sandbox. sandboxd never resolves a sandbox path itself: the agent
 * does, inside the sandbox's mount namespace, as the sandbox's uid, so nothing planted
 * there (symlinks, "..", races, hard links) can lead to a file of the host's. */

#include <systemd/sd-bus.h>

#include "agent-protocol.h"
#include "sandbox-api.h"

typedef struct Sandbox Sandbox;

/* Per sandbox: operations with the agent at once (each a process in the sandbox, a read's
 * data charged to its memory until answered), and how many more may wait their turn
 * before further ones fail with Busy (sandboxd(8)). */
#define FILE_OPS_ACTIVE_MAX 4U
#define FILE_OPS_WAITING_MAX 64U

/* result is NULL (and error set) when the operation failed before or in the agent. For
 * reads, data/size hold what was read. */
typedef void (*file_callback_t)(const struct agent_file_result *result, const void *data, size_t size,
                                const sd_bus_error *error, void *userdata);

typedef struct FileOp FileOp;

/* Starts f in s. fd: the descriptor the op carries (write/upload: the source; read:
 * NULL here, sandboxd provides the buffer; download: the destination), or -EBADF. Takes
 * fd. User errors (not running, bad path, Busy) come back as -errno with error set.
 * *ret_op (optional) is the operation, valid until cb is called. */
int sandbox_file_op(Sandbox *s, const struct agent_file *f, int fd, file_callback_t cb, void *userdata,
                    FileOp **ret_op, sd_bus_error *error);

/* Ends op early (its caller went away): cb is still called, with an error. */
void file_op_cancel(FileOp *op);
