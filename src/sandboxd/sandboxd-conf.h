/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "quota.h"
#include "recorder.h"
#include "snapshot-meta.h"
#include "workspace.h"

/* Reads /etc/sandboxd/sandboxd.conf and sandboxd.conf.d/\*.conf (or path and path.d/\*.conf)
 * into the recorder's and snapshots' settings, then the MariaDB password: $CREDENTIALS_DIRECTORY/
 * mariadb-password if it exists, else PasswordFile=. Errors are logged with file:line. */
/* ten (may be NULL): [Node], [Limits], [OwnerQuota], [TenantQuota] (quota.h); ws (may be
 * NULL): [Workspaces] (workspace.h); fleet_node (may be NULL): [Fleet] Node=, 0…255. */
int sandboxd_conf_load(RecorderSettings *s, SnapshotSettings *snap, TenancySettings *ten, WorkspaceSettings *ws,
                       unsigned *fleet_node, const char *path);
