/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The documented D-Bus error names (see sandboxd-api(7)). Core functions report user
 * errors through an sd_bus_error carrying one of these; every front end maps them. */

#define SANDBOX_ERROR_NO_SUCH_TEMPLATE   "io.sandboxd.Sandbox1.NoSuchTemplate"
#define SANDBOX_ERROR_NO_SUCH_SANDBOX    "io.sandboxd.Sandbox1.NoSuchSandbox"
#define SANDBOX_ERROR_INVALID_OPTION     "io.sandboxd.Sandbox1.InvalidOption"
#define SANDBOX_ERROR_NOT_RUNNING        "io.sandboxd.Sandbox1.NotRunning"
#define SANDBOX_ERROR_BUSY               "io.sandboxd.Sandbox1.Busy"
#define SANDBOX_ERROR_TOO_MANY_SANDBOXES "io.sandboxd.Sandbox1.TooManySandboxes"
#define SANDBOX_ERROR_SANDBOX_FAILED     "io.sandboxd.Sandbox1.SandboxFailed"
#define SANDBOX_ERROR_SYSTEMD_FAILED     "io.sandboxd.Sandbox1.SystemdFailed"
#define SANDBOX_ERROR_NO_SUCH_PROCESS    "io.sandboxd.Sandbox1.NoSuchProcess"
#define SANDBOX_ERROR_STILL_RUNNING      "io.sandboxd.Sandbox1.StillRunning"
#define SANDBOX_ERROR_FILE_TOO_LARGE     "io.sandboxd.Sandbox1.FileTooLarge"

#include <systemd/sd-bus.h>

#include "macro.h"

/* The errno each name stands for (as sd_bus_error_add_map() wants it). */
extern const sd_bus_error_map sandbox_error_map[];

/* Sets error to name with a formatted message; returns the name's negative errno. */
int sandbox_error_setf(sd_bus_error *error, const char *name, const char *fmt, ...) _printf_(3, 4);
