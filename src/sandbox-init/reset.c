/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * "reset" (agent-protocol.h): between one user of a recycled sandbox and the next, nothing
 * of the first may be left that the agent can end. Every other process of the sandbox's
 * PID namespace is killed (as its PID 1, kill(-1) reaches them all, whatever they did to
 * their signal dispositions, sessions or parents) and reaped; the System V IPC objects of
 * its IPC namespace are removed. /work, /tmp and /dev/shm are sandboxd's to replace, from
 * outside: we hold none of them (cwd "/").
 */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox-init.h"
#include "time-util.h"

/* IPC_STAT variants that need no read permission (Linux 4.17); the plain ones otherwise.
 * A segment the sandbox made unreadable (mode 0) is still its own to remove. */
#ifndef SHM_STAT_ANY
#define SHM_STAT_ANY 15
#endif
#ifndef SEM_STAT_ANY
#define SEM_STAT_ANY 20
#endif
#ifndef MSG_STAT_ANY
#define MSG_STAT_ANY 13
#endif

static int ipc_remove_shm(void) {
        struct shm_info info;
        int max, n = 0;

        max = shmctl(0, SHM_INFO, (struct shmid_ds *) &info);
        if (max < 0)
                return -errno;
        for (int i = 0; i <= max; i++) {
                struct shmid_ds ds;
                int id = shmctl(i, SHM_STAT_ANY, &ds);

                if (id < 0 && errno == EINVAL)
                        id = shmctl(i, SHM_STAT, &ds);
                if (id < 0)
                        continue; /* an unused slot */
                if (shmctl(id, IPC_RMID, NULL) < 0)
                        return -errno;
                n++;
        }
        return n;
}

static int ipc_remove_sem(void) {
        struct seminfo info;
        int max, n = 0;

        max = semctl(0, 0, SEM_INFO, &info);
        if (max < 0)
                return -errno;
        for (int i = 0; i <= max; i++) {
                struct semid_ds ds;
                int id = semctl(i, 0, SEM_STAT_ANY, &ds);

                if (id < 0 && errno == EINVAL)
                        id = semctl(i, 0, SEM_STAT, &ds);
                if (id < 0)
                        continue;
                if (semctl(id, 0, IPC_RMID) < 0)
                        return -errno;
                n++;
        }
        return n;
}

static int ipc_remove_msg(void) {
        struct msginfo info;
        int max, n = 0;

        max = msgctl(0, MSG_INFO, (struct msqid_ds *) &info);
        if (max < 0)
                return -errno;
        for (int i = 0; i <= max; i++) {
                struct msqid_ds ds;
                int id = msgctl(i, MSG_STAT_ANY, &ds);

                if (id < 0 && errno == EINVAL)
                        id = msgctl(i, MSG_STAT, &ds);
                if (id < 0)
                        continue;
                if (msgctl(id, IPC_RMID, NULL) < 0)
                        return -errno;
                n++;
        }
        return n;
}

int agent_reset_begin(void) {
        siginfo_t si;

        /* kill(-1) from anything but the namespace's PID 1 would reach beyond the sandbox:
         * not in a container started without its own PID namespace, say. */
        if (getpid() != 1)
                return -EPERM;
        /* Every process of the namespace is a descendant of its PID 1, and orphans become
         * our children: none at all (ECHILD), and there is nothing to kill. kill(-1) walks
         * every process of the host, so it is worth not calling for nothing. */
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD) {
                if (chdir("/") < 0)
                        return -errno;
                return 0;
        }
        if (kill(-1, SIGKILL) < 0 && errno != ESRCH)
                return -errno;
        /* The old /work goes when sandboxd unmounts it: nothing of ours keeps it. */
        if (chdir("/") < 0)
                return -errno;
        return 0;
}

int agent_reset_reap(void) {
        for (;;) {
                pid_t pid = waitpid(-1, NULL, WNOHANG);

                if (pid < 0)
                        return errno == ECHILD ? 1 : -errno;
                if (pid == 0)
                        break;
        }
        /* One forked between our kill and its parent's death got none: again. */
        if (kill(-1, SIGKILL) < 0 && errno != ESRCH)
                return -errno;
        return 0;
}

int agent_reset_ipc(void) {
        int r;

        if ((r = ipc_remove_shm()) < 0 || (r = ipc_remove_sem()) < 0 || (r = ipc_remove_msg()) < 0)
                return r;
        return 0;
}

#define IOPRIO_WHO_PROCESS 1

static int changed(const char *what) {
        fprintf(stderr, "sandbox-init: reset: %s was changed, and cannot be put back.\n", what);
        return -EPERM;
}

static struct {
        struct rlimit rlimits[RLIM_NLIMITS];
        int nice;
        int policy; /* with SCHED_RESET_ON_FORK, as sched_getscheduler() says */
        struct sched_param param;
        cpu_set_t affinity;
        int ioprio;
} saved;

static int get_nice(int *ret) {
        int n;

        errno = 0;
        n = getpriority(PRIO_PROCESS, 0);
        if (n == -1 && errno != 0)
                return -errno;
        *ret = n;
        return 0;
}

/* The sysctls of the sandbox's own IPC and PID namespaces, which its uid may write on
 * recent kernels (6.x: they belong to the root of the namespace's user namespace, and
 * that is unmapped, so the files fall back to the namespace's creator): they outlive
 * every process. ns_last_pid moves by itself; sandboxd-set ones are none. */
static const char * const sysctl_paths[] = {
        "/proc/sys/kernel/shmmax", "/proc/sys/kernel/shmall", "/proc/sys/kernel/shmmni",
        "/proc/sys/kernel/shm_rmid_forced", "/proc/sys/kernel/msgmax", "/proc/sys/kernel/msgmnb",
        "/proc/sys/kernel/msgmni", "/proc/sys/kernel/auto_msgmni", "/proc/sys/kernel/sem",
        "/proc/sys/kernel/pid_max", "/proc/sys/fs/mqueue/msg_default", "/proc/sys/fs/mqueue/msg_max",
        "/proc/sys/fs/mqueue/msgsize_default", "/proc/sys/fs/mqueue/msgsize_max", "/proc/sys/fs/mqueue/queues_max",
};
#define SYSCTL_NOT_KEPT "/proc/sys/kernel/ns_last_pid"
#define SYSCTL_VALUE_MAX 128

static struct {
        char value[SYSCTL_VALUE_MAX];
        ssize_t size; /* -errno: not there, or not readable */
        int fd;       /* kept open for reading (O_CLOEXEC: no exec gets it), or -1 */
} sysctls[ELEMENTSOF(sysctl_paths)];

/* Read from the start at every reset: no path walk in /proc, no open and close each time
 * (the files are the sandbox's own to open anyway). */
static ssize_t read_sysctl(int fd, char *buf, size_t size) {
        ssize_t n;

        n = pread(fd, buf, size, 0);
        if (n < 0)
                return -errno;
        return (size_t) n == size ? -EFBIG : n;
}

static bool sysctl_known(const char *path) {
        if (strcmp(path, SYSCTL_NOT_KEPT) == 0)
                return true;
        for (size_t i = 0; i < ELEMENTSOF(sysctl_paths); i++)
                if (strcmp(path, sysctl_paths[i]) == 0)
                        return sysctls[i].size >= 0;
        return false;
}

/* Any other sysctl we (and so the sandbox) may write would be one we cannot put back. */
static int check_writable_sysctl(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        if (type != FTW_F || access(path, W_OK) < 0 || sysctl_known(path))
                return 0;
        fprintf(stderr, "sandbox-init: reset: %s is writable in the sandbox, and not kept.\n", path);
        return 1;
}

/* Whether another sysctl is writable here: 1, 0, or -1 until first looked at. Which files
 * our uid may write does not change while the sandbox lives (the namespaces' owners, the
 * files' modes and our credentials are fixed), so the walk of /proc/sys (some 800 files,
 * milliseconds) is made at the first reset only, not at every one, nor at every start. */
static int unknown_writable = -1;

static int sysctls_restore(void) {
        int r;

        for (size_t i = 0; i < ELEMENTSOF(sysctl_paths); i++) {
                char now[SYSCTL_VALUE_MAX];
                ssize_t n;
                int fd;

                if (sysctls[i].size < 0)
                        continue;
                n = read_sysctl(sysctls[i].fd, now, sizeof(now));
                if (n == sysctls[i].size && memcmp(now, sysctls[i].value, (size_t) n) == 0)
                        continue;
                fd = open(sysctl_paths[i], O_WRONLY | O_CLOEXEC);
                if (fd < 0 || write(fd, sysctls[i].value, (size_t) sysctls[i].size) != sysctls[i].size) {
                        if (fd >= 0)
                                close(fd);
                        return changed(sysctl_paths[i]);
                }
                close(fd);
                n = read_sysctl(sysctls[i].fd, now, sizeof(now));
                if (n != sysctls[i].size || memcmp(now, sysctls[i].value, (size_t) n) != 0)
                        return changed(sysctl_paths[i]);
        }
        if (unknown_writable < 0) {
                r = nftw("/proc/sys", check_writable_sysctl, 16, FTW_PHYS);
                if (r < 0)
                        return -errno;
                unknown_writable = r > 0;
        }
        return unknown_writable ? -EPERM : 0;
}

/* Why they could not be read as we started (then no reset can succeed), or 0. */
static int saved_error;

static int traits_read(void) {
        for (size_t i = 0; i < ELEMENTSOF(sysctl_paths); i++) {
                sysctls[i].fd = open(sysctl_paths[i], O_RDONLY | O_CLOEXEC);
                sysctls[i].size = sysctls[i].fd < 0 ? -errno :
                        read_sysctl(sysctls[i].fd, sysctls[i].value, sizeof(sysctls[i].value));
                if (sysctls[i].size < 0 && sysctls[i].fd >= 0) {
                        close(sysctls[i].fd);
                        sysctls[i].fd = -1;
                }
        }
        for (int i = 0; i < RLIM_NLIMITS; i++)
                if (getrlimit(i, &saved.rlimits[i]) < 0)
                        return -errno;
        if (get_nice(&saved.nice) < 0 || (saved.policy = sched_getscheduler(0)) < 0 ||
            sched_getparam(0, &saved.param) < 0 || sched_getaffinity(0, sizeof(saved.affinity), &saved.affinity) < 0 ||
            (saved.ioprio = (int) syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0)) < 0)
                return -errno;
        return 0;
}

int agent_traits_save(void) {
        saved_error = traits_read();
        return saved_error;
}

int agent_traits_restore(void) {
        cpu_set_t affinity;
        int prio = 0, policy, r;

        if (saved_error < 0) {
                fprintf(stderr, "sandbox-init: reset: what PID 1 started with is not known: %s\n",
                        strerror(-saved_error));
                return saved_error;
        }

        for (int i = 0; i < RLIM_NLIMITS; i++) {
                struct rlimit rl;

                if (getrlimit(i, &rl) < 0)
                        return -errno;
                if (rl.rlim_max != saved.rlimits[i].rlim_max)
                        return changed("a hard resource limit of PID 1");
                if (rl.rlim_cur != saved.rlimits[i].rlim_cur && setrlimit(i, &saved.rlimits[i]) < 0)
                        return changed("a resource limit of PID 1");
        }
        r = get_nice(&prio);
        if (r < 0)
                return r;
        if (prio != saved.nice && setpriority(PRIO_PROCESS, 0, saved.nice) < 0)
                return changed("the nice value of PID 1");
        policy = sched_getscheduler(0);
        if (policy < 0)
                return -errno;
        if (policy != saved.policy && sched_setscheduler(0, saved.policy, &saved.param) < 0)
                return changed("the scheduling policy of PID 1");
        if (sched_getaffinity(0, sizeof(affinity), &affinity) < 0)
                return -errno;
        if (!CPU_EQUAL(&affinity, &saved.affinity) && sched_setaffinity(0, sizeof(saved.affinity), &saved.affinity) < 0)
                return changed("the CPU affinity of PID 1");
        r = (int) syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0);
        if (r < 0)
                return -errno;
        if (r != saved.ioprio && syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, saved.ioprio) < 0)
                return changed("the I/O priority of PID 1");
        return sysctls_restore();
}
