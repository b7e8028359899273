/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/nsfs.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
        sd_event_source *timer;   /* waiting for the namespace */
        /* The thread's: it sets these, then writes the eventfd. */
        pthread_t thread;
        bool running;
        int netns_fd;
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
        safe_close(r->netns_fd);
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

/* The listening sockets of the thread's network namespace. */
static int read_listening(PortRequest *r) {
        static const char *const files[] = { "/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6" };

        for (size_t f = 0; f < ELEMENTSOF(files); f++) {
                FILE *file = fopen(files[f], "re");
                int k;

                if (!file) {
                        if (errno == ENOENT && f == 1)
                                continue; /* no IPv6 */
                        return -errno;
                }
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

static int connect_loopback(uint16_t port, int *ret) {
        struct timeval tv = { .tv_sec = PORT_CONNECT_TIMEOUT_USEC / 1000000U };
        struct sockaddr_in in4 = {
                .sin_family = AF_INET,
                .sin_port = htons(port),
                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        };
        struct sockaddr_in6 in6 = {
                .sin6_family = AF_INET6,
                .sin6_port = htons(port),
                .sin6_addr = IN6ADDR_LOOPBACK_INIT,
        };
        int r = -ECONNREFUSED;

        for (unsigned i = 0; i < 2; i++) {
                _cleanup_close_ int fd = socket(i == 0 ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

                if (fd < 0) {
                        r = -errno;
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

        if (setns(r->netns_fd, CLONE_NEWNET) < 0)
                k = -errno;
        else if (r->kind == PORT_OPEN)
                k = connect_loopback(r->port, &r->result_fd);
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

/* The namespace is there: the thread joins it. */
static void port_request_start(PortRequest *r) {
        Sandbox *s = r->sandbox;
        int k;

        r->timer = sd_event_source_disable_unref(r->timer);
        r->netns_fd = fcntl(s->netns_fd, F_DUPFD_CLOEXEC, 3);
        r->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (r->netns_fd < 0 || r->done_fd < 0) {
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

static int on_netns_timeout(sd_event_source *source, uint64_t usec, void *userdata) {
        PortRequest *r = userdata;

        r->timer = sd_event_source_disable_unref(r->timer);
        port_request_fail(r, SANDBOX_ERR_NOT_SUPPORTED,
                          "The sandbox's agent did not hand over its network namespace (an agent older than "
                          "ports?).");
        return 0;
}

void sandbox_ports_on_netns(Sandbox *s, uint64_t id, int error, int fd) {
        _cleanup_close_ int netns = fd;
        struct stat st, ours;

        if (id != s->netns_request || s->netns_fd >= 0)
                return;
        s->netns_request = 0;
        /* Only a network namespace, and never sandboxd's own (the sandbox has its own). */
        if (error == 0 && (netns < 0 || ioctl(netns, NS_GET_NSTYPE) != CLONE_NEWNET || fstat(netns, &st) < 0 ||
                           stat("/proc/self/ns/net", &ours) < 0 ||
                           (st.st_ino == ours.st_ino && st.st_dev == ours.st_dev)))
                error = EPROTO;
        if (error == 0)
                s->netns_fd = TAKE_FD(netns);
        for (PortRequest *r = s->port_requests, *next; r; r = next) {
                next = r->next;
                if (r->running || r->done_source)
                        continue;
                if (error == 0)
                        port_request_start(r);
                else
                        port_request_fail_errno(r, "The sandbox's network namespace", error);
        }
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
                .netns_fd = -EBADF,
                .done_fd = -EBADF,
                .result_fd = -EBADF,
        };
        LIST_PREPEND(s->port_requests, r);
        if (s->netns_fd >= 0)
                port_request_start(r);
        else {
                if (s->netns_request == 0) {
                        static uint64_t next_id = 0;
                        _cleanup_json_ json_object *m = agent_msg_netns(++next_id);

                        k = m ? agent_send(s->control_fd, m, NULL, 0) : -ENOMEM;
                        if (k < 0) {
                                port_request_free(r);
                                return sandbox_error_set_errno(error, -k, "Failed to ask sandbox %s's agent: %m", s->id);
                        }
                        s->netns_request = next_id;
                }
                k = sd_event_add_time_relative(s->manager->event, &r->timer, CLOCK_MONOTONIC, PORT_CONNECT_TIMEOUT_USEC,
                                               0, on_netns_timeout, r);
                if (k < 0) {
                        port_request_free(r);
                        return k;
                }
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
        s->netns_fd = safe_close(s->netns_fd);
        s->netns_request = 0;
}
