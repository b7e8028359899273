/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stddef.h>

#include "access.h"

const char *sandbox_access_action(SandboxOperation op, uid_t caller, uid_t owner) {
        if (caller == 0)
                return NULL;

        switch (op) {
        case SANDBOX_OP_CREATE:
                return SANDBOX_ACTION_CREATE;
        case SANDBOX_OP_EXEC:
                return caller == owner ? SANDBOX_ACTION_EXEC : SANDBOX_ACTION_MANAGE;
        case SANDBOX_OP_DESTROY:
                /* Ending one's own sandbox is part of having been allowed to create it. */
                return caller == owner ? SANDBOX_ACTION_CREATE : SANDBOX_ACTION_MANAGE;
        case SANDBOX_OP_INSPECT:
                return caller == owner ? NULL : SANDBOX_ACTION_MANAGE;
        case SANDBOX_OP_LIST_ALL:
                return SANDBOX_ACTION_MANAGE;
        }
        return SANDBOX_ACTION_MANAGE;
}

bool sandbox_access_visible(uid_t uid, bool manage_granted, uid_t owner) {
        return uid == 0 || uid == owner || manage_granted;
}

int sandbox_authorize(sd_bus *bus, const SandboxCaller *caller, SandboxOperation op, uid_t owner,
                      SandboxAuthorizeFlags flags, polkit_callback_t cb, void *userdata, sd_bus_slot **ret_slot) {
        const char *action = sandbox_access_action(op, caller->uid, owner);
        bool optional = flags & SANDBOX_AUTHORIZE_OPTIONAL;
        int r;

        if (!action)
                return 1;
        r = polkit_check(bus, caller, action,
                         (optional ? POLKIT_CHECK_OPTIONAL : 0) |
                         (!optional && caller->interactive ? POLKIT_CHECK_INTERACTIVE : 0),
                         cb, userdata, ret_slot);
        return r < 0 ? r : 0;
}
