/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The bwrap backend (payload_bwrap_ops): bwrap, held on --block-fd, builds the sandbox's
 * namespaces and starts sandbox-init on the control socket it inherits. */

#include <stdint.h>
#include <sys/types.h>

#include "payload.h"

/* Descriptors bwrap gets besides the agent's control socket. */
#define PAYLOAD_BLOCK_FD 4
#define PAYLOAD_INFO_FD 5
#define PAYLOAD_SECCOMP_FD 6
#define PAYLOAD_MACHINE_ID_FD 7
/* The data files' (PayloadParams.data_files): PAYLOAD_DATA_FD + i. */
#define PAYLOAD_DATA_FD 8
#define PAYLOAD_DATA_FILES_MAX 40U

/* A file that bwrap makes inside from our data (--ro-bind-data): on the sandbox's own
 * tmpfs root, read-only, of mode, owned by the sandbox's uid. Secrets bound as files
 * (/run/secrets/NAME), the egress proxy's CA (sandbox-secrets.h). */
typedef struct PayloadDataFile {
        const char *path;          /* inside */
        const void *data;
        size_t size;
        unsigned mode;
        void *owned;               /* freed with it (sandbox_data_files_free()), if set */
} PayloadDataFile;

typedef struct PayloadParams {
        const struct Template *template;
        const char *bwrap_path;
        const char *agent_path;    /* host path of sandbox-init */
        uint64_t disk_max;         /* size of the /work and /tmp tmpfs */
        const char *workspace_dir; /* NULL: /work and /tmp are tmpfs; else its work/ and tmp/
                                    * are bound there (workspace.h) */
        const char *shm_dir;       /* NULL: /dev/shm is a tmpfs of the template's shm_max; else
                                    * bound there (the workspace's shm/: workspace_shm_dir()),
                                    * empty unless workspace_shm_dir() could not set the old
                                    * one aside: then the agent empties it as it starts */
        char * const *proc_masks;  /* /proc files to hide (those that exist on this kernel) */
        char * const *proc_mask_dirs;
        const char *empty_dir;     /* an empty host directory bound over each mask dir; NULL: a
                                    * read-only tmpfs each (a superblock each: see bwrap_build_argv) */
        uid_t host_uid;            /* the unprivileged host uid the sandbox runs as */
        gid_t host_gid;
        char * const *environment; /* the agent's environment */
        int seccomp_fd;            /* the policy's BPF (reopened for each payload); -1: none */
        const char *etc_dir;       /* the template's /etc tree (etc-tree.h); NULL: no /etc */
        const char *machine_id;    /* the sandbox's own /etc/machine-id (32 hex digits) */
        bool egress;               /* the agent binds the egress proxy's listener (--egress) */
        const PayloadDataFile *data_files;
        size_t n_data_files;
} PayloadParams;

/* Starts the payload held, with control_fd as the agent's AGENT_CONTROL_FD. Its stdin
 * and stdout are /dev/null; its stderr is a pipe whose read end is ret->log_fd (for
 * payload_process_forward_log()). */
int payload_spawn_held(const PayloadParams *p, int control_fd, PayloadProcess *ret);
/* Reads what is there of bwrap's info: 1 once child_pid is known, 0 if more is to come. */
int payload_read_info(PayloadProcess *p);
/* Parses bwrap's --info-fd JSON for the child's pid (pure, for tests). */
int bwrap_parse_info(const char *json, size_t size, pid_t *ret);

/* The argv builder is pure, for tests. */
int bwrap_build_argv(const PayloadParams *p, char ***ret);
/* Which of the /proc entries that leak host information exist here (read once). */
int bwrap_find_proc_masks(char ***ret_files, char ***ret_dirs);
