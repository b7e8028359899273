/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* GetMetrics. The cgroup's counters are read as the exec records read them (cgroup.c).
 * /work and /tmp are tmpfs mounts in the sandbox's own mount namespace, which the host
 * reaches only through a process of the sandbox: /proc/<pid>/root. That path belongs to
 * the sandbox, so it is walked with the sandbox's own rights, never root's: with the
 * process's uid and gid as our file system ids (setfsuid(), this thread only, for the
 * length of a few openat()s), without following any symlink, and only a tmpfs counts. */

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

#include "cgroup.h"
#include "log.h"
#include "options.h"
#include "sandbox-internal.h"
#include "sandbox-metrics.h"

/* Processes of the sandbox looked at for its mount namespace: the first few do. */
#define METRICS_PIDS_MAX 64U

/* The file system ids of this thread (setfsuid() is a plain system call, per thread). It
 * reports no errors: what a second call returns is what is set. */
static int fs_ids_set(uid_t uid, gid_t gid) {
        (void) setfsgid(gid);
        (void) setfsuid(uid);
        if ((uid_t) setfsuid((uid_t) -1) != uid || (gid_t) setfsgid((gid_t) -1) != gid)
                return -EPERM;
        return 0;
}

/* Bytes used of the tmpfs at path (relative to the sandbox's root), or UNKNOWN. */
static uint64_t tmpfs_used(int root_fd, const char *path) {
        struct open_how how = {
                .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        _cleanup_close_ int fd = -EBADF;
        struct statfs sf;

        fd = (int) syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
        if (fd < 0 || fstatfs(fd, &sf) < 0 || sf.f_type != TMPFS_MAGIC || sf.f_bfree > sf.f_blocks)
                return SANDBOX_METRIC_UNKNOWN;
        return (uint64_t) (sf.f_blocks - sf.f_bfree) * (uint64_t) sf.f_bsize;
}

/* 1 and ret filled if pid is a process of the sandbox in a mount namespace other than
 * ours (bwrap's monitor and Docker's holder are in ours); 0 if not; < 0 on errors. */
static int disk_usage_through(pid_t pid, const char *cgroup, const struct stat *own_ns, SandboxMetrics *ret) {
        _cleanup_close_ int proc_fd = -EBADF, root_fd = -EBADF;
        char path[32];
        struct stat st, ns;
        int r, k;

        snprintf(path, sizeof(path), "/proc/%i", (int) pid);
        proc_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (proc_fd < 0)
                return -errno;
        /* From here on proc_fd is that process, even should its pid be reused. */
        r = cgroup_proc_in(proc_fd, cgroup);
        if (r <= 0)
                return r;
        if (fstat(proc_fd, &st) < 0)
                return -errno;
        /* /proc/<pid> is owned by the process's uid and gid while it is dumpable: a root or
         * undumpable process is not one to look through. */
        if (st.st_uid == 0 || st.st_gid == 0)
                return 0;

        r = fs_ids_set(st.st_uid, st.st_gid);
        if (r >= 0 && fstatat(proc_fd, "ns/mnt", &ns, 0) >= 0 &&
            (ns.st_dev != own_ns->st_dev || ns.st_ino != own_ns->st_ino)) {
                root_fd = openat(proc_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (root_fd >= 0) {
                        ret->work_bytes_used = tmpfs_used(root_fd, SANDBOX_WORKDIR);
                        ret->tmp_bytes_used = tmpfs_used(root_fd, "/tmp");
                }
        }
        k = fs_ids_set(0, 0);
        if (k < 0)
                /* Cannot happen with CAP_SETUID and CAP_SETGID; were it to, the loop would go
                 * on with fewer rights than it needs, which is only safe, not right. */
                log_error_errno(k, "Failed to get back the file system ids of root: %m");
        return r < 0 ? r : root_fd >= 0;
}

static void sandbox_read_disk_usage(Sandbox *s, SandboxMetrics *ret) {
        _cleanup_free_ pid_t *pids = NULL;
        struct stat own_ns;
        size_t n;

        if (stat("/proc/self/ns/mnt", &own_ns) < 0 || cgroup_read_pids(s->cgroup, METRICS_PIDS_MAX, &pids, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++)
                if (disk_usage_through(pids[i], s->cgroup, &own_ns, ret) > 0)
                        return;
}

int sandbox_get_metrics(Sandbox *s, SandboxMetrics *ret) {
        SandboxMetrics m = {
                .cpu_usage_nsec = SANDBOX_METRIC_UNKNOWN,
                .memory_current = SANDBOX_METRIC_UNKNOWN,
                .memory_peak = SANDBOX_METRIC_UNKNOWN,
                .tasks_current = SANDBOX_METRIC_UNKNOWN,
                .work_bytes_used = SANDBOX_METRIC_UNKNOWN,
                .tmp_bytes_used = SANDBOX_METRIC_UNKNOWN,
        };

        if ((s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED) || !s->cgroup)
                return -ESRCH;

        /* The kept-open files of the exec records serve here as well. */
        if (cgroup_read_cpu_nsec(s->cgroup, &s->cgroup_cpu_file, &m.cpu_usage_nsec) < 0)
                m.cpu_usage_nsec = SANDBOX_METRIC_UNKNOWN;
        if (cgroup_read_memory_peak(s->cgroup, &s->cgroup_memory_peak_file, &m.memory_peak) < 0)
                m.memory_peak = SANDBOX_METRIC_UNKNOWN;
        if (cgroup_read_memory_current(s->cgroup, &m.memory_current) < 0)
                m.memory_current = SANDBOX_METRIC_UNKNOWN;
        if (cgroup_read_tasks_current(s->cgroup, &m.tasks_current) < 0)
                m.tasks_current = SANDBOX_METRIC_UNKNOWN;
        sandbox_read_disk_usage(s, &m);

        *ret = m;
        return 0;
}
