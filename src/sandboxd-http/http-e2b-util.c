/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The pure parts of the E2B front (http-e2b.c, docs/E2B.md): Connect's envelopes and error
 * codes, and E2B's home directory mapped onto the sandbox's workspace. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http-e2b.h"
#include "macro.h"
#include "sandbox-api.h"
#include "varlink.h"

int http_connect_envelope(uint8_t flags, json_object *message, char **ret, size_t *ret_size) {
        const char *s = json_object_to_json_string_ext(message, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        size_t n;
        char *b;

        if (!s)
                return -ENOMEM;
        n = strlen(s);
        if (n > UINT32_MAX)
                return -E2BIG;
        b = malloc(5 + n);
        if (!b)
                return -ENOMEM;
        b[0] = (char) flags;
        b[1] = (char) (n >> 24);
        b[2] = (char) (n >> 16);
        b[3] = (char) (n >> 8);
        b[4] = (char) n;
        memcpy(b + 5, s, n);
        *ret = b;
        *ret_size = 5 + n;
        return 0;
}

int http_connect_unwrap(const void *data, size_t size, json_object **ret, const char **ret_error) {
        const uint8_t *d = data;
        uint32_t n;

        if (size < 5) {
                *ret_error = "A Connect streaming request is one enveloped message (5 bytes of header first).";
                return -EBADMSG;
        }
        if (d[0] != 0) {
                *ret_error = "Only an uncompressed message, not the end of a stream, is taken here.";
                return -EBADMSG;
        }
        n = (uint32_t) d[1] << 24 | (uint32_t) d[2] << 16 | (uint32_t) d[3] << 8 | d[4];
        if (n != size - 5) {
                *ret_error = "The envelope's length is not the message's.";
                return -EBADMSG;
        }
        *ret = http_json_parse((const char *) d + 5, n, ret_error);
        return *ret ? 0 : -EBADMSG;
}

static const char *code_from_errno(int e) {
        switch (e) {
        case ENOENT: case ENOTDIR: case ENXIO:
                return "not_found";
        case EEXIST:
                return "already_exists";
        case EACCES: case EPERM: case EROFS:
                return "permission_denied";
        case EINVAL: case ENAMETOOLONG: case ELOOP: case EISDIR: case ENOTEMPTY: case EXDEV:
                return "invalid_argument";
        case ENOSPC: case EDQUOT: case EFBIG:
                return "resource_exhausted";
        default:
                return "internal";
        }
}

const char *http_connect_code(const char *error, json_object *parameters) {
        static const struct {
                const char *name, *code;
        } table[] = {
                /* E2B's SDK reads "unavailable" as: the sandbox is gone (its timeout) */
                { "NoSuchSandbox",    "unavailable" },
                { "NotRunning",       "unavailable" },
                { "NoSuchProcess",    "not_found" },
                { "NoSuchTemplate",   "not_found" },
                { "NoSuchSnapshot",   "not_found" },
                { "InvalidOption",    "invalid_argument" },
                { "NotRegularFile",   "invalid_argument" },
                { "StillRunning",     "failed_precondition" },
                { "Busy",             "resource_exhausted" },
                { "TooManySandboxes", "resource_exhausted" },
                { "QuotaExceeded",    "resource_exhausted" },
                { "FileTooLarge",     "resource_exhausted" },
                { "SnapshotTooLarge", "resource_exhausted" },
                { "SandboxExists",    "already_exists" },
                { "AccessDenied",     "permission_denied" },
                { "InteractiveAuthorizationRequired", "permission_denied" },
                { "NotSupported",     "unimplemented" },
                { "NoReply",          "deadline_exceeded" },
        };
        const char *dot;
        json_object *e;

        if (!error)
                return NULL;
        if (streq(error, VARLINK_ERROR_DISCONNECTED))
                return "unavailable";
        dot = strrchr(error, '.');
        dot = dot ? dot + 1 : error;
        if (streq(dot, "SystemError")) {
                if (parameters && json_object_object_get_ex(parameters, "errno", &e))
                        return code_from_errno(json_object_get_int(e));
                return "internal";
        }
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(dot, table[i].name))
                        return table[i].code;
        return "internal";
}

unsigned http_connect_status(const char *code) {
        /* connectrpc.com/docs/protocol: the HTTP status of a unary call's error */
        static const struct {
                const char *code;
                unsigned status;
        } table[] = {
                { "canceled", 499 },           { "unknown", 500 },
                { "invalid_argument", 400 },   { "deadline_exceeded", 504 },
                { "not_found", 404 },          { "already_exists", 409 },
                { "permission_denied", 403 },  { "resource_exhausted", 429 },
                { "failed_precondition", 400 }, { "aborted", 409 },
                { "out_of_range", 400 },       { "unimplemented", 501 },
                { "internal", 500 },           { "unavailable", 503 },
                { "data_loss", 500 },          { "unauthenticated", 401 },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(code, table[i].code))
                        return table[i].status;
        return 500;
}

/* The rest of path after prefix when path is prefix or below it, else NULL. */
static const char *under(const char *path, const char *prefix) {
        size_t n = strlen(prefix);

        if (strncmp(path, prefix, n) != 0 || (path[n] != 0 && path[n] != '/'))
                return NULL;
        return path + n;
}

int http_e2b_path_in(const char *path, char **ret) {
        const char *rest;
        char *p;

        if (!path || !*path)
                p = strdup(E2B_WORKDIR);
        else if ((rest = under(path, E2B_HOME)) || (rest = under(path, "~"))) {
                if (asprintf(&p, "%s%s", E2B_WORKDIR, rest) < 0)
                        p = NULL;
        } else
                p = strdup(path);
        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

int http_e2b_path_out(const char *path, char **ret) {
        const char *rest = under(path, E2B_WORKDIR);
        char *p;
        int r = 0;

        if (rest)
                r = asprintf(&p, "%s%s", E2B_HOME, rest);
        else if (path[0] != '/')
                r = asprintf(&p, "%s%s%s", E2B_HOME, *path ? "/" : "", path);
        else
                p = strdup(path);
        if (r < 0 || !p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

const char *http_e2b_watch_type(const char *ours) {
        static const char *const table[][2] = {
                { "create",    "EVENT_TYPE_CREATE" },
                { "modify",    "EVENT_TYPE_WRITE" },
                { "delete",    "EVENT_TYPE_REMOVE" },
                { "move_from", "EVENT_TYPE_RENAME" },
                { "move_to",   "EVENT_TYPE_CREATE" },
        };

        for (size_t i = 0; ours && i < ELEMENTSOF(table); i++)
                if (strcmp(ours, table[i][0]) == 0)
                        return table[i][1];
        return NULL;
}

const char *http_e2b_watch_name(const char *path, const char *dir) {
        size_t n = strlen(dir);
        const char *rest;

        while (n > 1 && dir[n - 1] == '/')
                n--;
        if (strncmp(path, dir, n) != 0)
                return NULL;
        rest = path + n;
        if (n == 1 && dir[0] == '/')
                return *rest ? rest : NULL;
        if (*rest != '/' || !rest[1])
                return NULL;
        return rest + 1;
}
