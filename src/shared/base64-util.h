/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Bytes as base64 in JSON, as the varlink interface carries them (libresolv's b64_ntop()
 * and b64_pton(), RFC 4648 without line breaks). */

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/* A JSON string of data in base64; NULL when out of memory. */
json_object *json_object_new_base64(const void *data, size_t size);

/* Decodes s into a new buffer (NUL-terminated past its size, for text); -EINVAL if s is
 * not base64. */
int base64_decode(const char *s, void **ret, size_t *ret_size);

/* The bytes of a JSON string in base64: -EBADMSG if s is not a string or not base64. */
int json_object_get_base64(json_object *s, uint8_t **ret, size_t *ret_size);
