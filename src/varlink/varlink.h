/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * varlink (https://varlink.org) on json-c and sd-event: a server and a small client, over
 * AF_UNIX stream sockets. Debian 12 has no varlink library and systemd 252 exports none.
 *
 * Wire: JSON objects, each ended by a NUL byte. A call is
 *   {"method":"iface.Method","parameters":{..},"more":true,"oneway":true}
 * and a reply {"parameters":{..},"continues":true} or {"error":"iface.Name","parameters":{..}}.
 *
 * Server. Describe each interface by its IDL text (varlink_server_add_interface()), bind
 * its methods, listen, attach to an sd-event loop. org.varlink.service (GetInfo,
 * GetInterfaceDescription) is built in. On each connection calls are answered in order:
 * the call in progress is answered fully (all its "continues" replies and the last one)
 * before the next is dispatched; calls that arrive meanwhile wait, read ahead up to
 * queued_calls_max. What the server answers by itself:
 *   - a message that is not JSON, or larger than message_size_max: the connection is
 *     closed (there is no call to answer);
 *   - JSON that is not an object, without a valid "method", or with "more", "oneway" or
 *     "parameters" of the wrong type (null counts as absent): InvalidParameter naming the
 *     field ("method" for a non-object); "upgrade": true is InvalidParameter "upgrade"
 *     (not supported); fields it does not know are ignored;
 *   - InterfaceNotFound, MethodNotFound (the interface does not declare it),
 *     MethodNotImplemented (declared, not bound).
 * A oneway call gets no reply, not even an error; it is over when its method returns.
 *
 * A method is called with the call, its parameters (an object, never NULL; borrowed:
 * json_object_get() what is needed after the method returns) and its flags. It answers with varlink_call_reply() or varlink_call_error(), at once or
 * later: to answer later it keeps a reference (varlink_call_ref()) and replies from any
 * event source of the same loop. It returns 0, or a negative errno for a fault: the
 * connection is then closed (varlink-go does the same), so answer errors a client can act
 * on with an error reply. A method that returns 0 having neither replied nor kept a
 * reference is a bug: the connection is closed rather than left hanging.
 *
 * Replies are queued and written as the peer reads (never blocking, MSG_NOSIGNAL). Apart
 * from the unref functions (which say so), no function below calls a callback of the
 * owner's or closes a connection: that happens from the event loop only.
 *
 * Client: varlink_client_*(), for tests and front ends: synchronous calls (blocking, with
 * a timeout; for programs that do nothing else meanwhile) and asynchronous ones on
 * sd-event, with a callback per reply, enough to follow a "more" stream.
 *
 * All functions return 0 (or what they say) or a negative errno; destructors take NULL.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "macro.h"

#define VARLINK_SERVICE_INTERFACE "org.varlink.service"
#define VARLINK_ERROR_INTERFACE_NOT_FOUND "org.varlink.service.InterfaceNotFound"
#define VARLINK_ERROR_METHOD_NOT_FOUND "org.varlink.service.MethodNotFound"
#define VARLINK_ERROR_METHOD_NOT_IMPLEMENTED "org.varlink.service.MethodNotImplemented"
#define VARLINK_ERROR_INVALID_PARAMETER "org.varlink.service.InvalidParameter"
#define VARLINK_ERROR_PERMISSION_DENIED "org.varlink.service.PermissionDenied"
#define VARLINK_ERROR_EXPECTED_MORE "org.varlink.service.ExpectedMore"
/* Never on the wire: what the client half reports for calls outstanding when the
 * connection ends. Not a valid varlink error name (its interface would have no dot), so
 * no server can send it. */
#define VARLINK_ERROR_DISCONNECTED "varlink.Disconnected"

typedef enum VarlinkCallFlags {
        VARLINK_CALL_MORE   = 1 << 0,   /* the caller accepts "continues" replies */
        VARLINK_CALL_ONEWAY = 1 << 1,   /* the caller wants no reply */
} VarlinkCallFlags;

typedef enum VarlinkReplyFlags {
        VARLINK_REPLY_CONTINUES = 1 << 0,   /* more replies to this call follow */
} VarlinkReplyFlags;

/* ---- limits ---- */

/* Each bounds what one peer can make the server hold. Defaults: */
#define VARLINK_MESSAGE_SIZE_MAX_DEFAULT (16U * 1024U * 1024U)   /* 16 MiB, each direction */
#define VARLINK_OUTPUT_BUFFER_MAX_DEFAULT (32U * 1024U * 1024U)  /* 32 MiB unsent, per connection */
#define VARLINK_QUEUED_CALLS_MAX_DEFAULT 64U                     /* read ahead, per connection */
#define VARLINK_CONNECTIONS_MAX_DEFAULT 4096U                    /* in all */
#define VARLINK_CONNECTIONS_PER_UID_MAX_DEFAULT 128U             /* per peer uid */
#define VARLINK_IDLE_TIMEOUT_USEC_DEFAULT (300U * 1000000U)      /* 5 min */
#define VARLINK_MESSAGE_TIMEOUT_USEC_DEFAULT (30U * 1000000U)    /* 30 s */

typedef struct VarlinkLimits {
        /* A message larger than this closes the connection; a reply larger than this is
         * refused (-EMSGSIZE: answer with an error instead). */
        size_t message_size_max;
        /* Replies queued and not yet read by the peer. A reply that would take the
         * connection past this closes it (-ENOBUFS): a peer that does not read cannot grow
         * the server's memory. Must be at least message_size_max. Methods that stream
         * watch varlink_call_get_pending_output() and the drained callback instead. */
        size_t output_buffer_max;
        /* Complete calls read ahead while one is in progress; at that many, or at
         * message_size_max bytes read ahead, the server stops reading the connection (the
         * peer's writes then block: back-pressure, not an error). One read (64 KiB) may
         * bring more than that before the server stops. */
        unsigned queued_calls_max;
        /* Connections beyond either limit are accepted and closed at once: the peer sees
         * EOF rather than a hang in the listen backlog. */
        unsigned connections_max;
        unsigned connections_per_uid_max;
        /* A connection with no call in progress (nothing dispatched, or its output not
         * read) is closed after this long; 0: never. */
        uint64_t idle_timeout_usec;
        /* A message begun must be complete within this long, or the connection is closed
         * (a slow or stuck sender holds no buffer forever); 0: no limit. */
        uint64_t message_timeout_usec;
        /* A call larger than message_size_max is read to its end (and dropped) and
         * answered with this error, {"message": oversized_message}, before the connection
         * is closed: the sender sees why, not a broken pipe. NULL: closed without a word.
         * Static strings (the limits are copied by value). */
        const char *oversized_error;
        const char *oversized_message;
} VarlinkLimits;

#define VARLINK_LIMITS_DEFAULT                                                  \
        ((VarlinkLimits) {                                                      \
                .message_size_max = VARLINK_MESSAGE_SIZE_MAX_DEFAULT,           \
                .output_buffer_max = VARLINK_OUTPUT_BUFFER_MAX_DEFAULT,         \
                .queued_calls_max = VARLINK_QUEUED_CALLS_MAX_DEFAULT,           \
                .connections_max = VARLINK_CONNECTIONS_MAX_DEFAULT,             \
                .connections_per_uid_max = VARLINK_CONNECTIONS_PER_UID_MAX_DEFAULT, \
                .idle_timeout_usec = VARLINK_IDLE_TIMEOUT_USEC_DEFAULT,         \
                .message_timeout_usec = VARLINK_MESSAGE_TIMEOUT_USEC_DEFAULT,   \
        })

/* ---- server ---- */

typedef struct VarlinkServer VarlinkServer;
typedef struct VarlinkCall VarlinkCall;

typedef int (*varlink_method_t)(VarlinkCall *call, json_object *parameters, VarlinkCallFlags flags,
                                void *userdata);
typedef void (*varlink_call_handler_t)(VarlinkCall *call, void *userdata);

int varlink_server_new(VarlinkServer **ret);
VarlinkServer *varlink_server_ref(VarlinkServer *s);
/* The last unref closes every connection (disconnect callbacks fire from within it) and
 * the listening sockets (a socket file it made is left: the owner removes it). */
VarlinkServer *varlink_server_unref(VarlinkServer *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(VarlinkServer *, varlink_server_unref);

/* What GetInfo answers (empty strings until set). */
int varlink_server_set_info(VarlinkServer *s, const char *vendor, const char *product, const char *version,
                            const char *url);
/* Applies to connections accepted afterwards. -EINVAL if a limit is 0 (timeouts may be)
 * or output_buffer_max < message_size_max. */
int varlink_server_set_limits(VarlinkServer *s, const VarlinkLimits *limits);

/* Adds an interface by its description (see varlink-idl.h), which GetInterfaceDescription
 * returns as given. -EINVAL if it does not read as one, -EEXIST if its name is taken. */
int varlink_server_add_interface(VarlinkServer *s, const char *idl);
/* Binds "iface.Method" to callback. -ENXIO if iface was not added, -ENOENT if its
 * description declares no such method, -EEXIST if bound already (org.varlink.service's
 * are), -EINVAL if method is not a qualified name. */
int varlink_server_bind_method(VarlinkServer *s, const char *method, varlink_method_t callback,
                               void *userdata);

/* Serves the listening socket fd (taken, also on failure): a socket-activated one, or one
 * of the owner's. */
int varlink_server_listen_fd(VarlinkServer *s, int fd);
/* Makes a listening AF_UNIX socket at address ("unix:/path", "/path", or "@name" for the
 * abstract namespace; ";…" parameters are ignored), replacing a stale socket file, with
 * file mode mode. */
int varlink_server_listen_address(VarlinkServer *s, const char *address, mode_t mode);
/* Serves an already connected socket fd (taken, also on failure), as if accepted; for
 * socketpair()s in tests, and inherited connections. Subject to the connection limits
 * (then 0 is returned and fd closed, as for an accepted one). Needs the event loop. */
int varlink_server_add_connection(VarlinkServer *s, int fd);

/* event NULL: the thread's default loop. Listening sockets added before or after work. */
int varlink_server_attach_event(VarlinkServer *s, sd_event *event, int64_t priority);
unsigned varlink_server_n_connections(VarlinkServer *s);

/* ---- a call, as the method sees it ---- */

VarlinkCall *varlink_call_ref(VarlinkCall *call);
VarlinkCall *varlink_call_unref(VarlinkCall *call);
DEFINE_TRIVIAL_CLEANUP_FUNC(VarlinkCall *, varlink_call_unref);

const char *varlink_call_get_method(VarlinkCall *call);
VarlinkCallFlags varlink_call_get_flags(VarlinkCall *call);
/* NULL once the connection is closed. */
VarlinkServer *varlink_call_get_server(VarlinkCall *call);

/* The final reply; parameters NULL means {} (borrowed, in all replies below). Returns 0
 * when queued (a oneway call's reply is dropped and 0 returned); -EALREADY if the call had
 * its final reply; -ECONNRESET if the peer is gone (the disconnect callback fires, or
 * fired); -EMSGSIZE if it is too large (nothing queued: the call is still open);
 * -ENOBUFS if the peer has not read past output_buffer_max (the connection is being
 * closed); -EINVAL if parameters is not an object. */
int varlink_call_reply(VarlinkCall *call, json_object *parameters);
/* The same, with copies of fds passed along (SCM_RIGHTS); the reply's parameters say
 * which is which by index. */
int varlink_call_reply_with_fds(VarlinkCall *call, json_object *parameters, const int *fds, size_t n_fds);
/* A reply with "continues": only for a call made with "more" (-EPROTO otherwise, nothing
 * sent: a method that streams should answer ExpectedMore when "more" is missing).
 * Otherwise as varlink_call_reply(), and the call stays open. */
int varlink_call_notify(VarlinkCall *call, json_object *parameters);
/* The final reply, as the error error (a qualified name, -EINVAL otherwise). */
int varlink_call_error(VarlinkCall *call, const char *error, json_object *parameters);
/* org.varlink.service.InvalidParameter {"parameter": name} */
int varlink_call_error_invalid_parameter(VarlinkCall *call, const char *name);

/* Called once, from the event loop, if the connection ends (the peer hung up, an error, a
 * limit, the server freed) before the call had its final reply: the owner stops the work
 * it was doing for it and drops its reference. Replies after that return -ECONNRESET. */
void varlink_call_set_disconnect_callback(VarlinkCall *call, varlink_call_handler_t callback, void *userdata);
/* Bytes of replies on this call's connection that the peer has not read yet. */
size_t varlink_call_get_pending_output(VarlinkCall *call);
/* Called, from the event loop, whenever the connection's output has been written out
 * entirely while the call is open. A method that streams stops producing when the pending
 * output passes a mark of its own, and resumes from here. */
void varlink_call_set_drained_callback(VarlinkCall *call, varlink_call_handler_t callback, void *userdata);

/* The peer, as SO_PEERCRED told at connect time. */
int varlink_call_get_peer_ucred(VarlinkCall *call, struct ucred *ret);
/* A string the server keeps with the call's connection for the calls that follow on it
 * (copied; NULL: none), e.g. on whose behalf the peer acts; freed with the connection. */
int varlink_call_set_connection_tag(VarlinkCall *call, const char *tag);
/* The tag, as above, and from now on the connection counts against connections_per_uid_max
 * with its uid's other connections of that tag only, not with the rest of its uid's (which
 * it leaves room for): for a peer the server trusts to act for many parties at once (the
 * HTTP bridge, for its tenants), so that one party's connections cannot use up all of the
 * peer's. -EUSERS (nothing changed) when that group is full already; connections_max
 * still bounds all. Setting the tag again (either way) ends it. */
int varlink_call_set_connection_group(VarlinkCall *call, const char *tag);
/* The connection's tag (valid until it is set again), or NULL. */
const char *varlink_call_get_connection_tag(VarlinkCall *call);
/* A pidfd of the peer (SO_PEERPIDFD, Linux ≥ 6.5), owned by the connection: dup it to
 * keep it. -ENODATA if the kernel gave none. */
int varlink_call_get_peer_pidfd(VarlinkCall *call);

/* ---- client ---- */

typedef struct VarlinkClient VarlinkClient;

/* One reply to an asynchronous call: parameters (borrowed; {} if the reply had none),
 * error NULL or the error's name (then it was the last reply), flags CONTINUES if more
 * follow. If the connection ends first, error is VARLINK_ERROR_DISCONNECTED and
 * parameters NULL. The return value is ignored. */
typedef int (*varlink_reply_t)(VarlinkClient *c, json_object *parameters, const char *error,
                               VarlinkReplyFlags flags, void *userdata);

/* In a reply callback: the descriptors that came with the reply (and any before it not
 * taken), at most max, in order; the caller owns them. */
size_t varlink_client_take_fds(VarlinkClient *c, int *fds, size_t max);

#define VARLINK_CLIENT_TIMEOUT_USEC_DEFAULT (60U * 1000000U)

/* Connects (address as for varlink_server_listen_address()). */
int varlink_client_connect_address(VarlinkClient **ret, const char *address);
/* Takes fd, a connected stream socket, also on failure. */
int varlink_client_connect_fd(VarlinkClient **ret, int fd);
VarlinkClient *varlink_client_ref(VarlinkClient *c);
/* The last unref ends outstanding asynchronous calls (their callbacks get
 * VARLINK_ERROR_DISCONNECTED from within it). */
VarlinkClient *varlink_client_unref(VarlinkClient *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(VarlinkClient *, varlink_client_unref);

/* For synchronous calls (default VARLINK_CLIENT_TIMEOUT_USEC_DEFAULT; 0: none). */
void varlink_client_set_timeout(VarlinkClient *c, uint64_t usec);
/* Replies larger than this close the connection (default VARLINK_MESSAGE_SIZE_MAX_DEFAULT). */
void varlink_client_set_message_size_max(VarlinkClient *c, size_t size);

/* Calls method and waits for its reply, blocking. Returns 0 for a reply, 1 for an error
 * reply (its name in *ret_error, to free), with the reply's parameters in *ret_parameters
 * (a reference; {} if none); either may be NULL. -EBUSY while asynchronous calls are
 * outstanding, -ETIMEDOUT, -ECONNRESET if the server hung up, -EBADMSG if it sent what is
 * not a reply (the connection is then unusable: -ENOTCONN). Output queued by
 * asynchronous calls is sent first, in order. */
int varlink_client_call_sync(VarlinkClient *c, const char *method, json_object *parameters,
                             json_object **ret_parameters, char **ret_error);

int varlink_client_attach_event(VarlinkClient *c, sd_event *event, int64_t priority);
/* Queues a call; callback gets its replies from the event loop (none for ONEWAY, where it
 * may be NULL). -ENOTCONN if the connection ended, -EINVAL for MORE|ONEWAY. */
int varlink_client_call_async(VarlinkClient *c, const char *method, json_object *parameters,
                              VarlinkCallFlags flags, varlink_reply_t callback, void *userdata);
/* Whether the connection is still up. */
bool varlink_client_is_connected(VarlinkClient *c);
/* Stops (or resumes) reading the connection: replies wait in the socket, and a server that
 * paces its stream by what the peer read (Follow, Exec with "more") holds its producer. */
void varlink_client_pause(VarlinkClient *c, bool pause);
