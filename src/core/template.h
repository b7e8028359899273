/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Templates: named environments, one JSON file each, found in a list of directories;
 * a file in a later directory overrides one of the same name in an earlier directory
 * (vendor /usr/lib/sandboxd/templates.d, then /etc/sandboxd/templates.d). */

#include <stddef.h>

#include "options.h"
#include "quota.h"
#include "payload.h"

#define TEMPLATE_NAME_MAX 64
#define TEMPLATE_POOL_MAX 64U
#define TEMPLATE_RECYCLE_MAX_DEFAULT 16U
#define TEMPLATE_RECYCLE_MAX 1024U
#define TEMPLATE_RECYCLE_IDLE_SEC_DEFAULT 300U
#define TEMPLATE_RECYCLE_IDLE_SEC_MAX 86400U
#define TEMPLATE_FILE_MAX (64U * 1024U)  /* bytes of a template's JSON */

typedef struct Template {
        char *name;
        char *description;
        PayloadKind payload;
        char **ro_binds;     /* bwrap: host paths, shown read-only at the same place inside */
        char *image;         /* docker: the image, as the Engine API names it */
        char **environment;  /* NAME=VALUE */
        char **runtimes;     /* informative: python3, sh, … */
        /* Code contexts (context.h) started as each sandbox starts, before anyone asks: the
         * sandbox's default context of each language ("python", "javascript"). */
        char **contexts;
        SandboxLimits limits; /* 0 = built-in default */
        /* "maxima" (and "limits"' DiskMax, Timeout as the defaults): merged with sandboxd.conf
         * [Limits], the stricter wins (quota.h). */
        LimitSettings maxima;
        unsigned pool;        /* sandboxes kept started, for CreateSandbox to hand out */
        /* "pool": {"recycle": true}: a sandbox its user is done with (an ephemeral one's
         * exec ended, or ReleaseSandbox) is reset and kept for the same owner, tenant and
         * limits (recycle.c), at most recycle_max per owner and tenant, for recycle_idle_sec. */
        bool recycle;
        unsigned recycle_max;
        uint64_t recycle_idle_sec;
        /* bwrap: the sandbox's own /etc (etc-tree.h) */
        char **etc_files;     /* path relative to /etc, contents, path, contents, … */
        char *timezone;       /* /etc/localtime's zone; NULL: UTC */
        uint64_t shm_max;     /* size of the /dev/shm tmpfs (sandboxes in memory); 0 = default */
        char *etc_dir;        /* set by the manager: where the generated tree is */
        char **egress_allow;  /* EgressAllow=, EgressDeny= of its sandboxes unless asked otherwise */
        char **egress_deny;
        char **secrets;       /* Secrets= of its sandboxes unless asked otherwise (secret-store.h) */
        /* "limits" IdleTimeout, "idle_action": its sandboxes' unless asked otherwise */
        uint64_t idle_timeout_sec;
        IdleAction idle_action;
        bool idle_action_set;
        /* "requires": host paths (under its ro_binds) that must exist for a sandbox to be
         * made, each with the command that installs it: path, command, path, command, … */
        char **requires;
} Template;

/* In memory (Storage=tmpfs), /dev/shm is a tmpfs of this many bytes unless the template
 * says otherwise; its pages count against MemoryMax like those of /work and /tmp. On disk
 * it is the workspace's shm/, within DiskMax (workspace_shm_dir()). */
#define TEMPLATE_SHM_DEFAULT (64ULL * 1024 * 1024)
#define TEMPLATE_SHM_MIN (1ULL * 1024 * 1024)
#define TEMPLATE_SHM_MAX (16ULL * 1024 * 1024 * 1024)

Template *template_free(Template *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(Template *, template_free);

bool template_name_is_valid(const char *name);
/* Parses one template from JSON text; on error returns -EINVAL and, if ret_error is
 * given, a message naming the problem. */
int template_parse(const char *name, const char *json, Template **ret, char **ret_error);
int template_load_file(const char *path, Template **ret, char **ret_error);

typedef struct TemplateSet {
        Template **templates;
        size_t n;
} TemplateSet;

/* Loads every *.json of dirs (missing dirs are fine). Broken files are reported through
 * the callback and skipped; returns the number of templates or -errno. */
int template_set_load(TemplateSet *set, char * const *dirs,
                      void (*report)(const char *path, const char *error, void *userdata),
                      void *userdata);
void template_set_done(TemplateSet *set);
/* Drops (and frees) the i-th template. */
void template_set_remove(TemplateSet *set, size_t i);
const Template *template_set_find(const TemplateSet *set, const char *name);
