/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What the verbs of sandboxctl share: logging, JSON output, looking a sandbox up. */

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"
#include "parse-util.h"
#include "sandboxctl-util.h"

int log_error_errno(int error, const char *format, ...) {
        va_list ap;

        /* So that %m in format names this error. */
        errno = abs(error);
        va_start(ap, format);
        vfprintf(stderr, format, ap);
        va_end(ap);
        fputc('\n', stderr);

        return -abs(error);
}

char *format_timestamp(char *buf, size_t l, uint64_t usec) {
        struct tm tm;
        time_t t;

        if (usec == 0 || usec == UINT64_MAX)
                return NULL;

        t = (time_t) (usec / USEC_PER_SEC);
        if (!localtime_r(&t, &tm))
                return NULL;
        if (strftime(buf, l, "%a %Y-%m-%d %H:%M:%S %Z", &tm) == 0)
                return NULL;
        return buf;
}

int loop_write(int fd, const void *buf, size_t nbytes) {
        const uint8_t *p = buf;

        while (nbytes > 0) {
                ssize_t k;

                k = write(fd, p, nbytes);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN) {
                                /* An inherited non-blocking descriptor: wait, don't spin. */
                                struct pollfd pfd = { .fd = fd, .events = POLLOUT };

                                if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
                                        return -errno;
                                continue;
                        }
                        return -errno;
                }
                if (k == 0)
                        return -EIO;

                p += k;
                nbytes -= (size_t) k;
        }

        return 0;
}

int print_json(json_object *j) {
        int flags = JSON_C_TO_STRING_NOSLASHESCAPE;
        const char *s;

        flags |= isatty(STDOUT_FILENO) ? JSON_C_TO_STRING_PRETTY : JSON_C_TO_STRING_PLAIN;

        s = json_object_to_json_string_ext(j, flags);
        if (!s)
                return log_oom();

        if (puts(s) == EOF || fflush(stdout) != 0)
                return log_error_errno(errno > 0 ? errno : EIO, "Failed to write standard output: %m");
        return 0;
}


int json_add_string(json_object *o, const char *key, const char *s) {
        return json_add(o, key, json_object_new_string(strempty(s)));
}

int json_add_bytes(json_object *o, const char *key, const void *data, size_t size) {
        _cleanup_free_ char *s = NULL;
        size_t n;
        int r;

        /* JSON strings are Unicode: undecodable bytes become U+FFFD. */
        r = utf8_sanitize(data, size, &s, &n);
        if (r < 0)
                return r;
        if (n > INT_MAX)
                return -E2BIG;

        return json_add(o, key, json_object_new_string_len(s, (int) n));
}

int json_add_hex(json_object *o, const char *key, const void *data, size_t size) {
        _cleanup_free_ char *s = NULL;
        const uint8_t *p = data;

        if (size > (SIZE_MAX - 1) / 2)
                return -ENOMEM;
        s = malloc(size * 2 + 1);
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < size; i++)
                sprintf(s + 2 * i, "%02x", p[i]);
        s[size * 2] = 0;
        return json_add_string(o, key, s);
}

int sandbox_get(SandboxClient *c, const char *id, SandboxHandle **ret) {
        _cleanup_(sandbox_client_error_done) SandboxClientError error = SANDBOX_CLIENT_ERROR_NULL;
        int r;

        r = sandbox_client_get(c, id, ret, &error);
        if (r < 0)
                return log_error_errno(r, "Failed to get sandbox %s: %s", id, sandbox_client_error_message(&error, r));
        return 0;
}

static bool name_char_is_plain(unsigned char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                strchr("%+,-./:=@_^", c);
}

size_t printable_length(const unsigned char *p, const unsigned char *end) {
        size_t n, subpart;

        if (*p >= 0x20 && *p < 0x7f)
                return 1;
        if (*p < 0x80)
                return 0;
        n = utf8_sequence_length(p, (size_t) (end - p), &subpart);
        if (n == 2 && p[0] == 0xc2 && p[1] < 0xa0)
                return 0; /* U+0080..U+009F, the C1 controls */
        return n;
}

char *quote_name(const void *name, size_t size) {
        static const char controls[] = "\a\b\t\n\v\f\r"; /* written as C escapes */
        const unsigned char *p = name, *end = p + size;
        const char *c;
        bool plain = size > 0, in_quote = false;
        char *ret = NULL;
        size_t len = 0;
        FILE *f;

        for (const unsigned char *q = p; q < end; q++)
                if (*q < 0x80 && !name_char_is_plain(*q))
                        plain = false;
        for (const unsigned char *q = p; plain && q < end;) {
                size_t n = printable_length(q, end);
                if (n == 0)
                        plain = false;
                q += n;
        }
        if (plain)
                return strndup(name, size);

        f = open_memstream(&ret, &len);
        if (!f)
                return NULL;
        if (size == 0)
                fputs("''", f);
        while (p < end) {
                size_t n = printable_length(p, end);

                if (n > 0 && *p != '\'') {
                        if (!in_quote)
                                fputc('\'', f);
                        in_quote = true;
                        fwrite(p, 1, n, f);
                        p += n;
                        continue;
                }
                if (in_quote)
                        fputc('\'', f);
                in_quote = false;
                if (*p == '\'')
                        fputs("\\'", f);
                else if (*p && (c = strchr(controls, *p)))
                        fprintf(f, "$'\\%c'", "abtnvfr"[c - controls]);
                else
                        fprintf(f, "$'\\%03o'", *p);
                p++;
        }
        if (in_quote)
                fputc('\'', f);
        if (fclose(f) != 0)
                return mfree(ret);
        return ret;
}
