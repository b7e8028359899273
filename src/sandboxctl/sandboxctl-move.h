/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

/* Moving sandboxes between two nodes' bridges (docs/SCALE-OUT.md), with one tenant's token. */
typedef struct FleetMove {
        const char *from;   /* the source node's bridge, http://HOST:PORT */
        const char *to;     /* the destination's */
        const char *token;  /* the tenant's bearer token, valid on both */
} FleetMove;

/* Sandbox id (running or paused: hibernated first; hibernated on disk or to an archive)
 * moved: *ret_new its id on the destination; the source removed after. On failure the
 * source stays (logged). */
int fleet_move_one(const FleetMove *fm, const char *id, char **ret_new);
/* Every sandbox of the token's tenant at fm->from moved, but the ephemeral ones (*ret_left):
 * "OLD NEW" printed for each moved. 0, or a negative errno when the list cannot be had. */
int fleet_move_all(const FleetMove *fm, unsigned *ret_moved, unsigned *ret_failed, unsigned *ret_left);

/* Every persistent sandbox of the token's tenant at fm->from saved into dir as ID.move (an
 * export's stream, replaced whole): hibernated ones as they are, running ones by a
 * snapshot (removed after) that keeps them running. "ID PATH" printed for each. */
int fleet_backup_all(const FleetMove *fm, const char *dir, unsigned *ret_saved, unsigned *ret_failed);
/* A saved stream imported at fm->to: *ret_old the id it had, *ret_new its id there. */
int fleet_restore_one(const FleetMove *fm, const char *path, char **ret_old, char **ret_new);
