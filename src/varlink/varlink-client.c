/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The client half of varlink.h: one connection, calls answered in the order made. */

#include <errno.h>
#include <poll.h>

#include "json-util.h"
#include "time-util.h"
#include "varlink-idl.h"
#include "varlink-stream.h"
#include "varlink.h"

typedef struct ClientCall {
        varlink_reply_t callback;
        void *userdata;
        struct ClientCall *next;
} ClientCall;

struct VarlinkClient {
        unsigned n_ref;
        VarlinkStream stream;
        sd_event *event;
        sd_event_source *io_source;
        ClientCall *calls, *calls_tail;   /* asynchronous calls awaiting replies, oldest first */
        uint64_t timeout_usec;
        bool broken;
        bool paused;                      /* not reading replies: back-pressure on the server */
};

int varlink_client_connect_fd(VarlinkClient **ret, int fd) {
        VarlinkClient *c;
        int r;

        c = calloc(1, sizeof(VarlinkClient));
        if (!c) {
                safe_close(fd);
                return -ENOMEM;
        }
        c->n_ref = 1;
        c->timeout_usec = VARLINK_CLIENT_TIMEOUT_USEC_DEFAULT;
        r = varlink_stream_init(&c->stream, fd, VARLINK_MESSAGE_SIZE_MAX_DEFAULT);
        if (r < 0) {
                free(c);
                return r;
        }
        *ret = c;
        return 0;
}

int varlink_client_connect_address(VarlinkClient **ret, const char *address) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa;
        socklen_t len;
        int r;

        r = varlink_address_parse(address, &sa, &len);
        if (r < 0)
                return r;
        /* Blocking for connect(): on AF_UNIX it only waits while the backlog is full. */
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, len) < 0)
                return -errno;
        return varlink_client_connect_fd(ret, TAKE_FD(fd));
}

VarlinkClient *varlink_client_ref(VarlinkClient *c) {
        if (c)
                c->n_ref++;
        return c;
}

/* The connection is over: every call outstanding learns so, oldest first. */
static void client_fail(VarlinkClient *c) {
        ClientCall *call;

        if (c->broken)
                return;
        c->broken = true;
        c->io_source = sd_event_source_disable_unref(c->io_source);
        varlink_stream_done(&c->stream);

        while ((call = c->calls)) {
                c->calls = call->next;
                if (!c->calls)
                        c->calls_tail = NULL;
                call->callback(c, NULL, VARLINK_ERROR_DISCONNECTED, 0, call->userdata);
                free(call);
        }
}

VarlinkClient *varlink_client_unref(VarlinkClient *c) {
        if (!c || --c->n_ref > 0)
                return NULL;
        /* Callbacks see the client go: keep it alive through them. */
        c->n_ref = 1;
        client_fail(c);
        sd_event_unref(c->event);
        return mfree(c);
}

size_t varlink_client_take_fds(VarlinkClient *c, int *fds, size_t max) {
        return varlink_stream_take_fds(&c->stream, fds, max);
}

void varlink_client_set_timeout(VarlinkClient *c, uint64_t usec) {
        c->timeout_usec = usec;
}

void varlink_client_set_message_size_max(VarlinkClient *c, size_t size) {
        c->stream.message_size_max = size;
}

bool varlink_client_is_connected(VarlinkClient *c) {
        return !c->broken;
}

static int client_enqueue_call(VarlinkClient *c, const char *method, json_object *parameters,
                               VarlinkCallFlags flags) {
        _cleanup_json_ json_object *m = json_object_new_object();
        int r;

        if (!m)
                return -ENOMEM;
        if (!varlink_qualified_name_is_valid(method) ||
            (parameters && !json_object_is_type(parameters, json_type_object)) ||
            (flags & (VARLINK_CALL_MORE | VARLINK_CALL_ONEWAY)) == (VARLINK_CALL_MORE | VARLINK_CALL_ONEWAY))
                return -EINVAL;
        if (c->broken)
                return -ENOTCONN;

        r = json_add(m, "method", json_object_new_string(method));
        if (r >= 0)
                r = json_add(m, "parameters", parameters ? json_object_get(parameters) : json_object_new_object());
        if (r >= 0 && (flags & VARLINK_CALL_MORE))
                r = json_add(m, "more", json_object_new_boolean(true));
        if (r >= 0 && (flags & VARLINK_CALL_ONEWAY))
                r = json_add(m, "oneway", json_object_new_boolean(true));
        if (r < 0)
                return r;
        return varlink_stream_enqueue(&c->stream, m);
}

/* A reply's fields: parameters ({} if absent or null; a new reference), error (NULL or
 * borrowed from m), flags. -EBADMSG if m is no reply. */
static int client_parse_reply(json_object *m, json_object **ret_parameters, const char **ret_error,
                              VarlinkReplyFlags *ret_flags) {
        json_object *parameters = NULL, *error = NULL, *continues = NULL;

        if (!json_object_is_type(m, json_type_object))
                return -EBADMSG;
        (void) json_object_object_get_ex(m, "parameters", &parameters);
        (void) json_object_object_get_ex(m, "error", &error);
        (void) json_object_object_get_ex(m, "continues", &continues);
        if ((parameters && !json_object_is_type(parameters, json_type_object)) ||
            (error && !json_object_is_type(error, json_type_string)) ||
            (continues && !json_object_is_type(continues, json_type_boolean)))
                return -EBADMSG;

        *ret_parameters = parameters ? json_object_get(parameters) : json_object_new_object();
        if (!*ret_parameters)
                return -ENOMEM;
        *ret_error = error ? json_object_get_string(error) : NULL;
        *ret_flags = continues && json_object_get_boolean(continues) && !error ? VARLINK_REPLY_CONTINUES : 0;
        return 0;
}

/* ---- asynchronous ---- */

static int client_update(VarlinkClient *c) {
        if (c->broken || !c->io_source)
                return 0;
        return sd_event_source_set_io_events(c->io_source,
                                             (c->paused ? 0 : EPOLLIN) |
                                             (varlink_stream_pending_output(&c->stream) > 0 ? EPOLLOUT : 0));
}

void varlink_client_pause(VarlinkClient *c, bool pause) {
        if (c->paused == pause)
                return;
        c->paused = pause;
        (void) client_update(c);
}

/* Hands one reply to the oldest call; the call is over unless it continues. */
static int client_dispatch(VarlinkClient *c, json_object *m) {
        _cleanup_json_ json_object *parameters = NULL;
        _cleanup_free_ ClientCall *done = NULL;
        ClientCall *call = c->calls;
        VarlinkReplyFlags flags;
        const char *error;
        int r;

        if (!call)
                return -EBADMSG;   /* a reply to nothing */
        r = client_parse_reply(m, &parameters, &error, &flags);
        if (r < 0)
                return r;
        if (!(flags & VARLINK_REPLY_CONTINUES)) {
                c->calls = call->next;
                if (!c->calls)
                        c->calls_tail = NULL;
                done = call;
        }
        call->callback(c, parameters, error, flags, call->userdata);
        return 0;
}

static int client_dispatch_all(VarlinkClient *c) {
        int r;

        while (!c->broken) {
                _cleanup_json_ json_object *m = NULL;

                r = varlink_stream_next(&c->stream, &m);
                if (r <= 0)
                        return r;
                r = client_dispatch(c, m);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Replies that arrived are handed over before any failure is: a server may answer and
 * then close. */
static int client_process(VarlinkClient *c, uint32_t revents) {
        ssize_t n = -EAGAIN;
        int r;

        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))
                n = varlink_stream_read(&c->stream);
        r = client_dispatch_all(c);
        if (r < 0)
                return r;
        if (n == 0)
                return -ECONNRESET;
        if (n < 0 && n != -EAGAIN)
                return (int) n;
        return c->broken ? 0 : varlink_stream_flush(&c->stream);
}

static int on_client_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        VarlinkClient *c = varlink_client_ref(userdata);

        if (client_process(c, revents) < 0)
                client_fail(c);
        else
                (void) client_update(c);
        varlink_client_unref(c);
        return 0;
}

int varlink_client_attach_event(VarlinkClient *c, sd_event *event, int64_t priority) {
        int r;

        if (c->event)
                return -EBUSY;
        if (c->broken)
                return -ENOTCONN;
        if (event)
                c->event = sd_event_ref(event);
        else {
                r = sd_event_default(&c->event);
                if (r < 0)
                        return r;
        }
        r = sd_event_add_io(c->event, &c->io_source, c->stream.fd, EPOLLIN, on_client_io, c);
        if (r < 0)
                return r;
        r = sd_event_source_set_priority(c->io_source, priority);
        if (r < 0)
                return r;
        return client_update(c);
}

int varlink_client_call_async(VarlinkClient *c, const char *method, json_object *parameters,
                              VarlinkCallFlags flags, varlink_reply_t callback, void *userdata) {
        ClientCall *call = NULL;
        int r;

        if (!c->event)
                return -ENXIO;
        if (!(flags & VARLINK_CALL_ONEWAY)) {
                if (!callback)
                        return -EINVAL;
                call = calloc(1, sizeof(ClientCall));
                if (!call)
                        return -ENOMEM;
                call->callback = callback;
                call->userdata = userdata;
        }
        r = client_enqueue_call(c, method, parameters, flags);
        if (r < 0) {
                free(call);
                return r;
        }
        if (call) {
                if (c->calls_tail)
                        c->calls_tail->next = call;
                else
                        c->calls = call;
                c->calls_tail = call;
        }
        return client_update(c);
}

/* ---- synchronous ---- */

static int client_wait(VarlinkClient *c, short events, uint64_t deadline) {
        struct pollfd p = { .fd = c->stream.fd, .events = events };
        int timeout = -1;
        uint64_t now;

        if (deadline != UINT64_MAX) {
                now = now_usec(CLOCK_MONOTONIC);
                if (now >= deadline)
                        return -ETIMEDOUT;
                timeout = (int) MIN((deadline - now + 999) / 1000, (uint64_t) INT32_MAX);
        }
        if (poll(&p, 1, timeout) < 0)
                return errno == EINTR ? 0 : -errno;
        return 0;
}

static int client_flush_sync(VarlinkClient *c, uint64_t deadline) {
        int r;

        for (;;) {
                r = varlink_stream_flush(&c->stream);
                if (r < 0 || varlink_stream_pending_output(&c->stream) == 0)
                        return r;
                r = client_wait(c, POLLOUT, deadline);
                if (r < 0)
                        return r;
        }
}

static int client_receive_sync(VarlinkClient *c, uint64_t deadline, json_object **ret) {
        ssize_t n;
        int r;

        for (;;) {
                r = varlink_stream_next(&c->stream, ret);
                if (r != 0)
                        return r < 0 ? r : 0;
                n = varlink_stream_read(&c->stream);
                if (n == 0)
                        return -ECONNRESET;
                if (n > 0)
                        continue;
                if (n != -EAGAIN)
                        return (int) n;
                r = client_wait(c, POLLIN, deadline);
                if (r < 0)
                        return r;
        }
}

/* Sends what is queued (the call last) and reads its reply. */
static int client_finish_sync(VarlinkClient *c, json_object **ret_parameters, char **ret_error) {
        _cleanup_json_ json_object *m = NULL, *p = NULL;
        _cleanup_free_ char *e = NULL;
        uint64_t deadline = UINT64_MAX;
        VarlinkReplyFlags flags;
        const char *error;
        int r;

        if (c->timeout_usec > 0)
                deadline = now_usec(CLOCK_MONOTONIC) + c->timeout_usec;
        r = client_flush_sync(c, deadline);
        if (r < 0)
                return r;
        r = client_receive_sync(c, deadline, &m);
        if (r < 0)
                return r;
        r = client_parse_reply(m, &p, &error, &flags);
        if (r < 0)
                return r;
        if (flags & VARLINK_REPLY_CONTINUES)
                return -EBADMSG;   /* not asked for */
        if (error) {
                e = strdup(error);
                if (!e)
                        return -ENOMEM;
        }

        if (ret_error)
                *ret_error = TAKE_PTR(e);
        if (ret_parameters)
                *ret_parameters = TAKE_PTR(p);
        return error ? 1 : 0;
}

int varlink_client_call_sync(VarlinkClient *c, const char *method, json_object *parameters,
                             json_object **ret_parameters, char **ret_error) {
        int r;

        if (c->calls)
                return -EBUSY;
        r = client_enqueue_call(c, method, parameters, 0);
        if (r < 0)
                return r;
        r = client_finish_sync(c, ret_parameters, ret_error);
        /* Whatever went wrong, a late reply would be taken for the next call's. */
        if (r < 0)
                client_fail(c);
        return r;
}
