/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxctl ports and port-forward: what listens in a sandbox, and a listener on the host
 * whose every connection gets a fresh one into the sandbox (OpenPort, docs/PORTS.md). */

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fd-util.h"
#include "json-util.h"
#include "parse-util.h"
#include "strv.h"
#include "sandboxctl-ports.h"
#include "sandboxctl-util.h"

int ports_show(SandboxClient *c, const char *id, bool json) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        SandboxPortInfo *ports = NULL;
        size_t n = 0;
        int r;

        r = sandbox_get(c, id, &h);
        if (r < 0)
                return r;
        r = sandbox_handle_list_ports(h, &ports, &n, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to list the ports of sandbox %s: %s", id,
                                       sandbox_client_error_message(&error, r));
        if (json) {
                _cleanup_json_ json_object *a = json_object_new_array();

                for (size_t i = 0; a && r >= 0 && i < n; i++) {
                        json_object *o = json_object_new_object();
                        if (!o || json_object_array_add(a, o) < 0) {
                                json_object_put(o);
                                r = -ENOMEM;
                        } else if (json_add_string(o, "address", ports[i].address) < 0 ||
                                   json_add(o, "port", json_object_new_int(ports[i].port)) < 0)
                                r = -ENOMEM;
                }
                sandbox_port_info_array_free(ports, n);
                if (!a || r < 0)
                        return log_oom();
                return print_json(a);
        }
        printf("%-40s %s\n", "ADDRESS", "PORT");
        for (size_t i = 0; i < n; i++)
                printf("%-40s %u\n", ports[i].address, ports[i].port);
        sandbox_port_info_array_free(ports, n);
        return 0;
}

/* Copies both ways until both sides ended, each direction's end passed on (shutdown). */
static void relay(int a, int b) {
        struct {
                int from, to;
                char buf[65536];
                size_t start, end;
                bool eof;
        } d[2] = { { .from = a, .to = b }, { .from = b, .to = a } };

        while (!(d[0].eof && d[0].start == d[0].end && d[1].eof && d[1].start == d[1].end)) {
                struct pollfd p[2] = { { .fd = a }, { .fd = b } };

                for (unsigned i = 0; i < 2; i++) {
                        if (!d[i].eof && d[i].end < sizeof(d[i].buf))
                                p[i].events |= POLLIN;
                        if (d[i].start < d[i].end)
                                p[1 - i].events |= POLLOUT;
                }
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return;
                }
                for (unsigned i = 0; i < 2; i++) {
                        struct pollfd *in = &p[i], *out = &p[1 - i];

                        if ((in->revents & (POLLIN | POLLHUP | POLLERR)) && !d[i].eof && d[i].end < sizeof(d[i].buf)) {
                                ssize_t k = read(d[i].from, d[i].buf + d[i].end, sizeof(d[i].buf) - d[i].end);
                                if (k > 0)
                                        d[i].end += (size_t) k;
                                else if (k == 0 || errno != EINTR)
                                        d[i].eof = true;
                        }
                        if ((out->revents & (POLLOUT | POLLERR | POLLHUP)) && d[i].start < d[i].end) {
                                ssize_t k = send(d[i].to, d[i].buf + d[i].start, d[i].end - d[i].start, MSG_NOSIGNAL);
                                if (k < 0 && errno != EINTR)
                                        return; /* the other side is gone */
                                if (k > 0)
                                        d[i].start += (size_t) k;
                                if (d[i].start == d[i].end)
                                        d[i].start = d[i].end = 0;
                        }
                        if (d[i].eof && d[i].start == d[i].end)
                                (void) shutdown(d[i].to, SHUT_WR);
                }
        }
}

/* LOCAL: a path (a unix socket), or [ADDRESS:]PORT (TCP; ADDRESS 127.0.0.1 unless given,
 * an IPv6 one in brackets). */
static int listen_local(const char *local, char **ret_shown, char **ret_path) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *host = NULL;
        union {
                struct sockaddr sa;
                struct sockaddr_in in4;
                struct sockaddr_in6 in6;
                struct sockaddr_un un;
        } a = {};
        socklen_t len;
        const char *colon, *port_text = local;
        uint64_t port;
        int one = 1;

        if (strchr(local, '/')) {
                if (strlen(local) >= sizeof(a.un.sun_path))
                        return log_error_errno(ENAMETOOLONG, "Socket path too long: %s", local);
                a.un.sun_family = AF_UNIX;
                strcpy(a.un.sun_path, local);
                len = sizeof(a.un);
                fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        } else {
                colon = strrchr(local, ':');
                if (colon) {
                        host = strndup(local, (size_t) (colon - local));
                        if (!host)
                                return log_oom();
                        port_text = colon + 1;
                }
                if (parse_uint64(port_text, &port) < 0 || port > 65535)
                        return log_error_errno(EINVAL, "Invalid local address '%s': [ADDRESS:]PORT or a socket path.",
                                               local);
                if (host && host[0] == '[' && host[strlen(host) - 1] == ']') {
                        host[strlen(host) - 1] = 0;
                        a.in6 = (struct sockaddr_in6) { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t) port) };
                        if (inet_pton(AF_INET6, host + 1, &a.in6.sin6_addr) != 1)
                                return log_error_errno(EINVAL, "Invalid local address '%s'.", local);
                        len = sizeof(a.in6);
                } else {
                        a.in4 = (struct sockaddr_in) { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
                        if (inet_pton(AF_INET, host && !streq(host, "localhost") ? host : "127.0.0.1",
                                      &a.in4.sin_addr) != 1)
                                return log_error_errno(EINVAL, "Invalid local address '%s'.", local);
                        len = sizeof(a.in4);
                }
                fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (fd >= 0)
                        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        }
        if (fd < 0)
                return log_error_errno(errno, "Failed to make a socket: %m");
        if (bind(fd, &a.sa, len) < 0)
                return log_error_errno(errno, "Failed to listen on %s: %m", local);
        if (listen(fd, SOMAXCONN) < 0)
                return log_error_errno(errno, "Failed to listen on %s: %m", local);
        if (a.sa.sa_family == AF_UNIX) {
                *ret_path = strdup(local);
                *ret_shown = strdup(local);
        } else {
                char text[INET6_ADDRSTRLEN];

                len = sizeof(a);
                if (getsockname(fd, &a.sa, &len) < 0)
                        return log_error_errno(errno, "getsockname(): %m");
                if (a.sa.sa_family == AF_INET6) {
                        inet_ntop(AF_INET6, &a.in6.sin6_addr, text, sizeof(text));
                        if (asprintf(ret_shown, "[%s]:%u", text, ntohs(a.in6.sin6_port)) < 0)
                                *ret_shown = NULL;
                } else {
                        inet_ntop(AF_INET, &a.in4.sin_addr, text, sizeof(text));
                        if (asprintf(ret_shown, "%s:%u", text, ntohs(a.in4.sin_port)) < 0)
                                *ret_shown = NULL;
                }
        }
        if (!*ret_shown)
                return log_oom();
        return TAKE_FD(fd);
}

static volatile sig_atomic_t stop = 0;

static void on_stop(int sig) {
        stop = 1;
}

int port_forward(SandboxClient *c, const char *id, const char *port_text, const char *local) {
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        _cleanup_free_ char *shown = NULL, *path = NULL;
        _cleanup_close_ int listener = -EBADF;
        struct sigaction sa = { .sa_handler = on_stop }, ign = { .sa_handler = SIG_IGN, .sa_flags = SA_NOCLDWAIT };
        uint64_t port;
        int r;

        if (parse_uint64(port_text, &port) < 0 || port == 0 || port > 65535)
                return log_error_errno(EINVAL, "Invalid port '%s', expected 1…65535.", port_text);
        r = sandbox_get(c, id, &h);
        if (r < 0)
                return r;
        listener = listen_local(local ?: port_text, &shown, &path);
        if (listener < 0)
                return listener;
        /* Ended by SIGINT or SIGTERM (accept() then fails with EINTR: no SA_RESTART); the
         * relays are children, reaped by the kernel. */
        (void) sigaction(SIGINT, &sa, NULL);
        (void) sigaction(SIGTERM, &sa, NULL);
        (void) sigaction(SIGCHLD, &ign, NULL);
        /* The address on stdout, for scripts (and a port 0 made concrete). */
        printf("%s\n", shown);
        fflush(stdout);
        fprintf(stderr, "Forwarding %s to port %" PRIu64 " of sandbox %s.\n", shown, port, sandbox_handle_id(h));

        while (!stop) {
                _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
                _cleanup_close_ int conn = -EBADF, upstream = -EBADF;
                pid_t pid;

                conn = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
                if (conn < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        r = log_error_errno(errno, "accept(): %m");
                        break;
                }
                r = sandbox_handle_open_port(h, (uint16_t) port, &upstream, &error);
                if (r < 0) {
                        fprintf(stderr, "Port %" PRIu64 " of sandbox %s: %s\n", port, sandbox_handle_id(h),
                                sandbox_client_error_message(&error, r));
                        /* The sandbox is gone: nothing more to forward to. */
                        if (sandbox_client_error_has_name(&error, SANDBOX_ERROR_NO_SUCH_SANDBOX) ||
                            sandbox_client_error_has_name(&error, SANDBOX_ERROR_NOT_RUNNING))
                                break;
                        r = 0;
                        continue;
                }
                pid = fork();
                if (pid < 0) {
                        r = log_error_errno(errno, "fork(): %m");
                        break;
                }
                if (pid == 0) {
                        listener = safe_close(listener);
                        relay(conn, upstream);
                        _exit(EXIT_SUCCESS);
                }
        }
        if (path)
                (void) unlink(path);
        return r < 0 ? r : 0;
}

int watch_show(SandboxClient *c, const char *id, const char *path) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        FILE *f;
        int fd, r;

        r = sandbox_get(c, id, &h);
        if (r < 0)
                return r;
        r = sandbox_handle_watch_directory(h, path, true, &fd, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to watch %s in sandbox %s: %s", path, id,
                                       sandbox_client_error_message(&error, r));
        f = fdopen(fd, "re");
        if (!f) {
                safe_close(fd);
                return log_oom();
        }
        /* The events as the agent writes them, a JSON object a line, until interrupted; one
         * saying "error" is the end, with its reason. */
        while (getline(&line, &size, f) > 0) {
                _cleanup_json_ json_object *o = json_tokener_parse(line);
                json_object *event, *e;

                if (o && json_object_object_get_ex(o, "event", &event) &&
                    streq(json_object_get_string(event), "error")) {
                        int k = json_object_object_get_ex(o, "errno", &e) ? json_object_get_int(e) : EIO;
                        fclose(f);
                        return log_error_errno(k > 0 ? k : EIO, "Failed to watch %s in sandbox %s: %s", path, id,
                                               strerror(k > 0 ? k : EIO));
                }
                if (fputs(line, stdout) < 0 || fflush(stdout) != 0)
                        break; /* our reader is gone */
        }
        fclose(f);
        return 0;
}
