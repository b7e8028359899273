/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <inttypes.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "agent-protocol.h"
#include "egress.h"
#include "egress-policy.h"
#include "json-util.h"
#include "log.h"
#include "sandbox-internal.h"
#include "sandbox-secrets.h"
#include "secret-store.h"
#include "strv.h"
#include "time-util.h"

#define EGRESS_RETRY_USEC (1000000ULL)
#define EGRESS_REMOVALS_MAX 65536U

#define PROXY_URL "http://127.0.0.1:3128"
const char * const egress_environment[] = {
        "HTTPS_PROXY=" PROXY_URL,
        "https_proxy=" PROXY_URL,
        "HTTP_PROXY=" PROXY_URL,
        "http_proxy=" PROXY_URL,
        "NO_PROXY=localhost,127.0.0.1,::1",
        "no_proxy=localhost,127.0.0.1,::1",
        NULL
};

struct EgressClient {
        Manager *manager;
        char *path;
        int fd;
        sd_event_source *io;
        sd_event_source *retry;
        char **removals;        /* sandbox ids whose "remove" is not sent yet */
        bool warned;
};

static void egress_client_disconnect(EgressClient *c) {
        c->io = sd_event_source_disable_unref(c->io);
        c->fd = safe_close(c->fd);
}

static void egress_client_schedule_retry(EgressClient *c) {
        (void) sd_event_source_set_time_relative(c->retry, EGRESS_RETRY_USEC);
        (void) sd_event_source_set_enabled(c->retry, SD_EVENT_ONESHOT);
}

static json_object *build_add(Sandbox *s) {
        _cleanup_strv_free_ char **allow = NULL, **deny = NULL;
        json_object *o;

        if (sandbox_config_egress_strv(&s->config, false, &allow) < 0 ||
            sandbox_config_egress_strv(&s->config, true, &deny) < 0)
                return NULL;
        o = json_object_new_object();
        if (!o ||
            json_add(o, "type", json_object_new_string("add")) < 0 ||
            json_add(o, "sandbox", json_object_new_string(s->id)) < 0 ||
            json_add(o, "allow", strv_to_json(allow)) < 0 ||
            json_add(o, "deny", strv_to_json(deny)) < 0) {
                json_object_put(o);
                return NULL;
        }
        /* Secrets bound to headers (sandbox-secrets.h): the proxy adds each to the requests
         * for its host, over TLS it terminates with the sandbox's CA. */
        if (sandbox_has_header_secrets(s)) {
                json_object *l = json_object_new_array();

                if (json_add(o, "inject", l) < 0 ||
                    json_add(o, "ca_cert", json_object_new_string(s->egress_ca_cert)) < 0 ||
                    json_add(o, "ca_key", json_object_new_string(s->egress_ca_key)) < 0) {
                        json_object_put(o);
                        return NULL;
                }
                for (size_t i = 0; i < s->n_secrets; i++) {
                        const SecretBinding *b = &s->secret_bindings[i];
                        json_object *e;

                        if (b->kind != SECRET_BIND_HEADER)
                                continue;
                        e = json_object_new_object();
                        if (!e || json_object_array_add(l, e) < 0 ||
                            json_add(e, "host", json_object_new_string(b->host)) < 0 ||
                            json_add(e, "header", json_object_new_string(b->header)) < 0 ||
                            json_add(e, "value", json_object_new_string(s->secret_values[i])) < 0) {
                                json_object_put(e);
                                json_object_put(o);
                                return NULL;
                        }
                }
        }
        return o;
}

static json_object *build_remove(const char *id) {
        json_object *o = json_object_new_object();

        if (!o ||
            json_add(o, "type", json_object_new_string("remove")) < 0 ||
            json_add(o, "sandbox", json_object_new_string(id)) < 0) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

/* One message: 0 sent, 1 not now (the socket is full, or no memory for the message: tried
 * again when it is writable), -1 the connection is gone (a retry is scheduled). */
static int egress_client_send(EgressClient *c, json_object *o, int *fds, size_t n_fds) {
        int r;

        r = o ? agent_send(c->fd, o, fds, n_fds) : -ENOMEM;
        if (r == -EAGAIN || r == -ENOMEM)
                return 1;
        if (r < 0) {
                egress_client_disconnect(c);
                egress_client_schedule_retry(c);
                return -1;
        }
        return 0;
}

/* Sends what waits, as far as the socket takes it. */
static void egress_client_flush(EgressClient *c) {
        bool blocked = false;
        int r;

        if (c->fd < 0)
                return;
        while (!strv_isempty(c->removals)) {
                _cleanup_json_ json_object *o = build_remove(c->removals[0]);

                r = egress_client_send(c, o, NULL, 0);
                if (r < 0)
                        return;
                if (r > 0) {
                        blocked = true;
                        break;
                }
                free(c->removals[0]);
                memmove(c->removals, c->removals + 1, strv_length(c->removals) * sizeof(char *));
        }
        for (Sandbox *s = c->manager->sandboxes; s && !blocked; s = s->next) {
                if (!s->egress_pending || s->egress_fd < 0)
                        continue;
                _cleanup_json_ json_object *o = build_add(s);
                r = egress_client_send(c, o, &s->egress_fd, 1);
                if (r < 0)
                        return;
                if (r > 0) {
                        blocked = true;
                        break;
                }
                s->egress_pending = false;
                log_sandbox(s, LOG_INFO, 0, "Sandbox %s: its egress proxy is handed to sandboxd-egress.", s->id);
        }
        (void) sd_event_source_set_io_events(c->io, EPOLLIN | (blocked ? EPOLLOUT : 0));
}

static void log_usage(json_object *msg) {
        int64_t up, down, allowed, denied;
        const char *type, *id;

        if (agent_get_string(msg, "type", &type) < 0 || !streq(type, "usage") ||
            agent_get_string(msg, "sandbox", &id) < 0 || !sandbox_id_is_valid(id) ||
            agent_get_int64(msg, "bytes_up", &up) < 0 || agent_get_int64(msg, "bytes_down", &down) < 0 ||
            agent_get_int64(msg, "allowed", &allowed) < 0 || agent_get_int64(msg, "denied", &denied) < 0)
                return;
        log_internal(LOG_INFO, 0, id, "Sandbox %s sent %" PRIi64 " bytes through the egress proxy and received %"
                     PRIi64 "; %" PRIi64 " connections allowed, %" PRIi64 " denied.", id, up, down, allowed, denied);
}

static int on_egress_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        EgressClient *c = userdata;

        if (revents & EPOLLIN) {
                /* "usage": what a sandbox that ended sent and received through the proxy. */
                for (unsigned n = 0; n < 64; n++) {
                        _cleanup_json_ json_object *msg = NULL;
                        size_t n_fds = 0;
                        int r = agent_recv(fd, &msg, NULL, 0, &n_fds);

                        if (r == -EAGAIN)
                                break;
                        if (r == -EBADMSG)
                                continue;
                        if (r >= 0) {
                                log_usage(msg);
                                continue;
                        }
                        if (r < 0) {
                                log_warning("sandboxd-egress closed its connection; connecting again.");
                                egress_client_disconnect(c);
                                /* A new proxy knows nothing: every sandbox is sent again. */
                                for (Sandbox *s = c->manager->sandboxes; s; s = s->next)
                                        if (s->egress_fd >= 0)
                                                s->egress_pending = true;
                                egress_client_schedule_retry(c);
                                return 0;
                        }
                }
        }
        if (revents & (EPOLLOUT | EPOLLIN))
                egress_client_flush(c);
        return 0;
}

static int egress_client_connect(EgressClient *c) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (strlen(c->path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, c->path);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* AF_UNIX connect does not wait for the listener's accept(); a full backlog is
         * EAGAIN, retried like a missing socket. */
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        r = sd_event_add_io(c->manager->event, &c->io, fd, EPOLLIN, on_egress_io, c);
        if (r < 0)
                return r;
        c->fd = TAKE_FD(fd);
        c->warned = false;
        log_info("Connected to sandboxd-egress at %s.", c->path);
        return 0;
}

static bool egress_client_wanted(EgressClient *c) {
        if (!strv_isempty(c->removals))
                return true;
        for (Sandbox *s = c->manager->sandboxes; s; s = s->next)
                if (s->egress_pending)
                        return true;
        return false;
}

static int on_egress_retry(sd_event_source *source, uint64_t usec, void *userdata) {
        EgressClient *c = userdata;
        int r;

        if (c->fd >= 0 || !egress_client_wanted(c))
                return 0;
        r = egress_client_connect(c);
        if (r < 0) {
                if (!c->warned)
                        log_warning_errno(r, "Cannot connect to sandboxd-egress at %s, trying again: %m", c->path);
                c->warned = true;
                egress_client_schedule_retry(c);
                return 0;
        }
        egress_client_flush(c);
        return 0;
}

int egress_client_new(Manager *m, const char *socket_path, EgressClient **ret) {
        EgressClient *c;
        int r;

        c = calloc(1, sizeof(EgressClient));
        if (!c)
                return -ENOMEM;
        *c = (EgressClient) { .manager = m, .fd = -EBADF };
        c->path = strdup(socket_path);
        if (!c->path) {
                egress_client_free(c);
                return -ENOMEM;
        }
        r = sd_event_add_time_relative(m->event, &c->retry, CLOCK_MONOTONIC, EGRESS_RETRY_USEC, 0,
                                       on_egress_retry, c);
        if (r < 0) {
                egress_client_free(c);
                return r;
        }
        (void) sd_event_source_set_enabled(c->retry, SD_EVENT_OFF);
        *ret = c;
        return 0;
}

EgressClient *egress_client_free(EgressClient *c) {
        if (!c)
                return NULL;
        egress_client_disconnect(c);
        sd_event_source_disable_unref(c->retry);
        strv_free(c->removals);
        free(c->path);
        return mfree(c);
}

static void egress_client_kick(EgressClient *c) {
        if (c->fd >= 0) {
                egress_client_flush(c);
                return;
        }
        /* Connecting is cheap and never blocks (AF_UNIX): at once, not in a second. */
        on_egress_retry(c->retry, 0, c);
}

void egress_client_add(EgressClient *c, Sandbox *s) {
        s->egress_pending = true;
        egress_client_kick(c);
}

void egress_client_remove(EgressClient *c, const char *sandbox_id) {
        if (strv_length(c->removals) >= EGRESS_REMOVALS_MAX || strv_extend(&c->removals, sandbox_id) < 0) {
                log_warning("Sandbox %s: its egress proxy could not be scheduled for removal.", sandbox_id);
                return;
        }
        egress_client_kick(c);
}
