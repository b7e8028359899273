/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/vfs.h>
#include <linux/magic.h>

#include "cgroup.h"
#include "fd-util.h"
#include "macro.h"

int cgroup_parse_keyed(const char *text, const char *key, uint64_t *ret) {
        size_t k = strlen(key);

        for (const char *p = text; p && *p; ) {
                const char *eol = strchrnul(p, '\n');
                if ((size_t) (eol - p) > k && strncmp(p, key, k) == 0 && p[k] == ' ') {
                        char *end;
                        errno = 0;
                        unsigned long long v = strtoull(p + k + 1, &end, 10);
                        if (errno != 0 || end == p + k + 1 || end != eol)
                                return -EBADMSG;
                        *ret = v;
                        return 0;
                }
                p = *eol ? eol + 1 : eol;
        }
        return -ENOENT;
}

static bool cgroup_is_unified(void) {
        /* The host's cgroup layout does not change under a running daemon. */
        static int cached = -1;
        struct statfs fs;

        if (cached < 0)
                cached = statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
        return cached;
}

/* Whether the cgroup directory has sub-cgroups: cgroupfs (kernfs) keeps a directory's
 * link count at 2 + its subdirectories, so that one fstat() spares reading the directory
 * (some 30 entries) for none, on every exec and reset. When it cannot tell: yes. */
static bool cgroup_has_children(int dir_fd) {
        struct stat st;

        return fstat(dir_fd, &st) < 0 || st.st_nlink != 2;
}

/* v1 counts an OOM kill only in the memory cgroup that hit its limit, which may be one
 * below the unit's (a container with a limit of its own): add up the whole subtree. */
static uint64_t oom_kills_v1_subtree(int dir_fd) {
        uint64_t total = 0, v;
        char buf[1024];

        if (read_file_head_at(dir_fd, "memory.oom_control", buf, sizeof(buf)) > 0 &&
            cgroup_parse_keyed(buf, "oom_kill", &v) >= 0)
                total += v;

        if (!cgroup_has_children(dir_fd))
                return total;
        int dup_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
        struct dirent *de;
        if (!d) {
                safe_close(dup_fd);
                return total;
        }
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && de->d_name[0] != '.') {
                        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0) {
                                total += oom_kills_v1_subtree(sub);
                                close(sub);
                        }
                }
        closedir(d);
        return total;
}

int cgroup_read_oom_kills(const char *cgroup_path, uint64_t *ret) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        char buf[1024];
        ssize_t n;

        if (!cgroup_path || cgroup_path[0] != '/')
                return -EINVAL;
        if (cgroup_is_unified()) {
                /* v2's memory.events is hierarchical: the subtree is counted already. */
                if (asprintf(&path, "/sys/fs/cgroup%s/memory.events", cgroup_path) < 0)
                        return -ENOMEM;
                n = read_file_head_at(AT_FDCWD, path, buf, sizeof(buf));
                if (n < 0)
                        return (int) n;
                return cgroup_parse_keyed(buf, "oom_kill", ret);
        }
        if (asprintf(&path, "/sys/fs/cgroup/memory%s", cgroup_path) < 0)
                return -ENOMEM;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret = oom_kills_v1_subtree(fd);
        return 0;
}

void cgroup_file_close(CgroupFile *f) {
        f->fd = safe_close(f->fd);
}

/* Opens f on the first of paths (NULL-terminated) that opens; kind tells which. */
static int cgroup_file_open(CgroupFile *f, char * const *paths) {
        int last = -ENOENT;

        for (size_t i = 0; paths[i]; i++) {
                int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
                if (fd >= 0) {
                        f->fd = fd;
                        f->kind = (int) i;
                        return 0;
                }
                last = -errno;
        }
        return last;
}

/* The file's current text: an attribute file read at offset 0 is generated afresh. */
static int cgroup_file_read(CgroupFile *f, char *buf, size_t size) {
        ssize_t n = pread(f->fd, buf, size - 1, 0);

        if (n < 0) {
                int r = -errno;
                cgroup_file_close(f); /* opened again next time */
                return r;
        }
        buf[n] = 0;
        return 0;
}

/* Reads the file of cgroup_path that the first of the candidates names, through f (kept
 * open for the next read) or, without f, opened for this read alone. */
/* A place of an attribute file: hierarchy + the cgroup's path + file. */
typedef struct CgroupAttribute {
        const char *hierarchy, *file;
} CgroupAttribute;

static int cgroup_attribute_read(const char *cgroup_path, CgroupFile *f, const CgroupAttribute *candidates,
                                 char *buf, size_t size, int *ret_kind) {
        CgroupFile once = CGROUP_FILE_NULL;
        char *paths[4] = {};
        int r = 0;

        if (!cgroup_path || cgroup_path[0] != '/')
                return -EINVAL;
        if (!f)
                f = &once;
        if (f->fd < 0) {
                for (size_t i = 0; r >= 0 && candidates[i].file && i < ELEMENTSOF(paths) - 1; i++)
                        if (asprintf(&paths[i], "/sys/fs/cgroup%s%s/%s", candidates[i].hierarchy, cgroup_path,
                                     candidates[i].file) < 0)
                                r = -ENOMEM;
                if (r >= 0)
                        r = cgroup_file_open(f, paths);
                for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                        free(paths[i]);
        }
        if (r >= 0)
                r = cgroup_file_read(f, buf, size);
        if (r >= 0)
                *ret_kind = f->kind;
        cgroup_file_close(&once);
        return r;
}

static int parse_counter(const char *text, uint64_t *ret) {
        unsigned long long v;
        char *end;

        errno = 0;
        v = strtoull(text, &end, 10);
        if (errno != 0 || end == text || (*end != '\n' && *end != 0))
                return -EBADMSG;
        *ret = v;
        return 0;
}

int cgroup_read_cpu_nsec(const char *cgroup_path, CgroupFile *f, uint64_t *ret) {
        /* cgroup2's cpu.stat is there without any controller, also in the "unified"
         * hierarchy of a hybrid host, where systemd may manage no cpuacct at all; v1's
         * cpuacct.usage otherwise (kind 1, 2: a bare number of ns). */
        static const CgroupAttribute unified[] = { { "", "cpu.stat" }, {} };
        static const CgroupAttribute hybrid[] = { { "/unified", "cpu.stat" },
                                                  { "/cpu,cpuacct", "cpuacct.usage" },
                                                  { "/cpuacct", "cpuacct.usage" }, {} };
        char buf[1024];
        uint64_t v;
        int kind, r;

        r = cgroup_attribute_read(cgroup_path, f, cgroup_is_unified() ? unified : hybrid, buf, sizeof(buf), &kind);
        if (r < 0)
                return r;
        if (kind == 0) {
                r = cgroup_parse_keyed(buf, "usage_usec", &v);
                if (r < 0)
                        return r == -ENOENT ? -EBADMSG : r;
                *ret = v * 1000ULL;
                return 0;
        }
        return parse_counter(buf, ret);
}

/* A bare number in the first of unified's (v2) or legacy's (v1) candidates that opens. */
static int cgroup_counter_read(const char *cgroup_path, CgroupFile *f, const CgroupAttribute *unified,
                               const CgroupAttribute *legacy, uint64_t *ret) {
        char buf[64];
        int kind, r;

        r = cgroup_attribute_read(cgroup_path, f, cgroup_is_unified() ? unified : legacy, buf, sizeof(buf), &kind);
        if (r < 0)
                return r;
        return parse_counter(buf, ret);
}

int cgroup_read_memory_peak(const char *cgroup_path, CgroupFile *f, uint64_t *ret) {
        static const CgroupAttribute unified[] = { { "", "memory.peak" }, {} };
        static const CgroupAttribute legacy[] = { { "/memory", "memory.max_usage_in_bytes" }, {} };

        return cgroup_counter_read(cgroup_path, f, unified, legacy, ret);
}

int cgroup_reset_memory_peak(const char *cgroup_path, CgroupFile *f) {
        /* cgroupfs read-only for us (the shipped unit's ProtectControlGroups=yes) stays so
         * while we run: not tried again at every reset. */
        static bool read_only = false;
        _cleanup_free_ char *path = NULL;
        bool unified = cgroup_is_unified();
        int fd;

        if (!cgroup_path || cgroup_path[0] != '/')
                return -EINVAL;
        if (read_only)
                return -EROFS;
        if (asprintf(&path, "/sys/fs/cgroup%s%s/%s", unified ? "" : "/memory", cgroup_path,
                     unified ? "memory.peak" : "memory.max_usage_in_bytes") < 0)
                return -ENOMEM;
        fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
                read_only = errno == EROFS;
                return -errno;
        }
        /* v2 (Linux 6.12): any text resets the mark as this descriptor reads it; v1: 0. */
        if (write(fd, unified ? "reset\n" : "0\n", unified ? 6 : 2) < 0) {
                int r = -errno;
                safe_close(fd);
                return r;
        }
        cgroup_file_close(f);
        f->fd = fd;
        f->kind = 0;
        return 0;
}

int cgroup_read_memory_current(const char *cgroup_path, uint64_t *ret) {
        static const CgroupAttribute unified[] = { { "", "memory.current" }, {} };
        static const CgroupAttribute legacy[] = { { "/memory", "memory.usage_in_bytes" }, {} };

        return cgroup_counter_read(cgroup_path, NULL, unified, legacy, ret);
}

int cgroup_read_tasks_current(const char *cgroup_path, uint64_t *ret) {
        static const CgroupAttribute unified[] = { { "", "pids.current" }, {} };
        static const CgroupAttribute legacy[] = { { "/pids", "pids.current" }, {} };

        return cgroup_counter_read(cgroup_path, NULL, unified, legacy, ret);
}

#define CGROUP_PIDS_DEPTH_MAX 8

static int read_pids_subtree(int dir_fd, unsigned depth, size_t max, pid_t *pids, size_t *n) {
        _cleanup_close_ int fd = -EBADF;
        struct dirent *de;
        DIR *d;
        FILE *f;
        int dup_fd;

        fd = openat(dir_fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
        f = fd >= 0 ? fdopen(fd, "re") : NULL;
        if (f) {
                long long pid;

                TAKE_FD(fd);
                while (*n < max && fscanf(f, "%lld", &pid) == 1)
                        if (pid > 0 && pid <= INT32_MAX)
                                pids[(*n)++] = (pid_t) pid;
                fclose(f);
        }
        if (*n >= max || depth >= CGROUP_PIDS_DEPTH_MAX || !cgroup_has_children(dir_fd))
                return 0;

        dup_fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
        if (!d) {
                safe_close(dup_fd);
                return -errno;
        }
        while (*n < max && (de = readdir(d)))
                if (de->d_type == DT_DIR && de->d_name[0] != '.') {
                        int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0) {
                                (void) read_pids_subtree(sub, depth + 1, max, pids, n);
                                close(sub);
                        }
                }
        closedir(d);
        return 0;
}

int cgroup_read_pids(const char *cgroup_path, size_t max, pid_t **ret, size_t *ret_n) {
        _cleanup_free_ char *path = NULL;
        _cleanup_free_ pid_t *pids = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t n = 0;
        int r;

        if (!cgroup_path || cgroup_path[0] != '/')
                return -EINVAL;
        if (asprintf(&path, "/sys/fs/cgroup%s%s", cgroup_is_unified() ? "" : "/systemd", cgroup_path) < 0)
                return -ENOMEM;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        pids = calloc(MAX(max, (size_t) 1), sizeof(pid_t));
        if (!pids)
                return -ENOMEM;
        r = read_pids_subtree(fd, 0, max, pids, &n);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(pids);
        *ret_n = n;
        return 0;
}

bool cgroup_text_has_path(const char *text, const char *cgroup_path) {
        size_t k = strlen(cgroup_path);

        /* "hierarchy-id:controllers:path" per line: any hierarchy will do. */
        for (const char *p = text; p && *p; ) {
                const char *eol = strchrnul(p, '\n'), *c1 = memchr(p, ':', (size_t) (eol - p)), *c2;

                c2 = c1 ? memchr(c1 + 1, ':', (size_t) (eol - c1 - 1)) : NULL;
                if (c2) {
                        const char *path = c2 + 1;
                        size_t l = (size_t) (eol - path);

                        if (l >= k && strncmp(path, cgroup_path, k) == 0 && (l == k || path[k] == '/'))
                                return true;
                }
                p = *eol ? eol + 1 : eol;
        }
        return false;
}

int cgroup_proc_in(int proc_fd, const char *cgroup_path) {
        char buf[8192];
        ssize_t n;

        n = read_file_head_at(proc_fd, "cgroup", buf, sizeof(buf));
        if (n < 0)
                return (int) n;
        return cgroup_text_has_path(buf, cgroup_path);
}
