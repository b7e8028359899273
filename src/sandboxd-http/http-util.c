/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Base64, JSON bodies, and the varlink error → HTTP status table (SANDBOX_ERRORS). */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>

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

static bool only_whitespace(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!strchr(" \t\r\n", s[i]) || !s[i])
                        return false;
        return true;
}

json_object *http_json_parse(const char *text, size_t size, const char **ret_error) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ char *copy = NULL;
        int r;

        if (only_whitespace(text, size))
                return json_object_new_object();
        /* json_parse_strict() wants a NUL after the text; the body need not have one. */
        copy = malloc(size + 1);
        if (!copy) {
                *ret_error = "Out of memory.";
                return NULL;
        }
        memcpy(copy, text, size);
        copy[size] = 0;
        r = json_parse_strict(copy, size, HTTP_JSON_DEPTH_MAX, &o);
        if (r == -ENOMEM) {
                *ret_error = "Out of memory.";
                return NULL;
        }
        if (r == -ENOTUNIQ) {
                *ret_error = "The body's JSON has a duplicate key.";
                return NULL;
        }
        if (r == -ELOOP) {
                *ret_error = "The body's JSON is nested too deeply.";
                return NULL;
        }
        if (r == -ERANGE) {
                *ret_error = "The body's JSON has a number out of range (integers must fit 64 bits, "
                             "numbers must be finite).";
                return NULL;
        }
        if (r < 0) {
                *ret_error = "The body is not JSON (RFC 8259: no control characters in strings, no NaN).";
                return NULL;
        }
        if (!json_object_is_type(o, json_type_object)) {
                *ret_error = "The body is not a JSON object.";
                return NULL;
        }
        return TAKE_PTR(o);
}

const char *http_address_to_string(const struct sockaddr *sa, char buf[static INET6_ADDRSTRLEN]) {
        if (!sa)
                return "unix";
        if (sa->sa_family == AF_INET)
                return inet_ntop(AF_INET, &((const struct sockaddr_in *) sa)->sin_addr, buf, INET6_ADDRSTRLEN);
        if (sa->sa_family == AF_INET6) {
                const struct in6_addr *a = &((const struct sockaddr_in6 *) sa)->sin6_addr;

                if (IN6_IS_ADDR_V4MAPPED(a))
                        return inet_ntop(AF_INET, a->s6_addr + 12, buf, INET6_ADDRSTRLEN);
                return inet_ntop(AF_INET6, a, buf, INET6_ADDRSTRLEN);
        }
        return "unix";
}

/* TEXT as an address (IPv4 or IPv6, as a proxy writes it in X-Forwarded-For) in the same
 * form http_address_to_string() gives a peer; -EINVAL when it is not an address. */
int http_address_normalize(const char *text, char buf[static INET6_ADDRSTRLEN]) {
        struct sockaddr_in v4 = { .sin_family = AF_INET };
        struct sockaddr_in6 v6 = { .sin6_family = AF_INET6 };

        if (inet_pton(AF_INET, text, &v4.sin_addr) == 1)
                return http_address_to_string((struct sockaddr *) &v4, buf) ? 0 : -EINVAL;
        if (inet_pton(AF_INET6, text, &v6.sin6_addr) == 1)
                return http_address_to_string((struct sockaddr *) &v6, buf) ? 0 : -EINVAL;
        return -EINVAL;
}

const char *http_address_limit_key(const char *address, char buf[static HTTP_ADDRESS_KEY_MAX]) {
        struct in6_addr a;
        char text[INET6_ADDRSTRLEN];

        if (!strchr(address, ':') || inet_pton(AF_INET6, address, &a) != 1 ||
            IN6_IS_ADDR_V4MAPPED(&a)) {
                snprintf(buf, HTTP_ADDRESS_KEY_MAX, "%s", address);
                return buf;
        }
        memset(a.s6_addr + 8, 0, 8);
        if (!inet_ntop(AF_INET6, &a, text, sizeof(text))) {
                snprintf(buf, HTTP_ADDRESS_KEY_MAX, "%s", address);
                return buf;
        }
        snprintf(buf, HTTP_ADDRESS_KEY_MAX, "%s/64", text);
        return buf;
}
