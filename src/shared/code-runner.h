/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Code a client sends (HTTP execute's "code", MCP's run_code) reaches the sandbox on the
 * process's standard input, never in its argv: /proc/PID/cmdline, ps, the journal and
 * systemctl are readable by every local user, an API key in the code included. The argv is
 * a fixed bootstrap of the language that reads "LENGTH\n", then LENGTH bytes of code, and
 * runs them; what follows on stdin is the code's own standard input. */

#include <stddef.h>

/* The bootstrap's argv for language (python, python3, node, javascript, bash, sh, shell),
 * NULL-terminated and static; NULL for a language there is none for. */
const char * const *code_runner_argv(const char *language);
/* "LENGTH\n" code, then in: what the bootstrap reads. 0, -ENOMEM. */
int code_runner_stdin(const char *code, size_t code_len, const char *in, size_t in_len, char **ret,
                      size_t *ret_len);
