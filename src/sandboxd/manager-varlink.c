/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The server of io.sandboxd.Sandbox, and its methods on the manager: CreateSandbox,
 * GetSandbox, ListSandboxes, ListTemplates, ListExecutions, CreateTemplate, RemoveTemplate,
 * ActForTenant. Translation only, as in
 * manager-dbus.c and recorder-dbus.c. */

#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

#include "config.h"
#include "io.sandboxd.Sandbox.varlink.h"
#include "json-util.h"
#include "labels.h"
#include "log.h"
#include "sandbox-secrets.h"
#include "sandbox-varlink.h"
#include "strv.h"

/* GetInfo's url: where the interface is documented. */
#define SANDBOX_VARLINK_URL "man:sandboxd-api(7)"

/* A sandbox as GetSandbox and ListSandboxes give it: its D-Bus object's properties. */
static json_object *sandbox_to_json(Sandbox *s) {
        _cleanup_json_ json_object *o = json_object_new_object();
        const SandboxConfig *c = sandbox_get_config(s);
        _cleanup_strv_free_ char **allow = NULL, **deny = NULL;

        if (!o || sandbox_config_egress_strv(c, false, &allow) < 0 || sandbox_config_egress_strv(c, true, &deny) < 0 ||
            json_add(o, "id", json_object_new_string(sandbox_get_id(s))) < 0 ||
            json_add(o, "template", json_object_new_string(sandbox_get_template(s))) < 0 ||
            json_add(o, "owner", json_object_new_uint64(sandbox_get_owner(s))) < 0 ||
            json_add(o, "state", json_object_new_string(sandbox_state_to_string(sandbox_get_state(s)))) < 0 ||
            json_add(o, "unit", json_object_new_string(strempty(sandbox_get_unit(s)))) < 0 ||
            json_add(o, "createdAt", json_object_new_uint64(sandbox_get_created_at(s))) < 0 ||
            json_add(o, "memoryMax", json_object_new_uint64(c->limits.memory_max)) < 0 ||
            json_add(o, "cpuQuotaPerSecUSec", json_object_new_uint64(c->limits.cpu_quota_per_sec_usec)) < 0 ||
            json_add(o, "tasksMax", json_object_new_uint64(c->limits.tasks_max)) < 0 ||
            json_add(o, "diskMax", json_object_new_uint64(c->disk_max)) < 0 ||
            json_add(o, "storage", json_object_new_string(sandbox_get_storage(s))) < 0 ||
            json_add(o, "forkMethod", json_object_new_string(sandbox_get_fork_method(s))) < 0 ||
            json_add(o, "timeout", json_object_new_uint64(c->timeout_sec)) < 0 ||
            json_add(o, "idleTimeout", json_object_new_uint64(c->idle_timeout_sec)) < 0 ||
            json_add(o, "deadline", json_object_new_uint64(sandbox_get_deadline(s))) < 0 ||
            json_add(o, "ephemeral", json_object_new_boolean(c->ephemeral)) < 0 ||
            json_add(o, "name", json_object_new_string(strempty(sandbox_get_name(s)))) < 0 ||
            json_add(o, "tenant", json_object_new_string(strempty(sandbox_get_tenant(s)))) < 0 ||
            json_add(o, "fromPool", json_object_new_boolean(sandbox_get_from_pool(s))) < 0 ||
            json_add(o, "egressAllow", strv_to_json(allow)) < 0 ||
            json_add(o, "egressDeny", strv_to_json(deny)) < 0 ||
            json_add(o, "labels", labels_to_json(c->labels)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* ---- CreateSandbox ---- */

typedef struct CreateArgs {
        VarlinkFrontend *frontend;
        char *template;
        json_object *options;         /* borrowed, read before authorizing */
        SandboxConfig config;
} CreateArgs;

static void create_args_free(void *userdata) {
        CreateArgs *c = userdata;

        free(c->template);
        sandbox_config_done(&c->config);
        free(c);
}

void varlink_reply_sandbox_created(Sandbox *s, const SandboxError *error, void *userdata) {
        _cleanup_(varlink_call_unrefp) VarlinkCall *call = userdata;
        _cleanup_json_ json_object *p = NULL;

        if (error) {
                (void) varlink_reply_sandbox_error(call, error);
                return;
        }
        p = json_object_new_object();
        if (!p || json_add(p, "id", json_object_new_string(sandbox_get_id(s))) < 0 ||
            (streq(varlink_call_get_method(call), SANDBOX_VARLINK_INTERFACE ".AcquireSandbox") &&
             json_add(p, "source", json_object_new_string(sandbox_get_source(s))) < 0))
                (void) varlink_reply_error(call, NULL, -ENOMEM);
        else
                (void) varlink_call_reply(call, p);
}

static int create_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                         const char **ret_tenant, SandboxError *error) {
        CreateArgs *c = userdata;
        int r;

        /* Whom the sandbox is for decides what to ask (the core's rule, access.h). */
        r = sandbox_access_create(caller, &c->config, error);
        if (r < 0)
                return r;
        *ret_tenant = c->config.tenant;
        return 0;
}

static int create_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata, SandboxError *error) {
        CreateArgs *c = userdata;
        int r;

        r = manager_create_sandbox(c->frontend->manager, caller, strempty(c->template), &c->config,
                                   varlink_reply_sandbox_created,
                                   varlink_call_ref(call), error);
        if (r < 0)
                varlink_call_unref(call);
        return r;
}

static const VarlinkParam create_params[] = {
        { "template", VARLINK_PARAM_STRING, offsetof(CreateArgs, template) },
        { "options",  VARLINK_PARAM_OBJECT, offsetof(CreateArgs, options)  },
        {}
};

static int method_create_sandbox(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags,
                                 void *userdata) {
        VarlinkFrontend *f = userdata;
        CreateArgs *c;
        int r;

        c = calloc(1, sizeof(CreateArgs));
        if (!c) {
                (void) varlink_reply_error(call, NULL, -ENOMEM);
                return 0;
        }
        c->frontend = f;
        r = varlink_read_call(call, parameters, create_params, c, &c->options, OPTION_SET_SANDBOX, &c->config);
        if (r < 0) {
                create_args_free(c);
                return 0;
        }
        r = varlink_authorize_then(f->bus, call, create_access, 0, create_authorized, c, create_args_free);
        if (r < 0)
                (void) varlink_reply_error(call, NULL, r);
        return 0;
}

/* ---- GetSandbox ---- */

static int get_sandbox_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s,
                                  SandboxVarlinkRequest *req, SandboxError *error) {
        _cleanup_json_ json_object *p = json_object_new_object();
        int r;

        if (!p)
                return -ENOMEM;
        r = json_add(p, "sandbox", sandbox_to_json(s));
        if (r < 0)
                return r;
        (void) varlink_call_reply(call, p);
        return 0;
}

static const VarlinkParam get_sandbox_params[] = {
        { "id", VARLINK_PARAM_STRING, offsetof(SandboxArgs, id), true },
        {}
};

static int method_get_sandbox(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        return sandbox_varlink_method(userdata, call, parameters, get_sandbox_params, NULL,
                                      get_sandbox_authorized);
}

/* ---- the lists ---- */

int varlink_list_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                       const char **ret_tenant, SandboxError *error) {
        return 0;
}

/* ListSandboxes' call while it is authorized. */
typedef struct ListSandboxesArgs {
        VarlinkFrontend *frontend;
        json_object *filter;     /* borrowed, read before authorizing */
        SandboxListQuery query;
        bool filtered;           /* a filter was given: the reply has the total */
} ListSandboxesArgs;

static void list_sandboxes_args_free(void *userdata) {
        ListSandboxesArgs *a = userdata;

        if (!a)
                return;
        sandbox_list_query_done(&a->query);
        free(a);
}

static void list_sandboxes_args_freep(ListSandboxesArgs **a) {
        list_sandboxes_args_free(*a);
}

static int list_add_sandbox(Sandbox *s, void *userdata) {
        json_object *o = sandbox_to_json(s);

        if (!o || json_object_array_add(userdata, o) < 0) {
                json_object_put(o);
                return -ENOMEM;
        }
        return 0;
}

static int list_sandboxes_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata,
                                     SandboxError *error) {
        _cleanup_json_ json_object *p = json_object_new_object(), *l = json_object_new_array();
        ListSandboxesArgs *a = userdata;
        uint64_t total = 0;
        int r;

        if (!p || !l)
                return -ENOMEM;
        r = manager_list_sandboxes(a->frontend->manager, caller, &a->query, list_add_sandbox, l, &total);
        if (r >= 0)
                r = json_add(p, "sandboxes", TAKE_PTR(l));
        /* With a filter, how many match over all pages. */
        if (r >= 0 && a->filtered)
                r = json_add(p, "total", json_object_new_uint64(total));
        if (r < 0)
                return r;
        (void) varlink_reply_or_fail(call, p);
        return 0;
}

static const VarlinkParam no_params[] = {
        {}
};

static const VarlinkParam list_sandboxes_params[] = {
        { "filter", VARLINK_PARAM_OBJECT, offsetof(ListSandboxesArgs, filter) },
        {}
};

static int method_list_sandboxes(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags,
                                 void *userdata) {
        _cleanup_(list_sandboxes_args_freep) ListSandboxesArgs *a = NULL;
        VarlinkFrontend *f = userdata;
        int r;

        a = calloc(1, sizeof(ListSandboxesArgs));
        if (!a) {
                (void) varlink_reply_error(call, NULL, -ENOMEM);
                return 0;
        }
        *a = (ListSandboxesArgs) { .frontend = f, .query = SANDBOX_LIST_QUERY_INIT };
        r = varlink_read_call(call, parameters, list_sandboxes_params, a, &a->filter, OPTION_SET_SANDBOX_LIST,
                              &a->query);
        if (r < 0)
                return 0;
        a->filtered = json_object_object_get_ex(parameters, "filter", &a->filter) && a->filter;
        a->filter = NULL;
        r = varlink_authorize_then(f->bus, call, varlink_list_access, SANDBOX_AUTHORIZE_OPTIONAL, list_sandboxes_authorized,
                                   TAKE_PTR(a), list_sandboxes_args_free);
        if (r < 0)
                (void) varlink_reply_error(call, NULL, r);
        return 0;
}

/* GetQuota: one's own (or the tenant's one acts for); nothing to ask polkit. */
static int quota_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner, const char **ret_tenant,
                        SandboxError *error) {
        *ret_owner = caller->uid;
        return 0;
}

static int get_quota_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata, SandboxError *error) {
        _cleanup_json_ json_object *p = json_object_new_object(), *l = json_object_new_array();
        VarlinkFrontend *f = userdata;
        QuotaReport q;
        int r;

        if (!p || !l)
                return -ENOMEM;
        r = manager_get_quota(f->manager, caller, &q);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(q.entries); i++) {
                _cleanup_json_ json_object *o = json_object_new_object();

                if (!o ||
                    json_add(o, "what", json_object_new_string(quota_item_to_string(q.entries[i].item))) < 0 ||
                    json_add(o, "limit", json_object_new_int64((int64_t) MIN(q.entries[i].limit, (uint64_t) INT64_MAX))) < 0 ||
                    json_add(o, "use", json_object_new_int64((int64_t) MIN(q.entries[i].use, (uint64_t) INT64_MAX))) < 0 ||
                    json_object_array_add(l, o) < 0)
                        return -ENOMEM;
                TAKE_PTR(o);
        }
        r = json_add(p, "scope", json_object_new_string(q.scope));
        if (r >= 0)
                r = json_add(p, "quota", TAKE_PTR(l));
        if (r < 0)
                return r;
        (void) varlink_reply_or_fail(call, p);
        return 0;
}

static int method_get_quota(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        VarlinkFrontend *f = userdata;

        return varlink_read_authorize_then(f->bus, call, parameters, no_params, f, NULL, quota_access, 0,
                                           get_quota_authorized);
}

static int method_list_templates(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags,
                                 void *userdata) {
        _cleanup_json_ json_object *p = NULL, *l = NULL;
        VarlinkFrontend *f = userdata;
        const TemplateSet *set = manager_get_templates(f->manager);
        int r;

        r = varlink_params_read_or_reply(call, parameters, no_params, NULL);
        if (r < 0)
                return varlink_params_failed(call, r);
        p = json_object_new_object();
        l = json_object_new_array();
        if (!p || !l) {
                (void) varlink_reply_error(call, NULL, -ENOMEM);
                return 0;
        }
        for (size_t i = 0; i < set->n; i++) {
                const Template *t = set->templates[i];
                _cleanup_json_ json_object *o = json_object_new_object();

                if (!o ||
                    json_add(o, "name", json_object_new_string(t->name)) < 0 ||
                    json_add(o, "payload", json_object_new_string(payload_kind_to_string(t->payload))) < 0 ||
                    json_add(o, "description", json_object_new_string(strempty(t->description))) < 0 ||
                    json_object_array_add(l, o) < 0) {
                        (void) varlink_reply_error(call, NULL, -ENOMEM);
                        return 0;
                }
                TAKE_PTR(o);
        }
        r = json_add(p, "templates", TAKE_PTR(l));
        if (r < 0) {
                (void) varlink_reply_error(call, NULL, r);
                return 0;
        }
        (void) varlink_reply_or_fail(call, p);
        return 0;
}

/* ---- ListExecutions ---- */

typedef struct ListExecutionsArgs {
        VarlinkFrontend *frontend;
        json_object *filter;          /* borrowed, read before authorizing */
        ExecutionQuery query;
        VarlinkCall *call;            /* once the query runs */
} ListExecutionsArgs;

static void list_executions_args_free(void *userdata) {
        ListExecutionsArgs *l = userdata;

        if (!l)
                return;
        varlink_call_unref(l->call);
        execution_query_done(&l->query);
        free(l);
}

static json_object *execution_to_json(const ExecutionRecord *e) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o ||
            json_add(o, "sandboxId", json_object_new_string(e->sandbox_id)) < 0 ||
            json_add(o, "execId", json_object_new_uint64(e->exec_id)) < 0 ||
            json_add(o, "owner", json_object_new_uint64(e->owner)) < 0 ||
            json_add(o, "caller", json_object_new_uint64(e->caller)) < 0 ||
            json_add(o, "argv", strv_to_json(e->argv)) < 0 ||
            json_add(o, "workingDirectory", json_object_new_string(strempty(e->working_directory))) < 0 ||
            json_add(o, "startedAt", json_object_new_uint64(e->started_at)) < 0 ||
            json_add(o, "endedAt", json_object_new_uint64(e->ended_at)) < 0 ||
            json_add(o, "exitStatus", json_object_new_int(e->exit_status)) < 0 ||
            json_add(o, "exitCode", json_object_new_int(e->exit_code)) < 0 ||
            json_add(o, "signal", json_object_new_int(e->signal)) < 0 ||
            json_add(o, "timedOut", json_object_new_boolean(e->timed_out)) < 0 ||
            json_add(o, "oomKilled", json_object_new_boolean(e->oom_killed)) < 0 ||
            json_add(o, "cpuUSec", json_object_new_uint64(e->cpu_usec)) < 0 ||
            json_add(o, "cgroupCPUNSec", json_object_new_uint64(e->cgroup_cpu_nsec)) < 0 ||
            json_add(o, "memoryPeak", json_object_new_uint64(e->cgroup_memory_peak)) < 0 ||
            json_add(o, "stdoutBytes", json_object_new_uint64(e->stdout_bytes)) < 0 ||
            json_add(o, "stderrBytes", json_object_new_uint64(e->stderr_bytes)) < 0)
                return NULL;
        if (e->disk_known &&
            (json_add(o, "diskBytesUsed", json_object_new_uint64(e->disk_bytes_used)) < 0 ||
             json_add(o, "diskBytesMax", json_object_new_uint64(e->disk_bytes_max)) < 0))
                return NULL;
        return TAKE_PTR(o);
}

static void on_executions_listed(int error, const ExecutionRecord *records, size_t n, void *userdata) {
        ListExecutionsArgs *l = userdata;
        _cleanup_json_ json_object *p = NULL, *a = NULL;
        int r = error;

        /* sandboxd is stopping: no answer; the connection closes with it. */
        if (r == -ECANCELED)
                goto finish;
        if (r >= 0) {
                p = json_object_new_object();
                a = json_object_new_array();
                r = p && a ? 0 : -ENOMEM;
        }
        for (size_t i = 0; r >= 0 && i < n; i++) {
                json_object *o = execution_to_json(&records[i]);
                if (!o || json_object_array_add(a, o) < 0) {
                        json_object_put(o);
                        r = -ENOMEM;
                }
        }
        if (r >= 0)
                r = json_add(p, "executions", TAKE_PTR(a));
        if (r >= 0)
                (void) varlink_reply_or_fail(l->call, p);
        else
                (void) varlink_reply_error(l->call, NULL, r);
finish:
        list_executions_args_free(l);
}

/* What the caller sees is the core's rule (execution_query_authorize()); the spool is read
 * off the event loop, and on_executions_listed() answers. */
static int list_executions_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata,
                                      SandboxError *error) {
        ListExecutionsArgs *l = userdata, *q;
        int r;

        /* The query outlives this call (l is freed when it returns): it takes l's query. */
        q = calloc(1, sizeof(ListExecutionsArgs));
        if (!q)
                return -ENOMEM;
        q->call = varlink_call_ref(call);
        q->query = l->query;
        l->query = (ExecutionQuery) {};
        execution_query_authorize(&q->query, caller);
        r = recorder_query_executions(l->frontend->recorder, &q->query, on_executions_listed, q, error);
        if (r < 0)
                list_executions_args_free(q);
        return r;
}

static const VarlinkParam list_executions_params[] = {
        { "filter", VARLINK_PARAM_OBJECT, offsetof(ListExecutionsArgs, filter) },
        {}
};

static int method_list_executions(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags,
                                  void *userdata) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        VarlinkFrontend *f = userdata;
        ListExecutionsArgs *l;
        int r;

        l = calloc(1, sizeof(ListExecutionsArgs));
        if (!l) {
                (void) varlink_reply_error(call, NULL, -ENOMEM);
                return 0;
        }
        l->frontend = f;
        r = varlink_read_call(call, parameters, list_executions_params, l, &l->filter, OPTION_SET_EXECUTIONS,
                              &l->query);
        if (r >= 0) {
                r = recorder_check_enabled(f->recorder, &error);
                if (r < 0)
                        (void) varlink_reply_error(call, &error, r);
        }
        if (r >= 0) {
                r = varlink_authorize_then(f->bus, call, varlink_list_access, SANDBOX_AUTHORIZE_OPTIONAL,
                                           list_executions_authorized, TAKE_PTR(l), list_executions_args_free);
                if (r < 0)
                        (void) varlink_reply_error(call, NULL, r);
        }
        list_executions_args_free(l);
        return 0;
}

/* ---- CreateTemplate, RemoveTemplate ---- */

typedef struct TemplateArgs {
        VarlinkFrontend *frontend;
        char *name;
        char *json;                   /* CreateTemplate's; NULL: RemoveTemplate */
} TemplateArgs;

static void template_args_free(void *userdata) {
        TemplateArgs *t = userdata;

        free(t->name);
        free(t->json);
        free(t);
}

static int template_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner,
                           const char **ret_tenant, SandboxError *error) {
        return 0;
}

static int template_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata, SandboxError *error) {
        TemplateArgs *t = userdata;
        Manager *m = t->frontend->manager;
        int r;

        r = t->json ? manager_create_template(m, t->name, t->json, error) : manager_remove_template(m, t->name, error);
        if (r < 0)
                return r;
        (void) varlink_call_reply(call, NULL);
        return 0;
}

static const VarlinkParam create_template_params[] = {
        { "name", VARLINK_PARAM_STRING, offsetof(TemplateArgs, name), true },
        { "json", VARLINK_PARAM_STRING, offsetof(TemplateArgs, json), true },
        {}
};

static const VarlinkParam remove_template_params[] = {
        { "name", VARLINK_PARAM_STRING, offsetof(TemplateArgs, name), true },
        {}
};

static int method_template(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        bool create = streq(varlink_call_get_method(call), SANDBOX_VARLINK_INTERFACE ".CreateTemplate");
        VarlinkFrontend *f = userdata;
        TemplateArgs *t = calloc(1, sizeof(TemplateArgs));

        if (t)
                t->frontend = f;
        return varlink_read_authorize_then(f->bus, call, parameters,
                                           create ? create_template_params : remove_template_params, t,
                                           template_args_free, template_access, 0, template_authorized);
}

/* ---- SetSecret, ListSecrets, RemoveSecret ---- */

typedef struct SecretArgs {
        VarlinkFrontend *frontend;
        char *name;
        char *value;
} SecretArgs;

static void secret_args_free(void *userdata) {
        SecretArgs *a = userdata;

        if (a->value)
                explicit_bzero(a->value, strlen(a->value));
        free(a->value);
        free(a->name);
        free(a);
}

/* The store of the caller's uid and the tenant it acts for; setting and removing as
 * creating for it would need. */
static int secret_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner, const char **ret_tenant,
                         SandboxError *error) {
        *ret_owner = caller->uid;
        *ret_tenant = caller->tenant;
        return 0;
}

static int secret_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata, SandboxError *error) {
        const char *method = varlink_call_get_method(call);
        SecretArgs *a = userdata;
        Manager *m = a->frontend->manager;
        int r;

        if (streq(method, SANDBOX_VARLINK_INTERFACE ".SetSecret"))
                r = manager_set_secret(m, caller, a->name, a->value, strlen(a->value), error);
        else if (streq(method, SANDBOX_VARLINK_INTERFACE ".RemoveSecret"))
                r = manager_remove_secret(m, caller, a->name, error);
        else {
                _cleanup_strv_free_ char **names = NULL;
                _cleanup_json_ json_object *p = json_object_new_object(), *l = json_object_new_array();

                if (!p || !l)
                        return -ENOMEM;
                r = manager_list_secrets(m, caller, &names);
                for (char **n = names; r >= 0 && n && *n; n++)
                        r = json_object_array_add(l, json_object_new_string(*n)) < 0 ? -ENOMEM : 0;
                if (r >= 0)
                        r = json_add(p, "names", TAKE_PTR(l));
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

static const VarlinkParam set_secret_params[] = {
        { "name",  VARLINK_PARAM_STRING, offsetof(SecretArgs, name),  true },
        { "value", VARLINK_PARAM_STRING, offsetof(SecretArgs, value), true },
        {}
};

static const VarlinkParam remove_secret_params[] = {
        { "name", VARLINK_PARAM_STRING, offsetof(SecretArgs, name), true },
        {}
};

static int method_secret(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        const char *method = varlink_call_get_method(call);
        VarlinkFrontend *f = userdata;
        SecretArgs *a = calloc(1, sizeof(SecretArgs));

        if (a)
                a->frontend = f;
        return varlink_read_authorize_then(f->bus, call, parameters,
                                           streq(method, SANDBOX_VARLINK_INTERFACE ".SetSecret") ? set_secret_params :
                                           streq(method, SANDBOX_VARLINK_INTERFACE ".RemoveSecret") ?
                                           remove_secret_params : no_params,
                                           a, secret_args_free, secret_access, 0, secret_authorized);
}

/* ---- ActForTenant ---- */

typedef struct TenantArgs {
        char *tenant;
} TenantArgs;

static const VarlinkParam act_for_tenant_params[] = {
        { "tenant", VARLINK_PARAM_STRING, offsetof(TenantArgs, tenant), true },
        {}
};

static void tenant_args_free(void *p) {
        TenantArgs *a = p;

        varlink_params_done(act_for_tenant_params, a);
        free(a);
}

/* What acting for a tenant is about: creating for it (root, or "delegate"). */
static int tenant_access(const SandboxCaller *caller, void *userdata, uid_t *ret_owner, const char **ret_tenant,
                         SandboxError *error) {
        TenantArgs *a = userdata;

        *ret_owner = caller->uid;
        *ret_tenant = a->tenant;
        return 0;
}

static int tenant_authorized(VarlinkCall *call, const SandboxCaller *caller, void *userdata, SandboxError *error) {
        TenantArgs *a = userdata;
        int r;

        /* A caller that may act for tenants (the HTTP bridge) has its connections for one
         * tenant counted apart from its others: one tenant's long calls cannot use up the
         * connections sandboxd takes of its uid, and with them every other tenant's
         * (sandboxd-api(7), VARLINK). Anyone else stays counted as its uid. */
        if (caller->granted) {
                r = varlink_call_set_connection_group(call, a->tenant);
                if (r == -EUSERS)
                        return sandbox_error_set(error, SANDBOX_ERR_BUSY,
                                                 "Too many connections acting for tenant %s (at most %u).",
                                                 a->tenant, VARLINK_CONNECTIONS_PER_UID_MAX_DEFAULT);
        } else
                r = varlink_call_set_connection_tag(call, a->tenant);
        if (r < 0)
                return r;
        return varlink_call_reply(call, NULL);
}

/* The calls of this connection act for tenant from now on: they see and touch only that
 * tenant's sandboxes, and create for it (the core's rules, access.h). A narrowing, as on
 * D-Bus: it needs no action itself. polkit is asked (optionally, without interaction)
 * whether the caller holds "delegate" only to count its connections (above). */
static int method_act_for_tenant(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        VarlinkFrontend *f = userdata;
        TenantArgs *a = calloc(1, sizeof(TenantArgs));
        int r;

        if (!a)
                return varlink_reply_error(call, NULL, -ENOMEM);
        r = varlink_params_read_or_reply(call, parameters, act_for_tenant_params, a);
        if (r < 0) {
                tenant_args_free(a);
                return varlink_params_failed(call, r);
        }
        if (isempty(a->tenant)) {
                tenant_args_free(a);
                r = varlink_call_set_connection_tag(call, NULL);
                return r < 0 ? varlink_reply_error(call, NULL, r) : varlink_call_reply(call, NULL);
        }
        r = sandbox_tenant_check(a->tenant, &error);
        if (r < 0) {
                tenant_args_free(a);
                return varlink_reply_error(call, &error, r);
        }
        r = varlink_authorize_then(f->bus, call, tenant_access, SANDBOX_AUTHORIZE_OPTIONAL, tenant_authorized, a,
                                   tenant_args_free);
        if (r < 0)
                (void) varlink_reply_error(call, NULL, r);
        return 0;
}

/* ---- the server ---- */

int manager_varlink_bind(VarlinkFrontend *f) {
        static const VarlinkMethodEntry methods[] = {
                { "CreateSandbox",  method_create_sandbox  },
                { "AcquireSandbox", method_create_sandbox  },
                { "GetSandbox",     method_get_sandbox     },
                { "ListSandboxes",  method_list_sandboxes  },
                { "ListTemplates",  method_list_templates  },
                { "GetQuota",       method_get_quota       },
                { "ListExecutions", method_list_executions },
                { "CreateTemplate", method_template        },
                { "RemoveTemplate", method_template        },
                { "ActForTenant",   method_act_for_tenant  },
                { "SetSecret",      method_secret          },
                { "ListSecrets",    method_secret          },
                { "RemoveSecret",   method_secret          },
        };

        return varlink_bind_methods(f->server, SANDBOX_VARLINK_INTERFACE, methods, ELEMENTSOF(methods), f);
}

int varlink_frontend_setup(VarlinkFrontend *f) {
        VarlinkLimits limits = VARLINK_LIMITS_DEFAULT;
        int r;

        r = varlink_server_new(&f->server);
        if (r < 0)
                return r;
        r = varlink_server_set_info(f->server, "sandboxd", "sandboxd", PACKAGE_VERSION, SANDBOX_VARLINK_URL);
        if (r < 0)
                return r;
        limits.message_size_max = SANDBOX_VARLINK_MESSAGE_SIZE_MAX;
        limits.output_buffer_max = SANDBOX_VARLINK_OUTPUT_BUFFER_MAX;
        /* The call that does not fit is mostly an Exec's Stdin or a WriteFile's data: say
         * which bounds apply, as InvalidOption does for those a little smaller. */
        limits.oversized_error = SANDBOX_VARLINK_INTERFACE ".InvalidOption";
        limits.oversized_message =
                "The call is larger than a varlink message may be (32 MiB, as JSON with its bytes in base64): "
                "an Exec's Stdin takes at most 16 MiB; pass more as a file (WriteFile, in parts of "
                "at most 4 MiB) and redirect the command's input from it.";
        r = varlink_server_set_limits(f->server, &limits);
        if (r < 0)
                return r;
        r = varlink_server_add_interface(f->server, sandbox_varlink_idl);
        if (r < 0)
                return r;
        r = manager_varlink_bind(f);
        if (r >= 0)
                r = sandbox_varlink_bind(f);
        if (r >= 0)
                r = sandbox_files_varlink_bind(f);
        if (r >= 0)
                r = observe_varlink_bind(f);
        if (r >= 0)
                r = snapshot_varlink_bind(f);
        if (r >= 0)
                r = context_varlink_bind(f);
        if (r >= 0)
                r = sandbox_ports_varlink_bind(f);
        if (r < 0)
                return r;
        return varlink_server_attach_event(f->server, f->event, SD_EVENT_PRIORITY_NORMAL);
}

int varlink_frontend_listen(VarlinkFrontend *f, int fd) {
        int r;

        if (fd >= 0)
                return varlink_server_listen_fd(f->server, fd);
        r = varlink_server_listen_address(f->server, SANDBOX_VARLINK_SOCKET, 0666);
        if (r < 0)
                return r;
        f->socket_path = strdup(SANDBOX_VARLINK_SOCKET);
        return f->socket_path ? 0 : -ENOMEM;
}

void varlink_frontend_done(VarlinkFrontend *f) {
        f->server = varlink_server_unref(f->server);
        if (f->socket_path) {
                (void) unlink(f->socket_path);
                f->socket_path = mfree(f->socket_path);
        }
}
