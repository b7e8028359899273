/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The control channel between sandboxd and sandbox-init, the agent that is PID 1 inside
 * every sandbox. It is one end of an AF_UNIX SOCK_SEQPACKET socketpair, inherited by the
 * agent as fd AGENT_CONTROL_FD. One datagram = one JSON object (json-c), at most
 * AGENT_MESSAGE_MAX bytes; "exec" carries exactly three descriptors (stdin, stdout,
 * stderr) as SCM_RIGHTS. This file is shared by both sides and links only json-c, so the
 * agent can be built static.
 *
 * daemon -> agent
 *   {"type":"exec","id":N,"argv":[..],"env":[..],"cwd":"/work"}   + fds [in,out,err]
 *   {"type":"kill","id":N,"signal":S}     kill the exec's process group (no reply)
 * agent -> daemon
 *   {"type":"ready","version":1}          once, when the agent is up
 *   {"type":"exit","id":N,"code":C,"signal":S,"duration_usec":D,
 *    "utime_usec":U,"stime_usec":T,"maxrss_kb":K}
 *       the exec's process ended: code is its exit code (signal 0), or signal is the
 *       signal that killed it (code -1). Sent after waitpid(), so everything it wrote
 *       to its pipes is already in them.
 *
 * Sessions (version 2):
 *   exec may carry "tty":{"rows":R,"cols":C}: the agent opens a pseudo-terminal inside
 *   the sandbox (its own /dev/pts), gives the child the slave as 0/1/2 and its
 *   controlling terminal, and relays: fds[0] -> master, master -> fds[1] (fds[2] is
 *   unused). The relay must not stall the agent's loop (a helper process per tty).
 *   {"type":"resize","id":N,"rows":R,"cols":C}   TIOCSWINSZ on that exec's terminal
 *   agent -> daemon {"type":"started","id":N,"pid":P}   after fork, P in the sandbox's
 *       PID namespace; sent for every exec (the daemon lists running processes).
 *
 * Files (version 2): every path is resolved by the agent, inside the sandbox, as the
 * sandbox's uid: what the sandboxed code planted (symlinks, "..", races) can only lead
 * to its own files, never to the host's. Each op runs in a child of the agent, so a
 * slow reader or writer never stalls PID 1; the child sends the result itself.
 *   {"type":"file","id":N,"op":OP,"path":P, ...}  + fds as OP needs
 *   OP "read"     fds [out]: copies the regular file P from "offset" (default 0), at
 *                 most "length" bytes (default: to the end), into out.
 *   OP "write"    fds [in]: copies in to P (created with "mode", default 0644; "append":
 *                 true appends; "parents": true makes missing directories).
 *   OP "list"     "depth" (1 = P's entries; max 16): result "entries".
 *   OP "stat"     result "stat" for P itself (not following a final symlink).
 *   OP "mkdir"    "parents", "mode" (default 0755).
 *   OP "remove"   "recursive": true removes a directory tree (never following links).
 *   OP "move"     "to": the new path (rename(2); no cross-device copy).
 *   Reads refuse anything but regular files (FIFOs, devices, sockets: EINVAL), opened
 *   with O_NONBLOCK|O_NOFOLLOW on the last component; "max" (bytes) bounds a read so a
 *   sparse terabyte file cannot stream forever (EFBIG beyond it).
 *   agent -> daemon {"type":"file-result","id":N,"errno":E,"bytes":B,
 *                    "entries":[{"path":..,"type":"file|dir|link|fifo|socket|char|block",
 *                                "size":..,"mode":..,"mtime_usec":..,"target":".."}..],
 *                    "stat":{same fields}}
 *   errno 0 on success; entries/stat only for list/stat; bytes for read/write.
 *
 * An exec that cannot start (no such command, cwd missing) still ends with "exit":
 * the child writes the reason to its stderr and exits 127 (not found), 126 (cannot be
 * executed) or 125 (setup failed), as env(1) does.
 * EOF on the socket means the other side is gone: the agent exits (and with it, as PID 1,
 * every process of the sandbox); the daemon treats the sandbox as dead.
 */

#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#define AGENT_CONTROL_FD 3
#define AGENT_PROTOCOL_VERSION 2
#define AGENT_MESSAGE_MAX (1024U * 1024U)
#define AGENT_EXEC_NFDS 3

/* Sends obj (and, if n_fds > 0, the descriptors) as one datagram. Returns 0 or -errno;
 * -EMSGSIZE if the serialisation exceeds AGENT_MESSAGE_MAX. Never blocks longer than the
 * socket does (callers use a blocking socket only where that is acceptable). */
int agent_send(int sock, json_object *obj, const int *fds, size_t n_fds);

/* Receives one datagram. On success *ret_obj is a JSON object and *ret_n_fds the number
 * of descriptors received into fds (at most max_fds; any beyond are closed and the call
 * fails with -EBADMSG). Returns 0 on success, -ECONNRESET on EOF, -EAGAIN if nothing is
 * pending on a non-blocking socket, -EBADMSG if the datagram is truncated or not a JSON
 * object. Received fds are O_CLOEXEC. */
int agent_recv(int sock, json_object **ret_obj, int *fds, size_t max_fds, size_t *ret_n_fds);

/* Field access helpers: return 0 and set *ret, or -EBADMSG if missing or mistyped. */
int agent_get_string(json_object *obj, const char *key, const char **ret);
int agent_get_int64(json_object *obj, const char *key, int64_t *ret);
/* A JSON array of strings -> newly allocated NULL-terminated vector. */
int agent_get_strv(json_object *obj, const char *key, char ***ret);

/* Builders for the message types above (return NULL on OOM). */
json_object *agent_msg_exec(uint64_t id, char * const *argv, char * const *env, const char *cwd);
json_object *agent_msg_kill(uint64_t id, int sig);
json_object *agent_msg_ready(void);

struct agent_exit {
        uint64_t id;
        int code;    /* exit code, or -1 when killed by a signal */
        int signal;  /* 0 when it exited */
        uint64_t duration_usec;
        uint64_t utime_usec;
        uint64_t stime_usec;
        uint64_t maxrss_kb;
};
json_object *agent_msg_exit(const struct agent_exit *e);
int agent_parse_exit(json_object *obj, struct agent_exit *ret);
