/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <string.h>

#include "macro.h"
#include "sandbox-api.h"
#include "workspace-request.h"

const char workspace_interface_idl[] =
        "# sandboxd's privileged workspace operations (sandboxd-workspace(8)). Only sandboxd.service\n"
        "# may call. No path is taken: a workspace is named by its sandbox's id (16 lowercase hex\n"
        "# digits), a uid is one of sandboxd's sandbox uids, the pool is the service's own.\n"
        "interface io.sandboxd.Workspace\n"
        "\n"
        "# A new workspace: a subvolume of the pool, its qgroup limited to maxBytes, its work/\n"
        "# and tmp/ the uid's.\n"
        "method Create(id: string, uid: int, maxBytes: int) -> ()\n"
        "\n"
        "# id as a snapshot of from, its files given from fromUid to uid, limited to maxBytes.\n"
        "# Answered when done (the snapshot and the walk run in a child process).\n"
        "method Clone(from: string, id: string, fromUid: int, uid: int, maxBytes: int) -> ()\n"
        "\n"
        "# The workspace (an id, renamed out of the way first, or a removal's name) deleted,\n"
        "# and its qgroup; answered at once, the deletion runs in a child process.\n"
        "method Remove(id: string) -> ()\n"
        "\n"
        "# The workspace's old /dev/shm, trash (\".shm-trash-N-PID\" in its root, where sandboxd\n"
        "# renamed it as the sandbox started), removed; answered at once, the removal runs in a\n"
        "# child process (rm -r: no link followed, no other file system entered).\n"
        "method RemoveTrash(id: string, trash: string) -> ()\n"
        "\n"
        "# The operation failed with this errno.\n"
        "error Failed(errno: int)\n";

static bool hex_lower(char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool workspace_id_is_valid(const char *s) {
        size_t i;

        for (i = 0; s[i]; i++)
                if (i >= 16 || !hex_lower(s[i]))
                        return false;
        return i == 16;
}

/* 1 to 10 decimal digits at *p, advanced past them. */
static bool skip_digits(const char **p) {
        size_t n = strspn(*p, "0123456789");

        if (n < 1 || n > 10)
                return false;
        *p += n;
        return true;
}

bool workspace_removing_name_is_valid(const char *s) {
        char id[17];

        if (strncmp(s, WORKSPACE_REMOVING_PREFIX, strlen(WORKSPACE_REMOVING_PREFIX)) != 0)
                return false;
        s += strlen(WORKSPACE_REMOVING_PREFIX);
        if (strnlen(s, 17) < 17 || s[16] != '-')
                return false;
        memcpy(id, s, 16);
        id[16] = 0;
        if (!workspace_id_is_valid(id))
                return false;
        s += 17;
        if (!skip_digits(&s) || *s++ != '-' || !skip_digits(&s))
                return false;
        return *s == 0;
}

bool workspace_trash_name_is_valid(const char *s) {
        if (strncmp(s, WORKSPACE_TRASH_PREFIX, strlen(WORKSPACE_TRASH_PREFIX)) != 0)
                return false;
        s += strlen(WORKSPACE_TRASH_PREFIX);
        if (!skip_digits(&s) || *s++ != '-' || !skip_digits(&s))
                return false;
        return *s == 0;
}

bool workspace_uid_is_valid(uid_t uid_base, int64_t uid) {
        return uid >= (int64_t) uid_base && uid < (int64_t) uid_base + (int64_t) SANDBOX_UID_RANGE;
}

typedef enum Param {
        P_ID = 1 << 0,
        P_FROM = 1 << 1,
        P_UID = 1 << 2,
        P_FROM_UID = 1 << 3,
        P_MAX_BYTES = 1 << 4,
        P_TRASH = 1 << 5,
} Param;

static const struct {
        const char *name;
        Param p;
} params[] = {
        { "id", P_ID },
        { "from", P_FROM },
        { "uid", P_UID },
        { "fromUid", P_FROM_UID },
        { "maxBytes", P_MAX_BYTES },
        { "trash", P_TRASH },
};

static const Param method_params[] = {
        [WORKSPACE_CREATE] = P_ID | P_UID | P_MAX_BYTES,
        [WORKSPACE_CLONE] = P_FROM | P_ID | P_FROM_UID | P_UID | P_MAX_BYTES,
        [WORKSPACE_REMOVE] = P_ID,
        [WORKSPACE_REMOVE_TRASH] = P_ID | P_TRASH,
};

static bool param_valid(WorkspaceMethod m, Param p, json_object *v, uid_t uid_base, WorkspaceRequest *r) {
        const char *s;
        int64_t n;

        switch (p) {
        case P_ID:
        case P_FROM:
                if (!json_object_is_type(v, json_type_string))
                        return false;
                s = json_object_get_string(v);
                if (!workspace_id_is_valid(s) && !(p == P_ID && m == WORKSPACE_REMOVE && workspace_removing_name_is_valid(s)))
                        return false;
                strcpy(p == P_ID ? r->id : r->from, s);  /* at most 48 bytes, as checked */
                return true;
        case P_TRASH:
                if (!json_object_is_type(v, json_type_string) ||
                    !workspace_trash_name_is_valid(json_object_get_string(v)))
                        return false;
                strcpy(r->trash, json_object_get_string(v));  /* at most 33 bytes, as checked */
                return true;
        case P_UID:
        case P_FROM_UID:
        case P_MAX_BYTES:
                if (!json_object_is_type(v, json_type_int))
                        return false;
                errno = 0;
                n = json_object_get_int64(v);
                if (errno != 0)
                        return false;
                if (p == P_MAX_BYTES) {
                        if (n <= 0)
                                return false;
                        r->max_bytes = (uint64_t) n;
                        return true;
                }
                if (!workspace_uid_is_valid(uid_base, n))
                        return false;
                *(p == P_UID ? &r->uid : &r->from_uid) = (uid_t) n;
                return true;
        }
        return false;
}

int workspace_request_parse(WorkspaceMethod m, json_object *parameters, uid_t uid_base, WorkspaceRequest *ret,
                            const char **ret_parameter) {
        WorkspaceRequest r = {};
        Param want = method_params[m];

        /* Nothing but what the method takes: a "path" or any other key is refused by name. */
        json_object_object_foreach(parameters, key, value) {
                Param p = 0;
                (void) value;
                for (size_t i = 0; i < ELEMENTSOF(params); i++)
                        if (streq(key, params[i].name))
                                p = params[i].p;
                if (!(p & want)) {
                        *ret_parameter = key;
                        return -EINVAL;
                }
        }
        for (size_t i = 0; i < ELEMENTSOF(params); i++) {
                json_object *v;

                if (!(params[i].p & want))
                        continue;
                if (!json_object_object_get_ex(parameters, params[i].name, &v) ||
                    !param_valid(m, params[i].p, v, uid_base, &r)) {
                        *ret_parameter = params[i].name;
                        return -EINVAL;
                }
        }
        if (m == WORKSPACE_CLONE && streq(r.from, r.id)) {
                *ret_parameter = "id";
                return -EINVAL;
        }
        *ret = r;
        return 0;
}
