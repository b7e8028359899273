/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* WebSocket (RFC 6455) on a connection libmicrohttpd upgraded: the handshake's accept key
 * (SHA-1 by GnuTLS), and the framing by libwslay's event API, driven from the server's
 * sd-event loop (docs/TERMINALS.md: why wslay and not libwebsockets). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <wslay/wslay.h>

#include "base64-util.h"
#include "http.h"
#include "json-util.h"
#include "log.h"
#include "parse-util.h"

#define WEBSOCKET_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
/* A message from the client: a terminal's keystrokes, a paste, a resize. */
#define WEBSOCKET_MESSAGE_MAX (1024U * 1024U)

struct HttpWebSocket {
        HttpUpgraded *upgraded;
        int fd;
        sd_event *event;
        sd_event_source *io;
        sd_event_source *defer;         /* closed() from the loop, not from within a call */
        wslay_event_context_ptr ctx;
        char *extra;                    /* what came after the request, read first */
        size_t extra_size, extra_read;
        HttpWebSocketCallbacks callbacks;
        void (*drained)(HttpWebSocket *ws, void *userdata);
        void *userdata;
        bool paused, failed, closed_called;
        /* wslay sends control frames ahead of queued messages: a close waits here until
         * what was queued before it is out. */
        bool close_pending;
        uint16_t close_status;
        char *close_reason;
};

int http_websocket_protocol_token(const char *header, char ret[static HTTP_WEBSOCKET_TOKEN_MAX + 1]) {
        for (const char *p = header; p && *p;) {
                size_t n;

                p += strspn(p, " \t,");
                n = strcspn(p, " \t,");
                if (n > strlen("bearer.") && strncmp(p, "bearer.", strlen("bearer.")) == 0 &&
                    n - strlen("bearer.") <= HTTP_WEBSOCKET_TOKEN_MAX) {
                        memcpy(ret, p + strlen("bearer."), n - strlen("bearer."));
                        ret[n - strlen("bearer.")] = '\0';
                        return 0;
                }
                p += n;
        }
        return -ENOENT;
}

/* header without its "bearer.TOKEN" entries (allocated; "" when none is left): what a
 * server behind the bridge may see of the client's subprotocols, never the token. */
int http_websocket_protocol_strip_token(const char *header, char **ret) {
        char *out = malloc(strlen(header ?: "") + 1);
        size_t k = 0;

        if (!out)
                return -ENOMEM;
        for (const char *p = header; p && *p;) {
                size_t n;

                p += strspn(p, " \t,");
                n = strcspn(p, " \t,");
                if (n > 0 && !(n >= strlen("bearer.") && strncasecmp(p, "bearer.", strlen("bearer.")) == 0)) {
                        if (k > 0) {
                                memcpy(out + k, ", ", 2);
                                k += 2;
                        }
                        memcpy(out + k, p, n);
                        k += n;
                }
                p += n;
        }
        out[k] = 0;
        *ret = out;
        return 0;
}

static bool header_has_token(const char *value, const char *token) {
        size_t l = strlen(token);

        for (const char *p = value; p && *p;) {
                size_t n;

                p += strspn(p, " \t,");
                n = strcspn(p, " \t,");
                if (n == l && strncasecmp(p, token, l) == 0)
                        return true;
                p += n;
        }
        return false;
}

bool http_websocket_requested(HttpRequest *req) {
        const char *upgrade = http_request_header(req, "Upgrade"), *connection = http_request_header(req, "Connection"),
                   *version = http_request_header(req, "Sec-WebSocket-Version"),
                   *key = http_request_header(req, "Sec-WebSocket-Key");

        return upgrade && header_has_token(upgrade, "websocket") && connection &&
               header_has_token(connection, "upgrade") && version && streq(version, "13") && key;
}

/* ---- the loop ---- */

static void websocket_free(HttpWebSocket *ws) {
        if (!ws)
                return;
        sd_event_source_disable_unref(ws->io);
        sd_event_source_disable_unref(ws->defer);
        if (ws->ctx)
                wslay_event_context_free(ws->ctx);
        /* The socket is libmicrohttpd's to close. */
        http_upgraded_close(ws->upgraded);
        free(ws->extra);
        free(ws->close_reason);
        free(ws);
}

static int on_closed_defer(sd_event_source *s, void *userdata) {
        HttpWebSocket *ws = userdata;

        ws->callbacks.closed(ws, ws->userdata);
        websocket_free(ws);
        return 0;
}

/* The connection is over: closed() once, from the loop. */
static void websocket_finish(HttpWebSocket *ws) {
        if (ws->closed_called)
                return;
        ws->closed_called = true;
        ws->io = sd_event_source_disable_unref(ws->io);
        if (sd_event_add_defer(ws->event, &ws->defer, on_closed_defer, ws) < 0 ||
            sd_event_source_set_enabled(ws->defer, SD_EVENT_ONESHOT) < 0)
                log_error("Cannot schedule the end of a WebSocket; it stays open.");
}

static void websocket_update(HttpWebSocket *ws) {
        uint32_t events = 0;

        if (ws->closed_called || !ws->io)
                return;         /* over, or not upgraded yet */
        if (ws->close_pending && wslay_event_get_queued_msg_length(ws->ctx) == 0) {
                ws->close_pending = false;
                (void) wslay_event_queue_close(ws->ctx, ws->close_status, (const uint8_t *) strempty(ws->close_reason),
                                               strlen(strempty(ws->close_reason)));
        }
        if (!ws->paused && wslay_event_want_read(ws->ctx))
                events |= EPOLLIN;
        if (wslay_event_want_write(ws->ctx))
                events |= EPOLLOUT;
        /* Nothing to read or write: both sides closed, or a failure. */
        if (events == 0 && (!ws->paused || ws->failed || wslay_event_get_close_sent(ws->ctx))) {
                websocket_finish(ws);
                return;
        }
        if (sd_event_source_set_io_events(ws->io, events) < 0 ||
            sd_event_source_set_enabled(ws->io, events ? SD_EVENT_ON : SD_EVENT_OFF) < 0)
                websocket_finish(ws);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        HttpWebSocket *ws = userdata;
        size_t before = wslay_event_get_queued_msg_length(ws->ctx);

        if ((revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !ws->paused && wslay_event_recv(ws->ctx) != 0)
                ws->failed = true;
        if (!ws->failed && (revents & EPOLLOUT) && wslay_event_send(ws->ctx) != 0)
                ws->failed = true;
        if (ws->failed) {
                websocket_finish(ws);
                return 0;
        }
        if (ws->drained && wslay_event_get_queued_msg_length(ws->ctx) < before)
                ws->drained(ws, ws->userdata);
        if (!ws->closed_called)
                websocket_update(ws);
        return 0;
}

static ssize_t on_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *userdata) {
        HttpWebSocket *ws = userdata;
        ssize_t n;

        if (ws->extra_read < ws->extra_size) {
                n = (ssize_t) MIN(len, ws->extra_size - ws->extra_read);
                memcpy(buf, ws->extra + ws->extra_read, (size_t) n);
                ws->extra_read += (size_t) n;
                return n;
        }
        do
                n = recv(ws->fd, buf, len, 0);
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                wslay_event_set_error(ctx, errno == EAGAIN ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
                return -1;
        }
        if (n == 0) {   /* the client went away without a close frame */
                wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
                return -1;
        }
        return n;
}

static ssize_t on_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *userdata) {
        HttpWebSocket *ws = userdata;
        ssize_t n;

        do
                n = send(ws->fd, data, len, MSG_NOSIGNAL | ((flags & WSLAY_MSG_MORE) ? MSG_MORE : 0));
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                wslay_event_set_error(ctx, errno == EAGAIN ? WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
                return -1;
        }
        return n;
}

static void on_message(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *userdata) {
        HttpWebSocket *ws = userdata;

        if (wslay_is_ctrl_frame(arg->opcode))
                return;         /* ping, pong, close: wslay answers them */
        /* wslay does not check text for UTF-8, which RFC 6455 asks of it. */
        if (arg->opcode == WSLAY_TEXT_FRAME && !utf8_is_valid_n((const char *) arg->msg, arg->msg_length)) {
                (void) wslay_event_queue_close(ctx, WSLAY_CODE_INVALID_FRAME_PAYLOAD_DATA, NULL, 0);
                return;
        }
        ws->callbacks.message(ws, arg->opcode == WSLAY_TEXT_FRAME, arg->msg, arg->msg_length, ws->userdata);
}

static const struct wslay_event_callbacks wslay_callbacks = {
        .recv_callback = on_recv,
        .send_callback = on_send,
        .on_msg_recv_callback = on_message,
};

static void on_upgraded(HttpUpgraded *u, int fd, const char *extra, size_t extra_size, void *userdata) {
        HttpWebSocket *ws = userdata;

        ws->upgraded = u;
        if (fd < 0) {
                /* The client went before its 101: over (a terminal's shell is ended). */
                ws->failed = true;
                websocket_finish(ws);
                return;
        }
        ws->fd = fd;
        if (extra_size > 0 && (ws->extra = malloc(extra_size))) {
                memcpy(ws->extra, extra, extra_size);
                ws->extra_size = extra_size;
        }
        if (sd_event_add_io(ws->event, &ws->io, fd, EPOLLIN, on_io, ws) < 0) {
                ws->failed = true;
                websocket_finish(ws);
                return;
        }
        /* What the client sent with its request is there already. */
        if (ws->extra_size > 0)
                (void) on_io(ws->io, fd, EPOLLIN, ws);
        else
                websocket_update(ws);
}

int http_websocket_accept(HttpRequest *req, const char *protocol, const HttpWebSocketCallbacks *callbacks,
                          void *userdata, HttpWebSocket **ret) {
        const char *key = http_request_header(req, "Sec-WebSocket-Key");
        _cleanup_free_ char *concat = NULL;
        _cleanup_json_ json_object *accept = NULL;
        uint8_t digest[20];
        HttpWebSocket *ws;
        int r;

        if (!key || asprintf(&concat, "%s" WEBSOCKET_GUID, key) < 0)
                return -ENOMEM;
        if (gnutls_hash_fast(GNUTLS_DIG_SHA1, concat, strlen(concat), digest) < 0)
                return -EIO;
        accept = json_object_new_base64(digest, sizeof(digest));
        if (!accept)
                return -ENOMEM;
        ws = calloc(1, sizeof(HttpWebSocket));
        if (!ws)
                return -ENOMEM;
        *ws = (HttpWebSocket) { .fd = -EBADF, .event = http_server_event(http_request_server(req)),
                                .callbacks = *callbacks, .userdata = userdata };
        /* Before the upgrade: messages queued meanwhile go once it is done. */
        if (wslay_event_context_server_init(&ws->ctx, &wslay_callbacks, ws) != 0) {
                free(ws);
                return -ENOMEM;
        }
        wslay_event_config_set_max_recv_msg_length(ws->ctx, WEBSOCKET_MESSAGE_MAX);
        const char *headers[] = { "Upgrade", "websocket", "Sec-WebSocket-Accept", json_object_get_string(accept),
                                  protocol ? "Sec-WebSocket-Protocol" : NULL, protocol, NULL };
        r = http_request_upgrade(req, headers, on_upgraded, ws);
        if (r < 0) {
                wslay_event_context_free(ws->ctx);
                free(ws);
                return r;
        }
        *ret = ws;
        return 0;
}

int http_websocket_send(HttpWebSocket *ws, bool text, const void *data, size_t size) {
        struct wslay_event_msg m = { .opcode = text ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME, .msg = data,
                                     .msg_length = size };

        if (ws->closed_called || ws->close_pending || wslay_event_get_close_sent(ws->ctx))
                return -ENOTCONN;
        if (wslay_event_queue_msg(ws->ctx, &m) != 0)
                return -ENOMEM;
        websocket_update(ws);
        return 0;
}

size_t http_websocket_queued(HttpWebSocket *ws) {
        return wslay_event_get_queued_msg_length(ws->ctx);
}

void http_websocket_pause(HttpWebSocket *ws, bool pause) {
        if (ws->paused == pause)
                return;
        ws->paused = pause;
        websocket_update(ws);
}

void http_websocket_close(HttpWebSocket *ws, uint16_t status, const char *reason) {
        if (ws->closed_called || ws->close_pending || wslay_event_get_close_sent(ws->ctx))
                return;
        ws->close_pending = true;
        ws->close_status = status;
        ws->close_reason = reason ? strdup(reason) : NULL;
        /* Not waiting for input any more: once the close frame is out, it is over. */
        ws->paused = false;
        websocket_update(ws);
}

void http_websocket_set_drained(HttpWebSocket *ws, void (*drained)(HttpWebSocket *ws, void *userdata)) {
        ws->drained = drained;
}
