/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Background processes of io.sandboxd.Sandbox1.Sandbox: Start, ListProcesses, Signal,
 * Wait, ReadOutput. Translation only; the logic is the core's (exec.c). */

#include "bus-flow.h"
#include "bus-util.h"
#include "log.h"
#include "sandbox-dbus.h"
#include "sandbox-errors.h"


static int start_authorized(sd_bus_message *call, const BusCaller *caller, void *userdata,
                            sd_bus_error *error) {
        SandboxRequest *req = userdata;
        Sandbox *s = sandbox_request_find(req, error);
        uint64_t id;
        int r;

        if (!s)
                return -ENOENT;
        req->exec.caller = caller->uid;
        r = sandbox_start_process(s, &req->exec, &id, error);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, "t", id);
}

int method_sandbox_start(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(exec_config_done) ExecConfig c;
        int r;

        exec_config_init(&c);
        r = bus_read_exec_config(m, &c, error);
        if (r < 0)
                return r;
        return sandbox_authorize_call(m, userdata, SANDBOX_OP_EXEC, start_authorized, &c);
}

static Exec *find_process(sd_bus_message *call, Sandbox *s, uint64_t id, sd_bus_error *error) {
        Exec *e = sandbox_find_process(s, id);
        if (!e)
                sandbox_error_setf(error, SANDBOX_ERROR_NO_SUCH_PROCESS, "No process %" PRIu64 " in sandbox %s.",
                                   id, sandbox_get_id(s));
        return e;
}

static void on_waited(Exec *e, const ExecResult *result, const sd_bus_error *error, void *userdata) {
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
                r = bus_append_exec_info(reply, result);
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        if (r < 0)
                log_warning_errno(r, "Failed to send Wait reply: %m");
}

/* Signal, Wait, ReadOutput, ListProcesses: read the call after the polkit check. */
static int process_authorized(sd_bus_message *call, const BusCaller *caller, void *userdata,
                              sd_bus_error *error) {
        SandboxRequest *req = userdata;
        Sandbox *s = sandbox_request_find(req, error);
        const char *member = sd_bus_message_get_member(call);
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        uint64_t id, timeout;
        int sig, r;
        Exec *e;

        if (!s)
                return -ENOENT;

        if (streq(member, "ListProcesses")) {
                r = sd_bus_message_new_method_return(call, &reply);
                if (r >= 0)
                        r = sd_bus_message_open_container(reply, 'a', "(tiassi)");
                for (e = sandbox_next_process(s, NULL); r >= 0 && e; e = sandbox_next_process(s, e)) {
                        r = sd_bus_message_open_container(reply, 'r', "tiassi");
                        if (r >= 0)
                                r = sd_bus_message_append(reply, "ti", exec_get_id(e), (int32_t) exec_get_pid(e));
                        if (r >= 0)
                                r = sd_bus_message_append_strv(reply, (char **) exec_get_argv(e));
                        if (r >= 0)
                                r = sd_bus_message_append(reply, "si", exec_is_running(e) ? "running" : "exited",
                                                          exec_is_running(e) ? 0 : exec_get_result(e)->exit_status);
                        if (r >= 0)
                                r = sd_bus_message_close_container(reply);
                }
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
                return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
        }

        r = sd_bus_message_read(call, "t", &id);
        if (r < 0)
                return r;
        e = find_process(call, s, id, error);
        if (!e)
                return -ESRCH;

        if (streq(member, "ResizeTerminal")) {
                uint32_t rows, cols;
                r = sd_bus_message_read(call, "uu", &rows, &cols);
                if (r >= 0 && (rows < 1 || cols < 1 || rows > UINT16_MAX || cols > UINT16_MAX))
                        return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION, "Terminal size out of range.");
                if (r >= 0)
                        r = exec_resize_terminal(e, (uint16_t) rows, (uint16_t) cols, error);
                return r < 0 ? r : sd_bus_reply_method_return(call, NULL);
        }
        if (streq(member, "Signal")) {
                r = sd_bus_message_read(call, "i", &sig);
                if (r >= 0)
                        r = exec_signal(e, sig, error);
                return r < 0 ? r : sd_bus_reply_method_return(call, NULL);
        }
        if (streq(member, "Wait")) {
                r = sd_bus_message_read(call, "t", &timeout);
                if (r < 0)
                        return r;
                if (timeout > EXEC_TIMEOUT_MAX_SEC)
                        return sandbox_error_setf(error, SANDBOX_ERROR_INVALID_OPTION,
                                                  "Wait takes at most %llu s.", EXEC_TIMEOUT_MAX_SEC);
                r = exec_wait(e, timeout * 1000000ULL, on_waited, sd_bus_message_ref(call), error);
                if (r < 0)
                        sd_bus_message_unref(call);
                return r;
        }

        /* ReadOutput: what it wrote so far (the newest OutputMax bytes of each stream). */
        const ExecResult *res = exec_get_result(e);
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_append_array(reply, 'y', res->out.data ?: "", res->out.size);
        if (r >= 0)
                r = sd_bus_message_append_array(reply, 'y', res->err.data ?: "", res->err.size);
        if (r >= 0)
                r = sd_bus_message_append(reply, "b", exec_is_running(e));
        return r < 0 ? r : bus_flow_send_reply(call, reply, res->out.size + res->err.size);
}

int method_sandbox_process(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, SANDBOX_OP_EXEC, process_authorized, NULL);
}
