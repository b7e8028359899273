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
#include "sandbox.h"
#include "template.h"

typedef struct ManagerSettings {
        char **template_dirs;
        char *state_dir;
        char *agent_path;
        char *bwrap_path;
        char *docker_socket;  /* the Docker Engine API (or Podman's compatible one) */
        unsigned max_sandboxes;
        uid_t uid_base;       /* sandboxes run as host uids uid_base … uid_base+65535 */
} ManagerSettings;

#define SANDBOX_UID_BASE_DEFAULT 0x70000000U
#define SANDBOX_UID_RANGE 65536U
#define SANDBOX_MAX_DEFAULT 4096U
#define DOCKER_SOCKET_DEFAULT "/run/docker.sock"

/* Front ends learn of changes through these (all optional). */
typedef struct ManagerHooks {
        void (*sandbox_added)(Sandbox *s, void *userdata);
        void (*sandbox_state_changed)(Sandbox *s, void *userdata);
        void (*sandbox_removed)(Sandbox *s, void *userdata);
        /* What the record keeps (recorder.h): a sandbox started or ended, an exec ended. */
        void (*sandbox_record)(const SandboxRecordEvent *ev, void *userdata);
        void (*exec_record)(const ExecRecordEvent *ev, void *userdata);
        void *userdata;
} ManagerHooks;

int manager_settings_init(ManagerSettings *s);
void manager_settings_done(ManagerSettings *s);

int manager_new(sd_event *event, sd_bus *bus, ManagerSettings *settings, Manager **ret);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

void manager_set_hooks(Manager *m, const ManagerHooks *hooks);
int manager_load_templates(Manager *m);
const TemplateSet *manager_get_templates(Manager *m);

/* Validates and starts a sandbox. User errors return -errno with error set (callback not
 * called); otherwise cb runs once the sandbox is running, or failed and is gone. */
int manager_create_sandbox(Manager *m, const char *template_name, SandboxConfig *config,
                           uid_t owner, sandbox_callback_t cb, void *userdata,
                           sd_bus_error *error);

Sandbox *manager_get_sandbox(Manager *m, const char *id);
/* Iteration in creation order: pass NULL to start. */
Sandbox *manager_next_sandbox(Manager *m, Sandbox *prev);
size_t manager_n_sandboxes(Manager *m);

/* Takes up the sandboxes a previous sandboxd left running (state files, descriptors kept
 * in systemd's fd store, live units); stops what cannot be taken up. Call once, before
 * serving. Returns how many were adopted. */
int manager_adopt_sandboxes(Manager *m);

/* Destroys the warm pools' sandboxes (they are nobody's: a clean stop leaves none) and
 * stops refilling; cb runs once they are gone. */
int manager_drain_pool(Manager *m, void (*cb)(void *userdata), void *userdata);

