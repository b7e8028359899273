/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdio.h>

#include "bus-caller.h"
#include "bus-flow.h"
#include "bus-util.h"
#include "log.h"
#include "sandbox-dbus.h"
#include "strv.h"

static int property_get_string(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Sandbox *s = userdata;
        const char *v;

        if (streq(property, "Id"))
                v = sandbox_get_id(s);
        else if (streq(property, "Template"))
                v = sandbox_get_template(s);
        else if (streq(property, "Unit"))
                v = sandbox_get_unit(s);
        else if (streq(property, "Name"))
                v = sandbox_get_name(s);
        else if (streq(property, "Tenant"))
                v = sandbox_get_tenant(s);
        else if (streq(property, "Storage"))
                v = sandbox_get_storage(s);
        else if (streq(property, "ForkMethod"))
                v = sandbox_get_fork_method(s);
        else
                v = sandbox_state_to_string(sandbox_get_state(s));
        return sd_bus_message_append(reply, "s", v);
}

static int property_get_u64(sd_bus *bus, const char *path, const char *interface, const char *property,
                            sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Sandbox *s = userdata;
        const SandboxConfig *c = sandbox_get_config(s);
        uint64_t v;

        if (streq(property, "CreatedAt"))
                v = sandbox_get_created_at(s);
        else if (streq(property, "MemoryMax"))
                v = c->limits.memory_max;
        else if (streq(property, "CPUQuotaPerSecUSec"))
                v = c->limits.cpu_quota_per_sec_usec;
        else if (streq(property, "TasksMax"))
                v = c->limits.tasks_max;
        else if (streq(property, "IdleTimeout"))
                v = c->idle_timeout_sec;
        else if (streq(property, "Deadline"))
                v = sandbox_get_deadline(s);
        else if (streq(property, "DiskMax"))
                v = c->disk_max;
        else
                v = c->timeout_sec;
        return sd_bus_message_append(reply, "t", v);
}

/* EgressAllow, EgressDeny: the rules in their canonical form (sandboxd-egress(8)). */
static int property_get_egress(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        _cleanup_strv_free_ char **l = NULL;
        int r;

        r = sandbox_config_egress_strv(sandbox_get_config(userdata), streq(property, "EgressDeny"), &l);
        if (r < 0)
                return r;
        return sd_bus_message_append_strv(reply, l);
}

/* Labels: a{ss}, sorted by key. */
static int property_get_labels(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        int r;

        r = sd_bus_message_open_container(reply, 'a', "{ss}");
        for (char * const *l = sandbox_get_config(userdata)->labels; r >= 0 && l && *l; l++) {
                const char *eq = strchr(*l, '=');
                _cleanup_free_ char *key = eq ? strndup(*l, (size_t) (eq - *l)) : NULL;

                if (!key)
                        return -ENOMEM;
                r = sd_bus_message_append(reply, "{ss}", key, eq + 1);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

static int property_get_owner(sd_bus *bus, const char *path, const char *interface, const char *property,
                              sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "u", (uint32_t) sandbox_get_owner(userdata));
}

static int property_get_bool(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Sandbox *s = userdata;

        return sd_bus_message_append(reply, "b", streq(property, "FromPool") ? sandbox_get_from_pool(s) :
                                                   sandbox_get_config(s)->ephemeral);
}

const char *bus_sandbox_path(const Sandbox *s, char buf[static SANDBOX_OBJECT_PATH_MAX]) {
        /* An id is hex digits: nothing to escape. */
        snprintf(buf, SANDBOX_OBJECT_PATH_MAX, SANDBOX_OBJECT_PREFIX "%s", sandbox_get_id(s));
        return buf;
}

static int bus_append_exec_info(sd_bus_message *reply, const ExecResult *r) {
        return sd_bus_message_append(reply, "a{sv}", 10,
                                     "TimedOut", "b", r->timed_out,
                                     "OOMKilled", "b", r->oom_killed,
                                     "Signal", "i", r->signal,
                                     "ExitCode", "i", r->exit_code,
                                     "DurationUSec", "t", r->duration_usec,
                                     "CPUUSec", "t", r->cpu_usec,
                                     "MaxRSSBytes", "t", r->max_rss_bytes,
                                     "Truncated", "b", r->truncated,
                                     "StdoutBytes", "t", r->out.total,
                                     "StderrBytes", "t", r->err.total);
}

void bus_reply_exec_result(Exec *e, const ExecResult *result, const SandboxError *error, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = userdata, *reply = NULL;
        bool with_output = sd_bus_message_is_method_call(call, NULL, "Exec");
        int r;

        if (error) {
                bus_reply_error(call, error);
                return;
        }
        /* Exec: exit status, stdout, stderr, info; Wait: exit status, info. */
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "i", result->exit_status);
        if (r >= 0 && with_output)
                r = sd_bus_message_append_array(reply, 'y', result->out.data ?: "", result->out.size);
        if (r >= 0 && with_output)
                r = sd_bus_message_append_array(reply, 'y', result->err.data ?: "", result->err.size);
        if (r >= 0)
                r = bus_append_exec_info(reply, result);
        if (r >= 0)
                /* Wait's reply carries no output: it is small whatever the process wrote. */
                r = bus_flow_send_reply(call, reply, with_output ? result->out.size + result->err.size : 0);
        if (r < 0)
                log_warning_errno(r, "Failed to send %s reply: %m", sd_bus_message_get_member(call));
}

static void sandbox_request_free(void *userdata) {
        SandboxRequest *req = userdata;
        exec_config_done(&req->exec);
        free(req->id);
        free(req);
}

/* The request's operation on its sandbox, looked up now that the caller is known. */
/* The request's operation on its sandbox, looked up now that the caller is known (and by
 * its id from here on). */
static int sandbox_request_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                                  const char **ret_tenant, SandboxError *error) {
        SandboxRequest *req = userdata;
        Sandbox *s;
        int r;

        r = manager_lookup_sandbox(req->manager, caller, req->id, &s, error);
        if (r < 0)
                return r;
        if (!streq(req->id, sandbox_get_id(s))) {
                char *id = strdup(sandbox_get_id(s));
                if (!id)
                        return -ENOMEM;
                free(req->id);
                req->id = id;
        }
        *ret_owner = sandbox_get_owner(s);
        *ret_tenant = sandbox_get_tenant(s);
        return 0;
}

static int sandbox_request_run(sd_bus_message *call, const SandboxCaller *caller, void *userdata,
                               SandboxError *error) {
        SandboxRequest *req = userdata;
        Sandbox *s;
        int r = manager_lookup_sandbox(req->manager, caller, req->id, &s, error);

        return r < 0 ? r : req->fn(call, caller, s, req, error);
}

int bus_list_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                    const char **ret_tenant, SandboxError *error) {
        return 0;
}

static int sandbox_request_start(sd_bus_message *m, Manager *manager, const char *id_or_name,
                                 sandbox_authorized_t fn, ExecConfig *exec) {
        SandboxRequest *req;

        req = calloc(1, sizeof(SandboxRequest));
        if (!req)
                return -ENOMEM;
        req->manager = manager;
        req->id = strdup(id_or_name);
        if (!req->id) {
                free(req);
                return -ENOMEM;
        }
        req->fn = fn;
        exec_config_init(&req->exec);
        if (exec)
                exec_config_move(&req->exec, exec);
        return bus_authorize_then(m, sandbox_request_access, 0, sandbox_request_run, req, sandbox_request_free);
}

int sandbox_authorize_call(sd_bus_message *m, Sandbox *s, sandbox_authorized_t fn, ExecConfig *exec) {
        return sandbox_request_start(m, sandbox_get_manager(s), sandbox_get_id(s), fn, exec);
}

int sandbox_authorize_call_by_name(sd_bus_message *m, Manager *manager, const char *id_or_name,
                                   sandbox_authorized_t fn) {
        return sandbox_request_start(m, manager, id_or_name, fn, NULL);
}

int sandbox_exec_call(sd_bus_message *m, Sandbox *s, sandbox_authorized_t fn, sd_bus_error *error) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        _cleanup_(exec_config_done) ExecConfig c;
        char **argv = NULL;
        int r;

        exec_config_init(&c);
        r = bus_read_strv_bounded(m, EXEC_ARGC_MAX, EXEC_ARGS_MAX, "argv", &argv, &e);
        if (r >= 0)
                r = exec_config_set_argv(&c, argv, &e);
        if (r >= 0)
                r = bus_read_options(m, OPTION_SET_EXEC, &c, &e);
        if (r < 0)
                exec_config_refuse(&c, r, &e); /* the core answers it, once authorized */
        return sandbox_authorize_call(m, s, fn, &c);
}

static int exec_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s,
                           SandboxRequest *req, SandboxError *error) {
        int r;

        req->exec.caller = caller->uid;
        r = sandbox_exec(s, &req->exec, bus_reply_exec_result, sd_bus_message_ref(call), error);
        if (r < 0)
                sd_bus_message_unref(call);
        return r;
}

static int method_exec(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_exec_call(m, userdata, exec_authorized, error);
}

/* Destroy's, Pause's and Resume's answer: empty, or the error. */
static void on_sandbox_done(Sandbox *s, const SandboxError *error, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = userdata;

        if (error)
                bus_reply_error(call, error);
        else
                (void) sd_bus_reply_method_return(call, NULL);
}

/* Release and the manager's ReleaseSandbox: whether it was kept for reuse (it runs) or
 * destroyed. */
static void on_released(Sandbox *s, const SandboxError *error, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = userdata;

        if (error)
                bus_reply_error(call, error);
        else
                (void) sd_bus_reply_method_return(call, "b", sandbox_get_state(s) == SANDBOX_RUNNING);
}

int sandbox_release_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s, SandboxRequest *req,
                               SandboxError *error) {
        int r;

        r = sandbox_release(s, on_released, sd_bus_message_ref(call));
        if (r < 0)
                sd_bus_message_unref(call);
        return r;
}

static int method_release(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, sandbox_release_authorized, NULL);
}

/* Destroy, Pause, Resume: answered by on_sandbox_done() once done. */
static int lifecycle_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s,
                                SandboxRequest *req, SandboxError *error) {
        const char *member = sd_bus_message_get_member(call);
        int r;

        sd_bus_message_ref(call);
        if (streq(member, "Destroy"))
                r = sandbox_destroy(s, on_sandbox_done, call);
        else
                r = (streq(member, "Pause") ? sandbox_pause : sandbox_resume)(s, on_sandbox_done, call, error);
        if (r < 0)
                sd_bus_message_unref(call);
        return r;
}

static int method_destroy(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, lifecycle_authorized, NULL);
}

static int method_pause(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, lifecycle_authorized, NULL);
}

static int set_timeout_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s,
                                  SandboxRequest *req, SandboxError *error) {
        uint64_t lifetime, idle;
        int r;

        r = sd_bus_message_read(call, "tt", &lifetime, &idle);
        if (r < 0)
                return r;
        r = sandbox_set_timeout(s, lifetime, idle, error);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, NULL);
}

static int method_set_timeout(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, set_timeout_authorized, NULL);
}

static const sd_bus_vtable sandbox_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Id", "s", property_get_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Template", "s", property_get_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Owner", "u", property_get_owner, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("State", "s", property_get_string, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Unit", "s", property_get_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("CreatedAt", "t", property_get_u64, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("MemoryMax", "t", property_get_u64, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("CPUQuotaPerSecUSec", "t", property_get_u64, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("TasksMax", "t", property_get_u64, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("DiskMax", "t", property_get_u64, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Storage", "s", property_get_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("ForkMethod", "s", property_get_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Timeout", "t", property_get_u64, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("IdleTimeout", "t", property_get_u64, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Deadline", "t", property_get_u64, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Ephemeral", "b", property_get_bool, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Name", "s", property_get_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Tenant", "s", property_get_string, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("FromPool", "b", property_get_bool, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("EgressAllow", "as", property_get_egress, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("EgressDeny", "as", property_get_egress, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Labels", "a{ss}", property_get_labels, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_METHOD_WITH_ARGS("Exec",
                                SD_BUS_ARGS("as", argv, "a{sv}", options),
                                SD_BUS_RESULT("i", exit_status, "ay", stdout, "ay", stderr, "a{sv}", info),
                                method_exec, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Destroy", NULL, NULL, method_destroy, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Release",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("b", recycled),
                                method_release, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Pause", NULL, NULL, method_pause, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Resume", NULL, NULL, method_pause, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Snapshot",
                                SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("s", snapshot),
                                method_sandbox_snapshot, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Hibernate",
                                SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("s", snapshot),
                                method_sandbox_snapshot, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Fork",
                                SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("s", id, "o", path),
                                method_sandbox_fork, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Start",
                                SD_BUS_ARGS("as", argv, "a{sv}", options),
                                SD_BUS_RESULT("t", process),
                                method_sandbox_start, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListProcesses",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(tiassi)", processes),
                                method_sandbox_process, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Signal",
                                SD_BUS_ARGS("t", process, "i", signal),
                                SD_BUS_NO_RESULT,
                                method_sandbox_process, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ResizeTerminal",
                                SD_BUS_ARGS("t", process, "u", rows, "u", columns),
                                SD_BUS_NO_RESULT,
                                method_sandbox_process, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("WriteStdin",
                                SD_BUS_ARGS("t", process, "ay", data),
                                SD_BUS_NO_RESULT,
                                method_sandbox_process, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("CloseStdin",
                                SD_BUS_ARGS("t", process),
                                SD_BUS_NO_RESULT,
                                method_sandbox_process, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Wait",
                                SD_BUS_ARGS("t", process, "t", timeout_sec),
                                SD_BUS_RESULT("i", exit_status, "a{sv}", info),
                                method_sandbox_process, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ReadOutput",
                                SD_BUS_ARGS("t", process),
                                SD_BUS_RESULT("ay", stdout, "ay", stderr, "b", running),
                                method_sandbox_process, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ReadOutputFrom",
                                SD_BUS_ARGS("t", process, "t", stdout_offset, "t", stderr_offset),
                                SD_BUS_RESULT("ay", stdout, "ay", stderr, "b", running,
                                              "t", stdout_total, "t", stderr_total),
                                method_sandbox_process, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("CreateContext",
                                SD_BUS_ARGS("s", language, "a{sv}", options),
                                SD_BUS_RESULT("a{sv}", context),
                                method_sandbox_context, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RunCode",
                                SD_BUS_ARGS("s", context, "s", code, "a{sv}", options),
                                SD_BUS_RESULT("aa{sv}", events, "a{sv}", result),
                                method_sandbox_context, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("InterruptContext",
                                SD_BUS_ARGS("s", context),
                                SD_BUS_NO_RESULT,
                                method_sandbox_context, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RestartContext",
                                SD_BUS_ARGS("s", context),
                                SD_BUS_RESULT("a{sv}", context),
                                method_sandbox_context, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListContexts",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("aa{sv}", contexts),
                                method_sandbox_context, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RemoveContext",
                                SD_BUS_ARGS("s", context),
                                SD_BUS_NO_RESULT,
                                method_sandbox_context, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ReadFile",
                                SD_BUS_ARGS("s", path, "t", offset, "t", length),
                                SD_BUS_RESULT("ay", data),
                                method_sandbox_file, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("WriteFile",
                                SD_BUS_ARGS("s", path, "ay", data, "a{sv}", options),
                                SD_BUS_RESULT("t", bytes),
                                method_sandbox_file, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Upload",
                                SD_BUS_ARGS("s", path, "h", source, "a{sv}", options),
                                SD_BUS_RESULT("t", bytes),
                                method_sandbox_file, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Download",
                                SD_BUS_ARGS("s", path, "h", destination, "a{sv}", options),
                                SD_BUS_RESULT("t", bytes),
                                method_sandbox_file, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListFiles",
                                SD_BUS_ARGS("s", path, "u", depth),
                                SD_BUS_RESULT("a(sstuxsayay)", entries),
                                method_sandbox_file, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Stat",
                                SD_BUS_ARGS("s", path),
                                SD_BUS_RESULT("(sstuxsayay)", entry),
                                method_sandbox_file, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("MakeDirectory",
                                SD_BUS_ARGS("s", path, "b", parents),
                                SD_BUS_NO_RESULT,
                                method_sandbox_file, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Remove",
                                SD_BUS_ARGS("s", path, "b", recursive),
                                SD_BUS_NO_RESULT,
                                method_sandbox_file, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Move",
                                SD_BUS_ARGS("s", path, "s", to),
                                SD_BUS_NO_RESULT,
                                method_sandbox_file, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetTimeout",
                                SD_BUS_ARGS("t", lifetime_sec, "t", idle_sec),
                                SD_BUS_NO_RESULT,
                                method_set_timeout, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetLogs",
                                SD_BUS_ARGS("u", lines, "b", follow),
                                SD_BUS_RESULT("h", log),
                                method_sandbox_get_logs, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetMetrics",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a{sv}", metrics),
                                method_sandbox_get_metrics, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("WatchDirectory",
                                SD_BUS_ARGS("s", path, "b", recursive),
                                SD_BUS_RESULT("h", events),
                                method_sandbox_watch, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("OpenPort",
                                SD_BUS_ARGS("u", port),
                                SD_BUS_RESULT("h", connection),
                                method_sandbox_port, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListPorts",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(sq)", ports),
                                method_sandbox_port, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END
};

/* The calls whose dispatch may ask the callbacks below for the caller's uid: all but our
 * own methods, i.e. Properties, Introspectable, Peer or no interface, which sd-bus answers
 * itself and at once. Our own methods learn the uid later, in bus_authorize_then(). */
static bool call_needs_caller_uid(sd_bus_message *m) {
        const char *interface = sd_bus_message_get_interface(m);

        if (streq_ptr(interface, SANDBOX_INTERFACE))
                return false;
        return !streq_ptr(interface, SANDBOX_MANAGER_INTERFACE) ||
               !streq_ptr(sd_bus_message_get_path(m), SANDBOX_MANAGER_PATH);
}

/* Whether the call being dispatched may see s. Its own methods are visible to all: each
 * is authorized by the core ("manage" for other uids). Properties and introspection of a
 * sandbox are what the core lets a caller see without asking polkit (its owner's and
 * root's). Anything that is not a call addressed to this object (e.g. a signal emitted
 * while another message is dispatched) is not restricted here. The uid is needed at once:
 * the filter (bus_caller_add_filter()) held the call until it was known. */
static bool sandbox_visible_to_current_call(sd_bus *bus, Sandbox *s) {
        sd_bus_message *m = sd_bus_get_current_message(bus);
        uid_t uid;

        if (!m || !sd_bus_message_is_method_call(m, NULL, NULL) ||
            !streq_ptr(sd_bus_message_get_path(m), BUS_SANDBOX_PATH(s)) || !call_needs_caller_uid(m))
                return true;
        if (bus_caller_uid_now(m, &uid) < 0)
                return false;
        return sandbox_access_visible(&(SandboxCaller) { .uid = uid, .tenant = bus_caller_tenant(m) },
                                      sandbox_get_owner(s), sandbox_get_tenant(s));
}

static int sandbox_object_find(sd_bus *bus, const char *path, const char *interface, void *userdata,
                               void **found, sd_bus_error *error) {
        _cleanup_free_ char *id = NULL;
        BusFrontend *f = userdata;
        Sandbox *s;
        int r;

        r = sd_bus_path_decode(path, SANDBOX_OBJECT_ROOT, &id);
        if (r <= 0)
                return r;
        s = manager_get_sandbox(f->manager, id);
        if (!s || !sandbox_visible_to_current_call(bus, s))
                return 0;
        *found = s;
        return 1;
}

static int sandbox_node_enumerator(sd_bus *bus, const char *path, void *userdata, char ***nodes,
                                   sd_bus_error *error) {
        _cleanup_strv_free_ char **l = NULL;
        sd_bus_message *call = sd_bus_get_current_message(bus);
        BusFrontend *f = userdata;
        uid_t uid = 0;
        int r;

        /* Introspection lists what the caller sees without asking (root: all). */
        if (call && bus_caller_uid_now(call, &uid) < 0)
                return 0;
        const SandboxCaller caller = { .uid = uid, .tenant = call ? bus_caller_tenant(call) : NULL };
        for (Sandbox *s = manager_next_visible_sandbox(f->manager, NULL, &caller); s;
             s = manager_next_visible_sandbox(f->manager, s, &caller)) {
                r = strv_extend(&l, BUS_SANDBOX_PATH(s));
                if (r < 0)
                        return r;
        }
        *nodes = TAKE_PTR(l);
        return 1;
}

int sandbox_dbus_register(BusFrontend *f) {
        int r;

        r = bus_caller_add_filter(f->bus, call_needs_caller_uid);
        if (r >= 0)
                r = bus_caller_watch_peers(f->bus);
        if (r < 0)
                return r;
        r = sd_bus_add_fallback_vtable(f->bus, NULL, SANDBOX_OBJECT_ROOT, SANDBOX_INTERFACE, sandbox_vtable,
                                       sandbox_object_find, f);
        if (r < 0)
                return r;
        return sd_bus_add_node_enumerator(f->bus, NULL, SANDBOX_OBJECT_ROOT, sandbox_node_enumerator, f);
}
