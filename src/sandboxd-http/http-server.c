/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libmicrohttpd on sd-event: one MHD daemon per listening socket, each in external-epoll
 * mode (its epoll fd is an sd-event io source; a timer follows MHD_get_timeout() after
 * every MHD_run()), requests dispatched through the route table (http-routes.c). */

#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-journal.h>
#include <time.h>

#include "http.h"
#include "json-util.h"
#include "log.h"
#include "parse-util.h"
#include "strv.h"

#define HTTP_PATH_SEGMENTS_MAX 16
#define HTTP_PARAMS_MAX 4
/* Body read and dropped after a reply was decided, before the connection is closed. */
#define HTTP_DISCARD_MAX (UINT64_C(16) * 1024 * 1024)

typedef struct HttpDaemon {
        HttpServer *server;
        struct MHD_Daemon *mhd;
        sd_event_source *io, *timer;
        bool unix_socket;
} HttpDaemon;

struct HttpServer {
        sd_event *event;
        const HttpConfig *config;
        HttpTokens *tokens;
        HttpBackend *backend;
        HttpDaemon **daemons;
        size_t n_daemons;
        HttpStats stats;
        /* What is open or in progress, by key: "c:ADDRESS" connections from an address,
         * "t:NAME" requests of a token, "u:NAME" its upgrades (requests to upgrade and
         * upgraded connections), "f:ADDRESS" requests forwarded for a client. ADDRESS is
         * http_address_limit_key()'s: an IPv6 client is its /64. */
        json_object *counts;
};

typedef struct HttpBuffer {
        char *data;
        size_t size, read, allocated;
} HttpBuffer;

struct HttpRequest {
        unsigned n_ref;
        HttpServer *server;
        HttpDaemon *daemon;
        struct MHD_Connection *connection;
        const HttpRoute *route;
        char *params[HTTP_PARAMS_MAX];
        /* The token's (copied: tokens are reloaded while requests run). */
        bool authenticated, operator, daemon_wide;
        char *tenant;
        char method[16];                 /* for the access log */
        /* Whom it is for (the access log): the peer's address, or the client a trusted
         * proxy forwards for (X-Forwarded-For). */
        char client[INET6_ADDRSTRLEN + 8];
        char *url;                       /* as libmicrohttpd has it: decoded, without the query */
        char *counted[3];                /* the keys it counts under (server->counts) */
        uint64_t begun;                  /* µs CLOCK_MONOTONIC */

        HttpBuffer body;
        json_object *json;

        bool started, suspended, gone, replied;
        /* While suspended (waiting on sandboxd), libmicrohttpd does not watch the socket:
         * this does, for the client's hang-up, which then ends the request (and what it
         * started: an MCP tools/call's command). */
        sd_event_source *hangup_source;
        bool peer_closed;
        bool close;                      /* the reply closes the connection */
        bool body_done;                  /* its body (if any) was read to the end */
        uint64_t discarded;
        struct MHD_Response *response;
        unsigned status;

        /* A streamed reply. */
        HttpBuffer stream;
        http_pull_t pull;
        bool streaming, stream_ended, stream_failed, pulling;

        void *data;
        void (*free_data)(void *);

        /* Its upgrade, answered 101 and not yet handed over (on_mhd_upgraded()). */
        struct HttpUpgraded *upgrade;
};

/* ---- buffers ---- */

static void buffer_done(HttpBuffer *b) {
        b->data = mfree(b->data);
        b->size = b->read = b->allocated = 0;
}

static int buffer_append(HttpBuffer *b, const void *data, size_t size) {
        if (b->read > 0 && b->read == b->size)
                b->read = b->size = 0;
        if (b->size + size + 1 > b->allocated) {       /* and its NUL */
                size_t n;
                char *p;

                if (b->read > 0) {
                        memmove(b->data, b->data + b->read, b->size - b->read);
                        b->size -= b->read;
                        b->read = 0;
                }
                n = MAX(b->allocated * 2, b->size + size + 1);
                if (b->size + size + 1 > n)
                        return -ENOMEM;
                p = realloc(b->data, n);
                if (!p)
                        return -ENOMEM;
                b->data = p;
                b->allocated = n;
        }
        memcpy(b->data + b->size, data, size);
        b->size += size;
        b->data[b->size] = 0;
        return 0;
}

/* ---- counts (sandboxd-http(8), LIMITS) ---- */

static char *strjoin(const char *a, const char *b) {
        char *s;

        return asprintf(&s, "%s%s", a, b) < 0 ? NULL : s;
}

/* Adds delta to key's count: the new count. */
static int64_t server_count(HttpServer *s, const char *key, int delta) {
        json_object *v = NULL;
        int64_t n;

        if (!s->counts)
                s->counts = json_object_new_object();
        if (!s->counts)
                return -ENOMEM;
        (void) json_object_object_get_ex(s->counts, key, &v);
        n = (v ? json_object_get_int64(v) : 0) + delta;
        if (n <= 0)
                json_object_object_del(s->counts, key);
        else if (v)
                (void) json_object_set_int64(v, n);
        else if (json_object_object_add(s->counts, key, json_object_new_int64(n)) < 0)
                return -ENOMEM;
        return MAX(n, 0);
}

static bool address_is_trusted(HttpServer *s, const char *address) {
        return strv_contains(s->config->trusted_proxies, address);
}

/* ---- requests ---- */

static uint64_t now_usec(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}


HttpRequest *http_request_ref(HttpRequest *req) {
        if (req)
                req->n_ref++;
        return req;
}

HttpRequest *http_request_unref(HttpRequest *req) {
        if (!req || --req->n_ref > 0)
                return NULL;
        for (unsigned i = 0; i < HTTP_PARAMS_MAX; i++)
                free(req->params[i]);
        free(req->tenant);
        free(req->url);
        for (unsigned i = 0; i < ELEMENTSOF(req->counted); i++)
                free(req->counted[i]);
        if (req->free_data)
                req->free_data(req->data);
        buffer_done(&req->body);
        buffer_done(&req->stream);
        json_object_put(req->json);
        sd_event_source_disable_unref(req->hangup_source);
        if (req->response)
                MHD_destroy_response(req->response);
        return mfree(req);
}

HttpServer *http_request_server(HttpRequest *req) {
        return req->server;
}

const char *http_request_param(HttpRequest *req, unsigned n) {
        return n < HTTP_PARAMS_MAX ? req->params[n] : NULL;
}

const char *http_request_query(HttpRequest *req, const char *name) {
        return MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, name);
}

typedef struct QueryAll {
        const char *name;
        json_object *values;
        int error;
} QueryAll;

static enum MHD_Result collect_argument(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                        const char *value, size_t value_size) {
        QueryAll *q = cls;

        if (!key || !streq(key, q->name))
                return MHD_YES;
        if (json_object_array_add(q->values, json_object_new_string_len(value ?: "", (int) value_size)) < 0) {
                q->error = -ENOMEM;
                return MHD_NO;
        }
        return MHD_YES;
}

int http_request_query_all(HttpRequest *req, const char *name, json_object **ret) {
        QueryAll q = { .name = name, .values = json_object_new_array() };

        if (!q.values)
                return -ENOMEM;
        (void) MHD_get_connection_values_n(req->connection, MHD_GET_ARGUMENT_KIND, collect_argument, &q);
        if (q.error < 0) {
                json_object_put(q.values);
                return q.error;
        }
        *ret = q.values;
        return 0;
}

const char *http_request_url(HttpRequest *req) {
        return req->url;
}

const char *http_request_method(HttpRequest *req) {
        return req->method;
}

const char *http_request_header(HttpRequest *req, const char *name) {
        return MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, name);
}

json_object *http_request_body(HttpRequest *req) {
        return req->json;
}

const char *http_request_tenant(HttpRequest *req) {
        return req->tenant;
}

bool http_request_is_operator(HttpRequest *req) {
        return req->operator;
}

void http_request_set_daemon_wide(HttpRequest *req) {
        req->daemon_wide = true;
}

const char *http_request_backend_tenant(HttpRequest *req) {
        return req->daemon_wide ? NULL : req->tenant;
}

bool http_request_is_gone(HttpRequest *req) {
        return req->gone;
}

void http_request_set_data(HttpRequest *req, void *data, void (*free_func)(void *)) {
        if (req->free_data)
                req->free_data(req->data);
        req->data = data;
        req->free_data = free_func;
}

void *http_request_get_data(HttpRequest *req) {
        return req->data;
}

void *http_request_take_data(HttpRequest *req) {
        req->free_data = NULL;
        return TAKE_PTR(req->data);
}

struct MHD_Connection *http_request_connection(HttpRequest *req) {
        return req->connection;
}

void http_request_resume(HttpRequest *req);

static int on_peer_hangup(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        HttpRequest *req = userdata;

        req->hangup_source = sd_event_source_disable_unref(req->hangup_source);
        req->peer_closed = true;
        http_request_resume(req);       /* on_access() then closes it */
        return 0;
}

void http_request_suspend(HttpRequest *req) {
        const union MHD_ConnectionInfo *info;

        if (req->suspended || req->gone)
                return;
        MHD_suspend_connection(req->connection);
        req->suspended = true;
        /* EPOLLRDHUP alone: a request pipelined behind this one is no hang-up. */
        info = MHD_get_connection_info(req->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (info && !req->hangup_source &&
            sd_event_add_io(req->server->event, &req->hangup_source, info->connect_fd, EPOLLRDHUP, on_peer_hangup,
                            req) < 0)
                req->hangup_source = NULL;
}

/* MHD learns of a resumed connection in its next MHD_run(): make that now. */
static void daemon_kick(HttpDaemon *d) {
        if (sd_event_source_set_time_relative(d->timer, 0) < 0 ||
            sd_event_source_set_enabled(d->timer, SD_EVENT_ONESHOT) < 0)
                log_warning("Cannot schedule libmicrohttpd's run.");
}

void http_request_resume(HttpRequest *req) {
        if (!req->suspended || req->gone)
                return;
        req->hangup_source = sd_event_source_disable_unref(req->hangup_source);
        req->suspended = false;
        MHD_resume_connection(req->connection);
        daemon_kick(req->daemon);
}

/* ---- upgrades ---- */

static int request_set_response(HttpRequest *req, unsigned status, struct MHD_Response *response);

struct HttpUpgraded {
        HttpDaemon *daemon;
        HttpRequest *req;               /* until it is handed over */
        struct MHD_UpgradeResponseHandle *urh;
        http_upgrade_t callback;
        void *userdata;
};

static void on_mhd_upgraded(void *cls, struct MHD_Connection *connection, void *con_cls, const char *extra_in,
                            size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
        HttpUpgraded *u = cls;

        u->urh = urh;
        if (u->req)
                u->req->upgrade = NULL;
        u->req = NULL;
        /* Ours now (libmicrohttpd without TLS hands over the client's own socket). */
        if (fcntl(sock, F_SETFL, fcntl(sock, F_GETFL) | O_NONBLOCK) < 0) {
                http_upgraded_close(u);
                return;
        }
        u->callback(u, sock, extra_in, extra_in_size, u->userdata);
}

int http_request_upgrade(HttpRequest *req, const char *const *headers, http_upgrade_t callback, void *userdata) {
        struct MHD_Response *response;
        HttpUpgraded *u;
        int r;

        u = calloc(1, sizeof(HttpUpgraded));
        if (!u)
                return -ENOMEM;
        *u = (HttpUpgraded) { .daemon = req->daemon, .req = req, .callback = callback, .userdata = userdata };
        response = MHD_create_response_for_upgrade(on_mhd_upgraded, u);
        if (!response) {
                free(u);
                return -ENOMEM;
        }
        for (const char *const *h = headers; h && h[0]; h += 2)
                if (MHD_add_response_header(response, h[0], h[1]) != MHD_YES) {
                        MHD_destroy_response(response);
                        free(u);
                        return -ENOMEM;
                }
        req->close = false;
        r = request_set_response(req, MHD_HTTP_SWITCHING_PROTOCOLS, response);
        if (r < 0) {
                free(u);
                return r;
        }
        req->upgrade = u;
        return 0;
}

/* The connection ended before its 101 went out: libmicrohttpd calls no upgrade handler
 * then, so the caller hears it here (fd -EBADF) and frees what it holds for the
 * connection (a terminal's shell among it). */
static void request_upgrade_failed(HttpRequest *req) {
        HttpUpgraded *u = TAKE_PTR(req->upgrade);

        if (!u)
                return;
        u->req = NULL;
        u->callback(u, -EBADF, NULL, 0, u->userdata);
}

void http_upgraded_close(HttpUpgraded *u) {
        if (!u)
                return;
        (void) MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
        daemon_kick(u->daemon);
        free(u);
}

/* ---- replies ---- */

static int request_set_response(HttpRequest *req, unsigned status, struct MHD_Response *response) {
        if (!response)
                return -ENOMEM;
        if (req->replied) {
                MHD_destroy_response(response);
                return -EALREADY;
        }
        req->replied = true;
        req->status = status;
        req->response = response;
        (void) MHD_add_response_header(response, "Cache-Control", "no-store");
        if (req->close)
                (void) MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
        if (status == MHD_HTTP_UNAUTHORIZED)
                (void) MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                                               "Bearer realm=\"sandboxd\"");
        /* The handler runs again once resumed, and queues it. */
        http_request_resume(req);
        return 0;
}

int http_request_reply_static(HttpRequest *req, const char *content_type, const char *text, const char *csp) {
        struct MHD_Response *response;

        response = MHD_create_response_from_buffer(strlen(text), (void *) text, MHD_RESPMEM_PERSISTENT);
        if (response) {
                (void) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
                (void) MHD_add_response_header(response, "X-Content-Type-Options", "nosniff");
                if (csp)
                        (void) MHD_add_response_header(response, "Content-Security-Policy", csp);
        }
        return request_set_response(req, 200, response);
}

int http_request_reply_text(HttpRequest *req, unsigned status, const char *content_type, const char *text) {
        struct MHD_Response *response;

        response = MHD_create_response_from_buffer(strlen(text), (void *) text, MHD_RESPMEM_MUST_COPY);
        if (response && content_type)
                (void) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        return request_set_response(req, status, response);
}

int http_request_reply_json(HttpRequest *req, unsigned status, json_object *body) {
        _cleanup_json_ json_object *b = body;
        const char *text;

        if (!b)
                return http_request_reply_text(req, status, NULL, "");
        text = json_object_to_json_string_ext(b, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text)
                return -ENOMEM;
        return http_request_reply_text(req, status, "application/json", text);
}

/* details: sandboxd's error parameters besides the message (QuotaExceeded's what, limit and
 * use; SystemError's errno), copied into the error object; NULL: none. */
static int reply_errorv(HttpRequest *req, unsigned status, const char *code, json_object *details, const char *fmt,
                        va_list ap) {
        _cleanup_json_ json_object *o = json_object_new_object(), *e = json_object_new_object();
        _cleanup_free_ char *message = NULL;

        if (vasprintf(&message, fmt, ap) < 0)
                return -ENOMEM;
        if (!o || !e ||
            json_add(e, "code", json_object_new_string(code)) < 0 ||
            json_add(e, "message", json_object_new_string(message)) < 0)
                return -ENOMEM;
        if (details && json_object_is_type(details, json_type_object)) {
                json_object_object_foreach(details, k, v)
                        if (!streq(k, "message") && !streq(k, "code") &&
                            json_add(e, k, json_object_get(v)) < 0)
                                return -ENOMEM;
        }
        if (json_add(o, "error", TAKE_PTR(e)) < 0)
                return -ENOMEM;
        return http_request_reply_json(req, status, TAKE_PTR(o));
}

int http_request_reply_error(HttpRequest *req, unsigned status, const char *code, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = reply_errorv(req, status, code, NULL, fmt, ap);
        va_end(ap);
        return r;
}

static int reply_error_details(HttpRequest *req, unsigned status, const char *code, json_object *details,
                               const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = reply_errorv(req, status, code, details, fmt, ap);
        va_end(ap);
        return r;
}

int http_request_reply_varlink_error(HttpRequest *req, const char *error, json_object *parameters) {
        json_object *m = NULL;
        const char *message, *code;

        if (parameters)
                (void) json_object_object_get_ex(parameters, "message", &m);
        message = m ? json_object_get_string(m) : NULL;
        if (streq(error, HTTP_BACKEND_ERROR_TOO_MANY))
                return http_request_reply_error(req, 429, "TooManyRequests", "%s",
                                                message ?: "Too many connections to sandboxd.");
        if (streq(error, VARLINK_ERROR_DISCONNECTED))
                /* As a fleet's front answers for a node that is gone (docs/SCALE-OUT.md). */
                return reply_error_details(req, 503, "NodeUnavailable", NULL, "sandboxd is not answering.");
        else if (!message && streq(error, VARLINK_ERROR_INVALID_PARAMETER) && parameters &&
                 json_object_object_get_ex(parameters, "parameter", &m))
                return http_request_reply_error(req, 400, error, "Invalid parameter: %s.", json_object_get_string(m));
        code = startswith_str(error, "io.sandboxd.Sandbox.") ? error + strlen("io.sandboxd.Sandbox.") : error;
        return reply_error_details(req, http_status_from_varlink_error(error, parameters), code, parameters, "%s",
                                   message ?: error);
}

int http_request_reply_errno(HttpRequest *req, int error) {
        /* http_backend_call_detached()'s refusal: the tenant's connections are all busy. */
        if (abs(error) == EUSERS)
                return http_request_reply_error(req, 429, "TooManyRequests",
                                                "Too many connections to sandboxd in use for this tenant "
                                                "(VarlinkConnectionsPerTenant=).");
        return http_request_reply_error(req, 500, "SystemError", "%s", strerror(abs(error)));
}

/* ---- streamed replies ---- */

static ssize_t on_stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
        HttpRequest *req = cls;
        size_t n = req->stream.size - req->stream.read;
        int r;

        if (n > 0) {
                n = MIN(n, max);
                memcpy(buf, req->stream.data + req->stream.read, n);
                req->stream.read += n;
                return (ssize_t) n;
        }
        if (req->stream_ended)
                return req->stream_failed ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
        if (req->pull && !req->pulling) {
                req->pulling = true;
                r = req->pull(req);
                if (r < 0) {
                        log_warning_errno(r, "A streamed reply failed: %m");
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                }
                if (req->stream.size > req->stream.read || req->stream_ended)
                        return on_stream_read(cls, pos, buf, max);
        }
        /* Nothing yet: woken by http_request_stream_write() or _end(). */
        MHD_suspend_connection(req->connection);
        req->suspended = true;
        return 0;
}

static void on_stream_free(void *cls) {
        http_request_unref(cls);
}

int http_request_stream(HttpRequest *req, unsigned status, const char *content_type, uint64_t length,
                        http_pull_t pull) {
        struct MHD_Response *response;

        response = MHD_create_response_from_callback(length, 64 * 1024, on_stream_read, req, on_stream_free);
        if (!response)
                return -ENOMEM;
        http_request_ref(req);
        req->streaming = true;
        req->pull = pull;
        if (content_type)
                (void) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        if (content_type && streq(content_type, "text/event-stream"))
                (void) MHD_add_response_header(response, "X-Accel-Buffering", "no");
        return request_set_response(req, status, response);
}

size_t http_request_stream_buffered(HttpRequest *req) {
        return req->stream.size - req->stream.read;
}

int http_request_stream_write(HttpRequest *req, const void *data, size_t size) {
        int r;

        if (req->gone || req->stream_ended)
                return -ECONNRESET;
        r = buffer_append(&req->stream, data, size);
        if (r < 0)
                return r;
        req->pulling = false;
        http_request_resume(req);
        return 0;
}

int http_request_stream_printf(HttpRequest *req, const char *fmt, ...) {
        _cleanup_free_ char *s = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -ENOMEM;
        return http_request_stream_write(req, s, (size_t) n);
}

void http_request_stream_end(HttpRequest *req, bool failed) {
        if (req->stream_ended)
                return;
        req->stream_ended = true;
        req->stream_failed = failed;
        req->pulling = false;
        http_request_resume(req);
}

int http_request_add_header(HttpRequest *req, const char *name, const char *value) {
        if (!req->response)
                return -EINVAL;
        return MHD_add_response_header(req->response, name, value) == MHD_YES ? 0 : -EINVAL;
}

/* ---- connections ---- */

/* A connection's deadlines (sandboxd-http(8), LIMITS). libmicrohttpd's own timeout is an
 * idle one, which a byte now and then defeats, so:
 *  - headers: complete within connection_timeout_sec of the connection's start or of its
 *    previous request (slowloris); armed then, disarmed when a request's headers are in;
 *  - a body: complete within body_timeout_sec of its headers; an upload's instead at
 *    body_min_rate bytes per second over each window of body_timeout_sec, not counting
 *    the time the bridge itself holds it (suspended, waiting on sandboxd), also while the
 *    rest of a failed upload is read to be dropped. */
typedef struct HttpConnection {
        HttpDaemon *daemon;
        struct MHD_Connection *connection;
        sd_event_source *deadline;
        HttpRequest *req;                /* whose body is awaited; NULL: headers are */
        uint64_t window_bytes;           /* body bytes in the current window */
        bool nul_unescaped;              /* the request's path or query had a %00 */
        char address[INET6_ADDRSTRLEN];  /* the peer's ("unix": an AF_UNIX socket's) */
        bool counted;                    /* under "c:ADDRESS" */
} HttpConnection;

static void connection_cut(HttpConnection *c) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(c->connection,
                                                                       MHD_CONNECTION_INFO_CONNECTION_FD);

        /* libmicrohttpd sees the socket end and closes the connection in its next run. */
        if (info)
                (void) shutdown(info->connect_fd, SHUT_RDWR);
        daemon_kick(c->daemon);
}

static void connection_arm_usec(HttpConnection *c, uint64_t usec) {
        if (!c->deadline)
                return;
        if (usec == 0) {
                (void) sd_event_source_set_enabled(c->deadline, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time_relative(c->deadline, usec);
        (void) sd_event_source_set_enabled(c->deadline, SD_EVENT_ONESHOT);
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        HttpConnection *c = userdata;
        const HttpConfig *config = c->daemon->server->config;
        HttpRequest *req = c->req;
        uint64_t window = config->body_timeout_sec;

        if (!req) {
                log_debug("A client's headers took longer than %" PRIu64 " s: connection closed.",
                          config->connection_timeout_sec);
                connection_cut(c);
                return 0;
        }
        if (req->suspended && !req->response) {
                /* The bridge holds the body (sandboxd is slow): not the client's time. */
                c->window_bytes = 0;
                connection_arm_usec(c, window * USEC_PER_SEC);
                return 0;
        }
        if (!req->route || !(req->route->flags & HTTP_ROUTE_UPLOAD) ||
            c->window_bytes < config->body_min_rate * window) {
                log_debug("A request's body came too slowly (%" PRIu64 " bytes in %" PRIu64 " s): connection closed.",
                          c->window_bytes, window);
                connection_cut(c);
                return 0;
        }
        c->window_bytes = 0;
        connection_arm_usec(c, window * USEC_PER_SEC);
        return 0;
}

/* The header deadline, armed (on) or off. */
static void connection_arm(HttpConnection *c, bool on) {
        c->req = NULL;
        connection_arm_usec(c, on ? c->daemon->server->config->connection_timeout_sec * USEC_PER_SEC : 0);
}

/* The body deadline of req, whose headers are in. */
static void connection_await_body(HttpConnection *c, HttpRequest *req) {
        c->req = req;
        c->window_bytes = 0;
        connection_arm_usec(c, c->daemon->server->config->body_timeout_sec * USEC_PER_SEC);
}

static HttpConnection *connection_of(struct MHD_Connection *connection) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection,
                                                                       MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return info ? info->socket_context : NULL;
}

/* ---- dispatch ---- */

/* libmicrohttpd's own unescaping, noting a %00: the path it hands on_access() is a C string
 * and would silently end there ("secret.txt%00.png" would be "secret.txt"). */
static size_t on_unescape(void *cls, struct MHD_Connection *connection, char *s) {
        HttpConnection *c = connection_of(connection);
        size_t n = MHD_http_unescape(s);

        if (c && memchr(s, 0, n))
                c->nul_unescaped = true;
        return n;
}

static enum MHD_Result find_nul_argument(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                         const char *value, size_t value_size) {
        const char **ret = cls;

        if (strlen(key) == key_size && (!value || strlen(value) == value_size))
                return MHD_YES;
        *ret = key;
        return MHD_NO;
}

/* A NUL byte in the request's path or query: refused, naming where, rather than cut. */
static int request_check_nul(HttpRequest *req) {
        HttpConnection *c = connection_of(req->connection);
        const char *key = NULL;

        if (!c || !c->nul_unescaped)
                return 0;
        c->nul_unescaped = false;
        (void) MHD_get_connection_values_n(req->connection, MHD_GET_ARGUMENT_KIND, find_nul_argument, &key);
        if (key)
                return http_request_reply_error(req, 400, "InvalidParameter",
                                                "Invalid parameter: %.64s (the query argument holds a NUL byte, %%00).",
                                                key);
        return http_request_reply_error(req, 400, "InvalidParameter",
                                        "Invalid parameter: the path (it holds a NUL byte, %%00).");
}

/* Splits url into segments in place ("/a/b" → "a", "b"); -E2BIG beyond max. */
static int split_path(char *url, char **segments, unsigned max, unsigned *ret_n) {
        unsigned n = 0;

        for (char *s = url, *t; s && *s; s = t) {
                while (*s == '/')
                        s++;
                if (!*s)
                        break;
                t = strchr(s, '/');
                if (t)
                        *t++ = 0;
                if (n >= max)
                        return -E2BIG;
                segments[n++] = s;
        }
        *ret_n = n;
        return 0;
}

/* Whether pattern matches the path; its parameters go to params. */
static bool route_matches(const char *pattern, char **segments, unsigned n, char **params) {
        char buf[256], *p[HTTP_PATH_SEGMENTS_MAX];
        unsigned np, k = 0;

        snprintf(buf, sizeof(buf), "%s", pattern);
        if (split_path(buf, p, HTTP_PATH_SEGMENTS_MAX, &np) < 0)
                return false;
        /* A last segment "{...}": any rest of the path, none too (http_request_url()). */
        if (np > 0 && streq(p[np - 1], "{...}")) {
                if (n < np - 1)
                        return false;
                np--;
                n = np;
        }
        if (np != n)
                return false;
        for (unsigned i = 0; i < n; i++) {
                if (streq(p[i], "{}")) {
                        if (k >= HTTP_PARAMS_MAX)
                                return false;
                        params[k++] = segments[i];
                } else if (!streq(p[i], segments[i]))
                        return false;
        }
        return true;
}

/* The route for method and url; *ret_path_known: some route has that path (405). */
static const HttpRoute *route_find(HttpRequest *req, const char *method, const char *url, char **params,
                                   bool *ret_path_known) {
        _cleanup_free_ char *copy = strdup(url);
        char *segments[HTTP_PATH_SEGMENTS_MAX];
        const HttpRoute *found = NULL;
        HttpRouteTable tables[2];
        const char *first = NULL;
        size_t n_tables;
        unsigned n;

        *ret_path_known = false;
        if (!copy || split_path(copy, segments, HTTP_PATH_SEGMENTS_MAX, &n) < 0)
                return NULL;
        n_tables = http_routes_select(req, tables, &first);
        for (size_t t = 0; t < n_tables && !found; t++)
                for (size_t i = 0; i < tables[t].n; i++) {
                        const HttpRoute *route = &tables[t].routes[i];
                        char *p[HTTP_PARAMS_MAX + 1] = {};
                        unsigned k0 = !!first;

                        if (!route_matches(route->pattern, segments, n, p + k0))
                                continue;
                        *ret_path_known = true;
                        if (!streq(route->method, method))
                                continue;
                        found = route;
                        p[0] = k0 ? (char *) first : p[0];
                        for (unsigned k = 0; k < HTTP_PARAMS_MAX; k++)
                                if (p[k]) {
                                        params[k] = strdup(p[k]);
                                        if (!params[k])
                                                return NULL;
                                }
                        break;
                }
        return found;
}

/* A bearer token; or E2B's SDKs' headers carrying one (docs/E2B.md): X-API-Key on the
 * control plane, X-Access-Token and E2B-Traffic-Access-Token on the sandbox plane. */
static const HttpToken *request_authenticate(HttpRequest *req) {
        const char *h = http_request_header(req, MHD_HTTP_HEADER_AUTHORIZATION), *p;
        char protocol_token[HTTP_WEBSOCKET_TOKEN_MAX + 1];

        if (h && strncasecmp(h, "Bearer ", 7) == 0) {
                h += 7;
                h += strspn(h, " ");
        } else if (!h && http_websocket_requested(req) && (p = http_request_header(req, "Sec-WebSocket-Protocol")) &&
                   http_websocket_protocol_token(p, protocol_token) >= 0) {
                /* A browser's WebSocket cannot send headers of its own: the token comes as
                 * a subprotocol "bearer.TOKEN", as Kubernetes' API server takes it. Only
                 * on a WebSocket's handshake: elsewhere the header is not one that logs
                 * and proxies on the way know to keep secret. */
                h = protocol_token;
        } else if (!(h = http_request_header(req, "X-API-Key")) &&
                   !(h = http_request_header(req, "X-Access-Token")) &&
                   !(h = http_request_header(req, "E2B-Traffic-Access-Token")))
                return NULL;
        return http_tokens_find(req->server->tokens, h, (uint64_t) time(NULL));
}

static bool content_length_exceeds(HttpRequest *req, uint64_t max) {
        const char *h = http_request_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
        char *end;
        unsigned long long v;

        if (!h)
                return false;
        errno = 0;
        v = strtoull(h, &end, 10);
        return errno != 0 || *end != 0 || v > max;
}

/* A request to switch protocols: a WebSocket, or any upgrade the port proxy passes on. */
static bool request_wants_upgrade(HttpRequest *req) {
        const char *connection = http_request_header(req, MHD_HTTP_HEADER_CONNECTION);

        return http_request_header(req, MHD_HTTP_HEADER_UPGRADE) && connection && strcasestr(connection, "upgrade");
}

/* Counts req under prefix + name (slot: which of its keys), refusing it beyond max: 0, or
 * the reply's result (429, sandboxd-http(8), LIMITS). */
static int request_count(HttpRequest *req, unsigned slot, const char *prefix, const char *name, unsigned max) {
        _cleanup_free_ char *key = strjoin(prefix, name);
        int64_t n;

        if (!key)
                return -ENOMEM;
        if (max == 0)
                return 0;
        n = server_count(req->server, key, +1);
        if (n < 0)
                return (int) n;
        req->counted[slot] = TAKE_PTR(key);
        if (n <= max)
                return 0;
        if (streq(prefix, "u:"))
                return http_request_reply_error(req, 429, "TooManyRequests",
                                                "Too many upgraded connections (WebSockets, tunnels) open for this "
                                                "token (at most %u, UpgradesPerToken=).", max);
        return http_request_reply_error(req, 429, "TooManyRequests",
                                        "Too many requests in progress for this %s (at most %u).",
                                        streq(prefix, "t:") ? "token" : "client address", max);
}

/* The client a trusted proxy forwards for: the last address of X-Forwarded-For that is
 * not itself a trusted proxy (headers combined in order), normalized as a peer's address.
 * An entry that is no address counts as the one client "invalid": a client cannot escape
 * its limit by writing new words into a header that a proxy passes on. */
typedef struct ForwardedFor {
        HttpServer *server;
        char client[INET6_ADDRSTRLEN + 8];
} ForwardedFor;

static enum MHD_Result on_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        ForwardedFor *f = cls;
        _cleanup_free_ char *copy = NULL;
        char *save = NULL;

        if (strcasecmp(key, "X-Forwarded-For") != 0 || !value)
                return MHD_YES;
        copy = strdup(value);
        if (!copy)
                return MHD_NO;
        for (char *a = strtok_r(copy, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
                char normal[INET6_ADDRSTRLEN];

                a += strspn(a, " \t");
                a[strcspn(a, " \t")] = 0;
                if (!*a)
                        continue;
                if (http_address_normalize(a, normal) < 0)
                        snprintf(f->client, sizeof(f->client), "invalid");
                else if (!address_is_trusted(f->server, normal))
                        snprintf(f->client, sizeof(f->client), "%s", normal);
        }
        return MHD_YES;
}

/* req->client, and the count of what a trusted proxy forwards for it. */
static int request_client(HttpRequest *req) {
        HttpConnection *c = connection_of(req->connection);
        ForwardedFor f = { .server = req->server };
        char key[HTTP_ADDRESS_KEY_MAX];

        if (!c)
                return 0;
        snprintf(req->client, sizeof(req->client), "%s", c->address);
        if (!address_is_trusted(req->server, c->address))
                return 0;       /* its X-Forwarded-For is the client's own word: ignored */
        (void) MHD_get_connection_values(req->connection, MHD_HEADER_KIND, on_header, &f);
        if (!f.client[0])
                return 0;       /* the proxy's own request */
        memcpy(req->client, f.client, sizeof(req->client));
        return request_count(req, 1, "f:", http_address_limit_key(f.client, key),
                             req->server->config->connections_per_ip);
}

/* The first call for a request: its route, its token, its limits. Replies at once when
 * one of them says no. */
static int request_begin(HttpRequest *req, const char *method, const char *url) {
        const HttpConfig *c = req->server->config;
        bool path_known;
        int r;

        req->server->stats.requests++;
        req->url = strdup(url);
        if (!req->url)
                return -ENOMEM;
        if (http_request_header(req, MHD_HTTP_HEADER_TRANSFER_ENCODING) &&
            http_request_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
                /* RFC 9112 §6.1: a proxy before us may have framed it the other way
                 * (request smuggling). Refused, and the connection closed. */
                req->close = true;
                return http_request_reply_error(req, 400, "InvalidRequest",
                                                "Content-Length and Transfer-Encoding together are refused.");
        }
        if (request_check_nul(req) != 0 || req->replied)
                return 0;
        r = request_client(req);
        if (r != 0)
                return r;
        req->route = route_find(req, method, url, req->params, &path_known);
        if (!req->route) {
                if (path_known)
                        return http_request_reply_error(req, 405, "MethodNotAllowed", "%s is not allowed on %s.",
                                                        method, url);
                return http_request_reply_error(req, 404, "NotFound", "No route %s %s.", method, url);
        }
        if (!(req->route->flags & HTTP_ROUTE_PUBLIC)) {
                const HttpToken *t = request_authenticate(req);

                if (!t) {
                        req->server->stats.unauthorized++;
                        return http_request_reply_error(req, 401, "Unauthorized",
                                                        "A valid bearer token is needed.");
                }
                req->authenticated = true;
                req->operator = t->operator;
                if (t->tenant) {
                        req->tenant = strdup(t->tenant);
                        if (!req->tenant)
                                return -ENOMEM;
                }
                r = request_count(req, 0, "t:", t->name, c->requests_per_token);
                if (r != 0)
                        return r;
                /* Counted from its request on: libmicrohttpd ends the request (on_completed())
                 * only when the upgraded connection is closed. */
                if (request_wants_upgrade(req)) {
                        r = request_count(req, 2, "u:", t->name, c->upgrades_per_token);
                        if (r != 0)
                                return r;
                }
        }
        if (content_length_exceeds(req, req->route->flags & HTTP_ROUTE_UPLOAD ? c->upload_max : c->body_max))
                return http_request_reply_error(req, 413, "PayloadTooLarge", "The body is larger than allowed.");
        return 0;
}

const void *http_request_raw_body(HttpRequest *req, size_t *ret_size) {
        *ret_size = req->body.size;
        return req->body.data ?: "";
}

static int request_take_body(HttpRequest *req, const char *data, size_t *size) {
        if (req->route->flags & HTTP_ROUTE_UPLOAD)
                return req->route->upload(req, data, size);
        if (req->body.size + *size > req->server->config->body_max) {
                *size = 0;
                return http_request_reply_error(req, 413, "PayloadTooLarge", "The body is larger than allowed.");
        }
        if (!(req->route->flags & (HTTP_ROUTE_JSON_BODY | HTTP_ROUTE_RAW_BODY))) {
                *size = 0;
                return http_request_reply_error(req, 400, "InvalidBody", "This route takes no body.");
        }
        int r = buffer_append(&req->body, data, *size);
        *size = 0;
        return r;
}

static int request_start(HttpRequest *req) {
        const char *error = NULL;

        req->started = true;
        if (req->route->flags & HTTP_ROUTE_JSON_BODY) {
                req->json = http_json_parse(req->body.data ?: "", req->body.size, &error);
                buffer_done(&req->body);
                if (!req->json)
                        return http_request_reply_error(req, 400, "InvalidBody", "%s", error);
                /* Only stdin's bytes may hold a NUL: every other string is a C string further on. */
                _cleanup_free_ char *field = NULL;
                int r = json_find_nul(req->json, (const char *const[]) { "stdin", NULL }, &field);
                if (r < 0)
                        return r;
                if (r > 0)
                        return http_request_reply_error(req, 400, "InvalidParameter",
                                                        "Invalid parameter: %.128s (it holds a NUL byte, \\u0000).",
                                                        field);
        }
        return req->route->handler(req);
}

static enum MHD_Result queue_reply(HttpRequest *req) {
        enum MHD_Result ok;
        unsigned class = req->status / 100;

        if (class < ELEMENTSOF(req->server->stats.responses_by_class))
                req->server->stats.responses_by_class[class]++;
        ok = MHD_queue_response(req->connection, req->status, req->response);
        MHD_destroy_response(req->response);
        req->response = NULL;
        return ok;
}

/* How much of a body answered before its end is read and dropped so that the answer can
 * go: the rest of a failed upload (its client sends it all before it reads), at most
 * HTTP_DISCARD_MAX of others'. */
static uint64_t request_discard_max(HttpRequest *req) {
        if (req->route && (req->route->flags & HTTP_ROUTE_UPLOAD))
                return MAX(req->server->config->upload_max, HTTP_DISCARD_MAX);
        return HTTP_DISCARD_MAX;
}

/* Whether a body follows the request's headers. */
static bool request_has_body(HttpRequest *req) {
        const char *cl = http_request_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);

        return http_request_header(req, MHD_HTTP_HEADER_TRANSFER_ENCODING) || (cl && !streq(cl, "0"));
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *connection, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls) {
        HttpDaemon *d = cls;
        HttpRequest *req = *con_cls;
        HttpConnection *c = connection_of(connection);
        bool body_call = *upload_data_size > 0;
        size_t given = *upload_data_size;
        enum MHD_Result ok = MHD_YES;
        int r = 0;

        if (!req) {
                req = calloc(1, sizeof(HttpRequest));
                if (!req)
                        return MHD_NO;
                *req = (HttpRequest) { .n_ref = 1, .server = d->server, .daemon = d, .connection = connection,
                                       .begun = now_usec() };
                snprintf(req->method, sizeof(req->method), "%s", method);
                *con_cls = req;
                r = request_begin(req, method, url);
                if (c) {
                        if (request_has_body(req) && !req->close)
                                connection_await_body(c, req);
                        else
                                connection_arm(c, false);
                }
        } else if (req->peer_closed) {
                return MHD_NO;          /* the client hung up while we waited */
        } else if (req->response && *upload_data_size > 0) {
                /* Answered while the body still comes: libmicrohttpd 0.9.75 drops a reply
                 * queued now (it closes the connection without it), so the rest is read and
                 * dropped, up to HTTP_DISCARD_MAX, and the reply goes once the body ended. */
                req->discarded += *upload_data_size;
                *upload_data_size = 0;
                ok = req->discarded > request_discard_max(req) ? MHD_NO : MHD_YES;
                goto counted;
        } else if (!body_call && !req->body_done) {
                req->body_done = true;
                if (c && c->req == req)
                        connection_arm(c, false);
        }
        if (req->started || req->response || r < 0)
                ;
        else if (*upload_data_size > 0)
                r = request_take_body(req, upload_data, upload_data_size);
        else if (req->body_done)
                r = request_start(req);

        if (r < 0 && !req->replied)
                (void) http_request_reply_errno(req, r);
        if (req->response && !body_call)
                return queue_reply(req);
        if (req->response && body_call) {
                /* Queued once the body ended (see above). */
                req->discarded += *upload_data_size;
                *upload_data_size = 0;
        } else if (req->started && *upload_data_size == 0)
                /* Nothing to answer yet, all data taken: waiting on sandboxd. */
                http_request_suspend(req);
counted:
        if (c && c->req == req)
                c->window_bytes += given - *upload_data_size;
        return ok;
}

/* The access log: one entry per request, its route's pattern (never the path, the query,
 * a header or the body), status (0: none was sent), tenant and duration (sandboxd-http(8),
 * ACCESS LOG). */
#define HTTP_ACCESS_MESSAGE_ID "671182baab724d8cbd304b7fffae00f9"

static void access_log(HttpRequest *req, enum MHD_RequestTerminationCode code) {
        const char *route = req->route ? req->route->pattern : "-", *tenant = req->tenant ?: "-",
                *client = req->client[0] ? req->client : "-";
        uint64_t usec = now_usec() - req->begun;
        bool complete = code == MHD_REQUEST_TERMINATED_COMPLETED_OK;

        if (!req->server->config->access_log)
                return;
        if (log_uses_journal())
                (void) sd_journal_send("MESSAGE=%s %s %u %s %" PRIu64 ".%03" PRIu64 " ms%s", req->method, route,
                                       req->status, tenant, usec / 1000, usec % 1000,
                                       complete ? "" : " (not completed)",
                                       "MESSAGE_ID=" HTTP_ACCESS_MESSAGE_ID, "PRIORITY=%i", LOG_INFO,
                                       "SYSLOG_IDENTIFIER=sandboxd-http", "HTTP_METHOD=%s", req->method,
                                       "HTTP_ROUTE=%s", route, "HTTP_STATUS=%u", req->status,
                                       "HTTP_TENANT=%s", tenant, "HTTP_CLIENT=%s", client,
                                       "HTTP_DURATION_USEC=%" PRIu64, usec,
                                       "HTTP_COMPLETED=%i", complete, NULL);
        else
                fprintf(stderr, "<%i>%s %s %u %s %" PRIu64 ".%03" PRIu64 " ms%s\n", LOG_INFO, req->method, route,
                        req->status, tenant, usec / 1000, usec % 1000, complete ? "" : " (not completed)");
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                         enum MHD_RequestTerminationCode code) {
        HttpRequest *req = *con_cls;

        if (!req)
                return;
        access_log(req, code);
        request_upgrade_failed(req);
        for (unsigned i = 0; i < ELEMENTSOF(req->counted); i++)
                if (req->counted[i])
                        (void) server_count(req->server, req->counted[i], -1);
        *con_cls = NULL;
        if (connection_of(connection))
                connection_arm(connection_of(connection), true);
        req->gone = true;
        req->suspended = false;
        req->hangup_source = sd_event_source_disable_unref(req->hangup_source);
        http_backend_cancel(req);
        http_request_unref(req);
}

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
        HttpDaemon *d = cls;
        HttpConnection *c = *socket_context;
        const union MHD_ConnectionInfo *info;
        char buf[INET6_ADDRSTRLEN];

        if (code == MHD_CONNECTION_NOTIFY_STARTED) {
                d->server->stats.connections++;
                c = calloc(1, sizeof(HttpConnection));
                if (!c)
                        return;
                *c = (HttpConnection) { .daemon = d, .connection = connection };
                info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
                snprintf(c->address, sizeof(c->address), "%s",
                         d->unix_socket ? "unix" : http_address_to_string(info ? info->client_addr : NULL, buf));
                if (!d->unix_socket && !address_is_trusted(d->server, c->address)) {
                        char k[HTTP_ADDRESS_KEY_MAX];
                        _cleanup_free_ char *key = strjoin("c:", http_address_limit_key(c->address, k));
                        c->counted = key && server_count(d->server, key, +1) >= 0;
                }
                if (sd_event_add_time_relative(d->server->event, &c->deadline, CLOCK_MONOTONIC, 0, 1,
                                               on_deadline, c) < 0)
                        c->deadline = NULL;
                connection_arm(c, true);
                *socket_context = c;
                return;
        }
        if (d->server->stats.connections > 0)
                d->server->stats.connections--;
        if (c) {
                if (c->counted) {
                        char k[HTTP_ADDRESS_KEY_MAX];
                        _cleanup_free_ char *key = strjoin("c:", http_address_limit_key(c->address, k));
                        if (key)
                                (void) server_count(d->server, key, -1);
                }
                sd_event_source_disable_unref(c->deadline);
                free(c);
                *socket_context = NULL;
        }
}

/* ConnectionsPerIP=: more connections from one address are refused as they come (a trusted
 * proxy's are not counted: its clients' requests are, by X-Forwarded-For). */
static enum MHD_Result on_accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
        HttpDaemon *d = cls;
        const HttpConfig *c = d->server->config;
        char buf[INET6_ADDRSTRLEN], k[HTTP_ADDRESS_KEY_MAX], key[HTTP_ADDRESS_KEY_MAX + 2];
        const char *a;
        json_object *v = NULL;

        if (d->unix_socket || c->connections_per_ip == 0 || !addr || addrlen < sizeof(sa_family_t))
                return MHD_YES;
        a = http_address_to_string(addr, buf);
        if (!a || address_is_trusted(d->server, a))
                return MHD_YES;
        snprintf(key, sizeof(key), "c:%s", http_address_limit_key(a, k));
        if (d->server->counts && json_object_object_get_ex(d->server->counts, key, &v) &&
            json_object_get_int64(v) >= c->connections_per_ip) {
                log_debug("Refused a connection from %s: %u open already.", a, c->connections_per_ip);
                return MHD_NO;
        }
        return MHD_YES;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        _cleanup_free_ char *s = NULL;

        if (vasprintf(&s, fmt, ap) >= 0)
                log_debug("libmicrohttpd: %s", s);
}

/* ---- the event loop ---- */

static int daemon_run(HttpDaemon *d) {
        MHD_UNSIGNED_LONG_LONG ms;
        int r;

        /* Twice: libmicrohttpd 0.9.75 takes connections resumed since the last run back
         * in one run and serves them only in the next, and MHD_get_timeout() does not
         * say 0 for them in between (a resumed download or upload stalled without it). */
        (void) MHD_run(d->mhd);
        (void) MHD_run(d->mhd);
        if (MHD_get_timeout(d->mhd, &ms) == MHD_YES) {
                r = sd_event_source_set_time_relative(d->timer, ms * 1000);
                if (r >= 0)
                        r = sd_event_source_set_enabled(d->timer, SD_EVENT_ONESHOT);
        } else
                r = sd_event_source_set_enabled(d->timer, SD_EVENT_OFF);
        return r;
}

static int on_daemon_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        return daemon_run(userdata);
}

static int on_daemon_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        return daemon_run(userdata);
}

static HttpDaemon *daemon_free(HttpDaemon *d) {
        if (!d)
                return NULL;
        sd_event_source_disable_unref(d->io);
        sd_event_source_disable_unref(d->timer);
        if (d->mhd) {
                /* MHD may not be stopped with suspended connections: resume them all
                 * (their requests are answered or dropped as the daemon stops). */
                (void) MHD_quiesce_daemon(d->mhd);
                MHD_stop_daemon(d->mhd);
        }
        return mfree(d);
}

static bool fd_is_unix(int fd) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);

        return getsockname(fd, (struct sockaddr *) &ss, &len) >= 0 && ss.ss_family == AF_UNIX;
}

int http_server_listen_fd(HttpServer *s, int fd) {
        const HttpConfig *c = s->config;
        const union MHD_DaemonInfo *info;
        HttpDaemon *d, **a;
        int r;

        d = calloc(1, sizeof(HttpDaemon));
        if (!d) {
                safe_close(fd);
                return -ENOMEM;
        }
        d->server = s;
        d->unix_socket = fd_is_unix(fd);
        d->mhd = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG, 0, on_accept_policy, d,
                                  on_access, d,
                                  MHD_OPTION_LISTEN_SOCKET, fd,
                                  MHD_OPTION_CONNECTION_LIMIT, c->connections_max,
                                  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) c->connection_timeout_sec,
                                  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t) (128 * 1024),
                                  MHD_OPTION_NOTIFY_COMPLETED, on_completed, d,
                                  MHD_OPTION_NOTIFY_CONNECTION, on_connection, d,
                                  MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, d,
                                  MHD_OPTION_UNESCAPE_CALLBACK, on_unescape, d,
                                  MHD_OPTION_END);
        if (!d->mhd) {
                safe_close(fd);
                free(d);
                return log_error_errno(-EINVAL, "libmicrohttpd refused to serve socket %d.", fd);
        }
        info = MHD_get_daemon_info(d->mhd, MHD_DAEMON_INFO_EPOLL_FD);
        r = info ? sd_event_add_io(s->event, &d->io, info->epoll_fd, EPOLLIN, on_daemon_io, d) : -EINVAL;
        if (r >= 0)
                /* Accuracy 1 µs: sd-event's default (250 ms) would delay every resumed connection. */
                r = sd_event_add_time_relative(s->event, &d->timer, CLOCK_MONOTONIC, 0, 1, on_daemon_timer, d);
        if (r >= 0) {
                a = reallocarray(s->daemons, s->n_daemons + 1, sizeof(HttpDaemon *));
                if (!a)
                        r = -ENOMEM;
                else {
                        s->daemons = a;
                        s->daemons[s->n_daemons++] = d;
                        return 0;
                }
        }
        daemon_free(d);
        return r;
}

static int listen_unix(const char *path) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void) unlink(path);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, SOMAXCONN) < 0)
                return -errno;
        return TAKE_FD(fd);
}

int http_listen_inet(const char *address) {
        _cleanup_free_ char *host = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_storage ss = {};
        const char *colon = strrchr(address, ':');
        unsigned long port;
        socklen_t len;
        char *end;
        int one = 1;

        if (!colon)
                return -EINVAL;
        port = strtoul(colon + 1, &end, 10);
        if (*end || port == 0 || port > 65535)
                return -EINVAL;
        host = address[0] == '[' ? strndup(address + 1, colon - address - 2) : strndup(address, colon - address);
        if (!host)
                return -ENOMEM;
        if (inet_pton(AF_INET, host, &((struct sockaddr_in *) &ss)->sin_addr) == 1) {
                ((struct sockaddr_in *) &ss)->sin_family = AF_INET;
                ((struct sockaddr_in *) &ss)->sin_port = htons(port);
                len = sizeof(struct sockaddr_in);
        } else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *) &ss)->sin6_addr) == 1) {
                ((struct sockaddr_in6 *) &ss)->sin6_family = AF_INET6;
                ((struct sockaddr_in6 *) &ss)->sin6_port = htons(port);
                len = sizeof(struct sockaddr_in6);
        } else
                return -EINVAL;
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *) &ss, len) < 0 || listen(fd, SOMAXCONN) < 0)
                return -errno;
        return TAKE_FD(fd);
}

int http_server_listen_address(HttpServer *s, const char *address) {
        int fd = address[0] == '/' ? listen_unix(address) : http_listen_inet(address);

        if (fd < 0)
                return log_error_errno(fd, "Cannot listen on %s: %m", address);
        return http_server_listen_fd(s, fd);
}

int http_server_new(HttpServer **ret, sd_event *event, const HttpConfig *config, HttpTokens *tokens) {
        HttpServer *s = calloc(1, sizeof(HttpServer));

        if (!s)
                return -ENOMEM;
        s->event = sd_event_ref(event);
        s->config = config;
        s->tokens = tokens;
        *ret = s;
        return 0;
}

HttpServer *http_server_free(HttpServer *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_daemons; i++)
                daemon_free(s->daemons[i]);
        free(s->daemons);
        json_object_put(s->counts);
        sd_event_unref(s->event);
        return mfree(s);
}

const HttpStats *http_server_stats(HttpServer *s) {
        return &s->stats;
}

const HttpConfig *http_server_config(HttpServer *s) {
        return s->config;
}

sd_event *http_server_event(HttpServer *s) {
        return s->event;
}

HttpBackend *http_server_backend(HttpServer *s) {
        return s->backend;
}

void http_server_set_backend(HttpServer *s, HttpBackend *b) {
        s->backend = b;
}
