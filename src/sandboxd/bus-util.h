/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "options.h"

typedef int (*option_setter_t)(void *config, const char *name, const OptionValue *v, sd_bus_error *error);

/* Reads an "as" of at most max_n strings and max_bytes in all, refusing (InvalidOption,
 * -E2BIG) as soon as either is exceeded: a hostile caller's 100k strings cost nothing. */
int bus_read_strv_bounded(sd_bus_message *m, size_t max_n, size_t max_bytes, const char *what, char ***ret,
                          sd_bus_error *error);

/* Decodes an a{sv} into the core's setters: the front end translates, the core decides. */
int bus_read_options(sd_bus_message *m, option_setter_t set, void *config, sd_bus_error *error);
/* Replies to a deferred method call, logging (not failing) when the caller is gone. */
void bus_reply_error(sd_bus_message *call, const sd_bus_error *error);

/* The caller of a method, once known. */
typedef struct BusCaller {
        uid_t uid;
        bool granted; /* polkit granted the action, or none was needed */
} BusCaller;

/* Decides, once the caller's uid is known, the polkit action the call needs: sets
 * *ret_action (NULL: none), or returns < 0 (error, or the errno) to refuse the call. */
typedef int (*bus_action_t)(uid_t uid, void *userdata, const char **ret_action, sd_bus_error *error);
/* Returns < 0 to have that error (error, or the errno) sent as the reply; otherwise it
 * replied or will. */
typedef int (*bus_authorized_t)(sd_bus_message *call, const BusCaller *caller, void *userdata,
                                sd_bus_error *error);

typedef enum BusAuthorizeFlags {
        /* polkit's no is not a refusal: fn runs all the same, caller->granted false; polkit
         * is asked without interaction. */
        BUS_AUTHORIZE_OPTIONAL = 1 << 0,
} BusAuthorizeFlags;

/* Learns the caller's uid (bus-caller.h: without waiting on the bus daemon), has action
 * (NULL: nothing needed) name the polkit action for it, asks polkit, and runs
 * fn(call, caller, userdata, error) once the caller is authorised; or replies the error
 * (AccessDenied, InteractiveAuthorizationRequired, the action's refusal).
 * free_userdata(userdata) runs in every case, afterwards. Returns 1 (the reply is taken
 * care of) or a negative errno if nothing could be started. */
int bus_authorize_then(sd_bus_message *call, bus_action_t action, BusAuthorizeFlags flags, bus_authorized_t fn,
                       void *userdata, void (*free_userdata)(void *userdata));
/* At exit: drops the authorisations in flight unanswered (their callers get NoReply). */
void bus_authorize_cancel_all(void);
