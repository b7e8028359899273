/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * sandbox-init --renew-mounts PID:UID:GID PATH=SIZE:MODE…: run by sandboxd (as root, outside
 * any sandbox) when it recycles a sandbox (src/core/recycle.c): fresh, empty tmpfs mounts
 * in place of the sandbox's writable ones. We drop to the sandbox's host uid first: as the
 * owner of the sandbox's user namespace we have every capability in it - enough to enter
 * its mount namespace (through the user namespace that owns it: the agent's own may be a
 * nested one without rights over its mounts), unmount and mount there - and none outside
 * it, so nothing of sandboxd's unit (which grants no CAP_SYS_ADMIN) is needed. Each new
 * tmpfs gets the old one's owner and the mode sandboxd gives (MODE, octal: what bwrap made
 * it with, not what the last user may have chmod()ed it to), nosuid,nodev; the old one is
 * detached, and its memory freed as soon as nothing holds it (the agent left it: "reset").
 * Then the POSIX message queues of the sandbox's IPC namespace are removed (its System V
 * IPC objects are the agent's to remove; these only a mount shows). Says "ok" on stdout
 * once all is done: the old file systems, held until we exit, are freed by our exit,
 * which takes RCU grace periods that sandboxd need not wait for. Exits 0, or with the
 * errno of the step that failed.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox-init.h"

static int renew_one(const char *path, uint64_t size, unsigned mode) {
        char opts[128];
        struct stat st;

        /* The owner as this user namespace sees it: what bwrap made (the sandbox can
         * chown to no other). The mode is sandboxd's: the sandbox can chmod. */
        if (lstat(path, &st) < 0)
                return errno;
        if (!S_ISDIR(st.st_mode))
                return ENOTDIR;
        snprintf(opts, sizeof(opts), "size=%" PRIu64 ",mode=%o,uid=%u,gid=%u", size, mode, (unsigned) st.st_uid,
                 (unsigned) st.st_gid);
        /* Held until we exit: the old file system is then freed after we said we are done
         * (a tmpfs's teardown waits for RCU grace periods, milliseconds each). */
        if (open(path, O_PATH | O_DIRECTORY | O_CLOEXEC) < 0)
                return errno;
        if (umount2(path, MNT_DETACH) < 0)
                return errno;
        if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
                return errno;
        return 0;
}

/* POSIX message queues live in the IPC namespace, in no file system the sandbox has: an
 * mqueue file system of that namespace, mounted in a private copy of the mount namespace
 * (over where, a mount just renewed), shows them, and each is removed. 0 or an errno. */
static int clear_mqueues(int ipc_fd, const char *where) {
        struct dirent *de;
        DIR *d;
        int r = 0;

        if (setns(ipc_fd, CLONE_NEWIPC) < 0 || unshare(CLONE_NEWNS) < 0 ||
            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return errno;
        if (mount("mqueue", where, "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return errno == ENODEV ? 0 : errno; /* a kernel without them */
        d = opendir(where);
        if (!d)
                return errno;
        while ((errno = 0, de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
                    unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT) {
                        r = errno;
                        break;
                }
        if (!de && errno != 0)
                r = errno;
        closedir(d);
        return r;
}

static int fail(const char *what, int error) {
        fprintf(stderr, "sandbox-init --renew-mounts: %s: %s\n", what, strerror(error));
        return error;
}

int agent_renew_mounts(const char *target, char **mounts) {
        unsigned pid, uid, gid;
        char path[64], end;
        int mnt_fd, root_fd, userns_fd, ipc_fd, r;

        if (sscanf(target, "%u:%u:%u%c", &pid, &uid, &gid, &end) != 3 || pid == 0 || !mounts[0])
                return fail("usage: --renew-mounts PID:UID:GID PATH=SIZE:MODE...", EINVAL);
        if (syscall(SYS_setgroups, 0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                return fail("dropping privileges", errno);

        snprintf(path, sizeof(path), "/proc/%u/ns/mnt", pid);
        mnt_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (mnt_fd < 0)
                return fail(path, errno);
        snprintf(path, sizeof(path), "/proc/%u/root", pid);
        root_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return fail(path, errno);
        snprintf(path, sizeof(path), "/proc/%u/ns/ipc", pid);
        ipc_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (ipc_fd < 0)
                return fail(path, errno);
        userns_fd = ioctl(mnt_fd, NS_GET_USERNS);
        if (userns_fd < 0)
                return fail("NS_GET_USERNS", errno);
        if (setns(userns_fd, CLONE_NEWUSER) < 0)
                return fail("entering the user namespace", errno);
        if (setns(mnt_fd, CLONE_NEWNS) < 0)
                return fail("entering the mount namespace", errno);
        /* setns() put us at the namespace's root; the sandbox's is where bwrap pivoted. */
        if (fchdir(root_fd) < 0 || chroot(".") < 0 || chdir("/") < 0)
                return fail("chroot", errno);

        for (char **m = mounts; *m; m++) {
                char *eq = strrchr(*m, '='), *e;
                unsigned long long size, mode;

                if (!eq || eq == *m || (*m)[0] != '/')
                        return fail(*m, EINVAL);
                *eq = '\0';
                errno = 0;
                size = strtoull(eq + 1, &e, 10);
                if (errno != 0 || *e != ':' || size == 0)
                        return fail(*m, EINVAL);
                mode = strtoull(e + 1, &e, 8);
                if (errno != 0 || *e || e[-1] == ':' || mode > 07777)
                        return fail(*m, EINVAL);
                r = renew_one(*m, size, (unsigned) mode);
                if (r != 0)
                        return fail(*m, r);
        }
        /* Last: it leaves the sandbox's mount namespace for a copy of our own. */
        r = clear_mqueues(ipc_fd, mounts[0]);
        if (r != 0)
                return fail("removing the POSIX message queues", r);

        /* Done, as far as the sandbox goes: sandboxd may hand it out now, while our exit
         * frees the old file systems we still hold. */
        if (write(STDOUT_FILENO, "ok\n", 3) != 3)
                return fail("reporting", errno == 0 ? EIO : errno);
        return 0;
}
