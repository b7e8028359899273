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

#include <systemd/sd-bus-protocol.h>

#include "agent-protocol.h"
#include "macro.h"
#include "parse-util.h"
#include "sandboxctl-files.h"
#include "sandboxctl-util.h"
#include "strv.h"

#define RELAY_BUFFER_SIZE       (64U * 1024U)

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
static const char *file_error_reason(const SandboxClientError *e, const char *path, int r) {
        const char *m = sandbox_client_error_message(e, r);
        size_t l = strlen(path);

        if (strncmp(m, path, l) == 0 && m[l] == ':' && m[l + 1] == ' ')
                return m + l + 2;
        return m;
}

typedef SandboxFileEntry FileEntry;

/* An entry's name or target as it may be shown on a terminal. */
static char *entry_quote(const char *text, const void *raw, size_t raw_size) {
        return raw_size > 0 ? quote_name(raw, raw_size) : quote_name(text, strlen(text));
}

/* Why a file cannot be read, from its type (Stat follows a final symlink); 0 when it is a
 * regular file. */
static int entry_read_error(const FileEntry *e) {
        if (streq(e->type, "file"))
                return 0;
        if (streq(e->type, "dir"))
                return -EISDIR;
        return -EBADFD;         /* a FIFO, socket or device */
}

/* Upload (into_fd false) or Download (true) of path in sandbox h, from or into fd. */
static int transfer(SandboxHandle *h, const char *path, int fd, bool into_fd, const CopyOptions *o,
                    int mode, SandboxClientError *error, int *ret_signal) {
        SandboxClient *c = sandbox_handle_client(h);
        SandboxWriteOptions w = { .mode = mode, .create_parents = o && o->parents };
        _cleanup_(relay_freep) Relay *relay = NULL;
        int r;

        r = relay_new(fd, into_fd, &relay);
        if (r < 0)
                return r;

        r = sandbox_client_interrupt_begin(c, NULL, NULL);
        if (r < 0)
                return r;
        if (into_fd)
                r = sandbox_handle_download(h, path, relay->passed, o ? o->max : UINT64_MAX, NULL, error);
        else
                r = sandbox_handle_upload(h, path, relay->passed, &w, NULL, error);
        *ret_signal = sandbox_client_interrupted(c);
        sandbox_client_interrupt_end(c);
        if (r < 0) {
                /* Refused or failed: the daemon let go of the pipe, so a download's thread
                 * reaches its end; joined here, it cannot write into the next file's output. */
                if (r != -EINTR && into_fd)
                        (void) relay_join(relay);
                return r;
        }

        return relay_join(relay);
}

static int copy_to_sandbox(SandboxClient *c, const char *src, const char *id, const char *path, const CopyOptions *o) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_file_entry_done) FileEntry e = {};
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        _cleanup_free_ char *target = NULL;
        _cleanup_close_ int owned = -EBADF;
        bool from_stdin = streq(src, "-");
        int fd = STDIN_FILENO, mode = -1, sig = 0, r;

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

        r = sandbox_client_get(c, id, &h, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to copy to %s:%s: %s", id, path, sandbox_client_error_message(&error, r));

        /* Into a directory, under the source's name, as cp(1) does. */
        if (path[strlen(path) - 1] == '/' ||
            (sandbox_handle_stat(h, path, &e, NULL) >= 0 && streq(e.type, "dir"))) {
                if (from_stdin)
                        return log_error_errno(EISDIR, "Failed to copy to %s:%s: %m; name the file to "
                                               "write standard input to", id, path);
                target = path_join2(path, path_basename(src));
                if (!target)
                        return log_oom();
                path = target;
        }

        r = transfer(h, path, fd, /* into_fd= */ false, o, mode, &error, &sig);
        if (r == -EINTR && sig > 0)
                return 128 + sig;
        if (r < 0)
                return log_error_errno(r, "Failed to copy to %s:%s: %s", id, path,
                                       file_error_reason(&error, path, r));
        return 0;
}

static int copy_from_sandbox(SandboxClient *c, const char *id, const char *path, const char *dest, const CopyOptions *o) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_file_entry_done) FileEntry e = {};
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        _cleanup_free_ char *target = NULL;
        _cleanup_close_ int owned = -EBADF;
        bool to_stdout = streq(dest, "-"), created = false;
        mode_t mode = o->mode_set ? o->mode : 0644;
        int fd = STDOUT_FILENO, sig = 0, r;
        struct stat st;

        r = sandbox_client_get(c, id, &h, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to copy %s:%s: %s", id, path, sandbox_client_error_message(&error, r));

        /* Before the destination is created or truncated: a missing source leaves it as it was. */
        r = sandbox_handle_stat(h, path, &e, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to copy %s:%s: %s", id, path, file_error_reason(&error, path, r));
        r = entry_read_error(&e);
        if (r == -EISDIR)
                return log_error_errno(r, "Failed to copy %s:%s: %m (cp copies single files; "
                                       "use '%s exec %s -- tar -c ...' for a tree)", id, path,
                                       program_invocation_short_name, id);
        if (r < 0)  /* the words of sandboxd's NotRegularFile */
                return log_error_errno(r, "Failed to copy %s:%s: not a regular file: %s", id, path,
                                       agent_file_type_describe(agent_file_type_from_string(e.type)));

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

        r = transfer(h, path, fd, /* into_fd= */ true, o, -1, &error, &sig);
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

int files_copy(SandboxClient *c, const char *src, const char *dest, const CopyOptions *o) {
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
                return copy_to_sandbox(c, src, dest_id, dest_path, o);
        return copy_from_sandbox(c, src_id, src_path, dest, o);
}

int files_cat(SandboxClient *c, const char *id, char **paths, uint64_t max) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        CopyOptions o = { .max = max };
        int ret = 0, sig = 0, r;

        r = sandbox_get(c, id, &h);
        if (r < 0)
                return r;

        for (char **p = paths; *p; p++) {
                sandbox_client_error_done(&error);

                r = transfer(h, *p, STDOUT_FILENO, /* into_fd= */ true, &o, -1, &error, &sig);
                if (r == -EINTR && sig > 0)
                        return 128 + sig;
                if (r >= 0)
                        continue;
                if (r == -EPIPE)
                        return -EPIPE;  /* the reader went away, as with cat(1): nothing to say */

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

typedef struct FileEntries {
        FileEntry *items;
        size_t n;
} FileEntries;

static void file_entries_done(FileEntries *l) {
        sandbox_file_entry_array_free(l->items, l->n);
}

int files_list(SandboxClient *c, const char *id, const char *path, unsigned depth, bool json) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        _cleanup_json_ json_object *ja = NULL;
        _cleanup_(file_entries_done) FileEntries entries = {};
        int w_type = (int) strlen("TYPE"), w_size = (int) strlen("SIZE");
        int r;

        r = sandbox_get(c, id, &h);
        if (r < 0)
                return r;

        r = sandbox_handle_list_files(h, path, depth, &entries.items, &entries.n, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to list %s:%s: %s", id, path, file_error_reason(&error, path, r));
        const FileEntry *list = entries.items;
        size_t n = entries.n;

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

int files_stat(SandboxClient *c, const char *id, const char *path, bool json) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        _cleanup_(sandbox_file_entry_done) FileEntry e = {};
        _cleanup_(sandbox_handle_freep) SandboxHandle *h = NULL;
        _cleanup_free_ char *name = NULL, *target = NULL;
        char ts[32];
        int r;

        r = sandbox_get(c, id, &h);
        if (r < 0)
                return r;

        r = sandbox_handle_stat(h, path, &e, &error);
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
