/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "options.h"

typedef int (*option_setter_t)(void *config, const char *name, const OptionValue *v, sd_bus_error *error);

/* Decodes an a{sv} into the core's setters: the front end translates, the core decides. */
int bus_read_options(sd_bus_message *m, option_setter_t set, void *config, sd_bus_error *error);
/* Replies to a deferred method call, logging (not failing) when the caller is gone. */
void bus_reply_error(sd_bus_message *call, const sd_bus_error *error);
