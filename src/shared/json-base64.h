/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Bytes as a JSON string in base64, as varlink carries them (libresolv's b64_ntop and
 * b64_pton). In the varlink library: the static agent's libshared needs no libresolv. */

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/* NULL on -ENOMEM. */
json_object *json_object_new_base64(const void *data, size_t size);
/* s's bytes, in a new buffer: -EBADMSG if s is not a base64 string. */
int json_object_get_base64(json_object *s, uint8_t **ret, size_t *ret_size);
