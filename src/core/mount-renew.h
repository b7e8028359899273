/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Fresh, empty tmpfs mounts in place of a running sandbox's writable ones (a recycled
 * sandbox's /work, /tmp and /dev/shm: recycle.c), made from outside by
 * `sandbox-init --renew-mounts` (src/sandbox-init/renew.c), which enters the sandbox's
 * namespaces as the owner of its user namespace: nothing is done in sandboxd's own
 * namespaces, and no capability sandboxd's unit does not grant is needed. */

#include <stdint.h>
#include <sys/types.h>

#define MOUNT_RENEW_MAX 4

typedef struct MountRenew {
        const char *path;    /* absolute, inside the sandbox; a tmpfs now */
        uint64_t size;       /* bytes; the new tmpfs's size= */
        mode_t mode;         /* the new tmpfs's mode= (what the payload made it with, not
                              * what the last user chmod()ed the old one to) */
} MountRenew;

/* Starts agent_path --renew-mounts for the sandbox whose PID 1 is agent_pid (host pid
 * namespace), whose processes run as host uid:gid. posix_spawn(): sandboxd's memory is
 * not copied, and the loop waits only for the exec. *ret_pidfd becomes readable when it
 * ends; then mount_renew_wait(). 0 or -errno. */
int mount_renew_spawn(const char *agent_path, pid_t agent_pid, uid_t uid, gid_t gid, const MountRenew *mounts,
                      size_t n_mounts, int *ret_pidfd);
/* Reaps it: 0 if it did all, else the (positive) errno of the step that failed, or -errno
 * if it could not be reaped. Closes nothing. */
int mount_renew_wait(int pidfd);
