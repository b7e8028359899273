/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxctl cp, cat, ls and stat: the Files methods of sandboxd-api(7). Contents never
 * pass through this process when it can help it: Upload and Download get our own
 * descriptor (the host file, standard input or output) and the agent inside the sandbox
 * reads or writes it directly. Only a descriptor the daemon does not take (a terminal,
 * /dev/null) is relayed through a pipe by a thread of ours. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "parse-util.h"
#include "sandboxctl-files.h"
#include "sandboxctl-util.h"
#include "strv.h"

#define RELAY_BUFFER_SIZE       (64U * 1024U)
#define FILE_CALL_TIMEOUT_USEC  UINT64_MAX     /* a large file takes as long as it takes */
#define STAT_CALL_TIMEOUT_USEC  (UINT64_C(60) * USEC_PER_SEC)

/* A descriptor given to Upload or Download. When the daemon would refuse ours (it takes
 * regular files, pipes and sockets), it gets one end of a pipe and a thread copies between
 * the other end and ours. Heap-allocated: a thread still blocked on a terminal when the
 * call failed is left to end with the process. */
typedef struct Relay {
        int fd;                 /* ours: the host file, standard input or output */
        int passed;             /* what the daemon gets: fd itself, or the pipe's end */
        int pipe_end;           /* the thread's end of the pipe, or -EBADF */
        bool into_fd;           /* a download: from the pipe into fd */
        bool running;
        pthread_t thread;
        int error;              /* of the thread, once joined */
} Relay;

static bool fd_is_passable(int fd) {
        struct stat st;
        int flags;

        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || (flags & O_PATH) || fstat(fd, &st) < 0)
                return false;
        return S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
}

static void *relay_thread(void *userdata) {
        Relay *r = userdata;
        int in = r->into_fd ? r->pipe_end : r->fd, out = r->into_fd ? r->fd : r->pipe_end;
        _cleanup_free_ char *buf = malloc(RELAY_BUFFER_SIZE);

        if (!buf) {
                r->error = -ENOMEM;
                goto finish;
        }

        for (;;) {
                ssize_t n = read(in, buf, RELAY_BUFFER_SIZE);
                int k;

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r->error = -errno;
                        break;
                }
                if (n == 0)
                        break;
                k = loop_write(out, buf, (size_t) n);
                if (k < 0) {
                        r->error = k;
                        break;
                }
        }

finish:
        /* An upload ends when the agent sees the end of the pipe. */
        if (!r->into_fd)
                r->pipe_end = safe_close(r->pipe_end);
        return NULL;
}

static Relay *relay_free(Relay *r) {
        if (!r)
                return NULL;
        if (r->passed != r->fd)
                r->passed = safe_close(r->passed);
        /* Still copying, an upload blocked reading a terminal: without the pipe's other end
         * its next write fails and it ends. It keeps r until then. */
        if (r->running)
                return NULL;
        safe_close(r->pipe_end);
        return mfree(r);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(Relay *, relay_free);

static int relay_new(int fd, bool into_fd, Relay **ret) {
        _cleanup_(relay_freep) Relay *r = NULL;
        int p[2], k;
        sigset_t all, saved;

        r = calloc(1, sizeof(Relay));
        if (!r)
                return -ENOMEM;
        *r = (Relay) { .fd = fd, .passed = fd, .pipe_end = -EBADF, .into_fd = into_fd };

        if (fd_is_passable(fd)) {
                *ret = TAKE_PTR(r);
                return 0;
        }

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        r->passed = into_fd ? p[1] : p[0];
        r->pipe_end = into_fd ? p[0] : p[1];

        /* The thread takes no signal: they are the main thread's, which waits on the bus. */
        sigfillset(&all);
        if (pthread_sigmask(SIG_BLOCK, &all, &saved) != 0)
                return -EINVAL;
        k = pthread_create(&r->thread, NULL, relay_thread, r);
        (void) pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (k != 0)
                return -k;
        r->running = true;

        *ret = TAKE_PTR(r);
        return 0;
}

/* Once the call succeeded: the agent closed its end, so the thread reaches the end. */
static int relay_join(Relay *r) {
        if (!r->running)
                return 0;
        r->passed = r->passed != r->fd ? safe_close(r->passed) : r->passed;
        (void) pthread_join(r->thread, NULL);
        r->running = false;
        return r->error;
}

/* "ID:PATH" names a file in sandbox ID; anything else (also "./a:b", "/x:y") is a host path. */
static int parse_sandbox_path(const char *s, char **ret_id, const char **ret_path) {
        const char *colon = strchr(s, ':');
        char *id;

        if (!colon || colon == s || memchr(s, '/', (size_t) (colon - s)))
                return 0;
        if (colon[1] == '\0')
                return -EINVAL;

        id = strndup(s, (size_t) (colon - s));
        if (!id)
                return -ENOMEM;
        *ret_id = id;
        *ret_path = colon + 1;
        return 1;
}

static const char *path_basename(const char *p) {
        const char *s = strrchr(p, '/');
        return s ? s + 1 : p;
}

static char *path_join2(const char *dir, const char *name) {
        size_t l = strlen(dir);
        char *p;

        if (asprintf(&p, "%s%s%s", dir, l > 0 && dir[l - 1] == '/' ? "" : "/", name) < 0)
                return NULL;
        return p;
}

/* The daemon says "PATH: strerror"; we say which sandbox, once. */
static const char *file_error_reason(const sd_bus_error *e, const char *path, int r) {
        const char *m = bus_error_message(e, r);
        size_t l = strlen(path);

        if (strncmp(m, path, l) == 0 && m[l] == ':' && m[l + 1] == ' ')
                return m + l + 2;
        return m;
}

typedef struct FileEntry {
        const char *path;       /* pointers into the reply */
        const char *type;
        uint64_t size;
        uint32_t mode;
        int64_t mtime;
        const char *target;
        const void *path_raw;   /* the exact bytes of a name that is not valid UTF-8 */
        size_t path_raw_size;   /* (path is then an escaped form); 0 otherwise */
        const void *target_raw;
        size_t target_raw_size;
} FileEntry;

/* Returns 0 at the end of an array. */
static int entry_read(sd_bus_message *m, FileEntry *ret) {
        int r;

        r = sd_bus_message_enter_container(m, 'r', "sstuxsayay");
        if (r <= 0)
                return r;
        r = sd_bus_message_read(m, "sstuxs", &ret->path, &ret->type, &ret->size, &ret->mode,
                                &ret->mtime, &ret->target);
        if (r >= 0)
                r = sd_bus_message_read_array(m, 'y', &ret->path_raw, &ret->path_raw_size);
        if (r >= 0)
                r = sd_bus_message_read_array(m, 'y', &ret->target_raw, &ret->target_raw_size);
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        return r < 0 ? r : 1;
}

/* An entry's name or target as it may be shown on a terminal. */
static char *entry_quote(const char *text, const void *raw, size_t raw_size) {
        return raw_size > 0 ? quote_name(raw, raw_size) : quote_name(text, strlen(text));
}

static int call_stat(sd_bus *bus, const char *spath, const char *path, sd_bus_error *error,
                     sd_bus_message **ret_reply, FileEntry *ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_call_method(bus, BUS_NAME, spath, SANDBOX_INTERFACE, "Stat", error, &reply, "s", path);
        if (r < 0)
                return r;
        r = entry_read(reply, ret);
        if (r < 0)
                return sd_bus_error_set_errno(error, r);
        *ret_reply = TAKE_PTR(reply);
        return 0;
}

/* Why a file cannot be read, from its type; 0 when it is a regular file. */
static int entry_read_error(const FileEntry *e) {
        if (streq(e->type, "file"))
                return 0;
        if (streq(e->type, "dir"))
                return -EISDIR;
        if (streq(e->type, "link"))
                return -ELOOP;  /* reads never follow a final symlink */
        return -EBADFD;         /* a FIFO, socket or device */
}

static const char *entry_error_reason(const FileEntry *e, int r) {
        if (r == -EBADFD)
                return "Not a regular file";
        return strerror(-r);
}

/* Upload (into_fd false) or Download (true) of path in the sandbox at spath, from or into fd. */
static int transfer(sd_bus *bus, const char *spath, const char *path, int fd, bool into_fd, const CopyOptions *o,
                    int mode, uint64_t *ret_bytes, sd_bus_error *error, int *ret_signal) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        _cleanup_(relay_freep) Relay *relay = NULL;
        uint64_t bytes;
        int r;

        r = relay_new(fd, into_fd, &relay);
        if (r < 0)
                return sd_bus_error_set_errno(error, r);

        r = sd_bus_message_new_method_call(bus, &m, BUS_NAME, spath, SANDBOX_INTERFACE,
                                           into_fd ? "Download" : "Upload");
        if (r >= 0)
                r = sd_bus_message_append(m, "sh", path, relay->passed);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0 && into_fd && o && o->max != UINT64_MAX)
                r = sd_bus_message_append(m, "{sv}", "Max", "t", o->max);
        if (r >= 0 && !into_fd && mode >= 0)
                r = sd_bus_message_append(m, "{sv}", "Mode", "u", (uint32_t) mode);
        if (r >= 0 && !into_fd && o && o->parents)
                r = sd_bus_message_append(m, "{sv}", "CreateParents", "b", 1);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0)
                return sd_bus_error_set_errno(error, r);

        r = bus_call_interruptible(bus, m, FILE_CALL_TIMEOUT_USEC, error, &reply, ret_signal);
        /* The message holds a copy of the pipe's end: the thread sees its end only without it. */
        m = sd_bus_message_unref(m);
        if (r < 0) {
                /* Refused or failed: the daemon let go of the pipe, so a download's thread
                 * reaches its end; joined here, it cannot write into the next file's output. */
                if (r != -EINTR && into_fd)
                        (void) relay_join(relay);
                return r;
        }

        r = sd_bus_message_read(reply, "t", &bytes);
        if (r < 0)
                return sd_bus_error_set_errno(error, r);

        r = relay_join(relay);
        if (r < 0)
                return sd_bus_error_set_errno(error, r);

        if (ret_bytes)
                *ret_bytes = bytes;
        return 0;
}

static int copy_to_sandbox(sd_bus *bus, const char *src, const char *id, const char *path, const CopyOptions *o) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *stat_reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *spath = NULL, *target = NULL;
        _cleanup_close_ int owned = -EBADF;
        bool from_stdin = streq(src, "-");
        int fd = STDIN_FILENO, mode = -1, sig = 0, r;
        FileEntry e;

        if (!from_stdin) {
                struct stat st;

                /* The user's own file: their symlinks are followed, as cp(1) does. */
                fd = owned = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        return log_error_errno(errno, "Failed to copy %s: %m", src);
                if (fstat(fd, &st) < 0)
                        return log_error_errno(errno, "Failed to copy %s: %m", src);
                if (S_ISDIR(st.st_mode))
                        return log_error_errno(EISDIR, "Failed to copy %s: %m (cp copies single files; "
                                               "use tar through '%s exec' for a tree)", src,
                                               program_invocation_short_name);
                if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISSOCK(st.st_mode))
                        return log_error_errno(EINVAL, "Failed to copy %s: Not a regular file", src);
                mode = (int) (st.st_mode & 07777);
        }

        r = get_sandbox_path(bus, id, &error, &spath);
        if (r < 0)
                return log_error_errno(r, "Failed to copy to %s:%s: %s", id, path, bus_error_message(&error, r));

        /* Into a directory, under the source's name, as cp(1) does. */
        if (path[strlen(path) - 1] == '/' ||
            (call_stat(bus, spath, path, NULL, &stat_reply, &e) >= 0 && streq(e.type, "dir"))) {
                if (from_stdin)
                        return log_error_errno(EISDIR, "Failed to copy to %s:%s: %m; name the file to "
                                               "write standard input to", id, path);
                target = path_join2(path, path_basename(src));
                if (!target)
                        return log_oom();
                path = target;
        }

        r = transfer(bus, spath, path, fd, /* into_fd= */ false, o, mode, NULL, &error, &sig);
        if (r == -EINTR && sig > 0)
                return 128 + sig;
        if (r < 0)
                return log_error_errno(r, "Failed to copy to %s:%s: %s", id, path,
                                       file_error_reason(&error, path, r));
        return 0;
}

static int copy_from_sandbox(sd_bus *bus, const char *id, const char *path, const char *dest, const CopyOptions *o) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *stat_reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *spath = NULL, *target = NULL;
        _cleanup_close_ int owned = -EBADF;
        bool to_stdout = streq(dest, "-"), created = false;
        mode_t mode = o->mode_set ? o->mode : 0644;
        int fd = STDOUT_FILENO, sig = 0, r;
        struct stat st;
        FileEntry e;

        r = get_sandbox_path(bus, id, &error, &spath);
        if (r < 0)
                return log_error_errno(r, "Failed to copy %s:%s: %s", id, path, bus_error_message(&error, r));

        /* Before the destination is created or truncated: a missing source leaves it as it was. */
        r = call_stat(bus, spath, path, &error, &stat_reply, &e);
        if (r < 0)
                return log_error_errno(r, "Failed to copy %s:%s: %s", id, path, file_error_reason(&error, path, r));
        r = entry_read_error(&e);
        if (r == -EISDIR)
                return log_error_errno(r, "Failed to copy %s:%s: %m (cp copies single files; "
                                       "use '%s exec %s -- tar -c ...' for a tree)", id, path,
                                       program_invocation_short_name, id);
        if (r < 0)
                return log_error_errno(r, "Failed to copy %s:%s: %s", id, path, entry_error_reason(&e, r));

        if (!to_stdout) {
                if (dest[strlen(dest) - 1] == '/' || (stat(dest, &st) >= 0 && S_ISDIR(st.st_mode))) {
                        target = path_join2(dest, path_basename(path));
                        if (!target)
                                return log_oom();
                        dest = target;
                }

                /* O_EXCL first, to know whether the file is ours to remove should the copy fail. */
                fd = owned = open(dest, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, mode);
                if (fd >= 0) {
                        created = true;
                        if (o->mode_set && fchmod(fd, mode) < 0) /* exactly, not through the umask */
                                r = log_error_errno(errno, "Failed to set the mode of %s: %m", dest);
                } else if (errno == EEXIST)
                        fd = owned = open(dest, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        return log_error_errno(errno, "Failed to copy to %s: %m", dest);
                if (r < 0)
                        goto fail;
        }

        r = transfer(bus, spath, path, fd, /* into_fd= */ true, o, -1, NULL, &error, &sig);
        if (r == -EINTR && sig > 0) {
                r = 128 + sig;
                goto fail;
        }
        if (r < 0) {
                r = log_error_errno(r, "Failed to copy %s:%s: %s", id, path, file_error_reason(&error, path, r));
                goto fail;
        }
        return 0;

fail:
        if (created)
                (void) unlink(dest);
        return r;
}

int files_copy(sd_bus *bus, const char *src, const char *dest, const CopyOptions *o) {
        _cleanup_free_ char *src_id = NULL, *dest_id = NULL;
        const char *src_path = NULL, *dest_path = NULL;
        int a, b;

        a = parse_sandbox_path(src, &src_id, &src_path);
        b = parse_sandbox_path(dest, &dest_id, &dest_path);
        if (a == -ENOMEM || b == -ENOMEM)
                return log_oom();
        if (a < 0 || b < 0)
                return log_error("Missing path after '%s': expected ID:PATH.", a < 0 ? src : dest);
        if (a > 0 && b > 0)
                return log_error("Both %s and %s are in a sandbox: one side of cp must be a host path or '-'.",
                                 src, dest);
        if (a == 0 && b == 0)
                return log_error("Neither %s nor %s is in a sandbox: one side of cp must be ID:PATH.", src, dest);

        if (b > 0)
                return copy_to_sandbox(bus, src, dest_id, dest_path, o);
        return copy_from_sandbox(bus, src_id, src_path, dest, o);
}

int files_cat(sd_bus *bus, const char *id, char **paths, uint64_t max) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *spath = NULL;
        CopyOptions o = { .max = max };
        int ret = 0, sig = 0, r;

        r = get_sandbox_path(bus, id, &error, &spath);
        if (r < 0)
                return log_error_errno(r, "Failed to get sandbox %s: %s", id, bus_error_message(&error, r));

        for (char **p = paths; *p; p++) {
                sd_bus_error_free(&error);

                r = transfer(bus, spath, *p, STDOUT_FILENO, /* into_fd= */ true, &o, -1, NULL, &error, &sig);
                if (r == -EINTR && sig > 0)
                        return 128 + sig;
                if (r >= 0)
                        continue;
                if (sd_bus_error_get_errno(&error) == EPIPE)
                        return -EPIPE;  /* the reader went away, as with cat(1): nothing to say */

                /* "Invalid argument" says little: the file's type says why. */
                if (sd_bus_error_has_name(&error, SD_BUS_ERROR_INVALID_ARGS)) {
                        _cleanup_(sd_bus_message_unrefp) sd_bus_message *stat_reply = NULL;
                        FileEntry e;
                        int k;

                        if (call_stat(bus, spath, *p, NULL, &stat_reply, &e) >= 0 && (k = entry_read_error(&e)) < 0) {
                                r = log_error_errno(k, "Failed to read %s:%s: %s", id, *p, entry_error_reason(&e, k));
                                ret = ret ?: r;
                                continue;
                        }
                }
                r = log_error_errno(r, "Failed to read %s:%s: %s", id, *p, file_error_reason(&error, *p, r));
                ret = ret ?: r;
        }

        return ret;
}

static const char *format_mtime(char *buf, size_t l, int64_t usec) {
        struct tm tm;
        time_t t;

        if (usec <= 0)
                return "n/a";
        t = (time_t) (usec / (int64_t) USEC_PER_SEC);
        if (!localtime_r(&t, &tm) || strftime(buf, l, "%Y-%m-%d %H:%M:%S", &tm) == 0)
                return "n/a";
        return buf;
}

static int entry_to_json(const FileEntry *e, json_object **ret) {
        _cleanup_json_ json_object *o = NULL;
        int r;

        o = json_object_new_object();
        if (!o)
                return -ENOMEM;

        r = json_add_string(o, "path", e->path);
        if (r >= 0)
                r = json_add_string(o, "type", e->type);
        if (r >= 0)
                r = json_add(o, "size", json_object_new_uint64(e->size));
        if (r >= 0)
                r = json_add(o, "mode", json_object_new_int64(e->mode));
        if (r >= 0)
                r = json_add(o, "mtime", json_object_new_int64(e->mtime));
        if (r >= 0 && streq(e->type, "link"))
                r = json_add_string(o, "target", e->target);
        /* Names that are not valid UTF-8: the escaped form above, the exact bytes here. */
        if (r >= 0 && e->path_raw_size > 0)
                r = json_add_hex(o, "path_hex", e->path_raw, e->path_raw_size);
        if (r >= 0 && e->target_raw_size > 0)
                r = json_add_hex(o, "target_hex", e->target_raw, e->target_raw_size);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(o);
        return 0;
}

int files_list(sd_bus *bus, const char *id, const char *path, unsigned depth, bool json) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_json_ json_object *ja = NULL;
        _cleanup_free_ char *spath = NULL;
        _cleanup_free_ FileEntry *list = NULL;
        size_t n = 0, allocated = 0;
        int w_type = (int) strlen("TYPE"), w_size = (int) strlen("SIZE");
        int r;

        r = get_sandbox_path(bus, id, &error, &spath);
        if (r < 0)
                return log_error_errno(r, "Failed to get sandbox %s: %s", id, bus_error_message(&error, r));

        r = sd_bus_call_method(bus, BUS_NAME, spath, SANDBOX_INTERFACE, "ListFiles", &error, &reply,
                               "su", path, (uint32_t) depth);
        if (r < 0)
                return log_error_errno(r, "Failed to list %s:%s: %s", id, path, file_error_reason(&error, path, r));

        r = sd_bus_message_enter_container(reply, 'a', "(sstuxsayay)");
        if (r < 0)
                return log_error_errno(r, "Failed to parse ListFiles reply: %m");
        for (;;) {
                FileEntry e;

                r = entry_read(reply, &e);
                if (r < 0)
                        return log_error_errno(r, "Failed to parse ListFiles reply: %m");
                if (r == 0)
                        break;

                if (n >= allocated) {
                        size_t k = allocated == 0 ? 64 : allocated * 2;
                        FileEntry *p = reallocarray(list, k, sizeof(FileEntry));

                        if (!p)
                                return log_oom();
                        list = p;
                        allocated = k;
                }
                list[n++] = e;
        }

        if (json) {
                ja = json_object_new_array();
                if (!ja)
                        return log_oom();
                for (size_t i = 0; i < n; i++) {
                        json_object *o = NULL;

                        r = entry_to_json(list + i, &o);
                        if (r < 0 || json_object_array_add(ja, o) < 0) {
                                json_object_put(o);
                                return log_oom();
                        }
                }
                return print_json(ja);
        }

        for (size_t i = 0; i < n; i++) {
                char buf[32];

                w_type = MAX(w_type, (int) strlen(list[i].type));
                w_size = MAX(w_size, snprintf(buf, sizeof(buf), "%" PRIu64, list[i].size));
        }

        if (n > 0) {
                printf("%-*s %-4s %*s %-19s %s\n", w_type, "TYPE", "MODE", w_size, "SIZE", "MODIFIED", "NAME");
                for (size_t i = 0; i < n; i++) {
                        const FileEntry *e = list + i;
                        _cleanup_free_ char *name = NULL, *target = NULL;
                        bool link = streq(e->type, "link");
                        char ts[32];

                        name = entry_quote(e->path, e->path_raw, e->path_raw_size);
                        target = link ? entry_quote(e->target, e->target_raw, e->target_raw_size) : strdup("");
                        if (!name || !target)
                                return log_oom();
                        printf("%-*s %04" PRIo32 " %*" PRIu64 " %-19s %s%s%s\n", w_type, e->type, e->mode, w_size,
                               e->size, format_mtime(ts, sizeof(ts), e->mtime), name, link ? " -> " : "", target);
                }
                putchar('\n');
        }
        printf("%zu %s listed.\n", n, n == 1 ? "file" : "files");
        return 0;
}

int files_stat(sd_bus *bus, const char *id, const char *path, bool json) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *spath = NULL, *name = NULL, *target = NULL;
        char ts[32];
        FileEntry e;
        int r;

        r = get_sandbox_path(bus, id, &error, &spath);
        if (r < 0)
                return log_error_errno(r, "Failed to get sandbox %s: %s", id, bus_error_message(&error, r));

        r = call_stat(bus, spath, path, &error, &reply, &e);
        if (r < 0)
                return log_error_errno(r, "Failed to stat %s:%s: %s", id, path, file_error_reason(&error, path, r));

        if (json) {
                _cleanup_json_ json_object *o = NULL;

                r = entry_to_json(&e, &o);
                if (r >= 0)
                        r = json_add_string(o, "path", path); /* Stat's own is relative to itself: empty */
                if (r < 0)
                        return log_oom();
                return print_json(o);
        }

        name = quote_name(path, strlen(path));
        target = entry_quote(e.target, e.target_raw, e.target_raw_size);
        if (!name || !target)
                return log_oom();
        printf("    Path: %s\n"
               "    Type: %s\n"
               "    Size: %" PRIu64 "\n"
               "    Mode: %04" PRIo32 "\n"
               "Modified: %s\n",
               name, e.type, e.size, e.mode, format_mtime(ts, sizeof(ts), e.mtime));
        if (streq(e.type, "link"))
                printf("  Target: %s\n", target);
        return 0;
}
