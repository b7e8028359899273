/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "access.h"
#include "pool-status.h"
#include "sandbox-errors.h"
#include "sandbox-internal.h"

static void pool_status_fill(Manager *m, const Template *t, const SandboxCaller *caller, PoolStatus *p) {
        *p = (PoolStatus) { .template_name = t->name, .size = t->pool, .recycle = t->recycle };
        for (Sandbox *s = m->sandboxes; s; s = s->next) {
                /* Another tenant's are not there for a caller acting for one, as in
                 * ListSandboxes. */
                bool visible = !caller || sandbox_access_visible(caller, s->owner, s->config.tenant);

                if (!streq(s->template_name, t->name))
                        continue;
                if (sandbox_is_released(s)) {
                        if (visible) {
                                p->recycled++;
                                p->resetting += sandbox_is_resetting(s);
                                p->waiting += !!s->recycle_waiter;
                        }
                } else if (s->custody == SANDBOX_POOLED && s->state == SANDBOX_RUNNING)
                        p->ready++;
                else if (s->custody == SANDBOX_POOLED && s->state == SANDBOX_STARTING)
                        p->starting++;
                else if (s->custody == SANDBOX_OWNED && (s->state == SANDBOX_RUNNING || s->state == SANDBOX_PAUSED) && visible)
                        p->in_use++;
        }
}

static bool template_has_pool(const Template *t) {
        return t->pool > 0 || t->recycle;
}

int manager_pool_status(Manager *m, const SandboxCaller *caller, PoolStatus **ret, size_t *ret_n) {
        _cleanup_free_ PoolStatus *l = NULL;
        size_t n = 0;

        for (size_t i = 0; i < m->templates.n; i++)
                if (template_has_pool(m->templates.templates[i]))
                        n++;
        if (n > 0) {
                l = calloc(n, sizeof(PoolStatus));
                if (!l)
                        return -ENOMEM;
        }

        n = 0;
        for (size_t i = 0; i < m->templates.n; i++)
                if (template_has_pool(m->templates.templates[i]))
                        pool_status_fill(m, m->templates.templates[i], caller, &l[n++]);
        *ret = TAKE_PTR(l);
        *ret_n = n;
        return 0;
}

int manager_pool_status_of(Manager *m, const char *template_name, const SandboxCaller *caller, PoolStatus *ret,
                           SandboxError *error) {
        const Template *t = template_name_is_valid(template_name) ? template_set_find(&m->templates, template_name) : NULL;

        if (!t)
                return sandbox_error_set(error, SANDBOX_ERR_NO_SUCH_TEMPLATE, "No template '%.64s'.", template_name);
        pool_status_fill(m, t, caller, ret);
        return 0;
}
