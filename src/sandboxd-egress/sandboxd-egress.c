/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * sandboxd-egress: the control side. sandboxd connects to the control socket (a
 * SOCK_SEQPACKET socket, passed in by systemd: sandboxd-egress.socket, root only) and
 * speaks in JSON datagrams (agent_send()/agent_recv() framing):
 *   {"type":"add","sandbox":ID,"allow":[rules],"deny":[rules]}   + the listening socket
 *        starts (or, for an ID it has, replaces) the proxy of sandbox ID; with secrets
 *        bound to headers also "inject":[{"host":H,"header":N,"value":V}], "ca_cert" and
 *        "ca_key" (PEM; inject.c)
 *   {"type":"remove","sandbox":ID}
 *        ends it and every connection of it; answered with
 *   {"type":"usage","sandbox":ID,"bytes_up":U,"bytes_down":D,"allowed":A,"denied":N}
 * A sandbox's proxy does not depend on the connection that added it: sandboxd may restart.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

#include "agent-protocol.h"
#include "egress-tls.h"
#include "egress.h"
#include "inject.h"
#include "route.h"
#include "json-util.h"
#include "list.h"
#include "strv.h"

#define CONTROLS_MAX 8U
#define BOXES_MAX 65536U

typedef struct Control {
        Egress *egress;
        int fd;
        sd_event_source *source;
        struct Control *next, *prev;
} Control;

static Box *egress_find_box(Egress *e, const char *id) {
        for (Box *b = e->boxes; b; b = b->next)
                if (streq(b->id, id))
                        return b;
        return NULL;
}

static unsigned egress_n_boxes(Egress *e) {
        unsigned n = 0;
        for (Box *b = e->boxes; b; b = b->next)
                n++;
        return n;
}

void injections_free(Injection *l, size_t n) {
        for (size_t i = 0; l && i < n; i++) {
                free(l[i].header);
                if (l[i].value) {
                        explicit_bzero(l[i].value, strlen(l[i].value));
                        free(l[i].value);
                }
                free(l[i].chain_pem);
                if (l[i].key_pem) {
                        explicit_bzero(l[i].key_pem, strlen(l[i].key_pem));
                        free(l[i].key_pem);
                }
        }
        free(l);
}

/* "inject", "ca_cert", "ca_key" of an add (absent: none). */
static int parse_injections(json_object *msg, Injection **ret, size_t *ret_n, EgressCA **ret_ca) {
        json_object *l, *e, *v;
        const char *cert, *key;
        Injection *inj;
        size_t n;
        int r;

        *ret = NULL;
        *ret_n = 0;
        *ret_ca = NULL;
        if (!json_object_object_get_ex(msg, "inject", &l))
                return 0;
        if (!json_object_is_type(l, json_type_array) || agent_get_string(msg, "ca_cert", &cert) < 0 ||
            agent_get_string(msg, "ca_key", &key) < 0)
                return -EBADMSG;
        n = json_object_array_length(l);
        if (n > 64)
                return -EBADMSG;
        inj = calloc(n + 1, sizeof(Injection));
        if (!inj)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const char *host, *header, *value;

                e = json_object_array_get_idx(l, i);
                if (agent_get_string(e, "host", &host) < 0 || agent_get_string(e, "header", &header) < 0 ||
                    agent_get_string(e, "value", &value) < 0 || egress_host_normalize(host, inj[i].host) < 0 ||
                    strlen(header) == 0 || strlen(header) > 64 || strpbrk(header, ": \t\r\n") ||
                    strpbrk(value, "\r\n")) {
                        injections_free(inj, n);
                        return -EBADMSG;
                }
                inj[i].header = strdup(header);
                inj[i].value = strdup(value);
                if (!inj[i].header || !inj[i].value) {
                        injections_free(inj, n);
                        return -ENOMEM;
                }
        }
        (void) v;
        r = egress_ca_load(cert, key, ret_ca);
        if (r < 0) {
                injections_free(inj, n);
                return r;
        }
        *ret = inj;
        *ret_n = n;
        return 0;
}

static void box_free(Box *b) {
        Egress *e = b->egress;

        b->accept_source = sd_event_source_disable_unref(b->accept_source);
        box_close_conns(b);
        safe_close(b->listen_fd);
        egress_policy_done(&b->policy);
        injections_free(b->injections, b->n_injections);
        egress_ca_free(b->ca);
        LIST_REMOVE(e->boxes, b);
        free(b);
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Box *b = userdata;

        /* A bounded number per wakeup, so one busy sandbox cannot starve the others. */
        for (unsigned i = 0; i < 16; i++) {
                int r = box_accept(b);
                if (r <= 0) {
                        if (r < 0 && r != -ENOMEM && r != -EMFILE && r != -ENFILE)
                                sd_journal_send("MESSAGE=%s: accept failed: %s", b->id, strerror(-r),
                                                "SANDBOX_ID=%s", b->id, "PRIORITY=%i", LOG_WARNING, NULL);
                        break;
                }
        }
        return 0;
}

/* The descriptor must be what the agent makes: a listening TCP socket. */
static int check_listener(int fd) {
        int v = 0;
        socklen_t sl = sizeof(v);

        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &sl) < 0 || !v)
                return -ENOTSOCK;
        sl = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &sl) < 0 || (v != AF_INET && v != AF_INET6))
                return -EAFNOSUPPORT;
        sl = sizeof(v);
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &sl) < 0 || v != SOCK_STREAM)
                return -ESOCKTNOSUPPORT;
        return 0;
}

static int handle_add(Egress *e, json_object *msg, int fd) {
        _cleanup_strv_free_ char **allow = NULL, **deny = NULL;
        _cleanup_close_ int lfd = fd;
        EgressPolicy policy = {};
        const char *id, *bad = NULL;
        Injection *injections = NULL;
        size_t n_injections = 0;
        EgressCA *ca = NULL;
        Box *b;
        int r;

        if (agent_get_string(msg, "sandbox", &id) < 0 || strlen(id) == 0 || strlen(id) > EGRESS_ID_MAX ||
            agent_get_strv(msg, "allow", &allow) < 0 || agent_get_strv(msg, "deny", &deny) < 0)
                return -EBADMSG;
        r = check_listener(lfd);
        if (r < 0)
                return r;
        r = parse_injections(msg, &injections, &n_injections, &ca);
        if (r < 0)
                return r;
        r = egress_policy_parse(allow, deny, &policy, &bad);
        if (r < 0) {
                injections_free(injections, n_injections);
                egress_ca_free(ca);
                sd_journal_send("MESSAGE=%s: bad egress rule '%s'", id, strna(bad), "SANDBOX_ID=%s", id,
                                "PRIORITY=%i", LOG_ERR, NULL);
                return r;
        }
        if (fcntl(lfd, F_SETFL, O_NONBLOCK) < 0) {
                egress_policy_done(&policy);
                injections_free(injections, n_injections);
                egress_ca_free(ca);
                return -errno;
        }

        b = egress_find_box(e, id);
        if (b) {
                /* sandboxd again (restarted, or this service was): the new policy holds. */
                egress_policy_done(&b->policy);
                b->policy = policy;
                injections_free(b->injections, b->n_injections);
                egress_ca_free(b->ca);
                b->injections = injections;
                b->n_injections = n_injections;
                b->ca = ca;
                if (b->listen_fd >= 0 && b->listen_fd != lfd) {
                        b->accept_source = sd_event_source_disable_unref(b->accept_source);
                        safe_close(b->listen_fd);
                        b->listen_fd = -EBADF;
                }
        } else {
                b = egress_n_boxes(e) < BOXES_MAX ? calloc(1, sizeof(Box)) : NULL;
                if (!b) {
                        egress_policy_done(&policy);
                        injections_free(injections, n_injections);
                        egress_ca_free(ca);
                        return egress_n_boxes(e) >= BOXES_MAX ? -ENOSPC : -ENOMEM;
                }
                *b = (Box) { .egress = e, .policy = policy, .listen_fd = -EBADF, .ca = ca,
                             .injections = injections, .n_injections = n_injections };
                strcpy(b->id, id);
                LIST_PREPEND(e->boxes, b);
        }
        if (!b->accept_source) {
                r = sd_event_add_io(e->event, &b->accept_source, lfd, EPOLLIN, on_accept, b);
                if (r < 0) {
                        box_free(b);
                        return r;
                }
                b->listen_fd = TAKE_FD(lfd);
        }
        sd_journal_send("MESSAGE=%s: egress proxy on, %zu allow and %zu deny rules, %zu header(s) added", b->id,
                        b->policy.n_allow, b->policy.n_deny, b->n_injections, "SANDBOX_ID=%s", b->id,
                        "PRIORITY=%i", LOG_INFO, NULL);
        return 0;
}

static void handle_remove(Control *ctl, json_object *msg) {
        _cleanup_json_ json_object *reply = NULL;
        const char *id;
        Box *b;

        if (agent_get_string(msg, "sandbox", &id) < 0)
                return;
        b = egress_find_box(ctl->egress, id);
        if (!b)
                return;
        sd_journal_send("MESSAGE=%s: egress proxy off: %" PRIu64 " bytes out, %" PRIu64 " in, %" PRIu64
                        " connections allowed, %" PRIu64 " denied", b->id, b->bytes_up, b->bytes_down,
                        b->n_allowed, b->n_denied,
                        "SANDBOX_ID=%s", b->id, "EGRESS_BYTES_OUT=%" PRIu64, b->bytes_up,
                        "EGRESS_BYTES_IN=%" PRIu64, b->bytes_down, "PRIORITY=%i", LOG_INFO, NULL);
        reply = json_object_new_object();
        if (reply &&
            json_add(reply, "type", json_object_new_string("usage")) >= 0 &&
            json_add(reply, "sandbox", json_object_new_string(b->id)) >= 0 &&
            json_add(reply, "bytes_up", json_object_new_int64((int64_t) b->bytes_up)) >= 0 &&
            json_add(reply, "bytes_down", json_object_new_int64((int64_t) b->bytes_down)) >= 0 &&
            json_add(reply, "allowed", json_object_new_int64((int64_t) b->n_allowed)) >= 0 &&
            json_add(reply, "denied", json_object_new_int64((int64_t) b->n_denied)) >= 0)
                (void) agent_send(ctl->fd, reply, NULL, 0); /* non-blocking: lost if sandboxd lags */
        box_free(b);
}

static void control_free(Control *ctl) {
        Egress *e = ctl->egress;

        sd_event_source_disable_unref(ctl->source);
        safe_close(ctl->fd);
        LIST_REMOVE(e->controls, ctl);
        free(ctl);
}

static int on_control(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Control *ctl = userdata;

        for (unsigned n = 0; n < 64; n++) {
                _cleanup_json_ json_object *msg = NULL;
                int fds[1] = { -EBADF };
                size_t n_fds = 0;
                const char *type;
                int r;

                r = agent_recv(fd, &msg, fds, 1, &n_fds);
                if (r == -EAGAIN || r == -EINTR)
                        return 0;
                if (r == -EBADMSG)
                        continue;
                if (r < 0) {
                        control_free(ctl); /* sandboxd went; its sandboxes' proxies stay */
                        return 0;
                }
                if (agent_get_string(msg, "type", &type) < 0)
                        type = "";
                if (streq(type, "add") && n_fds == 1) {
                        r = handle_add(ctl->egress, msg, fds[0]);
                        fds[0] = -EBADF;
                        if (r < 0)
                                sd_journal_send("MESSAGE=Refused an egress proxy request: %s", strerror(-r),
                                                "PRIORITY=%i", LOG_ERR, NULL);
                } else if (streq(type, "remove"))
                        handle_remove(ctl, msg);
                if (n_fds > 0)
                        safe_close(fds[0]);
        }
        return 0;
}

static int on_control_connect(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Egress *e = userdata;
        struct ucred cred;
        socklen_t sl = sizeof(cred);
        unsigned n = 0;
        Control *ctl;
        int cfd;

        cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
                return 0;
        /* Only root (sandboxd) adds proxies; the socket's mode says so too. */
        if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cred, &sl) < 0 || cred.uid != 0) {
                safe_close(cfd);
                return 0;
        }
        for (Control *c = e->controls; c; c = c->next)
                n++;
        if (n >= CONTROLS_MAX) {
                /* The oldest is the one a restarted sandboxd left. */
                Control *last = e->controls;
                while (last->next)
                        last = last->next;
                control_free(last);
        }
        ctl = calloc(1, sizeof(Control));
        if (!ctl) {
                safe_close(cfd);
                return 0;
        }
        *ctl = (Control) { .egress = e, .fd = cfd };
        if (sd_event_add_io(e->event, &ctl->source, cfd, EPOLLIN, on_control, ctl) < 0) {
                safe_close(cfd);
                free(ctl);
                return 0;
        }
        LIST_PREPEND(e->controls, ctl);
        return 0;
}

static int listen_control(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void) unlink(path);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || chmod(path, 0600) < 0 || listen(fd, 16) < 0)
                return -errno;
        return TAKE_FD(fd);
}

static void help(void) {
        printf("sandboxd-egress [--control=PATH] [--trust=FILE...]\n\n"
               "The HTTPS proxy of sandboxes with EgressAllow= (sandboxd-egress(8)).\n"
               "  --control=PATH  listen on PATH for sandboxd, when not socket-activated\n"
               "  --trust=FILE    trust the CA certificates of FILE (PEM) as well as the\n"
               "                  system's and those of " EGRESS_TRUST_DIR "/*.pem,\n"
               "                  where a secret is added to requests (docs/SECRETS.md)\n");
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "control", required_argument, NULL, 'c' },
                { "trust",   required_argument, NULL, 't' },
                { "help",    no_argument,       NULL, 'h' },
                {}
        };
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        const char *control_path = NULL;
        Egress e = { .control_listen_fd = -EBADF, .route_fd = -EBADF };
        _cleanup_strv_free_ char **trust = NULL;
        int c, r, n;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'c':
                        control_path = optarg;
                        break;
                case 't':
                        if (strv_extend(&trust, optarg) < 0)
                                return EXIT_FAILURE;
                        break;
                case 'h':
                        help();
                        return EXIT_SUCCESS;
                default:
                        return EXIT_FAILURE;
                }

        (void) signal(SIGPIPE, SIG_IGN);
        /* Its memory holds each sandbox's CA key and the secrets it injects: no core dump
         * of it, whatever the unit says (sandboxd-egress(8), SECURITY). */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
                fprintf(stderr, "sandboxd-egress: cannot make itself undumpable: %s\n", strerror(errno));
                return EXIT_FAILURE;
        }
        if (inject_init(trust, EGRESS_TRUST_DIR) < 0) {
                fprintf(stderr, "sandboxd-egress: cannot load the trusted certificates\n");
                return EXIT_FAILURE;
        }
        n = sd_listen_fds(true);
        if (n == 1 && sd_is_socket(SD_LISTEN_FDS_START, AF_UNIX, SOCK_SEQPACKET, 1) > 0)
                e.control_listen_fd = SD_LISTEN_FDS_START;
        else if (control_path) {
                e.control_listen_fd = listen_control(control_path);
                if (e.control_listen_fd < 0) {
                        fprintf(stderr, "sandboxd-egress: %s: %s\n", control_path, strerror(-e.control_listen_fd));
                        return EXIT_FAILURE;
                }
        } else {
                fprintf(stderr, "sandboxd-egress: no control socket (socket activation or --control=PATH)\n");
                return EXIT_FAILURE;
        }
        (void) fcntl(e.control_listen_fd, F_SETFL, O_NONBLOCK);

        r = sd_event_default(&event);
        if (r >= 0)
                r = sd_event_set_signal_exit(event, true);
        if (r >= 0)
                r = sd_event_set_watchdog(event, true);
        if (r < 0) {
                fprintf(stderr, "sandboxd-egress: event loop: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }
        e.event = event;
        r = resolver_new(event, &e.resolver);
        if (r < 0) {
                fprintf(stderr, "sandboxd-egress: resolver: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }
        /* Without it no address could be checked: refuse to start rather than relay blind. */
        e.route_fd = route_socket_open();
        if (e.route_fd < 0) {
                fprintf(stderr, "sandboxd-egress: rtnetlink: %s\n", strerror(-e.route_fd));
                return EXIT_FAILURE;
        }
        r = sd_event_add_io(event, &e.control_listen_source, e.control_listen_fd, EPOLLIN, on_control_connect, &e);
        if (r < 0) {
                fprintf(stderr, "sandboxd-egress: control socket: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }

        (void) sd_notify(false, "READY=1");
        r = sd_event_loop(event);
        (void) sd_notify(false, "STOPPING=1");

        while (e.boxes)
                box_free(e.boxes);
        while (e.controls)
                control_free(e.controls);
        sd_event_source_disable_unref(e.control_listen_source);
        safe_close(e.control_listen_fd);
        resolver_free(e.resolver);
        safe_close(e.route_fd);
        ares_library_cleanup();
        inject_done();
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
