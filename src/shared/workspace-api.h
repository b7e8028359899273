/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * io.sandboxd.Workspace: what sandboxd asks of sandboxd-workspace(8), the small privileged
 * service that makes, limits and removes workspaces, so that sandboxd itself holds
 * neither CAP_SYS_ADMIN nor CAP_CHOWN nor CAP_DAC_READ_SEARCH (docs/WORKSPACES.md,
 * "Capabilities"). The interface description is src/sandboxd-workspace/workspace-request.c's.
 */

#define WORKSPACE_INTERFACE          "io.sandboxd.Workspace"
#define WORKSPACE_METHOD_CREATE      WORKSPACE_INTERFACE ".Create"
#define WORKSPACE_METHOD_CLONE       WORKSPACE_INTERFACE ".Clone"
#define WORKSPACE_METHOD_REMOVE      WORKSPACE_INTERFACE ".Remove"
#define WORKSPACE_METHOD_REMOVE_TRASH WORKSPACE_INTERFACE ".RemoveTrash"
/* {"errno": N}: the call failed with that errno (positive). */
#define WORKSPACE_ERROR_FAILED       WORKSPACE_INTERFACE ".Failed"

/* What a removal renames a workspace to first: ".removing-ID-N-PID". Never a sandbox id. */
#define WORKSPACE_REMOVING_PREFIX    ".removing-"
/* What a sandbox's old /dev/shm (its workspace's shm/, not empty) is renamed to as the
 * sandbox starts, in the workspace's root: ".shm-trash-N-PID", removed by RemoveTrash
 * off the start path (docs/WORKSPACES.md, "/dev/shm"). */
#define WORKSPACE_TRASH_PREFIX       ".shm-trash-"
/* A workspace id (16 lowercase hex digits) or a removal's name, with room for its NUL. */
#define WORKSPACE_NAME_MAX           64
