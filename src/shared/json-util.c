/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdint.h>

#include "json-util.h"

void json_object_putp(json_object **j) {
        if (*j)
                json_object_put(*j);
}

int json_add(json_object *o, const char *key, json_object *v) {
        if (!v)
                return -ENOMEM;
        if (json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

static void json_tokener_freep(json_tokener **t) {
        if (*t)
                json_tokener_free(*t);
}

int json_parse_strict(const char *p, size_t size, int depth, json_object **ret) {
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        json_object *m;

        if (size >= INT32_MAX)
                return -EMSGSIZE;
        tok = json_tokener_new_ex(depth);
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT
#ifdef JSON_TOKENER_VALIDATE_UTF8
                               | JSON_TOKENER_VALIDATE_UTF8
#endif
        );
        m = json_tokener_parse_ex(tok, p, (int) size + 1);
        if (json_tokener_get_error(tok) != json_tokener_success) {
                json_object_put(m);
                return -EBADMSG;
        }
        *ret = m;
        return 0;
}

json_object *strv_to_json(char * const *l) {
        _cleanup_json_ json_object *a = json_object_new_array();

        if (!a)
                return NULL;
        for (char * const *i = l; i && *i; i++) {
                json_object *s = json_object_new_string(*i);

                if (!s)
                        return NULL;
                if (json_object_array_add(a, s) < 0) {
                        json_object_put(s);
                        return NULL;
                }
        }
        return TAKE_PTR(a);
}
