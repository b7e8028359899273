/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A sandbox's ports on io.sandboxd.Sandbox: OpenPort (the connection passed with the reply,
 * SCM_RIGHTS) and ListPorts, as on D-Bus (sandbox-ports-dbus.c). */

#include "fd-util.h"
#include "json-util.h"
#include "port.h"
#include "sandbox-varlink.h"

#define ARG(field) offsetof(SandboxArgs, field)

static void on_port(int fd, const SandboxPort *ports, size_t n, const SandboxError *error, void *userdata) {
        _cleanup_(varlink_call_unrefp) VarlinkCall *call = userdata;
        _cleanup_json_ json_object *p = json_object_new_object(), *a = json_object_new_array();
        _cleanup_close_ int connection = fd;
        int r = 0;

        if (error) {
                (void) varlink_reply_sandbox_error(call, error);
                return;
        }
        if (!p || !a) {
                (void) varlink_reply_error(call, NULL, -ENOMEM);
                return;
        }
        if (streq(varlink_call_get_method(call), SANDBOX_VARLINK_INTERFACE ".OpenPort")) {
                /* The descriptor's index among those passed with the reply. */
                if (json_add(p, "fd", json_object_new_int(0)) < 0 ||
                    varlink_call_reply_with_fds(call, p, &connection, 1) < 0)
                        (void) varlink_reply_error(call, NULL, -ENOMEM);
                return;
        }
        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_json_ json_object *o = json_object_new_object();

                if (!o || json_add(o, "address", json_object_new_string(ports[i].address)) < 0 ||
                    json_add(o, "port", json_object_new_int(ports[i].port)) < 0 ||
                    json_object_array_add(a, o) < 0)
                        r = -ENOMEM;
                else
                        o = NULL;
        }
        if (r >= 0)
                r = json_add(p, "ports", TAKE_PTR(a));
        if (r < 0)
                (void) varlink_reply_error(call, NULL, r);
        else
                (void) varlink_reply_or_fail(call, p);
}

static int port_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s, SandboxVarlinkRequest *req,
                           SandboxError *error) {
        bool open = streq(varlink_call_get_method(call), SANDBOX_VARLINK_INTERFACE ".OpenPort");
        int r;

        r = open ? sandbox_open_port(s, req->args.port, on_port, varlink_call_ref(call), NULL, error) :
                   sandbox_list_ports(s, on_port, varlink_call_ref(call), NULL, error);
        if (r < 0)
                varlink_call_unref(call);
        return r;
}

static const VarlinkParam open_port_params[] = {
        { "id",   VARLINK_PARAM_STRING, ARG(id), true },
        { "port", VARLINK_PARAM_UINT32, ARG(port), true },
        {}
};

static const VarlinkParam list_ports_params[] = {
        { "id", VARLINK_PARAM_STRING, ARG(id), true },
        {}
};

static int method_port(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        bool open = streq(varlink_call_get_method(call), SANDBOX_VARLINK_INTERFACE ".OpenPort");

        return sandbox_varlink_method(userdata, call, parameters, open ? open_port_params : list_ports_params, NULL,
                                      port_authorized);
}

int sandbox_ports_varlink_bind(VarlinkFrontend *f) {
        static const VarlinkMethodEntry methods[] = {
                { "OpenPort",  method_port },
                { "ListPorts", method_port },
        };

        return varlink_bind_methods(f->server, SANDBOX_VARLINK_INTERFACE, methods, ELEMENTSOF(methods), f);
}
