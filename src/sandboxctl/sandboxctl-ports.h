/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "sandbox-client.h"

/* sandboxctl ports ID [--json]: what listens on TCP in the sandbox. */
int ports_show(SandboxClient *c, const char *id, bool json);
/* sandboxctl port-forward ID PORT [LOCAL]: listens on LOCAL (a socket path, or
 * [ADDRESS:]PORT, default 127.0.0.1:PORT), prints its address, and relays each connection
 * to a new one into the sandbox's PORT, until SIGINT or SIGTERM. */
int port_forward(SandboxClient *c, const char *id, const char *port, const char *local);
/* sandboxd watch ID PATH: what changes under PATH (recursively), a JSON line each. */
int watch_show(SandboxClient *c, const char *id, const char *path);
