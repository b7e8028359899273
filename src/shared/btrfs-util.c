/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <linux/magic.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>

#include "btrfs-util.h"
#include "fd-util.h"
#include "log.h"

bool btrfs_is_dir_fd(int fd) {
        struct statfs sf;

        return fstatfs(fd, &sf) >= 0 && (uint64_t) sf.f_type == (uint64_t) BTRFS_SUPER_MAGIC;
}

int btrfs_qgroups_dir(int fd, char *ret, size_t size) {
        struct btrfs_ioctl_fs_info_args info = {};
        char uuid[37];
        const uint8_t *u = info.fsid;

        if (ioctl(fd, BTRFS_IOC_FS_INFO, &info) < 0)
                return -errno;
        snprintf(uuid, sizeof(uuid), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
        snprintf(ret, size, "/sys/fs/btrfs/%s/qgroups", uuid);
        return 0;
}

int btrfs_quota_check(int fd, const char *qgroups) {
        struct btrfs_ioctl_quota_rescan_args args = {};
        char path[192], buf[8];
        ssize_t n;

        snprintf(path, sizeof(path), "%s/inconsistent", qgroups);
        n = read_small_file_at(AT_FDCWD, path, buf, sizeof(buf) - 1);
        if (n <= 0 || buf[0] != '1')
                return 0;
        if (ioctl(fd, BTRFS_IOC_QUOTA_RESCAN, &args) < 0 && errno != EINPROGRESS)
                return log_warning_errno(errno, "The workspace pool's quotas are inconsistent (limits do not "
                                         "hold) and a rescan failed to start: %m");
        log_warning("The workspace pool's quotas were inconsistent (limits did not hold): rescanning.");
        return 0;
}

int btrfs_subvol_id(int fd, uint64_t *ret) {
        struct btrfs_ioctl_ino_lookup_args args = { .objectid = BTRFS_FIRST_FREE_OBJECTID };

        if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &args) < 0)
                return -errno;
        *ret = args.treeid;
        return 0;
}

int btrfs_qgroup_limit(int fd, uint64_t subvol_id, uint64_t max_bytes) {
        struct btrfs_ioctl_qgroup_limit_args args = {
                .qgroupid = subvol_id,
                .lim = { .flags = BTRFS_QGROUP_LIMIT_MAX_RFER, .max_rfer = max_bytes },
        };

        return ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &args) < 0 ? -errno : 0;
}
