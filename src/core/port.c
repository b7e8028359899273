/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <unistd.h>

#include "agent-protocol.h"
#include "fd-util.h"
#include "json-util.h"
#include "list.h"
#include "log.h"
#include "port.h"
#include "sandbox-internal.h"

typedef enum PortRequestKind {
        PORT_OPEN,
        PORT_LIST,
} PortRequestKind;

struct PortRequest {
        Sandbox *sandbox;         /* NULL once the sandbox is gone (the thread may still run) */
        PortRequestKind kind;
        uint16_t port;
        sandbox_port_callback_t cb;
        void *userdata;
        sd_event_source *timer;   /* waiting for the agent */
        uint64_t agent_id;        /* of the "port-fds" asked for; 0 once answered */
        /* What the agent made in the sandbox's network namespace: "connect": two sockets,
         * IPv4 and IPv6 (-EBADF: none); "list": its /proc/self/net/tcp and tcp6. */
        int fds[2];
        /* The thread's: it sets these, then writes the eventfd. */
        pthread_t thread;
        bool running;
        int done_fd;
        sd_event_source *done_source;
        int result_fd;
        int error;                /* a positive errno, 0 on success */
        SandboxPort *ports;
        size_t n_ports;
        PortRequest *next, *prev;
};

static unsigned n_threads = 0;

static PortRequest *port_request_free(PortRequest *r) {
        if (!r)
                return NULL;
        if (r->sandbox)
                LIST_REMOVE(r->sandbox->port_requests, r);
        sd_event_source_disable_unref(r->timer);
        sd_event_source_disable_unref(r->done_source);
        safe_close(r->fds[0]);
        safe_close(r->fds[1]);
        safe_close(r->done_fd);
        safe_close(r->result_fd);
        free(r->ports);
        return mfree(r);
}

static void port_request_finish(PortRequest *r, const SandboxError *error) {
        sandbox_port_callback_t cb = TAKE_PTR(r->cb);

        if (cb)
                cb(error ? -EBADF : r->result_fd, r->ports, r->n_ports, error, r->userdata);
        if (!error && cb)
                r->result_fd = -EBADF; /* the callback's now */
        if (!r->running)
                port_request_free(r);
        else if (r->sandbox) {
                /* The thread still runs: the request waits for it, detached. */
                LIST_REMOVE(r->sandbox->port_requests, r);
                r->sandbox = NULL;
        }
}

static void port_request_fail(PortRequest *r, SandboxErrorCode code, const char *message) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;

        (void) sandbox_error_set(&e, code, "%s", message);
        port_request_finish(r, &e);
}

static void port_request_fail_errno(PortRequest *r, const char *what, int error) {
        _cleanup_free_ char *m = NULL;

        if (asprintf(&m, "%s: %s", what, strerror(error)) < 0)
                m = NULL;
        port_request_fail(r, SANDBOX_ERR_SANDBOX_FAILED, m ?: what);
}

/* /proc/net/tcp's "0100007F:1F90" (IPv4: one u32 in host order) or tcp6's four of them. */
static int parse_address(const char *hex, bool v6, SandboxPort *ret) {
        union {
                struct in6_addr a6;
                struct in_addr a4;
                uint32_t w[4];
        } a = {};
        size_t words = v6 ? 4 : 1;
        char part[9];

        if (strlen(hex) != words * 8)
                return -EBADMSG;
        for (size_t i = 0; i < words; i++) {
                memcpy(part, hex + 8 * i, 8);
                part[8] = 0;
                a.w[i] = (uint32_t) strtoul(part, NULL, 16);
        }
        if (!inet_ntop(v6 ? AF_INET6 : AF_INET, &a, ret->address, sizeof(ret->address)))
                return -errno;
        return 0;
}

static int read_listening_file(PortRequest *r, FILE *file, bool v6);

/* The listening sockets of the sandbox's network namespace, from the agent's tcp and
 * tcp6 files. */
static int read_listening(PortRequest *r) {
        for (size_t f = 0; f < ELEMENTSOF(r->fds); f++) {
                FILE *file;
                int k;

                if (r->fds[f] < 0)
                        continue; /* no IPv6 */
                file = fdopen(r->fds[f], "re");
                if (!file)
                        return -errno;
                r->fds[f] = -EBADF; /* the FILE's */
                k = read_listening_file(r, file, f == 1);
                fclose(file);
                if (k < 0)
                        return k;
        }
        return 0;
}

static int read_listening_file(PortRequest *r, FILE *file, bool v6) {
        char line[512];

        if (!fgets(line, sizeof(line), file)) /* the header */
                return 0;
        {
                while (fgets(line, sizeof(line), file)) {
                        char local[40];
                        unsigned port, state;
                        SandboxPort p = {};
                        bool seen = false;

                        if (sscanf(line, " %*u: %39[0-9A-Fa-f]:%x %*s %x", local, &port, &state) != 3 ||
                            state != 0x0A /* TCP_LISTEN */ || port == 0 || port > UINT16_MAX)
                                continue;
                        if (parse_address(local, v6, &p) < 0)
                                continue;
                        p.port = (uint16_t) port;
                        for (size_t i = 0; i < r->n_ports && !seen; i++)
                                seen = r->ports[i].port == p.port && streq(r->ports[i].address, p.address);
                        if (seen)
                                continue;
                        if (r->n_ports >= PORT_LIST_MAX)
                                return 0;
                        SandboxPort *n = realloc(r->ports, (r->n_ports + 1) * sizeof(SandboxPort));
                        if (!n)
                                return -ENOMEM;
                        r->ports = n;
                        r->ports[r->n_ports++] = p;
                }
        }
        return 0;
}

/* Connects the agent's IPv4 socket to 127.0.0.1:port, else its IPv6 one to [::1]:port: a
 * socket belongs to the namespace it was made in, the sandbox's. */
static int connect_loopback(PortRequest *q, int *ret) {
        struct timeval tv = { .tv_sec = PORT_CONNECT_TIMEOUT_USEC / 1000000U };
        struct sockaddr_in in4 = {
                .sin_family = AF_INET,
                .sin_port = htons(q->port),
                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        };
        struct sockaddr_in6 in6 = {
                .sin6_family = AF_INET6,
                .sin6_port = htons(q->port),
                .sin6_addr = IN6ADDR_LOOPBACK_INIT,
        };
        int r = -ECONNREFUSED;

        for (unsigned i = 0; i < 2; i++) {
                _cleanup_close_ int fd = TAKE_FD(q->fds[i]);

                if (fd < 0) {
                        r = i == 0 ? -EAFNOSUPPORT : r;
                        continue;
                }
                /* The connect's bound (a full backlog), not the connection's. */
                (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
                if (connect(fd, i == 0 ? (struct sockaddr *) &in4 : (struct sockaddr *) &in6,
                            i == 0 ? sizeof(in4) : sizeof(in6)) < 0) {
                        r = errno == EINPROGRESS ? -ETIMEDOUT : -errno;
                        /* Only "nothing there" makes IPv6 worth a try. */
                        if (r != -ECONNREFUSED && r != -EADDRNOTAVAIL && r != -EAFNOSUPPORT)
                                return r;
                        continue;
                }
                tv = (struct timeval) {};
                (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
                *ret = TAKE_FD(fd);
                return 0;
        }
        return r;
}

static void *port_thread(void *userdata) {
        PortRequest *r = userdata;
        uint64_t one = 1;
        int k;

        if (r->kind == PORT_OPEN)
                k = connect_loopback(r, &r->result_fd);
        else
                k = read_listening(r);
        r->error = k < 0 ? -k : 0;
        /* An eventfd's write of 1 cannot fail short of a bug. */
        if (write(r->done_fd, &one, sizeof(one)) != sizeof(one))
                abort();
        return NULL;
}

static int on_thread_done(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        PortRequest *r = userdata;
        _cleanup_free_ char *detail = NULL;

        (void) pthread_join(r->thread, NULL);
        r->running = false;
        n_threads--;
        r->done_source = sd_event_source_disable_unref(r->done_source);
        if (!r->cb) {
                port_request_free(r);
                return 0;
        }
        if (r->error == 0) {
                port_request_finish(r, NULL);
                return 0;
        }
        if (r->kind == PORT_OPEN && (r->error == ECONNREFUSED || r->error == ETIMEDOUT)) {
                if (asprintf(&detail, r->error == ECONNREFUSED ?
                             "Nothing listens on port %u of the sandbox's loopback." :
                             "Port %u of the sandbox's loopback did not accept the connection in time.",
                             r->port) < 0)
                        detail = NULL;
                port_request_fail(r, SANDBOX_ERR_NO_SUCH_PROCESS, detail ?: "Nothing listens on that port.");
                return 0;
        }
        port_request_fail_errno(r, "Failed to reach into the sandbox's network", r->error);
        return 0;
}

/* The agent's descriptors are there: a thread connects or reads with them (a connect may
 * wait for a full backlog, up to PORT_CONNECT_TIMEOUT_USEC). */
static void port_request_start(PortRequest *r) {
        Sandbox *s = r->sandbox;
        int k;

        r->timer = sd_event_source_disable_unref(r->timer);
        r->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (r->done_fd < 0) {
                port_request_fail_errno(r, "Failed to reach into the sandbox's network", errno);
                return;
        }
        k = sd_event_add_io(s->manager->event, &r->done_source, r->done_fd, EPOLLIN, on_thread_done, r);
        if (k >= 0)
                k = -pthread_create(&r->thread, NULL, port_thread, r);
        if (k < 0) {
                port_request_fail_errno(r, "Failed to reach into the sandbox's network", -k);
                return;
        }
        r->running = true;
        n_threads++;
}

static int on_agent_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        PortRequest *r = userdata;

        r->timer = sd_event_source_disable_unref(r->timer);
        port_request_fail(r, SANDBOX_ERR_NOT_SUPPORTED,
                          "The sandbox's agent did not hand over what ports need (an agent older than "
                          "sandboxd?).");
        return 0;
}

/* Whether fd is what the agent was asked for, index i of kind's: a TCP socket of the
 * family, not connected; or a file of procfs (its /proc/self/net/tcp or tcp6). The agent
 * can only hand over what is its own (the sandbox's): this keeps a wrong answer from
 * being used as another kind of descriptor. */
static bool port_fd_valid(PortRequestKind kind, size_t i, int fd) {
        int domain = 0, type = 0, protocol = 0;
        socklen_t len = sizeof(int);
        struct sockaddr_storage peer;
        socklen_t peer_len = sizeof(peer);
        struct statfs sf;
        struct stat st;

        if (kind == PORT_LIST)
                return fstatfs(fd, &sf) >= 0 && (uint64_t) sf.f_type == (uint64_t) PROC_SUPER_MAGIC &&
                       fstat(fd, &st) >= 0 && S_ISREG(st.st_mode);
        return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) >= 0 && domain == (i == 0 ? AF_INET : AF_INET6) &&
               getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) >= 0 && type == SOCK_STREAM &&
               getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &len) >= 0 && protocol == IPPROTO_TCP &&
               getpeername(fd, (struct sockaddr *) &peer, &peer_len) < 0 && errno == ENOTCONN;
}

void sandbox_ports_on_fds(Sandbox *s, uint64_t id, int error, int *fds, size_t n_fds) {
        PortRequest *r = NULL;

        for (PortRequest *q = s->port_requests; q && !r; q = q->next)
                if (q->agent_id == id && id != 0)
                        r = q;
        if (!r)
                return; /* gone meanwhile (its descriptors are closed by the caller) */
        r->agent_id = 0;
        if (error == 0 && n_fds == 0)
                error = EPROTO;
        for (size_t i = 0; error == 0 && i < MIN(n_fds, ELEMENTSOF(r->fds)); i++) {
                if (!port_fd_valid(r->kind, i, fds[i]))
                        error = EPROTO;
                else
                        r->fds[i] = TAKE_FD(fds[i]);
        }
        if (error != 0)
                port_request_fail_errno(r, "The sandbox's agent", error);
        else
                port_request_start(r);
}

static int port_request_new(Sandbox *s, PortRequestKind kind, uint32_t port, sandbox_port_callback_t cb,
                            void *userdata, PortRequest **ret, SandboxError *error) {
        PortRequest *r;
        int k;

        if (s->state != SANDBOX_RUNNING)
                return sandbox_error_set(error, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s is %s, not running.", s->id,
                                         sandbox_state_to_string(s->state));
        if (kind == PORT_OPEN && (port == 0 || port > UINT16_MAX))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION, "Port %" PRIu32 " is not 1…65535.", port);
        if (n_threads >= PORT_REQUESTS_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_BUSY, "%u connections are being opened into sandboxes; "
                                         "try again.", PORT_REQUESTS_MAX);
        r = calloc(1, sizeof(PortRequest));
        if (!r)
                return -ENOMEM;
        *r = (PortRequest) {
                .sandbox = s,
                .kind = kind,
                .port = (uint16_t) port,
                .cb = cb,
                .userdata = userdata,
                .fds = { -EBADF, -EBADF },
                .done_fd = -EBADF,
                .result_fd = -EBADF,
        };
        LIST_PREPEND(s->port_requests, r);
        {
                static uint64_t next_id = 0;
                _cleanup_json_ json_object *m = agent_msg_port_fds(++next_id, kind == PORT_OPEN ? "connect" : "list");

                k = m ? agent_send(s->control_fd, m, NULL, 0) : -ENOMEM;
                if (k < 0) {
                        port_request_free(r);
                        return sandbox_error_set_errno(error, -k, "Failed to ask sandbox %s's agent: %m", s->id);
                }
                r->agent_id = next_id;
        }
        k = sd_event_add_time_relative(s->manager->event, &r->timer, CLOCK_MONOTONIC, PORT_CONNECT_TIMEOUT_USEC, 0,
                                       on_agent_timeout, r);
        if (k < 0) {
                port_request_free(r);
                return k;
        }
        if (ret)
                *ret = r;
        return 0;
}

int sandbox_open_port(Sandbox *s, uint32_t port, sandbox_port_callback_t cb, void *userdata, PortRequest **ret,
                      SandboxError *error) {
        return port_request_new(s, PORT_OPEN, port, cb, userdata, ret, error);
}

int sandbox_list_ports(Sandbox *s, sandbox_port_callback_t cb, void *userdata, PortRequest **ret,
                       SandboxError *error) {
        return port_request_new(s, PORT_LIST, 0, cb, userdata, ret, error);
}

void port_request_cancel(PortRequest *r) {
        if (!r)
                return;
        r->cb = NULL;
        if (!r->running)
                port_request_free(r);
}

void sandbox_ports_done(Sandbox *s, const SandboxError *error) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;

        if (!error) {
                (void) sandbox_error_set(&e, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s ended.", s->id);
                error = &e;
        }
        while (s->port_requests)
                port_request_finish(s->port_requests, error);
}
