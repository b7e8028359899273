/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "bus-caller.h"
#include "bus-util.h"
#include "log.h"
#include "recorder-dbus.h"
#include "sandbox-dbus.h"
#include "sandbox-secrets.h"
#include "strv.h"

void bus_reply_sandbox_created(Sandbox *s, const SandboxError *error, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = userdata;
        int r;

        if (error) {
                bus_reply_error(call, error);
                return;
        }
        if (sd_bus_message_is_method_call(call, NULL, "AcquireSandbox"))
                r = sd_bus_reply_method_return(call, "sos", sandbox_get_id(s), BUS_SANDBOX_PATH(s),
                                               sandbox_get_source(s));
        else
                r = sd_bus_reply_method_return(call, "so", sandbox_get_id(s), BUS_SANDBOX_PATH(s));
        if (r < 0)
                log_sandbox(s, LOG_WARNING, r, "Failed to reply to %s: %m", sd_bus_message_get_member(call));
}

typedef struct CreateRequest {
        Manager *manager;
        char *template;
        SandboxConfig config;
} CreateRequest;

static void create_request_free(void *userdata) {
        CreateRequest *c = userdata;
        free(c->template);
        sandbox_config_done(&c->config);
        free(c);
}

static int create_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                         const char **ret_tenant, SandboxError *error) {
        CreateRequest *c = userdata;
        int r;

        /* Whom the sandbox is for decides what to ask (the core's rule, access.h). */
        r = sandbox_access_create(caller, &c->config, error);
        if (r < 0)
                return r;
        *ret_tenant = c->config.tenant;
        return 0;
}

static int create_authorized(sd_bus_message *call, const SandboxCaller *caller, void *userdata,
                             SandboxError *error) {
        CreateRequest *c = userdata;
        int r;

        r = manager_create_sandbox(c->manager, caller, c->template, &c->config, bus_reply_sandbox_created,
                                   sd_bus_message_ref(call), error);
        if (r < 0)
                sd_bus_message_unref(call);
        return r;
}

static int method_create_sandbox(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        _cleanup_free_ CreateRequest *c = NULL;
        BusFrontend *f = userdata;
        const char *template;
        int r;

        c = calloc(1, sizeof(CreateRequest));
        if (!c)
                return -ENOMEM;
        c->manager = f->manager;

        r = sd_bus_message_read(m, "s", &template);
        if (r < 0)
                return r;
        r = bus_read_options(m, OPTION_SET_SANDBOX, &c->config, &e);
        if (r < 0)
                return bus_error_return(error, &e, r);
        c->template = strdup(template);
        if (!c->template)
                return -ENOMEM;

        return bus_authorize_then(m, create_access, 0, create_authorized, TAKE_PTR(c), create_request_free);
}

static int quota_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner, const char **ret_tenant,
                        SandboxError *error) {
        *ret_owner = caller->uid;
        return 0;
}

static int get_quota_authorized(sd_bus_message *call, const SandboxCaller *caller, void *userdata,
                                SandboxError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        BusFrontend *f = userdata;
        QuotaReport q;
        int r;

        r = manager_get_quota(f->manager, caller, &q);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_append(reply, "s", q.scope);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(stt)");
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(q.entries); i++)
                r = sd_bus_message_append(reply, "(stt)", quota_item_to_string(q.entries[i].item),
                                          q.entries[i].limit, q.entries[i].use);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_get_quota(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return bus_authorize_then(m, quota_access, 0, get_quota_authorized, userdata, NULL);
}

static int get_sandbox_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s,
                                  SandboxRequest *req, SandboxError *error) {
        return sd_bus_reply_method_return(call, "o", BUS_SANDBOX_PATH(s));
}

/* GetSandbox and ReleaseSandbox, by id or by name: which one the caller means is known
 * only once the caller is. */
static int method_get_sandbox(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        bool release = sd_bus_message_is_method_call(m, NULL, "ReleaseSandbox");
        BusFrontend *f = userdata;
        const char *id;
        int r;

        r = sd_bus_message_read(m, "s", &id);
        if (r < 0)
                return r;
        return sandbox_authorize_call_by_name(m, f->manager, id,
                                              release ? sandbox_release_authorized : get_sandbox_authorized);
}

/* ListSandboxes and ListSandboxesFiltered, while they are authorized. */
typedef struct ListRequest {
        BusFrontend *frontend;
        SandboxListQuery query;
        bool filtered;  /* ListSandboxesFiltered: the total follows the list */
} ListRequest;

static int list_append_sandbox(Sandbox *s, void *userdata) {
        return sd_bus_message_append(userdata, "(ssusot)", sandbox_get_id(s), sandbox_get_template(s),
                                     (uint32_t) sandbox_get_owner(s), sandbox_state_to_string(sandbox_get_state(s)),
                                     BUS_SANDBOX_PATH(s), sandbox_get_created_at(s));
}

/* The core decides which sandboxes the caller sees (access.h) and which the filter picks. */
static int list_sandboxes_authorized(sd_bus_message *call, const SandboxCaller *caller, void *userdata,
                                     SandboxError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        ListRequest *l = userdata;
        uint64_t total = 0;
        int r;

        r = sd_bus_message_new_method_return(call, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(ssusot)");
        if (r >= 0)
                r = manager_list_sandboxes(l->frontend->manager, caller, &l->query, list_append_sandbox, reply, &total);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0 && l->filtered)
                r = sd_bus_message_append(reply, "t", total);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static void list_request_free(void *userdata) {
        ListRequest *l = userdata;

        if (!l)
                return;
        sandbox_list_query_done(&l->query);
        free(l);
}

static void list_request_freep(ListRequest **l) {
        list_request_free(*l);
}

static int method_list_sandboxes(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(list_request_freep) ListRequest *l = NULL;
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        int r;

        l = calloc(1, sizeof(ListRequest));
        if (!l)
                return -ENOMEM;
        *l = (ListRequest) { .frontend = userdata, .query = SANDBOX_LIST_QUERY_INIT };
        if (streq(sd_bus_message_get_member(m), "ListSandboxesFiltered")) {
                l->filtered = true;
                r = bus_read_options(m, OPTION_SET_SANDBOX_LIST, &l->query, &e);
                if (r < 0)
                        return bus_error_return(error, &e, r);
        }
        return bus_authorize_then(m, bus_list_access, SANDBOX_AUTHORIZE_OPTIONAL, list_sandboxes_authorized,
                                  TAKE_PTR(l), list_request_free);
}

static int method_list_templates(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        BusFrontend *f = userdata;
        const TemplateSet *set = manager_get_templates(f->manager);
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

/* CreateTemplate and RemoveTemplate, while they are authorized. */
typedef struct TemplateRequest {
        Manager *manager;
        char *name;
        char *json;             /* CreateTemplate's; NULL: RemoveTemplate */
} TemplateRequest;

static void template_request_free(void *userdata) {
        TemplateRequest *t = userdata;

        free(t->name);
        free(t->json);
        free(t);
}

static int template_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                           const char **ret_tenant, SandboxError *error) {
        return 0;
}

static int template_authorized(sd_bus_message *call, const SandboxCaller *caller, void *userdata,
                               SandboxError *error) {
        TemplateRequest *t = userdata;
        int r;

        r = t->json ? manager_create_template(t->manager, t->name, t->json, error) :
                      manager_remove_template(t->manager, t->name, error);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, NULL);
}

static int method_template(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        bool create = sd_bus_message_is_method_call(m, NULL, "CreateTemplate");
        BusFrontend *f = userdata;
        const char *name, *json = NULL;
        TemplateRequest *t;
        int r;

        r = create ? sd_bus_message_read(m, "ss", &name, &json) : sd_bus_message_read(m, "s", &name);
        if (r < 0)
                return r;
        t = calloc(1, sizeof(TemplateRequest));
        if (!t)
                return -ENOMEM;
        *t = (TemplateRequest) { .manager = f->manager, .name = strdup(name), .json = json ? strdup(json) : NULL };
        if (!t->name || (json && !t->json)) {
                template_request_free(t);
                return -ENOMEM;
        }
        return bus_authorize_then(m, template_access, 0, template_authorized, t, template_request_free);
}

/* SetSecret, RemoveSecret, ListSecrets: the store of the caller's uid and the tenant it
 * acts for; setting and removing as creating for it would need. */
typedef struct SecretRequest {
        Manager *manager;
        char *name;
        void *value;
        size_t size;
} SecretRequest;

static void secret_request_free(void *userdata) {
        SecretRequest *q = userdata;

        if (q->value)
                explicit_bzero(q->value, q->size);
        free(q->value);
        free(q->name);
        free(q);
}

static int secret_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner, const char **ret_tenant,
                         SandboxError *error) {
        *ret_owner = caller->uid;
        *ret_tenant = caller->tenant;
        return 0;
}

static int secret_authorized(sd_bus_message *call, const SandboxCaller *caller, void *userdata, SandboxError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_strv_free_ char **names = NULL;
        SecretRequest *q = userdata;
        int r;

        if (sd_bus_message_is_method_call(call, NULL, "SetSecret"))
                r = manager_set_secret(q->manager, caller, q->name, q->value, q->size, error);
        else if (sd_bus_message_is_method_call(call, NULL, "RemoveSecret"))
                r = manager_remove_secret(q->manager, caller, q->name, error);
        else {
                r = manager_list_secrets(q->manager, caller, &names);
                if (r < 0)
                        return r;
                r = sd_bus_message_new_method_return(call, &reply);
                if (r >= 0)
                        r = sd_bus_message_append_strv(reply, names);
                if (r < 0)
                        return r;
                return sd_bus_send(NULL, reply, NULL);
        }
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, NULL);
}

static int method_secret(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        BusFrontend *f = userdata;
        const char *name = NULL;
        const void *value = NULL;
        size_t size = 0;
        SecretRequest *q;
        int r;

        if (sd_bus_message_is_method_call(m, NULL, "SetSecret")) {
                r = sd_bus_message_read(m, "s", &name);
                if (r >= 0)
                        r = sd_bus_message_read_array(m, 'y', &value, &size);
        } else if (sd_bus_message_is_method_call(m, NULL, "RemoveSecret"))
                r = sd_bus_message_read(m, "s", &name);
        else
                r = 0;
        if (r < 0)
                return r;
        q = calloc(1, sizeof(SecretRequest));
        if (!q)
                return -ENOMEM;
        *q = (SecretRequest) { .manager = f->manager, .name = name ? strdup(name) : NULL, .size = size };
        if (size > 0 && (q->value = malloc(size)))
                memcpy(q->value, value, size);
        if ((name && !q->name) || (size > 0 && !q->value)) {
                secret_request_free(q);
                return -ENOMEM;
        }
        return bus_authorize_then(m, secret_access, 0, secret_authorized, q, secret_request_free);
}

/* The calls of this bus peer act for tenant from now on: it sees and touches only that
 * tenant's sandboxes, and creates for it (the core's rules, access.h). */
static int method_act_for_tenant(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        const char *tenant;
        int r;

        r = sd_bus_message_read(m, "s", &tenant);
        if (r < 0)
                return r;
        if (!isempty(tenant)) {
                r = sandbox_tenant_check(tenant, &e);
                if (r < 0)
                        return bus_error_return(error, &e, r);
        }
        r = bus_caller_set_tenant(m, isempty(tenant) ? NULL : tenant);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(m, NULL);
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("CreateSandbox",
                                SD_BUS_ARGS("s", template, "a{sv}", options),
                                SD_BUS_RESULT("s", id, "o", path),
                                method_create_sandbox, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("AcquireSandbox",
                                SD_BUS_ARGS("s", template, "a{sv}", options),
                                SD_BUS_RESULT("s", id, "o", path, "s", source),
                                method_create_sandbox, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ReleaseSandbox",
                                SD_BUS_ARGS("s", id),
                                SD_BUS_RESULT("b", recycled),
                                method_get_sandbox, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetPool",
                                SD_BUS_ARGS("s", template),
                                SD_BUS_RESULT("a{sv}", pool),
                                method_get_pool, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetSandbox",
                                SD_BUS_ARGS("s", id),
                                SD_BUS_RESULT("o", path),
                                method_get_sandbox, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListSandboxes",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(ssusot)", sandboxes),
                                method_list_sandboxes, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListSandboxesFiltered",
                                SD_BUS_ARGS("a{sv}", filter),
                                SD_BUS_RESULT("a(ssusot)", sandboxes, "t", total),
                                method_list_sandboxes, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListTemplates",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(sss)", templates),
                                method_list_templates, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("CreateTemplate",
                                SD_BUS_ARGS("s", name, "s", json),
                                SD_BUS_NO_RESULT,
                                method_template, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RemoveTemplate",
                                SD_BUS_ARGS("s", name),
                                SD_BUS_NO_RESULT,
                                method_template, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetQuota",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("s", scope, "a(stt)", quota),
                                method_get_quota, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("SetSecret",
                                SD_BUS_ARGS("s", name, "ay", value),
                                SD_BUS_NO_RESULT,
                                method_secret, SD_BUS_VTABLE_UNPRIVILEGED|SD_BUS_VTABLE_SENSITIVE),
        SD_BUS_METHOD_WITH_ARGS("ListSecrets",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("as", names),
                                method_secret, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RemoveSecret",
                                SD_BUS_ARGS("s", name),
                                SD_BUS_NO_RESULT,
                                method_secret, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ActForTenant",
                                SD_BUS_ARGS("s", tenant),
                                SD_BUS_NO_RESULT,
                                method_act_for_tenant, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListExecutions",
                                SD_BUS_ARGS("a{sv}", filter),
                                SD_BUS_RESULT("a" RECORDER_EXECUTION_SIGNATURE, executions),
                                method_list_executions, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListExecutionsEx",
                                SD_BUS_ARGS("a{sv}", filter),
                                SD_BUS_RESULT("a" RECORDER_EXECUTION_EX_SIGNATURE, executions),
                                method_list_executions_ex, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListPools",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a(suuuu)", pools),
                                method_list_pools, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Wake",
                                SD_BUS_ARGS("s", id),
                                SD_BUS_RESULT("s", id, "o", path),
                                method_snapshot_call, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ListSnapshots",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("aa{sv}", snapshots),
                                method_list_snapshots, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RemoveSnapshot",
                                SD_BUS_ARGS("s", snapshot),
                                SD_BUS_NO_RESULT,
                                method_snapshot_call, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("GetStatistics",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("a{sv}", statistics),
                                method_get_statistics, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("SandboxNew", SD_BUS_ARGS("s", id, "o", path), 0),
        SD_BUS_SIGNAL_WITH_ARGS("SandboxRemoved", SD_BUS_ARGS("s", id, "o", path), 0),
        SD_BUS_VTABLE_END
};

static void emit_sandbox(Sandbox *s, void *userdata, bool added) {
        BusFrontend *f = userdata;

        (void) sd_bus_emit_signal(f->bus, SANDBOX_MANAGER_PATH, SANDBOX_MANAGER_INTERFACE,
                                  added ? "SandboxNew" : "SandboxRemoved", "so",
                                  sandbox_get_id(s), BUS_SANDBOX_PATH(s));
}

static void on_sandbox_added(Sandbox *s, void *userdata) {
        emit_sandbox(s, userdata, true);
}

static void on_sandbox_removed(Sandbox *s, void *userdata) {
        emit_sandbox(s, userdata, false);
}

static void on_sandbox_state_changed(Sandbox *s, void *userdata) {
        BusFrontend *f = userdata;

        (void) sd_bus_emit_properties_changed(f->bus, BUS_SANDBOX_PATH(s), SANDBOX_INTERFACE, "State",
                                              "Timeout", "IdleTimeout", "Deadline", NULL);
}

int bus_frontend_subscribe(BusFrontend *f) {
        static const ManagerHooks hooks = {
                .sandbox_added = on_sandbox_added,
                .sandbox_state_changed = on_sandbox_state_changed,
                .sandbox_removed = on_sandbox_removed,
        };

        return manager_subscribe(f->manager, &hooks, f, &f->subscription);
}

int bus_frontend_register(BusFrontend *f) {
        int r;

        r = sd_bus_add_object_vtable(f->bus, NULL, SANDBOX_MANAGER_PATH, SANDBOX_MANAGER_INTERFACE,
                                     manager_vtable, f);
        if (r < 0)
                return r;
        return sandbox_dbus_register(f);
}
