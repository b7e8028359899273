/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Workspaces on disk (docs/WORKSPACES.md): a sandbox's /work and /tmp are the directories
 * work/ and tmp/ of one btrfs subvolume of the pool, DIR/ID, whose qgroup limits the
 * bytes it references (data and metadata: so its inodes too) to its DiskMax. The pool is
 * a btrfs file system with quotas, mounted on DIR before sandboxd starts
 * (sandboxd --setup-workspaces, run by sandboxd-workspaces.service): the host's own btrfs
 * if DIR is on one, else a sparse loop-backed image DIR.img.
 *
 * Creating a workspace is two ioctls (a subvolume, its limit), O(1) like a mkdir. Removing
 * one is a rename out of the way and then `btrfs subvolume delete` in a child process: the
 * kernel drops the tree in the background, never following a link the sandbox made.
 *
 * What of that needs a privilege (a qgroup's limit, a deletion, giving files to a uid) is
 * done by sandboxd-workspace(8), asked over varlink (io.sandboxd.Workspace) on the event
 * loop and never waited for: sandboxd holds no CAP_SYS_ADMIN, CAP_CHOWN or
 * CAP_DAC_READ_SEARCH. What needs none stays here: the rename of a removal, the reads.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

/* The sandbox's /dev/shm in its workspace: DIR/ID/shm, root's, as the host's /dev/shm. */
#define WORKSPACE_SHM "shm"
#define WORKSPACE_SHM_MODE 01777

typedef struct WorkspacePool WorkspacePool;
/* A call to sandboxd-workspace under way. */
typedef struct WorkspaceCall WorkspaceCall;

/* sandboxd.conf [Workspaces] */
typedef struct WorkspaceSettings {
        char *directory;     /* NULL: SANDBOX_STATE_DIR/workspaces */
        uint64_t pool_size;  /* of the loop-backed image; 0: the size of the file system under it */
} WorkspaceSettings;

void workspace_settings_done(WorkspaceSettings *s);

/* The pool at dir, if it is a btrfs with quotas enabled and sandboxd-workspace listens on
 * socket_path: *ret set; else *ret NULL and *ret_reason (static) why not. -errno only when
 * out of memory. Its calls are answered on event. */
int workspace_pool_open(const char *dir, const char *socket_path, sd_event *event, WorkspacePool **ret,
                        const char **ret_reason);
WorkspacePool *workspace_pool_free(WorkspacePool *p);
const char *workspace_pool_dir(const WorkspacePool *p);

typedef void (*workspace_callback_t)(int error, void *userdata);
/* A new, empty workspace id for the host uid uid (its work/ and tmp/ are uid's), of at
 * most max_bytes; cb(0 or -errno) on the event loop when it is made (one round trip to
 * sandboxd-workspace, which makes it in about a millisecond). */
int workspace_create(WorkspacePool *p, const char *id, uid_t uid, uint64_t max_bytes, workspace_callback_t cb,
                     void *userdata, WorkspaceCall **ret_call);
/* Workspace id as a copy of from_id's, without copying: a snapshot, its files given from
 * from_uid to uid (ownership only: no data is written), limited to max_bytes. Done by
 * sandboxd-workspace in a child process (a snapshot waits for the source's dirty data to
 * be written; the chown walks the tree); cb(0 or -errno) on the event loop when it is. */
int workspace_clone(WorkspacePool *p, const char *from_id, const char *id, uid_t from_uid, uid_t uid,
                    uint64_t max_bytes, workspace_callback_t cb, void *userdata, WorkspaceCall **ret_call);
/* Stops waiting for a call of workspace_create() or workspace_clone(): its cb is not
 * called, and the workspace it makes, if it does, is removed (its sandbox is gone). */
void workspace_call_cancel(WorkspaceCall *c);

/* "DIR/ID/sub", or "DIR/ID" for sub NULL (owned). */
char *workspace_path(const WorkspacePool *p, const char *id, const char *sub);
bool workspace_exists(const WorkspacePool *p, const char *id);
/* "DIR/ID/shm", the sandbox's /dev/shm on disk (owned), for a sandbox about to start: a
 * directory of root's, mode 01777 as the host's /dev/shm, made here if the workspace has
 * none (one a sandboxd older than it made, or a fork of one). Root's, so that sandboxd
 * (root, owner of the workspace's root directory) makes it itself, with no privilege of
 * sandboxd-workspace's. One the sandbox left files in is renamed to DIR/ID/.shm-trash-N-PID
 * and a new, empty one made (O(1)); sandboxd-workspace removes that trash, and any other
 * in DIR/ID, in the background (RemoveTrash). If it cannot be set aside, it is returned as
 * it is (the agent empties it). -errno if it is not there and cannot be made (the quota
 * full, something else of that name): the caller then gives the sandbox a tmpfs. */
int workspace_shm_dir(WorkspacePool *p, const char *id, char **ret);

/* Takes id's workspace out of the pool at once (a rename) and has sandboxd-workspace
 * remove it in the background. 0 if there was none. */
int workspace_remove(WorkspacePool *p, const char *id);

/* Bytes id's files take (its qgroup's referenced bytes) and its limit. qgroup (optional):
 * the workspace's qgroup id if known (not 0), else learnt and stored there, which saves
 * the next call an open and an ioctl (GetStatistics sums thousands). */
int workspace_usage(const WorkspacePool *p, const char *id, uint64_t *qgroup, uint64_t *ret_used, uint64_t *ret_max);
/* The pool's file system: its size and what is free in it, bytes. */
int workspace_pool_space(const WorkspacePool *p, uint64_t *ret_size, uint64_t *ret_free);

/* Every workspace (and record ID.json) for which is_live(id) says no, and what removals
 * a crash interrupted, removed (at start, after adoption and the stopped sandboxes); the
 * old shm/s (.shm-trash-*) of the live ones too. */
void workspace_remove_orphans(WorkspacePool *p, bool (*is_live)(const char *id, void *userdata), void *userdata);

/* sandboxd --setup-workspaces: makes dir the pool (see above) unless it is one already.
 * image_size: of a new image, and what an existing one is grown to; 0: the size of the
 * file system it lives on. Blocking; not for the daemon's event loop. */
int workspace_pool_setup(const char *dir, uint64_t image_size, const char *mkfs_path);
