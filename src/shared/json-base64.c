/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "json-base64.h"
#include "macro.h"

/* After macro.h: <sys/param.h> defines MIN() and MAX() only where they are not yet. */
#include <netinet/in.h>
#include <resolv.h>

json_object *json_object_new_base64(const void *data, size_t size) {
        _cleanup_free_ char *b = NULL;
        size_t n = (size + 2) / 3 * 4 + 1;
        int k;

        b = malloc(n);
        if (!b)
                return NULL;
        k = b64_ntop(data, size, b, n);
        if (k < 0)
                return NULL;
        return json_object_new_string_len(b, k);
}

int json_object_get_base64(json_object *s, uint8_t **ret, size_t *ret_size) {
        _cleanup_free_ uint8_t *d = NULL;
        size_t n;
        int k;

        if (!json_object_is_type(s, json_type_string))
                return -EBADMSG;
        n = (size_t) json_object_get_string_len(s);
        d = malloc(n / 4 * 3 + 3);
        if (!d)
                return -ENOMEM;
        k = b64_pton(json_object_get_string(s), d, n / 4 * 3 + 3);
        if (k < 0)
                return -EBADMSG;
        *ret = TAKE_PTR(d);
        *ret_size = (size_t) k;
        return 0;
}
