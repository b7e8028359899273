/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "recorder.h"
#include "snapshot-meta.h"

/* Reads /etc/sandboxd/sandboxd.conf and sandboxd.conf.d/\*.conf (or path and path.d/\*.conf)
 * into the recorder's settings, then the MariaDB password: $CREDENTIALS_DIRECTORY/
 * mariadb-password if it exists, else PasswordFile=. Errors are logged with file:line. */
int sandboxd_conf_load(RecorderSettings *s, SnapshotSettings *snap, const char *path);
