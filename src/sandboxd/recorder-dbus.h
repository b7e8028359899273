/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The record's face on D-Bus: Manager.ListExecutions and ListExecutionsEx (sandboxd-api(7)). */

/* One execution in ListExecutions' reply: sandbox id, exec id, owner, caller, argv,
 * working directory ("" = the default), started, ended (µs), exit status, exit code,
 * signal, timed out, OOM killed, CPU µs (rusage), cgroup CPU ns, cgroup memory peak,
 * stdout bytes, stderr bytes. */
#define RECORDER_EXECUTION_SIGNATURE "(stuuassttiiibbttttt)"
/* ListExecutionsEx's: the same, then the sandbox's tenant ("" = none) and, of a sandbox on
 * disk, its workspace's bytes at the execution's end and its DiskMax (UINT64_MAX both for
 * one in memory). ListExecutions' signature stays as clients know it. */
#define RECORDER_EXECUTION_EX_SIGNATURE "(stuuassttiiibbtttttstt)"
