/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdarg.h>
#include <stdio.h>

#include "strv.h"

char **strv_free(char **l) {
        if (!l)
                return NULL;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
        return NULL;
}

size_t strv_length(char * const *l) {
        size_t n = 0;
        if (l)
                while (l[n])
                        n++;
        return n;
}

char **strv_copy(char * const *l) {
        size_t n = strv_length(l);
        _cleanup_strv_free_ char **c = calloc(n + 1, sizeof(char *));
        if (!c)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                c[i] = strdup(l[i]);
                if (!c[i])
                        return NULL;
        }
        return TAKE_PTR(c);
}

int strv_consume(char ***l, char *s) {
        size_t n = strv_length(*l);
        char **c = realloc(*l, sizeof(char *) * (n + 2));
        if (!c) {
                free(s);
                return -ENOMEM;
        }
        c[n] = s;
        c[n + 1] = NULL;
        *l = c;
        return 0;
}

int strv_extend(char ***l, const char *s) {
        char *d = strdup(s);
        if (!d)
                return -ENOMEM;
        return strv_consume(l, d);
}

int strv_extendf(char ***l, const char *fmt, ...) {
        va_list ap;
        char *s;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        return strv_consume(l, s);
}

bool strv_contains(char * const *l, const char *s) {
        if (l)
                for (char * const *i = l; *i; i++)
                        if (streq(*i, s))
                                return true;
        return false;
}

bool env_assignment_is_valid(const char *e) {
        const char *eq = strchr(e, '=');

        if (!eq || eq == e)
                return false;
        for (const char *p = e; p < eq; p++)
                if (!(*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                      (p > e && *p >= '0' && *p <= '9')))
                        return false;
        return true;
}

static bool env_same_name(const char *a, const char *b) {
        size_t n = strcspn(a, "=");
        return strncmp(a, b, n) == 0 && b[n] == '=';
}

int strv_env_merge(char * const *a, char * const *b, char ***ret) {
        _cleanup_strv_free_ char **m = NULL;
        int r;

        if (a)
                for (char * const *i = a; *i; i++) {
                        bool replaced = false;
                        if (b)
                                for (char * const *j = b; *j; j++)
                                        if (env_same_name(*i, *j))
                                                replaced = true;
                        if (replaced)
                                continue;
                        r = strv_extend(&m, *i);
                        if (r < 0)
                                return r;
                }
        if (b)
                for (char * const *j = b; *j; j++) {
                        r = strv_extend(&m, *j);
                        if (r < 0)
                                return r;
                }
        if (!m) {
                m = calloc(1, sizeof(char *));
                if (!m)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(m);
        return 0;
}
