/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>

#include "base64-util.h"
#include "json-util.h"
#include "log.h"
#include "parse-util.h"
#include "strv.h"
#include "varlink-util.h"

/* A message for the wire: JSON strings must be UTF-8, and a message may quote what a
 * caller gave, cut at a byte count ("%.64s"). */
static json_object *json_object_new_message(const char *message) {
        _cleanup_free_ char *clean = NULL;
        size_t n;

        if (utf8_sanitize(message, strlen(message), &clean, &n) < 0)
                return NULL;
        return json_object_new_string_len(clean, (int) strnlen(clean, n));
}

static int varlink_reply_system_error(VarlinkCall *call, int errno_value, const char *message) {
        _cleanup_json_ json_object *p = json_object_new_object();
        const char *name = strerrorname_np(errno_value);
        char fallback[32];
        int r;

        if (!p)
                return -ENOMEM;
        if (!name) {
                snprintf(fallback, sizeof(fallback), "E%i", errno_value);
                name = fallback;
        }
        r = json_add(p, "errno", json_object_new_int(errno_value));
        if (r >= 0)
                r = json_add(p, "errnoName", json_object_new_string(name));
        if (r >= 0)
                r = json_add(p, "message", json_object_new_message(message));
        if (r < 0)
                return r;
        return varlink_call_error(call, SANDBOX_VARLINK_ERROR_SYSTEM, p);
}

int varlink_reply_sandbox_error(VarlinkCall *call, const SandboxError *e) {
        _cleanup_json_ json_object *p = NULL;
        const char *name = sandbox_error_code_to_name(e->code);
        char error[sizeof(SANDBOX_VARLINK_INTERFACE) + 64];
        int r;

        if (!name)
                return varlink_reply_system_error(call, e->errno_value ?: EIO, sandbox_error_message(e));
        snprintf(error, sizeof(error), SANDBOX_VARLINK_INTERFACE ".%s", name);
        p = json_object_new_object();
        if (!p)
                return -ENOMEM;
        r = json_add(p, "message", json_object_new_message(sandbox_error_message(e)));
        if (r >= 0 && e->quota_what) {
                r = json_add(p, "what", json_object_new_string(e->quota_what));
                if (r >= 0)
                        r = json_add(p, "limit", json_object_new_int64((int64_t) MIN(e->quota_limit, (uint64_t) INT64_MAX)));
                if (r >= 0)
                        r = json_add(p, "use", json_object_new_int64((int64_t) MIN(e->quota_use, (uint64_t) INT64_MAX)));
        }
        if (r < 0)
                return r;
        return varlink_call_error(call, error, p);
}

int varlink_reply_error(VarlinkCall *call, const SandboxError *e, int r) {
        if (sandbox_error_is_set(e))
                return varlink_reply_sandbox_error(call, e);
        return varlink_reply_system_error(call, r < 0 ? -r : EIO, strerror(r < 0 ? -r : EIO));
}

/* ---- parameters ---- */

static const VarlinkParam *param_lookup(const VarlinkParam table[], const char *name) {
        for (const VarlinkParam *p = table; p->name; p++)
                if (streq(p->name, name))
                        return p;
        return NULL;
}

static int json_read_uint64(json_object *j, uint64_t max, uint64_t *ret) {
        if (!json_object_is_type(j, json_type_int))
                return -EINVAL;
        /* json-c keeps integers above INT64_MAX as uint64; negative ones as int64. */
        if (json_object_get_int64(j) < 0)
                return -EINVAL;
        uint64_t u = json_object_get_uint64(j);
        if (u > max)
                return -EINVAL;
        *ret = u;
        return 0;
}

static int param_read(const VarlinkParam *p, json_object *j, void *target) {
        void *v = (uint8_t *) target + p->offset;
        uint64_t u;
        int r;

        switch (p->type) {
        case VARLINK_PARAM_STRING: {
                const char *s;
                char *copy;
                r = json_string_get_clean(j, &s) < 0 ? -EINVAL : 0;
                if (r < 0)
                        return r;
                copy = strdup(s);
                if (!copy)
                        return -ENOMEM;
                free(*(char **) v);
                *(char **) v = copy;
                return 0;
        }
        case VARLINK_PARAM_BOOL:
                if (!json_object_is_type(j, json_type_boolean))
                        return -EINVAL;
                *(bool *) v = json_object_get_boolean(j);
                return 0;
        case VARLINK_PARAM_UINT64:
                return json_read_uint64(j, UINT64_MAX, (uint64_t *) v);
        case VARLINK_PARAM_UINT32:
                r = json_read_uint64(j, UINT32_MAX, &u);
                if (r >= 0)
                        *(uint32_t *) v = (uint32_t) u;
                return r;
        case VARLINK_PARAM_INT32: {
                int64_t i;
                if (!json_object_is_type(j, json_type_int))
                        return -EINVAL;
                i = json_object_get_int64(j);
                if (i < INT32_MIN || i > INT32_MAX || (i == INT64_MAX && json_object_get_uint64(j) > INT64_MAX))
                        return -EINVAL;
                *(int32_t *) v = (int32_t) i;
                return 0;
        }
        case VARLINK_PARAM_STRV: {
                _cleanup_strv_free_ char **l = NULL;
                size_t n;
                if (!json_object_is_type(j, json_type_array))
                        return -EINVAL;
                n = json_object_array_length(j);
                l = calloc(n + 1, sizeof(char *));
                if (!l)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        const char *s;
                        r = json_string_get_clean(json_object_array_get_idx(j, i), &s) < 0 ? -EINVAL : 0;
                        if (r < 0)
                                return r;
                        l[i] = strdup(s);
                        if (!l[i])
                                return -ENOMEM;
                }
                strv_free(*(char ***) v);
                *(char ***) v = TAKE_PTR(l);
                return 0;
        }
        case VARLINK_PARAM_OBJECT:
                if (!json_object_is_type(j, json_type_object))
                        return -EINVAL;
                *(json_object **) v = j;
                return 0;
        case VARLINK_PARAM_BYTES: {
                VarlinkBytes *b = v;
                const char *s;
                size_t n;
                void *d;
                r = json_string_get_clean(j, &s) < 0 ? -EINVAL : 0;
                if (r < 0)
                        return r;
                r = base64_decode(s, &d, &n);
                if (r < 0)
                        return r;
                free(b->data);
                *b = (VarlinkBytes) { .data = d, .size = n };
                return 0;
        }
        }
        return -EINVAL;
}

int varlink_params_read(json_object *parameters, const VarlinkParam table[], void *target, const char **ret_bad) {
        int r;

        json_object_object_foreach(parameters, name, j) {
                const VarlinkParam *p = param_lookup(table, name);

                if (!p) {
                        *ret_bad = name;
                        return -EINVAL;
                }
                if (!j)         /* null: absent */
                        continue;
                r = param_read(p, j, target);
                if (r == -EINVAL)
                        *ret_bad = p->name;
                if (r < 0)
                        return r;
        }
        for (const VarlinkParam *p = table; p->name; p++) {
                json_object *v;
                if (p->required && (!json_object_object_get_ex(parameters, p->name, &v) || !v)) {
                        *ret_bad = p->name;
                        return -EINVAL;
                }
        }
        return 0;
}

void varlink_params_done(const VarlinkParam table[], void *target) {
        for (const VarlinkParam *p = table; p->name; p++) {
                void *v = (uint8_t *) target + p->offset;
                switch (p->type) {
                case VARLINK_PARAM_STRING:
                        *(char **) v = mfree(*(char **) v);
                        break;
                case VARLINK_PARAM_STRV:
                        *(char ***) v = strv_free(*(char ***) v);
                        break;
                case VARLINK_PARAM_BYTES:
                        ((VarlinkBytes *) v)->data = mfree(((VarlinkBytes *) v)->data);
                        ((VarlinkBytes *) v)->size = 0;
                        break;
                default:
                        break;
                }
        }
}

int varlink_params_read_or_reply(VarlinkCall *call, json_object *parameters, const VarlinkParam table[],
                                 void *target) {
        const char *bad = NULL;
        int r;

        r = varlink_params_read(parameters, table, target, &bad);
        if (r == -EINVAL)
                /* An unknown member is named as the caller spelt it: a string of its
                 * message, UTF-8 and bounded already. */
                (void) varlink_call_error_invalid_parameter(call, bad);
        return r;
}

int varlink_params_failed(VarlinkCall *call, int r) {
        if (r != -EINVAL)
                (void) varlink_reply_error(call, NULL, r);
        return 0;
}

int varlink_read_call(VarlinkCall *call, json_object *parameters, const VarlinkParam table[], void *target,
                      json_object **options, OptionSet set, void *options_target) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        int r;

        r = varlink_params_read_or_reply(call, parameters, table, target);
        if (r < 0) {
                (void) varlink_params_failed(call, r);
                return r;
        }
        r = options_from_json(*options, set, options_target, NULL, 0, &error);
        *options = NULL; /* borrowed from parameters */
        if (r < 0)
                (void) varlink_reply_error(call, &error, r);
        return r;
}

int varlink_bind_methods(VarlinkServer *s, const char *interface, const VarlinkMethodEntry *methods, size_t n,
                         void *userdata) {
        int r;

        for (size_t i = 0; i < n; i++) {
                char name[256];

                snprintf(name, sizeof(name), "%s.%s", interface, methods[i].name);
                r = varlink_server_bind_method(s, name, methods[i].method, userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}

VarlinkCall *varlink_call_release(VarlinkCall *call) {
        if (call) {
                varlink_call_set_disconnect_callback(call, NULL, NULL);
                varlink_call_unref(call);
        }
        return NULL;
}

/* ---- authorize, then ---- */

typedef struct VarlinkAuthRequest {
        VarlinkCall *call;
        varlink_authorized_t fn;
        void *userdata;
        void (*free_userdata)(void *userdata);
        SandboxCaller caller;
        char *tenant;          /* caller.tenant: the connection's when the call came */
        sd_bus_slot *slot;     /* polkit's question */
} VarlinkAuthRequest;

static void auth_request_free(VarlinkAuthRequest *a) {
        sd_bus_slot_unref(a->slot);
        free(a->tenant);
        if (a->free_userdata)
                a->free_userdata(a->userdata);
        varlink_call_unref(a->call);
        free(a);
}

static void auth_request_finish(VarlinkAuthRequest *a, int r, const SandboxError *error) {
        if (r < 0)
                (void) varlink_reply_error(a->call, error, r);
        auth_request_free(a);
}

static void auth_request_run(VarlinkAuthRequest *a, bool granted) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        int r;

        a->caller.granted = granted;
        r = a->fn(a->call, &a->caller, a->userdata, &error);
        auth_request_finish(a, r, &error);
}

static void on_authorized(int authorized, const SandboxError *error, void *userdata) {
        VarlinkAuthRequest *a = userdata;

        /* From here on fn sets a disconnect callback of its own, if it needs one. */
        varlink_call_set_disconnect_callback(a->call, NULL, NULL);
        a->slot = sd_bus_slot_unref(a->slot);
        if (authorized < 0)
                auth_request_finish(a, authorized, error);
        else
                auth_request_run(a, authorized > 0);
}

/* The peer left while polkit was asked: the question goes, and nothing runs. */
static void on_auth_disconnect(VarlinkCall *call, void *userdata) {
        auth_request_free(userdata);
}

int varlink_authorize_then(sd_bus *bus, VarlinkCall *call, varlink_access_t access, SandboxAuthorizeFlags flags,
                           varlink_authorized_t fn, void *userdata, void (*free_userdata)(void *userdata)) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        VarlinkAuthRequest *a;
        struct ucred ucred;
        int r;

        a = calloc(1, sizeof(VarlinkAuthRequest));
        if (!a) {
                if (free_userdata)
                        free_userdata(userdata);
                return -ENOMEM;
        }
        *a = (VarlinkAuthRequest) {
                .call = varlink_call_ref(call),
                .fn = fn,
                .userdata = userdata,
                .free_userdata = free_userdata,
        };

        r = varlink_call_get_peer_ucred(call, &ucred);
        if (r >= 0)
                r = sandbox_caller_from_ucred(&ucred, &a->caller);
        if (r < 0) {
                /* Its process is gone (the socket was handed on): nobody polkit could ask
                 * about. Root needs no asking. */
                if (ucred.uid != 0) {
                        sandbox_error_set(&error, SANDBOX_ERR_ACCESS_DENIED,
                                          "The calling process (pid %i) cannot be identified: %s",
                                          (int) ucred.pid, strerror(-r));
                        auth_request_finish(a, -EACCES, &error);
                        return 0;
                }
                a->caller = (SandboxCaller) { .kind = SANDBOX_CALLER_UNIX_PROCESS, .uid = 0, .pid = ucred.pid };
        }
        /* Taken now: a call is for the tenant its connection acted for when it was made
         * (ActForTenant), as on D-Bus. */
        if (varlink_call_get_connection_tag(call)) {
                a->tenant = strdup(varlink_call_get_connection_tag(call));
                if (!a->tenant) {
                        auth_request_finish(a, -ENOMEM, NULL);
                        return 0;
                }
                a->caller.tenant = a->tenant;
        }

        if (!access) {
                auth_request_run(a, true);
                return 0;
        }
        r = sandbox_authorize_method(bus, &a->caller, varlink_call_get_method(call), access, a->userdata, flags,
                                     on_authorized, a, &a->slot, &error);
        if (r < 0)
                auth_request_finish(a, r, &error);
        else if (r > 0)
                auth_request_run(a, true);
        else
                varlink_call_set_disconnect_callback(call, on_auth_disconnect, a);
        return 0;
}

int varlink_read_authorize_then(sd_bus *bus, VarlinkCall *call, json_object *parameters, const VarlinkParam table[],
                                void *args, void (*free_args)(void *args), varlink_access_t access,
                                SandboxAuthorizeFlags flags, varlink_authorized_t fn) {
        int r;

        if (!args) {
                (void) varlink_reply_error(call, NULL, -ENOMEM);
                return 0;
        }
        r = varlink_params_read_or_reply(call, parameters, table, args);
        if (r < 0) {
                if (free_args)
                        free_args(args);
                return varlink_params_failed(call, r);
        }
        r = varlink_authorize_then(bus, call, access, flags, fn, args, free_args);
        if (r < 0)
                (void) varlink_reply_error(call, NULL, r);
        return 0;
}

int varlink_reply_or_fail(VarlinkCall *call, json_object *parameters) {
        int r = varlink_call_reply(call, parameters);

        if (r == -EMSGSIZE)
                return varlink_reply_system_error(call, EMSGSIZE,
                                                  "The reply would be larger than a varlink message may be.");
        return r;
}

/* ---- streamed replies from pipes ---- */

#define VARLINK_RELAY_PIPES_MAX 2U
/* Dropping what nobody reads any more: as much at a time as the core reads output. */
#define VARLINK_RELAY_DISCARD_MAX (1024U * 1024U)

typedef struct VarlinkRelayPipe {
        int fd;
        sd_event_source *source;
        const char *name;
        uint64_t bytes;
} VarlinkRelayPipe;

struct VarlinkRelay {
        VarlinkCall *call;            /* NULL once discarding */
        VarlinkRelayPipe pipes[VARLINK_RELAY_PIPES_MAX];
        size_t n_pipes;
        bool paused;
        varlink_relay_eof_t eof;
        void *userdata;
};

static void relay_pipe_close(VarlinkRelayPipe *p) {
        p->source = sd_event_source_disable_unref(p->source);
        p->fd = safe_close(p->fd);
}

bool varlink_relay_at_eof(const VarlinkRelay *r) {
        for (size_t i = 0; i < r->n_pipes; i++)
                if (r->pipes[i].fd >= 0)
                        return false;
        return true;
}

uint64_t varlink_relay_get_bytes(const VarlinkRelay *r, size_t i) {
        return i < r->n_pipes ? r->pipes[i].bytes : 0;
}

static void relay_set_paused(VarlinkRelay *r, bool paused) {
        if (r->paused == paused)
                return;
        r->paused = paused;
        for (size_t i = 0; i < r->n_pipes; i++)
                if (r->pipes[i].source)
                        (void) sd_event_source_set_enabled(r->pipes[i].source, paused ? SD_EVENT_OFF : SD_EVENT_ON);
}

static int relay_send(VarlinkRelay *r, VarlinkRelayPipe *p, const void *data, size_t size) {
        _cleanup_json_ json_object *m = json_object_new_object();
        int k;

        if (!m)
                return -ENOMEM;
        k = json_add(m, p->name, json_object_new_base64(data, size));
        if (k < 0)
                return k;
        return varlink_call_notify(r->call, m);
}

/* One read from p: > 0 bytes read, 0 at its end (closed then), -EAGAIN when empty. */
static ssize_t relay_read(VarlinkRelay *r, VarlinkRelayPipe *p) {
        char buf[VARLINK_RELAY_CHUNK_MAX];
        ssize_t n;

        n = read(p->fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return -EAGAIN;
        if (n <= 0) {
                relay_pipe_close(p);
                return 0;
        }
        p->bytes += (uint64_t) n;
        if (r->call && relay_send(r, p, buf, (size_t) n) < 0)
                /* The peer is gone or will be: its disconnect callback follows. */
                varlink_relay_discard(r);
        return n;
}

static int on_relay_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        VarlinkRelay *r = userdata;
        VarlinkRelayPipe *p = NULL;
        size_t total = 0;
        ssize_t n;

        for (size_t i = 0; i < r->n_pipes; i++)
                if (r->pipes[i].source == source)
                        p = &r->pipes[i];
        if (!p)
                return 0;
        /* One chunk per turn of the loop while streaming (level-triggered: the rest comes
         * next turn, after the peer had its chance to read); more when dropping. */
        do {
                n = relay_read(r, p);
                total += n > 0 ? (size_t) n : 0;
        } while (n > 0 && !r->call && total < VARLINK_RELAY_DISCARD_MAX);

        if (r->call && varlink_call_get_pending_output(r->call) > VARLINK_RELAY_PENDING_MAX)
                relay_set_paused(r, true);
        if (n == 0 && varlink_relay_at_eof(r) && r->eof)
                r->eof(r, r->userdata);
        return 0;
}

static void on_relay_drained(VarlinkCall *call, void *userdata) {
        relay_set_paused(userdata, false);
}

int varlink_relay_new(sd_event *event, VarlinkCall *call, int *fds, const char * const *names, size_t n,
                      varlink_relay_eof_t eof, void *userdata, VarlinkRelay **ret) {
        _cleanup_(varlink_relay_freep) VarlinkRelay *r = NULL;
        int k;

        if (n == 0 || n > VARLINK_RELAY_PIPES_MAX) {
                for (size_t i = 0; i < n; i++)
                        safe_close(fds[i]);
                return -EINVAL;
        }
        r = calloc(1, sizeof(VarlinkRelay));
        if (!r) {
                for (size_t i = 0; i < n; i++)
                        safe_close(fds[i]);
                return -ENOMEM;
        }
        r->call = varlink_call_ref(call);
        r->eof = eof;
        r->userdata = userdata;
        r->n_pipes = n;
        for (size_t i = 0; i < n; i++)
                r->pipes[i] = (VarlinkRelayPipe) { .fd = TAKE_FD(fds[i]), .name = names[i] };
        for (size_t i = 0; i < n; i++) {
                k = sd_event_add_io(event, &r->pipes[i].source, r->pipes[i].fd, EPOLLIN, on_relay_io, r);
                if (k < 0)
                        return k;
        }
        varlink_call_set_drained_callback(call, on_relay_drained, r);
        *ret = TAKE_PTR(r);
        return 0;
}

void varlink_relay_flush(VarlinkRelay *r) {
        for (size_t i = 0; i < r->n_pipes; i++) {
                VarlinkRelayPipe *p = &r->pipes[i];
                int capacity;
                size_t total = 0;

                if (p->fd < 0)
                        continue;
                /* What the writer left is in the pipe: at most its capacity. Whatever
                 * comes after is a latecomer's (a child still running), not waited for. */
                capacity = fcntl(p->fd, F_GETPIPE_SZ);
                if (capacity <= 0)
                        capacity = VARLINK_RELAY_DISCARD_MAX;
                while (total < (size_t) capacity) {
                        ssize_t n = relay_read(r, p);
                        if (n <= 0)
                                break;
                        total += (size_t) n;
                }
        }
}

void varlink_relay_discard(VarlinkRelay *r) {
        if (!r->call)
                return;
        varlink_call_set_drained_callback(r->call, NULL, NULL);
        r->call = varlink_call_unref(r->call);
        relay_set_paused(r, false);
}

VarlinkRelay *varlink_relay_free(VarlinkRelay *r) {
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n_pipes; i++)
                relay_pipe_close(&r->pipes[i]);
        if (r->call)
                varlink_call_set_drained_callback(r->call, NULL, NULL);
        varlink_call_unref(r->call);
        return mfree(r);
}
