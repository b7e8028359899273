/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Base64, JSON bodies, and the varlink error → HTTP status table (SANDBOX_ERRORS). */

#include "http.h"
#include "json-util.h"
#include "sandbox-api.h"

static const struct {
        const char *name;
        unsigned status;
} error_status[] = {
#define HTTP_STATUS_ENTRY(code, n, bus_name, errno_value, http) { n, http },
        SANDBOX_ERRORS(HTTP_STATUS_ENTRY)
#undef HTTP_STATUS_ENTRY
};

static unsigned status_from_errno(int e) {
        switch (e) {
        case ENOENT: case ENOTDIR: case ENXIO:
                return 404;
        case EACCES: case EPERM: case EROFS:
                return 403;
        case EEXIST: case ENOTEMPTY: case EISDIR: case EBUSY: case EXDEV:
                return 409;
        case EINVAL: case ENAMETOOLONG: case ELOOP:
                return 400;
        case EFBIG: case ENOSPC: case EDQUOT:
                return 413;
        default:
                return 500;
        }
}

unsigned http_status_from_varlink_error(const char *error, json_object *parameters) {
        const char *dot;
        json_object *e;

        if (!error)
                return 200;
        if (streq(error, VARLINK_ERROR_DISCONNECTED))
                return 503;
        if (streq(error, VARLINK_ERROR_INVALID_PARAMETER))
                return 400;
        if (streq(error, VARLINK_ERROR_PERMISSION_DENIED))
                return 403;
        if (streq(error, VARLINK_ERROR_METHOD_NOT_FOUND) || streq(error, VARLINK_ERROR_METHOD_NOT_IMPLEMENTED))
                return 501;
        if (!startswith_str(error, "io.sandboxd.Sandbox."))
                return 502;
        dot = strrchr(error, '.') + 1;
        /* A rate is a matter of waiting (429); any other quota of freeing something (403). */
        if (streq(dot, "QuotaExceeded") && parameters && json_object_object_get_ex(parameters, "what", &e) &&
            streq_ptr(json_object_get_string(e), "CreatesPerSecond"))
                return 429;
        if (streq(dot, "SystemError") && parameters && json_object_object_get_ex(parameters, "errno", &e))
                return status_from_errno(json_object_get_int(e));
        for (size_t i = 0; i < ELEMENTSOF(error_status); i++)
                if (streq(error_status[i].name, dot))
                        return error_status[i].status;
        return 500;
}

static void json_tokener_freep(json_tokener **t) {
        if (*t)
                json_tokener_free(*t);
}

static bool only_whitespace(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!strchr(" \t\r\n", s[i]))
                        return false;
        return true;
}

/* json-c keeps the last of duplicate keys without a word. Fed a byte at a time, the tokener
 * is seen right after each key, before the key's value is added: a key the object being
 * built has already is a duplicate. (The tokener's state is public in json_tokener.h,
 * though marked as internal; json-c 0.16.) */
static bool tokener_at_duplicate_key(json_tokener *tok) {
        struct json_tokener_srec *r = &tok->stack[tok->depth];

        if (!r->obj_field_name || !r->current || !json_object_is_type(r->current, json_type_object))
                return false;
        if (r->state != json_tokener_state_object_field_end &&
            !(r->state == json_tokener_state_eatws && r->saved_state == json_tokener_state_object_field_end))
                return false;
        return json_object_object_get_ex(r->current, r->obj_field_name, NULL);
}

json_object *http_json_parse(const char *text, size_t size, const char **ret_error) {
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        _cleanup_json_ json_object *o = NULL;

        if (only_whitespace(text, size))
                return json_object_new_object();
        if (size > INT32_MAX || memchr(text, 0, size)) {
                *ret_error = "The body is not JSON.";
                return NULL;
        }
        tok = json_tokener_new_ex(HTTP_JSON_DEPTH_MAX);
        if (!tok) {
                *ret_error = "Out of memory.";
                return NULL;
        }
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        size_t end = 0;

        for (size_t i = 0; i < size && !o; i++) {
                end = i + 1;
                o = json_tokener_parse_ex(tok, text + i, 1);
                if (!o && json_tokener_get_error(tok) != json_tokener_continue)
                        break;
                if (!o && tokener_at_duplicate_key(tok)) {
                        *ret_error = "The body's JSON has a duplicate key.";
                        return NULL;
                }
        }
        if (json_tokener_get_error(tok) == json_tokener_error_depth) {
                *ret_error = "The body's JSON is nested too deeply.";
                return NULL;
        }
        /* Parsed a byte at a time: the end is where the loop stopped. */
        if (!o || json_tokener_get_error(tok) != json_tokener_success || !only_whitespace(text + end, size - end)) {
                *ret_error = "The body is not JSON.";
                return NULL;
        }
        if (!json_object_is_type(o, json_type_object)) {
                *ret_error = "The body is not a JSON object.";
                return NULL;
        }
        return TAKE_PTR(o);
}
