/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What sandboxd must remember of a running sandbox to adopt it again after a restart or
 * a crash: one small JSON file per sandbox under the runtime directory. The agent's
 * control socket itself waits in systemd's file descriptor store. */

#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "options.h"

typedef struct SandboxPersist {
        char id[32];
        char *template_name;
        uid_t owner;
        uid_t host_uid;
        uint64_t created_at;        /* µs CLOCK_REALTIME */
        uint64_t deadline_realtime; /* µs CLOCK_REALTIME, 0 = none */
        uint64_t lifetime_left_usec; /* paused: the lifetime left, counted again on resume */
        pid_t payload_pid;          /* the backend's process in the unit (bwrap: the agent, or
                                     * its monitor if written before "pid_is_agent"), 0: none */
        char *pause_method;         /* NULL if running */
        char *cgroup;
        char *payload;              /* "bwrap" or "docker" */
        char *unit;                 /* a Docker sandbox under systemd's cgroup driver: a slice */
        char **environment;         /* the template's, as it was at creation */
        bool pooled;
        bool from_pool;
        bool released;   /* reset or kept for reuse (recycle.c): stopped when adopted */
        SandboxConfig config;
        /* The CA of its header injection (sandbox-secrets.h), PEM; NULL: none. */
        char *egress_ca_cert, *egress_ca_key;
        /* Its code contexts (context.h), records as context_records_valid() takes: after
         * a restart of sandboxd their kernels are gone, their ids listed as lost. NULL: none. */
        json_object *contexts;
        json_object *payload_data;  /* the backend's own keys (PayloadOps.save, .adopt), kept
                                     * at the top level of the file beside the others */
} SandboxPersist;

void sandbox_persist_done(SandboxPersist *st);
/* Whether records is an array of at most 16 contexts as sandbox_contexts_to_json() writes
 * them: "id" (12 lowercase hex digits), "language" ("python" or "javascript"), "cwd" (an
 * absolute path, optional), "default" (boolean), "caller" (a uid), "created" (µs). */
bool context_records_valid(json_object *records);
/* JSON text of st (json-c); *ret is malloc'ed. */
int sandbox_persist_to_json(const SandboxPersist *st, char **ret);
/* Parses what sandbox_persist_to_json() wrote; -EBADMSG if anything is missing or off. */
int sandbox_persist_from_json(const char *json, SandboxPersist *ret);

/* Writes/reads/removes <dir>/<id>.json (atomically: temporary file + rename). */
int sandbox_persist_save(const char *dir, const SandboxPersist *st);
int sandbox_persist_load(const char *path, SandboxPersist *ret);
int sandbox_persist_remove(const char *dir, const char *id);
