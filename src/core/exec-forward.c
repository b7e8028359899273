/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "exec-forward.h"
#include "fd-util.h"
#include "macro.h"

#define FORWARD_CHUNK (64U * 1024U)
/* As much as the core reads of captured output per turn of the loop. */
#define FORWARD_MAX_PER_CALL (1024U * 1024U)

typedef enum ForwardKind {
        FORWARD_PIPE,    /* spliced: both ends are pipes, so nothing blocks */
        FORWARD_SOCKET,  /* read, then send(MSG_DONTWAIT): the caller's socket is not ours to set O_NONBLOCK on */
        FORWARD_NULL,    /* /dev/null: read and dropped */
        FORWARD_FILE,    /* a regular file, given as it is: counted by how far it grew */
} ForwardKind;

struct ExecForward {
        ForwardKind kind;
        int src;                 /* our pipe's read end; -EBADF at its end or once the reader left */
        int dst;                 /* the caller's */
        sd_event *event;
        sd_event_source *src_source, *dst_source;
        char *buf;               /* FORWARD_SOCKET: read and not yet sent */
        size_t start, end;
        uint64_t *counter;
        uint64_t file_start;     /* FORWARD_FILE: its size (O_APPEND) or offset at the start */
        bool append;
        bool finishing, out;
        exec_forward_done_t done;
        void *userdata;
};

ExecForward *exec_forward_free(ExecForward *f) {
        if (!f)
                return NULL;
        sd_event_source_disable_unref(f->src_source);
        sd_event_source_disable_unref(f->dst_source);
        safe_close(f->src);
        safe_close(f->dst);
        free(f->buf);
        return mfree(f);
}

/* The end of the source, or the caller's reader gone: then the process sees EPIPE on its
 * next write, as it would have writing to the caller's descriptor itself. */
static void forward_close(ExecForward *f) {
        f->src_source = sd_event_source_disable_unref(f->src_source);
        f->dst_source = sd_event_source_disable_unref(f->dst_source);
        f->src = safe_close(f->src);
        f->start = f->end = 0;
}

/* Waits for the caller's side to take more (on) or for the process to write (off). */
static int forward_wait_dst(ExecForward *f, bool on);

static bool forward_is_out(ExecForward *f) {
        int avail = 0;

        if (f->src < 0)
                return true;
        if (f->end > f->start)
                return false;
        return ioctl(f->src, FIONREAD, &avail) < 0 || avail == 0;
}

/* One step: > 0 bytes moved, 0 nothing to move now (waiting set up), -EPIPE ended. */
static ssize_t forward_step(ExecForward *f) {
        ssize_t n;
        int avail = 0;

        switch (f->kind) {
        case FORWARD_PIPE:
                n = splice(f->src, NULL, f->dst, NULL, FORWARD_CHUNK, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
                if (n > 0) {
                        *f->counter += (uint64_t) n;
                        return n;
                }
                if (n == 0 || (errno != EAGAIN && errno != EINTR))
                        return -EPIPE;
                if (errno == EINTR)
                        return 1;
                /* Either the process wrote nothing more, or the caller's pipe is full. */
                if (ioctl(f->src, FIONREAD, &avail) == 0 && avail > 0)
                        return forward_wait_dst(f, true) < 0 ? -EPIPE : 0;
                return forward_wait_dst(f, false) < 0 ? -EPIPE : 0;

        case FORWARD_SOCKET:
                if (f->end == f->start) {
                        n = read(f->src, f->buf, FORWARD_CHUNK);
                        if (n < 0 && errno == EINTR)
                                return 1;
                        if (n < 0 && errno == EAGAIN)
                                return forward_wait_dst(f, false) < 0 ? -EPIPE : 0;
                        if (n <= 0)
                                return -EPIPE;
                        *f->counter += (uint64_t) n;
                        f->start = 0;
                        f->end = (size_t) n;
                }
                n = send(f->dst, f->buf + f->start, f->end - f->start, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        return 1;
                if (n < 0 && errno == EAGAIN)
                        return forward_wait_dst(f, true) < 0 ? -EPIPE : 0;
                if (n < 0)
                        return -EPIPE;
                f->start += (size_t) n;
                if (f->start == f->end)
                        f->start = f->end = 0;
                return n > 0 ? n : 1;

        case FORWARD_NULL: {
                char buf[FORWARD_CHUNK];

                n = read(f->src, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        return 1;
                if (n < 0 && errno == EAGAIN)
                        return 0;
                if (n <= 0)
                        return -EPIPE;
                *f->counter += (uint64_t) n;
                return n;
        }
        case FORWARD_FILE:
                break;
        }
        return 0;
}

/* Moves what can be moved now. May call done (last: f may be gone after it). */
static void forward_pump(ExecForward *f) {
        size_t total = 0;

        while (f->src >= 0 && total < FORWARD_MAX_PER_CALL) {
                ssize_t n = forward_step(f);
                if (n < 0)
                        forward_close(f);
                if (n <= 0)
                        break;
                total += (size_t) n;
        }
        if (f->finishing && !f->out && forward_is_out(f)) {
                f->out = true;
                f->done(f, f->userdata);
        }
}

static int on_src(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        forward_pump(userdata);
        return 0;
}

static int on_dst(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ExecForward *f = userdata;

        if (revents & (EPOLLERR | EPOLLHUP)) {
                forward_close(f);
                if (f->finishing && !f->out) {
                        f->out = true;
                        f->done(f, f->userdata);
                }
                return 0;
        }
        forward_pump(f);
        return 0;
}

static int forward_wait_dst(ExecForward *f, bool on) {
        int r;

        if (on && !f->dst_source) {
                r = sd_event_add_io(f->event, &f->dst_source, f->dst, EPOLLOUT, on_dst, f);
                if (r < 0)
                        return r;
        }
        if (f->dst_source) {
                r = sd_event_source_set_enabled(f->dst_source, on ? SD_EVENT_ON : SD_EVENT_OFF);
                if (r < 0)
                        return r;
        }
        return sd_event_source_set_enabled(f->src_source, on ? SD_EVENT_OFF : SD_EVENT_ON);
}

int exec_forward_new(sd_event *event, int dst, uint64_t *counter, exec_forward_done_t done, void *userdata,
                     ExecForward **ret, int *ret_process_fd) {
        _cleanup_close_ int dst_fd = dst;
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };
        ExecForward *f;
        struct stat st;
        int r;

        if (fstat(dst_fd, &st) < 0)
                return -errno;
        f = calloc(1, sizeof(ExecForward));
        if (!f)
                return -ENOMEM;
        *f = (ExecForward) { .src = -EBADF, .dst = -EBADF, .event = event, .counter = counter, .done = done,
                             .userdata = userdata };

        if (S_ISFIFO(st.st_mode))
                f->kind = FORWARD_PIPE;
        else if (S_ISSOCK(st.st_mode))
                f->kind = FORWARD_SOCKET;
        else if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))
                f->kind = FORWARD_NULL;
        else if (S_ISREG(st.st_mode)) {
                int flags = fcntl(dst_fd, F_GETFL);
                off_t pos = lseek(dst_fd, 0, SEEK_CUR);

                f->kind = FORWARD_FILE;
                f->append = flags >= 0 && (flags & O_APPEND);
                f->file_start = f->append ? (uint64_t) st.st_size : pos >= 0 ? (uint64_t) pos : 0;
                f->dst = fcntl(dst_fd, F_DUPFD_CLOEXEC, 3);
                if (f->dst < 0) {
                        free(f);
                        return -errno;
                }
                *ret_process_fd = TAKE_FD(dst_fd);
                *ret = f;
                return 0;
        } else {
                /* A terminal (or another device): the process's own, not counted. */
                free(f);
                *ret_process_fd = TAKE_FD(dst_fd);
                *ret = NULL;
                return 0;
        }

        if (pipe2(p, O_CLOEXEC) < 0 || fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
                free(f);
                return -errno;
        }
        if (f->kind == FORWARD_SOCKET && !(f->buf = malloc(FORWARD_CHUNK))) {
                free(f);
                return -ENOMEM;
        }
        f->src = TAKE_FD(p[0]);
        f->dst = f->kind == FORWARD_NULL ? -EBADF : TAKE_FD(dst_fd);
        r = sd_event_add_io(event, &f->src_source, f->src, EPOLLIN, on_src, f);
        if (r < 0) {
                exec_forward_free(f);
                return r;
        }
        *ret_process_fd = TAKE_FD(p[1]);
        *ret = f;
        return 1;
}

bool exec_forward_finish(ExecForward *f) {
        if (f->kind == FORWARD_FILE) {
                struct stat st;
                off_t pos = lseek(f->dst, 0, SEEK_CUR);
                uint64_t now = f->append ? (fstat(f->dst, &st) == 0 ? (uint64_t) st.st_size : 0) :
                                           pos >= 0 ? (uint64_t) pos : 0;

                if (now > f->file_start)
                        *f->counter += now - f->file_start;
                f->file_start = now;
                return true;
        }
        forward_pump(f);   /* not finishing yet: done is not called from here */
        if (forward_is_out(f))
                return true;
        f->finishing = true;
        return false;
}

void exec_forward_abandon(ExecForward *f) {
        f->finishing = false;
        f->out = true;
}
