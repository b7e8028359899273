/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Bytes in JSON (varlink's file data and output, MCP's binary files) are base64: libresolv's
 * b64_ntop()/b64_pton(), which sandboxd and its clients share. */

#include <stddef.h>

#include <json-c/json.h>

/* Bytes as a JSON string in base64; NULL when out of memory. */
json_object *json_object_new_base64(const void *data, size_t size);
/* Decodes s into a new buffer (NUL-terminated beyond *ret_size, for text). -EINVAL if s is
 * not base64. */
int base64_decode(const char *s, void **ret, size_t *ret_size);
