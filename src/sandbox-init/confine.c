/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What bwrap does for a bwrap sandbox, done by the agent itself where nobody else can: in
 * a Docker container. dockerd gives a container a user namespace only when it remaps every
 * container on the host (userns-remap); so the container runs as the sandbox's own host
 * uid, and the agent maps that uid to the sandbox user in a namespace of its own before
 * anything of the sandbox runs, then loads the seccomp policy as bwrap does (--seccomp). */

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox-init.h"

static int write_string(const char *path, const char *s) {
        _cleanup_close_ int fd = -EBADF;
        size_t n = strlen(s);

        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (write(fd, s, n) != (ssize_t) n)
                return errno > 0 ? -errno : -EIO;
        return 0;
}

/* No capability is left: not in the bounding set, not in any of ours. The new namespace
 * gave us all of them (over what it owns: nothing but the sandbox uid's files). */
static int drop_capabilities(void) {
        struct __user_cap_header_struct header = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};

        for (unsigned long cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
                        return -errno;
        if (syscall(SYS_capset, &header, data) < 0)
                return -errno;
        return 0;
}

int agent_enter_user_namespace(uid_t uid, gid_t gid) {
        uid_t outer_uid = getuid();
        gid_t outer_gid = getgid();
        char map[64];
        int r;

        if (unshare(CLONE_NEWUSER) < 0)
                return errno;
        /* An unprivileged process may map only its own ids, and its gid only once it gave
         * up setgroups(2) (which would otherwise drop groups it is refused by). */
        r = write_string("/proc/self/setgroups", "deny");
        if (r < 0)
                return r;
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned) uid, (unsigned) outer_uid);
        r = write_string("/proc/self/uid_map", map);
        if (r < 0)
                return r;
        snprintf(map, sizeof(map), "%u %u 1\n", (unsigned) gid, (unsigned) outer_gid);
        r = write_string("/proc/self/gid_map", map);
        if (r < 0)
                return r;
        return drop_capabilities();
}

int agent_load_seccomp(const char *path) {
        /* One instruction more than a filter may have, to tell a full one from a longer. */
        static struct sock_filter filter[BPF_MAXINSNS + 1];
        _cleanup_close_ int fd = -EBADF;
        size_t size = 0;
        ssize_t n;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        while (size < sizeof(filter)) {
                n = read(fd, (char *) filter + size, sizeof(filter) - size);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                size += (size_t) n;
        }
        if (size > BPF_MAXINSNS * sizeof(struct sock_filter))
                return -E2BIG;
        if (size == 0 || size % sizeof(struct sock_filter) != 0)
                return -EBADMSG;

        struct sock_fprog prog = {
                .len = (unsigned short) (size / sizeof(struct sock_filter)),
                .filter = filter,
        };
        /* Docker set no_new_privs already; without it the kernel refuses the filter. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
                return -errno;
        return 0;
}
