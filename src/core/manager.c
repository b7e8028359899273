/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <sys/stat.h>

#include "config.h"
#include "log.h"
#include "seccomp-policy.h"
#include "sandbox-errors.h"
#include "sandbox-internal.h"
#include "strv.h"

int manager_settings_init(ManagerSettings *s) {
        *s = (ManagerSettings) {
                .max_sandboxes = SANDBOX_MAX_DEFAULT,
                .uid_base = SANDBOX_UID_BASE_DEFAULT,
        };
        s->state_dir = strdup(SANDBOX_STATE_DIR);
        s->agent_path = strdup(SANDBOX_AGENT_PATH);
        s->bwrap_path = strdup(BWRAP_PATH);
        if (!s->state_dir || !s->agent_path || !s->bwrap_path ||
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
        s->agent_path = mfree(s->agent_path);
        s->bwrap_path = mfree(s->bwrap_path);
}

static int mkdir_mode(const char *path, mode_t mode) {
        if (mkdir(path, mode) < 0 && errno != EEXIST)
                return -errno;
        if (chmod(path, mode) < 0)
                return -errno;
        return 0;
}

int manager_new(sd_event *event, sd_bus *bus, ManagerSettings *settings, Manager **ret) {
        Manager *m;
        int r;

        m = calloc(1, sizeof(Manager));
        if (!m)
                return -ENOMEM;
        m->seccomp_fd = -EBADF;
        m->event = sd_event_ref(event);
        m->bus = sd_bus_ref(bus);
        m->settings = *settings;
        *settings = (ManagerSettings) {};

        r = system_bounds_read(&m->bounds);
        if (r < 0)
                goto fail;
        r = bwrap_find_proc_masks(&m->proc_masks, &m->proc_mask_dirs);
        if (r < 0)
                goto fail;
        /* Built once: every payload gets the same policy (sandboxd-seccomp(7)). */
        r = seccomp_policy_export_bpf(&m->seccomp_fd);
        if (r < 0) {
                log_error_errno(r, "Failed to build the seccomp policy: %m");
                goto fail;
        }
        r = systemd_client_new(bus, &m->systemd);
        if (r < 0)
                goto fail;

        r = mkdir_mode(m->settings.state_dir, 0700);
        if (r < 0) {
                log_error_errno(r, "Failed to create %s: %m", m->settings.state_dir);
                goto fail;
        }

        *ret = m;
        return 0;
fail:
        manager_free(m);
        return r;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        /* Sandboxes still here were not destroyed: their units carry on under systemd. */
        while (m->sandboxes) {
                Sandbox *s = m->sandboxes;
                s->create_cb = NULL;
                while (s->waiters) {
                        DestroyWaiter *w = s->waiters;
                        s->waiters = w->next;
                        free(w);
                }
                manager_unlink_sandbox(m, s);
                s->manager = m;
                sandbox_free_internal(s);
        }
        systemd_client_free(m->systemd);
        m->systemd = NULL;
        template_set_done(&m->templates);
        safe_close(m->seccomp_fd);
        strv_free(m->proc_masks);
        strv_free(m->proc_mask_dirs);
        manager_settings_done(&m->settings);
        sd_bus_unref(m->bus);
        sd_event_unref(m->event);
        return mfree(m);
}

void manager_set_hooks(Manager *m, const ManagerHooks *hooks) {
        m->hooks = *hooks;
}

static void report_template(const char *path, const char *error, void *userdata) {
        log_warning("Ignoring template %s: %s", path, error);
}

int manager_load_templates(Manager *m) {
        int r;

        r = template_set_load(&m->templates, m->settings.template_dirs, report_template, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to load templates: %m");
        if (r == 0)
                log_warning("No templates found; every CreateSandbox will fail.");
        return r;
}

const TemplateSet *manager_get_templates(Manager *m) {
        return &m->templates;
}

bool manager_host_uid_in_use(Manager *m, uid_t uid) {
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (s->host_uid == uid)
                        return true;
        return false;
}

Sandbox *manager_get_sandbox(Manager *m, const char *id) {
        if (!sandbox_id_is_valid(id))
                return NULL;
        for (Sandbox *s = m->sandboxes; s; s = s->next)
                if (streq(s->id, id))
                        return s;
        return NULL;
}

Sandbox *manager_next_sandbox(Manager *m, Sandbox *prev) {
        return prev ? prev->next : m->sandboxes;
}

size_t manager_n_sandboxes(Manager *m) {
        return m->n_sandboxes;
}

void manager_sandbox_state_changed(Manager *m, Sandbox *s) {
        if (m->hooks.sandbox_state_changed)
                m->hooks.sandbox_state_changed(s, m->hooks.userdata);
}

void manager_unlink_sandbox(Manager *m, Sandbox *s) {
        if (s->prev)
                s->prev->next = s->next;
        else
                m->sandboxes = s->next;
        if (s->next)
                s->next->prev = s->prev;
        else
                m->sandboxes_tail = s->prev;
        s->next = s->prev = NULL;
        m->n_sandboxes--;

        if (m->hooks.sandbox_removed)
                m->hooks.sandbox_removed(s, m->hooks.userdata);
        if (m->n_sandboxes == 0 && m->all_destroyed_cb) {
                void (*cb)(void *) = m->all_destroyed_cb;
                m->all_destroyed_cb = NULL;
                cb(m->all_destroyed_userdata);
        }
}

int manager_create_sandbox(Manager *m, const char *template_name, SandboxConfig *config,
                           uid_t owner, sandbox_callback_t cb, void *userdata,
                           sd_bus_error *error) {
        const Template *t;
        Sandbox *s;
        int r;

        if (isempty(template_name))
                template_name = "shell";
        t = template_name_is_valid(template_name) ? template_set_find(&m->templates, template_name) : NULL;
        if (!t)
                return sandbox_error_setf(error, SANDBOX_ERROR_NO_SUCH_TEMPLATE,
                                         "No template '%.64s'.", template_name);
        if (m->n_sandboxes >= m->settings.max_sandboxes)
                return sandbox_error_setf(error, SANDBOX_ERROR_TOO_MANY_SANDBOXES,
                                         "The maximum of %u sandboxes is reached.", m->settings.max_sandboxes);
        r = sandbox_config_finalize(config, &t->limits, &m->bounds, error);
        if (r < 0)
                return r;

        r = sandbox_new(m, t, config, owner, &s);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Failed to allocate sandbox: %m");

        s->prev = m->sandboxes_tail;
        if (m->sandboxes_tail)
                m->sandboxes_tail->next = s;
        else
                m->sandboxes = s;
        m->sandboxes_tail = s;
        m->n_sandboxes++;
        if (m->hooks.sandbox_added)
                m->hooks.sandbox_added(s, m->hooks.userdata);

        r = sandbox_start(s, cb, userdata);
        if (r < 0) {
                manager_unlink_sandbox(m, s);
                sandbox_free_internal(s);
                return sandbox_error_setf(error, SANDBOX_ERROR_SANDBOX_FAILED, "Failed to start sandbox: %s",
                                          strerror(-r));
        }

        log_sandbox(s, LOG_INFO, 0, "Sandbox %s (template %s, owner %u) starting.", s->id, t->name, owner);
        return 0;
}

int manager_destroy_all(Manager *m, void (*cb)(void *userdata), void *userdata) {
        if (m->n_sandboxes == 0) {
                cb(userdata);
                return 0;
        }
        m->all_destroyed_cb = cb;
        m->all_destroyed_userdata = userdata;
        for (Sandbox *s = m->sandboxes, *n; s; s = n) {
                n = s->next;
                /* May finalize (and free) s right here. */
                (void) sandbox_destroy(s, NULL, NULL);
        }
        return 0;
}
