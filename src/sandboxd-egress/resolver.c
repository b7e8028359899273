/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* c-ares driven by sd-event: c-ares says which sockets it wants watched (the
 * socket-state callback), the loop tells it when they are ready and when its timeout is
 * due. Names come from /etc/hosts first, then DNS (lookups "fb"), as the system's
 * resolv.conf names it. */

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "egress.h"

#define RESOLVER_SOCKETS_MAX 64U
#define RESOLVER_ADDRESSES_MAX 16U

typedef struct ResolverSocket {
        ares_socket_t fd;
        sd_event_source *source;
} ResolverSocket;

struct Resolver {
        sd_event *event;
        ares_channel channel;
        sd_event_source *timer;
        ResolverSocket sockets[RESOLVER_SOCKETS_MAX];
};

struct Lookup {
        Resolver *resolver;
        resolve_callback_t cb;
        void *userdata;         /* NULL once cancelled */
};

static void resolver_rearm(Resolver *r);

static int on_resolver_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Resolver *r = userdata;

        ares_process_fd(r->channel,
                        revents & (EPOLLIN | EPOLLERR | EPOLLHUP) ? fd : ARES_SOCKET_BAD,
                        revents & EPOLLOUT ? fd : ARES_SOCKET_BAD);
        resolver_rearm(r);
        return 0;
}

static int on_resolver_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Resolver *r = userdata;

        ares_process_fd(r->channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
        resolver_rearm(r);
        return 0;
}

/* The timer at c-ares's next timeout, or off when it waits for nothing. */
static void resolver_rearm(Resolver *r) {
        struct timeval tv, *t;

        t = ares_timeout(r->channel, NULL, &tv);
        if (!t) {
                (void) sd_event_source_set_enabled(r->timer, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_time_relative(r->timer, (uint64_t) t->tv_sec * 1000000ULL + (uint64_t) t->tv_usec);
        (void) sd_event_source_set_enabled(r->timer, SD_EVENT_ONESHOT);
}

static void on_socket_state(void *data, ares_socket_t fd, int readable, int writable) {
        Resolver *r = data;
        ResolverSocket *slot = NULL, *free_slot = NULL;
        uint32_t events = (readable ? EPOLLIN : 0) | (writable ? EPOLLOUT : 0);

        for (size_t i = 0; i < RESOLVER_SOCKETS_MAX; i++) {
                if (r->sockets[i].source && r->sockets[i].fd == fd)
                        slot = r->sockets + i;
                else if (!r->sockets[i].source && !free_slot)
                        free_slot = r->sockets + i;
        }

        if (!events) {
                if (slot)
                        slot->source = sd_event_source_disable_unref(slot->source);
                return;
        }
        if (slot) {
                (void) sd_event_source_set_io_events(slot->source, events);
                return;
        }
        /* Out of slots: the query times out rather than spins (c-ares keeps few sockets). */
        if (!free_slot || sd_event_add_io(r->event, &free_slot->source, fd, events, on_resolver_io, r) < 0)
                return;
        free_slot->fd = fd;
}

int resolver_new(sd_event *e, Resolver **ret) {
        struct ares_options o = {
                .sock_state_cb = on_socket_state,
                .timeout = 2000,
                .tries = 2,
                .lookups = (char *) "fb",
                /* The name as checked, and no other: without it, a name that does not
                 * resolve would be tried again with the host's search domains appended
                 * (x.example.com.corp.internal), a name the policy never saw. */
                .flags = ARES_FLAG_NOSEARCH,
        };
        Resolver *r;
        int k;

        k = ares_library_init(ARES_LIB_INIT_ALL);
        if (k != ARES_SUCCESS)
                return -ENOMEM;
        r = calloc(1, sizeof(Resolver));
        if (!r)
                return -ENOMEM;
        r->event = sd_event_ref(e);
        o.sock_state_cb_data = r;
        k = ares_init_options(&r->channel, &o,
                              ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_LOOKUPS |
                              ARES_OPT_FLAGS);
        if (k != ARES_SUCCESS) {
                r->channel = NULL;
                resolver_free(r);
                return k == ARES_ENOMEM ? -ENOMEM : -EIO;
        }
        k = sd_event_add_time_relative(e, &r->timer, CLOCK_MONOTONIC, UINT64_MAX / 2, 0, on_resolver_timer, r);
        if (k < 0) {
                resolver_free(r);
                return k;
        }
        (void) sd_event_source_set_enabled(r->timer, SD_EVENT_OFF);
        *ret = r;
        return 0;
}

Resolver *resolver_free(Resolver *r) {
        if (!r)
                return NULL;
        if (r->channel)
                ares_destroy(r->channel); /* calls the pending callbacks with ARES_EDESTRUCTION */
        for (size_t i = 0; i < RESOLVER_SOCKETS_MAX; i++)
                sd_event_source_disable_unref(r->sockets[i].source);
        sd_event_source_disable_unref(r->timer);
        sd_event_unref(r->event);
        free(r);
        return NULL;
}

static void on_addrinfo(void *arg, int status, int timeouts, struct ares_addrinfo *result) {
        Lookup *l = arg;
        struct sockaddr_storage addrs[RESOLVER_ADDRESSES_MAX] = {};
        size_t n = 0;

        if (l->userdata) {
                if (status == ARES_SUCCESS && result)
                        for (struct ares_addrinfo_node *a = result->nodes; a && n < RESOLVER_ADDRESSES_MAX;
                             a = a->ai_next) {
                                if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) ||
                                    (size_t) a->ai_addrlen > sizeof(addrs[0]))
                                        continue;
                                memset(addrs + n, 0, sizeof(addrs[0]));
                                memcpy(addrs + n, a->ai_addr, a->ai_addrlen);
                                n++;
                        }
                l->cb(addrs, n, status == ARES_SUCCESS ? NULL : ares_strerror(status), l->userdata);
        }
        if (result)
                ares_freeaddrinfo(result);
        free(l);
}

int resolver_lookup(Resolver *r, const char *host, resolve_callback_t cb, void *userdata, Lookup **ret) {
        struct ares_addrinfo_hints hints = {
                .ai_family = AF_UNSPEC,
                .ai_socktype = SOCK_STREAM,
        };
        Lookup *l;

        l = calloc(1, sizeof(Lookup));
        if (!l)
                return -ENOMEM;
        *l = (Lookup) { .resolver = r, .cb = cb, .userdata = userdata };
        /* The hosts file answers at once: the callback may run before this returns, and
         * then l is gone. The caller learns that from its callback having run. */
        *ret = l;
        ares_getaddrinfo(r->channel, host, NULL, &hints, on_addrinfo, l);
        resolver_rearm(r);
        return 0;
}

void lookup_cancel(Lookup *l) {
        /* c-ares cannot drop one query: its answer, when it comes, goes nowhere. */
        if (l)
                l->userdata = NULL;
}
