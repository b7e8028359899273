/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The record's face on D-Bus: Manager.ListExecutions (sandboxd-api(7)). */

#include <systemd/sd-bus.h>

#include "recorder.h"

/* The recorder ListExecutions reads (NULL: recording is off, the method says so). */
void recorder_dbus_set(Recorder *r);

/* One execution in ListExecutions' reply: sandbox id, exec id, owner, caller, argv,
 * working directory ("" = the default), started, ended (µs), exit status, exit code,
 * signal, timed out, OOM killed, CPU µs (rusage), cgroup CPU ns, cgroup memory peak,
 * stdout bytes, stderr bytes. */
#define RECORDER_EXECUTION_SIGNATURE "(stuuassttiiibbttttt)"

int method_list_executions(sd_bus_message *m, void *userdata, sd_bus_error *error);
