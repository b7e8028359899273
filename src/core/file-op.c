/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "fd-util.h"
#include "file-op.h"
#include "list.h"
#include "log.h"
#include "sandbox-errors.h"
#include "sandbox-internal.h"
#include "strv.h"

struct FileOp {
        Sandbox *sandbox;
        uint64_t id;
        int buffer_fd;      /* ReadFile: the memfd the agent writes into */
        json_object *request; /* while it waits for a slot: the message to the agent, */
        int passed_fd;        /* and the descriptor it carries (or -EBADF) */
        char *path;           /* for the messages of errors */
        uint64_t offset;      /* ReadFile: where it starts */
        uint64_t max;         /* Download: the size refused (Max, or the default) */
        bool watch;           /* WatchDirectory: runs until its reader goes, in no slot */
        file_callback_t cb;
        void *userdata;
        FileOp *next, *prev;  /* newest first */
};

FileOp *file_op_free(FileOp *op) {
        if (!op)
                return NULL;
        if (op->sandbox)
                LIST_REMOVE(op->sandbox->file_ops, op);
        safe_close(op->buffer_fd);
        safe_close(op->passed_fd);
        json_object_put(op->request);
        free(op->path);
        return mfree(op);
}

/* Hands op's request to the agent. */
static int file_op_send(FileOp *op) {
        Sandbox *s = op->sandbox;
        int r;

        r = agent_send(s->control_fd, op->request, op->passed_fd >= 0 ? &op->passed_fd : NULL,
                       op->passed_fd >= 0 ? 1 : 0);
        json_object_put(op->request);
        op->request = NULL;
        op->passed_fd = safe_close(op->passed_fd);
        return r;
}

static void file_ops_count(Sandbox *s, unsigned *ret_active, unsigned *ret_waiting) {
        unsigned active = 0, waiting = 0;

        for (FileOp *op = s->file_ops; op; op = op->next)
                if (op->watch)
                        continue;
                else if (op->request)
                        waiting++;
                else
                        active++;
        *ret_active = active;
        *ret_waiting = waiting;
}

/* Sends the oldest waiting operations while fewer than FILE_OPS_ACTIVE_MAX are with the
 * agent. */
static void file_ops_dispatch(Sandbox *s) {
        unsigned active, waiting;

        file_ops_count(s, &active, &waiting);
        while (active < FILE_OPS_ACTIVE_MAX && waiting > 0) {
                _cleanup_free_ char *reason = NULL;
                FileOp *oldest = NULL;
                int r;

                for (FileOp *op = s->file_ops; op; op = op->next)
                        if (op->request)
                                oldest = op;
                waiting--;
                r = file_op_send(oldest);
                if (r >= 0) {
                        active++;
                        continue;
                }
                if (asprintf(&reason, "Failed to hand the file operation to sandbox %s: %s", s->id, strerror(-r)) < 0)
                        reason = NULL;
                file_op_abort(oldest, reason ?: "Failed to hand the file operation to the sandbox.");
        }
}

static bool sandbox_path_is_valid(const char *p) {
        /* The agent resolves it; we only refuse what is not a path at all. */
        if (isempty(p) || strlen(p) > 4096)
                return false;
        for (const char *c = p; *c; c++)
                if ((unsigned char) *c < 0x20)
                        return false;
        return true;
}

/* Starts f in s. fd: the descriptor the op carries (write/upload: the source; read: -EBADF
 * here, sandboxd provides the buffer; download: the destination). Takes fd. */
static int sandbox_file_op(Sandbox *s, const struct agent_file *f, int fd, FILE_OP_ARGS) {
        _cleanup_close_ int passed = fd, buffer = -EBADF;
        struct agent_file req = *f;
        unsigned active, waiting;
        FileOp *op;
        int r;

        if (s->state != SANDBOX_RUNNING)
                return sandbox_error_set(error, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s is %s, not running.",
                                          s->id, sandbox_state_to_string(s->state));
        if (!sandbox_path_is_valid(f->path) || (f->op == AGENT_FILE_MOVE && !sandbox_path_is_valid(f->to)))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                          "Paths must be 1 to 4096 bytes without control characters.");

        if (f->op == AGENT_FILE_READ && passed < 0) {
                /* The agent fills a memfd: no pipe to feed, nothing to stall on. It cannot
                 * shrink it under our mapping (file_op_finish()), whatever it does later. */
                buffer = memfd_new_growing("sandbox-read");
                if (buffer < 0)
                        return buffer;
                /* One byte more than the bound: what is left past it is refused, not cut. */
                if (req.length == AGENT_FILE_UNLIMITED)
                        req.length = FILE_PART_MAX + 1;
                passed = fcntl(buffer, F_DUPFD_CLOEXEC, 3);
                if (passed < 0)
                        return -errno;
        }
        if (agent_file_op_nfds(f->op) != (passed >= 0 ? 1U : 0U))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                          "This file operation needs %zu descriptor(s).", agent_file_op_nfds(f->op));
        /* A Download streams for as long as its reader reads: without Max, a file larger
         * than the sandbox's DiskMax (so sparse, or not in /work or /tmp) is refused. */
        if (f->op == AGENT_FILE_READ && buffer < 0 && req.max == AGENT_FILE_UNLIMITED)
                req.max = s->config.disk_max;

        /* Each operation with the agent is a process in the sandbox, and a read's data is
         * charged to the sandbox's memory until it is answered: so few at a time, the
         * rest wait their turn, and beyond that the caller is told to come back. */
        file_ops_count(s, &active, &waiting);
        if (f->op == AGENT_FILE_WATCH) {
                unsigned watches = 0;

                /* A watch lasts as long as its reader: beside the slots, bounded on its own. */
                for (FileOp *o = s->file_ops; o; o = o->next)
                        watches += o->watch;
                if (watches >= FILE_WATCHES_MAX)
                        return sandbox_error_set(error, SANDBOX_ERR_BUSY, "Sandbox %s has %u watches already.", s->id,
                                                 watches);
                active = 0;
        } else if (active >= FILE_OPS_ACTIVE_MAX && waiting >= FILE_OPS_WAITING_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_BUSY,
                                          "Sandbox %s has %u file operations under way and %u waiting; try again later.",
                                          s->id, active, waiting);

        op = calloc(1, sizeof(FileOp));
        if (!op)
                return -ENOMEM;
        *op = (FileOp) {
                .sandbox = s,
                .id = ++s->next_exec_id,
                .buffer_fd = TAKE_FD(buffer),
                .passed_fd = TAKE_FD(passed),
                .path = strdup(f->path),
                .offset = f->offset,
                .max = req.max,
                .watch = f->op == AGENT_FILE_WATCH,
                .cb = cb,
                .userdata = userdata,
        };
        LIST_PREPEND(s->file_ops, op);

        req.id = op->id;
        op->request = agent_msg_file(&req);
        if (!op->path) {
                file_op_free(op);
                return -ENOMEM;
        }
        if (!op->request) {
                file_op_free(op);
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "Invalid file operation.");
        }
        if (active < FILE_OPS_ACTIVE_MAX) {
                r = file_op_send(op);
                if (r < 0) {
                        file_op_free(op);
                        return sandbox_error_set(error, SANDBOX_ERR_SANDBOX_FAILED,
                                                  "Failed to hand the file operation to sandbox %s: %s",
                                                  s->id, strerror(-r));
                }
        } /* else sent by file_ops_dispatch() when one ends */
        if (ret_op)
                *ret_op = op;
        return 0;
}

int sandbox_read_file(Sandbox *s, const char *path, uint64_t offset, uint64_t length, FILE_OP_ARGS) {
        struct agent_file f = AGENT_FILE_INIT(0, AGENT_FILE_READ, path);

        /* An offset no file can have is a bad argument, whatever the length asked. */
        if (offset > (uint64_t) INT64_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "ReadFile offset %" PRIu64 " is out of range (at most %" PRId64 ").",
                                         offset, INT64_MAX);
        if (length > FILE_PART_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_FILE_TOO_LARGE,
                                         "ReadFile returns at most %llu bytes (%" PRIu64 " asked): read larger "
                                         "files with Download, which streams, or in parts (offset, length).",
                                         FILE_PART_MAX, length);
        f.offset = offset;
        f.length = length == 0 ? AGENT_FILE_UNLIMITED : length;
        return sandbox_file_op(s, &f, -EBADF, cb, userdata, ret_op, error);
}

static void file_options_apply(struct agent_file *f, const FileOptions *o) {
        if (!o)
                return;
        f->mode = o->mode;
        f->append = o->append;
        f->parents = o->parents;
        f->max = o->max;
}

int sandbox_write_file(Sandbox *s, const char *path, const void *data, size_t size, const FileOptions *o,
                       FILE_OP_ARGS) {
        struct agent_file f = AGENT_FILE_INIT(0, AGENT_FILE_WRITE, path);
        int fd;

        if (size > FILE_PART_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_FILE_TOO_LARGE,
                                         "WriteFile takes at most %llu bytes (%zu given): write larger files "
                                         "with Upload, which streams from a descriptor, or in parts with Append.",
                                         FILE_PART_MAX, size);
        file_options_apply(&f, o);
        fd = memfd_new_with_data("sandbox-write", data, size);
        if (fd < 0)
                return fd;
        return sandbox_file_op(s, &f, fd, cb, userdata, ret_op, error);
}

/* Upload (write from fd) and Download (read into fd): the agent streams. */
static int sandbox_stream_file(Sandbox *s, enum agent_file_op op, const char *path, int borrowed,
                               const FileOptions *o, FILE_OP_ARGS) {
        struct agent_file f = AGENT_FILE_INIT(0, op, path);
        struct stat st;
        int fd;

        file_options_apply(&f, o);
        if (fstat(borrowed, &st) < 0 || (fcntl(borrowed, F_GETFL) & O_PATH) ||
            !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "The descriptor must be a regular file, pipe or socket.");
        fd = fcntl(borrowed, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return -errno;
        return sandbox_file_op(s, &f, fd, cb, userdata, ret_op, error);
}

int sandbox_upload(Sandbox *s, const char *path, int fd, const FileOptions *o, FILE_OP_ARGS) {
        return sandbox_stream_file(s, AGENT_FILE_WRITE, path, fd, o, cb, userdata, ret_op, error);
}

int sandbox_download(Sandbox *s, const char *path, int fd, const FileOptions *o, FILE_OP_ARGS) {
        return sandbox_stream_file(s, AGENT_FILE_READ, path, fd, o, cb, userdata, ret_op, error);
}

int sandbox_watch_directory(Sandbox *s, const char *path, bool recursive, int fd, FILE_OP_ARGS) {
        struct agent_file f = AGENT_FILE_INIT(0, AGENT_FILE_WATCH, path);

        f.recursive = recursive;
        return sandbox_file_op(s, &f, fd, cb, userdata, ret_op, error);
}

int sandbox_list_files(Sandbox *s, const char *path, uint64_t depth, FILE_OP_ARGS) {
        struct agent_file f = AGENT_FILE_INIT(0, AGENT_FILE_LIST, path);

        if (depth < 1 || depth > AGENT_FILE_DEPTH_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "depth must be between 1 and %u.", AGENT_FILE_DEPTH_MAX);
        f.depth = (unsigned) depth;
        return sandbox_file_op(s, &f, -EBADF, cb, userdata, ret_op, error);
}

int sandbox_stat_file(Sandbox *s, const char *path, FILE_OP_ARGS) {
        struct agent_file f = AGENT_FILE_INIT(0, AGENT_FILE_STAT, path);

        return sandbox_file_op(s, &f, -EBADF, cb, userdata, ret_op, error);
}

int sandbox_make_directory(Sandbox *s, const char *path, bool parents, FILE_OP_ARGS) {
        struct agent_file f = AGENT_FILE_INIT(0, AGENT_FILE_MKDIR, path);

        f.parents = parents;
        return sandbox_file_op(s, &f, -EBADF, cb, userdata, ret_op, error);
}

int sandbox_remove_file(Sandbox *s, const char *path, bool recursive, FILE_OP_ARGS) {
        struct agent_file f = AGENT_FILE_INIT(0, AGENT_FILE_REMOVE, path);

        f.recursive = recursive;
        return sandbox_file_op(s, &f, -EBADF, cb, userdata, ret_op, error);
}

int sandbox_move_file(Sandbox *s, const char *path, const char *to, FILE_OP_ARGS) {
        struct agent_file f = AGENT_FILE_INIT(0, AGENT_FILE_MOVE, path);

        f.to = to;
        return sandbox_file_op(s, &f, -EBADF, cb, userdata, ret_op, error);
}

static int sandbox_snapshot_op(Sandbox *s, enum agent_file_op op, int fd, bool tmp, uint64_t max, FILE_OP_ARGS) {
        struct agent_file f = AGENT_FILE_INIT(0, op, SANDBOX_WORKDIR);

        f.tmp = tmp;
        f.max = max;
        return sandbox_file_op(s, &f, fd, cb, userdata, ret_op, error);
}

int sandbox_archive(Sandbox *s, int fd, bool tmp, uint64_t max, FILE_OP_ARGS) {
        return sandbox_snapshot_op(s, AGENT_FILE_ARCHIVE, fd, tmp, max, cb, userdata, ret_op, error);
}

int sandbox_extract(Sandbox *s, int fd, bool tmp, uint64_t max, FILE_OP_ARGS) {
        return sandbox_snapshot_op(s, AGENT_FILE_EXTRACT, fd, tmp, max, cb, userdata, ret_op, error);
}

void file_op_cancel(FileOp *op) {
        json_object *msg;

        if (op->request) {
                file_op_abort(op, "The caller went away before the file operation started.");
                return;
        }
        /* The agent kills the op's process, and answers EIO for it: the slot is free
         * once that answer is in. */
        msg = agent_msg_kill(op->id, SIGKILL);
        if (msg)
                (void) agent_send(op->sandbox->control_fd, msg, NULL, 0);
        json_object_put(msg);
}

static void file_op_finish(FileOp *op, const struct agent_file_result *result, const SandboxError *error) {
        _cleanup_(sandbox_error_done) SandboxError failed = SANDBOX_ERROR_NULL;
        void *data = NULL;
        size_t size = 0;
        struct stat st;

        if (result && result->error == EFBIG && op->max != AGENT_FILE_UNLIMITED) {
                sandbox_error_set(&failed, SANDBOX_ERR_FILE_TOO_LARGE,
                                  "%s: File too large: more than %" PRIu64 " bytes (Max, by default the "
                                  "sandbox's DiskMax); give a larger Max to download it.", op->path, op->max);
                result = NULL;
                error = &failed;
        } else if (result && result->error == EINVAL && result->not_regular != 0) {
                sandbox_error_set(&failed, SANDBOX_ERR_NOT_REGULAR_FILE,
                                  "%s: not a regular file: %s",
                                  op->path, agent_file_type_describe(result->not_regular));
                result = NULL;
                error = &failed;
        } else if (result && result->error != 0) {
                /* What the agent met in the sandbox: the errno, with the path. */
                sandbox_error_set_errno(&failed, result->error, "%s: %m", op->path);
                result = NULL;
                error = &failed;
        }

        if (result && result->error == 0 && op->buffer_fd >= 0 && fstat(op->buffer_fd, &st) >= 0 && st.st_size > 0) {
                if ((uint64_t) st.st_size > FILE_PART_MAX) {
                        sandbox_error_set(&failed, SANDBOX_ERR_FILE_TOO_LARGE,
                                          "%s: more than %llu bytes from offset %" PRIu64 ", the most ReadFile "
                                          "returns: read larger files with Download, which streams, or in "
                                          "parts (offset, length).", op->path, FILE_PART_MAX, op->offset);
                        result = NULL;
                        error = &failed;
                } else {
                        /* The memfd's own pages, not a copy of them. */
                        data = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, op->buffer_fd, 0);
                        if (data == MAP_FAILED) {
                                sandbox_error_set_errno(&failed, errno, "%s: Failed to map what was read: %m",
                                                        op->path);
                                data = NULL;
                                result = NULL;
                                error = &failed;
                        } else
                                size = st.st_size;
                }
        }
        op->cb(result, data, size, error, op->userdata);
        if (data)
                (void) munmap(data, size);
        file_op_free(op);
}

void file_op_on_result(Sandbox *s, const struct agent_file_result *result) {
        for (FileOp *op = s->file_ops; op; op = op->next)
                if (op->id == result->id && !op->request) {
                        file_op_finish(op, result, NULL);
                        file_ops_dispatch(s);
                        return;
                }
}

void file_op_fail(FileOp *op, const SandboxError *error) {
        file_op_finish(op, NULL, error);
}

void file_op_abort(FileOp *op, const char *reason) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

        sandbox_error_set(&error, SANDBOX_ERR_SANDBOX_FAILED, "%s", reason);
        file_op_fail(op, &error);
}
