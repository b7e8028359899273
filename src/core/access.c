/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stddef.h>
#include <stdio.h>

#include "access.h"
#include "strv.h"

const char *sandbox_access_action(SandboxOperation op, uid_t caller, uid_t owner, const char *tenant) {
        /* A sandbox for a tenant is the delegate's business: what one's own would need
         * (create, exec, ending it) needs "delegate" instead. */
        bool delegated = !isempty(tenant);

        if (caller == 0)
                return NULL;

        switch (op) {
        case SANDBOX_OP_CREATE:
                return delegated ? SANDBOX_ACTION_DELEGATE : SANDBOX_ACTION_CREATE;
        case SANDBOX_OP_EXEC:
                if (caller != owner)
                        return SANDBOX_ACTION_MANAGE;
                return delegated ? SANDBOX_ACTION_DELEGATE : SANDBOX_ACTION_EXEC;
        case SANDBOX_OP_DESTROY:
                if (caller != owner)
                        return SANDBOX_ACTION_MANAGE;
                /* Ending one's own sandbox is part of having been allowed to create it. */
                return delegated ? SANDBOX_ACTION_DELEGATE : SANDBOX_ACTION_CREATE;
        case SANDBOX_OP_INSPECT:
                return caller == owner ? NULL : SANDBOX_ACTION_MANAGE;
        case SANDBOX_OP_LIST_ALL:
        case SANDBOX_OP_TEMPLATES:
        case SANDBOX_OP_STATISTICS:
                return SANDBOX_ACTION_MANAGE;
        }
        return SANDBOX_ACTION_MANAGE;
}

const char *sandbox_access_alternative(SandboxOperation op) {
        return op == SANDBOX_OP_STATISTICS ? SANDBOX_ACTION_DELEGATE : NULL;
}

bool sandbox_access_tenant_matches(const SandboxCaller *caller, const char *tenant) {
        return isempty(caller->tenant) || streq_ptr(caller->tenant, tenant);
}

bool sandbox_access_visible(const SandboxCaller *caller, uid_t owner, const char *tenant) {
        return sandbox_access_tenant_matches(caller, tenant) &&
               (caller->uid == 0 || caller->uid == owner || caller->granted);
}

int sandbox_access_create(const SandboxCaller *caller, SandboxConfig *config, SandboxError *error) {
        if (isempty(caller->tenant))
                return 0;
        if (isempty(config->tenant)) {
                /* The caller's tenant is valid: the front end checked it when it was said. */
                snprintf(config->tenant, sizeof(config->tenant), "%s", caller->tenant);
                return 0;
        }
        if (!streq(config->tenant, caller->tenant))
                return sandbox_error_set(error, SANDBOX_ERR_ACCESS_DENIED,
                                         "Acting for tenant '%s', a sandbox cannot be created for tenant '%s'.",
                                         caller->tenant, config->tenant);
        return 0;
}

int sandbox_authorize(sd_bus *bus, const SandboxCaller *caller, SandboxOperation op, uid_t owner,
                      const char *tenant, SandboxAuthorizeFlags flags, polkit_callback_t cb, void *userdata,
                      sd_bus_slot **ret_slot) {
        const char *action = sandbox_access_action(op, caller->uid, owner, tenant);
        bool optional = flags & SANDBOX_AUTHORIZE_OPTIONAL;
        int r;

        if (!action)
                return 1;
        r = polkit_check_any(bus, caller, (char *[]) { (char *) action, (char *) sandbox_access_alternative(op), NULL },
                             (optional ? POLKIT_CHECK_OPTIONAL : 0) |
                             (!optional && caller->interactive ? POLKIT_CHECK_INTERACTIVE : 0),
                             cb, userdata, ret_slot);
        return r < 0 ? r : 0;
}
