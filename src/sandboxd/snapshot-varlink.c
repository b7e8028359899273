/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The snapshot methods of io.sandboxd.Sandbox: Snapshot, Hibernate, Fork (on a sandbox),
 * Wake, ListSnapshots, RemoveSnapshot, ExportSnapshot, ImportSnapshot. Translation only: snapshot.h does the work and
 * access.h decides who may. */

#include <stddef.h>

#include "json-util.h"
#include "sandbox-varlink.h"
#include "snapshot.h"

static json_object *snapshot_to_json(const SnapshotMeta *m) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o ||
            json_add(o, "id", json_object_new_string(m->id)) < 0 ||
            json_add(o, "template", json_object_new_string(strempty(m->template_name))) < 0 ||
            json_add(o, "owner", json_object_new_uint64(m->owner)) < 0 ||
            json_add(o, "tenant", json_object_new_string(m->config.tenant)) < 0 ||
            json_add(o, "name", json_object_new_string(m->config.name)) < 0 ||
            json_add(o, "source", json_object_new_string(m->source)) < 0 ||
            json_add(o, "size", json_object_new_uint64(m->size)) < 0 ||
            json_add(o, "contentSize", json_object_new_uint64(m->content_size)) < 0 ||
            json_add(o, "created", json_object_new_uint64(m->created)) < 0 ||
            json_add(o, "diskMax", json_object_new_uint64(m->config.disk_max)) < 0 ||
            json_add(o, "includesTmp", json_object_new_boolean(m->tmp)) < 0 ||
            json_add(o, "hibernated", json_object_new_boolean(m->hibernated)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* ---- on a sandbox: Snapshot, Hibernate, Fork ---- */

static void on_snapshot(const SnapshotMeta *meta, const SandboxError *error, void *userdata) {
        _cleanup_(varlink_call_unrefp) VarlinkCall *call = userdata;
        _cleanup_json_ json_object *p = NULL;

        if (error) {
                (void) varlink_reply_sandbox_error(call, error);
                return;
        }
        p = json_object_new_object();
        if (!p || json_add(p, "snapshot", snapshot_to_json(meta)) < 0)
                (void) varlink_reply_error(call, NULL, -ENOMEM);
        else
                (void) varlink_call_reply(call, p);
}

static int snapshot_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s,
                               SandboxVarlinkRequest *req, SandboxError *error) {
        bool hibernate = streq(varlink_call_get_method(call), SANDBOX_VARLINK_INTERFACE ".Hibernate");
        int r;

        varlink_call_ref(call);
        r = (hibernate ? sandbox_hibernate : sandbox_snapshot)(s, &req->args.snapshot, on_snapshot, call, error);
        if (r < 0)
                varlink_call_unref(call);
        return r;
}

static int snapshot_prepare(Sandbox *s, SandboxArgs *a, SandboxError *error) {
        return options_from_json(a->options, OPTION_SET_SNAPSHOT, &a->snapshot, NULL, 0, error);
}

static const VarlinkParam snapshot_params[] = {
        { "id",      VARLINK_PARAM_STRING, offsetof(SandboxArgs, id), true },
        { "options", VARLINK_PARAM_OBJECT, offsetof(SandboxArgs, options) },
        {}
};

static int method_snapshot(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        return sandbox_varlink_method(userdata, call, parameters, snapshot_params, snapshot_prepare,
                                      snapshot_authorized);
}

static int fork_prepare(Sandbox *s, SandboxArgs *a, SandboxError *error) {
        return options_from_json(a->options, OPTION_SET_SANDBOX, &a->config, NULL, 0, error);
}

static int fork_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s, SandboxVarlinkRequest *req,
                           SandboxError *error) {
        int r;

        varlink_call_ref(call);
        r = snapshot_fork_sandbox(req->frontend->manager, caller, s, &req->args.config, varlink_reply_sandbox_created,
                                  call, error);
        if (r < 0)
                varlink_call_unref(call);
        return r;
}

static int method_fork(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        /* The fork runs what the source holds: whoever may exec in it may. */
        return sandbox_varlink_method(userdata, call, parameters, snapshot_params, fork_prepare,
                                      fork_authorized);
}

/* ---- Wake, RemoveSnapshot ---- */

typedef struct SnapshotCall {
        VarlinkFrontend *frontend;
        char *id;
        bool wake;
        SnapshotMeta meta;   /* found while authorizing */
} SnapshotCall;

static void snapshot_call_free(void *userdata) {
        SnapshotCall *c = userdata;

        free(c->id);
        snapshot_meta_done(&c->meta);
        free(c);
}

static int snapshot_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                           const char **ret_tenant, SandboxError *error) {
        SnapshotCall *c = userdata;

        return snapshot_call_access(c->frontend->manager, caller, c->id, c->wake, &c->meta, ret_owner,
                                    ret_tenant, error);
}

static int wake_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata, SandboxError *error) {
        SnapshotCall *c = userdata;
        int r;

        varlink_call_ref(call);
        r = snapshot_wake_sandbox(c->frontend->manager, caller, c->id, varlink_reply_sandbox_created, call, error);
        if (r < 0)
                varlink_call_unref(call);
        return r;
}

static int remove_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata, SandboxError *error) {
        SnapshotCall *c = userdata;
        int r;

        r = snapshot_remove(c->frontend->manager, c->meta.id, error);
        if (r < 0)
                return r;
        (void) varlink_call_reply(call, NULL);
        return 0;
}

static const VarlinkParam wake_params[] = {
        { "id", VARLINK_PARAM_STRING, offsetof(SnapshotCall, id), true },
        {}
};

static const VarlinkParam remove_params[] = {
        { "snapshot", VARLINK_PARAM_STRING, offsetof(SnapshotCall, id), true },
        {}
};

static int method_snapshot_call(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        bool wake = streq(varlink_call_get_method(call), SANDBOX_VARLINK_INTERFACE ".Wake");
        VarlinkFrontend *f = userdata;
        SnapshotCall *c = calloc(1, sizeof(SnapshotCall));

        if (c) {
                c->frontend = f;
                c->wake = wake;
        }
        return varlink_read_authorize_then(f->bus, call, parameters, wake ? wake_params : remove_params, c,
                                           snapshot_call_free, snapshot_access, 0,
                                           wake ? wake_authorized : remove_authorized);
}

/* ---- ListSnapshots ---- */

static int list_snapshots_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata,
                                     SandboxError *error) {
        _cleanup_json_ json_object *p = json_object_new_object(), *l = json_object_new_array();
        VarlinkFrontend *f = userdata;
        SnapshotMeta *a = NULL;
        size_t n = 0;
        int r;

        if (!p || !l)
                return -ENOMEM;
        r = snapshot_list(f->manager, caller, &a, &n);
        if (r < 0)
                return sandbox_error_set_errno(error, -r, "Failed to read the snapshots: %m");
        for (size_t i = 0; i < n && r >= 0; i++) {
                json_object *o = snapshot_to_json(&a[i]);
                if (!o || json_object_array_add(l, o) < 0) {
                        json_object_put(o);
                        r = -ENOMEM;
                }
        }
        snapshot_meta_array_free(a, n);
        if (r >= 0)
                r = json_add(p, "snapshots", TAKE_PTR(l));
        if (r < 0)
                return r;
        (void) varlink_reply_or_fail(call, p);
        return 0;
}

static int method_list_snapshots(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags,
                                 void *userdata) {
        static const VarlinkParam no_params[] = { {} };
        VarlinkFrontend *f = userdata;

        return varlink_read_authorize_then(f->bus, call, parameters, no_params, f, NULL, varlink_list_access,
                                           SANDBOX_AUTHORIZE_OPTIONAL, list_snapshots_authorized);
}

/* ---- ExportSnapshot, ImportSnapshot: a hibernated sandbox moved in parts ---- */

#define SNAPSHOT_PART_MAX ((size_t) FILE_PART_MAX)

typedef struct MoveCall {
        VarlinkFrontend *frontend;
        char *id;              /* Export: the hibernated sandbox; Import: the import's */
        char *meta;            /* Import's first part: the exported record */
        uint64_t offset;
        uint64_t length;
        VarlinkBytes data;
        bool done;
        SnapshotMeta found;    /* Export: found while authorizing */
} MoveCall;

static void move_call_free(void *userdata) {
        MoveCall *c = userdata;

        free(c->id);
        free(c->meta);
        free(c->data.data);
        snapshot_meta_done(&c->found);
        free(c);
}

static int export_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner, const char **ret_tenant,
                         SandboxError *error) {
        MoveCall *c = userdata;

        return snapshot_export_access(c->frontend->manager, caller, c->id, &c->found, ret_owner, ret_tenant, error);
}

static void on_exported(const SnapshotMeta *meta, const void *data, size_t size, const SandboxError *error,
                        void *userdata) {
        _cleanup_(varlink_call_unrefp) VarlinkCall *call = userdata;
        _cleanup_free_ char *text = NULL;
        _cleanup_json_ json_object *p = NULL;

        if (error) {
                (void) varlink_reply_sandbox_error(call, error);
                return;
        }
        if (snapshot_meta_to_json(meta, &text) < 0) {
                (void) varlink_reply_error(call, NULL, -ENOMEM);
                return;
        }
        /* size: the archive's, when it is one on disk; none for one made as it is read. */
        p = json_object_new_object();
        if (!p ||
            json_add(p, "meta", json_object_new_string(text)) < 0 ||
            (meta->size > 0 && json_add(p, "size", json_object_new_uint64(meta->size)) < 0) ||
            json_add(p, "data", json_object_new_base64(data, size)) < 0)
                (void) varlink_reply_error(call, NULL, -ENOMEM);
        else
                (void) varlink_reply_or_fail(call, p);
}

static int export_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata, SandboxError *error) {
        MoveCall *c = userdata;
        int r;

        varlink_call_ref(call);
        r = snapshot_export_read(c->frontend->manager, caller, c->id, c->offset,
                                 c->length == 0 ? SNAPSHOT_PART_MAX : MIN(c->length, SNAPSHOT_PART_MAX), on_exported,
                                 call, error);
        if (r < 0)
                varlink_call_unref(call);
        return r;
}

static int import_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner, const char **ret_tenant,
                         SandboxError *error) {
        /* A hibernated sandbox of the caller's own, for the tenant it acts for. */
        *ret_owner = caller->uid;
        *ret_tenant = strempty(caller->tenant);
        return 0;
}

static int import_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata, SandboxError *error) {
        _cleanup_json_ json_object *p = NULL;
        MoveCall *c = userdata;
        char id[SANDBOX_ID_LEN + 1];
        int r;

        r = snapshot_import_part(c->frontend->manager, caller, c->id, c->meta, c->offset, c->data.data,
                                 c->data.size, c->done, id, error);
        if (r < 0)
                return r;
        p = json_object_new_object();
        if (!p || json_add(p, "id", json_object_new_string(id)) < 0)
                return -ENOMEM;
        (void) varlink_reply_or_fail(call, p);
        return 0;
}

static const VarlinkParam export_params[] = {
        { "id",     VARLINK_PARAM_STRING, offsetof(MoveCall, id), true },
        { "offset", VARLINK_PARAM_UINT64, offsetof(MoveCall, offset) },
        { "length", VARLINK_PARAM_UINT64, offsetof(MoveCall, length) },
        {}
};

static const VarlinkParam import_params[] = {
        { "import", VARLINK_PARAM_STRING, offsetof(MoveCall, id) },
        { "meta",   VARLINK_PARAM_STRING, offsetof(MoveCall, meta) },
        { "offset", VARLINK_PARAM_UINT64, offsetof(MoveCall, offset) },
        { "data",   VARLINK_PARAM_BYTES,  offsetof(MoveCall, data), true },
        { "done",   VARLINK_PARAM_BOOL,   offsetof(MoveCall, done) },
        {}
};

static int method_move(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        bool export = streq(varlink_call_get_method(call), SANDBOX_VARLINK_INTERFACE ".ExportSnapshot");
        VarlinkFrontend *f = userdata;
        MoveCall *c = calloc(1, sizeof(MoveCall));

        if (c)
                c->frontend = f;
        return varlink_read_authorize_then(f->bus, call, parameters, export ? export_params : import_params, c,
                                           move_call_free, export ? export_access : import_access, 0,
                                           export ? export_authorized : import_authorized);
}

int snapshot_varlink_bind(VarlinkFrontend *f) {
        static const VarlinkMethodEntry methods[] = {
                { "Snapshot",       method_snapshot       },
                { "Hibernate",      method_snapshot       },
                { "Fork",           method_fork           },
                { "Wake",           method_snapshot_call  },
                { "RemoveSnapshot", method_snapshot_call  },
                { "ListSnapshots",  method_list_snapshots },
                { "ExportSnapshot", method_move           },
                { "ImportSnapshot", method_move           },
        };

        return varlink_bind_methods(f->server, SANDBOX_VARLINK_INTERFACE, methods, ELEMENTSOF(methods), f);
}
