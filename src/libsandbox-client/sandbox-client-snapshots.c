/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Snapshots (sandboxd-api(7), SNAPSHOTS): Snapshot, Hibernate, Fork, Wake, ListSnapshots,
 * RemoveSnapshot. */

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-client-internal.h"

/* A snapshot may take as long as writing the sandbox's /work does. */
#define SNAPSHOT_CALL_TIMEOUT_USEC (UINT64_C(600) * UINT64_C(1000000))

/* Calls member of the Manager (h NULL) or of h with "a{sv}" (or "s" arg), and reads its
 * reply's first string into *ret (when given). */
static int call_for_string(SandboxClient *c, SandboxHandle *h, const char *member, const char *arg,
                           const SandboxCreateOptions *create, bool include_tmp, char **ret,
                           SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        const char *s;
        int r;

        r = client_new_call(c, h, member, &m);
        if (r >= 0 && arg)
                r = sd_bus_message_append(m, "s", arg);
        else if (r >= 0 && streq(member, "Fork"))
                r = client_append_create_options(m, create);
        else if (r >= 0 && include_tmp)
                r = sd_bus_message_append(m, "a{sv}", 1, "IncludeTmp", "b", 1);
        else if (r >= 0)
                r = sd_bus_message_append(m, "a{sv}", 0);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        r = client_call(c, m, SNAPSHOT_CALL_TIMEOUT_USEC, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;
        if (!ret)
                return 0;
        r = sd_bus_message_read(reply, "s", &s);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        *ret = strdup(s);
        return *ret ? 0 : client_error_from_bus(error, NULL, -ENOMEM);
}

int sandbox_handle_snapshot(SandboxHandle *h, bool hibernate, bool include_tmp, char **ret_snapshot,
                            SandboxClientError *error) {
        return call_for_string(h->client, h, hibernate ? "Hibernate" : "Snapshot", NULL, NULL, include_tmp,
                               ret_snapshot, error);
}

int sandbox_handle_fork(SandboxHandle *h, const SandboxCreateOptions *o, char **ret_id, SandboxClientError *error) {
        return call_for_string(h->client, h, "Fork", NULL, o, false, ret_id, error);
}

int sandbox_client_wake(SandboxClient *c, const char *id_or_name, char **ret_id, SandboxClientError *error) {
        return call_for_string(c, NULL, "Wake", id_or_name, NULL, false, ret_id, error);
}

int sandbox_client_remove_snapshot(SandboxClient *c, const char *id, SandboxClientError *error) {
        return client_call_method(c, NULL, "RemoveSnapshot", error, "s", id);
}

static const struct {
        const char *name;
        const char *sig;
        size_t offset;
} snapshot_fields[] = {
        { "Id",          "s", offsetof(SandboxSnapshotInfo, id)            },
        { "Template",    "s", offsetof(SandboxSnapshotInfo, template_name) },
        { "Owner",       "u", offsetof(SandboxSnapshotInfo, owner)         },
        { "Tenant",      "s", offsetof(SandboxSnapshotInfo, tenant)        },
        { "Name",        "s", offsetof(SandboxSnapshotInfo, name)          },
        { "Source",      "s", offsetof(SandboxSnapshotInfo, source)        },
        { "Size",        "t", offsetof(SandboxSnapshotInfo, size)          },
        { "ContentSize", "t", offsetof(SandboxSnapshotInfo, content_size)  },
        { "Created",     "t", offsetof(SandboxSnapshotInfo, created)       },
        { "DiskMax",     "t", offsetof(SandboxSnapshotInfo, disk_max)      },
        { "IncludesTmp", "b", offsetof(SandboxSnapshotInfo, includes_tmp)  },
        { "Hibernated",  "b", offsetof(SandboxSnapshotInfo, hibernated)    },
};

static const char *snapshot_field(size_t i, const char **sig, size_t *off) {
        *sig = snapshot_fields[i].sig;
        *off = snapshot_fields[i].offset;
        return snapshot_fields[i].name;
}

static void snapshot_info_done(void *item) {
        SandboxSnapshotInfo *s = item;

        free(s->id);
        free(s->template_name);
        free(s->tenant);
        free(s->name);
        free(s->source);
        *s = (SandboxSnapshotInfo) {};
}

static int read_snapshot(sd_bus_message *m, void *item) {
        SandboxSnapshotInfo *s = item;
        int r;

        r = sd_bus_message_at_end(m, false);
        if (r != 0)
                return r < 0 ? r : 0;
        r = client_read_fields(m, ELEMENTSOF(snapshot_fields), snapshot_field, s, &s->seen);
        return r < 0 ? r : 1;
}

int sandbox_client_list_snapshots(SandboxClient *c, SandboxSnapshotInfo **ret, size_t *ret_n,
                                  SandboxClientError *error) {
        return client_call_list(c, NULL, "ListSnapshots", "a{sv}", sizeof(SandboxSnapshotInfo), read_snapshot,
                                snapshot_info_done, (void **) ret, ret_n, error);
}

void sandbox_snapshot_info_free_array(SandboxSnapshotInfo *a, size_t n) {
        client_array_free(a, n, sizeof(SandboxSnapshotInfo), snapshot_info_done);
}
