/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "fd-util.h"
#include "json-util.h"
#include "labels.h"
#include "sandbox-persist.h"
#include "strv.h"

#define STATE_FILE_MAX (64U * 1024U)

void sandbox_persist_done(SandboxPersist *st) {
        st->template_name = mfree(st->template_name);
        st->pause_method = mfree(st->pause_method);
        st->cgroup = mfree(st->cgroup);
        st->payload = mfree(st->payload);
        st->unit = mfree(st->unit);
        st->environment = strv_free(st->environment);
        st->egress_ca_cert = mfree(st->egress_ca_cert);
        if (st->egress_ca_key)
                explicit_bzero(st->egress_ca_key, strlen(st->egress_ca_key));
        st->egress_ca_key = mfree(st->egress_ca_key);
        json_object_put(st->payload_data);
        st->payload_data = NULL;
        json_object_put(st->contexts);
        st->contexts = NULL;
        sandbox_config_done(&st->config);
}

static bool hex_id_is_valid(const char *s, size_t len) {
        if (strlen(s) != len)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!strchr("0123456789abcdef", s[i]))
                        return false;
        return true;
}

bool context_records_valid(json_object *records) {
        if (!json_object_is_type(records, json_type_array) || json_object_array_length(records) > 16)
                return false;
        for (size_t i = 0; i < json_object_array_length(records); i++) {
                json_object *o = json_object_array_get_idx(records, i), *v;

                if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, "id", &v) ||
                    !json_object_is_type(v, json_type_string) || !hex_id_is_valid(json_object_get_string(v), 12) ||
                    !json_object_object_get_ex(o, "language", &v) || !json_object_is_type(v, json_type_string) ||
                    (!streq(json_object_get_string(v), "python") && !streq(json_object_get_string(v), "javascript")) ||
                    !json_object_object_get_ex(o, "default", &v) || !json_object_is_type(v, json_type_boolean) ||
                    !json_object_object_get_ex(o, "caller", &v) || !json_object_is_type(v, json_type_int) ||
                    json_object_get_int64(v) < 0 || json_object_get_int64(v) > UINT32_MAX ||
                    !json_object_object_get_ex(o, "created", &v) || !json_object_is_type(v, json_type_int) ||
                    json_object_get_int64(v) < 0)
                        return false;
                if (json_object_object_get_ex(o, "cwd", &v) &&
                    (!json_object_is_type(v, json_type_string) || json_object_get_string(v)[0] != '/' ||
                     json_object_get_string_len(v) >= 4096))
                        return false;
        }
        return true;
}

static int add_u64(json_object *o, const char *key, uint64_t v) {
        /* json-c keeps int64; every value here is far below 2^63. */
        return json_add(o, key, json_object_new_int64((int64_t) v));
}

int sandbox_persist_to_json(const SandboxPersist *st, char **ret) {
        json_object *o = json_object_new_object();
        char *text = NULL;
        int r = -ENOMEM;

        if (!o)
                return -ENOMEM;
        if (json_add(o, "id", json_object_new_string(st->id)) < 0 ||
            json_add(o, "template", json_object_new_string(strempty(st->template_name))) < 0 ||
            add_u64(o, "owner", st->owner) < 0 ||
            add_u64(o, "host_uid", st->host_uid) < 0 ||
            add_u64(o, "created_at", st->created_at) < 0 ||
            add_u64(o, "deadline_realtime", st->deadline_realtime) < 0 ||
            (st->lifetime_left_usec > 0 && add_u64(o, "lifetime_left_usec", st->lifetime_left_usec) < 0) ||
            add_u64(o, "payload_pid", (uint64_t) st->payload_pid) < 0 ||
            (st->pause_method && json_add(o, "pause_method", json_object_new_string(st->pause_method)) < 0) ||
            (st->cgroup && json_add(o, "cgroup", json_object_new_string(st->cgroup)) < 0) ||
            (st->payload && json_add(o, "payload", json_object_new_string(st->payload)) < 0) ||
            (st->unit && json_add(o, "unit", json_object_new_string(st->unit)) < 0) ||
            add_u64(o, "MemoryMax", st->config.limits.memory_max) < 0 ||
            add_u64(o, "CPUQuotaPerSecUSec", st->config.limits.cpu_quota_per_sec_usec) < 0 ||
            add_u64(o, "TasksMax", st->config.limits.tasks_max) < 0 ||
            add_u64(o, "DiskMax", st->config.disk_max) < 0 ||
            (st->config.limits.storage != STORAGE_DEFAULT &&
             json_add(o, "Storage", json_object_new_string(sandbox_storage_to_string(st->config.limits.storage))) < 0) ||
            add_u64(o, "Timeout", st->config.timeout_sec) < 0 ||
            add_u64(o, "IdleTimeout", st->config.idle_timeout_sec) < 0 ||
            json_add(o, "IdleAction", json_object_new_string(idle_action_to_string(st->config.idle_action))) < 0 ||
            json_add(o, "Ephemeral", json_object_new_boolean(st->config.ephemeral)) < 0 ||
            (!isempty(st->config.name) && json_add(o, "Name", json_object_new_string(st->config.name)) < 0) ||
            (!isempty(st->config.tenant) && json_add(o, "Tenant", json_object_new_string(st->config.tenant)) < 0) ||
            (!isempty(st->config.egress_allow) &&
             json_add(o, "EgressAllow", json_object_new_string(st->config.egress_allow)) < 0) ||
            (!isempty(st->config.egress_deny) &&
             json_add(o, "EgressDeny", json_object_new_string(st->config.egress_deny)) < 0) ||
            /* The bindings' names only: values are read from the store again. */
            (!isempty(st->config.secrets) &&
             json_add(o, "Secrets", json_object_new_string(st->config.secrets)) < 0) ||
            (!strv_isempty(st->config.labels) && json_add(o, "Labels", labels_to_json(st->config.labels)) < 0) ||
            (st->egress_ca_cert && json_add(o, "EgressCA", json_object_new_string(st->egress_ca_cert)) < 0) ||
            (st->egress_ca_key && json_add(o, "EgressCAKey", json_object_new_string(st->egress_ca_key)) < 0) ||
            json_add(o, "pooled", json_object_new_boolean(st->pooled)) < 0 ||
            json_add(o, "from_pool", json_object_new_boolean(st->from_pool)) < 0 ||
            json_add(o, "released", json_object_new_boolean(st->released)) < 0 ||
            (st->contexts && json_object_array_length(st->contexts) > 0 &&
             json_add(o, "contexts", json_object_get(st->contexts)) < 0))
                goto finish;
        if (st->payload_data) {
                json_object_object_foreach(st->payload_data, key, val)
                        if (!json_object_object_get_ex(o, key, NULL) && json_add(o, key, json_object_get(val)) < 0)
                                goto finish;
        }
        json_object *env = json_object_new_array();
        if (json_add(o, "environment", env) < 0)
                goto finish;
        for (char **e = st->environment; e && *e; e++) {
                json_object *v = json_object_new_string(*e);

                if (!v || json_object_array_add(env, v) < 0) {
                        json_object_put(v);
                        goto finish;
                }
        }

        text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        if (!text)
                goto finish;
        *ret = text;
        r = 0;
finish:
        json_object_put(o);
        return r;
}

static int get_u64(json_object *o, const char *key, uint64_t *ret) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int) ||
            json_object_get_int64(v) < 0)
                return -EBADMSG;
        *ret = (uint64_t) json_object_get_int64(v);
        return 0;
}

/* An optional Name or Tenant, valid as such, into dest. */
static int get_label(json_object *o, const char *key, bool (*valid)(const char *), char dest[static SANDBOX_NAME_MAX + 1]) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v))
                return 0; /* none, or a state file of a sandboxd before names */
        if (!json_object_is_type(v, json_type_string) || !valid(json_object_get_string(v)))
                return -EBADMSG;
        strcpy(dest, json_object_get_string(v));
        return 0;
}

static int get_text(json_object *o, const char *key, char **dest) {
        json_object *v;
        char *copy;

        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_string) ||
            (size_t) json_object_get_string_len(v) >= SANDBOX_EGRESS_TEXT_MAX)
                return -EBADMSG;
        copy = strdup(json_object_get_string(v));
        if (!copy)
                return -ENOMEM;
        free(*dest);
        *dest = copy;
        return 0;
}

static int get_str(json_object *o, const char *key, bool optional, char **ret) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v))
                return optional ? 0 : -EBADMSG;
        if (!json_object_is_type(v, json_type_string))
                return -EBADMSG;
        *ret = strdup(json_object_get_string(v));
        return *ret ? 0 : -ENOMEM;
}

int sandbox_persist_from_json(const char *json, SandboxPersist *ret) {
        SandboxPersist st = {};
        json_object *o, *v;
        uint64_t owner, host_uid, pid;
        const char *id;
        int r = -EBADMSG;

        o = json_tokener_parse(json);
        if (!o || !json_object_is_type(o, json_type_object))
                goto finish;
        if (!json_object_object_get_ex(o, "id", &v) || !json_object_is_type(v, json_type_string))
                goto finish;
        id = json_object_get_string(v);
        if (strlen(id) >= sizeof(st.id))
                goto finish;
        strcpy(st.id, id);

        if (get_u64(o, "owner", &owner) < 0 || owner > UINT32_MAX ||
            get_u64(o, "host_uid", &host_uid) < 0 || host_uid > UINT32_MAX ||
            get_u64(o, "payload_pid", &pid) < 0 || pid > INT32_MAX ||
            get_u64(o, "created_at", &st.created_at) < 0 ||
            get_u64(o, "deadline_realtime", &st.deadline_realtime) < 0 ||
            (json_object_object_get_ex(o, "lifetime_left_usec", NULL) &&
             get_u64(o, "lifetime_left_usec", &st.lifetime_left_usec) < 0) ||
            get_u64(o, "MemoryMax", &st.config.limits.memory_max) < 0 ||
            get_u64(o, "CPUQuotaPerSecUSec", &st.config.limits.cpu_quota_per_sec_usec) < 0 ||
            get_u64(o, "TasksMax", &st.config.limits.tasks_max) < 0 ||
            get_u64(o, "DiskMax", &st.config.disk_max) < 0 ||
            get_u64(o, "Timeout", &st.config.timeout_sec) < 0 ||
            get_u64(o, "IdleTimeout", &st.config.idle_timeout_sec) < 0)
                goto finish;
        st.owner = (uid_t) owner;
        st.host_uid = (uid_t) host_uid;
        st.payload_pid = (pid_t) pid;
        if (!json_object_object_get_ex(o, "Ephemeral", &v) || !json_object_is_type(v, json_type_boolean))
                goto finish;
        st.config.ephemeral = json_object_get_boolean(v);
        if (get_label(o, "Name", sandbox_name_is_valid, st.config.name) < 0 ||
            get_label(o, "Tenant", sandbox_tenant_is_valid, st.config.tenant) < 0)
                goto finish;
        /* Absent in what an older sandboxd saved: destroy, as it did. */
        if (json_object_object_get_ex(o, "IdleAction", &v)) {
                IdleAction a = idle_action_from_string(json_object_get_string(v));
                if (!json_object_is_type(v, json_type_string) || a < 0)
                        goto finish;
                st.config.idle_action = a;
        }
        /* Absent in what an older sandboxd saved: tmpfs, as it had. */
        if (json_object_object_get_ex(o, "Storage", &v)) {
                SandboxStorage t = sandbox_storage_from_string(json_object_get_string(v));
                if (!json_object_is_type(v, json_type_string) || t < 0)
                        goto finish;
                st.config.limits.storage = t;
        }
        if (json_object_object_get_ex(o, "pooled", &v))
                st.pooled = json_object_get_boolean(v);
        if (json_object_object_get_ex(o, "from_pool", &v))
                st.from_pool = json_object_get_boolean(v);
        if (json_object_object_get_ex(o, "released", &v))
                st.released = json_object_get_boolean(v);
        /* The egress rules as the config keeps them (a line each, checked when given). */
        if (get_text(o, "EgressAllow", &st.config.egress_allow) < 0 ||
            get_text(o, "EgressDeny", &st.config.egress_deny) < 0 ||
            get_text(o, "Secrets", &st.config.secrets) < 0 ||
            get_text(o, "EgressCA", &st.egress_ca_cert) < 0 ||
            get_text(o, "EgressCAKey", &st.egress_ca_key) < 0)
                goto finish;
        /* Absent in what an older sandboxd saved, and for a sandbox without labels. */
        if (json_object_object_get_ex(o, "Labels", &v)) {
                r = labels_from_json(v, &st.config.labels, NULL);
                if (r < 0) {
                        r = r == -ENOMEM ? r : -EBADMSG;
                        goto finish;
                }
                r = -EBADMSG;
        }

        /* Absent in what an older sandboxd saved, and for a sandbox without contexts. */
        if (json_object_object_get_ex(o, "contexts", &v)) {
                if (!context_records_valid(v))
                        goto finish;
                st.contexts = json_object_get(v);
        }

        if (!json_object_object_get_ex(o, "environment", &v) || !json_object_is_type(v, json_type_array))
                goto finish;
        for (size_t i = 0; i < json_object_array_length(v); i++) {
                json_object *e = json_object_array_get_idx(v, i);
                if (!json_object_is_type(e, json_type_string) || !env_assignment_is_valid(json_object_get_string(e)))
                        goto finish;
                if (strv_extend(&st.environment, json_object_get_string(e)) < 0) {
                        r = -ENOMEM;
                        goto finish;
                }
        }

        r = get_str(o, "template", false, &st.template_name);
        if (r >= 0)
                r = get_str(o, "pause_method", true, &st.pause_method);
        if (r >= 0)
                r = get_str(o, "cgroup", true, &st.cgroup);
        if (r >= 0)
                r = get_str(o, "payload", true, &st.payload);
        if (r >= 0)
                r = get_str(o, "unit", true, &st.unit);
        if (r < 0)
                goto finish;
        st.payload_data = json_object_get(o); /* what the backend finds its keys in */

        *ret = st;
        st = (SandboxPersist) {};
        r = 0;
finish:
        sandbox_persist_done(&st);
        json_object_put(o);
        return r;
}

int sandbox_persist_save(const char *dir, const SandboxPersist *st) {
        _cleanup_free_ char *text = NULL, *path = NULL, *tmp = NULL;
        int r;

        r = sandbox_persist_to_json(st, &text);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/%s.json", dir, st->id) < 0 || asprintf(&tmp, "%s/.%s.json.tmp", dir, st->id) < 0)
                return -ENOMEM;
        return write_file_atomic(path, tmp, text, strlen(text), 0600, /* sync= */ false);
}

int sandbox_persist_load(const char *path, SandboxPersist *ret) {
        _cleanup_close_ int fd = -EBADF;
        char buf[STATE_FILE_MAX + 1];
        ssize_t n;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        n = read(fd, buf, STATE_FILE_MAX);
        if (n < 0)
                return -errno;
        if (n == STATE_FILE_MAX)
                return -EFBIG;
        buf[n] = 0;
        return sandbox_persist_from_json(buf, ret);
}

int sandbox_persist_remove(const char *dir, const char *id) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "%s/%s.json", dir, id) < 0)
                return -ENOMEM;
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}
