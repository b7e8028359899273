/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "sandbox-client.h"

/* sandboxctl history [ID] [--since TIME] [--limit N] [--json]: Manager.ListExecutions as a
 * table (oldest first, the newest at the bottom) or as JSON. since and limit are the
 * option strings as given (NULL: not given). Returns 0 or a negative errno (logged). */
int history_show(SandboxClient *c, const char *sandbox_id, const char *since, const char *limit, bool json);
