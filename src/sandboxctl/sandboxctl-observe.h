/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include <json-c/json.h>

#include "sandbox-client.h"

/* sandboxctl logs ID [-n N] [-f] [--json]: the sandbox's journal entries as journalctl's
 * short output shows them (local time, identifier, message), or one JSON object per line.
 * Returns 0 or a negative errno (logged). */
int logs_show(SandboxClient *c, const char *id, unsigned lines, bool follow, bool json);

/* sandboxctl pool [--json]: ListPools as a table or a JSON array. */
int pools_show(SandboxClient *c, bool json);

/* status: the live metrics, under the properties (text), or as keys of j (--json). */
void metrics_print_text(const SandboxMetricsInfo *m);
int metrics_add_json(json_object *j, const SandboxMetricsInfo *m);
