/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <assert.h>
#include <fcntl.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "agent-protocol.h"
#include "etc-tree.h"
#include "exec-persist.h"
#include "labels.h"
#include "log.h"
#include "port.h"
#include "sandbox-errors.h"
#include "sandbox-internal.h"
#include "sandbox-secrets.h"
#include "workspace.h"
#include "snapshot.h"
#include "sandbox-persist.h"
#include "strv.h"
#include "time-util.h"

static const char * const sandbox_default_environment[] = {
        "USER=" SANDBOX_USER, "LOGNAME=" SANDBOX_USER, "HOME=" SANDBOX_HOME, "SHELL=" SANDBOX_SHELL,
        "LANG=C.UTF-8", NULL,
};

static const char * const sandbox_state_table[_SANDBOX_STATE_MAX] = {
        [SANDBOX_STARTING] = "starting",
        [SANDBOX_RUNNING] = "running",
        [SANDBOX_PAUSED] = "paused",
        [SANDBOX_STOPPING] = "stopping",
        [SANDBOX_DEAD] = "dead",
        [SANDBOX_STOPPED] = "stopped",
};

const char *sandbox_state_to_string(SandboxState s) {
        return s >= 0 && s < _SANDBOX_STATE_MAX ? sandbox_state_table[s] : NULL;
}

SandboxState sandbox_state_from_string(const char *s) {
        for (SandboxState i = 0; s && i < _SANDBOX_STATE_MAX; i++)
                if (streq(sandbox_state_table[i], s))
                        return i;
        return _SANDBOX_STATE_INVALID;
}

bool sandbox_id_is_valid(const char *id) {
        if (!id || strlen(id) != SANDBOX_ID_LEN)
                return false;
        for (const char *p = id; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

void sandbox_id_format(const uint8_t random[static SANDBOX_ID_LEN / 2], unsigned node,
                       char ret[static SANDBOX_ID_LEN + 1]) {
        static const char hex[] = "0123456789abcdef";

        for (size_t i = 0; i < SANDBOX_ID_LEN / 2; i++) {
                uint8_t b = random[i];
                /* The first digits stay random: the manager buckets ids by them. */
                if (node > 0 && i == SANDBOX_ID_LEN / 2 - 1)
                        b = (uint8_t) node;
                ret[2 * i] = hex[b >> 4];
                ret[2 * i + 1] = hex[b & 15];
        }
        ret[SANDBOX_ID_LEN] = 0;
}

int sandbox_id_node(const char *id) {
        if (!sandbox_id_is_valid(id))
                return -EINVAL;
        return (int) strtoul(id + SANDBOX_ID_LEN - 2, NULL, 16);
}

char *sandbox_unit_name(const char *id, const char *type) {
        char *name;

        if (asprintf(&name, "sandbox-%s.%s", id, type) < 0)
                return NULL;
        return name;
}

/* The first two hex digits of the id pick one of 256 sub-slices; systemd's dash hierarchy
 * puts sandbox-xx.slice under sandbox.slice, whose limits still hold all of them. Each unit
 * started in a slice costs systemd work for every unit already in it (its siblings are
 * queued for cgroup realization), so 3,000 scopes side by side made each new one ~3× as
 * dear: spread, a slice holds some tens at most, up to the 4,096 sandboxes allowed. */
void sandbox_subslice_name(const char *id, char ret[static SANDBOX_SUBSLICE_NAME_MAX]) {
        snprintf(ret, SANDBOX_SUBSLICE_NAME_MAX, "sandbox-%.2s.slice", id);
}

Manager *sandbox_get_manager(const Sandbox *s) { return s->manager; }
const char *sandbox_get_id(const Sandbox *s) { return s->id; }
const char *sandbox_get_template(const Sandbox *s) { return s->template_name; }
const char *sandbox_get_unit(const Sandbox *s) { return s->unit; }
uid_t sandbox_get_owner(const Sandbox *s) { return s->owner; }
SandboxState sandbox_get_state(const Sandbox *s) { return s->state; }
uint64_t sandbox_get_created_at(const Sandbox *s) { return s->created_at; }
const SandboxConfig *sandbox_get_config(const Sandbox *s) { return &s->config; }
const char *sandbox_get_name(const Sandbox *s) { return s->config.name; }
const char *sandbox_get_tenant(const Sandbox *s) { return s->config.tenant; }
bool sandbox_get_from_pool(const Sandbox *s) { return s->from_pool; }
const char *sandbox_get_storage(const Sandbox *s) {
        return sandbox_storage_to_string(s->config.limits.storage == STORAGE_DISK ? STORAGE_DISK : STORAGE_TMPFS);
}
const char *sandbox_get_fork_method(const Sandbox *s) {
        return s->config.limits.storage == STORAGE_DISK && s->manager->workspaces ? "snapshot" : "copy";
}
unsigned sandbox_get_recycles(const Sandbox *s) { return s->recycles; }
const char *sandbox_get_source(const Sandbox *s) {
        return s->recycles > 0 ? "recycled" : s->from_pool ? "pool" : "new";
}
uint64_t sandbox_get_deadline(const Sandbox *s) { return s->deadline_realtime; }
const char *sandbox_get_pause_method(const Sandbox *s) { return s->pause_method; }

int sandbox_lifecycle_log_level(const Sandbox *s) {
        return s->config.ephemeral && !sandbox_is_pooled(s) ? LOG_DEBUG : LOG_INFO;
}

/* The life-cycle's transitions: from each state, the states it may go to. A sandbox is
 * born STARTING (sandbox_new()), RUNNING or PAUSED when adopted (sandbox_adopt()), or
 * STOPPED (sandbox_new_stopped()); after that, sandbox_set_state() changes its state, but
 * for a Wake of a stopped sandbox, which is STARTING only once its start began
 * (sandbox_wake_stopped()). */
static const unsigned state_transitions[_SANDBOX_STATE_MAX] = {
        [SANDBOX_STARTING] = 1U << SANDBOX_RUNNING | 1U << SANDBOX_STOPPING,
        [SANDBOX_RUNNING]  = 1U << SANDBOX_PAUSED | 1U << SANDBOX_STOPPING,
        [SANDBOX_PAUSED]   = 1U << SANDBOX_RUNNING | 1U << SANDBOX_STOPPING,
        [SANDBOX_STOPPING] = 1U << SANDBOX_DEAD,
        [SANDBOX_DEAD]     = 0,
        /* Files on disk, no processes: woken (starting again) or destroyed. */
        [SANDBOX_STOPPED]  = 1U << SANDBOX_STARTING | 1U << SANDBOX_DEAD,
};

/* Who a sandbox is for: born OWNED or POOLED (or, adopted, what its record says). A
 * pooled one is handed out; an owned one released is reset, then kept, then handed out
 * again to the same owner. Going away changes none of it: its state says so. */
static const unsigned custody_transitions[_SANDBOX_CUSTODY_MAX] = {
        [SANDBOX_OWNED]     = 1U << SANDBOX_RESETTING,
        [SANDBOX_POOLED]    = 1U << SANDBOX_OWNED,
        [SANDBOX_RESETTING] = 1U << SANDBOX_KEPT,
        [SANDBOX_KEPT]      = 1U << SANDBOX_OWNED,
};

#define ANY_STATE ((1U << _SANDBOX_STATE_MAX) - 1)
#define GOING (1U << SANDBOX_STOPPING | 1U << SANDBOX_DEAD)

/* The states each custody allows: nobody pauses or wakes what nobody sees, and only a
 * running sandbox is released (recycle_refusal()). */
static const unsigned custody_states[_SANDBOX_CUSTODY_MAX] = {
        [SANDBOX_OWNED]     = ANY_STATE,
        [SANDBOX_POOLED]    = 1U << SANDBOX_STARTING | 1U << SANDBOX_RUNNING | GOING,
        [SANDBOX_RESETTING] = 1U << SANDBOX_RUNNING | GOING,
        [SANDBOX_KEPT]      = 1U << SANDBOX_RUNNING | GOING,
};

/* Its systemd unit: asked for, there, stopped. A stop may come before any start (a
 * sandbox whose payload failed before its unit was asked for). */
static const unsigned unit_transitions[_SANDBOX_UNIT_STATE_MAX] = {
        [SANDBOX_UNIT_NONE]     = 1U << SANDBOX_UNIT_STARTING | 1U << SANDBOX_UNIT_STOPPING,
        [SANDBOX_UNIT_STARTING] = 1U << SANDBOX_UNIT_STARTED,
        [SANDBOX_UNIT_STARTED]  = 1U << SANDBOX_UNIT_STOPPING,
        [SANDBOX_UNIT_STOPPING] = 1U << SANDBOX_UNIT_STOPPED,
        [SANDBOX_UNIT_STOPPED]  = 0,
};

/* A Pause or Resume in flight: asked for from a running (paused) sandbox, settled by its
 * answer, before the state changes. */
static const unsigned freeze_transitions[_SANDBOX_FREEZE_MAX] = {
        [SANDBOX_FREEZE_NONE]     = 1U << SANDBOX_FREEZE_PAUSING | 1U << SANDBOX_FREEZE_RESUMING,
        [SANDBOX_FREEZE_PAUSING]  = 1U << SANDBOX_FREEZE_NONE,
        [SANDBOX_FREEZE_RESUMING] = 1U << SANDBOX_FREEZE_NONE,
};

/* The states each allows: a sandbox being paused runs until the freeze is done. */
static const unsigned freeze_states[_SANDBOX_FREEZE_MAX] = {
        [SANDBOX_FREEZE_NONE]     = ANY_STATE,
        [SANDBOX_FREEZE_PAUSING]  = 1U << SANDBOX_RUNNING | GOING,
        [SANDBOX_FREEZE_RESUMING] = 1U << SANDBOX_PAUSED | GOING,
};

static void sandbox_set_state(Sandbox *s, SandboxState state) {
        assert(s);
        assert(state >= 0 && state < _SANDBOX_STATE_MAX);
        if (s->state == state)
                return;
        assert(state_transitions[s->state] & (1U << state));
        assert(custody_states[s->custody] & (1U << state));
        assert(freeze_states[s->freeze] & (1U << state));
        s->state = state;
        manager_sandbox_state_changed(s->manager, s);
}

void sandbox_set_custody(Sandbox *s, SandboxCustody custody) {
        assert(s);
        assert(custody >= 0 && custody < _SANDBOX_CUSTODY_MAX);
        assert(custody_transitions[s->custody] & (1U << custody));
        assert(custody_states[custody] & (1U << s->state));
        s->custody = custody;
}

void sandbox_set_unit_state(Sandbox *s, SandboxUnitState state) {
        assert(s);
        assert(state >= 0 && state < _SANDBOX_UNIT_STATE_MAX);
        assert(unit_transitions[s->unit_state] & (1U << state));
        s->unit_state = state;
}

void sandbox_set_freeze(Sandbox *s, SandboxFreeze freeze) {
        assert(s);
        assert(freeze >= 0 && freeze < _SANDBOX_FREEZE_MAX);
        if (s->freeze == freeze)
                return;
        assert(freeze_transitions[s->freeze] & (1U << freeze));
        assert(freeze_states[freeze] & (1U << s->state));
        s->freeze = freeze;
}

/* Used by a command, running or paused (a refused one counts); fresh again only once a
 * reset kept it (recycle.c). */
void sandbox_set_use(Sandbox *s, SandboxUse use) {
        assert(s);
        assert(use >= 0 && use < _SANDBOX_USE_MAX);
        if (s->use == use)
                return;
        if (use == SANDBOX_USED)
                assert(s->state == SANDBOX_RUNNING || s->state == SANDBOX_PAUSED);
        else
                assert(s->custody == SANDBOX_KEPT && s->state == SANDBOX_RUNNING);
        s->use = use;
}

/* What a restarted sandboxd needs to take this sandbox up again. Failing to write it only
 * costs that: the sandbox runs on, but would be stopped by the next sandboxd. */
void sandbox_save(Sandbox *s) {
        SandboxPersist st = {
                .template_name = s->template_name,
                .owner = s->owner,
                .host_uid = s->host_uid,
                .created_at = s->created_at,
                .deadline_realtime = s->deadline_realtime,
                .lifetime_left_usec = s->lifetime_left_usec,
                .pause_method = (char *) s->pause_method,
                .cgroup = s->cgroup,
                .payload = (char *) s->payload_ops->name,
                .unit = s->unit,
                .environment = s->environment,
                .pooled = sandbox_is_pooled(s),
                .from_pool = s->from_pool,
                .released = sandbox_is_released(s),
                .config = s->config,  /* borrowed, as the rest: st is not "done" */
                .egress_ca_cert = s->egress_ca_cert,
                .egress_ca_key = s->egress_ca_key,
                .contexts = s->contexts ? sandbox_contexts_to_json(s) : NULL,
        };
        int r;

        strcpy(st.id, s->id);
        r = s->payload_ops->save(s, &st);
        if (r >= 0)
                r = sandbox_persist_save(s->manager->sandboxes_dir, &st);
        /* Beside its workspace, on disk: what a reboot leaves of it (a stopped sandbox). */
        if (r >= 0 && s->workspace && !sandbox_is_pooled(s) && !s->config.ephemeral)
                r = sandbox_persist_save(workspace_pool_dir(s->manager->workspaces), &st);
        json_object_put(st.payload_data);
        json_object_put(st.contexts);
        if (r < 0)
                log_sandbox(s, LOG_WARNING, r, "Failed to save state of sandbox %s: %m", s->id);
}

/* The agent's control socket waits in systemd's fd store while sandboxd is not there
 * (restart, crash): it is what lets the next sandboxd speak to the sandbox again. */
static void sandbox_store_fd(Sandbox *s, bool store) {
        char msg[64];
        int r;

        if (!getenv("NOTIFY_SOCKET"))
                return;
        snprintf(msg, sizeof(msg), "%s\nFDNAME=ctl-%s", store ? "FDSTORE=1" : "FDSTOREREMOVE=1", s->id);
        r = store ? sd_pid_notify_with_fds(0, false, msg, &s->control_fd, 1) : sd_notify(false, msg);
        s->fd_stored = store && r > 0;
        if (r < 0)
                log_sandbox(s, LOG_WARNING, r, "Failed to %s the control socket of %s in systemd's fd store: %m",
                            store ? "keep" : "drop", s->id);
        /* The egress proxy's listener too: a restarted sandboxd gives it to a restarted
         * sandboxd-egress again. */
        if (!sandbox_config_has_egress(&s->config) || (store && s->egress_fd < 0))
                return;
        snprintf(msg, sizeof(msg), "%s\nFDNAME=egr-%s", store ? "FDSTORE=1" : "FDSTOREREMOVE=1", s->id);
        r = store ? sd_pid_notify_with_fds(0, false, msg, &s->egress_fd, 1) : sd_notify(false, msg);
        if (r < 0)
                log_sandbox(s, LOG_WARNING, r, "Failed to %s the egress listener of %s in systemd's fd store: %m",
                            store ? "keep" : "drop", s->id);
}

static int sandbox_pick_host_uid(Manager *m, uid_t *ret) {
        /* A uid of its own per sandbox: even a sandbox that got out of its namespaces owns
         * no file of the host's, nor of another sandbox. */
        for (unsigned attempt = 0; attempt < 64; attempt++) {
                uint32_t slot;
                if (getrandom(&slot, sizeof(slot), 0) != sizeof(slot))
                        return -EIO;
                uid_t uid = m->settings.uid_base + (slot % SANDBOX_UID_RANGE);
                if (!manager_host_uid_in_use(m, uid)) {
                        *ret = uid;
                        return 0;
                }
        }
        return -EBUSY;
}

static int sandbox_generate_id(Manager *m, char ret[static SANDBOX_ID_LEN + 1]) {
        for (unsigned attempt = 0; attempt < 16; attempt++) {
                uint8_t b[SANDBOX_ID_LEN / 2];
                if (getrandom(b, sizeof(b), 0) != sizeof(b))
                        return -EIO;
                sandbox_id_format(b, m->settings.fleet_node, ret);
                if (!manager_find_sandbox(m, ret))
                        return 0;
        }
        return -EEXIST;
}

int sandbox_take_new_id(Sandbox *s) {
        Manager *m = s->manager;
        char id[SANDBOX_ID_LEN + 1];
        bool stored = s->fd_stored, egress = sandbox_config_has_egress(&s->config);
        int r;

        r = sandbox_generate_id(m, id);
        if (r < 0)
                return r;
        /* What is filed under the old id goes, and comes back under the new one. */
        if (stored)
                sandbox_store_fd(s, false);
        if (egress)
                egress_client_remove(m->egress, s->id);
        if (s->saved) {
                (void) sandbox_persist_remove(m->sandboxes_dir, s->id);
                sandbox_remove_processes(m->sandboxes_dir, s->id);
        }
        manager_rename_sandbox(m, s, id);
        if (stored)
                sandbox_store_fd(s, true);
        if (egress && s->egress_fd >= 0)
                egress_client_add(m->egress, s);
        s->created_at = now_usec(CLOCK_REALTIME);
        return 0;
}

/* Calls and frees every waiter of *list. */
static void sandbox_waiters_call(Sandbox *s, DestroyWaiter **list, const SandboxError *error) {
        while (*list) {
                DestroyWaiter *w = *list;
                *list = w->next;
                w->cb(s, error, w->userdata);
                free(w);
        }
}

static void sandbox_waiters_free(DestroyWaiter **list) {
        while (*list) {
                DestroyWaiter *w = *list;
                *list = w->next;
                free(w);
        }
}

static int sandbox_waiters_add(DestroyWaiter **list, sandbox_callback_t cb, void *userdata) {
        DestroyWaiter *w;

        w = calloc(1, sizeof(DestroyWaiter));
        if (!w)
                return -ENOMEM;
        *w = (DestroyWaiter) { .cb = cb, .userdata = userdata, .next = *list };
        *list = w;
        return 0;
}

Sandbox *sandbox_free_internal(Sandbox *s) {
        if (!s)
                return NULL;
        sandbox_contexts_free(s);
        while (s->execs)
                exec_free(s->execs);
        while (s->file_ops)
                file_op_free(s->file_ops);
        sandbox_ports_done(s, NULL);
        while (s->finished)
                exec_free(s->finished);
        sandbox_waiters_free(&s->start_waiters);
        sandbox_waiters_free(&s->waiters);
        recycle_waiter_release(s);
        if (s->manager->systemd)
                systemd_client_cancel(s->manager->systemd, s);
        sd_event_source_disable_unref(s->control_source);
        sd_event_source_disable_unref(s->timer_source);
        sd_event_source_disable_unref(s->idle_source);
        sd_event_source_disable_unref(s->finalize_source);
        workspace_call_cancel(s->workspace_call);
        safe_close(s->control_fd);
        safe_close(s->egress_fd);
        if (s->payload_state) {
                s->payload_ops->free(s);
                free(s->payload_state);
        }
        /* After its processes: nothing writes there any more. */
        if (s->workspace && s->manager->workspaces) {
                int r = workspace_remove(s->manager->workspaces, s->id);
                if (r < 0)
                        log_sandbox(s, LOG_WARNING, r, "Failed to remove the workspace of sandbox %s, "
                                    "it is removed at the next start: %m", s->id);
        }
        free(s->template_name);
        free(s->unit);
        free(s->description);
        free(s->cgroup);
        cgroup_file_close(&s->cgroup_cpu_file);
        cgroup_file_close(&s->cgroup_memory_peak_file);
        free(s->failure);
        strv_free(s->environment);
        sandbox_secrets_free(s);
        sandbox_egress_ca_free(s);
        sandbox_config_done(&s->config);
        return mfree(s);
}

/* A sandbox's memory, with its backend's state; NULL if out of memory. */
static Sandbox *sandbox_alloc(Manager *m, const PayloadOps *ops) {
        Sandbox *s;

        s = calloc(1, sizeof(Sandbox));
        if (!s)
                return NULL;
        s->manager = m;
        s->control_fd = -EBADF;
        s->log_budget = PAYLOAD_LOG_LINES_MAX;
        s->egress_fd = -EBADF;
        s->cgroup_cpu_file = s->cgroup_memory_peak_file = CGROUP_FILE_NULL;
        s->payload_ops = ops;
        s->payload_state = calloc(1, ops->state_size);
        if (!s->payload_state)
                return mfree(s);
        if (ops->init)
                ops->init(s);
        return s;
}

/* The unit's Description: "Sandbox ID (TEMPLATE)", and its labels, so that systemctl status
 * shows them. */
int sandbox_format_description(Sandbox *s) {
        _cleanup_free_ char *labels = NULL;
        char *d;

        if (labels_format(s->config.labels, &labels) < 0 ||
            asprintf(&d, "Sandbox %s (%s)%s%s", s->id, strna(s->template_name), isempty(labels) ? "" : " ",
                     labels) < 0)
                return -ENOMEM;
        free(s->description);
        s->description = d;
        return 0;
}

static void on_description_set(const char *result, const sd_bus_error *error, void *userdata) {
        Sandbox *s = userdata;

        if (!result)
                log_sandbox(s, LOG_WARNING, 0, "Failed to set the description of %s: %s", s->unit,
                            error && error->message ? error->message : "no reply");
}

int sandbox_update_description(Sandbox *s) {
        int r;

        r = sandbox_format_description(s);
        if (r < 0)
                return r;
        if (!s->unit || !s->manager->systemd)
                return 0;
        return unit_set_description(s->manager->systemd, s->unit, s->description, on_description_set, s);
}

int sandbox_new(Manager *m, const Template *t, const SandboxConfig *config, uid_t owner, Sandbox **ret) {
        const PayloadOps *ops = manager_payload_ops(m, t->payload);
        Sandbox *s;
        int r;

        if (!ops)
                return -EOPNOTSUPP;
        s = sandbox_alloc(m, ops);
        if (!s)
                return -ENOMEM;
        s->owner = owner;
        r = sandbox_config_copy(&s->config, config);
        if (r < 0)
                goto fail;
        s->config.reuse_existing = false; /* a question of the call, not the sandbox's */
        if (!isempty(config->fork_from)) {
                Sandbox *source = manager_find_sandbox(m, config->fork_from);
                if (!source) {
                        r = -ESRCH;
                        goto fail;
                }
                strcpy(s->clone_from, source->id);
                s->clone_from_uid = source->host_uid;
                s->config.fork_from[0] = 0;
        }
        s->state = SANDBOX_STARTING;
        s->created_at = now_usec(CLOCK_REALTIME);

        if (!isempty(config->wake_id)) {
                /* Wake: the id it had. */
                r = manager_find_sandbox(m, config->wake_id) ? -EEXIST : 0;
                strcpy(s->id, config->wake_id);
                s->config.wake_id[0] = 0;
                /* Exec ids key the records (sandbox, exec), as after an adoption: the
                 * woken sandbox's must not reuse those before it hibernated. */
                s->next_exec_id = now_usec(CLOCK_REALTIME);
        } else
                r = sandbox_generate_id(m, s->id);
        if (r >= 0)
                r = sandbox_pick_host_uid(m, &s->host_uid);
        if (r < 0)
                goto fail;

        s->template_name = strdup(t->name);
        if (t->payload == PAYLOAD_BWRAP)
                /* Who the sandbox's /etc/passwd says it is; the template's own and then each
                 * exec's environment override these. (Docker images keep their own.) */
                r = strv_env_merge((char **) sandbox_default_environment, t->environment, &s->environment);
        else {
                s->environment = strv_copy(t->environment ?: (char *[]) { NULL });
                r = s->environment ? 0 : -ENOMEM;
        }
        if (r >= 0 && sandbox_config_has_egress(config)) {
                /* The proxy is the only way out (sandboxd-egress(8)); the template's and each
                 * exec's own environment may still say otherwise, for their own programs. */
                char **merged = NULL;
                r = strv_env_merge((char **) egress_environment, s->environment, &merged);
                if (r >= 0) {
                        strv_free(s->environment);
                        s->environment = merged;
                }
        }
        if (r >= 0)
                r = sandbox_secrets_load(s);
        if (r >= 0)
                r = sandbox_secrets_environment(s);
        if (r < 0)
                goto fail;
        s->unit = sandbox_unit_name(s->id, "scope");
        sandbox_subslice_name(s->id, s->subslice);
        if (!s->template_name || !s->environment || !s->unit ||
            sandbox_format_description(s) < 0) {
                r = -ENOMEM;
                goto fail;
        }

        *ret = s;
        return 0;
fail:
        sandbox_free_internal(s);
        return r;
}

static void sandbox_finalize(Sandbox *s) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Manager *m = s->manager;

        /* Whoever still waits learns the end now. */
        while (s->execs)
                exec_abort(s->execs, s->failure ?: "The sandbox was destroyed while the command ran.");
        while (s->file_ops)
                file_op_abort(s->file_ops, s->failure ?: "The sandbox was destroyed during the file operation.");
        sandbox_ports_done(s, NULL);

        if (s->payload_ops->done)
                s->payload_ops->done(s);
        if (sandbox_config_has_egress(&s->config))
                egress_client_remove(m->egress, s->id);
        sandbox_set_state(s, SANDBOX_DEAD);

        if (s->pause_cb) {
                /* A Pause or Resume in flight is answered too. */
                _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
                sandbox_callback_t pcb = s->pause_cb;

                s->pause_cb = NULL;
                sandbox_error_set(&e, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s was destroyed.", s->id);
                pcb(s, &e, s->pause_userdata);
        }
        sandbox_set_freeze(s, SANDBOX_FREEZE_NONE);
        if (s->create_cb || s->start_waiters) {
                sandbox_error_set(&error, SANDBOX_ERR_SANDBOX_FAILED, "Failed to start sandbox: %s",
                                  s->failure ?: "it stopped while starting.");
                sandbox_callback_t cb = TAKE_PTR(s->create_cb);

                if (cb)
                        cb(s, &error, s->create_userdata);
                sandbox_waiters_call(s, &s->start_waiters, &error);
        }
        recycle_abandon_caller(s, NULL);
        sandbox_waiters_call(s, &s->waiters, NULL);

        /* It ran (or was adopted running), or it never came up. */
        if (s->saved)
                STATISTICS_COUNT(m, sandbox_get_tenant(s), sandboxes_destroyed);
        else
                STATISTICS_COUNT(m, sandbox_get_tenant(s), create_failures);
        if (s->saved) {
                (void) sandbox_persist_remove(m->sandboxes_dir, s->id);
                sandbox_remove_processes(m->sandboxes_dir, s->id);
                if (s->fd_stored)
                        sandbox_store_fd(s, false);
                manager_record_sandbox(m, s, s->failure ?: "destroyed");
        }
        log_sandbox(s, LOG_INFO, 0, SANDBOX_REMOVED_FORMAT, s->id);
        sandbox_logs_sandbox_gone(s);
        manager_unlink_sandbox(m, s);
        /* Woken, it did not come up (its files are still there), or hibernated on disk. */
        bool relist = (s->woken && !s->workspace) || s->keep_files;
        if (s->keep_files)
                s->workspace = false;
        char id[SANDBOX_ID_LEN + 1];
        strcpy(id, s->id);
        sandbox_free_internal(s);
        if (relist && manager_load_stopped(m, id) <= 0)
                log_warning("Sandbox %s has files on disk but could not be listed as stopped; "
                            "they are removed at the next start.", id);
}

static int on_finalize(sd_event_source *source, void *userdata) {
        sandbox_finalize(userdata);
        return 0;
}

/* Never from within a stop path: callers up the stack (the control loop, an exec's
 * timer, an exec's delivery) may still be using s. */
static void sandbox_finalize_later(Sandbox *s) {
        if (s->finalize_source)
                return;
        if (sd_event_add_defer(s->manager->event, &s->finalize_source, on_finalize, s) < 0) {
                /* Cannot defer: better a sandbox that is never freed than a use after free. */
                log_sandbox(s, LOG_ERR, 0, "Failed to schedule the removal of sandbox %s.", s->id);
                return;
        }
}

static void on_unit_stopped(const char *result, const sd_bus_error *error, void *userdata) {
        Sandbox *s = userdata;

        sandbox_set_unit_state(s, SANDBOX_UNIT_STOPPED);
        if (error)
                /* The scope may linger; its processes were killed by systemd's job or will be
                 * by its own collection. Nothing of ours is left to wait for. */
                log_sandbox(s, LOG_WARNING, 0, "Failed to stop %s: %s", s->unit, error->message);
        else if (!streq(result, "done"))
                log_sandbox(s, LOG_WARNING, 0, "Stopping %s finished with result '%s'.", s->unit, result);
        sandbox_finalize(s);
}

void sandbox_payload_stopped(Sandbox *s) {
        int r;

        r = unit_stop(s->manager->systemd, s->unit, on_unit_stopped, s);
        if (r < 0) {
                log_sandbox(s, LOG_ERR, r, "Failed to stop %s: %m", s->unit);
                s->payload_ops->abort(s);
                sandbox_finalize_later(s);
                return;
        }
        sandbox_set_unit_state(s, SANDBOX_UNIT_STOPPING);
}

static void sandbox_stop(Sandbox *s, const char *reason) {
        if (reason && !s->failure)
                s->failure = strdup(reason);
        if (s->state == SANDBOX_STOPPING || s->state == SANDBOX_DEAD)
                return;
        sandbox_set_state(s, SANDBOX_STOPPING);
        /* Stopped while being reset (its template replaced, its unit stopped, its payload
         * dead): no longer kept (sandbox_is_resetting() is false from here on), whatever the
         * renewal still under way says, and a create waiting for it goes on without it. */
        recycle_waiter_release(s);
        s->timer_source = sd_event_source_disable_unref(s->timer_source);
        s->idle_source = sd_event_source_disable_unref(s->idle_source);

        if (s->unit_state == SANDBOX_UNIT_NONE || s->unit_state == SANDBOX_UNIT_STARTING)
                /* Still held (or never started): no process of the sandbox's ran. */
                s->payload_ops->abort(s);
        if (s->unit_state == SANDBOX_UNIT_STARTING)
                return; /* on_unit_started continues from here */
        s->payload_ops->stop(s);
}

int sandbox_release(Sandbox *s, sandbox_callback_t cb, void *userdata) {
        assert_return(s, -EINVAL);

        return recycle_release(s, cb, userdata);
}

void sandbox_payload_renewed(Sandbox *s, const char *failure) {
        assert(s);
        recycle_on_renewed(s, failure);
}

void sandbox_payload_failed(Sandbox *s, const char *reason) {
        sandbox_stop(s, reason);
}

const PayloadHost *sandbox_payload_host(Sandbox *s) {
        return manager_payload_host(s->manager);
}
void *sandbox_payload_state(Sandbox *s) { return s->payload_state; }
uid_t sandbox_payload_uid(Sandbox *s) { return s->host_uid; }
const char *sandbox_payload_unit(Sandbox *s) { return s->unit; }
const char *sandbox_payload_cgroup(Sandbox *s) { return s->cgroup; }
int sandbox_payload_control_fd(Sandbox *s) { return s->control_fd; }
char **sandbox_payload_environment(Sandbox *s) { return s->environment; }
const SandboxConfig *sandbox_payload_config(Sandbox *s) { return &s->config; }
bool sandbox_payload_starting(Sandbox *s) { return s->state == SANDBOX_STARTING; }

bool sandbox_payload_going(Sandbox *s) {
        return s->state == SANDBOX_STOPPING || s->state == SANDBOX_DEAD;
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        Sandbox *s = userdata;

        if (s->state == SANDBOX_STARTING) {
                log_sandbox(s, LOG_ERR, 0, "Sandbox %s did not become ready in time.", s->id);
                sandbox_stop(s, "its agent did not report ready in time.");
        } else {
                log_sandbox(s, LOG_INFO, 0, "Sandbox %s reached its lifetime timeout.", s->id);
                sandbox_stop(s, "The sandbox reached its lifetime timeout while the command ran.");
        }
        return 0;
}

/* The start deadline (lifetime false) or the lifetime, usec from now; 0: none. */
static int sandbox_arm_timer(Sandbox *s, uint64_t usec, bool lifetime) {
        s->timer_source = sd_event_source_disable_unref(s->timer_source);
        s->deadline_realtime = 0;
        if (usec == 0)
                return 0;
        if (lifetime)
                s->deadline_realtime = now_usec(CLOCK_REALTIME) + usec;
        return sd_event_add_time_relative(s->manager->event, &s->timer_source, CLOCK_MONOTONIC, usec, 0,
                                          on_timer, s);
}

static void on_idle_hibernated(const SnapshotMeta *meta, const SandboxError *error, void *userdata) {
        if (error)
                log_warning("Hibernating an idle sandbox failed: %s", sandbox_error_message(error));
}

static int on_idle(sd_event_source *source, uint64_t usec, void *userdata) {
        _cleanup_(sandbox_error_done) SandboxError error = SANDBOX_ERROR_NULL;
        Sandbox *s = userdata;
        int r;

        log_sandbox(s, LOG_INFO, 0, "Sandbox %s was idle for %" PRIu64 " s, %s it.", s->id,
                    s->config.idle_timeout_sec, s->config.idle_action == IDLE_ACTION_PAUSE ? "pausing" :
                    s->config.idle_action == IDLE_ACTION_HIBERNATE ? "hibernating" : "destroying");
        s->idle_source = sd_event_source_disable_unref(s->idle_source);
        switch (s->config.idle_action) {
        case IDLE_ACTION_PAUSE:
                r = sandbox_pause(s, NULL, NULL, &error);
                break;
        case IDLE_ACTION_HIBERNATE:
                r = sandbox_hibernate(s, NULL, on_idle_hibernated, NULL, &error);
                break;
        default:
                r = -ECANCELED;
        }
        if (r >= 0)
                return 0;
        if (r != -ECANCELED)
                log_sandbox(s, LOG_WARNING, r, "Failed to %s idle sandbox %s (%s), destroying it.",
                            idle_action_to_string(s->config.idle_action), s->id, sandbox_error_message(&error));
        sandbox_stop(s, "The sandbox reached its idle timeout.");
        return 0;
}

void sandbox_update_idle_timer(Sandbox *s) {
        int r;

        /* A paused sandbox is idle too where its idle action can take it further (to disk). */
        bool idle_state = s->state == SANDBOX_RUNNING ||
                          (s->state == SANDBOX_PAUSED && s->config.idle_action == IDLE_ACTION_HIBERNATE);
        if (!idle_state || s->execs || s->config.idle_timeout_sec == 0) {
                s->idle_source = sd_event_source_disable_unref(s->idle_source);
                return;
        }
        if (s->idle_source)
                return; /* already counting since the last exec ended */
        r = sd_event_add_time_relative(s->manager->event, &s->idle_source, CLOCK_MONOTONIC,
                                       s->config.idle_timeout_sec * 1000000ULL, 0, on_idle, s);
        if (r < 0)
                log_sandbox(s, LOG_WARNING, r, "Failed to arm idle timer, ignoring: %m");
}

static void sandbox_died(Sandbox *s, const char *reason) {
        if (s->state == SANDBOX_STOPPING || s->state == SANDBOX_DEAD)
                return;
        log_sandbox(s, LOG_WARNING, 0, "Sandbox %s ended: %s", s->id, reason);
        sandbox_stop(s, reason);
}

static void sandbox_became_ready(Sandbox *s) {
        int r;

        r = sandbox_arm_timer(s, s->config.timeout_sec * 1000000ULL, /* lifetime= */ true);
        if (r < 0) {
                log_sandbox(s, LOG_ERR, r, "Failed to arm lifetime timer: %m");
                sandbox_stop(s, "its lifetime timer could not be set.");
                return;
        }
        sandbox_set_state(s, SANDBOX_RUNNING);
        if (s->payload_ops->running)
                s->payload_ops->running(s);
        sandbox_update_idle_timer(s);
        /* Not an ephemeral one's: a restarted sandboxd stops it anyway (its one exec went
         * with the old one), and systemd compares each descriptor it is given with every
         * one it holds (kcmp), a cost that grows with the sandboxes kept there. */
        if (!s->config.ephemeral || sandbox_is_pooled(s))
                sandbox_store_fd(s, true);
        if (s->woken)
                /* Up again: its files go with it from now on. Before, a failed start left
                 * them (and their record) be, for the next sandboxd to list as stopped. */
                s->workspace = true;
        sandbox_save(s);
        s->saved = true;
        STATISTICS_COUNT(s->manager, sandbox_get_tenant(s), sandboxes_created);
        manager_record_sandbox(s->manager, s, NULL);
        log_sandbox(s, sandbox_lifecycle_log_level(s), 0, "Sandbox %s running as %s.", s->id, s->unit);
        sandbox_contexts_prestart(s);
        if (s->create_cb) {
                sandbox_callback_t cb = s->create_cb;
                s->create_cb = NULL;
                cb(s, NULL, s->create_userdata);
        }
        sandbox_waiters_call(s, &s->start_waiters, NULL);
}

static int on_control(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        Sandbox *s = userdata;

        /* A bounded number per dispatch: what the sandbox sends cannot starve the loop
         * (epoll is level-triggered; the rest comes on the next iteration). */
        for (unsigned n = 0; n < 64; n++) {
                json_object *msg = NULL;
                /* One with "ready" of a sandbox with egress (the proxy's listener), two with
                 * "port-fds-result". */
                int fds[2] = { -EBADF, -EBADF };
                const char *type;
                size_t n_fds = 0;
                int r;

                r = agent_recv(fd, &msg, fds, ELEMENTSOF(fds), &n_fds);
                if (r == -EAGAIN)
                        return 0;
                if (r < 0) {
                        s->control_source = sd_event_source_disable_unref(s->control_source);
                        sandbox_died(s, r == -ECONNRESET ? "its agent exited." : "its agent sent a malformed message.");
                        return 0;
                }

                if (agent_get_string(msg, "type", &type) < 0)
                        type = "";
                if (streq(type, "ready")) {
                        if (s->state == SANDBOX_STARTING && sandbox_config_has_egress(&s->config)) {
                                if (n_fds != 1) {
                                        json_object_put(msg);
                                        sandbox_stop(s, "its agent did not hand over the egress proxy's socket.");
                                        return 0;
                                }
                                s->egress_fd = TAKE_FD(fds[0]);
                                egress_client_add(s->manager->egress, s);
                        }
                        if (s->state == SANDBOX_STARTING)
                                sandbox_became_ready(s);
                } else if (streq(type, "exit")) {
                        struct agent_exit x;
                        if (agent_parse_exit(msg, &x) >= 0)
                                exec_on_agent_exit(s, &x);
                } else if (streq(type, "started")) {
                        uint64_t id;
                        pid_t pid;
                        if (agent_parse_started(msg, &id, &pid) >= 0)
                                exec_on_agent_started(s, id, pid);
                } else if (streq(type, "resized")) {
                        uint64_t id;
                        if (agent_parse_resized(msg, &id) >= 0)
                                exec_on_agent_resized(s, id);
                } else if (streq(type, "reset-result")) {
                        uint64_t id;
                        int error;
                        if (agent_parse_reset_result(msg, &id, &error) >= 0)
                                recycle_on_agent_reset(s, id, error);
                } else if (streq(type, "port-fds-result")) {
                        uint64_t id;
                        int error;
                        if (agent_parse_port_fds_result(msg, &id, &error) >= 0)
                                sandbox_ports_on_fds(s, id, error, fds, n_fds);
                } else if (streq(type, "log")) {
                        const char *data;
                        size_t size;
                        if (agent_parse_log(msg, &data, &size) >= 0)
                                sandbox_payload_log(s, data, size);
                } else if (streq(type, "file-result")) {
                        struct agent_file_result fr = {};
                        if (agent_parse_file_result(msg, &fr) >= 0)
                                file_op_on_result(s, &fr);
                        agent_file_result_done(&fr);
                }
                json_object_put(msg);
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);

                /* A callback above may have started the sandbox's end. */
                if (s->state != SANDBOX_STARTING && s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED)
                        return 0;
        }
        return 0;
}

void sandbox_payload_log(Sandbox *s, const char *buf, size_t n) {
        /* The sandbox's id now: a recycled one's is its current user's. */
        if (s->log_budget > 0 && log_payload_output(s->unit, s->id, buf, n, &s->log_budget) > 0 &&
            s->log_budget == 0)
                log_sandbox(s, LOG_WARNING, 0, "Further messages of the payload of sandbox %s are not logged.", s->id);
}

void sandbox_payload_exited(Sandbox *s) {
        sandbox_died(s, "its payload process exited.");
}

int sandbox_payload_connected(Sandbox *s, int fd) {
        int r;

        r = sd_event_add_io(s->manager->event, &s->control_source, fd, EPOLLIN, on_control, s);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        s->control_fd = fd;
        return 0;
}

/* The cgroup systemd gives the sandbox's unit (its ControlGroup) below systemd's own root:
 * its slice's path (the dash hierarchy) and its name, which systemd's escaping of cgroup
 * names leaves as it is. */
static int sandbox_unit_cgroup_suffix(Sandbox *s, char **ret) {
        bool sub = s->subslice[0] && !strstr(s->unit, ".slice"); /* a scope: in its sub-slice */

        return asprintf(ret, "/sandbox.slice/%s%s%s", sub ? s->subslice : "", sub ? "/" : "", s->unit) < 0 ?
                -ENOMEM : 0;
}

/* s->cgroup without asking systemd, once its root is known; false if it is not. */
static bool sandbox_set_unit_cgroup(Sandbox *s, const char *root) {
        _cleanup_free_ char *suffix = NULL;

        if (!root || sandbox_unit_cgroup_suffix(s, &suffix) < 0)
                return false;
        free(s->cgroup);
        if (asprintf(&s->cgroup, "%s%s", root, suffix) < 0) {
                s->cgroup = NULL;
                return false;
        }
        return true;
}

/* Remembers systemd's root from a ControlGroup it gave: the path without our suffix. */
static void sandbox_learn_cgroup_root(Sandbox *s, const char *cgroup) {
        _cleanup_free_ char *suffix = NULL;
        size_t n = strlen(cgroup), k;

        if (s->manager->systemd_cgroup_root || sandbox_unit_cgroup_suffix(s, &suffix) < 0)
                return;
        k = strlen(suffix);
        if (n >= k && streq(cgroup + n - k, suffix))
                s->manager->systemd_cgroup_root = strndup(cgroup, n - k);
}

static void on_control_group(const char *cgroup, const sd_bus_error *error, void *userdata) {
        Sandbox *s = userdata;

        if (error) {
                /* OOM detection falls back to the path systemd uses on a plain host. */
                log_sandbox(s, LOG_WARNING, 0, "Failed to read ControlGroup of %s: %s", s->unit, error->message);
                (void) sandbox_set_unit_cgroup(s, s->manager->systemd_cgroup_root ?: "");
                if (s->payload_ops->unit_started_needs_cgroup && s->state == SANDBOX_STARTING)
                        s->payload_ops->unit_started(s);
                return;
        }
        free(s->cgroup);
        s->cgroup = strdup(cgroup);
        sandbox_learn_cgroup_root(s, cgroup);
        if (s->payload_ops->unit_started_needs_cgroup && s->state == SANDBOX_STARTING)
                s->payload_ops->unit_started(s);
}

static void on_unit_started(const char *result, const sd_bus_error *error, void *userdata) {
        Sandbox *s = userdata;
        _cleanup_free_ char *reason = NULL;
        int r;

        /* Even a failed job may have left the unit behind: from here on, stopping means
         * asking systemd. */
        sandbox_set_unit_state(s, SANDBOX_UNIT_STARTED);

        if (error || !streq(result, "done")) {
                if (asprintf(&reason, "systemd could not start %s: %s", s->unit,
                             error ? error->message : result) < 0)
                        reason = NULL;
                log_sandbox(s, LOG_ERR, 0, "%s", strempty(reason));
                s->payload_ops->abort(s);
                if (s->state == SANDBOX_STOPPING) {
                        s->payload_ops->stop(s);
                        return;
                }
                sandbox_stop(s, reason ?: "systemd could not start its unit.");
                return;
        }

        if (s->state == SANDBOX_STOPPING) {
                /* Destroyed while its unit was being made: now it can be stopped. */
                s->payload_ops->stop(s);
                return;
        }

        /* A scope of ours once systemd's root is known: its cgroup is too, without asking
         * systemd (one bus call fewer per sandbox, for systemd, the bus daemon and us). */
        if (s->payload_ops->unit_started_needs_cgroup ||
            !sandbox_set_unit_cgroup(s, s->manager->systemd_cgroup_root)) {
                r = unit_get_control_group(s->manager->systemd, s->unit, on_control_group, s);
                if (r < 0) {
                        log_sandbox(s, LOG_WARNING, r, "Failed to ask for ControlGroup of %s: %m", s->unit);
                        if (s->payload_ops->unit_started_needs_cgroup) {
                                sandbox_stop(s, "the cgroup of its unit could not be learned.");
                                return;
                        }
                }
        }

        if (!s->payload_ops->unit_started_needs_cgroup)
                s->payload_ops->unit_started(s);
}

static int sandbox_start_unit(Sandbox *s, const ScopeParams *sp) {
        int r;

        r = scope_start_transient(s->manager->systemd, sp, on_unit_started, s);
        if (r < 0)
                return log_sandbox(s, LOG_ERR, r, "Failed to ask systemd for %s: %m", s->unit);
        sandbox_set_unit_state(s, SANDBOX_UNIT_STARTING);
        return 0;
}

int sandbox_payload_start_scope(Sandbox *s, pid_t pid) {
        return sandbox_start_unit(s, &(ScopeParams) {
                .unit = s->unit,
                .slice = s->subslice,
                .description = s->description,
                .pids = &pid,
                .n_pids = 1,
                .limits = s->config.limits,
        });
}

int sandbox_payload_start_slice(Sandbox *s) {
        char *slice = sandbox_unit_name(s->id, "slice");

        if (!slice)
                return -ENOMEM;
        free(s->unit);
        s->unit = slice;
        return sandbox_start_unit(s, &(ScopeParams) {
                .unit = s->unit,
                .description = s->description,
                .limits = s->config.limits,
        });
}

static int sandbox_start_payload(Sandbox *s) {
        const Template *t = template_set_find(&s->manager->templates, s->template_name);

        if (!t)
                return -ENOENT;
        return s->payload_ops->start(s, t);
}

static void on_workspace_made(int error, void *userdata) {
        Sandbox *s = userdata;
        bool cloned = !isempty(s->clone_from);
        int r;

        s->workspace_call = NULL;
        if (s->state != SANDBOX_STARTING)
                return;
        if (error < 0) {
                if (cloned)
                        log_sandbox(s, LOG_ERR, error, "Failed to snapshot the workspace of sandbox %s for sandbox %s: %m",
                                    s->clone_from, s->id);
                else
                        log_sandbox(s, LOG_ERR, error, "Failed to create the workspace of sandbox %s: %m", s->id);
                sandbox_stop(s, cloned ? "its files could not be snapshotted from the sandbox it forks."
                                       : "its workspace on disk could not be created.");
                return;
        }
        log_sandbox(s, LOG_DEBUG, 0, "Sandbox %s: workspace %s.", s->id, cloned ? "snapshotted" : "created");
        r = sandbox_start_payload(s);
        if (r < 0)
                sandbox_stop(s, "its payload could not be started.");
}

int sandbox_start(Sandbox *s, sandbox_callback_t cb, void *userdata) {
        bool making = false;
        int r;

        if (!template_set_find(&s->manager->templates, s->template_name))
                return -ENOENT;

        if (s->config.limits.storage == STORAGE_DISK && !s->woken) {
                if (!s->manager->workspaces)
                        return -EOPNOTSUPP;
                /* Made by sandboxd-workspace, then the payload: the files of the source by a
                 * snapshot for a fork, else an empty workspace. */
                if (!isempty(s->clone_from))
                        r = workspace_clone(s->manager->workspaces, s->clone_from, s->id, s->clone_from_uid,
                                            s->host_uid, s->config.disk_max, on_workspace_made, s, &s->workspace_call);
                else
                        r = workspace_create(s->manager->workspaces, s->id, s->host_uid, s->config.disk_max,
                                             on_workspace_made, s, &s->workspace_call);
                if (r < 0)
                        return log_sandbox(s, LOG_ERR, r, "Failed to create the workspace of sandbox %s: %m", s->id);
                making = true;
                s->workspace = true;
        }
        r = sandbox_arm_timer(s, s->payload_ops->start_timeout_usec, /* lifetime= */ false);
        if (r >= 0 && !making)
                r = sandbox_start_payload(s);
        if (r < 0) {
                workspace_call_cancel(s->workspace_call);
                s->workspace_call = NULL;
                s->control_source = sd_event_source_disable_unref(s->control_source);
                s->timer_source = sd_event_source_disable_unref(s->timer_source);
                s->control_fd = safe_close(s->control_fd);
                s->payload_ops->abort(s);
                if (s->payload_ops->done)
                        s->payload_ops->done(s);
                return r;
        }
        s->create_cb = cb;
        s->create_userdata = userdata;
        return 0;
}

static int sandbox_exec_checked(Sandbox *s, ExecConfig *c, exec_callback_t cb, void *userdata,
                                SandboxError *error) {
        if (c->refused < 0) {
                if (sandbox_error_is_set(&c->refused_error) && error && !sandbox_error_is_set(error)) {
                        *error = c->refused_error;
                        c->refused_error = SANDBOX_ERROR_NULL;
                }
                return c->refused;
        }
        if (s->state == SANDBOX_PAUSED)
                return sandbox_error_set(error, SANDBOX_ERR_NOT_RUNNING,
                                          "Sandbox %s is paused; resume it first.", s->id);
        if (s->state != SANDBOX_RUNNING || sandbox_freeze_pending(s))
                return sandbox_error_set(error, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s is %s, not running.",
                                         s->id, sandbox_state_to_string(s->state));
        if (s->config.ephemeral && s->use == SANDBOX_USED)
                return sandbox_error_set(error, SANDBOX_ERR_BUSY,
                                         "Sandbox %s is ephemeral and already ran its command.", s->id);
        return exec_start(s, c, cb, userdata, error);
}

/* An ephemeral sandbox runs one Exec. When that one is refused before it ran, nothing else
 * would ever run in it: it goes now (kept for reuse if its template recycles it) instead
 * of at its lifetime's end, so that no client has to destroy it. */
static void sandbox_ephemeral_refused(Sandbox *s) {
        if (!s->config.ephemeral || s->use == SANDBOX_USED || sandbox_is_pooled(s))
                return;
        if (s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED)
                return;
        sandbox_set_use(s, SANDBOX_USED);
        log_sandbox(s, sandbox_lifecycle_log_level(s), 0,
                    "Sandbox %s is ephemeral and its Exec was refused: it goes.", s->id);
        if (recycle_can_keep(s) && sandbox_release(s, NULL, NULL) >= 0)
                return;
        (void) sandbox_destroy(s, NULL, NULL);
}

int sandbox_exec(Sandbox *s, ExecConfig *c, exec_callback_t cb, void *userdata, SandboxError *error) {
        int r;

        assert_return(s, -EINVAL);
        assert_return(c, -EINVAL);

        r = sandbox_exec_checked(s, c, cb, userdata, error);
        if (r < 0 && !c->background)
                sandbox_ephemeral_refused(s);
        return r;
}

int sandbox_wait_started(Sandbox *s, sandbox_callback_t cb, void *userdata) {
        if (s->state == SANDBOX_RUNNING || s->state == SANDBOX_PAUSED) {
                cb(s, NULL, userdata);
                return 0;
        }
        if (s->state != SANDBOX_STARTING)
                return -ESRCH;
        return sandbox_waiters_add(&s->start_waiters, cb, userdata);
}

int sandbox_destroy(Sandbox *s, sandbox_callback_t cb, void *userdata) {
        int r;

        assert_return(s, -EINVAL);

        if (cb) {
                r = sandbox_waiters_add(&s->waiters, cb, userdata);
                if (r < 0)
                        return r;
        }
        log_sandbox(s, sandbox_lifecycle_log_level(s), 0, "Destroying sandbox %s.", s->id);
        if (s->state == SANDBOX_STOPPED) {
                /* Nothing runs: its files go as it is freed. */
                s->workspace = true;
                sandbox_finalize_later(s);
                return 0;
        }
        sandbox_stop(s, NULL);
        return 0;
}

int sandbox_stop_keeping_files(Sandbox *s, sandbox_callback_t cb, void *userdata) {
        if (s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED)
                return -EBUSY;
        if (!s->workspace || !s->manager->workspaces || s->config.ephemeral || sandbox_is_pooled(s))
                return -EOPNOTSUPP;
        s->keep_files = true;
        if (!s->failure)
                s->failure = strdup("hibernated: stopped, its files kept on disk");
        return sandbox_destroy(s, cb, userdata);
}

/* A sandbox of m from its record: its id, owner, host uid, creation time and config. */
static int sandbox_alloc_from_record(Manager *m, const SandboxPersist *st, Sandbox **ret) {
        const PayloadOps *ops;
        Sandbox *s;

        if (!sandbox_id_is_valid(st->id) || manager_find_sandbox(m, st->id))
                return -EINVAL;
        /* A record without "payload" is from before Docker payloads: bwrap's. */
        ops = manager_payload_ops(m, payload_kind_from_string(st->payload ?: "bwrap"));
        if (!ops)
                return -EINVAL;
        s = sandbox_alloc(m, ops);
        if (!s)
                return -ENOMEM;
        strcpy(s->id, st->id);
        s->owner = st->owner;
        s->host_uid = st->host_uid;
        s->created_at = st->created_at;
        if (sandbox_config_copy(&s->config, &st->config) < 0) {
                sandbox_free_internal(s);
                return -ENOMEM;
        }
        /* Its secrets as the store has them now: one removed since is not bound again. Its
         * proxy's CA as it was: the sandbox trusts that one. */
        if ((st->egress_ca_cert && !(s->egress_ca_cert = strdup(st->egress_ca_cert))) ||
            (st->egress_ca_key && !(s->egress_ca_key = strdup(st->egress_ca_key)))) {
                sandbox_free_internal(s);
                return -ENOMEM;
        }
        int r = sandbox_secrets_load(s);
        if (r < 0)
                log_sandbox(s, LOG_WARNING, r, "Failed to read the secrets of sandbox %s, it runs without them: %m",
                            s->id);
        *ret = s;
        return 0;
}

int sandbox_workspace_path(Sandbox *s, char **ret) {
        if (s->config.limits.storage != STORAGE_DISK || !s->manager->workspaces) {
                *ret = NULL;
                return 0;
        }
        *ret = workspace_path(s->manager->workspaces, s->id, NULL);
        return *ret ? 0 : -ENOMEM;
}

int sandbox_workspace_shm_dir(Sandbox *s, char **ret) {
        int r;

        *ret = NULL;
        if (s->config.limits.storage != STORAGE_DISK || !s->manager->workspaces)
                return 0;
        r = workspace_shm_dir(s->manager->workspaces, s->id, ret);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                log_sandbox(s, LOG_WARNING, r,
                            "Sandbox %s gets a tmpfs /dev/shm: its workspace cannot hold one (%s/%s): %m", s->id,
                            s->id, WORKSPACE_SHM);
        return 0;
}

int sandbox_new_stopped(Manager *m, const SandboxPersist *st, Sandbox **ret) {
        Sandbox *s;
        int r;

        if (manager_host_uid_in_use(m, st->host_uid))
                return -EEXIST;
        r = sandbox_alloc_from_record(m, st, &s);  /* its host uid kept: its files' owner */
        if (r < 0)
                return r;
        s->state = SANDBOX_STOPPED;
        s->saved = true;  /* it ran: its end is recorded */
        s->template_name = strdup(st->template_name);
        s->unit = sandbox_unit_name(s->id, "scope");
        sandbox_subslice_name(s->id, s->subslice);
        s->environment = strv_copy(st->environment ?: (char *[]) { NULL });
        if (!s->template_name || !s->unit || !s->environment ||
            sandbox_format_description(s) < 0) {
                sandbox_free_internal(s);
                return -ENOMEM;
        }
        sandbox_contexts_add_lost(s, st->contexts, CONTEXT_LOST_STOPPED);
        *ret = s;
        return 0;
}

int sandbox_wake_stopped(Sandbox *s, sandbox_callback_t cb, void *userdata) {
        int r;

        if (s->state != SANDBOX_STOPPED)
                return -EBUSY;
        s->woken = true;
        s->saved = false;
        s->state = SANDBOX_STARTING;
        /* A new life, as a Wake from an archive's: its record's row runs again from now. */
        uint64_t created_at = s->created_at;
        s->created_at = now_usec(CLOCK_REALTIME);
        /* Exec ids key the records (sandbox, exec): not those before it stopped. */
        s->next_exec_id = now_usec(CLOCK_REALTIME);
        r = sandbox_start(s, cb, userdata);
        if (r < 0) {
                s->state = SANDBOX_STOPPED;
                s->saved = true;
                s->woken = false;
                s->created_at = created_at;
                return r;
        }
        manager_sandbox_state_changed(s->manager, s);
        return 0;
}

static void sandbox_pause_done(Sandbox *s, const SandboxError *error) {
        sandbox_callback_t cb = s->pause_cb;

        sandbox_set_freeze(s, SANDBOX_FREEZE_NONE);
        s->pause_cb = NULL;
        if (cb)
                cb(s, error, s->pause_userdata);
}

static void on_paused(const char *result, const sd_bus_error *error, void *userdata);

/* Pause's or Resume's answer when systemd refused: SystemdFailed, with what it said. */
static void sandbox_pause_systemd_failed(Sandbox *s, const sd_bus_error *systemd_error) {
        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;

        sandbox_error_set(&e, SANDBOX_ERR_SYSTEMD_FAILED, "%s", systemd_error->message ?: systemd_error->name);
        sandbox_pause_done(s, &e);
}

static void on_frozen(const char *result, const sd_bus_error *error, void *userdata) {
        Sandbox *s = userdata;
        int r;

        if (s->state != SANDBOX_RUNNING)
                return; /* stopping: finalize answers the caller */
        if (error && !sd_bus_error_has_name(error, SD_BUS_ERROR_NOT_SUPPORTED)) {
                sandbox_pause_systemd_failed(s, error);
                return;
        }
        if (error) {
                /* No cgroup-v2 freezer (a hybrid or legacy host): stop every process with
                 * SIGSTOP instead. Memory is kept all the same. */
                log_sandbox(s, LOG_INFO, 0, "%s cannot be frozen (%s); pausing with SIGSTOP.", s->unit, error->message);
                r = unit_kill(s->manager->systemd, s->unit, SIGSTOP, on_paused, s);
                if (r < 0) {
                        _cleanup_(sandbox_error_done) SandboxError e = SANDBOX_ERROR_NULL;
                        sandbox_error_set_errno(&e, r, "Failed to ask systemd to stop %s: %m", s->unit);
                        sandbox_pause_done(s, &e);
                }
                return;
        }
        s->pause_method = "freeze";
        on_paused("done", NULL, s);
}

static void on_paused(const char *result, const sd_bus_error *error, void *userdata) {
        Sandbox *s = userdata;

        if (s->state != SANDBOX_RUNNING)
                return;
        if (error) {
                sandbox_pause_systemd_failed(s, error);
                return;
        }
        if (!s->pause_method)
                s->pause_method = "sigstop";
        for (Exec *e = s->execs; e; e = e->next)
                exec_suspend_timeout(e);
        sandbox_contexts_suspend(s);
        /* Its lifetime stands still while it is paused: what is left counts on resume. */
        if (s->deadline_realtime > 0) {
                uint64_t now = now_usec(CLOCK_REALTIME);
                s->lifetime_left_usec = s->deadline_realtime > now ? s->deadline_realtime - now : 1;
                (void) sandbox_arm_timer(s, 0, /* lifetime= */ true);
        }
        sandbox_set_freeze(s, SANDBOX_FREEZE_NONE);
        sandbox_set_state(s, SANDBOX_PAUSED);
        sandbox_update_idle_timer(s);
        sandbox_save(s);
        log_sandbox(s, LOG_INFO, 0, "Sandbox %s paused (%s).", s->id, s->pause_method);
        sandbox_pause_done(s, NULL);
}

int sandbox_pause(Sandbox *s, sandbox_callback_t cb, void *userdata, SandboxError *error) {
        int r;

        assert_return(s, -EINVAL);

        if (s->state != SANDBOX_RUNNING || sandbox_freeze_pending(s))
                return sandbox_error_set(error, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s is %s, not running.",
                                          s->id, sandbox_freeze_pending(s) ? "being paused or resumed" :
                                                  sandbox_state_to_string(s->state));
        r = unit_freeze(s->manager->systemd, s->unit, true, on_frozen, s);
        if (r < 0)
                return r;
        s->pause_method = NULL;
        sandbox_set_freeze(s, SANDBOX_FREEZE_PAUSING);
        s->pause_cb = cb;
        s->pause_userdata = userdata;
        return 0;
}

static void on_resumed(const char *result, const sd_bus_error *error, void *userdata) {
        Sandbox *s = userdata;

        if (s->state != SANDBOX_PAUSED)
                return;
        if (error) {
                sandbox_pause_systemd_failed(s, error);
                return;
        }
        s->pause_method = NULL;
        sandbox_set_freeze(s, SANDBOX_FREEZE_NONE);
        sandbox_set_state(s, SANDBOX_RUNNING);
        if (s->lifetime_left_usec > 0) {
                int r = sandbox_arm_timer(s, s->lifetime_left_usec, /* lifetime= */ true);
                if (r < 0)
                        log_sandbox(s, LOG_WARNING, r, "Failed to arm lifetime timer: %m");
                s->lifetime_left_usec = 0;
        }
        for (Exec *e = s->execs; e; e = e->next)
                exec_resume_timeout(e);
        sandbox_contexts_resume(s);
        sandbox_update_idle_timer(s);
        sandbox_save(s);
        log_sandbox(s, LOG_INFO, 0, "Sandbox %s resumed.", s->id);
        sandbox_pause_done(s, NULL);
}

int sandbox_resume(Sandbox *s, sandbox_callback_t cb, void *userdata, SandboxError *error) {
        int r;

        assert_return(s, -EINVAL);

        if (s->state != SANDBOX_PAUSED || sandbox_freeze_pending(s))
                return sandbox_error_set(error, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s is %s, not paused.",
                                          s->id, sandbox_freeze_pending(s) ? "being paused or resumed" :
                                                  sandbox_state_to_string(s->state));
        if (streq(s->pause_method, "freeze"))
                r = unit_freeze(s->manager->systemd, s->unit, false, on_resumed, s);
        else
                r = unit_kill(s->manager->systemd, s->unit, SIGCONT, on_resumed, s);
        if (r < 0)
                return r;
        sandbox_set_freeze(s, SANDBOX_FREEZE_RESUMING);
        s->pause_cb = cb;
        s->pause_userdata = userdata;
        return 0;
}

int sandbox_apply_timeout(Sandbox *s, uint64_t lifetime_sec, uint64_t idle_sec, SandboxError *error) {
        int r;

        if (lifetime_sec > SANDBOX_LIFETIME_MAX_SEC || idle_sec > SANDBOX_LIFETIME_MAX_SEC)
                return sandbox_error_set(error, SANDBOX_ERR_INVALID_OPTION,
                                          "Timeouts must be at most %llu s.", SANDBOX_LIFETIME_MAX_SEC);
        if (s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED)
                return sandbox_error_set(error, SANDBOX_ERR_NOT_RUNNING, "Sandbox %s is %s.", s->id,
                                          sandbox_state_to_string(s->state));

        if (s->state == SANDBOX_PAUSED) {
                /* It counts from its resume. */
                r = sandbox_arm_timer(s, 0, /* lifetime= */ true);
                s->lifetime_left_usec = lifetime_sec * 1000000ULL;
        } else
                r = sandbox_arm_timer(s, lifetime_sec * 1000000ULL, /* lifetime= */ true);
        if (r < 0)
                return r;
        s->config.timeout_sec = lifetime_sec;
        s->config.idle_timeout_sec = idle_sec;
        /* The idle clock starts again from now. */
        s->idle_source = sd_event_source_disable_unref(s->idle_source);
        sandbox_update_idle_timer(s);
        return 0;
}

int sandbox_set_timeout(Sandbox *s, uint64_t lifetime_sec, uint64_t idle_sec, SandboxError *error) {
        int r;

        assert_return(s, -EINVAL);

        r = sandbox_apply_timeout(s, lifetime_sec, idle_sec, error);
        if (r < 0)
                return r;
        sandbox_save(s);
        manager_sandbox_state_changed(s->manager, s);
        return 0;
}

int sandbox_adopt(Manager *m, const SandboxPersist *st, int control_fd, Sandbox **ret) {
        _cleanup_close_ int cfd = control_fd;
        uint64_t now = now_usec(CLOCK_REALTIME);
        Sandbox *s;
        int r;

        r = sandbox_alloc_from_record(m, st, &s);
        if (r < 0)
                return r;
        s->workspace = st->config.limits.storage == STORAGE_DISK;
        s->state = st->pause_method ? SANDBOX_PAUSED : SANDBOX_RUNNING;
        s->pause_method = st->pause_method && streq(st->pause_method, "freeze") ? "freeze" :
                          st->pause_method ? "sigstop" : NULL;
        s->unit_state = SANDBOX_UNIT_STARTED;
        s->saved = true;
        s->fd_stored = true; /* its control socket came from there */
        /* An adopted ephemeral sandbox takes no new exec: its one may have run. Set as
         * the rest of its state here, before it is anyone's. */
        s->use = st->config.ephemeral ? SANDBOX_USED : SANDBOX_FRESH;
        /* Whether a released one's reset was done is not known: kept or not, it is stopped below. */
        s->custody = st->released ? SANDBOX_KEPT : st->pooled ? SANDBOX_POOLED : SANDBOX_OWNED;
        s->from_pool = st->from_pool;
        /* Exec ids key the records (sandbox, exec): ones after a restart must not reuse
         * those before it. Microseconds since the epoch are past any count so far. */
        s->next_exec_id = now_usec(CLOCK_REALTIME);

        s->template_name = strdup(st->template_name);
        s->unit = st->unit ? strdup(st->unit) : sandbox_unit_name(s->id, "scope");
        s->environment = strv_copy(st->environment ?: (char *[]) { NULL });
        s->cgroup = st->cgroup ? strdup(st->cgroup) : NULL;
        if (!s->template_name || !s->environment || (st->cgroup && !s->cgroup) ||
            !s->unit ||
            sandbox_format_description(s) < 0) {
                r = -ENOMEM;
                goto fail;
        }

        if (fcntl(cfd, F_SETFL, O_NONBLOCK) < 0) {
                r = -errno;
                goto fail;
        }
        r = sandbox_payload_connected(s, TAKE_FD(cfd));
        if (r >= 0)
                r = s->payload_ops->adopt(s, st);
        if (r < 0)
                goto fail;

        manager_link_sandbox(m, s);
        s->lifetime_left_usec = st->lifetime_left_usec;
        if (st->deadline_realtime > 0) {
                /* The lifetime counts on through the restart; one already over ends now. */
                r = sandbox_arm_timer(s, st->deadline_realtime > now ? st->deadline_realtime - now : 1,
                                      /* lifetime= */ true);
                if (r < 0)
                        log_sandbox(s, LOG_WARNING, r, "Failed to arm lifetime timer: %m");
        }
        sandbox_update_idle_timer(s);
        log_sandbox(s, LOG_INFO, 0, "Adopted sandbox %s (%s, %s).", s->id, s->unit, sandbox_state_to_string(s->state));
        if (s->config.ephemeral && !sandbox_is_pooled(s))
                /* Its one exec went with the sandboxd that ran it: nobody will use it again. */
                sandbox_stop(s, "its one command was interrupted by a restart of sandboxd.");
        else if (sandbox_is_released(s))
                /* Whether its reset was done is not known: not kept across a restart. */
                sandbox_stop(s, "it was released for reuse before sandboxd restarted.");
        *ret = s;
        return 0;
fail:
        s->payload_ops->detach(s); /* not ours to kill on this path */
        s->workspace = false; /* the start's collection of orphans decides */
        sandbox_free_internal(s);
        return r;
}

void sandbox_abandon_callers(Sandbox *s, const SandboxError *error) {
        sandbox_callback_t cb;

        for (Exec *e = s->execs; e; e = e->next)
                exec_abandon_callers(e, error);
        while (s->file_ops)
                file_op_fail(s->file_ops, error);
        sandbox_ports_done(s, error);
        if ((cb = TAKE_PTR(s->pause_cb)))
                cb(s, error, s->pause_userdata);
        if ((cb = TAKE_PTR(s->create_cb)))
                cb(s, error, s->create_userdata);
        sandbox_waiters_call(s, &s->start_waiters, error);
        recycle_abandon_caller(s, error);
        sandbox_waiters_call(s, &s->waiters, error);
}

void sandbox_detach(Sandbox *s) {
        /* The payload lives on in its unit; only our ends of it go (its stored descriptors
         * stay for the next sandboxd). */
        s->detaching = true;
        s->payload_ops->detach(s);
        s->workspace = false; /* its files too */
        sandbox_free_internal(s);
}
