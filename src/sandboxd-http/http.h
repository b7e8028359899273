/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sandboxd-http: REST and server-sent events over libmicrohttpd, translated to sandboxd's
 * varlink interface (io.sandboxd.Sandbox). No sandbox logic lives here: a route turns a
 * request into one or a few varlink calls and their replies (or error names) into an HTTP
 * reply (sandboxd-http(8)).
 *
 * Threads: none. Every MHD daemon runs in external-epoll mode on one sd-event loop; a
 * request waiting for sandboxd is a suspended connection; a streamed reply (SSE, a
 * download) reads from a buffer that varlink replies fill, suspending while it is empty. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <json-c/json.h>
#include <microhttpd.h>
#include <systemd/sd-event.h>

#include "base64-util.h"
#include "macro.h"
#include "sandbox-api.h"
#include "varlink.h"

#define HTTP_DEFAULT_LISTEN_TCP "127.0.0.1:8347"
#define HTTP_DEFAULT_LISTEN_UNIX "/run/sandboxd/http.sock"
#define HTTP_DEFAULT_VARLINK "/run/sandboxd/io.sandboxd.Sandbox"
#define HTTP_DEFAULT_CONFIG "/etc/sandboxd/http.conf"
#define HTTP_DEFAULT_TOKENS_DIR "/etc/sandboxd/http-tokens.d"

#define HTTP_BODY_MAX_DEFAULT (1024U * 1024U)              /* JSON bodies */
#define HTTP_UPLOAD_MAX_DEFAULT (UINT64_C(1) << 40)        /* PUT .../files: 1 TiB */
#define HTTP_CONNECTIONS_MAX_DEFAULT 1024U
#define HTTP_CONNECTIONS_PER_IP_DEFAULT 64U
#define HTTP_REQUESTS_PER_TOKEN_DEFAULT 256U
#define HTTP_UPGRADES_PER_TOKEN_DEFAULT 16U
/* Varlink connections to sandboxd one tenant's calls in progress may hold at once: well
 * below the 128 sandboxd takes of one (uid, tenant), and small enough that a few busy
 * tenants cannot take everything sandboxd takes in all (sandboxd-http(8), LIMITS). */
#define HTTP_VARLINK_CONNECTIONS_PER_TENANT_DEFAULT 32U
#define HTTP_CONNECTION_TIMEOUT_SEC_DEFAULT 30U
#define HTTP_BODY_TIMEOUT_SEC_DEFAULT 30U
#define HTTP_BODY_MIN_RATE_DEFAULT 4096U                 /* bytes per second */
#define HTTP_JSON_DEPTH_MAX 32
/* A file moves in parts of this many bytes (ReadFile's length, WriteFile's data; at most
 * FILE_PART_MAX, the most those calls take). sandboxd holds a part of each transfer while
 * it answers, a few times over (base64, JSON): ten transfers of 4 MiB parts grew it by
 * some 75 MiB, of 1 MiB parts by a quarter of that (docs/FILES.md). */
#define HTTP_FILE_CHUNK ((size_t) 1024 * 1024)
_Static_assert(HTTP_FILE_CHUNK <= FILE_PART_MAX, "a part the whole-buffer calls take");
/* Output of an exec waiting for a slow SSE client; beyond it the stream is ended. */
#define HTTP_STREAM_BUFFER_MAX (16U * 1024U * 1024U)

typedef struct HttpConfig {
        char **listen;                  /* addresses when not socket-activated */
        char *varlink_address;
        char *tokens_dir;
        uint64_t body_max;
        uint64_t upload_max;
        unsigned connections_max;
        unsigned connections_per_ip;
        /* Requests in progress at once per token, and (via a trusted proxy) per forwarded
         * client address (connections_per_ip). */
        unsigned requests_per_token;
        /* Of those, upgraded connections (WebSockets, port tunnels) open at once per token:
         * they last, and would otherwise take all of its requests. */
        unsigned upgrades_per_token;
        /* Connections to sandboxd held at once by the calls in progress of one tenant (all
         * its tokens), beyond which a call is answered 429; 0: no bound. */
        unsigned varlink_connections_per_tenant;
        /* Peers whose X-Forwarded-For names the client: IP addresses, or "unix" for the
         * AF_UNIX sockets. */
        char **trusted_proxies;
        uint64_t connection_timeout_sec;
        /* A body must be complete within body_timeout_sec of its headers; an upload's
         * instead must bring body_min_rate bytes per second over each such window. */
        uint64_t body_timeout_sec;
        uint64_t body_min_rate;
        bool access_log;                /* one journal entry per request */
        char **e2b_templates;           /* [E2B] Template=: "E2BNAME:TEMPLATE" */
        uint64_t mcp_default_lifetime_sec; /* /mcp's sandbox_create without a lifetime */
        char *agent_check;              /* [Fleet] AgentCheck=: HAProxy's agent port, or NULL */
        char *drain_file;               /* [Fleet] DrainFile= */
} HttpConfig;

void http_config_done(HttpConfig *c);
int http_config_load(HttpConfig *c, const char *path);

/* ---- tokens (http-auth.c) ---- */

typedef struct HttpToken {
        char *name;
        char *tenant;
        uint8_t sha256[32];
        uint64_t expires_at;            /* seconds since the epoch; 0: never */
        bool operator;                  /* GET /metrics shows the whole daemon */
} HttpToken;

typedef struct HttpTokens {
        HttpToken *tokens;
        size_t n_tokens;
} HttpTokens;

void http_tokens_done(HttpTokens *t);
/* Credentials (LoadCredential=) named http-token.NAME or http-token_NAME are token files
 * too, read from $CREDENTIALS_DIRECTORY besides the tokens directory. */
#define HTTP_TOKEN_CREDENTIAL "http-token"
/* Adds the token files in dir: NAME.conf, or with credentials the credentials above. */
int http_tokens_load(HttpTokens *t, const char *dir, bool credentials);
/* The token whose hash is SHA-256(secret), unexpired at now (seconds), or NULL. Every
 * stored hash is compared, in constant time. */
const HttpToken *http_tokens_find(const HttpTokens *t, const char *secret, uint64_t now);
int http_sha256(const void *data, size_t size, uint8_t ret[32]);
/* sandboxd-http token add NAME [--tenant T]: writes DIR/NAME.conf, prints the token;
 * e2b: in the form E2B's SDKs take (e2b_ and hex digits) instead of sdh_ and hex. */
#define HTTP_E2B_TOKEN_PREFIX "e2b_"
int http_token_add(const char *dir, const char *name, const char *tenant, uint64_t expires_at, bool operator,
                   bool e2b);

/* ---- the server (http-server.c) ---- */

typedef struct HttpServer HttpServer;
typedef struct HttpRequest HttpRequest;
typedef struct HttpRoute HttpRoute;

typedef enum HttpRouteFlags {
        HTTP_ROUTE_PUBLIC = 1 << 0,      /* no token needed */
        HTTP_ROUTE_JSON_BODY = 1 << 1,   /* a JSON object body, parsed before the handler */
        HTTP_ROUTE_UPLOAD = 1 << 2,      /* the body is streamed to route->upload */
        HTTP_ROUTE_RAW_BODY = 1 << 3,    /* a body of any kind, at most BodyMax, as it is */
} HttpRouteFlags;

/* Starts the work of a request whose body (if any) is complete: answers at once
 * (http_request_reply*()) or later, from a varlink callback. A negative errno is answered
 * as 500. */
typedef int (*http_handler_t)(HttpRequest *req);
/* HTTP_ROUTE_UPLOAD: takes what it can of data (*size: what is left), or suspends the
 * request (http_request_suspend()) until it can take more. */
typedef int (*http_upload_t)(HttpRequest *req, const char *data, size_t *size);

struct HttpRoute {
        const char *method;
        /* Segments, "{}" for one of the path's parameters (http_request_param()); a last
         * "{...}" takes the rest of the path, if any (http_request_url()). */
        const char *pattern;
        HttpRouteFlags flags;
        http_handler_t handler;
        http_upload_t upload;
};

extern const HttpRoute http_routes[];
extern const size_t http_n_routes;
/* The tables a request is routed by (how many): http_routes and E2B's control plane, or by
 * its headers another (E2B's sandbox plane: E2b-Sandbox-Id and E2b-Sandbox-Port,
 * http-e2b.c), whose routes' parameters then begin with *ret_first (the sandbox's id;
 * else NULL). */
typedef struct HttpRouteTable {
        const HttpRoute *routes;
        size_t n;
} HttpRouteTable;
size_t http_routes_select(HttpRequest *req, HttpRouteTable tables[static 2], const char **ret_first);
/* The reply of GET …/files: the file at path (NULL: 400) of the sandbox that is the route's
 * first parameter, streamed (http-routes.c). */
int http_file_download(HttpRequest *req, const char *path);

typedef struct HttpStats {
        uint64_t requests;
        uint64_t responses_by_class[6];  /* [2] = 2xx … [5] = 5xx */
        uint64_t unauthorized;
        uint64_t connections;            /* open */
} HttpStats;

int http_server_new(HttpServer **ret, sd_event *event, const HttpConfig *config, HttpTokens *tokens);
HttpServer *http_server_free(HttpServer *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpServer *, http_server_free);
/* Serves the listening socket fd (taken, also on failure). */
int http_server_listen_fd(HttpServer *s, int fd);
/* "HOST:PORT", "[V6]:PORT" or an absolute path. */
int http_server_listen_address(HttpServer *s, const char *address);
/* A listening TCP socket on "HOST:PORT" or "[V6]:PORT". */
int http_listen_inet(const char *address);
const HttpStats *http_server_stats(HttpServer *s);
const HttpConfig *http_server_config(HttpServer *s);
sd_event *http_server_event(HttpServer *s);

/* ---- a request, as a route sees it ---- */

HttpRequest *http_request_ref(HttpRequest *req);
HttpRequest *http_request_unref(HttpRequest *req);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpRequest *, http_request_unref);

HttpServer *http_request_server(HttpRequest *req);
/* The n-th "{}" of the route's pattern (URL-decoded). */
const char *http_request_param(HttpRequest *req, unsigned n);
/* A query argument, or NULL. */
const char *http_request_query(HttpRequest *req, const char *name);
/* Every value of a query argument given (name=…&name=…), as a JSON array of strings. */
int http_request_query_all(HttpRequest *req, const char *name, json_object **ret);
const char *http_request_header(HttpRequest *req, const char *name);
/* The path as libmicrohttpd decoded it (no query), and the method. */
const char *http_request_url(HttpRequest *req);
const char *http_request_method(HttpRequest *req);
/* The body as it came (HTTP_ROUTE_RAW_BODY). */
const void *http_request_raw_body(HttpRequest *req, size_t *ret_size);
/* The parsed JSON object body (HTTP_ROUTE_JSON_BODY; {} when empty). */
json_object *http_request_body(HttpRequest *req);
/* The token's tenant. */
const char *http_request_tenant(HttpRequest *req);
/* Whether the token is an operator's (Operator=yes). */
bool http_request_is_operator(HttpRequest *req);
/* The request's calls to sandboxd act for no tenant (an operator's daemon-wide view). */
void http_request_set_daemon_wide(HttpRequest *req);
/* The tenant its calls to sandboxd act for: the token's, or NULL. */
const char *http_request_backend_tenant(HttpRequest *req);
/* The client went away: replies are dropped, work for it should stop. */
bool http_request_is_gone(HttpRequest *req);
/* Per-route state, freed with the request. */
void http_request_set_data(HttpRequest *req, void *data, void (*free_func)(void *));
void *http_request_get_data(HttpRequest *req);
/* The per-route state, now the caller's (not freed with the request). */
void *http_request_take_data(HttpRequest *req);
/* libmicrohttpd's connection, for its header and argument iterators. */
struct MHD_Connection *http_request_connection(HttpRequest *req);

/* The port proxy (http-ports.c, docs/PORTS.md): the request, to the path rest (decoded;
 * "" for "/") of port of sandbox id, its response streamed back; an upgrade the server
 * accepts becomes a byte tunnel. */
int http_port_proxy(HttpRequest *req, const char *id, const char *port, const char *rest);

/* The reply (only one): status and a JSON body (taken; NULL: none). */
int http_request_reply_json(HttpRequest *req, unsigned status, json_object *body);
/* {"error": {"code": code, "message": message}}, with status. */
int http_request_reply_error(HttpRequest *req, unsigned status, const char *code, const char *fmt, ...)
        _printf_(4, 5);
int http_request_reply_text(HttpRequest *req, unsigned status, const char *content_type, const char *text);
/* A varlink error reply (its name and parameters) as its HTTP status and error body. */
int http_request_reply_varlink_error(HttpRequest *req, const char *error, json_object *parameters);
/* An errno of the bridge's own (EUSERS: 429, a tenant's connections to sandboxd all busy). */
int http_request_reply_errno(HttpRequest *req, int error);

/* A reply whose body is produced as it goes: status, content type, length (or
 * MHD_SIZE_UNKNOWN: chunked). The route writes with http_request_stream_write() and ends
 * with http_request_stream_end(); when the buffer is empty and the route has a pull
 * function, it is called to fetch more (a download, paced by the client). */
typedef int (*http_pull_t)(HttpRequest *req);
int http_request_stream(HttpRequest *req, unsigned status, const char *content_type, uint64_t length,
                        http_pull_t pull);
int http_request_stream_write(HttpRequest *req, const void *data, size_t size);
int http_request_stream_printf(HttpRequest *req, const char *fmt, ...) _printf_(2, 3);
/* failed: the body is cut short (the client sees a broken chunked stream). */
void http_request_stream_end(HttpRequest *req, bool failed);
size_t http_request_stream_buffered(HttpRequest *req);

/* Upgrades: the answer 101 Switching Protocols with headers (name, value, …, NULL) and the
 * connection handed to callback once it is sent: fd (non-blocking; the caller's until
 * http_upgraded_close(), which closes it) and what the client sent after its request
 * (extra, which the caller reads before fd). Nothing of the request is used after. When
 * the connection ends before the 101 is sent, callback comes with fd -EBADF, from within
 * the request's end (the request still there): the caller frees what it holds, and
 * closes u all the same. */
typedef struct HttpUpgraded HttpUpgraded;
typedef void (*http_upgrade_t)(HttpUpgraded *u, int fd, const char *extra, size_t extra_size, void *userdata);
int http_request_upgrade(HttpRequest *req, const char *const *headers, http_upgrade_t callback, void *userdata);
void http_upgraded_close(HttpUpgraded *u);

/* ---- WebSocket (http-websocket.c): RFC 6455 on an upgraded connection, framed by
 * Debian's libwslay (docs/TERMINALS.md says why) ---- */

#define HTTP_WEBSOCKET_TOKEN_MAX 256
/* "bearer.TOKEN" among a Sec-WebSocket-Protocol header's protocols: the token, in ret. */
int http_websocket_protocol_token(const char *header, char ret[static HTTP_WEBSOCKET_TOKEN_MAX + 1]);
int http_websocket_protocol_strip_token(const char *header, char **ret);
/* Whether the request asks for a WebSocket (GET, Upgrade: websocket, version 13, a key). */
bool http_websocket_requested(HttpRequest *req);

typedef struct HttpWebSocket HttpWebSocket;
typedef struct HttpWebSocketCallbacks {
        /* A complete message: text (UTF-8, checked) or binary. */
        void (*message)(HttpWebSocket *ws, bool text, const uint8_t *data, size_t size, void *userdata);
        /* Once, when the connection is over (closed by either side, or failed): the
         * WebSocket is freed after it returns. */
        void (*closed)(HttpWebSocket *ws, void *userdata);
} HttpWebSocketCallbacks;

/* Answers the request's upgrade (Sec-WebSocket-Accept; protocol: the subprotocol chosen,
 * or NULL), then runs the WebSocket on the server's loop. Messages may be sent at once:
 * they go once the upgrade is done. */
int http_websocket_accept(HttpRequest *req, const char *protocol, const HttpWebSocketCallbacks *callbacks,
                          void *userdata, HttpWebSocket **ret);
/* Queues a message; -ENOTCONN once closing. */
int http_websocket_send(HttpWebSocket *ws, bool text, const void *data, size_t size);
/* Bytes queued and not yet written to the client. */
size_t http_websocket_queued(HttpWebSocket *ws);
/* Stops (or resumes) reading the client's messages: back-pressure on its input. */
void http_websocket_pause(HttpWebSocket *ws, bool pause);
/* Sends a close frame (status, reason) after what is queued; closed() follows. */
void http_websocket_close(HttpWebSocket *ws, uint16_t status, const char *reason);
/* Called when the queue drained below what the owner waits for (http_websocket_queued()). */
void http_websocket_set_drained(HttpWebSocket *ws, void (*drained)(HttpWebSocket *ws, void *userdata));

/* GET /api/v1/sessions/{id}/terminal (http-terminal.c); at exit, the sessions left. */
int http_route_terminal(HttpRequest *req);
void http_terminals_done(void);
/* GET /console, GET /console/{file} (http-console.c). */
int http_route_console(HttpRequest *req);
int http_route_console_file(HttpRequest *req);
/* 200 with a static text (not copied), its type and a Content-Security-Policy (or NULL);
 * cached by the client for a while. */
int http_request_reply_static(HttpRequest *req, const char *content_type, const char *text, const char *csp);

/* A header of the reply made last (after http_request_stream()). */
int http_request_add_header(HttpRequest *req, const char *name, const char *value);

/* An upload route that cannot take more now: resumed by http_request_resume(). */
void http_request_suspend(HttpRequest *req);
void http_request_resume(HttpRequest *req);

/* ---- sandboxd over varlink (http-backend.c) ---- */

typedef struct HttpBackend HttpBackend;

/* Never on the wire: the error a call gets when its tenant holds as many connections to
 * sandboxd as VarlinkConnectionsPerTenant= allows (429 TooManyRequests). */
#define HTTP_BACKEND_ERROR_TOO_MANY "sandboxd-http.TooManyConnections"

/* One reply, as varlink_reply_t; error VARLINK_ERROR_DISCONNECTED when sandboxd is not
 * there or went away. Not called once the request is gone (the call is dropped). */
typedef int (*http_backend_reply_t)(HttpRequest *req, json_object *parameters, const char *error,
                                    VarlinkReplyFlags flags, void *userdata);

/* connections_per_tenant: at most that many connections to sandboxd busy with calls of
 * one tenant at once (0: no bound); one call more fails with HTTP_BACKEND_ERROR_TOO_MANY. */
int http_backend_new(HttpBackend **ret, sd_event *event, const char *address, unsigned connections_per_tenant);
HttpBackend *http_backend_free(HttpBackend *b);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpBackend *, http_backend_free);
HttpBackend *http_server_backend(HttpServer *s);
void http_server_set_backend(HttpServer *s, HttpBackend *b);

/* Calls method (parameters taken) for the request's tenant on a connection of its own
 * (one acting for the tenant already, or a new one that does ActForTenant first). */
int http_backend_call(HttpRequest *req, const char *method, json_object *parameters, VarlinkCallFlags flags,
                      http_backend_reply_t callback, void *userdata);
/* A call of no request's (its callback gets req NULL), for the tenant: it lives until its
 * last reply or http_backend_call_cancel() (then no callback), or the backend is freed
 * (its owner must cancel it before). A failed connect is an error here, not a callback;
 * so is -EUSERS, the tenant's connections all busy. */
typedef struct HttpBackendCall HttpBackendCall;
int http_backend_call_detached(HttpBackend *b, const char *tenant, const char *method, json_object *parameters,
                               VarlinkCallFlags flags, http_backend_reply_t callback, void *userdata,
                               HttpBackendCall **ret);
void http_backend_call_cancel(HttpBackendCall *call);
/* Ends the request's calls in progress (a stream it no longer wants). */
void http_backend_cancel(HttpRequest *req);
/* In a reply callback: the descriptor passed with the reply (OpenPort's), taken; -EBADF. */
int http_backend_take_fd(HttpRequest *req);

/* ---- the agent-check port of a fleet's front (http-agent.c) ---- */

#define HTTP_DEFAULT_DRAIN_FILE "/run/sandboxd/drain"
/* A socket-activated fd of this name (FileDescriptorName=) is the agent port. */
#define HTTP_AGENT_CHECK_FD_NAME "agent-check"

typedef struct HttpAgent HttpAgent;

/* Serves HAProxy's agent checks on the listening socket fd (taken, also on failure). */
int http_agent_new(HttpAgent **ret, sd_event *event, int fd, const char *varlink_address, const char *drain_file);
HttpAgent *http_agent_free(HttpAgent *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpAgent *, http_agent_free);
/* The line an agent check answers: "drain" while draining, "down#…" when sandboxd does not
 * answer, else "up ready N%" (N: the free share of max, at least 1 while one more fits). */
int http_agent_answer(bool draining, bool answering, uint64_t max, uint64_t live, char *buf, size_t size);

/* ---- helpers (http-util.c) ---- */

/* A peer's address as text, in buf ("unix" for AF_UNIX or none), normalized as
 * TrustedProxy= is: an IPv4-mapped IPv6 address (an IPv4 client of a dual-stack
 * listener) is the IPv4 address it carries. */
const char *http_address_to_string(const struct sockaddr *sa, char buf[static INET6_ADDRSTRLEN]);
int http_address_normalize(const char *text, char buf[static INET6_ADDRSTRLEN]);
/* The client an address counts as for the per-address limits: an IPv4 address itself, an
 * IPv6 address its /64 ("2001:db8:1:2::/64"), which one host usually has all of. */
#define HTTP_ADDRESS_KEY_MAX (INET6_ADDRSTRLEN + 4)
const char *http_address_limit_key(const char *address, char buf[static HTTP_ADDRESS_KEY_MAX]);

/* The HTTP status of a varlink error name (SANDBOX_ERRORS' column; 500 for others). */
unsigned http_status_from_varlink_error(const char *error, json_object *parameters);
/* A JSON object from text: NULL and an error message for malformed text, depth beyond
 * HTTP_JSON_DEPTH_MAX, a duplicate key or a top level that is not an object. */
json_object *http_json_parse(const char *text, size_t size, const char **ret_error);
