/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "mount-renew.h"
#include "payload.h"

#define MOUNT_OPTIONS_MAX 96

/* What the child needs, all laid out before clone(): it may only make system calls. */
typedef struct RenewPlan {
        char proc_mnt[64], proc_root[64];
        uid_t uid;
        gid_t gid;
        size_t n;
        MountRenew mounts[MOUNT_RENEW_MAX];
} RenewPlan;

/* snprintf() is not async-signal-safe: the child formats its numbers with this. */
static char *append_uint(char *p, char *end, uint64_t v, unsigned base) {
        char digits[24];
        size_t n = 0;

        do {
                digits[n++] = "0123456789abcdef"[v % base];
                v /= base;
        } while (v > 0);
        while (n > 0 && p < end)
                *p++ = digits[--n];
        return p;
}

static char *append_str(char *p, char *end, const char *s) {
        while (*s && p < end)
                *p++ = *s++;
        return p;
}

static int renew_one(const MountRenew *m) {
        char opts[MOUNT_OPTIONS_MAX], *p = opts, *end = opts + sizeof(opts) - 1;
        struct stat st;

        /* The owner and mode as this user namespace sees them: what bwrap made. */
        if (lstat(m->path, &st) < 0)
                return errno;
        if (!S_ISDIR(st.st_mode))
                return ENOTDIR;
        p = append_str(p, end, "size=");
        p = append_uint(p, end, m->size, 10);
        p = append_str(p, end, ",mode=");
        p = append_uint(p, end, st.st_mode & 07777, 8);
        p = append_str(p, end, ",uid=");
        p = append_uint(p, end, st.st_uid, 10);
        p = append_str(p, end, ",gid=");
        p = append_uint(p, end, st.st_gid, 10);
        if (p >= end)
                return ENAMETOOLONG;
        *p = '\0';

        if (umount2(m->path, MNT_DETACH) < 0)
                return errno;
        if (mount("tmpfs", m->path, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return errno;
        return 0;
}

_noreturn_ static void renew_child(const RenewPlan *plan) {
        int mnt_fd, root_fd, userns_fd, r;

        /* As the sandbox's uid: the owner of its user namespace, so that /proc gives us its
         * namespaces (its PID 1 is not dumpable) and they give us the capabilities. */
        if ((r = drop_to_uid(plan->uid, plan->gid)) < 0)
                _exit(-r);
        mnt_fd = open(plan->proc_mnt, O_RDONLY | O_CLOEXEC);
        root_fd = open(plan->proc_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (mnt_fd < 0 || root_fd < 0)
                _exit(errno);
        /* The user namespace that owns the mount namespace (bwrap's outer one: the agent's
         * own may be a nested one without rights over its mounts). */
        userns_fd = ioctl(mnt_fd, NS_GET_USERNS);
        if (userns_fd < 0)
                _exit(errno);
        if (setns(userns_fd, CLONE_NEWUSER) < 0 || setns(mnt_fd, CLONE_NEWNS) < 0)
                _exit(errno);
        /* setns() put us at the namespace's root; the sandbox's is where bwrap pivoted. */
        if (fchdir(root_fd) < 0 || chroot(".") < 0 || chdir("/") < 0)
                _exit(errno);
        for (size_t i = 0; i < plan->n; i++)
                if ((r = renew_one(&plan->mounts[i])) != 0)
                        _exit(r);
        _exit(0);
}

int mount_renew_spawn(pid_t agent_pid, uid_t uid, gid_t gid, const MountRenew *mounts, size_t n_mounts,
                      int *ret_pidfd) {
        RenewPlan plan = { .uid = uid, .gid = gid, .n = n_mounts };
        int pidfd = -EBADF;
        pid_t pid;

        if (agent_pid <= 0 || n_mounts == 0 || n_mounts > MOUNT_RENEW_MAX)
                return -EINVAL;
        for (size_t i = 0; i < n_mounts; i++)
                if (!mounts[i].path || mounts[i].path[0] != '/')
                        return -EINVAL;
        memcpy(plan.mounts, mounts, n_mounts * sizeof(MountRenew));
        snprintf(plan.proc_mnt, sizeof(plan.proc_mnt), "/proc/%d/ns/mnt", (int) agent_pid);
        snprintf(plan.proc_root, sizeof(plan.proc_root), "/proc/%d/root", (int) agent_pid);

        /* A child of ours (reaped by mount_renew_wait()), with a copy of our memory: it
         * shares nothing it could change under us, and a threaded sandboxd's locks do not
         * matter to a child that only makes system calls. */
        pid = (pid_t) syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, NULL, &pidfd, NULL, 0);
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                sigset_t none;
                sigemptyset(&none);
                (void) sigprocmask(SIG_SETMASK, &none, NULL);
                renew_child(&plan);
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
