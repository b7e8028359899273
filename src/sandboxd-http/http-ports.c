/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* /api/v1/sessions/{id}/ports/{port}/…: HTTP and WebSocket to a server on a sandbox's own
 * loopback (docs/PORTS.md). sandboxd opens the connection inside the sandbox (OpenPort,
 * the descriptor passed with the varlink reply); the bridge writes the request to it, with
 * the path after the port, and streams the response back as it comes (Node's http_parser
 * reads it: status, headers, the body de-chunked), never more than PROXY_BUFFER_MAX ahead
 * of the client. A request to upgrade (WebSocket) that the server accepts becomes a byte
 * tunnel both ways after the 101: no framing is looked at. */

#include <errno.h>
#include <http_parser.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fd-util.h"
#include "http.h"
#include "json-util.h"
#include "log.h"
#include "parse-util.h"
#include "strv.h"

/* The response bytes the bridge holds for a slow client before it stops reading. */
#define PROXY_BUFFER_MAX (256U * 1024U)
#define PROXY_READ_SIZE (64U * 1024U)
/* The response head (status line and headers) at most. */
#define PROXY_HEAD_MAX (64U * 1024U)

typedef struct Pipe {
        char *data;
        size_t start, end, allocated;
        bool eof;       /* its source ended */
} Pipe;

typedef struct PortProxy {
        HttpRequest *req;
        int fd;                          /* to the sandbox's port */
        sd_event_source *io;
        Pipe up;                         /* the request, then (tunnel) what the client sends */
        http_parser parser;
        char **headers;                  /* name, value, … of the response */
        size_t head_size;
        bool in_value;
        bool replied;                    /* the response (or 101) is made */
        bool upgrade;                    /* the client asked for an upgrade */
        bool done;
        /* The tunnel, after a 101. */
        HttpUpgraded *tunnel;
        int client_fd;
        sd_event_source *client_io;
        Pipe down;                       /* what the server sent, for the client */
} PortProxy;

static void pipe_done(Pipe *p) {
        p->data = mfree(p->data);
        p->start = p->end = p->allocated = 0;
}

static int pipe_append(Pipe *p, const void *data, size_t size) {
        if (p->start > 0 && p->start == p->end)
                p->start = p->end = 0;
        if (p->allocated - p->end < size) {
                size_t n = MAX(p->allocated * 2, p->end + size);
                char *d = realloc(p->data, n);
                if (!d)
                        return -ENOMEM;
                p->data = d;
                p->allocated = n;
        }
        memcpy(p->data + p->end, data, size);
        p->end += size;
        return 0;
}

static size_t pipe_size(const Pipe *p) {
        return p->end - p->start;
}

/* One send() of what p holds to fd: 0 when it took something or nothing is there, -errno. */
static int pipe_flush(Pipe *p, int fd) {
        ssize_t n;

        if (pipe_size(p) == 0)
                return 0;
        n = send(fd, p->data + p->start, pipe_size(p), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        p->start += (size_t) n;
        return 0;
}

static void proxy_free(void *userdata) {
        PortProxy *p = userdata;

        if (!p)
                return;
        sd_event_source_disable_unref(p->io);
        sd_event_source_disable_unref(p->client_io);
        safe_close(p->fd);
        if (p->tunnel)
                http_upgraded_close(p->tunnel);
        pipe_done(&p->up);
        pipe_done(&p->down);
        strv_free(p->headers);
        free(p);
}

static void proxy_update_io(PortProxy *p);

/* The response failed before it began: an error reply; after: a cut stream. */
static void proxy_fail(PortProxy *p, unsigned status, const char *message) {
        p->done = true;
        p->io = sd_event_source_disable_unref(p->io);
        p->fd = safe_close(p->fd);
        if (!p->replied) {
                p->replied = true;
                (void) http_request_reply_error(p->req, status, status == 502 ? "BadGateway" : "InternalError", "%s",
                                                message);
        } else
                http_request_stream_end(p->req, true);
}

/* ---- the response ---- */

/* http_parser hands a name or value over in parts when a read ends inside it. */
static int header_part_append(char **slot, const char *at, size_t length) {
        char *joined;

        if (asprintf(&joined, "%s%.*s", *slot, (int) length, at) < 0)
                return -1;
        free(*slot);
        *slot = joined;
        return 0;
}

static int on_header_field(http_parser *parser, const char *at, size_t length) {
        PortProxy *p = parser->data;
        size_t n = strv_length(p->headers);

        p->head_size += length;
        if (p->head_size > PROXY_HEAD_MAX)
                return -1;
        if (p->in_value || n == 0) {
                p->in_value = false;
                if (strv_consume(&p->headers, strndup(at, length)) < 0)
                        return -1;
                return 0;
        }
        /* A name in parts. */
        return header_part_append(&p->headers[n - 1], at, length);
}

static int on_header_value(http_parser *parser, const char *at, size_t length) {
        PortProxy *p = parser->data;
        size_t n = strv_length(p->headers);

        p->head_size += length;
        if (p->head_size > PROXY_HEAD_MAX || n == 0)
                return -1;
        if (!p->in_value && n % 2 == 1) {
                p->in_value = true;
                return strv_consume(&p->headers, strndup(at, length)) < 0 ? -1 : 0;
        }
        return header_part_append(&p->headers[n - 1], at, length);
}

/* Hop-by-hop headers, and those libmicrohttpd makes itself: not passed on. */
static bool header_is_ours(const char *name, bool tunnel) {
        static const char *const names[] = {
                "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "TE", "Trailer",
                "Content-Length", "Date", "Cache-Control-Dummy",
        };

        if (!tunnel && strcasecmp(name, "Upgrade") == 0)
                return true;
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (strcasecmp(name, names[i]) == 0)
                        return true;
        return false;
}

static void on_tunnel(HttpUpgraded *u, int fd, const char *extra, size_t extra_size, void *userdata);
static int proxy_pull(HttpRequest *req);

static int on_headers_complete(http_parser *parser) {
        PortProxy *p = parser->data;
        bool tunnel = parser->status_code == 101 && p->upgrade;
        uint64_t length = MHD_SIZE_UNKNOWN;
        int r;

        p->replied = true;
        if (tunnel) {
                _cleanup_strv_free_ char **passed = NULL;

                /* The server's headers (Upgrade, Sec-WebSocket-Accept, …), as it sent them. */
                for (char **h = p->headers; h && h[0] && h[1]; h += 2)
                        if (!header_is_ours(h[0], true) &&
                            (strv_extend(&passed, h[0]) < 0 || strv_extend(&passed, h[1]) < 0))
                                return -1;
                r = http_request_upgrade(p->req, (const char *const *) passed, on_tunnel, p);
                /* A tunnel has no body: http_parser stops here (2). */
                return r < 0 ? -1 : 2;
        } else {
                if (!(parser->flags & F_CHUNKED) && parser->content_length != ULLONG_MAX)
                        length = parser->content_length;
                if (strcmp(http_request_method(p->req), "HEAD") == 0 || parser->status_code == 204 ||
                    parser->status_code == 304)
                        length = 0;
                r = http_request_stream(p->req, parser->status_code, NULL, length, proxy_pull);
        }
        if (r < 0)
                return -1;
        for (char **h = p->headers; h && h[0] && h[1]; h += 2)
                if (!header_is_ours(h[0], false))
                        (void) http_request_add_header(p->req, h[0], h[1]);
        /* A HEAD's response has no body, whatever its length says. */
        return strcmp(http_request_method(p->req), "HEAD") == 0 ? 1 : 0;
}

static int on_body(http_parser *parser, const char *at, size_t length) {
        PortProxy *p = parser->data;

        return http_request_stream_write(p->req, at, length) < 0 ? -1 : 0;
}

static int on_message_complete(http_parser *parser) {
        PortProxy *p = parser->data;

        if (!p->upgrade || parser->status_code != 101) {
                p->done = true;
                http_request_stream_end(p->req, false);
        }
        return 0;
}

static const http_parser_settings parser_settings = {
        .on_header_field = on_header_field,
        .on_header_value = on_header_value,
        .on_headers_complete = on_headers_complete,
        .on_body = on_body,
        .on_message_complete = on_message_complete,
};

static int proxy_pull(HttpRequest *req) {
        PortProxy *p = http_request_get_data(req);

        /* The client took what was held: read on. */
        if (p)
                proxy_update_io(p);
        return 0;
}

/* ---- the tunnel (after a 101) ---- */

static void tunnel_update(PortProxy *p);

static void tunnel_end(PortProxy *p) {
        p->io = sd_event_source_disable_unref(p->io);
        p->client_io = sd_event_source_disable_unref(p->client_io);
        p->fd = safe_close(p->fd);
        http_upgraded_close(TAKE_PTR(p->tunnel));
        proxy_free(p);
}

/* One direction: reads from `from` into pipe while it has room, writes it to `to`. */
static int tunnel_move(int from, Pipe *pipe, int to, uint32_t revents) {
        char buf[PROXY_READ_SIZE];
        ssize_t n;
        int r;

        if ((revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !pipe->eof && pipe_size(pipe) < PROXY_BUFFER_MAX) {
                n = recv(from, buf, sizeof(buf), MSG_DONTWAIT);
                if (n > 0) {
                        r = pipe_append(pipe, buf, (size_t) n);
                        if (r < 0)
                                return r;
                } else if (n == 0 || (errno != EAGAIN && errno != EINTR))
                        pipe->eof = true;
        }
        r = pipe_flush(pipe, to);
        if (r < 0)
                return r;
        if (pipe->eof && pipe_size(pipe) == 0)
                (void) shutdown(to, SHUT_WR);
        return 0;
}

static int on_tunnel_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        PortProxy *p = userdata;
        bool server = fd == p->fd;
        int r;

        /* server: its bytes go down to the client; client: up to the server. */
        r = server ? tunnel_move(p->fd, &p->down, p->client_fd, revents) :
                     tunnel_move(p->client_fd, &p->up, p->fd, revents);
        if (r >= 0)
                r = server ? pipe_flush(&p->up, p->fd) : pipe_flush(&p->down, p->client_fd);
        if (r < 0 || (p->up.eof && pipe_size(&p->up) == 0 && p->down.eof && pipe_size(&p->down) == 0)) {
                tunnel_end(p);
                return 0;
        }
        tunnel_update(p);
        return 0;
}

static void tunnel_update(PortProxy *p) {
        uint32_t server = 0, client = 0;

        if (!p->down.eof && pipe_size(&p->down) < PROXY_BUFFER_MAX)
                server |= EPOLLIN;
        if (pipe_size(&p->up) > 0)
                server |= EPOLLOUT;
        if (!p->up.eof && pipe_size(&p->up) < PROXY_BUFFER_MAX)
                client |= EPOLLIN;
        if (pipe_size(&p->down) > 0)
                client |= EPOLLOUT;
        (void) sd_event_source_set_io_events(p->io, server);
        (void) sd_event_source_set_enabled(p->io, server ? SD_EVENT_ON : SD_EVENT_OFF);
        (void) sd_event_source_set_io_events(p->client_io, client);
        (void) sd_event_source_set_enabled(p->client_io, client ? SD_EVENT_ON : SD_EVENT_OFF);
}

static void on_tunnel(HttpUpgraded *u, int fd, const char *extra, size_t extra_size, void *userdata) {
        PortProxy *p = userdata;
        sd_event *event = http_server_event(http_request_server(p->req));
        int r;

        /* From here on the tunnel is the proxy's own, apart from the request's. */
        (void) http_request_take_data(p->req);
        p->tunnel = u;
        if (fd < 0) {
                tunnel_end(p);          /* the client went before its 101 */
                return;
        }
        p->client_fd = fd;
        p->io = sd_event_source_disable_unref(p->io);
        pipe_done(&p->up);
        r = extra_size > 0 ? pipe_append(&p->up, extra, extra_size) : 0;
        if (r >= 0)
                r = sd_event_add_io(event, &p->io, p->fd, EPOLLIN, on_tunnel_io, p);
        if (r >= 0)
                r = sd_event_add_io(event, &p->client_io, fd, EPOLLIN, on_tunnel_io, p);
        if (r < 0) {
                tunnel_end(p);
                return;
        }
        tunnel_update(p);
}

/* ---- the request ---- */

static int on_upstream_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        PortProxy *p = userdata;
        char buf[PROXY_READ_SIZE];
        ssize_t n;
        int r;

        r = pipe_flush(&p->up, p->fd);
        if (r < 0) {
                proxy_fail(p, 502, "The sandbox's server closed the connection before it answered.");
                return 0;
        }
        if ((revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !p->done) {
                n = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        n = -1;
                else if (n < 0) {
                        proxy_fail(p, 502, "Failed to read the answer of the sandbox's server.");
                        return 0;
                }
                if (n >= 0) {
                        size_t k = http_parser_execute(&p->parser, &parser_settings, buf, (size_t) n);

                        if (p->parser.upgrade && p->upgrade && p->parser.status_code == 101) {
                                /* The server's first bytes after its 101 are the client's. */
                                if (k < (size_t) n && pipe_append(&p->down, buf + k, (size_t) n - k) < 0)
                                        return -ENOMEM;
                                p->io = sd_event_source_disable_unref(p->io);
                                return 0;
                        }
                        if (HTTP_PARSER_ERRNO(&p->parser) != HPE_OK || (n == 0 && !p->done)) {
                                /* EOF ends a response without a length; else it was cut. */
                                if (n == 0 && p->replied && !(p->parser.flags & F_CHUNKED))
                                        http_parser_execute(&p->parser, &parser_settings, NULL, 0);
                                if (!p->done)
                                        proxy_fail(p, 502, n == 0 ?
                                                   "The sandbox's server closed the connection before it answered." :
                                                   "The sandbox's server did not answer in HTTP.");
                                return 0;
                        }
                }
        }
        if (p->done) {
                p->io = sd_event_source_disable_unref(p->io);
                p->fd = safe_close(p->fd);
                return 0;
        }
        proxy_update_io(p);
        return 0;
}

static void proxy_update_io(PortProxy *p) {
        uint32_t events = 0;

        if (!p->io || p->done)
                return;
        if (pipe_size(&p->up) > 0)
                events |= EPOLLOUT;
        /* Backpressure: nothing more read while the client has not taken what is held. */
        if (!p->replied || http_request_stream_buffered(p->req) < PROXY_BUFFER_MAX)
                events |= EPOLLIN;
        (void) sd_event_source_set_io_events(p->io, events);
        (void) sd_event_source_set_enabled(p->io, events ? SD_EVENT_ON : SD_EVENT_OFF);
}

/* The path after /ports/{port}, %-encoded again, and the query as it can be rebuilt. */
static int append_encoded(Pipe *out, const char *s, bool path) {
        static const char hex[] = "0123456789ABCDEF";

        for (const unsigned char *c = (const unsigned char *) s; *c; c++) {
                bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                             strchr("-._~!$&'()*+,;=:@", *c) || (path && *c == '/');
                char e[3] = { '%', hex[*c >> 4], hex[*c & 15] };
                int r = plain ? pipe_append(out, c, 1) : pipe_append(out, e, 3);
                if (r < 0)
                        return r;
        }
        return 0;
}

typedef struct QueryBuild {
        Pipe *out;
        bool first;
        int error;
} QueryBuild;

static enum MHD_Result add_query(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        QueryBuild *q = cls;

        if (q->error < 0)
                return MHD_NO;
        q->error = pipe_append(q->out, q->first ? "?" : "&", 1);
        q->first = false;
        if (q->error >= 0)
                q->error = append_encoded(q->out, key, false);
        if (q->error >= 0 && value) {
                q->error = pipe_append(q->out, "=", 1);
                if (q->error >= 0)
                        q->error = append_encoded(q->out, value, false);
        }
        return q->error < 0 ? MHD_NO : MHD_YES;
}

typedef struct HeaderBuild {
        Pipe *out;
        bool upgrade;
        int error;
} HeaderBuild;

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        static const char *const dropped[] = {
                /* hop-by-hop, made again below, or the bridge's own (the token) */
                "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding",
                "Content-Length", "Authorization", "X-API-Key", "X-Access-Token", "E2B-Traffic-Access-Token",
                "Proxy-Authorization",
        };
        HeaderBuild *h = cls;

        if (h->error < 0)
                return MHD_NO;
        for (size_t i = 0; i < ELEMENTSOF(dropped); i++)
                if (strcasecmp(key, dropped[i]) == 0)
                        return MHD_YES;
        if (!h->upgrade && strcasecmp(key, "Upgrade") == 0)
                return MHD_YES;
        if (strcasecmp(key, "Sec-WebSocket-Protocol") == 0) {
                /* A browser's token rides here ("bearer.TOKEN"): the sandbox never sees it. */
                _cleanup_free_ char *kept = NULL;

                if (http_websocket_protocol_strip_token(value, &kept) < 0) {
                        h->error = -ENOMEM;
                        return MHD_NO;
                }
                if (isempty(kept))
                        return MHD_YES;
                if (pipe_append(h->out, key, strlen(key)) < 0 || pipe_append(h->out, ": ", 2) < 0 ||
                    pipe_append(h->out, kept, strlen(kept)) < 0 || pipe_append(h->out, "\r\n", 2) < 0)
                        h->error = -ENOMEM;
                return h->error < 0 ? MHD_NO : MHD_YES;
        }
        if (pipe_append(h->out, key, strlen(key)) < 0 || pipe_append(h->out, ": ", 2) < 0 ||
            pipe_append(h->out, value ?: "", strlen(value ?: "")) < 0 || pipe_append(h->out, "\r\n", 2) < 0)
                h->error = -ENOMEM;
        return h->error < 0 ? MHD_NO : MHD_YES;
}

/* The request as the sandbox's server gets it: the same method, headers (but the token
 * and hop-by-hop ones), the path after the port, the body (at most BodyMax, taken whole). */
static int proxy_build_request(PortProxy *p, const char *rest) {
        HttpRequest *req = p->req;
        const char *connection = http_request_header(req, MHD_HTTP_HEADER_CONNECTION);
        const char *upgrade = http_request_header(req, MHD_HTTP_HEADER_UPGRADE);
        QueryBuild q = { .out = &p->up, .first = true };
        HeaderBuild h = { .out = &p->up };
        const void *body;
        size_t size = 0;
        char line[64];
        int r;

        p->upgrade = upgrade && connection && strcasestr(connection, "upgrade");
        h.upgrade = p->upgrade;
        body = http_request_raw_body(req, &size);
        r = pipe_append(&p->up, http_request_method(req), strlen(http_request_method(req)));
        if (r >= 0)
                r = pipe_append(&p->up, " ", 1);
        if (r >= 0)
                r = append_encoded(&p->up, isempty(rest) ? "/" : rest, true);
        if (r < 0)
                return r;
        (void) MHD_get_connection_values(http_request_connection(req), MHD_GET_ARGUMENT_KIND, add_query, &q);
        if (q.error < 0)
                return q.error;
        r = pipe_append(&p->up, " HTTP/1.1\r\n", 11);
        if (r < 0)
                return r;
        (void) MHD_get_connection_values(http_request_connection(req), MHD_HEADER_KIND, add_header, &h);
        if (h.error < 0)
                return h.error;
        snprintf(line, sizeof(line), "Content-Length: %zu\r\n", size);
        r = pipe_append(&p->up, p->upgrade ? "Connection: Upgrade\r\n" : "Connection: close\r\n",
                        p->upgrade ? 21 : 19);
        if (r >= 0 && (size > 0 || !p->upgrade))
                r = pipe_append(&p->up, line, strlen(line));
        if (r >= 0)
                r = pipe_append(&p->up, "\r\n", 2);
        if (r >= 0 && size > 0)
                r = pipe_append(&p->up, body, size);
        return r;
}

static int on_port_opened(HttpRequest *req, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                          void *userdata) {
        PortProxy *p = http_request_get_data(req);
        int r;

        if (error) {
                /* Nothing listens there: the gateway's error, named as sandboxd names it. */
                if (streq(error, "io.sandboxd.Sandbox.NoSuchProcess")) {
                        json_object *m = NULL;
                        (void) json_object_object_get_ex(parameters, "message", &m);
                        return http_request_reply_error(req, 502, "NoSuchProcess", "%s",
                                                        m ? json_object_get_string(m) : "Nothing listens there.");
                }
                return http_request_reply_varlink_error(req, error, parameters);
        }
        p->fd = http_backend_take_fd(req);
        if (p->fd < 0)
                return http_request_reply_error(req, 502, "BadGateway", "sandboxd passed no connection.");
        http_parser_init(&p->parser, HTTP_RESPONSE);
        p->parser.data = p;
        r = sd_event_add_io(http_server_event(http_request_server(req)), &p->io, p->fd, EPOLLIN | EPOLLOUT,
                            on_upstream_io, p);
        if (r < 0)
                return http_request_reply_errno(req, r);
        return 0;
}

int http_port_proxy(HttpRequest *req, const char *id, const char *port, const char *rest) {
        _cleanup_json_ json_object *params = json_object_new_object();
        PortProxy *p;
        uint64_t n;
        int r;

        if (parse_uint64(port, &n) < 0 || n == 0 || n > 65535)
                return http_request_reply_error(req, 400, "InvalidOption", "Port '%.16s' is not 1…65535.", port);
        p = calloc(1, sizeof(PortProxy));
        if (!p)
                return -ENOMEM;
        *p = (PortProxy) { .req = req, .fd = -EBADF, .client_fd = -EBADF };
        http_request_set_data(req, p, proxy_free);
        r = proxy_build_request(p, rest);
        if (r < 0)
                return r;
        if (!params || json_add(params, "id", json_object_new_string(id)) < 0 ||
            json_add(params, "port", json_object_new_int64((int64_t) n)) < 0)
                return -ENOMEM;
        return http_backend_call(req, "io.sandboxd.Sandbox.OpenPort", TAKE_PTR(params), 0, on_port_opened, NULL);
}
