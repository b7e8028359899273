/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Who may do what, for every front end. A front end says who the caller is (a
 * SandboxCaller) and what it asks for; the rules here decide which polkit action that needs
 * (none, for root and for some calls on one's own sandboxes), polkit.c asks, and the
 * visibility rule decides what the caller sees. A sandbox belongs to the uid that created
 * it, and may be for a tenant; other uids need "manage", and a sandbox for a tenant is the
 * business of callers that hold "delegate" (the HTTP bridge's user, acting for the tenants
 * its tokens name). A caller acting for a tenant (caller->tenant) sees and touches only
 * that tenant's sandboxes. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-bus.h>

#include "options.h"
#include "polkit.h"

#define SANDBOX_ACTION_CREATE   "io.sandboxd.Sandbox1.create"
#define SANDBOX_ACTION_EXEC     "io.sandboxd.Sandbox1.exec"
#define SANDBOX_ACTION_MANAGE   "io.sandboxd.Sandbox1.manage"
#define SANDBOX_ACTION_DELEGATE "io.sandboxd.Sandbox1.delegate"

typedef enum SandboxOperation {
        SANDBOX_OP_CREATE,
        SANDBOX_OP_EXEC,
        SANDBOX_OP_DESTROY,
        SANDBOX_OP_INSPECT,  /* look up */
        SANDBOX_OP_LIST_ALL, /* list every uid's sandboxes and executions, not only one's own */
        SANDBOX_OP_TEMPLATES, /* create or remove a template */
        SANDBOX_OP_STATISTICS, /* the daemon's statistics (statistics.h) */
} SandboxOperation;

typedef enum SandboxAuthorizeFlags {
        /* polkit's no is not a refusal: the call goes on with caller->granted false (it
         * sees its own only), and polkit is asked without interaction. */
        SANDBOX_AUTHORIZE_OPTIONAL = 1 << 0,
} SandboxAuthorizeFlags;

/* The polkit action that op by a caller of uid needs on a sandbox of owner that is for
 * tenant (NULL or "": none; for SANDBOX_OP_CREATE the tenant the new one is for); NULL:
 * allowed without asking. owner is ignored for SANDBOX_OP_CREATE, _LIST_ALL,
 * _TEMPLATES and _STATISTICS. */
const char *sandbox_access_action(SandboxOperation op, uid_t caller, uid_t owner, const char *tenant);

/* Which operation each method of the API needs (and so its polkit action), by the
 * method's name, the same on D-Bus and varlink ("Exec"; a varlink method may be given
 * with its interface): the one table every face asks, in its authorize-then. -ENOENT for a
 * method that is not in it: nothing is authorized that the core does not know. */
int sandbox_method_operation(const char *method, SandboxOperation *ret);

/* Says whose the call is about, once the caller is known: a sandbox (or snapshot) of
 * *ret_owner for *ret_tenant (NULL or "": none); or returns < 0 (error, or the errno) to
 * refuse the call. Each face's authorize-then takes one. */
typedef int (*sandbox_access_t)(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                                const char **ret_tenant, SandboxError *error);

/* What every face's authorize-then does once its caller is known: the operation of method
 * (sandbox_method_operation(); a method without one is refused, EPERM), whose the call is
 * about (access(caller, access_userdata, ...)), and then sandbox_authorize(). Returns as
 * sandbox_authorize() does (1: granted now; 0: cb follows), or < 0 with error set when
 * access refused. */
int sandbox_authorize_method(sd_bus *bus, const SandboxCaller *caller, const char *method, sandbox_access_t access,
                             void *access_userdata, SandboxAuthorizeFlags flags, polkit_callback_t cb,
                             void *userdata, sd_bus_slot **ret_slot, SandboxError *error);

/* An action that allows op as well as sandbox_access_action()'s does, asked for when that
 * one is refused; NULL: none. The statistics are for administrators (manage) and for the
 * HTTP bridge, which holds delegate. */
const char *sandbox_access_alternative(SandboxOperation op);

/* Whether a sandbox for tenant (NULL or ""), or an execution in one, is within the reach
 * of caller at all: a caller acting for a tenant reaches only that tenant's. */
bool sandbox_access_tenant_matches(const SandboxCaller *caller, const char *tenant);

/* Whether caller may see what owner owns for tenant (a sandbox, its executions' records):
 * within its tenant (above), and root, the owner, or whoever was granted "manage"
 * (caller->granted, when what it asked for was LIST_ALL). */
bool sandbox_access_visible(const SandboxCaller *caller, uid_t owner, const char *tenant);

/* CreateSandbox by caller: the sandbox is for config's Tenant or, without one, for the
 * tenant the caller acts for (then set in config); a caller acting for one tenant cannot
 * create for another (AccessDenied). Call before authorizing SANDBOX_OP_CREATE for
 * config->tenant. */
int sandbox_access_create(const SandboxCaller *caller, SandboxConfig *config, SandboxError *error);

/* Authorizes op by caller on a sandbox of owner for tenant (as sandbox_access_action()):
 * decides the polkit action and asks polkit on bus for it (as caller's kind of subject;
 * with interaction if caller allows it and the call is not SANDBOX_AUTHORIZE_OPTIONAL).
 * Returns 1 if no action is needed (granted); 0 if polkit was asked: cb follows
 * (polkit.h), never from within this call, unless *ret_slot is unreferenced first; a
 * negative errno if it could not be asked. */
int sandbox_authorize(sd_bus *bus, const SandboxCaller *caller, SandboxOperation op, uid_t owner,
                      const char *tenant, SandboxAuthorizeFlags flags, polkit_callback_t cb, void *userdata,
                      sd_bus_slot **ret_slot);
