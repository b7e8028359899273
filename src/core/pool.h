/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The warm pool and the hand-outs (pool.c): the sandboxes nobody sees, chained apart
 * (Manager.pooled through Sandbox.pool_next), and how a create gets one of them. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "manager.h"
#include "options.h"
#include "sandbox-errors.h"
#include "sandbox.h"
#include "template.h"

/* Whether any sandbox is pooled, released or kept. */
bool pool_has_sandboxes(Manager *m);
/* s is nobody's to see from now on (linked pooled, or released), or no longer. */
void pool_chain_add(Manager *m, Sandbox *s);
void pool_chain_remove(Manager *m, Sandbox *s);
/* A pooled, released or kept s was unlinked (gone): the pool is topped up again, or, while
 * draining, the drain's caller told once the last one went. */
void pool_unlinked(Manager *m, Sandbox *s);
/* Tops up the warm pools, after delay_usec (pooled starts that fail are retried slowly). */
void pool_schedule_refill(Manager *m, uint64_t delay_usec);
/* The pooled sandboxes of template_name were made from what it was: they go. Those in use
 * stay theirs, but are not recycled. */
void pool_drop_template(Manager *m, const char *template_name);
/* sandboxd stops: the warm pool's sandboxes go, cb once they are gone. The number going. */
int pool_drain(Manager *m, void (*cb)(void *userdata), void *userdata);

/* A kept sandbox of t for the caller's owner, tenant and the limits config asks for, or
 * NULL. With resetting, one being reset for them that no create waits for yet, if two or
 * more of theirs are (released, reset or not). */
Sandbox *pool_find_kept(Manager *m, uid_t owner, const Template *t, const SandboxConfig *config, bool resetting);
/* What a create does once it is allowed and its template known: the caller's own kept
 * sandbox, else one of the warm pool, else (may_wait) one of the caller's being reset
 * (recycle_wait()), else a new one. cb once it runs; an error now is returned. */
int pool_acquire_or_start(Manager *m, uid_t owner, const Template *t, SandboxConfig *config, bool may_wait,
                          sandbox_callback_t cb, void *userdata, SandboxError *error);
/* How many kept (released) sandboxes there are of like's owner, tenant and template. */
unsigned pool_count_released(Manager *m, const Sandbox *like);
/* At the maximum of sandboxes: destroys the sandbox kept for reuse longest (released,
 * reset), so that a new one may start meanwhile. false if none is kept. */
bool pool_evict_kept(Manager *m);
/* s's user released it: gone for the front ends, resetting (for its owner only) from now. */
void pool_add_released(Manager *m, Sandbox *s);
/* Hands a pooled or kept sandbox to owner with config, as a create's answer. */
int pool_hand_out(Manager *m, Sandbox *s, uid_t owner, const SandboxConfig *config, SandboxError *error);
