/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A sandbox: one transient scope running one payload, serving execs through its agent. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "exec.h"
#include "log.h"
#include "options.h"
#include "payload.h"
#include "sandbox-errors.h"

typedef struct Manager Manager;

#define SANDBOX_ID_LEN 16

typedef enum SandboxState {
        SANDBOX_STARTING,
        SANDBOX_RUNNING,
        SANDBOX_PAUSED,
        SANDBOX_STOPPING,
        SANDBOX_DEAD,
        /* Files and no processes: a sandbox on disk whose processes ended with sandboxd's
         * host (a reboot) or were stopped (Hibernate). Wake starts it again, same id,
         * name and files; Destroy removes its files. */
        SANDBOX_STOPPED,
        _SANDBOX_STATE_MAX,
        _SANDBOX_STATE_INVALID = -EINVAL,
} SandboxState;

const char *sandbox_state_to_string(SandboxState s);
SandboxState sandbox_state_from_string(const char *s);

/* Reply hook of CreateSandbox and Destroy: error is NULL on success, and then s is the
 * sandbox (for a create, running); on failure error is set and s may be NULL. s is valid
 * during the call only. */
typedef void (*sandbox_callback_t)(Sandbox *s, const SandboxError *error, void *userdata);

bool sandbox_id_is_valid(const char *id);
/* Fleet nodes (sandboxd.conf [Fleet] Node=, docs/SCALE-OUT.md): a node numbered 1…255
 * ends each id it makes with its number as two hex digits, so that a front (HAProxy)
 * routes a call by its id alone. 0: no node (every digit random, as before). */
#define SANDBOX_NODE_MAX 255U
/* An id from 8 random bytes: 16 hex digits, the last two the node's when node is not 0. */
void sandbox_id_format(const uint8_t random[static SANDBOX_ID_LEN / 2], unsigned node,
                       char ret[static SANDBOX_ID_LEN + 1]);
/* The node an id names (its last two hex digits), or -EINVAL for an invalid id. An id made
 * without a node names whatever its random last digits say: only the front's table of
 * such ids (ids.map) tells them apart. */
int sandbox_id_node(const char *id);
/* The name of a sandbox's unit: "sandbox-<id>.<type>" (type "scope" or "slice"). */
char *sandbox_unit_name(const char *id, const char *type);

/* "sandbox-xx.slice": the sub-slice of sandbox.slice a sandbox's scope goes in. */
#define SANDBOX_SUBSLICE_NAME_MAX sizeof("sandbox-xx.slice")
void sandbox_subslice_name(const char *id, char ret[static SANDBOX_SUBSLICE_NAME_MAX]);

Manager *sandbox_get_manager(const Sandbox *s);
const char *sandbox_get_id(const Sandbox *s);
/* log_internal() with the sandbox's SANDBOX_ID= (log.h). */
#define log_sandbox(s, level, error, ...) log_internal(level, error, sandbox_get_id(s), __VA_ARGS__)
const char *sandbox_get_template(const Sandbox *s);
const char *sandbox_get_unit(const Sandbox *s);
uid_t sandbox_get_owner(const Sandbox *s);
SandboxState sandbox_get_state(const Sandbox *s);
uint64_t sandbox_get_created_at(const Sandbox *s); /* µs, CLOCK_REALTIME */
const SandboxConfig *sandbox_get_config(const Sandbox *s);
const char *sandbox_get_name(const Sandbox *s);   /* "": none */
const char *sandbox_get_tenant(const Sandbox *s); /* "": none */
/* Where its files are: "disk" (its workspace, workspace.h) or "tmpfs" (in memory). */
const char *sandbox_get_storage(const Sandbox *s);
/* How Fork gives a new sandbox its files: "snapshot" (of its workspace: nothing copied) or
 * "copy" (an archive written by its agent and unpacked by the fork's). */
const char *sandbox_get_fork_method(const Sandbox *s);
/* Whether the warm pool handed it out (a warm start) rather than it being started for
 * its owner's CreateSandbox (a cold one). */
bool sandbox_get_from_pool(const Sandbox *s);

/* Runs an exec. Takes ownership of c's contents. User errors (not running, ephemeral
 * already used) come back as -errno with error set and the callback not called. */
int sandbox_exec(Sandbox *s, ExecConfig *c, exec_callback_t cb, void *userdata, SandboxError *error);
/* Freezes every process of the sandbox (systemd's FreezeUnit; where the unit cannot be
 * frozen, e.g. on a cgroup-v1 host, SIGSTOP through KillUnit) and keeps its memory. Exec
 * timeouts and the idle timeout stand still while paused; the lifetime does not. */
int sandbox_pause(Sandbox *s, sandbox_callback_t cb, void *userdata, SandboxError *error);
int sandbox_resume(Sandbox *s, sandbox_callback_t cb, void *userdata, SandboxError *error);
/* Destroy lifetime_sec from now (0: never) and after idle_sec without a running exec
 * (0: never). */
int sandbox_set_timeout(Sandbox *s, uint64_t lifetime_sec, uint64_t idle_sec, SandboxError *error);
/* When the lifetime ends, µs CLOCK_REALTIME; 0 if never. */
uint64_t sandbox_get_deadline(const Sandbox *s);
/* "freeze", "sigstop" or NULL while not paused. */
const char *sandbox_get_pause_method(const Sandbox *s);

/* Stops the unit; cb runs when it is gone (then s is freed). Several destroys of one
 * sandbox all get their callback. */
int sandbox_destroy(Sandbox *s, sandbox_callback_t cb, void *userdata);
/* Its user is done with it (recycle.c). If its template recycles it (and it runs, and no
 * more of its kind are kept than the template allows), it is reset and kept for the same
 * owner, tenant and limits; otherwise, or if the reset fails, destroyed. cb once it is
 * kept (state running) or gone (state dead). */
int sandbox_release(Sandbox *s, sandbox_callback_t cb, void *userdata);
/* How many times it was reset and handed out again. */
unsigned sandbox_get_recycles(const Sandbox *s);
/* Where its current user got it from: "recycled" (reset after an earlier use of the same
 * owner's), "pool" (the warm pool) or "new" (started for the caller). AcquireSandbox's
 * answer. */
const char *sandbox_get_source(const Sandbox *s);
