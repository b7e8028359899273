/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "mount-renew.h"

int mount_renew_spawn(const char *agent_path, pid_t agent_pid, uid_t uid, gid_t gid, const MountRenew *mounts,
                      size_t n_mounts, int *ret_pidfd) {
        char target[64], specs[MOUNT_RENEW_MAX][128];
        char *argv[3 + MOUNT_RENEW_MAX + 1];
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t none;
        size_t n = 0;
        pid_t pid;
        int pidfd, r;

        if (!agent_path || agent_pid <= 0 || n_mounts == 0 || n_mounts > MOUNT_RENEW_MAX)
                return -EINVAL;
        snprintf(target, sizeof(target), "%d:%u:%u", (int) agent_pid, (unsigned) uid, (unsigned) gid);
        argv[n++] = (char *) agent_path;
        argv[n++] = (char *) "--renew-mounts";
        argv[n++] = target;
        for (size_t i = 0; i < n_mounts; i++) {
                if (!mounts[i].path || mounts[i].path[0] != '/' ||
                    (mounts[i].mode & ~07777) != 0 ||
                    (size_t) snprintf(specs[i], sizeof(specs[i]), "%s=%" PRIu64 ":%o", mounts[i].path, mounts[i].size,
                                      (unsigned) mounts[i].mode) >= sizeof(specs[i]))
                        return -EINVAL;
                argv[n++] = specs[i];
        }
        argv[n] = NULL;

        /* Nothing of ours goes in but stderr (the journal: what failed); default signal
         * handling and no signal blocked, as for any new program. */
        sigemptyset(&none);
        r = posix_spawn_file_actions_init(&fa);
        if (r != 0)
                return -r;
        r = posix_spawnattr_init(&attr);
        if (r != 0) {
                posix_spawn_file_actions_destroy(&fa);
                return -r;
        }
        if ((r = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0)) == 0 &&
            (r = posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0)) == 0 &&
            (r = posix_spawn_file_actions_addclosefrom_np(&fa, 3)) == 0 &&
            (r = posix_spawnattr_setsigmask(&attr, &none)) == 0 &&
            (r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) == 0) {
                sigset_t all;
                sigfillset(&all);
                r = posix_spawnattr_setsigdefault(&attr, &all);
        }
        if (r == 0)
                r = posix_spawn(&pid, agent_path, &fa, &attr, argv, (char *[]) { NULL });
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        if (r != 0)
                return -r;

        /* Our child, not yet reaped: its pid cannot name another process meanwhile. */
        pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0) {
                r = -errno;
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                return r;
        }
        *ret_pidfd = pidfd;
        return 0;
}

int mount_renew_wait(int pidfd) {
        siginfo_t si = {};

        if (waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED) < 0)
                return -errno;
        if (si.si_code != CLD_EXITED)
                return EINTR; /* killed: not done */
        return si.si_status;
}
