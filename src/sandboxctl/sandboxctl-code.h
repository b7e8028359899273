/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sandbox-client.h"

/* run-code ID [--context C|LANGUAGE] CODE: a cell of a code context (sandboxd-api(7),
 * CONTEXTS). Prints what it wrote, its value, a placeholder for each image (--json: all of
 * it, images in base64) and its exception's traceback. Returns 0 (1 if the cell raised), or
 * a negative errno (logged). */
int code_run(SandboxClient *c, const char *id, const char *context, const char *code, uint64_t timeout_sec,
             uint64_t output_max, bool json);
