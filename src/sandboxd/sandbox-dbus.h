/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "manager.h"

#define SANDBOX_BUS_NAME "io.sandboxd.Sandbox1"
#define SANDBOX_MANAGER_PATH "/io/sandboxd/Sandbox1"
#define SANDBOX_MANAGER_INTERFACE "io.sandboxd.Sandbox1.Manager"
#define SANDBOX_OBJECT_ROOT "/io/sandboxd/Sandbox1/sandbox"
#define SANDBOX_INTERFACE "io.sandboxd.Sandbox1.Sandbox"

/* Exports the per-sandbox objects (fallback vtable + enumerator). */
int sandbox_dbus_register(sd_bus *bus, Manager *m);
int sandbox_dbus_emit_state(sd_bus *bus, Sandbox *s);
int manager_dbus_register(sd_bus *bus, Manager *m);
int manager_dbus_emit_sandbox(sd_bus *bus, Sandbox *s, bool added);
