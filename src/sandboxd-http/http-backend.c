/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxd over varlink, asynchronously. Replies on one connection come in order, so a
 * call in progress has its connection to itself; finished, the connection waits in a
 * small pool of its tenant's for the next call. A new connection first says
 * ActForTenant(tenant), and nothing else is sent on it until that succeeded: a call
 * never runs as the bridge itself. */

#include <stdio.h>

#include "fd-util.h"
#include "http.h"
#include "json-util.h"
#include "list.h"
#include "log.h"
#include "strv.h"
#include "varlink-stream.h"

#define BACKEND_IDLE_PER_TENANT_MAX 8U

typedef struct BackendConn BackendConn;
typedef struct HttpBackendCall BackendCall;

struct BackendConn {
        VarlinkClient *client;
        char *tenant;
        BackendConn *prev, *next;
};

struct HttpBackendCall {
        HttpBackend *backend;
        HttpRequest *req;
        BackendConn *conn;
        char *method;
        json_object *parameters;
        VarlinkCallFlags flags;
        http_backend_reply_t callback;
        void *userdata;
        bool cancelled;
        BackendCall *prev, *next;
};

struct HttpBackend {
        sd_event *event;
        char *address;
        unsigned per_tenant_max;        /* VarlinkConnectionsPerTenant=; 0: no bound */
        BackendConn *idle;
        BackendCall *calls;
};

static BackendConn *conn_free(BackendConn *c) {
        if (!c)
                return NULL;
        varlink_client_unref(c->client);
        free(c->tenant);
        return mfree(c);
}

static int conn_new(HttpBackend *b, const char *tenant, BackendConn **ret) {
        BackendConn *c;
        int r;

        c = calloc(1, sizeof(BackendConn));
        if (!c)
                return -ENOMEM;
        c->tenant = strdup(strempty(tenant));
        if (!c->tenant) {
                free(c);
                return -ENOMEM;
        }
        r = varlink_client_connect_address(&c->client, b->address);
        if (r >= 0)
                r = varlink_client_attach_event(c->client, b->event, 0);
        if (r < 0) {
                conn_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

static BackendConn *pool_take(HttpBackend *b, const char *tenant) {
        BackendConn *c, *next;

        for (c = b->idle; c; c = next) {
                next = c->next;
                if (!varlink_client_is_connected(c->client)) {
                        LIST_REMOVE(b->idle, c);
                        conn_free(c);
                        continue;
                }
                if (streq(c->tenant, strempty(tenant))) {
                        LIST_REMOVE(b->idle, c);
                        return c;
                }
        }
        return NULL;
}

static void pool_put(HttpBackend *b, BackendConn *c) {
        unsigned n = 0;
        BackendConn *i;

        for (i = b->idle; i; i = i->next)
                if (streq(i->tenant, c->tenant))
                        n++;
        if (n >= BACKEND_IDLE_PER_TENANT_MAX || !varlink_client_is_connected(c->client)) {
                conn_free(c);
                return;
        }
        LIST_PREPEND(b->idle, c);
}

/* The connections the calls of tenant hold (idle ones in the pool are not counted: there
 * are at most BACKEND_IDLE_PER_TENANT_MAX of them). */
static unsigned backend_n_busy(HttpBackend *b, const char *tenant) {
        unsigned n = 0;

        for (BackendCall *call = b->calls; call; call = call->next)
                if (call->conn && !call->cancelled && streq(call->conn->tenant, strempty(tenant)))
                        n++;
        return n;
}

static BackendCall *call_free(BackendCall *call) {
        if (!call)
                return NULL;
        LIST_REMOVE(call->backend->calls, call);
        conn_free(call->conn);
        http_request_unref(call->req);
        free(call->method);
        json_object_put(call->parameters);
        return mfree(call);
}

/* The connection whose reply a callback is handling (http_backend_take_fd()). */
static VarlinkClient *replying = NULL;

int http_backend_take_fd(HttpRequest *req) {
        int fd;

        if (!replying || varlink_client_take_fds(replying, &fd, 1) != 1)
                return -EBADF;
        return fd;
}

static int on_reply(VarlinkClient *client, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                    void *userdata) {
        BackendCall *call = userdata;
        bool last = !(flags & VARLINK_REPLY_CONTINUES);
        int fds[VARLINK_STREAM_FDS_MAX];

        if (!call->cancelled && (!call->req || !http_request_is_gone(call->req))) {
                replying = client;
                (void) call->callback(call->req, parameters, error, flags, call->userdata);
                replying = NULL;
        }
        /* What the callback did not take is not the next call's. */
        for (size_t i = varlink_client_take_fds(client, fds, ELEMENTSOF(fds)); i > 0; i--)
                safe_close(fds[i - 1]);
        if (last) {
                /* A connection that answered cleanly serves the next call of its tenant. */
                if (!call->cancelled && (!error || !streq(error, VARLINK_ERROR_DISCONNECTED)))
                        pool_put(call->backend, TAKE_PTR(call->conn));
                call_free(call);
        }
        return 0;
}

static int call_send(BackendCall *call) {
        return varlink_client_call_async(call->conn->client, call->method, call->parameters, call->flags, on_reply,
                                         call);
}

static int on_acting(VarlinkClient *client, json_object *parameters, const char *error, VarlinkReplyFlags flags,
                     void *userdata) {
        BackendCall *call = userdata;
        int r;

        if (call->cancelled || (call->req && http_request_is_gone(call->req))) {
                call_free(call);
                return 0;
        }
        if (error) {
                log_warning("ActForTenant(%s) failed: %s", call->conn->tenant, error);
                (void) call->callback(call->req, parameters, error, 0, call->userdata);
                call_free(call);
                return 0;
        }
        r = call_send(call);
        if (r < 0) {
                (void) call->callback(call->req, NULL, VARLINK_ERROR_DISCONNECTED, 0, call->userdata);
                call_free(call);
        }
        return 0;
}

static int call_start(HttpBackend *b, HttpRequest *req, const char *tenant, const char *method,
                      json_object *parameters, VarlinkCallFlags flags, http_backend_reply_t callback, void *userdata,
                      BackendCall **ret) {
        _cleanup_json_ json_object *p = parameters;
        BackendCall *call;
        int r;

        /* One tenant's streams and waits must not take every connection sandboxd takes of
         * the bridge's (sandboxd-http(8), LIMITS): beyond its share the call is refused as
         * the request's 429, before anything is sent. */
        if (b->per_tenant_max > 0 && backend_n_busy(b, tenant) >= b->per_tenant_max) {
                _cleanup_json_ json_object *e = NULL;
                char text[256];

                if (!req)
                        return -EUSERS;
                (void) snprintf(text, sizeof(text),
                                "Too many connections to sandboxd in use for this tenant "
                                "(at most %u, VarlinkConnectionsPerTenant=).", b->per_tenant_max);
                e = json_object_new_object();
                if (!e || json_add(e, "message", json_object_new_string(text)) < 0)
                        return -ENOMEM;
                (void) callback(req, e, HTTP_BACKEND_ERROR_TOO_MANY, 0, userdata);
                return 0;
        }

        call = calloc(1, sizeof(BackendCall));
        if (!call)
                return -ENOMEM;
        *call = (BackendCall) { .backend = b, .req = http_request_ref(req), .flags = flags, .callback = callback,
                                .userdata = userdata, .parameters = TAKE_PTR(p) };
        LIST_PREPEND(b->calls, call);
        call->method = strdup(method);
        if (!call->method) {
                call_free(call);
                return -ENOMEM;
        }
        call->conn = pool_take(b, tenant);
        if (call->conn)
                r = call_send(call);
        else {
                r = conn_new(b, tenant, &call->conn);
                if (r < 0) {
                        log_warning_errno(r, "Cannot connect to sandboxd at %s: %m", b->address);
                        call_free(call);
                        if (!req)
                                return r;
                        /* As a disconnect: 503, and the caller's usual path. */
                        (void) callback(req, NULL, VARLINK_ERROR_DISCONNECTED, 0, userdata);
                        return 0;
                }
                if (!isempty(tenant)) {
                        _cleanup_json_ json_object *a = json_object_new_object();

                        r = a ? json_add(a, "tenant", json_object_new_string(tenant)) : -ENOMEM;
                        if (r >= 0)
                                r = varlink_client_call_async(call->conn->client, "io.sandboxd.Sandbox.ActForTenant",
                                                              a, 0, on_acting, call);
                } else
                        r = call_send(call);
        }
        if (r < 0) {
                call_free(call);
                return r;
        }
        if (ret)
                *ret = call;
        return 0;
}

int http_backend_call(HttpRequest *req, const char *method, json_object *parameters, VarlinkCallFlags flags,
                      http_backend_reply_t callback, void *userdata) {
        return call_start(http_server_backend(http_request_server(req)), req, http_request_backend_tenant(req), method,
                          parameters, flags, callback, userdata, NULL);
}

int http_backend_call_detached(HttpBackend *b, const char *tenant, const char *method, json_object *parameters,
                               VarlinkCallFlags flags, http_backend_reply_t callback, void *userdata,
                               HttpBackendCall **ret) {
        return call_start(b, NULL, tenant, method, parameters, flags, callback, userdata, ret);
}

void http_backend_call_cancel(HttpBackendCall *call) {
        if (!call || call->cancelled)
                return;
        call->cancelled = true;
        /* As http_backend_cancel(): the callback frees the call from within the unref. */
        conn_free(TAKE_PTR(call->conn));
}

void http_backend_cancel(HttpRequest *req) {
        HttpBackend *b = http_server_backend(http_request_server(req));
        BackendCall *call;

        if (!b)
                return;
        /* Closing the connection ends the call (sandboxd stops a stream whose reader went
         * away); its callback frees it from within varlink_client_unref(). */
        for (bool again = true; again;) {
                again = false;
                for (call = b->calls; call; call = call->next)
                        if (call->req == req && !call->cancelled) {
                                BackendConn *c = TAKE_PTR(call->conn);

                                call->cancelled = true;
                                conn_free(c);
                                again = true;
                                break;
                        }
        }
}

int http_backend_new(HttpBackend **ret, sd_event *event, const char *address, unsigned connections_per_tenant) {
        HttpBackend *b = calloc(1, sizeof(HttpBackend));

        if (!b)
                return -ENOMEM;
        b->per_tenant_max = connections_per_tenant;
        b->event = sd_event_ref(event);
        b->address = strdup(address);
        if (!b->address) {
                http_backend_free(b);
                return -ENOMEM;
        }
        *ret = b;
        return 0;
}

HttpBackend *http_backend_free(HttpBackend *b) {
        BackendConn *c;
        BackendCall *call;

        if (!b)
                return NULL;
        while ((call = b->calls)) {
                call->cancelled = true;
                if (call->conn) {
                        BackendConn *conn = TAKE_PTR(call->conn);
                        conn_free(conn);   /* frees call through its callback */
                } else
                        call_free(call);
        }
        while ((c = b->idle)) {
                LIST_REMOVE(b->idle, c);
                conn_free(c);
        }
        sd_event_unref(b->event);
        free(b->address);
        return mfree(b);
}
