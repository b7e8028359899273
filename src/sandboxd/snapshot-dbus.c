/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The snapshot methods on D-Bus (sandboxd-api(7), SNAPSHOTS): Sandbox.Snapshot,
 * Sandbox.Hibernate, Sandbox.Fork, Manager.Wake, Manager.ListSnapshots and
 * Manager.RemoveSnapshot. Translation only, as snapshot-varlink.c. */

#include "bus-util.h"
#include "log.h"
#include "sandbox-dbus.h"
#include "snapshot.h"

/* ---- on a sandbox ---- */

static void on_snapshot(const SnapshotMeta *meta, const SandboxError *error, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = userdata;

        if (error)
                bus_reply_error(call, error);
        else
                (void) sd_bus_reply_method_return(call, "s", meta->id);
}

static int snapshot_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s,
                               SandboxRequest *req, SandboxError *error) {
        bool hibernate = streq(sd_bus_message_get_member(call), "Hibernate");
        SnapshotOptions o = {};
        int r;

        r = bus_read_options(call, OPTION_SET_SNAPSHOT, &o, error);
        if (r < 0)
                return r;
        sd_bus_message_ref(call);
        r = (hibernate ? sandbox_hibernate : sandbox_snapshot)(s, &o, on_snapshot, call, error);
        if (r < 0)
                sd_bus_message_unref(call);
        return r;
}

int method_sandbox_snapshot(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, snapshot_authorized, NULL);
}

static int fork_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s, SandboxRequest *req,
                           SandboxError *error) {
        _cleanup_(sandbox_config_done) SandboxConfig config = {};
        int r;

        r = bus_read_options(call, OPTION_SET_SANDBOX, &config, error);
        if (r < 0)
                return r;
        sd_bus_message_ref(call);
        r = snapshot_fork_sandbox(req->manager, caller, s, &config, bus_reply_sandbox_created, call, error);
        if (r < 0)
                sd_bus_message_unref(call);
        return r;
}

int method_sandbox_fork(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        /* The fork runs what the source holds: whoever may exec in it may. */
        return sandbox_authorize_call(m, userdata, fork_authorized, NULL);
}

/* ---- on the manager ---- */

typedef struct SnapshotRequest {
        Manager *manager;
        char *id;
        bool wake;
        SnapshotMeta meta;
} SnapshotRequest;

static void snapshot_request_free(void *userdata) {
        SnapshotRequest *c = userdata;

        free(c->id);
        snapshot_meta_done(&c->meta);
        free(c);
}

static int snapshot_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                           const char **ret_tenant, SandboxError *error) {
        SnapshotRequest *c = userdata;

        return snapshot_call_access(c->manager, caller, c->id, c->wake, &c->meta, ret_owner, ret_tenant, error);
}

static int wake_authorized(sd_bus_message *call, const SandboxCaller *caller, void *userdata, SandboxError *error) {
        SnapshotRequest *c = userdata;
        int r;

        sd_bus_message_ref(call);
        r = snapshot_wake_sandbox(c->manager, caller, c->id, bus_reply_sandbox_created, call, error);
        if (r < 0)
                sd_bus_message_unref(call);
        return r;
}

static int remove_authorized(sd_bus_message *call, const SandboxCaller *caller, void *userdata,
                             SandboxError *error) {
        SnapshotRequest *c = userdata;
        int r;

        r = snapshot_remove(c->manager, c->meta.id, error);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, NULL);
}

/* Wake and RemoveSnapshot: "s", a hibernated sandbox's id or name, or a snapshot's id. */
int method_snapshot_call(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        bool wake = streq(sd_bus_message_get_member(m), "Wake");
        BusFrontend *f = userdata;
        SnapshotRequest *c;
        const char *id;
        int r;

        r = sd_bus_message_read(m, "s", &id);
        if (r < 0)
                return r;
        c = calloc(1, sizeof(SnapshotRequest));
        if (!c)
                return -ENOMEM;
        c->manager = f->manager;
        c->wake = wake;
        c->id = strdup(id);
        if (!c->id) {
                snapshot_request_free(c);
                return -ENOMEM;
        }
        return bus_authorize_then(m, snapshot_access, 0, wake ? wake_authorized : remove_authorized,
                                  c, snapshot_request_free);
}

static int append_snapshot(sd_bus_message *reply, const SnapshotMeta *s) {
        return sd_bus_message_append(reply, "a{sv}", 12,
                                     "Id", "s", s->id,
                                     "Template", "s", strempty(s->template_name),
                                     "Owner", "u", (uint32_t) s->owner,
                                     "Tenant", "s", s->config.tenant,
                                     "Name", "s", s->config.name,
                                     "Source", "s", s->source,
                                     "Size", "t", s->size,
                                     "ContentSize", "t", s->content_size,
                                     "Created", "t", s->created,
                                     "DiskMax", "t", s->config.disk_max,
                                     "IncludesTmp", "b", (int) s->tmp,
                                     "Hibernated", "b", (int) s->hibernated);
}

static int list_snapshots_authorized(sd_bus_message *call, const SandboxCaller *caller, void *userdata,
                                     SandboxError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        BusFrontend *f = userdata;
        SnapshotMeta *a = NULL;
        size_t n = 0;
        int r;

        r = snapshot_list(f->manager, caller, &a, &n);
        if (r < 0)
                return sandbox_error_set_errno(error, -r, "Failed to read the snapshots: %m");
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = append_snapshot(reply, &a[i]);
        snapshot_meta_array_free(a, n);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

int method_list_snapshots(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return bus_authorize_then(m, bus_list_access, SANDBOX_AUTHORIZE_OPTIONAL, list_snapshots_authorized,
                                  userdata, NULL);
}
