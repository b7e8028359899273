/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * sandbox-init --renew-server: started once by sandboxd (as root, outside any sandbox; at
 * its first recycling reset, again if it dies: src/core/mount-renew.c), it renews the
 * mounts of recycled sandboxes (src/core/recycle.c): fresh, empty tmpfs mounts in place of
 * a sandbox's writable ones. Its stdin is a SOCK_SEQPACKET socket to sandboxd; each request
 * is one message,
 *
 *     renew ID PID:UID:GID PATH=SIZE:MODE...     (the sandbox whose PID 1 is host PID)
 *     cancel ID                                  (that request's child is killed)
 *
 * and for each it fork()s a child (we are small and stay so: the fork copies little, and
 * saves sandboxd an exec and a program's start per reset) that does the work and exits;
 * nothing of one request is left in the server for the next (the children enter the
 * sandboxes' namespaces, we never do). The child says "ok ID" once the new mounts are in
 * place, and we say "exit ID STATUS" when it ended (0, the errno of the step that failed,
 * EINTR if killed). EOF from sandboxd ends us.
 *
 * The child drops to the sandbox's host uid first: as the owner of the sandbox's user
 * namespace it has every capability in it - enough to enter its mount namespace (through
 * the user namespace that owns it: the agent's own may be a nested one without rights over
 * its mounts), unmount and mount there - and none outside it, so nothing of sandboxd's
 * unit (which grants no CAP_SYS_ADMIN) is needed. Each new tmpfs gets the old one's owner
 * and the mode sandboxd gives (MODE, octal: what bwrap made it with, not what the last
 * user may have chmod()ed it to), nosuid,nodev; the old one is detached, and its memory
 * freed as soon as nothing holds it (the agent left it: "reset"). Then the POSIX message
 * queues of the sandbox's IPC namespace are removed (its System V IPC objects are the
 * agent's to remove; these only a mount shows). It says "ok" once all is done: the old
 * file systems, held until it exits, are freed by its exit, which takes RCU grace periods
 * that sandboxd need not wait for.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

/* Removes every entry of the directory fd (closed). 0 or an errno. */
static int unlink_all(int fd) {
        struct dirent *de;
        DIR *d;
        int r = 0;

        d = fdopendir(fd);
        if (!d) {
                r = errno;
                close(fd);
                return r;
        }
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

/* POSIX message queues live in the IPC namespace, in no file system the sandbox has: an
 * mqueue file system of that namespace shows them, and each is removed. It is made with
 * the mount API as a detached mount, attached nowhere (so no copy of the sandbox's mount
 * namespace is needed to keep it out of the sandbox's sight); a kernel without that API
 * gets one over where, a mount just renewed, in a private copy of the mount namespace.
 * 0 or an errno. */
static int clear_mqueues(int ipc_fd, const char *where) {
        int fs_fd, mnt_fd, r;

        if (setns(ipc_fd, CLONE_NEWIPC) < 0)
                return errno;
        fs_fd = fsopen("mqueue", FSOPEN_CLOEXEC);
        if (fs_fd >= 0) {
                if (fsconfig(fs_fd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
                        r = errno;
                        close(fs_fd);
                        return r;
                }
                mnt_fd = fsmount(fs_fd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
                r = errno;
                close(fs_fd);
                if (mnt_fd < 0)
                        return r;
                /* An O_PATH descriptor: its root, opened to be read. mnt_fd stays open
                 * until we exit: the last close of a detached mount unmounts it, which
                 * waits for an RCU grace period, as the old tmpfs's would. */
                fs_fd = openat(mnt_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fs_fd < 0)
                        return errno;
                return unlink_all(fs_fd);
        }
        if (errno != ENOSYS)
                return errno == ENODEV ? 0 : errno; /* ENODEV: a kernel without them */
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return errno;
        if (mount("mqueue", where, "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
                return errno == ENODEV ? 0 : errno;
        r = open(where, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (r < 0)
                return errno;
        return unlink_all(r);
}

static int fail(const char *what, int error) {
        fprintf(stderr, "sandbox-init --renew-server: %s: %s\n", what, strerror(error));
        return error;
}

/* In the child: renews the mounts of TARGET (PID:UID:GID) as MOUNTS (PATH=SIZE:MODE,
 * NULL-terminated) say. 0, or the errno of the step that failed (said on stderr). */
static int renew_mounts(const char *target, char **mounts) {
        unsigned pid, uid, gid;
        char path[64], end;
        int mnt_fd, root_fd, userns_fd, ipc_fd, r;

        /* Never root's ids: as root, the namespaces below would be any process's. */
        if (sscanf(target, "%u:%u:%u%c", &pid, &uid, &gid, &end) != 3 || pid == 0 || uid == 0 || gid == 0 ||
            !mounts[0])
                return fail("usage: renew ID PID:UID:GID PATH=SIZE:MODE...", EINVAL);
        if (syscall(SYS_setgroups, 0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                return fail("dropping privileges", errno);
        /* Not ours to be traced or read by the sandbox's uid, whatever fs.suid_dumpable is:
         * we hold its old mounts and our socket to sandboxd. */
        if (prctl(PR_SET_DUMPABLE, 0) < 0)
                return fail("PR_SET_DUMPABLE", errno);

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
        /* Last: it may leave the sandbox's mount namespace for a copy of it. */
        r = clear_mqueues(ipc_fd, mounts[0]);
        if (r != 0)
                return fail("removing the POSIX message queues", r);
        return 0;
}

#define RENEW_REQUEST_MAX 1024
#define RENEW_ARGS_MAX 8

typedef struct RenewChild {
        pid_t pid;
        uint64_t id;
} RenewChild;

static RenewChild *children;
static size_t n_children, n_allocated;

/* "ok ID" (status < 0) or "exit ID STATUS" to sandboxd. 0 or -errno. */
static int send_report(uint64_t id, int status) {
        char buf[64];
        int n;

        if (status < 0)
                n = snprintf(buf, sizeof(buf), "ok %" PRIu64, id);
        else
                n = snprintf(buf, sizeof(buf), "exit %" PRIu64 " %d", id, status);
        return send(STDIN_FILENO, buf, (size_t) n, MSG_NOSIGNAL) == n ? 0 : -errno;
}

/* The child of one request: it has nothing of ours but the socket (to say "ok" on) and
 * stderr; no signal blocked, none caught. Exits. */
_noreturn_ static void renew_child(uint64_t id, char **args, int signal_fd) {
        sigset_t none;
        int r;

        close(signal_fd);
        /* Told apart from the server and the agents in ps and perf. */
        (void) prctl(PR_SET_NAME, "sandbox-renew");
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
        r = renew_mounts(args[0], args + 1);
        if (r == 0 && send_report(id, -1) < 0)
                r = fail("reporting", errno);
        /* The old file systems we hold are freed now, after sandboxd heard "ok". */
        _exit(r);
}

static void renew_request(char *req, int signal_fd) {
        char *args[RENEW_ARGS_MAX + 1], *save = NULL, *verb, *e;
        size_t n = 0;
        uint64_t id;
        pid_t pid;

        verb = strtok_r(req, " \n", &save);
        e = strtok_r(NULL, " \n", &save);
        if (!verb || !e)
                goto bad;
        errno = 0;
        id = strtoull(e, &e, 10);
        if (errno != 0 || *e)
                goto bad;
        while (n < RENEW_ARGS_MAX && (args[n] = strtok_r(NULL, " \n", &save)))
                n++;
        args[n] = NULL;

        if (strcmp(verb, "cancel") == 0) {
                for (size_t i = 0; i < n_children; i++)
                        if (children[i].id == id)
                                (void) kill(children[i].pid, SIGKILL);
                return;
        }
        if (strcmp(verb, "renew") != 0 || n < 2 || n == RENEW_ARGS_MAX)
                goto bad;
        if (n_children == n_allocated) {
                size_t k = n_allocated ? n_allocated * 2 : 16;
                RenewChild *c = realloc(children, k * sizeof(RenewChild));

                if (!c) {
                        (void) send_report(id, ENOMEM);
                        return;
                }
                children = c;
                n_allocated = k;
        }
        pid = fork();
        if (pid < 0) {
                (void) send_report(id, fail("fork", errno));
                return;
        }
        if (pid == 0)
                renew_child(id, args, signal_fd);
        children[n_children++] = (RenewChild) { .pid = pid, .id = id };
        return;
bad:
        fprintf(stderr, "sandbox-init --renew-server: malformed request ignored.\n");
}

static void renew_reap(void) {
        int status;
        pid_t pid;

        while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
                for (size_t i = 0; i < n_children; i++) {
                        if (children[i].pid != pid)
                                continue;
                        (void) send_report(children[i].id,
                                         WIFEXITED(status) ? WEXITSTATUS(status) : EINTR);
                        children[i] = children[--n_children];
                        break;
                }
}

int agent_renew_server(void) {
        char req[RENEW_REQUEST_MAX];
        sigset_t chld;
        int sfd;

        /* Ours stays small: every request forks it. */
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &chld, NULL) < 0)
                return fail("sigprocmask", errno);
        sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
        if (sfd < 0)
                return fail("signalfd", errno);

        for (;;) {
                struct pollfd p[2] = { { .fd = STDIN_FILENO, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
                struct signalfd_siginfo si;
                ssize_t n;

                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return fail("poll", errno);
                }
                if (p[1].revents) {
                        while (read(sfd, &si, sizeof(si)) == sizeof(si))
                                ;
                        renew_reap();
                }
                if (!p[0].revents)
                        continue;
                n = recv(STDIN_FILENO, req, sizeof(req) - 1, MSG_TRUNC);
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (n <= 0)
                        return n < 0 ? fail("recv", errno) : 0; /* sandboxd went away */
                if ((size_t) n >= sizeof(req)) {
                        fprintf(stderr, "sandbox-init --renew-server: oversized request ignored.\n");
                        continue;
                }
                req[n] = '\0';
                renew_request(req, sfd);
        }
}
