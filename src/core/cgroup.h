/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Reading what the kernel accounted for a unit's cgroup, on the unified hierarchy or on
 * the legacy/hybrid one (memory controller in v1). */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The number of processes the kernel's OOM killer killed in the cgroup
 * (memory.events "oom_kill" on v2, memory.oom_control "oom_kill" on v1). */
int cgroup_read_oom_kills(const char *cgroup_path, uint64_t *ret);
/* Parses "key value\n" lines (memory.events, memory.oom_control) for key. */
int cgroup_parse_keyed(const char *text, const char *key, uint64_t *ret);

/* An attribute file of a cgroup kept open between reads (read again at offset 0, the
 * kernel generates it afresh): for counters read on every exec, without a path walk. */
typedef struct CgroupFile {
        int fd;     /* -EBADF: not open (yet) */
        int kind;   /* which of the reader's candidate files it is */
} CgroupFile;
#define CGROUP_FILE_NULL ((CgroupFile) { .fd = -EBADF })
void cgroup_file_close(CgroupFile *f);

/* CPU time used by the cgroup so far, in ns (v2 cpu.stat usage_usec, v1 cpuacct.usage).
 * f: NULL, or where the open file is kept for the next call on the same cgroup. */
int cgroup_read_cpu_nsec(const char *cgroup_path, CgroupFile *f, uint64_t *ret);
/* The cgroup's memory high-water mark in bytes (v2 memory.peak, v1
 * memory.max_usage_in_bytes). */
int cgroup_read_memory_peak(const char *cgroup_path, CgroupFile *f, uint64_t *ret);
/* Starts the high-water mark afresh for what is read through f from now on (v2: Linux
 * 6.12 and later, per descriptor; v1: for everyone). -EINVAL, -EACCES or -EPERM where the
 * kernel cannot (f is then unchanged). */
int cgroup_reset_memory_peak(const char *cgroup_path, CgroupFile *f);
/* The memory the cgroup uses now, page cache and tmpfs included, in bytes (v2
 * memory.current, v1 memory.usage_in_bytes). */
int cgroup_read_memory_current(const char *cgroup_path, uint64_t *ret);
/* The tasks (threads) in the cgroup and below (pids.current, v2 or v1's pids controller). */
int cgroup_read_tasks_current(const char *cgroup_path, uint64_t *ret);
/* Up to max pids of the processes in the cgroup and its sub-cgroups, as the hierarchy that
 * tracks processes lists them (v2; systemd's named hierarchy on v1), in the caller's pid
 * namespace. *ret_n may be less than max with more processes there: a sub-cgroup too deep
 * (beyond 8 levels) is not looked into. */
int cgroup_read_pids(const char *cgroup_path, size_t max, pid_t **ret, size_t *ret_n);
/* Whether the process whose /proc/<pid> directory is proc_fd is in the cgroup or below:
 * through the directory's fd, a pid reused meanwhile is never mistaken for it. */
int cgroup_proc_in(int proc_fd, const char *cgroup_path);
/* Whether a line of /proc/<pid>/cgroup text puts the process in cgroup_path or below. */
bool cgroup_text_has_path(const char *text, const char *cgroup_path);
