/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Code contexts on varlink (context.h): CreateContext, RunCode (its events streamed with
 * "more", or all in one reply), InterruptContext, RestartContext, ListContexts,
 * RemoveContext. Translation only. */

#include <stddef.h>

#include "context.h"
#include "json-util.h"
#include "sandbox-varlink.h"
#include "strv.h"

#define ARG(field) offsetof(SandboxArgs, field)
#define ARG_ID { "id", VARLINK_PARAM_STRING, ARG(id), true }

static json_object *context_to_json(const Context *c) {
        _cleanup_json_ json_object *o = json_object_new_object();
        const char *lost = context_get_lost_reason(c);

        if (!o ||
            json_add(o, "id", json_object_new_string(context_get_id(c))) < 0 ||
            json_add(o, "language", json_object_new_string(context_language_to_string(context_get_language(c)))) < 0 ||
            json_add(o, "state", json_object_new_string(context_state_to_string(context_get_state(c)))) < 0 ||
            json_add(o, "executionCount", json_object_new_uint64(context_get_execution_count(c))) < 0 ||
            json_add(o, "createdAt", json_object_new_uint64(context_get_created_at(c))) < 0 ||
            json_add(o, "workingDirectory", json_object_new_string(context_get_working_directory(c))) < 0 ||
            json_add(o, "version", json_object_new_string(context_get_version(c))) < 0 ||
            json_add(o, "default", json_object_new_boolean(context_is_default(c))) < 0 ||
            json_add(o, "process", json_object_new_uint64(context_get_process(c))) < 0 ||
            (lost && json_add(o, "lostReason", json_object_new_string(lost)) < 0))
                return NULL;
        return TAKE_PTR(o);
}

static int reply_context(VarlinkCall *call, const Context *c) {
        _cleanup_json_ json_object *p = json_object_new_object();

        if (!p || json_add(p, "context", context_to_json(c)) < 0)
                return varlink_reply_error(call, NULL, -ENOMEM);
        return varlink_reply_or_fail(call, p);
}

/* CreateContext's and RestartContext's answer, once the kernel is ready. The context may
 * be gone by then (removed): its id is asked for again. */
typedef struct ReadyCall {
        VarlinkCall *call;
} ReadyCall;

static void on_ready_disconnect(VarlinkCall *call, void *userdata) {
        ReadyCall *rc = userdata;
        rc->call = varlink_call_unref(rc->call);
}

static void on_context_ready(Context *c, const SandboxError *error, void *userdata) {
        ReadyCall *rc = userdata;

        if (rc->call) {
                varlink_call_set_disconnect_callback(rc->call, NULL, NULL);
                if (error)
                        (void) varlink_reply_sandbox_error(rc->call, error);
                else
                        (void) reply_context(rc->call, c);
                varlink_call_unref(rc->call);
        }
        free(rc);
}

static int ready_call_new(VarlinkCall *call, ReadyCall **ret) {
        ReadyCall *rc = calloc(1, sizeof(ReadyCall));

        if (!rc)
                return -ENOMEM;
        rc->call = varlink_call_ref(call);
        varlink_call_set_disconnect_callback(call, on_ready_disconnect, rc);
        *ret = rc;
        return 0;
}

static void ready_call_cancel(ReadyCall *rc) {
        varlink_call_set_disconnect_callback(rc->call, NULL, NULL);
        varlink_call_unref(rc->call);
        free(rc);
}

static int create_context_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s,
                                     SandboxVarlinkRequest *req, SandboxError *error) {
        ReadyCall *rc;
        int r;

        r = ready_call_new(call, &rc);
        if (r < 0)
                return r;
        r = sandbox_create_context(s, req->args.language, &req->args.exec, caller->uid, on_context_ready, rc, NULL,
                                   error);
        if (r < 0)
                ready_call_cancel(rc);
        return r;
}

static int context_options_prepare(Sandbox *s, SandboxArgs *a, SandboxError *error) {
        return options_from_json(a->options, OPTION_SET_EXEC, &a->exec, NULL, 0, error);
}

static const VarlinkParam create_context_params[] = {
        ARG_ID,
        { "language", VARLINK_PARAM_STRING, ARG(language) },
        { "options",  VARLINK_PARAM_OBJECT, ARG(options)  },
        {}
};

static int method_create_context(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        return sandbox_varlink_method(userdata, call, parameters, create_context_params, context_options_prepare,
                                      create_context_authorized);
}

/* ---- RunCode ---- */

/* A cell under way: with "more" each event is a reply of its own; without, they are
 * gathered into the one reply. The caller may leave first: the cell runs on. */
typedef struct RunStream {
        VarlinkCall *call;
        ContextRun *run;
        json_object *events;      /* without "more" */
        char *context_id;
} RunStream;

static RunStream *run_stream_free(RunStream *x) {
        if (!x)
                return NULL;
        varlink_call_release(x->call);
        json_object_put(x->events);
        free(x->context_id);
        return mfree(x);
}

static json_object *context_result_to_json(const ContextRunResult *res, const char *context_id) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o ||
            json_add(o, "context", json_object_new_string(context_id)) < 0 ||
            json_add(o, "executionCount", json_object_new_uint64(res->execution_count)) < 0 ||
            json_add(o, "status", json_object_new_string(res->status)) < 0 ||
            (res->error && json_add(o, "error", json_object_get(res->error)) < 0) ||
            json_add(o, "truncated", json_object_new_boolean(res->truncated)) < 0 ||
            json_add(o, "interrupted", json_object_new_boolean(res->interrupted)) < 0 ||
            json_add(o, "timedOut", json_object_new_boolean(res->timed_out)) < 0 ||
            json_add(o, "outputBytes", json_object_new_uint64(res->output_bytes)) < 0 ||
            json_add(o, "durationUSec", json_object_new_uint64(res->duration_usec)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static void on_run_event(ContextRun *run, json_object *event, void *userdata) {
        RunStream *x = userdata;
        _cleanup_json_ json_object *p = NULL;

        if (!x->call)
                return;
        if (x->events) {
                (void) json_object_array_add(x->events, json_object_get(event));
                return;
        }
        p = json_object_new_object();
        if (p && json_add(p, "event", json_object_get(event)) >= 0)
                (void) varlink_call_notify(x->call, p);
}

static void on_run_done(ContextRun *run, const ContextRunResult *result, const SandboxError *error, void *userdata) {
        RunStream *x = userdata;
        _cleanup_json_ json_object *p = NULL;

        if (x->call) {
                if (error)
                        (void) varlink_reply_sandbox_error(x->call, error);
                else {
                        p = json_object_new_object();
                        if (!p || json_add(p, "result", context_result_to_json(result, x->context_id)) < 0 ||
                            (x->events && json_add(p, "events", json_object_get(x->events)) < 0))
                                (void) varlink_reply_error(x->call, NULL, -ENOMEM);
                        else
                                (void) varlink_reply_or_fail(x->call, p);
                }
        }
        run_stream_free(x);
}

static void on_run_disconnect(VarlinkCall *call, void *userdata) {
        RunStream *x = userdata;

        /* The cell runs on, unheard (as an Exec whose caller left). */
        context_run_detach(x->run);
        x->call = varlink_call_unref(x->call);
        run_stream_free(x);
}

static int run_code_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s,
                               SandboxVarlinkRequest *req, SandboxError *error) {
        RunStream *x;
        Context *c;
        int r;

        if (!isempty(req->args.context))
                r = sandbox_get_context(s, req->args.context, &c, error);
        else
                r = sandbox_default_context(s, req->args.language, caller->uid, &c, error);
        if (r < 0)
                return r;

        x = calloc(1, sizeof(RunStream));
        if (!x)
                return -ENOMEM;
        x->context_id = strdup(context_get_id(c));
        if (!(varlink_call_get_flags(call) & VARLINK_CALL_MORE))
                x->events = json_object_new_array();
        if (!x->context_id || (!(varlink_call_get_flags(call) & VARLINK_CALL_MORE) && !x->events)) {
                run_stream_free(x);
                return -ENOMEM;
        }
        r = context_run(c, req->args.code, &req->args.exec, on_run_event, on_run_done, x, &x->run, error);
        if (r < 0) {
                run_stream_free(x);
                return r;
        }
        x->call = varlink_call_ref(call);
        varlink_call_set_disconnect_callback(call, on_run_disconnect, x);
        return 0;
}

static const VarlinkParam run_code_params[] = {
        ARG_ID,
        { "code",     VARLINK_PARAM_STRING, ARG(code),     true },
        { "context",  VARLINK_PARAM_STRING, ARG(context)        },
        { "language", VARLINK_PARAM_STRING, ARG(language)       },
        { "options",  VARLINK_PARAM_OBJECT, ARG(options)        },
        {}
};

static int method_run_code(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        return sandbox_varlink_method(userdata, call, parameters, run_code_params, context_options_prepare,
                                      run_code_authorized);
}

/* ---- the others ---- */

static int context_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s,
                              SandboxVarlinkRequest *req, SandboxError *error) {
        const char *method = varlink_call_get_method(call) + strlen(SANDBOX_VARLINK_INTERFACE ".");
        Context *c;
        int r;

        if (streq(method, "ListContexts")) {
                _cleanup_json_ json_object *p = json_object_new_object(), *l = json_object_new_array();
                if (!p || !l)
                        return -ENOMEM;
                for (c = sandbox_next_context(s, NULL); c; c = sandbox_next_context(s, c))
                        if (json_object_array_add(l, context_to_json(c)) < 0)
                                return -ENOMEM;
                r = json_add(p, "contexts", TAKE_PTR(l));
                if (r < 0)
                        return r;
                (void) varlink_reply_or_fail(call, p);
                return 0;
        }

        r = sandbox_get_context(s, req->args.context, &c, error);
        if (r < 0)
                return r;
        if (streq(method, "RestartContext")) {
                ReadyCall *rc;
                r = ready_call_new(call, &rc);
                if (r < 0)
                        return r;
                r = context_restart(c, on_context_ready, rc, error);
                if (r < 0)
                        ready_call_cancel(rc);
                return r;
        }
        if (streq(method, "InterruptContext"))
                r = context_interrupt(c, error);
        else
                context_remove(c);
        if (r < 0)
                return r;
        (void) varlink_call_reply(call, NULL);
        return 0;
}

static const VarlinkParam context_params[] = {
        ARG_ID,
        { "context", VARLINK_PARAM_STRING, ARG(context), true },
        {}
};

static const VarlinkParam list_contexts_params[] = {
        ARG_ID,
        {}
};

static int method_context(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        const char *method = varlink_call_get_method(call) + strlen(SANDBOX_VARLINK_INTERFACE ".");

        return sandbox_varlink_method(userdata, call, parameters,
                                      streq(method, "ListContexts") ? list_contexts_params : context_params, NULL,
                                      context_authorized);
}

int context_varlink_bind(VarlinkFrontend *f) {
        static const VarlinkMethodEntry methods[] = {
                { "CreateContext",    method_create_context },
                { "RunCode",          method_run_code       },
                { "InterruptContext", method_context        },
                { "RestartContext",   method_context        },
                { "ListContexts",     method_context        },
                { "RemoveContext",    method_context        },
        };

        return varlink_bind_methods(f->server, SANDBOX_VARLINK_INTERFACE, methods, ELEMENTSOF(methods), f);
}
