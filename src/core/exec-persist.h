/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Background processes across a restart of sandboxd (sandboxd(8), RESTARTS). What a
 * sandbox's processes are (ids, pids, argv, timeouts, the results of those that ended)
 * is kept in <dir>/<id>.procs, rewritten at each Start and each end; their pipes wait in
 * systemd's fd store (out-<id>-<process>, err-<id>-<process>); the output sandboxd read
 * and kept is written to <dir>/<id>.<process>.out and .err when sandboxd stops. The next
 * sandboxd takes all of it up when it adopts the sandbox. After a crash the kept output
 * (and the count of what was read) is not there: the process's output starts again at
 * offset 0 with what the crash left unread in its pipe. */

#include <stdbool.h>

typedef struct Sandbox Sandbox;

/* stopping: sandboxd stops and leaves the sandbox running: the output too. */
void sandbox_save_processes(Sandbox *s, bool stopping);
/* take_fd(userdata, name): the stored descriptor of that name, or -EBADF. */
int sandbox_adopt_processes(Sandbox *s, int (*take_fd)(void *userdata, const char *name), void *userdata);
/* The files of sandbox id, when it is gone. */
void sandbox_remove_processes(const char *dir, const char *id);
