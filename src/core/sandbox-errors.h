/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Core functions report user errors through an sd_bus_error carrying one of the documented
 * error names (sandbox-api.h, sandboxd-api(7)); every front end maps them. */

#include <systemd/sd-bus.h>

#include "macro.h"
#include "sandbox-api.h"

/* The errno each name stands for (as sd_bus_error_add_map() wants it). */
extern const sd_bus_error_map sandbox_error_map[];

/* Sets error to name with a formatted message; returns the name's negative errno. */
int sandbox_error_setf(sd_bus_error *error, const char *name, const char *fmt, ...) _printf_(3, 4);
