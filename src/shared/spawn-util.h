/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Running a function in a new process without copying ours, as posix_spawn() does:
 * clone(CLONE_VM | CLONE_VFORK) on a small stack of the caller's. Nothing of our memory is
 * copied (a fork of a daemon copies its page tables and then pays a copy-on-write fault
 * for every page either side writes until the child execs); the calling thread waits
 * until the child has exec'd or exited, other threads run on.
 *
 * fn(userdata) runs in the child, sharing our memory: it may call async-signal-safe
 * functions and raw system calls only, must not write our memory (but for what it was
 * given to write), and should end in execve(). Signal handlers are reset to SIG_DFL
 * (ignored signals stay ignored) and the signal mask is emptied before it runs. If fn
 * returns, the child exits, and its return value (0 or a negative errno) is what
 * spawn_vfork() returns: a failed exec (fn returns -errno) is reported at once.
 *
 * SPAWN_PARENT makes the child a child of our parent (CLONE_PARENT: for a daemon, of the
 * service manager, so that it outlives us; the service manager reaps it). Without it, the
 * child is ours to reap; when fn returned, spawn_vfork() has reaped it already.
 *
 * Returns the child's pid in *ret_pid and a pidfd of it (O_CLOEXEC) in *ret_pidfd (either
 * may be NULL; without ret_pidfd no pidfd is made). On failure (clone, or fn returning a
 * negative errno) nothing is returned and the child is gone. */

typedef enum SpawnFlags {
        SPAWN_PARENT = 1 << 0,
} SpawnFlags;

int spawn_vfork(SpawnFlags flags, int (*fn)(void *userdata), void *userdata, pid_t *ret_pid, int *ret_pidfd);

/* For such children: setgroups/setresgid/setresuid as raw system calls. glibc's wrappers
 * would run its setxid machinery, which signals every thread it believes the process has:
 * those of the parent, in a child that shares the parent's memory. Credentials are per
 * task in the kernel. */
int drop_to_uid(uid_t uid, gid_t gid);
