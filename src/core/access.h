/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Who may do what, for every front end. A front end says who the caller is (a
 * SandboxCaller) and what it asks for; the rules here decide which polkit action that needs
 * (none, for root and for some calls on one's own sandboxes), polkit.c asks, and the
 * visibility rule decides what the caller sees. A sandbox belongs to the uid that created
 * it; other uids need "manage". */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-bus.h>

#include "polkit.h"

#define SANDBOX_ACTION_CREATE "io.sandboxd.Sandbox1.create"
#define SANDBOX_ACTION_EXEC   "io.sandboxd.Sandbox1.exec"
#define SANDBOX_ACTION_MANAGE "io.sandboxd.Sandbox1.manage"

typedef enum SandboxOperation {
        SANDBOX_OP_CREATE,
        SANDBOX_OP_EXEC,
        SANDBOX_OP_DESTROY,
        SANDBOX_OP_INSPECT,  /* look up */
        SANDBOX_OP_LIST_ALL, /* list every uid's sandboxes and executions, not only one's own */
} SandboxOperation;

typedef enum SandboxAuthorizeFlags {
        /* polkit's no is not a refusal: the call goes on with caller->granted false (it
         * sees its own only), and polkit is asked without interaction. */
        SANDBOX_AUTHORIZE_OPTIONAL = 1 << 0,
} SandboxAuthorizeFlags;

/* NULL: allowed without asking. owner is ignored for SANDBOX_OP_CREATE and _LIST_ALL. */
const char *sandbox_access_action(SandboxOperation op, uid_t caller, uid_t owner);

/* Whether a caller of uid may see what owner owns (a sandbox, its executions' records):
 * root, the owner, and whoever was granted "manage". */
bool sandbox_access_visible(uid_t uid, bool manage_granted, uid_t owner);

/* Authorizes op by caller on a sandbox of owner: decides the polkit action and asks polkit
 * on bus for it (as caller's kind of subject; with interaction if caller allows it and
 * the call is not SANDBOX_AUTHORIZE_OPTIONAL). Returns 1 if no action is needed (granted);
 * 0 if polkit was asked: cb follows (polkit.h), never from within this call, unless
 * *ret_slot is unreferenced first; a negative errno if it could not be asked. */
int sandbox_authorize(sd_bus *bus, const SandboxCaller *caller, SandboxOperation op, uid_t owner,
                      SandboxAuthorizeFlags flags, polkit_callback_t cb, void *userdata, sd_bus_slot **ret_slot);
