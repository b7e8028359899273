/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "egress-http.h"

ssize_t egress_http_head_end(const char *buf, size_t n) {
        const char *e = memmem(buf, n, "\r\n\r\n", 4);

        if (e && (size_t) (e - buf) + 4 <= EGRESS_HTTP_HEAD_MAX)
                return (ssize_t) (e - buf) + 4;
        return n >= EGRESS_HTTP_HEAD_MAX ? -E2BIG : 0;
}

static bool is_tchar(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The field's value without the whitespace around it. */
static void trim(const char **v, size_t *n) {
        while (*n > 0 && (**v == ' ' || **v == '\t')) {
                (*v)++;
                (*n)--;
        }
        while (*n > 0 && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
                (*n)--;
}

static bool value_is(const char *v, size_t n, const char *want) {
        return n == strlen(want) && strncasecmp(v, want, n) == 0;
}

int egress_http_rewrite_request(const char *head, size_t len, const char *host, const char *name, const char *value,
                                char **ret, size_t *ret_len, EgressBody *ret_body) {
        size_t name_len = strlen(name), value_len = strlen(value), out_len = 0;
        bool have_length = false, chunked = false, upgrade = false, have_te = false, have_host = false;
        uint64_t length = 0;
        const char *p = head, *end = head + len;
        char *out;

        if (!head || len < 4 || memcmp(end - 4, "\r\n\r\n", 4) != 0 || memchr(head, 0, len))
                return -EBADMSG;
        /* The value never makes a line of its own (a secret changed since the sandbox's
         * create was checked then only). */
        for (size_t i = 0; i < value_len; i++)
                if ((unsigned char) value[i] < 0x20 || value[i] == 0x7f)
                        return -EINVAL;
        out = malloc(len + name_len + value_len + 8);
        if (!out)
                return -ENOMEM;

        /* The request line: METHOD SP target SP HTTP/1.x, copied as it is. */
        const char *eol = memmem(p, (size_t) (end - p), "\r\n", 2);
        if (!eol)
                goto bad;
        const char *sp = memchr(p, ' ', (size_t) (eol - p));
        if (!sp || sp == p || eol - p < 14 || memcmp(eol - 9, " HTTP/1.", 8) != 0 || (eol[-1] != '0' && eol[-1] != '1'))
                goto bad;
        for (const char *q = p; q < sp; q++)
                if (!is_tchar(*q))
                        goto bad;
        /* origin-form ("/…") or "*": an absolute URI could name another host. */
        if (sp[1] != '/' && !(sp[1] == '*' && sp[2] == ' '))
                goto bad;
        for (const char *q = p; q < eol; q++)
                if (*q == '\r' || *q == '\n' || (unsigned char) *q < 0x20)
                        goto bad;
        memcpy(out, p, (size_t) (eol - p) + 2);
        out_len = (size_t) (eol - p) + 2;
        /* Ours first: the sandbox's own field of that name is dropped below. */
        memcpy(out + out_len, name, name_len);
        out_len += name_len;
        memcpy(out + out_len, ": ", 2);
        out_len += 2;
        memcpy(out + out_len, value, value_len);
        out_len += value_len;
        memcpy(out + out_len, "\r\n", 2);
        out_len += 2;
        p = eol + 2;

        while (p < end - 2) {
                eol = memmem(p, (size_t) (end - p), "\r\n", 2);
                if (!eol)
                        goto bad;
                const char *colon = memchr(p, ':', (size_t) (eol - p));
                if (!colon || colon == p)
                        goto bad; /* no name; a folded line starts with whitespace: no name either */
                for (const char *q = p; q < colon; q++)
                        if (!is_tchar(*q))
                                goto bad;
                for (const char *q = colon; q < eol; q++)
                        if (*q == '\r' || *q == '\n' || *q == 0)
                                goto bad;
                size_t fn = (size_t) (colon - p);
                const char *v = colon + 1;
                size_t vn = (size_t) (eol - v);
                trim(&v, &vn);

                if (fn == name_len && strncasecmp(p, name, fn) == 0) {
                        p = eol + 2;
                        continue; /* the sandbox's: not sent */
                }
                if (value_is(p, fn, "content-length")) {
                        uint64_t l = 0;
                        if (vn == 0 || vn > 18)
                                goto bad;
                        for (size_t i = 0; i < vn; i++) {
                                if (v[i] < '0' || v[i] > '9')
                                        goto bad;
                                l = l * 10 + (uint64_t) (v[i] - '0');
                        }
                        if (have_length && l != length)
                                goto bad;
                        have_length = true;
                        length = l;
                } else if (value_is(p, fn, "transfer-encoding")) {
                        if (have_te || !value_is(v, vn, "chunked"))
                                goto bad;
                        have_te = chunked = true;
                } else if (value_is(p, fn, "upgrade"))
                        upgrade = true;
                else if (value_is(p, fn, "host") && host) {
                        /* The host the secret is bound to, the one TLS verified: a front
                         * that routes by Host (a CDN) would take another name elsewhere. */
                        size_t hn = strlen(host);
                        if (have_host || vn < hn || strncasecmp(v, host, hn) != 0 ||
                            (vn > hn && (v[hn] != ':' || vn == hn + 1 || strspn(v + hn + 1, "0123456789") != vn - hn - 1)))
                                goto bad;
                        have_host = true;
                }
                memcpy(out + out_len, p, (size_t) (eol - p) + 2);
                out_len += (size_t) (eol - p) + 2;
                p = eol + 2;
        }
        if (have_length && chunked)
                goto bad;
        memcpy(out + out_len, "\r\n", 2);
        out_len += 2;

        *ret_body = (EgressBody) {
                .kind = upgrade ? EGRESS_BODY_UPGRADE : chunked ? EGRESS_BODY_CHUNKED :
                        have_length && length > 0 ? EGRESS_BODY_LENGTH : EGRESS_BODY_NONE,
                .remaining = length,
                .chunk = CHUNK_SIZE,
        };
        *ret = out;
        *ret_len = out_len;
        return 0;
bad:
        free(out);
        return -EBADMSG;
}

/* A chunk-size line: hex digits, then nothing or ";extensions". */
static int parse_chunk_size(const char *line, size_t n, uint64_t *ret) {
        uint64_t v = 0;
        size_t i = 0;

        for (; i < n && i < 16; i++) {
                char c = line[i];
                int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
                        c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
                if (d < 0)
                        break;
                v = v * 16 + (uint64_t) d;
        }
        if (i == 0 || (i < n && line[i] != ';' && line[i] != ' ' && line[i] != '\t'))
                return -EBADMSG;
        *ret = v;
        return 0;
}

ssize_t egress_http_body_feed(EgressBody *b, const char *buf, size_t n) {
        size_t used = 0;

        switch (b->kind) {
        case EGRESS_BODY_NONE:
                return 0;
        case EGRESS_BODY_UPGRADE:
                return (ssize_t) n;
        case EGRESS_BODY_LENGTH:
                used = (size_t) (b->remaining < n ? b->remaining : n);
                b->remaining -= used;
                if (b->remaining == 0)
                        b->kind = EGRESS_BODY_NONE;
                return (ssize_t) used;
        case EGRESS_BODY_CHUNKED:
                break;
        }

        while (used < n && b->chunk != CHUNK_DONE) {
                if (b->chunk == CHUNK_DATA) {
                        size_t k = (size_t) (b->remaining < n - used ? b->remaining : n - used);
                        used += k;
                        b->remaining -= k;
                        if (b->remaining == 0)
                                b->chunk = CHUNK_DATA_END;
                        continue;
                }
                /* A line: the size, the CRLF after data, or a trailer. */
                char c = buf[used++];
                if (b->line_len >= sizeof(b->line))
                        return -EBADMSG;
                b->line[b->line_len++] = c;
                if (c != '\n')
                        continue;
                if (b->line_len < 2 || b->line[b->line_len - 2] != '\r')
                        return -EBADMSG;
                size_t ln = b->line_len - 2;
                b->line_len = 0;
                switch (b->chunk) {
                case CHUNK_SIZE: {
                        uint64_t size;
                        if (parse_chunk_size(b->line, ln, &size) < 0)
                                return -EBADMSG;
                        b->remaining = size;
                        b->chunk = size > 0 ? CHUNK_DATA : CHUNK_TRAILER;
                        break;
                }
                case CHUNK_DATA_END:
                        if (ln != 0)
                                return -EBADMSG;
                        b->chunk = CHUNK_SIZE;
                        break;
                case CHUNK_TRAILER:
                        if (ln == 0)
                                b->chunk = CHUNK_DONE;
                        break;
                default:
                        return -EBADMSG;
                }
        }
        if (b->chunk == CHUNK_DONE)
                *b = (EgressBody) { .kind = EGRESS_BODY_NONE };
        return (ssize_t) used;
}
