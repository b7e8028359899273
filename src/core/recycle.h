/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Recycling (recycle.c): a released sandbox is reset (SANDBOX_RESETTING), then kept
 * (SANDBOX_KEPT) for the owner that released it; creates of that owner may wait for one
 * being reset. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "options.h"
#include "sandbox-errors.h"
#include "sandbox.h"

/* Whether recycle_release() would keep s (reset) rather than destroy it. */
bool recycle_can_keep(Sandbox *s);
/* sandbox_release(): its reset begins, or (not to be kept) it is destroyed. */
int recycle_release(Sandbox *s, sandbox_callback_t cb, void *userdata);
/* The agent answered "reset". */
void recycle_on_agent_reset(Sandbox *s, uint64_t id, int error);
/* The payload's renewal ended (sandbox_payload_renewed()): failure, or NULL. */
void recycle_on_renewed(Sandbox *s, const char *failure);
/* sandboxd exits, or the sandbox ends, during a release: its caller is told. */
void recycle_abandon_caller(Sandbox *s, const SandboxError *error);
/* The create (owner, config, cb) waits for s's reset and gets s once it is done; if that
 * fails, s goes away or takes longer than RECYCLE_WAIT_USEC, the create goes on as if it
 * had not waited (pool_acquire_or_start()), without waiting again. */
int recycle_wait(Sandbox *s, uid_t owner, const SandboxConfig *config, sandbox_callback_t cb, void *userdata);
/* s goes away: a create waiting for it goes on without it. */
void recycle_waiter_release(Sandbox *s);
/* sandboxd stops: the creates that were about to go on are answered error. */
void recycle_waiters_abandon(Manager *m, const SandboxError *error);
