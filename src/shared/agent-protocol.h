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
 *   {"type":"kill","id":N,"signal":S}     kill the exec's process group, or the file
 *                                         op's process (no reply)
 * agent -> daemon
 *   {"type":"ready","version":1}          once, when the agent is up; started with
 *                                         --egress, it carries one descriptor: the
 *                                         listening TCP socket of 127.0.0.1:AGENT_EGRESS_PORT
 *                                         in the sandbox's network namespace, for
 *                                         sandboxd-egress (sandboxd-egress(8))
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
 *   agent -> daemon {"type":"resized","id":N}   (version 6) once that is done, for
 *       every resize (also of an exec that ended or has no terminal): input the daemon
 *       holds back after a resize goes to the terminal only then, so what is typed after
 *       a resize meets the new size. An agent older than version 6 does not answer: the
 *       daemon then sends the input after EXEC_RESIZE_WAIT_USEC.
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
 *   OP "archive"  fds [out]: writes /work (with "tmp": true, /tmp too) to out as a
 *                 zstd-compressed pax tar stream, names relative to "/" ("work/x"),
 *                 links stored as links, never followed; every other process of the
 *                 sandbox is stopped (SIGSTOP) meanwhile and continued after. "path" is
 *                 "/work". "bytes": the regular files' sizes added up (sparse ones at
 *                 their full size); EFBIG once that exceeds "max".
 *   OP "extract"  fds [in]: unpacks such a stream into /work (and /tmp with "tmp"),
 *                 refusing (EINVAL) a name or hard link outside them, "..", absolute
 *                 names, a path through a symlink, and devices and sockets; EFBIG once
 *                 the files' sizes (as their headers say, or as their data turns out)
 *                 exceed "max". "bytes" as for archive. What was unpacked before an
 *                 error stays: the caller discards the sandbox.
 *   OP "watch"    fds [out]: watches the directory P (with "recursive": true, the
 *                 directories below it too, up to AGENT_WATCH_DIRS_MAX) with inotify and
 *                 writes one JSON object a line to out for each change, as it happens:
 *                 {"event":"create|modify|delete|move_from|move_to|overflow",
 *                  "path":"/work/…","dir":true|false}; if P cannot be watched,
 *                 {"event":"error","errno":E} and the end. It runs until out's reader is
 *                 gone (or "kill"), then answers; a watch of a directory that goes ends
 *                 with errno 0 too.
 *   Reads refuse anything but regular files (FIFOs, devices, sockets, directories:
 *   EINVAL, with "not_regular" the type met), opened with O_NONBLOCK; "max" (bytes)
 *   bounds a read so a sparse terabyte file cannot stream forever (EFBIG beyond it).
 *   agent -> daemon {"type":"file-result","id":N,"errno":E,"bytes":B,
 *                    "entries":[{"path":..,"type":"file|dir|link|fifo|socket|char|block",
 *                                "size":..,"mode":..,"mtime_usec":..,"target":".."}..],
 *                    "stat":{same fields},"not_regular":"fifo|dir|..."}
 *   errno 0 on success; entries/stat only for list/stat; bytes for read/write;
 *   not_regular only with errno EINVAL (an older agent leaves it out).
 *
 * What the agent does where the above leaves a choice (version 2):
 *   - A request with an id that cannot be carried out as sent (malformed, wrong number of
 *     descriptors) is still answered: "exit" code 125 for exec, "file-result" errno
 *     EINVAL for file.
 *   - tty: EOF on fds[0] ends the input, not the session. The relay ends on EIO (the
 *     session and all it started have closed the terminal, and its output is read) or
 *     when the reader of fds[1] is gone; the agent then closes its master too, and the
 *     session gets SIGHUP, as from a closed terminal window.
 *   - file: relative paths start at /work; directories on the way may be symlinks;
 *     read, write and stat follow a symlink as the last component too (as cat, tee and
 *     stat -L would: it resolves inside the sandbox's root, to what its code can reach);
 *     remove, move and the entries of list never do;
 *     "list" follows P itself (/bin -> usr/bin) but nothing below it, reports entries in
 *     pre-order, sorted by name, with "path" relative to P; "stat" reports "path" as
 *     given. "mode" is exact (no umask); "parents" makes directories 0755; an existing
 *     file keeps its mode. Write refuses what exists and is not a regular file (EINVAL),
 *     and truncates only after that check. "bytes" is there also after a failed
 *     read/write (what got copied). The result comes after the op closed its descriptor,
 *     so a read's data is all in the pipe; if the op's process dies before sending it,
 *     the agent sends errno EIO. E2BIG: more than AGENT_FILE_ENTRIES_MAX entries, or a
 *     result larger than one datagram (AGENT_MESSAGE_MAX, or less: an unprivileged
 *     sender's buffer is capped by net.core.wmem_max). At most AGENT_FILE_OPS_MAX file
 *     ops run at once; one more is answered EBUSY at once. An op's process has
 *     oom_score_adj 1000: memory pressure in the sandbox ends it (EIO), not the agent.
 *
 * Recycling (version 3): between one user of a sandbox and the next.
 *   {"type":"reset","id":N}   every process of the sandbox but the agent is killed
 *       (SIGKILL to all, again until none is left: daemonized ones, those that ignore
 *       SIGTERM, stopped ones) and reaped; running execs and file ops end without their
 *       "exit"/"file-result"; the agent's own cwd becomes "/" (so that nothing holds the
 *       old /work); SysV shared memory, semaphores and message queues of the sandbox's
 *       IPC namespace are removed. The agent waits at most AGENT_RESET_TIMEOUT_USEC for
 *       the last process to be reaped (one in uninterruptible sleep is not), then answers
 *   agent -> daemon {"type":"reset-result","id":N,"errno":E}
 *       E 0: nothing of the sandbox's own runs any more; ETIMEDOUT: a process did not
 *       go in time (sandboxd then destroys the sandbox). /work, /tmp and /dev/shm are
 *       replaced by sandboxd afterwards, from outside (payload-bwrap.c).
 *
 * --empty-dev-shm (a sandbox on disk, whose /dev/shm is its workspace's shm/): the agent
 * empties /dev/shm before it says "ready", as its uid, following no link. sandboxd sets
 * an old shm/ aside before the start (workspace_shm_dir()), so this finds it empty unless
 * that failed (the quota full, say): the fallback, at the old cost.
 *
 * Its stderr (version 4): until it is ready, the agent's stderr is a pipe to the
 * sandboxd that started it (bwrap's too), which logs each line. Started with
 * --log-over-control, the agent makes its stderr a pipe of its own just before "ready"
 * and forwards what it (or a helper process of its) writes there:
 *   agent -> daemon {"type":"log","data":"..."}   at most AGENT_LOG_CHUNK bytes each,
 *       sent before any later message of the agent's (so a reset's complaints come
 *       before its "reset-result"). sandboxd closes its end of the first pipe on
 *       "ready": a running sandbox costs it one descriptor, this socket (which a
 *       restarted sandboxd gets back from systemd's fd store, messages and all).
 *
 * Ports (version 5, docs/PORTS.md): sandboxd opens connections to the sandbox's loopback
 * and reads its listening sockets with what the agent makes in the sandbox's network
 * namespace and hands over (sandboxd never enters the namespace: setns() would need
 * CAP_SYS_ADMIN). For each OpenPort or ListPorts:
 *   {"type":"port-fds","id":N,"kind":"connect"|"list"}
 *   agent -> daemon {"type":"port-fds-result","id":N,"errno":E}   + fds (none when E is
 *       not 0): for "connect" two TCP sockets, not connected, IPv4 then IPv6 (the second
 *       absent where the namespace has no IPv6); for "list" the agent's /proc/self/net/tcp
 *       and tcp6 (the second absent without IPv6), open for reading: a /proc/net file
 *       shows the namespace of whoever opened it. An agent older than version 5 does not
 *       answer (version 3 and 4's "netns" handed over the namespace itself).
 *
 * An exec that cannot start (no such command, cwd missing) still ends with "exit":
 * the child writes the reason to its stderr and exits 127 (not found), 126 (cannot be
 * executed) or 125 (setup failed), as env(1) does.
 * EOF on the socket means the other side is gone: the agent exits (and with it, as PID 1,
 * every process of the sandbox); the daemon treats the sandbox as dead.
 */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "sandbox-api.h"

#define AGENT_CONTROL_FD 3
#define AGENT_PROTOCOL_VERSION 6
#define AGENT_MESSAGE_MAX (1024U * 1024U)
#define AGENT_EXEC_NFDS 3
#define AGENT_EGRESS_PORT 3128
#define AGENT_RESET_TIMEOUT_USEC (2U * 1000000U)

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
/* kind: "connect" or "list". */
json_object *agent_msg_port_fds(uint64_t id, const char *kind);
json_object *agent_msg_port_fds_result(uint64_t id, int error);
/* port-fds-result's id and errno. */
int agent_parse_port_fds_result(json_object *obj, uint64_t *ret_id, int *ret_error);

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

/* Version 2: sessions. */

/* "started": the exec's process exists, as pid P of the sandbox's PID namespace. Sent
 * for every exec that forked, always before its "exit". */
json_object *agent_msg_started(uint64_t id, pid_t pid);
/* 0 and both outputs set, or -EBADMSG (outputs untouched). */
int agent_parse_started(json_object *obj, uint64_t *ret_id, pid_t *ret_pid);

/* Version 3: recycling. "reset" and its answer; errno 0 or positive. */
json_object *agent_msg_reset(uint64_t id);
json_object *agent_msg_reset_result(uint64_t id, int error);
/* 0 and both outputs set, or -EBADMSG. */
int agent_parse_reset_result(json_object *obj, uint64_t *ret_id, int *ret_error);
/* Version 4: "log", what was written to the agent's stderr (size bytes of data, at most
 * AGENT_LOG_CHUNK). */
#define AGENT_LOG_CHUNK 4096U
json_object *agent_msg_log(const char *data, size_t size);
/* 0 and both outputs set (the data is obj's), or -EBADMSG. */
int agent_parse_log(json_object *obj, const char **ret_data, size_t *ret_size);

/* A terminal size, as struct winsize carries it (0 means "unknown", as there). */
struct agent_winsize {
        uint16_t rows;
        uint16_t cols;
};

/* An "exec" (as agent_msg_exec()) that runs on a pseudo-terminal of the given size:
 * fds[0] is copied to the terminal, the terminal to fds[1]; fds[2] is sent but unused. */
json_object *agent_msg_exec_tty(uint64_t id, char * const *argv, char * const *env, const char *cwd,
                                const struct agent_winsize *ws);
/* The "tty" of an "exec": 1 and *ret set if it asks for a terminal, 0 if it does not
 * (*ret untouched), -EBADMSG if "tty" is there but malformed. */
int agent_parse_exec_tty(json_object *obj, struct agent_winsize *ret);

/* "resize": TIOCSWINSZ on the terminal of exec id (ignored for an exec without one). */
json_object *agent_msg_resize(uint64_t id, const struct agent_winsize *ws);
int agent_parse_resize(json_object *obj, uint64_t *ret_id, struct agent_winsize *ret);
/* "resized" (version 6): the agent's answer to "resize", once the terminal has the size. */
json_object *agent_msg_resized(uint64_t id);
int agent_parse_resized(json_object *obj, uint64_t *ret_id);

/* Version 2: files. */

enum agent_file_op {
        AGENT_FILE_READ,
        AGENT_FILE_WRITE,
        AGENT_FILE_LIST,
        AGENT_FILE_STAT,
        AGENT_FILE_MKDIR,
        AGENT_FILE_REMOVE,
        AGENT_FILE_MOVE,
        AGENT_FILE_ARCHIVE,
        AGENT_FILE_EXTRACT,
        AGENT_FILE_WATCH,
        _AGENT_FILE_OP_MAX,
        _AGENT_FILE_OP_INVALID = -EINVAL,
};

/* "read" -> AGENT_FILE_READ and back; unknown: NULL, _AGENT_FILE_OP_INVALID. */
const char *agent_file_op_to_string(enum agent_file_op op);
enum agent_file_op agent_file_op_from_string(const char *s);
/* How many descriptors a "file" request of op carries: 1 for read and archive (out),
 * write and extract (in), 0 for the others. */
size_t agent_file_op_nfds(enum agent_file_op op);

#define AGENT_FILE_UNLIMITED UINT64_MAX         /* "length", "max": not given */
#define AGENT_FILE_MODE_DEFAULT ((mode_t) -1)   /* "mode": 0644 for files, 0755 for dirs */
#define AGENT_FILE_DEPTH_MAX LIST_FILES_DEPTH_MAX
#define AGENT_FILE_ENTRIES_MAX 100000U
#define AGENT_FILE_OPS_MAX 16U                  /* at once; beyond, the agent answers EBUSY */
#define AGENT_WATCH_DIRS_MAX 4096U              /* directories one recursive watch follows */

/* A "file" request. Fields that do not apply to op are left at their defaults (see
 * AGENT_FILE_INIT) and then stay out of the message. */
struct agent_file {
        uint64_t id;
        enum agent_file_op op;
        const char *path;        /* relative paths are relative to /work */
        const char *to;          /* move: the new path; NULL otherwise */
        uint64_t offset;         /* read: where to start (0) */
        uint64_t length;         /* read: at most this many bytes, or AGENT_FILE_UNLIMITED */
        uint64_t max;            /* read: EFBIG if the file is larger; archive, extract: if the
                                  * files add up to more; or AGENT_FILE_UNLIMITED */
        mode_t mode;             /* write, mkdir: 0..07777, or AGENT_FILE_MODE_DEFAULT */
        unsigned depth;          /* list: 1..AGENT_FILE_DEPTH_MAX */
        bool append;             /* write */
        bool parents;            /* write, mkdir */
        bool recursive;          /* remove, watch */
        bool tmp;                /* archive, extract: /tmp as well as /work */
};

#define AGENT_FILE_INIT(_id, _op, _path)                                        \
        ((struct agent_file) {                                                  \
                .id = (_id),                                                    \
                .op = (_op),                                                    \
                .path = (_path),                                                \
                .length = AGENT_FILE_UNLIMITED,                                 \
                .max = AGENT_FILE_UNLIMITED,                                    \
                .mode = AGENT_FILE_MODE_DEFAULT,                                \
                .depth = 1,                                                     \
        })

/* Builds a "file" request; NULL on OOM or if f is inconsistent (no or empty path, an
 * unknown op, a move without "to", a mode or depth out of range, a value beyond int64).
 * Send it with agent_file_op_nfds(f->op) descriptors. */
json_object *agent_msg_file(const struct agent_file *f);
/* Parses a "file" request into *ret, defaults filled in; ret->path and ret->to point into
 * obj. 0, or -EBADMSG for a malformed or inconsistent request (*ret untouched). */
int agent_parse_file(json_object *obj, struct agent_file *ret);

/* One file, as "stat" reports it and "list" reports each entry. */
struct agent_file_entry {
        char *path;              /* list: relative to the listed directory; stat: as asked */
        mode_t type;             /* S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK */
        mode_t mode;             /* the permission bits (07777) */
        uint64_t size;
        int64_t mtime_usec;      /* may be negative: before 1970 */
        char *target;            /* symlinks: what they point to; NULL otherwise */
};

/* "file-result": what a "file" request came to. The builder reads, the parser fills in
 * (strings and the array then owned by the struct: agent_file_result_done()). */
struct agent_file_result {
        uint64_t id;
        int error;               /* a positive errno, 0 on success */
        bool has_bytes;          /* read, write: "bytes" (also after an error: what got copied) */
        uint64_t bytes;
        bool has_stat;           /* stat, on success */
        struct agent_file_entry stat;
        bool has_entries;        /* list, on success (n_entries may be 0) */
        struct agent_file_entry *entries;
        size_t n_entries;
        mode_t not_regular;      /* read, write refused with EINVAL: the S_IF* type met, or 0 */
};

/* "file" / "dir" / "link" / "fifo" / "socket" / "char" / "block" <-> S_IF*; NULL / 0 if
 * unknown. */
const char *agent_file_type_to_string(mode_t type);
mode_t agent_file_type_from_string(const char *s);
/* For messages: "FIFO", "character device", "directory", ...; never NULL. */
const char *agent_file_type_describe(mode_t type);

/* NULL on OOM, or if r holds what the wire cannot carry (an errno outside 0..4095, a
 * value beyond int64, an entry with an unknown type or without path). The agent checks
 * the size of the result (E2BIG) with agent_send()'s -EMSGSIZE. */
json_object *agent_msg_file_result(const struct agent_file_result *r);
/* 0 and *ret filled in, -EBADMSG if malformed (*ret untouched), -ENOMEM. */
int agent_parse_file_result(json_object *obj, struct agent_file_result *ret);
/* Frees what agent_parse_file_result() allocated; idempotent, NULL-safe. */
void agent_file_result_done(struct agent_file_result *r);
void agent_file_entry_done(struct agent_file_entry *e);
