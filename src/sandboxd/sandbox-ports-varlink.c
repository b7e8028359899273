/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A sandbox's ports on io.sandboxd.Sandbox: OpenPort (the connection passed with the reply,
 * SCM_RIGHTS) and ListPorts, as on D-Bus (sandbox-ports-dbus.c). */

#include <fcntl.h>
#include <unistd.h>

#include "fd-util.h"
#include "file-op.h"
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

/* ---- WatchDirectory: each event a reply that continues ---- */

#define WATCH_LINE_MAX 8192U   /* an event's line: a path of at most 4096 bytes, escaped */

typedef struct WatchStream {
        VarlinkCall *call;
        int fd;                  /* the pipe's read end, the agent writing */
        sd_event_source *io;
        char buf[WATCH_LINE_MAX];
        size_t n;
} WatchStream;

static void watch_stream_free(WatchStream *w) {
        if (!w)
                return;
        sd_event_source_disable_unref(w->io);
        safe_close(w->fd); /* the agent's watch sees its reader gone, and ends */
        varlink_call_unref(w->call);
        free(w);
}

static void on_watch_disconnect(VarlinkCall *call, void *userdata) {
        watch_stream_free(userdata);
}

static void on_watch_done(const struct agent_file_result *result, const void *data, size_t size,
                          const SandboxError *error, void *userdata) {
}

/* One line of the agent's: an event replied, or (its "error") the end. */
static int watch_line(WatchStream *w, const char *line, size_t n) {
        _cleanup_json_ json_object *o = NULL, *p = json_object_new_object();
        json_object *event, *e;

        if (json_parse_strict(line, n, 8, &o) < 0 || !json_object_is_type(o, json_type_object) || !p)
                return 0;
        if (json_object_object_get_ex(o, "event", &event) && streq(json_object_get_string(event), "error")) {
                int k = json_object_object_get_ex(o, "errno", &e) ? json_object_get_int(e) : EIO;
                _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;

                (void) sandbox_error_set_errno(&error, k > 0 ? k : EIO, "Cannot watch that directory: %s",
                                               strerror(k > 0 ? k : EIO));
                (void) varlink_reply_sandbox_error(w->call, &error);
                return -ECANCELED;
        }
        if (json_add(p, "event", TAKE_PTR(o)) < 0)
                return -ENOMEM;
        return varlink_call_notify(w->call, p);
}

static int on_watch_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        WatchStream *w = userdata;
        ssize_t k;
        char *nl;
        int r = 0;

        k = read(w->fd, w->buf + w->n, sizeof(w->buf) - w->n);
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (k <= 0) {
                /* The watch ended (its directory went, or the sandbox): the final reply. */
                (void) varlink_call_reply(w->call, NULL);
                watch_stream_free(w);
                return 0;
        }
        w->n += (size_t) k;
        while (r >= 0 && (nl = memchr(w->buf, '\n', w->n))) {
                r = watch_line(w, w->buf, (size_t) (nl - w->buf));
                w->n -= (size_t) (nl - w->buf) + 1;
                memmove(w->buf, nl + 1, w->n);
        }
        if (r >= 0 && w->n == sizeof(w->buf))
                w->n = 0; /* a line no event has: dropped */
        if (r < 0)
                watch_stream_free(w);
        return 0;
}

static int watch_authorized(VarlinkCall *call, const SandboxCaller *caller, Sandbox *s, SandboxVarlinkRequest *req,
                            SandboxError *error) {
        WatchStream *w;
        int p[2], r;

        /* Only our end non-blocking: the agent's writes wait for a slow reader. */
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        w = calloc(1, sizeof(WatchStream));
        if (!w || fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
                free(w);
                safe_close(p[0]);
                safe_close(p[1]);
                return -ENOMEM;
        }
        w->fd = p[0];
        w->call = varlink_call_ref(call);
        r = sandbox_watch_directory(s, req->args.path, req->args.recursive, p[1], on_watch_done, NULL, NULL, error);
        if (r >= 0)
                r = sd_event_add_io(req->frontend->event, &w->io, w->fd, EPOLLIN, on_watch_io, w);
        if (r < 0) {
                watch_stream_free(w);
                return r;
        }
        varlink_call_set_disconnect_callback(call, on_watch_disconnect, w);
        return 0;
}

static const VarlinkParam watch_params[] = {
        { "id",        VARLINK_PARAM_STRING, ARG(id), true },
        { "path",      VARLINK_PARAM_STRING, ARG(path), true },
        { "recursive", VARLINK_PARAM_BOOL,   ARG(recursive) },
        {}
};

static int method_watch(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        /* A watch has no end but its caller's: only replies that continue can carry it. */
        if (!(flags & VARLINK_CALL_MORE)) {
                (void) varlink_call_error(call, VARLINK_ERROR_EXPECTED_MORE, NULL);
                return 0;
        }
        return sandbox_varlink_method(userdata, call, parameters, watch_params, NULL, watch_authorized);
}

int sandbox_ports_varlink_bind(VarlinkFrontend *f) {
        static const VarlinkMethodEntry methods[] = {
                { "OpenPort",       method_port  },
                { "ListPorts",      method_port  },
                { "WatchDirectory", method_watch },
        };

        return varlink_bind_methods(f->server, SANDBOX_VARLINK_INTERFACE, methods, ELEMENTSOF(methods), f);
}
