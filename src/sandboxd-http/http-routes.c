/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The routes (sandboxd-http(8), openapi.json): each a line of http_routes[], each a
 * translation of the request to io.sandboxd.Sandbox calls and of their replies back. */

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "agent-protocol.h"
#include "base64-util.h"
#include "code-runner.h"
#include "http-mcp.h"
#include "http.h"
#include "json-util.h"
#include "log.h"
#include "strv.h"
#include "openapi.json.h"
#include "parse-util.h"
#include "sandbox-api.h"

#define IFACE "io.sandboxd.Sandbox."

/* ---- small helpers ---- */

#define reply_bad(req, fmt, field) http_request_reply_error(req, 400, "InvalidOption", fmt, field)

static json_object *params_with_id(HttpRequest *req) {
        json_object *p = json_object_new_object();

        if (p && json_add(p, "id", json_object_new_string(http_request_param(req, 0))) < 0)
                return json_object_put(p), NULL;
        return p;
}

/* Bytes (base64 in a reply) as a JSON string when they are UTF-8, else as base64 under
 * key + "_base64". */
static int add_output(json_object *o, const char *key, json_object *b64) {
        _cleanup_free_ uint8_t *d = NULL;
        char k[64];
        size_t n = 0;
        int r;

        if (!b64)
                return json_add(o, key, json_object_new_string(""));
        r = json_object_get_base64(b64, &d, &n);
        if (r < 0)
                return r;
        if (utf8_is_valid_n(d, n))
                return json_add(o, key, json_object_new_string_len((const char *) (d ?: (uint8_t *) ""), (int) n));
        snprintf(k, sizeof(k), "%s_base64", key);
        r = json_add(o, key, json_object_new_string(""));
        return r < 0 ? r : json_add(o, k, json_object_get(b64));
}

/* A reply's parameter key, or NULL. */
static json_object *get(json_object *o, const char *key) {
        json_object *v = NULL;

        if (o)
                (void) json_object_object_get_ex(o, key, &v);
        return v;
}

/* ---- one call, one reply ---- */

/* Turns a successful reply into the HTTP body (NULL on -ENOMEM); sets *status if not 200. */
typedef json_object *(*transform_t)(HttpRequest *req, json_object *parameters, unsigned *status);

typedef struct Simple {
        transform_t transform;
        unsigned status;
} Simple;

static int on_simple_reply(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                           void *userdata) {
        const Simple *s = userdata;
        unsigned status = s->status ?: 200;
        json_object *body;

        if (error)
                return http_request_reply_varlink_error(req, error, parameters);
        body = s->transform ? s->transform(req, parameters, &status) : json_object_get(parameters);
        if (!body)
                return http_request_reply_errno(req, -ENOMEM);
        return http_request_reply_json(req, status, body);
}

static int call_simple(HttpRequest *req, const char *method, json_object *parameters, const Simple *s) {
        if (!parameters)
                return -ENOMEM;
        return http_backend_call(req, method, parameters, 0, on_simple_reply, (void *) s);
}

static json_object *transform_empty(HttpRequest *req, json_object *parameters, unsigned *status) {
        *status = 204;
        return json_object_new_object();
}

static json_object *transform_field(json_object *parameters, const char *key) {
        return json_object_get(get(parameters, key));
}

static json_object *transform_sandbox(HttpRequest *req, json_object *p, unsigned *status) {
        return transform_field(p, "sandbox");
}

static json_object *transform_sandboxes(HttpRequest *req, json_object *p, unsigned *status) {
        return transform_field(p, "sandboxes");
}

static json_object *transform_templates(HttpRequest *req, json_object *p, unsigned *status) {
        return transform_field(p, "templates");
}

static json_object *transform_entries(HttpRequest *req, json_object *p, unsigned *status) {
        return transform_field(p, "entries");
}

static const Simple simple_empty = { transform_empty };
static const Simple simple_sandbox = { transform_sandbox };
static const Simple simple_sandboxes = { transform_sandboxes };
static const Simple simple_templates = { transform_templates };
static const Simple simple_entries = { transform_entries };
static const Simple simple_whole = {};  /* the reply's parameters as they are */

/* ---- sessions ---- */

/* Which of CreateSandbox's options a session body takes, where, and as which JSON type;
 * their names are the core's table's (sandbox_option_from_snake()). */
typedef struct OptionMap {
        const char *key;          /* in the HTTP body: the option's snake_case name */
        json_type type;
} OptionMap;

static const OptionMap session_options[] = {
        { "timeout",       json_type_int },
        { "idle_timeout",  json_type_int },
        { "name",          json_type_string },
        { "reuse",         json_type_boolean },
        { "from_snapshot", json_type_string },
        { "idle_action",   json_type_string },
        { "egress_allow",  json_type_array },
        { "egress_deny",   json_type_array },
        { "secrets",       json_type_array },
        { "labels",        json_type_object },
        { "storage",       json_type_string },
};

static const OptionMap session_limits[] = {
        { "memory_max",             json_type_int },
        { "cpu_quota_per_sec_usec", json_type_int },
        { "tasks_max",              json_type_int },
        { "disk_max",               json_type_int },
};

/* Copies the keys of src named in map into options; -EINVAL (and *ret_bad) for a key of
 * the wrong type or one not in map. */
static int map_options(json_object *src, const OptionMap *map, size_t n, json_object *options, const char **ret_bad) {
        json_object_object_foreach(src, key, v) {
                size_t i;

                for (i = 0; i < n; i++)
                        if (streq(map[i].key, key))
                                break;
                /* 2.0 is an integer (JSON Schema's, and the OpenAPI document's): json-c read a double. */
                int64_t integer;
                bool from_double = i < n && map[i].type == json_type_int && json_object_is_type(v, json_type_double) &&
                                   json_is_integer(v, &integer);
                if (i >= n || (!from_double && !json_object_is_type(v, map[i].type))) {
                        *ret_bad = key;
                        return -EINVAL;
                }
                const char *option = sandbox_option_from_snake(map[i].key);
                assert(option);
                if (json_add(options, option, from_double ? json_object_new_int64(integer) : json_object_get(v)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* A sandbox id in the reply: answered with the sandbox (GetSandbox), status userdata's
 * (201 when NULL). */
static int on_created(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                      void *userdata) {
        static const Simple created = { transform_sandbox, 201 };
        json_object *p;

        if (error)
                return http_request_reply_varlink_error(req, error, parameters);
        p = json_object_new_object();
        if (!p || json_add(p, "id", json_object_get(get(parameters, "id"))) < 0)
                return json_object_put(p), http_request_reply_errno(req, -ENOMEM);
        return call_simple(req, IFACE "GetSandbox", p, userdata ?: &created);
}

/* The body of POST /api/v1/sessions (or of .../fork, which takes no template) as
 * CreateSandbox's template into p and options into options: 1, or the reply to a bad one. */
static int session_body(HttpRequest *req, json_object *p, json_object *options, bool fork) {
        const char *bad = NULL;
        int r;

        json_object_object_foreach(http_request_body(req), key, v) {
                /* null is no value of any field's type (json-c has it as NULL). */
                if (!v)
                        return reply_bad(req, "'%s' must not be null (leave it out for the default).", key);
                if (streq(key, "template") && !fork) {
                        if (!json_object_is_type(v, json_type_string))
                                return reply_bad(req, "'%s' must be a string.", key);
                        r = json_add(p, "template", json_object_get(v));
                } else if (streq(key, "mode")) {
                        const char *m = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
                        if (!streq(m, "ephemeral") && !streq(m, "persistent"))
                                return reply_bad(req, "'%s' must be \"ephemeral\" or \"persistent\".", key);
                        r = json_add(options, "Ephemeral", json_object_new_boolean(streq(m, "ephemeral")));
                } else if (streq(key, "env")) {
                        /* CreateSandbox takes no environment: refused, never dropped. */
                        return reply_bad(req, "'%s' is not taken at session creation (sandboxd has no per-sandbox "
                                         "environment); pass it to each execute.", key);
                } else if (streq(key, "limits")) {
                        if (!json_object_is_type(v, json_type_object))
                                return reply_bad(req, "'%s' must be an object.", key);
                        r = map_options(v, session_limits, ELEMENTSOF(session_limits), options, &bad);
                } else if (fork && (streq(key, "template") || streq(key, "from_snapshot"))) {
                        return reply_bad(req, "'%s' is the source's for a fork.", key);
                } else {
                        _cleanup_json_ json_object *one = json_object_new_object();
                        if (!one || json_add(one, key, json_object_get(v)) < 0)
                                return -ENOMEM;
                        r = map_options(one, session_options, ELEMENTSOF(session_options), options, &bad);
                        if (bad)
                                bad = key;
                }
                if (r == -EINVAL)
                        return reply_bad(req, "Unknown or ill-typed field '%s'.", bad ?: key);
                if (r < 0)
                        return r;
        }
        return 1;
}

/* CreateSandbox (or, with fork, Fork of the session in p) with the body's options. */
static int create_call(HttpRequest *req, json_object *params, bool fork) {
        _cleanup_json_ json_object *p = params, *options = json_object_new_object();
        int r;

        if (!p || !options)
                return -ENOMEM;
        r = session_body(req, p, options, fork);
        if (r <= 0)
                return r;
        r = json_add(p, "options", TAKE_PTR(options));
        if (r < 0)
                return r;
        return http_backend_call(req, fork ? IFACE "Fork" : IFACE "CreateSandbox", TAKE_PTR(p), 0, on_created, NULL);
}

static int route_session_create(HttpRequest *req) {
        const char *drain = http_server_config(http_request_server(req))->drain_file;

        /* A draining node takes no new sandbox: the front tries the next node (its
         * retry-on 503), even for a tenant whose stick-table entry names this one. */
        if (drain && access(drain, F_OK) >= 0)
                return http_request_reply_error(req, 503, "NodeUnavailable", "This node is draining.");
        return create_call(req, json_object_new_object(), false);
}

/* ?label=KEY=VALUE (or KEY), repeated: the sandboxes with every one of those labels. */
static int route_session_list(HttpRequest *req) {
        _cleanup_json_ json_object *p = json_object_new_object(), *labels = NULL, *filter = NULL;
        int r;

        if (!p)
                return -ENOMEM;
        r = http_request_query_all(req, "label", &labels);
        if (r < 0)
                return r;
        if (json_object_array_length(labels) > 0) {
                filter = json_object_new_object();
                if (!filter || json_add(filter, "Label", TAKE_PTR(labels)) < 0 ||
                    json_add(p, "filter", TAKE_PTR(filter)) < 0)
                        return -ENOMEM;
        }
        return call_simple(req, IFACE "ListSandboxes", TAKE_PTR(p), &simple_sandboxes);
}

static int route_session_get(HttpRequest *req) {
        return call_simple(req, IFACE "GetSandbox", params_with_id(req), &simple_sandbox);
}

static json_object *transform_metrics(HttpRequest *req, json_object *p, unsigned *status) {
        return transform_field(p, "metrics");
}

static int route_session_metrics(HttpRequest *req) {
        static const Simple s = { transform_metrics };
        return call_simple(req, IFACE "GetMetrics", params_with_id(req), &s);
}

static int route_session_delete(HttpRequest *req) {
        return call_simple(req, IFACE "Destroy", params_with_id(req), &simple_empty);
}

static int route_session_pause(HttpRequest *req) {
        return call_simple(req, IFACE "Pause", params_with_id(req), &simple_empty);
}

static int route_session_resume(HttpRequest *req) {
        return call_simple(req, IFACE "Resume", params_with_id(req), &simple_empty);
}

static int route_session_timeout(HttpRequest *req) {
        json_object *body = http_request_body(req), *lifetime = get(body, "timeout"), *idle = get(body, "idle_timeout");
        _cleanup_json_ json_object *p = params_with_id(req);

        if ((lifetime && !json_object_is_type(lifetime, json_type_int)) ||
            (idle && !json_object_is_type(idle, json_type_int)) || json_object_object_length(body) > !!lifetime + !!idle)
                return reply_bad(req, "%s takes \"timeout\" and \"idle_timeout\", in seconds.", "timeout");
        if (!p ||
            json_add(p, "lifetimeSec", json_object_new_int64(lifetime ? json_object_get_int64(lifetime) : 0)) < 0 ||
            json_add(p, "idleSec", json_object_new_int64(idle ? json_object_get_int64(idle) : 0)) < 0)
                return -ENOMEM;
        return call_simple(req, IFACE "SetTimeout", TAKE_PTR(p), &simple_empty);
}

/* ---- execute ---- */

/* argv as given, or the bootstrap of code's language (code-runner.h): the code itself goes
 * on stdin (exec_code_stdin()), never in an argv. */
static int exec_argv(HttpRequest *req, json_object *body, json_object **ret) {
        json_object *argv = get(body, "argv"), *code = get(body, "code"), *language = get(body, "language");
        _cleanup_json_ json_object *a = NULL;
        const char * const *boot;

        if (argv && !code && !language) {
                if (!json_object_is_type(argv, json_type_array) || json_object_array_length(argv) == 0)
                        return reply_bad(req, "'%s' must be a non-empty array of strings.", "argv");
                for (size_t i = 0; i < json_object_array_length(argv); i++)
                        if (!json_object_is_type(json_object_array_get_idx(argv, i), json_type_string))
                                return reply_bad(req, "'%s' must be a non-empty array of strings.", "argv");
                *ret = json_object_get(argv);
                return 1;
        }
        if (argv || !code || !json_object_is_type(code, json_type_string) ||
            (language && !json_object_is_type(language, json_type_string)))
                return reply_bad(req, "Give '%s' (an array of strings), or 'code' and 'language'.", "argv");
        boot = code_runner_argv(language ? json_object_get_string(language) : "python");
        if (!boot)
                return reply_bad(req, "Unknown language '%s'.", json_object_get_string(language));
        a = json_object_new_array();
        if (!a)
                return -ENOMEM;
        for (size_t i = 0; boot[i]; i++)
                if (json_object_array_add(a, json_object_new_string(boot[i])) < 0)
                        return -ENOMEM;
        *ret = TAKE_PTR(a);
        return 1;
}

/* With code: Stdin is "LENGTH\n", the code, then the caller's stdin (if any). */
static int exec_code_stdin(json_object *body, json_object *options) {
        json_object *code = get(body, "code"), *in = get(body, "stdin");
        _cleanup_free_ char *buf = NULL;
        size_t n;
        int r;

        if (!code)
                return 0;
        r = code_runner_stdin(json_object_get_string(code), (size_t) json_object_get_string_len(code),
                              in ? json_object_get_string(in) : NULL, in ? (size_t) json_object_get_string_len(in) : 0,
                              &buf, &n);
        if (r < 0)
                return r;
        return json_add(options, "Stdin", json_object_new_base64(buf, n));
}

/* "timeout" in seconds (0.5 is half a second) into options, as the option it names
 * (json_timeout_option()): 1, or 0 when refused (answered), or a fault. */
static int add_timeout_option(HttpRequest *req, const char *key, json_object *v, json_object *options) {
        const char *option;
        uint64_t value;

        if (json_timeout_option(v, &option, &value) < 0)
                return reply_bad(req, "'%s' must be a number of seconds (0.5 is half a second).", key);
        return json_add(options, option, json_object_new_uint64(value)) < 0 ? -ENOMEM : 1;
}

static int exec_options(HttpRequest *req, json_object *body, json_object *options) {
        json_object_object_foreach(body, key, v) {
                int r = 0;

                if (streq(key, "argv") || streq(key, "code") || streq(key, "language") || streq(key, "background"))
                        continue;
                if (streq(key, "stdin_pipe") || streq(key, "tty")) {
                        if (!json_object_is_type(v, json_type_boolean))
                                return reply_bad(req, "'%s' must be a boolean.", key);
                        r = json_add(options, streq(key, "tty") ? "TTY" : "StdinPipe", json_object_get(v));
                        if (r < 0)
                                return r;
                        continue;
                }
                if (streq(key, "timeout")) {
                        r = add_timeout_option(req, key, v, options);
                        if (r <= 0)
                                return r;
                        continue;
                }
                if (streq(key, "cwd")) {
                        if (!json_object_is_type(v, json_type_string))
                                return reply_bad(req, "'%s' must be a string.", key);
                        r = json_add(options, "WorkingDirectory", json_object_get(v));
                } else if (streq(key, "stdin")) {
                        if (!json_object_is_type(v, json_type_string))
                                return reply_bad(req, "'%s' must be a string.", key);
                        r = json_add(options, "Stdin", json_object_new_base64(json_object_get_string(v),
                                                                       json_object_get_string_len(v)));
                } else if (streq(key, "env")) {
                        _cleanup_json_ json_object *e = json_object_new_array();
                        if (!e)
                                return -ENOMEM;
                        if (!json_object_is_type(v, json_type_object))
                                return reply_bad(req, "'%s' must be an object of strings.", key);
                        json_object_object_foreach(v, name, value) {
                                _cleanup_free_ char *s = NULL;
                                if (!json_object_is_type(value, json_type_string))
                                        return reply_bad(req, "'%s' must be an object of strings.", "env");
                                if (asprintf(&s, "%s=%s", name, json_object_get_string(value)) < 0 ||
                                    json_object_array_add(e, json_object_new_string(s)) < 0)
                                        return -ENOMEM;
                        }
                        r = json_add(options, "Environment", TAKE_PTR(e));
                } else
                        return reply_bad(req, "Unknown field '%s'.", key);
                if (r < 0)
                        return r;
        }
        return 1;
}

static json_object *exit_to_json(json_object *parameters) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o ||
            json_add(o, "exit_code", json_object_get(get(parameters, "exitStatus"))) < 0 ||
            json_add(o, "info", json_object_get(get(parameters, "info"))) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static json_object *result_to_json(json_object *parameters) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o ||
            json_add(o, "exit_code", json_object_get(get(parameters, "exitStatus"))) < 0 ||
            add_output(o, "stdout", get(parameters, "stdout")) < 0 ||
            add_output(o, "stderr", get(parameters, "stderr")) < 0 ||
            json_add(o, "info", json_object_get(get(parameters, "info"))) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static json_object *transform_exec(HttpRequest *req, json_object *parameters, unsigned *status) {
        return result_to_json(parameters);
}

static json_object *transform_started(HttpRequest *req, json_object *parameters, unsigned *status) {
        _cleanup_json_ json_object *o = json_object_new_object();

        *status = 202;
        if (!o || json_add(o, "execution_id", json_object_get(get(parameters, "process"))) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* Server-sent events: each one "event:" line and one "data:" line of JSON. JSON text as
 * json-c writes it holds no CR or LF (they are escaped in strings), so nothing the sandboxed
 * code writes can end a field or an event early, nor add one (sandboxd-http(8), EVENTS). */
static int sse_json(HttpRequest *req, const char *event, json_object *o) {
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

        if (!s)
                return -ENOMEM;
        if (strpbrk(s, "\r\n"))      /* never: a JSON writer that changed would be caught here */
                return -EBADMSG;
        return http_request_stream_printf(req, "event: %s\ndata: %s\n\n", event, s);
}

/* A chunk of output as {"data": TEXT, "encoding": "utf-8"}, or "base64" when it is not
 * UTF-8 (a chunk may also end inside a character). */
static int sse_output(HttpRequest *req, const char *event, const uint8_t *data, size_t size) {
        _cleanup_json_ json_object *o = json_object_new_object();
        bool utf8 = utf8_is_valid_n(data, size);

        if (!o ||
            json_add(o, "data", utf8 ? json_object_new_string_len((const char *) (data ?: (const uint8_t *) ""), (int) size)
                                     : json_object_new_base64(data, size)) < 0 ||
            json_add(o, "encoding", json_object_new_string(utf8 ? "utf-8" : "base64")) < 0)
                return -ENOMEM;
        return sse_json(req, event, o);
}

/* An error reply of sandboxd's in a stream that has started: {"code", "message"}. */
static int sse_error(HttpRequest *req, const char *error, json_object *parameters) {
        _cleanup_json_ json_object *e = json_object_new_object();

        if (!e ||
            json_add(e, "code", json_object_new_string(startswith_str(error, IFACE) ? error + strlen(IFACE) : error)) < 0 ||
            json_add(e, "message", json_object_get(get(parameters, "message"))) < 0)
                return -ENOMEM;
        return sse_json(req, "error", e);
}

static int on_exec_stream(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                          void *userdata) {
        _cleanup_json_ json_object *o = NULL;
        int r = 0;

        if (error) {
                (void) sse_error(req, error, parameters);
                http_request_stream_end(req, false);
                return 0;
        }
        for (unsigned i = 0; i < 2; i++) {
                const char *name = i == 0 ? "stdout" : "stderr";
                _cleanup_free_ uint8_t *d = NULL;
                json_object *b = get(parameters, name);
                size_t n;

                if (!b)
                        continue;
                r = json_object_get_base64(b, &d, &n);
                if (r >= 0)
                        r = sse_output(req, name, d, n);
                if (r < 0)
                        break;
        }
        if (r >= 0 && http_request_stream_buffered(req) > HTTP_STREAM_BUFFER_MAX)
                r = -ENOBUFS;   /* the client does not read: end it (the command runs on) */
        if (r < 0) {
                http_request_stream_end(req, true);
                http_backend_cancel(req);
                return 0;
        }
        if (!(flags & VARLINK_REPLY_CONTINUES)) {
                /* The output went as events already. */
                o = exit_to_json(parameters);
                if (o)
                        (void) sse_json(req, "result", o);
                http_request_stream_end(req, !o);
        }
        return 0;
}

/* A streamed call (Exec, GetLogs with follow) starts only once the session is known to
 * be the tenant's: a missing or foreign one is answered 404 with the error body, before any
 * 200 and event: an SSE client's error handling sees the status. The call's parameters
 * wait as the request's data; the reply callback is userdata. */
static void json_put_data(void *p) {
        json_object_put(p);
}

static int on_stream_checked(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                             void *userdata) {
        _cleanup_json_ json_object *p = json_object_get(http_request_get_data(req));
        int r;

        if (error)
                return http_request_reply_varlink_error(req, error, parameters);
        http_request_set_data(req, NULL, NULL);
        r = http_request_stream(req, 200, "text/event-stream", MHD_SIZE_UNKNOWN, NULL);
        if (r < 0)
                return http_request_reply_errno(req, r);
        r = http_backend_call(req, json_object_get_string(get(p, "method")), json_object_get(get(p, "parameters")),
                              VARLINK_CALL_MORE, userdata, NULL);
        if (r < 0)
                http_request_stream_end(req, true);
        return 0;
}

static int stream_call(HttpRequest *req, const char *method, json_object *parameters, http_backend_reply_t callback) {
        _cleanup_json_ json_object *p = parameters, *d = json_object_new_object();

        if (!p || !d || json_add(d, "method", json_object_new_string(method)) < 0 ||
            json_add(d, "parameters", TAKE_PTR(p)) < 0)
                return -ENOMEM;
        http_request_set_data(req, TAKE_PTR(d), json_put_data);
        return http_backend_call(req, IFACE "GetSandbox", params_with_id(req), 0, on_stream_checked, callback);
}

static bool wants_events(HttpRequest *req) {
        const char *accept = http_request_header(req, "Accept");
        return accept && strstr(accept, "text/event-stream");
}

static int route_execute(HttpRequest *req) {
        static const Simple exec = { transform_exec }, started = { transform_started };
        _cleanup_json_ json_object *p = params_with_id(req), *argv = NULL, *options = json_object_new_object();
        json_object *body = http_request_body(req), *background = get(body, "background");
        int r;

        if (!p || !options)
                return -ENOMEM;
        r = exec_argv(req, body, &argv);
        if (r <= 0)
                return r;
        r = exec_options(req, body, options);
        if (r <= 0)
                return r;
        r = exec_code_stdin(body, options);
        if (r < 0)
                return r;
        if (background && !json_object_is_type(background, json_type_boolean))
                return reply_bad(req, "'%s' must be a boolean.", "background");
        if (json_add(p, "argv", TAKE_PTR(argv)) < 0 || json_add(p, "options", TAKE_PTR(options)) < 0)
                return -ENOMEM;
        if (background && json_object_get_boolean(background))
                return call_simple(req, IFACE "Start", TAKE_PTR(p), &started);
        if (!wants_events(req))
                return call_simple(req, IFACE "Exec", TAKE_PTR(p), &exec);
        return stream_call(req, IFACE "Exec", TAKE_PTR(p), on_exec_stream);
}

/* ---- background executions ---- */

static json_object *transform_processes(HttpRequest *req, json_object *p, unsigned *status) {
        return transform_field(p, "processes");
}

static int route_status(HttpRequest *req) {
        static const Simple s = { transform_processes };
        return call_simple(req, IFACE "ListProcesses", params_with_id(req), &s);
}

static json_object *transform_output(HttpRequest *req, json_object *parameters, unsigned *status) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o ||
            json_add(o, "running", json_object_get(get(parameters, "running"))) < 0 ||
            add_output(o, "stdout", get(parameters, "stdout")) < 0 ||
            add_output(o, "stderr", get(parameters, "stderr")) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* The parameters naming the session's execution {eid}; 0, a reply sent, if there is none. */
static int params_with_process(HttpRequest *req, json_object **ret) {
        _cleanup_json_ json_object *p = params_with_id(req);
        uint64_t eid;

        if (parse_uint64(http_request_param(req, 1), &eid) < 0 || eid > INT32_MAX)
                return http_request_reply_error(req, 404, "NoSuchProcess", "No execution %s.", http_request_param(req, 1));
        if (!p || json_add(p, "process", json_object_new_int64((int64_t) eid)) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(p);
        return 1;
}

static int route_execution_get(HttpRequest *req) {
        static const Simple s = { transform_output };
        json_object *p;
        int r = params_with_process(req, &p);

        return r <= 0 ? r : call_simple(req, IFACE "ReadOutput", p, &s);
}

/* GET .../executions/{eid}/logs?cursor=C: what it wrote after C, an opaque "OUT.ERR" of
 * two byte offsets (absent: from the start), and the cursor to read on with. */
static int parse_cursor(const char *c, uint64_t *ret_out, uint64_t *ret_err) {
        _cleanup_free_ char *out = NULL;
        const char *dot;

        if (!c) {
                *ret_out = *ret_err = 0;
                return 0;
        }
        dot = strchr(c, '.');
        if (!dot)
                return -EINVAL;
        out = strndup(c, dot - c);
        if (!out)
                return -ENOMEM;
        if (parse_uint64(out, ret_out) < 0 || parse_uint64(dot + 1, ret_err) < 0 ||
            *ret_out > INT64_MAX || *ret_err > INT64_MAX)
                return -EINVAL;
        return 0;
}

static json_object *transform_logs(HttpRequest *req, json_object *parameters, unsigned *status) {
        _cleanup_json_ json_object *o = transform_output(req, parameters, status);
        uint64_t from[2], total[2];
        char cursor[48];

        if (!o || parse_cursor(http_request_query(req, "cursor"), &from[0], &from[1]) < 0)
                return NULL;
        for (unsigned i = 0; i < 2; i++) {
                const char *name = i == 0 ? "stdout" : "stderr";
                _cleanup_free_ uint8_t *d = NULL;
                char key[32];
                size_t n;

                total[i] = (uint64_t) json_object_get_int64(get(parameters, i == 0 ? "stdoutTotal" : "stderrTotal"));
                if (json_object_get_base64(get(parameters, name), &d, &n) < 0)
                        return NULL;
                /* What the daemon's bound dropped between the cursor and this output. */
                snprintf(key, sizeof(key), "%s_dropped", name);
                if (json_add(o, key, json_object_new_int64((int64_t) (total[i] - from[i] - n))) < 0)
                        return NULL;
        }
        snprintf(cursor, sizeof(cursor), "%" PRIu64 ".%" PRIu64, total[0], total[1]);
        if (json_add(o, "cursor", json_object_new_string(cursor)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static int route_execution_logs(HttpRequest *req) {
        static const Simple s = { transform_logs };
        _cleanup_json_ json_object *p = NULL;
        uint64_t out, err;
        int r;

        r = parse_cursor(http_request_query(req, "cursor"), &out, &err);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return reply_bad(req, "'%s' must be a cursor this route returned.", "cursor");
        r = params_with_process(req, &p);
        if (r <= 0)
                return r;
        if (json_add(p, "stdoutOffset", json_object_new_int64((int64_t) out)) < 0 ||
            json_add(p, "stderrOffset", json_object_new_int64((int64_t) err)) < 0)
                return -ENOMEM;
        return call_simple(req, IFACE "ReadOutput", TAKE_PTR(p), &s);
}

/* DELETE .../executions/{eid}: SIGKILL; POST .../signal {"signal": "TERM" or 15}. */
static int route_execution_kill(HttpRequest *req) {
        json_object *p;
        int r = params_with_process(req, &p);

        if (r <= 0)
                return r;
        if (json_add(p, "signal", json_object_new_int(SIGKILL)) < 0)
                return json_object_put(p), -ENOMEM;
        return call_simple(req, IFACE "Signal", p, &simple_empty);
}

static int route_execution_signal(HttpRequest *req) {
        json_object *body = http_request_body(req), *v = get(body, "signal");
        _cleanup_json_ json_object *p = NULL;
        int sig, r;

        if (!v || json_object_object_length(body) != 1 ||
            (json_object_is_type(v, json_type_int) ? (sig = json_object_get_int(v)) < 1 || sig > 64 :
             !json_object_is_type(v, json_type_string) || signal_from_string(json_object_get_string(v), &sig) < 0))
                return reply_bad(req, "%s takes \"signal\": a name (\"TERM\", \"SIGKILL\") or a number 1 to 64.",
                                 "signal");
        r = params_with_process(req, &p);
        if (r <= 0)
                return r;
        if (json_add(p, "signal", json_object_new_int(sig)) < 0)
                return -ENOMEM;
        return call_simple(req, IFACE "Signal", TAKE_PTR(p), &simple_empty);
}

/* POST .../stdin {"data": "text"} or {"data_base64": "..."}: WriteStdin; .../stdin/close:
 * CloseStdin. */
static int route_execution_stdin(HttpRequest *req) {
        json_object *body = http_request_body(req), *text = get(body, "data"), *b64 = get(body, "data_base64");
        _cleanup_json_ json_object *p = NULL;
        _cleanup_free_ uint8_t *d = NULL;
        size_t n;
        int r;

        if (!!text + !!b64 != 1 || json_object_object_length(body) != 1 ||
            !json_object_is_type(text ?: b64, json_type_string) ||
            (b64 && json_object_get_base64(b64, &d, &n) < 0))
                return reply_bad(req, "%s takes \"data\" (text) or \"data_base64\" (bytes, base64).", "stdin");
        r = params_with_process(req, &p);
        if (r <= 0)
                return r;
        if (json_add(p, "data", text ? json_object_new_base64(json_object_get_string(text),
                                                              json_object_get_string_len(text)) :
                                       json_object_get(b64)) < 0)
                return -ENOMEM;
        return call_simple(req, IFACE "WriteStdin", TAKE_PTR(p), &simple_empty);
}

static int route_execution_stdin_close(HttpRequest *req) {
        json_object *p;
        int r = params_with_process(req, &p);

        return r <= 0 ? r : call_simple(req, IFACE "CloseStdin", p, &simple_empty);
}

/* GET .../result?execution=EID[&wait=SEC]: how a background execution ended (Wait, by
 * default not waiting: 409 StillRunning while it runs) and its output (ReadOutput). */
static int on_result_output(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                            void *userdata) {
        _cleanup_json_ json_object *o = http_request_get_data(req) ? json_object_get(http_request_get_data(req)) : NULL;

        if (error)
                return http_request_reply_varlink_error(req, error, parameters);
        if (!o || add_output(o, "stdout", get(parameters, "stdout")) < 0 ||
            add_output(o, "stderr", get(parameters, "stderr")) < 0)
                return http_request_reply_errno(req, -ENOMEM);
        return http_request_reply_json(req, 200, TAKE_PTR(o));
}

static int on_result_wait(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                          void *userdata) {
        int64_t eid = json_object_get_int64(userdata);   /* the request's data, replaced below */
        json_object *p, *o;

        if (error)
                return http_request_reply_varlink_error(req, error, parameters);
        o = exit_to_json(parameters);
        if (!o)
                return http_request_reply_errno(req, -ENOMEM);
        http_request_set_data(req, o, json_put_data);
        p = params_with_id(req);
        if (!p || json_add(p, "process", json_object_new_int64(eid)) < 0)
                return json_object_put(p), http_request_reply_errno(req, -ENOMEM);
        return http_backend_call(req, IFACE "ReadOutput", p, 0, on_result_output, NULL);
}

static int route_result(HttpRequest *req) {
        const char *execution = http_request_query(req, "execution"), *wait = http_request_query(req, "wait");
        _cleanup_json_ json_object *p = params_with_id(req);
        uint64_t eid, sec = 0;
        json_object *e;

        if (!execution || parse_uint64(execution, &eid) < 0 || eid > INT32_MAX)
                return reply_bad(req, "The query needs '%s', an execution id.", "execution");
        /* Its bound is sandboxd's (Wait refuses beyond it, saying so). */
        if (wait && (parse_uint64(wait, &sec) < 0 || sec > INT64_MAX))
                return reply_bad(req, "'%s' must be a whole number of seconds.", "wait");
        /* Wait's 0 is "no limit": not waiting is its shortest, 1 s. */
        e = json_object_new_int64((int64_t) eid);
        if (!p || !e || json_add(p, "process", json_object_get(e)) < 0 ||
            json_add(p, "timeoutSec", json_object_new_int64((int64_t) MAX(sec, 1))) < 0) {
                json_object_put(e);
                return -ENOMEM;
        }
        http_request_set_data(req, e, json_put_data);
        return http_backend_call(req, IFACE "Wait", TAKE_PTR(p), 0, on_result_wait, e);
}

/* ---- files ---- */

/* ---- transfers in parts (files; a sandbox's export and import) ----
 *
 * A download is streamed from replies that each carry a part (offset, length); an upload
 * is gathered into parts of part_max bytes, each written by one call while the body waits. */

typedef struct PartTransfer {
        uint64_t offset, size;          /* bytes done; a download's whole */
        uint8_t *buf;                   /* an upload's part under way: n bytes of part_max */
        size_t n, part_max;
        bool in_flight, ended;          /* a call is out; the upload's body is all read */
        bool streamed;                  /* a download of no size: made as it is read, the end an empty part */
} PartTransfer;

/* A download's part came (its "data"): written to the stream, which ends after the last
 * (streamed: with an empty part); a failed part cuts the stream short, logged as what of
 * name. */
static int part_streamed(HttpRequest *req, PartTransfer *t, json_object *parameters, const char *error,
                         const char *what, const char *name) {
        _cleanup_free_ uint8_t *d = NULL;
        size_t n = 0;

        t->in_flight = false;
        if (!error && json_object_get_base64(get(parameters, "data"), &d, &n) >= 0 && n == 0 && t->streamed) {
                /* The end of what was made as it was read: sandboxd saw it finish well. */
                http_request_stream_end(req, false);
                return 0;
        }
        if (error || !d || n == 0) {
                log_warning("%s of %s ended at %llu of %llu bytes: %s", what, name,
                            (unsigned long long) t->offset, (unsigned long long) t->size, strna(error));
                http_request_stream_end(req, true);
                return 0;
        }
        t->offset += n;
        if (http_request_stream_write(req, d, n) < 0)
                return 0;
        if (!t->streamed && t->offset >= t->size)
                http_request_stream_end(req, false);
        return 0;
}

/* The call for a part (p: its parameters, taken); on_part answers. */
static int part_send(HttpRequest *req, PartTransfer *t, const char *method, json_object *p,
                     http_backend_reply_t on_part) {
        t->in_flight = true;
        return http_backend_call(req, method, p, 0, on_part, NULL);
}

/* The parameters of a download's call for length bytes from offset (NULL: -ENOMEM). */
typedef json_object *(*part_params_t)(HttpRequest *req, uint64_t offset, uint64_t length);

/* A download's stream wants more: the next part (at most part_max bytes) is asked for
 * with method, unless a call is out already; the stream ends once all came (streamed: at
 * the empty part, part_streamed()). */
static int part_pull(HttpRequest *req, PartTransfer *t, const char *method, part_params_t params,
                     http_backend_reply_t on_part) {
        json_object *p;

        if (t->in_flight)
                return 0;
        if (!t->streamed && t->offset >= t->size) {
                http_request_stream_end(req, false);
                return 0;
        }
        p = params(req, t->offset, t->streamed ? t->part_max : MIN(t->size - t->offset, (uint64_t) t->part_max));
        if (!p)
                return -ENOMEM;
        return part_send(req, t, method, p, on_part);
}

/* An upload's buffer of part_max bytes. */
static int part_buffer(PartTransfer *t, size_t part_max) {
        t->buf = malloc(part_max);
        if (!t->buf)
                return -ENOMEM;
        t->part_max = part_max;
        return 0;
}

/* Takes what fits of the body's data into the part under way (*size: what is left), a
 * full part sent with flush; the body waits while a part is out. */
static int part_take(HttpRequest *req, PartTransfer *t, const char *data, size_t *size,
                     int (*flush)(HttpRequest *req)) {
        size_t n;
        int r;

        if (t->in_flight) {
                http_request_suspend(req);
                return 0;
        }
        n = MIN(*size, t->part_max - t->n);
        memcpy(t->buf + t->n, data, n);
        t->n += n;
        *size -= n;
        if (t->n == t->part_max) {
                r = flush(req);
                if (r < 0)
                        return r;
                if (*size > 0)
                        http_request_suspend(req);
        }
        return 0;
}

/* An upload's part was written: true when the body has more to give (it is read on). */
static bool part_written(HttpRequest *req, PartTransfer *t) {
        t->in_flight = false;
        t->offset += t->n;
        t->n = 0;
        if (t->ended)
                return false;
        http_request_resume(req);
        return true;
}

/* The upload's body is all read: the rest is sent (also nothing: an empty file), or when
 * the part under way comes back (its callback answers then). */
static int part_end(HttpRequest *req, PartTransfer *t, int (*flush)(HttpRequest *req)) {
        t->ended = true;
        return t->in_flight ? 0 : flush(req);
}

typedef struct FileTransfer {
        PartTransfer part;
        char *path;
        char *error;                    /* a failed upload's error, answered once its file is removed */
        json_object *error_parameters;
} FileTransfer;

static void file_transfer_free(void *p) {
        FileTransfer *t = p;

        if (!t)
                return;
        free(t->path);
        free(t->part.buf);
        free(t->error);
        json_object_put(t->error_parameters);
        free(t);
}

static const char *query_path(HttpRequest *req) {
        const char *path = http_request_query(req, "path");
        return isempty(path) ? NULL : path;
}

static json_object *params_with_path(HttpRequest *req, const char *path) {
        json_object *p = params_with_id(req);

        if (p && json_add(p, "path", json_object_new_string(path)) < 0)
                return json_object_put(p), NULL;
        return p;
}

static int on_read_chunk(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                         void *userdata) {
        FileTransfer *t = http_request_get_data(req);

        return part_streamed(req, &t->part, parameters, error, "Download", t->path);
}

static json_object *read_params(HttpRequest *req, uint64_t offset, uint64_t length) {
        FileTransfer *t = http_request_get_data(req);
        json_object *p = params_with_path(req, t->path);

        if (p && (json_add(p, "offset", json_object_new_int64((int64_t) offset)) < 0 ||
                  json_add(p, "length", json_object_new_int64((int64_t) length)) < 0))
                return json_object_put(p), NULL;
        return p;
}

static int pull_chunk(HttpRequest *req) {
        FileTransfer *t = http_request_get_data(req);

        return part_pull(req, &t->part, IFACE "ReadFile", read_params, on_read_chunk);
}

static int on_download_stat(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                            void *userdata) {
        FileTransfer *t = http_request_get_data(req);
        json_object *entry = get(parameters, "entry"), *type = get(entry, "type");

        if (error)
                return http_request_reply_varlink_error(req, error, parameters);
        /* The name and words of sandboxd's own NotRegularFile (sandboxd-api(7)). */
        if (!type || !streq(json_object_get_string(type), "file"))
                return http_request_reply_error(req, 400, "NotRegularFile", "%s: not a regular file: %s.", t->path,
                                                agent_file_type_describe(agent_file_type_from_string(
                                                        json_object_get_string(type))));
        t->part.size = (uint64_t) json_object_get_int64(get(entry, "size"));
        return http_request_stream(req, 200, "application/octet-stream", t->part.size, pull_chunk);
}

static int file_transfer_new_path(HttpRequest *req, const char *path, FileTransfer **ret) {
        FileTransfer *t = NULL;

        if (!path)
                return reply_bad(req, "The query needs '%s'.", "path");
        t = calloc(1, sizeof(FileTransfer));
        if (!t || !(t->path = strdup(path))) {
                free(t);
                return -ENOMEM;
        }
        t->part.part_max = HTTP_FILE_CHUNK;
        http_request_set_data(req, t, file_transfer_free);
        *ret = t;
        return 1;
}

static int file_transfer_new(HttpRequest *req, FileTransfer **ret) {
        return file_transfer_new_path(req, query_path(req), ret);
}

int http_file_download(HttpRequest *req, const char *path) {
        FileTransfer *t = NULL;
        int r = file_transfer_new_path(req, path, &t);

        if (r <= 0)
                return r;
        return http_backend_call(req, IFACE "Stat", params_with_path(req, t->path), 0, on_download_stat, NULL);
}

static int route_file_get(HttpRequest *req) {
        return http_file_download(req, query_path(req));
}

static int upload_flush(HttpRequest *req);

static int on_upload_removed(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                             void *userdata) {
        FileTransfer *t = http_request_get_data(req);

        if (error)
                log_warning("Cannot remove %s after its upload failed: %s", t->path, error);
        return http_request_reply_varlink_error(req, t->error, t->error_parameters);
}

/* A part of an upload was refused: the error is answered (as soon as the rest of the body
 * is read: sandboxd-http(8), LIMITS), and a file the upload made or replaced and left
 * partial is removed first: the upload wrote parts of it already, or sandboxd ran out of
 * room (413, 507) in the first part, which may have replaced it. A first part refused for
 * another reason (a directory, no permission) left any file there untouched. */
static int upload_failed(HttpRequest *req, FileTransfer *t, const char *error, json_object *parameters) {
        unsigned status = http_status_from_varlink_error(error, parameters);
        json_object *p;

        if (t->part.offset == 0 && status != 413 && status != 507)
                return http_request_reply_varlink_error(req, error, parameters);
        t->error = strdup(error);
        if (!t->error)
                return http_request_reply_errno(req, -ENOMEM);
        t->error_parameters = json_object_get(parameters);
        p = params_with_path(req, t->path);
        if (!p)
                return http_request_reply_errno(req, -ENOMEM);
        /* Nothing more is written meanwhile (upload_data() waits). */
        t->part.in_flight = true;
        if (http_backend_call(req, IFACE "Remove", p, 0, on_upload_removed, NULL) < 0)
                return http_request_reply_varlink_error(req, error, parameters);
        return 0;
}

static int on_write_chunk(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                          void *userdata) {
        FileTransfer *t = http_request_get_data(req);
        _cleanup_json_ json_object *o = NULL;

        if (error) {
                t->part.in_flight = false;
                return upload_failed(req, t, error, parameters);
        }
        if (part_written(req, &t->part))
                return 0;
        o = json_object_new_object();
        if (!o || json_add(o, "bytes", json_object_new_int64((int64_t) t->part.offset)) < 0)
                return http_request_reply_errno(req, -ENOMEM);
        return http_request_reply_json(req, 201, TAKE_PTR(o));
}

static int upload_flush(HttpRequest *req) {
        FileTransfer *t = http_request_get_data(req);
        _cleanup_json_ json_object *p = params_with_path(req, t->path), *options = json_object_new_object();

        if (!p || !options ||
            json_add(p, "data", json_object_new_base64(t->part.buf, t->part.n)) < 0 ||
            json_add(options, "Append", json_object_new_boolean(t->part.offset > 0)) < 0 ||
            json_add(options, "CreateParents", json_object_new_boolean(true)) < 0 ||
            json_add(p, "options", TAKE_PTR(options)) < 0)
                return -ENOMEM;
        return part_send(req, &t->part, IFACE "WriteFile", TAKE_PTR(p), on_write_chunk);
}

static int upload_state(HttpRequest *req, FileTransfer **ret) {
        FileTransfer *t = http_request_get_data(req);
        int r;

        if (!t) {
                r = file_transfer_new(req, &t);
                if (r <= 0)
                        return r;
                r = part_buffer(&t->part, HTTP_FILE_CHUNK);
                if (r < 0)
                        return r;
        }
        *ret = t;
        return 1;
}

static int upload_data(HttpRequest *req, const char *data, size_t *size) {
        FileTransfer *t = NULL;
        int r = upload_state(req, &t);

        if (r <= 0) {
                *size = 0;
                return r;
        }
        return part_take(req, &t->part, data, size, upload_flush);
}

static int route_file_put(HttpRequest *req) {
        FileTransfer *t = NULL;
        int r = upload_state(req, &t);

        if (r <= 0)
                return r;
        return part_end(req, &t->part, upload_flush);   /* on_write_chunk answers */
}

static int route_file_delete(HttpRequest *req) {
        const char *path = query_path(req), *recursive = http_request_query(req, "recursive");
        json_object *p;

        if (!path)
                return reply_bad(req, "The query needs '%s'.", "path");
        p = params_with_path(req, path);
        if (p && recursive && (streq(recursive, "true") || streq(recursive, "1")) &&
            json_add(p, "recursive", json_object_new_boolean(true)) < 0)
                return -ENOMEM;
        return call_simple(req, IFACE "Remove", p, &simple_empty);
}

static int route_file_list(HttpRequest *req) {
        const char *path = query_path(req) ?: ".", *depth = http_request_query(req, "depth");
        uint64_t d = 1;
        json_object *p;

        if (depth && (parse_uint64(depth, &d) < 0 || d > INT64_MAX))
                return reply_bad(req, "'%s' must be a number.", "depth");
        p = params_with_path(req, path);
        if (p && json_add(p, "depth", json_object_new_int64((int64_t) d)) < 0)
                return -ENOMEM;
        return call_simple(req, IFACE "ListFiles", p, &simple_entries);
}

static int route_file_mkdir(HttpRequest *req) {
        json_object *body = http_request_body(req), *path = get(body, "path"), *parents = get(body, "parents");
        json_object *p;

        if (!path || !json_object_is_type(path, json_type_string) ||
            (parents && !json_object_is_type(parents, json_type_boolean)))
                return reply_bad(req, "%s takes \"path\" and \"parents\".", "mkdir");
        p = params_with_path(req, json_object_get_string(path));
        if (p && parents && json_add(p, "parents", json_object_get(parents)) < 0)
                return -ENOMEM;
        return call_simple(req, IFACE "MakeDirectory", p, &simple_empty);
}

static int route_file_move(HttpRequest *req) {
        json_object *body = http_request_body(req), *from = get(body, "from"), *to = get(body, "to");
        json_object *p;

        if (!from || !to || !json_object_is_type(from, json_type_string) || !json_object_is_type(to, json_type_string))
                return reply_bad(req, "%s takes \"from\" and \"to\".", "move");
        p = params_with_path(req, json_object_get_string(from));
        if (p && json_add(p, "to", json_object_get(to)) < 0)
                return -ENOMEM;
        return call_simple(req, IFACE "Move", p, &simple_empty);
}

/* ---- templates, containers ---- */

/* GetQuota: the tenant's quota (the token's) and its use. */
static int route_quota(HttpRequest *req) {
        return call_simple(req, IFACE "GetQuota", json_object_new_object(), &simple_whole);
}

/* The tenant's secrets (docs/SECRETS.md): names listed, values set and removed, never
 * read back. */
static json_object *transform_secrets(HttpRequest *req, json_object *p, unsigned *status) {
        return transform_field(p, "names");
}

static int route_secrets_list(HttpRequest *req) {
        static const Simple listed = { transform_secrets };
        return call_simple(req, IFACE "ListSecrets", json_object_new_object(), &listed);
}

static int route_secret_put(HttpRequest *req) {
        json_object *body = http_request_body(req), *value = get(body, "value"), *p;

        if (!value || !json_object_is_type(value, json_type_string) || json_object_object_length(body) != 1)
                return reply_bad(req, "%s takes \"value\" (a string).", "PUT /api/v1/secrets/{name}");
        p = json_object_new_object();
        if (!p || json_add(p, "name", json_object_new_string(http_request_param(req, 0))) < 0 ||
            json_add(p, "value", json_object_get(value)) < 0)
                return json_object_put(p), -ENOMEM;
        return call_simple(req, IFACE "SetSecret", p, &simple_empty);
}

static int route_secret_delete(HttpRequest *req) {
        json_object *p = json_object_new_object();

        if (!p || json_add(p, "name", json_object_new_string(http_request_param(req, 0))) < 0)
                return json_object_put(p), -ENOMEM;
        return call_simple(req, IFACE "RemoveSecret", p, &simple_empty);
}

static int route_templates_list(HttpRequest *req) {
        return call_simple(req, IFACE "ListTemplates", json_object_new_object(), &simple_templates);
}

static int route_template_create(HttpRequest *req) {
        static const Simple created = { transform_empty, 201 };
        json_object *body = http_request_body(req), *name = get(body, "name"), *tmpl = get(body, "template");
        json_object *p;

        if (!name || !json_object_is_type(name, json_type_string) || !tmpl ||
            !json_object_is_type(tmpl, json_type_object) || json_object_object_length(body) != 2)
                return reply_bad(req, "%s takes \"name\" and \"template\" (an object).", "POST /api/v1/templates");
        p = json_object_new_object();
        if (!p || json_add(p, "name", json_object_get(name)) < 0 ||
            json_add(p, "json", json_object_new_string(json_object_to_json_string_ext(tmpl, JSON_C_TO_STRING_PLAIN))) < 0)
                return json_object_put(p), -ENOMEM;
        return call_simple(req, IFACE "CreateTemplate", p, &created);
}

static int route_template_delete(HttpRequest *req) {
        json_object *p = json_object_new_object();

        if (p && json_add(p, "name", json_object_new_string(http_request_param(req, 0))) < 0)
                return json_object_put(p), -ENOMEM;
        return call_simple(req, IFACE "RemoveTemplate", p, &simple_empty);
}

/* GET .../logs?lines=N[&follow=true]: the sandbox's journal entries, as JSON, or with
 * follow as server-sent events ("log", one entry each) until the sandbox is gone. */
static json_object *transform_log(HttpRequest *req, json_object *p, unsigned *status) {
        return transform_field(p, "entries");
}

/* After a streamed reply's events were written (r: how): an error ends the stream with
 * its event; a client too slow (or a failed write) cuts it and stops sandboxd's stream;
 * the last reply ends it. */
static int stream_events_after(HttpRequest *req, int r, json_object *parameters, const char *error,
                               VarlinkReplyFlags flags) {
        if (error) {
                (void) sse_error(req, error, parameters);
                http_request_stream_end(req, false);
                return 0;
        }
        if (r < 0 || http_request_stream_buffered(req) > HTTP_STREAM_BUFFER_MAX) {
                http_request_stream_end(req, true);
                http_backend_cancel(req);
        } else if (!(flags & VARLINK_REPLY_CONTINUES))
                http_request_stream_end(req, false);
        return 0;
}

static int on_log_stream(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                         void *userdata) {
        json_object *entries = get(parameters, "entries");
        int r = 0;

        for (size_t i = 0; !error && r >= 0 && entries && i < json_object_array_length(entries); i++)
                r = sse_json(req, "log", json_object_array_get_idx(entries, i));
        return stream_events_after(req, r, parameters, error, flags);
}

static int route_logs(HttpRequest *req) {
        static const Simple s = { transform_log };
        const char *lines = http_request_query(req, "lines"), *follow = http_request_query(req, "follow");
        _cleanup_json_ json_object *p = params_with_id(req);
        uint64_t n = 0;

        /* Without it, sandboxd's default (all, up to its bound); its bound is sandboxd's. */
        if (lines && (parse_uint64(lines, &n) < 0 || n > INT64_MAX))
                return reply_bad(req, "'%s' must be a number.", "lines");
        if (!p || (lines && json_add(p, "lines", json_object_new_int64((int64_t) n)) < 0))
                return -ENOMEM;
        if (!follow || !(streq(follow, "true") || streq(follow, "1")))
                return call_simple(req, IFACE "GetLogs", TAKE_PTR(p), &s);
        if (json_add(p, "follow", json_object_new_boolean(true)) < 0)
                return -ENOMEM;
        return stream_call(req, IFACE "GetLogs", TAKE_PTR(p), on_log_stream);
}

/* GET .../watch?path=P[&recursive=true]: WatchDirectory's events as server-sent events
 * "change", until the client goes (docs/FILES.md). */
static int on_watch_stream(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                           void *userdata) {
        int r = error ? 0 : get(parameters, "event") ? sse_json(req, "change", get(parameters, "event")) : 0;

        return stream_events_after(req, r, parameters, error, flags);
}

static int route_watch(HttpRequest *req) {
        const char *path = http_request_query(req, "path"), *recursive = http_request_query(req, "recursive");
        _cleanup_json_ json_object *p = params_with_id(req);

        if (!path)
                return reply_bad(req, "'%s' is needed.", "path");
        if (!p || json_add(p, "path", json_object_new_string(path)) < 0 ||
            json_add(p, "recursive", json_object_new_boolean(recursive && (streq(recursive, "true") ||
                                                                            streq(recursive, "1")))) < 0)
                return -ENOMEM;
        return stream_call(req, IFACE "WatchDirectory", TAKE_PTR(p), on_watch_stream);
}

/* ---- snapshots (sandboxd-api(7), SNAPSHOTS) ---- */

static json_object *transform_snapshot(HttpRequest *req, json_object *p, unsigned *status) {
        return transform_field(p, "snapshot");
}

static json_object *transform_snapshots(HttpRequest *req, json_object *p, unsigned *status) {
        return transform_field(p, "snapshots");
}

/* POST .../snapshot and .../hibernate: {"include_tmp": bool} as IncludeTmp. */
static int snapshot_call(HttpRequest *req, const char *method, const char *name, const Simple *s) {
        json_object *body = http_request_body(req), *tmp = get(body, "include_tmp");
        _cleanup_json_ json_object *p = params_with_id(req), *options = json_object_new_object();

        if ((tmp && !json_object_is_type(tmp, json_type_boolean)) || json_object_object_length(body) > !!tmp)
                return reply_bad(req, "%s takes \"include_tmp\" (a boolean).", name);
        if (!p || !options || (tmp && json_add(options, "IncludeTmp", json_object_get(tmp)) < 0) ||
            json_add(p, "options", TAKE_PTR(options)) < 0)
                return -ENOMEM;
        return call_simple(req, method, TAKE_PTR(p), s);
}

static int route_session_snapshot(HttpRequest *req) {
        static const Simple s = { transform_snapshot, 201 };

        return snapshot_call(req, IFACE "Snapshot", "snapshot", &s);
}

static int route_session_hibernate(HttpRequest *req) {
        static const Simple s = { transform_snapshot };

        return snapshot_call(req, IFACE "Hibernate", "hibernate", &s);
}

static int route_session_fork(HttpRequest *req) {
        return create_call(req, params_with_id(req), true);
}

static int route_session_wake(HttpRequest *req) {
        json_object *p = params_with_id(req);

        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "Wake", p, 0, on_created, (void *) &simple_sandbox);
}

static int route_snapshots_list(HttpRequest *req) {
        static const Simple s = { transform_snapshots };

        return call_simple(req, IFACE "ListSnapshots", json_object_new_object(), &s);
}

static int route_snapshot_delete(HttpRequest *req) {
        json_object *p = json_object_new_object();

        if (p && json_add(p, "snapshot", json_object_new_string(http_request_param(req, 0))) < 0)
                return json_object_put(p), -ENOMEM;
        return call_simple(req, IFACE "RemoveSnapshot", p, &simple_empty);
}

/* ---- health, metrics, the document ---- */

static int on_health(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                     void *userdata) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o || json_add(o, "status", json_object_new_string(error ? "unavailable" : "ok")) < 0)
                return http_request_reply_errno(req, -ENOMEM);
        return http_request_reply_json(req, error ? 503 : 200, TAKE_PTR(o));
}

static int route_healthz(HttpRequest *req) {
        return http_backend_call(req, "org.varlink.service.GetInfo", json_object_new_object(), 0, on_health, NULL);
}

static void metric_header(FILE *f, const char *name, const char *type, const char *help) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metric_counter(FILE *f, json_object *st, const char *key, const char *name, const char *help) {
        metric_header(f, name, "counter", help);
        fprintf(f, "%s %" PRIi64 "\n", name, json_object_get_int64(get(st, key)));
}

/* A label value: \, " and newline escaped. */
static void label_value(FILE *f, const char *s) {
        for (; s && *s; s++)
                if (*s == '\\' || *s == '"')
                        fprintf(f, "\\%c", *s);
                else if (*s == '\n')
                        fputs("\\n", f);
                else
                        fputc(*s, f);
}

/* sandboxd's statistics: for a tenant's token its own (GetStatistics acting for it: its
 * sandboxes and counters), for an operator's token (daemon_wide) the daemon's, with the
 * warm pools and the record spool. */
static void metrics_daemon(FILE *f, json_object *st, bool daemon_wide) {
        json_object *sandboxes = get(st, "sandboxes"), *pools = get(st, "pools"), *h = get(st, "execLatency");
        json_object *bounds = get(h, "bounds"), *counts = get(h, "counts");

        metric_header(f, "sandboxd_sandboxes", "gauge", "Sandboxes by state and template.");
        for (size_t i = 0; sandboxes && i < json_object_array_length(sandboxes); i++) {
                json_object *c = json_object_array_get_idx(sandboxes, i);
                fputs("sandboxd_sandboxes{state=\"", f);
                label_value(f, json_object_get_string(get(c, "state")));
                fputs("\",template=\"", f);
                label_value(f, json_object_get_string(get(c, "template")));
                fprintf(f, "\"} %" PRIi64 "\n", json_object_get_int64(get(c, "count")));
        }
        metric_counter(f, st, "sandboxesCreated", "sandboxd_sandboxes_created_total", "Sandboxes that came to run.");
        metric_counter(f, st, "createFailures", "sandboxd_create_failures_total", "Sandbox creations that failed.");
        metric_counter(f, st, "sandboxesDestroyed", "sandboxd_sandboxes_destroyed_total", "Sandboxes that ended.");
        metric_counter(f, st, "execs", "sandboxd_execs_total", "Execs that ran to a result.");
        metric_counter(f, st, "execFailures", "sandboxd_exec_failures_total", "Execs that could not be run.");
        metric_counter(f, st, "execTimeouts", "sandboxd_exec_timeouts_total", "Execs killed at their timeout.");
        metric_counter(f, st, "oomKills", "sandboxd_oom_kills_total", "Execs hit by the OOM killer.");
        metric_counter(f, st, "sandboxesRecycled", "sandboxd_sandboxes_recycled_total", "Sandboxes reset and kept for reuse.");
        metric_counter(f, st, "recycleFailures", "sandboxd_recycle_failures_total", "Sandboxes whose reset failed.");
        metric_header(f, "sandboxd_exec_duration_seconds", "histogram", "Wall time of execs.");
        for (size_t i = 0; bounds && counts && i < json_object_array_length(bounds); i++)
                fprintf(f, "sandboxd_exec_duration_seconds_bucket{le=\"%g\"} %" PRIi64 "\n",
                        json_object_get_double(json_object_array_get_idx(bounds, i)),
                        json_object_get_int64(json_object_array_get_idx(counts, i)));
        fprintf(f, "sandboxd_exec_duration_seconds_bucket{le=\"+Inf\"} %" PRIi64 "\n"
                   "sandboxd_exec_duration_seconds_sum %g\n"
                   "sandboxd_exec_duration_seconds_count %" PRIi64 "\n",
                json_object_get_int64(get(h, "count")), json_object_get_double(get(h, "sum")),
                json_object_get_int64(get(h, "count")));
        metric_header(f, "sandboxd_workspace_bytes", "gauge",
                      "Workspaces on disk of the sandboxes counted: bytes used, and their DiskMax added up.");
        fprintf(f, "sandboxd_workspace_bytes{kind=\"used\"} %" PRIi64 "\n"
                   "sandboxd_workspace_bytes{kind=\"max\"} %" PRIi64 "\n",
                json_object_get_int64(get(st, "workspaceBytesUsed")), json_object_get_int64(get(st, "workspaceBytesMax")));
        if (!daemon_wide)
                return;
        metric_header(f, "sandboxd_workspace_pool_bytes", "gauge", "The workspace pool's file system: size and free bytes.");
        fprintf(f, "sandboxd_workspace_pool_bytes{kind=\"size\"} %" PRIi64 "\n"
                   "sandboxd_workspace_pool_bytes{kind=\"free\"} %" PRIi64 "\n",
                json_object_get_int64(get(st, "workspacePoolBytes")), json_object_get_int64(get(st, "workspacePoolBytesFree")));
        metric_header(f, "sandboxd_pool_sandboxes", "gauge", "Warm pool sandboxes by template and state.");
        for (size_t i = 0; pools && i < json_object_array_length(pools); i++) {
                json_object *p = json_object_array_get_idx(pools, i);
                static const char * const keys[] = { "size", "ready", "starting", "inUse" };
                for (size_t k = 0; k < ELEMENTSOF(keys); k++) {
                        fputs("sandboxd_pool_sandboxes{template=\"", f);
                        label_value(f, json_object_get_string(get(p, "template")));
                        fprintf(f, "\",state=\"%s\"} %" PRIi64 "\n", keys[k], json_object_get_int64(get(p, keys[k])));
                }
        }
        metric_header(f, "sandboxd_spool_backlog", "gauge", "Execution records waiting to be written to the database.");
        fprintf(f, "sandboxd_spool_backlog %" PRIi64 "\n", json_object_get_int64(get(st, "spoolBacklog")));
}

static void metrics_bridge(FILE *f, const HttpStats *st) {
        metric_header(f, "sandboxd_http_requests_total", "counter", "HTTP requests received by sandboxd-http.");
        fprintf(f, "sandboxd_http_requests_total %" PRIu64 "\n", st->requests);
        metric_header(f, "sandboxd_http_responses_total", "counter", "HTTP responses by status class.");
        for (unsigned c = 1; c <= 5; c++)
                fprintf(f, "sandboxd_http_responses_total{class=\"%uxx\"} %" PRIu64 "\n", c, st->responses_by_class[c]);
        metric_header(f, "sandboxd_http_unauthorized_total", "counter", "Requests refused for want of a valid token.");
        fprintf(f, "sandboxd_http_unauthorized_total %" PRIu64 "\n", st->unauthorized);
        metric_header(f, "sandboxd_http_connections", "gauge", "Open HTTP connections.");
        fprintf(f, "sandboxd_http_connections %" PRIu64 "\n", st->connections);
}

static int on_metrics(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                      void *userdata) {
        _cleanup_free_ char *text = NULL;
        size_t size = 0;
        FILE *f;

        if (error)
                return http_request_reply_varlink_error(req, error, parameters);
        f = open_memstream(&text, &size);
        if (!f)
                return http_request_reply_errno(req, -ENOMEM);
        metrics_daemon(f, get(parameters, "statistics"), http_request_is_operator(req));
        /* The bridge's own counters are everyone's traffic: an operator's. */
        if (http_request_is_operator(req))
                metrics_bridge(f, http_server_stats(http_request_server(req)));
        if (fclose(f) != 0)
                return http_request_reply_errno(req, -ENOMEM);
        return http_request_reply_text(req, 200, "text/plain; version=0.0.4; charset=utf-8", text);
}

static int route_metrics(HttpRequest *req) {
        if (http_request_is_operator(req))
                http_request_set_daemon_wide(req);
        return http_backend_call(req, IFACE "GetStatistics", json_object_new_object(), 0, on_metrics, NULL);
}

static int route_openapi(HttpRequest *req) {
        return http_request_reply_text(req, 200, "application/json", sandboxd_http_openapi);
}

/* ---- code contexts ---- */

static json_object *transform_context(HttpRequest *req, json_object *p, unsigned *status) {
        return transform_field(p, "context");
}

static json_object *transform_contexts(HttpRequest *req, json_object *p, unsigned *status) {
        return transform_field(p, "contexts");
}

/* The parameters naming the session and its context {cid}. */
static json_object *params_with_context(HttpRequest *req) {
        _cleanup_json_ json_object *p = params_with_id(req);

        if (!p || json_add(p, "context", json_object_new_string(http_request_param(req, 1))) < 0)
                return NULL;
        return TAKE_PTR(p);
}

/* POST .../contexts {"language", "cwd", "env"}: CreateContext, answered once the kernel is
 * ready (201 with the context). */
static int route_context_create(HttpRequest *req) {
        static const Simple s = { transform_context, 201 };
        _cleanup_json_ json_object *p = params_with_id(req), *options = json_object_new_object(), *rest = NULL;
        json_object *body = http_request_body(req), *language = get(body, "language");
        int r;

        if (!p || !options)
                return -ENOMEM;
        if (language && !json_object_is_type(language, json_type_string))
                return reply_bad(req, "'%s' must be a string.", "language");
        rest = json_object_new_object();
        if (!rest)
                return -ENOMEM;
        json_object_object_foreach(body, key, v)
                if (!streq(key, "language") && json_add(rest, key, json_object_get(v)) < 0)
                        return -ENOMEM;
        json_object_object_foreach(rest, k, value)
                if (!value || (!streq(k, "cwd") && !streq(k, "env")))
                        return reply_bad(req, "Unknown field '%s' (a context takes language, cwd and env).", k);
        r = exec_options(req, rest, options);
        if (r <= 0)
                return r;
        if ((language && json_add(p, "language", json_object_get(language)) < 0) ||
            json_add(p, "options", TAKE_PTR(options)) < 0)
                return -ENOMEM;
        return call_simple(req, IFACE "CreateContext", TAKE_PTR(p), &s);
}

static int route_contexts_list(HttpRequest *req) {
        static const Simple s = { transform_contexts };
        return call_simple(req, IFACE "ListContexts", params_with_id(req), &s);
}

static int route_context_delete(HttpRequest *req) {
        return call_simple(req, IFACE "RemoveContext", params_with_context(req), &simple_empty);
}

static int route_context_interrupt(HttpRequest *req) {
        return call_simple(req, IFACE "InterruptContext", params_with_context(req), &simple_empty);
}

static int route_context_restart(HttpRequest *req) {
        static const Simple s = { transform_context };
        return call_simple(req, IFACE "RestartContext", params_with_context(req), &s);
}

/* A cell's events as server-sent events "cell" (the event: its "type" says stdout, stderr,
 * result or error, the cell's exception), then "end" with how it ended; sandboxd's refusal,
 * or the context's loss meanwhile, as "error" {code, message}, as execute's
 * (sandboxd-http(8), EVENTS). */
static int on_run_stream(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                         void *userdata) {
        json_object *event = get(parameters, "event"), *result = get(parameters, "result");
        int r = 0;

        if (error) {
                (void) sse_error(req, error, parameters);
                http_request_stream_end(req, false);
                return 0;
        }
        if (event)
                r = sse_json(req, "cell", event);
        if (r >= 0 && http_request_stream_buffered(req) > HTTP_STREAM_BUFFER_MAX)
                r = -ENOBUFS;   /* the client does not read: end it (the cell runs on) */
        if (r < 0) {
                http_request_stream_end(req, true);
                http_backend_cancel(req);
                return 0;
        }
        if (!(flags & VARLINK_REPLY_CONTINUES)) {
                r = result ? sse_json(req, "end", result) : -EBADMSG;
                http_request_stream_end(req, r < 0);
        }
        return 0;
}

/* POST .../contexts/{cid}/run {"code", "timeout", "output_max", "language"}: RunCode in
 * {cid}, or with {cid} "default" in the session's default context of language. SSE when
 * the client accepts text/event-stream; else one JSON body {events, result}. */
static int route_context_run(HttpRequest *req) {
        static const Simple whole = {};
        _cleanup_json_ json_object *p = params_with_id(req), *options = json_object_new_object();
        json_object *body = http_request_body(req), *code = get(body, "code");
        const char *cid = http_request_param(req, 1);
        int r;

        if (!p || !options)
                return -ENOMEM;
        if (!code || !json_object_is_type(code, json_type_string))
                return reply_bad(req, "'%s' (a string) is required.", "code");
        json_object_object_foreach(body, key, v) {
                r = 0;
                if (streq(key, "code"))
                        continue;
                if (streq(key, "timeout")) {
                        r = add_timeout_option(req, key, v, options);
                        if (r <= 0)
                                return r;
                        continue;
                }
                if (streq(key, "output_max")) {
                        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0)
                                return reply_bad(req, "'%s' must be a number of bytes.", key);
                        r = json_add(options, "OutputMax", json_object_get(v));
                } else if (streq(key, "language") && streq(cid, "default")) {
                        if (!json_object_is_type(v, json_type_string))
                                return reply_bad(req, "'%s' must be a string.", key);
                        r = json_add(p, "language", json_object_get(v));
                } else
                        return reply_bad(req, "Unknown field '%s' (a cell takes code, timeout and output_max; "
                                         "language with the default context).", key);
                if (r < 0)
                        return r;
        }
        if (json_add(p, "code", json_object_get(code)) < 0 || json_add(p, "options", TAKE_PTR(options)) < 0 ||
            (!streq(cid, "default") && json_add(p, "context", json_object_new_string(cid)) < 0))
                return -ENOMEM;
        if (!wants_events(req))
                return call_simple(req, IFACE "RunCode", TAKE_PTR(p), &whole);
        return stream_call(req, IFACE "RunCode", TAKE_PTR(p), on_run_stream);
}

/* ---- ports (http-ports.c, docs/PORTS.md) ---- */

static json_object *transform_ports(HttpRequest *req, json_object *p, unsigned *status) {
        return transform_field(p, "ports");
}

static const Simple simple_ports = { transform_ports };

static int route_ports_list(HttpRequest *req) {
        return call_simple(req, IFACE "ListPorts", params_with_id(req), &simple_ports);
}

/* /api/v1/sessions/ID/ports/PORT[/REST]: REST (with its query) to the sandbox's PORT. */
static int route_port_proxy(HttpRequest *req) {
        const char *url = http_request_url(req), *rest = url;

        /* From the seventh "/" on: past api, v1, sessions, ID, ports and PORT. */
        for (unsigned slashes = 0; rest && slashes < 7; slashes++)
                rest = strchr(rest + (slashes > 0), '/');
        return http_port_proxy(req, http_request_param(req, 0), http_request_param(req, 1), rest ?: "/");
}

/* ---- moving a hibernated sandbox (docs/SCALE-OUT.md): export, import ----
 *
 * The stream: the exported record as one line of JSON, then the archive's bytes. Both
 * ends go in parts of MOVE_PART over varlink (ExportSnapshot, ImportSnapshot), so
 * neither the bridge nor sandboxd holds more than a part of it. */

#define MOVE_META_MAX (16U * 1024U)
/* A part: what sandboxd takes at most (its varlink messages are at most 16 MiB). */
#define MOVE_PART ((size_t) FILE_PART_MAX)

typedef struct MoveTransfer {
        PartTransfer part;
        bool meta_done, failed;
        char meta[MOVE_META_MAX + 1];  /* import: the record's line, as it comes */
        size_t meta_n;
        char id[16 + 1];               /* import: the new sandbox's, from the first part */
} MoveTransfer;

static void move_transfer_free(void *p) {
        MoveTransfer *t = p;

        if (t)
                free(t->part.buf);
        free(t);
}

static json_object *export_params(HttpRequest *req, uint64_t offset, uint64_t length) {
        json_object *p = params_with_id(req);

        if (p && (json_add(p, "offset", json_object_new_int64((int64_t) offset)) < 0 ||
                  json_add(p, "length", json_object_new_int64((int64_t) length)) < 0))
                return json_object_put(p), NULL;
        return p;
}

static int on_export_chunk(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                           void *userdata) {
        MoveTransfer *t = http_request_get_data(req);

        return part_streamed(req, &t->part, parameters, error, "Export", http_request_param(req, 0));
}

static int pull_export(HttpRequest *req) {
        MoveTransfer *t = http_request_get_data(req);

        return part_pull(req, &t->part, IFACE "ExportSnapshot", export_params, on_export_chunk);
}

static int on_export_first(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                           void *userdata) {
        MoveTransfer *t = http_request_get_data(req);
        _cleanup_json_ json_object *meta = NULL;
        _cleanup_free_ uint8_t *d = NULL;
        const char *line;
        size_t n = 0;
        int r;

        if (error)
                return http_request_reply_varlink_error(req, error, parameters);
        meta = json_tokener_parse(json_object_get_string(get(parameters, "meta")));
        if (!meta || json_object_get_base64(get(parameters, "data"), &d, &n) < 0)
                return http_request_reply_errno(req, -EBADMSG);
        line = json_object_to_json_string_ext(meta, JSON_C_TO_STRING_PLAIN);
        /* Without a size, the archive is made as it is read (a sandbox hibernated on disk):
         * chunked, to its empty last part. */
        t->part.streamed = !get(parameters, "size");
        t->part.size = (uint64_t) json_object_get_int64(get(parameters, "size"));
        t->part.offset = n;
        r = http_request_stream(req, 200, "application/vnd.sandboxd.move",
                                t->part.streamed ? MHD_SIZE_UNKNOWN : strlen(line) + 1 + t->part.size, pull_export);
        if (r < 0)
                return r;
        if (http_request_stream_printf(req, "%s\n", line) < 0 || http_request_stream_write(req, d, n) < 0)
                return 0;
        if ((t->part.streamed && n == 0) || (!t->part.streamed && t->part.offset >= t->part.size))
                http_request_stream_end(req, false);
        return 0;
}

static int route_session_export(HttpRequest *req) {
        MoveTransfer *t = calloc(1, sizeof(MoveTransfer));
        json_object *p;

        if (!t)
                return -ENOMEM;
        t->part.part_max = MOVE_PART;
        http_request_set_data(req, t, move_transfer_free);
        p = export_params(req, 0, MOVE_PART);
        if (!p)
                return -ENOMEM;
        return http_backend_call(req, IFACE "ExportSnapshot", p, 0, on_export_first, NULL);
}

static int import_flush(HttpRequest *req);

static int on_import_chunk(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                           void *userdata) {
        MoveTransfer *t = http_request_get_data(req);
        _cleanup_json_ json_object *o = NULL;
        const char *id;

        t->part.in_flight = false;
        if (error) {
                /* sandboxd dropped the import (its partial file with it). */
                t->failed = true;
                return http_request_reply_varlink_error(req, error, parameters);
        }
        id = json_object_get_string(get(parameters, "id"));
        if (!id || strlen(id) != sizeof(t->id) - 1)
                return http_request_reply_errno(req, -EBADMSG);
        strcpy(t->id, id);
        if (part_written(req, &t->part))
                return 0;
        o = json_object_new_object();
        if (!o || json_add(o, "id", json_object_new_string(t->id)) < 0 ||
            json_add(o, "hibernated", json_object_new_boolean(true)) < 0 ||
            json_add(o, "bytes", json_object_new_int64((int64_t) t->part.offset)) < 0)
                return http_request_reply_errno(req, -ENOMEM);
        return http_request_reply_json(req, 201, TAKE_PTR(o));
}

static int import_flush(HttpRequest *req) {
        MoveTransfer *t = http_request_get_data(req);
        _cleanup_json_ json_object *p = json_object_new_object();

        if (!p ||
            json_add(p, "offset", json_object_new_int64((int64_t) t->part.offset)) < 0 ||
            json_add(p, "data", json_object_new_base64(t->part.buf, t->part.n)) < 0 ||
            json_add(p, "done", json_object_new_boolean(t->part.ended)) < 0)
                return -ENOMEM;
        if (t->part.offset == 0 && isempty(t->id)) {
                if (json_add(p, "meta", json_object_new_string(t->meta)) < 0)
                        return -ENOMEM;
        } else if (json_add(p, "import", json_object_new_string(t->id)) < 0)
                return -ENOMEM;
        return part_send(req, &t->part, IFACE "ImportSnapshot", TAKE_PTR(p), on_import_chunk);
}

static int import_state(HttpRequest *req, MoveTransfer **ret) {
        MoveTransfer *t = http_request_get_data(req);
        int r;

        if (!t) {
                t = calloc(1, sizeof(MoveTransfer));
                if (!t)
                        return -ENOMEM;
                http_request_set_data(req, t, move_transfer_free);
                r = part_buffer(&t->part, MOVE_PART);
                if (r < 0)
                        return r;
        }
        *ret = t;
        return 1;
}

static int import_data(HttpRequest *req, const char *data, size_t *size) {
        MoveTransfer *t = NULL;
        size_t n;
        int r = import_state(req, &t);

        if (r <= 0) {
                *size = 0;
                return r;
        }
        if (t->failed) {
                *size = 0;      /* answered already: the rest is read and dropped */
                return 0;
        }
        if (!t->meta_done) {
                const char *nl = memchr(data, '\n', *size);
                n = nl ? (size_t) (nl - data) : *size;
                if (t->meta_n + n > MOVE_META_MAX) {
                        t->failed = true;
                        *size = 0;
                        return reply_bad(req, "The stream does not start with an export's record (%s).", "meta");
                }
                memcpy(t->meta + t->meta_n, data, n);
                t->meta_n += n;
                t->meta[t->meta_n] = 0;
                if (nl) {
                        t->meta_done = true;
                        n++;
                }
                *size -= n;
                return 0;
        }
        return part_take(req, &t->part, data, size, import_flush);
}

static int route_session_import(HttpRequest *req) {
        MoveTransfer *t = NULL;
        int r = import_state(req, &t);

        if (r <= 0)
                return r;
        if (t->failed)
                return 0;
        if (!t->meta_done)
                return reply_bad(req, "The stream does not start with an export's record (%s).", "meta");
        return part_end(req, &t->part, import_flush);   /* on_import_chunk answers */
}

/* ---- the table ---- */

#define S "/api/v1/sessions/{}"

const HttpRoute http_routes[] = {
        { "GET",    "/healthz",                       HTTP_ROUTE_PUBLIC, route_healthz },
        { "GET",    "/metrics",                       0, route_metrics },
        { "GET",    "/api/v1/openapi.json",           HTTP_ROUTE_PUBLIC, route_openapi },
        { "POST",   "/api/v1/sessions",               HTTP_ROUTE_JSON_BODY, route_session_create },
        { "GET",    "/api/v1/sessions",               0, route_session_list },
        { "GET",    S,                                0, route_session_get },
        { "DELETE", S,                                0, route_session_delete },
        { "POST",   S "/pause",                       HTTP_ROUTE_JSON_BODY, route_session_pause },
        { "POST",   S "/resume",                      HTTP_ROUTE_JSON_BODY, route_session_resume },
        { "POST",   S "/timeout",                     HTTP_ROUTE_JSON_BODY, route_session_timeout },
        { "POST",   S "/snapshot",                    HTTP_ROUTE_JSON_BODY, route_session_snapshot },
        { "POST",   S "/fork",                        HTTP_ROUTE_JSON_BODY, route_session_fork },
        { "POST",   S "/hibernate",                   HTTP_ROUTE_JSON_BODY, route_session_hibernate },
        { "POST",   S "/wake",                        HTTP_ROUTE_JSON_BODY, route_session_wake },
        { "GET",    S "/export",                      0, route_session_export },
        { "POST",   "/api/v1/sessions/import",        HTTP_ROUTE_UPLOAD, route_session_import, import_data },
        { "POST",   S "/execute",                     HTTP_ROUTE_JSON_BODY, route_execute },
        { "GET",    S "/status",                      0, route_status },
        { "GET",    S "/result",                      0, route_result },
        { "GET",    S "/executions/{}",               0, route_execution_get },
        { "GET",    S "/executions/{}/logs",          0, route_execution_logs },
        { "DELETE", S "/executions/{}",               0, route_execution_kill },
        { "GET",    S "/terminal",                    0, http_route_terminal },
        { "GET",    S "/metrics",                     0, route_session_metrics },
        { "GET",    "/console",                       HTTP_ROUTE_PUBLIC, http_route_console },
        { "GET",    "/console/{}",                    HTTP_ROUTE_PUBLIC, http_route_console_file },
        { "POST",   S "/executions/{}/signal",        HTTP_ROUTE_JSON_BODY, route_execution_signal },
        { "POST",   S "/executions/{}/stdin",         HTTP_ROUTE_JSON_BODY, route_execution_stdin },
        { "POST",   S "/executions/{}/stdin/close",   HTTP_ROUTE_JSON_BODY, route_execution_stdin_close },
        { "GET",    S "/logs",                        0, route_logs },
        { "POST",   S "/contexts",                    HTTP_ROUTE_JSON_BODY, route_context_create },
        { "GET",    S "/contexts",                    0, route_contexts_list },
        { "DELETE", S "/contexts/{}",                 0, route_context_delete },
        { "POST",   S "/contexts/{}/run",             HTTP_ROUTE_JSON_BODY, route_context_run },
        { "POST",   S "/contexts/{}/interrupt",       HTTP_ROUTE_JSON_BODY, route_context_interrupt },
        { "POST",   S "/contexts/{}/restart",         HTTP_ROUTE_JSON_BODY, route_context_restart },
        { "GET",    S "/files",                       0, route_file_get },
        { "PUT",    S "/files",                       HTTP_ROUTE_UPLOAD, route_file_put, upload_data },
        { "DELETE", S "/files",                       0, route_file_delete },
        { "GET",    S "/files/list",                  0, route_file_list },
        { "POST",   S "/files/mkdir",                 HTTP_ROUTE_JSON_BODY, route_file_mkdir },
        { "POST",   S "/files/move",                  HTTP_ROUTE_JSON_BODY, route_file_move },
        { "GET",    S "/ports",                       0, route_ports_list },
        { "GET",    S "/watch",                       0, route_watch },
        { "GET",    S "/ports/{}/{...}",              HTTP_ROUTE_RAW_BODY, route_port_proxy },
        { "POST",   S "/ports/{}/{...}",              HTTP_ROUTE_RAW_BODY, route_port_proxy },
        { "PUT",    S "/ports/{}/{...}",              HTTP_ROUTE_RAW_BODY, route_port_proxy },
        { "PATCH",  S "/ports/{}/{...}",              HTTP_ROUTE_RAW_BODY, route_port_proxy },
        { "DELETE", S "/ports/{}/{...}",              HTTP_ROUTE_RAW_BODY, route_port_proxy },
        { "GET",    "/api/v1/templates",              0, route_templates_list },
        { "GET",    "/api/v1/quota",                  0, route_quota },
        { "GET",    "/api/v1/secrets",                0, route_secrets_list },
        { "PUT",    "/api/v1/secrets/{}",             HTTP_ROUTE_JSON_BODY, route_secret_put },
        { "DELETE", "/api/v1/secrets/{}",             0, route_secret_delete },
        { "POST",   "/api/v1/templates",              HTTP_ROUTE_JSON_BODY, route_template_create },
        { "DELETE", "/api/v1/templates/{}",           0, route_template_delete },
        { "GET",    "/api/v1/snapshots",              0, route_snapshots_list },
        { "DELETE", "/api/v1/snapshots/{}",           0, route_snapshot_delete },
        { "GET",    "/api/v1/containers",             0, route_session_list },
        { "GET",    "/api/v1/containers/{}",          0, route_session_get },
        { "GET",    "/api/v1/containers/{}/logs",     0, route_logs },
        { "POST",   "/mcp",                           HTTP_ROUTE_UPLOAD, http_mcp_post, http_mcp_upload },
};

const size_t http_n_routes = ELEMENTSOF(http_routes);
