/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Flow control of what sandboxd sends each bus peer (docs/ARCHITECTURE.md, "Slow peers").
 *
 * dbus-daemon charges every message it holds for a peer to the message's sender until the
 * peer reads it, and stops reading from a sender whose charge passes its
 * max_incoming_bytes (127 MiB by default). Replies one peer leaves unread would so stall
 * sandboxd's answers to everyone, and pile up in sandboxd's own write queue. sandboxd
 * cannot see its messages delivered; the bus daemon can tell (Debug.Stats:
 * GetConnectionStats), so sandboxd asks it:
 *   - a large reply goes out only when what the bus holds unread for its peer, and what it
 *     holds of sandboxd's for everyone, leave room for it; it waits for that room at most
 *     BUS_FLOW_WAIT_USEC, then the caller gets Busy instead;
 *   - few calls with large replies are under way or held at once, per peer and in all, so
 *     that sandboxd's memory is bounded: the others wait their turn, unanswered and not
 *     yet started, or beyond that get Busy at once.
 * Small replies go out at once: dbus-daemon stops reading calls from a peer that leaves
 * its replies unread (tests/security/test_slow_peers.py). Where the bus daemon does not
 * tell (dbus-broker, which does not stall a sender for its receivers' sake; a dbus-daemon
 * built without statistics), replies go out at once too. */

#include <stddef.h>

#include <systemd/sd-bus.h>

#include "sandbox-errors.h"

/* Replies at least this large are held until the bus has room for them. */
#define BUS_FLOW_LARGE_REPLY (64U * 1024U)
/* What the bus may hold unread for one peer, a held reply included, when it goes. */
#define BUS_FLOW_PEER_UNREAD_MAX (24ULL * 1024U * 1024U)
/* What the bus may hold of sandboxd's messages, all peers together, when a held reply
 * goes: half of dbus-daemon's default max_incoming_bytes. */
#define BUS_FLOW_BUDGET (64ULL * 1024U * 1024U)
/* How long a held reply may wait for room before its caller gets Busy. */
#define BUS_FLOW_WAIT_USEC (30ULL * 1000000ULL)
/* Held replies of calls without a slot (Exec, ReadOutput), per peer and in all. */
#define BUS_FLOW_HELD_PER_PEER 4U
#define BUS_FLOW_HELD_BYTES_MAX (64ULL * 1024U * 1024U)
/* Calls whose replies will be large (file reads) each take a slot until their reply is
 * sent: this many at once, of them at most BUS_FLOW_LARGE_PER_PEER of one peer (beyond,
 * Busy); the others wait their turn, at most BUS_FLOW_LARGE_WAITING (beyond, Busy). */
#define BUS_FLOW_LARGE_MAX 4U
#define BUS_FLOW_LARGE_PER_PEER 2U
#define BUS_FLOW_LARGE_WAITING 64U

/* Sends reply to call, whose size is about size bytes, or holds it until the bus has room
 * for it (or answers the call with Busy). Takes references of its own. 0, or -errno if the
 * reply could neither be sent nor held. */
int bus_flow_send_reply(sd_bus_message *call, sd_bus_message *reply, size_t size);
/* Runs start(call, userdata, error) once call has a slot (see above): now, or when one is
 * free. The slot is call's until its reply went through bus_flow_send_reply() (and is
 * sent or refused) or bus_flow_release(call). Returns what start returned, 0 if call
 * waits (start's error, if any, is then the reply), or -EBUSY with error set (Busy). */
typedef int (*bus_flow_start_t)(sd_bus_message *call, void *userdata, SandboxError *error);
int bus_flow_start_large(sd_bus_message *call, bus_flow_start_t start, void *userdata,
                         void (*free_userdata)(void *userdata), SandboxError *error);
/* Frees call's slot, if it still has one (its reply never went through
 * bus_flow_send_reply()). */
void bus_flow_release(sd_bus_message *call);
/* At exit: drops the held replies and waiting calls (their callers get NoReply). */
void bus_flow_done(void);
