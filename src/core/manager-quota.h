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
/* The same turns for the other expensive operations (a snapshot, and so a fork's or a
 * hibernation's): free when owner (tenant) has none waiting and a slot free; then the
 * operation starts at once and takes its slot (manager_turn_taken()) until
 * manager_turn_done(). Else manager_turn_wait(): run(data) once its turn comes (it
 * frees data unless it fails), or fail(data, error) (which frees it) when run fails or
 * sandboxd stops. */
typedef int (*turn_run_t)(Manager *m, void *data, SandboxError *error);
typedef void (*turn_fail_t)(void *data, const SandboxError *error);
bool manager_turn_free(Manager *m, uid_t owner, const char *tenant);
/* Creates queued for their turn: they count against --max-sandboxes as live ones do. */
size_t manager_creates_waiting(Manager *m);
void manager_turn_taken(Manager *m, uid_t owner, const char *tenant);
void manager_turn_done(Manager *m, uid_t owner, const char *tenant);
int manager_turn_wait(Manager *m, uid_t owner, const char *tenant, turn_run_t run, turn_fail_t fail, void *data,
                      SandboxError *error);
/* sandboxd stops: the waiting creates (and other operations) are answered with error. */
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
