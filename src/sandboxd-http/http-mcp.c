/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* POST /mcp: the MCP tools (src/mcp, the same as sandboxd-mcp's over stdio) over
 * Streamable HTTP, stateless: each POST is one JSON-RPC message of a session of its own,
 * for the bearer token's tenant. A request is answered with its JSON-RPC response (as
 * application/json, or as one server-sent event when the client accepts only
 * text/event-stream); a notification or a response with 202 and no body. No GET stream
 * (405: the server sends nothing unasked) and no Mcp-Session-Id. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http-mcp.h"
#include "http.h"
#include "json-util.h"
#include "mcp.h"

/* A JSON-RPC message: a file_write of 8 MiB, as base64 in JSON, fits. */
#define HTTP_MCP_BODY_MAX (16U * 1024U * 1024U)

typedef struct McpPost {
        char *body;
        size_t size;
        McpRequest *pending;     /* cancelled if the HTTP request goes first */
        bool sse;                /* the client accepts only text/event-stream */
} McpPost;

static McpServer *mcp_server;   /* the tools, bound to the bridge's loop and varlink address */

static void mcp_post_free(void *p) {
        McpPost *m = p;

        if (m->pending)
                mcp_request_cancel(m->pending);
        free(m->body);
        free(m);
}

static int mcp_post_get(HttpRequest *req, McpPost **ret) {
        McpPost *m = http_request_get_data(req);

        if (!m) {
                m = calloc(1, sizeof(McpPost));
                if (!m)
                        return -ENOMEM;
                http_request_set_data(req, m, mcp_post_free);
        }
        *ret = m;
        return 0;
}

int http_mcp_upload(HttpRequest *req, const char *data, size_t *size) {
        McpPost *m;
        char *p;
        int r;

        r = mcp_post_get(req, &m);
        if (r < 0)
                return r;
        if (m->size + *size > HTTP_MCP_BODY_MAX) {
                *size = 0;
                return http_request_reply_error(req, 413, "PayloadTooLarge", "A message is at most %u bytes.",
                                                HTTP_MCP_BODY_MAX);
        }
        p = realloc(m->body, m->size + *size + 1);
        if (!p)
                return -ENOMEM;
        memcpy(p + m->size, data, *size);
        m->body = p;
        m->size += *size;
        m->body[m->size] = 0;
        *size = 0;
        return 0;
}

static int reply_message(HttpRequest *req, McpPost *m, json_object *message) {
        _cleanup_free_ char *event = NULL;
        const char *text;

        if (!m->sse)
                return http_request_reply_json(req, 200, json_object_get(message));
        text = json_object_to_json_string_ext(message, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text || asprintf(&event, "event: message\ndata: %s\n\n", text) < 0)
                return -ENOMEM;
        return http_request_reply_text(req, 200, "text/event-stream", event);
}

static void on_mcp_send(json_object *message, void *userdata) {
        HttpRequest *req = userdata;
        McpPost *m = http_request_get_data(req);

        m->pending = NULL;      /* answered: nothing to cancel any more */
        if (reply_message(req, m, message) < 0)
                (void) http_request_reply_errno(req, -ENOMEM);
}

/* Whether a media type is in an Accept header (or the header takes anything). */
static bool accepts(const char *accept, const char *type) {
        return !accept || strcasestr(accept, type) || strstr(accept, "*/*");
}

/* The Origin header, which a browser sends: only a page of this server's own host, or of
 * the loopback, may talk to it (no DNS rebinding from elsewhere). Absent: not a browser. */
bool http_mcp_origin_allowed(const char *origin, const char *host) {
        static const char *const loopback[] = { "localhost", "127.0.0.1", "[::1]" };
        const char *h;
        size_t n;

        if (!origin)
                return true;
        if (startswith_str(origin, "http://"))
                h = origin + strlen("http://");
        else if (startswith_str(origin, "https://"))
                h = origin + strlen("https://");
        else
                return false;
        if (host && strcasecmp(h, host) == 0)
                return true;
        /* Its host without the port: "[v6]" whole, else up to a colon. */
        n = h[0] == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":");
        if (h[n] != 0 && (h[n] != ':' || h[n + 1] == 0 || strspn(h + n + 1, "0123456789") != strlen(h + n + 1)))
                return false;
        for (size_t i = 0; i < ELEMENTSOF(loopback); i++)
                if (strlen(loopback[i]) == n && strncasecmp(h, loopback[i], n) == 0)
                        return true;
        return false;
}

static int reply_jsonrpc_error(HttpRequest *req, unsigned status, int code, const char *message) {
        _cleanup_json_ json_object *o = json_object_new_object(), *e = json_object_new_object();

        if (!o || !e ||
            json_add(e, "code", json_object_new_int(code)) < 0 ||
            json_add(e, "message", json_object_new_string(message)) < 0 ||
            json_add(o, "jsonrpc", json_object_new_string("2.0")) < 0 ||
            json_object_object_add(o, "id", NULL) < 0 ||
            json_add(o, "error", TAKE_PTR(e)) < 0)
                return -ENOMEM;
        return http_request_reply_json(req, status, TAKE_PTR(o));
}

int http_mcp_post(HttpRequest *req) {
        _cleanup_(mcp_session_freep) McpSession *s = NULL;
        const char *accept = http_request_header(req, "Accept"), *type = http_request_header(req, "Content-Type");
        McpPost *m;
        int r;

        r = mcp_post_get(req, &m);
        if (r < 0)
                return r;
        if (!http_mcp_origin_allowed(http_request_header(req, "Origin"), http_request_header(req, "Host")))
                return reply_jsonrpc_error(req, 403, JSONRPC_INVALID_REQUEST, "Forbidden: this Origin may not use /mcp");
        if (type && strncasecmp(type, "application/json", strlen("application/json")) != 0)
                return reply_jsonrpc_error(req, 415, JSONRPC_INVALID_REQUEST, "Content-Type must be application/json");
        if (!accepts(accept, "application/json") && !accepts(accept, "text/event-stream"))
                return reply_jsonrpc_error(req, 406, JSONRPC_INVALID_REQUEST,
                                           "Accept must allow application/json or text/event-stream");
        m->sse = !accepts(accept, "application/json");

        if (!mcp_server) {
                r = mcp_server_new(&mcp_server, http_server_event(http_request_server(req)),
                                   http_server_config(http_request_server(req))->varlink_address);
                if (r < 0)
                        return r;
                mcp_server_set_default_lifetime(mcp_server,
                                                http_server_config(http_request_server(req))->mcp_default_lifetime_sec);
        }
        r = mcp_session_new(mcp_server, http_request_tenant(req), &s);
        if (r < 0)
                return r;
        r = mcp_session_set_protocol_version(s, http_request_header(req, "MCP-Protocol-Version"));
        if (r == -EPROTONOSUPPORT)
                return reply_jsonrpc_error(req, 400, JSONRPC_INVALID_REQUEST, "Unsupported MCP-Protocol-Version");
        if (r < 0)
                return r;

        r = mcp_session_handle(s, m->body ?: "", m->size, on_mcp_send, req, &m->pending);
        if (r < 0)
                return r;
        if (r == MCP_HANDLE_NO_REPLY)
                return http_request_reply_json(req, 202, NULL);
        /* MCP_HANDLE_REPLIED: answered already; MCP_HANDLE_PENDING: on_mcp_send answers. */
        return 0;
}
