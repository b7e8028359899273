/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What sandboxd keeps about a filesystem snapshot (snapshot.h), as the JSON file next to
 * its stream, and the arithmetic of the per-owner quota. Pure: no I/O, unit-tested. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "events.h"
#include "options.h"
#include "sandbox.h"

#define SNAPSHOT_ID_LEN 16

typedef struct SnapshotMeta {
        char id[SNAPSHOT_ID_LEN + 1];
        char *template_name;
        SandboxConfig config;  /* the source's limits, DiskMax, Name, Tenant */
        uid_t owner;
        char source[SANDBOX_ID_LEN + 1]; /* the sandbox it was taken of */
        uint64_t size;         /* bytes of the compressed stream on disk */
        uint64_t content_size; /* the files' sizes added up (sparse ones in full) */
        uint64_t created;      /* µs CLOCK_REALTIME */
        bool tmp;              /* /tmp is in it too */
        bool hibernated;       /* Hibernate's: Wake brings the source back under its id */
        json_object *contexts; /* Hibernate's: the source's code contexts (sandbox-persist.h's
                                * records), lost after Wake; NULL: none */
} SnapshotMeta;

typedef struct SnapshotSettings {
        char *directory;               /* NULL: SANDBOX_STATE_DIR/snapshots */
        uint64_t max_bytes_per_owner;  /* the streams' sizes; 0: no bound */
        uint64_t max_per_owner;        /* how many; 0: no bound */
        uint64_t retention_sec;        /* removed this long after they were taken; 0: kept */
} SnapshotSettings;

#define SNAPSHOT_MAX_BYTES_PER_OWNER_DEFAULT (10ULL * 1024 * 1024 * 1024)
#define SNAPSHOT_MAX_PER_OWNER_DEFAULT 32U

void snapshot_settings_done(SnapshotSettings *s);

void snapshot_meta_done(SnapshotMeta *m);

/* 16 lowercase hex digits, as sandbox ids. */
bool snapshot_id_is_valid(const char *id);

/* A NUL-terminated JSON text; 0 or -ENOMEM. */
int snapshot_meta_to_json(const SnapshotMeta *m, char **ret);
/* 0 and *ret filled in (free with snapshot_meta_done()), or -EBADMSG for what is not a
 * complete, consistent record, -ENOMEM. */
int snapshot_meta_from_json(const char *text, SnapshotMeta *ret);

/* Whether one more snapshot fits an owner who has count of them taking used bytes, under
 * max_count and max_bytes (0: no bound): 0, -EDQUOT if not; *ret_room (optional) is how
 * many bytes the new one may take (UINT64_MAX: unbounded). */
int snapshot_quota_room(uint64_t used, uint64_t count, uint64_t max_bytes, uint64_t max_count, uint64_t *ret_room);
