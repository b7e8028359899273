/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <string.h>

#include "macro.h"
#include "strv.h"
#include "varlink-idl.h"

static bool is_alpha(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_alnum(char c) {
        return is_alpha(c) || (c >= '0' && c <= '9');
}

/* One dot-separated part of an interface name, from *p: [A-Za-z0-9]([-]*[A-Za-z0-9])*
 * (its first character a letter if first). Moves *p past it. */
static bool interface_part_ok(const char **p, bool first) {
        const char *s = *p;

        if (first ? !is_alpha(*s) : !is_alnum(*s))
                return false;
        for (s++; *s && *s != '.'; s++) {
                while (*s == '-')
                        s++;
                if (!is_alnum(*s))
                        return false;
        }
        *p = s;
        return true;
}

bool varlink_interface_name_is_valid(const char *s) {
        size_t parts = 0;

        if (!s || strlen(s) > VARLINK_NAME_MAX)
                return false;
        for (;;) {
                if (!interface_part_ok(&s, parts == 0))
                        return false;
                parts++;
                if (!*s)
                        return parts >= 2;
                s++;   /* the dot */
        }
}

bool varlink_member_name_is_valid(const char *s) {
        if (!s || !(*s >= 'A' && *s <= 'Z') || strlen(s) > VARLINK_NAME_MAX)
                return false;
        for (s++; *s; s++)
                if (!is_alnum(*s))
                        return false;
        return true;
}

bool varlink_qualified_name_is_valid(const char *s) {
        _cleanup_free_ char *interface = NULL;
        const char *dot;

        if (!s)
                return false;
        dot = strrchr(s, '.');
        if (!dot || !varlink_member_name_is_valid(dot + 1))
                return false;
        interface = strndup(s, (size_t) (dot - s));
        return interface && varlink_interface_name_is_valid(interface);
}

typedef enum Token {
        TOKEN_END,
        TOKEN_WORD,
        TOKEN_OTHER,   /* a parenthesised group, "->", or any other punctuation */
} Token;

static const char *skip_space_and_comments(const char *p) {
        for (;;) {
                p += strspn(p, " \t\r\n");
                if (*p != '#')
                        return p;
                p += strcspn(p, "\n");
        }
}

/* Skips the group opened by the '(' at p: returns what follows its ')', or NULL if it is
 * never closed. Comments inside it may hold parentheses of their own. */
static const char *skip_group(const char *p) {
        unsigned depth = 0;

        for (;;) {
                p = skip_space_and_comments(p);
                if (!*p)
                        return NULL;
                if (*p == '(')
                        depth++;
                else if (*p == ')' && --depth == 0)
                        return p + 1;
                p++;
        }
}

static bool is_word_char(char c) {
        return is_alnum(c) || c == '.' || c == '_' || c == '-';
}

/* The next token at nesting depth 0, from *p; a word's text in *ret_word. */
static int next_token(const char **p, char **ret_word) {
        const char *s = skip_space_and_comments(*p);

        if (!*s)
                return TOKEN_END;
        if (*s == '(') {
                *p = skip_group(s);
                return *p ? TOKEN_OTHER : -EINVAL;
        }
        if (*s == ')')
                return -EINVAL;
        if (s[0] == '-' && s[1] == '>') {
                *p = s + 2;
                return TOKEN_OTHER;
        }
        if (!is_word_char(*s)) {
                *p = s + 1;
                return TOKEN_OTHER;
        }

        *p = s + strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");
        *ret_word = strndup(s, (size_t) (*p - s));
        return *ret_word ? TOKEN_WORD : -ENOMEM;
}

/* The word that must follow a keyword. */
static int next_name(const char **p, char **ret) {
        int t = next_token(p, ret);
        if (t < 0)
                return t;
        return t == TOKEN_WORD ? 0 : -EINVAL;
}

static int scan_member(const char **p, const char *keyword, char ***members, char ***methods) {
        _cleanup_free_ char *name = NULL;
        int r;

        r = next_name(p, &name);
        if (r < 0)
                return r;
        if (!varlink_member_name_is_valid(name) || strv_contains(*members, name))
                return -EINVAL;
        r = strv_extend(members, name);
        if (r < 0)
                return r;
        if (streq(keyword, "method"))
                return strv_consume(methods, TAKE_PTR(name));
        return 0;
}

int varlink_idl_scan(const char *idl, char **ret_interface, char ***ret_methods) {
        _cleanup_strv_free_ char **members = NULL, **methods = NULL;
        _cleanup_free_ char *keyword = NULL, *interface = NULL;
        const char *p = idl;
        int t, r;

        r = next_name(&p, &keyword);
        if (r < 0)
                return r;
        if (!streq(keyword, "interface"))
                return -EINVAL;
        r = next_name(&p, &interface);
        if (r < 0)
                return r;
        if (!varlink_interface_name_is_valid(interface))
                return -EINVAL;

        for (;;) {
                keyword = mfree(keyword);
                t = next_token(&p, &keyword);
                if (t < 0)
                        return t;
                if (t == TOKEN_END)
                        break;
                if (t != TOKEN_WORD)
                        continue;
                if (streq(keyword, "interface"))
                        return -EINVAL;
                if (streq(keyword, "method") || streq(keyword, "type") || streq(keyword, "error")) {
                        r = scan_member(&p, keyword, &members, &methods);
                        if (r < 0)
                                return r;
                }
        }

        if (!methods) {
                methods = calloc(1, sizeof(char *));
                if (!methods)
                        return -ENOMEM;
        }
        *ret_interface = TAKE_PTR(interface);
        *ret_methods = TAKE_PTR(methods);
        return 0;
}
