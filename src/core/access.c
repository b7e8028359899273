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
