/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * One proxied connection, as a state machine on the loop:
 *   HEAD       reading "CONNECT host:port HTTP/1.1" and its header lines (bounded in size
 *              and time); anything else is answered 403 (plain HTTP) or 400
 *   RESOLVING  the name is allowed; c-ares looks it up
 *   CONNECTING to the first address the policy allows (never one it did not check)
 *   HELLO      "200" sent; reading the client's TLS ClientHello, whose server name must be
 *              the CONNECT's host, before a byte of it reaches the server
 *   RELAY      both ways, each through a buffer of its own: a full buffer stops reading
 *              from its source, so memory stays bounded whatever either side does
 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

#include "egress-tls.h"
#include "egress.h"
#include "inject.h"
#include "list.h"
#include "route.h"

typedef enum ConnState {
        CONN_HEAD,
        CONN_RESOLVING,
        CONN_CONNECTING,
        CONN_HELLO,
        CONN_RELAY,
} ConnState;

typedef struct Pipe {
        uint8_t *data;
        size_t start, end;      /* what is read and not yet written */
        bool eof;               /* the source is done */
        bool shut;              /* the destination got its shutdown(SHUT_WR) */
} Pipe;

struct Conn {
        Box *box;
        ConnState state;
        int client_fd, server_fd;
        sd_event_source *client_source, *server_source, *timer;
        Lookup *lookup;
        char head[EGRESS_REQUEST_MAX];
        size_t head_len;
        size_t head_end;        /* after the blank line; what follows is the client's early TLS */
        char host[EGRESS_HOST_MAX + 1];
        uint16_t port;
        bool literal;
        EgressAddress address;
        Pipe up, down;          /* client -> server, server -> client */
        Conn *next, *prev;
};

void egress_log_verdict(const Box *b, const char *host, uint16_t port, const char *verdict, const char *reason) {
        bool allow = streq(verdict, "allow");

        sd_journal_send("MESSAGE=%s: %s %s:%u%s%s", b->id,
                        allow ? "allowed" : streq(verdict, "fail") ? "failed" : "denied", host, (unsigned) port,
                        reason ? ": " : "", strempty(reason),
                        "PRIORITY=%i", allow ? LOG_INFO : LOG_NOTICE,
                        "SANDBOX_ID=%s", b->id,
                        "EGRESS_VERDICT=%s", verdict,
                        "EGRESS_HOST=%s", host,
                        "EGRESS_PORT=%u", (unsigned) port,
                        "EGRESS_REASON=%s", strempty(reason),
                        NULL);
}

static void conn_free(Conn *c) {
        Box *b = c->box;

        lookup_cancel(c->lookup);
        sd_event_source_disable_unref(c->client_source);
        sd_event_source_disable_unref(c->server_source);
        sd_event_source_disable_unref(c->timer);
        safe_close(c->client_fd);
        safe_close(c->server_fd);
        free(c->up.data);
        free(c->down.data);
        LIST_REMOVE(b->conns, c);
        b->n_conns--;
        b->egress->n_conns--;
        free(c);
        box_resume_accept(b);
}

void box_close_conns(Box *b) {
        while (b->conns)
                conn_free(b->conns);
}

/* A short answer, then the end: best effort, the socket is ours to drop. */
static void conn_reply(Conn *c, const char *status, const char *text) {
        char buf[1024];
        int n;

        n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
                     status, strlen(text), text);
        if (n > 0)
                (void) send(c->client_fd, buf, MIN((size_t) n, sizeof(buf) - 1), MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Logs the refusal and ends the connection; before the tunnel is up (status given) the
 * client gets an HTTP answer that says why, after it (status NULL: it expects TLS) the
 * connection is just closed. */
static void conn_deny(Conn *c, const char *status, const char *reason) {
        char text[512];

        c->box->n_denied++;
        egress_log_verdict(c->box, c->host[0] ? c->host : "-", c->port, "deny", reason);
        if (status) {
                snprintf(text, sizeof(text), "sandboxd-egress: %s:%u: %s (the sandbox's EgressAllow=/EgressDeny=).\n",
                         c->host[0] ? c->host : "-", (unsigned) c->port, reason);
                conn_reply(c, status, text);
        }
        conn_free(c);
}

/* The policy let the connection through, the network did not (DNS, connect): said as
 * such, so that a client does not take a lookup failure for a refusal. */
static void conn_fail(Conn *c, const char *reason) {
        char text[512];

        egress_log_verdict(c->box, c->host[0] ? c->host : "-", c->port, "fail", reason);
        snprintf(text, sizeof(text),
                 "sandboxd-egress: %s:%u: %s (a network failure; the sandbox's egress rules allow this host).\n",
                 c->host[0] ? c->host : "-", (unsigned) c->port, reason);
        conn_reply(c, "502 Bad Gateway", text);
        conn_free(c);
}

static int conn_set_timeout(Conn *c, uint64_t usec) {
        if (c->timer) {
                (void) sd_event_source_set_time_relative(c->timer, usec);
                return sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
        }
        return -EINVAL;
}

/* ---- relaying ---- */

static uint32_t pipe_read_events(const Pipe *p) {
        return !p->eof && p->end < EGRESS_BUFFER_SIZE ? EPOLLIN : 0;
}

static uint32_t pipe_write_events(const Pipe *p) {
        return p->end > p->start ? EPOLLOUT : 0;
}

/* A source with nothing to wait for is off: epoll reports a hangup even to an empty mask,
 * and a peer that hung up while the other side does not read must not spin the loop. */
static void source_set_events(sd_event_source *s, uint32_t events) {
        if (events)
                (void) sd_event_source_set_io_events(s, events);
        (void) sd_event_source_set_enabled(s, events ? SD_EVENT_ON : SD_EVENT_OFF);
}

static void conn_update_events(Conn *c) {
        source_set_events(c->client_source, pipe_read_events(&c->up) | pipe_write_events(&c->down));
        source_set_events(c->server_source, pipe_read_events(&c->down) | pipe_write_events(&c->up));
}

/* Moves what it can: from into the pipe, the pipe into to. -errno ends the connection. */
static int pipe_pump(Pipe *p, int from, int to, uint64_t *counter) {
        ssize_t k;

        if (!p->eof && p->end < EGRESS_BUFFER_SIZE) {
                k = recv(from, p->data + p->end, EGRESS_BUFFER_SIZE - p->end, MSG_DONTWAIT);
                if (k > 0)
                        p->end += (size_t) k;
                else if (k == 0)
                        p->eof = true;
                else if (errno != EAGAIN && errno != EINTR)
                        return -errno;
        }
        if (p->end > p->start) {
                k = send(to, p->data + p->start, p->end - p->start, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (k > 0) {
                        p->start += (size_t) k;
                        *counter += (uint64_t) k;
                } else if (k < 0 && errno != EAGAIN && errno != EINTR)
                        return -errno;
                if (p->start == p->end)
                        p->start = p->end = 0;
        }
        if (p->eof && p->end == p->start && !p->shut) {
                (void) shutdown(to, SHUT_WR);
                p->shut = true;
        }
        return 0;
}

static void conn_relay(Conn *c) {
        Box *b = c->box;

        if (pipe_pump(&c->up, c->client_fd, c->server_fd, &b->bytes_up) < 0 ||
            pipe_pump(&c->down, c->server_fd, c->client_fd, &b->bytes_down) < 0 ||
            (c->up.shut && c->down.shut)) {
                conn_free(c);
                return;
        }
        conn_update_events(c);
        (void) conn_set_timeout(c, EGRESS_IDLE_TIMEOUT_USEC);
}

/* ---- the ClientHello ---- */

/* A host a secret is bound to: the connection goes to a thread of its own that adds the
 * header (inject.c); the loop is done with it. */
static void conn_inject(Conn *c, Injection *inj) {
        Box *b = c->box;
        int r = 0;

        if (!inj->chain_pem)
                r = egress_ca_mint(b->ca, inj->host, &inj->chain_pem, &inj->key_pem);
        if (r >= 0)
                r = inject_start(b, c->host, c->port, c->client_fd, c->server_fd, c->up.data, c->up.end, inj->header,
                                 inj->value, inj->chain_pem, inj->key_pem);
        if (r < 0) {
                conn_deny(c, NULL, r == -EBUSY ? "too many connections with a header added" :
                                   "cannot take the connection to add its header");
                return;
        }
        b->n_allowed++;
        c->client_fd = c->server_fd = -EBADF; /* the thread's */
        conn_free(c);
}

static void conn_check_hello(Conn *c) {
        char sni[EGRESS_HOST_MAX + 1];
        int r;

        r = egress_client_hello_sni(c->up.data, c->up.end, sni);
        if (r == 0) {
                if (c->up.eof || c->up.end >= EGRESS_HELLO_MAX) {
                        conn_deny(c, NULL, "the connection ended before a TLS ClientHello");
                        return;
                }
                return; /* the client source still waits for EPOLLIN */
        }
        if (r == -ENOENT && !c->literal) {
                conn_deny(c, NULL, "the TLS ClientHello names no server (SNI)");
                return;
        }
        if (r < 0 && r != -ENOENT) {
                conn_deny(c, NULL, "not a TLS ClientHello this proxy accepts");
                return;
        }
        if (r > 0 && !streq(sni, c->host)) {
                char reason[EGRESS_HOST_MAX + 64];

                snprintf(reason, sizeof(reason), "TLS server name %s is not the CONNECT host", sni);
                conn_deny(c, NULL, reason);
                return;
        }

        for (size_t i = 0; i < c->box->n_injections; i++)
                if (streq(c->box->injections[i].host, c->host)) {
                        conn_inject(c, &c->box->injections[i]);
                        return;
                }

        c->box->n_allowed++;
        egress_log_verdict(c->box, c->host, c->port, "allow", NULL);
        c->state = CONN_RELAY;
        conn_relay(c);
}

static int on_client(sd_event_source *s, int fd, uint32_t revents, void *userdata);
static int on_server(sd_event_source *s, int fd, uint32_t revents, void *userdata);

static void conn_connected(Conn *c) {
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

        c->up.data = malloc(EGRESS_BUFFER_SIZE);
        c->down.data = malloc(EGRESS_BUFFER_SIZE);
        if (!c->up.data || !c->down.data ||
            send(c->client_fd, ok, sizeof(ok) - 1, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t) sizeof(ok) - 1) {
                conn_free(c);
                return;
        }
        /* Nothing of the server's goes to the client before the hello is checked. */
        c->state = CONN_HELLO;
        source_set_events(c->server_source, 0);
        source_set_events(c->client_source, EPOLLIN);
        (void) conn_set_timeout(c, EGRESS_HEAD_TIMEOUT_USEC);
        /* A client that did not wait for our 200 sent its hello behind the request. */
        if (c->head_len > c->head_end) {
                c->up.end = c->head_len - c->head_end;
                memcpy(c->up.data, c->head + c->head_end, c->up.end);
                conn_check_hello(c);
        }
}

static int on_server(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Conn *c = userdata;

        if (c->state == CONN_CONNECTING) {
                int error = 0;
                socklen_t sl = sizeof(error);

                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &sl) < 0)
                        error = errno;
                if (error) {
                        char reason[128];
                        snprintf(reason, sizeof(reason), "cannot connect: %s", strerror(error));
                        conn_fail(c, reason);
                        return 0;
                }
                conn_connected(c);
                return 0;
        }
        if (c->state == CONN_RELAY)
                conn_relay(c);
        return 0;
}

static void conn_connect(Conn *c, const struct sockaddr_storage *ss) {
        socklen_t len = ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        struct sockaddr_storage sa = *ss;
        int r;

        if (sa.ss_family == AF_INET)
                ((struct sockaddr_in *) &sa)->sin_port = htons(c->port);
        else
                ((struct sockaddr_in6 *) &sa)->sin6_port = htons(c->port);

        c->server_fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->server_fd < 0) {
                conn_fail(c, "cannot make a socket");
                return;
        }
        if (connect(c->server_fd, (struct sockaddr *) &sa, len) < 0 && errno != EINPROGRESS) {
                char reason[128];
                snprintf(reason, sizeof(reason), "cannot connect: %s", strerror(errno));
                conn_fail(c, reason);
                return;
        }
        r = sd_event_add_io(sd_event_source_get_event(c->client_source), &c->server_source, c->server_fd,
                            EPOLLOUT, on_server, c);
        if (r < 0) {
                conn_free(c);
                return;
        }
        c->state = CONN_CONNECTING;
        source_set_events(c->client_source, 0);
        (void) conn_set_timeout(c, EGRESS_HEAD_TIMEOUT_USEC);
}

static void address_to_sockaddr(const EgressAddress *a, struct sockaddr_storage *ret) {
        memset(ret, 0, sizeof(*ret));
        if (a->family == AF_INET) {
                struct sockaddr_in *in = (struct sockaddr_in *) ret;
                in->sin_family = AF_INET;
                memcpy(&in->sin_addr, a->bytes, 4);
        } else {
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) ret;
                in6->sin6_family = AF_INET6;
                memcpy(&in6->sin6_addr, a->bytes, 16);
        }
}

/* The policy's answer, then the kernel's: an address routed to this host itself (any of
 * its own, public ones included) is never connected to. */
static const char *check_address(Conn *c, const EgressAddress *a, bool literal) {
        const char *why = egress_check_address(&c->box->policy, a, c->port, literal);
        int r;

        if (why)
                return why;
        r = route_is_local(c->box->egress->route_fd, a);
        if (r < 0)
                return "the route to the address could not be checked";
        return r > 0 ? "resolves to an address of this host" : NULL;
}

static void on_resolved(const struct sockaddr_storage *addrs, size_t n, const char *error, void *userdata) {
        Conn *c = userdata;
        const char *first_reason = NULL;

        c->lookup = NULL; /* freed by the resolver once we return */
        if (error || n == 0) {
                char reason[128];
                snprintf(reason, sizeof(reason), "DNS lookup failed: %s", error ?: "no address");
                conn_fail(c, reason);
                return;
        }
        /* The first address the policy allows; each is checked, so that a name cannot point
         * the proxy at loopback or the metadata service by one of several answers. */
        for (size_t i = 0; i < n; i++) {
                EgressAddress a;
                const char *why;

                egress_address_from_sockaddr((const struct sockaddr *) (addrs + i), &a);
                why = check_address(c, &a, false);
                if (!why) {
                        struct sockaddr_storage ss;

                        c->address = a;
                        address_to_sockaddr(&a, &ss);
                        conn_connect(c, &ss);
                        return;
                }
                if (!first_reason)
                        first_reason = why;
        }
        conn_deny(c, "403 Forbidden", first_reason);
}

/* ---- the request head ---- */

static void conn_handle_head(Conn *c) {
        char *line_end, *sp1, *sp2, method[16];
        bool is_address;
        const char *why;
        int r;

        char *blank = memmem(c->head, c->head_len, "\r\n\r\n", 4);

        line_end = memmem(c->head, c->head_len, "\r\n", 2);
        if (!line_end || !blank)
                return; /* not all there yet */
        c->head_end = (size_t) (blank - c->head) + 4;
        *line_end = 0;
        sp1 = strchr(c->head, ' ');
        sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
        if (!sp1 || !sp2 || (size_t) (sp1 - c->head) >= sizeof(method) || !startswith_str(sp2 + 1, "HTTP/1.")) {
                conn_deny(c, "400 Bad Request", "not an HTTP request");
                return;
        }
        memcpy(method, c->head, (size_t) (sp1 - c->head));
        method[sp1 - c->head] = 0;
        *sp2 = 0;
        if (!streq(method, "CONNECT")) {
                conn_deny(c, "403 Forbidden",
                          "plain HTTP is not relayed, only HTTPS through CONNECT to a host of EgressAllow=");
                return;
        }

        r = egress_target_parse(sp1 + 1, c->host, &c->port, &is_address, &c->address);
        if (r < 0) {
                conn_deny(c, "400 Bad Request", "CONNECT needs host:port");
                return;
        }
        c->literal = is_address;
        if (is_address) {
                struct sockaddr_storage ss;

                why = check_address(c, &c->address, true);
                if (why) {
                        conn_deny(c, "403 Forbidden", why);
                        return;
                }
                address_to_sockaddr(&c->address, &ss);
                conn_connect(c, &ss);
                return;
        }

        why = egress_check_name(&c->box->policy, c->host, c->port);
        if (why) {
                conn_deny(c, "403 Forbidden", why);
                return;
        }
        c->state = CONN_RESOLVING;
        source_set_events(c->client_source, 0);
        r = resolver_lookup(c->box->egress->resolver, c->host, on_resolved, c, &c->lookup);
        if (r < 0)
                conn_free(c);
        /* c may be gone here: the hosts file answers at once. */
}

static void conn_read_head(Conn *c) {
        ssize_t k;

        k = recv(c->client_fd, c->head + c->head_len, sizeof(c->head) - 1 - c->head_len, MSG_DONTWAIT);
        if (k < 0) {
                if (errno != EAGAIN && errno != EINTR)
                        conn_free(c);
                return;
        }
        if (k == 0) {
                conn_free(c);
                return;
        }
        c->head_len += (size_t) k;
        c->head[c->head_len] = 0;
        if (memmem(c->head, c->head_len, "\r\n\r\n", 4)) {
                conn_handle_head(c);
                return;
        }
        if (c->head_len >= sizeof(c->head) - 1)
                conn_deny(c, "431 Request Header Fields Too Large", "the request head is too large");
}

static int on_client(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Conn *c = userdata;

        switch (c->state) {
        case CONN_HEAD:
                conn_read_head(c);
                break;
        case CONN_HELLO: {
                ssize_t k = recv(fd, c->up.data + c->up.end, EGRESS_HELLO_MAX - c->up.end, MSG_DONTWAIT);
                if (k < 0 && errno != EAGAIN && errno != EINTR) {
                        conn_free(c);
                        break;
                }
                if (k == 0)
                        c->up.eof = true;
                if (k > 0)
                        c->up.end += (size_t) k;
                conn_check_hello(c);
                break;
        }
        case CONN_RELAY:
                conn_relay(c);
                break;
        default:
                source_set_events(s, 0);
        }
        return 0;
}

static int on_conn_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Conn *c = userdata;

        switch (c->state) {
        case CONN_HEAD:
                conn_deny(c, "408 Request Timeout", "no complete CONNECT request in time");
                break;
        case CONN_CONNECTING:
                conn_deny(c, "504 Gateway Timeout", "cannot connect: timed out");
                break;
        case CONN_HELLO:
                conn_deny(c, NULL, "no TLS ClientHello in time");
                break;
        default:
                conn_free(c);
        }
        return 0;
}

static void box_resume_one(Box *b) {
        if (b->accept_source && b->n_conns < EGRESS_BOX_CONNS_MAX && b->egress->n_conns < EGRESS_CONNS_MAX)
                (void) sd_event_source_set_enabled(b->accept_source, SD_EVENT_ON);
}

void box_resume_accept(Box *b) {
        Egress *e = b->egress;

        /* Below the bound of all sandboxes again: every sandbox paused by it goes on. */
        if (e->accept_paused && e->n_conns < EGRESS_CONNS_MAX) {
                e->accept_paused = false;
                for (Box *i = e->boxes; i; i = i->next)
                        box_resume_one(i);
                return;
        }
        box_resume_one(b);
}

/* Takes one connection off the sandbox's listening socket. 1 if it took one, 0 if none
 * waits (or the bounds are reached: accepting pauses, the kernel's backlog holds the
 * rest), -errno on failure. */
int box_accept(Box *b) {
        Egress *e = b->egress;
        Conn *c;
        int fd, r;

        if (b->n_conns >= EGRESS_BOX_CONNS_MAX || e->n_conns >= EGRESS_CONNS_MAX) {
                if (e->n_conns >= EGRESS_CONNS_MAX)
                        e->accept_paused = true;
                (void) sd_event_source_set_enabled(b->accept_source, SD_EVENT_OFF);
                return 0;
        }
        fd = accept4(b->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
                return errno == EAGAIN || errno == EINTR || errno == ECONNABORTED ? 0 : -errno;

        c = calloc(1, sizeof(Conn));
        if (!c) {
                safe_close(fd);
                return -ENOMEM;
        }
        *c = (Conn) { .box = b, .client_fd = fd, .server_fd = -EBADF, .state = CONN_HEAD };
        LIST_PREPEND(b->conns, c);
        b->n_conns++;
        e->n_conns++;

        r = sd_event_add_io(e->event, &c->client_source, fd, EPOLLIN, on_client, c);
        if (r >= 0)
                r = sd_event_add_time_relative(e->event, &c->timer, CLOCK_MONOTONIC, EGRESS_HEAD_TIMEOUT_USEC, 0,
                                               on_conn_timeout, c);
        if (r < 0) {
                conn_free(c);
                return r;
        }
        return 1;
}
