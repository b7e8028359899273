/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "json-util.h"
#include "log-entry-json.h"
#include "parse-util.h"
#include "varlink-util.h"

static json_object *byte_array(const void *data, size_t size) {
        json_object *a = json_object_new_array_ext((int) size);

        for (size_t i = 0; a && i < size; i++)
                if (json_object_array_add(a, json_object_new_int(((const uint8_t *) data)[i])) < 0) {
                        json_object_put(a);
                        return NULL;
                }
        return a;
}

int log_entry_to_json(const SandboxLogEntry *e, LogEntryBytes bytes, json_object **ret) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *identifier = NULL;
        size_t l;
        int r;

        o = json_object_new_object();
        if (!o)
                return -ENOMEM;
        r = utf8_sanitize(e->identifier, strlen(e->identifier), &identifier, &l);
        if (r >= 0)
                r = json_add(o, "timestamp", json_object_new_uint64(e->realtime_usec));
        if (r >= 0 && e->priority >= 0)
                r = json_add(o, "priority", json_object_new_int(e->priority));
        if (r >= 0)
                r = json_add(o, "identifier", json_object_new_string_len(identifier, (int) l));
        if (r >= 0) {
                if (utf8_is_valid_n(e->message, e->message_size))
                        r = json_add(o, "message", json_object_new_string_len(e->message, (int) e->message_size));
                else if (bytes == LOG_ENTRY_BYTES_ARRAY)
                        r = json_add(o, "message", byte_array(e->message, e->message_size));
                else
                        r = json_add(o, "messageBytes", json_object_new_base64(e->message, e->message_size));
        }
        if (r >= 0 && e->truncated)
                r = json_add(o, "truncated", json_object_new_boolean(true));
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}
