/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A journal entry about a sandbox (sandbox-logs.h) as JSON, for both faces: GetLogs' lines
 * on D-Bus and its replies on varlink (sandboxd-api(7)). They differ only in a message
 * that is not UTF-8: D-Bus has it as an array of byte values under "message" (as
 * journalctl -o json does), varlink as base64 under "messageBytes" (its interface cannot
 * say "string or array"). */

#include <json-c/json.h>

#include "sandbox-logs.h"

typedef enum LogEntryBytes {
        LOG_ENTRY_BYTES_ARRAY,   /* "message": [byte, …] */
        LOG_ENTRY_BYTES_BASE64,  /* "messageBytes": "base64" */
} LogEntryBytes;

int log_entry_to_json(const SandboxLogEntry *e, LogEntryBytes bytes, json_object **ret);
