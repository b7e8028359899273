/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The methods of io.sandboxd.Sandbox on one sandbox: Exec (one reply, or streamed with
 * "more"), Destroy, Pause, Resume, SetTimeout, and the background processes (Start,
 * ListProcesses, Signal, ResizeTerminal, Wait, ReadOutput). Translation only, as in
 * sandbox-dbus.c and sandbox-processes-dbus.c. */

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>

#include "json-util.h"
#include "log.h"
#include "sandbox-varlink.h"
#include "strv.h"

/* ---- a call on one sandbox ---- */

static void sandbox_request_free(void *userdata) {
        SandboxVarlinkRequest *req = userdata;
        SandboxArgs *a = &req->args;

        free(a->id);
        strv_free(a->argv);
        free(a->path);
        free(a->to);
        free(a->context);
        free(a->language);
        free(a->code);
        free(a->data.data);
        exec_config_done(&a->exec);
        sandbox_config_done(&a->config);
        free(req);
}

static int sandbox_request_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                                  const char **ret_tenant, SandboxError *error) {
        SandboxVarlinkRequest *req = userdata;
        Sandbox *s;
        int r;

        r = manager_lookup_sandbox(req->frontend->manager, caller, req->args.id, &s, error);
        if (r < 0)
                return r;
        /* By its id from here on (the caller may have named it). */
        if (!streq(req->args.id, sandbox_get_id(s))) {
                char *id = strdup(sandbox_get_id(s));
                if (!id)
                        return -ENOMEM;
                free(req->args.id);
                req->args.id = id;
        }
        *ret_owner = sandbox_get_owner(s);
        *ret_tenant = sandbox_get_tenant(s);
        return 0;
}

static int sandbox_request_run(VarlinkCall *call, const SandboxCaller *caller, void *userdata, SandboxError *error) {
        SandboxVarlinkRequest *req = userdata;
        Sandbox *s;
        int r;

        r = manager_lookup_sandbox(req->frontend->manager, caller, req->args.id, &s, error);
        return r < 0 ? r : req->fn(call, caller, s, req, error);
}

int sandbox_varlink_method(VarlinkFrontend *f, VarlinkCall *call, json_object *parameters,
                           const VarlinkParam table[], sandbox_varlink_prepare_t prepare,
                           sandbox_varlink_authorized_t fn) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        SandboxVarlinkRequest *req;
        struct ucred ucred;
        Sandbox *s;
        int r;

        req = calloc(1, sizeof(SandboxVarlinkRequest));
        if (!req) {
                (void) varlink_reply_error(call, NULL, -ENOMEM);
                return 0;
        }
        *req = (SandboxVarlinkRequest) { .frontend = f, .fn = fn };
        exec_config_init(&req->args.exec);
        file_options_init(&req->args.file);

        r = varlink_params_read_or_reply(call, parameters, table, &req->args);
        if (r < 0) {
                sandbox_request_free(req);
                return varlink_params_failed(call, r);
        }
        /* Looked up for its options' sake as the peer's uid sees it; again, with the
         * whole caller, once authorized. */
        r = varlink_call_get_peer_ucred(call, &ucred);
        if (r >= 0) {
                SandboxCaller peer = { .kind = SANDBOX_CALLER_UNIX_PROCESS, .uid = ucred.uid, .pid = ucred.pid,
                                       .tenant = varlink_call_get_connection_tag(call) };
                r = manager_lookup_sandbox(f->manager, &peer, req->args.id, &s, &error);
        }
        if (r >= 0 && prepare)
                r = prepare(s, &req->args, &error);
        req->args.options = NULL;
        if (r < 0) {
                (void) varlink_reply_error(call, &error, r);
                sandbox_request_free(req);
                return 0;
        }
        r = varlink_authorize_then(f->bus, call, sandbox_request_access, 0, sandbox_request_run, req,
                                   sandbox_request_free);
        if (r < 0)
                (void) varlink_reply_error(call, NULL, r);
        return 0;
}

#define ARG(field) offsetof(SandboxArgs, field)
#define ARG_ID { "id", VARLINK_PARAM_STRING, ARG(id), true }

/* ---- Exec and its result ---- */

static json_object *exec_info_to_json(const ExecResult *res, uint64_t stdout_bytes, uint64_t stderr_bytes) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o ||
            json_add(o, "timedOut", json_object_new_boolean(res->timed_out)) < 0 ||
            json_add(o, "oomKilled", json_object_new_boolean(res->oom_killed)) < 0 ||
            json_add(o, "signal", json_object_new_int(res->signal)) < 0 ||
            json_add(o, "exitCode", json_object_new_int(res->exit_code)) < 0 ||
            json_add(o, "durationUSec", json_object_new_uint64(res->duration_usec)) < 0 ||
            json_add(o, "cpuUSec", json_object_new_uint64(res->cpu_usec)) < 0 ||
            json_add(o, "maxRSSBytes", json_object_new_uint64(res->max_rss_bytes)) < 0 ||
            json_add(o, "truncated", json_object_new_boolean(res->truncated)) < 0 ||
            json_add(o, "stdoutBytes", json_object_new_uint64(stdout_bytes)) < 0 ||
            json_add(o, "stderrBytes", json_object_new_uint64(stderr_bytes)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* Exec's and Wait's reply: the exit status and info, and the captured output if asked. */
static int reply_exec_result(VarlinkCall *call, const ExecResult *res, bool with_output, uint64_t stdout_bytes,
                             uint64_t stderr_bytes) {
        _cleanup_json_ json_object *p = json_object_new_object();
        int r;

        if (!p)
                return varlink_reply_error(call, NULL, -ENOMEM);
        r = json_add(p, "exitStatus", json_object_new_int(res->exit_status));
        if (r >= 0 && with_output)
                r = json_add(p, "stdout", json_object_new_base64(res->out.data ?: "", res->out.size));
        if (r >= 0 && with_output)
                r = json_add(p, "stderr", json_object_new_base64(res->err.data ?: "", res->err.size));
        if (r >= 0)
                r = json_add(p, "info", exec_info_to_json(res, stdout_bytes, stderr_bytes));
        if (r < 0)
                return varlink_reply_error(call, NULL, r);
        return varlink_reply_or_fail(call, p);
}

/* An Exec under way. The core calls back once (on_exec_done()); the call may be gone
 * before that, and then the exec runs on to its end as on D-Bus, its output read and
 * dropped. */
typedef struct ExecStream {
        VarlinkCall *call;            /* NULL once the peer is gone */
        VarlinkRelay *relay;          /* "more": stdout and stderr, streamed */
} ExecStream;

static ExecStream *exec_stream_free(ExecStream *x) {
        if (!x)
                return NULL;
        varlink_relay_free(x->relay);
        varlink_call_release(x->call);
        return mfree(x);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(ExecStream *, exec_stream_free);

static void on_exec_done(Exec *e, const ExecResult *result, const SandboxError *error, void *userdata) {
        _cleanup_(exec_stream_freep) ExecStream *x = userdata;

        if (!x->call)
                return;
        /* What the process wrote before it ended is in the pipes: out before the end. */
        if (x->relay)
                varlink_relay_flush(x->relay);
        if (error)
                (void) varlink_reply_sandbox_error(x->call, error);
        else if (x->relay)
                (void) reply_exec_result(x->call, result, false, varlink_relay_get_bytes(x->relay, 0),
                                         varlink_relay_get_bytes(x->relay, 1));
        else
                (void) reply_exec_result(x->call, result, true, result->out.total, result->err.total);
}

static void on_exec_disconnect(VarlinkCall *call, void *userdata) {
        ExecStream *x = userdata;

        /* As when a D-Bus caller leaves: the process is not killed. Its output is drained
         * and dropped, so that it runs on undisturbed to its end or its Timeout. */
        if (x->relay)
                varlink_relay_discard(x->relay);
        x->call = varlink_call_unref(x->call);
}

/* A pipe for one output stream: the read end non-blocking for us, the write end as the
 * process expects it. */
static int output_pipe(int ret[2]) {
        if (pipe2(ret, O_CLOEXEC) < 0)
                return -errno;
        if (fcntl(ret[0], F_SETFL, O_NONBLOCK) < 0) {
                close_pair(ret);
                return -errno;
        }
        return 0;
}

static int exec_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s, SandboxVarlinkRequest *req,
                           SandboxError *error) {
        _cleanup_(exec_stream_freep) ExecStream *x = NULL;
        ExecConfig *c = &req->args.exec;
        int r;

        x = calloc(1, sizeof(ExecStream));
        if (!x)
                return -ENOMEM;
        x->call = varlink_call_ref(call);
        c->caller = caller->uid;

        if (varlink_call_get_flags(call) & VARLINK_CALL_MORE) {
                static const char * const names[] = { "stdout", "stderr" };
                int out[2], err[2];

                /* The process writes into pipes of ours, as into a D-Bus caller's
                 * StandardOutput and StandardError: nothing is captured by the core. */
                r = output_pipe(out);
                if (r < 0)
                        return r;
                r = output_pipe(err);
                if (r < 0) {
                        close_pair(out);
                        return r;
                }
                c->stdout_fd = out[1];
                c->stderr_fd = err[1];
                r = varlink_relay_new(req->frontend->event, call, (int[]) { out[0], err[0] }, names, 2, NULL, NULL,
                                      &x->relay);
                if (r < 0)
                        return r;
        }

        r = sandbox_exec(s, c, on_exec_done, x, error);
        if (r < 0)
                return r;
        varlink_call_set_disconnect_callback(call, on_exec_disconnect, x);
        TAKE_PTR(x);
        return 0;
}

static int exec_prepare(Sandbox *s, SandboxArgs *a, SandboxError *error) {
        int r;

        r = exec_config_set_argv(&a->exec, TAKE_PTR(a->argv), error);
        if (r >= 0)
                r = options_from_json(a->options, OPTION_SET_EXEC, &a->exec, NULL, 0, error);
        if (r < 0)
                exec_config_refuse(&a->exec, r, error); /* the core answers it, once authorized */
        return 0;
}

static const VarlinkParam exec_params[] = {
        ARG_ID,
        { "argv",    VARLINK_PARAM_STRV,   ARG(argv),    true },
        { "options", VARLINK_PARAM_OBJECT, ARG(options)       },
        {}
};

static int method_exec(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        return sandbox_varlink_method(userdata, call, parameters, exec_params, exec_prepare,
                                      exec_authorized);
}

/* ---- lifecycle ---- */

/* Destroy's, Pause's and Resume's answer: empty, or the error. */
static void on_sandbox_done(Sandbox *s, const SandboxError *error, void *userdata) {
        _cleanup_(varlink_call_unrefp) VarlinkCall *call = userdata;

        if (error)
                (void) varlink_reply_sandbox_error(call, error);
        else
                (void) varlink_call_reply(call, NULL);
}

/* ReleaseSandbox's answer: whether it was kept for reuse (it runs) or destroyed. */
static void on_released(Sandbox *s, const SandboxError *error, void *userdata) {
        _cleanup_(varlink_call_unrefp) VarlinkCall *call = userdata;
        _cleanup_json_ json_object *p = NULL;

        if (error) {
                (void) varlink_reply_sandbox_error(call, error);
                return;
        }
        p = json_object_new_object();
        if (!p || json_add(p, "recycled", json_object_new_boolean(sandbox_get_state(s) == SANDBOX_RUNNING)) < 0)
                (void) varlink_reply_error(call, NULL, -ENOMEM);
        else
                (void) varlink_call_reply(call, p);
}

static int lifecycle_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s,
                                SandboxVarlinkRequest *req, SandboxError *error) {
        const char *method = varlink_call_get_method(call);
        int r;

        varlink_call_ref(call);
        if (streq(method, SANDBOX_VARLINK_INTERFACE ".ReleaseSandbox"))
                r = sandbox_release(s, on_released, call);
        else if (streq(method, SANDBOX_VARLINK_INTERFACE ".Destroy"))
                r = sandbox_destroy(s, on_sandbox_done, call);
        else if (streq(method, SANDBOX_VARLINK_INTERFACE ".Pause"))
                r = sandbox_pause(s, on_sandbox_done, call, error);
        else
                r = sandbox_resume(s, on_sandbox_done, call, error);
        if (r < 0)
                varlink_call_unref(call);
        return r;
}

static const VarlinkParam id_params[] = {
        ARG_ID,
        {}
};

static int method_destroy(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        return sandbox_varlink_method(userdata, call, parameters, id_params, NULL,
                                      lifecycle_authorized);
}

static int method_pause_resume(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        return sandbox_varlink_method(userdata, call, parameters, id_params, NULL,
                                      lifecycle_authorized);
}

static int set_timeout_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s,
                                  SandboxVarlinkRequest *req, SandboxError *error) {
        int r;

        r = sandbox_set_timeout(s, req->args.lifetime_sec, req->args.idle_sec, error);
        if (r < 0)
                return r;
        (void) varlink_call_reply(call, NULL);
        return 0;
}

static const VarlinkParam set_timeout_params[] = {
        ARG_ID,
        { "lifetimeSec", VARLINK_PARAM_UINT64, ARG(lifetime_sec), true },
        { "idleSec",     VARLINK_PARAM_UINT64, ARG(idle_sec),     true },
        {}
};

static int method_set_timeout(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        return sandbox_varlink_method(userdata, call, parameters, set_timeout_params, NULL,
                                      set_timeout_authorized);
}

/* ---- background processes ---- */

static int start_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s, SandboxVarlinkRequest *req,
                            SandboxError *error) {
        _cleanup_json_ json_object *p = json_object_new_object();
        uint64_t id;
        int r;

        if (!p)
                return -ENOMEM;
        req->args.exec.caller = caller->uid;
        r = sandbox_start_process(s, &req->args.exec, &id, error);
        if (r < 0)
                return r;
        r = json_add(p, "process", json_object_new_uint64(id));
        if (r < 0)
                return r;
        (void) varlink_call_reply(call, p);
        return 0;
}

static int method_start(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        return sandbox_varlink_method(userdata, call, parameters, exec_params, exec_prepare,
                                      start_authorized);
}

static json_object *process_to_json(Exec *e) {
        _cleanup_json_ json_object *o = json_object_new_object(), *argv = json_object_new_array();

        if (!o || !argv)
                return NULL;
        for (char * const *a = exec_get_argv(e); a && *a; a++)
                if (json_object_array_add(argv, json_object_new_string(*a)) < 0)
                        return NULL;
        if (json_add(o, "process", json_object_new_uint64(exec_get_id(e))) < 0 ||
            json_add(o, "pid", json_object_new_int(exec_get_pid(e))) < 0 ||
            json_add(o, "argv", TAKE_PTR(argv)) < 0 ||
            json_add(o, "state", json_object_new_string(exec_is_running(e) ? "running" : "exited")) < 0 ||
            json_add(o, "exitStatus",
                     json_object_new_int(exec_is_running(e) ? 0 : exec_get_result(e)->exit_status)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static int list_processes_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s,
                                     SandboxVarlinkRequest *req, SandboxError *error) {
        _cleanup_json_ json_object *p = json_object_new_object(), *l = json_object_new_array();
        int r;

        if (!p || !l)
                return -ENOMEM;
        for (Exec *e = sandbox_next_process(s, NULL); e; e = sandbox_next_process(s, e)) {
                json_object *o = process_to_json(e);
                if (!o || json_object_array_add(l, o) < 0) {
                        json_object_put(o);
                        return -ENOMEM;
                }
        }
        r = json_add(p, "processes", TAKE_PTR(l));
        if (r < 0)
                return r;
        (void) varlink_reply_or_fail(call, p);
        return 0;
}

static void on_wait_done(Exec *e, const ExecResult *result, const SandboxError *error, void *userdata) {
        _cleanup_(varlink_call_unrefp) VarlinkCall *call = userdata;

        if (error)
                (void) varlink_reply_sandbox_error(call, error);
        else
                (void) reply_exec_result(call, result, false, result->out.total, result->err.total);
}

/* Follow: what the process wrote from the offsets on, then as it writes, then how it
 * ended. Past SANDBOX_VARLINK_FOLLOW_HOLD bytes unread by the peer, the process's output
 * waits (the core stops reading it) until the peer has read it all. */
#define SANDBOX_VARLINK_FOLLOW_HOLD (256U * 1024U)

typedef struct FollowStream {
        VarlinkCall *call;
        Exec *exec;                   /* valid while its wait is outstanding */
        ExecFollower *follower;
} FollowStream;

static FollowStream *follow_stream_free(FollowStream *x) {
        if (!x)
                return NULL;
        exec_follower_free(x->follower);
        varlink_call_unref(x->call);
        return mfree(x);
}

static int follow_notify(VarlinkCall *call, const char *name, const void *data, size_t size) {
        _cleanup_json_ json_object *p = json_object_new_object();
        int r;

        if (!p)
                return -ENOMEM;
        r = json_add(p, name, json_object_new_base64(data, size));
        return r < 0 ? r : varlink_call_notify(call, p);
}

static void on_follow_output(Exec *e, bool is_stderr, const void *data, size_t size, void *userdata) {
        FollowStream *x = userdata;

        if (follow_notify(x->call, is_stderr ? "stderr" : "stdout", data, size) < 0) {
                /* The peer is gone (its disconnect callback follows) or memory is: stop. */
                x->follower = exec_follower_free(x->follower);
                return;
        }
        if (varlink_call_get_pending_output(x->call) > SANDBOX_VARLINK_FOLLOW_HOLD)
                exec_follower_hold(x->follower, true);
}

static void on_follow_drained(VarlinkCall *call, void *userdata) {
        FollowStream *x = userdata;

        exec_follower_hold(x->follower, false);
}

static void on_follow_end(Exec *e, const ExecResult *result, const SandboxError *error, void *userdata);

static void on_follow_disconnect(VarlinkCall *call, void *userdata) {
        FollowStream *x = userdata;

        /* Following ends; the process runs on. */
        exec_wait_cancel(x->exec, on_follow_end, x);
        follow_stream_free(x);
}

static void on_follow_end(Exec *e, const ExecResult *result, const SandboxError *error, void *userdata) {
        FollowStream *x = userdata;

        x->follower = exec_follower_free(x->follower);
        if (error)
                (void) varlink_reply_sandbox_error(x->call, error);
        else
                (void) reply_exec_result(x->call, result, false, result->out.total, result->err.total);
        follow_stream_free(x);
}

static int follow(VarlinkCall *call, Exec *e, const SandboxArgs *a, SandboxError *error) {
        FollowStream *x;
        ExecOutput o;
        int r;

        if (!(varlink_call_get_flags(call) & VARLINK_CALL_MORE))
                return varlink_call_error(call, VARLINK_ERROR_EXPECTED_MORE, NULL);
        r = exec_read_output(e, a->stdout_offset, a->stderr_offset, &o, error);
        if (r < 0)
                return r;
        x = calloc(1, sizeof(FollowStream));
        if (!x)
                return -ENOMEM;
        x->call = varlink_call_ref(call);
        x->exec = e;
        /* What is kept from the offsets, then (in this same dispatch) what comes. */
        if (o.out_size > 0)
                r = follow_notify(call, "stdout", o.out, o.out_size);
        if (r >= 0 && o.err_size > 0)
                r = follow_notify(call, "stderr", o.err, o.err_size);
        if (r >= 0 && exec_is_running(e))
                r = exec_follow(e, on_follow_output, x, &x->follower);
        if (r < 0) {
                follow_stream_free(x);
                return r;
        }
        varlink_call_set_disconnect_callback(call, on_follow_disconnect, x);
        varlink_call_set_drained_callback(call, on_follow_drained, x);
        r = exec_wait(e, 0, on_follow_end, x, error);
        if (r < 0)
                follow_stream_free(x);
        return r;
}

/* Signal, ResizeTerminal, Wait, ReadOutput, WriteStdin, CloseStdin, Follow: the process by
 * its id, then the method. */
static int process_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s,
                              SandboxVarlinkRequest *req, SandboxError *error) {
        const char *method = varlink_call_get_method(call) + strlen(SANDBOX_VARLINK_INTERFACE ".");
        const SandboxArgs *a = &req->args;
        _cleanup_json_ json_object *p = NULL;
        Exec *e;
        int r;

        r = sandbox_get_process(s, a->process, &e, error);
        if (r < 0)
                return r;

        if (streq(method, "Follow"))
                return follow(call, e, a, error);
        if (streq(method, "Signal"))
                r = exec_signal(e, a->signal, error);
        else if (streq(method, "WriteStdin"))
                r = exec_write_stdin(e, a->data.data, a->data.size, error);
        else if (streq(method, "CloseStdin"))
                r = exec_close_stdin(e, error);
        else if (streq(method, "ResizeTerminal"))
                r = exec_resize_terminal(e, a->rows, a->columns, error);
        else if (streq(method, "Wait")) {
                r = exec_wait(e, a->timeout_sec, on_wait_done, varlink_call_ref(call), error);
                if (r < 0)
                        varlink_call_unref(call);
                return r;
        } else {
                /* ReadOutput: what it wrote so far, from the offsets on. */
                ExecOutput o;

                r = exec_read_output(e, a->stdout_offset, a->stderr_offset, &o, error);
                if (r < 0)
                        return r;
                p = json_object_new_object();
                if (!p)
                        return -ENOMEM;
                r = json_add(p, "stdout", json_object_new_base64(o.out, o.out_size));
                if (r >= 0)
                        r = json_add(p, "stderr", json_object_new_base64(o.err, o.err_size));
                if (r >= 0)
                        r = json_add(p, "running", json_object_new_boolean(exec_is_running(e)));
                if (r >= 0)
                        r = json_add(p, "stdoutTotal", json_object_new_uint64(o.out_total));
                if (r >= 0)
                        r = json_add(p, "stderrTotal", json_object_new_uint64(o.err_total));
                if (r < 0)
                        return r;
                (void) varlink_reply_or_fail(call, p);
                return 0;
        }
        if (r < 0)
                return r;
        (void) varlink_call_reply(call, NULL);
        return 0;
}

static const VarlinkParam process_params[] = {
        ARG_ID,
        { "process", VARLINK_PARAM_UINT64, ARG(process), true },
        {}
};

static const VarlinkParam read_output_params[] = {
        ARG_ID,
        { "process",      VARLINK_PARAM_UINT64, ARG(process),       true  },
        { "stdoutOffset", VARLINK_PARAM_UINT64, ARG(stdout_offset), false },
        { "stderrOffset", VARLINK_PARAM_UINT64, ARG(stderr_offset), false },
        {}
};

static const VarlinkParam signal_params[] = {
        ARG_ID,
        { "process", VARLINK_PARAM_UINT64, ARG(process), true },
        { "signal",  VARLINK_PARAM_INT32,  ARG(signal),  true },
        {}
};

static const VarlinkParam resize_params[] = {
        ARG_ID,
        { "process", VARLINK_PARAM_UINT64, ARG(process), true },
        { "rows",    VARLINK_PARAM_UINT32, ARG(rows),    true },
        { "columns", VARLINK_PARAM_UINT32, ARG(columns), true },
        {}
};

static const VarlinkParam write_stdin_params[] = {
        ARG_ID,
        { "process", VARLINK_PARAM_UINT64, ARG(process), true },
        { "data",    VARLINK_PARAM_BYTES,  ARG(data),    true },
        {}
};

static const VarlinkParam wait_params[] = {
        ARG_ID,
        { "process",    VARLINK_PARAM_UINT64, ARG(process),     true },
        { "timeoutSec", VARLINK_PARAM_UINT64, ARG(timeout_sec), true },
        {}
};

static int method_list_processes(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags,
                                 void *userdata) {
        return sandbox_varlink_method(userdata, call, parameters, id_params, NULL,
                                      list_processes_authorized);
}

static int method_process(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        const char *method = varlink_call_get_method(call) + strlen(SANDBOX_VARLINK_INTERFACE ".");
        const VarlinkParam *table = streq(method, "Signal") ? signal_params :
                                    streq(method, "ResizeTerminal") ? resize_params :
                                    streq(method, "Wait") ? wait_params :
                                    streq(method, "WriteStdin") ? write_stdin_params :
                                    streq(method, "ReadOutput") || streq(method, "Follow") ? read_output_params :
                                    process_params;

        return sandbox_varlink_method(userdata, call, parameters, table, NULL, process_authorized);
}

int sandbox_varlink_bind(VarlinkFrontend *f) {
        static const VarlinkMethodEntry methods[] = {
                { "Exec",           method_exec           },
                { "Destroy",        method_destroy        },
                { "ReleaseSandbox", method_destroy        },
                { "Pause",          method_pause_resume   },
                { "Resume",         method_pause_resume   },
                { "SetTimeout",     method_set_timeout    },
                { "Start",          method_start          },
                { "ListProcesses",  method_list_processes },
                { "Signal",         method_process        },
                { "ResizeTerminal", method_process        },
                { "Wait",           method_process        },
                { "ReadOutput",     method_process        },
                { "WriteStdin",     method_process        },
                { "CloseStdin",     method_process        },
                { "Follow",         method_process        },
        };

        return varlink_bind_methods(f->server, SANDBOX_VARLINK_INTERFACE, methods, ELEMENTSOF(methods), f);
}
