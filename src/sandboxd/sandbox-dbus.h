/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sandboxd's D-Bus face (sandboxd-api(7)): a translator onto the core's API (manager.h,
 * sandbox.h, exec.h, file-op.h, options.h, access.h). It holds no rule and no bound of
 * its own: it decodes arguments, lets the core authorize and act, and encodes the answer. */

#include <systemd/sd-bus.h>

#include "access.h"
#include "bus-util.h"
#include "manager.h"
#include "recorder.h"
#include "sandbox-api.h"

/* What the D-Bus face works with: the userdata of the Manager object. */
typedef struct BusFrontend {
        sd_bus *bus;
        Manager *manager;
        Recorder *recorder;              /* NULL: recording is off */
        ManagerSubscription *subscription;
} BusFrontend;

/* Subscribes to the manager: the signals and property changes (from the first sandbox
 * on, adopted ones included). */
int bus_frontend_subscribe(BusFrontend *f);
/* Exports the Manager object and the per-sandbox objects (fallback vtable + enumerator). */
int bus_frontend_register(BusFrontend *f);

/* A sandbox's object path, derived from its id: SANDBOX_OBJECT_PREFIX + id. */
#define SANDBOX_OBJECT_PATH_MAX (sizeof(SANDBOX_OBJECT_PREFIX) + SANDBOX_ID_LEN)
const char *bus_sandbox_path(const Sandbox *s, char buf[static SANDBOX_OBJECT_PATH_MAX]);
#define BUS_SANDBOX_PATH(s) bus_sandbox_path((s), (char[SANDBOX_OBJECT_PATH_MAX]) {})

/* recorder-dbus.c: Manager.ListExecutions. */
int method_list_executions(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_list_executions_ex(sd_bus_message *m, void *userdata, sd_bus_error *error);

/* sandbox-dbus.c */
int sandbox_dbus_register(BusFrontend *f);

typedef struct SandboxRequest SandboxRequest;

/* A method on one sandbox, once authorized: s is looked up again (it may have gone
 * meanwhile: NoSuchSandbox). Returns as bus_authorized_t. */
typedef int (*sandbox_authorized_t)(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s,
                                    SandboxRequest *req, SandboxError *error);

/* A method call on one sandbox, carried across the authorization. */
struct SandboxRequest {
        Manager *manager;
        char *id;         /* its id, or a name until the caller is known */
        sandbox_authorized_t fn;
        ExecConfig exec; /* Exec and Start only */
};

/* Has the core authorize m's method by the caller on s; fn runs once it is. exec (if
 * given) is moved into the request; fn fills in its caller. */
int sandbox_authorize_call(sd_bus_message *m, Sandbox *s, sandbox_authorized_t fn, ExecConfig *exec);
/* Release (ReleaseSandbox): sandbox_release(), answered "b recycled". */
int sandbox_release_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s, SandboxRequest *req,
                               SandboxError *error);
/* The same for the sandbox the caller names by id or by name (manager_lookup_sandbox()). */
int sandbox_authorize_call_by_name(sd_bus_message *m, Manager *manager, const char *id_or_name,
                                   sandbox_authorized_t fn);
/* ListSandboxes' and ListExecutions' bus_access_t, with SANDBOX_AUTHORIZE_OPTIONAL: without
 * "manage" (asked without interaction) a caller sees its own only; root sees all. */
int bus_list_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                    const char **ret_tenant, SandboxError *error);
/* A new sandbox's answer (CreateSandbox "so", AcquireSandbox "sos" with its source, Fork
 * and Wake "so"), from manager-dbus.c; userdata is the call, its reference taken. */
void bus_reply_sandbox_created(Sandbox *s, const SandboxError *error, void *userdata);
/* The exec_callback_t of Exec and Wait: their reply, from the result (Exec's with the
 * output) or the error. userdata: the call, referenced. */
void bus_reply_exec_result(Exec *e, const ExecResult *result, const SandboxError *error, void *userdata);
/* Exec and Start: reads "as argv, a{sv} options" (a bad one is refused at once) and has the
 * core authorize the call; fn runs with them in req->exec. */
int sandbox_exec_call(sd_bus_message *m, Sandbox *s, sandbox_authorized_t fn, sd_bus_error *error);

/* sandbox-files-dbus.c: one handler for every file method. */
int method_sandbox_file(sd_bus_message *m, void *userdata, sd_bus_error *error);
/* WatchDirectory: a pipe's read end, a JSON line per change (file-op.h). */
int method_sandbox_watch(sd_bus_message *m, void *userdata, sd_bus_error *error);

/* snapshot-dbus.c: Sandbox.Snapshot and .Hibernate, Sandbox.Fork; Manager.Wake and
 * .RemoveSnapshot, Manager.ListSnapshots. */
int method_sandbox_snapshot(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_sandbox_fork(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_snapshot_call(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_list_snapshots(sd_bus_message *m, void *userdata, sd_bus_error *error);

/* context-dbus.c: CreateContext, RunCode, InterruptContext, RestartContext, ListContexts,
 * RemoveContext. */
int method_sandbox_context(sd_bus_message *m, void *userdata, sd_bus_error *error);

/* sandbox-ports-dbus.c: Sandbox.OpenPort, Sandbox.ListPorts. */
int method_sandbox_port(sd_bus_message *m, void *userdata, sd_bus_error *error);

/* sandbox-processes-dbus.c */
int method_sandbox_start(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_sandbox_process(sd_bus_message *m, void *userdata, sd_bus_error *error);

/* observe-dbus.c: Sandbox.GetLogs, Sandbox.GetMetrics, Manager.ListPools. */
int method_sandbox_get_logs(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_sandbox_get_metrics(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_list_pools(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_get_pool(sd_bus_message *m, void *userdata, sd_bus_error *error);
int method_get_statistics(sd_bus_message *m, void *userdata, sd_bus_error *error);
