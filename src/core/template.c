/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "context.h"
#include "etc-tree.h"
#include "fd-util.h"
#include "json-util.h"
#include "strv.h"
#include "template.h"


Template *template_free(Template *t) {
        if (!t)
                return NULL;
        free(t->name);
        free(t->description);
        free(t->image);
        strv_free(t->ro_binds);
        strv_free(t->environment);
        strv_free(t->runtimes);
        strv_free(t->contexts);
        strv_free(t->etc_files);
        free(t->timezone);
        free(t->etc_dir);
        strv_free(t->egress_allow);
        strv_free(t->egress_deny);
        strv_free(t->secrets);
        strv_free(t->requires);
        return mfree(t);
}

bool template_name_is_valid(const char *name) {
        size_t n = 0;

        if (isempty(name))
                return false;
        for (const char *p = name; *p; p++, n++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      *p == '-' || *p == '_' || *p == '.'))
                        return false;
        return n <= TEMPLATE_NAME_MAX && name[0] != '.';
}

_printf_(2, 3) static int fail(char **ret_error, const char *fmt, ...) {
        va_list ap;

        if (ret_error) {
                va_start(ap, fmt);
                if (vasprintf(ret_error, fmt, ap) < 0)
                        *ret_error = NULL;
                va_end(ap);
        }
        return -EINVAL;
}

static int json_strv(json_object *o, const char *key, bool want_path, char ***ret, char **ret_error) {
        _cleanup_strv_free_ char **l = NULL;
        json_object *a;
        int r;

        if (!json_object_object_get_ex(o, key, &a))
                return 0;
        if (!json_object_is_type(a, json_type_array))
                return fail(ret_error, "\"%s\" must be an array of strings", key);
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *e = json_object_array_get_idx(a, i);
                if (!json_object_is_type(e, json_type_string))
                        return fail(ret_error, "\"%s\" must be an array of strings", key);
                const char *s = json_object_get_string(e);
                if (want_path && (s[0] != '/' || strstr(s, "/../") || strchr(s, ':')))
                        return fail(ret_error, "\"%s\" entries must be absolute paths", key);
                r = strv_extend(&l, s);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static int json_u64(json_object *o, const char *key, uint64_t *ret, char **ret_error) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) <= 0)
                return fail(ret_error, "\"%s\" must be a positive integer", key);
        *ret = (uint64_t) json_object_get_int64(v);
        return 0;
}

/* Path a is b or lies beneath it. */
/* "/a/b": absolute, without "." or ".." components, empty ones or a final "/". */
static bool path_is_normalized_absolute(const char *p) {
        if (p[0] != '/' || p[1] == 0 || strlen(p) > 4096 || p[strlen(p) - 1] == '/' || strchr(p, ':'))
                return false;
        for (const char *c = p; c; c = strchr(c + 1, '/'))
                if (c[1] == '/' || (c[1] == '.' && (c[2] == '/' || c[2] == 0 || (c[2] == '.' && (c[3] == '/' || c[3] == 0)))))
                        return false;
        return true;
}

static bool path_is_under(const char *a, const char *b) {
        size_t n = strlen(b);
        while (n > 1 && b[n - 1] == '/')
                n--;
        return strncmp(a, b, n) == 0 && (a[n] == 0 || a[n] == '/' || (n == 1 && b[0] == '/'));
}

/* The sandbox's /etc (etc-tree.h): the host's is never shown, the identity files are
 * sandboxd's own, and the template's own files are few, small and stay inside /etc. */
/* "egress_allow", "egress_deny": the sandboxes' EgressAllow=, EgressDeny= by default. */
static int parse_egress(json_object *o, Template *t, char **ret_error) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxConfig *c;
        int r;

        r = json_strv(o, "egress_allow", false, &t->egress_allow, ret_error);
        if (r >= 0)
                r = json_strv(o, "egress_deny", false, &t->egress_deny, ret_error);
        if (r < 0)
                return r;
        /* The same checks as the options get. */
        c = calloc(1, sizeof(SandboxConfig));
        if (!c)
                return -ENOMEM;
        r = sandbox_config_egress_defaults(c, t->egress_allow, t->egress_deny, &error);
        /* "secrets": the bindings its sandboxes get unless the caller gives its own
         * (docs/SECRETS.md); the values are the owner's. */
        if (r >= 0)
                r = json_strv(o, "secrets", false, &t->secrets, ret_error);
        if (r >= 0)
                r = sandbox_config_secrets_defaults(c, t->secrets, &error);
        sandbox_config_done(c);
        free(c);
        if (r < 0)
                return r == -ENOMEM ? r : fail(ret_error, "%s", error.message ?: "bad egress rule");
        return 0;
}

/* "requires": [{"path": P, "install": C}, …]: a host path its sandboxes need, under one of
 * its "ro_binds" (so that they see it), and the command an admin runs to install it. */
static int parse_requires(json_object *o, Template *t, char **ret_error) {
        json_object *l;
        int r;

        if (!json_object_object_get_ex(o, "requires", &l))
                return 0;
        if (!json_object_is_type(l, json_type_array) || json_object_array_length(l) > 16)
                return fail(ret_error, "%s", "\"requires\" must be a list of at most 16 {\"path\", \"install\"}");
        for (size_t i = 0; i < json_object_array_length(l); i++) {
                json_object *e = json_object_array_get_idx(l, i), *p, *c;
                const char *path, *cmd;
                bool under = false;

                if (!json_object_is_type(e, json_type_object) || json_object_object_length(e) != 2 ||
                    !json_object_object_get_ex(e, "path", &p) || !json_object_object_get_ex(e, "install", &c) ||
                    !json_object_is_type(p, json_type_string) || !json_object_is_type(c, json_type_string))
                        return fail(ret_error, "%s", "\"requires\": each is {\"path\": …, \"install\": …}");
                path = json_object_get_string(p);
                cmd = json_object_get_string(c);
                if (!path_is_normalized_absolute(path))
                        return fail(ret_error, "\"requires\": '%.128s' is not an absolute, normalized path", path);
                for (char **b = t->ro_binds; b && *b; b++)
                        under = under || path_is_under(path, *b);
                if (!under)
                        return fail(ret_error, "\"requires\": %.128s is under none of \"ro_binds\"", path);
                if (strlen(cmd) == 0 || strlen(cmd) > 512 || strpbrk(cmd, "\n\r\t"))
                        return fail(ret_error, "%s", "\"requires\": \"install\" is one line of at most 512 characters");
                r = strv_extend(&t->requires, path);
                if (r >= 0)
                        r = strv_extend(&t->requires, cmd);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_etc(json_object *o, Template *t, char **ret_error) {
        json_object *v;
        int r;

        for (char **b = t->ro_binds; b && *b; b++) {
                if (path_is_under("/etc", *b))
                        return fail(ret_error, "\"ro_binds\" must not show the host's /etc (\"%s\"); bind single "
                                    "files or directories under it", *b);
                if (path_is_under(*b, "/etc") && etc_name_is_reserved(*b + strlen("/etc/")))
                        return fail(ret_error, "\"ro_binds\" must not replace sandboxd's own %s", *b);
        }

        if (json_object_object_get_ex(o, "timezone", &v)) {
                const char *tz = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
                if (!timezone_is_valid(tz))
                        return fail(ret_error, "%s", "\"timezone\" must be a zone name such as \"Europe/Berlin\"");
                t->timezone = strdup(tz);
                if (!t->timezone)
                        return -ENOMEM;
        }
        if (json_object_object_get_ex(o, "shm_max", &v)) {
                if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < (int64_t) TEMPLATE_SHM_MIN ||
                    (uint64_t) json_object_get_int64(v) > TEMPLATE_SHM_MAX)
                        return fail(ret_error, "\"shm_max\" must be a size in bytes from %llu to %llu",
                                    TEMPLATE_SHM_MIN, TEMPLATE_SHM_MAX);
                t->shm_max = (uint64_t) json_object_get_int64(v);
        }
        if (!json_object_object_get_ex(o, "etc", &v))
                return 0;
        if (!json_object_is_type(v, json_type_object))
                return fail(ret_error, "%s", "\"etc\" must be an object of file names and contents");
        if (json_object_object_length(v) > (int) ETC_FILES_MAX)
                return fail(ret_error, "\"etc\" may name at most %u files", ETC_FILES_MAX);

        json_object_object_foreach(v, path, contents) {
                if (!etc_file_path_is_valid(path))
                        return fail(ret_error, "\"etc\": '%.*s' is not a relative path inside /etc", 160, path);
                if (etc_name_is_reserved(path))
                        return fail(ret_error, "\"etc\": %s is sandboxd's own", path);
                if (!json_object_is_type(contents, json_type_string))
                        return fail(ret_error, "\"etc\": the contents of %s must be a string", path);
                if ((size_t) json_object_get_string_len(contents) > ETC_FILE_SIZE_MAX ||
                    strlen(json_object_get_string(contents)) != (size_t) json_object_get_string_len(contents))
                        return fail(ret_error, "\"etc\": %s must be text of at most %u bytes", path,
                                    ETC_FILE_SIZE_MAX);
                for (char **b = t->ro_binds; b && *b; b++) {
                        _cleanup_free_ char *full = NULL;
                        if (asprintf(&full, "/etc/%s", path) < 0)
                                return -ENOMEM;
                        if (path_is_under(full, *b) || path_is_under(*b, full))
                                return fail(ret_error, "\"etc\": %s collides with the bound %s", path, *b);
                }
                for (char **f = t->etc_files; f && *f; f += 2)
                        if (path_is_under(path, *f) || path_is_under(*f, path))
                                return fail(ret_error, "\"etc\": %s and %s cannot both be files", path, *f);
                r = strv_extend(&t->etc_files, path);
                if (r >= 0)
                        r = strv_extend(&t->etc_files, json_object_get_string(contents));
                if (r < 0)
                        return r;
        }
        return 0;
}

static int pool_uint(json_object *o, const char *key, uint64_t max, uint64_t *ret, char **ret_error) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
            (uint64_t) json_object_get_int64(v) > max)
                return fail(ret_error, "\"pool\": \"%s\" must be an integer from 0 to %" PRIu64, key, max);
        *ret = (uint64_t) json_object_get_int64(v);
        return 1;
}

/* "pool": N (sandboxes kept started), or {"size": N, "recycle": B, "recycle_max": M,
 * "recycle_idle_sec": S}. */
static int parse_pool(json_object *o, Template *t, char **ret_error) {
        uint64_t size = 0, max = TEMPLATE_RECYCLE_MAX_DEFAULT, idle = TEMPLATE_RECYCLE_IDLE_SEC_DEFAULT;
        json_object *v, *x;
        int r;

        t->recycle_max = (unsigned) max;
        t->recycle_idle_sec = idle;
        if (!json_object_object_get_ex(o, "pool", &v))
                return 0;
        if (json_object_is_type(v, json_type_int)) {
                if (json_object_get_int64(v) < 0 || json_object_get_int64(v) > TEMPLATE_POOL_MAX)
                        return fail(ret_error, "\"pool\" must be an integer from 0 to %u", TEMPLATE_POOL_MAX);
                t->pool = (unsigned) json_object_get_int64(v);
                return 0;
        }
        if (!json_object_is_type(v, json_type_object))
                return fail(ret_error, "%s", "\"pool\" must be an integer or an object");
        json_object_object_foreach(v, key, val) {
                static const char * const known[] = { "size", "recycle", "recycle_max", "recycle_idle_sec" };
                bool found = false;

                (void) val;
                for (size_t i = 0; i < ELEMENTSOF(known); i++)
                        found = found || streq(key, known[i]);
                if (!found)
                        return fail(ret_error, "\"pool\": unknown member \"%.64s\"", key);
        }
        if ((r = pool_uint(v, "size", TEMPLATE_POOL_MAX, &size, ret_error)) < 0 ||
            (r = pool_uint(v, "recycle_max", TEMPLATE_RECYCLE_MAX, &max, ret_error)) < 0 ||
            (r = pool_uint(v, "recycle_idle_sec", TEMPLATE_RECYCLE_IDLE_SEC_MAX, &idle, ret_error)) < 0)
                return r;
        if (json_object_object_get_ex(v, "recycle", &x)) {
                if (!json_object_is_type(x, json_type_boolean))
                        return fail(ret_error, "%s", "\"pool\": \"recycle\" must be true or false");
                t->recycle = json_object_get_boolean(x);
        }
        if (t->recycle && t->payload != PAYLOAD_BWRAP)
                /* Its reset replaces mounts inside the sandbox, which only bwrap's allow. */
                return fail(ret_error, "%s", "\"pool\": \"recycle\" is for bwrap templates");
        if (t->recycle && (max == 0 || idle == 0))
                return fail(ret_error, "%s", "\"pool\": \"recycle_max\" and \"recycle_idle_sec\" must be at least 1");
        t->pool = (unsigned) size;
        t->recycle_max = (unsigned) max;
        t->recycle_idle_sec = idle;
        return 0;
}

int template_parse(const char *name, const char *json, Template **ret, char **ret_error) {
        _cleanup_(template_freep) Template *t = NULL;
        json_object *o = NULL, *v;
        int r;

        if (!template_name_is_valid(name))
                return fail(ret_error, "invalid template name '%s'", name);

        /* The faces' strict reader: a template given to CreateTemplate is read as its file is. */
        r = json_parse_strict(json, strlen(json), JSON_TOKENER_DEFAULT_DEPTH, &o);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return fail(ret_error, "not a JSON object (%s)", json_strict_strerror(r));
        if (!json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return fail(ret_error, "%s", "not a JSON object");
        }

        t = calloc(1, sizeof(Template));
        if (!t) {
                r = -ENOMEM;
                goto finish;
        }
        t->name = strdup(name);
        if (!t->name) {
                r = -ENOMEM;
                goto finish;
        }

        t->payload = PAYLOAD_BWRAP;
        if (json_object_object_get_ex(o, "payload", &v)) {
                t->payload = json_object_is_type(v, json_type_string) ?
                        payload_kind_from_string(json_object_get_string(v)) : _PAYLOAD_KIND_INVALID;
                if (t->payload < 0) {
                        r = fail(ret_error, "%s", "\"payload\" must be \"bwrap\" or \"docker\"");
                        goto finish;
                }
        }
        if (json_object_object_get_ex(o, "description", &v)) {
                if (!json_object_is_type(v, json_type_string)) {
                        r = fail(ret_error, "%s", "\"description\" must be a string");
                        goto finish;
                }
                t->description = strdup(json_object_get_string(v));
                if (!t->description) {
                        r = -ENOMEM;
                        goto finish;
                }
        }

        r = json_strv(o, "ro_binds", true, &t->ro_binds, ret_error);
        if (r < 0)
                goto finish;
        if (t->payload == PAYLOAD_BWRAP && strv_isempty(t->ro_binds)) {
                r = fail(ret_error, "%s", "\"ro_binds\" must name at least one host directory");
                goto finish;
        }
        if (json_object_object_get_ex(o, "image", &v)) {
                const char *img = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
                if (isempty(img) || strlen(img) > 256 || strpbrk(img, " \t\n\"?#&")) {
                        r = fail(ret_error, "%s", "\"image\" must be an image name such as \"debian:bookworm\"");
                        goto finish;
                }
                t->image = strdup(img);
                if (!t->image) {
                        r = -ENOMEM;
                        goto finish;
                }
        }
        if (t->payload == PAYLOAD_DOCKER && (!t->image || !strv_isempty(t->ro_binds))) {
                r = fail(ret_error, "%s", "a docker template names an \"image\" (and no \"ro_binds\")");
                goto finish;
        }
        if (t->payload == PAYLOAD_BWRAP && t->image) {
                r = fail(ret_error, "%s", "\"image\" is for docker templates");
                goto finish;
        }
        r = parse_etc(o, t, ret_error);
        if (r < 0)
                goto finish;
        if (t->payload == PAYLOAD_DOCKER && (t->etc_files || t->timezone || t->shm_max)) {
                /* Docker images bring their own /etc, and Docker sizes /dev/shm. */
                r = fail(ret_error, "%s", "\"etc\", \"timezone\" and \"shm_max\" are for bwrap templates");
                goto finish;
        }
        r = json_strv(o, "environment", false, &t->environment, ret_error);
        if (r < 0)
                goto finish;
        for (char **e = t->environment; e && *e; e++)
                if (!env_assignment_is_valid(*e)) {
                        r = fail(ret_error, "environment entry '%s' is not NAME=VALUE", *e);
                        goto finish;
                }
        r = json_strv(o, "runtimes", false, &t->runtimes, ret_error);
        if (r < 0)
                goto finish;
        r = json_strv(o, "contexts", false, &t->contexts, ret_error);
        if (r < 0)
                goto finish;
        for (char **l = t->contexts; l && *l; l++)
                if (context_language_from_string(*l) < 0) {
                        r = fail(ret_error, "contexts: '%s' is no language of code contexts (python, javascript)", *l);
                        goto finish;
                }
        r = parse_egress(o, t, ret_error);
        if (r < 0)
                goto finish;

        r = parse_pool(o, t, ret_error);
        if (r < 0)
                goto finish;
        if (!strv_isempty(t->secrets) && (t->pool > 0 || t->recycle)) {
                /* A pooled sandbox is nobody's yet: it has no owner whose secrets it takes. */
                r = fail(ret_error, "%s", "a template with \"secrets\" has no \"pool\"");
                goto finish;
        }

        /* "storage": "disk" or "tmpfs" (docs/WORKSPACES.md); a recycling pool's sandboxes
         * are reset between users by fresh tmpfs mounts, so tmpfs unless it says disk. */
        if (json_object_object_get_ex(o, "storage", &v)) {
                t->limits.storage = json_object_is_type(v, json_type_string) ?
                        sandbox_storage_from_string(json_object_get_string(v)) : _STORAGE_INVALID;
                if (t->limits.storage < 0) {
                        r = fail(ret_error, "%s", "\"storage\" must be \"disk\" or \"tmpfs\"");
                        goto finish;
                }
        } else if (t->recycle)
                t->limits.storage = STORAGE_TMPFS;

        if (json_object_object_get_ex(o, "limits", &v)) {
                if (!json_object_is_type(v, json_type_object)) {
                        r = fail(ret_error, "%s", "\"limits\" must be an object");
                        goto finish;
                }
                r = json_u64(v, "MemoryMax", &t->limits.memory_max, ret_error);
                if (r >= 0)
                        r = json_u64(v, "CPUQuotaPerSecUSec", &t->limits.cpu_quota_per_sec_usec, ret_error);
                if (r >= 0)
                        r = json_u64(v, "TasksMax", &t->limits.tasks_max, ret_error);
                if (r >= 0)
                        r = json_u64(v, "DiskMax", &t->maxima.disk_default, ret_error);
                if (r >= 0)
                        r = json_u64(v, "Timeout", &t->maxima.timeout_default, ret_error);
                if (r >= 0)
                        r = json_u64(v, "IdleTimeout", &t->idle_timeout_sec, ret_error);
                if (r >= 0 && t->idle_timeout_sec > SANDBOX_LIFETIME_MAX_SEC)
                        r = fail(ret_error, "\"limits\": IdleTimeout is at most %llu seconds",
                                 (unsigned long long) SANDBOX_LIFETIME_MAX_SEC);
                if (r < 0)
                        goto finish;
        }
        if (json_object_object_get_ex(o, "idle_action", &v)) {
                t->idle_action = idle_action_from_string(json_object_get_string(v));
                if (!json_object_is_type(v, json_type_string) || t->idle_action < 0) {
                        r = fail(ret_error, "%s", "\"idle_action\" must be \"destroy\", \"pause\" or \"hibernate\"");
                        goto finish;
                }
                t->idle_action_set = true;
        }
        r = parse_requires(o, t, ret_error);
        if (r < 0)
                goto finish;
        /* The largest a caller may ask of this template (as sandboxd.conf [Limits]). */
        if (json_object_object_get_ex(o, "maxima", &v)) {
                if (!json_object_is_type(v, json_type_object)) {
                        r = fail(ret_error, "%s", "\"maxima\" must be an object");
                        goto finish;
                }
                r = json_u64(v, "MemoryMax", &t->maxima.max.memory_max, ret_error);
                if (r >= 0)
                        r = json_u64(v, "CPUQuotaPerSecUSec", &t->maxima.max.cpu_quota_per_sec_usec, ret_error);
                if (r >= 0)
                        r = json_u64(v, "TasksMax", &t->maxima.max.tasks_max, ret_error);
                if (r >= 0)
                        r = json_u64(v, "DiskMax", &t->maxima.disk_max, ret_error);
                if (r >= 0)
                        r = json_u64(v, "Timeout", &t->maxima.timeout_max, ret_error);
                if (r < 0)
                        goto finish;
        }

        *ret = TAKE_PTR(t);
        r = 0;
finish:
        json_object_put(o);
        return r;
}

int template_load_file(const char *path, Template **ret, char **ret_error) {
        _cleanup_free_ char *text = NULL, *name = NULL;
        const char *base = strrchr(path, '/');
        size_t n;
        int r;

        base = base ? base + 1 : path;
        n = strlen(base);
        if (n <= 5 || !streq(base + n - 5, ".json"))
                return fail(ret_error, "%s", "template files must end in .json");
        name = strndup(base, n - 5);
        if (!name)
                return -ENOMEM;

        /* Of TEMPLATE_FILE_MAX bytes or more: too large, as CreateTemplate's text. */
        r = read_regular_file_at(AT_FDCWD, path, TEMPLATE_FILE_MAX - 1, &text, NULL);
        if (r < 0) {
                if (ret_error && asprintf(ret_error, "cannot read: %s", strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        return template_parse(name, text, ret, ret_error);
}

void template_set_done(TemplateSet *set) {
        for (size_t i = 0; i < set->n; i++)
                template_free(set->templates[i]);
        set->templates = mfree(set->templates);
        set->n = 0;
}

void template_set_remove(TemplateSet *set, size_t i) {
        if (i >= set->n)
                return;
        template_free(set->templates[i]);
        memmove(set->templates + i, set->templates + i + 1, sizeof(Template *) * (set->n - i - 1));
        set->n--;
}

const Template *template_set_find(const TemplateSet *set, const char *name) {
        for (size_t i = 0; i < set->n; i++)
                if (streq(set->templates[i]->name, name))
                        return set->templates[i];
        return NULL;
}

static int template_set_put(TemplateSet *set, Template *t) {
        /* Later directories override earlier ones: replace a template of the same name. */
        for (size_t i = 0; i < set->n; i++)
                if (streq(set->templates[i]->name, t->name)) {
                        template_free(set->templates[i]);
                        set->templates[i] = t;
                        return 0;
                }
        Template **a = realloc(set->templates, sizeof(Template *) * (set->n + 1));
        if (!a)
                return -ENOMEM;
        set->templates = a;
        set->templates[set->n++] = t;
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char * const *) a, *(char * const *) b);
}

int template_set_load(TemplateSet *set, char * const *dirs,
                      void (*report)(const char *path, const char *error, void *userdata),
                      void *userdata) {
        TemplateSet new = {};
        int r;

        for (char * const *d = dirs; d && *d; d++) {
                _cleanup_strv_free_ char **files = NULL;
                DIR *dir = opendir(*d);
                if (!dir) {
                        if (errno == ENOENT)
                                continue;
                        r = -errno;
                        goto fail;
                }
                struct dirent *de;
                while ((de = readdir(dir))) {
                        size_t n = strlen(de->d_name);
                        if (de->d_name[0] == '.' || n <= 5 || !streq(de->d_name + n - 5, ".json"))
                                continue;
                        r = strv_extendf(&files, "%s/%s", *d, de->d_name);
                        if (r < 0) {
                                closedir(dir);
                                goto fail;
                        }
                }
                closedir(dir);
                if (files)
                        qsort(files, strv_length(files), sizeof(char *), cmp_str);

                for (char **f = files; f && *f; f++) {
                        _cleanup_free_ char *error = NULL;
                        Template *t = NULL;

                        r = template_load_file(*f, &t, &error);
                        if (r == -ENOMEM)
                                goto fail;
                        if (r < 0) {
                                if (report)
                                        report(*f, error ?: strerror(-r), userdata);
                                continue;
                        }
                        r = template_set_put(&new, t);
                        if (r < 0) {
                                template_free(t);
                                goto fail;
                        }
                }
        }

        template_set_done(set);
        *set = new;
        return (int) set->n;
fail:
        template_set_done(&new);
        return r;
}
