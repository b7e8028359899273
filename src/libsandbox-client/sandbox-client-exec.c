/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* libsandbox-client over D-Bus: Exec, background processes (Start, Wait, Signal,
 * ReadOutput, ReadOutputFrom, ListProcesses, ResizeTerminal, WriteStdin, CloseStdin), and
 * run (an ephemeral sandbox in one call). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-client-internal.h"
#include "strv.h"

int client_append_exec_options(sd_bus_message *m, const SandboxExecOptions *o, uint64_t timeout_sec) {
        const int fds[] = { o->stdin_fd, o->stdout_fd, o->stderr_fd };
        static const char *const fd_options[] = { "StandardInput", "StandardOutput", "StandardError" };
        int r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && timeout_sec > 0)
                r = sd_bus_message_append(m, "{sv}", "Timeout", "t", timeout_sec);
        if (r >= 0 && o->environment) {
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "Environment");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'v', "as");
                if (r >= 0)
                        r = sd_bus_message_append_strv(m, o->environment);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
        }
        if (r >= 0 && o->working_directory)
                r = sd_bus_message_append(m, "{sv}", "WorkingDirectory", "s", o->working_directory);
        if (r >= 0 && o->output_max_set)
                r = sd_bus_message_append(m, "{sv}", "OutputMax", "t", o->output_max);
        if (r >= 0 && o->stdin_size > 0) {
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "Stdin");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'v', "ay");
                if (r >= 0)
                        r = sd_bus_message_append_array(m, 'y', o->stdin_data, o->stdin_size);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
                if (r >= 0)
                        r = sd_bus_message_close_container(m);
        }
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(fds); i++)
                if (fds[i] >= 0)
                        r = sd_bus_message_append(m, "{sv}", fd_options[i], "h", fds[i]);
        if (r >= 0 && o->tty)
                r = sd_bus_message_append(m, "{sv}", "TTY", "b", 1);
        if (r >= 0 && o->stdin_pipe)
                r = sd_bus_message_append(m, "{sv}", "StdinPipe", "b", 1);
        /* A terminal that does not know its size gets the daemon's default. */
        if (r >= 0 && o->tty && o->tty_rows > 0 && o->tty_cols > 0)
                r = sd_bus_message_append(m, "{sv}{sv}", "TerminalRows", "t", (uint64_t) o->tty_rows,
                                          "TerminalColumns", "t", (uint64_t) o->tty_cols);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

static int exec_call_new(SandboxHandle *h, const char *member, char **argv, const SandboxExecOptions *o,
                         uint64_t timeout_sec, sd_bus_message **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        SandboxExecOptions none = SANDBOX_EXEC_OPTIONS_INIT;
        int r;

        r = client_new_call(h->client, h, member, &m);
        if (r >= 0)
                r = sd_bus_message_append_strv(m, argv);
        if (r >= 0)
                r = client_append_exec_options(m, o ?: &none, timeout_sec);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(m);
        return 0;
}

int sandbox_handle_exec(SandboxHandle *h, char **argv, const SandboxExecOptions *o, SandboxExecResult *ret,
                        SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        /* Always explicit, so that the call's timeout matches the daemon's. */
        uint64_t timeout = o && o->timeout_sec > 0 ? o->timeout_sec : EXEC_TIMEOUT_DEFAULT_SEC;
        int r;

        r = exec_call_new(h, "Exec", argv, o, timeout, &m);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        r = client_call(h->client, m, sec_to_usec_add(timeout, EXEC_CALL_SLACK_SEC), /* interruptible= */ true,
                        error, &reply);
        if (r < 0)
                return r;

        return client_read_exec_result(reply, /* with_output= */ true, ret);
}

int sandbox_handle_start(SandboxHandle *h, char **argv, const SandboxExecOptions *o, uint64_t *ret_process,
                         SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        uint64_t process;
        int r;

        r = exec_call_new(h, "Start", argv, o, o ? o->timeout_sec : 0, &m);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        r = client_call(h->client, m, 0, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;

        r = sd_bus_message_read(reply, "t", &process);
        if (r < 0)
                return r;
        *ret_process = process;
        return 0;
}

int sandbox_handle_wait(SandboxHandle *h, uint64_t process, uint64_t timeout_sec, uint64_t call_usec,
                        SandboxExecResult *ret, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = client_new_call(h->client, h, "Wait", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "tt", process, timeout_sec);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        r = client_call(h->client, m, call_usec, /* interruptible= */ true, error, &reply);
        if (r < 0)
                return r;

        return client_read_exec_result(reply, /* with_output= */ false, ret);
}

int sandbox_handle_signal(SandboxHandle *h, uint64_t process, int sig, SandboxClientError *error) {
        return client_call_method(h->client, h, "Signal", error, "ti", process, (int32_t) sig);
}

int sandbox_handle_resize_terminal(SandboxHandle *h, uint64_t process, unsigned rows, unsigned cols) {
        return sd_bus_call_method_async(h->client->bus, NULL, SANDBOX_BUS_NAME, h->path, SANDBOX_INTERFACE,
                                        "ResizeTerminal", NULL, NULL, "tuu", process,
                                        (uint32_t) rows, (uint32_t) cols);
}

int sandbox_handle_write_stdin(SandboxHandle *h, uint64_t process, const void *data, size_t size,
                               SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        int r;

        r = client_new_call(h->client, h, "WriteStdin", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "t", process);
        if (r >= 0)
                r = sd_bus_message_append_array(m, 'y', data, size);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        return client_call(h->client, m, 0, /* interruptible= */ false, error, &reply);
}

int sandbox_handle_close_stdin(SandboxHandle *h, uint64_t process, SandboxClientError *error) {
        return client_call_method(h->client, h, "CloseStdin", error, "t", process);
}

int sandbox_handle_read_output_from(SandboxHandle *h, uint64_t process, const uint64_t offsets[2],
                                    SandboxExecResult *ret_output, bool *ret_running, uint64_t ret_totals[2],
                                    SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        SandboxExecResult res = {};
        uint64_t totals[2];
        int running, r;

        r = client_new_call(h->client, h, "ReadOutputFrom", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "ttt", process, offsets[0], offsets[1]);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);

        r = client_call(h->client, m, 0, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;

        r = client_read_bytes(reply, &res.stdout_data, &res.stdout_size);
        if (r >= 0)
                r = client_read_bytes(reply, &res.stderr_data, &res.stderr_size);
        if (r >= 0)
                r = sd_bus_message_read(reply, "btt", &running, &totals[0], &totals[1]);
        if (r < 0) {
                sandbox_exec_result_done(&res);
                return r;
        }
        *ret_output = res;
        *ret_running = running;
        ret_totals[0] = totals[0];
        ret_totals[1] = totals[1];
        return 0;
}

int sandbox_handle_read_output(SandboxHandle *h, uint64_t process, SandboxExecResult *ret_output,
                               bool *ret_running, SandboxClientError *error) {
        uint64_t totals[2];
        bool running;
        int r;

        /* What is kept from the start: ReadOutput's answer. */
        r = sandbox_handle_read_output_from(h, process, (const uint64_t[2]) { 0, 0 }, ret_output, &running, totals,
                                            error);
        if (r >= 0 && ret_running)
                *ret_running = running;
        return r;
}

static void process_done(void *item) {
        SandboxProcess *p = item;

        strv_free(p->argv);
        free(p->state);
}

void sandbox_process_array_free(SandboxProcess *a, size_t n) {
        client_array_free(a, n, sizeof(SandboxProcess), process_done);
}

static int process_read(sd_bus_message *m, void *item) {
        SandboxProcess *p = item;
        const char *state;
        int r;

        r = sd_bus_message_enter_container(m, 'r', "tiassi");
        if (r <= 0)
                return r;
        r = sd_bus_message_read(m, "ti", &p->id, &p->pid);
        if (r >= 0)
                r = sd_bus_message_read_strv(m, &p->argv);
        if (r >= 0)
                r = sd_bus_message_read(m, "si", &state, &p->exit_status);
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;
        p->state = strdup(state);
        return p->state ? 1 : -ENOMEM;
}

int sandbox_handle_processes(SandboxHandle *h, SandboxProcess **ret, size_t *ret_n, SandboxClientError *error) {
        return client_call_list(h->client, h, "ListProcesses", "(tiassi)", sizeof(SandboxProcess), process_read,
                                process_done, (void **) ret, ret_n, error);
}

void sandbox_run_done(SandboxRun *run) {
        free(run->id);
        sandbox_exec_result_done(&run->result);
        sandbox_client_error_done(&run->cleanup_error);
        *run = (SandboxRun) {};
}

int sandbox_client_run(SandboxClient *c, const char *template, const SandboxCreateOptions *co, char **argv,
                       const SandboxExecOptions *eo, SandboxRun *run, SandboxClientError *error) {
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        SandboxCreateOptions o = co ? *co : (SandboxCreateOptions) {};
        uint64_t timeout = eo && eo->timeout_sec > 0 ? eo->timeout_sec : EXEC_TIMEOUT_DEFAULT_SEC;
        int r;

        *run = (SandboxRun) { .step = SANDBOX_RUN_CREATE };

        /* Gone after its exec; a backstop should the caller die before it returns. */
        o.set |= SANDBOX_CREATE_EPHEMERAL | SANDBOX_CREATE_TIMEOUT;
        o.ephemeral = true;
        o.timeout_sec = sec_add(timeout, SANDBOX_RUN_LIFETIME_SLACK_SEC);

        r = sandbox_client_create(c, template, &o, &run->id, &h, error);
        if (r < 0)
                return r;

        run->step = SANDBOX_RUN_EXEC;
        r = sandbox_handle_exec(h, argv, eo, &run->result, error);
        if (r < 0) {
                /* sandboxd lets an ephemeral sandbox go after its exec, or when it refused
                 * it; one interrupted here runs on unless it is destroyed. */
                if (r == -EINTR)
                        run->cleanup = sandbox_handle_destroy(h, SANDBOX_DESTROY_CLEANUP, &run->cleanup_error);
                return r;
        }

        run->step = SANDBOX_RUN_DONE;
        return 0;
}
