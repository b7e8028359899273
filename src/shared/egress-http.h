/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* HTTP/1.1 requests as sandboxd-egress's header injection reads them (docs/SECRETS.md):
 * each request head rewritten (the bound header set to the secret, whatever the sandbox
 * sent under that name), and each body's length followed, so that the next head is found
 * where the server will find it. Strict: anything two parsers could read two ways (a
 * folded line, a bare LF, Content-Length with Transfer-Encoding, several lengths) is
 * refused, because the key must never land in what the server takes for a body. Pure
 * functions, for unit tests. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EGRESS_HTTP_HEAD_MAX (64U * 1024U)
#define EGRESS_HTTP_LINE_MAX 4096U   /* a chunk-size line, a trailer line */

typedef enum EgressBodyKind {
        EGRESS_BODY_NONE,
        EGRESS_BODY_LENGTH,
        EGRESS_BODY_CHUNKED,
        EGRESS_BODY_UPGRADE,    /* after this request the connection is no longer HTTP */
} EgressBodyKind;

typedef enum EgressChunkState {
        CHUNK_SIZE,             /* reading "hex[;ext]\r\n" */
        CHUNK_DATA,
        CHUNK_DATA_END,         /* the CRLF after the data */
        CHUNK_TRAILER,          /* after the last chunk: lines until an empty one */
        CHUNK_DONE,
} EgressChunkState;

typedef struct EgressBody {
        EgressBodyKind kind;
        uint64_t remaining;     /* LENGTH: bytes; CHUNKED: of the chunk's data */
        EgressChunkState chunk;
        char line[EGRESS_HTTP_LINE_MAX];
        size_t line_len;
} EgressBody;

/* The end of the head in buf (after its blank line), 0 if not all there, -E2BIG if it
 * would exceed EGRESS_HTTP_HEAD_MAX. */
ssize_t egress_http_head_end(const char *buf, size_t n);

/* head (len bytes, through its blank line) with every header field called name removed
 * and "name: value" added after the request line: *ret (malloc'd, *ret_len bytes), and the
 * body that follows in *ret_body. -EBADMSG for a head this proxy does not take: one whose
 * target is not origin-form, or (host not NULL) whose Host names another host than host;
 * -EINVAL for a value with a control character. */
int egress_http_rewrite_request(const char *head, size_t len, const char *host, const char *name, const char *value,
                                char **ret, size_t *ret_len, EgressBody *ret_body);

/* How many of the n bytes at buf belong to the body (all of them, or up to its end);
 * body->kind is NONE once it is complete. -EBADMSG for a malformed chunked body. */
ssize_t egress_http_body_feed(EgressBody *body, const char *buf, size_t n);
