/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Background processes of io.sandboxd.Sandbox1.Sandbox: Start, ListProcesses, Signal,
 * ResizeTerminal, WriteStdin, CloseStdin, Wait, ReadOutput. Translation only; the logic and bounds are the
 * core's (exec.c). */

#include "bus-flow.h"
#include "bus-util.h"
#include "log.h"
#include "sandbox-dbus.h"

static int start_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s,
                            SandboxRequest *req, SandboxError *error) {
        uint64_t id;
        int r;

        req->exec.caller = caller->uid;
        r = sandbox_start_process(s, &req->exec, &id, error);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, "t", id);
}

int method_sandbox_start(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_exec_call(m, userdata, start_authorized, error);
}

static int reply_processes(sd_bus_message *call, Sandbox *s) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(tiassi)");
        for (Exec *e = sandbox_next_process(s, NULL); r >= 0 && e; e = sandbox_next_process(s, e)) {
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

/* ReadOutput: what it wrote so far (the newest OutputMax bytes of each stream);
 * ReadOutputFrom: from two offsets on, and where to read on from. */
static int reply_output(sd_bus_message *call, Exec *e, SandboxError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        bool from = streq(sd_bus_message_get_member(call), "ReadOutputFrom");
        uint64_t out_offset = 0, err_offset = 0;
        ExecOutput o;
        int r;

        if (from) {
                r = sd_bus_message_read(call, "tt", &out_offset, &err_offset);
                if (r < 0)
                        return r;
        }
        r = exec_read_output(e, out_offset, err_offset, &o, error);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_append_array(reply, 'y', o.out, o.out_size);
        if (r >= 0)
                r = sd_bus_message_append_array(reply, 'y', o.err, o.err_size);
        if (r >= 0)
                r = sd_bus_message_append(reply, "b", exec_is_running(e));
        if (r >= 0 && from)
                r = sd_bus_message_append(reply, "tt", o.out_total, o.err_total);
        return r < 0 ? r : bus_flow_send_reply(call, reply, o.out_size + o.err_size);
}

/* Signal, ResizeTerminal, WriteStdin, CloseStdin, Wait, ReadOutput(From), ListProcesses: read the call after the
 * authorization. */
static int process_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s,
                              SandboxRequest *req, SandboxError *error) {
        const char *member = sd_bus_message_get_member(call);
        uint64_t id;
        Exec *e;
        int r;

        if (streq(member, "ListProcesses"))
                return reply_processes(call, s);

        r = sd_bus_message_read(call, "t", &id);
        if (r < 0)
                return r;
        r = sandbox_get_process(s, id, &e, error);
        if (r < 0)
                return r;

        if (streq(member, "ResizeTerminal")) {
                uint32_t rows, cols;
                r = sd_bus_message_read(call, "uu", &rows, &cols);
                if (r >= 0)
                        r = exec_resize_terminal(e, rows, cols, error);
                return r < 0 ? r : sd_bus_reply_method_return(call, NULL);
        }
        if (streq(member, "Signal")) {
                int sig;
                r = sd_bus_message_read(call, "i", &sig);
                if (r >= 0)
                        r = exec_signal(e, sig, error);
                return r < 0 ? r : sd_bus_reply_method_return(call, NULL);
        }
        if (streq(member, "WriteStdin")) {
                const void *data;
                size_t size;
                r = sd_bus_message_read_array(call, 'y', &data, &size);
                if (r >= 0)
                        r = exec_write_stdin(e, data, size, error);
                return r < 0 ? r : sd_bus_reply_method_return(call, NULL);
        }
        if (streq(member, "CloseStdin")) {
                r = exec_close_stdin(e, error);
                return r < 0 ? r : sd_bus_reply_method_return(call, NULL);
        }
        if (streq(member, "Wait")) {
                uint64_t timeout;
                r = sd_bus_message_read(call, "t", &timeout);
                if (r < 0)
                        return r;
                r = exec_wait(e, timeout, bus_reply_exec_result, sd_bus_message_ref(call), error);
                if (r < 0)
                        sd_bus_message_unref(call);
                return r;
        }
        return reply_output(call, e, error);
}

int method_sandbox_process(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, process_authorized, NULL);
}
