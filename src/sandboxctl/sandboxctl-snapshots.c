/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "sandboxctl-snapshots.h"
#include "sandboxctl-util.h"
#include "strv.h"

/* {"key": value} on stdout, or value alone. */
static int print_id(const char *key, const char *value, bool json) {
        _cleanup_json_ json_object *j = NULL;

        if (!json) {
                if (!isempty(value)) /* a hibernation on disk has no snapshot: nothing */
                        puts(value);
                return 0;
        }
        j = json_object_new_object();
        if (!j || json_add_string(j, key, value) < 0)
                return log_oom();
        return print_json(j);
}

int snapshots_take(SandboxClient *c, int argc, char *argv[], bool hibernate, bool include_tmp, bool json) {
        int ret = 0, r;

        for (int i = 1; i < argc; i++) {
                _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
                _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
                _cleanup_free_ char *snapshot = NULL;

                r = sandbox_client_get(c, argv[i], &h, &error);
                if (r >= 0)
                        r = sandbox_handle_snapshot(h, hibernate, include_tmp, &snapshot, &error);
                if (r >= 0)
                        r = print_id("snapshot", snapshot, json);
                else
                        r = log_error_errno(r, "Failed to %s sandbox %s: %s", argv[0], argv[i],
                                            sandbox_client_error_message(&error, r));
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return ret;
}

int snapshots_fork(SandboxClient *c, const char *id, const SandboxCreateOptions *o, bool json) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        _cleanup_free_ char *fork = NULL;
        int r;

        r = sandbox_client_get(c, id, &h, &error);
        if (r >= 0)
                r = sandbox_handle_fork(h, o, &fork, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to fork sandbox %s: %s", id, sandbox_client_error_message(&error, r));
        return print_id("id", fork, json);
}

int snapshots_wake(SandboxClient *c, const char *id_or_name, bool json) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_free_ char *id = NULL;
        int r;

        r = sandbox_client_wake(c, id_or_name, &id, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to wake %s: %s", id_or_name, sandbox_client_error_message(&error, r));
        return print_id("id", id, json);
}

static json_object *snapshot_json(const SandboxSnapshotInfo *s) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o ||
            json_add_string(o, "id", s->id) < 0 ||
            json_add_string(o, "template", s->template_name) < 0 ||
            json_add(o, "owner", json_object_new_int64(s->owner)) < 0 ||
            json_add_string(o, "tenant", s->tenant) < 0 ||
            json_add_string(o, "name", s->name) < 0 ||
            json_add_string(o, "source", s->source) < 0 ||
            json_add(o, "size", json_object_new_int64((int64_t) s->size)) < 0 ||
            json_add(o, "content_size", json_object_new_int64((int64_t) s->content_size)) < 0 ||
            json_add(o, "created", json_object_new_int64((int64_t) s->created)) < 0 ||
            json_add(o, "disk_max", json_object_new_int64((int64_t) s->disk_max)) < 0 ||
            json_add(o, "includes_tmp", json_object_new_boolean(s->includes_tmp)) < 0 ||
            json_add(o, "hibernated", json_object_new_boolean(s->hibernated)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static int snapshots_print(const SandboxSnapshotInfo *l, size_t n, bool json) {
        if (json) {
                _cleanup_json_ json_object *a = json_object_new_array();

                if (!a)
                        return log_oom();
                for (size_t i = 0; i < n; i++) {
                        json_object *o = snapshot_json(&l[i]);
                        if (!o || json_object_array_add(a, o) < 0) {
                                json_object_put(o);
                                return log_oom();
                        }
                }
                return print_json(a);
        }

        printf("%-16s  %-16s  %-10s  %-12s  %10s  %10s  %-19s  %s\n", "SNAPSHOT", "SOURCE", "TEMPLATE", "NAME",
               "SIZE", "FILES", "CREATED", "KIND");
        for (size_t i = 0; i < n; i++) {
                char ts[64];
                printf("%-16s  %-16s  %-10s  %-12s  %10" PRIu64 "  %10" PRIu64 "  %-19s  %s\n", strna(l[i].id),
                       strna(l[i].source), strna(l[i].template_name), isempty(l[i].name) ? "-" : l[i].name,
                       l[i].size, l[i].content_size, format_timestamp(ts, sizeof(ts), l[i].created),
                       l[i].hibernated ? "hibernated" : "snapshot");
        }
        return 0;
}

int snapshots_list(SandboxClient *c, bool json) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        SandboxSnapshotInfo *l = NULL;
        size_t n = 0;
        int r;

        r = sandbox_client_list_snapshots(c, &l, &n, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to list snapshots: %s", sandbox_client_error_message(&error, r));
        r = snapshots_print(l, n, json);
        sandbox_snapshot_info_free_array(l, n);
        return r;
}

int snapshots_remove(SandboxClient *c, int argc, char *argv[]) {
        int ret = 0, r;

        for (int i = 1; i < argc; i++) {
                _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;

                r = sandbox_client_remove_snapshot(c, argv[i], &error);
                if (r < 0) {
                        r = log_error_errno(r, "Failed to remove snapshot %s: %s", argv[i],
                                            sandbox_client_error_message(&error, r));
                        if (ret == 0)
                                ret = r;
                }
        }
        return ret;
}
