/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A payload is what runs inside a sandbox's scope: one backend per mechanism behind one
 * interface (bwrap now; docker as a sibling file later). The backend starts its process
 * *held*: it exists, so its pid can be put into the transient scope, but it runs nothing
 * of the sandbox's until released. Inside, sandbox-init speaks the agent protocol on the
 * control socket the payload was given. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

typedef enum PayloadKind {
        PAYLOAD_BWRAP,
        PAYLOAD_DOCKER,
        _PAYLOAD_KIND_MAX,
        _PAYLOAD_KIND_INVALID = -EINVAL,
} PayloadKind;

const char *payload_kind_to_string(PayloadKind k);
PayloadKind payload_kind_from_string(const char *s);

struct Template;

typedef struct PayloadParams {
        const struct Template *template;
        const char *bwrap_path;
        const char *agent_path;    /* host path of sandbox-init */
        uint64_t disk_max;         /* size of the /work and /tmp tmpfs */
        char * const *proc_masks;  /* /proc files to hide (those that exist on this kernel) */
        char * const *proc_mask_dirs;
        uid_t host_uid;            /* the unprivileged host uid the sandbox runs as */
        gid_t host_gid;
        char * const *environment; /* the agent's environment */
} PayloadParams;

typedef struct PayloadProcess {
        pid_t pid;        /* goes into the scope */
        int pidfd;        /* readable when the payload has ended */
        int release_fd;   /* write one byte to release; close to abort */
} PayloadProcess;

#define PAYLOAD_PROCESS_NULL ((PayloadProcess) { .pid = 0, .pidfd = -EBADF, .release_fd = -EBADF })

/* Starts the payload held, with control_fd as the agent's AGENT_CONTROL_FD and
 * stderr_fd as its standard error (stdin and stdout are /dev/null). */
int payload_spawn_held(const PayloadParams *p, int control_fd, int stderr_fd, PayloadProcess *ret);
int payload_release(PayloadProcess *p);
/* SIGKILLs a payload that is still held or running and closes its descriptors. */
void payload_process_abort(PayloadProcess *p);
void payload_process_done(PayloadProcess *p);

/* bwrap backend. The argv builder is pure, for tests. */
int bwrap_build_argv(const PayloadParams *p, char ***ret);
/* Which of the /proc entries that leak host information exist here (read once). */
int bwrap_find_proc_masks(char ***ret_files, char ***ret_dirs);
