/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The record's face on D-Bus: Manager.ListExecutions (sandboxd-api(7)). */

/* One execution in ListExecutions' reply: sandbox id, exec id, owner, caller, argv,
 * working directory ("" = the default), started, ended (µs), exit status, exit code,
 * signal, timed out, OOM killed, CPU µs (rusage), cgroup CPU ns, cgroup memory peak,
 * stdout bytes, stderr bytes. */
#define RECORDER_EXECUTION_SIGNATURE "(stuuassttiiibbttttt)"
