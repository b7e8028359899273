/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Who may do what: the polkit action an operation needs. A sandbox belongs to the uid
 * that created it; other uids need "manage". Root needs nothing. */

#include <sys/types.h>

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

/* NULL: allowed without asking. owner is ignored for SANDBOX_OP_CREATE. */
const char *sandbox_access_action(SandboxOperation op, uid_t caller, uid_t owner);
