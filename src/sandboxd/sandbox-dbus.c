/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "bus-caller.h"
#include "bus-util.h"
#include "log.h"
#include "sandbox-dbus.h"
#include "sandbox-errors.h"
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

static int property_get_owner(sd_bus *bus, const char *path, const char *interface, const char *property,
                              sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "u", (uint32_t) sandbox_get_owner(userdata));
}

static int property_get_ephemeral(sd_bus *bus, const char *path, const char *interface, const char *property,
                                  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "b", sandbox_get_config(userdata)->ephemeral);
}

static int exec_config_setter(void *config, const char *name, const OptionValue *v, sd_bus_error *error) {
        return exec_config_set(config, name, v, error);
}

int bus_append_exec_info(sd_bus_message *reply, const ExecResult *r) {
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

static void on_exec_done(Exec *e, const ExecResult *result, const sd_bus_error *error, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = userdata, *reply = NULL;
        int r;

        if (error) {
                bus_reply_error(call, error);
                return;
        }
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "i", result->exit_status);
        if (r >= 0)
                r = sd_bus_message_append_array(reply, 'y', result->out.data ?: "", result->out.size);
        if (r >= 0)
                r = sd_bus_message_append_array(reply, 'y', result->err.data ?: "", result->err.size);
        if (r >= 0)
                r = bus_append_exec_info(reply, result);
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        if (r < 0)
                log_warning_errno(r, "Failed to send Exec reply: %m");
}

Sandbox *sandbox_request_find(SandboxRequest *req, sd_bus_error *error) {
        Sandbox *s = manager_get_sandbox(req->manager, req->id);
        if (!s)
                sandbox_error_setf(error, SANDBOX_ERROR_NO_SUCH_SANDBOX, "Sandbox '%s' is gone.", req->id);
        return s;
}

static void sandbox_request_free(void *userdata) {
        SandboxRequest *req = userdata;
        exec_config_done(&req->exec);
        free(req);
}

/* Once the caller is known: the sandbox, if still there, says what the caller needs. */
static int sandbox_request_action(uid_t uid, void *userdata, const char **ret_action, sd_bus_error *error) {
        SandboxRequest *req = userdata;
        Sandbox *s = sandbox_request_find(req, error);

        if (!s)
                return -ENOENT;
        *ret_action = sandbox_access_action(req->op, uid, sandbox_get_owner(s));
        return 0;
}

int sandbox_list_action(uid_t uid, void *userdata, const char **ret_action, sd_bus_error *error) {
        *ret_action = sandbox_access_action(SANDBOX_OP_LIST_ALL, uid, 0);
        return 0;
}

int sandbox_authorize_call(sd_bus_message *m, Sandbox *s, SandboxOperation op, bus_authorized_t fn,
                           ExecConfig *exec) {
        SandboxRequest *req;

        req = calloc(1, sizeof(SandboxRequest));
        if (!req)
                return -ENOMEM;
        req->manager = sandbox_get_manager(s);
        strcpy(req->id, sandbox_get_id(s));
        req->op = op;
        exec_config_init(&req->exec);
        if (exec)
                exec_config_move(&req->exec, exec);
        return bus_authorize_then(m, sandbox_request_action, 0, fn, req, sandbox_request_free);
}

int bus_read_exec_config(sd_bus_message *m, ExecConfig *c, sd_bus_error *error) {
        char **argv = NULL;
        int r;

        r = bus_read_strv_bounded(m, EXEC_ARGC_MAX, EXEC_ARGS_MAX, "argv", &argv, error);
        if (r < 0)
                return r;
        r = exec_config_set_argv(c, argv, error);
        if (r < 0)
                return r;
        return bus_read_options(m, exec_config_setter, c, error);
}

static int exec_authorized(sd_bus_message *call, const BusCaller *caller, void *userdata,
                           sd_bus_error *error) {
        SandboxRequest *req = userdata;
        Sandbox *s = sandbox_request_find(req, error);
        int r;

        if (!s)
                return -ENOENT;
        req->exec.caller = caller->uid;
        r = sandbox_exec(s, &req->exec, on_exec_done, sd_bus_message_ref(call), error);
        if (r < 0)
                sd_bus_message_unref(call);
        return r;
}

static int method_exec(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(exec_config_done) ExecConfig c;
        int r;

        exec_config_init(&c);
        r = bus_read_exec_config(m, &c, error);
        if (r < 0)
                return r;
        return sandbox_authorize_call(m, userdata, SANDBOX_OP_EXEC, exec_authorized, &c);
}

static void on_destroyed(Sandbox *s, const sd_bus_error *error, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = userdata;

        if (error)
                bus_reply_error(call, error);
        else
                (void) sd_bus_reply_method_return(call, NULL);
}

static int destroy_authorized(sd_bus_message *call, const BusCaller *caller, void *userdata,
                              sd_bus_error *error) {
        SandboxRequest *req = userdata;
        Sandbox *s = sandbox_request_find(req, error);
        int r;

        if (!s)
                return -ENOENT;
        r = sandbox_destroy(s, on_destroyed, sd_bus_message_ref(call));
        if (r < 0)
                sd_bus_message_unref(call);
        return r;
}

static int method_destroy(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, SANDBOX_OP_DESTROY, destroy_authorized, NULL);
}

static void on_pause_done(Sandbox *s, const sd_bus_error *error, void *userdata) {
        on_destroyed(s, error, userdata); /* the same empty reply, or the error */
}

static int pause_authorized(sd_bus_message *call, const BusCaller *caller, void *userdata,
                            sd_bus_error *error) {
        SandboxRequest *req = userdata;
        Sandbox *s = sandbox_request_find(req, error);
        bool pause = streq(sd_bus_message_get_member(call), "Pause");
        int r;

        if (!s)
                return -ENOENT;
        r = (pause ? sandbox_pause : sandbox_resume)(s, on_pause_done, sd_bus_message_ref(call), error);
        if (r < 0)
                sd_bus_message_unref(call);
        return r;
}

static int method_pause(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, SANDBOX_OP_EXEC, pause_authorized, NULL);
}

static int method_resume(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return method_pause(m, userdata, error);
}

static int set_timeout_authorized(sd_bus_message *call, const BusCaller *caller, void *userdata,
                                  sd_bus_error *error) {
        SandboxRequest *req = userdata;
        Sandbox *s = sandbox_request_find(req, error);
        uint64_t lifetime, idle;
        int r;

        if (!s)
                return -ENOENT;
        r = sd_bus_message_read(call, "tt", &lifetime, &idle);
        if (r < 0)
                return r;
        r = sandbox_set_timeout(s, lifetime, idle, error);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, NULL);
}

static int method_set_timeout(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, SANDBOX_OP_EXEC, set_timeout_authorized, NULL);
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
        SD_BUS_PROPERTY("Timeout", "t", property_get_u64, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("IdleTimeout", "t", property_get_u64, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Deadline", "t", property_get_u64, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Ephemeral", "b", property_get_ephemeral, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_METHOD_WITH_ARGS("Exec",
                                SD_BUS_ARGS("as", argv, "a{sv}", options),
                                SD_BUS_RESULT("i", exit_status, "ay", stdout, "ay", stderr, "a{sv}", info),
                                method_exec, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Destroy", NULL, NULL, method_destroy, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Pause", NULL, NULL, method_pause, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Resume", NULL, NULL, method_resume, SD_BUS_VTABLE_UNPRIVILEGED),
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
        SD_BUS_METHOD_WITH_ARGS("Wait",
                                SD_BUS_ARGS("t", process, "t", timeout_sec),
                                SD_BUS_RESULT("i", exit_status, "a{sv}", info),
                                method_sandbox_process, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ReadOutput",
                                SD_BUS_ARGS("t", process),
                                SD_BUS_RESULT("ay", stdout, "ay", stderr, "b", running),
                                method_sandbox_process, SD_BUS_VTABLE_UNPRIVILEGED),
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
 * asks polkit ("manage" for other uids). Properties and introspection of a sandbox are its
 * owner's and root's only. Anything that is not a call addressed to this object (e.g. a
 * signal emitted while another message is dispatched) is not restricted here. The uid is
 * needed at once: the filter (bus_caller_add_filter()) held the call until it was known. */
static bool sandbox_visible_to_current_call(sd_bus *bus, Sandbox *s) {
        sd_bus_message *m = sd_bus_get_current_message(bus);
        uid_t uid;

        if (!m || !sd_bus_message_is_method_call(m, NULL, NULL) ||
            !streq_ptr(sd_bus_message_get_path(m), sandbox_get_object_path(s)) || !call_needs_caller_uid(m))
                return true;
        if (bus_caller_uid_now(m, &uid) < 0)
                return false;
        return uid == 0 || uid == sandbox_get_owner(s);
}

static int sandbox_object_find(sd_bus *bus, const char *path, const char *interface, void *userdata,
                               void **found, sd_bus_error *error) {
        _cleanup_free_ char *id = NULL;
        Manager *m = userdata;
        Sandbox *s;
        int r;

        r = sd_bus_path_decode(path, SANDBOX_OBJECT_ROOT, &id);
        if (r <= 0)
                return r;
        s = manager_get_sandbox(m, id);
        if (!s || !sandbox_visible_to_current_call(bus, s))
                return 0;
        *found = s;
        return 1;
}

static int sandbox_node_enumerator(sd_bus *bus, const char *path, void *userdata, char ***nodes,
                                   sd_bus_error *error) {
        _cleanup_strv_free_ char **l = NULL;
        sd_bus_message *call = sd_bus_get_current_message(bus);
        Manager *m = userdata;
        uid_t uid = 0;
        int r;

        /* Introspection lists a caller's own sandboxes (root: all). */
        if (call && bus_caller_uid_now(call, &uid) < 0)
                return 0;
        for (Sandbox *s = manager_next_sandbox(m, NULL); s; s = manager_next_sandbox(m, s)) {
                if (uid != 0 && uid != sandbox_get_owner(s))
                        continue;
                r = strv_extend(&l, sandbox_get_object_path(s));
                if (r < 0)
                        return r;
        }
        *nodes = TAKE_PTR(l);
        return 1;
}

int sandbox_dbus_register(sd_bus *bus, Manager *m) {
        int r;

        r = bus_caller_add_filter(bus, call_needs_caller_uid);
        if (r < 0)
                return r;
        r = sd_bus_add_fallback_vtable(bus, NULL, SANDBOX_OBJECT_ROOT, SANDBOX_INTERFACE, sandbox_vtable,
                                       sandbox_object_find, m);
        if (r < 0)
                return r;
        return sd_bus_add_node_enumerator(bus, NULL, SANDBOX_OBJECT_ROOT, sandbox_node_enumerator, m);
}

int sandbox_dbus_emit_state(sd_bus *bus, Sandbox *s) {
        return sd_bus_emit_properties_changed(bus, sandbox_get_object_path(s), SANDBOX_INTERFACE, "State",
                                              "Timeout", "IdleTimeout", "Deadline", NULL);
}
