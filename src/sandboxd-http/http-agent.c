/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The agent-check port of a fleet's front (HAProxy's "agent-check", docs/SCALE-OUT.md):
 * HAProxy connects, reads one line and closes. The line is this node's state in HAProxy's
 * words: "up ready N%" (N the free share of the node's sandboxes, so creates go where there
 * is room), "drain" while the drain file exists (sandboxctl fleet drain), "down#…" when
 * sandboxd is not answering. Each connection asks sandboxd (GetStatistics, as the bridge
 * itself, daemon-wide) on a varlink connection of its own; nothing is cached. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fd-util.h"
#include "http.h"
#include "json-util.h"
#include "list.h"
#include "log.h"

/* An agent that does not answer in time is ignored by HAProxy (agent-inter); answer "down"
 * before that rather than never. */
#define AGENT_VARLINK_TIMEOUT_USEC (1500U * 1000U)
#define AGENT_CONNECTIONS_MAX 64U

typedef struct AgentConn AgentConn;

struct HttpAgent {
        sd_event *event;
        char *varlink_address;
        char *drain_file;
        int fd;
        sd_event_source *source;
        AgentConn *conns;
        unsigned n_conns;
};

struct AgentConn {
        HttpAgent *agent;
        int fd;
        VarlinkClient *client;
        bool closing;
        AgentConn *prev, *next;
};

int http_agent_answer(bool draining, bool answering, uint64_t max, uint64_t live, char *buf, size_t size) {
        uint64_t pct;
        int n;

        if (draining)
                /* Persistence (the routes by id) still reaches a draining node. */
                n = snprintf(buf, size, "drain\n");
        else if (!answering || max == 0)
                n = snprintf(buf, size, "down#sandboxd not answering\n");
        else {
                pct = live >= max ? 0 : (max - live) * 100 / max;
                /* Room for one more is never 0%: 0 is HAProxy's DRAIN. */
                if (pct == 0 && live < max)
                        pct = 1;
                n = snprintf(buf, size, "up ready %" PRIu64 "%%\n", pct);
        }
        return n < 0 || (size_t) n >= size ? -ENOBUFS : n;
}

static AgentConn *agent_conn_free(AgentConn *c) {
        if (!c || c->closing)
                return NULL;
        /* The client's last reference fails its call: on_statistics() then does nothing. */
        c->closing = true;
        varlink_client_unref(c->client);
        LIST_REMOVE(c->agent->conns, c);
        c->agent->n_conns--;
        safe_close(c->fd);
        return mfree(c);
}

static void agent_conn_answer(AgentConn *c, bool answering, uint64_t max, uint64_t live) {
        bool draining = access(c->agent->drain_file, F_OK) >= 0;
        char line[64];
        int n = http_agent_answer(draining, answering, max, live, line, sizeof(line));

        /* One short line to a fresh socket's empty buffer: it fits, or the peer is gone. */
        if (n > 0)
                (void) send(c->fd, line, (size_t) n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static int on_statistics(VarlinkClient *client, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                         void *userdata) {
        AgentConn *c = userdata;
        json_object *st = NULL, *max = NULL, *live = NULL;

        if (c->closing)
                return 0;
        if (!error && parameters && json_object_object_get_ex(parameters, "statistics", &st) &&
            json_object_object_get_ex(st, "sandboxesMax", &max) &&
            json_object_object_get_ex(st, "sandboxesLive", &live))
                agent_conn_answer(c, true, json_object_get_uint64(max), json_object_get_uint64(live));
        else {
                if (error)
                        log_debug("Agent check: GetStatistics failed: %s", error);
                agent_conn_answer(c, false, 0, 0);
        }
        agent_conn_free(c);   /* as http-backend.c: the client may go from its callback */
        return 0;
}

static int agent_conn_start(HttpAgent *a, int fd) {
        AgentConn *c;
        int r;

        c = calloc(1, sizeof(AgentConn));
        if (!c) {
                safe_close(fd);
                return -ENOMEM;
        }
        *c = (AgentConn) { .agent = a, .fd = fd };
        LIST_PREPEND(a->conns, c);
        a->n_conns++;
        if (access(a->drain_file, F_OK) >= 0) {
                agent_conn_answer(c, true, 0, 0);
                agent_conn_free(c);
                return 0;
        }
        r = varlink_client_connect_address(&c->client, a->varlink_address);
        if (r >= 0)
                r = varlink_client_attach_event(c->client, a->event, 0);
        if (r >= 0) {
                varlink_client_set_timeout(c->client, AGENT_VARLINK_TIMEOUT_USEC);
                r = varlink_client_call_async(c->client, "io.sandboxd.Sandbox.GetStatistics",
                                              json_object_new_object(), 0, on_statistics, c);
        }
        if (r < 0) {
                log_debug("Agent check: cannot reach sandboxd at %s: %s", a->varlink_address, strerror(-r));
                agent_conn_answer(c, false, 0, 0);
                agent_conn_free(c);
        }
        return 0;
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        HttpAgent *a = userdata;
        int cfd;

        cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (cfd < 0)
                return 0;   /* EAGAIN, or the peer already gone */
        if (a->n_conns >= AGENT_CONNECTIONS_MAX) {
                safe_close(cfd);
                return 0;
        }
        (void) agent_conn_start(a, cfd);
        return 0;
}

int http_agent_new(HttpAgent **ret, sd_event *event, int fd, const char *varlink_address, const char *drain_file) {
        HttpAgent *a;
        int r;

        a = calloc(1, sizeof(HttpAgent));
        if (!a) {
                safe_close(fd);
                return -ENOMEM;
        }
        *a = (HttpAgent) { .event = sd_event_ref(event), .fd = fd };
        a->varlink_address = strdup(varlink_address);
        a->drain_file = strdup(drain_file);
        if (!a->varlink_address || !a->drain_file) {
                http_agent_free(a);
                return -ENOMEM;
        }
        r = sd_event_add_io(event, &a->source, fd, EPOLLIN, on_accept, a);
        if (r < 0) {
                http_agent_free(a);
                return r;
        }
        *ret = a;
        return 0;
}

HttpAgent *http_agent_free(HttpAgent *a) {
        if (!a)
                return NULL;
        while (a->conns)
                agent_conn_free(a->conns);
        sd_event_source_disable_unref(a->source);
        safe_close(a->fd);
        sd_event_unref(a->event);
        free(a->varlink_address);
        free(a->drain_file);
        return mfree(a);
}
