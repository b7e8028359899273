/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "json-util.h"
#include "agent-protocol.h"
#include "macro.h"
#include "strv.h"

/* The kernel's SCM_MAX_FD: no datagram can carry more. */
#define AGENT_FDS_MAX 253

/* A control buffer large enough for any SCM_RIGHTS message, correctly aligned. */
union agent_control {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * AGENT_FDS_MAX)];
};

static void json_tokener_freep(json_tokener **p) {
        if (*p)
                json_tokener_free(*p);
}

static void close_many(const int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                safe_close(fds[i]);
}

static int socket_grow_sndbuf(int sock, size_t len) {
        int cur, want;
        socklen_t sl = sizeof(cur);

        /* An AF_UNIX datagram must fit in the sender's buffer (wmem_default, ~208 KiB), well
         * below AGENT_MESSAGE_MAX. The kernel doubles the value we set; ask for a little more
         * than len so that the doubled value leaves room for what is already queued. */
        if (len > AGENT_MESSAGE_MAX)
                return -EMSGSIZE;
        want = (int) len + 4096;

        if (getsockopt(sock, SOL_SOCKET, SO_SNDBUF, &cur, &sl) < 0)
                return -errno;
        if (cur / 2 >= want)
                return -EMSGSIZE;

        /* SO_SNDBUFFORCE ignores net.core.wmem_max but needs CAP_NET_ADMIN. */
        if (setsockopt(sock, SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof(want)) >= 0)
                return 0;
        if (setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want)) < 0)
                return -errno;
        return 0;
}

int agent_send(int sock, json_object *obj, const int *fds, size_t n_fds) {
        union agent_control control = {};
        struct iovec iov;
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
        };
        const char *s;
        size_t len;
        ssize_t n;
        int r;

        if (sock < 0 || !json_object_is_type(obj, json_type_object))
                return -EINVAL;
        if (n_fds > AGENT_FDS_MAX || (n_fds > 0 && !fds))
                return -EINVAL;

        s = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!s)
                return -ENOMEM;
        len = strlen(s);
        if (len > AGENT_MESSAGE_MAX)
                return -EMSGSIZE;

        iov = (struct iovec) { .iov_base = (char *) s, .iov_len = len };

        if (n_fds > 0) {
                struct cmsghdr *cmsg;

                mh.msg_control = &control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                cmsg = CMSG_FIRSTHDR(&mh);
                cmsg->cmsg_level = SOL_SOCKET;
                cmsg->cmsg_type = SCM_RIGHTS;
                cmsg->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * n_fds);
        }

        n = sendmsg(sock, &mh, MSG_NOSIGNAL);
        if (n < 0 && errno == EMSGSIZE) {
                /* Too big for the socket's buffer, not for the protocol: grow it, once. */
                r = socket_grow_sndbuf(sock, len);
                if (r < 0)
                        return r;
                n = sendmsg(sock, &mh, MSG_NOSIGNAL);
        }
        if (n < 0)
                return -errno;
        if ((size_t) n != len)
                return -EIO;
        return 0;
}

int agent_recv(int sock, json_object **ret_obj, int *fds, size_t max_fds, size_t *ret_n_fds) {
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        _cleanup_free_ char *buf = NULL;
        union agent_control control;
        int received[AGENT_FDS_MAX];
        size_t n_received = 0;
        bool overflow = false;
        struct iovec iov = {};
        struct msghdr mh = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
        };
        json_object *obj;
        ssize_t size, n;
        int r;

        if (sock < 0 || !ret_obj || (max_fds > 0 && (!fds || !ret_n_fds)))
                return -EINVAL;
        max_fds = MIN(max_fds, (size_t) AGENT_FDS_MAX);

        /* Learn the datagram's size without taking it, so the buffer fits the message. */
        size = recv(sock, NULL, 0, MSG_PEEK | MSG_TRUNC);
        if (size < 0)
                return -errno;
        if (size == 0)
                return -ECONNRESET;

        /* An oversized datagram is still taken off the queue (with an empty buffer), so that
         * the descriptors it carries are closed and the next call sees the next message. */
        if ((size_t) size <= AGENT_MESSAGE_MAX) {
                buf = malloc(size);
                if (!buf)
                        return -ENOMEM;
                iov = (struct iovec) { .iov_base = buf, .iov_len = size };
        }

        if (max_fds > 0) {
                mh.msg_control = &control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * max_fds);
        }

        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0)
                return -errno;

        /* Collect every descriptor first, so each error path below can close them all. CMSG
         * padding may let one more fd in than asked for: those count as overflow too. */
        for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(&mh); cmsg; cmsg = CMSG_NXTHDR(&mh, cmsg)) {
                size_t k;

                if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
                        continue;
                k = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int fd;

                        memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
                        if (n_received < max_fds)
                                received[n_received++] = fd;
                        else {
                                safe_close(fd);
                                overflow = true;
                        }
                }
        }

        if (overflow || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || n != size || !buf) {
                r = -EBADMSG;
                goto fail;
        }

        tok = json_tokener_new();
        if (!tok) {
                r = -ENOMEM;
                goto fail;
        }
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);

        obj = json_tokener_parse_ex(tok, buf, (int) n);
        if (!obj || json_tokener_get_error(tok) != json_tokener_success ||
            json_tokener_get_parse_end(tok) != (size_t) n ||
            !json_object_is_type(obj, json_type_object)) {
                json_object_put(obj);
                r = -EBADMSG;
                goto fail;
        }

        if (n_received > 0)
                memcpy(fds, received, sizeof(int) * n_received);
        if (ret_n_fds)
                *ret_n_fds = n_received;
        *ret_obj = obj;
        return 0;

fail:
        close_many(received, n_received);
        return r;
}

int agent_get_string(json_object *obj, const char *key, const char **ret) {
        json_object *v;
        const char *s;

        if (!json_object_object_get_ex(obj, key, &v) || json_string_get_clean(v, &s) < 0)
                return -EBADMSG;

        *ret = s;
        return 0;
}

int agent_get_int64(json_object *obj, const char *key, int64_t *ret) {
        json_object *v;
        int64_t i;

        if (!json_object_object_get_ex(obj, key, &v) || !json_object_is_type(v, json_type_int))
                return -EBADMSG;

        /* json-c keeps values above INT64_MAX as uint64 and clamps them when read as int64. */
        i = json_object_get_int64(v);
        if (i == INT64_MAX && json_object_get_uint64(v) != (uint64_t) INT64_MAX)
                return -EBADMSG;

        *ret = i;
        return 0;
}

int agent_get_strv(json_object *obj, const char *key, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        json_object *v;
        size_t n;

        if (!json_object_object_get_ex(obj, key, &v) || !json_object_is_type(v, json_type_array))
                return -EBADMSG;

        n = json_object_array_length(v);
        l = calloc(n + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(v, i);
                const char *s;

                if (json_string_get_clean(e, &s) < 0)
                        return -EBADMSG;
                l[i] = strdup(s);
                if (!l[i])
                        return -ENOMEM;
        }

        *ret = TAKE_PTR(l);
        return 0;
}

/* Integers travel as int64: a uint64 above INT64_MAX cannot be sent, and is refused here
 * (NULL, as for OOM) rather than silently wrapped into a negative number. */
static int json_add_u64(json_object *obj, const char *key, uint64_t u) {
        if (u > INT64_MAX)
                return -ERANGE;
        return json_add(obj, key, json_object_new_int64((int64_t) u));
}

static json_object *agent_msg_new(const char *type) {
        _cleanup_json_ json_object *obj = json_object_new_object();

        if (!obj || json_add(obj, "type", json_object_new_string(type)) < 0)
                return NULL;
        return TAKE_PTR(obj);
}

json_object *agent_msg_exec(uint64_t id, char * const *argv, char * const *env, const char *cwd) {
        _cleanup_json_ json_object *obj = agent_msg_new("exec");

        /* A NULL cwd leaves the key out: the agent then keeps its own working directory. */
        if (!obj ||
            json_add_u64(obj, "id", id) < 0 ||
            json_add(obj, "argv", strv_to_json(argv)) < 0 ||
            json_add(obj, "env", strv_to_json(env)) < 0 ||
            (cwd && json_add(obj, "cwd", json_object_new_string(cwd)) < 0))
                return NULL;
        return TAKE_PTR(obj);
}

json_object *agent_msg_kill(uint64_t id, int sig) {
        _cleanup_json_ json_object *obj = agent_msg_new("kill");

        if (!obj ||
            json_add_u64(obj, "id", id) < 0 ||
            json_add(obj, "signal", json_object_new_int64(sig)) < 0)
                return NULL;
        return TAKE_PTR(obj);
}

json_object *agent_msg_ready(void) {
        _cleanup_json_ json_object *obj = agent_msg_new("ready");

        if (!obj || json_add(obj, "version", json_object_new_int64(AGENT_PROTOCOL_VERSION)) < 0)
                return NULL;
        return TAKE_PTR(obj);
}

json_object *agent_msg_port_fds(uint64_t id, const char *kind) {
        _cleanup_json_ json_object *obj = agent_msg_new("port-fds");

        if (!obj || json_add_u64(obj, "id", id) < 0 || json_add(obj, "kind", json_object_new_string(kind)) < 0)
                return NULL;
        return TAKE_PTR(obj);
}

json_object *agent_msg_port_fds_result(uint64_t id, int error) {
        _cleanup_json_ json_object *obj = agent_msg_new("port-fds-result");

        if (!obj || json_add_u64(obj, "id", id) < 0 || json_add(obj, "errno", json_object_new_int64(error)) < 0)
                return NULL;
        return TAKE_PTR(obj);
}

int agent_parse_port_fds_result(json_object *obj, uint64_t *ret_id, int *ret_error) {
        /* The same fields as reset-result. */
        return agent_parse_reset_result(obj, ret_id, ret_error);
}

json_object *agent_msg_exit(const struct agent_exit *e) {
        _cleanup_json_ json_object *obj = agent_msg_new("exit");

        if (!obj ||
            json_add_u64(obj, "id", e->id) < 0 ||
            json_add(obj, "code", json_object_new_int64(e->code)) < 0 ||
            json_add(obj, "signal", json_object_new_int64(e->signal)) < 0 ||
            json_add_u64(obj, "duration_usec", e->duration_usec) < 0 ||
            json_add_u64(obj, "utime_usec", e->utime_usec) < 0 ||
            json_add_u64(obj, "stime_usec", e->stime_usec) < 0 ||
            json_add_u64(obj, "maxrss_kb", e->maxrss_kb) < 0)
                return NULL;
        return TAKE_PTR(obj);
}

static int get_u64(json_object *obj, const char *key, uint64_t *ret) {
        int64_t i;
        int r;

        r = agent_get_int64(obj, key, &i);
        if (r < 0)
                return r;
        if (i < 0)
                return -EBADMSG;
        *ret = (uint64_t) i;
        return 0;
}

int agent_parse_exit(json_object *obj, struct agent_exit *ret) {
        struct agent_exit e = {};
        int64_t code, sig;
        int r;

        if ((r = get_u64(obj, "id", &e.id)) < 0 ||
            (r = agent_get_int64(obj, "code", &code)) < 0 ||
            (r = agent_get_int64(obj, "signal", &sig)) < 0 ||
            (r = get_u64(obj, "duration_usec", &e.duration_usec)) < 0 ||
            (r = get_u64(obj, "utime_usec", &e.utime_usec)) < 0 ||
            (r = get_u64(obj, "stime_usec", &e.stime_usec)) < 0 ||
            (r = get_u64(obj, "maxrss_kb", &e.maxrss_kb)) < 0)
                return r;

        /* The agent is inside the sandbox and not to be trusted: an exit is either a code
         * (0..255, no signal) or a signal (1..64, code -1), never both or neither. */
        if (sig == 0 ? (code < 0 || code > 255) : (sig < 1 || sig > 64 || code != -1))
                return -EBADMSG;
        e.code = (int) code;
        e.signal = (int) sig;

        *ret = e;
        return 0;
}

/* Optional fields: absent leaves *ret alone, present but mistyped is -EBADMSG. */
static int get_u64_opt(json_object *obj, const char *key, uint64_t *ret) {
        if (!json_object_object_get_ex(obj, key, NULL))
                return 0;
        return get_u64(obj, key, ret);
}

static int get_bool_opt(json_object *obj, const char *key, bool *ret) {
        json_object *v;

        if (!json_object_object_get_ex(obj, key, &v))
                return 0;
        if (!json_object_is_type(v, json_type_boolean))
                return -EBADMSG;
        *ret = json_object_get_boolean(v);
        return 0;
}

static int get_mode_opt(json_object *obj, const char *key, mode_t *ret) {
        int64_t i;
        int r;

        if (!json_object_object_get_ex(obj, key, NULL))
                return 0;
        r = agent_get_int64(obj, key, &i);
        if (r < 0)
                return r;
        if (i < 0 || i > 07777)
                return -EBADMSG;
        *ret = (mode_t) i;
        return 0;
}

json_object *agent_msg_started(uint64_t id, pid_t pid) {
        _cleanup_json_ json_object *obj = agent_msg_new("started");

        if (!obj || pid <= 0 ||
            json_add_u64(obj, "id", id) < 0 ||
            json_add(obj, "pid", json_object_new_int64(pid)) < 0)
                return NULL;
        return TAKE_PTR(obj);
}

int agent_parse_started(json_object *obj, uint64_t *ret_id, pid_t *ret_pid) {
        uint64_t id, pid;
        int r;

        if ((r = get_u64(obj, "id", &id)) < 0 ||
            (r = get_u64(obj, "pid", &pid)) < 0)
                return r;
        if (pid < 1 || pid > INT32_MAX)
                return -EBADMSG;

        *ret_id = id;
        *ret_pid = (pid_t) pid;
        return 0;
}

json_object *agent_msg_reset(uint64_t id) {
        _cleanup_json_ json_object *obj = agent_msg_new("reset");

        if (!obj || json_add_u64(obj, "id", id) < 0)
                return NULL;
        return TAKE_PTR(obj);
}

json_object *agent_msg_log(const char *data, size_t size) {
        _cleanup_json_ json_object *obj = agent_msg_new("log");

        if (!obj || size > AGENT_LOG_CHUNK ||
            json_add(obj, "data", json_object_new_string_len(data, (int) size)) < 0)
                return NULL;
        return TAKE_PTR(obj);
}

int agent_parse_log(json_object *obj, const char **ret_data, size_t *ret_size) {
        json_object *d;
        int n;

        if (!json_object_object_get_ex(obj, "data", &d) || !json_object_is_type(d, json_type_string))
                return -EBADMSG;
        n = json_object_get_string_len(d);
        if (n < 0 || (size_t) n > AGENT_LOG_CHUNK)
                return -EBADMSG;
        *ret_data = json_object_get_string(d);
        *ret_size = (size_t) n;
        return 0;
}

json_object *agent_msg_reset_result(uint64_t id, int error) {
        _cleanup_json_ json_object *obj = agent_msg_new("reset-result");

        if (!obj || error < 0 ||
            json_add_u64(obj, "id", id) < 0 ||
            json_add(obj, "errno", json_object_new_int64(error)) < 0)
                return NULL;
        return TAKE_PTR(obj);
}

int agent_parse_reset_result(json_object *obj, uint64_t *ret_id, int *ret_error) {
        uint64_t id, error;
        int r;

        if ((r = get_u64(obj, "id", &id)) < 0 ||
            (r = get_u64(obj, "errno", &error)) < 0)
                return r;
        if (error > 4095)
                return -EBADMSG;

        *ret_id = id;
        *ret_error = (int) error;
        return 0;
}

static int add_winsize(json_object *obj, const struct agent_winsize *ws) {
        if (!ws)
                return -EINVAL;
        if (json_add(obj, "rows", json_object_new_int64(ws->rows)) < 0 ||
            json_add(obj, "cols", json_object_new_int64(ws->cols)) < 0)
                return -ENOMEM;
        return 0;
}

static int parse_winsize(json_object *obj, struct agent_winsize *ret) {
        int64_t rows, cols;
        int r;

        if ((r = agent_get_int64(obj, "rows", &rows)) < 0 ||
            (r = agent_get_int64(obj, "cols", &cols)) < 0)
                return r;
        if (rows < 0 || rows > UINT16_MAX || cols < 0 || cols > UINT16_MAX)
                return -EBADMSG;

        *ret = (struct agent_winsize) { .rows = (uint16_t) rows, .cols = (uint16_t) cols };
        return 0;
}

json_object *agent_msg_exec_tty(uint64_t id, char * const *argv, char * const *env, const char *cwd,
                                const struct agent_winsize *ws) {
        _cleanup_json_ json_object *obj = NULL, *tty = NULL;

        if (!ws)
                return NULL;
        obj = agent_msg_exec(id, argv, env, cwd);
        tty = json_object_new_object();
        if (!obj || !tty || add_winsize(tty, ws) < 0 || json_add(obj, "tty", TAKE_PTR(tty)) < 0)
                return NULL;
        return TAKE_PTR(obj);
}

int agent_parse_exec_tty(json_object *obj, struct agent_winsize *ret) {
        struct agent_winsize ws;
        json_object *v;
        int r;

        if (!json_object_object_get_ex(obj, "tty", &v))
                return 0;
        if (!json_object_is_type(v, json_type_object))
                return -EBADMSG;
        r = parse_winsize(v, &ws);
        if (r < 0)
                return r;

        *ret = ws;
        return 1;
}

json_object *agent_msg_resize(uint64_t id, const struct agent_winsize *ws) {
        _cleanup_json_ json_object *obj = agent_msg_new("resize");

        if (!obj || json_add_u64(obj, "id", id) < 0 || add_winsize(obj, ws) < 0)
                return NULL;
        return TAKE_PTR(obj);
}

int agent_parse_resize(json_object *obj, uint64_t *ret_id, struct agent_winsize *ret) {
        struct agent_winsize ws;
        uint64_t id;
        int r;

        if ((r = get_u64(obj, "id", &id)) < 0 ||
            (r = parse_winsize(obj, &ws)) < 0)
                return r;

        *ret_id = id;
        *ret = ws;
        return 0;
}

json_object *agent_msg_resized(uint64_t id) {
        _cleanup_json_ json_object *obj = agent_msg_new("resized");

        if (!obj || json_add_u64(obj, "id", id) < 0)
                return NULL;
        return TAKE_PTR(obj);
}

int agent_parse_resized(json_object *obj, uint64_t *ret_id) {
        return get_u64(obj, "id", ret_id);
}

static const char * const file_op_table[_AGENT_FILE_OP_MAX] = {
        [AGENT_FILE_READ] = "read",
        [AGENT_FILE_WRITE] = "write",
        [AGENT_FILE_LIST] = "list",
        [AGENT_FILE_STAT] = "stat",
        [AGENT_FILE_MKDIR] = "mkdir",
        [AGENT_FILE_REMOVE] = "remove",
        [AGENT_FILE_MOVE] = "move",
        [AGENT_FILE_ARCHIVE] = "archive",
        [AGENT_FILE_EXTRACT] = "extract",
        [AGENT_FILE_WATCH]   = "watch",
};

const char *agent_file_op_to_string(enum agent_file_op op) {
        if (op < 0 || op >= _AGENT_FILE_OP_MAX)
                return NULL;
        return file_op_table[op];
}

enum agent_file_op agent_file_op_from_string(const char *s) {
        if (!s)
                return _AGENT_FILE_OP_INVALID;
        for (size_t i = 0; i < ELEMENTSOF(file_op_table); i++)
                if (streq(file_op_table[i], s))
                        return (enum agent_file_op) i;
        return _AGENT_FILE_OP_INVALID;
}

size_t agent_file_op_nfds(enum agent_file_op op) {
        return (op == AGENT_FILE_READ || op == AGENT_FILE_WRITE || op == AGENT_FILE_ARCHIVE ||
                op == AGENT_FILE_EXTRACT || op == AGENT_FILE_WATCH) ? 1 : 0;
}

json_object *agent_msg_file(const struct agent_file *f) {
        _cleanup_json_ json_object *obj = agent_msg_new("file");
        const char *op;
        int r = 0;

        if (!obj || !f)
                return NULL;
        op = agent_file_op_to_string(f->op);
        if (!op || !f->path || !*f->path)
                return NULL;
        if (json_add_u64(obj, "id", f->id) < 0 ||
            json_add(obj, "op", json_object_new_string(op)) < 0 ||
            json_add(obj, "path", json_object_new_string(f->path)) < 0)
                return NULL;

        /* Only what applies to op, and only what differs from the default. */
        switch (f->op) {

        case AGENT_FILE_READ:
                if (f->offset != 0)
                        r = json_add_u64(obj, "offset", f->offset);
                if (r >= 0 && f->length != AGENT_FILE_UNLIMITED)
                        r = json_add_u64(obj, "length", f->length);
                if (r >= 0 && f->max != AGENT_FILE_UNLIMITED)
                        r = json_add_u64(obj, "max", f->max);
                break;

        case AGENT_FILE_WRITE:
        case AGENT_FILE_MKDIR:
                if (f->mode != AGENT_FILE_MODE_DEFAULT)
                        r = f->mode > 07777 ? -ERANGE : json_add(obj, "mode", json_object_new_int64(f->mode));
                if (r >= 0 && f->parents)
                        r = json_add(obj, "parents", json_object_new_boolean(true));
                if (r >= 0 && f->op == AGENT_FILE_WRITE && f->append)
                        r = json_add(obj, "append", json_object_new_boolean(true));
                break;

        case AGENT_FILE_LIST:
                if (f->depth < 1 || f->depth > AGENT_FILE_DEPTH_MAX)
                        r = -ERANGE;
                else if (f->depth != 1)
                        r = json_add(obj, "depth", json_object_new_int64(f->depth));
                break;

        case AGENT_FILE_REMOVE:
        case AGENT_FILE_WATCH:
                if (f->recursive)
                        r = json_add(obj, "recursive", json_object_new_boolean(true));
                break;

        case AGENT_FILE_MOVE:
                r = f->to && *f->to ? json_add(obj, "to", json_object_new_string(f->to)) : -EINVAL;
                break;

        case AGENT_FILE_ARCHIVE:
        case AGENT_FILE_EXTRACT:
                if (f->max != AGENT_FILE_UNLIMITED)
                        r = json_add_u64(obj, "max", f->max);
                if (r >= 0 && f->tmp)
                        r = json_add(obj, "tmp", json_object_new_boolean(true));
                break;

        default:
                break;
        }
        if (r < 0)
                return NULL;

        return TAKE_PTR(obj);
}

int agent_parse_file(json_object *obj, struct agent_file *ret) {
        struct agent_file f = AGENT_FILE_INIT(0, _AGENT_FILE_OP_INVALID, NULL);
        const char *op;
        int64_t depth;
        int r;

        if ((r = get_u64(obj, "id", &f.id)) < 0 ||
            (r = agent_get_string(obj, "op", &op)) < 0 ||
            (r = agent_get_string(obj, "path", &f.path)) < 0)
                return r;
        f.op = agent_file_op_from_string(op);
        if (f.op < 0 || !*f.path)
                return -EBADMSG;

        switch (f.op) {

        case AGENT_FILE_READ:
                if ((r = get_u64_opt(obj, "offset", &f.offset)) < 0 ||
                    (r = get_u64_opt(obj, "length", &f.length)) < 0 ||
                    (r = get_u64_opt(obj, "max", &f.max)) < 0)
                        return r;
                break;

        case AGENT_FILE_WRITE:
        case AGENT_FILE_MKDIR:
                if ((r = get_mode_opt(obj, "mode", &f.mode)) < 0 ||
                    (r = get_bool_opt(obj, "parents", &f.parents)) < 0 ||
                    (f.op == AGENT_FILE_WRITE && (r = get_bool_opt(obj, "append", &f.append)) < 0))
                        return r;
                break;

        case AGENT_FILE_LIST:
                if (json_object_object_get_ex(obj, "depth", NULL)) {
                        r = agent_get_int64(obj, "depth", &depth);
                        if (r < 0)
                                return r;
                        if (depth < 1 || depth > AGENT_FILE_DEPTH_MAX)
                                return -EBADMSG;
                        f.depth = (unsigned) depth;
                }
                break;

        case AGENT_FILE_REMOVE:
        case AGENT_FILE_WATCH:
                r = get_bool_opt(obj, "recursive", &f.recursive);
                if (r < 0)
                        return r;
                break;

        case AGENT_FILE_MOVE:
                r = agent_get_string(obj, "to", &f.to);
                if (r < 0)
                        return r;
                if (!*f.to)
                        return -EBADMSG;
                break;

        case AGENT_FILE_ARCHIVE:
        case AGENT_FILE_EXTRACT:
                if ((r = get_u64_opt(obj, "max", &f.max)) < 0 ||
                    (r = get_bool_opt(obj, "tmp", &f.tmp)) < 0)
                        return r;
                break;

        default:
                break;
        }

        *ret = f;
        return 0;
}

static const struct {
        mode_t type;
        const char *name;
        const char *description;   /* for messages */
} file_type_table[] = {
        { S_IFREG, "file", "regular file" },
        { S_IFDIR, "dir", "directory" },
        { S_IFLNK, "link", "symbolic link" },
        { S_IFIFO, "fifo", "FIFO" },
        { S_IFSOCK, "socket", "socket" },
        { S_IFCHR, "char", "character device" },
        { S_IFBLK, "block", "block device" },
};

const char *agent_file_type_describe(mode_t type) {
        for (size_t i = 0; i < ELEMENTSOF(file_type_table); i++)
                if (file_type_table[i].type == (type & S_IFMT))
                        return file_type_table[i].description;
        return "file of an unknown type";
}

const char *agent_file_type_to_string(mode_t type) {
        for (size_t i = 0; i < ELEMENTSOF(file_type_table); i++)
                if (file_type_table[i].type == (type & S_IFMT))
                        return file_type_table[i].name;
        return NULL;
}

mode_t agent_file_type_from_string(const char *s) {
        for (size_t i = 0; s && i < ELEMENTSOF(file_type_table); i++)
                if (streq(file_type_table[i].name, s))
                        return file_type_table[i].type;
        return 0;
}

static json_object *json_new_entry(const struct agent_file_entry *e) {
        _cleanup_json_ json_object *obj = json_object_new_object();
        const char *type = agent_file_type_to_string(e->type);

        if (!obj || !type || !e->path || e->mode > 07777 ||
            json_add(obj, "path", json_object_new_string(e->path)) < 0 ||
            json_add(obj, "type", json_object_new_string(type)) < 0 ||
            json_add_u64(obj, "size", e->size) < 0 ||
            json_add(obj, "mode", json_object_new_int64(e->mode)) < 0 ||
            json_add(obj, "mtime_usec", json_object_new_int64(e->mtime_usec)) < 0 ||
            (e->target && json_add(obj, "target", json_object_new_string(e->target)) < 0))
                return NULL;
        return TAKE_PTR(obj);
}

json_object *agent_msg_file_result(const struct agent_file_result *r) {
        _cleanup_json_ json_object *obj = agent_msg_new("file-result"), *entries = NULL;

        if (!obj || !r || r->error < 0 || r->error > 4095 ||
            json_add_u64(obj, "id", r->id) < 0 ||
            json_add(obj, "errno", json_object_new_int64(r->error)) < 0 ||
            (r->has_bytes && json_add_u64(obj, "bytes", r->bytes) < 0) ||
            (r->has_stat && json_add(obj, "stat", json_new_entry(&r->stat)) < 0) ||
            (r->not_regular != 0 &&
             json_add(obj, "not_regular", json_object_new_string(strempty(agent_file_type_to_string(r->not_regular)))) < 0))
                return NULL;

        if (r->has_entries) {
                entries = json_object_new_array_ext((int) MIN(r->n_entries, (size_t) INT_MAX));
                if (!entries)
                        return NULL;
                for (size_t i = 0; i < r->n_entries; i++) {
                        json_object *e = json_new_entry(r->entries + i);

                        if (!e)
                                return NULL;
                        if (json_object_array_add(entries, e) < 0) {
                                json_object_put(e);
                                return NULL;
                        }
                }
                if (json_add(obj, "entries", TAKE_PTR(entries)) < 0)
                        return NULL;
        }

        return TAKE_PTR(obj);
}

void agent_file_entry_done(struct agent_file_entry *e) {
        if (!e)
                return;
        e->path = mfree(e->path);
        e->target = mfree(e->target);
}

void agent_file_result_done(struct agent_file_result *r) {
        if (!r)
                return;
        agent_file_entry_done(&r->stat);
        for (size_t i = 0; i < r->n_entries; i++)
                agent_file_entry_done(r->entries + i);
        r->entries = mfree(r->entries);
        r->n_entries = 0;
        r->has_stat = r->has_entries = false;
}

static int parse_entry(json_object *obj, struct agent_file_entry *ret) {
        _cleanup_free_ char *path = NULL, *target = NULL;
        const char *p, *t, *type;
        int64_t mtime;
        uint64_t size;
        mode_t mode, ftype;
        int r;

        if (!json_object_is_type(obj, json_type_object))
                return -EBADMSG;
        if ((r = agent_get_string(obj, "path", &p)) < 0 ||
            (r = agent_get_string(obj, "type", &type)) < 0 ||
            (r = get_u64(obj, "size", &size)) < 0 ||
            (r = agent_get_int64(obj, "mtime_usec", &mtime)) < 0)
                return r;
        mode = (mode_t) -1;
        if ((r = get_mode_opt(obj, "mode", &mode)) < 0)
                return r;
        if (mode == (mode_t) -1)
                return -EBADMSG; /* missing */
        ftype = agent_file_type_from_string(type);
        if (ftype == 0)
                return -EBADMSG;
        if (json_object_object_get_ex(obj, "target", NULL)) {
                r = agent_get_string(obj, "target", &t);
                if (r < 0)
                        return r;
                target = strdup(t);
                if (!target)
                        return -ENOMEM;
        }
        path = strdup(p);
        if (!path)
                return -ENOMEM;

        *ret = (struct agent_file_entry) {
                .path = TAKE_PTR(path),
                .type = ftype,
                .mode = mode,
                .size = size,
                .mtime_usec = mtime,
                .target = TAKE_PTR(target),
        };
        return 0;
}

int agent_parse_file_result(json_object *obj, struct agent_file_result *ret) {
        _cleanup_(agent_file_result_done) struct agent_file_result res = {};
        json_object *v;
        int64_t error;
        int r;

        if ((r = get_u64(obj, "id", &res.id)) < 0 ||
            (r = agent_get_int64(obj, "errno", &error)) < 0)
                return r;
        if (error < 0 || error > 4095)
                return -EBADMSG;
        res.error = (int) error;

        if (json_object_object_get_ex(obj, "bytes", NULL)) {
                r = get_u64(obj, "bytes", &res.bytes);
                if (r < 0)
                        return r;
                res.has_bytes = true;
        }

        if (json_object_object_get_ex(obj, "not_regular", NULL)) {
                const char *t;

                r = agent_get_string(obj, "not_regular", &t);
                if (r < 0)
                        return r;
                /* A type this side has no name for is still not a regular file. */
                res.not_regular = agent_file_type_from_string(t) ?: S_IFMT;
        }

        if (json_object_object_get_ex(obj, "stat", &v)) {
                r = parse_entry(v, &res.stat);
                if (r < 0)
                        return r;
                res.has_stat = true;
        }

        if (json_object_object_get_ex(obj, "entries", &v)) {
                size_t n;

                if (!json_object_is_type(v, json_type_array))
                        return -EBADMSG;
                n = json_object_array_length(v);
                if (n > AGENT_FILE_ENTRIES_MAX)
                        return -EBADMSG;
                res.entries = calloc(MAX(n, (size_t) 1), sizeof(struct agent_file_entry));
                if (!res.entries)
                        return -ENOMEM;
                res.has_entries = true;
                for (size_t i = 0; i < n; i++) {
                        r = parse_entry(json_object_array_get_idx(v, i), res.entries + i);
                        if (r < 0)
                                return r;
                        res.n_entries++;
                }
        }

        *ret = res;
        res = (struct agent_file_result) {};
        return 0;
}
