/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The uids of the last bus peers we asked the bus daemon about, by unique name. A unique
 * name is never given to a second connection while the bus daemon runs, and a peer's uid
 * (SO_PEERCRED, taken at connect) never changes; sandboxd exits when the bus goes. So an
 * entry stays true for as long as we live: the cache only needs a bound, not expiry. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define SENDER_CACHE_SIZE 64U
#define SENDER_NAME_MAX 63U /* ":1.4294967295" is 13; longer names are not cached */

typedef struct SenderCache {
        struct {
                char name[SENDER_NAME_MAX + 1];
                uid_t uid;
                uint64_t used; /* 0: free */
        } entries[SENDER_CACHE_SIZE];
        uint64_t clock;
} SenderCache;

/* true and *ret set if name is known; the entry becomes the most recently used. */
bool sender_cache_get(SenderCache *c, const char *name, uid_t *ret);
/* Remembers name (a unique name, ":…") as uid, evicting the least recently used. */
void sender_cache_put(SenderCache *c, const char *name, uid_t uid);
