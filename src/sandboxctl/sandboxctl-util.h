/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include <json-c/json.h>

#include "json-util.h"
#include "macro.h"
#include "sandbox-client.h"

/* Prints the message (with %m naming error) and a newline to stderr; returns -|error|. */
int log_error_errno(int error, const char *format, ...) _printf_(2, 3);
#define log_error(...) log_error_errno(EINVAL, __VA_ARGS__)
#define log_oom() log_error_errno(ENOMEM, "Out of memory.")

char *format_timestamp(char *buf, size_t l, uint64_t usec);
int loop_write(int fd, const void *buf, size_t nbytes);

/* One JSON value on stdout: indented on a terminal, one line otherwise. */
int print_json(json_object *j);
int json_add_string(json_object *o, const char *key, const char *s);
int json_add_bytes(json_object *o, const char *key, const void *data, size_t size);
/* data as lowercase hex digits: bytes that must survive exactly. */
int json_add_hex(json_object *o, const char *key, const void *data, size_t size);

/* The sandbox id (GetSandbox); logs "Failed to get sandbox ID: …" on failure. */
int sandbox_get(SandboxClient *c, const char *id, SandboxHandle **ret);

/* A name from a sandbox (size bytes, not necessarily UTF-8) quoted as GNU ls quotes names
 * on a terminal (--quoting-style=shell-escape): plain names as they are, others in '…',
 * with control characters and invalid bytes as $'\n', $'\033' and the like. It never puts
 * a control character on the operator's terminal. NULL when out of memory. */
char *quote_name(const void *name, size_t size);
/* The length of a printable character at p (an ASCII one, or a valid UTF-8 sequence that
 * is not a C1 control), 0 if it is not one. */
size_t printable_length(const unsigned char *p, const unsigned char *end);
