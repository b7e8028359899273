/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Base64, JSON bodies, and the varlink error → HTTP status table (SANDBOX_ERRORS). */

#include "http.h"
#include "json-util.h"
#include "sandbox-api.h"

/* After macro.h: <sys/param.h> defines MIN() and MAX() only where they are not yet. */
#include <netinet/in.h>
#include <resolv.h>

json_object *json_new_base64(const void *data, size_t size) {
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

int json_get_base64(json_object *s, uint8_t **ret, size_t *ret_size) {
        _cleanup_free_ uint8_t *d = NULL;
        const char *text;
        size_t n;
        int k;

        if (!json_object_is_type(s, json_type_string))
                return -EBADMSG;
        text = json_object_get_string(s);
        n = (size_t) json_object_get_string_len(s);
        d = malloc(n / 4 * 3 + 3);
        if (!d)
                return -ENOMEM;
        k = b64_pton(text, d, n / 4 * 3 + 3);
        if (k < 0)
                return -EBADMSG;
        *ret = TAKE_PTR(d);
        *ret_size = (size_t) k;
        return 0;
}

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
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        o = json_tokener_parse_ex(tok, text, (int) size);
        if (json_tokener_get_error(tok) == json_tokener_error_depth) {
                *ret_error = "The body's JSON is nested too deeply.";
                return NULL;
        }
        if (!o || json_tokener_get_error(tok) != json_tokener_success ||
            !only_whitespace(text + json_tokener_get_parse_end(tok), size - json_tokener_get_parse_end(tok))) {
                *ret_error = "The body is not JSON.";
                return NULL;
        }
        if (!json_object_is_type(o, json_type_object)) {
                *ret_error = "The body is not a JSON object.";
                return NULL;
        }
        return TAKE_PTR(o);
}
