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

/* The caller's effective uid. (The bus daemon is asked synchronously when the message
 * carries no credentials; it answers from memory and never waits on us.) */
int bus_get_sender_uid(sd_bus_message *m, uid_t *ret);

/* Runs fn(call, userdata, error) once the caller is authorised for action (NULL: at
 * once), or replies AccessDenied / InteractiveAuthorizationRequired. fn returns < 0 to
 * have that error (error, or the errno) sent as the reply; otherwise it replied or will.
 * free_userdata(userdata) runs in every case, afterwards. Returns 1 (the reply is taken
 * care of) or a negative errno if nothing could be started. */
typedef int (*bus_authorized_t)(sd_bus_message *call, void *userdata, sd_bus_error *error);
int bus_authorize_then(sd_bus_message *call, const char *action, bus_authorized_t fn,
                       void *userdata, void (*free_userdata)(void *userdata));
