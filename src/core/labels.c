/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json-util.h"
#include "labels.h"
#include "parse-util.h"
#include "strv.h"

static bool is_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Kubernetes' DNS subdomain: labels of lowercase letters, digits and '-', each beginning
 * and ending with a letter or digit, joined by '.'. */
static bool dns_subdomain_is_valid(const char *s, size_t n) {
        if (n == 0 || n > SANDBOX_LABEL_PREFIX_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                bool edge = i == 0 || i == n - 1 || s[i - 1] == '.' || s[i + 1] == '.';

                if (c == '.') {
                        if (i == 0 || i == n - 1 || s[i - 1] == '.')
                                return false;
                } else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c == '-' && !edge)))
                        return false;
        }
        return true;
}

static bool label_name_is_valid(const char *s, size_t n) {
        if (n == 0 || n > SANDBOX_LABEL_NAME_MAX || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
                        return false;
        return true;
}

bool label_key_is_valid(const char *key) {
        const char *slash;
        size_t n;

        if (!key)
                return false;
        n = strnlen(key, SANDBOX_LABEL_KEY_MAX + 1);
        if (n > SANDBOX_LABEL_KEY_MAX)
                return false;
        slash = memchr(key, '/', n);
        if (!slash)
                return label_name_is_valid(key, n);
        return dns_subdomain_is_valid(key, (size_t) (slash - key)) &&
               label_name_is_valid(slash + 1, n - (size_t) (slash - key) - 1);
}

bool label_value_is_valid(const char *value) {
        size_t n;

        if (!value)
                return false;
        n = strnlen(value, SANDBOX_LABEL_VALUE_MAX + 1);
        if (n > SANDBOX_LABEL_VALUE_MAX || !utf8_is_valid_n(value, n))
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) value[i] < 0x20 || value[i] == 0x7f)
                        return false;
        return true;
}

static int label_check(const char *key, const char *value, SandboxError *error) {
        if (!label_key_is_valid(key))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Labels: key '%.64s' is not a label key (an optional DNS prefix of at "
                                         "most %u characters and '/', then 1 to %u of A-Z a-z 0-9 - _ . beginning "
                                         "and ending with a letter or digit).",
                                         strempty(key), SANDBOX_LABEL_PREFIX_MAX, SANDBOX_LABEL_NAME_MAX);
        if (!label_value_is_valid(value))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Labels: the value of '%.64s' must be at most %u bytes of UTF-8 "
                                         "without control characters.", key, SANDBOX_LABEL_VALUE_MAX);
        return 0;
}

static int label_compare(const void *a, const void *b) {
        const char *x = *(const char * const *) a, *y = *(const char * const *) b;
        size_t kx = strcspn(x, "="), ky = strcspn(y, "=");
        int c = strncmp(x, y, kx < ky ? kx : ky);

        return c != 0 ? c : (kx > ky) - (kx < ky);
}

int labels_from_pairs(char * const *pairs, char ***ret, SandboxError *error) {
        _cleanup_strv_free_ char **l = NULL;
        size_t n = 0, bytes = 0;
        int r;

        l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (char * const *p = pairs; p && p[0]; p += 2) {
                if (!p[1])
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Labels: key '%.64s' has no value.", p[0]);
                r = label_check(p[0], p[1], error);
                if (r < 0)
                        return r;
                if (++n > SANDBOX_LABELS_MAX)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Labels: at most %u labels.", SANDBOX_LABELS_MAX);
                if (labels_get(l, p[0]))
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Labels: key '%.64s' is given twice.", p[0]);
                bytes += strlen(p[0]) + strlen(p[1]) + 2;
                if (bytes > SANDBOX_LABELS_BYTES_MAX)
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Labels: more than %u bytes in all.", SANDBOX_LABELS_BYTES_MAX);
                r = strv_extendf(&l, "%s=%s", p[0], p[1]);
                if (r < 0)
                        return r;
        }
        qsort(l, n, sizeof(char *), label_compare);
        *ret = TAKE_PTR(l);
        return 0;
}

int label_selector_check(const char *selector, SandboxError *error) {
        _cleanup_free_ char *key = NULL;
        const char *eq;

        if (!selector)
                return -EINVAL;
        eq = strchr(selector, '=');
        key = strndup(selector, eq ? (size_t) (eq - selector) : strlen(selector));
        if (!key)
                return -ENOMEM;
        if (!label_key_is_valid(key) || (eq && !label_value_is_valid(eq + 1)))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Label: '%.64s' is no selector: KEY=VALUE or KEY, KEY a label key.",
                                         selector);
        return 0;
}

const char *labels_get(char * const *labels, const char *key) {
        size_t k = strlen(key);

        for (char * const *l = labels; l && *l; l++)
                if (strncmp(*l, key, k) == 0 && (*l)[k] == '=')
                        return *l + k + 1;
        return NULL;
}

bool labels_match(char * const *labels, char * const *selectors) {
        for (char * const *s = selectors; s && *s; s++) {
                const char *eq = strchr(*s, '='), *v;
                bool found = false;

                if (!eq) {
                        if (!labels_get(labels, *s))
                                return false;
                        continue;
                }
                for (char * const *l = labels; l && *l && !found; l++) {
                        v = strchr(*l, '=');
                        found = v && v - *l == eq - *s && strncmp(*l, *s, (size_t) (eq - *s)) == 0 &&
                                streq(v + 1, eq + 1);
                }
                if (!found)
                        return false;
        }
        return true;
}

json_object *labels_to_json(char * const *labels) {
        return assignments_to_json(labels);
}

int labels_from_json(json_object *o, char ***ret, SandboxError *error) {
        _cleanup_free_ char **pairs = NULL;
        size_t n = 0;

        if (!json_object_is_type(o, json_type_object))
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Labels must be an object of strings.");
        if (json_object_object_length(o) > (int) SANDBOX_LABELS_MAX)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                         "Labels: at most %u labels.", SANDBOX_LABELS_MAX);
        pairs = calloc(2 * (size_t) json_object_object_length(o) + 1, sizeof(char *));
        if (!pairs)
                return -ENOMEM;
        json_object_object_foreach(o, key, v) {
                if (!json_object_is_type(v, json_type_string) ||
                    strlen(json_object_get_string(v)) != (size_t) json_object_get_string_len(v))
                        return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                                 "Labels: the value of '%.64s' must be a string.", key);
                pairs[n++] = key;
                pairs[n++] = (char *) json_object_get_string(v);
        }
        return labels_from_pairs(pairs, ret, error);
}

int labels_format(char * const *labels, char **ret) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        for (char * const *l = labels; l && *l; l++) {
                const char *eq = strchr(*l, '=');

                if (l != labels)
                        fputc(' ', f);
                if (eq && strpbrk(eq + 1, " \"\\"))
                        fprintf(f, "%.*s\"%s\"", (int) (eq - *l + 1), *l, eq + 1);
                else
                        fputs(*l, f);
        }
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        return 0;
}
