/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The Model Context Protocol (https://modelcontextprotocol.io), revision 2025-11-25 (and
 * 2025-06-18, 2025-03-26 for older clients), for sandboxd: one implementation of the
 * protocol and of the tools, without a transport. Each tool is a few calls to sandboxd's
 * varlink interface (io.sandboxd.Sandbox); nothing here decides what a sandbox may do.
 *
 * Transports feed it JSON-RPC messages and send what it answers:
 *
 *   stdio (sandboxd-mcp): one McpSession for the life of the process; each line of stdin
 *   is a message, each reply a line on stdout.
 *
 *   Streamable HTTP (sandboxd-http's /mcp): stateless, one McpSession per POST,
 *       mcp_session_new(server, tenant_of_the_bearer_token, &s);
 *       r = mcp_session_set_protocol_version(s, header or NULL);  // < 0: 400 Bad Request
 *       r = mcp_session_handle(s, body, size, send, ctx, &req);
 *   then by r: MCP_HANDLE_NO_REPLY → 202 Accepted, no body (a notification or a response);
 *   MCP_HANDLE_REPLIED → send() was called before mcp_session_handle() returned: 200 with
 *   that JSON; MCP_HANDLE_PENDING → send() will be called once, from the event loop: the
 *   bridge suspends the connection and answers then, as application/json or, if the
 *   client accepts only text/event-stream, as one SSE event ("event: message\ndata:
 *   JSON\n\n"). If the HTTP client goes away first, mcp_request_cancel(req): send() is then
 *   never called and sandboxd's call is dropped. The session may be freed right after
 *   mcp_session_handle() returns: pending requests keep what they need.
 *
 * Whatever the transport, the tenant is the session's: each varlink connection of a
 * session bound to a tenant calls ActForTenant first, so that sandboxd shows it that
 * tenant's sandboxes only and creates for it (which needs the caller's
 * io.sandboxd.Sandbox1.delegate).
 *
 * Protocol errors are JSON-RPC errors: a message that is not JSON (-32700), not a valid
 * request (-32600), an unknown method (-32601), bad params or an unknown tool (-32602).
 * What goes wrong in a tool, arguments that do not fit its inputSchema included, is a
 * tools/call result with isError: true, which the model reads.
 *
 * All functions return 0 (or what they say) or a negative errno; destructors take NULL.
 */

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "macro.h"

#define MCP_PROTOCOL_VERSION_LATEST "2025-11-25"
/* What an HTTP request without MCP-Protocol-Version speaks (the transport spec says so). */
#define MCP_PROTOCOL_VERSION_DEFAULT_HTTP "2025-03-26"

#define MCP_VARLINK_ADDRESS_DEFAULT "unix:/run/sandboxd/io.sandboxd.Sandbox"
/* The lifetime of a sandbox that sandbox_create makes without one: an agent that forgets
 * sandbox_destroy leaks it for an hour, not for ever. */
#define MCP_DEFAULT_LIFETIME_SEC 3600U
#define MCP_PROGRESS_INTERVAL_USEC (1000U * 1000U)

/* JSON-RPC 2.0's error codes. */
#define JSONRPC_PARSE_ERROR      (-32700)
#define JSONRPC_INVALID_REQUEST  (-32600)
#define JSONRPC_METHOD_NOT_FOUND (-32601)
#define JSONRPC_INVALID_PARAMS   (-32602)
#define JSONRPC_INTERNAL_ERROR   (-32603)

/* Bounds on what a tool puts in front of a model. */
#define MCP_OUTPUT_MAX (64U * 1024U)        /* bytes of each of stdout and stderr kept */
#define MCP_FILE_READ_MAX (256U * 1024U)    /* bytes of a file file_read returns */
#define MCP_FILE_LIST_MAX 1000U             /* entries file_list returns */
#define MCP_CODE_MAX (100U * 1024U)         /* bytes of run_code's code (sent on its stdin) */

typedef struct McpServer McpServer;
typedef struct McpSession McpSession;
typedef struct McpRequest McpRequest;

/* Sends one message (a JSON-RPC response; borrowed) to the client. */
typedef void (*mcp_send_t)(json_object *message, void *userdata);

typedef enum McpHandleResult {
        MCP_HANDLE_NO_REPLY = 0,
        MCP_HANDLE_REPLIED = 1,
        MCP_HANDLE_PENDING = 2,
} McpHandleResult;

/* The tools, bound to sandboxd at address (NULL: MCP_VARLINK_ADDRESS_DEFAULT) and to event
 * (NULL: the thread's default loop), where their varlink calls run. */
int mcp_server_new(McpServer **ret, sd_event *event, const char *varlink_address);
/* sandbox_create's lifetime when the call gives none (seconds; 0: the template's, which may
 * be none). MCP_DEFAULT_LIFETIME_SEC unless set. */
void mcp_server_set_default_lifetime(McpServer *m, uint64_t sec);
/* Whether the sandboxes of cancelled run_codes are still being destroyed: a transport
 * that ends with its client waits for that. */
bool mcp_server_is_busy(McpServer *m);
McpServer *mcp_server_ref(McpServer *m);
McpServer *mcp_server_unref(McpServer *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(McpServer *, mcp_server_unref);

/* A client: tenant NULL or "" for none. */
int mcp_session_new(McpServer *m, const char *tenant, McpSession **ret);
/* Frees the session; requests still pending run on and answer. */
McpSession *mcp_session_free(McpSession *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(McpSession *, mcp_session_free);

/* Whether version is one this implementation speaks. */
bool mcp_protocol_version_supported(const char *version);
/* HTTP: the MCP-Protocol-Version header's value (NULL: absent, which means
 * MCP_PROTOCOL_VERSION_DEFAULT_HTTP). -EPROTONOSUPPORT for a version not spoken (the
 * bridge answers 400). */
int mcp_session_set_protocol_version(McpSession *s, const char *version);
/* The version negotiated by initialize (or set), NULL before. */
const char *mcp_session_get_protocol_version(McpSession *s);

/* Handles one message (text, size bytes, need not be NUL-terminated). send gets the reply,
 * at most once; see McpHandleResult and the top of this file. *ret_request (may be NULL)
 * is set for MCP_HANDLE_PENDING, else NULL. */
int mcp_session_handle(McpSession *s, const char *text, size_t size, mcp_send_t send, void *userdata,
                       McpRequest **ret_request);
/* The reply of a pending request will not be sent; its varlink connection is closed (a
 * command it ran runs on to its end or its timeout, as when any varlink caller leaves),
 * and the one-off sandbox of a run_code is destroyed, with its command (at once, or as
 * soon as sandboxd has created it). */
void mcp_request_cancel(McpRequest *r);
/* Whether send() may be called while a request is pending with notifications for it
 * (stdio: yes; HTTP with one JSON response per POST: no, the default). With it, a tools/call
 * whose params._meta has a progressToken gets notifications/progress every
 * MCP_PROGRESS_INTERVAL_USEC until its answer, so that a client may extend its timeout. */
void mcp_session_set_notify(McpSession *s, bool b);
/* Requests of this session still pending (not counting cancelled ones: see
 * mcp_server_is_busy()). */
unsigned mcp_session_n_pending(McpSession *s);

/* ---- for tests ---- */

/* The tools/list result (a new reference). */
json_object *mcp_tools_list(void);
