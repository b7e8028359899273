/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Exporting a sandbox hibernated on disk (stopped: its workspace kept, no processes), for a
 * move to another node (docs/SCALE-OUT.md). There is no archive of it to read, so one is
 * made as it is read: the agent (sandbox-init --archive-workspace) runs in a child in the
 * workspace's directory as the sandbox's uid and writes the stream Hibernate's archive is
 * (snapshot.h) into a pipe; each ExportSnapshot part takes the next bytes of it. The
 * stream's length is known only at its end: a part of 0 bytes, once the child exited well.
 *
 * One export per sandbox at a time; a part at offset 0 starts it again. A Wake ends it
 * (its child killed before the sandbox's processes start: the files stand still under the
 * reader, and an export cut short never ends well, so no import commits it). An export
 * left without a part for WORKSPACE_EXPORT_IDLE_USEC is dropped, its child killed.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox-errors.h"
#include "snapshot-meta.h"

typedef struct Manager Manager;
typedef struct Sandbox Sandbox;

#define WORKSPACE_EXPORT_IDLE_USEC (300ULL * 1000000ULL)

/* meta: the record an import needs (valid during the call); data, size: the part (0 bytes:
 * the end). Or error. */
typedef void (*workspace_export_callback_t)(const SnapshotMeta *meta, const void *data, size_t size,
                                            const SandboxError *error, void *userdata);

/* The part of stopped sandbox s's stream at offset (0, or where the last part ended), at
 * most length bytes; cb once it is there (never before this returns). User errors come
 * back as -errno with error set, and cb is not called. */
int workspace_export_read(Manager *m, Sandbox *s, uint64_t offset, size_t length, workspace_export_callback_t cb,
                          void *userdata, SandboxError *error);
/* Sandbox id's export, if one runs, ended (Wake): a part asked for fails with Busy. */
void workspace_export_cancel(Manager *m, const char *id);
/* Every export dropped (sandboxd stopping). */
void workspace_exports_done(Manager *m);
