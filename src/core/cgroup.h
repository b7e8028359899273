/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Reading what the kernel accounted for a unit's cgroup, on the unified hierarchy or on
 * the legacy/hybrid one (memory controller in v1). */

#include <stdint.h>

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
