/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <systemd/sd-daemon.h>

#include "access.h"
#include "config.h"
#include "etc-tree.h"
#include "exec-persist.h"
#include "manager-quota.h"
#include "fd-util.h"
#include "list.h"
#include "labels.h"
#include "log.h"
#include "payload-bwrap.h"
#include "sandbox-persist.h"
#include "seccomp-policy.h"
#include "snapshot.h"
#include "sandbox-errors.h"
#include "sandbox-internal.h"
#include "sandbox-secrets.h"
#include "strv.h"
#include "time-util.h"
#include "workspace-export.h"

struct ManagerSubscription {
        Manager *manager;
        ManagerHooks hooks;
        void *userdata;
        bool dead;      /* unsubscribed while hooks were being called */
        ManagerSubscription *prev, *next;
};

uint64_t sandbox_fds_needed(unsigned max_sandboxes) {
        return SANDBOX_FDS_BASE + (uint64_t) max_sandboxes * SANDBOX_FDS_PER_SANDBOX;
}

unsigned sandbox_fds_room(uint64_t nofile) {
        uint64_t n = nofile > SANDBOX_FDS_BASE ? (nofile - SANDBOX_FDS_BASE) / SANDBOX_FDS_PER_SANDBOX : 0;
        return (unsigned) MAX(MIN(n, (uint64_t) UINT_MAX), 1U);
}

int manager_error_too_many(Manager *m, SandboxError *error) {
        size_t waiting = manager_creates_waiting(m);
        char also[64] = "";

        if (waiting > 0)
                snprintf(also, sizeof(also), ", with %zu creates waiting for their turn", waiting);
        return sandbox_error_set(error, SANDBOX_ERR_TOO_MANY_SANDBOXES, "The maximum of %u sandboxes is reached%s%s.",
                                 m->settings.max_sandboxes, also, m->settings.max_sandboxes_by_fds ?
                                 " (all sandboxd's descriptor limit, RLIMIT_NOFILE, has room for)" : "");
}

int manager_settings_init(ManagerSettings *s) {
        *s = (ManagerSettings) {
                .max_sandboxes = SANDBOX_MAX_DEFAULT,
                .uid_base = SANDBOX_UID_BASE_DEFAULT,
                .tenancy.node.apply = true,
                .snapshots = {
                        .max_bytes_per_owner = SNAPSHOT_MAX_BYTES_PER_OWNER_DEFAULT,
                        .max_per_owner = SNAPSHOT_MAX_PER_OWNER_DEFAULT,
                },
        };
        s->state_dir = strdup(SANDBOX_RUNTIME_DIR);
        s->agent_path = strdup(SANDBOX_AGENT_PATH);
        s->bwrap_path = strdup(BWRAP_PATH);
        s->docker_socket = strdup(DOCKER_SOCKET_DEFAULT);
        if (!s->state_dir || !s->agent_path || !s->bwrap_path || !s->docker_socket ||
            strv_extend(&s->template_dirs, SANDBOX_VENDOR_TEMPLATE_DIR) < 0 ||
            strv_extend(&s->template_dirs, SANDBOX_ETC_TEMPLATE_DIR) < 0) {
                manager_settings_done(s);
                return -ENOMEM;
        }
        return 0;
}

void manager_settings_done(ManagerSettings *s) {
        s->template_dirs = strv_free(s->template_dirs);
        s->state_dir = mfree(s->state_dir);
        s->secrets_dir = mfree(s->secrets_dir);
        s->agent_path = mfree(s->agent_path);
        s->bwrap_path = mfree(s->bwrap_path);
        s->docker_socket = mfree(s->docker_socket);
        snapshot_settings_done(&s->snapshots);
        workspace_settings_done(&s->workspaces);
}

static int mkdir_mode(const char *path, mode_t mode) {
        if (mkdir(path, mode) < 0 && errno != EEXIST)
                return -errno;
        if (chmod(path, mode) < 0)
                return -errno;
        return 0;
}

/* An empty directory nobody can write to, bound read-only over the /proc directories a
 * sandbox must not see (bwrap_build_argv()). One that is not empty (only root could have
 * put anything there) is refused. */
static int manager_make_empty_dir(Manager *m) {
        struct dirent *de;
        DIR *d;
        int r = 0;

        if (asprintf(&m->payload_host.empty_dir, "%s/empty", m->settings.state_dir) < 0)
                return -ENOMEM;
        r = mkdir_mode(m->payload_host.empty_dir, 0555);
        if (r < 0)
                return r;
        d = opendir(m->payload_host.empty_dir);
        if (!d)
                return -errno;
        while (r >= 0 && (de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        r = log_error_errno(ENOTEMPTY, "%s is not empty; remove what is in it.", m->payload_host.empty_dir);
        closedir(d);
        return r;
}

int manager_new(sd_event *event, sd_bus *bus, ManagerSettings *settings, Manager **ret) {
        Manager *m;
        int r;

        m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        m->seccomp_fd = -EBADF;
        m->event = sd_event_ref(event);
        statistics_init(&m->statistics, now_usec(CLOCK_REALTIME));
        m->bus = sd_bus_ref(bus);
        for (PayloadKind k = 0; k < _PAYLOAD_KIND_MAX; k++)
                m->payload_ops[k] = payload_ops_get(k);
        m->settings = *settings;
        *settings = (ManagerSettings) {};

        r = system_bounds_read(&m->bounds);
        if (r < 0)
                goto fail;
        r = bwrap_find_proc_masks(&m->payload_host.proc_masks, &m->payload_host.proc_mask_dirs);
        if (r < 0)
                goto fail;
        /* Built once: every payload gets the same policy (sandboxd-seccomp(7)), as BPF for
         * bwrap and as a profile for Docker. */
        r = seccomp_policy_export_bpf(&m->seccomp_fd);
        if (r >= 0)
                r = seccomp_policy_to_docker_json(&m->payload_host.docker_seccomp_profile);
        if (r < 0) {
                log_error_errno(r, "Failed to build the seccomp policy: %m");
                goto fail;
        }
        /* Nothing is asked of Docker until a docker template is used. */
        r = docker_client_new(event, m->settings.docker_socket, &m->docker);
        if (r < 0)
                goto fail;
        r = systemd_client_new(bus, &m->systemd);
        if (r < 0)
                goto fail;
        /* Connected once a sandbox with EgressAllow= is ready (sandboxd-egress(8)). */
        r = egress_client_new(m, SANDBOX_EGRESS_SOCKET, &m->egress);
        if (r < 0)
                goto fail;
        r = renew_server_new(event, m->settings.agent_path, &m->renew_server);
        if (r < 0)
                goto fail;
        r = manager_quota_setup(m);
        if (r < 0)
                goto fail;
        /* Made by sandboxd-workspaces.service before we start: without it, every sandbox's
         * files are in memory (Storage=tmpfs), and Storage=disk says why not. */
        r = workspace_pool_open(m->settings.workspaces.directory ?: SANDBOX_WORKSPACE_DIR, SANDBOX_WORKSPACE_SOCKET,
                                event, &m->workspaces, &m->workspaces_missing);
        if (r < 0)
                goto fail;
        m->bounds.workspaces = m->workspaces;
        if (m->workspaces)
                log_debug("Workspaces on disk in %s.", workspace_pool_dir(m->workspaces));
        else
                log_warning("No workspaces on disk in %s (%s); sandboxes keep their files in memory.",
                            m->settings.workspaces.directory ?: SANDBOX_WORKSPACE_DIR, m->workspaces_missing);

        if (asprintf(&m->sandboxes_dir, "%s/sandboxes", m->settings.state_dir) < 0) {
                r = -ENOMEM;
                goto fail;
        }
        _cleanup_free_ char *sockets_dir = NULL;
        if (asprintf(&sockets_dir, "%s/sockets", m->settings.state_dir) < 0) {
                r = -ENOMEM;
                goto fail;
        }
        if (asprintf(&m->etc_root, "%s/etc", m->settings.state_dir) < 0) {
                r = -ENOMEM;
                goto fail;
        }
        /* Searchable: sandboxes' bwrap, running as their own uids, binds their /etc from
         * etc_root. What is private stays in the 0700 directories below. */
        r = mkdir_mode(m->settings.state_dir, 0711);
        if (r >= 0)
                r = mkdir_mode(m->etc_root, 0755);
        if (r >= 0)
                r = manager_make_empty_dir(m);
        if (r >= 0)
                r = mkdir_mode(m->sandboxes_dir, 0700);
        if (r >= 0)
                r = mkdir_mode(sockets_dir, 0700);
        if (r < 0) {
                log_error_errno(r, "Failed to create %s: %m", m->sandboxes_dir);
                goto fail;
        }
        /* Without its directory, only snapshots fail (and say why). */
        (void) snapshot_store_setup(m);
        m->payload_host.event = m->event;
        m->payload_host.systemd = m->systemd;
        m->payload_host.docker = m->docker;
        m->payload_host.renew_server = m->renew_server;
        m->payload_host.templates = &m->templates;
        m->payload_host.state_dir = m->settings.state_dir;
        m->payload_host.agent_path = m->settings.agent_path;
        m->payload_host.bwrap_path = m->settings.bwrap_path;
        m->payload_host.seccomp_fd = m->seccomp_fd;

        *ret = m;
        return 0;
fail:
        manager_free(m);
        return r;
}

const PayloadHost *manager_payload_host(Manager *m) {
        return &m->payload_host;
}

bool manager_knows_sandbox(Manager *m, const char *id) {
        return manager_find_sandbox(m, id);
}

const PayloadOps *manager_payload_ops(Manager *m, PayloadKind k) {
        assert(m);
        return k >= 0 && k < _PAYLOAD_KIND_MAX ? m->payload_ops[k] : NULL;
}

Manager *manager_free(Manager *m) {
        _cleanup_(sandbox_error_done) SandboxError gone = SANDBOX_ERROR_NULL;

        if (!m)
                return NULL;
        /* What the bus daemon would tell them once we are gone (sandboxd(8), "Restart"); said
         * here so that the calls and what they hold are let go of. */
        sandbox_error_set(&gone, SANDBOX_ERR_NO_REPLY, "sandboxd stopped before the call was answered.");
        /* Nobody is told of what follows: the subscribers are going too. */
        while (m->subscriptions) {
                ManagerSubscription *sub = m->subscriptions;
                LIST_REMOVE_WITH_TAIL(m->subscriptions, m->subscriptions_tail, sub);
                free(sub);
        }
        manager_logs_done(m);
        snapshot_store_done(m);
        workspace_exports_done(m);
        statistics_tenants_free(m);
        if (m->systemd)
                manager_quota_done(m);
        recycle_waiters_abandon(m, &gone);
        manager_start_waiters_abandon(m, &gone);
        while (m->sandboxes) {
                Sandbox *s = m->sandboxes;
                bool detach = s->saved && (s->state == SANDBOX_RUNNING || s->state == SANDBOX_PAUSED);

                sandbox_abandon_callers(s, &gone);
                manager_unlink_sandbox(m, s);
                /* Running sandboxes carry on under systemd, for the next sandboxd to adopt;
                 * one still starting has no state to be adopted by and goes. */
                if (detach) {
                        /* Its background processes, their output included, for the next. */
                        sandbox_save_processes(s, true);
                        sandbox_detach(s);
                }
                else
                        sandbox_free_internal(s);
        }
        systemd_client_free(m->systemd);
        m->systemd = NULL;
        m->egress = egress_client_free(m->egress);
        m->renew_server = renew_server_free(m->renew_server);
        m->workspaces = workspace_pool_free(m->workspaces);
        template_set_done(&m->templates);
        safe_close(m->seccomp_fd);
        free(m->payload_host.docker_seccomp_profile);
        docker_client_free(m->docker);
        strv_free(m->payload_host.proc_masks);
        strv_free(m->payload_host.proc_mask_dirs);
        free(m->sandboxes_dir);
        free(m->systemd_cgroup_root);
        free(m->etc_root);
        free(m->payload_host.empty_dir);
        sd_event_source_disable_unref(m->pool_timer);
        manager_settings_done(&m->settings);
        sd_bus_unref(m->bus);
        sd_event_unref(m->event);
        return mfree(m);
}

int manager_subscribe(Manager *m, const ManagerHooks *hooks, void *userdata, ManagerSubscription **ret) {
        ManagerSubscription *sub;

        assert_return(m, -EINVAL);
        assert_return(hooks, -EINVAL);

        sub = calloc(1, sizeof(ManagerSubscription));
        if (!sub)
                return -ENOMEM;
        *sub = (ManagerSubscription) { .manager = m, .hooks = *hooks, .userdata = userdata };
        LIST_APPEND(m->subscriptions, m->subscriptions_tail, sub);
        if (ret)
                *ret = sub;
        return 0;
}

static void manager_free_subscription(Manager *m, ManagerSubscription *sub) {
        LIST_REMOVE_WITH_TAIL(m->subscriptions, m->subscriptions_tail, sub);
        free(sub);
}

ManagerSubscription *manager_unsubscribe(ManagerSubscription *sub) {
        if (!sub)
                return NULL;
        if (sub->manager->notifying > 0) {
                /* A hook is being called: the list stays as it is until it returns. */
                sub->dead = true;
                return NULL;
        }
        manager_free_subscription(sub->manager, sub);
        return NULL;
}

static void manager_notify_end(Manager *m) {
        if (--m->notifying > 0)
                return;
        for (ManagerSubscription *sub = m->subscriptions, *next; sub; sub = next) {
                next = sub->next;
                if (sub->dead)
                        manager_free_subscription(m, sub);
        }
}

/* Calls hook of every subscriber that has it, with the arguments and its userdata. */
#define MANAGER_NOTIFY(m, hook, ...)                                                    \
        do {                                                                            \
                (m)->notifying++;                                                       \
                for (ManagerSubscription *_sub = (m)->subscriptions; _sub; _sub = _sub->next) \
                        if (!_sub->dead && _sub->hooks.hook)                            \
                                _sub->hooks.hook(__VA_ARGS__, _sub->userdata);          \
                manager_notify_end(m);                                                  \
        } while (0)

void manager_notify_added(Manager *m, Sandbox *s) {
        MANAGER_NOTIFY(m, sandbox_added, s);
}

void manager_notify_removed(Manager *m, Sandbox *s) {
        MANAGER_NOTIFY(m, sandbox_removed, s);
}

bool manager_records_execs(Manager *m) {
        for (ManagerSubscription *sub = m->subscriptions; sub; sub = sub->next)
                if (!sub->dead && sub->hooks.exec_record)
                        return true;
        return false;
}

void manager_record_exec(Manager *m, const ExecRecordEvent *ev) {
        MANAGER_NOTIFY(m, exec_record, ev);
}

void manager_record_snapshot(Manager *m, const SnapshotRecordEvent *ev) {
        MANAGER_NOTIFY(m, snapshot_record, ev);
}

static void report_template(const char *path, const char *error, void *userdata) {
        log_warning("Ignoring template %s: %s", path, error);
}

/* Reads every template directory again; the set is replaced only once all is read. */
static int manager_reload_templates(Manager *m) {
        int r;

        r = template_set_load(&m->templates, m->settings.template_dirs, report_template, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to load templates: %m");

        /* Each bwrap template's /etc, written once here: a sandbox only binds it. */
        for (size_t i = 0; i < m->templates.n;) {
                Template *t = m->templates.templates[i];

                if (t->payload == PAYLOAD_BWRAP) {
                        r = etc_tree_write(t, "/etc", m->etc_root, &t->etc_dir);
                        if (r < 0) {
                                log_warning_errno(r, "Ignoring template %s: cannot write its /etc in %s: %m",
                                                  t->name, m->etc_root);
                                template_set_remove(&m->templates, i);
                                continue;
                        }
                }
                i++;
        }
        return (int) m->templates.n;
}

static void manager_record_template(Manager *m, const Template *t, uint64_t now) {
        MANAGER_NOTIFY(m, template_record, &(TemplateRecordEvent) {
                .name = t->name,
                .payload = payload_kind_to_string(t->payload),
                .description = t->description,
                .loaded_at = now,
        });
}

int manager_load_templates(Manager *m) {
        uint64_t now = now_usec(CLOCK_REALTIME);
        int r;

        r = manager_reload_templates(m);
        if (r < 0)
                return r;
        if (r == 0)
                log_warning("No templates found; every CreateSandbox will fail.");
        for (size_t i = 0; i < m->templates.n; i++)
                manager_record_template(m, m->templates.templates[i], now);
        return r;
}

const char *manager_writable_template_dir(Manager *m) {
        size_t n = strv_length(m->settings.template_dirs);
        return n > 0 ? m->settings.template_dirs[n - 1] : NULL;
}

/* text as dir/name.json, all or nothing, on disk before it counts. */
static int write_template_file(const char *dir, const char *name, const char *text) {
        _cleanup_free_ char *path = NULL, *tmp = NULL;

        /* Hidden (the loader skips dot files) until complete. */
        if (asprintf(&path, "%s/%s.json", dir, name) < 0 || asprintf(&tmp, "%s/.%s.json.tmp", dir, name) < 0)
                return -ENOMEM;
        return write_file_atomic(path, tmp, text, strlen(text), 0644, /* sync= */ true);
}

int manager_create_template(Manager *m, const char *name, const char *json, SandboxError *error) {
        _cleanup_(template_freep) Template *t = NULL;
        _cleanup_free_ char *why = NULL;

        assert_return(m, -EINVAL);
        assert_return(name, -EINVAL);
        assert_return(json, -EINVAL);

        const char *dir = manager_writable_template_dir(m);
        int r;

        if (!dir)
                return sandbox_error_set(error, SANDBOX_ERR_NOT_SUPPORTED, "sandboxd has no template directory.");
        if (!template_name_is_valid(name))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Invalid template name '%.64s': 1 to %u of A-Z a-z 0-9 . _ -, not starting "
                                         "with a dot.", name, TEMPLATE_NAME_MAX);
        /* As template_load_file() takes a file: its size, then the loader itself. */
        if (strlen(json) >= TEMPLATE_FILE_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Template %s: %u bytes or more.", name, TEMPLATE_FILE_MAX);
        r = template_parse(name, json, &t, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "Template %s: %s", name,
                                         why ?: "invalid");
        if (t->payload == PAYLOAD_BWRAP) {
                /* What the load after the write would do, and refuse the template for. */
                r = etc_tree_write(t, "/etc", m->etc_root, &t->etc_dir);
                if (r < 0)
                        return sandbox_error_set_errno(error, -r, "Template %s: cannot write its /etc in %s: %m",
                                                       name, m->etc_root);
        }

        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return sandbox_error_set_errno(error, errno, "Failed to create %s: %m", dir);
        r = write_template_file(dir, name, json);
        if (r < 0)
                return sandbox_error_set_errno(error, -r, "Failed to write template %s to %s: %m", name, dir);
        log_info("Template %s written to %s/%s.json.", name, dir, name);

        r = manager_reload_templates(m);
        if (r < 0)
                return sandbox_error_set_errno(error, -r, "Failed to load the templates again: %m");
        pool_drop_template(m, name);
        pool_schedule_refill(m, 0);
        /* What was loaded is what the file says: the template just parsed. */
        manager_record_template(m, t, now_usec(CLOCK_REALTIME));
        return 0;
}

int manager_remove_template(Manager *m, const char *name, SandboxError *error) {
        _cleanup_free_ char *path = NULL;

        assert_return(m, -EINVAL);
        assert_return(name, -EINVAL);

        const char *dir = manager_writable_template_dir(m);
        int r;

        if (!template_name_is_valid(name) || !dir)
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_TEMPLATE, "No template '%.64s'.", name);
        if (asprintf(&path, "%s/%s.json", dir, name) < 0)
                return -ENOMEM;
        if (unlink(path) < 0) {
                if (errno != ENOENT)
                        return sandbox_error_set_errno(error, errno, "Failed to remove %s: %m", path);
                if (template_set_find(&m->templates, name))
                        return sandbox_error_set(error, SANDBOX_ERR_TEMPLATE_READ_ONLY,
                                                 "Template %s is shipped with sandboxd and cannot be removed; a "
                                                 "template of that name created in %s overrides it.", name, dir);
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_TEMPLATE, "No template '%s'.", name);
        }
        log_info("Template %s removed from %s.", name, dir);

        r = manager_reload_templates(m);
        if (r < 0)
                return sandbox_error_set_errno(error, -r, "Failed to load the templates again: %m");
        pool_drop_template(m, name);
        pool_schedule_refill(m, 0);
        return 0;
}

const TemplateSet *manager_get_templates(Manager *m) {
        return &m->templates;
}

/* The bucket of an id: its first three hex digits (ids are random). */
static unsigned id_bucket(const char *id) {
        unsigned b = 0;

        for (size_t i = 0; i < 3; i++)
                b = b << 4 | (unsigned) (id[i] <= '9' ? id[i] - '0' : id[i] - 'a' + 10);
        return b % MANAGER_BUCKETS;
}

static unsigned uid_bucket(uid_t uid) {
        return (unsigned) uid % MANAGER_BUCKETS;
}

bool manager_host_uid_in_use(Manager *m, uid_t uid) {
        for (Sandbox *s = m->by_uid[uid_bucket(uid)]; s; s = s->uid_next)
                if (s->host_uid == uid)
                        return true;
        return false;
}

Sandbox *manager_find_sandbox(Manager *m, const char *id) {
        if (!sandbox_id_is_valid(id))
                return NULL;
        for (Sandbox *s = m->by_id[id_bucket(id)]; s; s = s->id_next)
                if (streq(s->id, id))
                        return s;
        return NULL;
}

/* A recycled sandbox's id is its current user's, its unit still named after its first
 * (recycle.c): found by the unit's name. A walk, for the rare unit not found by id. */
Sandbox *manager_find_by_unit(Manager *m, const char *unit) {
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (streq_ptr(s->unit, unit))
                        return s;
        return NULL;
}

void manager_rename_sandbox(Manager *m, Sandbox *s, const char *id) {
        for (Sandbox **p = &m->by_id[id_bucket(s->id)]; *p; p = &(*p)->id_next)
                if (*p == s) {
                        *p = s->id_next;
                        break;
                }
        strcpy(s->id, id);
        s->id_next = m->by_id[id_bucket(s->id)];
        m->by_id[id_bucket(s->id)] = s;
}

Sandbox *manager_get_sandbox(Manager *m, const char *id) {
        Sandbox *s = manager_find_sandbox(m, id);
        return s && !sandbox_is_pooled(s) ? s : NULL;
}

/* The live sandbox named name of owner for tenant ("": none). */
Sandbox *manager_find_named(Manager *m, uid_t owner, const char *tenant, const char *name) {
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (!sandbox_is_pooled(s) && s->owner == owner && s->state != SANDBOX_STOPPING && s->state != SANDBOX_DEAD &&
                    streq(s->config.name, name) && streq(s->config.tenant, tenant))
                        return s;
        return NULL;
}

int manager_lookup_sandbox(Manager *m, const SandboxCaller *caller, const char *id_or_name, Sandbox **ret,
                           SandboxError *error) {
        Sandbox *s = NULL;

        assert_return(m, -EINVAL);
        assert_return(caller, -EINVAL);
        assert_return(id_or_name, -EINVAL);
        assert_return(ret, -EINVAL);

        if (sandbox_id_is_valid(id_or_name))
                s = manager_get_sandbox(m, id_or_name);
        else if (sandbox_name_is_valid(id_or_name))
                s = manager_find_named(m, caller->uid, strempty(caller->tenant), id_or_name);
        /* Another tenant's sandbox is not there for a caller acting for one. */
        if (!s || !sandbox_access_tenant_matches(caller, s->config.tenant))
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_SANDBOX, "No sandbox '%.64s'.", id_or_name);
        *ret = s;
        return 0;
}

Sandbox *manager_next_sandbox(Manager *m, Sandbox *prev) {
        Sandbox *s = prev ? prev->next : m->sandboxes;
        while (s && sandbox_is_pooled(s))
                s = s->next;
        return s;
}

Sandbox *manager_next_visible_sandbox(Manager *m, Sandbox *prev, const SandboxCaller *caller) {
        Sandbox *s = manager_next_sandbox(m, prev);
        while (s && !sandbox_access_visible(caller, s->owner, s->config.tenant))
                s = manager_next_sandbox(m, s);
        return s;
}

static bool sandbox_list_query_matches(const SandboxListQuery *q, Sandbox *s) {
        return (q->state < 0 || (int) sandbox_get_state(s) == q->state) &&
               labels_match(s->config.labels, q->labels) &&
               (!q->template_name[0] || streq(q->template_name, sandbox_get_template(s))) &&
               (!q->name[0] || streq(q->name, sandbox_get_name(s)));
}

int manager_list_sandboxes(Manager *m, const SandboxCaller *caller, const SandboxListQuery *q,
                           int (*cb)(Sandbox *s, void *userdata), void *userdata, uint64_t *ret_total) {
        uint64_t matched = 0, given = 0;
        int r;

        assert_return(m, -EINVAL);
        assert_return(caller, -EINVAL);
        assert_return(q, -EINVAL);
        assert_return(cb, -EINVAL);

        for (Sandbox *s = manager_next_visible_sandbox(m, NULL, caller); s;
             s = manager_next_visible_sandbox(m, s, caller)) {
                if (!sandbox_list_query_matches(q, s))
                        continue;
                if (matched++ < q->offset || (q->limit > 0 && given >= q->limit))
                        continue;
                given++;
                r = cb(s, userdata);
                if (r < 0)
                        return r;
        }
        if (ret_total)
                *ret_total = matched;
        return 0;
}

size_t manager_n_sandboxes(Manager *m) {
        return m->n_sandboxes;
}

void manager_sandbox_state_changed(Manager *m, Sandbox *s) {
        if (s->start_counted && s->state != SANDBOX_STARTING)
                manager_start_done(m, s);
        if (!sandbox_is_pooled(s))
                MANAGER_NOTIFY(m, sandbox_state_changed, s);
}

void manager_record_sandbox(Manager *m, Sandbox *s, const char *end_reason) {
        /* A pooled one is nobody's yet; a released one's row ended when it was released
         * (its next user gets a row of its own, under a new id). */
        if (s->custody == SANDBOX_POOLED || s->record_closed)
                return;
        MANAGER_NOTIFY(m, sandbox_record, &(SandboxRecordEvent) {
                .sandbox_id = s->id,
                .template_name = s->template_name,
                .payload = s->payload_ops->name,
                .owner = s->owner,
                .config = &s->config,
                .created_at = s->created_at,
                .destroyed_at = end_reason ? now_usec(CLOCK_REALTIME) : 0,
                .end_reason = end_reason,
        });
}

void manager_link_sandbox(Manager *m, Sandbox *s) {
        Sandbox **id_head = &m->by_id[id_bucket(s->id)], **uid_head = &m->by_uid[uid_bucket(s->host_uid)];

        LIST_APPEND(m->sandboxes, m->sandboxes_tail, s);
        s->id_next = *id_head;
        *id_head = s;
        s->uid_next = *uid_head;
        *uid_head = s;
        if (sandbox_is_pooled(s))
                pool_chain_add(m, s);
        m->n_sandboxes++;
        if (!sandbox_is_pooled(s))
                MANAGER_NOTIFY(m, sandbox_added, s);
}

void manager_unlink_sandbox(Manager *m, Sandbox *s) {
        if (s->start_counted)
                manager_start_done(m, s);
        LIST_REMOVE_WITH_TAIL(m->sandboxes, m->sandboxes_tail, s);
        for (Sandbox **p = &m->by_id[id_bucket(s->id)]; *p; p = &(*p)->id_next)
                if (*p == s) {
                        *p = s->id_next;
                        break;
                }
        for (Sandbox **p = &m->by_uid[uid_bucket(s->host_uid)]; *p; p = &(*p)->uid_next)
                if (*p == s) {
                        *p = s->uid_next;
                        break;
                }
        s->id_next = s->uid_next = NULL;
        m->n_sandboxes--;

        if (sandbox_is_pooled(s)) {
                pool_unlinked(m, s);
                return;
        }
        MANAGER_NOTIFY(m, sandbox_removed, s);
}

/* What the template says its sandboxes need from the host ("requires"), there; else
 * NotSupported with the command that installs it. */
static int manager_template_check_requires(const Template *t, SandboxError *error) {
        for (char **p = t->requires; p && p[0] && p[1]; p += 2)
                if (access(p[0], F_OK) < 0)
                        return sandbox_error_set(error, SANDBOX_ERR_NOT_SUPPORTED,
                                                 "Template %s needs %s, which is not installed on this host. "
                                                 "As root: %s", t->name, p[0], p[1]);
        return 0;
}

int manager_start_sandbox(Manager *m, const Template *t, SandboxConfig *config, uid_t owner, bool pooled,
                                 sandbox_callback_t cb, void *userdata, SandboxError *error) {
        int r;

        r = manager_config_resolve(m, t, config, error);
        if (r >= 0)
                r = sandbox_config_egress_defaults(config, t->egress_allow, t->egress_deny, error);
        if (r >= 0 && !pooled)
                r = sandbox_config_secrets_defaults(config, t->secrets, error);
        if (r >= 0)
                r = manager_template_check_requires(t, error);
        if (r >= 0 && !config->idle_timeout_set && t->idle_timeout_sec > 0) {
                config->idle_timeout_sec = t->idle_timeout_sec;
                config->idle_timeout_set = true;
        }
        if (r >= 0 && !config->idle_action_set && t->idle_action_set) {
                config->idle_action = t->idle_action;
                config->idle_action_set = true;
        }
        if (r >= 0)
                r = sandbox_secrets_check(m, t, owner, config, error);
        if (r < 0)
                return r;
        /* A caller's create takes its turn among its owner's (tenant's); the pool's do not
         * wait. */
        if (pooled)
                return manager_start_sandbox_now(m, t, config, owner, true, cb, userdata, error);
        return manager_start_admitted(m, t, config, owner, cb, userdata, error);
}

int manager_start_sandbox_now(Manager *m, const Template *t, SandboxConfig *config, uid_t owner, bool pooled,
                              sandbox_callback_t cb, void *userdata, SandboxError *error) {
        Sandbox *s;
        int r;

        r = sandbox_new(m, t, config, owner, &s);
        if (r < 0)
                return sandbox_error_set_errno(error, r, "Failed to allocate sandbox: %m");
        s->custody = pooled ? SANDBOX_POOLED : SANDBOX_OWNED; /* born so */

        manager_link_sandbox(m, s);
        if (!pooled)
                manager_start_counted(m, s);

        r = sandbox_start(s, cb, userdata);
        if (r < 0) {
                STATISTICS_COUNT(m, sandbox_get_tenant(s), create_failures);
                manager_unlink_sandbox(m, s);
                sandbox_free_internal(s);
                if (r == -EMFILE || r == -ENFILE)
                        return sandbox_error_set(error, SANDBOX_ERR_TOO_MANY_SANDBOXES,
                                                 "Failed to start sandbox: sandboxd is out of file descriptors "
                                                 "(%u sandboxes, RLIMIT_NOFILE): %s", (unsigned) m->n_sandboxes,
                                                 strerror(-r));
                return sandbox_error_set(error, SANDBOX_ERR_SANDBOX_FAILED, "Failed to start sandbox: %s",
                                          strerror(-r));
        }

        log_sandbox(s, sandbox_lifecycle_log_level(s), 0, "Sandbox %s (template %s, %s%u) starting.", s->id,
                    t->name, pooled ? "for the pool, " : "owner ", pooled ? t->pool : owner);
        return 0;
}

int manager_create_sandbox(Manager *m, const SandboxCaller *caller, const char *template_name,
                           SandboxConfig *config, sandbox_callback_t cb, void *userdata,
                           SandboxError *error) {
        assert_return(m, -EINVAL);
        assert_return(caller, -EINVAL);
        assert_return(config, -EINVAL);
        assert_return(cb, -EINVAL);

        uid_t owner = caller->uid;
        const Template *t;
        Sandbox *s;
        int r;

        r = sandbox_access_create(caller, config, error);
        if (r < 0)
                return r;
        if (isempty(template_name))
                template_name = "shell";
        t = template_name_is_valid(template_name) ? template_set_find(&m->templates, template_name) : NULL;
        if (!t)
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_TEMPLATE,
                                         "No template '%.64s'.", template_name);

        s = isempty(config->name) ? NULL : manager_find_named(m, owner, config->tenant, config->name);
        if (s) {
                if (!config->reuse_existing)
                        return sandbox_error_set(error, SANDBOX_ERR_SANDBOX_EXISTS,
                                                 "A sandbox named '%s' exists already: %s.", s->config.name, s->id);
                if (!streq(s->template_name, t->name))
                        return sandbox_error_set(error, SANDBOX_ERR_SANDBOX_EXISTS,
                                                 "Sandbox '%s' (%s) is of template %s, not %s.", s->config.name,
                                                 s->id, s->template_name, t->name);
                /* GetOrCreate: the one there, as it is (the call's other options do not
                 * change it), once it runs; a stopped one (files on disk, no processes)
                 * started again in its workspace, as Wake does. */
                if (sandbox_get_state(s) == SANDBOX_STOPPED) {
                        r = sandbox_wake_stopped(s, cb, userdata);
                        if (r < 0)
                                return sandbox_error_set_errno(error, r, "Failed to start sandbox %s again: %m", s->id);
                        return 0;
                }
                r = sandbox_wait_started(s, cb, userdata);
                if (r < 0)
                        return sandbox_error_set_errno(error, r, "Failed to wait for sandbox %s: %m", s->id);
                return 0;
        }

        /* The admin's maxima and the quota of its tenant (or owner), before anything starts. */
        r = manager_quota_check(m, t, owner, config, error);
        if (r < 0)
                return r;

        /* With files of a snapshot: a sandbox of its own, started for it. */
        if (!isempty(config->from_snapshot))
                return snapshot_create_sandbox(m, caller, t, config, cb, userdata, error);

        return pool_acquire_or_start(m, owner, t, config, true, cb, userdata, error);
}


static void on_orphan_stopped(const char *result, const sd_bus_error *error, void *userdata) {
        if (error)
                log_warning("Failed to stop an orphaned sandbox unit: %s", error->message);
}

static void manager_forget_fd(const char *name) {
        if (getenv("NOTIFY_SOCKET"))
                (void) sd_notifyf(false, "FDSTOREREMOVE=1\nFDNAME=%s", name);
}

/* Startup only (before we serve): asking systemd synchronously is fine here. */
static bool unit_is_active(Manager *m, const char *unit) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL, *state = NULL;

        if (sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &path) < 0)
                return false;
        if (sd_bus_get_property_string(m->bus, "org.freedesktop.systemd1", path, "org.freedesktop.systemd1.Unit",
                                       "ActiveState", &error, &state) < 0)
                return false;
        return streq(state, "active") || streq(state, "reloading");
}

/* Units of ours that no sandbox goes with, but for those stopped already (the sandboxes
 * not adopted). */
static int manager_stop_orphans(Manager *m, char **stopped) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *name;
        int r;

        r = sd_bus_call_method(m->bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "ListUnitsByPatterns", &error, &reply,
                               "asas", 0, 2, "sandbox-*.scope", "sandbox-?*.slice");
        if (r < 0)
                return log_warning_errno(r, "Failed to list sandbox units: %s", error.message);
        r = sd_bus_message_enter_container(reply, 'a', "(ssssssouso)");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(reply, "(ssssssouso)", &name, NULL, NULL, NULL, NULL, NULL, NULL,
                                        NULL, NULL, NULL)) > 0) {
                char id[SANDBOX_ID_LEN + 1], suffix[8];
                /* Only names we give: sandbox-<16 hex>.scope or .slice. */
                if (sscanf(name, "sandbox-%16[0-9a-f].%7s", id, suffix) != 2 || strlen(id) != SANDBOX_ID_LEN ||
                    (!streq(suffix, "scope") && !streq(suffix, "slice")))
                        continue;
                if (manager_find_sandbox(m, id) || manager_find_by_unit(m, name) || strv_contains(stopped, name))
                        continue;
                log_warning("Stopping %s: no sandbox of ours goes with it (left by a sandboxd that crashed while starting it?).", name);
                (void) unit_stop(m->systemd, name, on_orphan_stopped, NULL);
        }
        return r;
}

/* The stored descriptor named name, taken (its name blanked), or -EBADF. */
static int take_stored_fd(char **names, int n_fds, const char *name) {
        for (int i = 0; i < n_fds; i++)
                if (names && names[i] && streq(names[i], name)) {
                        names[i][0] = 0;
                        return SD_LISTEN_FDS_START + i;
                }
        return -EBADF;
}

typedef struct StoredFds {
        char **names;
        int n;
} StoredFds;

static int take_stored_fd_of(void *userdata, const char *name) {
        StoredFds *f = userdata;
        return take_stored_fd(f->names, f->n, name);
}

static bool workspace_is_live(const char *id, void *userdata) {
        return manager_find_sandbox(userdata, id);
}

int manager_load_stopped(Manager *m, const char *id) {
        _cleanup_(sandbox_persist_done) SandboxPersist st = {};
        _cleanup_free_ char *path = NULL;
        Sandbox *s;
        int r;

        if (!m->workspaces || !sandbox_id_is_valid(id) || manager_find_sandbox(m, id) ||
            !workspace_exists(m->workspaces, id))
                return 0;
        if (asprintf(&path, "%s/%s.json", workspace_pool_dir(m->workspaces), id) < 0)
                return -ENOMEM;
        r = sandbox_persist_load(path, &st);
        if (r == -ENOENT)
                return 0;  /* no record: an orphan */
        if (r < 0)
                return log_warning_errno(r, "Failed to read %s, removing its workspace: %m", path);
        if (st.config.ephemeral || st.pooled || st.released || !streq(st.id, id))
                return 0;  /* nobody's to come back to */
        r = sandbox_new_stopped(m, &st, &s);
        if (r < 0)
                return log_warning_errno(r, "Failed to list sandbox %s (stopped), removing its workspace: %m", id);
        manager_link_sandbox(m, s);
        log_sandbox(s, LOG_INFO, 0, "Sandbox %s has files and no processes (stopped); Wake starts it again.", id);
        return 1;
}

Sandbox *manager_find_stopped(Manager *m, const SandboxCaller *caller, const char *id_or_name) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
        Sandbox *s;

        if (manager_lookup_sandbox(m, caller, id_or_name, &s, &e) < 0 || s->state != SANDBOX_STOPPED ||
            !sandbox_access_visible(caller, s->owner, s->config.tenant))
                return NULL;
        return s;
}

/* Workspaces whose sandboxes do not run (a reboot ended them, or sandboxd's end ended a
 * stopped one's listing): listed as stopped sandboxes, for Wake or Destroy. */
static unsigned manager_load_all_stopped(Manager *m) {
        struct dirent *de;
        unsigned n = 0;
        DIR *d;

        d = opendir(workspace_pool_dir(m->workspaces));
        if (!d)
                return 0;
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && manager_load_stopped(m, de->d_name) > 0)
                        n++;
        closedir(d);
        return n;
}

int manager_adopt_sandboxes(Manager *m) {
        _cleanup_strv_free_ char **names = NULL, **units_stopped = NULL;
        unsigned adopted = 0;
        struct dirent *de;
        DIR *d;
        int n_fds;

        n_fds = sd_listen_fds_with_names(true, &names);
        if (n_fds < 0) {
                log_warning_errno(n_fds, "Failed to get stored descriptors, ignoring: %m");
                n_fds = 0;
        }

        d = opendir(m->sandboxes_dir);
        while (d && (de = readdir(d))) {
                _cleanup_free_ char *path = NULL, *why = NULL, *unit = NULL;
                _cleanup_close_ int fd = -EBADF, pidfd = -EBADF;
                SandboxPersist st = {};
                char fdname[64];
                size_t n = strlen(de->d_name);
                Sandbox *s;
                int r;

                if (de->d_name[0] == '.' || n <= 5 || !streq(de->d_name + n - 5, ".json"))
                        continue;
                if (asprintf(&path, "%s/%s", m->sandboxes_dir, de->d_name) < 0)
                        break;
                r = sandbox_persist_load(path, &st);
                if (r < 0) {
                        log_warning_errno(r, "Ignoring unreadable sandbox state %s: %m", path);
                        (void) unlink(path);
                        continue;
                }

                unit = st.unit ? strdup(st.unit) : sandbox_unit_name(st.id, "scope");
                if (!unit) {
                        sandbox_persist_done(&st);
                        break;
                }
                snprintf(fdname, sizeof(fdname), "ctl-%s", st.id);
                fd = take_stored_fd(names, n_fds, fdname);

                if (fd < 0)
                        why = strdup(st.config.ephemeral && !st.pooled ?
                                     "it is ephemeral, its one command went with the sandboxd that ran it" :
                                     "its control socket was not kept (sandboxd not run by systemd?)");
                else if (!unit_is_active(m, unit))
                        why = strdup("its unit is gone");
                else if (st.payload_pid > 0 &&
                         ((pidfd = (int) syscall(SYS_pidfd_open, st.payload_pid, 0)) < 0 ||
                          !payload_pid_in_unit(st.payload_pid, unit)))
                        why = strdup("its payload process is gone");
                else {
                        /* Alive and in its unit (checked holding it): from here on its
                         * end shows as the end of its control socket. */
                        pidfd = safe_close(pidfd);
                        r = sandbox_adopt(m, &st, TAKE_FD(fd), &s);
                        if (r >= 0) {
                                /* Their drivers' pipes were the last sandboxd's: they end. */
                                sandbox_contexts_add_lost(s, st.contexts, CONTEXT_LOST_RESTARTED);
                                char egr[64];

                                /* Its proxy, to be given to sandboxd-egress again (which may
                                 * have restarted too; if not, it takes the same socket). */
                                snprintf(egr, sizeof(egr), "egr-%s", st.id);
                                s->egress_fd = take_stored_fd(names, n_fds, egr);
                                if (s->egress_fd >= 0 && sandbox_config_has_egress(&s->config))
                                        egress_client_add(m->egress, s);
                                r = sandbox_adopt_processes(s, take_stored_fd_of,
                                                            &(StoredFds) { .names = names, .n = n_fds });
                                if (r < 0)
                                        log_sandbox(s, LOG_WARNING, r,
                                                    "Failed to take up the background processes of %s: %m", s->id);
                                adopted++;
                                sandbox_persist_done(&st);
                                continue;
                        }
                        if (asprintf(&why, "it could not be taken up: %s", strerror(-r)) < 0)
                                why = NULL;
                }

                log_warning("Not adopting sandbox %s: %s; stopping it.", st.id, strempty(why));
                (void) unit_stop(m->systemd, unit, on_orphan_stopped, NULL);
                (void) strv_extend(&units_stopped, unit);   /* not again as an orphan */
                (void) sandbox_persist_remove(m->sandboxes_dir, st.id);
                sandbox_remove_processes(m->sandboxes_dir, st.id);
                manager_forget_fd(fdname);
                snprintf(fdname, sizeof(fdname), "egr-%s", st.id);   /* if it had one */
                manager_forget_fd(fdname);
                sandbox_persist_done(&st);
        }
        if (d)
                closedir(d);

        /* Stored descriptors of ours nothing claimed. Others (the varlink socket unit's)
         * are the daemon's. */
        for (int i = 0; i < n_fds; i++)
                if (names && names[i] && (startswith_str(names[i], "ctl-") || startswith_str(names[i], "egr-") ||
                                          startswith_str(names[i], "out-") || startswith_str(names[i], "err-"))) {
                        safe_close(SD_LISTEN_FDS_START + i);
                        manager_forget_fd(names[i]);
                }

        (void) manager_stop_orphans(m, units_stopped);
        if (m->workspaces) {
                unsigned stopped = manager_load_all_stopped(m);
                if (stopped > 0)
                        log_info("%u sandbox(es) with files and no processes (stopped).", stopped);
                workspace_remove_orphans(m->workspaces, workspace_is_live, m);
        }
        for (PayloadKind k = 0; k < _PAYLOAD_KIND_MAX; k++)
                if (m->payload_ops[k]->remove_orphans)
                        m->payload_ops[k]->remove_orphans(m);
        pool_schedule_refill(m, 0);
        if (adopted > 0)
                log_info("Adopted %u running sandbox(es).", adopted);
        return (int) adopted;
}

int manager_drain_pool(Manager *m, void (*cb)(void *userdata), void *userdata) {
        assert_return(m, -EINVAL);
        assert_return(cb, -EINVAL);

        return pool_drain(m, cb, userdata);
}
