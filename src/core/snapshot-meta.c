/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "json-util.h"
#include "labels.h"
#include "sandbox-persist.h"
#include "secret-store.h"
#include "snapshot-meta.h"
#include "strv.h"
#include "template.h"

void snapshot_settings_done(SnapshotSettings *s) {
        s->directory = mfree(s->directory);
}

void snapshot_meta_done(SnapshotMeta *m) {
        m->template_name = mfree(m->template_name);
        m->config.labels = strv_free(m->config.labels);
        m->config.secrets = mfree(m->config.secrets);
        json_object_put(m->contexts);
        m->contexts = NULL;
}

static const char * const snapshot_event_kind_table[_SNAPSHOT_EVENT_KIND_MAX] = {
        [SNAPSHOT_EVENT_TAKEN]    = "taken",
        [SNAPSHOT_EVENT_RESTORED] = "restored",
        [SNAPSHOT_EVENT_REMOVED]  = "removed",
};

const char *snapshot_event_kind_to_string(SnapshotEventKind k) {
        return k >= 0 && k < _SNAPSHOT_EVENT_KIND_MAX ? snapshot_event_kind_table[k] : NULL;
}

static const char * const snapshot_event_cause_table[_SNAPSHOT_CAUSE_MAX] = {
        [SNAPSHOT_CAUSE_SNAPSHOT]  = "snapshot",
        [SNAPSHOT_CAUSE_FORK]      = "fork",
        [SNAPSHOT_CAUSE_HIBERNATE] = "hibernate",
        [SNAPSHOT_CAUSE_CREATE]    = "create",
        [SNAPSHOT_CAUSE_WAKE]      = "wake",
        [SNAPSHOT_CAUSE_REMOVE]    = "remove",
        [SNAPSHOT_CAUSE_RETENTION] = "retention",
};

const char *snapshot_event_cause_to_string(SnapshotEventCause c) {
        return c >= 0 && c < _SNAPSHOT_CAUSE_MAX ? snapshot_event_cause_table[c] : NULL;
}

bool snapshot_event_cause_fits(SnapshotEventKind k, SnapshotEventCause c) {
#define BIT(x) (1U << (x))
        static const unsigned fits[_SNAPSHOT_EVENT_KIND_MAX] = {
                [SNAPSHOT_EVENT_TAKEN] = BIT(SNAPSHOT_CAUSE_SNAPSHOT) | BIT(SNAPSHOT_CAUSE_FORK) |
                        BIT(SNAPSHOT_CAUSE_HIBERNATE),
                [SNAPSHOT_EVENT_RESTORED] = BIT(SNAPSHOT_CAUSE_CREATE) | BIT(SNAPSHOT_CAUSE_FORK) |
                        BIT(SNAPSHOT_CAUSE_WAKE),
                /* Fork and Wake remove the snapshot they restored from. */
                [SNAPSHOT_EVENT_REMOVED] = BIT(SNAPSHOT_CAUSE_REMOVE) | BIT(SNAPSHOT_CAUSE_RETENTION) |
                        BIT(SNAPSHOT_CAUSE_FORK) | BIT(SNAPSHOT_CAUSE_WAKE),
        };
#undef BIT
        return k >= 0 && k < _SNAPSHOT_EVENT_KIND_MAX && c >= 0 && c < _SNAPSHOT_CAUSE_MAX &&
                (fits[k] & (1U << c));
}

bool snapshot_id_is_valid(const char *id) {
        return sandbox_id_is_valid(id);
}

static int add_u64(json_object *o, const char *key, uint64_t v) {
        return json_add(o, key, json_object_new_int64((int64_t) v));
}

int snapshot_meta_to_json(const SnapshotMeta *m, char **ret) {
        _cleanup_json_ json_object *o = json_object_new_object();
        const SandboxConfig *c = &m->config;
        char *text;

        if (!o ||
            json_add(o, "id", json_object_new_string(m->id)) < 0 ||
            json_add(o, "template", json_object_new_string(strempty(m->template_name))) < 0 ||
            add_u64(o, "owner", m->owner) < 0 ||
            json_add(o, "source", json_object_new_string(m->source)) < 0 ||
            add_u64(o, "size", m->size) < 0 ||
            add_u64(o, "content_size", m->content_size) < 0 ||
            add_u64(o, "created", m->created) < 0 ||
            json_add(o, "tmp", json_object_new_boolean(m->tmp)) < 0 ||
            json_add(o, "hibernated", json_object_new_boolean(m->hibernated)) < 0 ||
            add_u64(o, "MemoryMax", c->limits.memory_max) < 0 ||
            add_u64(o, "CPUQuotaPerSecUSec", c->limits.cpu_quota_per_sec_usec) < 0 ||
            add_u64(o, "TasksMax", c->limits.tasks_max) < 0 ||
            add_u64(o, "DiskMax", c->disk_max) < 0 ||
            add_u64(o, "Timeout", c->timeout_sec) < 0 ||
            add_u64(o, "IdleTimeout", c->idle_timeout_sec) < 0 ||
            json_add(o, "IdleAction", json_object_new_string(idle_action_to_string(c->idle_action))) < 0 ||
            json_add(o, "Name", json_object_new_string(c->name)) < 0 ||
            json_add(o, "Tenant", json_object_new_string(c->tenant)) < 0 ||
            (!strv_isempty(c->labels) && json_add(o, "Labels", labels_to_json(c->labels)) < 0) ||
            (m->contexts && json_object_array_length(m->contexts) > 0 &&
             json_add(o, "contexts", json_object_get(m->contexts)) < 0) ||
            /* A hibernation's secret bindings given at create (names only: the values stay
             * in the store), for Wake; a snapshot's are its restorer's to give. */
            (m->hibernated && c->secrets_set &&
             json_add(o, "Secrets", json_object_new_string(strempty(c->secrets))) < 0))
                return -ENOMEM;
        text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        if (!text)
                return -ENOMEM;
        *ret = text;
        return 0;
}

static int get_u64(json_object *o, const char *key, uint64_t *ret) {
        json_object *v;
        int64_t i;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return -EBADMSG;
        i = json_object_get_int64(v);
        if (i < 0)
                return -EBADMSG;
        *ret = (uint64_t) i;
        return 0;
}

static int get_bool(json_object *o, const char *key, bool *ret) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_boolean))
                return -EBADMSG;
        *ret = json_object_get_boolean(v);
        return 0;
}

/* Into a fixed buffer of n bytes (NUL included); -EBADMSG if it does not fit. */
static int get_str(json_object *o, const char *key, char *buf, size_t n) {
        json_object *v;
        const char *s;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return -EBADMSG;
        s = json_object_get_string(v);
        if (strlen(s) >= n)
                return -EBADMSG;
        strcpy(buf, s);
        return 0;
}

int snapshot_meta_from_json(const char *text, SnapshotMeta *ret) {
        _cleanup_json_ json_object *o = json_tokener_parse(text);
        SnapshotMeta m = {};
        char template[TEMPLATE_NAME_MAX + 1], idle_action[16];
        json_object *v;
        uint64_t owner;
        IdleAction a;

        if (!o || !json_object_is_type(o, json_type_object))
                return -EBADMSG;
        if (get_str(o, "id", m.id, sizeof(m.id)) < 0 || !snapshot_id_is_valid(m.id) ||
            get_str(o, "template", template, sizeof(template)) < 0 || !template_name_is_valid(template) ||
            get_u64(o, "owner", &owner) < 0 || owner >= (uint64_t) (uid_t) -1 ||
            get_str(o, "source", m.source, sizeof(m.source)) < 0 || !sandbox_id_is_valid(m.source) ||
            get_u64(o, "size", &m.size) < 0 ||
            get_u64(o, "content_size", &m.content_size) < 0 ||
            get_u64(o, "created", &m.created) < 0 ||
            get_bool(o, "tmp", &m.tmp) < 0 ||
            get_bool(o, "hibernated", &m.hibernated) < 0 ||
            get_u64(o, "MemoryMax", &m.config.limits.memory_max) < 0 ||
            get_u64(o, "CPUQuotaPerSecUSec", &m.config.limits.cpu_quota_per_sec_usec) < 0 ||
            get_u64(o, "TasksMax", &m.config.limits.tasks_max) < 0 ||
            get_u64(o, "DiskMax", &m.config.disk_max) < 0 ||
            get_u64(o, "Timeout", &m.config.timeout_sec) < 0 ||
            get_u64(o, "IdleTimeout", &m.config.idle_timeout_sec) < 0 ||
            get_str(o, "IdleAction", idle_action, sizeof(idle_action)) < 0 ||
            get_str(o, "Name", m.config.name, sizeof(m.config.name)) < 0 ||
            get_str(o, "Tenant", m.config.tenant, sizeof(m.config.tenant)) < 0)
                return -EBADMSG;
        if ((!isempty(m.config.name) && !sandbox_name_is_valid(m.config.name)) ||
            (!isempty(m.config.tenant) && !sandbox_name_is_valid(m.config.tenant)))
                return -EBADMSG;
        a = idle_action_from_string(idle_action);
        if (a < 0)
                return -EBADMSG;
        m.config.idle_action = a;
        /* Absent in the metadata of a sandbox without labels, or of before them. */
        if (json_object_object_get_ex(o, "Labels", &v)) {
                int r = labels_from_json(v, &m.config.labels, NULL);
                if (r < 0)
                        return r == -ENOMEM ? r : -EBADMSG;
        }
        /* Absent but for a hibernation of a sandbox with code contexts. */
        if (json_object_object_get_ex(o, "contexts", &v)) {
                if (!context_records_valid(v)) {
                        strv_free(m.config.labels);
                        return -EBADMSG;
                }
                m.contexts = json_object_get(v);
        }
        /* Absent but for a hibernation of a sandbox given its own secret bindings. */
        if (m.hibernated && json_object_object_get_ex(o, "Secrets", &v)) {
                _cleanup_free_ SecretBinding *b = NULL;
                size_t n;
                int r = 0;

                if (!json_object_is_type(v, json_type_string))
                        r = -EBADMSG;
                else if (json_object_get_string_len(v) > 0 &&
                         !(m.config.secrets = strdup(json_object_get_string(v))))
                        r = -ENOMEM;
                else if (sandbox_config_secret_bindings(&m.config, &b, &n) < 0)
                        r = -EBADMSG;
                if (r < 0) {
                        strv_free(m.config.labels);
                        json_object_put(m.contexts);
                        free(m.config.secrets);
                        return r;
                }
                m.config.secrets_set = true;
        }
        m.owner = (uid_t) owner;
        m.template_name = strdup(template);
        if (!m.template_name) {
                strv_free(m.config.labels);
                json_object_put(m.contexts);
                free(m.config.secrets);
                return -ENOMEM;
        }
        *ret = m;
        return 0;
}

int snapshot_quota_room(uint64_t used, uint64_t count, uint64_t max_bytes, uint64_t max_count, uint64_t *ret_room) {
        if (max_count > 0 && count >= max_count)
                return -EDQUOT;
        if (max_bytes > 0 && used >= max_bytes)
                return -EDQUOT;
        if (ret_room)
                *ret_room = max_bytes > 0 ? max_bytes - used : UINT64_MAX;
        return 0;
}
