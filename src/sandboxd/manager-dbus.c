/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "bus-util.h"
#include "log.h"
#include "sandbox-dbus.h"
#include "sandbox-errors.h"
#include "recorder-dbus.h"
#include "strv.h"

static int sandbox_config_setter(void *config, const char *name, const OptionValue *v, sd_bus_error *error) {
        return sandbox_config_set(config, name, v, error);
}

static void on_created(Sandbox *s, const sd_bus_error *error, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = userdata;
        int r;

        if (error) {
                bus_reply_error(call, error);
                return;
        }
        r = sd_bus_reply_method_return(call, "so", sandbox_get_id(s), sandbox_get_object_path(s));
        if (r < 0)
                log_sandbox(s, LOG_WARNING, r, "Failed to reply to CreateSandbox: %m");
}

typedef struct CreateRequest {
        Manager *manager;
        char *template;
        SandboxConfig config;
} CreateRequest;

static void create_request_free(void *userdata) {
        CreateRequest *c = userdata;
        free(c->template);
        free(c);
}

static int create_action(uid_t uid, void *userdata, const char **ret_action, sd_bus_error *error) {
        *ret_action = sandbox_access_action(SANDBOX_OP_CREATE, uid, 0);
        return 0;
}

static int create_authorized(sd_bus_message *call, const BusCaller *caller, void *userdata,
                             sd_bus_error *error) {
        CreateRequest *c = userdata;
        int r;

        r = manager_create_sandbox(c->manager, c->template, &c->config, caller->uid, on_created,
                                   sd_bus_message_ref(call), error);
        if (r < 0)
                sd_bus_message_unref(call);
        return r;
}

static int method_create_sandbox(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_free_ CreateRequest *c = NULL;
        const char *template;
        int r;

        c = calloc(1, sizeof(CreateRequest));
        if (!c)
                return -ENOMEM;
        c->manager = userdata;

        r = sd_bus_message_read(m, "s", &template);
        if (r < 0)
                return r;
        r = bus_read_options(m, sandbox_config_setter, &c->config, error);
        if (r < 0)
                return r;
        c->template = strdup(template);
        if (!c->template)
                return -ENOMEM;

        return bus_authorize_then(m, create_action, 0, create_authorized, TAKE_PTR(c), create_request_free);
}

static int get_sandbox_authorized(sd_bus_message *call, const BusCaller *caller, void *userdata,
                                  sd_bus_error *error) {
        SandboxRequest *req = userdata;
        Sandbox *s = sandbox_request_find(req, error);

        if (!s)
                return -ENOENT;
        return sd_bus_reply_method_return(call, "o", sandbox_get_object_path(s));
}

static int method_get_sandbox(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Manager *manager = userdata;
        const char *id;
        Sandbox *s;
        int r;

        r = sd_bus_message_read(m, "s", &id);
        if (r < 0)
                return r;
        s = manager_get_sandbox(manager, id);
        if (!s)
                return sandbox_error_setf(error, SANDBOX_ERROR_NO_SUCH_SANDBOX, "No sandbox '%.64s'.", id);
        return sandbox_authorize_call(m, s, SANDBOX_OP_INSPECT, get_sandbox_authorized, NULL);
}

/* Without "manage" a caller simply sees its own sandboxes. */
static int list_sandboxes_authorized(sd_bus_message *call, const BusCaller *caller, void *userdata,
                                     sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *manager = userdata;
        int r;

        r = sd_bus_message_new_method_return(call, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(ssusot)");
        for (Sandbox *s = manager_next_sandbox(manager, NULL); r >= 0 && s; s = manager_next_sandbox(manager, s)) {
                if (!caller->granted && sandbox_get_owner(s) != caller->uid)
                        continue;
                r = sd_bus_message_append(reply, "(ssusot)", sandbox_get_id(s), sandbox_get_template(s),
                                          (uint32_t) sandbox_get_owner(s),
                                          sandbox_state_to_string(sandbox_get_state(s)),
                                          sandbox_get_object_path(s), sandbox_get_created_at(s));
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_list_sandboxes(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return bus_authorize_then(m, sandbox_list_action, BUS_AUTHORIZE_OPTIONAL, list_sandboxes_authorized,
                                  userdata, NULL);
}

static int method_list_templates(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const TemplateSet *set = manager_get_templates(userdata);
        int r;

        r = sd_bus_message_new_method_return(m, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(sss)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < set->n; i++) {
                const Template *t = set->templates[i];
                r = sd_bus_message_append(reply, "(sss)", t->name, payload_kind_to_string(t->payload),
                                          strempty(t->description));
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("CreateSandbox",
                                SD_BUS_ARGS("s", template, "a{sv}", options),
                                SD_BUS_RESULT("s", id, "o", path),
                                method_create_sandbox, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetSandbox",
                                SD_BUS_ARGS("s", id),
                                SD_BUS_RESULT("o", path),
                                method_get_sandbox, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListSandboxes",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(ssusot)", sandboxes),
                                method_list_sandboxes, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListTemplates",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(sss)", templates),
                                method_list_templates, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListExecutions",
                                SD_BUS_ARGS("a{sv}", filter),
                                SD_BUS_RESULT("a" RECORDER_EXECUTION_SIGNATURE, executions),
                                method_list_executions, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListPools",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(suuuu)", pools),
                                method_list_pools, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("SandboxNew", SD_BUS_ARGS("s", id, "o", path), 0),
        SD_BUS_SIGNAL_WITH_ARGS("SandboxRemoved", SD_BUS_ARGS("s", id, "o", path), 0),
        SD_BUS_VTABLE_END
};

int manager_dbus_register(sd_bus *bus, Manager *m) {
        return sd_bus_add_object_vtable(bus, NULL, SANDBOX_MANAGER_PATH, SANDBOX_MANAGER_INTERFACE,
                                        manager_vtable, m);
}

int manager_dbus_emit_sandbox(sd_bus *bus, Sandbox *s, bool added) {
        return sd_bus_emit_signal(bus, SANDBOX_MANAGER_PATH, SANDBOX_MANAGER_INTERFACE,
                                  added ? "SandboxNew" : "SandboxRemoved", "so",
                                  sandbox_get_id(s), sandbox_get_object_path(s));
}
