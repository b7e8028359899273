/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The Docker Engine API (or Podman's Docker-compatible one) over its unix socket, with
 * libcurl's multi interface driven by sd-event: no request ever blocks the loop. */

#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "macro.h"

typedef struct DockerClient DockerClient;

/* status: the HTTP status (0 if the request failed before one came: then error says why);
 * body: the parsed JSON reply, or NULL if there was none or it was not JSON. */
typedef void (*docker_callback_t)(long status, json_object *body, const char *error, void *userdata);

int docker_client_new(sd_event *event, const char *socket_path, DockerClient **ret);
DockerClient *docker_client_free(DockerClient *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(DockerClient *, docker_client_free);

/* method "GET"/"POST"/"DELETE"; path e.g. "/containers/create?name=x"; body may be NULL.
 * cb runs exactly once, never from within this call. */
int docker_request(DockerClient *c, const char *method, const char *path, json_object *body,
                   docker_callback_t cb, void *userdata);
/* Drops the callbacks of every request made with userdata (its owner is going away). */
void docker_client_cancel(DockerClient *c, void *userdata);
/* The daemon's cgroup driver ("cgroupfs", "systemd"), as its GET /info said; NULL until
 * set. */
const char *docker_client_cgroup_driver(DockerClient *c);
int docker_client_set_cgroup_driver(DockerClient *c, const char *driver);
/* A message for a failed request: the daemon's "message" field, or the HTTP status. */
const char *docker_error_message(long status, json_object *body, const char *error, char *buf, size_t size);
