/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base64-util.h"
#include "macro.h"

/* After macro.h: <sys/param.h> defines MIN() and MAX() only where they are not yet. */
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

int base64_decode(const char *s, void **ret, size_t *ret_size) {
        _cleanup_free_ char *d = NULL;
        size_t n = strlen(s) / 4 * 3 + 3;
        int k;

        d = malloc(n + 1);
        if (!d)
                return -ENOMEM;
        k = b64_pton(s, (unsigned char *) d, n);
        if (k < 0)
                return -EINVAL;
        d[k] = 0;
        *ret = TAKE_PTR(d);
        *ret_size = (size_t) k;
        return 0;
}

int json_object_get_base64(json_object *s, uint8_t **ret, size_t *ret_size) {
        void *d;
        int r;

        if (!json_object_is_type(s, json_type_string))
                return -EBADMSG;
        r = base64_decode(json_object_get_string(s), &d, ret_size);
        if (r < 0)
                return r == -EINVAL ? -EBADMSG : r;
        *ret = d;
        return 0;
}
