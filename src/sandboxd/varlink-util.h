/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What every varlink face of the daemon shares: the core's errors as varlink errors, the
 * parameters of a call into C values, bytes as base64, and authorize-then. The varlink
 * counterpart of bus-util.h. */

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "access.h"
#include "base64-util.h"
#include "caller.h"
#include "options.h"
#include "sandbox-errors.h"

#include "varlink.h"

#define SANDBOX_VARLINK_INTERFACE "io.sandboxd.Sandbox"
/* Where D-Bus gives an errno's own name (SANDBOX_ERR_ERRNO, and faults). */
#define SANDBOX_VARLINK_ERROR_SYSTEM SANDBOX_VARLINK_INTERFACE ".SystemError"

/* Replies the error e: io.sandboxd.Sandbox.<Name> {message}, or for SANDBOX_ERR_ERRNO
 * SystemError {errno, errnoName, message}. Returns what varlink_call_error() returns. */
int varlink_reply_sandbox_error(VarlinkCall *call, const SandboxError *e);
/* Replies e if it is set, else the fault r (a negative errno) as SystemError. */
int varlink_reply_error(VarlinkCall *call, const SandboxError *e, int r);

/* Replies parameters; a reply too large for a message is answered SystemError (EMSGSIZE)
 * instead, so that the caller is never left waiting. */
int varlink_reply_or_fail(VarlinkCall *call, json_object *parameters);

/* The kinds of a parameter, each as JSON has it. */
typedef enum VarlinkParamType {
        VARLINK_PARAM_STRING,  /* char *, without NUL bytes (duplicated) */
        VARLINK_PARAM_BOOL,    /* bool */
        VARLINK_PARAM_UINT64,  /* uint64_t, an integer 0…2^64-1 */
        VARLINK_PARAM_UINT32,  /* uint32_t */
        VARLINK_PARAM_INT32,   /* int32_t */
        VARLINK_PARAM_STRV,    /* char **, an array of strings without NUL bytes */
        VARLINK_PARAM_OBJECT,  /* json_object *, an object (borrowed) */
        VARLINK_PARAM_BYTES,   /* VarlinkBytes, base64 */
} VarlinkParamType;

typedef struct VarlinkBytes {
        void *data;
        size_t size;
} VarlinkBytes;

typedef struct VarlinkParam {
        const char *name;
        VarlinkParamType type;
        size_t offset;         /* of the C value in the target struct */
        bool required;         /* else absent and null leave the value as it is */
} VarlinkParam;

/* Reads parameters into target by table (ended by an entry without name): a missing
 * required member, one of the wrong type or range, or one the table does not name is
 * refused with -EINVAL and *ret_bad naming it (for InvalidParameter). On failure what was
 * read stays in target: free it with varlink_params_done(). */
int varlink_params_read(json_object *parameters, const VarlinkParam table[], void *target, const char **ret_bad);
void varlink_params_done(const VarlinkParam table[], void *target);
/* Reads parameters by table, or answers InvalidParameter and returns -EINVAL (any other
 * error is not answered yet). */
int varlink_params_read_or_reply(VarlinkCall *call, json_object *parameters, const VarlinkParam table[],
                                 void *target);
/* A method's return after varlink_params_read_or_reply() failed with r: the call is
 * answered (InvalidParameter, or the fault r as SystemError). */
int varlink_params_failed(VarlinkCall *call, int r);

/* Reads parameters by table into target (as varlink_params_read_or_reply()), then the
 * object *options (one of them; NULL: absent) into options_target as options of set
 * (options_from_json()). Every error is replied: returns 0, or < 0 when the call is
 * answered already. */
int varlink_read_call(VarlinkCall *call, json_object *parameters, const VarlinkParam table[], void *target,
                      json_object **options, OptionSet set, void *options_target);

/* Methods of an interface, bound by their names in it. */
typedef struct VarlinkMethodEntry {
        const char *name;
        varlink_method_t method;
} VarlinkMethodEntry;
int varlink_bind_methods(VarlinkServer *s, const char *interface, const VarlinkMethodEntry *methods, size_t n,
                         void *userdata);

/* A call kept for a later reply, let go of: its disconnect callback (which points to the
 * keeper) is cleared and the reference dropped. Returns NULL. */
VarlinkCall *varlink_call_release(VarlinkCall *call);


/* Whose the call is about (access.h's sandbox_access_t); the operation is the method's,
 * from the core's table, and the core decides the polkit action. */
typedef sandbox_access_t varlink_access_t;
/* Returns < 0 to have that error (error, or the errno) sent as the reply; otherwise it
 * replied or will (holding a reference to call). caller->granted says whether the action
 * was granted. */
typedef int (*varlink_authorized_t)(VarlinkCall *call, const SandboxCaller *caller, void *userdata,
                                    SandboxError *error);

/* The caller is the socket's peer (its credentials, and its process's start time for
 * polkit's unix-process subject); access (NULL: nothing to authorize) says what it asks
 * for, the core authorizes it on bus (polkit; never interactively: varlink has no way to
 * allow it), and fn(call, caller, userdata, error) runs once it is; or the error is
 * replied (AccessDenied, the refusal). With SANDBOX_AUTHORIZE_OPTIONAL, polkit's no is no
 * refusal. A peer that disconnects while polkit is asked ends the question, and fn does
 * not run. free_userdata(userdata) runs in every case, afterwards. Returns 0 (the call is
 * taken care of) or a negative errno if nothing could be started. */
int varlink_authorize_then(sd_bus *bus, VarlinkCall *call, varlink_access_t access, SandboxAuthorizeFlags flags,
                           varlink_authorized_t fn, void *userdata, void (*free_userdata)(void *userdata));
/* A method's start: its parameters read by table into args (the method's, made for this
 * call; NULL: out of memory), then varlink_authorize_then(..., fn, args, free_args).
 * free_args(args) runs in every case (NULL: args is not the call's). Every error is
 * replied: returns 0, what a method returns. */
int varlink_read_authorize_then(sd_bus *bus, VarlinkCall *call, json_object *parameters, const VarlinkParam table[],
                                void *args, void (*free_args)(void *args), varlink_access_t access,
                                SandboxAuthorizeFlags flags, varlink_authorized_t fn);

/* ---- streamed replies from pipes ---- */

typedef struct VarlinkRelay VarlinkRelay;
typedef void (*varlink_relay_eof_t)(VarlinkRelay *r, void *userdata);

/* Bytes per "continues" reply (before base64). */
#define VARLINK_RELAY_CHUNK_MAX (64U * 1024U)
/* Replies waiting for the peer past which a relay stops reading its pipes: the writers
 * then block, and nothing grows in the daemon. */
#define VARLINK_RELAY_PENDING_MAX (512U * 1024U)

/* Relays what is written into pipes (fds: their read ends, non-blocking, taken) to call,
 * as "continues" replies {names[i]: base64}, each pipe's in order, paced by the peer as
 * above (it takes the call's drained callback). eof (optional) runs once every pipe has
 * reached its end. */
int varlink_relay_new(sd_event *event, VarlinkCall *call, int *fds, const char * const *names, size_t n,
                      varlink_relay_eof_t eof, void *userdata, VarlinkRelay **ret);
/* Relays what is in the pipes now (a writer that has ended left at most their capacity),
 * however far behind the peer is. */
void varlink_relay_flush(VarlinkRelay *r);
/* The peer is gone: what is written is read and dropped, so that the writers go on as if
 * read. */
void varlink_relay_discard(VarlinkRelay *r);
/* Bytes relayed (or dropped) from pipe i. */
uint64_t varlink_relay_get_bytes(const VarlinkRelay *r, size_t i);
bool varlink_relay_at_eof(const VarlinkRelay *r);
VarlinkRelay *varlink_relay_free(VarlinkRelay *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(VarlinkRelay *, varlink_relay_free);
