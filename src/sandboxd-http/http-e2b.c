/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* E2B's protocol on sandboxd-http (docs/E2B.md). E2B's SDKs, unchanged, with E2B_API_URL
 * and E2B_SANDBOX_URL both the bridge's URL: the control plane (/sandboxes, /v2/sandboxes)
 * is routed as any request; the sandbox plane is routed by E2b-Sandbox-Id and
 * E2b-Sandbox-Port (http_routes_select()): envd's Connect RPC (process.Process,
 * filesystem.Filesystem, JSON codec) and /files on port 49983. Each call is translated to
 * io.sandboxd.Sandbox calls of the token's tenant; no rule lives here. */

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/random.h>
#include <time.h>

#include <systemd/sd-event.h>

#include "base64-util.h"
#include "http-e2b.h"
#include "http.h"
#include "json-util.h"
#include "list.h"
#include "log.h"
#include "parse-util.h"
#include "strv.h"

#define IFACE "io.sandboxd.Sandbox."

static json_object *get(json_object *o, const char *key) {
        json_object *v = NULL;

        if (o)
                (void) json_object_object_get_ex(o, key, &v);
        return v;
}

static const char *get_str(json_object *o, const char *key) {
        json_object *v = get(o, key);
        return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* ---- the control plane's answers: {"code": STATUS, "message": TEXT}, which the SDK reads
 * (404: NotFound, 401: Authentication, 429: RateLimit) ---- */

_printf_(3, 4)
static int e2b_error(HttpRequest *req, unsigned status, const char *fmt, ...) {
        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_free_ char *m = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&m, fmt, ap);
        va_end(ap);
        if (r < 0 || !o || json_add(o, "code", json_object_new_int((int) status)) < 0 ||
            json_add(o, "message", json_object_new_string(m)) < 0)
                return http_request_reply_errno(req, -ENOMEM);
        return http_request_reply_json(req, status, TAKE_PTR(o));
}

static const char *error_message(const char *error, json_object *parameters) {
        return get_str(parameters, "message") ?: error;
}

/* sandboxd's error as its HTTP status, but a quota as E2B's 429 (its RateLimitError: E2B
 * answers a create past the concurrent sandboxes allowed so). */
static int e2b_varlink_error(HttpRequest *req, const char *error, json_object *parameters) {
        unsigned status = streq(http_connect_code(error, parameters), "resource_exhausted") &&
                          !strstr(error, "FileTooLarge") && !strstr(error, "SnapshotTooLarge")
                          ? 429 : http_status_from_varlink_error(error, parameters);

        return e2b_error(req, status, "%s", error_message(error, parameters));
}

static json_object *params_id(const char *id) {
        json_object *p = json_object_new_object();

        if (p && json_add(p, "id", json_object_new_string(id)) < 0)
                return json_object_put(p), NULL;
        return p;
}

static int format_time(uint64_t usec, char buf[static 40]) {
        time_t t = (time_t) (usec / 1000000U);
        struct tm tm;

        if (!gmtime_r(&t, &tm))
                return -EINVAL;
        size_t n = strftime(buf, 40, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, 40 - n, ".%06" PRIu64 "Z", usec % 1000000U);
        return 0;
}

static json_object *time_json(uint64_t usec) {
        char buf[40];

        if (format_time(usec, buf) < 0)
                return json_object_new_string("1970-01-01T00:00:00Z");
        return json_object_new_string(buf);
}

/* ---- templates: E2B's names mapped onto ours ([E2B] Template=NAME:TEMPLATE) ---- */

static const char *template_in(char *const *l, const char *e2b) {
        size_t n = strlen(e2b);

        for (char *const *t = l; t && *t; t++)
                if (strncmp(*t, e2b, n) == 0 && (*t)[n] == ':')
                        return *t + n + 1;
        return NULL;
}

/* The configuration's, else the defaults; NULL: none (the name is tried as ours). */
static const char *template_for(HttpRequest *req, const char *e2b) {
        static char *const defaults[] = { (char *) "base:" E2B_TEMPLATE_BASE,
                                          (char *) "code-interpreter-v1:" E2B_TEMPLATE_CODE_INTERPRETER, NULL };
        const HttpConfig *c = http_server_config(http_request_server(req));

        return template_in(c->e2b_templates, e2b) ?: template_in(defaults, e2b);
}

/* ---- sandboxes ---- */

/* E2B's SandboxDetail / ListedSandbox from a Sandbox of ours. */
static json_object *sandbox_json(json_object *s) {
        _cleanup_json_ json_object *o = json_object_new_object(), *metadata = NULL;
        const char *state = get_str(s, "state");
        uint64_t created = (uint64_t) json_object_get_int64(get(s, "createdAt"));
        uint64_t deadline = (uint64_t) json_object_get_int64(get(s, "deadline"));
        int64_t cpu = json_object_get_int64(get(s, "cpuQuotaPerSecUSec"));
        json_object *labels = get(s, "labels");

        metadata = labels && json_object_is_type(labels, json_type_object) ? json_object_get(labels)
                                                                             : json_object_new_object();
        if (!o || !metadata ||
            json_add(o, "sandboxID", json_object_get(get(s, "id"))) < 0 ||
            json_add(o, "templateID", json_object_get(get(s, "template"))) < 0 ||
            json_add(o, "alias", json_object_get(get(s, "template"))) < 0 ||
            json_add(o, "clientID", json_object_new_string("sandboxd")) < 0 ||
            json_add(o, "startedAt", time_json(created)) < 0 ||
            /* no lifetime: a hundred years */
            json_add(o, "endAt", time_json(deadline ?: created + UINT64_C(3155760000000000))) < 0 ||
            json_add(o, "cpuCount", json_object_new_int64(cpu > 0 ? (cpu + 999999) / 1000000 : 1)) < 0 ||
            json_add(o, "memoryMB", json_object_new_int64(json_object_get_int64(get(s, "memoryMax")) >> 20)) < 0 ||
            json_add(o, "diskSizeMB", json_object_new_int64(json_object_get_int64(get(s, "diskMax")) >> 20)) < 0 ||
            json_add(o, "metadata", TAKE_PTR(metadata)) < 0 ||
            json_add(o, "state", json_object_new_string(state && streq(state, "paused") ? "paused" : "running")) < 0 ||
            json_add(o, "envdVersion", json_object_new_string(E2B_ENVD_VERSION)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* What Sandbox.create and connect read: the id and the envd access token. The tokens are
 * the API key the call came with, which the sandbox plane authenticates as any token
 * (docs/E2B.md, "Keys"). */
static json_object *sandbox_created_json(HttpRequest *req, json_object *s) {
        _cleanup_json_ json_object *o = sandbox_json(s);
        const char *key = http_request_header(req, "X-API-Key");

        if (!o)
                return NULL;
        if (key && (json_add(o, "envdAccessToken", json_object_new_string(key)) < 0 ||
                    json_add(o, "trafficAccessToken", json_object_new_string(key)) < 0))
                return NULL;
        return TAKE_PTR(o);
}

static int on_sandbox_reply(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                            void *userdata) {
        unsigned status = (unsigned) (uintptr_t) userdata;
        json_object *o;

        if (error)
                return e2b_varlink_error(req, error, parameters);
        o = status == 200 ? sandbox_json(get(parameters, "sandbox"))
                          : sandbox_created_json(req, get(parameters, "sandbox"));
        if (!o)
                return http_request_reply_errno(req, -ENOMEM);
        return http_request_reply_json(req, status, o);
}

/* GetSandbox of id, answered with status: 200 the detail, else (201, 200 + 1000 for a
 * connect that resumed nothing) what create answers. */
static int reply_sandbox(HttpRequest *req, const char *id, unsigned status) {
        json_object *p = params_id(id);

        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "GetSandbox", p, 0, on_sandbox_reply, (void *) (uintptr_t) status);
}

static int on_created(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                      void *userdata) {
        if (error) {
                if (strstr(error, "NoSuchTemplate"))
                        return e2b_error(req, 404, "%s (E2B's template names are mapped to sandboxd's by [E2B] "
                                         "Template= in sandboxd-http's configuration, docs/E2B.md)",
                                         error_message(error, parameters));
                return e2b_varlink_error(req, error, parameters);
        }
        return reply_sandbox(req, json_object_get_string(get(parameters, "id")), 201);
}

static int strv_from_json_array(json_object *a, json_object **ret) {
        _cleanup_json_ json_object *l = json_object_new_array();

        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < json_object_array_length(a); i++) {
                json_object *v = json_object_array_get_idx(a, i);
                if (!json_object_is_type(v, json_type_string))
                        return -EINVAL;
                if (json_object_array_add(l, json_object_get(v)) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static void json_put_data(void *p) {
        json_object_put(p);
}

/* The create waiting as the request's data, from a snapshot if its template names one. */
static int on_create_snapshots(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                               void *userdata) {
        json_object *p = http_request_get_data(req), *l = get(parameters, "snapshots");
        const char *template = get_str(p, "template");

        /* without snapshots (none configured, say), the name is only tried as a template */
        for (size_t i = 0; !error && i < json_object_array_length(l); i++) {
                json_object *snap = json_object_array_get_idx(l, i);
                const char *id = get_str(snap, "id"), *name = get_str(snap, "name");

                if ((!id || !streq(id, template)) && (!name || !*name || !streq(name, template)))
                        continue;
                if (json_add(get(p, "options"), "FromSnapshot", json_object_new_string(id)) < 0 ||
                    json_add(p, "template", json_object_get(get(snap, "template"))) < 0)
                        return -ENOMEM;
                break;
        }
        return http_backend_call(req, IFACE "AcquireSandbox", json_object_get(p), 0, on_created, NULL);
}

/* POST /sandboxes, /v2/sandboxes: Sandbox.create. */
static int route_create(HttpRequest *req) {
        json_object *body = http_request_body(req), *v;
        _cleanup_json_ json_object *p = json_object_new_object(), *options = json_object_new_object();
        const char *e2b = get_str(body, "templateID") ?: "base", *ours = template_for(req, e2b);
        int64_t timeout = 300;
        int r;

        if (!p || !options)
                return -ENOMEM;
        if ((v = get(body, "timeout"))) {
                if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
                        return e2b_error(req, 400, "'timeout' must be a number of seconds.");
                timeout = json_object_get_int64(v);
        }
        if ((v = get(body, "envVars")) && json_object_is_type(v, json_type_object) && json_object_object_length(v) > 0)
                return e2b_error(req, 400, "envVars at create are not kept by sandboxd: give them to each command "
                                 "(commands.run(cmd, {envs})) (docs/E2B.md).");
        if ((v = get(body, "allow_internet_access")) && json_object_get_boolean(v))
                return e2b_error(req, 400, "sandboxd gives a sandbox no open internet: name the hosts it may reach "
                                 "in network.allowOut (sandboxd's EgressAllow) (docs/E2B.md).");
        if ((v = get(body, "autoPause")) && json_object_get_boolean(v))
                return e2b_error(req, 400, "autoPause is not done by sandboxd: its timeout destroys a sandbox; pause "
                                 "it with Sandbox.pause() (docs/E2B.md).");
        if ((v = get(body, "network")) && json_object_is_type(v, json_type_object)) {
                static const char *const keys[2][2] = { { "allowOut", "EgressAllow" }, { "denyOut", "EgressDeny" } };
                for (size_t i = 0; i < 2; i++) {
                        json_object *a = get(v, keys[i][0]), *l = NULL;
                        if (!a)
                                continue;
                        if (!json_object_is_type(a, json_type_array) || strv_from_json_array(a, &l) < 0)
                                return e2b_error(req, 400, "'network.%s' must be a list of hosts.", keys[i][0]);
                        if (json_add(options, keys[i][1], l) < 0)
                                return -ENOMEM;
                }
        }
        if ((v = get(body, "metadata")) && json_object_is_type(v, json_type_object) &&
            json_object_object_length(v) > 0 && json_add(options, "Labels", json_object_get(v)) < 0)
                return -ENOMEM;
        r = json_add(options, "Timeout", json_object_new_int64(timeout));
        if (r >= 0)
                r = json_add(p, "template", json_object_new_string(ours ?: e2b));
        if (r >= 0)
                r = json_add(p, "options", TAKE_PTR(options));
        if (r < 0)
                return -ENOMEM;
        if (ours)
                return http_backend_call(req, IFACE "AcquireSandbox", TAKE_PTR(p), 0, on_created, NULL);
        /* not one of E2B's names: one of the tenant's snapshots (Sandbox.create(snapshotId)),
         * else one of sandboxd's templates */
        http_request_set_data(req, TAKE_PTR(p), json_put_data);
        return http_backend_call(req, IFACE "ListSnapshots", json_object_new_object(), 0, on_create_snapshots, NULL);
}

static int route_get(HttpRequest *req) {
        return reply_sandbox(req, http_request_param(req, 0), 200);
}

/* The query's metadata filter, "k=v&k2=v2" (each part URL-encoded, the whole again), as
 * ListSandboxes' Label selectors; -EINVAL for a part that is no k=v. */
static int metadata_selectors(const char *filter, json_object **ret) {
        _cleanup_json_ json_object *l = json_object_new_array();
        _cleanup_free_ char *copy = strdup(filter);
        char *save = NULL;

        if (!l || !copy)
                return -ENOMEM;
        for (char *kv = strtok_r(copy, "&", &save); kv; kv = strtok_r(NULL, "&", &save)) {
                _cleanup_free_ char *selector = NULL;
                char *eq = strchr(kv, '=');

                if (!eq)
                        return -EINVAL;
                *eq = 0;
                (void) MHD_http_unescape(kv);
                (void) MHD_http_unescape(eq + 1);
                if (asprintf(&selector, "%s=%s", kv, eq + 1) < 0 ||
                    json_object_array_add(l, json_object_new_string(selector)) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

/* Whether word is one of list's comma-separated words. */
static bool word_in_list(const char *list, const char *word) {
        size_t n = strlen(word);

        for (const char *w = list; w; w = strchr(w, ',') ? strchr(w, ',') + 1 : NULL)
                if (strncmp(w, word, n) == 0 && (w[n] == ',' || w[n] == 0))
                        return true;
        return false;
}

static int on_list(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                   void *userdata) {
        _cleanup_json_ json_object *a = json_object_new_array();
        json_object *l = get(parameters, "sandboxes");
        const char *states = http_request_query(req, "state");

        if (error)
                return e2b_varlink_error(req, error, parameters);
        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < json_object_array_length(l); i++) {
                json_object *s = json_object_array_get_idx(l, i), *o;
                const char *state = get_str(s, "state") ?: "";
                const char *e2b_state = streq(state, "paused") ? "paused" : "running";

                if (!streq(state, "running") && !streq(state, "paused"))
                        continue;
                if (states && *states && !word_in_list(states, e2b_state))
                        continue;
                o = sandbox_json(s);
                if (!o || json_object_array_add(a, o) < 0)
                        return -ENOMEM;
        }
        return http_request_reply_json(req, 200, TAKE_PTR(a));
}

/* GET /v2/sandboxes?state=running,paused&metadata=…: the tenant's, filtered by labels */
static int route_list(HttpRequest *req) {
        const char *metadata = http_request_query(req, "metadata");
        _cleanup_json_ json_object *p = json_object_new_object(), *filter = NULL, *labels = NULL;
        int r;

        if (!p)
                return -ENOMEM;
        if (metadata && *metadata) {
                r = metadata_selectors(metadata, &labels);
                if (r == -EINVAL)
                        return e2b_error(req, 400, "'metadata' is key=value pairs joined by &.");
                if (r < 0)
                        return r;
                filter = json_object_new_object();
                if (!filter || json_add(filter, "Label", TAKE_PTR(labels)) < 0 ||
                    json_add(p, "filter", TAKE_PTR(filter)) < 0)
                        return -ENOMEM;
        }
        return http_backend_call(req, IFACE "ListSandboxes", TAKE_PTR(p), 0, on_list, NULL);
}

static int on_done(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                   void *userdata) {
        if (error)
                return e2b_varlink_error(req, error, parameters);
        return http_request_reply_text(req, 204, NULL, "");
}

static int route_kill(HttpRequest *req) {
        json_object *p = params_id(http_request_param(req, 0));

        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "Destroy", p, 0, on_done, NULL);
}

static int set_timeout(HttpRequest *req, const char *id, json_object *timeout, http_backend_reply_t callback) {
        json_object *p = params_id(id);

        if (!p)
                return -ENOMEM;
        if (!json_object_is_type(timeout, json_type_int) || json_object_get_int64(timeout) < 0) {
                json_object_put(p);
                return e2b_error(req, 400, "'timeout' must be a number of seconds.");
        }
        if (json_add(p, "lifetimeSec", json_object_get(timeout)) < 0 ||
            json_add(p, "idleSec", json_object_new_int(0)) < 0) {
                json_object_put(p);
                return -ENOMEM;
        }
        return http_backend_call(req, IFACE "SetTimeout", p, 0, callback, NULL);
}

static int route_timeout(HttpRequest *req) {
        json_object *t = get(http_request_body(req), "timeout");

        if (!t)
                return e2b_error(req, 400, "The body needs 'timeout'.");
        return set_timeout(req, http_request_param(req, 0), t, on_done);
}

/* pause: 409 when it is paused already (the SDK's false) */
static int on_pause_state(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                          void *userdata) {
        const char *state = get_str(get(parameters, "sandbox"), "state");
        json_object *p;

        if (error)
                return e2b_varlink_error(req, error, parameters);
        if (state && streq(state, "paused"))
                return e2b_error(req, 409, "The sandbox is paused already.");
        p = params_id(http_request_param(req, 0));
        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "Pause", p, 0, on_done, NULL);
}

static int route_pause(HttpRequest *req) {
        json_object *p = params_id(http_request_param(req, 0));

        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "GetSandbox", p, 0, on_pause_state, NULL);
}

/* resume, connect: resumed if paused, the lifetime set if given; 201 if it resumed, else
 * 200, with what create answers. */
static int on_connect_timeout(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                              void *userdata) {
        if (error)
                return e2b_varlink_error(req, error, parameters);
        return reply_sandbox(req, http_request_param(req, 0), (unsigned) (uintptr_t) http_request_get_data(req));
}

static int on_resumed(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                      void *userdata) {
        json_object *t = get(http_request_body(req), "timeout");

        if (error)
                return e2b_varlink_error(req, error, parameters);
        if (t)
                return set_timeout(req, http_request_param(req, 0), t, on_connect_timeout);
        return on_connect_timeout(req, NULL, NULL, 0, NULL);
}

static int on_connect_state(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                            void *userdata) {
        const char *state = get_str(get(parameters, "sandbox"), "state");
        bool paused = state && streq(state, "paused");
        json_object *p;

        if (error)
                return e2b_varlink_error(req, error, parameters);
        /* 201 Created (resumed) or 200 OK, both with create's body: 200 + 1 tells reply_sandbox */
        http_request_set_data(req, (void *) (uintptr_t) (paused ? 201 : 201), NULL);
        if (!paused)
                return on_resumed(req, NULL, NULL, 0, NULL);
        p = params_id(http_request_param(req, 0));
        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "Resume", p, 0, on_resumed, NULL);
}

static int route_connect(HttpRequest *req) {
        json_object *p = params_id(http_request_param(req, 0));

        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "GetSandbox", p, 0, on_connect_state, NULL);
}

/* GET /sandboxes/{id}/metrics: one sample, now */
static int on_metrics(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                      void *userdata) {
        _cleanup_json_ json_object *a = json_object_new_array(), *o = json_object_new_object();
        json_object *m = get(parameters, "metrics");
        struct timespec ts;

        if (error)
                return e2b_varlink_error(req, error, parameters);
        if (!a || !o)
                return -ENOMEM;
        (void) clock_gettime(CLOCK_REALTIME, &ts);
        if (json_add(o, "timestamp", time_json((uint64_t) ts.tv_sec * 1000000U + (uint64_t) ts.tv_nsec / 1000U)) < 0 ||
            (get(m, "memoryCurrent") && json_add(o, "memUsed", json_object_get(get(m, "memoryCurrent"))) < 0) ||
            (get(m, "diskBytesUsed") && json_add(o, "diskUsed", json_object_get(get(m, "diskBytesUsed"))) < 0) ||
            (get(m, "diskBytesMax") && json_add(o, "diskTotal", json_object_get(get(m, "diskBytesMax"))) < 0) ||
            json_object_array_add(a, TAKE_PTR(o)) < 0)
                return -ENOMEM;
        return http_request_reply_json(req, 200, TAKE_PTR(a));
}

static int route_metrics(HttpRequest *req) {
        json_object *p = params_id(http_request_param(req, 0));

        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "GetMetrics", p, 0, on_metrics, NULL);
}

/* ---- snapshots: E2B's snapshot is a template made of a sandbox; here sandboxd's Snapshot
 * of its files (/work), which Sandbox.create(snapshotId) starts from ---- */

static json_object *snapshot_json(json_object *snap) {
        _cleanup_json_ json_object *o = json_object_new_object(), *names = json_object_new_array();
        const char *name = get_str(snap, "name");

        if (!o || !names || (name && *name && json_object_array_add(names, json_object_new_string(name)) < 0) ||
            json_add(o, "snapshotID", json_object_get(get(snap, "id"))) < 0 ||
            json_add(o, "names", TAKE_PTR(names)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static int on_snapshot(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                       void *userdata) {
        json_object *o;

        if (error)
                return e2b_varlink_error(req, error, parameters);
        o = snapshot_json(get(parameters, "snapshot"));
        if (!o)
                return -ENOMEM;
        return http_request_reply_json(req, 201, o);
}

/* POST /sandboxes/{id}/snapshots */
static int route_snapshot(HttpRequest *req) {
        json_object *p = params_id(http_request_param(req, 0));

        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "Snapshot", p, 0, on_snapshot, NULL);
}

static int on_snapshots(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                        void *userdata) {
        _cleanup_json_ json_object *a = json_object_new_array();
        const char *sandbox = http_request_query(req, "sandboxID");
        json_object *l = get(parameters, "snapshots");

        if (error)
                return e2b_varlink_error(req, error, parameters);
        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < json_object_array_length(l); i++) {
                json_object *snap = json_object_array_get_idx(l, i), *o;
                const char *source = get_str(snap, "source");

                if (sandbox && *sandbox && (!source || !streq(source, sandbox)))
                        continue;
                o = snapshot_json(snap);
                if (!o || json_object_array_add(a, o) < 0)
                        return -ENOMEM;
        }
        return http_request_reply_json(req, 200, TAKE_PTR(a));
}

/* GET /snapshots?sandboxID= */
static int route_snapshots(HttpRequest *req) {
        json_object *p = json_object_new_object();

        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "ListSnapshots", p, 0, on_snapshots, NULL);
}

/* DELETE /templates/{id}: Sandbox.deleteSnapshot (E2B's snapshots are templates) */
static int route_snapshot_delete(HttpRequest *req) {
        json_object *p = json_object_new_object();

        if (!p || json_add(p, "snapshot", json_object_new_string(http_request_param(req, 0))) < 0) {
                json_object_put(p);
                return -ENOMEM;
        }
        return http_backend_call(req, IFACE "RemoveSnapshot", p, 0, on_done, NULL);
}

/* POST /sandboxes/{id}/fork {timeout, count}: count Forks, each its result ({sandbox} or
 * {error: {code, message}}), answered once all are done. */
typedef struct ForkState {
        json_object *results;
        unsigned left;
} ForkState;

static void fork_state_free(void *p) {
        ForkState *f = p;

        if (f)
                json_object_put(f->results);
        free(f);
}

static int fork_next(HttpRequest *req);

static int on_forked(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                     void *userdata) {
        ForkState *f = http_request_get_data(req);
        _cleanup_json_ json_object *o = json_object_new_object(), *sub = json_object_new_object();
        const char *key = http_request_header(req, "X-API-Key");

        if (!o || !sub)
                return -ENOMEM;
        if (error) {
                if (json_add(sub, "code", json_object_new_int((int) http_status_from_varlink_error(error, parameters))) < 0 ||
                    json_add(sub, "message", json_object_new_string(error_message(error, parameters))) < 0 ||
                    json_add(o, "error", TAKE_PTR(sub)) < 0)
                        return -ENOMEM;
        } else if (json_add(sub, "sandboxID", json_object_get(get(parameters, "id"))) < 0 ||
                   json_add(sub, "clientID", json_object_new_string("sandboxd")) < 0 ||
                   json_add(sub, "envdVersion", json_object_new_string(E2B_ENVD_VERSION)) < 0 ||
                   (key && json_add(sub, "envdAccessToken", json_object_new_string(key)) < 0) ||
                   json_add(o, "sandbox", TAKE_PTR(sub)) < 0)
                return -ENOMEM;
        if (json_object_array_add(f->results, TAKE_PTR(o)) < 0)
                return -ENOMEM;
        if (--f->left == 0)
                return http_request_reply_json(req, 200, json_object_get(f->results));
        return fork_next(req);
}

static int fork_next(HttpRequest *req) {
        json_object *t = get(http_request_body(req), "timeout");
        _cleanup_json_ json_object *p = params_id(http_request_param(req, 0)), *options = json_object_new_object();

        if (!p || !options || (t && json_add(options, "Timeout", json_object_get(t)) < 0) ||
            json_add(p, "options", TAKE_PTR(options)) < 0)
                return -ENOMEM;
        return http_backend_call(req, IFACE "Fork", TAKE_PTR(p), 0, on_forked, NULL);
}

static int route_fork(HttpRequest *req) {
        json_object *count = get(http_request_body(req), "count"), *t = get(http_request_body(req), "timeout");
        int64_t n = count ? json_object_get_int64(count) : 1;
        ForkState *f;

        if (n < 1 || n > 16)
                return e2b_error(req, 400, "'count' is 1 to 16.");
        if (t && (!json_object_is_type(t, json_type_int) || json_object_get_int64(t) < 0))
                return e2b_error(req, 400, "'timeout' must be a number of seconds.");
        f = calloc(1, sizeof(ForkState));
        if (!f)
                return -ENOMEM;
        http_request_set_data(req, f, fork_state_free);
        f->left = (unsigned) n;
        f->results = json_object_new_array();
        if (!f->results)
                return -ENOMEM;
        return fork_next(req);
}

/* ---- the sandbox plane: envd's Connect RPC ---- */

/* A unary call's error: Connect's code as HTTP status and {"code", "message"}. */
static int connect_error(HttpRequest *req, const char *code, const char *message) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o || json_add(o, "code", json_object_new_string(code)) < 0 ||
            json_add(o, "message", json_object_new_string(message)) < 0)
                return http_request_reply_errno(req, -ENOMEM);
        return http_request_reply_json(req, http_connect_status(code), TAKE_PTR(o));
}

static int connect_varlink_error(HttpRequest *req, const char *error, json_object *parameters) {
        return connect_error(req, http_connect_code(error, parameters), error_message(error, parameters));
}

static const char *sandbox_of(HttpRequest *req) {
        return http_request_param(req, 0);
}

/* A message of a streamed reply. */
static int stream_message(HttpRequest *req, uint8_t flags, json_object *m) {
        _cleanup_free_ char *b = NULL;
        size_t n;
        int r = http_connect_envelope(flags, m, &b, &n);

        if (r < 0)
                return r;
        return http_request_stream_write(req, b, n);
}

/* The end of a streamed reply: {} or {"error": {"code", "message"}}. */
static void stream_end(HttpRequest *req, const char *code, const char *message) {
        _cleanup_json_ json_object *o = json_object_new_object(), *e = NULL;

        if (o && code) {
                e = json_object_new_object();
                if (!e || json_add(e, "code", json_object_new_string(code)) < 0 ||
                    json_add(e, "message", json_object_new_string(message ?: code)) < 0 ||
                    json_add(o, "error", TAKE_PTR(e)) < 0) {
                        http_request_stream_end(req, true);
                        return;
                }
        }
        http_request_stream_end(req, !o || stream_message(req, CONNECT_FLAG_END, o) < 0);
}

/* A streaming call whose request failed before its stream: 200 and only the end. */
static int stream_fail(HttpRequest *req, const char *code, const char *message) {
        int r = http_request_stream(req, 200, "application/connect+json", MHD_SIZE_UNKNOWN, NULL);

        if (r < 0)
                return r;
        stream_end(req, code, message);
        return 0;
}

/* The streaming request's one message. */
static int stream_request(HttpRequest *req, json_object **ret) {
        const char *error = NULL;
        size_t n;
        const void *d = http_request_raw_body(req, &n);
        int r = http_connect_unwrap(d, n, ret, &error);

        if (r < 0)
                return stream_fail(req, "invalid_argument", error);
        return 1;
}

/* ---- processes ---- */

typedef struct Proc {
        int64_t process;
        bool pty;                        /* its output is a terminal's */
        bool ended;
} Proc;

static json_object *params_process(HttpRequest *req, int64_t process) {
        json_object *p = params_id(sandbox_of(req));

        if (p && json_add(p, "process", json_object_new_int64(process)) < 0)
                return json_object_put(p), NULL;
        return p;
}

/* {"event": {KEY: VALUE}} */
static int proc_event(HttpRequest *req, const char *key, json_object *value) {
        _cleanup_json_ json_object *v = value, *e = json_object_new_object(), *m = json_object_new_object();

        if (!v || !e || !m || json_add(e, key, TAKE_PTR(v)) < 0 || json_add(m, "event", TAKE_PTR(e)) < 0)
                return -ENOMEM;
        return stream_message(req, 0, m);
}

/* The end event from Follow's last reply: exitCode (-1 for a signal, as envd says it),
 * exited, status as Go's ProcessState says it. */
static int proc_end(HttpRequest *req, json_object *parameters) {
        _cleanup_json_ json_object *end = json_object_new_object();
        json_object *info = get(parameters, "info");
        int64_t status = json_object_get_int64(get(parameters, "exitStatus"));
        int64_t sig = json_object_get_int64(get(info, "signal"));
        char text[64];

        if (sig > 0)
                snprintf(text, sizeof(text), "signal: %s", sig == 9 ? "killed" : sig == 15 ? "terminated" : "signal");
        else
                snprintf(text, sizeof(text), "exit status %" PRIi64, status);
        if (!end ||
            json_add(end, "exitCode", json_object_new_int64(sig > 0 ? -1 : status)) < 0 ||
            json_add(end, "exited", json_object_new_boolean(sig == 0)) < 0 ||
            json_add(end, "status", json_object_new_string(text)) < 0 ||
            (json_object_get_boolean(get(info, "timedOut")) &&
             json_add(end, "error", json_object_new_string("the command's timeout ended it")) < 0))
                return -ENOMEM;
        return proc_event(req, "end", TAKE_PTR(end));
}

static int on_follow(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                     void *userdata) {
        Proc *proc = http_request_get_data(req);
        static const char *const names[2] = { "stdout", "stderr" };

        if (proc->ended)
                return 0;
        if (error) {
                proc->ended = true;
                stream_end(req, http_connect_code(error, parameters), error_message(error, parameters));
                return 0;
        }
        for (unsigned i = 0; i < 2; i++) {
                const char *b64 = get_str(parameters, names[i]);
                _cleanup_json_ json_object *d = NULL;

                if (!b64 || !*b64)
                        continue;
                d = json_object_new_object();
                if (!d || json_add(d, proc->pty ? "pty" : names[i], json_object_new_string(b64)) < 0 ||
                    proc_event(req, "data", TAKE_PTR(d)) < 0)
                        goto fail;
        }
        if (http_request_stream_buffered(req) > HTTP_STREAM_BUFFER_MAX)
                goto fail;      /* a client that does not read: its stream ends, the process runs on */
        if (!(flags & VARLINK_REPLY_CONTINUES)) {
                proc->ended = true;
                if (proc_end(req, parameters) < 0)
                        goto fail;
                stream_end(req, NULL, NULL);
        }
        return 0;
fail:
        proc->ended = true;
        http_request_stream_end(req, true);
        http_backend_cancel(req);
        return 0;
}

/* The stream of a process: its start (pid: sandboxd's process number), its output as it
 * is written (Follow), its end. output: ReadOutput's reply (Connect): only what comes
 * after it is sent. */
static int proc_stream(HttpRequest *req, int64_t process, bool pty, json_object *output) {
        Proc *proc = calloc(1, sizeof(Proc));
        _cleanup_json_ json_object *start = json_object_new_object();
        json_object *p;
        int r;

        if (!proc || !start) {
                free(proc);
                return -ENOMEM;
        }
        *proc = (Proc) { .process = process, .pty = pty };
        http_request_set_data(req, proc, free);
        r = http_request_stream(req, 200, "application/connect+json", MHD_SIZE_UNKNOWN, NULL);
        if (r < 0)
                return r;
        p = params_process(req, process);
        if (json_add(start, "pid", json_object_new_int64(process)) < 0 || proc_event(req, "start", TAKE_PTR(start)) < 0 ||
            !p ||
            (output && (json_add(p, "stdoutOffset", json_object_get(get(output, "stdoutTotal"))) < 0 ||
                        json_add(p, "stderrOffset", json_object_get(get(output, "stderrTotal"))) < 0)) ||
            http_backend_call(req, IFACE "Follow", TAKE_PTR(p), VARLINK_CALL_MORE, on_follow, NULL) < 0) {
                json_object_put(p);
                http_request_stream_end(req, true);
        }
        return 0;
}

static int on_started(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                      void *userdata) {
        if (error)
                return stream_fail(req, http_connect_code(error, parameters), error_message(error, parameters));
        return proc_stream(req, json_object_get_int64(get(parameters, "process")), !!userdata, NULL);
}

/* process.Process/Start: {process: {cmd, args, envs, cwd}, pty, tag, stdin} */
static int route_process_start(HttpRequest *req) {
        _cleanup_json_ json_object *m = NULL, *p = params_id(sandbox_of(req)), *argv = json_object_new_array(),
                                   *env = json_object_new_array(), *options = json_object_new_object();
        json_object *config, *args, *envs, *pty;
        const char *cmd, *cwd;
        bool home = false;
        int r = stream_request(req, &m);

        if (r <= 0)
                return r;
        if (!p || !argv || !env || !options)
                return -ENOMEM;
        pty = get(get(m, "pty"), "size");
        if (get(m, "pty")) {
                json_object *rows = get(pty, "rows"), *cols = get(pty, "cols");
                if (json_add(options, "TTY", json_object_new_boolean(true)) < 0 ||
                    (rows && json_add(options, "TerminalRows", json_object_get(rows)) < 0) ||
                    (cols && json_add(options, "TerminalColumns", json_object_get(cols)) < 0))
                        return -ENOMEM;
        } else if (json_object_get_boolean(get(m, "stdin")) &&
                   json_add(options, "StdinPipe", json_object_new_boolean(true)) < 0)
                return -ENOMEM;
        config = get(m, "process");
        cmd = get_str(config, "cmd");
        if (!cmd || !*cmd)
                return stream_fail(req, "invalid_argument", "process.cmd is needed.");
        if (json_object_array_add(argv, json_object_new_string(cmd)) < 0)
                return -ENOMEM;
        args = get(config, "args");
        for (size_t i = 0; i < json_object_array_length(args); i++) {
                json_object *a = json_object_array_get_idx(args, i);
                if (!json_object_is_type(a, json_type_string))
                        return stream_fail(req, "invalid_argument", "process.args must be strings.");
                if (json_object_array_add(argv, json_object_get(a)) < 0)
                        return -ENOMEM;
        }
        envs = get(config, "envs");
        if (envs && json_object_is_type(envs, json_type_object)) {
                json_object_object_foreach(envs, k, v) {
                        _cleanup_free_ char *kv = NULL;
                        if (!json_object_is_type(v, json_type_string))
                                return stream_fail(req, "invalid_argument", "process.envs must be strings.");
                        if (asprintf(&kv, "%s=%s", k, json_object_get_string(v)) < 0 ||
                            json_object_array_add(env, json_object_new_string(kv)) < 0)
                                return -ENOMEM;
                        home = home || streq(k, "HOME");
                }
        }
        if (!home && json_object_array_add(env, json_object_new_string("HOME=" E2B_WORKDIR)) < 0)
                return -ENOMEM;
        if (json_add(options, "Environment", TAKE_PTR(env)) < 0)
                return -ENOMEM;
        cwd = get_str(config, "cwd");
        if (cwd && *cwd) {
                _cleanup_free_ char *in = NULL;
                if (http_e2b_path_in(cwd, &in) < 0 ||
                    json_add(options, "WorkingDirectory", json_object_new_string(in)) < 0)
                        return -ENOMEM;
        }
        if (json_add(p, "argv", TAKE_PTR(argv)) < 0 || json_add(p, "options", TAKE_PTR(options)) < 0)
                return -ENOMEM;
        return http_backend_call(req, IFACE "Start", TAKE_PTR(p), 0, on_started, (void *) (uintptr_t) !!get(m, "pty"));
}

static int selector_process(HttpRequest *req, json_object *m, int64_t *ret) {
        json_object *pid = get(get(m, "process"), "pid");

        if (!pid || !json_object_is_type(pid, json_type_int))
                return -EINVAL;
        *ret = json_object_get_int64(pid);
        return 0;
}

static int on_connect_output(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                             void *userdata) {
        if (error)
                return stream_fail(req, http_connect_code(error, parameters), error_message(error, parameters));
        return proc_stream(req, (int64_t) (intptr_t) userdata, false, parameters);
}

/* process.Process/Connect: {process: {pid}}: the stream of a process started before */
static int route_process_connect(HttpRequest *req) {
        _cleanup_json_ json_object *m = NULL;
        int64_t process;
        json_object *p;
        int r = stream_request(req, &m);

        if (r <= 0)
                return r;
        if (selector_process(req, m, &process) < 0)
                return stream_fail(req, "invalid_argument", "process.pid is needed (a tag is not kept).");
        p = params_process(req, process);
        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "ReadOutput", p, 0, on_connect_output, (void *) (intptr_t) process);
}

static int on_rpc_empty(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                        void *userdata) {
        if (error)
                return connect_varlink_error(req, error, parameters);
        return http_request_reply_json(req, 200, json_object_new_object());
}

/* process.Process/SendInput: {process: {pid}, input: {stdin | pty: BYTES}} */
static int route_process_input(HttpRequest *req) {
        json_object *m = http_request_body(req), *input = get(m, "input"), *p;
        const char *data = get_str(input, "stdin") ?: get_str(input, "pty");
        int64_t process;

        if (selector_process(req, m, &process) < 0)
                return connect_error(req, "invalid_argument", "process.pid is needed (a tag is not kept).");
        if (!data)
                return connect_error(req, "invalid_argument", "input.stdin or input.pty is needed.");
        p = params_process(req, process);
        if (!p || json_add(p, "data", json_object_new_string(data)) < 0) {
                json_object_put(p);
                return -ENOMEM;
        }
        return http_backend_call(req, IFACE "WriteStdin", p, 0, on_rpc_empty, NULL);
}

/* process.Process/CloseStdin: {process: {pid}} */
static int route_process_close_stdin(HttpRequest *req) {
        json_object *p;
        int64_t process;

        if (selector_process(req, http_request_body(req), &process) < 0)
                return connect_error(req, "invalid_argument", "process.pid is needed (a tag is not kept).");
        p = params_process(req, process);
        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "CloseStdin", p, 0, on_rpc_empty, NULL);
}

/* process.Process/SendSignal: {process: {pid}, signal: SIGNAL_SIGKILL | SIGNAL_SIGTERM} */
static int route_process_signal(HttpRequest *req) {
        json_object *m = http_request_body(req), *sig = get(m, "signal"), *p;
        const char *name = sig && json_object_is_type(sig, json_type_string) ? json_object_get_string(sig) : NULL;
        int64_t process, signo = name ? (streq(name, "SIGNAL_SIGKILL") ? 9 : streq(name, "SIGNAL_SIGTERM") ? 15 : 0)
                                      : json_object_get_int64(sig);

        if (selector_process(req, m, &process) < 0)
                return connect_error(req, "invalid_argument", "process.pid is needed (a tag is not kept).");
        if (signo != 9 && signo != 15)
                return connect_error(req, "invalid_argument", "signal is SIGNAL_SIGKILL or SIGNAL_SIGTERM.");
        p = params_process(req, process);
        if (!p || json_add(p, "signal", json_object_new_int64(signo)) < 0) {
                json_object_put(p);
                return -ENOMEM;
        }
        return http_backend_call(req, IFACE "Signal", p, 0, on_rpc_empty, NULL);
}

static int on_process_list(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                           void *userdata) {
        _cleanup_json_ json_object *o = json_object_new_object(), *a = json_object_new_array();
        json_object *l = get(parameters, "processes");

        if (error)
                return connect_varlink_error(req, error, parameters);
        if (!o || !a)
                return -ENOMEM;
        for (size_t i = 0; i < json_object_array_length(l); i++) {
                json_object *pr = json_object_array_get_idx(l, i), *argv = get(pr, "argv"), *args;
                _cleanup_json_ json_object *info = NULL, *config = NULL;
                const char *state = get_str(pr, "state");

                if (!state || !streq(state, "running"))
                        continue;
                info = json_object_new_object();
                config = json_object_new_object();
                args = json_object_new_array();
                if (!info || !config || !args)
                        return json_object_put(args), -ENOMEM;
                for (size_t k = 1; k < json_object_array_length(argv); k++)
                        (void) json_object_array_add(args, json_object_get(json_object_array_get_idx(argv, k)));
                if (json_add(config, "cmd", json_object_get(json_object_array_get_idx(argv, 0))) < 0 ||
                    json_add(config, "args", args) < 0 ||
                    json_add(config, "envs", json_object_new_object()) < 0 ||
                    json_add(info, "config", TAKE_PTR(config)) < 0 ||
                    json_add(info, "pid", json_object_get(get(pr, "process"))) < 0 ||
                    json_object_array_add(a, TAKE_PTR(info)) < 0)
                        return -ENOMEM;
        }
        if (json_add(o, "processes", TAKE_PTR(a)) < 0)
                return -ENOMEM;
        return http_request_reply_json(req, 200, TAKE_PTR(o));
}

static int route_process_list(HttpRequest *req) {
        json_object *p = params_id(sandbox_of(req));

        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "ListProcesses", p, 0, on_process_list, NULL);
}

/* process.Process/Update: {process: {pid}, pty: {size: {cols, rows}}} */
static int route_process_update(HttpRequest *req) {
        json_object *m = http_request_body(req), *size = get(get(m, "pty"), "size"), *p;
        int64_t process;

        if (selector_process(req, m, &process) < 0)
                return connect_error(req, "invalid_argument", "process.pid is needed (a tag is not kept).");
        if (!size)
                return http_request_reply_json(req, 200, json_object_new_object());
        p = params_process(req, process);
        if (!p || json_add(p, "rows", json_object_get(get(size, "rows")) ?: json_object_new_int(24)) < 0 ||
            json_add(p, "columns", json_object_get(get(size, "cols")) ?: json_object_new_int(80)) < 0) {
                json_object_put(p);
                return -ENOMEM;
        }
        return http_backend_call(req, IFACE "ResizeTerminal", p, 0, on_rpc_empty, NULL);
}

/* ---- files ---- */

static const char *file_type(const char *ours) {
        if (!ours)
                return "FILE_TYPE_UNSPECIFIED";
        if (streq(ours, "file"))
                return "FILE_TYPE_FILE";
        if (streq(ours, "dir"))
                return "FILE_TYPE_DIRECTORY";
        if (streq(ours, "link"))
                return "FILE_TYPE_SYMLINK";
        return "FILE_TYPE_UNSPECIFIED";
}

static void permissions_string(unsigned mode, bool dir, char buf[static 11]) {
        static const char rwx[] = "rwxrwxrwx";

        buf[0] = dir ? 'd' : '-';
        for (unsigned i = 0; i < 9; i++)
                buf[1 + i] = (mode & (0400U >> i)) ? rwx[i] : '-';
        buf[10] = 0;
}

/* envd's EntryInfo for one of our FileEntries at absolute path (ours). */
static json_object *entry_json(json_object *e, const char *path) {
        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_free_ char *out = NULL;
        const char *type = get_str(e, "type"), *slash, *target = get_str(e, "target");
        unsigned mode = (unsigned) json_object_get_int64(get(e, "mode"));
        char perm[11];

        if (!o || http_e2b_path_out(path, &out) < 0)
                return NULL;
        slash = strrchr(out, '/');
        permissions_string(mode, type && streq(type, "dir"), perm);
        if (json_add(o, "name", json_object_new_string(slash && slash[1] ? slash + 1 : out)) < 0 ||
            json_add(o, "type", json_object_new_string(file_type(type))) < 0 ||
            json_add(o, "path", json_object_new_string(out)) < 0 ||
            json_add(o, "size", json_object_new_int64(json_object_get_int64(get(e, "size")))) < 0 ||
            json_add(o, "mode", json_object_new_int64(mode | (type && streq(type, "dir") ? 040000 : 0))) < 0 ||
            json_add(o, "permissions", json_object_new_string(perm)) < 0 ||
            json_add(o, "owner", json_object_new_string("user")) < 0 ||
            json_add(o, "group", json_object_new_string("user")) < 0 ||
            json_add(o, "modifiedTime", time_json((uint64_t) json_object_get_int64(get(e, "mtime")))) < 0 ||
            (target && *target && json_add(o, "symlinkTarget", json_object_new_string(target)) < 0))
                return NULL;
        return TAKE_PTR(o);
}

/* The request's "path", as ours; a reply already when there is none. */
static int rpc_path(HttpRequest *req, const char *key, char **ret) {
        const char *path = get_str(http_request_body(req), key);

        if (!path || !*path)
                return connect_error(req, "invalid_argument", "A path is needed."), 0;
        if (http_e2b_path_in(path, ret) < 0)
                return -ENOMEM;
        return 1;
}

static json_object *params_path(HttpRequest *req, const char *path) {
        json_object *p = params_id(sandbox_of(req));

        if (p && json_add(p, "path", json_object_new_string(path)) < 0)
                return json_object_put(p), NULL;
        return p;
}

static void free_string(void *p) {
        free(p);
}

/* {entry: EntryInfo} of the path kept as the request's data */
static int on_stat_entry(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                         void *userdata) {
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *e;

        if (error)
                return connect_varlink_error(req, error, parameters);
        e = entry_json(get(parameters, "entry"), http_request_get_data(req));
        if (!o || !e || json_add(o, "entry", e) < 0)
                return -ENOMEM;
        return http_request_reply_json(req, 200, TAKE_PTR(o));
}

static int stat_reply(HttpRequest *req, char *path) {
        json_object *p = params_path(req, path);

        http_request_set_data(req, path, free_string);
        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "Stat", p, 0, on_stat_entry, NULL);
}

static int route_fs_stat(HttpRequest *req) {
        char *path;
        int r = rpc_path(req, "path", &path);

        if (r <= 0)
                return r;
        return stat_reply(req, path);
}

static int on_list_dir(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                       void *userdata) {
        _cleanup_json_ json_object *o = json_object_new_object(), *a = json_object_new_array();
        const char *base = http_request_get_data(req);
        json_object *l = get(parameters, "entries");

        if (error)
                return connect_varlink_error(req, error, parameters);
        if (!o || !a)
                return -ENOMEM;
        for (size_t i = 0; i < json_object_array_length(l); i++) {
                json_object *e = json_object_array_get_idx(l, i), *j;
                _cleanup_free_ char *full = NULL;

                if (asprintf(&full, "%s%s%s", base, base[strlen(base) - 1] == '/' ? "" : "/",
                             get_str(e, "path") ?: "") < 0)
                        return -ENOMEM;
                j = entry_json(e, full);
                if (!j || json_object_array_add(a, j) < 0)
                        return -ENOMEM;
        }
        if (json_add(o, "entries", TAKE_PTR(a)) < 0)
                return -ENOMEM;
        return http_request_reply_json(req, 200, TAKE_PTR(o));
}

static int route_fs_list(HttpRequest *req) {
        json_object *depth = get(http_request_body(req), "depth"), *p;
        char *path;
        int r = rpc_path(req, "path", &path);

        if (r <= 0)
                return r;
        http_request_set_data(req, path, free_string);
        p = params_path(req, path);
        if (!p || json_add(p, "depth", json_object_new_int64(depth ? MAX(json_object_get_int64(depth), 1) : 1)) < 0) {
                json_object_put(p);
                return -ENOMEM;
        }
        return http_backend_call(req, IFACE "ListFiles", p, 0, on_list_dir, NULL);
}

static int on_made_dir(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                       void *userdata) {
        if (error)
                return connect_varlink_error(req, error, parameters);
        return stat_reply(req, strdup(http_request_get_data(req)));
}

/* MakeDir: already_exists when it is there (the SDK's false), else made with its parents */
static int on_make_dir_stat(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                            void *userdata) {
        const char *code = http_connect_code(error, parameters);
        json_object *p;

        if (!error)
                return connect_error(req, "already_exists", "The directory exists already.");
        if (!streq(code, "not_found"))
                return connect_varlink_error(req, error, parameters);
        p = params_path(req, http_request_get_data(req));
        if (!p || json_add(p, "parents", json_object_new_boolean(true)) < 0) {
                json_object_put(p);
                return -ENOMEM;
        }
        return http_backend_call(req, IFACE "MakeDirectory", p, 0, on_made_dir, NULL);
}

static int route_fs_mkdir(HttpRequest *req) {
        char *path;
        int r = rpc_path(req, "path", &path);

        if (r <= 0)
                return r;
        http_request_set_data(req, path, free_string);
        return http_backend_call(req, IFACE "Stat", params_path(req, path), 0, on_make_dir_stat, NULL);
}

static int on_moved(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                    void *userdata) {
        if (error)
                return connect_varlink_error(req, error, parameters);
        return stat_reply(req, strdup(http_request_get_data(req)));
}

static int route_fs_move(HttpRequest *req) {
        _cleanup_free_ char *from = NULL;
        char *to;
        json_object *p;
        int r = rpc_path(req, "source", &from);

        if (r <= 0)
                return r;
        r = rpc_path(req, "destination", &to);
        if (r <= 0)
                return r;
        http_request_set_data(req, to, free_string);
        p = params_path(req, from);
        if (!p || json_add(p, "to", json_object_new_string(to)) < 0) {
                json_object_put(p);
                return -ENOMEM;
        }
        return http_backend_call(req, IFACE "Move", p, 0, on_moved, NULL);
}

static int route_fs_remove(HttpRequest *req) {
        _cleanup_free_ char *path = NULL;
        json_object *p;
        int r = rpc_path(req, "path", &path);

        if (r <= 0)
                return r;
        p = params_path(req, path);
        if (!p || json_add(p, "recursive", json_object_new_boolean(true)) < 0) {
                json_object_put(p);
                return -ENOMEM;
        }
        return http_backend_call(req, IFACE "Remove", p, 0, on_rpc_empty, NULL);
}

/* ---- filesystem.Filesystem/WatchDir: WatchDirectory's events as envd's stream ---- */

typedef struct Watch {
        char *dir;                       /* the watched directory, ours and absolute */
        bool ended;
} Watch;

static void watch_free(void *p) {
        Watch *w = p;

        if (!w)
                return;
        free(w->dir);
        free(w);
}

/* {"filesystem": {name, type}} for one of the agent's events; none for an overflow (envd
 * has no type for it) or a path not below the directory. */
static int watch_event(HttpRequest *req, Watch *w, json_object *e) {
        const char *type = http_e2b_watch_type(get_str(e, "event")), *path = get_str(e, "path");
        const char *name = path ? http_e2b_watch_name(path, w->dir) : NULL;
        _cleanup_json_ json_object *f = NULL, *m = NULL;

        if (!type || !name)
                return 0;
        f = json_object_new_object();
        m = json_object_new_object();
        if (!f || !m || json_add(f, "name", json_object_new_string(name)) < 0 ||
            json_add(f, "type", json_object_new_string(type)) < 0 || json_add(m, "filesystem", TAKE_PTR(f)) < 0)
                return -ENOMEM;
        return stream_message(req, 0, m);
}

static int on_watch(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                    void *userdata) {
        Watch *w = http_request_get_data(req);

        if (w->ended)
                return 0;
        if (error) {
                w->ended = true;
                stream_end(req, http_connect_code(error, parameters), error_message(error, parameters));
                return 0;
        }
        if (watch_event(req, w, get(parameters, "event")) < 0 ||
            http_request_stream_buffered(req) > HTTP_STREAM_BUFFER_MAX) {
                /* a client that does not read: its stream ends, and the watch with it */
                w->ended = true;
                http_request_stream_end(req, true);
                http_backend_cancel(req);
        } else if (!(flags & VARLINK_REPLY_CONTINUES)) {
                w->ended = true;
                stream_end(req, NULL, NULL);
        }
        return 0;
}

/* After Stat said the path is a directory (envd's checks, made before its start event):
 * the start, then the watch. The agent sets its inotify watches as the start is sent. */
static int on_watch_stat(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                         void *userdata) {
        Watch *w = http_request_get_data(req);
        _cleanup_json_ json_object *start = json_object_new_object(), *m = json_object_new_object();
        json_object *p;
        int r;

        if (error)
                return stream_fail(req, http_connect_code(error, parameters), error_message(error, parameters));
        if (!streq_ptr(get_str(get(parameters, "entry"), "type"), "dir"))
                return stream_fail(req, "invalid_argument", "The path is not a directory.");
        r = http_request_stream(req, 200, "application/connect+json", MHD_SIZE_UNKNOWN, NULL);
        if (r < 0)
                return r;
        p = params_path(req, w->dir);
        if (!start || !m || !p || json_add(m, "start", TAKE_PTR(start)) < 0 ||
            json_add(p, "recursive", json_object_new_boolean(!!userdata)) < 0 || stream_message(req, 0, m) < 0 ||
            http_backend_call(req, IFACE "WatchDirectory", TAKE_PTR(p), VARLINK_CALL_MORE, on_watch, NULL) < 0) {
                json_object_put(p);
                w->ended = true;
                http_request_stream_end(req, true);
        }
        return 0;
}

/* The request's path as an absolute directory of ours (the watch's). */
static int watch_dir(const char *path, char **ret) {
        _cleanup_free_ char *in = NULL;

        if (http_e2b_path_in(path, &in) < 0)
                return -ENOMEM;
        if (in[0] == '/')
                *ret = TAKE_PTR(in);
        else if (asprintf(ret, "%s/%s", E2B_WORKDIR, in) < 0)
                return -ENOMEM;
        return 0;
}

/* filesystem.Filesystem/WatchDir: {path, recursive}: {start}, then {filesystem} events
 * until the client goes. */
static int route_fs_watch(HttpRequest *req) {
        _cleanup_json_ json_object *m = NULL;
        const char *path;
        json_object *p;
        Watch *w;
        int r = stream_request(req, &m);

        if (r <= 0)
                return r;
        path = get_str(m, "path");
        if (!path || !*path)
                return stream_fail(req, "invalid_argument", "A path is needed.");
        w = calloc(1, sizeof(Watch));
        if (!w)
                return -ENOMEM;
        http_request_set_data(req, w, watch_free);
        if (watch_dir(path, &w->dir) < 0)
                return -ENOMEM;
        p = params_path(req, w->dir);
        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "Stat", p, 0, on_watch_stat,
                                 (void *) (uintptr_t) json_object_get_boolean(get(m, "recursive")));
}

/* ---- envd's polling watchers: CreateWatcher, GetWatcherEvents, RemoveWatcher ----
 * A watcher is a WatchDirectory call of the bridge's own (no request's), kept in a table by
 * a random id, owned by the key's tenant and the sandbox. Its events wait in a bounded
 * buffer until the next poll; one not polled for a while, or whose sandbox went, is freed. */

#define E2B_WATCHER_EVENTS_MAX 4096U
/* Each watcher is a WatchDirectory of sandboxd's, which takes FILE_WATCHES_MAX a sandbox:
 * past them, say so at CreateWatcher rather than hand out an id whose watch sandboxd then
 * refuses (Busy), its first poll not_found. */
#define E2B_WATCHERS_PER_SANDBOX_MAX FILE_WATCHES_MAX
#define E2B_WATCHER_IDLE_USEC (10U * 60U * 1000000U)

typedef struct Watcher Watcher;
struct Watcher {
        char id[33];
        char *tenant, *sandbox, *dir;
        json_object *events;             /* FilesystemEvents not yet polled */
        bool overflow;                   /* events were dropped since the last poll */
        HttpBackendCall *call;
        sd_event_source *expiry;
        Watcher *prev, *next;
};

static Watcher *watchers = NULL;

static void watcher_free(Watcher *w) {
        if (!w)
                return;
        LIST_REMOVE(watchers, w);
        if (w->call) {
                HttpBackendCall *c = TAKE_PTR(w->call);
                http_backend_call_cancel(c);
        }
        sd_event_source_disable_unref(w->expiry);
        json_object_put(w->events);
        free(w->tenant);
        free(w->sandbox);
        free(w->dir);
        free(w);
}

void http_e2b_watchers_done(void) {
        while (watchers)
                watcher_free(watchers);
}

static int on_watcher_expiry(sd_event_source *s, uint64_t usec, void *userdata) {
        watcher_free(userdata);
        return 0;
}

static void watcher_push(Watcher *w, const char *name, const char *type) {
        _cleanup_json_ json_object *f = NULL;

        if (json_object_array_length(w->events) >= E2B_WATCHER_EVENTS_MAX) {
                w->overflow = true;
                return;
        }
        f = json_object_new_object();
        if (!f || json_add(f, "name", json_object_new_string(name)) < 0 ||
            json_add(f, "type", json_object_new_string(type)) < 0 ||
            json_object_array_add(w->events, f) < 0) {
                w->overflow = true;
                return;
        }
        TAKE_PTR(f);
}

static int on_watcher_event(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                            void *userdata) {
        Watcher *w = userdata;
        json_object *e = get(parameters, "event");
        const char *ev = get_str(e, "event"), *path = get_str(e, "path");
        const char *type = http_e2b_watch_type(ev), *name = path ? http_e2b_watch_name(path, w->dir) : NULL;

        if (error || !(flags & VARLINK_REPLY_CONTINUES)) {
                /* The watch ended (the sandbox went, or sandboxd): so does the watcher. The
                 * backend frees the call after this callback. */
                w->call = NULL;
                watcher_free(w);
                return 0;
        }
        if (streq_ptr(ev, "overflow"))
                w->overflow = true;
        else if (type && name)
                watcher_push(w, name, type);
        return 0;
}

static Watcher *watcher_find(HttpRequest *req) {
        json_object *m = http_request_body(req);
        const char *id = get_str(m, "watcherId") ?: get_str(m, "watcher_id");
        const char *tenant = strempty(http_request_backend_tenant(req));

        for (Watcher *w = watchers; w; w = w->next)
                if (id && streq(w->id, id) && streq(w->tenant, tenant) && streq(w->sandbox, sandbox_of(req)))
                        return w;
        return NULL;
}

static int on_watcher_stat(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                           void *userdata) {
        HttpServer *s = http_request_server(req);
        const char *tenant = strempty(http_request_backend_tenant(req));
        _cleanup_json_ json_object *reply = NULL;
        char *dir = http_request_get_data(req);
        uint8_t random[16];
        unsigned n = 0;
        json_object *p;
        Watcher *w;
        int r;

        if (error)
                return connect_varlink_error(req, error, parameters);
        if (!streq_ptr(get_str(get(parameters, "entry"), "type"), "dir"))
                return connect_error(req, "invalid_argument", "The path is not a directory.");
        for (Watcher *i = watchers; i; i = i->next)
                if (streq(i->tenant, tenant) && streq(i->sandbox, sandbox_of(req)))
                        n++;
        if (n >= E2B_WATCHERS_PER_SANDBOX_MAX)
                return connect_error(req, "resource_exhausted", "Too many watchers on this sandbox; remove one.");
        if (getrandom(random, sizeof(random), 0) != sizeof(random))
                return -EIO;
        w = calloc(1, sizeof(Watcher));
        if (!w)
                return -ENOMEM;
        LIST_PREPEND(watchers, w);
        for (size_t i = 0; i < sizeof(random); i++)
                sprintf(w->id + 2 * i, "%02x", random[i]);
        w->tenant = strdup(tenant);
        w->sandbox = strdup(sandbox_of(req));
        w->dir = strdup(dir);
        w->events = json_object_new_array();
        p = params_path(req, dir);
        reply = json_object_new_object();
        if (!w->tenant || !w->sandbox || !w->dir || !w->events || !reply ||
            !p || json_add(p, "recursive", json_object_new_boolean(!!userdata)) < 0 ||
            json_add(reply, "watcherId", json_object_new_string(w->id)) < 0) {
                json_object_put(p);
                watcher_free(w);
                return -ENOMEM;
        }
        r = sd_event_add_time_relative(http_server_event(s), &w->expiry, CLOCK_MONOTONIC, E2B_WATCHER_IDLE_USEC, 0,
                                       on_watcher_expiry, w);
        if (r >= 0)
                r = http_backend_call_detached(http_server_backend(s), tenant, IFACE "WatchDirectory", p,
                                               VARLINK_CALL_MORE, on_watcher_event, w, &w->call);
        if (r < 0) {
                watcher_free(w);
                return connect_error(req, "unavailable", "sandboxd does not answer.");
        }
        return http_request_reply_json(req, 200, TAKE_PTR(reply));
}

/* filesystem.Filesystem/CreateWatcher: {path, recursive}: {watcherId} */
static int route_fs_watcher_create(HttpRequest *req) {
        json_object *m = http_request_body(req), *p;
        const char *path = get_str(m, "path");
        char *dir = NULL;

        if (!path || !*path)
                return connect_error(req, "invalid_argument", "A path is needed.");
        if (watch_dir(path, &dir) < 0)
                return -ENOMEM;
        http_request_set_data(req, dir, free_string);
        p = params_path(req, dir);
        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "Stat", p, 0, on_watcher_stat,
                                 (void *) (uintptr_t) json_object_get_boolean(get(m, "recursive")));
}

/* filesystem.Filesystem/GetWatcherEvents: {watcherId}: {events} since the last call. Events
 * dropped beyond the buffer fail the call (resource_exhausted) once, after which the
 * watcher goes on with what comes next. */
static int route_fs_watcher_events(HttpRequest *req) {
        _cleanup_json_ json_object *reply = json_object_new_object(), *events = json_object_new_array();
        Watcher *w = watcher_find(req);

        if (!w)
                return connect_error(req, "not_found", "No such watcher.");
        if (!reply || !events)
                return -ENOMEM;
        (void) sd_event_source_set_time_relative(w->expiry, E2B_WATCHER_IDLE_USEC);
        if (w->overflow) {
                w->overflow = false;
                json_object_put(w->events);
                w->events = TAKE_PTR(events);
                return connect_error(req, "resource_exhausted",
                                     "Events were lost: more came between two polls than the watcher keeps.");
        }
        if (json_add(reply, "events", w->events) < 0)
                return -ENOMEM;
        w->events = TAKE_PTR(events);
        return http_request_reply_json(req, 200, TAKE_PTR(reply));
}

/* filesystem.Filesystem/RemoveWatcher: {watcherId}: {} */
static int route_fs_watcher_remove(HttpRequest *req) {
        Watcher *w = watcher_find(req);

        if (!w)
                return connect_error(req, "not_found", "No such watcher.");
        watcher_free(w);
        return http_request_reply_json(req, 200, json_object_new_object());
}

/* GET /health: 204 while the sandbox runs, else 502 (what the SDK reads as gone) */
static int on_health(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                     void *userdata) {
        const char *state = get_str(get(parameters, "sandbox"), "state");

        if (error || !state || !streq(state, "running"))
                return http_request_reply_text(req, 502, "text/plain", "The sandbox is not running.\n");
        return http_request_reply_text(req, 204, NULL, "");
}

static int route_health(HttpRequest *req) {
        json_object *p = params_id(sandbox_of(req));

        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "GetSandbox", p, 0, on_health, NULL);
}

/* ---- /files: download, upload (multipart/form-data or application/octet-stream) ---- */

typedef struct Transfer {
        char *path;                      /* ours: the query's */
        char *boundary;                  /* multipart: "--" + the boundary */
        char *buf;                       /* what is not written yet */
        size_t n, allocated;
        bool in_flight, ended;
        bool written;                    /* the current file had a WriteFile */
        uint64_t offset;                 /* of the current file */
        /* multipart: 0 before the first boundary, 1 in a part's headers, 2 in its data,
         * 3 after the last boundary */
        unsigned state;
        char *part_path;                 /* ours: the part's file name */
        json_object *files;              /* the reply: [{name, type, path}] */
} Transfer;

static void transfer_free(void *p) {
        Transfer *t = p;

        if (!t)
                return;
        free(t->path);
        free(t->boundary);
        free(t->buf);
        free(t->part_path);
        json_object_put(t->files);
        free(t);
}

static int files_error(HttpRequest *req, const char *error, json_object *parameters) {
        unsigned status = http_status_from_varlink_error(error, parameters);
        _cleanup_json_ json_object *o = json_object_new_object();

        /* envd's: 404 missing, 400 a bad path, 507 no room; {"code": STATUS, "message"} */
        if (status == 413)
                status = 507;
        if (!o || json_add(o, "code", json_object_new_int((int) status)) < 0 ||
            json_add(o, "message", json_object_new_string(error_message(error, parameters))) < 0)
                return -ENOMEM;
        return http_request_reply_json(req, status, TAKE_PTR(o));
}

static int transfer_new(HttpRequest *req, Transfer **ret) {
        Transfer *t = calloc(1, sizeof(Transfer));
        const char *path = http_request_query(req, "path");

        if (!t)
                return -ENOMEM;
        http_request_set_data(req, t, transfer_free);
        if (path && *path && http_e2b_path_in(path, &t->path) < 0)
                return -ENOMEM;
        t->files = json_object_new_array();
        if (!t->files)
                return -ENOMEM;
        *ret = t;
        return 0;
}

/* GET /files?path=: the file's bytes */
static int route_files_get(HttpRequest *req) {
        _cleanup_free_ char *path = NULL;
        const char *q = http_request_query(req, "path");

        if (q && *q && http_e2b_path_in(q, &path) < 0)
                return -ENOMEM;
        return http_file_download(req, path);
}

static const char *upload_path(Transfer *t) {
        return t->part_path ?: t->path;
}

/* The current file is done: the reply lists it. */
static int upload_file_done(Transfer *t) {
        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_free_ char *out = NULL;
        const char *slash;

        if (!o || http_e2b_path_out(upload_path(t), &out) < 0)
                return -ENOMEM;
        slash = strrchr(out, '/');
        if (json_add(o, "name", json_object_new_string(slash ? slash + 1 : out)) < 0 ||
            json_add(o, "type", json_object_new_string("file")) < 0 ||
            json_add(o, "path", json_object_new_string(out)) < 0 ||
            json_object_array_add(t->files, TAKE_PTR(o)) < 0)
                return -ENOMEM;
        return 0;
}

static int upload_continue(HttpRequest *req, Transfer *t);

static int on_upload_written(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                             void *userdata) {
        Transfer *t = http_request_get_data(req);
        size_t n = (size_t) (uintptr_t) userdata;
        int r;

        t->in_flight = false;
        if (error)
                return files_error(req, error, parameters);
        memmove(t->buf, t->buf + n, t->n - n);
        t->n -= n;
        t->offset += n;
        t->written = true;
        r = upload_continue(req, t);
        if (r < 0)
                return http_request_reply_errno(req, r);
        return 0;
}

/* WriteFile of the buffer's first n bytes: the current file's next part (the first
 * replaces it, parents made). */
static int upload_write(HttpRequest *req, Transfer *t, size_t n) {
        _cleanup_json_ json_object *p = NULL, *options = json_object_new_object();

        if (!upload_path(t))
                return e2b_error(req, 400, "The upload needs a path (the query's, or the part's file name).");
        p = params_path(req, upload_path(t));
        if (!p || !options ||
            json_add(p, "data", json_object_new_base64((const uint8_t *) t->buf, n)) < 0 ||
            json_add(options, "Append", json_object_new_boolean(t->written)) < 0 ||
            json_add(options, "CreateParents", json_object_new_boolean(true)) < 0 ||
            json_add(p, "options", TAKE_PTR(options)) < 0)
                return -ENOMEM;
        t->in_flight = true;
        return http_backend_call(req, IFACE "WriteFile", TAKE_PTR(p), 0, on_upload_written, (void *) (uintptr_t) n);
}

static int buf_append(Transfer *t, const char *d, size_t n) {
        if (n == 0)
                return 0;
        if (t->n + n > t->allocated) {
                size_t a = MAX(t->n + n, t->allocated * 2);
                char *b = realloc(t->buf, a);
                if (!b)
                        return -ENOMEM;
                t->buf = b;
                t->allocated = a;
        }
        memcpy(t->buf + t->n, d, n);
        t->n += n;
        return 0;
}

static void buf_drop(Transfer *t, size_t n) {
        memmove(t->buf, t->buf + n, t->n - n);
        t->n -= n;
}

/* Parses what the buffer has of a multipart body up to the next data to write: 1 and
 * *ret_ready bytes of the current part's data at the buffer's start (*ret_end: they end
 * the part), or 0: more of the body is needed (or it is over: state 3). */
static int multipart_next(Transfer *t, size_t *ret_ready, bool *ret_end) {
        size_t bl = strlen(t->boundary);

        *ret_ready = 0;
        *ret_end = false;
        for (;;) {
                if (t->state == 0 || t->state == 1) {
                        /* a boundary line, then a part's headers up to an empty line */
                        char *h, *end;

                        if (t->state == 0) {
                                char *bd = memmem(t->buf ?: "", t->n, t->boundary, bl);
                                if (!bd || (size_t) (bd - t->buf) + bl + 2 > t->n)
                                        return 0;
                                if (bd[bl] == '-' && bd[bl + 1] == '-') {
                                        t->state = 3;
                                        t->n = 0;
                                        return 0;
                                }
                                buf_drop(t, (size_t) (bd - t->buf) + bl);
                                t->state = 1;
                        }
                        end = memmem(t->buf ?: "", t->n, "\r\n\r\n", 4);
                        if (!end)
                                return 0;
                        *end = 0;
                        free(t->part_path);
                        t->part_path = NULL;
                        h = strcasestr(t->buf, "filename=\"");
                        if (h) {
                                _cleanup_free_ char *name = NULL;
                                h += 10;
                                name = strndup(h, strcspn(h, "\""));
                                if (!name || http_e2b_path_in(name, &t->part_path) < 0)
                                        return -ENOMEM;
                        }
                        buf_drop(t, (size_t) (end + 4 - t->buf));
                        t->offset = 0;
                        t->written = false;
                        t->state = 2;
                        continue;
                }
                if (t->state == 2) {
                        /* the data, up to CRLF and the boundary */
                        _cleanup_free_ char *delim = NULL;
                        char *at;

                        if (asprintf(&delim, "\r\n%s", t->boundary) < 0)
                                return -ENOMEM;
                        at = memmem(t->buf ?: "", t->n, delim, bl + 2);
                        if (!at) {
                                /* all but what may begin the delimiter */
                                *ret_ready = t->n > bl + 2 ? t->n - (bl + 2) : 0;
                                return *ret_ready > 0;
                        }
                        *ret_ready = (size_t) (at - t->buf);
                        *ret_end = true;
                        return 1;
                }
                return 0;
        }
}

/* What can be done with what the buffer holds: a write (in flight then), or a reply once
 * the body has ended, or nothing (more body is needed). */
static int upload_continue(HttpRequest *req, Transfer *t) {
        int r;

        if (!t->boundary) {
                if (t->n >= HTTP_FILE_CHUNK)
                        return upload_write(req, t, HTTP_FILE_CHUNK);
                if (!t->ended) {
                        http_request_resume(req);
                        return 0;
                }
                if (t->n > 0 || !t->written)
                        return upload_write(req, t, t->n);
                r = upload_file_done(t);
                if (r < 0)
                        return r;
                /* a single file: [EntryInfo] as envd answers it */
                return http_request_reply_json(req, 200, json_object_get(t->files));
        }
        for (;;) {
                size_t ready;
                bool end;

                r = multipart_next(t, &ready, &end);
                if (r < 0)
                        return r;
                if (r == 0)
                        break;
                if (ready >= HTTP_FILE_CHUNK)
                        return upload_write(req, t, HTTP_FILE_CHUNK);
                if (!end)
                        break;  /* less than a part: wait for more */
                if (ready > 0 || !t->written)
                        return upload_write(req, t, ready);
                /* the part's end: CRLF before the boundary, then the next part or the end */
                r = upload_file_done(t);
                if (r < 0)
                        return r;
                buf_drop(t, 2);
                t->state = 0;
        }
        if (!t->ended) {
                http_request_resume(req);
                return 0;
        }
        if (t->state != 3)
                return e2b_error(req, 400, "The multipart body ended early.");
        return http_request_reply_json(req, 200, json_object_get(t->files));
}

static int upload_begin(HttpRequest *req, Transfer **ret) {
        Transfer *t = http_request_get_data(req);
        const char *ct, *b;
        int r;

        if (t) {
                *ret = t;
                return 1;
        }
        r = transfer_new(req, &t);
        if (r < 0)
                return r;
        ct = http_request_header(req, "Content-Type") ?: "";
        if (strncasecmp(ct, "multipart/form-data", 19) == 0) {
                b = strcasestr(ct, "boundary=");
                if (!b)
                        return e2b_error(req, 400, "A multipart body needs its boundary."), 0;
                b += 9;
                b += *b == '"';
                if (asprintf(&t->boundary, "--%.*s", (int) strcspn(b, "\";, "), b) < 0)
                        return -ENOMEM;
        }
        *ret = t;
        return 1;
}

/* POST /files's body as it comes: buffered, and written in parts while it comes (the
 * request waits while a part is written). */
static int upload_data(HttpRequest *req, const char *data, size_t *size) {
        Transfer *t;
        int r = upload_begin(req, &t);

        if (r <= 0) {
                *size = 0;
                return r;
        }
        if (t->in_flight) {
                http_request_suspend(req);
                return 0;
        }
        r = buf_append(t, data, *size);
        *size = 0;
        if (r < 0)
                return r;
        r = upload_continue(req, t);
        if (r < 0)
                return r;
        if (t->in_flight)
                http_request_suspend(req);
        return 0;
}

/* POST /files?path=: application/octet-stream (one file at path) or multipart/form-data
 * (a part per file, its file name the path) */
static int route_files_post(HttpRequest *req) {
        Transfer *t;
        int r = upload_begin(req, &t);

        if (r <= 0)
                return r;
        t->ended = true;
        if (t->in_flight)
                return 0;       /* on_upload_written goes on */
        return upload_continue(req, t);
}

/* ---- the code interpreter (port 49999): /execute, /contexts onto code contexts ---- */

/* Its errors: 404 (the SDK's NotFoundError) for a context that is not there, 502 (its
 * TimeoutError: the sandbox is gone) for a sandbox that is not, else the status. */
static int jupyter_error(HttpRequest *req, const char *error, json_object *parameters) {
        const char *code = http_connect_code(error, parameters);
        unsigned status = streq(code, "unavailable") ? 502 : http_status_from_varlink_error(error, parameters);

        return http_request_reply_text(req, status, "text/plain", error_message(error, parameters));
}

static const char *language_in(const char *e2b) {
        if (e2b && (streq(e2b, "js") || streq(e2b, "javascript") || streq(e2b, "ts") || streq(e2b, "typescript")))
                return "javascript";
        return e2b;
}

/* E2B's Context: {id, language, cwd} */
static json_object *context_json(json_object *c) {
        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_free_ char *cwd = NULL;
        const char *language = get_str(c, "language") ?: "python";

        if (!o || http_e2b_path_out(get_str(c, "workingDirectory") ?: E2B_WORKDIR, &cwd) < 0 ||
            json_add(o, "id", json_object_get(get(c, "id"))) < 0 ||
            json_add(o, "language", json_object_new_string(language)) < 0 ||
            json_add(o, "cwd", json_object_new_string(cwd)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* A line of /execute's NDJSON */
static int ndjson(HttpRequest *req, json_object *o) {
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

        if (!s)
                return -ENOMEM;
        return http_request_stream_printf(req, "%s\n", s);
}

/* One of RunCode's events as E2B's: stdout, stderr {text}; result {text, html, png, …,
 * is_main_result}; error {name, value, traceback (one string)}. */
static json_object *execute_event(json_object *e) {
        static const char *const mimes[][2] = {
                { "text/plain", "text" },           { "text/html", "html" },
                { "text/markdown", "markdown" },    { "image/svg+xml", "svg" },
                { "image/png", "png" },             { "image/jpeg", "jpeg" },
                { "application/pdf", "pdf" },       { "text/latex", "latex" },
                { "application/json", "json" },     { "application/javascript", "javascript" },
        };
        _cleanup_json_ json_object *o = json_object_new_object();
        const char *type = get_str(e, "type");

        if (!o || !type || json_add(o, "type", json_object_new_string(type)) < 0)
                return NULL;
        if (streq(type, "stdout") || streq(type, "stderr")) {
                if (json_add(o, "text", json_object_get(get(e, "text")) ?: json_object_new_string("")) < 0)
                        return NULL;
        } else if (streq(type, "result")) {
                json_object *data = get(e, "data");
                for (size_t i = 0; i < ELEMENTSOF(mimes); i++) {
                        json_object *v = get(data, mimes[i][0]);
                        if (v && json_add(o, mimes[i][1], json_object_get(v)) < 0)
                                return NULL;
                }
                if (json_add(o, "is_main_result",
                             json_object_new_boolean(json_object_get_boolean(get(e, "isMainResult")))) < 0)
                        return NULL;
        } else if (streq(type, "error")) {
                json_object *tb = get(e, "traceback");
                _cleanup_free_ char *joined = NULL;
                size_t n = 0;
                FILE *f;

                if (json_object_is_type(tb, json_type_array)) {
                        f = open_memstream(&joined, &n);
                        if (!f)
                                return NULL;
                        for (size_t i = 0; i < json_object_array_length(tb); i++)
                                fprintf(f, "%s%s", i ? "\n" : "", json_object_get_string(json_object_array_get_idx(tb, i)));
                        if (fclose(f) != 0)
                                return NULL;
                }
                if (json_add(o, "name", json_object_get(get(e, "name")) ?: json_object_new_string("")) < 0 ||
                    json_add(o, "value", json_object_get(get(e, "value")) ?: json_object_new_string("")) < 0 ||
                    json_add(o, "traceback", joined ? json_object_new_string(joined)
                                                    : json_object_get(tb) ?: json_object_new_string("")) < 0)
                        return NULL;
        } else
                return NULL;    /* an event E2B has no word for */
        return TAKE_PTR(o);
}

static int on_run_code(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                       void *userdata) {
        bool *streaming = http_request_get_data(req);
        json_object *e = get(parameters, "event"), *result = get(parameters, "result");
        int r;

        if (!*streaming) {
                if (error)
                        return jupyter_error(req, error, parameters);
                r = http_request_stream(req, 200, "application/x-ndjson", MHD_SIZE_UNKNOWN, NULL);
                if (r < 0)
                        return r;
                *streaming = true;
        }
        if (error) {
                /* after the stream began: as an error line (the SDK's Execution.error) */
                _cleanup_json_ json_object *o = json_object_new_object();
                if (o && json_add(o, "type", json_object_new_string("error")) >= 0 &&
                    json_add(o, "name", json_object_new_string(http_connect_code(error, parameters))) >= 0 &&
                    json_add(o, "value", json_object_new_string(error_message(error, parameters))) >= 0 &&
                    json_add(o, "traceback", json_object_new_string("")) >= 0)
                        (void) ndjson(req, o);
                http_request_stream_end(req, false);
                return 0;
        }
        if (e) {
                _cleanup_json_ json_object *o = execute_event(e);
                if (o && ndjson(req, o) < 0)
                        goto fail;
        }
        if (http_request_stream_buffered(req) > HTTP_STREAM_BUFFER_MAX)
                goto fail;
        if (!(flags & VARLINK_REPLY_CONTINUES)) {
                _cleanup_json_ json_object *o = json_object_new_object();
                if (!o || json_add(o, "type", json_object_new_string("number_of_executions")) < 0 ||
                    json_add(o, "execution_count", json_object_get(get(result, "executionCount")) ?:
                                                   json_object_new_int(0)) < 0 ||
                    ndjson(req, o) < 0)
                        goto fail;
                http_request_stream_end(req, false);
        }
        return 0;
fail:
        http_request_stream_end(req, true);
        http_backend_cancel(req);
        return 0;
}

/* POST /execute {code, context_id, language, env_vars} */
static int route_execute(HttpRequest *req) {
        json_object *body = http_request_body(req), *envs = get(body, "env_vars");
        _cleanup_json_ json_object *p = params_id(sandbox_of(req)), *options = json_object_new_object(),
                                   *env = json_object_new_array();
        const char *code = get_str(body, "code"), *context = get_str(body, "context_id");
        const char *language = language_in(get_str(body, "language"));
        bool *streaming = calloc(1, sizeof(bool));

        if (!streaming)
                return -ENOMEM;
        http_request_set_data(req, streaming, free);
        if (!p || !options || !env)
                return -ENOMEM;
        if (!code)
                return http_request_reply_text(req, 400, "text/plain", "The body needs 'code'.");
        if (envs && json_object_is_type(envs, json_type_object)) {
                json_object_object_foreach(envs, k, v) {
                        _cleanup_free_ char *kv = NULL;
                        if (asprintf(&kv, "%s=%s", k, json_object_get_string(v)) < 0 ||
                            json_object_array_add(env, json_object_new_string(kv)) < 0)
                                return -ENOMEM;
                }
        }
        if (json_object_array_length(env) > 0 && json_add(options, "Environment", TAKE_PTR(env)) < 0)
                return -ENOMEM;
        if (json_add(p, "code", json_object_new_string(code)) < 0 ||
            (context && json_add(p, "context", json_object_new_string(context)) < 0) ||
            (!context && language && json_add(p, "language", json_object_new_string(language)) < 0) ||
            json_add(p, "options", TAKE_PTR(options)) < 0)
                return -ENOMEM;
        return http_backend_call(req, IFACE "RunCode", TAKE_PTR(p), VARLINK_CALL_MORE, on_run_code, NULL);
}

static int on_context(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                      void *userdata) {
        json_object *o;

        if (error)
                return jupyter_error(req, error, parameters);
        o = context_json(get(parameters, "context"));
        if (!o)
                return -ENOMEM;
        return http_request_reply_json(req, 200, o);
}

/* POST /contexts {language, cwd} */
static int route_context_create(HttpRequest *req) {
        json_object *body = http_request_body(req);
        _cleanup_json_ json_object *p = params_id(sandbox_of(req)), *options = json_object_new_object();
        const char *language = language_in(get_str(body, "language")), *cwd = get_str(body, "cwd");

        if (!p || !options)
                return -ENOMEM;
        if (cwd && *cwd) {
                _cleanup_free_ char *in = NULL;
                if (http_e2b_path_in(cwd, &in) < 0 ||
                    json_add(options, "WorkingDirectory", json_object_new_string(in)) < 0)
                        return -ENOMEM;
        }
        if ((language && json_add(p, "language", json_object_new_string(language)) < 0) ||
            json_add(p, "options", TAKE_PTR(options)) < 0)
                return -ENOMEM;
        return http_backend_call(req, IFACE "CreateContext", TAKE_PTR(p), 0, on_context, NULL);
}

static int on_contexts(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                       void *userdata) {
        _cleanup_json_ json_object *a = json_object_new_array();
        json_object *l = get(parameters, "contexts");

        if (error)
                return jupyter_error(req, error, parameters);
        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < json_object_array_length(l); i++) {
                json_object *c = context_json(json_object_array_get_idx(l, i));
                if (!c || json_object_array_add(a, c) < 0)
                        return -ENOMEM;
        }
        return http_request_reply_json(req, 200, TAKE_PTR(a));
}

static int route_contexts_list(HttpRequest *req) {
        json_object *p = params_id(sandbox_of(req));

        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "ListContexts", p, 0, on_contexts, NULL);
}

static json_object *params_context(HttpRequest *req) {
        json_object *p = params_id(sandbox_of(req));

        if (p && json_add(p, "context", json_object_new_string(http_request_param(req, 1))) < 0)
                return json_object_put(p), NULL;
        return p;
}

static int on_context_done(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                           void *userdata) {
        if (error)
                return jupyter_error(req, error, parameters);
        return http_request_reply_text(req, 204, NULL, "");
}

static int route_context_delete(HttpRequest *req) {
        json_object *p = params_context(req);

        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "RemoveContext", p, 0, on_context_done, NULL);
}

static int route_context_restart(HttpRequest *req) {
        json_object *p = params_context(req);

        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "RestartContext", p, 0, on_context_done, NULL);
}

/* ---- any other port: the port proxy (http-ports.c, docs/PORTS.md) ---- */

/* The sandbox and port a sandbox-plane request is for: E2b-Sandbox-Id and
 * E2b-Sandbox-Port, as the SDKs send them; else a Host of getHost()'s form, PORT-ID.DOMAIN.
 * false: neither. */
static bool sandbox_target(HttpRequest *req, char **ret_id, uint64_t *ret_port) {
        const char *id = http_request_header(req, "E2b-Sandbox-Id");
        const char *port = http_request_header(req, "E2b-Sandbox-Port");
        const char *host = http_request_header(req, "Host"), *dash, *dot;
        _cleanup_free_ char *digits = NULL;

        if (id && *id) {
                *ret_port = 0;
                if (port)
                        (void) parse_uint64(port, ret_port);
                *ret_id = strdup(id);
                return !!*ret_id;
        }
        /* PORT-ID.…: digits, a dash, a sandbox id (letters and digits), a dot */
        if (!host || !(dash = strchr(host, '-')) || !(dot = strchr(dash, '.')) || dot == dash + 1 ||
            strspn(host, "0123456789") != (size_t) (dash - host) || dash == host ||
            strspn(dash + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") !=
                    (size_t) (dot - dash - 1))
                return false;
        digits = strndup(host, (size_t) (dash - host));
        *ret_id = strndup(dash + 1, (size_t) (dot - dash - 1));
        if (!digits || !*ret_id || parse_uint64(digits, ret_port) < 0) {
                *ret_id = mfree(*ret_id);
                return false;
        }
        return true;
}

static int route_port(HttpRequest *req) {
        const char *port = http_request_header(req, "E2b-Sandbox-Port");
        _cleanup_free_ char *id = NULL;
        char buf[24];
        uint64_t p;

        if (!port || !http_request_header(req, "E2b-Sandbox-Id")) {
                if (!sandbox_target(req, &id, &p))
                        return -EINVAL;
                snprintf(buf, sizeof(buf), "%" PRIu64, p);
                port = buf;
        }
        return http_port_proxy(req, sandbox_of(req), port, http_request_url(req));
}

/* ---- the tables ---- */

const HttpRoute http_e2b_api_routes[] = {
        { "POST",   "/sandboxes",                     HTTP_ROUTE_JSON_BODY, route_create },
        { "POST",   "/v2/sandboxes",                  HTTP_ROUTE_JSON_BODY, route_create },
        { "GET",    "/sandboxes",                     0, route_list },
        { "GET",    "/v2/sandboxes",                  0, route_list },
        { "GET",    "/sandboxes/{}",                  0, route_get },
        { "DELETE", "/sandboxes/{}",                  0, route_kill },
        { "POST",   "/sandboxes/{}/timeout",          HTTP_ROUTE_JSON_BODY, route_timeout },
        { "POST",   "/sandboxes/{}/pause",            HTTP_ROUTE_JSON_BODY, route_pause },
        { "POST",   "/sandboxes/{}/resume",           HTTP_ROUTE_JSON_BODY, route_connect },
        { "POST",   "/sandboxes/{}/connect",          HTTP_ROUTE_JSON_BODY, route_connect },
        { "POST",   "/v2/sandboxes/{}/connect",       HTTP_ROUTE_JSON_BODY, route_connect },
        { "GET",    "/sandboxes/{}/metrics",          0, route_metrics },
        { "POST",   "/sandboxes/{}/snapshots",        HTTP_ROUTE_JSON_BODY, route_snapshot },
        { "GET",    "/snapshots",                     0, route_snapshots },
        { "DELETE", "/templates/{}",                  0, route_snapshot_delete },
        { "POST",   "/sandboxes/{}/fork",             HTTP_ROUTE_JSON_BODY, route_fork },
};
const size_t http_e2b_n_api_routes = ELEMENTSOF(http_e2b_api_routes);

const HttpRoute http_e2b_envd_routes[] = {
        { "GET",    "/health",                             0, route_health },
        { "POST",   "/process.Process/Start",              HTTP_ROUTE_RAW_BODY, route_process_start },
        { "POST",   "/process.Process/Connect",            HTTP_ROUTE_RAW_BODY, route_process_connect },
        { "POST",   "/process.Process/List",               HTTP_ROUTE_JSON_BODY, route_process_list },
        { "POST",   "/process.Process/SendSignal",         HTTP_ROUTE_JSON_BODY, route_process_signal },
        { "POST",   "/process.Process/SendInput",          HTTP_ROUTE_JSON_BODY, route_process_input },
        { "POST",   "/process.Process/CloseStdin",         HTTP_ROUTE_JSON_BODY, route_process_close_stdin },
        { "POST",   "/process.Process/Update",             HTTP_ROUTE_JSON_BODY, route_process_update },
        { "POST",   "/filesystem.Filesystem/Stat",         HTTP_ROUTE_JSON_BODY, route_fs_stat },
        { "POST",   "/filesystem.Filesystem/ListDir",      HTTP_ROUTE_JSON_BODY, route_fs_list },
        { "POST",   "/filesystem.Filesystem/MakeDir",      HTTP_ROUTE_JSON_BODY, route_fs_mkdir },
        { "POST",   "/filesystem.Filesystem/Move",         HTTP_ROUTE_JSON_BODY, route_fs_move },
        { "POST",   "/filesystem.Filesystem/Remove",       HTTP_ROUTE_JSON_BODY, route_fs_remove },
        { "POST",   "/filesystem.Filesystem/WatchDir",     HTTP_ROUTE_RAW_BODY, route_fs_watch },
        { "POST",   "/filesystem.Filesystem/CreateWatcher", HTTP_ROUTE_JSON_BODY, route_fs_watcher_create },
        { "POST",   "/filesystem.Filesystem/GetWatcherEvents", HTTP_ROUTE_JSON_BODY, route_fs_watcher_events },
        { "POST",   "/filesystem.Filesystem/RemoveWatcher", HTTP_ROUTE_JSON_BODY, route_fs_watcher_remove },
        { "GET",    "/files",                              0, route_files_get },
        { "POST",   "/files",                              HTTP_ROUTE_UPLOAD, route_files_post, upload_data },
};
const size_t http_e2b_n_envd_routes = ELEMENTSOF(http_e2b_envd_routes);

const HttpRoute http_e2b_jupyter_routes[] = {
        { "GET",    "/health",                             0, route_health },
        { "POST",   "/execute",                            HTTP_ROUTE_JSON_BODY, route_execute },
        { "POST",   "/contexts",                           HTTP_ROUTE_JSON_BODY, route_context_create },
        { "GET",    "/contexts",                           0, route_contexts_list },
        { "DELETE", "/contexts/{}",                        0, route_context_delete },
        { "POST",   "/contexts/{}/restart",                HTTP_ROUTE_JSON_BODY, route_context_restart },
};
const size_t http_e2b_n_jupyter_routes = ELEMENTSOF(http_e2b_jupyter_routes);

static const HttpRoute http_e2b_port_routes[] = {
        { "GET",     "/{...}",                             HTTP_ROUTE_RAW_BODY, route_port },
        { "HEAD",    "/{...}",                             HTTP_ROUTE_RAW_BODY, route_port },
        { "POST",    "/{...}",                             HTTP_ROUTE_RAW_BODY, route_port },
        { "PUT",     "/{...}",                             HTTP_ROUTE_RAW_BODY, route_port },
        { "PATCH",   "/{...}",                             HTTP_ROUTE_RAW_BODY, route_port },
        { "DELETE",  "/{...}",                             HTTP_ROUTE_RAW_BODY, route_port },
        { "OPTIONS", "/{...}",                             HTTP_ROUTE_RAW_BODY, route_port },
};
static const size_t http_e2b_n_port_routes = ELEMENTSOF(http_e2b_port_routes);

size_t http_routes_select(HttpRequest *req, HttpRouteTable tables[static 2], const char **ret_first) {
        _cleanup_free_ char *id = NULL;
        uint64_t port = 0;

        *ret_first = NULL;
        if (!sandbox_target(req, &id, &port)) {
                tables[0] = (HttpRouteTable) { http_routes, http_n_routes };
                tables[1] = (HttpRouteTable) { http_e2b_api_routes, http_e2b_n_api_routes };
                return 2;
        }
        *ret_first = http_request_header(req, "E2b-Sandbox-Id");
        if (!*ret_first || !**ret_first) {
                /* a Host of getHost()'s form: always the port proxy (route_port() does
                 * not look at the request's data, where the id waits to be copied as the
                 * route's first parameter; the proxy's own data replaces it) */
                http_request_set_data(req, TAKE_PTR(id), free);
                *ret_first = http_request_get_data(req);
                tables[0] = (HttpRouteTable) { http_e2b_port_routes, http_e2b_n_port_routes };
                return 1;
        }
        if (port == E2B_ENVD_PORT)
                tables[0] = (HttpRouteTable) { http_e2b_envd_routes, http_e2b_n_envd_routes };
        else if (port == E2B_JUPYTER_PORT)
                tables[0] = (HttpRouteTable) { http_e2b_jupyter_routes, http_e2b_n_jupyter_routes };
        else
                tables[0] = (HttpRouteTable) { http_e2b_port_routes, http_e2b_n_port_routes };
        return 1;
}
