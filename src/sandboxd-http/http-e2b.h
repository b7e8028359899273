/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The E2B front of sandboxd-http (docs/E2B.md): E2B's control plane (/sandboxes, …) and its
 * sandbox plane (envd's Connect RPC on port 49983, /files; the code interpreter on 49999),
 * translated onto io.sandboxd.Sandbox. http-e2b-util.c has its pure parts. */

#include <stdint.h>

#include "http.h"

/* E2B's ports, said by E2b-Sandbox-Port */
#define E2B_ENVD_PORT 49983U
#define E2B_JUPYTER_PORT 49999U
/* E2B's user's home, and where it is in a sandboxd sandbox */
#define E2B_HOME "/home/user"
#define E2B_WORKDIR "/work"
/* E2B's templates, mapped by default onto these of ours ([E2B] Template= changes it) */
#define E2B_TEMPLATE_BASE "shell"
#define E2B_TEMPLATE_CODE_INTERPRETER "python-data"
/* The envd version the front says it is: the SDK enables what that version has (recursive
 * watches 0.1.4, octet-stream uploads 0.5.7, entries in watch events 0.6.3). */
#define E2B_ENVD_VERSION "0.5.7"

/* Connect's envelope: flags (0 a message, 2 the end of a stream), 4 bytes of length (big
 * endian), the message's JSON. */
#define CONNECT_FLAG_END 0x02
int http_connect_envelope(uint8_t flags, json_object *message, char **ret, size_t *ret_size);
/* The one message of a streaming call's request body (its JSON object). */
int http_connect_unwrap(const void *data, size_t size, json_object **ret, const char **ret_error);
/* Connect's error code for one of sandboxd's varlink errors (NULL: none) */
const char *http_connect_code(const char *error, json_object *parameters);
/* The HTTP status of a Connect error code (a unary call's error) */
unsigned http_connect_status(const char *code);

/* E2B's /home/user (and "~", and a relative path's base) is the sandbox's /work: a path
 * from the SDK in, and one of sandboxd's back out. */
int http_e2b_path_in(const char *path, char **ret);
int http_e2b_path_out(const char *path, char **ret);
/* WatchDir's event type (envd's EventType, as Connect's JSON says it) for one of the
 * agent's watch events (sandboxd-api(7)); NULL: none (overflow). fsnotify's mapping:
 * moved away is a rename, moved in a create. */
const char *http_e2b_watch_type(const char *ours);
/* An event's name as envd says it: its path relative to the watched directory dir (both
 * ours); NULL when path is not below dir. */
const char *http_e2b_watch_name(const char *path, const char *dir);

/* The E2B routes: the control plane's (looked up after http_routes[]), and the sandbox
 * plane's, chosen by E2b-Sandbox-Port (http_routes_select()). */
/* Frees envd's polling watchers (before the backend goes). */
void http_e2b_watchers_done(void);

extern const HttpRoute http_e2b_api_routes[];
extern const size_t http_e2b_n_api_routes;
extern const HttpRoute http_e2b_envd_routes[];
extern const size_t http_e2b_n_envd_routes;
extern const HttpRoute http_e2b_jupyter_routes[];
extern const size_t http_e2b_n_jupyter_routes;
