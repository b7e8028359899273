/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* JSON-RPC 2.0 and MCP's lifecycle: a message in, at most one response out. The tools
 * themselves are in mcp-tools.c, their requests and varlink calls in mcp-request.c. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "json-util.h"
#include "list.h"
#include "mcp-internal.h"

/* Deep enough for any tool's arguments; a deeper message is not one of ours. */
#define MCP_JSON_DEPTH_MAX 64

/* Newest first: initialize answers the client's own if it is here, else the first. */
static const char *const protocol_versions[] = {
        MCP_PROTOCOL_VERSION_LATEST,
        "2025-06-18",
        "2025-03-26",
};

struct McpSession {
        McpServer *server;
        char *tenant;
        const char *protocol_version;   /* one of protocol_versions, NULL before initialize */
        McpRequest *pending;
        bool notify;                    /* send() takes notifications while requests are pending */
};

bool mcp_protocol_version_supported(const char *version) {
        for (size_t i = 0; i < ELEMENTSOF(protocol_versions); i++)
                if (streq_ptr(version, protocol_versions[i]))
                        return true;
        return false;
}

static const char *protocol_version_negotiate(const char *asked) {
        for (size_t i = 0; i < ELEMENTSOF(protocol_versions); i++)
                if (streq_ptr(asked, protocol_versions[i]))
                        return protocol_versions[i];
        return protocol_versions[0];
}

/* ---- server and session ---- */

int mcp_server_new(McpServer **ret, sd_event *event, const char *varlink_address) {
        McpServer *m;
        int r;

        m = calloc(1, sizeof(McpServer));
        if (!m)
                return -ENOMEM;
        m->n_ref = 1;
        m->default_lifetime_sec = MCP_DEFAULT_LIFETIME_SEC;
        m->varlink_address = strdup(varlink_address ?: MCP_VARLINK_ADDRESS_DEFAULT);
        if (!m->varlink_address) {
                free(m);
                return -ENOMEM;
        }
        if (event)
                m->event = sd_event_ref(event);
        else {
                r = sd_event_default(&m->event);
                if (r < 0) {
                        free(m->varlink_address);
                        free(m);
                        return r;
                }
        }
        *ret = m;
        return 0;
}

void mcp_server_set_default_lifetime(McpServer *m, uint64_t sec) {
        m->default_lifetime_sec = sec;
}

bool mcp_server_is_busy(McpServer *m) {
        return m->n_cleanups > 0;
}

McpServer *mcp_server_ref(McpServer *m) {
        if (m)
                m->n_ref++;
        return m;
}

McpServer *mcp_server_unref(McpServer *m) {
        if (!m || --m->n_ref > 0)
                return NULL;
        sd_event_unref(m->event);
        free(m->varlink_address);
        return mfree(m);
}

int mcp_session_new(McpServer *m, const char *tenant, McpSession **ret) {
        McpSession *s;

        s = calloc(1, sizeof(McpSession));
        if (!s)
                return -ENOMEM;
        if (tenant && *tenant) {
                s->tenant = strdup(tenant);
                if (!s->tenant) {
                        free(s);
                        return -ENOMEM;
                }
        }
        s->server = mcp_server_ref(m);
        *ret = s;
        return 0;
}

McpSession *mcp_session_free(McpSession *s) {
        if (!s)
                return NULL;
        /* Pending requests answer on their own: they hold the server and their tenant. */
        for (McpRequest *r = s->pending; r; r = r->next)
                r->session = NULL;
        mcp_server_unref(s->server);
        free(s->tenant);
        return mfree(s);
}

int mcp_session_set_protocol_version(McpSession *s, const char *version) {
        if (!version)
                version = MCP_PROTOCOL_VERSION_DEFAULT_HTTP;
        if (!mcp_protocol_version_supported(version))
                return -EPROTONOSUPPORT;
        s->protocol_version = protocol_version_negotiate(version);
        return 0;
}

const char *mcp_session_get_protocol_version(McpSession *s) {
        return s->protocol_version;
}

void mcp_session_set_notify(McpSession *s, bool b) {
        s->notify = b;
}

unsigned mcp_session_n_pending(McpSession *s) {
        unsigned n = 0;

        for (McpRequest *r = s->pending; r; r = r->next)
                n++;
        return n;
}

void mcp_session_forget_request(McpSession *s, McpRequest *r) {
        if (s)
                LIST_REMOVE(s->pending, r);
}

/* ---- JSON-RPC ---- */

/* {"jsonrpc":"2.0","id":id,"error":{"code":code,"message":message}}; id NULL is null. */
static json_object *jsonrpc_error_new(json_object *id, int code, const char *message) {
        _cleanup_json_ json_object *m = json_object_new_object(), *e = json_object_new_object();

        if (!m || !e ||
            json_add(e, "code", json_object_new_int(code)) < 0 ||
            json_add(e, "message", json_object_new_string(message)) < 0 ||
            json_add(m, "jsonrpc", json_object_new_string("2.0")) < 0 ||
            json_object_object_add(m, "id", json_object_get(id)) < 0 ||
            json_add(m, "error", TAKE_PTR(e)) < 0)
                return NULL;
        return TAKE_PTR(m);
}

json_object *mcp_jsonrpc_result_new(json_object *id, json_object *result) {
        _cleanup_json_ json_object *m = json_object_new_object();

        if (!m || !result ||
            json_add(m, "jsonrpc", json_object_new_string("2.0")) < 0 ||
            json_object_object_add(m, "id", json_object_get(id)) < 0 ||
            json_add(m, "result", json_object_get(result)) < 0)
                return NULL;
        return TAKE_PTR(m);
}

/* Sends m (taken); -ENOMEM if it could not be made. */
static int send_message(json_object *m, mcp_send_t send, void *userdata) {
        if (!m)
                return -ENOMEM;
        send(m, userdata);
        json_object_put(m);
        return MCP_HANDLE_REPLIED;
}

static int reply_error(json_object *id, int code, const char *message, mcp_send_t send, void *userdata) {
        return send_message(jsonrpc_error_new(id, code, message), send, userdata);
}

static int reply_result(json_object *id, json_object *result, mcp_send_t send, void *userdata) {
        _cleanup_json_ json_object *res = result;

        return send_message(mcp_jsonrpc_result_new(id, res), send, userdata);
}

static bool jsonrpc_id_is_valid(json_object *id) {
        /* MCP: a string or an integer, never null. */
        return json_object_is_type(id, json_type_string) || json_object_is_type(id, json_type_int);
}

/* ---- methods ---- */

static json_object *initialize_result(const char *version) {
        _cleanup_json_ json_object *res = json_object_new_object(), *caps = json_object_new_object(),
                                   *tools = json_object_new_object(), *info = json_object_new_object();

        if (!res || !caps || !tools || !info ||
            json_add(tools, "listChanged", json_object_new_boolean(false)) < 0 ||
            json_add(caps, "tools", TAKE_PTR(tools)) < 0 ||
            json_add(info, "name", json_object_new_string("sandboxd-mcp")) < 0 ||
            json_add(info, "title", json_object_new_string("sandboxd")) < 0 ||
            json_add(info, "version", json_object_new_string(PACKAGE_VERSION)) < 0 ||
            json_add(res, "protocolVersion", json_object_new_string(version)) < 0 ||
            json_add(res, "capabilities", TAKE_PTR(caps)) < 0 ||
            json_add(res, "serverInfo", TAKE_PTR(info)) < 0 ||
            json_add(res, "instructions", json_object_new_string(
                    "Isolated Linux sandboxes on this machine (sandboxd). run_code runs a snippet of "
                    "Python, Node.js or bash once in a fresh sandbox. For state across calls, "
                    "sandbox_create one, then run_command and the file_* tools on its sandbox_id "
                    "(paths relative to /work), and sandbox_destroy it when done. Output is cut at "
                    "64 KiB per stream; the result says so.")) < 0)
                return NULL;
        return TAKE_PTR(res);
}

static int method_initialize(McpSession *s, json_object *id, json_object *params, mcp_send_t send,
                             void *userdata) {
        json_object *v;

        if (!params || !json_object_object_get_ex(params, "protocolVersion", &v) ||
            !json_object_is_type(v, json_type_string))
                return reply_error(id, JSONRPC_INVALID_PARAMS, "initialize needs params.protocolVersion (a string)",
                                   send, userdata);
        s->protocol_version = protocol_version_negotiate(json_object_get_string(v));
        return reply_result(id, initialize_result(s->protocol_version), send, userdata);
}

static int method_ping(McpSession *s, json_object *id, json_object *params, mcp_send_t send, void *userdata) {
        return reply_result(id, json_object_new_object(), send, userdata);
}

json_object *mcp_tools_list(void) {
        _cleanup_json_ json_object *res = json_object_new_object(), *l = json_object_new_array();

        if (!res || !l)
                return NULL;
        for (const McpTool *t = mcp_tools; t->name; t++) {
                json_object *d = mcp_tool_describe(t);
                if (!d || json_object_array_add(l, d) < 0) {
                        json_object_put(d);
                        return NULL;
                }
        }
        if (json_add(res, "tools", TAKE_PTR(l)) < 0)
                return NULL;
        return TAKE_PTR(res);
}

static int method_tools_list(McpSession *s, json_object *id, json_object *params, mcp_send_t send,
                             void *userdata) {
        return reply_result(id, mcp_tools_list(), send, userdata);
}


static int method_tools_call(McpSession *s, json_object *id, json_object *params, mcp_send_t send,
                             void *userdata, McpRequest **ret_request) {
        _cleanup_json_ json_object *empty = NULL;
        const McpTool *tool;
        json_object *name, *args = NULL;
        McpRequest *r;
        int k;

        if (!params || !json_object_object_get_ex(params, "name", &name) ||
            !json_object_is_type(name, json_type_string))
                return reply_error(id, JSONRPC_INVALID_PARAMS, "tools/call needs params.name (a string)", send,
                                   userdata);
        tool = mcp_tool_find(json_object_get_string(name));
        if (!tool) {
                _cleanup_free_ char *msg = NULL;
                if (asprintf(&msg, "Unknown tool: %.64s", json_object_get_string(name)) < 0)
                        return -ENOMEM;
                return reply_error(id, JSONRPC_INVALID_PARAMS, msg, send, userdata);
        }
        if (json_object_object_get_ex(params, "arguments", &args) && args &&
            !json_object_is_type(args, json_type_object))
                return reply_error(id, JSONRPC_INVALID_PARAMS, "params.arguments must be an object", send, userdata);
        if (!args) {
                args = empty = json_object_new_object();
                if (!args)
                        return -ENOMEM;
        }
        k = mcp_request_start(s->server, s->tenant, id, tool, args, send, userdata, &r);
        if (k < 0)
                return k;
        if (k == MCP_HANDLE_PENDING) {
                json_object *meta, *token;
                r->session = s;
                LIST_PREPEND(s->pending, r);
                /* A progressToken is a string or an integer (as an id is). */
                if (s->notify && json_object_object_get_ex(params, "_meta", &meta) &&
                    json_object_is_type(meta, json_type_object) &&
                    json_object_object_get_ex(meta, "progressToken", &token) && jsonrpc_id_is_valid(token))
                        /* Without it (no memory) the call still runs; only unannounced. */
                        (void) mcp_request_start_progress(r, token);
                if (ret_request)
                        *ret_request = r;
        }
        return k;
}

/* notifications/cancelled: the request is dropped, and no response sent (as the spec says). */
static void notification_cancelled(McpSession *s, json_object *params) {
        json_object *rid;

        if (!params || !json_object_object_get_ex(params, "requestId", &rid))
                return;
        for (McpRequest *r = s->pending; r; r = r->next)
                if (json_object_equal(r->id, rid)) {
                        mcp_request_cancel(r);
                        return;
                }
}

static int handle_message(McpSession *s, json_object *m, mcp_send_t send, void *userdata, McpRequest **ret_request) {
        json_object *v, *id = NULL, *params = NULL;
        const char *method;
        bool has_id;

        if (!json_object_is_type(m, json_type_object))
                /* A batch (2025-03-26 allowed them; later revisions do not): one error. */
                return reply_error(NULL, JSONRPC_INVALID_REQUEST,
                                   json_object_is_type(m, json_type_array) ? "batches are not supported"
                                                                           : "a message is a JSON object",
                                   send, userdata);
        has_id = json_object_object_get_ex(m, "id", &id);
        if (!json_object_object_get_ex(m, "jsonrpc", &v) || !json_object_is_type(v, json_type_string) ||
            !streq(json_object_get_string(v), "2.0"))
                return reply_error(has_id && jsonrpc_id_is_valid(id) ? id : NULL, JSONRPC_INVALID_REQUEST,
                                   "jsonrpc must be \"2.0\"", send, userdata);
        if (!json_object_object_get_ex(m, "method", &v)) {
                /* A response to a request of ours: we send none, so it is dropped. */
                if (has_id && (json_object_object_get_ex(m, "result", NULL) ||
                               json_object_object_get_ex(m, "error", NULL)))
                        return MCP_HANDLE_NO_REPLY;
                return reply_error(has_id && jsonrpc_id_is_valid(id) ? id : NULL, JSONRPC_INVALID_REQUEST,
                                   "a request needs a method", send, userdata);
        }
        if (!json_object_is_type(v, json_type_string))
                return reply_error(has_id && jsonrpc_id_is_valid(id) ? id : NULL, JSONRPC_INVALID_REQUEST,
                                   "method must be a string", send, userdata);
        method = json_object_get_string(v);
        if (has_id && !jsonrpc_id_is_valid(id))
                return reply_error(NULL, JSONRPC_INVALID_REQUEST, "id must be a string or an integer", send,
                                   userdata);
        if (json_object_object_get_ex(m, "params", &params) && params &&
            !json_object_is_type(params, json_type_object)) {
                if (!has_id)
                        return MCP_HANDLE_NO_REPLY;
                return reply_error(id, JSONRPC_INVALID_PARAMS, "params must be an object", send, userdata);
        }

        if (!has_id) {
                /* Notifications get no response, not even an error. Requests before
                 * notifications/initialized are served: a client that sends them is
                 * answered rather than refused. */
                if (streq(method, "notifications/cancelled"))
                        notification_cancelled(s, params);
                return MCP_HANDLE_NO_REPLY;
        }

        if (streq(method, "initialize"))
                return method_initialize(s, id, params, send, userdata);
        if (streq(method, "ping"))
                return method_ping(s, id, params, send, userdata);
        if (streq(method, "tools/list"))
                return method_tools_list(s, id, params, send, userdata);
        if (streq(method, "tools/call"))
                return method_tools_call(s, id, params, send, userdata, ret_request);
        return reply_error(id, JSONRPC_METHOD_NOT_FOUND, "Method not found", send, userdata);
}

int mcp_session_handle(McpSession *s, const char *text, size_t size, mcp_send_t send, void *userdata,
                       McpRequest **ret_request) {
        _cleanup_json_ json_object *m = NULL;
        _cleanup_free_ char *copy = NULL;
        int r;

        if (ret_request)
                *ret_request = NULL;
        /* json_parse_strict() wants the NUL after the text; text need not have one (not
         * strndup(), which may read text up to a NUL). */
        copy = malloc(size + 1);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, text, size);
        copy[size] = 0;
        r = json_parse_strict(copy, size, MCP_JSON_DEPTH_MAX, &m);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                /* An id json-c would clamp (beyond 64 bits) is refused here, not altered: the
                 * client could not match the reply to its request. */
                _cleanup_free_ char *message = NULL;
                if (asprintf(&message, "Parse error: %s", json_strict_strerror(r)) < 0)
                        return -ENOMEM;
                return reply_error(NULL, JSONRPC_PARSE_ERROR, message, send, userdata);
        }
        return handle_message(s, m, send, userdata, ret_request);
}
