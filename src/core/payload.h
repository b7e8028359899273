/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A payload is what runs inside a sandbox's scope: one backend per mechanism behind one
 * interface (bwrap now; docker as a sibling file later). The backend starts its processes
 * *held*: they set up the sandbox (namespaces, mounts) while systemd makes the scope,
 * but nothing of the sandbox's own runs until they are in it and released. Inside,
 * sandbox-init speaks the agent protocol on the control socket the payload was given. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

/* Descriptors bwrap gets besides the agent's control socket. */
#define PAYLOAD_BLOCK_FD 4
#define PAYLOAD_INFO_FD 5
#define PAYLOAD_SECCOMP_FD 6
#define PAYLOAD_MACHINE_ID_FD 7

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
        int seccomp_fd;            /* the policy's BPF (reopened for each payload); -1: none */
        const char *etc_dir;       /* the template's /etc tree (etc-tree.h); NULL: no /etc */
        const char *machine_id;    /* the sandbox's own /etc/machine-id (32 hex digits) */
} PayloadParams;

typedef struct PayloadProcess {
        pid_t pid;        /* bwrap's monitor; goes into the scope */
        pid_t child_pid;  /* the sandbox's PID 1, once known; goes into the scope too */
        int pidfd;        /* readable when the payload has ended */
        int release_fd;   /* write one byte to release; close to abort */
        int info_fd;      /* where bwrap says the child's pid (readable, non-blocking) */
        char info[512];
        size_t info_size;
} PayloadProcess;

#define PAYLOAD_PROCESS_NULL                                                    \
        ((PayloadProcess) { .pidfd = -EBADF, .release_fd = -EBADF, .info_fd = -EBADF })

/* Starts the payload held, with control_fd as the agent's AGENT_CONTROL_FD. Its stdin
 * and stdout are /dev/null; its stderr is a journald stream named log_identifier. */
int payload_spawn_held(const PayloadParams *p, int control_fd, const char *log_identifier, PayloadProcess *ret);
/* For clone() children: setgroups/setresgid/setresuid as raw system calls. */
int drop_to_uid(uid_t uid, gid_t gid);

/* A process that only keeps a unit alive (sandbox-init --hold), as the unprivileged
 * holder_uid; stdio /dev/null, nothing of the daemon's. */
int payload_spawn_holder(const char *agent_path, uid_t holder_uid, PayloadProcess *ret);
/* Reads what is there of bwrap's info: 1 once child_pid is known, 0 if more is to come. */
int payload_read_info(PayloadProcess *p);
/* Parses bwrap's --info-fd JSON for the child's pid (pure, for tests). */
int bwrap_parse_info(const char *json, size_t size, pid_t *ret);
int payload_release(PayloadProcess *p);
/* SIGKILLs a payload that is still held or running and closes its descriptors. */
void payload_process_abort(PayloadProcess *p);
void payload_process_done(PayloadProcess *p);

/* bwrap backend. The argv builder is pure, for tests. */
int bwrap_build_argv(const PayloadParams *p, char ***ret);
/* Which of the /proc entries that leak host information exist here (read once). */
int bwrap_find_proc_masks(char ***ret_files, char ***ret_dirs);
