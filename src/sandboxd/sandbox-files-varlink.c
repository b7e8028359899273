/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The file methods of io.sandboxd.Sandbox: translation onto the core's file operations
 * (file-op.h), which check every argument; every path is resolved by the agent inside the
 * sandbox. No descriptors on varlink: data is base64 in the replies, and Download streams
 * it ("more") from a pipe of ours that the agent writes into. */

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>

#include "file-op.h"
#include "json-util.h"
#include "log.h"
#include "parse-util.h"
#include "sandbox-varlink.h"

#define ARG(field) offsetof(SandboxArgs, field)

/* A name from the sandbox as JSON can carry it: the string itself when it is valid UTF-8,
 * else its escaped form in name and the exact bytes, base64, in name + "Bytes"
 * (sandboxd-api(7), as on D-Bus). */
static int add_name(json_object *o, const char *key, const char *bytes_key, const char *name) {
        int r;

        name = strempty(name);
        if (utf8_is_valid_n(name, strlen(name)))
                return json_add(o, key, json_object_new_string(name));
        _cleanup_free_ char *escaped = utf8_escape_invalid(name);
        if (!escaped)
                return -ENOMEM;
        r = json_add(o, key, json_object_new_string(escaped));
        if (r < 0)
                return r;
        return json_add(o, bytes_key, json_object_new_base64(name, strlen(name)));
}

static json_object *file_entry_to_json(const struct agent_file_entry *e) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o ||
            add_name(o, "path", "pathBytes", e->path) < 0 ||
            json_add(o, "type", json_object_new_string(strempty(agent_file_type_to_string(e->type)))) < 0 ||
            json_add(o, "size", json_object_new_uint64(e->size)) < 0 ||
            json_add(o, "mode", json_object_new_int((int) e->mode)) < 0 ||
            json_add(o, "mtime", json_object_new_int64(e->mtime_usec)) < 0 ||
            add_name(o, "target", "targetBytes", e->target) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static int reply_file_result(VarlinkCall *call, const struct agent_file_result *result, const void *data,
                             size_t size) {
        const char *method = varlink_call_get_method(call) + strlen(SANDBOX_VARLINK_INTERFACE ".");
        _cleanup_json_ json_object *p = json_object_new_object();
        int r = 0;

        if (!p)
                return -ENOMEM;
        if (streq(method, "ReadFile"))
                r = json_add(p, "data", json_object_new_base64(data ?: "", size));
        else if (streq(method, "WriteFile"))
                r = json_add(p, "bytes", json_object_new_uint64(result->bytes));
        else if (streq(method, "Stat"))
                r = json_add(p, "entry", file_entry_to_json(&result->stat));
        else if (streq(method, "ListFiles")) {
                _cleanup_json_ json_object *l = json_object_new_array();
                if (!l)
                        return -ENOMEM;
                for (size_t i = 0; i < result->n_entries; i++) {
                        json_object *e = file_entry_to_json(result->entries + i);
                        if (!e || json_object_array_add(l, e) < 0) {
                                json_object_put(e);
                                return -ENOMEM;
                        }
                }
                r = json_add(p, "entries", TAKE_PTR(l));
        }
        if (r < 0)
                return r;
        return varlink_reply_or_fail(call, p);
}

static void on_file_done(const struct agent_file_result *result, const void *data, size_t size,
                         const SandboxError *error, void *userdata) {
        _cleanup_(varlink_call_unrefp) VarlinkCall *call = userdata;
        int r;

        if (error) {
                (void) varlink_reply_sandbox_error(call, error);
                return;
        }
        r = reply_file_result(call, result, data, size);
        if (r < 0 && r != -ECONNRESET)
                /* The caller must never be left waiting. */
                (void) varlink_reply_error(call, NULL, r);
}

/* ReadFile, WriteFile, ListFiles, Stat, MakeDirectory, Remove, Move: one answer each. */
static int file_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s, SandboxVarlinkRequest *req,
                           SandboxError *error) {
        const char *method = varlink_call_get_method(call) + strlen(SANDBOX_VARLINK_INTERFACE ".");
        const SandboxArgs *a = &req->args;
        int r;

        varlink_call_ref(call);
        if (streq(method, "ReadFile"))
                r = sandbox_read_file(s, a->path, a->offset, a->length, on_file_done, call, NULL, error);
        else if (streq(method, "WriteFile"))
                r = sandbox_write_file(s, a->path, a->data.data ?: "", a->data.size, &a->file, on_file_done, call,
                                       NULL, error);
        else if (streq(method, "ListFiles"))
                r = sandbox_list_files(s, a->path, a->depth, on_file_done, call, NULL, error);
        else if (streq(method, "Stat"))
                r = sandbox_stat_file(s, a->path, on_file_done, call, NULL, error);
        else if (streq(method, "MakeDirectory"))
                r = sandbox_make_directory(s, a->path, a->parents, on_file_done, call, NULL, error);
        else if (streq(method, "Remove"))
                r = sandbox_remove_file(s, a->path, a->recursive, on_file_done, call, NULL, error);
        else
                r = sandbox_move_file(s, a->path, a->to, on_file_done, call, NULL, error);
        if (r < 0)
                varlink_call_unref(call);
        return r;
}

/* ---- Download, streamed ---- */

/* A Download under way: done once the core answered and the pipe is at its end (the agent
 * wrote all it read). A caller that leaves ends it, as on D-Bus. */
typedef struct DownloadCall {
        VarlinkCall *call;
        VarlinkRelay *relay;
        FileOp *op;                   /* until the core answers */
        bool answered;                /* the core answered: bytes */
        uint64_t bytes;
} DownloadCall;

static DownloadCall *download_call_free(DownloadCall *d) {
        if (!d)
                return NULL;
        varlink_relay_free(d->relay);
        varlink_call_release(d->call);
        return mfree(d);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(DownloadCall *, download_call_free);

static void download_finish(DownloadCall *d) {
        _cleanup_json_ json_object *p = json_object_new_object();

        if (!p || json_add(p, "bytes", json_object_new_uint64(d->bytes)) < 0)
                (void) varlink_reply_error(d->call, NULL, -ENOMEM);
        else
                (void) varlink_call_reply(d->call, p);
        download_call_free(d);
}

static void on_download_eof(VarlinkRelay *relay, void *userdata) {
        DownloadCall *d = userdata;

        if (d->answered)
                download_finish(d);
}

static void on_download_done(const struct agent_file_result *result, const void *data, size_t size,
                             const SandboxError *error, void *userdata) {
        DownloadCall *d = userdata;

        d->op = NULL;
        if (!d->call) {
                download_call_free(d);
                return;
        }
        if (error) {
                (void) varlink_reply_sandbox_error(d->call, error);
                download_call_free(d);
                return;
        }
        d->answered = true;
        d->bytes = result->bytes;
        if (varlink_relay_at_eof(d->relay))
                download_finish(d);
}

static void on_download_disconnect(VarlinkCall *call, void *userdata) {
        DownloadCall *d = userdata;
        FileOp *op = TAKE_PTR(d->op);

        d->call = varlink_call_unref(d->call);
        d->relay = varlink_relay_free(d->relay);
        if (op)
                file_op_cancel(op);     /* on_download_done() follows, and frees d */
        else
                download_call_free(d);
}

static int download_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s,
                               SandboxVarlinkRequest *req, SandboxError *error) {
        _cleanup_(download_call_freep) DownloadCall *d = NULL;
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };
        static const char * const names[] = { "data" };
        int r;

        d = calloc(1, sizeof(DownloadCall));
        if (!d)
                return -ENOMEM;
        d->call = varlink_call_ref(call);
        if (pipe2(p, O_CLOEXEC) < 0 || fcntl(p[0], F_SETFL, O_NONBLOCK) < 0)
                return -errno;
        /* The core hands a copy of the write end to the agent: ours goes at once, so that
         * the agent's is the last and its end is the pipe's end. */
        r = sandbox_download(s, req->args.path, p[1], &req->args.file, on_download_done, d, &d->op, error);
        if (r < 0)
                return r;
        p[1] = safe_close(p[1]);
        r = varlink_relay_new(req->frontend->event, call, (int[]) { TAKE_FD(p[0]) }, names, 1, on_download_eof, d,
                              &d->relay);
        if (r < 0) {
                /* The operation runs: end it, and let its answer free d. */
                DownloadCall *gone = TAKE_PTR(d);
                gone->call = varlink_call_unref(gone->call);
                file_op_cancel(TAKE_PTR(gone->op));
                return r;
        }
        varlink_call_set_disconnect_callback(call, on_download_disconnect, d);
        TAKE_PTR(d);
        return 0;
}

/* ---- the methods ---- */

static int file_options_prepare(Sandbox *s, SandboxArgs *a, SandboxError *error) {
        return options_from_json(a->options, OPTION_SET_FILE, &a->file, NULL, 0, error);
}

#define ARG_ID { "id", VARLINK_PARAM_STRING, ARG(id), true }
#define ARG_PATH { "path", VARLINK_PARAM_STRING, ARG(path), true }

static const VarlinkParam read_file_params[] = {
        ARG_ID, ARG_PATH,
        { "offset", VARLINK_PARAM_UINT64, ARG(offset) },
        { "length", VARLINK_PARAM_UINT64, ARG(length) },
        {}
};

static const VarlinkParam write_file_params[] = {
        ARG_ID, ARG_PATH,
        { "data",    VARLINK_PARAM_BYTES,  ARG(data),    true },
        { "options", VARLINK_PARAM_OBJECT, ARG(options)       },
        {}
};

static const VarlinkParam download_params[] = {
        ARG_ID, ARG_PATH,
        { "options", VARLINK_PARAM_OBJECT, ARG(options) },
        {}
};

static const VarlinkParam list_files_params[] = {
        ARG_ID, ARG_PATH,
        { "depth", VARLINK_PARAM_UINT64, ARG(depth), true },
        {}
};

static const VarlinkParam path_params[] = {
        ARG_ID, ARG_PATH,
        {}
};

static const VarlinkParam make_directory_params[] = {
        ARG_ID, ARG_PATH,
        { "parents", VARLINK_PARAM_BOOL, ARG(parents) },
        {}
};

static const VarlinkParam remove_params[] = {
        ARG_ID, ARG_PATH,
        { "recursive", VARLINK_PARAM_BOOL, ARG(recursive) },
        {}
};

static const VarlinkParam move_params[] = {
        ARG_ID, ARG_PATH,
        { "to", VARLINK_PARAM_STRING, ARG(to), true },
        {}
};

static int method_file(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        const char *method = varlink_call_get_method(call) + strlen(SANDBOX_VARLINK_INTERFACE ".");
        static const struct {
                const char *name;
                const VarlinkParam *params;
                sandbox_varlink_prepare_t prepare;
        } table[] = {
                { "ReadFile",      read_file_params,      NULL                 },
                { "WriteFile",     write_file_params,     file_options_prepare },
                { "ListFiles",     list_files_params,     NULL                 },
                { "Stat",          path_params,           NULL                 },
                { "MakeDirectory", make_directory_params, NULL                 },
                { "Remove",        remove_params,         NULL                 },
                { "Move",          move_params,           NULL                 },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(method, table[i].name))
                        return sandbox_varlink_method(userdata, call, parameters, table[i].params,
                                                      table[i].prepare, file_authorized);
        return -EINVAL;
}

static int method_download(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        /* The data comes in "continues" replies: a caller that takes one reply only would
         * get none of it. ReadFile is the one-reply way. */
        if (!(flags & VARLINK_CALL_MORE)) {
                (void) varlink_call_error(call, VARLINK_ERROR_EXPECTED_MORE, NULL);
                return 0;
        }
        return sandbox_varlink_method(userdata, call, parameters, download_params,
                                      file_options_prepare, download_authorized);
}

int sandbox_files_varlink_bind(VarlinkFrontend *f) {
        static const VarlinkMethodEntry methods[] = {
                { "ReadFile",      method_file     },
                { "WriteFile",     method_file     },
                { "ListFiles",     method_file     },
                { "Stat",          method_file     },
                { "MakeDirectory", method_file     },
                { "Remove",        method_file     },
                { "Move",          method_file     },
                { "Download",      method_download },
        };

        return varlink_bind_methods(f->server, SANDBOX_VARLINK_INTERFACE, methods, ELEMENTSOF(methods), f);
}
