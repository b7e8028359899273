/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Fresh, empty tmpfs mounts in place of a running sandbox's writable ones (a recycled
 * sandbox's /work, /tmp and /dev/shm: recycle.c), made from outside by
 * `sandbox-init --renew-mounts` (src/sandbox-init/renew.c), which enters the sandbox's
 * namespaces as the owner of its user namespace: nothing is done in sandboxd's own
 * namespaces, and no capability sandboxd's unit does not grant is needed. */

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

typedef struct MountRenewal MountRenewal;
typedef void (*mount_renewal_done_t)(int error, void *userdata);

/* Starts agent_path --renew-mounts for the sandbox whose PID 1 is agent_pid (host pid
 * namespace), whose processes run as host uid:gid, with posix_spawn() (sandboxd's memory
 * is not copied; the loop waits for the exec only). done(0) once the new mounts are in
 * place - the helper says so before it exits, since freeing the old file systems takes
 * RCU grace periods - or done(errno of the failed step). The helper's end is reaped by the
 * event loop whenever it comes. 0 or -errno (done is then not called). */
int mount_renewal_start(sd_event *event, const char *agent_path, pid_t agent_pid, uid_t uid, gid_t gid,
                        const MountRenew *mounts, size_t n_mounts, mount_renewal_done_t done, void *userdata,
                        MountRenewal **ret);
/* Done with it (also from within done): done is not called any more; a helper still at
 * work is killed; either way it is reaped in the background. NULL-safe; returns NULL. */
MountRenewal *mount_renewal_free(MountRenewal *r);
