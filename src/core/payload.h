/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A payload is what runs inside a sandbox's unit: one backend per mechanism (bwrap,
 * docker) behind one ops table, as crun's cgroup managers are. The backend starts its
 * processes *held*: they set up the sandbox (namespaces, mounts, a container) while
 * systemd makes the unit, but nothing of the sandbox's own runs until they are in it and
 * released. Inside, sandbox-init speaks the agent protocol on the control socket the
 * backend hands the sandbox.
 *
 * sandbox.c is the backend-neutral state machine: it calls a backend only through its
 * PayloadOps, and a backend calls back only through the sandbox_payload_*() functions
 * below. What a backend keeps of a sandbox is its own (s->payload_state, state_size
 * bytes, zeroed). docs/ARCHITECTURE.md, "Payload backends". */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "macro.h"
#include "spawn-util.h" /* drop_to_uid(), for backends' children */

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;
typedef struct SandboxPersist SandboxPersist;
struct Template;

typedef enum PayloadKind {
        PAYLOAD_BWRAP,
        PAYLOAD_DOCKER,
        _PAYLOAD_KIND_MAX,
        _PAYLOAD_KIND_INVALID = -EINVAL,
} PayloadKind;

const char *payload_kind_to_string(PayloadKind k);
PayloadKind payload_kind_from_string(const char *s);

typedef struct PayloadOps {
        const char *name;               /* as templates and records name it */
        size_t state_size;              /* of s->payload_state */
        uint64_t start_timeout_usec;    /* from start to the agent's "ready" */
        /* unit_started waits for the unit's ControlGroup (s->cgroup); otherwise it runs as
         * soon as the unit's job is done, and the cgroup is learnt alongside. */
        bool unit_started_needs_cgroup;

        /* s->payload_state was just allocated: set what zero does not mean (fds to -EBADF). */
        void (*init)(Sandbox *s);
        /* Starts the payload held and asks for the unit (sandbox_payload_start_scope() or
         * _slice()), now or once something it asked for answers. On failure the sandbox
         * calls abort and done. */
        int (*start)(Sandbox *s, const struct Template *t);
        /* The unit runs (the sandbox is still starting): let the payload go on. Failures
         * go to sandbox_payload_failed(). */
        void (*unit_started)(Sandbox *s);
        /* Kills what is held before anything of the sandbox's own ran, and closes our ends
         * of it. Synchronous; may be called more than once. */
        void (*abort)(Sandbox *s);
        /* The sandbox is going and its unit exists: takes down what stopping the unit would
         * not (a container, through Docker), kills its own processes (so that systemd
         * finds the unit empty), then calls sandbox_payload_stopped(), at once or later. */
        void (*stop)(Sandbox *s);
        /* The sandbox is finished: removes what is left outside it (sockets, requests in
         * flight). */
        void (*done)(Sandbox *s);
        /* What a restarted sandboxd needs: sets st->payload_pid (the process watched in
         * the unit, 0 if none) and adds the backend's own keys to st->payload_data. */
        int (*save)(Sandbox *s, SandboxPersist *st);
        /* The agent said "ready": what only a start needs goes, so that a running
         * sandbox costs sandboxd one descriptor, its control socket (docs/WORKSPACES.md,
         * "Descriptors"). From here on the end of the payload shows as the end of that
         * socket, and the agent's messages come through it ("log"). Optional. */
        void (*running)(Sandbox *s);
        /* Takes up a running sandbox from what save wrote (its st->payload_pid was found
         * alive in its unit). */
        int (*adopt)(Sandbox *s, const SandboxPersist *st);
        /* Recycling (recycle.c), optional (none: the backend's sandboxes are not recycled):
         * the agent has reset the sandbox. Checks that nothing but the backend's own
         * processes is left in the unit, and gives the sandbox fresh writable mounts; then
         * sandbox_payload_renewed(), at once or later. -errno if it could not begin. */
        int (*renew)(Sandbox *s);
        /* sandboxd exits and s runs on: closes our ends, touches no process. */
        void (*detach)(Sandbox *s);
        /* Frees what s->payload_state holds, killing what still runs (as abort). */
        void (*free)(Sandbox *s);

        /* Once, after adoption: removes what of this backend's no sandbox of m's goes with
         * (left by a sandboxd killed while making it). Optional, as init and done are. */
        void (*remove_orphans)(Manager *m);
} PayloadOps;

extern const PayloadOps payload_bwrap_ops;
extern const PayloadOps payload_docker_ops;

const PayloadOps *payload_ops_get(PayloadKind k);

/* The backend-facing API of a sandbox (sandbox.c): all a backend calls back. */

/* Asks systemd for the sandbox's unit: its scope in sandbox.slice, holding pid. */
int sandbox_payload_start_scope(Sandbox *s, pid_t pid);
/* … or a slice of its own, sandbox-<id>.slice, that another manager (dockerd's systemd
 * cgroup driver) puts the payload's scope in. The sandbox's unit is then that slice. */
int sandbox_payload_start_slice(Sandbox *s);
/* The agent's control socket (non-blocking): the sandbox takes fd and serves it. */
int sandbox_payload_connected(Sandbox *s, int fd);
/* The payload cannot come up or go on: the sandbox stops, and reason is what its
 * creator (or, later, a running command) is told. */
void sandbox_payload_failed(Sandbox *s, const char *reason);
/* The backend's process in the unit has ended: the sandbox is over. */
void sandbox_payload_exited(Sandbox *s);
/* What the payload's processes wrote to their stderr: logged under s's unit and id, up
 * to PAYLOAD_LOG_LINES_MAX lines for each user of s. */
void sandbox_payload_log(Sandbox *s, const char *buf, size_t n);
/* What stop began is done: the unit is stopped now. */
void sandbox_payload_stopped(Sandbox *s);
/* What renew began is done: failure NULL, or why the sandbox cannot be used again (it is
 * then destroyed). */
void sandbox_payload_renewed(Sandbox *s, const char *failure);
/* Stopping or gone: what a backend's request in flight does then is clean up. */
bool sandbox_payload_going(Sandbox *s);

/* Helpers for backends: a process of ours in the unit, started by spawn_vfork(SPAWN_PARENT)
 * so that it is a child of the service manager and outlives sandboxd. */
typedef struct PayloadProcess {
        pid_t pid;        /* bwrap's monitor (goes into the scope), the agent once running */
        pid_t child_pid;  /* the sandbox's PID 1, once known; goes into the scope too */
        int pidfd;        /* readable when the payload has ended */
        int release_fd;   /* write one byte to release; close to abort */
        int info_fd;      /* where bwrap says the child's pid (readable, non-blocking) */
        char info[512];
        size_t info_size;
        sd_event_source *exit_source; /* payload_process_watch() */
        int log_fd;       /* its processes' stderr, read end (payload_process_forward_log) */
        sd_event_source *log_source;
        Sandbox *log_sandbox;         /* whose unit and id its lines are logged under */
} PayloadProcess;

#define PAYLOAD_PROCESS_NULL                                                    \
        ((PayloadProcess) { .pidfd = -EBADF, .release_fd = -EBADF, .info_fd = -EBADF, .log_fd = -EBADF })

/* Lines of a payload's own stderr logged in its life; past it, the rest is read and
 * dropped (its agent and bwrap write a few at most; the budget caps what one sandbox
 * can put into sandboxd's share of the journal). */
#define PAYLOAD_LOG_LINES_MAX 256


/* A process that only keeps a unit alive (sandbox-init --hold), as the unprivileged
 * holder_uid; stdio /dev/null, nothing of the daemon's. */
int payload_spawn_holder(const char *agent_path, uid_t holder_uid, PayloadProcess *ret);
/* Calls sandbox_payload_exited(s) when p ends. */
int payload_process_watch(PayloadProcess *p, sd_event *event, Sandbox *s);
int payload_release(PayloadProcess *p);
/* SIGKILLs p if it runs (held or not), and its child_pid if known (bwrap's child, in
 * unit or still the child of p); its descriptors stay. Without its pidfd (closed once
 * running), p->pid is opened again and killed only if it is still in unit. */
void payload_process_kill(PayloadProcess *p, const char *unit);
/* SIGKILLs a payload that is still held or running and closes its descriptors. */
void payload_process_abort(PayloadProcess *p, const char *unit);
/* The payload runs: what came through its stderr pipe is logged, and the pipe and the
 * pidfd are closed (PayloadOps.running). */
void payload_process_running(PayloadProcess *p);
/* pid's start time (/proc/PID/stat's starttime, clock ticks after boot): with the pid, it
 * names one process, a zombie included, and none that gets its pid after it. */
int payload_pid_start_time(pid_t pid, uint64_t *ret);
/* Whether pid is a process of unit (a line of /proc/PID/cgroup ends in "/UNIT"). */
bool payload_pid_in_unit(pid_t pid, const char *unit);
/* Closes our ends of p (its watch first), leaving the process be. */
void payload_process_done(PayloadProcess *p);
/* Takes fd, the read end of the pipe that is the payload's stderr (its processes hold
 * the write end, non-blocking: nothing of theirs waits for us), and logs what comes
 * through it under s's unit and id (log_payload_output()) until all writers are gone. */
int payload_process_forward_log(PayloadProcess *p, int fd, sd_event *event, Sandbox *s);
/* A pipe for a payload's stderr: ret[0] ours (for payload_process_forward_log()),
 * ret[1] its; both close-on-exec and non-blocking. */
int payload_log_pipe(int ret[2]);
