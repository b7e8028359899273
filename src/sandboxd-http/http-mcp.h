/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* POST /mcp: the MCP tools over Streamable HTTP (http-mcp.c, src/mcp/mcp.h). */

#include <stdbool.h>

#include "http.h"

/* The route's handler and its body's upload function (HTTP_ROUTE_UPLOAD: the raw body,
 * which must be JSON-RPC's own to answer, not the bridge's JSON object check). */
int http_mcp_post(HttpRequest *req);
int http_mcp_upload(HttpRequest *req, const char *data, size_t *size);

/* Whether a browser's Origin may use /mcp: absent, the Host itself, or the loopback. */
bool http_mcp_origin_allowed(const char *origin, const char *host);
