/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A tools/call in flight: its own varlink connection to sandboxd (replies on one connection
 * come in order, so concurrent calls each have theirs), the step its next reply goes to,
 * and its result as MCP wants it. */

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "mcp-internal.h"

static McpRequest *request_free(McpRequest *r) {
        VarlinkClient *c;

        if (!r)
                return NULL;
        if (r->finished)
                *r->finished = true;
        mcp_session_forget_request(r->session, r);
        /* Its outstanding call learns of the end from within the unref: the reply callback
         * sees r->varlink no longer its client and leaves r alone. */
        c = TAKE_PTR(r->varlink);
        varlink_client_unref(c);
        sd_event_source_disable_unref(r->progress_timer);
        if (r->cancelled)
                r->server->n_cleanups--;
        json_object_put(r->progress_token);
        json_object_put(r->id);
        json_object_put(r->args);
        json_object_put(r->scratch);
        free(r->sandbox_id);
        free(r->tenant);
        mcp_server_unref(r->server);
        return mfree(r);
}

/* ActForTenant's reply: a refusal shows in Destroy's (NoSuchSandbox), which no one reads. */
static int on_acting(VarlinkClient *c, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                     void *userdata) {
        return 0;
}

static int on_cleaned_up(VarlinkClient *c, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                        void *userdata) {
        McpServer *m = userdata;

        if (flags & VARLINK_REPLY_CONTINUES)
                return 0;
        m->n_cleanups--;
        mcp_server_unref(m);
        varlink_client_unref(c);   /* the dispatch holds its own reference */
        return 0;
}

/* A call of r's cleanup (Destroy of its sandbox, a Signal to its process) on a connection
 * of its own (r's may be busy with the command, whose reply would come first), acting for
 * r's tenant; it closes once sandboxd answered. */
static int request_side_call(McpRequest *r, const char *method, json_object *parameters) {
        _cleanup_(varlink_client_unrefp) VarlinkClient *c = NULL;
        _cleanup_json_ json_object *p = parameters;
        int k;

        if (!p)
                return -ENOMEM;
        k = varlink_client_connect_address(&c, r->server->varlink_address);
        if (k < 0)
                return k;
        k = varlink_client_attach_event(c, r->server->event, 0);
        if (k < 0)
                return k;
        if (r->tenant) {
                _cleanup_json_ json_object *t = json_object_new_object();
                if (!t || json_add(t, "tenant", json_object_new_string(r->tenant)) < 0)
                        return -ENOMEM;
                k = varlink_client_call_async(c, VARLINK_IFACE ".ActForTenant", t, 0, on_acting, NULL);
                if (k < 0)
                        return k;
        }
        k = varlink_client_call_async(c, method, p, 0, on_cleaned_up, mcp_server_ref(r->server));
        if (k < 0) {
                mcp_server_unref(r->server);
                return k;
        }
        r->server->n_cleanups++;
        TAKE_PTR(c);   /* on_cleaned_up's now */
        return 0;
}

static int request_destroy_sandbox(McpRequest *r) {
        _cleanup_json_ json_object *p = json_object_new_object();

        if (!p || json_add(p, "id", json_object_new_string(r->sandbox_id)) < 0)
                return -ENOMEM;
        return request_side_call(r, VARLINK_IFACE ".Destroy", TAKE_PTR(p));
}

/* SIGKILL to the process group of r's process: the command and what it started. */
static int request_kill_process(McpRequest *r) {
        _cleanup_json_ json_object *p = json_object_new_object();

        if (!p || json_add(p, "id", json_object_new_string(r->sandbox_id)) < 0 ||
            json_add(p, "process", json_object_new_uint64(r->process)) < 0 ||
            json_add(p, "signal", json_object_new_int(9)) < 0)
                return -ENOMEM;
        return request_side_call(r, VARLINK_IFACE ".Signal", TAKE_PTR(p));
}

void mcp_request_cancel(McpRequest *r) {
        if (!r)
                return;
        if ((r->tool->one_off && !r->sandbox_id && r->step) ||
            (r->tool->kills_on_cancel && r->process == 0 && r->step)) {
                /* Its sandbox or its process is being made: ended once sandboxd says which it
                 * is (on_varlink_reply()). Nothing is sent, and the session forgets it now. */
                r->cancelled = true;
                r->server->n_cleanups++;
                mcp_session_forget_request(r->session, r);
                r->session = NULL;
                r->progress_timer = sd_event_source_disable_unref(r->progress_timer);
                return;
        }
        if (r->tool->one_off && r->sandbox_id && !r->sandbox_given)
                (void) request_destroy_sandbox(r);
        else if (r->tool->kills_on_cancel && r->process > 0)
                (void) request_kill_process(r);
        request_free(r);
}

/* ---- results ---- */

static json_object *text_content_new(const char *text) {
        _cleanup_json_ json_object *c = json_object_new_object();

        if (!c ||
            json_add(c, "type", json_object_new_string("text")) < 0 ||
            json_add(c, "text", json_object_new_string(text)) < 0)
                return NULL;
        return TAKE_PTR(c);
}

static json_object *tool_result_new(json_object *structured, const char *text, const char *note, bool is_error) {
        _cleanup_json_ json_object *res = json_object_new_object(), *content = json_object_new_array();

        if (!res || !content ||
            json_object_array_add(content, text_content_new(text)) < 0 ||
            (note && json_object_array_add(content, text_content_new(note)) < 0) ||
            json_add(res, "content", TAKE_PTR(content)) < 0 ||
            (structured && json_add(res, "structuredContent", json_object_get(structured)) < 0) ||
            json_add(res, "isError", json_object_new_boolean(is_error)) < 0)
                return NULL;
        return TAKE_PTR(res);
}

static int request_send_result(McpRequest *r, json_object *result) {
        _cleanup_json_ json_object *res = result, *m = NULL;

        if (!res)
                return -ENOMEM;
        m = mcp_jsonrpc_result_new(r->id, res);
        if (!m)
                return -ENOMEM;
        r->send(m, r->userdata);
        request_free(r);
        return 0;
}

static int request_finish_full(McpRequest *r, json_object *structured, const char *text, const char *note,
                               bool is_error) {
        return request_send_result(r, tool_result_new(structured, text, note, is_error));
}

int mcp_request_finish(McpRequest *r, json_object *structured, const char *text, bool is_error) {
        return request_finish_full(r, structured, text, NULL, is_error);
}

int mcp_request_finish_structured(McpRequest *r, json_object *structured, const char *note, bool is_error) {
        const char *text;

        text = json_object_to_json_string_ext(structured, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text)
                return -ENOMEM;
        return request_finish_full(r, structured, text, note, is_error);
}

int mcp_request_finish_content(McpRequest *r, json_object *structured, const char *note, json_object *extra,
                               bool is_error) {
        _cleanup_json_ json_object *res = NULL;
        json_object *content;
        const char *text;

        text = json_object_to_json_string_ext(structured, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text)
                return -ENOMEM;
        res = tool_result_new(structured, text, note, is_error);
        if (!res || !json_object_object_get_ex(res, "content", &content))
                return -ENOMEM;
        for (size_t i = 0; extra && i < json_object_array_length(extra); i++)
                if (json_object_array_add(content, json_object_get(json_object_array_get_idx(extra, i))) < 0)
                        return -ENOMEM;
        return request_send_result(r, TAKE_PTR(res));
}

int mcp_request_finish_errorf(McpRequest *r, const char *format, ...) {
        _cleanup_free_ char *text = NULL;
        va_list ap;
        int k;

        va_start(ap, format);
        k = vasprintf(&text, format, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        return mcp_request_finish(r, NULL, text, true);
}

/* "NoSuchSandbox: no sandbox has that id", as the model reads it. */
int mcp_request_finish_varlink_error(McpRequest *r, json_object *parameters, const char *error) {
        json_object *v;
        const char *name = error, *message = NULL;

        if (streq(error, VARLINK_ERROR_DISCONNECTED))
                return mcp_request_finish_errorf(r, "sandboxd closed the connection before it answered");
        if (startswith_str(name, VARLINK_IFACE "."))
                name += strlen(VARLINK_IFACE ".");
        if (parameters && json_object_object_get_ex(parameters, "errnoName", &v) && streq(name, "SystemError"))
                name = json_object_get_string(v);
        if (parameters && json_object_object_get_ex(parameters, "message", &v))
                message = json_object_get_string(v);
        else if (parameters && json_object_object_get_ex(parameters, "parameter", &v))
                return mcp_request_finish_errorf(r, "sandboxd refused parameter %s (%s)", json_object_get_string(v),
                                                 name);
        return mcp_request_finish_errorf(r, "%s%s%s", name, message ? ": " : "", strempty(message));
}

/* ---- varlink ---- */

static int on_varlink_reply(VarlinkClient *c, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                            void *userdata) {
        McpRequest *r = userdata;
        mcp_step_t step;
        int k;

        if (r->varlink != c || (flags & VARLINK_REPLY_CONTINUES))
                return 0;
        if (r->cancelled) {
                json_object *id;
                /* CreateSandbox's or Start's reply (ActForTenant's has neither: nothing made
                 * yet). */
                if (!error && r->tool->one_off && json_object_object_get_ex(parameters, "id", &id) &&
                    json_object_is_type(id, json_type_string) && (r->sandbox_id = strdup(json_object_get_string(id))))
                        (void) request_destroy_sandbox(r);
                if (!error && r->tool->kills_on_cancel && json_object_object_get_ex(parameters, "process", &id) &&
                    (r->process = (uint64_t) json_object_get_int64(id)) > 0)
                        (void) request_kill_process(r);
                request_free(r);
                return 0;
        }
        step = TAKE_PTR(r->step);
        k = step(r, parameters, error);
        if (k < 0)
                (void) mcp_request_finish_errorf(r, "sandboxd-mcp failed: %s", strerror(-k));
        return 0;
}

int mcp_request_call(McpRequest *r, const char *method, json_object *parameters, mcp_step_t step) {
        _cleanup_json_ json_object *p = parameters;
        _cleanup_free_ char *full = NULL;

        if (!p)
                return -ENOMEM;
        if (asprintf(&full, VARLINK_IFACE ".%s", method) < 0)
                return -ENOMEM;
        r->step = step;
        return varlink_client_call_async(r->varlink, full, p, 0, on_varlink_reply, r);
}

/* ---- progress ---- */

static int on_progress_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        McpRequest *r = userdata;
        _cleanup_json_ json_object *m = json_object_new_object(), *p = json_object_new_object();
        _cleanup_free_ char *text = NULL;

        r->progress++;
        if (asprintf(&text, "%s: running for %" PRIu64 " s", r->tool->name,
                     r->progress * MCP_PROGRESS_INTERVAL_USEC / 1000000U) < 0)
                return -ENOMEM;
        /* progress grows with each, as the spec wants; there is no total to say. */
        if (!m || !p ||
            json_add(p, "progressToken", json_object_get(r->progress_token)) < 0 ||
            json_add(p, "progress", json_object_new_uint64(r->progress)) < 0 ||
            json_add(p, "message", json_object_new_string(text)) < 0 ||
            json_add(m, "jsonrpc", json_object_new_string("2.0")) < 0 ||
            json_add(m, "method", json_object_new_string("notifications/progress")) < 0 ||
            json_add(m, "params", TAKE_PTR(p)) < 0)
                return -ENOMEM;
        r->send(m, r->userdata);
        if (sd_event_source_set_time_relative(s, MCP_PROGRESS_INTERVAL_USEC) < 0)
                return 0;   /* no more of them; the call runs on */
        return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

int mcp_request_start_progress(McpRequest *r, json_object *token) {
        int k;

        k = sd_event_add_time_relative(r->server->event, &r->progress_timer, CLOCK_MONOTONIC,
                                       MCP_PROGRESS_INTERVAL_USEC, 0, on_progress_timer, r);
        if (k < 0)
                return k;
        r->progress_token = json_object_get(token);
        return 0;
}

/* ---- arguments ---- */

json_object *mcp_arg(McpRequest *r, const char *name) {
        json_object *v;

        if (!json_object_object_get_ex(r->args, name, &v) || json_object_is_type(v, json_type_null))
                return NULL;
        return v;
}

bool mcp_arg_has(McpRequest *r, const char *name) {
        return mcp_arg(r, name);
}

const char *mcp_arg_string(McpRequest *r, const char *name) {
        json_object *v = mcp_arg(r, name);

        return v ? json_object_get_string(v) : NULL;
}

int64_t mcp_arg_int(McpRequest *r, const char *name, int64_t fallback) {
        json_object *v = mcp_arg(r, name);

        return v ? json_object_get_int64(v) : fallback;
}

bool mcp_arg_bool(McpRequest *r, const char *name, bool fallback) {
        json_object *v = mcp_arg(r, name);

        return v ? json_object_get_boolean(v) : fallback;
}

/* ---- start ---- */

static int run_tool(McpRequest *r) {
        return r->tool->run(r);
}

/* A session bound to a tenant: its connection acts for the tenant first (ActForTenant),
 * so that sandboxd shows it that tenant's sandboxes only and creates for it, as for any
 * front end that acts for a tenant. */
static int step_acting(McpRequest *r, json_object *parameters, const char *error) {
        if (error)
                return mcp_request_finish_varlink_error(r, parameters, error);
        return run_tool(r);
}

static int request_begin(McpRequest *r) {
        _cleanup_free_ char *message = NULL;
        int k;

        k = mcp_tool_check_args(r->tool, r->args, &message);
        if (k == -EINVAL)
                return mcp_request_finish_errorf(r, "Invalid arguments for %s: %s", r->tool->name, message);
        if (k < 0)
                return k;
        if (r->tool->on_sandbox) {
                r->sandbox_id = strdup(mcp_arg_string(r, "sandbox_id"));
                if (!r->sandbox_id)
                        return -ENOMEM;
        }

        k = varlink_client_connect_address(&r->varlink, r->server->varlink_address);
        if (k < 0)
                return mcp_request_finish_errorf(r, "Cannot reach sandboxd at %s: %s (is sandboxd-varlink.socket "
                                                 "running?)", r->server->varlink_address, strerror(-k));
        k = varlink_client_attach_event(r->varlink, r->server->event, 0);
        if (k < 0)
                return k;

        if (r->tenant) {
                _cleanup_json_ json_object *p = json_object_new_object();
                if (!p || json_add(p, "tenant", json_object_new_string(r->tenant)) < 0)
                        return -ENOMEM;
                return mcp_request_call(r, "ActForTenant", TAKE_PTR(p), step_acting);
        }
        return run_tool(r);
}

int mcp_request_start(McpServer *m, const char *tenant, json_object *id, const McpTool *tool, json_object *args,
                      mcp_send_t send, void *userdata, McpRequest **ret) {
        bool finished = false;
        McpRequest *r;
        int k;

        r = calloc(1, sizeof(McpRequest));
        if (!r)
                return -ENOMEM;
        *r = (McpRequest) {
                .server = mcp_server_ref(m),
                .id = json_object_get(id),
                .tool = tool,
                .args = json_object_get(args),
                .send = send,
                .userdata = userdata,
        };
        if (tenant) {
                r->tenant = strdup(tenant);
                if (!r->tenant) {
                        request_free(r);
                        return -ENOMEM;
                }
        }
        /* It may finish before its first varlink call (bad arguments, sandboxd unreachable):
         * then it is freed, and says so here. */
        r->finished = &finished;
        k = request_begin(r);
        if (finished)
                return MCP_HANDLE_REPLIED;
        r->finished = NULL;
        if (k < 0) {
                /* A fault of ours, answered as a tool error. */
                (void) mcp_request_finish_errorf(r, "sandboxd-mcp failed: %s", strerror(-k));
                return MCP_HANDLE_REPLIED;
        }
        *ret = r;
        return MCP_HANDLE_PENDING;
}
