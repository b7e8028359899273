/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include "macro.h"
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

void varlink_stream_done(VarlinkStream *s) {
        s->fd = safe_close(s->fd);
        s->input = mfree(s->input);
        s->output = mfree(s->output);
        s->input_start = s->input_end = s->input_scanned = s->input_allocated = 0;
        s->input_messages = 0;
        s->output_start = s->output_end = s->output_allocated = 0;
}

/* Room for one more read at the end of the input: consumed bytes go first. */
static int input_make_room(VarlinkStream *s) {
        size_t size;
        char *p;

        if (s->input_start > 0 && (s->input_start >= s->input_allocated / 2 ||
                                   s->input_allocated - s->input_end < VARLINK_STREAM_READ_SIZE)) {
                memmove(s->input, s->input + s->input_start, s->input_end - s->input_start);
                s->input_end -= s->input_start;
                s->input_scanned -= s->input_start;
                s->input_start = 0;
        }
        if (s->input_allocated - s->input_end >= VARLINK_STREAM_READ_SIZE)
                return 0;

        size = MAX(s->input_allocated * 2, s->input_end + VARLINK_STREAM_READ_SIZE);
        p = realloc(s->input, size);
        if (!p)
                return -ENOMEM;
        s->input = p;
        s->input_allocated = size;
        return 0;
}

/* Counts the messages that the bytes from input_scanned on complete, checking each
 * message's size and that of the incomplete one left at the end. */
static int input_scan(VarlinkStream *s) {
        char *nul;

        while ((nul = memchr(s->input + s->input_scanned, 0, s->input_end - s->input_scanned))) {
                size_t end = (size_t) (nul - s->input);

                if (end - s->input_scanned > s->message_size_max)
                        return -EMSGSIZE;
                s->input_scanned = end + 1;
                s->input_messages++;
        }
        if (s->input_end - s->input_scanned > s->message_size_max)
                return -EMSGSIZE;
        return 0;
}

ssize_t varlink_stream_read(VarlinkStream *s) {
        ssize_t n;
        int r;

        r = input_make_room(s);
        if (r < 0)
                return r;

        n = recv(s->fd, s->input + s->input_end, VARLINK_STREAM_READ_SIZE, MSG_DONTWAIT);
        if (n < 0)
                return errno == EINTR || errno == EWOULDBLOCK ? -EAGAIN : -errno;
        s->input_end += (size_t) n;

        r = input_scan(s);
        if (r < 0)
                return r;
        return n;
}

static void json_tokener_freep(json_tokener **t) {
        if (*t)
                json_tokener_free(*t);
}

/* Parses [p, p + size), whose byte p[size] is the NUL that ended it: handing json-c that
 * NUL too tells it the input is over, so that a value at the very end (a number) is
 * complete and anything after the value is an error. */
static int parse_message(const char *p, size_t size, json_object **ret) {
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        json_object *m;

        if (size >= INT32_MAX)
                return -EMSGSIZE;
        tok = json_tokener_new_ex(VARLINK_STREAM_DEPTH_MAX);
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT
#ifdef JSON_TOKENER_VALIDATE_UTF8
                               | JSON_TOKENER_VALIDATE_UTF8
#endif
        );
        m = json_tokener_parse_ex(tok, p, (int) size + 1);
        if (json_tokener_get_error(tok) != json_tokener_success) {
                json_object_put(m);
                return -EBADMSG;
        }
        *ret = m;
        return 0;
}

int varlink_stream_next(VarlinkStream *s, json_object **ret) {
        json_object *m = NULL;
        const char *start, *nul;
        int r;

        if (s->input_messages == 0)
                return 0;

        start = s->input + s->input_start;
        nul = memchr(start, 0, s->input_scanned - s->input_start);
        /* input_scan() counted this NUL: it is there. */
        s->input_start = (size_t) (nul - s->input) + 1;
        s->input_messages--;
        if (s->input_messages == 0 && s->input_start == s->input_end)
                s->input_start = s->input_end = s->input_scanned = 0;

        r = parse_message(start, (size_t) (nul - start), &m);
        if (r < 0)
                return r;
        *ret = m;
        return 1;
}

static int output_reserve(VarlinkStream *s, size_t n) {
        size_t size;
        char *p;

        if (s->output_start > 0 && s->output_allocated - s->output_end < n) {
                memmove(s->output, s->output + s->output_start, s->output_end - s->output_start);
                s->output_end -= s->output_start;
                s->output_start = 0;
        }
        if (s->output_allocated - s->output_end >= n)
                return 0;

        size = MAX(s->output_allocated * 2, s->output_end + n);
        p = realloc(s->output, size);
        if (!p)
                return -ENOMEM;
        s->output = p;
        s->output_allocated = size;
        return 0;
}

int varlink_stream_enqueue(VarlinkStream *s, json_object *m) {
        const char *text;
        size_t size;
        int r;

        text = json_object_to_json_string_ext(m, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text)
                return -ENOMEM;
        size = strlen(text);
        if (size > s->message_size_max)
                return -EMSGSIZE;

        r = output_reserve(s, size + 1);
        if (r < 0)
                return r;
        memcpy(s->output + s->output_end, text, size + 1);
        s->output_end += size + 1;
        return 0;
}

ssize_t varlink_stream_write(VarlinkStream *s) {
        ssize_t n;

        if (s->output_start == s->output_end)
                return 0;

        n = send(s->fd, s->output + s->output_start, s->output_end - s->output_start,
                 MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0)
                return errno == EINTR || errno == EWOULDBLOCK ? -EAGAIN : -errno;
        s->output_start += (size_t) n;
        if (s->output_start == s->output_end)
                s->output_start = s->output_end = 0;
        return n;
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
