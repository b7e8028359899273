/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The file methods of io.sandboxd.Sandbox1.Sandbox: translation between D-Bus and the
 * core's file operations (file-op.h), which check every argument; every path is resolved
 * by the agent inside the sandbox. */

#include <fcntl.h>
#include <unistd.h>

#include "bus-flow.h"
#include "bus-util.h"
#include "file-op.h"
#include "log.h"
#include "parse-util.h"
#include "sandbox-dbus.h"

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
                         const SandboxError *error, void *userdata) {
        _cleanup_(file_call_freep) FileCall *c = userdata;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *call = c->call;
        const char *member = sd_bus_message_get_member(call);
        size_t estimate = size;
        int r;

        if (error) {
                bus_reply_error(call, error);
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
                bus_reply_bus_error(call, &e);
        }
}

/* A call to follow while it streams: its caller's leaving the bus ends it. */
static int file_call_track(FileCall *c) {
        int r;

        r = sd_bus_track_new(sd_bus_message_get_bus(c->call), &c->track, on_caller_gone, c);
        if (r < 0)
                return r;
        return sd_bus_track_add_sender(c->track, c->call);
}

/* Arguments are read after the authorization, from the call itself; the core checks them. */
static int file_start(sd_bus_message *call, Sandbox *s, SandboxError *error) {
        const char *member = sd_bus_message_get_member(call), *path, *to;
        _cleanup_(file_call_freep) FileCall *c = NULL;
        FileOptions o;
        int b, r;

        r = sd_bus_message_read(call, "s", &path);
        if (r < 0)
                return r;

        c = calloc(1, sizeof(FileCall));
        if (!c)
                return -ENOMEM;
        c->call = sd_bus_message_ref(call);
        file_options_init(&o);

        if (streq(member, "ReadFile")) {
                uint64_t offset, length;
                r = sd_bus_message_read(call, "tt", &offset, &length);
                if (r >= 0)
                        r = sandbox_read_file(s, path, offset, length, on_file_done, c, &c->op, error);
        } else if (streq(member, "WriteFile")) {
                const void *data;
                size_t size;
                r = sd_bus_message_read_array(call, 'y', &data, &size);
                if (r >= 0)
                        r = bus_read_options(call, OPTION_SET_FILE, &o, error);
                if (r >= 0)
                        r = sandbox_write_file(s, path, data, size, &o, on_file_done, c, &c->op, error);
        } else if (streq(member, "Upload") || streq(member, "Download")) {
                int fd;
                r = sd_bus_message_read(call, "h", &fd);
                if (r >= 0)
                        r = bus_read_options(call, OPTION_SET_FILE, &o, error);
                if (r >= 0)
                        r = file_call_track(c);
                if (r >= 0)
                        r = (streq(member, "Upload") ? sandbox_upload : sandbox_download)
                                (s, path, fd, &o, on_file_done, c, &c->op, error);
        } else if (streq(member, "ListFiles")) {
                uint32_t depth;
                r = sd_bus_message_read(call, "u", &depth);
                if (r >= 0)
                        r = sandbox_list_files(s, path, depth, on_file_done, c, &c->op, error);
        } else if (streq(member, "Stat"))
                r = sandbox_stat_file(s, path, on_file_done, c, &c->op, error);
        else if (streq(member, "MakeDirectory")) {
                r = sd_bus_message_read(call, "b", &b);
                if (r >= 0)
                        r = sandbox_make_directory(s, path, b, on_file_done, c, &c->op, error);
        } else if (streq(member, "Remove")) {
                r = sd_bus_message_read(call, "b", &b);
                if (r >= 0)
                        r = sandbox_remove_file(s, path, b, on_file_done, c, &c->op, error);
        } else {
                r = sd_bus_message_read(call, "s", &to);
                if (r >= 0)
                        r = sandbox_move_file(s, path, to, on_file_done, c, &c->op, error);
        }
        if (r < 0)
                return r;
        TAKE_PTR(c); /* on_file_done() has it */
        return 0;
}

/* A ReadFile or ListFiles that had to wait for its turn (authorized already): the sandbox
 * may have gone meanwhile. userdata is its id. */
static int file_start_later(sd_bus_message *call, void *userdata, SandboxError *error) {
        SandboxRequest *req = userdata;
        Sandbox *s = manager_get_sandbox(req->manager, req->id);

        if (!s)
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_SANDBOX, "Sandbox %s is gone.", req->id);
        return file_start(call, s, error);
}

static void file_request_free(void *userdata) {
        SandboxRequest *req = userdata;

        free(req->id);
        free(req);
}

static int file_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s,
                           SandboxRequest *req, SandboxError *error) {
        const char *member = sd_bus_message_get_member(call);
        SandboxRequest *later;

        if (!streq(member, "ReadFile") && !streq(member, "ListFiles"))
                return file_start(call, s, error);
        /* Their replies are large: such calls take turns (bus-flow.h), so this one may start
         * after req is gone. */
        later = calloc(1, sizeof(SandboxRequest));
        if (!later)
                return -ENOMEM;
        later->manager = req->manager;
        later->id = strdup(sandbox_get_id(s));
        if (!later->id) {
                free(later);
                return -ENOMEM;
        }
        return bus_flow_start_large(call, file_start_later, later, file_request_free, error);
}

int method_sandbox_file(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, file_authorized, NULL);
}

/* ---- WatchDirectory ---- */

/* The watch ended (its reader went, or the sandbox): nothing is left to answer. */
static void on_watch_done(const struct agent_file_result *result, const void *data, size_t size,
                          const SandboxError *error, void *userdata) {
}

static int watch_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s, SandboxRequest *req,
                            SandboxError *error) {
        _cleanup_close_ int reader = -EBADF;
        const char *path;
        int p[2], recursive, r;

        r = sd_bus_message_read(call, "sb", &path, &recursive);
        if (r < 0)
                return r;
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        reader = p[0];
        /* The agent writes the events into the pipe; the caller reads them from its end. */
        r = sandbox_watch_directory(s, path, recursive, p[1], on_watch_done, NULL, NULL, error);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, "h", reader);
}

int method_sandbox_watch(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, watch_authorized, NULL);
}
