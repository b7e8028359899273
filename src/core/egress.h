/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sandboxd's side of sandboxd-egress (sandboxd-egress(8)): hands each sandbox with an
 * egress allowlist to the proxy, with the listening socket its agent bound, and takes it
 * away again when the sandbox ends. Never waits for the proxy: the connection is
 * non-blocking, what cannot be sent yet is sent when the socket is writable, and a
 * proxy that is not there (yet, or again) is tried again every second, each sandbox's
 * socket kept until then (and sent again to a proxy that restarted). */

#include <stdbool.h>

typedef struct EgressClient EgressClient;
typedef struct Manager Manager;
typedef struct Sandbox Sandbox;

int egress_client_new(Manager *m, const char *socket_path, EgressClient **ret);
EgressClient *egress_client_free(EgressClient *c);

/* The sandbox's agent handed over its listening socket (s->egress_fd): to the proxy. */
void egress_client_add(EgressClient *c, Sandbox *s);
/* The sandbox ended: its proxy goes. */
void egress_client_remove(EgressClient *c, const char *sandbox_id);
/* The environment of a sandbox with egress: the proxy variables (both cases), NO_PROXY. */
extern const char * const egress_environment[];
