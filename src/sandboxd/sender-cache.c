/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <string.h>

#include "macro.h"
#include "sender-cache.h"

static bool name_is_cacheable(const char *name) {
        /* Only unique names: a well-known name may pass to another owner at any time. */
        return name && name[0] == ':' && strlen(name) <= SENDER_NAME_MAX;
}

bool sender_cache_get(SenderCache *c, const char *name, uid_t *ret) {
        if (!name_is_cacheable(name))
                return false;
        for (size_t i = 0; i < SENDER_CACHE_SIZE; i++)
                if (c->entries[i].used > 0 && strcmp(c->entries[i].name, name) == 0) {
                        c->entries[i].used = ++c->clock;
                        *ret = c->entries[i].uid;
                        return true;
                }
        return false;
}

void sender_cache_put(SenderCache *c, const char *name, uid_t uid) {
        size_t victim = 0;

        if (!name_is_cacheable(name))
                return;
        for (size_t i = 0; i < SENDER_CACHE_SIZE; i++) {
                if (c->entries[i].used > 0 && strcmp(c->entries[i].name, name) == 0) {
                        victim = i;
                        break;
                }
                if (c->entries[i].used < c->entries[victim].used)
                        victim = i;
        }
        strcpy(c->entries[victim].name, name);
        c->entries[victim].uid = uid;
        c->entries[victim].used = ++c->clock;
}
