/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Asynchronous polkit CheckAuthorization, for any front end. */

#include <stdbool.h>

#include <systemd/sd-bus.h>

/* authorized: 1 yes, 0 no (error says AccessDenied or InteractiveAuthorizationRequired),
 * negative: polkit could not be asked (error says why). */
typedef void (*polkit_callback_t)(int authorized, const sd_bus_error *error, void *userdata);

/* Asks for action on behalf of the bus peer bus_name (subject "system-bus-name"). The
 * callback is called exactly once, never from within this call; with ret_slot, the caller
 * owns the query and unreferencing the slot first cancels it (no callback). */
int polkit_check_bus_name(sd_bus *bus, const char *bus_name, const char *action, bool interactive,
                          polkit_callback_t cb, void *userdata, sd_bus_slot **ret_slot);
