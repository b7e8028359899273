/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Fresh, empty tmpfs mounts in place of a running sandbox's writable ones (a recycled
 * sandbox's /work, /tmp and /dev/shm: recycle.c), made from outside by a child of
 * `sandbox-init --renew-server` (src/sandbox-init/renew.c), which enters the sandbox's
 * namespaces as the owner of its user namespace: nothing is done in sandboxd's own
 * namespaces, and no capability sandboxd's unit does not grant is needed. The server is
 * started once (at the first renewal, and again at the next one after it died) and forks
 * a child per renewal: no exec and no program start per reset. */

#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#define MOUNT_RENEW_MAX 4

typedef struct MountRenew {
        const char *path;    /* absolute, inside the sandbox; a tmpfs now */
        uint64_t size;       /* bytes; the new tmpfs's size= */
        mode_t mode;         /* the new tmpfs's mode= (what the payload made it with, not
                              * what the last user chmod()ed the old one to) */
} MountRenew;

typedef struct RenewServer RenewServer;
typedef struct MountRenewal MountRenewal;
typedef void (*mount_renewal_done_t)(int error, void *userdata);

/* The server of agent_path, not started yet. */
int renew_server_new(sd_event *event, const char *agent_path, RenewServer **ret);
/* Ends the server (its renewals in progress are cancelled: their done is not called);
 * NULL-safe; returns NULL. */
RenewServer *renew_server_free(RenewServer *server);
/* The server's pid, 0 if none runs. */
pid_t renew_server_pid(RenewServer *server);

/* Asks the server (started now if it does not run) to renew the mounts of the sandbox whose
 * PID 1 is agent_pid (host pid namespace), whose processes run as host uid:gid. done(0) once
 * the new mounts are in place - the server's child says so before it exits, since freeing
 * the old file systems takes RCU grace periods - or done(errno of the failed step; EPIPE if
 * the server went away meanwhile). Never blocks. 0 or -errno (done is then not called). */
int mount_renewal_start(RenewServer *server, pid_t agent_pid, uid_t uid, gid_t gid, const MountRenew *mounts,
                        size_t n_mounts, mount_renewal_done_t done, void *userdata, MountRenewal **ret);
/* Done with it (also from within done): done is not called any more; a child still at
 * work is killed. NULL-safe; returns NULL. */
MountRenewal *mount_renewal_free(MountRenewal *r);
