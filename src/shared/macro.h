/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Ownership helpers in the manner of systemd's: a variable marked _cleanup_xxx_ is
 * released when it goes out of scope; TAKE_PTR()/TAKE_FD() hand ownership on. */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))
#define _likely_(x) (__builtin_expect(!!(x), 1))
#define _unlikely_(x) (__builtin_expect(!!(x), 0))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#define TAKE_PTR(p)                             \
        ({                                      \
                __typeof__(p) _p_ = (p);        \
                (p) = NULL;                     \
                _p_;                            \
        })

#define TAKE_FD(fd)                             \
        ({                                      \
                int _fd_ = (fd);                \
                (fd) = -EBADF;                  \
                _fd_;                           \
        })

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                 \
        static inline void func##p(type *p) {                   \
                if (*p)                                         \
                        *p = func(*p);                          \
        }

static inline int negative_errno(void) {
        /* For library calls that set errno: never return 0 by accident. */
        return errno > 0 ? -errno : -EIO;
}

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}

static inline void closep(int *fd) {
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void close_pair(int p[2]) {
        p[0] = safe_close(p[0]);
        p[1] = safe_close(p[1]);
}
static inline void close_pairp(int (*p)[2]) {
        close_pair(*p);
}
#define _cleanup_close_pair_ _cleanup_(close_pairp)

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

static inline const char *strempty(const char *s) {
        return s ?: "";
}

static inline const char *strna(const char *s) {
        return s ?: "n/a";
}

static inline int streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}
#define streq(a, b) (strcmp((a), (b)) == 0)

static inline int startswith_str(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}
