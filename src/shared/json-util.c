/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>

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
