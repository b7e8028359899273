/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The file operations of protocol version 2. Each runs in a child of the agent, inside
 * the sandbox and as its uid, and resolves its path as the sandbox's own code would:
 * symlinks lead only to what the sandbox can reach anyway (its root is the sandbox's).
 * read, write and stat follow a final symlink, as cat, tee and stat -L do; remove and
 * move act on the link itself, as rm and mv do; a recursive walk never follows a link.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox-init.h"
#include "strv.h"

#define COPY_BUFFER_SIZE (128U * 1024U)

static void closedirp(DIR **d) {
        if (*d)
                (void) closedir(*d);
}
#define _cleanup_closedir_ _cleanup_(closedirp)

static int fd_wait(int fd, short events) {
        struct pollfd p = { .fd = fd, .events = events };

        if (poll(&p, 1, -1) < 0 && errno != EINTR)
                return -errno;
        return 0;
}

/* The caller's descriptors may be non-blocking: those wait in poll(), not in a spin. */
static int write_all(int fd, const char *p, size_t n) {
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                int r;

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                return -errno;
                        r = fd_wait(fd, POLLOUT);
                        if (r < 0)
                                return r;
                        continue;
                }
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

/* Copies in to out until EOF or limit bytes; *bytes counts what reached out. */
static int copy_data(int in, int out, uint64_t limit, uint64_t *bytes) {
        _cleanup_free_ char *buf = malloc(COPY_BUFFER_SIZE);
        int r;

        if (!buf)
                return -ENOMEM;

        while (*bytes < limit) {
                ssize_t n = read(in, buf, (size_t) MIN((uint64_t) COPY_BUFFER_SIZE, limit - *bytes));

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                return -errno;
                        r = fd_wait(in, POLLIN);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (n == 0)
                        break;
                r = write_all(out, buf, (size_t) n);
                if (r < 0)
                        return r;
                *bytes += (uint64_t) n;
        }
        return 0;
}

/* Opens (O_PATH) the directory that holds path's last component, following symlinks on
 * the way as any lookup in the sandbox would, making missing ones if parents is set; the
 * last component ("." for "/") goes to *ret_name. Relative paths start at AGENT_WORKDIR. */
static int open_parent(const char *path, bool parents, int *ret_dirfd, char **ret_name) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *full = NULL, *name = NULL;
        char *slash, *p, *save;
        size_t len;

        if (path[0] == '/')
                full = strdup(path);
        else if (asprintf(&full, AGENT_WORKDIR "/%s", path) < 0)
                full = NULL;
        if (!full)
                return -ENOMEM;

        /* "a/b/" names b, as for rmdir(1) and mv(1). */
        len = strlen(full);
        while (len > 1 && full[len - 1] == '/')
                full[--len] = 0;

        slash = strrchr(full, '/');
        name = strdup(slash[1] ? slash + 1 : ".");
        if (!name)
                return -ENOMEM;
        slash[1] = 0; /* full is now the directory, with its trailing "/" */

        if (!parents) {
                fd = open(full, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                *ret_dirfd = TAKE_FD(fd);
                *ret_name = TAKE_PTR(name);
                return 0;
        }

        /* mkdir -p, one component at a time, each relative to the last one opened. */
        fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        for (p = strtok_r(full, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
                int next;

                if (mkdirat(fd, p, 0755) < 0 && errno != EEXIST)
                        return -errno;
                next = openat(fd, p, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (next < 0)
                        return -errno;
                safe_close(fd);
                fd = next;
        }

        *ret_dirfd = TAKE_FD(fd);
        *ret_name = TAKE_PTR(name);
        return 0;
}

static int entry_fill(int dirfd, const char *name, const char *path, const struct stat *st,
                      struct agent_file_entry *ret) {
        _cleanup_free_ char *p = NULL, *target = NULL;

        if (!agent_file_type_to_string(st->st_mode))
                return -EBADMSG; /* a type the protocol has no name for */

        if (S_ISLNK(st->st_mode)) {
                char buf[PATH_MAX];
                ssize_t n = readlinkat(dirfd, name, buf, sizeof(buf) - 1);

                if (n < 0)
                        return -errno;
                buf[n] = 0;
                target = strdup(buf);
                if (!target)
                        return -ENOMEM;
        }
        p = strdup(path);
        if (!p)
                return -ENOMEM;

        *ret = (struct agent_file_entry) {
                .path = TAKE_PTR(p),
                .type = st->st_mode & S_IFMT,
                .mode = st->st_mode & 07777,
                .size = st->st_size > 0 ? (uint64_t) st->st_size : 0,
                .mtime_usec = (int64_t) st->st_mtim.tv_sec * 1000000 + st->st_mtim.tv_nsec / 1000,
                .target = TAKE_PTR(target),
        };
        return 0;
}

/* Is FD the operation's own descriptor, reopened? A link the sandboxed code planted to
 * /proc/self/fd/N reaches it: an Upload would truncate the caller's source, a Download
 * read its destination into itself. Refused with ELOOP, as a link that leads nowhere. */
static int refuse_own_descriptor(int fd, int own) {
        struct stat a, b;

        if (fstat(fd, &a) < 0 || fstat(own, &b) < 0)
                return -errno;
        return a.st_dev == b.st_dev && a.st_ino == b.st_ino ? -ELOOP : 0;
}

/* A read or write refused for what the path is: EINVAL, and the type, for the message. */
static int not_regular(struct agent_file_result *res, mode_t mode) {
        res->not_regular = mode & S_IFMT;
        return -EINVAL;
}

static int op_read(const struct agent_file *f, int out, struct agent_file_result *res) {
        _cleanup_close_ int dirfd = -EBADF, fd = -EBADF;
        _cleanup_free_ char *name = NULL;
        uint64_t limit;
        struct stat st;
        int r;

        res->has_bytes = true;

        r = open_parent(f->path, false, &dirfd, &name);
        if (r < 0)
                return r;

        /* O_NONBLOCK: a FIFO opens at once, to be refused below, instead of waiting for a
         * writer that never comes. */
        fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return not_regular(res, st.st_mode);
        r = refuse_own_descriptor(fd, out);
        if (r < 0)
                return r;
        /* st_size, not what is actually stored: a sparse terabyte is refused at once. */
        if (f->max != AGENT_FILE_UNLIMITED && (uint64_t) st.st_size > f->max)
                return -EFBIG;

        if (f->offset > 0 && lseek(fd, (off_t) f->offset, SEEK_SET) < 0)
                return -errno;

        /* A file that grows while we copy still stops at max, and says so. */
        limit = MIN(f->length, f->max);
        r = copy_data(fd, out, limit, &res->bytes);
        if (r < 0)
                return r;
        if (f->max != AGENT_FILE_UNLIMITED && f->length > f->max && res->bytes == f->max) {
                char c;
                ssize_t n = read(fd, &c, 1);

                if (n > 0)
                        return -EFBIG;
        }
        return 0;
}

static int op_write(const struct agent_file *f, int in, struct agent_file_result *res) {
        _cleanup_close_ int dirfd = -EBADF, fd = -EBADF;
        _cleanup_free_ char *name = NULL;
        struct stat st;
        int r;

        res->has_bytes = true;

        r = open_parent(f->path, f->parents, &dirfd, &name);
        if (r < 0)
                return r;

        /* Not O_TRUNC: what is there is checked first, and only a regular file is
         * truncated. O_NONBLOCK: an existing FIFO must not wait for a reader. */
        fd = openat(dirfd, name,
                    O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (f->append ? O_APPEND : 0),
                    f->mode == AGENT_FILE_MODE_DEFAULT ? 0644 : f->mode);
        if (fd < 0) {
                /* ENXIO: a FIFO without reader, a socket. */
                if (errno == ENXIO && fstatat(dirfd, name, &st, 0) >= 0)
                        return not_regular(res, st.st_mode);
                return -errno;
        }
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return not_regular(res, st.st_mode);
        r = refuse_own_descriptor(fd, in);
        if (r < 0)
                return r;
        if (!f->append && ftruncate(fd, 0) < 0)
                return -errno;

        return copy_data(in, fd, AGENT_FILE_UNLIMITED, &res->bytes);
}

struct list_state {
        struct agent_file_entry *entries;
        size_t n_entries;
        size_t allocated;
        size_t size;        /* a lower bound of the JSON's size */
};

/* "prefix/name", or "name" without a prefix. */
static char *path_join(const char *prefix, const char *name) {
        size_t a = prefix ? strlen(prefix) + 1 : 0, b = strlen(name);
        char *p = malloc(a + b + 1);

        if (!p)
                return NULL;
        if (prefix) {
                memcpy(p, prefix, a - 1);
                p[a - 1] = '/';
        }
        memcpy(p + a, name, b + 1);
        return p;
}

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char * const *) a, *(char * const *) b);
}

/* Lists the directory fd (taken), depth levels deep, in pre-order and by name. */
static int list_dir(struct list_state *s, int fd, const char *prefix, unsigned depth) {
        _cleanup_closedir_ DIR *d = NULL;
        _cleanup_strv_free_ char **names = NULL;
        size_t n = 0;
        struct dirent *de;
        int r;

        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }

        /* All names first: sorted, and so that no DIR stays open across the recursion
         * longer than needed. */
        errno = 0;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                r = strv_extend(&names, de->d_name);
                if (r < 0)
                        return r;
                n++;
        }
        if (errno != 0)
                return -errno;
        if (n > 1)
                qsort(names, n, sizeof(char *), cmp_names);

        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *path = NULL;
                struct agent_file_entry *e;
                struct stat st;
                int sub;

                if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        if (errno == ENOENT)
                                continue; /* gone since readdir() */
                        return -errno;
                }

                if (s->n_entries >= AGENT_FILE_ENTRIES_MAX)
                        return -E2BIG;
                if (s->n_entries >= s->allocated) {
                        size_t a = MAX(s->allocated * 2, (size_t) 64);

                        e = reallocarray(s->entries, a, sizeof(struct agent_file_entry));
                        if (!e)
                                return -ENOMEM;
                        s->entries = e;
                        s->allocated = a;
                }

                path = path_join(prefix, names[i]);
                if (!path)
                        return -ENOMEM;

                e = s->entries + s->n_entries;
                r = entry_fill(dirfd(d), names[i], path, &st, e);
                if (r == -EBADMSG || r == -ENOENT)
                        continue; /* a type without a name; or a link gone since fstatat() */
                if (r < 0)
                        return r;
                s->n_entries++;

                /* The JSON holds at least this much of each entry: past the message size,
                 * give up now rather than after listing a million files. */
                s->size += strlen(e->path) + (e->target ? strlen(e->target) : 0) + 64;
                if (s->size > AGENT_MESSAGE_MAX)
                        return -E2BIG;

                if (!S_ISDIR(st.st_mode) || depth <= 1)
                        continue;

                /* O_NOFOLLOW: what was a directory in fstatat() may be a symlink now. What
                 * cannot be opened (no permission, or such a race) is listed, not entered. */
                sub = openat(dirfd(d), names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
                if (sub < 0)
                        continue;
                r = list_dir(s, sub, path, depth - 1);
                if (r < 0 && r != -EACCES)
                        return r;
        }

        return 0;
}

static int op_list(const struct agent_file *f, struct agent_file_result *res) {
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ char *name = NULL;
        struct list_state s = {};
        int fd, r;

        r = open_parent(f->path, false, &dirfd, &name);
        if (r < 0)
                return r;

        /* The listed directory itself may be a symlink (/bin -> usr/bin): the path is
         * what the caller chose. Below it, nothing is followed. */
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return -errno;

        r = list_dir(&s, fd, NULL, f->depth);
        /* Handed over even on failure, so that agent_file_result_done() frees them. */
        res->entries = s.entries;
        res->n_entries = s.n_entries;
        if (r < 0)
                return r;
        res->has_entries = true;
        return 0;
}

static int op_stat(const struct agent_file *f, struct agent_file_result *res) {
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ char *name = NULL;
        struct stat st;
        int r;

        r = open_parent(f->path, false, &dirfd, &name);
        if (r < 0)
                return r;
        /* As stat -L: a symlink is followed (a dangling one is ENOENT); ListFiles shows the
         * link itself. */
        if (fstatat(dirfd, name, &st, 0) < 0)
                return -errno;
        r = entry_fill(dirfd, name, f->path, &st, &res->stat);
        if (r < 0)
                return r == -EBADMSG ? -EINVAL : r;
        res->has_stat = true;
        return 0;
}

static int op_mkdir(const struct agent_file *f) {
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ char *name = NULL;
        struct stat st;
        int r;

        r = open_parent(f->path, f->parents, &dirfd, &name);
        if (r < 0)
                return r;
        if (mkdirat(dirfd, name, f->mode == AGENT_FILE_MODE_DEFAULT ? 0755 : f->mode) >= 0)
                return 0;
        /* As mkdir -p: a directory that is already there is success. */
        r = -errno;
        if (r == -EEXIST && f->parents && fstatat(dirfd, name, &st, 0) >= 0 && S_ISDIR(st.st_mode))
                return 0;
        return r;
}

static int remove_tree(int dirfd, const char *name, bool force);

/* Empties the directory fd (taken). ret_left NULL: stops at the first failure; else goes
 * on past what cannot be removed, and says how many entries were left there. */
static int remove_contents(int fd, bool force, unsigned *ret_left) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        unsigned left = 0;
        int r;

        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }

        /* Entries that are not removed are still returned by readdir(), whatever is
         * removed along the way; anything added meanwhile fails the final rmdir. */
        errno = 0;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                r = remove_tree(dirfd(d), de->d_name, force);
                if (r < 0 && !ret_left)
                        return r;
                if (r < 0)
                        left++;
                errno = 0;
        }
        if (ret_left)
                *ret_left = left;
        return errno != 0 ? -errno : 0;
}

/* force: directories of ours that we may not read or write (chmod 0, 0500) are made so
 * first, as nothing else of the sandbox runs (agent_empty_dir()). */
static int remove_tree(int dirfd, const char *name, bool force) {
        struct stat st;
        int fd, r;

        /* A symlink (to a directory or not) fails here with ELOOP, and is removed itself,
         * never what it points to. */
        fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 && errno == EACCES && force && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) >= 0 &&
            S_ISDIR(st.st_mode) && fchmodat(dirfd, name, 0700, 0) >= 0)
                fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
        if (fd < 0) {
                if (errno != ENOTDIR && errno != ELOOP)
                        return -errno;
                return unlinkat(dirfd, name, 0) < 0 ? -errno : 0;
        }
        if (force)
                (void) fchmod(fd, 0700);

        r = remove_contents(fd, force, NULL);
        if (r < 0)
                return r;
        return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

int agent_empty_dir(const char *path, unsigned *ret_left) {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);

        return fd < 0 ? -errno : remove_contents(fd, true, ret_left);
}

static int op_remove(const struct agent_file *f) {
        _cleanup_close_ int dirfd = -EBADF;
        _cleanup_free_ char *name = NULL;
        int r;

        r = open_parent(f->path, false, &dirfd, &name);
        if (r < 0)
                return r;
        /* "/", "x/." and "x/..": what would go is not the name the caller gave. */
        if (streq(name, ".") || streq(name, ".."))
                return -EINVAL;

        if (f->recursive)
                return remove_tree(dirfd, name, false);

        if (unlinkat(dirfd, name, 0) >= 0)
                return 0;
        if (errno != EISDIR)
                return -errno;
        return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

static int op_move(const struct agent_file *f) {
        _cleanup_close_ int dirfd = -EBADF, to_dirfd = -EBADF;
        _cleanup_free_ char *name = NULL, *to_name = NULL;
        int r;

        r = open_parent(f->path, false, &dirfd, &name);
        if (r < 0)
                return r;
        r = open_parent(f->to, false, &to_dirfd, &to_name);
        if (r < 0)
                return r;
        return renameat(dirfd, name, to_dirfd, to_name) < 0 ? -errno : 0;
}

/* ---- watch ---- */

typedef struct WatchState {
        int inotify, out;
        char **dirs;             /* by watch descriptor: the directory's path */
        size_t n_dirs;
        unsigned watched;
        bool recursive;
} WatchState;

static int watch_add(WatchState *w, const char *path) {
        int wd;

        if (w->watched >= AGENT_WATCH_DIRS_MAX)
                return 0; /* bounded: what is beyond is not followed */
        wd = inotify_add_watch(w->inotify, path, IN_CREATE | IN_CLOSE_WRITE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM |
                               IN_MOVED_TO | IN_DELETE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK);
        if (wd < 0)
                return -errno;
        if ((size_t) wd >= w->n_dirs) {
                size_t n = MAX((size_t) wd + 1, w->n_dirs * 2);
                char **d = realloc(w->dirs, n * sizeof(char *));
                if (!d)
                        return -ENOMEM;
                memset(d + w->n_dirs, 0, (n - w->n_dirs) * sizeof(char *));
                w->dirs = d;
                w->n_dirs = n;
        }
        if (!w->dirs[wd]) {
                w->dirs[wd] = strdup(path);
                if (!w->dirs[wd])
                        return -ENOMEM;
                w->watched++;
        }
        if (!w->recursive)
                return 0;
        /* The directories below, once each (a new one is added when it is created). */
        _cleanup_(closedirp) DIR *d = opendir(path);
        struct dirent *de;
        if (!d)
                return 0;
        while ((de = readdir(d))) {
                _cleanup_free_ char *sub = NULL;
                if (de->d_type != DT_DIR || streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                sub = path_join(path, de->d_name);
                if (!sub)
                        return -ENOMEM;
                (void) watch_add(w, sub);
        }
        return 0;
}

static int watch_emit(WatchState *w, const char *event, const char *dir, const char *name, bool is_dir) {
        _cleanup_free_ char *path = dir && name && *name ? path_join(dir, name) : NULL;
        json_object *o = json_object_new_object();
        const char *text;
        int r = -ENOMEM;

        /* json-c's own calls: the agent links nothing else (agent-protocol.h). */
        if (!o || json_object_object_add(o, "event", json_object_new_string(event)) < 0 ||
            (dir && json_object_object_add(o, "path", json_object_new_string(path ?: dir)) < 0) ||
            json_object_object_add(o, "dir", json_object_new_boolean(is_dir)) < 0)
                goto finish;
        text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        r = text && write_all(w->out, text, strlen(text)) >= 0 && write_all(w->out, "\n", 1) >= 0 ? 0 : -EPIPE;
finish:
        json_object_put(o);
        return r;
}

static int op_watch(const struct agent_file *f, int out, struct agent_file_result *res) {
        WatchState w = { .inotify = -EBADF, .out = out, .recursive = f->recursive };
        char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
        int r;

        w.inotify = inotify_init1(IN_CLOEXEC);
        if (w.inotify < 0)
                return -errno;
        r = watch_add(&w, f->path);
        if (r < 0) {
                /* The reader learns why there will be nothing, before the end. */
                char line[64];
                snprintf(line, sizeof(line), "{\"event\":\"error\",\"errno\":%d}\n", -r);
                (void) write_all(out, line, strlen(line));
        }
        while (r >= 0) {
                struct pollfd p[2] = { { .fd = w.inotify, .events = POLLIN }, { .fd = out } };
                ssize_t n;

                if (poll(p, 2, -1) < 0) {
                        r = errno == EINTR ? 0 : -errno;
                        continue;
                }
                /* The reader is gone: the watch is over. */
                if (p[1].revents & (POLLERR | POLLHUP)) {
                        r = 0;
                        break;
                }
                n = read(w.inotify, buf, sizeof(buf));
                if (n < 0) {
                        r = errno == EINTR || errno == EAGAIN ? 0 : -errno;
                        continue;
                }
                for (char *q = buf; r >= 0 && q < buf + n;) {
                        struct inotify_event *e = (struct inotify_event *) q;
                        const char *dir = e->wd >= 0 && (size_t) e->wd < w.n_dirs ? w.dirs[e->wd] : NULL;
                        bool is_dir = e->mask & IN_ISDIR;

                        q += sizeof(*e) + e->len;
                        if (e->mask & IN_Q_OVERFLOW)
                                r = watch_emit(&w, "overflow", NULL, NULL, false);
                        else if (!dir)
                                continue;
                        else if (e->mask & IN_CREATE) {
                                r = watch_emit(&w, "create", dir, e->name, is_dir);
                                if (r >= 0 && is_dir && w.recursive) {
                                        _cleanup_free_ char *sub = path_join(dir, e->name);
                                        if (sub)
                                                (void) watch_add(&w, sub);
                                }
                        } else if (e->mask & (IN_MODIFY | IN_CLOSE_WRITE))
                                r = watch_emit(&w, "modify", dir, e->name, is_dir);
                        else if (e->mask & IN_DELETE)
                                r = watch_emit(&w, "delete", dir, e->name, is_dir);
                        else if (e->mask & IN_MOVED_FROM)
                                r = watch_emit(&w, "move_from", dir, e->name, is_dir);
                        else if (e->mask & IN_MOVED_TO)
                                r = watch_emit(&w, "move_to", dir, e->name, is_dir);
                        else if ((e->mask & IN_DELETE_SELF) && streq(dir, f->path))
                                r = 1; /* the watched directory is gone: so is the watch */
                }
        }
        for (size_t i = 0; i < w.n_dirs; i++)
                free(w.dirs[i]);
        free(w.dirs);
        safe_close(w.inotify);
        res->has_bytes = false;
        return r == -EPIPE ? 0 : MIN(r, 0);
}

static int write_oom_score_adj(void) {
        _cleanup_close_ int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        return write_all(fd, "1000", 4);
}

_noreturn_ void file_op_run(const struct agent_file *f, int fd) {
        _cleanup_(agent_file_result_done) struct agent_file_result res = { .id = f->id };
        json_object *msg;
        sigset_t none;
        int r;

        /* The agent's signal setup, minus what it needs as PID 1; a closed pipe must be
         * EPIPE here, not a signal. */
        for (int sig = 1; sig < _NSIG; sig++)
                (void) signal(sig, SIG_DFL);
        (void) signal(SIGPIPE, SIG_IGN);
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);

        /* Under memory pressure in the sandbox, the OOM killer takes this process, whose
         * failure is answered with EIO, rather than the agent, whose death ends the sandbox.
         * Raising it needs no privilege. */
        (void) write_oom_score_adj();

        /* "mode" is the mode the caller asked for, not what our umask leaves of it. */
        (void) umask(0);

        /* The control socket to answer on, the op's descriptor, and nothing else (not the
         * terminals of running sessions). */
        r = close_all_but((int[]) { AGENT_CONTROL_FD, fd }, 2);
        if (r >= 0)
                switch (f->op) {
                case AGENT_FILE_READ:
                        r = op_read(f, fd, &res);
                        break;
                case AGENT_FILE_WRITE:
                        r = op_write(f, fd, &res);
                        break;
                case AGENT_FILE_LIST:
                        r = op_list(f, &res);
                        break;
                case AGENT_FILE_STAT:
                        r = op_stat(f, &res);
                        break;
                case AGENT_FILE_MKDIR:
                        r = op_mkdir(f);
                        break;
                case AGENT_FILE_REMOVE:
                        r = op_remove(f);
                        break;
                case AGENT_FILE_MOVE:
                        r = op_move(f);
                        break;
                case AGENT_FILE_ARCHIVE:
                        r = op_archive(f, fd, &res);
                        break;
                case AGENT_FILE_EXTRACT:
                        r = op_extract(f, fd, &res);
                        break;
                case AGENT_FILE_WATCH:
                        r = op_watch(f, fd, &res);
                        break;
                default:
                        r = -EINVAL;
                }

        /* The data is all in the pipe, and its end closed, before the result says so. */
        safe_close(fd);

        if (r < 0) {
                res.error = -r;
                res.has_stat = res.has_entries = false;
        }
        msg = agent_msg_file_result(&res);
        r = msg ? agent_send(AGENT_CONTROL_FD, msg, NULL, 0) : -ENOMEM;
        json_object_put(msg);
        if (r == -EMSGSIZE || r == -ENOMEM) {
                /* Too many entries for one datagram; or no memory to say what they were. */
                msg = agent_msg_file_result(&(struct agent_file_result) {
                        .id = f->id,
                        .error = r == -EMSGSIZE ? E2BIG : ENOMEM,
                        .has_bytes = res.has_bytes,
                        .bytes = res.bytes,
                });
                r = msg ? agent_send(AGENT_CONTROL_FD, msg, NULL, 0) : -ENOMEM;
                json_object_put(msg);
        }
        _exit(r < 0 ? EXIT_FAILURE : EXIT_SUCCESS);
}
