/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Who is calling, as a front end knows it: the only thing a front end tells the core's
 * authorization (access.h, polkit.h) about its caller. The D-Bus front end fills in the
 * sender's uid and unique name; a socket front end (varlink) its peer's credentials. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

typedef enum SandboxCallerKind {
        SANDBOX_CALLER_BUS_NAME,     /* a peer on the system bus: polkit's "system-bus-name" */
        SANDBOX_CALLER_UNIX_PROCESS, /* a socket peer: polkit's "unix-process" */
} SandboxCallerKind;

typedef struct SandboxCaller {
        SandboxCallerKind kind;
        uid_t uid;
        const char *bus_name;  /* BUS_NAME: the unique name (borrowed) */
        pid_t pid;             /* UNIX_PROCESS */
        uint64_t start_time;   /* UNIX_PROCESS: /proc/PID/stat's starttime, so that polkit does
                                * not take a process that reused the pid for the caller */
        const char *tenant;    /* the tenant the caller acts for (borrowed); NULL: none. It sees
                                * and touches only that tenant's sandboxes (access.h) */
        bool interactive;      /* polkit may ask the user to authenticate */
        bool granted;          /* the action the call needed was granted, or none was needed */
} SandboxCaller;

/* The start time of pid in clock ticks since boot (field 22 of /proc/PID/stat). */
int process_get_start_time(pid_t pid, uint64_t *ret);
/* A socket peer with credentials ucred (SO_PEERCRED, varlink_call_get_peer_ucred()) as a
 * SANDBOX_CALLER_UNIX_PROCESS, its start time read now: the peer's process must still be
 * there (it is while its call waits for the answer). */
int sandbox_caller_from_ucred(const struct ucred *ucred, SandboxCaller *ret);
/* The same for the peer of a connected AF_UNIX socket. */
int sandbox_caller_from_socket(int fd, SandboxCaller *ret);
