/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* GetMetrics. The cgroup's counters are read as the exec records read them (cgroup.c).
 * /work and /tmp are tmpfs mounts in the sandbox's own mount namespace, which the host
 * reaches only through a process inside the sandbox: /proc/<pid>/root. That tree belongs
 * to the sandbox, so it is walked with the sandbox's own rights, never root's: this thread
 * takes the process's uid and gid as its effective ids for a few openat()s (a plain
 * setresuid() system call changes the calling thread only; the real and saved ids stay
 * root's to come back), opens one name below the root without following a symlink, and
 * counts only a tmpfs. A bwrap sandbox's uid owns its user namespace, so even its
 * undumpable PID 1 (sandbox-init) is reachable and an idle sandbox is measured too; in a
 * Docker container (no user namespace) only a running command is. */

#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

#include "cgroup.h"
#include "fd-util.h"
#include "log.h"
#include "options.h"
#include "sandbox-internal.h"
#include "sandbox-metrics.h"

/* Processes of the sandbox looked at for its mount namespace: the first few do. */
#define METRICS_PIDS_MAX 64U

int proc_status_parse_id(const char *text, const char *key, uint32_t *ret) {
        size_t k = strlen(key);

        /* "Uid:\treal\teffective\tsaved\tfs": one id only if all four are the same. */
        for (const char *p = text; p && *p; ) {
                const char *eol = strchrnul(p, '\n');

                if (strncmp(p, key, k) == 0 && p[k] == ':') {
                        unsigned long long ids[4];
                        int n = 0;

                        if (sscanf(p + k + 1, " %llu %llu %llu %llu%n", &ids[0], &ids[1], &ids[2], &ids[3], &n) != 4 ||
                            p + k + 1 + n != eol)
                                return -EBADMSG;
                        for (size_t i = 1; i < ELEMENTSOF(ids); i++)
                                if (ids[i] != ids[0])
                                        return -EPERM;
                        if (ids[0] >= UINT32_MAX)
                                return -EBADMSG;
                        *ret = (uint32_t) ids[0];
                        return 0;
                }
                p = *eol ? eol + 1 : eol;
        }
        return -ENOENT;
}

int proc_status_nested(const char *text) {
        /* "NSpid:\t225\t1": the pid in each pid namespace from ours down to its own. */
        for (const char *p = text; p && *p; ) {
                const char *eol = strchrnul(p, '\n');

                if (strncmp(p, "NSpid:", 6) == 0) {
                        unsigned n = 0;

                        for (const char *q = p + 6; q < eol; ) {
                                q += strspn(q, " \t");
                                if (q >= eol)
                                        break;
                                if (*q < '0' || *q > '9')
                                        return -EBADMSG;
                                q += strspn(q, "0123456789");
                                n++;
                        }
                        return n == 0 ? -EBADMSG : n > 1;
                }
                p = *eol ? eol + 1 : eol;
        }
        return -ENOENT;
}

/* The uid and gid of the process whose /proc/<pid> is proc_fd, if it is in a pid namespace
 * below ours (1), else 0. */
static int proc_read_status(int proc_fd, uid_t *ret_uid, gid_t *ret_gid) {
        char buf[4096];
        uint32_t uid, gid;
        ssize_t n;
        int r;

        n = read_file_head_at(proc_fd, "status", buf, sizeof(buf));
        if (n < 0)
                return (int) n;
        r = proc_status_nested(buf);
        if (r <= 0)
                return r;
        r = proc_status_parse_id(buf, "Uid", &uid);
        if (r >= 0)
                r = proc_status_parse_id(buf, "Gid", &gid);
        if (r < 0)
                return r;
        *ret_uid = uid;
        *ret_gid = gid;
        return 1;
}

/* This thread's effective (and so file system) ids. */
static int ids_become(uid_t uid, gid_t gid) {
        if (syscall(SYS_setresgid, (gid_t) -1, gid, (gid_t) -1) < 0)
                return -errno;
        if (syscall(SYS_setresuid, (uid_t) -1, uid, (uid_t) -1) < 0) {
                int r = -errno;
                (void) syscall(SYS_setresgid, (gid_t) -1, (gid_t) 0, (gid_t) -1);
                return r;
        }
        return 0;
}

static void ids_restore(void) {
        /* Allowed by the real uid, root's, and with it the capabilities are back. Should
         * it fail, the loop would go on as the sandbox's uid: better to stop (sandboxes
         * outlive sandboxd, and the next one adopts them). */
        if (syscall(SYS_setresuid, (uid_t) -1, (uid_t) 0, (uid_t) -1) < 0 ||
            syscall(SYS_setresgid, (gid_t) -1, (gid_t) 0, (gid_t) -1) < 0) {
                log_error_errno(errno, "Failed to become root again after reading a sandbox's disk usage: %m");
                abort();
        }
}

/* Bytes used of the tmpfs on the directory name (one component) of the sandbox's root, or
 * UNKNOWN. One component, no symlink: nothing to escape by. (Not openat2(): the unit's
 * RestrictSUIDSGID= makes it fail with ENOSYS.) */
static uint64_t tmpfs_used(int root_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        struct statfs sf;

        fd = openat(root_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstatfs(fd, &sf) < 0 || sf.f_type != TMPFS_MAGIC || sf.f_bfree > sf.f_blocks)
                return SANDBOX_METRIC_UNKNOWN;
        return (uint64_t) (sf.f_blocks - sf.f_bfree) * (uint64_t) sf.f_bsize;
}

/* 1 and ret filled if pid is a process inside the sandbox: in its pid namespace, below
 * ours, and so in its mount namespace (the code in a sandbox can make no namespaces of its
 * own). bwrap's monitor and Docker's holder are processes of the unit outside. 0 if not
 * one; < 0 on errors. */
static int disk_usage_through(pid_t pid, const char *cgroup, SandboxMetrics *ret) {
        _cleanup_close_ int proc_fd = -EBADF, root_fd = -EBADF;
        char path[32];
        uid_t uid;
        gid_t gid;
        int dumpable, r;

        snprintf(path, sizeof(path), "/proc/%i", (int) pid);
        proc_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (proc_fd < 0)
                return -errno;
        /* From here on proc_fd is that process, even should its pid be reused. */
        r = cgroup_proc_in(proc_fd, cgroup);
        if (r <= 0)
                return r;
        r = proc_read_status(proc_fd, &uid, &gid);
        if (r <= 0)
                return r;
        /* Not a process to look through: root's (a container runtime's), or one that
         * changes ids (-EPERM above). */
        if (uid == 0 || gid == 0)
                return 0;

        /* A change of effective ids makes the process undumpable: as it was, afterwards. */
        dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
        r = ids_become(uid, gid);
        if (r < 0)
                return r;
        root_fd = openat(proc_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd >= 0) {
                ret->work_bytes_used = tmpfs_used(root_fd, SANDBOX_WORKDIR + 1);
                ret->tmp_bytes_used = tmpfs_used(root_fd, "tmp");
        }
        ids_restore();
        if (dumpable > 0)
                (void) prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0);
        return root_fd >= 0;
}

static void sandbox_read_disk_usage(Sandbox *s, SandboxMetrics *ret) {
        _cleanup_free_ pid_t *pids = NULL;
        size_t n;

        if (cgroup_read_pids(s->cgroup, METRICS_PIDS_MAX, &pids, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++)
                if (disk_usage_through(pids[i], s->cgroup, ret) > 0)
                        return;
}

int sandbox_get_metrics(Sandbox *s, SandboxMetrics *ret, SandboxError *error) {
        SandboxMetrics m = {
                .cpu_usage_nsec = SANDBOX_METRIC_UNKNOWN,
                .memory_current = SANDBOX_METRIC_UNKNOWN,
                .memory_peak = SANDBOX_METRIC_UNKNOWN,
                .tasks_current = SANDBOX_METRIC_UNKNOWN,
                .work_bytes_used = SANDBOX_METRIC_UNKNOWN,
                .tmp_bytes_used = SANDBOX_METRIC_UNKNOWN,
                .disk_bytes_used = SANDBOX_METRIC_UNKNOWN,
                .disk_bytes_max = SANDBOX_METRIC_UNKNOWN,
        };

        if ((s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED) || !s->cgroup)
                return sandbox_error_set(error, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s is %s.", s->id,
                                         sandbox_state_to_string(s->state));

        /* The kept-open files of the exec records serve here as well. */
        if (cgroup_read_cpu_nsec(s->cgroup, &s->cgroup_cpu_file, &m.cpu_usage_nsec) < 0)
                m.cpu_usage_nsec = SANDBOX_METRIC_UNKNOWN;
        if (cgroup_read_memory_peak(s->cgroup, &s->cgroup_memory_peak_file, &m.memory_peak) < 0)
                m.memory_peak = SANDBOX_METRIC_UNKNOWN;
        if (cgroup_read_memory_current(s->cgroup, &m.memory_current) < 0)
                m.memory_current = SANDBOX_METRIC_UNKNOWN;
        if (cgroup_read_tasks_current(s->cgroup, &m.tasks_current) < 0)
                m.tasks_current = SANDBOX_METRIC_UNKNOWN;
        sandbox_cgroup_files_idle(s, NULL);
        if (s->config.limits.storage == STORAGE_DISK && s->manager->workspaces) {
                /* Its qgroup: no need to look through its processes. */
                if (workspace_usage(s->manager->workspaces, s->id, &s->workspace_qgroup, &m.disk_bytes_used, &m.disk_bytes_max) < 0)
                        m.disk_bytes_used = m.disk_bytes_max = SANDBOX_METRIC_UNKNOWN;
        } else {
                sandbox_read_disk_usage(s, &m);
                if (m.work_bytes_used != SANDBOX_METRIC_UNKNOWN && m.tmp_bytes_used != SANDBOX_METRIC_UNKNOWN)
                        m.disk_bytes_used = m.work_bytes_used + m.tmp_bytes_used;
                m.disk_bytes_max = 2 * s->config.disk_max;
        }

        *ret = m;
        return 0;
}

void sandbox_metrics_fields(const SandboxMetrics *m, SandboxMetricField ret[static SANDBOX_N_METRICS]) {
        const SandboxMetricField f[SANDBOX_N_METRICS] = {
                { "CPUUsageNSec",  "cpuUsageNSec",  m->cpu_usage_nsec  },
                { "MemoryCurrent", "memoryCurrent", m->memory_current  },
                { "MemoryPeak",    "memoryPeak",    m->memory_peak     },
                { "TasksCurrent",  "tasksCurrent",  m->tasks_current   },
                { "WorkBytesUsed", "workBytesUsed", m->work_bytes_used },
                { "TmpBytesUsed",  "tmpBytesUsed",  m->tmp_bytes_used  },
                { "DiskBytesUsed", "diskBytesUsed", m->disk_bytes_used },
                { "DiskBytesMax",  "diskBytesMax",  m->disk_bytes_max  },
        };

        memcpy(ret, f, sizeof(f));
}
