/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "pool-status.h"
#include "sandbox-internal.h"

int manager_pool_status(Manager *m, bool all_owners, uid_t owner, PoolStatus **ret, size_t *ret_n) {
        _cleanup_free_ PoolStatus *l = NULL;
        size_t n = 0;

        for (size_t i = 0; i < m->templates.n; i++)
                if (m->templates.templates[i]->pool > 0)
                        n++;
        if (n > 0) {
                l = calloc(n, sizeof(PoolStatus));
                if (!l)
                        return -ENOMEM;
        }

        n = 0;
        for (size_t i = 0; i < m->templates.n; i++) {
                const Template *t = m->templates.templates[i];
                PoolStatus *p;

                if (t->pool == 0)
                        continue;
                p = &l[n++];
                *p = (PoolStatus) { .template_name = t->name, .size = t->pool };
                for (Sandbox *s = m->sandboxes; s; s = s->next) {
                        if (!streq(s->template_name, t->name))
                                continue;
                        if (s->pooled && s->state == SANDBOX_RUNNING)
                                p->ready++;
                        else if (s->pooled && s->state == SANDBOX_STARTING)
                                p->starting++;
                        else if (!s->pooled && (s->state == SANDBOX_RUNNING || s->state == SANDBOX_PAUSED) &&
                                 (all_owners || s->owner == owner))
                                p->in_use++;
                }
        }
        *ret = TAKE_PTR(l);
        *ret_n = n;
        return 0;
}
