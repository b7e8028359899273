/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "macro.h"
#include "json-util.h"
#include "varlink-stream.h"

static int fd_set_flags(int fd) {
        int flags;

        flags = fcntl(fd, F_GETFL);
        if (flags < 0)
                return -errno;
        if (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                return -errno;
        flags = fcntl(fd, F_GETFD);
        if (flags < 0)
                return -errno;
        if (!(flags & FD_CLOEXEC) && fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0)
                return -errno;
        return 0;
}

int varlink_stream_init(VarlinkStream *s, int fd, size_t message_size_max) {
        int r;

        *s = (VarlinkStream) {
                .fd = -EBADF,
                .message_size_max = message_size_max,
        };
        r = fd_set_flags(fd);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        s->fd = fd;
        return 0;
}

static void buffer_done(VarlinkBuffer *b) {
        free(b->data);
        *b = (VarlinkBuffer) {};
}

static void fd_batches_done(VarlinkStream *s) {
        for (size_t i = 0; i < s->n_fd_batches; i++)
                for (size_t j = 0; j < s->fd_batches[i].n_fds; j++)
                        safe_close(s->fd_batches[i].fds[j]);
        s->n_fd_batches = 0;
        for (size_t i = 0; i < s->n_input_fds; i++)
                safe_close(s->input_fds[i]);
        s->n_input_fds = 0;
}

void varlink_stream_done(VarlinkStream *s) {
        fd_batches_done(s);
        s->fd = safe_close(s->fd);
        buffer_done(&s->input);
        buffer_done(&s->output);
        s->input_scanned = 0;
        s->input_messages = 0;
}

/* b is empty: gives its memory back if a large message made it large. */
static void buffer_emptied(VarlinkBuffer *b) {
        b->start = b->end = 0;
        if (b->allocated > VARLINK_STREAM_KEEP_MAX)
                buffer_done(b);
}

/* Room for n more bytes at the end of b: the consumed bytes make room first (when they
 * are in the way, or half the buffer). Returns how far the pending bytes moved. */
static ssize_t buffer_reserve(VarlinkBuffer *b, size_t n) {
        size_t shift = 0, size;
        char *p;

        if (b->start > 0 && (b->allocated - b->end < n || b->start >= b->allocated / 2)) {
                shift = b->start;
                memmove(b->data, b->data + shift, b->end - shift);
                b->end -= shift;
                b->start = 0;
        }
        if (b->allocated - b->end >= n)
                return (ssize_t) shift;

        size = MAX(b->allocated * 2, b->end + n);
        p = realloc(b->data, size);
        if (!p)
                return -ENOMEM;
        b->data = p;
        b->allocated = size;
        return (ssize_t) shift;
}

/* Counts the messages that the bytes from input_scanned on complete, checking each
 * message's size and that of the incomplete one left at the end. */
static int input_scan(VarlinkStream *s) {
        char *nul;

        while ((nul = memchr(s->input.data + s->input_scanned, 0, s->input.end - s->input_scanned))) {
                size_t end = (size_t) (nul - s->input.data);

                if (end - s->input_scanned > s->message_size_max)
                        goto oversized;
                s->input_scanned = end + 1;
                s->input_messages++;
        }
        if (s->input.end - s->input_scanned > s->message_size_max) {
                nul = NULL;
                goto oversized;
        }
        return 0;

oversized:
        s->oversized = true;
        s->discarding = !nul;
        s->input.end = s->input_scanned;
        return -EMSGSIZE;
}

/* After an oversized message: what comes is dropped, its end noted. */
static ssize_t input_discard(VarlinkStream *s, size_t n) {
        if (s->discarding && memchr(s->input.data + s->input.end - n, 0, n))
                s->discarding = false;
        s->input.end -= n;
        return (ssize_t) n;
}

ssize_t varlink_stream_read(VarlinkStream *s) {
        ssize_t n, shift;
        int r;

        shift = buffer_reserve(&s->input, VARLINK_STREAM_READ_SIZE);
        if (shift < 0)
                return shift;
        s->input_scanned -= (size_t) shift;

        struct iovec iov = { s->input.data + s->input.end, VARLINK_STREAM_READ_SIZE };
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * VARLINK_STREAM_FDS_MAX)];
        } control;
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = &control,
                .msg_controllen = sizeof(control),
        };
        bool too_many = false;

        n = recvmsg(s->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0)
                return errno == EINTR || errno == EWOULDBLOCK ? -EAGAIN : -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                int *fds = (int *) CMSG_DATA(c);
                for (size_t i = 0; i < k; i++) {
                        if (s->n_input_fds < VARLINK_STREAM_FDS_MAX)
                                s->input_fds[s->n_input_fds++] = fds[i];
                        else {
                                safe_close(fds[i]);
                                too_many = true;
                        }
                }
        }
        if (too_many || (mh.msg_flags & MSG_CTRUNC))
                return -EMSGSIZE;
        s->input.end += (size_t) n;
        if (s->oversized)
                return input_discard(s, (size_t) n);

        r = input_scan(s);
        if (r < 0)
                return r;
        return n;
}

int varlink_stream_next(VarlinkStream *s, json_object **ret) {
        json_object *m = NULL;
        const char *start, *nul;
        int r;

        if (s->input_messages == 0)
                return 0;

        start = s->input.data + s->input.start;
        nul = memchr(start, 0, s->input_scanned - s->input.start);
        /* input_scan() counted this NUL: it is there. */
        s->input.start = (size_t) (nul - s->input.data) + 1;
        s->input_messages--;
        r = json_parse_strict(start, (size_t) (nul - start), VARLINK_STREAM_DEPTH_MAX, &m);
        /* After the parse: start points into the buffer. */
        if (s->input_messages == 0 && s->input.start == s->input.end) {
                buffer_emptied(&s->input);
                s->input_scanned = 0;
        }
        if (r < 0)
                return r;
        *ret = m;
        return 1;
}

int varlink_stream_enqueue(VarlinkStream *s, json_object *m) {
        const char *text;
        ssize_t shift;
        size_t size;

        text = json_object_to_json_string_ext(m, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text)
                return -ENOMEM;
        size = strlen(text);
        if (size > s->message_size_max)
                return -EMSGSIZE;

        shift = buffer_reserve(&s->output, size + 1);
        if (shift < 0)
                return (int) shift;
        memcpy(s->output.data + s->output.end, text, size + 1);
        s->output.end += size + 1;
        s->output_enqueued += size + 1;
        return 0;
}

int varlink_stream_enqueue_with_fds(VarlinkStream *s, json_object *m, const int *fds, size_t n_fds) {
        size_t b = s->n_fd_batches;
        uint64_t offset = s->output_enqueued;
        int r;

        if (n_fds == 0)
                return varlink_stream_enqueue(s, m);
        if (n_fds > VARLINK_STREAM_FDS_MAX)
                return -EINVAL;
        if (b >= VARLINK_STREAM_FD_BATCHES_MAX)
                return -EBUSY;
        s->fd_batches[b].offset = offset;
        s->fd_batches[b].n_fds = 0;
        for (size_t i = 0; i < n_fds; i++) {
                int fd = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
                if (fd < 0) {
                        r = -errno;
                        goto fail;
                }
                s->fd_batches[b].fds[s->fd_batches[b].n_fds++] = fd;
        }
        r = varlink_stream_enqueue(s, m);
        if (r >= 0) {
                s->n_fd_batches++;
                return 0;
        }
fail:
        for (size_t i = 0; i < s->fd_batches[b].n_fds; i++)
                safe_close(s->fd_batches[b].fds[i]);
        return r;
}

size_t varlink_stream_take_fds(VarlinkStream *s, int *fds, size_t max) {
        size_t n = MIN(max, s->n_input_fds);

        memcpy(fds, s->input_fds, n * sizeof(int));
        memmove(s->input_fds, s->input_fds + n, (s->n_input_fds - n) * sizeof(int));
        s->n_input_fds -= n;
        return n;
}

ssize_t varlink_stream_write(VarlinkStream *s) {
        ssize_t n;

        if (s->output.start == s->output.end)
                return 0;

        size_t len = s->output.end - s->output.start;
        struct iovec iov = { s->output.data + s->output.start, len };
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * VARLINK_STREAM_FDS_MAX)];
        } control = {};
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        bool with_fds = false;

        if (s->n_fd_batches > 0) {
                /* A batch's descriptors go with its message's first byte: what comes before
                 * it is sent without them first. */
                uint64_t at = s->fd_batches[0].offset;
                if (at > s->output_written)
                        iov.iov_len = MIN(len, (size_t) (at - s->output_written));
                else {
                        struct cmsghdr *c;

                        mh.msg_control = &control;
                        mh.msg_controllen = CMSG_SPACE(sizeof(int) * s->fd_batches[0].n_fds);
                        c = CMSG_FIRSTHDR(&mh);
                        c->cmsg_level = SOL_SOCKET;
                        c->cmsg_type = SCM_RIGHTS;
                        c->cmsg_len = CMSG_LEN(sizeof(int) * s->fd_batches[0].n_fds);
                        memcpy(CMSG_DATA(c), s->fd_batches[0].fds, sizeof(int) * s->fd_batches[0].n_fds);
                        with_fds = true;
                        if (s->n_fd_batches > 1)
                                iov.iov_len = MIN(len, (size_t) (s->fd_batches[1].offset - s->output_written));
                }
        }
        n = sendmsg(s->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0)
                return errno == EINTR || errno == EWOULDBLOCK ? -EAGAIN : -errno;
        if (with_fds) {
                for (size_t i = 0; i < s->fd_batches[0].n_fds; i++)
                        safe_close(s->fd_batches[0].fds[i]);
                memmove(s->fd_batches, s->fd_batches + 1, (s->n_fd_batches - 1) * sizeof(s->fd_batches[0]));
                s->n_fd_batches--;
        }
        s->output_written += (size_t) n;
        s->output.start += (size_t) n;
        if (s->output.start == s->output.end)
                buffer_emptied(&s->output);
        return n;
}

int varlink_stream_flush(VarlinkStream *s) {
        ssize_t n;

        while (varlink_stream_pending_output(s) > 0) {
                n = varlink_stream_write(s);
                if (n == -EAGAIN)
                        return 0;
                if (n < 0)
                        return (int) n;
        }
        return 0;
}

int varlink_address_parse(const char *address, struct sockaddr_un *ret, socklen_t *ret_len) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        size_t n;

        if (startswith_str(address, "unix:"))
                address += strlen("unix:");
        n = strcspn(address, ";");
        if (n == 0 || (address[0] != '/' && address[0] != '@'))
                return -EINVAL;
        if (n > sizeof(sa.sun_path) - (address[0] == '/'))
                return -ENAMETOOLONG;

        memcpy(sa.sun_path, address, n);
        if (address[0] == '@')
                sa.sun_path[0] = 0;
        *ret = sa;
        *ret_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + n + (address[0] == '/'));
        return 0;
}
