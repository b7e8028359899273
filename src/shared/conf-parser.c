/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conf-parser.h"
#include "log.h"
#include "macro.h"
#include "parse-util.h"
#include "strv.h"

#define WHITESPACE " \t\r\n"

static char *strstrip(char *s) {
        size_t l;

        s += strspn(s, WHITESPACE);
        l = strlen(s);
        while (l > 0 && strchr(WHITESPACE, s[l - 1]))
                s[--l] = 0;
        return s;
}

static const ConfigTableItem *table_find(const ConfigTableItem *table, size_t n, const char *section,
                                         const char *lvalue, bool *ret_section_known) {
        bool known = false;

        for (size_t i = 0; i < n; i++) {
                if (!streq(table[i].section, section))
                        continue;
                known = true;
                if (streq(table[i].lvalue, lvalue))
                        return &table[i];
        }
        *ret_section_known = known;
        return NULL;
}

int config_parse_stream(FILE *f, const char *filename, const ConfigTableItem *table, size_t n_table,
                        void *userdata) {
        _cleanup_free_ char *line = NULL, *section = NULL;
        size_t allocated = 0;
        unsigned lineno = 0;
        ssize_t n;
        int r;

        while ((n = getline(&line, &allocated, f)) >= 0) {
                char *l, *eq, *key, *value;
                const ConfigTableItem *item;
                bool section_known;

                lineno++;
                if ((size_t) n != strlen(line))
                        return log_error_errno(EINVAL, "%s:%u: NUL byte in line.", filename, lineno);
                l = strstrip(line);
                if (!*l || *l == '#' || *l == ';')
                        continue;

                if (*l == '[') {
                        size_t k = strlen(l);
                        if (k < 3 || l[k - 1] != ']')
                                return log_error_errno(EINVAL, "%s:%u: Invalid section header: %s",
                                                       filename, lineno, l);
                        l[k - 1] = 0;
                        free(section);
                        section = strdup(l + 1);
                        if (!section)
                                return -ENOMEM;
                        if (!table_find(table, n_table, section, "", &section_known) && !section_known)
                                log_warning("%s:%u: Unknown section [%s], ignoring.", filename, lineno, section);
                        continue;
                }

                eq = strchr(l, '=');
                if (!eq)
                        return log_error_errno(EINVAL, "%s:%u: Expected KEY=VALUE, a [Section] or a comment: %s",
                                               filename, lineno, l);
                *eq = 0;
                key = strstrip(l);
                value = strstrip(eq + 1);
                if (!*key)
                        return log_error_errno(EINVAL, "%s:%u: Missing key before '='.", filename, lineno);
                if (!section)
                        return log_error_errno(EINVAL, "%s:%u: Assignment to %s outside of any section.",
                                               filename, lineno, key);

                item = table_find(table, n_table, section, key, &section_known);
                if (!item) {
                        if (section_known)
                                log_warning("%s:%u: Unknown key %s= in [%s], ignoring.", filename, lineno, key, section);
                        continue;
                }
                r = item->parse(value, (uint8_t *) userdata + item->offset);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return log_error_errno(r, "%s:%u: Invalid %s=%s%s%s: %m", filename, lineno, key, value,
                                               item->expected ? ", expected " : "", strempty(item->expected));
        }
        if (ferror(f))
                return log_error_errno(EIO, "%s: Read error.", filename);
        return 0;
}

int config_parse_file(const char *path, const ConfigTableItem *table, size_t n_table, void *userdata) {
        FILE *f;
        int r;

        f = fopen(path, "re");
        if (!f) /* A missing file is the caller's to judge; anything else is named here. */
                return errno == ENOENT ? -ENOENT : log_error_errno(errno, "Failed to open %s: %m", path);
        r = config_parse_stream(f, path, table, n_table, userdata);
        fclose(f);
        return r;
}

static int conf_name_compare(const void *a, const void *b) {
        return strcmp(*(char * const *) a, *(char * const *) b);
}

int config_parse_with_dropins(const char *main_path, const char *dropin_dir,
                              const ConfigTableItem *table, size_t n_table, void *userdata) {
        _cleanup_strv_free_ char **names = NULL;
        DIR *d;
        int r;

        if (main_path) {
                r = config_parse_file(main_path, table, n_table, userdata);
                if (r < 0 && r != -ENOENT)
                        return r;
        }
        if (!dropin_dir)
                return 0;

        d = opendir(dropin_dir);
        if (!d)
                return errno == ENOENT ? 0 : log_error_errno(errno, "Failed to open %s: %m", dropin_dir);
        for (struct dirent *de; (de = readdir(d)); ) {
                size_t l = strlen(de->d_name);
                if (de->d_name[0] == '.' || l <= 5 || !streq(de->d_name + l - 5, ".conf"))
                        continue;
                if (strv_extend(&names, de->d_name) < 0) {
                        closedir(d);
                        return -ENOMEM;
                }
        }
        closedir(d);
        if (names)
                qsort(names, strv_length(names), sizeof(char *), conf_name_compare);

        for (char **n = names; n && *n; n++) {
                _cleanup_free_ char *p = NULL;
                if (asprintf(&p, "%s/%s", dropin_dir, *n) < 0)
                        return -ENOMEM;
                r = config_parse_file(p, table, n_table, userdata);
                if (r == -ENOENT)
                        continue;  /* removed meanwhile */
                if (r < 0)
                        return r;
        }
        return 0;
}

int config_parse_string(const char *rvalue, void *data) {
        char **s = data, *c = NULL;

        if (*rvalue) {
                c = strdup(rvalue);
                if (!c)
                        return -ENOMEM;
        }
        free(*s);
        *s = c;
        return 0;
}

int config_parse_path(const char *rvalue, void *data) {
        if (*rvalue && rvalue[0] != '/')
                return -EINVAL;
        return config_parse_string(rvalue, data);
}

int config_parse_port(const char *rvalue, void *data) {
        unsigned *port = data;
        uint64_t v;
        int r;

        if (!*rvalue) {
                *port = 0;
                return 0;
        }
        r = parse_uint64(rvalue, &v);
        if (r < 0)
                return r;
        if (v == 0 || v > 65535)
                return -ERANGE;
        *port = (unsigned) v;
        return 0;
}

static int parse_u64_with(const char *rvalue, void *data, int (*parse)(const char *, uint64_t *)) {
        uint64_t *u = data, v;
        int r;

        if (!*rvalue) {
                *u = 0;
                return 0;
        }
        r = parse(rvalue, &v);
        if (r < 0)
                return r;
        *u = v;
        return 0;
}

int config_parse_size(const char *rvalue, void *data) {
        return parse_u64_with(rvalue, data, parse_size);
}

int config_parse_cpu_quota(const char *rvalue, void *data) {
        return parse_u64_with(rvalue, data, parse_cpu_quota);
}

int config_parse_uint64(const char *rvalue, void *data) {
        return parse_u64_with(rvalue, data, parse_uint64);
}

int config_parse_seconds(const char *rvalue, void *data) {
        uint64_t *sec = data, v;
        int r;

        if (!*rvalue) {
                *sec = 0;
                return 0;
        }
        r = parse_seconds(rvalue, &v);
        if (r < 0)
                return r;
        *sec = v;
        return 0;
}

int config_parse_bool(const char *rvalue, void *data) {
        static const char *const yes[] = { "1", "yes", "y", "true", "t", "on" };
        static const char *const no[] = { "0", "no", "n", "false", "f", "off" };
        bool *b = data;

        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (strcasecmp(rvalue, yes[i]) == 0) {
                        *b = true;
                        return 0;
                }
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                if (strcasecmp(rvalue, no[i]) == 0) {
                        *b = false;
                        return 0;
                }
        return -EINVAL;
}
