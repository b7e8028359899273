/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The warm pools at a glance (the pools themselves are manager.c's). */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct Manager Manager;
typedef struct SandboxCaller SandboxCaller;
typedef struct SandboxError SandboxError;

typedef struct PoolStatus {
        const char *template_name;      /* the Manager's: valid until templates are loaded again */
        unsigned size;                  /* the template's "pool": sandboxes kept started */
        unsigned ready;                 /* started and waiting to be handed out */
        unsigned starting;              /* being started to refill it */
        unsigned in_use;                /* the template's sandboxes that callers hold, handed out
                                         * by the pool or started for them */
        bool recycle;                   /* "pool": {"recycle": true} (recycle.c) */
        unsigned recycled;              /* released ones, reset or being reset, kept for their
                                         * owners (counted as in_use is) */
        unsigned resetting;             /* of those, the ones being reset now */
        unsigned waiting;               /* creates waiting for one of those (recycle_wait()) */
} PoolStatus;

/* One entry per template with a pool (a warm or a recycling one), in the templates' order. in_use, recycled and
 * resetting count only the sandboxes caller may see (sandbox_access_visible(): its own, of its tenant), all if caller
 * is NULL. *ret is NULL when no template has a pool. */
int manager_pool_status(Manager *m, const SandboxCaller *caller, PoolStatus **ret, size_t *ret_n);
/* GetPool: the template's (with or without a pool: then all 0); NoSuchTemplate. */
int manager_pool_status_of(Manager *m, const char *template_name, const SandboxCaller *caller, PoolStatus *ret,
                           SandboxError *error);
