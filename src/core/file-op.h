/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* File operations in a sandbox. sandboxd never resolves a sandbox path itself: the agent
 * does, inside the sandbox's mount namespace, as the sandbox's uid, so nothing planted
 * there (symlinks, "..", races, hard links) can lead to a file of the host's. */

#include "agent-protocol.h"
#include "options.h"
#include "sandbox-api.h"
#include "sandbox-errors.h"

typedef struct Sandbox Sandbox;

/* Per sandbox: operations with the agent at once (each a process in the sandbox, a read's
 * data charged to its memory until answered), and how many more may wait their turn
 * before further ones fail with Busy (sandboxd(8)). */
#define FILE_OPS_ACTIVE_MAX 4U
#define FILE_OPS_WAITING_MAX 64U

/* result is NULL (and error set) when the operation failed: before the agent, in the
 * sandbox (the errno, with the path), or a Download larger than its Max (FileTooLarge).
 * For reads, data/size hold what was read. */
typedef void (*file_callback_t)(const struct agent_file_result *result, const void *data, size_t size,
                                const SandboxError *error, void *userdata);

typedef struct FileOp FileOp;

/* Each starts an operation on path in s (the agent resolves it, inside the sandbox) and
 * calls cb once when it is done. User errors (not running, a bad path, an option out of
 * range, Busy) come back as -errno with error set, and cb is not called. *ret_op
 * (optional) is the operation, valid until cb is called. */
#define FILE_OP_ARGS file_callback_t cb, void *userdata, FileOp **ret_op, SandboxError *error
/* length bytes from offset (fewer at the file's end); 0: to the end. Refused (FileTooLarge,
 * naming the streamed calls) past FILE_PART_MAX: length larger, or (length 0) more left in
 * the file. The data handed to cb is valid until it returns. */
int sandbox_read_file(Sandbox *s, const char *path, uint64_t offset, uint64_t length, FILE_OP_ARGS);
/* size at most FILE_PART_MAX, else FileTooLarge. */
int sandbox_write_file(Sandbox *s, const char *path, const void *data, size_t size, const FileOptions *o,
                       FILE_OP_ARGS);
/* fd (borrowed: a regular file, pipe or socket) is what the agent reads the file from
 * (upload) or writes it to (download); the data never passes through sandboxd. */
int sandbox_upload(Sandbox *s, const char *path, int fd, const FileOptions *o, FILE_OP_ARGS);
int sandbox_download(Sandbox *s, const char *path, int fd, const FileOptions *o, FILE_OP_ARGS);
/* depth: 1 to LIST_FILES_DEPTH_MAX. */
int sandbox_list_files(Sandbox *s, const char *path, uint64_t depth, FILE_OP_ARGS);
/* WatchDirectory: the agent writes a JSON line to fd (taken: a pipe's write end) for each
 * change under path (agent-protocol.h, "watch") until fd's reader goes; cb then. */
int sandbox_watch_directory(Sandbox *s, const char *path, bool recursive, int fd, FILE_OP_ARGS);
int sandbox_stat_file(Sandbox *s, const char *path, FILE_OP_ARGS);
int sandbox_make_directory(Sandbox *s, const char *path, bool parents, FILE_OP_ARGS);
int sandbox_remove_file(Sandbox *s, const char *path, bool recursive, FILE_OP_ARGS);
int sandbox_move_file(Sandbox *s, const char *path, const char *to, FILE_OP_ARGS);

/* Snapshots (snapshot.h): the agent writes /work (and /tmp, with tmp) as a compressed tar
 * stream to fd, or unpacks one from fd into them; either fails with FileTooLarge once the
 * files add up to more than max bytes. Take fd (a pipe or a regular file). */
int sandbox_archive(Sandbox *s, int fd, bool tmp, uint64_t max, FILE_OP_ARGS);
int sandbox_extract(Sandbox *s, int fd, bool tmp, uint64_t max, FILE_OP_ARGS);

/* Ends op early (its caller went away): cb is still called, with an error. */
void file_op_cancel(FileOp *op);
