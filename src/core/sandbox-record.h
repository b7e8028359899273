/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What sandboxd must remember of a running sandbox to adopt it again after a restart or
 * a crash: one small JSON file per sandbox under the runtime directory. The agent's
 * control socket itself waits in systemd's file descriptor store. */

#include <stdint.h>
#include <sys/types.h>

#include "options.h"

typedef struct SandboxRecord {
        char id[32];
        char *template_name;
        uid_t owner;
        uid_t host_uid;
        uint64_t created_at;        /* µs CLOCK_REALTIME */
        uint64_t deadline_realtime; /* µs CLOCK_REALTIME, 0 = none */
        pid_t payload_pid;          /* bwrap's monitor */
        char *pause_method;         /* NULL if running */
        char *cgroup;
        char *payload;              /* "bwrap" or "docker" */
        char *unit;                 /* a Docker sandbox under systemd's cgroup driver: a slice */
        char *container_id;         /* docker */
        char **environment;         /* the template's, as it was at creation */
        bool pooled;
        SandboxConfig config;
} SandboxRecord;

void sandbox_record_done(SandboxRecord *st);
/* JSON text of st (json-c); *ret is malloc'ed. */
int sandbox_record_to_json(const SandboxRecord *st, char **ret);
/* Parses what sandbox_record_to_json() wrote; -EBADMSG if anything is missing or off. */
int sandbox_record_from_json(const char *json, SandboxRecord *ret);

/* Writes/reads/removes <dir>/<id>.json (atomically: temporary file + rename). */
int sandbox_record_save(const char *dir, const SandboxRecord *st);
int sandbox_record_load(const char *path, SandboxRecord *ret);
int sandbox_record_remove(const char *dir, const char *id);
