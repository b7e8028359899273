/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The server half of varlink.h: interfaces and methods, listening sockets, connections,
 * calls. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "json-util.h"
#include "list.h"
#include "strv.h"
#include "varlink-idl.h"
#include "varlink-stream.h"
#include "varlink.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* After accept() failed for want of descriptors or memory, the listener rests this long
 * instead of spinning on a socket that stays readable. */
#define VARLINK_ACCEPT_RETRY_USEC (1U * 1000000U)

static const char service_idl[] =
        "# The Varlink Service Interface is provided by every varlink service. It\n"
        "# describes the service and the interfaces it implements.\n"
        "interface org.varlink.service\n"
        "\n"
        "# Get a list of all the interfaces a service provides and information\n"
        "# about the implementation.\n"
        "method GetInfo() -> (\n"
        "  vendor: string,\n"
        "  product: string,\n"
        "  version: string,\n"
        "  url: string,\n"
        "  interfaces: []string\n"
        ")\n"
        "\n"
        "# Get the description of an interface that is implemented by this service.\n"
        "method GetInterfaceDescription(interface: string) -> (description: string)\n"
        "\n"
        "# The requested interface was not found.\n"
        "error InterfaceNotFound (interface: string)\n"
        "\n"
        "# The requested method was not found\n"
        "error MethodNotFound (method: string)\n"
        "\n"
        "# The interface defines the requested method, but the service does not\n"
        "# implement it.\n"
        "error MethodNotImplemented (method: string)\n"
        "\n"
        "# One of the passed parameters is invalid.\n"
        "error InvalidParameter (parameter: string)\n"
        "\n"
        "# Client is denied access\n"
        "error PermissionDenied ()\n"
        "\n"
        "# Method is expected to be called with 'more' set to true, but wasn't\n"
        "error ExpectedMore ()\n";

typedef struct VarlinkInterface {
        char *name;
        char *description;
        char **methods;
} VarlinkInterface;

typedef struct VarlinkMethod {
        char *name;
        varlink_method_t callback;
        void *userdata;
} VarlinkMethod;

typedef struct VarlinkListener {
        VarlinkServer *server;
        int fd;
        sd_event_source *source;
        sd_event_source *retry_source;
} VarlinkListener;

typedef struct VarlinkConnection VarlinkConnection;

struct VarlinkConnection {
        unsigned n_ref;
        VarlinkServer *server;          /* NULL once closed */
        VarlinkStream stream;
        VarlinkLimits limits;
        struct ucred ucred;
        int pidfd;
        char *tag;                      /* the server's, for its methods (varlink_call_set_connection_tag()) */
        bool counted_apart;             /* counted with its uid's of the same tag (varlink_call_set_connection_group()) */

        sd_event_source *io_source;
        sd_event_source *defer_source;  /* runs connection_process() after an API call */
        sd_event_source *timer_source;

        VarlinkCall *current;           /* dispatched, final reply not yet queued */
        uint64_t idle_since;            /* last call ended, or last bytes read */
        uint64_t message_since;         /* the incomplete message at the end of input began */
        int close_error;                /* a close asked for from an API call */
        bool oversized_answered;        /* the error for a too large call is queued */
        bool read_eof;
        bool closed;

        VarlinkConnection *prev, *next;
};

struct VarlinkCall {
        unsigned n_ref;
        VarlinkConnection *connection;
        char *method;
        VarlinkCallFlags flags;
        bool done;                      /* final reply queued, or oneway and returned */

        varlink_call_handler_t disconnect_callback;
        void *disconnect_userdata;
        varlink_call_handler_t drained_callback;
        void *drained_userdata;
};

struct VarlinkServer {
        unsigned n_ref;
        char *vendor, *product, *version, *url;
        VarlinkInterface *interfaces;
        size_t n_interfaces;
        VarlinkMethod *methods;
        size_t n_methods;
        VarlinkListener **listeners;
        size_t n_listeners;
        VarlinkConnection *connections;
        unsigned n_connections;
        VarlinkLimits limits;
        sd_event *event;
        int64_t priority;
};

static void connection_process(VarlinkConnection *c);

/* ---- connections ---- */

static VarlinkConnection *connection_ref(VarlinkConnection *c) {
        c->n_ref++;
        return c;
}

static VarlinkConnection *connection_unref(VarlinkConnection *c) {
        if (!c || --c->n_ref > 0)
                return NULL;
        /* Closed already: the server's reference goes only with connection_close(). */
        varlink_stream_done(&c->stream);
        safe_close(c->pidfd);
        free(c->tag);
        return mfree(c);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(VarlinkConnection *, connection_unref);

static uint64_t connection_now(VarlinkConnection *c) {
        uint64_t t = 0;

        (void) sd_event_now(c->server->event, CLOCK_MONOTONIC, &t);
        return t;
}

/* Ends the call in progress as far as the connection goes: the next may be dispatched. */
static void connection_end_call(VarlinkConnection *c) {
        c->current->done = true;
        c->current = varlink_call_unref(c->current);
        c->idle_since = connection_now(c);
}

static void connection_schedule(VarlinkConnection *c) {
        if (!c->closed)
                (void) sd_event_source_set_enabled(c->defer_source, SD_EVENT_ONESHOT);
}

static void connection_close(VarlinkConnection *c) {
        VarlinkCall *call;

        if (c->closed)
                return;
        c->closed = true;
        c->io_source = sd_event_source_disable_unref(c->io_source);
        c->defer_source = sd_event_source_disable_unref(c->defer_source);
        c->timer_source = sd_event_source_disable_unref(c->timer_source);
        varlink_stream_done(&c->stream);

        LIST_REMOVE(c->server->connections, c);
        c->server->n_connections--;
        c->server = NULL;

        call = TAKE_PTR(c->current);
        if (call) {
                if (!call->done && call->disconnect_callback)
                        call->disconnect_callback(call, call->disconnect_userdata);
                call->done = true;
                varlink_call_unref(call);
        }
        connection_unref(c);   /* the server's */
}

static bool connection_wants_input(VarlinkConnection *c) {
        if (c->closed || c->close_error != 0 || c->read_eof)
                return false;
        if (c->stream.oversized)
                /* The rest of a too large call, read to be dropped. */
                return c->stream.discarding;
        if (!c->current)
                return true;
        /* Read ahead, within bounds, while a call is in progress. */
        return c->stream.input_messages < c->limits.queued_calls_max &&
                varlink_stream_input_size(&c->stream) < c->limits.message_size_max;
}

static uint64_t connection_deadline(VarlinkConnection *c) {
        uint64_t deadline = UINT64_MAX;

        if (!c->current && c->limits.idle_timeout_usec > 0)
                deadline = c->idle_since + c->limits.idle_timeout_usec;
        if (c->limits.message_timeout_usec > 0 && c->message_since > 0 && connection_wants_input(c))
                deadline = MIN(deadline, c->message_since + c->limits.message_timeout_usec);
        return deadline;
}

static int connection_update(VarlinkConnection *c) {
        uint32_t events = 0;
        uint64_t deadline;
        int r;

        if (connection_wants_input(c))
                events |= EPOLLIN;
        if (varlink_stream_pending_output(&c->stream) > 0)
                events |= EPOLLOUT;
        r = sd_event_source_set_io_events(c->io_source, events);
        if (r < 0)
                return r;

        deadline = connection_deadline(c);
        if (deadline == UINT64_MAX)
                return sd_event_source_set_enabled(c->timer_source, SD_EVENT_OFF);
        r = sd_event_source_set_time(c->timer_source, deadline);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(c->timer_source, SD_EVENT_ONESHOT);
}

static int connection_read(VarlinkConnection *c) {
        unsigned before = c->stream.input_messages;
        ssize_t n;

        n = varlink_stream_read(&c->stream);
        if (n == -EAGAIN)
                return 0;
        /* Too large a message: the calls before it are answered, then (if the server
         * has an error for it) it is read to its end and answered, and the connection
         * closed, as at EOF. */
        if (n == 0 || (n == -EMSGSIZE && !(c->limits.oversized_error && c->stream.discarding)) ||
            (n > 0 && c->stream.oversized && !c->stream.discarding)) {
                c->read_eof = true;
                return 0;
        }
        if (n < 0 && n != -EMSGSIZE)
                return (int) n;

        c->idle_since = connection_now(c);
        if (c->stream.discarding) {
                /* The rest of a too large call: within the time a message has. */
                if (c->message_since == 0)
                        c->message_since = c->idle_since;
        } else if (!varlink_stream_has_partial_input(&c->stream))
                c->message_since = 0;
        else if (c->message_since == 0 || c->stream.input_messages != before)
                c->message_since = c->idle_since;
        return 0;
}

/* Writes what the socket takes; tells the call in progress when all is out. */
static int connection_flush(VarlinkConnection *c) {
        _cleanup_(varlink_call_unrefp) VarlinkCall *call = NULL;
        bool had_output = varlink_stream_pending_output(&c->stream) > 0;
        int r;

        r = varlink_stream_flush(&c->stream);
        if (r < 0 || varlink_stream_pending_output(&c->stream) > 0)
                return r;

        if (had_output && c->current && c->current->drained_callback) {
                call = varlink_call_ref(c->current);
                call->drained_callback(call, call->drained_userdata);
        }
        return 0;
}

static int connection_dispatch(VarlinkConnection *c, json_object *m);

static int connection_dispatch_all(VarlinkConnection *c) {
        int r;

        while (!c->current && !c->closed && c->close_error == 0) {
                _cleanup_json_ json_object *m = NULL;

                r = varlink_stream_next(&c->stream, &m);
                if (r <= 0)
                        return r;
                r = connection_dispatch(c, m);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The answer to a call too large to read: after those before it. */
static int connection_answer_oversized(VarlinkConnection *c) {
        _cleanup_json_ json_object *m = NULL, *p = NULL;
        int r;

        if (!c->stream.oversized || !c->limits.oversized_error || c->oversized_answered || c->current ||
            c->stream.input_messages > 0)
                return 0;
        c->oversized_answered = true;
        m = json_object_new_object();
        p = json_object_new_object();
        if (!m || !p)
                return -ENOMEM;
        r = json_add(p, "message", json_object_new_string(strempty(c->limits.oversized_message)));
        if (r >= 0)
                r = json_add(m, "error", json_object_new_string(c->limits.oversized_error));
        if (r >= 0)
                r = json_add(m, "parameters", TAKE_PTR(p));
        if (r >= 0)
                r = varlink_stream_enqueue(&c->stream, m);
        return r;
}

/* After the peer closed its end: done once every call is answered and written. */
static bool connection_finished(VarlinkConnection *c) {
        return c->read_eof && !c->current && c->stream.input_messages == 0 &&
                (!c->stream.oversized || !c->limits.oversized_error || c->oversized_answered) &&
                varlink_stream_pending_output(&c->stream) == 0;
}

static void connection_process(VarlinkConnection *c) {
        _cleanup_(connection_unrefp) VarlinkConnection *ref = connection_ref(c);
        int r;

        r = connection_dispatch_all(c);
        if (r >= 0 && !c->closed)
                r = connection_answer_oversized(c);
        if (r >= 0 && !c->closed)
                r = connection_flush(c);
        if (c->closed)
                return;
        if (r >= 0 && c->close_error != 0)
                r = c->close_error;
        if (r >= 0 && !connection_finished(c))
                r = connection_update(c);
        if (r < 0 || connection_finished(c))
                connection_close(c);
}

static int on_connection_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        _cleanup_(connection_unrefp) VarlinkConnection *c = connection_ref(userdata);
        int r = 0;

        /* A hangup with input still wanted may leave calls in the socket (a oneway call,
         * then close): read them first; EOF comes after them. */
        if (revents & EPOLLERR)
                r = -ECONNRESET;
        else if ((revents & (EPOLLIN | EPOLLHUP)) && connection_wants_input(c))
                r = connection_read(c);
        else if (revents & EPOLLHUP)
                r = -ECONNRESET;
        if (r < 0) {
                connection_close(c);
                return 0;
        }
        connection_process(c);
        return 0;
}

static int on_connection_defer(sd_event_source *source, void *userdata) {
        connection_process(userdata);
        return 0;
}

static int on_connection_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        connection_close(userdata);
        return 0;
}

static int connection_add_sources(VarlinkConnection *c, VarlinkServer *s) {
        int r;

        r = sd_event_add_io(s->event, &c->io_source, c->stream.fd, EPOLLIN, on_connection_io, c);
        if (r < 0)
                return r;
        r = sd_event_add_defer(s->event, &c->defer_source, on_connection_defer, c);
        if (r < 0)
                return r;
        r = sd_event_add_time(s->event, &c->timer_source, CLOCK_MONOTONIC, UINT64_MAX, 0, on_connection_timer, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(c->defer_source, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(c->timer_source, SD_EVENT_OFF);
        (void) sd_event_source_set_priority(c->io_source, s->priority);
        (void) sd_event_source_set_priority(c->defer_source, s->priority);
        (void) sd_event_source_set_priority(c->timer_source, s->priority);
        return 0;
}

static int connection_new(VarlinkServer *s, int fd, const struct ucred *ucred) {
        VarlinkConnection *c;
        socklen_t len = sizeof(int);
        int r;

        c = calloc(1, sizeof(*c));
        if (!c) {
                safe_close(fd);
                return -ENOMEM;
        }
        c->n_ref = 1;
        c->server = s;
        c->limits = s->limits;
        c->ucred = *ucred;
        c->pidfd = -EBADF;
        r = varlink_stream_init(&c->stream, fd, s->limits.message_size_max);
        if (r < 0) {
                free(c);
                return r;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &c->pidfd, &len) < 0)
                c->pidfd = -EBADF;

        LIST_PREPEND(s->connections, c);
        s->n_connections++;
        r = connection_add_sources(c, s);
        if (r >= 0) {
                c->idle_since = connection_now(c);
                r = connection_update(c);
        }
        if (r < 0)
                connection_close(c);
        return r;
}

/* ---- calls ---- */

VarlinkCall *varlink_call_ref(VarlinkCall *call) {
        if (call)
                call->n_ref++;
        return call;
}

VarlinkCall *varlink_call_unref(VarlinkCall *call) {
        if (!call || --call->n_ref > 0)
                return NULL;
        connection_unref(call->connection);
        free(call->method);
        return mfree(call);
}

const char *varlink_call_get_method(VarlinkCall *call) {
        return call->method;
}

VarlinkCallFlags varlink_call_get_flags(VarlinkCall *call) {
        return call->flags;
}

VarlinkServer *varlink_call_get_server(VarlinkCall *call) {
        return call->connection->server;
}

void varlink_call_set_disconnect_callback(VarlinkCall *call, varlink_call_handler_t callback, void *userdata) {
        call->disconnect_callback = callback;
        call->disconnect_userdata = userdata;
}

void varlink_call_set_drained_callback(VarlinkCall *call, varlink_call_handler_t callback, void *userdata) {
        call->drained_callback = callback;
        call->drained_userdata = userdata;
}

size_t varlink_call_get_pending_output(VarlinkCall *call) {
        return varlink_stream_pending_output(&call->connection->stream);
}

int varlink_call_get_peer_ucred(VarlinkCall *call, struct ucred *ret) {
        *ret = call->connection->ucred;
        return 0;
}

int varlink_call_set_connection_tag(VarlinkCall *call, const char *tag) {
        char *t = NULL;

        if (tag) {
                t = strdup(tag);
                if (!t)
                        return -ENOMEM;
        }
        free(call->connection->tag);
        call->connection->tag = t;
        call->connection->counted_apart = false;
        return 0;
}

/* The connections of uid counted apart under tag, but for c. */
static unsigned server_n_connections_of_group(VarlinkServer *s, uid_t uid, const char *tag,
                                              const VarlinkConnection *c) {
        unsigned n = 0;

        for (VarlinkConnection *i = s->connections; i; i = i->next)
                if (i != c && i->counted_apart && i->ucred.uid == uid && streq(i->tag, tag))
                        n++;
        return n;
}

int varlink_call_set_connection_group(VarlinkCall *call, const char *tag) {
        VarlinkConnection *c = call->connection;
        int r;

        if (!tag)
                return -EINVAL;
        if (!c->server)
                return -ENOTCONN;
        if (server_n_connections_of_group(c->server, c->ucred.uid, tag, c) >= c->server->limits.connections_per_uid_max)
                return -EUSERS;
        r = varlink_call_set_connection_tag(call, tag);
        if (r < 0)
                return r;
        c->counted_apart = true;
        return 0;
}

const char *varlink_call_get_connection_tag(VarlinkCall *call) {
        return call->connection->tag;
}

int varlink_call_get_peer_pidfd(VarlinkCall *call) {
        return call->connection->pidfd >= 0 ? call->connection->pidfd : -ENODATA;
}

/* Queues message m for call, with copies of fds; final: it is the call's last. */
static int call_send_fds(VarlinkCall *call, json_object *m, bool final, const int *fds, size_t n_fds) {
        VarlinkConnection *c = call->connection;
        int r;

        if (c->closed || c->close_error != 0)
                return -ECONNRESET;
        if (call->done)
                return -EALREADY;
        if (call->flags & VARLINK_CALL_ONEWAY)
                return 0;

        r = varlink_stream_enqueue_with_fds(&c->stream, m, fds, n_fds);
        if (r < 0)
                return r;
        connection_schedule(c);
        if (varlink_stream_pending_output(&c->stream) > c->limits.output_buffer_max) {
                c->close_error = -ENOBUFS;
                return -ENOBUFS;
        }
        if (final)
                connection_end_call(c);
        return 0;
}

static int call_send(VarlinkCall *call, json_object *m, bool final) {
        return call_send_fds(call, m, final, NULL, 0);
}

static int call_send_reply(VarlinkCall *call, json_object *parameters, bool continues, const int *fds, size_t n_fds) {
        _cleanup_json_ json_object *m = json_object_new_object();
        int r;

        if (!m)
                return -ENOMEM;
        if (parameters && !json_object_is_type(parameters, json_type_object))
                return -EINVAL;
        r = json_add(m, "parameters", parameters ? json_object_get(parameters) : json_object_new_object());
        if (r < 0)
                return r;
        if (continues) {
                r = json_add(m, "continues", json_object_new_boolean(true));
                if (r < 0)
                        return r;
        }
        return call_send_fds(call, m, !continues, fds, n_fds);
}

int varlink_call_reply(VarlinkCall *call, json_object *parameters) {
        return call_send_reply(call, parameters, false, NULL, 0);
}

int varlink_call_reply_with_fds(VarlinkCall *call, json_object *parameters, const int *fds, size_t n_fds) {
        return call_send_reply(call, parameters, false, fds, n_fds);
}

int varlink_call_notify(VarlinkCall *call, json_object *parameters) {
        if (!call->done && !(call->flags & (VARLINK_CALL_MORE | VARLINK_CALL_ONEWAY)))
                return -EPROTO;
        return call_send_reply(call, parameters, true, NULL, 0);
}

int varlink_call_error(VarlinkCall *call, const char *error, json_object *parameters) {
        _cleanup_json_ json_object *m = json_object_new_object();
        int r;

        if (!m)
                return -ENOMEM;
        if (!varlink_qualified_name_is_valid(error) ||
            (parameters && !json_object_is_type(parameters, json_type_object)))
                return -EINVAL;
        r = json_add(m, "error", json_object_new_string(error));
        if (r < 0)
                return r;
        r = json_add(m, "parameters", parameters ? json_object_get(parameters) : json_object_new_object());
        if (r < 0)
                return r;
        return call_send(call, m, true);
}

/* An error whose parameters are one string, {key: value}. */
static int call_error_string(VarlinkCall *call, const char *error, const char *key, const char *value) {
        _cleanup_json_ json_object *p = json_object_new_object();
        int r;

        if (!p)
                return -ENOMEM;
        r = json_add(p, key, json_object_new_string(value));
        if (r < 0)
                return r;
        return varlink_call_error(call, error, p);
}

int varlink_call_error_invalid_parameter(VarlinkCall *call, const char *name) {
        return call_error_string(call, VARLINK_ERROR_INVALID_PARAMETER, "parameter", name);
}

/* ---- dispatching a call ---- */

static VarlinkInterface *server_find_interface(VarlinkServer *s, const char *name, size_t len) {
        for (size_t i = 0; i < s->n_interfaces; i++)
                if (strlen(s->interfaces[i].name) == len && strncmp(s->interfaces[i].name, name, len) == 0)
                        return &s->interfaces[i];
        return NULL;
}

static VarlinkMethod *server_find_method(VarlinkServer *s, const char *name) {
        for (size_t i = 0; i < s->n_methods; i++)
                if (streq(s->methods[i].name, name))
                        return &s->methods[i];
        return NULL;
}

/* A boolean field of the call: absent and null are false. */
static bool call_parse_bool(json_object *m, const char *key, bool *ret) {
        json_object *v;

        *ret = false;
        if (!json_object_object_get_ex(m, key, &v) || !v)
                return true;
        if (!json_object_is_type(v, json_type_boolean))
                return false;
        *ret = json_object_get_boolean(v);
        return true;
}

/* Reads the call's fields into call. 0, or -EINVAL with the field at fault in *ret_invalid. */
static int call_parse(VarlinkCall *call, json_object *m, json_object **ret_parameters, const char **ret_invalid) {
        bool oneway, more, upgrade;
        json_object *v;

        *ret_invalid = "method";
        if (!json_object_is_type(m, json_type_object))
                return -EINVAL;
        /* oneway first: it decides whether any of the errors below is sent. */
        *ret_invalid = "oneway";
        if (!call_parse_bool(m, "oneway", &oneway))
                return -EINVAL;
        call->flags |= oneway ? VARLINK_CALL_ONEWAY : 0;
        *ret_invalid = "more";
        if (!call_parse_bool(m, "more", &more))
                return -EINVAL;
        call->flags |= more ? VARLINK_CALL_MORE : 0;
        *ret_invalid = "upgrade";
        if (!call_parse_bool(m, "upgrade", &upgrade) || upgrade)
                return -EINVAL;

        *ret_invalid = "method";
        if (!json_object_object_get_ex(m, "method", &v) || !json_object_is_type(v, json_type_string) ||
            !varlink_qualified_name_is_valid(json_object_get_string(v)))
                return -EINVAL;
        call->method = strdup(json_object_get_string(v));
        if (!call->method)
                return -ENOMEM;

        *ret_invalid = "parameters";
        if (!json_object_object_get_ex(m, "parameters", &v) || !v)
                v = NULL;
        else if (!json_object_is_type(v, json_type_object))
                return -EINVAL;
        *ret_parameters = v;
        *ret_invalid = NULL;
        return 0;
}

static int call_new(VarlinkConnection *c, VarlinkCall **ret) {
        VarlinkCall *call = calloc(1, sizeof(VarlinkCall));

        if (!call)
                return -ENOMEM;
        call->n_ref = 1;
        call->connection = connection_ref(c);
        *ret = call;
        return 0;
}

/* Finds the method and calls it; the errors the server answers by itself otherwise. */
static int call_invoke(VarlinkServer *s, VarlinkCall *call, json_object *parameters) {
        const char *dot = strrchr(call->method, '.');
        VarlinkInterface *interface;
        VarlinkMethod *method;

        interface = server_find_interface(s, call->method, (size_t) (dot - call->method));
        if (!interface) {
                _cleanup_free_ char *name = strndup(call->method, (size_t) (dot - call->method));
                if (!name)
                        return -ENOMEM;
                return call_error_string(call, VARLINK_ERROR_INTERFACE_NOT_FOUND, "interface", name);
        }
        if (!strv_contains(interface->methods, dot + 1))
                return call_error_string(call, VARLINK_ERROR_METHOD_NOT_FOUND, "method", call->method);
        method = server_find_method(s, call->method);
        if (!method)
                return call_error_string(call, VARLINK_ERROR_METHOD_NOT_IMPLEMENTED, "method", call->method);

        return method->callback(call, parameters, call->flags, method->userdata);
}

static int connection_dispatch(VarlinkConnection *c, json_object *m) {
        _cleanup_(varlink_call_unrefp) VarlinkCall *call = NULL;
        _cleanup_json_ json_object *empty = NULL;
        json_object *parameters = NULL;
        const char *invalid;
        int r;

        r = call_new(c, &call);
        if (r < 0)
                return r;
        c->current = varlink_call_ref(call);

        r = call_parse(call, m, &parameters, &invalid);
        if (r == -EINVAL)
                r = varlink_call_error_invalid_parameter(call, invalid);
        else if (r >= 0) {
                if (!parameters)
                        parameters = empty = json_object_new_object();
                r = parameters ? call_invoke(c->server, call, parameters) : -ENOMEM;
        }
        if (r < 0)
                return r;

        if (c->closed || call->done)
                return 0;
        if (call->flags & VARLINK_CALL_ONEWAY) {
                connection_end_call(c);
                return 0;
        }
        /* Neither answered nor kept for later: nobody ever will. */
        if (call->n_ref <= 2)
                return -EPROTO;
        return 0;
}

/* ---- org.varlink.service ---- */

static int json_array_add_string(json_object *a, const char *s) {
        json_object *v = json_object_new_string(s);

        if (!v || json_object_array_add(a, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

static int service_get_info(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags, void *userdata) {
        _cleanup_json_ json_object *p = json_object_new_object(), *interfaces = json_object_new_array();
        VarlinkServer *s = userdata;
        int r;

        if (!p || !interfaces)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_interfaces; i++) {
                r = json_array_add_string(interfaces, s->interfaces[i].name);
                if (r < 0)
                        return r;
        }
        if (json_add(p, "vendor", json_object_new_string(strempty(s->vendor))) < 0 ||
            json_add(p, "product", json_object_new_string(strempty(s->product))) < 0 ||
            json_add(p, "version", json_object_new_string(strempty(s->version))) < 0 ||
            json_add(p, "url", json_object_new_string(strempty(s->url))) < 0 ||
            json_add(p, "interfaces", TAKE_PTR(interfaces)) < 0)
                return -ENOMEM;
        return varlink_call_reply(call, p);
}

static int service_get_interface_description(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags,
                                             void *userdata) {
        _cleanup_json_ json_object *p = json_object_new_object();
        VarlinkServer *s = userdata;
        VarlinkInterface *interface;
        json_object *v;
        const char *name;
        int r;

        if (!p)
                return -ENOMEM;
        if (!json_object_object_get_ex(parameters, "interface", &v) || !json_object_is_type(v, json_type_string))
                return varlink_call_error_invalid_parameter(call, "interface");
        name = json_object_get_string(v);
        interface = server_find_interface(s, name, strlen(name));
        if (!interface)
                return call_error_string(call, VARLINK_ERROR_INTERFACE_NOT_FOUND, "interface", name);

        r = json_add(p, "description", json_object_new_string(interface->description));
        if (r < 0)
                return r;
        return varlink_call_reply(call, p);
}

/* ---- the server ---- */

static void interface_done(VarlinkInterface *i) {
        free(i->name);
        free(i->description);
        strv_free(i->methods);
}

static VarlinkListener *listener_free(VarlinkListener *l) {
        if (!l)
                return NULL;
        sd_event_source_disable_unref(l->source);
        sd_event_source_disable_unref(l->retry_source);
        safe_close(l->fd);
        return mfree(l);
}

int varlink_server_new(VarlinkServer **ret) {
        _cleanup_(varlink_server_unrefp) VarlinkServer *s = NULL;
        int r;

        s = calloc(1, sizeof(VarlinkServer));
        if (!s)
                return -ENOMEM;
        s->n_ref = 1;
        s->limits = VARLINK_LIMITS_DEFAULT;

        r = varlink_server_add_interface(s, service_idl);
        if (r < 0)
                return r;
        r = varlink_server_bind_method(s, "org.varlink.service.GetInfo", service_get_info, s);
        if (r < 0)
                return r;
        r = varlink_server_bind_method(s, "org.varlink.service.GetInterfaceDescription",
                                       service_get_interface_description, s);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(s);
        return 0;
}

VarlinkServer *varlink_server_ref(VarlinkServer *s) {
        if (s)
                s->n_ref++;
        return s;
}

VarlinkServer *varlink_server_unref(VarlinkServer *s) {
        if (!s || --s->n_ref > 0)
                return NULL;

        /* Disconnect callbacks may take references of their own: keep s alive through
         * them, as a zombie nobody can find. */
        s->n_ref = 1;
        while (s->connections)
                connection_close(s->connections);
        for (size_t i = 0; i < s->n_listeners; i++)
                listener_free(s->listeners[i]);
        free(s->listeners);
        for (size_t i = 0; i < s->n_interfaces; i++)
                interface_done(&s->interfaces[i]);
        free(s->interfaces);
        for (size_t i = 0; i < s->n_methods; i++)
                free(s->methods[i].name);
        free(s->methods);
        free(s->vendor);
        free(s->product);
        free(s->version);
        free(s->url);
        sd_event_unref(s->event);
        return mfree(s);
}

static int strdup_replace(char **p, const char *s) {
        char *d = strdup(strempty(s));

        if (!d)
                return -ENOMEM;
        free(*p);
        *p = d;
        return 0;
}

int varlink_server_set_info(VarlinkServer *s, const char *vendor, const char *product, const char *version,
                            const char *url) {
        if (strdup_replace(&s->vendor, vendor) < 0 || strdup_replace(&s->product, product) < 0 ||
            strdup_replace(&s->version, version) < 0 || strdup_replace(&s->url, url) < 0)
                return -ENOMEM;
        return 0;
}

int varlink_server_set_limits(VarlinkServer *s, const VarlinkLimits *limits) {
        if (limits->message_size_max == 0 || limits->output_buffer_max < limits->message_size_max ||
            limits->queued_calls_max == 0 || limits->connections_max == 0 ||
            limits->connections_per_uid_max == 0)
                return -EINVAL;
        s->limits = *limits;
        return 0;
}

int varlink_server_add_interface(VarlinkServer *s, const char *idl) {
        VarlinkInterface i = {};
        VarlinkInterface *a;
        int r;

        r = varlink_idl_scan(idl, &i.name, &i.methods);
        if (r < 0)
                return r;
        if (server_find_interface(s, i.name, strlen(i.name))) {
                interface_done(&i);
                return -EEXIST;
        }
        i.description = strdup(idl);
        a = i.description ? realloc(s->interfaces, (s->n_interfaces + 1) * sizeof(VarlinkInterface)) : NULL;
        if (!a) {
                interface_done(&i);
                return -ENOMEM;
        }
        s->interfaces = a;
        s->interfaces[s->n_interfaces++] = i;
        return 0;
}

int varlink_server_bind_method(VarlinkServer *s, const char *method, varlink_method_t callback,
                               void *userdata) {
        const char *dot = method ? strrchr(method, '.') : NULL;
        VarlinkInterface *interface;
        VarlinkMethod *a;
        char *name;

        if (!varlink_qualified_name_is_valid(method) || !callback)
                return -EINVAL;
        interface = server_find_interface(s, method, (size_t) (dot - method));
        if (!interface)
                return -ENXIO;
        if (!strv_contains(interface->methods, dot + 1))
                return -ENOENT;
        if (server_find_method(s, method))
                return -EEXIST;

        name = strdup(method);
        a = name ? realloc(s->methods, (s->n_methods + 1) * sizeof(VarlinkMethod)) : NULL;
        if (!a) {
                free(name);
                return -ENOMEM;
        }
        s->methods = a;
        s->methods[s->n_methods++] = (VarlinkMethod) {
                .name = name,
                .callback = callback,
                .userdata = userdata,
        };
        return 0;
}

/* Counts the connections of uid, but for those counted apart in a group. */
static unsigned server_n_connections_of(VarlinkServer *s, uid_t uid) {
        unsigned n = 0;

        for (VarlinkConnection *c = s->connections; c; c = c->next)
                if (c->ucred.uid == uid && !c->counted_apart)
                        n++;
        return n;
}

int varlink_server_add_connection(VarlinkServer *s, int fd) {
        struct ucred ucred = {};
        socklen_t len = sizeof(ucred);

        if (!s->event) {
                safe_close(fd);
                return -ENXIO;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &ucred, &len) < 0) {
                int r = -errno;
                safe_close(fd);
                return r;
        }
        if (s->n_connections >= s->limits.connections_max ||
            server_n_connections_of(s, ucred.uid) >= s->limits.connections_per_uid_max) {
                safe_close(fd);
                return 0;
        }
        return connection_new(s, fd, &ucred);
}

unsigned varlink_server_n_connections(VarlinkServer *s) {
        return s->n_connections;
}

/* ---- listening ---- */

static int listener_add_source(VarlinkListener *l);

static int on_listener_retry(sd_event_source *source, uint64_t usec, void *userdata) {
        VarlinkListener *l = userdata;

        l->retry_source = sd_event_source_disable_unref(l->retry_source);
        (void) sd_event_source_set_enabled(l->source, SD_EVENT_ON);
        return 0;
}

/* Out of descriptors or memory: the socket stays readable, so rest rather than spin. */
static void listener_rest(VarlinkListener *l) {
        VarlinkServer *s = l->server;
        uint64_t now = 0;

        if (l->retry_source)
                return;
        (void) sd_event_now(s->event, CLOCK_MONOTONIC, &now);
        if (sd_event_add_time(s->event, &l->retry_source, CLOCK_MONOTONIC, now + VARLINK_ACCEPT_RETRY_USEC, 0,
                              on_listener_retry, l) < 0)
                return;
        (void) sd_event_source_set_enabled(l->source, SD_EVENT_OFF);
}

static int on_listener_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        VarlinkListener *l = userdata;
        int cfd;

        cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (cfd < 0) {
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                        listener_rest(l);
                return 0;
        }
        /* Failures are the peer's loss only: its connection is closed. */
        (void) varlink_server_add_connection(l->server, cfd);
        return 0;
}

static int listener_add_source(VarlinkListener *l) {
        VarlinkServer *s = l->server;
        int r;

        if (!s->event || l->source)
                return 0;
        r = sd_event_add_io(s->event, &l->source, l->fd, EPOLLIN, on_listener_io, l);
        if (r < 0)
                return r;
        return sd_event_source_set_priority(l->source, s->priority);
}

int varlink_server_listen_fd(VarlinkServer *s, int fd) {
        VarlinkListener *l, **a;
        int r;

        if (fd < 0)
                return -EBADF;
        l = calloc(1, sizeof(VarlinkListener));
        a = l ? realloc(s->listeners, (s->n_listeners + 1) * sizeof(VarlinkListener *)) : NULL;
        if (!a) {
                free(l);
                safe_close(fd);
                return -ENOMEM;
        }
        s->listeners = a;
        *l = (VarlinkListener) {
                .server = s,
                .fd = fd,
        };
        s->listeners[s->n_listeners++] = l;

        r = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        if (r < 0)
                return -errno;
        return listener_add_source(l);
}

int varlink_server_listen_address(VarlinkServer *s, const char *address, mode_t mode) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa;
        struct stat st;
        socklen_t len;
        mode_t old;
        int r;

        r = varlink_address_parse(address, &sa, &len);
        if (r < 0)
                return r;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;

        /* A socket left by an earlier run is replaced; anything else is not ours. */
        if (sa.sun_path[0] != 0 && lstat(sa.sun_path, &st) >= 0) {
                if (!S_ISSOCK(st.st_mode))
                        return -EEXIST;
                if (unlink(sa.sun_path) < 0)
                        return -errno;
        }
        /* The file is made with mode at once: no moment with the umask's. */
        old = umask(~mode & 0777);
        r = bind(fd, (struct sockaddr *) &sa, len);
        umask(old);
        if (r < 0)
                return -errno;
        if (listen(fd, SOMAXCONN) < 0)
                return -errno;

        return varlink_server_listen_fd(s, TAKE_FD(fd));
}

int varlink_server_attach_event(VarlinkServer *s, sd_event *event, int64_t priority) {
        int r;

        if (s->event)
                return -EBUSY;
        if (event)
                s->event = sd_event_ref(event);
        else {
                r = sd_event_default(&s->event);
                if (r < 0)
                        return r;
        }
        s->priority = priority;

        for (size_t i = 0; i < s->n_listeners; i++) {
                r = listener_add_source(s->listeners[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}
