/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* sandboxctl's snapshot verbs (sandboxctl(1)): snapshot, hibernate, wake, fork, snapshots,
 * snapshot-remove. */

#include "sandbox-client.h"

/* snapshot ID… / hibernate ID…: prints each new snapshot's id. */
int snapshots_take(SandboxClient *c, int argc, char *argv[], bool hibernate, bool include_tmp, bool json);
/* fork ID: prints the new sandbox's id. */
int snapshots_fork(SandboxClient *c, const char *id, const SandboxCreateOptions *o, bool json);
/* wake ID|NAME: prints the woken sandbox's id (the same as before). */
int snapshots_wake(SandboxClient *c, const char *id_or_name, bool json);
int snapshots_list(SandboxClient *c, bool json);
int snapshots_remove(SandboxClient *c, int argc, char *argv[]);
