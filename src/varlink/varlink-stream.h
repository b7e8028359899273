/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The byte level of varlink, shared by the server and the client half: a non-blocking
 * stream socket carrying JSON messages, each ended by a NUL byte. Input is read into one
 * buffer and taken out a message at a time; output is serialised into another and written
 * as the socket takes it. No event loop here: the owners decide when to read and write.
 *
 * Bounds: a message (in either direction) is at most message_size_max bytes without its
 * NUL; input holding more than that without a NUL is refused (-EMSGSIZE) as soon as it is
 * read, so the input buffer never grows past message_size_max + one read
 * (VARLINK_STREAM_READ_SIZE) beyond what the owner lets accumulate in complete messages.
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <json-c/json.h>

#define VARLINK_STREAM_READ_SIZE (64U * 1024U)
/* A buffer that a large message made larger than this is freed once it is empty: an idle
 * connection does not keep the memory of its largest message. */
#define VARLINK_STREAM_KEEP_MAX (1024U * 1024U)
/* Nesting depth json-c accepts in a message: deep enough for any real interface, shallow
 * enough that json-c's recursive serialiser and destructor stay cheap. */
#define VARLINK_STREAM_DEPTH_MAX 64
/* Descriptors (SCM_RIGHTS) a message may carry, and a stream may hold received and not yet
 * taken; more received at once are closed and the stream fails (-EMSGSIZE). */
#define VARLINK_STREAM_FDS_MAX 8U
/* Messages with descriptors queued for output at once. */
#define VARLINK_STREAM_FD_BATCHES_MAX 8U

/* Bytes [start, end) of data are pending; allocated is data's size. */
typedef struct VarlinkBuffer {
        char *data;
        size_t start;
        size_t end;
        size_t allocated;
} VarlinkBuffer;

typedef struct VarlinkStream {
        int fd;
        size_t message_size_max;

        VarlinkBuffer input;
        size_t input_scanned;    /* just after the last NUL found in input, or input.start */
        unsigned input_messages; /* complete messages in [input.start, input_scanned) */
        /* A message beyond message_size_max came after those: it and all after it are
         * dropped as they are read; discarding until its NUL has been read. */
        bool oversized;
        bool discarding;

        VarlinkBuffer output;

        /* Descriptors passed with a message (sandboxd-api(7): OpenPort's reply): each
         * batch is sent with the first byte of its message, at output_offset (bytes
         * enqueued since the start, as output_written counts what went out). */
        uint64_t output_enqueued, output_written;
        struct {
                uint64_t offset;
                int fds[VARLINK_STREAM_FDS_MAX];
                size_t n_fds;
        } fd_batches[VARLINK_STREAM_FD_BATCHES_MAX];
        size_t n_fd_batches;
        /* Received, in order, until taken (varlink_stream_take_fds()). */
        int input_fds[VARLINK_STREAM_FDS_MAX];
        size_t n_input_fds;
} VarlinkStream;

/* Takes fd (a connected stream socket, made non-blocking and close-on-exec here). */
int varlink_stream_init(VarlinkStream *s, int fd, size_t message_size_max);
/* Frees the buffers and closes the socket; idempotent. */
void varlink_stream_done(VarlinkStream *s);

/* One recv(): the number of bytes read (> 0), 0 at EOF, -EAGAIN if nothing is there,
 * -EMSGSIZE if the input now holds a message (complete or not) larger than allowed, or
 * another -errno from recv(). After -EMSGSIZE, the complete messages before the large one
 * stay; it is dropped, and further reads drop what they read (the rest of it while
 * discarding, then whatever follows), so that the owner can read the sender's message to
 * its end and answer it with an error it will see, in bounded memory. */
ssize_t varlink_stream_read(VarlinkStream *s);

/* Takes the next complete message out of the input: 1 and *ret (any JSON value, NULL for
 * null, as json-c has it; checking that it is an object is the caller's job), 0 if there is none yet, -EBADMSG if it is not
 * JSON (malformed, trailing garbage, invalid UTF-8, nested too deep), -ENOMEM. */
int varlink_stream_next(VarlinkStream *s, json_object **ret);

static inline bool varlink_stream_has_partial_input(const VarlinkStream *s) {
        return s->input.end > s->input_scanned;
}
static inline size_t varlink_stream_input_size(const VarlinkStream *s) {
        return s->input.end - s->input.start;
}

/* Serialises m and appends it, with its NUL, to the output. -EMSGSIZE if it is larger than
 * message_size_max (nothing appended), -ENOMEM. */
int varlink_stream_enqueue(VarlinkStream *s, json_object *m);

/* As varlink_stream_enqueue(), with copies of fds sent along (SCM_RIGHTS, with the
 * message's first byte). -EBUSY when VARLINK_STREAM_FD_BATCHES_MAX wait already. */
int varlink_stream_enqueue_with_fds(VarlinkStream *s, json_object *m, const int *fds, size_t n_fds);

/* The descriptors received so far, in order (taken: the caller closes them); a peer sends
 * them with the message that is about them, so the owner takes them when it reads that. */
size_t varlink_stream_take_fds(VarlinkStream *s, int *fds, size_t max);

/* One send() of what is pending (MSG_NOSIGNAL: a gone peer is -EPIPE, never SIGPIPE): the
 * number of bytes written (> 0), 0 if nothing was pending, -EAGAIN, or another -errno. */
ssize_t varlink_stream_write(VarlinkStream *s);

/* send()s until all is written or the socket is full: 0, or a -errno other than EAGAIN. */
int varlink_stream_flush(VarlinkStream *s);

static inline size_t varlink_stream_pending_output(const VarlinkStream *s) {
        return s->output.end - s->output.start;
}

/* A varlink address: "unix:/path", "/path", or "@name" / "unix:@name" (abstract); ";…"
 * parameters are ignored. -EINVAL for other forms, -ENAMETOOLONG. */
int varlink_address_parse(const char *address, struct sockaddr_un *ret, socklen_t *ret_len);
