/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Fresh, empty tmpfs mounts in place of a running sandbox's writable ones (a recycled
 * sandbox's /work, /tmp and /dev/shm: recycle.c), made from outside by a short-lived
 * child of sandboxd. The child drops to the sandbox's host uid, and so needs no
 * capability sandboxd's unit does not grant: as the owner of the sandbox's user
 * namespace it has every capability in it, enough to enter the sandbox's mount namespace
 * (through the namespace's own user namespace), unmount and mount there. Nothing is done
 * in sandboxd's own namespaces. */

#include <stdint.h>
#include <sys/types.h>

#define MOUNT_RENEW_MAX 4

typedef struct MountRenew {
        const char *path;    /* absolute, inside the sandbox; a tmpfs now */
        uint64_t size;       /* bytes; the new tmpfs's size= */
} MountRenew;

/* Starts the child for the sandbox whose PID 1 is agent_pid (host pid namespace), whose
 * processes run as host uid:gid. Each new tmpfs gets the old one's mode and owner and is
 * mounted nosuid,nodev (as bwrap mounts them); the old one is detached, and its memory
 * freed as soon as nothing holds it. *ret_pidfd becomes readable when the child ends;
 * then mount_renew_wait(). 0 or -errno. */
int mount_renew_spawn(pid_t agent_pid, uid_t uid, gid_t gid, const MountRenew *mounts, size_t n_mounts,
                      int *ret_pidfd);
/* Reaps the child: 0 if it did all, else the (positive) errno of the step that failed,
 * or -errno if it could not be reaped. Closes nothing. */
int mount_renew_wait(int pidfd);
