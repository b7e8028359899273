/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* A node of the fleet: its number (sandboxd.conf [Fleet] Node=) and its bridge. */
typedef struct FleetNodeSpec {
        unsigned number;
        const char *address;    /* HOST:PORT */
} FleetNodeSpec;

/* HAProxy's configuration for the nodes, its companion files (nodes.map, ids.map,
 * node-unavailable.http, admin.sock) in dir; TLS with cert (a PEM with the key), or none. */
/* tenant_affinity: a create without the label "affinity" sticks to its token's node too.
 * databases (HOST:PORT, may be none): a TCP listener on database_bind for the nodes'
 * recorders, one database node at a time (a Galera cluster's). */
int fleet_haproxy_config(FILE *f, const char *dir, const char *bind, const char *cert, unsigned agent_port,
                         bool tenant_affinity, const FleetNodeSpec *nodes, size_t n_nodes,
                         const char *database_bind, char *const *databases, size_t n_databases);
/* sandboxctl fleet …: argv[0] is "fleet". Returns a negative errno, or the exit status. */
int fleet_main(int argc, char *argv[]);
