/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the parts of sandbox-init share: the agent's loop (sandbox-init.c), the relay of
 * terminal sessions (tty.c) and the file operations (file-ops.c). */

#include <sys/types.h>

#include "agent-protocol.h"
#include "macro.h"

/* Where relative paths of file operations start: the sandbox's work directory. */
#define AGENT_WORKDIR "/work"

/* Closes every descriptor from..to (inclusive); 0 or -errno. */
int close_between(int from, int to);
/* Closes every descriptor above 2 but those in keep (any order; negative ones ignored). */
int close_all_but(const int *keep, size_t n_keep);

/* Opens a pseudo-terminal pair of the given size. The agent leads a session without a
 * terminal, and neither end becomes its controlling terminal. Both ends are O_CLOEXEC. */
int pty_open(const struct agent_winsize *ws, int *ret_master, int *ret_slave);
/* The relay process of a terminal session: in -> master, master -> out, until the session
 * side has closed the terminal (EIO) or the caller's side has gone. Never returns. */
_noreturn_ void tty_relay(int master, int in, int out);

/* The process of one file operation: does f (with fd, the descriptor it carries, or -1),
 * sends the "file-result" itself on AGENT_CONTROL_FD, and exits 0 once it is sent.
 * Never returns. */
_noreturn_ void file_op_run(const struct agent_file *f, int fd);

/* Removes everything in the directory path, never following a link (those are removed
 * themselves), going on past what it cannot remove: *ret_left of the entries in path
 * are left. 0, or -errno if path cannot be read. */
int agent_empty_dir(const char *path, unsigned *ret_left);

/* snapshot.c: the "archive" (fd: out) and "extract" (fd: in) file operations. */
int op_archive(const struct agent_file *f, int out, struct agent_file_result *res);
int op_extract(const struct agent_file *f, int in, struct agent_file_result *res);

/* Where no one made the sandbox's user namespace (a Docker container): a new one of ours,
 * in which our uid and gid (the sandbox's host uid) are uid and gid, and nothing else is
 * mapped; no capability is left afterwards. 0; or a positive errno if the kernel refuses a
 * new user namespace (unprivileged ones disabled), and nothing changed; or -errno. */
int agent_enter_user_namespace(uid_t uid, gid_t gid);
/* Loads the BPF program in path (as libseccomp exports it, as bwrap's --seccomp takes
 * it) as a seccomp filter of this process and all it starts. 0 or -errno. */
int agent_load_seccomp(const char *path);

/* reset.c: "reset" (agent-protocol.h), in three steps for the agent's loop. begin: kills
 * every other process of the sandbox (we must be its PID 1: else -EPERM) and leaves the
 * work directory. reap: reaps what has ended; 1 once nothing is left, 0 while something
 * is (killed again), -errno. ipc: removes the System V IPC objects. */
int agent_reset_begin(void);
int agent_reset_reap(void);
int agent_reset_ipc(void);
/* What every exec inherits from us and sandboxed code can change from outside (our uid:
 * prlimit(2), setpriority(2), sched_setaffinity(2), sched_setscheduler(2) and
 * ioprio_set(2) need no privilege against a process of one's own uid, dumpable or not).
 * Also the sysctls of the sandbox's IPC and PID namespaces, which its uid may write on
 * Linux 6.x (shmmni, msgmnb, pid_max, ...). save: kept as we start (-errno: then restore
 * fails). restore: put back what we may; -EPERM if the rest differs (a lowered hard
 * limit, a higher nice value) or if another sysctl is writable: then the sandbox is not
 * reused. */
int agent_traits_save(void);
int agent_traits_restore(void);

/* renew.c: --renew-server (run by sandboxd, outside any sandbox; its requests come on
 * stdin, a SOCK_SEQPACKET socket). Returns when sandboxd closed it: 0, or the positive
 * errno of what failed (reported on stderr). */
int agent_renew_server(void);
/* --archive-workspace (snapshot.c): exit status. */
int agent_archive_workspace(void);
