/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The few btrfs calls that both sandboxd (workspace.c: reading a workspace's bytes) and
 * sandboxd-workspace (making, limiting and removing workspaces) make. docs/WORKSPACES.md.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

bool btrfs_is_dir_fd(int fd);
/* "/sys/fs/btrfs/FSID/qgroups" of the file system fd is on. */
int btrfs_qgroups_dir(int fd, char *ret, size_t size);
/* Quotas that are inconsistent hold no limit: a rescan of the file system of fd (whose
 * qgroups directory is qgroups) started if they are (CAP_SYS_ADMIN). */
int btrfs_quota_check(int fd, const char *qgroups);
/* The subvolume id (= its level-0 qgroup's id) of the subvolume whose root fd is. */
int btrfs_subvol_id(int fd, uint64_t *ret);
/* max_rfer of qgroup 0/subvol_id, on the file system of fd (CAP_SYS_ADMIN). */
int btrfs_qgroup_limit(int fd, uint64_t subvol_id, uint64_t max_bytes);
