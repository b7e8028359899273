/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Talking to systemd (org.freedesktop.systemd1) without ever waiting: jobs are tracked
 * from the JobRemoved signal, matched before any job is queued, and a caller's callback
 * runs when its job has finished. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-bus.h>

#include "macro.h"
#include "options.h"

typedef struct SystemdClient SystemdClient;

/* result is systemd's job result ("done", "failed", "canceled", …); error is set when
 * the method call itself failed, in which case result is NULL. */
typedef void (*systemd_job_callback_t)(const char *result, const sd_bus_error *error, void *userdata);

int systemd_client_new(sd_bus *bus, SystemdClient **ret);
SystemdClient *systemd_client_free(SystemdClient *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(SystemdClient *, systemd_client_free);

typedef struct ScopeParams {
        const char *unit;         /* sandbox-<id>.scope */
        const char *slice;        /* sandbox.slice */
        const char *description;
        const pid_t *pids;
        size_t n_pids;
        SandboxLimits limits;
} ScopeParams;

/* StartTransientUnit(); the callback runs when the job is done. A property systemd does
 * not know (older versions) is dropped and the call retried. Returns 0 if queued. */
int scope_start_transient(SystemdClient *c, const ScopeParams *p,
                          systemd_job_callback_t cb, void *userdata);
/* AttachProcessesToUnit(): moves pids into the (started) unit; result "done". */
int unit_attach_processes(SystemdClient *c, const char *unit, const pid_t *pids, size_t n_pids,
                          systemd_job_callback_t cb, void *userdata);
/* FreezeUnit()/ThawUnit(): result "done" once systemd says the unit is (un)frozen. */
int unit_freeze(SystemdClient *c, const char *unit, bool freeze, systemd_job_callback_t cb, void *userdata);
/* KillUnit(unit, "all", signo). */
int unit_kill(SystemdClient *c, const char *unit, int signo, systemd_job_callback_t cb, void *userdata);
/* StopUnit(); a unit that does not exist counts as stopped (result "done"). */
int unit_stop(SystemdClient *c, const char *unit, systemd_job_callback_t cb, void *userdata);
/* Forget any callbacks for this userdata (its owner is going away). */
void systemd_client_cancel(SystemdClient *c, void *userdata);
/* Reads the unit's ControlGroup property; cb gets it as result (or error). */
/* SetUnitProperties(unit, runtime): MemoryMax=, TasksMax=, CPUWeight= (and the accounting
 * they need); cb once systemd has them. */
int unit_set_limits(SystemdClient *c, const char *unit, uint64_t memory_max, uint64_t tasks_max,
                    uint64_t cpu_weight, systemd_job_callback_t cb, void *userdata);
int unit_get_control_group(SystemdClient *c, const char *unit, systemd_job_callback_t cb, void *userdata);
/* SetUnitProperties(unit, runtime): Description= (a pooled sandbox's, once it has labels). */
int unit_set_description(SystemdClient *c, const char *unit, const char *description, systemd_job_callback_t cb,
                         void *userdata);
