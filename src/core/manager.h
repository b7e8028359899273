/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The manager: all sandboxes, the templates, the connection to systemd. Front ends call
 * these functions and translate; the logic lives here. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "events.h"
#include "quota.h"
#include "sandbox-api.h"
#include "sandbox.h"
#include "snapshot-meta.h"
#include "template.h"
#include "workspace.h"

typedef struct ManagerSettings {
        char **template_dirs;
        char *state_dir;
        char *agent_path;
        char *bwrap_path;
        char *docker_socket;  /* the Docker Engine API (or Podman's compatible one) */
        unsigned max_sandboxes;
        unsigned fleet_node;  /* sandboxd.conf [Fleet] Node=: 1…255 ends every new id; 0 none */
        bool max_sandboxes_by_fds; /* lowered to what RLIMIT_NOFILE has room for */
        uid_t uid_base;       /* sandboxes run as host uids uid_base … uid_base+65535 */
        SnapshotSettings snapshots; /* sandboxd.conf [Snapshots] */
        TenancySettings tenancy; /* sandboxd.conf [Node], [Limits], [OwnerQuota], [TenantQuota] */
        WorkspaceSettings workspaces; /* sandboxd.conf [Workspaces], --workspace-dir= */
        char *secrets_dir;    /* the secret store (secret-store.h); NULL: SECRETS_DIR_DEFAULT */
} ManagerSettings;

#define SANDBOX_MAX_DEFAULT 4096U

/* The descriptor budget (docs/WORKSPACES.md, "Descriptors"). A running sandbox holds
 * SANDBOX_FDS_PER_SANDBOX of sandboxd's descriptors: its agent's control socket (the pipe
 * of its payload's messages and the payload's pidfd go once it is ready: PayloadOps.running).
 * SANDBOX_FDS_BASE is the rest: the buses, varlink and HTTP bridge connections, the spool,
 * journal readers, sandboxes starting (1024), and what running execs hold besides (their
 * output pipes, the caller's stdout and stderr, the two cgroup files read at their start
 * and end: 4 each for 1024 execs at once). */
#define SANDBOX_FDS_PER_SANDBOX 1U
#define SANDBOX_FDS_BASE (1024U + 4U * 1024U)
/* RLIMIT_NOFILE that max_sandboxes sandboxes need. */
uint64_t sandbox_fds_needed(unsigned max_sandboxes);
/* How many sandboxes a RLIMIT_NOFILE of nofile has room for (at least 1). */
unsigned sandbox_fds_room(uint64_t nofile);
#define DOCKER_SOCKET_DEFAULT "/run/docker.sock"

/* What happens, for whoever subscribes (every front end, the recorder); each event goes to
 * every subscriber, in the order they subscribed. All optional. Pooled sandboxes are
 * nobody's: no event names one until it is handed out. */
typedef struct ManagerHooks {
        void (*sandbox_added)(Sandbox *s, void *userdata);
        /* Its state, or its timeouts (Timeout, IdleTimeout, Deadline). */
        void (*sandbox_state_changed)(Sandbox *s, void *userdata);
        void (*sandbox_removed)(Sandbox *s, void *userdata);
        /* What the record keeps (recorder.h): a sandbox started or ended, an exec ended. */
        void (*sandbox_record)(const SandboxRecordEvent *ev, void *userdata);
        void (*exec_record)(const ExecRecordEvent *ev, void *userdata);
        /* A template was loaded: at start, or created through the API. */
        void (*template_record)(const TemplateRecordEvent *ev, void *userdata);
        /* A snapshot was taken, restored into a sandbox, or removed. */
        void (*snapshot_record)(const SnapshotRecordEvent *ev, void *userdata);
} ManagerHooks;

typedef struct ManagerSubscription ManagerSubscription;

int manager_settings_init(ManagerSettings *s);
void manager_settings_done(ManagerSettings *s);

int manager_new(sd_event *event, sd_bus *bus, ManagerSettings *settings, Manager **ret);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

/* hooks (copied) are called with userdata from now on, until unsubscribed; the manager
 * owns the subscription and frees what is left of them in manager_free(), before it tells
 * anyone anything more. */
int manager_subscribe(Manager *m, const ManagerHooks *hooks, void *userdata, ManagerSubscription **ret);
/* Safe from within a hook. Returns NULL. */
ManagerSubscription *manager_unsubscribe(ManagerSubscription *sub);
/* Loads the templates of every template directory; each one loaded is told to the
 * subscribers (template_record). */
int manager_load_templates(Manager *m);
const TemplateSet *manager_get_templates(Manager *m);
/* The directory CreateTemplate writes to and RemoveTemplate removes from: the last of
 * settings.template_dirs (by default /etc/sandboxd/templates.d). The earlier ones hold the
 * shipped templates, which are overridden there, never removed. */
const char *manager_writable_template_dir(Manager *m);
/* CreateTemplate: json (a template file's text) validated exactly as a file is (size,
 * template_parse(); InvalidOption with the loader's message), its /etc written (bwrap),
 * then written atomically as <writable dir>/<name>.json, creating or replacing it, and the
 * templates loaded again: ListTemplates and CreateSandbox have it at once. Running
 * sandboxes of the template keep running as they are; its warm pool starts anew. */
int manager_create_template(Manager *m, const char *name, const char *json, SandboxError *error);
/* RemoveTemplate: <writable dir>/<name>.json goes, and a shipped template of that name (if
 * any) is the one from then on. TemplateReadOnly for a template only shipped;
 * NoSuchTemplate for one that does not exist. */
int manager_remove_template(Manager *m, const char *name, SandboxError *error);

/* Validates and starts a sandbox owned by caller's uid (authorized already: SANDBOX_OP_CREATE
 * for the tenant sandbox_access_create() decided). With a Name, the name must be free
 * among the live sandboxes of that owner and tenant (else SandboxExists), unless
 * ReuseExisting: then the live sandbox of that name (of the same template) is the answer,
 * once it runs. User errors return -errno with error set (callback not called); otherwise
 * cb runs once the sandbox is running (at once for one from the warm pool or reused), or
 * failed and is gone. */
int manager_create_sandbox(Manager *m, const SandboxCaller *caller, const char *template_name,
                           SandboxConfig *config, sandbox_callback_t cb, void *userdata,
                           SandboxError *error);

/* GetQuota: the quota of the caller (of the tenant it acts for, else of its uid) and what
 * it uses (quota.h). Root's own sandboxes (for no tenant) have no quota: limits 0. */
int manager_get_quota(Manager *m, const SandboxCaller *caller, QuotaReport *ret);
/* A fleet's tenant quotas (sandboxd.conf [Fleet] QuotaIntervalSec=, docs/SCALE-OUT.md):
 * what each tenant holds on this node now (not the warm pool's; the creates waiting for
 * their turn count), *ret_n of them in a new array; and what the tenants hold on the
 * other nodes as last read, which replaces the previous (takes uses; NULL: none) and
 * counts in every tenant's quota check and GetQuota from then on. */
int manager_tenant_uses(Manager *m, TenantUse **ret, size_t *ret_n);
void manager_fleet_uses_set(Manager *m, TenantUse *uses, size_t n);
/* The node's ceilings, as sandbox.slice has them (resolved at start). */
const NodeCeiling *manager_get_node_ceiling(Manager *m);

/* The sandbox of that id (none of the warm pool's), whoever asks. */
Sandbox *manager_get_sandbox(Manager *m, const char *id);
/* The sandbox that caller names: by its id, or by its Name among the caller's own (its uid,
 * the tenant it acts for, or none); only one of the tenant it acts for, if it does. Else
 * NoSuchSandbox. Whether the caller may then touch it is sandbox_authorize()'s. */
int manager_lookup_sandbox(Manager *m, const SandboxCaller *caller, const char *id_or_name, Sandbox **ret,
                           SandboxError *error);
/* Iteration in creation order: pass NULL to start. */
Sandbox *manager_next_sandbox(Manager *m, Sandbox *prev);
/* The same, over the sandboxes caller sees (access.h: sandbox_access_visible()). */
Sandbox *manager_next_visible_sandbox(Manager *m, Sandbox *prev, const SandboxCaller *caller);
/* ListSandboxes: cb(s, userdata) for each sandbox caller sees that q selects (options.h),
 * in creation order; *ret_total (if not NULL) the number of those that match, over all
 * pages. Stops at, and returns, cb's first negative return. */
int manager_list_sandboxes(Manager *m, const SandboxCaller *caller, const SandboxListQuery *q,
                           int (*cb)(Sandbox *s, void *userdata), void *userdata, uint64_t *ret_total);
size_t manager_n_sandboxes(Manager *m);

/* Takes up the sandboxes a previous sandboxd left running (state files, descriptors kept
 * in systemd's fd store, live units); stops what cannot be taken up. Call once, before
 * serving. Returns how many were adopted. */
int manager_adopt_sandboxes(Manager *m);

/* Destroys the warm pools' sandboxes (they are nobody's: a clean stop leaves none) and
 * stops refilling; cb runs once they are gone. */
int manager_drain_pool(Manager *m, void (*cb)(void *userdata), void *userdata);

