/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The file methods of io.sandboxd.Sandbox1.Sandbox: translation between D-Bus and the
 * core's sandbox_file_op(); every path is resolved by the agent inside the sandbox. */

#include <fcntl.h>
#include <sys/stat.h>

#include "bus-flow.h"
#include "bus-util.h"
#include "fd-util.h"
#include "file-op.h"
#include "log.h"
#include "sandbox-dbus.h"
#include "sandbox-errors.h"
#include "parse-util.h"

/* A name from the sandbox as D-Bus can carry it: the string itself when it is valid UTF-8
 * (and no bytes), else its escaped form and the raw bytes (sandboxd-api(7)). */
static int name_represent(const char *name, char **ret_text, const void **ret_raw, size_t *ret_raw_size) {
        char *t;

        name = strempty(name);
        if (utf8_is_valid_n(name, strlen(name))) {
                *ret_text = NULL;
                *ret_raw = NULL;
                *ret_raw_size = 0;
                return 0;
        }
        t = utf8_escape_invalid(name);
        if (!t)
                return -ENOMEM;
        *ret_text = t;
        *ret_raw = name;
        *ret_raw_size = strlen(name);
        return 0;
}

static int append_entry(sd_bus_message *reply, const struct agent_file_entry *e) {
        _cleanup_free_ char *path = NULL, *target = NULL;
        const void *path_raw, *target_raw;
        size_t path_size, target_size;
        int r;

        r = name_represent(e->path, &path, &path_raw, &path_size);
        if (r >= 0)
                r = name_represent(e->target, &target, &target_raw, &target_size);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'r', "sstuxsayay");
        if (r >= 0)
                r = sd_bus_message_append(reply, "sstuxs", path ?: strempty(e->path),
                                          strempty(agent_file_type_to_string(e->type)), e->size,
                                          (uint32_t) e->mode, e->mtime_usec, target ?: strempty(e->target));
        if (r >= 0)
                r = sd_bus_message_append_array(reply, 'y', path_raw ?: "", path_size);
        if (r >= 0)
                r = sd_bus_message_append_array(reply, 'y', target_raw ?: "", target_size);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

/* A file call under way. Upload and Download stream for as long as the data flows: their
 * caller's leaving the bus (sandboxctl killed) ends the operation, so that nothing keeps
 * writing for a client that is gone. */
typedef struct FileCall {
        sd_bus_message *call;
        sd_bus_track *track;   /* Upload, Download: the caller */
        FileOp *op;
} FileCall;

static FileCall *file_call_free(FileCall *c) {
        if (!c)
                return NULL;
        bus_flow_release(c->call); /* ReadFile, ListFiles: if its reply did not take the slot */
        sd_bus_message_unref(c->call);
        sd_bus_track_unref(c->track);
        return mfree(c);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(FileCall *, file_call_free);

static int on_caller_gone(sd_bus_track *track, void *userdata) {
        FileCall *c = userdata;

        if (c->op) {
                log_debug("Caller of %s went away, ending its file operation.", sd_bus_message_get_member(c->call));
                file_op_cancel(TAKE_PTR(c->op));
        }
        return 0;
}

static void on_file_done(const struct agent_file_result *result, const void *data, size_t size,
                         const sd_bus_error *error, void *userdata) {
        _cleanup_(file_call_freep) FileCall *c = userdata;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        sd_bus_message *call = c->call;
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        const char *member = sd_bus_message_get_member(call);
        size_t estimate = size;
        int r;

        if (error) {
                bus_reply_error(call, error);
                return;
        }
        if (result->error != 0) {
                const char *path = NULL;
                (void) sd_bus_message_rewind(call, true);
                (void) sd_bus_message_read(call, "s", &path);
                sd_bus_error_set_errnof(&e, result->error, "%s: %m", strempty(path));
                bus_reply_error(call, &e);
                return;
        }

        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0) {
                if (streq(member, "ReadFile"))
                        r = sd_bus_message_append_array(reply, 'y', data ?: "", size);
                else if (streq(member, "Download") || streq(member, "Upload") || streq(member, "WriteFile"))
                        r = sd_bus_message_append(reply, "t", result->bytes);
                else if (streq(member, "Stat"))
                        r = append_entry(reply, &result->stat);
                else if (streq(member, "ListFiles")) {
                        r = sd_bus_message_open_container(reply, 'a', "(sstuxsayay)");
                        for (size_t i = 0; r >= 0 && i < result->n_entries; i++) {
                                r = append_entry(reply, result->entries + i);
                                estimate += 64 + strlen(strempty(result->entries[i].path)) +
                                            strlen(strempty(result->entries[i].target));
                        }
                        if (r >= 0)
                                r = sd_bus_message_close_container(reply);
                }
        }
        if (r >= 0)
                r = bus_flow_send_reply(call, reply, estimate);
        if (r < 0) {
                /* The caller must never be left waiting for its timeout. */
                log_warning_errno(r, "Failed to send %s reply: %m", member);
                sd_bus_error_set_errnof(&e, r, "Failed to build the %s reply: %m", member);
                bus_reply_error(call, &e);
        }
}

static int read_file_options(sd_bus_message *m, struct agent_file *f, sd_bus_error *error) {
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *name;
                uint32_t mode;
                int b;

                r = sd_bus_message_read(m, "s", &name);
                if (r < 0)
                        return r;
                if (streq(name, "Mode")) {
                        r = sd_bus_message_read(m, "v", "u", &mode);
                        if (r >= 0 && mode > 07777)
                                return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION, "Mode must be at most 07777.");
                        f->mode = mode;
                } else if (streq(name, "Append")) {
                        r = sd_bus_message_read(m, "v", "b", &b);
                        f->append = b;
                } else if (streq(name, "CreateParents")) {
                        r = sd_bus_message_read(m, "v", "b", &b);
                        f->parents = b;
                } else if (streq(name, "Max"))
                        r = sd_bus_message_read(m, "v", "t", &f->max);
                else
                        return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION, "Unknown file option '%.64s'.", name);
                if (r < 0)
                        return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION, "File option %.64s has the wrong type.", name);
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

/* Arguments are read after the polkit check, from the call itself. */
static int file_start(sd_bus_message *call, void *userdata, sd_bus_error *error) {
        SandboxRequest *req = userdata;
        Sandbox *s = sandbox_request_find(req, error);
        const char *member = sd_bus_message_get_member(call), *path, *to;
        _cleanup_(file_call_freep) FileCall *c = NULL;
        struct agent_file f;
        int fd = -EBADF, b, r;

        if (!s)
                return -ENOENT;
        r = sd_bus_message_read(call, "s", &path);
        if (r < 0)
                return r;

        if (streq(member, "ReadFile")) {
                f = AGENT_FILE_INIT(0, AGENT_FILE_READ, path);
                r = sd_bus_message_read(call, "tt", &f.offset, &f.length);
                if (r >= 0 && f.length == 0)
                        f.length = AGENT_FILE_UNLIMITED;
        } else if (streq(member, "WriteFile")) {
                const void *data;
                size_t size;
                f = AGENT_FILE_INIT(0, AGENT_FILE_WRITE, path);
                r = sd_bus_message_read_array(call, 'y', &data, &size);
                if (r >= 0)
                        r = read_file_options(call, &f, error);
                if (r >= 0)
                        r = fd = memfd_new_with_data("sandbox-write", data, size);
        } else if (streq(member, "Upload") || streq(member, "Download")) {
                int borrowed;
                struct stat st;
                f = AGENT_FILE_INIT(0, streq(member, "Upload") ? AGENT_FILE_WRITE : AGENT_FILE_READ, path);
                r = sd_bus_message_read(call, "h", &borrowed);
                if (r >= 0)
                        r = read_file_options(call, &f, error);
                if (r >= 0 && (fstat(borrowed, &st) < 0 || (fcntl(borrowed, F_GETFL) & O_PATH) ||
                               !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))))
                        return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                                  "The descriptor must be a regular file, pipe or socket.");
                if (r >= 0)
                        r = fd = fcntl(borrowed, F_DUPFD_CLOEXEC, 3);
        } else if (streq(member, "ListFiles")) {
                uint32_t depth;
                f = AGENT_FILE_INIT(0, AGENT_FILE_LIST, path);
                r = sd_bus_message_read(call, "u", &depth);
                if (r >= 0 && (depth < 1 || depth > AGENT_FILE_DEPTH_MAX))
                        return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                                  "depth must be between 1 and %u.", AGENT_FILE_DEPTH_MAX);
                f.depth = depth;
        } else if (streq(member, "Stat"))
                f = AGENT_FILE_INIT(0, AGENT_FILE_STAT, path);
        else if (streq(member, "MakeDirectory")) {
                f = AGENT_FILE_INIT(0, AGENT_FILE_MKDIR, path);
                r = sd_bus_message_read(call, "b", &b);
                f.parents = b;
        } else if (streq(member, "Remove")) {
                f = AGENT_FILE_INIT(0, AGENT_FILE_REMOVE, path);
                r = sd_bus_message_read(call, "b", &b);
                f.recursive = b;
        } else {
                f = AGENT_FILE_INIT(0, AGENT_FILE_MOVE, path);
                r = sd_bus_message_read(call, "s", &to);
                f.to = to;
        }
        if (r < 0) {
                safe_close(fd);
                return r;
        }

        c = calloc(1, sizeof(FileCall));
        if (!c) {
                safe_close(fd);
                return -ENOMEM;
        }
        c->call = sd_bus_message_ref(call);
        if (streq(member, "Upload") || streq(member, "Download")) {
                r = sd_bus_track_new(sd_bus_message_get_bus(call), &c->track, on_caller_gone, c);
                if (r >= 0)
                        r = sd_bus_track_add_sender(c->track, call);
                if (r < 0) {
                        safe_close(fd);
                        return r;
                }
        }

        r = sandbox_file_op(s, &f, fd, on_file_done, c, &c->op, error);
        if (r < 0)
                return r;
        TAKE_PTR(c);
        return 0;
}

static int file_authorized(sd_bus_message *call, const BusCaller *caller, void *userdata,
                           sd_bus_error *error) {
        const char *member = sd_bus_message_get_member(call);
        SandboxRequest *req = userdata, *later;

        if (!streq(member, "ReadFile") && !streq(member, "ListFiles"))
                return file_start(call, req, error);
        /* Their replies are large: such calls take turns (bus-flow.h), so this one may start
         * after req is gone. */
        later = calloc(1, sizeof(SandboxRequest));
        if (!later)
                return -ENOMEM;
        later->manager = req->manager;
        strcpy(later->id, req->id);
        later->op = req->op;
        return bus_flow_start_large(call, file_start, later, free, error);
}

int method_sandbox_file(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, SANDBOX_OP_EXEC, file_authorized, NULL);
}
