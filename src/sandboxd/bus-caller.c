/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "bus-caller.h"
#include "bus-util.h"
#include "list.h"
#include "log.h"
#include "macro.h"
#include "sender-cache.h"
#include "strv.h"

static SenderCache cache;

typedef struct UidQuery {
        char *sender;
        bus_caller_callback_t cb;
        void *userdata;
} UidQuery;

/* The slot's destroy callback: the query lives exactly as long as its slot. */
static void uid_query_free(void *userdata) {
        UidQuery *q = userdata;

        if (!q)
                return;
        free(q->sender);
        free(q);
}

static int on_uid_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        UidQuery *q = userdata;
        uint32_t uid;
        int r;

        if (e) {
                q->cb(-sd_bus_error_get_errno(e), (uid_t) -1, e, q->userdata);
                return 0;
        }
        r = sd_bus_message_read(reply, "u", &uid);
        if (r < 0) {
                q->cb(r, (uid_t) -1, NULL, q->userdata);
                return 0;
        }
        sender_cache_put(&cache, q->sender, (uid_t) uid);
        q->cb(0, (uid_t) uid, NULL, q->userdata);
        return 0;
}

int bus_caller_uid(sd_bus_message *call, bus_caller_callback_t cb, void *userdata, sd_bus_slot **ret_slot,
                   uid_t *ret_uid) {
        const char *sender = sd_bus_message_get_sender(call);
        sd_bus_slot *slot;
        UidQuery *q;
        int r;

        /* A call on a bus always has one (sandboxd has no direct connections). */
        if (!sender)
                return -ENXIO;
        if (sender_cache_get(&cache, sender, ret_uid))
                return 1;

        q = calloc(1, sizeof(UidQuery));
        if (!q)
                return -ENOMEM;
        *q = (UidQuery) { .sender = strdup(sender), .cb = cb, .userdata = userdata };
        if (!q->sender) {
                uid_query_free(q);
                return -ENOMEM;
        }
        r = sd_bus_call_method_async(sd_bus_message_get_bus(call), &slot, "org.freedesktop.DBus",
                                     "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetConnectionUnixUser",
                                     on_uid_reply, q, "s", sender);
        if (r < 0) {
                uid_query_free(q);
                return r;
        }
        (void) sd_bus_slot_set_destroy_callback(slot, uid_query_free);
        *ret_slot = slot;
        return 0;
}

/* A call held by the filter until its caller's uid is known. */
typedef struct HeldCall {
        sd_bus_message *call;
        sd_bus_slot *slot; /* the question to the bus daemon; NULL once answered */
        uid_t uid;
        struct HeldCall *prev, *next;
} HeldCall;

static HeldCall *held;
static bool (*filter_needs_uid)(sd_bus_message *m);
/* The call being dispatched and its caller's uid, for bus_caller_uid_now(). Referenced, so
 * that no later message can have its address. */
static sd_bus_message *dispatching;
static uid_t dispatching_uid;

static void held_call_free(HeldCall *h) {
        LIST_REMOVE(held, h);
        sd_bus_slot_unref(h->slot);
        sd_bus_message_unref(h->call);
        free(h);
}

static void on_held_uid(int r, uid_t uid, const sd_bus_error *error, void *userdata) {
        HeldCall *h = userdata;

        h->slot = sd_bus_slot_unref(h->slot);
        if (r >= 0) {
                /* Dispatched again, behind what is queued already; the filter knows it. */
                h->uid = uid;
                r = sd_bus_enqueue_for_read(sd_bus_message_get_bus(h->call), h->call);
                if (r >= 0)
                        return;
        }
        if (error)
                bus_reply_bus_error(h->call, error);
        else
                (void) sd_bus_reply_method_errno(h->call, r, NULL);
        held_call_free(h);
}

static void dispatching_set(sd_bus_message *m, uid_t uid) {
        sd_bus_message_unref(dispatching);
        dispatching = m ? sd_bus_message_ref(m) : NULL;
        dispatching_uid = uid;
}

static int caller_filter(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        HeldCall *h;
        uid_t uid;
        int r;

        if (!sd_bus_message_is_method_call(m, NULL, NULL))
                return 0;
        dispatching_set(NULL, (uid_t) -1);

        for (h = held; h; h = h->next)
                if (h->call == m && !h->slot) {
                        dispatching_set(m, h->uid);
                        held_call_free(h);
                        return 0;
                }
        if (!filter_needs_uid(m))
                return 0;

        h = calloc(1, sizeof(HeldCall));
        if (!h)
                return -ENOMEM;
        r = bus_caller_uid(m, on_held_uid, h, &h->slot, &uid);
        if (r != 0) {
                free(h);
                if (r > 0)
                        dispatching_set(m, uid);
                return r < 0 ? r : 0;
        }
        h->call = sd_bus_message_ref(m);
        LIST_PREPEND(held, h);
        return 1;
}

int bus_caller_add_filter(sd_bus *bus, bool (*needs_uid)(sd_bus_message *m)) {
        filter_needs_uid = needs_uid;
        return sd_bus_add_filter(bus, NULL, caller_filter, NULL);
}

int bus_caller_uid_now(sd_bus_message *call, uid_t *ret) {
        if (!call || call != dispatching)
                return -ENXIO;
        *ret = dispatching_uid;
        return 0;
}

/* The tenant a bus peer acts for, forgotten when it leaves the bus: its unique name is
 * never given to another connection, so until then it stays true. One match for every
 * peer's leaving, in place before the bus name is taken (so before any peer's call), tells:
 * the bus daemon sends a peer's NameOwnerChanged after everything the peer sent. A match
 * per peer (sd_bus_track) would count against the bus daemon's limit of match rules per
 * connection for as many peers as cared to connect, and ask it synchronously whether the
 * peer is there. Few peers act for a tenant (the bridges): a list does. */
typedef struct CallerTenant {
        char *sender;
        char *tenant;
        struct CallerTenant *prev, *next;
} CallerTenant;

static CallerTenant *tenants;

static void caller_tenant_free(CallerTenant *t) {
        LIST_REMOVE(tenants, t);
        free(t->sender);
        free(t->tenant);
        free(t);
}

static CallerTenant *caller_tenant_find(const char *sender) {
        for (CallerTenant *t = tenants; t; t = t->next)
                if (streq(t->sender, sender))
                        return t;
        return NULL;
}

static int on_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        const char *name, *old_owner, *new_owner;
        CallerTenant *t;

        if (sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0 || !isempty(new_owner))
                return 0;
        t = caller_tenant_find(name);
        if (t) {
                log_debug("Bus peer %s, which acted for tenant %s, left.", name, t->tenant);
                caller_tenant_free(t);
        }
        return 0;
}

int bus_caller_watch_peers(sd_bus *bus) {
        return sd_bus_match_signal_async(bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                         "org.freedesktop.DBus", "NameOwnerChanged", on_name_owner_changed,
                                         NULL, NULL);
}

const char *bus_caller_tenant(sd_bus_message *call) {
        const char *sender = sd_bus_message_get_sender(call);
        CallerTenant *t = sender ? caller_tenant_find(sender) : NULL;

        return t ? t->tenant : NULL;
}

int bus_caller_set_tenant(sd_bus_message *call, const char *tenant) {
        const char *sender = sd_bus_message_get_sender(call);
        CallerTenant *t;
        char *copy;

        if (!sender)
                return -ENXIO;
        t = caller_tenant_find(sender);
        if (!tenant) {
                if (t)
                        caller_tenant_free(t);
                return 0;
        }
        copy = strdup(tenant);
        if (!copy)
                return -ENOMEM;
        if (t) {
                free(t->tenant);
                t->tenant = copy;
                return 0;
        }

        t = calloc(1, sizeof(CallerTenant));
        if (!t) {
                free(copy);
                return -ENOMEM;
        }
        *t = (CallerTenant) { .tenant = copy, .sender = strdup(sender) };
        LIST_PREPEND(tenants, t);
        if (!t->sender) {
                caller_tenant_free(t);
                return -ENOMEM;
        }
        return 0;
}

void bus_caller_done(void) {
        while (held)
                held_call_free(held);
        dispatching_set(NULL, (uid_t) -1);
        while (tenants)
                caller_tenant_free(tenants);
}
