/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Whether the kernel routes an address to this host itself (RTN_LOCAL: one of its own
 * addresses, whatever its class), asked with rtnetlink's RTM_GETROUTE at connect time: an
 * allowed name that resolves to the host's public address must not reach the host's own
 * services. The answer is the kernel's, at once; nothing waits on the network. */

#include <stdbool.h>

#include "egress-policy.h"

/* An rtnetlink socket to ask with (O_CLOEXEC); -errno. */
int route_socket_open(void);
/* 1 if a's route is local (or broadcast) on this host, 0 if not (a route elsewhere, or
 * none), -errno if the kernel could not be asked. */
int route_is_local(int fd, const EgressAddress *a);
