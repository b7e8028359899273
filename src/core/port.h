/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A sandbox's ports (docs/PORTS.md): connections to a port of its own loopback, opened by
 * sandboxd from inside its network namespace and handed to the caller (OpenPort), and what
 * listens there (ListPorts). The namespace is the agent's (its /proc/self/ns/net, asked for
 * once); a short-lived thread joins it with setns() and connects, or reads
 * /proc/thread-self/net/tcp{,6}, so the event loop never waits. The sandbox keeps its
 * network as it was: no route, no address, nothing another sandbox can reach. */

#include <netinet/in.h>
#include <stdint.h>

#include "sandbox-errors.h"

typedef struct Sandbox Sandbox;
typedef struct PortRequest PortRequest;

/* How long a connection may take (a server's full backlog), and the namespace's handing. */
#define PORT_CONNECT_TIMEOUT_USEC (5U * 1000000U)
/* Threads at once (connecting or listing), in all. */
#define PORT_REQUESTS_MAX 64U
/* ListPorts: at most this many entries. */
#define PORT_LIST_MAX 1024U

typedef struct SandboxPort {
        char address[INET6_ADDRSTRLEN]; /* "127.0.0.1", "::", … as bound */
        uint16_t port;
} SandboxPort;

/* OpenPort: fd (the caller's to close) connected to port, or error. ListPorts: the ports
 * listening (TCP, IPv4 and IPv6), n of them, valid during the call. */
typedef void (*sandbox_port_callback_t)(int fd, const SandboxPort *ports, size_t n, const SandboxError *error,
                                        void *userdata);

/* Connects to 127.0.0.1:port in s (then [::1]:port if nothing listens on IPv4). User
 * errors (not running, port out of 1…65535, Busy) come back as -errno with error set and
 * cb not called; otherwise cb is called once. */
int sandbox_open_port(Sandbox *s, uint32_t port, sandbox_port_callback_t cb, void *userdata, PortRequest **ret,
                      SandboxError *error);
int sandbox_list_ports(Sandbox *s, sandbox_port_callback_t cb, void *userdata, PortRequest **ret,
                       SandboxError *error);
/* The caller is gone: cb is not called. */
void port_request_cancel(PortRequest *r);

/* The agent's answer to "port-fds": the descriptors it made in the sandbox's network
 * namespace (those used are taken: set to -EBADF). */
void sandbox_ports_on_fds(Sandbox *s, uint64_t id, int error, int *fds, size_t n_fds);
/* The sandbox ends: its requests fail with error (NULL: NotRunning). */
void sandbox_ports_done(Sandbox *s, const SandboxError *error);
