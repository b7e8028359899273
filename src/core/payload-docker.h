/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The docker backend: the container that is a sandbox's payload, described for the
 * Engine API. The agent runs in it bind-mounted from the host and connects back over a
 * socket sandboxd listens on (a container inherits no descriptor of ours). */

#include <json-c/json.h>

#include "options.h"

#define DOCKER_AGENT_INSIDE "/run/sandbox-init"
#define DOCKER_SOCKET_DIR_INSIDE "/run/sandbox"
#define DOCKER_CONTROL_SOCKET "ctl.sock"
/* Next to it, the seccomp policy as BPF: the agent loads it once it has made the sandbox's
 * user namespace, the one thing the Docker profile lets through for it (sandboxd(8)). */
#define DOCKER_SECCOMP_FILE "seccomp.bpf"
#define DOCKER_LABEL_ID "io.sandboxd.id"

typedef struct DockerCreateParams {
        const char *sandbox_id;
        const char *image;
        const char *agent_path;      /* host path of the static sandbox-init */
        const char *socket_dir;      /* host directory holding the control socket */
        uid_t host_uid;              /* the sandbox's own: the container's user, uid 1000 inside */
        const char *cgroup_parent;   /* cgroupfs: a path under the scope; systemd: the slice */
        const char *seccomp_profile; /* the policy as a Docker profile (JSON text) */
        char * const *environment;
        const SandboxLimits *limits;
        uint64_t disk_max;
        const char *workspace_dir; /* NULL: /work and /tmp are tmpfs; else its work/ and tmp/ (workspace.h) */
        bool egress;                 /* the agent binds the egress proxy's listener */
} DockerCreateParams;

/* The body of POST /containers/create (pure, for tests). */
int docker_build_create_body(const DockerCreateParams *p, json_object **ret);
