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
 * anything after the value is an error. Strict JSON, UTF-8 validated where json-c can,
 * nested at most depth deep. -EBADMSG if it is not one JSON value, -EMSGSIZE if too long. */
int json_parse_strict(const char *p, size_t size, int depth, json_object **ret);
/* A JSON array of the strings of l (NULL: an empty array); NULL on OOM. */
json_object *strv_to_json(char * const *l);
