/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* NULL-terminated string vectors. */

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

char **strv_free(char **l);
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);
#define _cleanup_strv_free_ _cleanup_(strv_freep)

size_t strv_length(char * const *l);
char **strv_copy(char * const *l);
/* Appends a copy of s; returns 0 or -ENOMEM (l unchanged on failure). */
int strv_extend(char ***l, const char *s);
/* Appends s itself, taking ownership on success. */
int strv_consume(char ***l, char *s);
int strv_extendf(char ***l, const char *fmt, ...) _printf_(2, 3);
bool strv_contains(char * const *l, const char *s);
/* Environment-block merge: entries of b replace same-named entries of a. */
int strv_env_merge(char * const *a, char * const *b, char ***ret);
bool env_assignment_is_valid(const char *e);

static inline bool strv_isempty(char * const *l) {
        return !l || !*l;
}

static inline bool isempty(const char *s) {
        return !s || !*s;
}
