/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What sandboxd-workspace accepts (sandboxd-workspace(8)): no path, only names it checks
 * here. A workspace is named by its sandbox's id, 16 lowercase hex digits; Remove also
 * takes a removal's own name, ".removing-ID-N-PID"; RemoveTrash a workspace's id and the
 * name of an old shm/ in its root, ".shm-trash-N-PID". A uid is one of sandboxd's sandbox uids
 * (uid_base … uid_base+65535). Every path the service touches is its pool directory's.
 */

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "workspace-api.h"

extern const char workspace_interface_idl[];

typedef enum WorkspaceMethod {
        WORKSPACE_CREATE,
        WORKSPACE_CLONE,
        WORKSPACE_REMOVE,
        WORKSPACE_REMOVE_TRASH,
} WorkspaceMethod;

typedef struct WorkspaceRequest {
        char id[WORKSPACE_NAME_MAX];    /* Remove: an id or a removal's name */
        char from[WORKSPACE_NAME_MAX];  /* Clone */
        char trash[WORKSPACE_NAME_MAX]; /* RemoveTrash */
        uid_t uid, from_uid;            /* Create, Clone */
        uint64_t max_bytes;             /* Create, Clone */
} WorkspaceRequest;

bool workspace_id_is_valid(const char *s);
/* ".removing-" ID "-" N "-" PID, N and PID decimal (1 to 10 digits). */
bool workspace_removing_name_is_valid(const char *s);
/* ".shm-trash-" N "-" PID, N and PID decimal (1 to 10 digits): a workspace's old shm/. */
bool workspace_trash_name_is_valid(const char *s);
bool workspace_uid_is_valid(uid_t uid_base, int64_t uid);

/* The parameters of a call of method m, checked: every parameter the method takes is
 * there, of its type and valid, and there is no other. 0, or -EINVAL with
 * *ret_parameter the name of the first refused one (static, or the key itself: valid
 * while parameters lives). */
int workspace_request_parse(WorkspaceMethod m, json_object *parameters, uid_t uid_base, WorkspaceRequest *ret,
                            const char **ret_parameter);
