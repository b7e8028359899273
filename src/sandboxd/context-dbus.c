/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Code contexts on io.sandboxd.Sandbox1.Sandbox (context.h): CreateContext, RunCode (its
 * events gathered into the one reply: D-Bus has no streamed replies), InterruptContext,
 * RestartContext, ListContexts, RemoveContext. Translation only. */

#include "bus-util.h"
#include "context.h"
#include "json-util.h"
#include "sandbox-dbus.h"
#include "strv.h"

/* A context as a{sv}. */
static int append_context(sd_bus_message *m, const Context *c) {
        const char *lost = context_get_lost_reason(c);

        return sd_bus_message_append(m, "a{sv}", 10,
                                     "Id", "s", context_get_id(c),
                                     "Language", "s", context_language_to_string(context_get_language(c)),
                                     "State", "s", context_state_to_string(context_get_state(c)),
                                     "ExecutionCount", "t", context_get_execution_count(c),
                                     "CreatedAt", "t", context_get_created_at(c),
                                     "WorkingDirectory", "s", context_get_working_directory(c),
                                     "Version", "s", context_get_version(c),
                                     "Default", "b", context_is_default(c),
                                     "Process", "t", context_get_process(c),
                                     "LostReason", "s", lost ?: "");
}

static void on_context_ready(Context *c, const SandboxError *error, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = userdata, *reply = NULL;
        int r;

        if (error) {
                bus_reply_error(call, error);
                return;
        }
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = append_context(reply, c);
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        if (r < 0)
                (void) sd_bus_reply_method_errnof(call, r, "Failed to answer: %m");
}

static const char *json_string(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string) ?
                json_object_get_string(v) : NULL;
}

/* An event as a{sv}: Type, and Text (stdout, stderr); Data a{ss} (MIME type: text; a JSON
 * type's value as JSON text) and IsMainResult (result); Name, Value, Traceback (error). */
static int append_event(sd_bus_message *m, json_object *e) {
        const char *type = json_string(e, "type") ?: "";
        json_object *v;
        int r;

        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0)
                r = sd_bus_message_append(m, "{sv}", "Type", "s", type);
        if (r >= 0 && json_string(e, "text"))
                r = sd_bus_message_append(m, "{sv}", "Text", "s", json_string(e, "text"));
        if (r >= 0 && json_object_object_get_ex(e, "data", &v)) {
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "Data");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'v', "a{ss}");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'a', "{ss}");
                json_object_object_foreach(v, mime, value) {
                        if (r < 0)
                                break;
                        r = sd_bus_message_append(m, "{ss}", mime,
                                                  json_object_is_type(value, json_type_string) ?
                                                  json_object_get_string(value) :
                                                  json_object_to_json_string_ext(value, JSON_C_TO_STRING_PLAIN));
                }
                for (unsigned i = 0; r >= 0 && i < 3; i++)
                        r = sd_bus_message_close_container(m);
        }
        if (r >= 0 && json_object_object_get_ex(e, "isMainResult", &v))
                r = sd_bus_message_append(m, "{sv}", "IsMainResult", "b", json_object_get_boolean(v));
        if (r >= 0 && json_string(e, "name"))
                r = sd_bus_message_append(m, "{sv}", "Name", "s", json_string(e, "name"));
        if (r >= 0 && json_string(e, "value"))
                r = sd_bus_message_append(m, "{sv}", "Value", "s", json_string(e, "value"));
        if (r >= 0 && json_object_object_get_ex(e, "traceback", &v)) {
                r = sd_bus_message_open_container(m, 'e', "sv");
                if (r >= 0)
                        r = sd_bus_message_append(m, "s", "Traceback");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'v', "as");
                if (r >= 0)
                        r = sd_bus_message_open_container(m, 'a', "s");
                for (size_t i = 0; r >= 0 && i < json_object_array_length(v); i++)
                        r = sd_bus_message_append(m, "s", json_object_get_string(json_object_array_get_idx(v, i)));
                for (unsigned i = 0; r >= 0 && i < 3; i++)
                        r = sd_bus_message_close_container(m);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

/* A RunCode under way: its events, gathered. */
typedef struct RunCall {
        sd_bus_message *call;
        json_object *events;
        char *context_id;
} RunCall;

static void run_call_free(RunCall *x) {
        sd_bus_message_unref(x->call);
        json_object_put(x->events);
        free(x->context_id);
        free(x);
}

static void on_run_event(ContextRun *run, json_object *event, void *userdata) {
        RunCall *x = userdata;
        (void) json_object_array_add(x->events, json_object_get(event));
}

static void on_run_done(ContextRun *run, const ContextRunResult *res, const SandboxError *error, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        RunCall *x = userdata;
        int r;

        if (error) {
                bus_reply_error(x->call, error);
                run_call_free(x);
                return;
        }
        r = sd_bus_message_new_method_return(x->call, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (size_t i = 0; r >= 0 && i < json_object_array_length(x->events); i++)
                r = append_event(reply, json_object_array_get_idx(x->events, i));
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "a{sv}", 8,
                                          "Context", "s", x->context_id,
                                          "ExecutionCount", "t", res->execution_count,
                                          "Status", "s", res->status,
                                          "Truncated", "b", res->truncated,
                                          "Interrupted", "b", res->interrupted,
                                          "TimedOut", "b", res->timed_out,
                                          "OutputBytes", "t", res->output_bytes,
                                          "DurationUSec", "t", res->duration_usec);
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        if (r < 0)
                (void) sd_bus_reply_method_errnof(x->call, r, "Failed to answer: %m");
        run_call_free(x);
}

static int run_code(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s, SandboxError *error) {
        _cleanup_(exec_config_done) ExecConfig options;
        const char *id, *code;
        RunCall *x;
        Context *c;
        int r;

        exec_config_init(&options);
        r = sd_bus_message_read(call, "ss", &id, &code);
        if (r < 0)
                return r;
        r = bus_read_options(call, OPTION_SET_EXEC, &options, error);
        if (r < 0)
                return r;
        /* "" or a language's name ("python", "javascript"; never a context's id): the
         * sandbox's default context of that language. */
        if (isempty(id) || context_language_from_string(id) >= 0)
                r = sandbox_default_context(s, id, caller->uid, &c, error);
        else
                r = sandbox_get_context(s, id, &c, error);
        if (r < 0)
                return r;

        x = calloc(1, sizeof(RunCall));
        if (!x)
                return -ENOMEM;
        x->events = json_object_new_array();
        x->context_id = strdup(context_get_id(c));
        x->call = sd_bus_message_ref(call);
        if (!x->events || !x->context_id) {
                run_call_free(x);
                return -ENOMEM;
        }
        /* The caller cannot leave a D-Bus call early: the cell runs to its end, answered
         * (or dropped by the bus) then. */
        r = context_run(c, code, &options, on_run_event, on_run_done, x, NULL, error);
        if (r < 0)
                run_call_free(x);
        return r;
}

static int context_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s,
                              SandboxRequest *req, SandboxError *error) {
        const char *member = sd_bus_message_get_member(call), *arg;
        Context *c;
        int r;

        if (streq(member, "ListContexts")) {
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
                r = sd_bus_message_new_method_return(call, &reply);
                if (r >= 0)
                        r = sd_bus_message_open_container(reply, 'a', "a{sv}");
                for (c = sandbox_next_context(s, NULL); r >= 0 && c; c = sandbox_next_context(s, c))
                        r = append_context(reply, c);
                if (r >= 0)
                        r = sd_bus_message_close_container(reply);
                return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
        }
        if (streq(member, "RunCode"))
                return run_code(call, caller, s, error);
        if (streq(member, "CreateContext")) {
                _cleanup_(exec_config_done) ExecConfig options;
                exec_config_init(&options);
                r = sd_bus_message_read(call, "s", &arg);
                if (r >= 0)
                        r = bus_read_options(call, OPTION_SET_EXEC, &options, error);
                if (r < 0)
                        return r;
                r = sandbox_create_context(s, arg, &options, caller->uid, on_context_ready, sd_bus_message_ref(call),
                                           NULL, error);
                if (r < 0)
                        sd_bus_message_unref(call);
                return r;
        }

        r = sd_bus_message_read(call, "s", &arg);
        if (r < 0)
                return r;
        r = sandbox_get_context(s, arg, &c, error);
        if (r < 0)
                return r;
        if (streq(member, "RestartContext")) {
                r = context_restart(c, on_context_ready, sd_bus_message_ref(call), error);
                if (r < 0)
                        sd_bus_message_unref(call);
                return r;
        }
        if (streq(member, "InterruptContext")) {
                r = context_interrupt(c, error);
                if (r < 0)
                        return r;
        } else
                context_remove(c);
        return sd_bus_reply_method_return(call, NULL);
}

int method_sandbox_context(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, context_authorized, NULL);
}
