/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Filesystem snapshots of sandboxes. sandboxd never reads a sandbox's files: the agent
 * inside writes /work (and /tmp) as a zstd-compressed tar stream into a pipe (the "archive"
 * file operation, agent-protocol.h), and sandboxd splices the pipe into a file of its
 * snapshot directory from its event loop, counting bytes against the owner's quota. A
 * restore hands that file, read-only, to the agent of a new sandbox, which unpacks it into
 * its own /work as the sandbox's uid ("extract"), bounded by its DiskMax.
 *
 * On disk (Directory=, owner-only, 0700): ID.tar.zst, the stream, and ID.json, its
 * SnapshotMeta (snapshot-meta.h), written last: a snapshot exists once its JSON does.
 * ID.tar.zst.partial is a stream being written; what a crash leaves of one is removed at
 * start.
 */

#include "access.h"
#include "caller.h"
#include "options.h"
#include "sandbox-errors.h"
#include "snapshot-meta.h"
#include "template.h"
#include "workspace-export.h"

/* A sandbox's snapshots (forks, hibernations) queued for their owner's turn
 * (StartsInFlight=) at once; one more is Busy. Each holds its caller's message. */
#define SNAPSHOT_TURNS_WAITING_MAX 8U

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;



/* Makes the directory, removes what a crash left half-written, arms the retention. */
int snapshot_store_setup(Manager *m);
void snapshot_store_done(Manager *m);
/* How many snapshots owner has and how many bytes they take. */
int snapshot_usage_owner(Manager *m, uid_t owner, uint64_t *ret_bytes, uint64_t *ret_count);
/* The same for a tenant's ([TenantQuota] Snapshots=, SnapshotBytes=). */
int snapshot_usage_tenant(Manager *m, const char *tenant, uint64_t *ret_bytes, uint64_t *ret_count);

/* meta is valid during the call only; NULL with error set on failure. */
typedef void (*snapshot_callback_t)(const SnapshotMeta *meta, const SandboxError *error, void *userdata);

/* Snapshot: the files of s (running, or paused: then thawed while it is taken and frozen
 * again after) as a new snapshot of s's owner. User errors come back as -errno with error
 * set, and cb is not called. */
int sandbox_snapshot(Sandbox *s, const SnapshotOptions *o, snapshot_callback_t cb, void *userdata,
                     SandboxError *error);
/* Hibernate: a snapshot that keeps s's id and name, then s destroyed; cb once it is gone. */
int sandbox_hibernate(Sandbox *s, const SnapshotOptions *o, snapshot_callback_t cb, void *userdata,
                      SandboxError *error);
/* Fork: a snapshot of source, then a new sandbox of caller's from it (config: its options;
 * what it leaves unset is source's), the snapshot removed after. source keeps running. */
int snapshot_fork_sandbox(Manager *m, const SandboxCaller *caller, Sandbox *source, const SandboxConfig *config,
                          sandbox_callback_t cb, void *userdata, SandboxError *error);
/* Wake: the sandbox that id_or_name (a hibernated sandbox's id or name) was, again, under
 * the same id, name, owner and tenant, with its files; the snapshot removed after. */
int snapshot_wake_sandbox(Manager *m, const SandboxCaller *caller, const char *id_or_name, sandbox_callback_t cb,
                          void *userdata, SandboxError *error);
/* The hibernated sandbox's snapshot that Wake(id_or_name) would use, for authorizing. */
int snapshot_lookup_hibernated(Manager *m, const SandboxCaller *caller, const char *id_or_name, SnapshotMeta *ret,
                               SandboxError *error);

/* What Wake (wake) or RemoveSnapshot of id by caller asks for, for authorizing (a front
 * end's access callback): Wake starts a sandbox for the hibernated one's tenant (op
 * CREATE); RemoveSnapshot is DESTROY on the snapshot's owner and tenant, found whoever
 * owns it (polkit decides about another owner's, as for Destroy). *meta is replaced
 * (it must be initialized); its strings back *ret_tenant. */
int snapshot_call_access(Manager *m, const SandboxCaller *caller, const char *id, bool wake, SnapshotMeta *meta,
                         uid_t *ret_owner, const char **ret_tenant, SandboxError *error);

/* CreateSandbox with FromSnapshot (config->from_snapshot): the snapshot must be caller's
 * to see; refused (SnapshotTooLarge) before anything starts if its files exceed the new
 * sandbox's DiskMax. cb once the files are in place. */
int snapshot_create_sandbox(Manager *m, const SandboxCaller *caller, const Template *t, SandboxConfig *config,
                            sandbox_callback_t cb, void *userdata, SandboxError *error);

/* The snapshots caller sees (access.h's visibility rule), oldest first. */
int snapshot_list(Manager *m, const SandboxCaller *caller, SnapshotMeta **ret, size_t *ret_n);
void snapshot_meta_array_free(SnapshotMeta *a, size_t n);
/* One snapshot, if caller may see it; NoSuchSnapshot if not. */
int snapshot_lookup(Manager *m, const SandboxCaller *caller, const char *id, SnapshotMeta *ret,
                    SandboxError *error);
int snapshot_remove(Manager *m, const char *id, SandboxError *error);

/* What ExportSnapshot of id_or_name asks for, for authorizing: as Wake's (op CREATE for its
 * owner and tenant); or, when id_or_name is a snapshot's id, that snapshot's owner and
 * tenant (its export is then a hibernated sandbox's, for a backup: docs/SCALE-OUT.md). */
int snapshot_export_access(Manager *m, const SandboxCaller *caller, const char *id_or_name, SnapshotMeta *meta,
                           uid_t *ret_owner, const char **ret_tenant, SandboxError *error);
/* Moving a hibernated sandbox to another node (docs/SCALE-OUT.md), in parts, as files
 * move: ExportSnapshot reads the archive of the hibernated sandbox id_or_name (the
 * caller's, as for Wake) from offset, at most length bytes, with its record: cb(meta,
 * data, size; 0 bytes at the end). An archive's part comes before this returns; a
 * sandbox hibernated on disk has its archive made as it is read (workspace-export.h), its
 * parts come later, in order, and the record's size is 0 (known at the end only). A
 * snapshot's id (the caller's to restore) exports that snapshot as a hibernated sandbox's. */
int snapshot_export_read(Manager *m, const SandboxCaller *caller, const char *id_or_name, uint64_t offset,
                         size_t length, workspace_export_callback_t cb, void *userdata, SandboxError *error);
/* The record of a sandbox hibernated on disk (s: its workspace, /tmp too), as an archive's
 * would be: id and source s's id, hibernated, the files' bytes (content_size). */
int snapshot_meta_of_workspace(Sandbox *s, SnapshotMeta *ret);
/* ImportSnapshot: the first part (import_id NULL) gives meta_json, an exported record,
 * and makes ret_id, the id of a new hibernated sandbox of the caller's (its tenant's) on
 * this node; each part (import_id: that id) adds data at offset (what came so far),
 * bounded by the caller's snapshot quota (owner and tenant) as a snapshot is; done
 * commits it, then Wake(ret_id) brings it up here. An import left without a part for
 * SNAPSHOT_IMPORT_IDLE_USEC is dropped. */
#define SNAPSHOT_IMPORT_IDLE_USEC (300ULL * 1000000ULL)
int snapshot_import_part(Manager *m, const SandboxCaller *caller, const char *import_id, const char *meta_json,
                         uint64_t offset, const void *data, size_t size, bool done,
                         char ret_id[static SANDBOX_ID_LEN + 1], SandboxError *error);
