/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <stdio.h>

#include "access.h"
#include "log.h"
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

static const struct {
        const char *method;
        SandboxOperation op;
} method_operations[] = {
        /* A new sandbox: of one's own, or (Wake) from one's own hibernated one. */
        { "CreateSandbox",         SANDBOX_OP_CREATE     },
        { "AcquireSandbox",        SANDBOX_OP_CREATE     },
        { "Wake",                  SANDBOX_OP_CREATE     },
        /* Moving a hibernated sandbox: its files out (as Wake would have them), a
         * hibernated sandbox of the caller's in. */
        { "ExportSnapshot",        SANDBOX_OP_CREATE     },
        { "ImportSnapshot",        SANDBOX_OP_CREATE     },
        /* Acting for a tenant: a narrowing that needs nothing, but whether the caller
         * may create for it (delegate) decides how its connections are counted. */
        { "ActForTenant",          SANDBOX_OP_CREATE     },
        /* One's secrets (sandbox-secrets.h): what creates may bind. */
        { "SetSecret",             SANDBOX_OP_CREATE     },
        { "RemoveSecret",          SANDBOX_OP_CREATE     },
        /* Running things in a sandbox, its files, its processes, its pause and timeouts. */
        { "Exec",                  SANDBOX_OP_EXEC       },
        { "Start",                 SANDBOX_OP_EXEC       },
        { "Pause",                 SANDBOX_OP_EXEC       },
        { "Resume",                SANDBOX_OP_EXEC       },
        { "SetTimeout",            SANDBOX_OP_EXEC       },
        { "ListProcesses",         SANDBOX_OP_EXEC       },
        { "Signal",                SANDBOX_OP_EXEC       },
        { "Wait",                  SANDBOX_OP_EXEC       },
        { "ReadOutput",            SANDBOX_OP_EXEC       },
        { "ReadOutputFrom",        SANDBOX_OP_EXEC       },
        { "ResizeTerminal",        SANDBOX_OP_EXEC       },
        { "WriteStdin",            SANDBOX_OP_EXEC       },
        { "CloseStdin",            SANDBOX_OP_EXEC       },
        { "Follow",                SANDBOX_OP_EXEC       },
        { "ReadFile",              SANDBOX_OP_EXEC       },
        /* Its ports (port.h): a connection is a way in, as an exec is. */
        { "OpenPort",              SANDBOX_OP_EXEC       },
        { "ListPorts",             SANDBOX_OP_EXEC       },
        { "WatchDirectory",        SANDBOX_OP_EXEC       },
        { "WriteFile",             SANDBOX_OP_EXEC       },
        { "Upload",                SANDBOX_OP_EXEC       },
        { "Download",              SANDBOX_OP_EXEC       },
        { "ListFiles",             SANDBOX_OP_EXEC       },
        { "Stat",                  SANDBOX_OP_EXEC       },
        { "MakeDirectory",         SANDBOX_OP_EXEC       },
        { "Remove",                SANDBOX_OP_EXEC       },
        { "Move",                  SANDBOX_OP_EXEC       },
        { "Snapshot",              SANDBOX_OP_EXEC       },
        { "Fork",                  SANDBOX_OP_EXEC       },
        { "CreateContext",         SANDBOX_OP_EXEC       },
        { "RunCode",               SANDBOX_OP_EXEC       },
        { "InterruptContext",      SANDBOX_OP_EXEC       },
        { "RestartContext",        SANDBOX_OP_EXEC       },
        { "ListContexts",          SANDBOX_OP_EXEC       },
        { "RemoveContext",         SANDBOX_OP_EXEC       },
        /* Ending a sandbox, or a snapshot. */
        { "Destroy",               SANDBOX_OP_DESTROY    },
        { "Release",               SANDBOX_OP_DESTROY    },
        { "ReleaseSandbox",        SANDBOX_OP_DESTROY    },
        { "Hibernate",             SANDBOX_OP_DESTROY    },
        { "RemoveSnapshot",        SANDBOX_OP_DESTROY    },
        /* Looking at one sandbox. */
        { "GetSandbox",            SANDBOX_OP_INSPECT    },
        { "GetLogs",               SANDBOX_OP_INSPECT    },
        { "GetMetrics",            SANDBOX_OP_INSPECT    },
        { "GetQuota",              SANDBOX_OP_INSPECT    }, /* one's own: nothing to ask */
        { "ListSecrets",           SANDBOX_OP_INSPECT    }, /* one's own names */
        /* Lists: one's own, everyone's with "manage" (asked optionally). */
        { "ListSandboxes",         SANDBOX_OP_LIST_ALL   },
        { "ListSandboxesFiltered", SANDBOX_OP_LIST_ALL   },
        { "ListExecutions",        SANDBOX_OP_LIST_ALL   },
        { "ListExecutionsEx",      SANDBOX_OP_LIST_ALL   },
        { "ListSnapshots",         SANDBOX_OP_LIST_ALL   },
        { "ListPools",             SANDBOX_OP_LIST_ALL   },
        { "GetPool",               SANDBOX_OP_LIST_ALL   },
        { "CreateTemplate",        SANDBOX_OP_TEMPLATES  },
        { "RemoveTemplate",        SANDBOX_OP_TEMPLATES  },
        { "GetStatistics",         SANDBOX_OP_STATISTICS },
};

int sandbox_method_operation(const char *method, SandboxOperation *ret) {
        const char *dot;

        assert(method);
        assert(ret);
        dot = strrchr(method, '.');
        if (dot)
                method = dot + 1;
        for (size_t i = 0; i < ELEMENTSOF(method_operations); i++)
                if (streq(method_operations[i].method, method)) {
                        *ret = method_operations[i].op;
                        return 0;
                }
        return -ENOENT;
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

int sandbox_authorize_method(sd_bus *bus, const SandboxCaller *caller, const char *method, sandbox_access_t access,
                             void *access_userdata, SandboxAuthorizeFlags flags, polkit_callback_t cb,
                             void *userdata, sd_bus_slot **ret_slot, SandboxError *error) {
        const char *tenant = NULL;
        SandboxOperation op;
        uid_t owner = 0;
        int r;

        assert(caller);
        assert(method);
        assert(access);
        r = sandbox_method_operation(method, &op);
        if (r < 0) {
                log_error("No operation for method %s in the core's table: refused.", method);
                return -EPERM;
        }
        r = access(caller, access_userdata, &owner, &tenant, error);
        if (r < 0)
                return r;
        return sandbox_authorize(bus, caller, op, owner, tenant, flags, cb, userdata, ret_slot);
}
