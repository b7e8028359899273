/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A sandbox's ports on io.sandboxd.Sandbox1.Sandbox: OpenPort (a connected descriptor) and
 * ListPorts. Translation only; how the connection is made is the core's (port.h). */

#include "bus-util.h"
#include "fd-util.h"
#include "port.h"
#include "sandbox-dbus.h"

static void on_port(int fd, const SandboxPort *ports, size_t n, const SandboxError *error, void *userdata) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *call = userdata, *reply = NULL;
        _cleanup_close_ int connection = fd;
        int r;

        if (error) {
                bus_reply_error(call, error);
                return;
        }
        if (streq(sd_bus_message_get_member(call), "OpenPort")) {
                (void) sd_bus_reply_method_return(call, "h", connection);
                return;
        }
        r = sd_bus_message_new_method_return(call, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(sq)");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = sd_bus_message_append(reply, "(sq)", ports[i].address, ports[i].port);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                (void) sd_bus_send(NULL, reply, NULL);
}

static int port_authorized(sd_bus_message *call, const SandboxCaller *caller, Sandbox *s, SandboxRequest *req,
                           SandboxError *error) {
        bool open = streq(sd_bus_message_get_member(call), "OpenPort");
        uint32_t port = 0;
        int r;

        if (open) {
                r = sd_bus_message_read(call, "u", &port);
                if (r < 0)
                        return r;
        }
        sd_bus_message_ref(call);
        r = open ? sandbox_open_port(s, port, on_port, call, NULL, error) :
                   sandbox_list_ports(s, on_port, call, NULL, error);
        if (r < 0)
                sd_bus_message_unref(call);
        return r;
}

int method_sandbox_port(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sandbox_authorize_call(m, userdata, port_authorized, NULL);
}
