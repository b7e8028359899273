/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What a payload backend (payload-bwrap.c, payload-docker.c) sees of its sandbox and of
 * sandboxd: read-only accessors, and nothing it may set. The backends include this and
 * payload.h (what they provide and call back), never sandbox-internal.h, so that the ops
 * table is the whole contract. docs/ARCHITECTURE.md, "Payload backends". */

#include <stdbool.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "docker-api.h"
#include "mount-renew.h"
#include "options.h"
#include "payload.h"
#include "sandbox.h"
#include "scope.h"
#include "template.h"

/* sandboxd's, the same for every sandbox: made by manager_new(), read by the backends. */
typedef struct PayloadHost {
        sd_event *event;
        SystemdClient *systemd;
        DockerClient *docker;
        RenewServer *renew_server;   /* a recycled sandbox's mounts renewed (mount-renew.h) */
        const TemplateSet *templates;
        const char *state_dir;
        const char *agent_path;
        const char *bwrap_path;
        int seccomp_fd;              /* the seccomp policy as BPF, for bwrap */
        char *docker_seccomp_profile; /* ... as Docker's JSON profile */
        char **proc_masks;           /* /proc files bound over (bwrap_find_proc_masks()) */
        char **proc_mask_dirs;
        char *empty_dir;             /* <state>/empty: bound over the masked /proc directories */
} PayloadHost;

const PayloadHost *manager_payload_host(Manager *m);
/* Whether a sandbox of sandboxd's has that id (pooled and kept ones too): for a backend's
 * sweep of what a killed sandboxd left (PayloadOps.remove_orphans). */
bool manager_knows_sandbox(Manager *m, const char *id);
const PayloadHost *sandbox_payload_host(Sandbox *s);

/* The backend's own state of s (PayloadOps.state_size bytes, zeroed at first). */
void *sandbox_payload_state(Sandbox *s);
/* The host uid the sandbox's processes run as. */
uid_t sandbox_payload_uid(Sandbox *s);
/* Its unit (sandbox-<id>.scope, or a .slice), and its cgroup once known (NULL before). */
const char *sandbox_payload_unit(Sandbox *s);
const char *sandbox_payload_cgroup(Sandbox *s);
/* The agent's control socket (after sandbox_payload_connected()). */
int sandbox_payload_control_fd(Sandbox *s);
/* The template's environment, merged under each exec's own. */
char **sandbox_payload_environment(Sandbox *s);
const SandboxConfig *sandbox_payload_config(Sandbox *s);
/* Where its /work and /tmp are on disk (workspace.h: DIR/ID), for its payload; NULL with
 * Storage=tmpfs. */
int sandbox_workspace_path(Sandbox *s, char **ret);
/* Its /dev/shm on disk (workspace_shm_dir(): DIR/ID/shm), for its payload; NULL with
 * Storage=tmpfs, or when the workspace cannot have one (logged): a tmpfs then. */
int sandbox_workspace_shm_dir(Sandbox *s, char **ret);
/* Whether s is still starting (neither running yet nor going). */
bool sandbox_payload_starting(Sandbox *s);
