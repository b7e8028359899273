/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* What json-c cannot be told to refuse (json-c 0.16, even with JSON_TOKENER_STRICT): raw
 * control characters in strings, NaN and Infinity, "1.", integers it would clamp to 64 bits,
 * doubles that overflow to infinity, a NUL in a key (keys are C strings: cut there), and
 * duplicate keys (the last one wins). A recursive-descent check of RFC 8259's grammar finds
 * the first six; it also counts each object's members in document order, which the tree
 * json-c builds must match member for member: a duplicate key leaves an object one short. */
typedef struct JsonScan {
        const char *p, *end;
        int depth_max;
        size_t *members;        /* per object, in document order */
        size_t n_members, n_allocated;
} JsonScan;

static void scan_ws(JsonScan *s) {
        while (s->p < s->end && strchr(" \t\r\n", *s->p) && *s->p)
                s->p++;
}

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

/* The bytes a JSON string holds as they are: not a control character, '"' or '\\'. */
static const bool string_plain[256] = {
        [0x20 ... '"' - 1] = true,
        ['"' + 1 ... '\\' - 1] = true,
        ['\\' + 1 ... 0xff] = true,
};

static int scan_string(JsonScan *s, bool key) {
        s->p++;                 /* the opening quote */
        for (;;) {
                /* The plain bytes first, by a table and through a local pointer (a char load
                 * could alias s->p, which would be stored at each byte). */
                const unsigned char *p = (const unsigned char *) s->p, *end = (const unsigned char *) s->end;
                while (p < end && string_plain[*p])
                        p++;
                s->p = (const char *) p;
                if (s->p >= s->end)
                        return -EBADMSG;
                unsigned char c = (unsigned char) *s->p++;
                if (c == '"')
                        return 0;
                if (c < 0x20)
                        return -EBADMSG;
                if (c != '\\')
                        continue;
                if (s->p >= s->end)
                        return -EBADMSG;
                c = (unsigned char) *s->p++;
                if (c == 'u') {
                        if (s->end - s->p < 4)
                                return -EBADMSG;
                        for (int i = 0; i < 4; i++)
                                if (!strchr("0123456789abcdefABCDEF", s->p[i]) || !s->p[i])
                                        return -EBADMSG;
                        if (key && memcmp(s->p, "0000", 4) == 0)
                                return -EBADMSG;
                        s->p += 4;
                } else if (!c || !strchr("\"\\/bfnrt", c))
                        return -EBADMSG;
        }
}

static int scan_number(JsonScan *s) {
        const char *start = s->p, *digits;
        bool integer = true, negative = false;
        size_t n;

        if (*s->p == '-') {
                negative = true;
                s->p++;
        }
        digits = s->p;
        if (s->p >= s->end || !is_digit(*s->p))
                return -EBADMSG;
        if (*s->p == '0')
                s->p++;
        else
                while (s->p < s->end && is_digit(*s->p))
                        s->p++;
        n = (size_t) (s->p - digits);
        if (s->p < s->end && *s->p == '.') {
                integer = false;
                s->p++;
                if (s->p >= s->end || !is_digit(*s->p))
                        return -EBADMSG;
                while (s->p < s->end && is_digit(*s->p))
                        s->p++;
        }
        if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
                integer = false;
                s->p++;
                if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
                        s->p++;
                if (s->p >= s->end || !is_digit(*s->p))
                        return -EBADMSG;
                while (s->p < s->end && is_digit(*s->p))
                        s->p++;
        }
        if (integer) {
                /* json-c holds int64 and, above it, uint64; beyond those it clamps. */
                const char *limit = negative ? "9223372036854775808" : "18446744073709551615";
                size_t l = strlen(limit);
                if (n > l || (n == l && memcmp(digits, limit, l) > 0))
                        return -ERANGE;
                return 0;
        }
        /* The grammar was checked: strtod() reads exactly this token (the text ends in a NUL). */
        errno = 0;
        double d = strtod(start, NULL);
        if (isinf(d))
                return -ERANGE;
        return 0;
}

static int scan_literal(JsonScan *s, const char *word) {
        size_t n = strlen(word);

        if ((size_t) (s->end - s->p) < n || memcmp(s->p, word, n) != 0)
                return -EBADMSG;
        s->p += n;
        return 0;
}

static int scan_value(JsonScan *s, int depth);

static int scan_container(JsonScan *s, int depth, bool object) {
        size_t slot = 0;
        int r;

        if (depth >= s->depth_max)
                return -ELOOP;
        if (object) {
                if (s->n_members == s->n_allocated) {
                        size_t n = MAX(s->n_allocated * 2, (size_t) 16);
                        size_t *m = reallocarray(s->members, n, sizeof(size_t));
                        if (!m)
                                return -ENOMEM;
                        s->members = m;
                        s->n_allocated = n;
                }
                slot = s->n_members++;
                s->members[slot] = 0;
        }
        s->p++;                 /* { or [ */
        scan_ws(s);
        if (s->p < s->end && *s->p == (object ? '}' : ']')) {
                s->p++;
                return 0;
        }
        for (;;) {
                if (object) {
                        scan_ws(s);
                        if (s->p >= s->end || *s->p != '"')
                                return -EBADMSG;
                        r = scan_string(s, true);
                        if (r < 0)
                                return r;
                        scan_ws(s);
                        if (s->p >= s->end || *s->p != ':')
                                return -EBADMSG;
                        s->p++;
                        s->members[slot]++;
                }
                r = scan_value(s, depth + 1);
                if (r < 0)
                        return r;
                scan_ws(s);
                if (s->p >= s->end)
                        return -EBADMSG;
                if (*s->p == ',') {
                        s->p++;
                        continue;
                }
                if (*s->p != (object ? '}' : ']'))
                        return -EBADMSG;
                s->p++;
                return 0;
        }
}

static int scan_value(JsonScan *s, int depth) {
        scan_ws(s);
        if (s->p >= s->end)
                return -EBADMSG;
        switch (*s->p) {
        case '{':
                return scan_container(s, depth, true);
        case '[':
                return scan_container(s, depth, false);
        case '"':
                return scan_string(s, false);
        case 't':
                return scan_literal(s, "true");
        case 'f':
                return scan_literal(s, "false");
        case 'n':
                return scan_literal(s, "null");
        default:
                if (*s->p == '-' || is_digit(*s->p))
                        return scan_number(s);
                return -EBADMSG;
        }
}

/* The tree, walked in document order, against the members counted in the text. */
static int check_members(json_object *o, const size_t *members, size_t n_members, size_t *i) {
        int r;

        if (json_object_is_type(o, json_type_array)) {
                for (size_t k = 0; k < json_object_array_length(o); k++) {
                        r = check_members(json_object_array_get_idx(o, k), members, n_members, i);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        if (!json_object_is_type(o, json_type_object))
                return 0;
        if (*i >= n_members || members[*i] != (size_t) json_object_object_length(o))
                return -ENOTUNIQ;
        (*i)++;
        json_object_object_foreach(o, key, v) {
                (void) key;
                r = check_members(v, members, n_members, i);
                if (r < 0)
                        return r;
        }
        return 0;
}

int json_parse_strict(const char *p, size_t size, int depth, json_object **ret) {
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        _cleanup_free_ size_t *members = NULL;
        _cleanup_json_ json_object *m = NULL;
        JsonScan s = { .p = p, .end = p + size, .depth_max = depth };
        size_t i = 0;
        int r;

        if (size >= INT32_MAX)
                return -EMSGSIZE;
        r = scan_value(&s, 0);
        members = s.members;
        if (r < 0)
                return r;
        scan_ws(&s);
        if (s.p != s.end)
                return -EBADMSG;

        tok = json_tokener_new_ex(depth + 1);
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT
#ifdef JSON_TOKENER_VALIDATE_UTF8
                               | JSON_TOKENER_VALIDATE_UTF8
#endif
        );
        m = json_tokener_parse_ex(tok, p, (int) size + 1);
        if (json_tokener_get_error(tok) != json_tokener_success)
                return -EBADMSG;
        r = check_members(m, members, s.n_members, &i);
        if (r < 0)
                return r;
        if (i != s.n_members)
                return -ENOTUNIQ;
        *ret = TAKE_PTR(m);
        return 0;
}

const char *json_strict_strerror(int r) {
        switch (r) {
        case -ERANGE:
                return "a number out of range (integers must fit 64 bits, numbers must be finite)";
        case -ENOTUNIQ:
                return "a duplicate key";
        case -ELOOP:
                return "nested too deeply";
        case -EMSGSIZE:
                return "too long";
        default:
                return "not JSON";
        }
}

int json_string_get_clean(json_object *j, const char **ret) {
        const char *s;

        if (!json_object_is_type(j, json_type_string))
                return -EINVAL;
        s = json_object_get_string(j);
        if (strlen(s) != (size_t) json_object_get_string_len(j))
                return -EBADMSG;
        *ret = s;
        return 0;
}

static int find_nul(json_object *o, const char *path, char **ret_path) {
        int r;

        if (json_object_is_type(o, json_type_string)) {
                if (strlen(json_object_get_string(o)) == (size_t) json_object_get_string_len(o))
                        return 0;
                *ret_path = strdup(path);
                return *ret_path ? 1 : -ENOMEM;
        }
        if (json_object_is_type(o, json_type_array)) {
                for (size_t i = 0; i < json_object_array_length(o); i++) {
                        _cleanup_free_ char *p = NULL;
                        if (asprintf(&p, "%s[%zu]", path, i) < 0)
                                return -ENOMEM;
                        r = find_nul(json_object_array_get_idx(o, i), p, ret_path);
                        if (r != 0)
                                return r;
                }
                return 0;
        }
        if (json_object_is_type(o, json_type_object)) {
                json_object_object_foreach(o, key, v) {
                        _cleanup_free_ char *p = NULL;
                        if (asprintf(&p, "%s%s%s", path, *path ? "." : "", key) < 0)
                                return -ENOMEM;
                        r = find_nul(v, p, ret_path);
                        if (r != 0)
                                return r;
                }
        }
        return 0;
}

int json_find_nul(json_object *o, const char *const *skip, char **ret_path) {
        int r;

        if (!json_object_is_type(o, json_type_object))
                return find_nul(o, "", ret_path);
        json_object_object_foreach(o, key, v) {
                bool skipped = false;
                for (const char *const *k = skip; k && *k; k++)
                        skipped = skipped || streq(*k, key);
                if (skipped)
                        continue;
                r = find_nul(v, key, ret_path);
                if (r != 0)
                        return r;
        }
        return 0;
}

bool json_is_integer(json_object *v, int64_t *ret) {
        double d;

        if (json_object_is_type(v, json_type_int)) {
                if (ret)
                        *ret = json_object_get_int64(v);
                return true;
        }
        if (!json_object_is_type(v, json_type_double))
                return false;
        d = json_object_get_double(v);
        if (!(d >= -0x1p63 && d < 0x1p63) || d != (double) (int64_t) d)
                return false;
        if (ret)
                *ret = (int64_t) d;
        return true;
}

int json_timeout_option(json_object *v, const char **ret_name, uint64_t *ret_value) {
        double d;

        if (json_object_is_type(v, json_type_int)) {
                if (json_object_get_int64(v) < 0)
                        return -EINVAL;
                *ret_name = "Timeout";
                *ret_value = json_object_get_uint64(v);
                return 0;
        }
        if (!json_object_is_type(v, json_type_double))
                return -EINVAL;
        d = json_object_get_double(v);
        if (!isfinite(d) || d < 0)
                return -EINVAL;
        if (d < 0x1p64 && d == (double) (uint64_t) d) {
                /* 2.0 is an integer (JSON Schema says so too). */
                *ret_name = "Timeout";
                *ret_value = (uint64_t) d;
                return 0;
        }
        *ret_name = "TimeoutUSec";
        /* Beyond uint64's microseconds: the most, which the core refuses naming its bound. */
        *ret_value = d * 1e6 >= 0x1p64 ? UINT64_MAX : (uint64_t) (d * 1e6 + 0.5);
        return 0;
}

json_object *assignments_to_json(char * const *l) {
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        for (char * const *i = l; i && *i; i++) {
                const char *eq = strchr(*i, '=');
                _cleanup_free_ char *key = eq ? strndup(*i, (size_t) (eq - *i)) : NULL;

                if (eq && (!key || json_add(o, key, json_object_new_string(eq + 1)) < 0))
                        return NULL;
        }
        return TAKE_PTR(o);
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
