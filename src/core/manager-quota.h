/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The core's own calls of manager-quota.c (the front ends' are in manager.h). */

#include "manager.h"

/* At start: reads the host, resolves sandboxd.conf [Node] against it (refusing, -ERANGE, a
 * ceiling the host cannot honour) and asks systemd to set them on sandbox.slice. */
int manager_quota_setup(Manager *m);
void manager_quota_done(Manager *m);
/* The admin's defaults and maxima (sandboxd.conf [Limits], the template's "maxima"), then
 * the template's defaults and the machine's bounds (sandbox_config_finalize()). */
int manager_config_resolve(Manager *m, const Template *t, SandboxConfig *config, SandboxError *error);
/* Starts a sandbox for owner (config resolved already) now, or, when owner's (its
 * tenant's) StartsInFlight= are all taken, once one of them is done: cb then, as
 * manager_start_sandbox() has it. */
int manager_start_admitted(Manager *m, const Template *t, SandboxConfig *config, uid_t owner,
                           sandbox_callback_t cb, void *userdata, SandboxError *error);
/* s (not pooled) is starting: one of its owner's (tenant's) slots is taken. */
void manager_start_counted(Manager *m, Sandbox *s);
/* A sandbox's state changed, or it goes: its start, if counted, is done. */
void manager_start_done(Manager *m, Sandbox *s);
/* sandboxd stops: the waiting creates are answered with error. */
void manager_start_waiters_abandon(Manager *m, const SandboxError *error);

/* The lifetime a sandbox of that template gets when its caller asks for none ([Limits]
 * DefaultTimeout=, else TimeoutMax=, the template's first): seconds, 0 for none. */
uint64_t manager_timeout_default(Manager *m, const char *template_name);

/* Whether one more sandbox of config for owner fits: its maxima, then the quota of its
 * tenant (or owner), then the creates-per-second bucket. QuotaExceeded or InvalidOption. */
int manager_quota_check(Manager *m, const Template *t, uid_t owner, const SandboxConfig *config,
                        SandboxError *error);
/* The same once more, without the bucket (its token was taken): for a create that was
 * checked and then waited (a fork's snapshot) while others could be counted. */
int manager_quota_recheck(Manager *m, const Template *t, uid_t owner, const SandboxConfig *config,
                          SandboxError *error);
