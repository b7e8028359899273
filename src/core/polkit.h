/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Asynchronous polkit CheckAuthorization, for any front end: the subject is the caller as
 * the front end knows it, a bus name or a process (caller.h). */

#include <stdbool.h>

#include <systemd/sd-bus.h>

#include "caller.h"
#include "sandbox-errors.h"

typedef enum PolkitCheckFlags {
        POLKIT_CHECK_INTERACTIVE = 1 << 0, /* polkit may ask the user to authenticate */
        /* A no (or polkit not answering) is not a refusal: authorized is 0, without an
         * error, and the caller goes on with less. */
        POLKIT_CHECK_OPTIONAL    = 1 << 1,
} PolkitCheckFlags;

/* authorized: 1 yes; 0 no, with POLKIT_CHECK_OPTIONAL; negative: refused, and error says
 * why (AccessDenied, InteractiveAuthorizationRequired: polkit's no, or polkit not
 * running or not answering). */
typedef void (*polkit_callback_t)(int authorized, const SandboxError *error, void *userdata);

/* Asks polkit on bus whether caller may do action. The callback is called exactly once,
 * never from within this call; with ret_slot, the caller owns the query and unreferencing
 * the slot first cancels it (no callback). */
int polkit_check(sd_bus *bus, const SandboxCaller *caller, const char *action, PolkitCheckFlags flags,
                 polkit_callback_t cb, void *userdata, sd_bus_slot **ret_slot);
/* The same for the first of actions (NULL-terminated) that caller may do: each is asked in
 * turn, the next only when polkit said no to the one before (asked without interaction,
 * with flags for the last); the answer is the first yes, or the last one's. Unreferencing
 * *ret_slot cancels whichever question is under way. */
int polkit_check_any(sd_bus *bus, const SandboxCaller *caller, char * const *actions, PolkitCheckFlags flags,
                     polkit_callback_t cb, void *userdata, sd_bus_slot **ret_slot);
