/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A small, strict parser for systemd-style INI files (sandboxd.conf(5)):
 *
 *     # comment            ; comment
 *     [Section]
 *     Key = value           (whitespace around key and value is dropped)
 *
 * A value is taken verbatim (no quoting, no escapes, no line continuation). An empty
 * value ("Key=") resets the setting to its default. Unknown sections and keys are
 * warned about and ignored (a newer configuration must not stop an older daemon); a line
 * that is neither a comment, a section header nor an assignment, a key outside any
 * section, and a value the key's parser refuses are errors, logged with file:line. */

#include <stddef.h>
#include <stdio.h>

/* Parses rvalue into (char *) data + offset. Returns 0, or a negative errno (-EINVAL: not
 * of the expected form, -ERANGE: out of range); the parser logs it with file:line. */
typedef int (*config_parser_t)(const char *rvalue, void *data);

typedef struct ConfigTableItem {
        const char *section;
        const char *lvalue;
        config_parser_t parse;
        size_t offset;
        const char *expected;   /* for the error message: "an absolute path", … */
} ConfigTableItem;

/* One stream; filename is for messages. */
int config_parse_stream(FILE *f, const char *filename, const ConfigTableItem *table, size_t n_table,
                        void *userdata);
/* One file; -ENOENT when it does not exist (not logged: the caller decides). */
int config_parse_file(const char *path, const ConfigTableItem *table, size_t n_table, void *userdata);
/* main_path (if it exists), then dropin_dir/\*.conf in lexical order (later ones win). */
int config_parse_with_dropins(const char *main_path, const char *dropin_dir,
                              const ConfigTableItem *table, size_t n_table, void *userdata);

/* Parsers for the table. The string ones store a malloc'd copy (char *), NULL for "". */
int config_parse_string(const char *rvalue, void *data);
int config_parse_path(const char *rvalue, void *data);          /* absolute, normalized form not required */
int config_parse_port(const char *rvalue, void *data);          /* unsigned, 1 … 65535, "" = 0 */
int config_parse_seconds(const char *rvalue, void *data);       /* uint64_t, "30d", "12h", "0" */
int config_parse_bool(const char *rvalue, void *data);
int config_parse_size(const char *rvalue, void *data);          /* uint64_t bytes, "10G"; "" = 0 */
int config_parse_cpu_quota(const char *rvalue, void *data);    /* uint64_t µs per second, "200%"; "" = 0 */
int config_parse_uint64(const char *rvalue, void *data);        /* uint64_t; "" = 0 */          /* bool: yes/no, true/false, on/off, 1/0 */
