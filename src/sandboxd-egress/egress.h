/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sandboxd-egress: the HTTPS proxy of sandboxes with an egress allowlist
 * (sandboxd-egress(8)). sandboxd hands it, per sandbox, the listening socket the sandbox's
 * agent bound to 127.0.0.1:3128 inside the sandbox's network namespace, with the policy
 * (egress-policy.h). Everything runs on one sd-event loop: accepting, reading CONNECT,
 * resolving (c-ares), connecting, checking the ClientHello, relaying. Nothing it does for
 * one connection waits for another. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ares.h>
#include <systemd/sd-event.h>

#include "egress-policy.h"
#include "macro.h"

#define EGRESS_ID_MAX 64U
#define EGRESS_BOX_CONNS_MAX 256U      /* open connections of one sandbox; beyond, accept waits */
#define EGRESS_CONNS_MAX 8192U         /* of all sandboxes */
#define EGRESS_REQUEST_MAX 8192U       /* bytes of a CONNECT request head */
#define EGRESS_BUFFER_SIZE (32U * 1024U) /* each direction of a relay */
#define EGRESS_HEAD_TIMEOUT_USEC (10ULL * 1000000ULL)  /* request head, connect, ClientHello */
#define EGRESS_IDLE_TIMEOUT_USEC (600ULL * 1000000ULL) /* a relay with no traffic either way */

typedef struct Egress Egress;
typedef struct Box Box;
typedef struct Conn Conn;
typedef struct Resolver Resolver;

typedef struct EgressCA EgressCA;

/* A secret bound to a header of the requests for host (inject.c): its certificate for the
 * sandbox's side, minted with the sandbox's CA when first needed. */
typedef struct Injection {
        char host[EGRESS_HOST_MAX + 1];
        char *header, *value;
        char *chain_pem, *key_pem;
} Injection;

/* One sandbox. */
struct Box {
        Egress *egress;
        char id[EGRESS_ID_MAX + 1];
        EgressPolicy policy;
        int listen_fd;
        sd_event_source *accept_source;
        unsigned n_conns;
        uint64_t bytes_up, bytes_down;
        uint64_t n_allowed, n_denied;
        Conn *conns;
        EgressCA *ca;             /* with injections: the sandbox's CA (its key) */
        Injection *injections;
        size_t n_injections;
        Box *next, *prev;
};

struct Egress {
        sd_event *event;
        Resolver *resolver;
        int control_listen_fd;
        sd_event_source *control_listen_source;
        struct Control *controls;
        Box *boxes;
        unsigned n_conns;
        bool accept_paused;     /* some sandbox stopped accepting at EGRESS_CONNS_MAX */
        int route_fd;           /* rtnetlink, to ask whether an address is the host's (route.h) */
};

/* resolver.c: c-ares on the loop. The callback gets the addresses (may be empty) or an
 * error (a c-ares status), exactly once, unless the lookup is cancelled first. */
typedef void (*resolve_callback_t)(const struct sockaddr_storage *addrs, size_t n, const char *error, void *userdata);
typedef struct Lookup Lookup;
int resolver_new(sd_event *e, Resolver **ret);
Resolver *resolver_free(Resolver *r);
int resolver_lookup(Resolver *r, const char *host, resolve_callback_t cb, void *userdata, Lookup **ret);
void lookup_cancel(Lookup *l);

void injections_free(Injection *l, size_t n);

/* proxy.c */
int box_accept(Box *b);
void box_close_conns(Box *b);
void box_resume_accept(Box *b);
/* The journal: one entry per verdict, with SANDBOX_ID=. */
void egress_log_verdict(const Box *b, const char *host, uint16_t port, const char *verdict, const char *reason);
