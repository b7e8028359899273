/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What every D-Bus face of the daemon shares: the core's errors as D-Bus errors, a{sv}
 * options into the core's neutral values, and authorize-then. */

#include <systemd/sd-bus.h>

#include "access.h"
#include "caller.h"
#include "options.h"
#include "sandbox-errors.h"

/* The D-Bus names of the core's errors with their errnos (sd_bus_error_add_map()). */
extern const sd_bus_error_map bus_sandbox_error_map[];

/* Sets b to e: the code's D-Bus name (sandbox-api.h), or for SANDBOX_ERR_ERRNO the errno's
 * standard name, and e's message. Returns e's negative errno. */
int bus_error_from_sandbox(sd_bus_error *b, const SandboxError *e);
/* For a method handler's return: r, with e (if set) in b. */
int bus_error_return(sd_bus_error *b, const SandboxError *e, int r);

/* Replies to a deferred method call, logging (not failing) when the caller is gone. */
void bus_reply_error(sd_bus_message *call, const SandboxError *error);
void bus_reply_bus_error(sd_bus_message *call, const sd_bus_error *error);

/* Reads an "as" of at most max_n strings and max_bytes in all, refusing (InvalidOption,
 * -E2BIG) as soon as either is exceeded: a hostile caller's 100k strings cost nothing. */
int bus_read_strv_bounded(sd_bus_message *m, size_t max_n, size_t max_bytes, const char *what, char ***ret,
                          SandboxError *error);

/* Decodes an a{sv} into the core's neutral values, each applied as an option of set to
 * target (options.h): the front end translates, the core decides. */
int bus_read_options(sd_bus_message *m, OptionSet set, void *target, SandboxError *error);

/* Whose the call is about (access.h's sandbox_access_t); the operation is the method's,
 * from the core's table, and the core decides the polkit action. */
typedef sandbox_access_t bus_access_t;
/* Returns < 0 to have that error (error, or the errno) sent as the reply; otherwise it
 * replied or will. caller->granted says whether the action was granted. */
typedef int (*bus_authorized_t)(sd_bus_message *call, const SandboxCaller *caller, void *userdata,
                                SandboxError *error);

/* Learns the caller (its uid without waiting on the bus daemon, bus-caller.h), has access
 * (NULL: nothing to authorize) say what it asks for, has the core authorize it (polkit, with
 * the sender as subject), and runs fn(call, caller, userdata, error) once it is; or replies
 * the error (AccessDenied, InteractiveAuthorizationRequired, the refusal). With
 * SANDBOX_AUTHORIZE_OPTIONAL, polkit's no is no refusal. free_userdata(userdata) runs in
 * every case, afterwards. Returns 1 (the reply is taken care of) or a negative errno if
 * nothing could be started. */
int bus_authorize_then(sd_bus_message *call, bus_access_t access, SandboxAuthorizeFlags flags,
                       bus_authorized_t fn, void *userdata, void (*free_userdata)(void *userdata));
/* At exit: drops the authorisations in flight unanswered (their callers get NoReply). */
void bus_authorize_cancel_all(void);
