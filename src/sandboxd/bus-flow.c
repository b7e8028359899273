/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <stdio.h>

#include <systemd/sd-event.h>

#include "bus-flow.h"
#include "bus-util.h"
#include "list.h"
#include "log.h"
#include "macro.h"
#include "sandbox-errors.h"
#include "time-util.h"

/* How often a peer with held replies is asked about again. */
#define RECHECK_USEC (50ULL * 1000ULL)

typedef struct HeldReply {
        sd_bus_message *call, *reply;
        size_t size;
        uint64_t since;
        bool slot;               /* holds its call's slot */
        struct HeldReply *next;
} HeldReply;

/* A call with a large reply to come: under way or held (it has a slot), or waiting. */
typedef struct LargeCall {
        sd_bus_message *call;
        bool held;               /* its reply is held: the slot goes when the reply does */
        bus_flow_start_t start;  /* waiting: what runs once it has a slot */
        void *userdata;
        void (*free_userdata)(void *userdata);
        struct LargeCall *prev, *next;
} LargeCall;

/* A peer with held replies; it is forgotten when it has none left. */
typedef struct Peer {
        char *name;
        HeldReply *held, *held_tail;  /* oldest first */
        unsigned n_held;
        sd_bus_slot *peer_query, *self_query;
        uint32_t unread, charge;      /* the answers: what the bus holds unread for it, of ours */
        sd_event_source *recheck;
        struct Peer *prev, *next;
} Peer;

static struct {
        Peer *peers;
        uint64_t held_bytes;     /* of held replies without a slot */
        LargeCall *slots;        /* newest first */
        unsigned n_slots;
        LargeCall *waiting;      /* newest first */
        unsigned n_waiting;
        bool unavailable;        /* the bus daemon does not tell: replies go out at once */
} flow;

static LargeCall *large_call_find(LargeCall *l, sd_bus_message *call) {
        for (; l; l = l->next)
                if (l->call == call)
                        return l;
        return NULL;
}

static void large_call_free(LargeCall *l) {
        if (l->free_userdata)
                l->free_userdata(l->userdata);
        sd_bus_message_unref(l->call);
        free(l);
}

static unsigned large_calls_of(const char *sender) {
        unsigned n = 0;

        for (LargeCall *l = flow.slots; l; l = l->next)
                n += streq_ptr(sd_bus_message_get_sender(l->call), sender);
        for (LargeCall *l = flow.waiting; l; l = l->next)
                n += streq_ptr(sd_bus_message_get_sender(l->call), sender);
        return n;
}

static void slot_release(sd_bus_message *call, bool held);

/* Gives free slots to the calls that waited longest. */
static void slots_fill(void) {
        while (flow.n_slots < BUS_FLOW_LARGE_MAX && flow.waiting) {
                _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = NULL;
                LargeCall *l = flow.waiting;
                void (*free_userdata)(void *userdata);
                void *userdata;
                int r;

                while (l->next)
                        l = l->next;
                LIST_REMOVE(flow.waiting, l);
                flow.n_waiting--;
                LIST_PREPEND(flow.slots, l);
                flow.n_slots++;
                /* start() may release the slot itself (and l with it) when it fails. */
                call = sd_bus_message_ref(l->call);
                userdata = TAKE_PTR(l->userdata);
                free_userdata = TAKE_PTR(l->free_userdata);
                r = l->start(call, userdata, &e);
                if (free_userdata)
                        free_userdata(userdata);
                if (r >= 0)
                        continue;
                if (sandbox_error_is_set(&e))
                        bus_reply_error(call, &e);
                else
                        (void) sd_bus_reply_method_errno(call, r, NULL);
                slot_release(call, false);
        }
}

static void slot_release(sd_bus_message *call, bool held) {
        LargeCall *l = large_call_find(flow.slots, call);

        if (!l || l->held != held)
                return;
        LIST_REMOVE(flow.slots, l);
        flow.n_slots--;
        large_call_free(l);
        slots_fill();
}

/* The reply went, or never will: so does its slot. */
static void held_reply_free(HeldReply *h) {
        if (h->slot)
                slot_release(h->call, true);
        sd_bus_message_unref(h->call);
        sd_bus_message_unref(h->reply);
        free(h);
}

static HeldReply *peer_pop(Peer *p) {
        HeldReply *h = p->held;

        p->held = h->next;
        if (!p->held)
                p->held_tail = NULL;
        p->n_held--;
        if (!h->slot)
                flow.held_bytes -= h->size;
        return h;
}

static Peer *peer_find(const char *name) {
        for (Peer *p = flow.peers; p; p = p->next)
                if (streq(p->name, name))
                        return p;
        return NULL;
}

static Peer *peer_new(const char *name) {
        Peer *p = calloc(1, sizeof(Peer));

        if (!p)
                return NULL;
        p->name = strdup(name);
        if (!p->name)
                return mfree(p);
        LIST_PREPEND(flow.peers, p);
        return p;
}

static void peer_free(Peer *p) {
        LIST_REMOVE(flow.peers, p);
        sd_bus_slot_unref(p->peer_query);
        sd_bus_slot_unref(p->self_query);
        sd_event_source_disable_unref(p->recheck);
        while (p->held)
                held_reply_free(peer_pop(p));
        free(p->name);
        free(p);
}

static void send_or_log(const HeldReply *h) {
        int r = sd_bus_send(NULL, h->reply, NULL);
        if (r < 0)
                log_debug("Failed to send a held %s reply (caller gone?): %s", sd_bus_message_get_member(h->call),
                          strerror(-r));
}

static void reply_busy(const HeldReply *h, const char *why) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;

        sandbox_error_set(&e, SANDBOX_ERR_BUSY, "The %zu-byte reply to %s was not sent: %s; try again later.",
                          h->size, sd_bus_message_get_member(h->call), why);
        log_debug("%s", sandbox_error_message(&e));
        bus_reply_error(h->call, &e);
}

/* Sends what p holds, and forgets p. */
static void peer_release(Peer *p) {
        while (p->held) {
                HeldReply *h = peer_pop(p);
                send_or_log(h);
                held_reply_free(h);
        }
        peer_free(p);
}

/* The bus daemon does not tell: from now on everything goes out at once, as before. */
static void flow_give_up(const sd_bus_error *error) {
        log_info("The bus daemon does not tell what its peers leave unread (%s): replies to slow peers "
                 "are not held back.", error && error->name ? error->name : "no such statistics");
        flow.unavailable = true;
        while (flow.peers)
                peer_release(flow.peers);
}

static int peer_check(Peer *p);

static int on_recheck(sd_event_source *s, uint64_t usec, void *userdata) {
        Peer *p = userdata;

        p->recheck = sd_event_source_disable_unref(p->recheck);
        if (peer_check(p) < 0)
                peer_release(p); /* cannot ask: not held back */
        return 0;
}

/* Both answers are in: send what has room, refuse what waited too long. */
static void peer_decide(Peer *p) {
        uint64_t now = now_usec(CLOCK_MONOTONIC), unread = p->unread, charge = p->charge;

        while (p->held) {
                HeldReply *h = p->held;

                if (unread + h->size <= BUS_FLOW_PEER_UNREAD_MAX && charge + h->size <= BUS_FLOW_BUDGET) {
                        send_or_log(h);
                        unread += h->size;
                        charge += h->size;
                } else if (now - h->since >= BUS_FLOW_WAIT_USEC) {
                        char why[128];
                        if (unread + h->size > BUS_FLOW_PEER_UNREAD_MAX)
                                snprintf(why, sizeof(why),
                                         "the caller has left %" PRIu64 " bytes of earlier replies unread", unread);
                        else
                                snprintf(why, sizeof(why), "other callers have left sandboxd's replies unread");
                        reply_busy(h, why);
                } else
                        break;
                held_reply_free(peer_pop(p));
        }
        if (!p->held) {
                peer_free(p);
                return;
        }
        if (sd_event_add_time_relative(sd_bus_get_event(sd_bus_message_get_bus(p->held->call)), &p->recheck,
                                       CLOCK_MONOTONIC, RECHECK_USEC, 0, on_recheck, p) < 0)
                peer_release(p);
}

static int stats_read(sd_bus_message *reply, const char *key, uint32_t *ret) {
        const char *name;
        bool found = false;
        int r;

        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                r = sd_bus_message_read(reply, "s", &name);
                if (r >= 0 && streq(name, key)) {
                        r = sd_bus_message_read(reply, "v", "u", ret);
                        found = r >= 0;
                } else if (r >= 0)
                        r = sd_bus_message_skip(reply, "v");
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return found ? 0 : -ENODATA;
}

static int on_stats(sd_bus_message *reply, Peer *p, bool self) {
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        if (self)
                p->self_query = sd_bus_slot_unref(p->self_query);
        else
                p->peer_query = sd_bus_slot_unref(p->peer_query);
        if (e && !self && sd_bus_error_has_name(e, "org.freedesktop.DBus.Error.NameHasNoOwner")) {
                /* Gone: its held replies have nobody to go to. */
                peer_free(p);
                return 0;
        }
        if (e) {
                flow_give_up(e);
                return 0;
        }
        if (stats_read(reply, self ? "IncomingBytes" : "OutgoingBytes", self ? &p->charge : &p->unread) < 0) {
                flow_give_up(NULL);
                return 0;
        }
        if (!p->peer_query && !p->self_query)
                peer_decide(p);
        return 0;
}

static int on_peer_stats(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        return on_stats(reply, userdata, false);
}

static int on_self_stats(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        return on_stats(reply, userdata, true);
}

/* Asks the bus daemon what it holds unread for p, and of ours for everyone; peer_decide()
 * follows. */
static int peer_check(Peer *p) {
        sd_bus *bus = sd_bus_message_get_bus(p->held->call);
        const char *self;
        int r;

        if (p->peer_query || p->self_query)
                return 0;
        r = sd_bus_get_unique_name(bus, &self);
        if (r >= 0)
                r = sd_bus_call_method_async(bus, &p->peer_query, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                             "org.freedesktop.DBus.Debug.Stats", "GetConnectionStats", on_peer_stats,
                                             p, "s", p->name);
        if (r >= 0)
                r = sd_bus_call_method_async(bus, &p->self_query, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                             "org.freedesktop.DBus.Debug.Stats", "GetConnectionStats", on_self_stats,
                                             p, "s", self);
        if (r < 0) {
                p->peer_query = sd_bus_slot_unref(p->peer_query);
                return log_warning_errno(r, "Failed to ask the bus daemon about %s: %m", p->name);
        }
        return 0;
}

int bus_flow_send_reply(sd_bus_message *call, sd_bus_message *reply, size_t size) {
        LargeCall *slot = large_call_find(flow.slots, call);
        const char *sender = sd_bus_message_get_sender(call);
        HeldReply *h;
        Peer *p;
        int r;

        if (flow.unavailable || size < BUS_FLOW_LARGE_REPLY || !sender || sender[0] != ':') {
                r = sd_bus_send(NULL, reply, NULL);
                if (slot)
                        slot_release(call, false);
                return r;
        }

        p = peer_find(sender);
        h = calloc(1, sizeof(HeldReply));
        if (!h)
                return -ENOMEM;
        *h = (HeldReply) {
                .call = sd_bus_message_ref(call),
                .reply = sd_bus_message_ref(reply),
                .size = size,
                .since = now_usec(CLOCK_MONOTONIC),
        };
        if (!slot && ((p && p->n_held >= BUS_FLOW_HELD_PER_PEER) || flow.held_bytes + size > BUS_FLOW_HELD_BYTES_MAX)) {
                /* Answered now rather than held: the memory of held replies is bounded. */
                reply_busy(h, p && p->n_held >= BUS_FLOW_HELD_PER_PEER ? "earlier replies to the caller wait already"
                                                                        : "too many replies wait already");
                held_reply_free(h);
                return 0;
        }
        if (!p) {
                p = peer_new(sender);
                if (!p) {
                        held_reply_free(h);
                        return -ENOMEM;
                }
        }
        if (slot)
                /* The slot stays taken while the reply waits; it goes with the reply. */
                slot->held = h->slot = true;
        else
                flow.held_bytes += size;
        if (p->held_tail)
                p->held_tail->next = h;
        else
                p->held = h;
        p->held_tail = h;
        p->n_held++;

        if (!p->recheck && peer_check(p) < 0)
                peer_release(p); /* cannot ask: not held back */
        return 0;
}

int bus_flow_start_large(sd_bus_message *call, bus_flow_start_t start, void *userdata,
                         void (*free_userdata)(void *userdata), SandboxError *error) {
        unsigned n = large_calls_of(sd_bus_message_get_sender(call));
        LargeCall *l;
        int r;

        if (n >= BUS_FLOW_LARGE_PER_PEER || (flow.n_slots >= BUS_FLOW_LARGE_MAX &&
                                             flow.n_waiting >= BUS_FLOW_LARGE_WAITING)) {
                if (free_userdata)
                        free_userdata(userdata);
                if (n >= BUS_FLOW_LARGE_PER_PEER)
                        return sandbox_error_set(error, SANDBOX_ERR_BUSY,
                                                 "%u calls of yours with large replies are under way already; "
                                                  "read their replies, then try again.", n);
                return sandbox_error_set(error, SANDBOX_ERR_BUSY,
                                         "%u calls with large replies wait already; try again later.",
                                          flow.n_waiting);
        }

        l = calloc(1, sizeof(LargeCall));
        if (!l) {
                if (free_userdata)
                        free_userdata(userdata);
                return -ENOMEM;
        }
        l->call = sd_bus_message_ref(call);
        if (flow.n_slots >= BUS_FLOW_LARGE_MAX) {
                /* Started when a slot is free, and answered from there. */
                l->start = start;
                l->userdata = userdata;
                l->free_userdata = free_userdata;
                LIST_PREPEND(flow.waiting, l);
                flow.n_waiting++;
                return 0;
        }
        LIST_PREPEND(flow.slots, l);
        flow.n_slots++;
        r = start(call, userdata, error);
        if (free_userdata)
                free_userdata(userdata);
        if (r < 0)
                slot_release(call, false);
        return r;
}

void bus_flow_release(sd_bus_message *call) {
        slot_release(call, false);
}

void bus_flow_done(void) {
        while (flow.waiting) {
                LargeCall *l = flow.waiting;
                LIST_REMOVE(flow.waiting, l);
                large_call_free(l);
        }
        flow.n_waiting = 0;
        while (flow.peers)
                peer_free(flow.peers);
        while (flow.slots) {
                LargeCall *l = flow.slots;
                LIST_REMOVE(flow.slots, l);
                large_call_free(l);
        }
        flow.n_slots = 0;
}
