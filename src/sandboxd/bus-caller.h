/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Who is calling: the uid of a bus peer, as the bus daemon has it (GetConnectionUnixUser,
 * the peer's SO_PEERCRED at connect, as polkit sees it too). The bus daemon is only ever
 * asked asynchronously: sd_bus_query_sender_creds() would wait for its answer on the event
 * loop. The answers are remembered (sender-cache.h). */

#include <stdbool.h>

#include <systemd/sd-bus.h>

/* r < 0 (error says why, if it can): the uid could not be had; the peer may be gone. */
typedef void (*bus_caller_callback_t)(int r, uid_t uid, const sd_bus_error *error, void *userdata);

/* 1 and *ret_uid if the uid of call's sender is known already; 0 if the bus daemon was
 * asked: cb(userdata) follows, never from within this call, unless *ret_slot is
 * unreferenced first; a negative errno if it could not be asked. */
int bus_caller_uid(sd_bus_message *call, bus_caller_callback_t cb, void *userdata, sd_bus_slot **ret_slot,
                   uid_t *ret_uid);

/* sd-bus answers Properties, Introspectable and the like itself, through callbacks of ours
 * (object find, node enumerator) that must decide at once what a caller may see. A filter
 * holds each call for which needs_uid() says so until its caller's uid is known, then
 * dispatches it again (sd_bus_enqueue_for_read()); while it is dispatched,
 * bus_caller_uid_now() has the answer. */
int bus_caller_add_filter(sd_bus *bus, bool (*needs_uid)(sd_bus_message *m));
/* The uid of call's sender, if call is the call being dispatched and passed the filter;
 * else -ENXIO (refuse: nothing was asked, nothing may be waited for). */
int bus_caller_uid_now(sd_bus_message *call, uid_t *ret);
/* Watches peers leaving the bus (one match for all, asynchronously): call before the bus
 * name is taken. */
int bus_caller_watch_peers(sd_bus *bus);
/* The tenant call's sender acts for (Manager.ActForTenant), or NULL: the sender's, until it
 * says otherwise or leaves the bus (bus_caller_watch_peers()). */
const char *bus_caller_tenant(sd_bus_message *call);
/* From now on call's sender acts for tenant (valid, sandbox_tenant_is_valid(); NULL: for
 * none). */
int bus_caller_set_tenant(sd_bus_message *call, const char *tenant);
/* At exit: drops the held calls unanswered (their callers get NoReply from the bus) and
 * what is known of the callers' tenants. */
void bus_caller_done(void);
