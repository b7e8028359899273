/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>

#include "macro.h"

void json_object_putp(json_object **j);
#define _cleanup_json_ _cleanup_(json_object_putp)

/* json_object_object_add() leaves v to the caller when it fails; this takes v in all
 * cases, and turns a NULL v (a failed json_object_new_*()) into -ENOMEM rather than a
 * JSON null, so that callers can nest the constructors. */
int json_add(json_object *o, const char *key, json_object *v);

/* Parses [p, p + size), whose byte p[size] must be a NUL: handing json-c that NUL too tells
 * it the input is over, so that a value at the very end (a number) is complete and
 * anything after the value is an error. The one JSON reader of every face: RFC 8259 to the
 * letter (no raw control characters in strings, no NaN/Infinity, no "1."), UTF-8 validated,
 * no duplicate keys, no NUL in a key, no number json-c would alter (an integer beyond 64
 * bits, a double beyond its range), nested at most depth deep. -EBADMSG if it is not one
 * JSON value, -ERANGE for such a number, -ENOTUNIQ for a duplicate key, -ELOOP if nested
 * too deeply, -EMSGSIZE if too long; json_strict_strerror() says which in words. A NUL in a
 * string value is kept (a byte string may hold one): read strings that cross into C with
 * json_string_get_clean(). */
int json_parse_strict(const char *p, size_t size, int depth, json_object **ret);
const char *json_strict_strerror(int r);
/* j's string; -EINVAL if j is not a string, -EBADMSG if it holds a NUL ("\u0000"), where a
 * C string would silently end. */
int json_string_get_clean(json_object *j, const char **ret);
/* The first string value in o holding a NUL, by its path ("env.FOO", "argv[2]"), o's members
 * named in skip (byte strings) left out: 1 and *ret_path, or 0 if there is none. For a face
 * that hands strings on as C strings, to refuse a NUL naming the field rather than cut there. */
int json_find_nul(json_object *o, const char *const *skip, char **ret_path);
/* Whether v is an integer as JSON Schema has it: a number without a fraction, 2.0 too (json-c
 * reads that as a double), within int64; its value in *ret. null is none. */
bool json_is_integer(json_object *v, int64_t *ret);
/* An exec's timeout given in seconds as a JSON number, as the core's option: an integer
 * (2.0 too) as Timeout=, a fraction (0.5) as TimeoutUSec=, neither clamped nor rounded
 * beyond the microsecond: the core checks the range and names its bound. -EINVAL if v is
 * not a finite number >= 0 (null included). */
int json_timeout_option(json_object *v, const char **ret_name, uint64_t *ret_value);
/* A JSON array of the strings of l (NULL: an empty array); NULL on OOM. */
json_object *strv_to_json(char * const *l);
/* "key=value" strings (split at the first '=', those without one left out) as an object;
 * NULL when out of memory. */
json_object *assignments_to_json(char * const *l);
