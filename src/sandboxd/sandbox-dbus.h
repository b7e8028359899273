/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "access.h"
#include "manager.h"
#include "sandbox-api.h"

/* Exports the per-sandbox objects (fallback vtable + enumerator). */
int sandbox_dbus_register(sd_bus *bus, Manager *m);
int sandbox_dbus_emit_state(sd_bus *bus, Sandbox *s);
int manager_dbus_register(sd_bus *bus, Manager *m);
int manager_dbus_emit_sandbox(sd_bus *bus, Sandbox *s, bool added);

/* A method call on one sandbox, carried across the polkit check. The sandbox is looked up
 * again afterwards: it may have gone meanwhile. */
typedef struct SandboxRequest {
        Manager *manager;
        char id[SANDBOX_ID_LEN + 1];
        SandboxOperation op;
        ExecConfig exec; /* Exec and Start only */
} SandboxRequest;

#include "bus-util.h"

Sandbox *sandbox_request_find(SandboxRequest *req, sd_bus_error *error);
/* The caller's uid decides the polkit action for op on s (access.h); fn runs once it is
 * granted. exec (if given) is moved into the request; fn fills in its caller. */
int sandbox_authorize_call(sd_bus_message *m, Sandbox *s, SandboxOperation op, bus_authorized_t fn,
                           ExecConfig *exec);
/* ListSandboxes' and ListExecutions' bus_action_t, with BUS_AUTHORIZE_OPTIONAL: without
 * "manage" (asked without interaction) a caller sees its own only; root sees all. */
int sandbox_list_action(uid_t uid, void *userdata, const char **ret_action, sd_bus_error *error);
/* The a{sv} info of an exec's result: Exec's reply, and Wait's. */
int bus_append_exec_info(sd_bus_message *reply, const ExecResult *r);
/* Reads "as argv, a{sv} options" of Exec and Start into c (initialized by the caller). */
int bus_read_exec_config(sd_bus_message *m, ExecConfig *c, sd_bus_error *error);

/* sandbox-files-dbus.c: one handler for every file method. */
int method_sandbox_file(sd_bus_message *m, void *userdata, sd_bus_error *error);

/* sandbox-processes-dbus.c */
int method_sandbox_start(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_sandbox_process(sd_bus_message *m, void *userdata, sd_bus_error *error);

/* observe-dbus.c: Sandbox.GetLogs, Sandbox.GetMetrics, Manager.ListPools. */
int method_sandbox_get_logs(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_sandbox_get_metrics(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_list_pools(sd_bus_message *m, void *userdata, sd_bus_error *error);
