/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A sandbox's ports: OpenPort (a connection into it) and ListPorts. */

#include <fcntl.h>

#include "sandbox-client-internal.h"

/* Calls m, whose reply is one descriptor: a copy of it in *ret_fd (the reply's goes with it). */
static int call_for_fd(SandboxHandle *h, sd_bus_message *m, int *ret_fd, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int fd, r;

        r = client_call(h->client, m, 0, /* interruptible= */ false, error, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "h", &fd);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return client_error_from_bus(error, NULL, -errno);
        *ret_fd = fd;
        return 0;
}

int sandbox_handle_open_port(SandboxHandle *h, uint16_t port, int *ret_fd, SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = client_new_call(h->client, h, "OpenPort", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "u", (uint32_t) port);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        return call_for_fd(h, m, ret_fd, error);
}

static int port_read(sd_bus_message *m, void *item) {
        SandboxPortInfo *p = item;
        const char *address;
        int r;

        r = sd_bus_message_read(m, "(sq)", &address, &p->port);
        if (r <= 0)
                return r;
        p->address = strdup(address);
        return p->address ? 1 : -ENOMEM;
}

static void port_done(void *item) {
        free(((SandboxPortInfo *) item)->address);
}

void sandbox_port_info_array_free(SandboxPortInfo *a, size_t n) {
        client_array_free(a, n, sizeof(SandboxPortInfo), port_done);
}

int sandbox_handle_list_ports(SandboxHandle *h, SandboxPortInfo **ret, size_t *ret_n, SandboxClientError *error) {
        return client_call_list(h->client, h, "ListPorts", "(sq)", sizeof(SandboxPortInfo), port_read, port_done,
                                (void **) ret, ret_n, error);
}

int sandbox_handle_watch_directory(SandboxHandle *h, const char *path, bool recursive, int *ret_fd,
                                   SandboxClientError *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = client_new_call(h->client, h, "WatchDirectory", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "sb", path, recursive);
        if (r < 0)
                return client_error_from_bus(error, NULL, r);
        return call_for_fd(h, m, ret_fd, error);
}
