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
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

typedef struct WorkspacePool WorkspacePool;

/* sandboxd.conf [Workspaces] */
typedef struct WorkspaceSettings {
        char *directory;     /* NULL: SANDBOX_STATE_DIR/workspaces */
        uint64_t pool_size;  /* of the loop-backed image; 0: the size of the file system under it */
} WorkspaceSettings;

void workspace_settings_done(WorkspaceSettings *s);

/* The pool at dir, if it is a btrfs with quotas enabled: *ret set; else *ret NULL and
 * *ret_reason (static) why not. -errno only when out of memory. */
int workspace_pool_open(const char *dir, const char *btrfs_path, WorkspacePool **ret, const char **ret_reason);
WorkspacePool *workspace_pool_free(WorkspacePool *p);
const char *workspace_pool_dir(const WorkspacePool *p);

/* A new, empty workspace id for the host uid uid (its work/ and tmp/ are uid's), of at
 * most max_bytes. */
int workspace_create(WorkspacePool *p, const char *id, uid_t uid, uint64_t max_bytes);
/* Workspace id as a copy of from_id's, without copying: a snapshot, its files given from
 * from_uid to uid (ownership only: no data is written), limited to max_bytes. In a child
 * process (a snapshot waits for the source's dirty data to be written; the chown walks
 * the tree); cb(0 or -errno) on the event loop when it is done. *ret_source watches the
 * child: unref it to stop waiting (the child finishes regardless). */
typedef void (*workspace_callback_t)(int error, void *userdata);
int workspace_clone(WorkspacePool *p, const char *from_id, const char *id, uid_t from_uid, uid_t uid,
                    uint64_t max_bytes, sd_event *event, workspace_callback_t cb, void *userdata,
                    sd_event_source **ret_source);

/* "DIR/ID/sub", or "DIR/ID" for sub NULL (owned). */
char *workspace_path(const WorkspacePool *p, const char *id, const char *sub);
bool workspace_exists(const WorkspacePool *p, const char *id);

/* Takes id's workspace out of the pool at once and removes it in the background. 0 if
 * there was none. */
int workspace_remove(WorkspacePool *p, const char *id);

/* Bytes id's files take (its qgroup's referenced bytes) and its limit. qgroup (optional):
 * the workspace's qgroup id if known (not 0), else learnt and stored there, which saves
 * the next call an open and an ioctl (GetStatistics sums thousands). */
int workspace_usage(const WorkspacePool *p, const char *id, uint64_t *qgroup, uint64_t *ret_used, uint64_t *ret_max);
/* The pool's file system: its size and what is free in it, bytes. */
int workspace_pool_space(const WorkspacePool *p, uint64_t *ret_size, uint64_t *ret_free);

/* Every workspace (and record ID.json) for which is_live(id) says no, and what removals
 * a crash interrupted, removed (at start, after adoption and the stopped sandboxes). */
void workspace_remove_orphans(WorkspacePool *p, bool (*is_live)(const char *id, void *userdata), void *userdata);

/* sandboxd --setup-workspaces: makes dir the pool (see above) unless it is one already.
 * image_size: of a new image, and what an existing one is grown to; 0: the size of the
 * file system it lives on. Blocking; not for the daemon's event loop. */
int workspace_pool_setup(const char *dir, uint64_t image_size, const char *mkfs_path);
