/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <grp.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "agent-protocol.h"
#include "options.h"
#include "payload.h"
#include "strv.h"
#include "template.h"

/* Where the agent appears inside the sandbox. */
#define SANDBOX_AGENT_INSIDE "/run/sandbox-init"

int bwrap_build_argv(const PayloadParams *p, char ***ret) {
        _cleanup_strv_free_ char **a = NULL;
        char disk[32];
        int r = 0;

        snprintf(disk, sizeof(disk), "%" PRIu64, p->disk_max);

#define ARG(s)                                                  \
        do {                                                    \
                if (r >= 0)                                     \
                        r = strv_extend(&a, (s));               \
        } while (0)

        ARG(p->bwrap_path);
        /* Every namespace, and no way to make more user namespaces inside. */
        ARG("--unshare-all");
        ARG("--unshare-user");
        ARG("--disable-userns");
        ARG("--uid"); ARG("1000");
        ARG("--gid"); ARG("1000");
        ARG("--hostname"); ARG("sandbox");
        ARG("--cap-drop"); ARG("ALL");
        ARG("--new-session");
        ARG("--die-with-parent");
        ARG("--as-pid-1");
        ARG("--clearenv");

        for (char * const *b = p->template->ro_binds; b && *b; b++) {
                ARG("--ro-bind-try"); ARG(*b); ARG(*b);
        }
        ARG("--proc"); ARG("/proc");
        for (char * const *m = p->proc_masks; m && *m; m++) {
                ARG("--ro-bind"); ARG("/dev/null"); ARG(*m);
        }
        for (char * const *m = p->proc_mask_dirs; m && *m; m++) {
                ARG("--tmpfs"); ARG(*m);
                ARG("--remount-ro"); ARG(*m);
        }
        ARG("--dev"); ARG("/dev");
        /* The work directory lives as long as the sandbox, and nowhere on the host. */
        ARG("--size"); ARG(disk); ARG("--perms"); ARG("0700"); ARG("--tmpfs"); ARG(SANDBOX_WORKDIR);
        ARG("--size"); ARG(disk); ARG("--tmpfs"); ARG("/tmp");
        ARG("--ro-bind"); ARG(p->agent_path); ARG(SANDBOX_AGENT_INSIDE);
        ARG("--remount-ro"); ARG("/");
        ARG("--chdir"); ARG(SANDBOX_WORKDIR);
        ARG("--");
        ARG(SANDBOX_AGENT_INSIDE);
#undef ARG
        if (r < 0)
                return r;

        *ret = TAKE_PTR(a);
        return 0;
}

/* Like the masks of container runtimes: kernel and hardware details of the host that
 * procfs shows in every PID namespace. Masked only where they exist on this kernel. */
static const char * const proc_mask_candidates[] = {
        "/proc/kcore", "/proc/keys", "/proc/key-users", "/proc/timer_list", "/proc/timer_stats",
        "/proc/sched_debug", "/proc/latency_stats", "/proc/kallsyms", "/proc/config.gz",
        "/proc/kpagecount", "/proc/kpageflags", "/proc/kpagecgroup", "/proc/iomem", "/proc/ioports",
        "/proc/vmallocinfo", "/proc/slabinfo", "/proc/mtrr", "/proc/sysrq-trigger", "/proc/modules",
        "/proc/buddyinfo", "/proc/pagetypeinfo", "/proc/zoneinfo",
};
static const char * const proc_mask_dir_candidates[] = {
        "/proc/acpi", "/proc/scsi", "/proc/asound", "/proc/bus", "/proc/driver", "/proc/fs", "/proc/irq",
        "/proc/tty", "/proc/sysvipc",
};

int bwrap_find_proc_masks(char ***ret_files, char ***ret_dirs) {
        _cleanup_strv_free_ char **files = NULL, **dirs = NULL;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(proc_mask_candidates); i++)
                if (access(proc_mask_candidates[i], F_OK) >= 0) {
                        r = strv_extend(&files, proc_mask_candidates[i]);
                        if (r < 0)
                                return r;
                }
        for (size_t i = 0; i < ELEMENTSOF(proc_mask_dir_candidates); i++)
                if (access(proc_mask_dir_candidates[i], F_OK) >= 0) {
                        r = strv_extend(&dirs, proc_mask_dir_candidates[i]);
                        if (r < 0)
                                return r;
                }
        *ret_files = TAKE_PTR(files);
        *ret_dirs = TAKE_PTR(dirs);
        return 0;
}

static int move_fd_high(int fd) {
        /* Out of the way of the numbers the child dup2()s onto. */
        int n = fcntl(fd, F_DUPFD_CLOEXEC, 10);
        return n < 0 ? -errno : n;
}

_noreturn_ static void held_child(const PayloadParams *p, char **argv, int control_fd, int release_fd,
                                  int null_fd, int stderr_fd) {
        sigset_t none;
        char c = 0;

        /* Only async-signal-safe calls from here on: this is a raw clone() child. */
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);

        /* Nothing of the daemon's standard streams (its journal connection) goes in. */
        if (dup2(null_fd, STDIN_FILENO) < 0 || dup2(null_fd, STDOUT_FILENO) < 0 ||
            dup2(stderr_fd, STDERR_FILENO) < 0)
                _exit(EXIT_FAILURE);

        control_fd = move_fd_high(control_fd);
        release_fd = move_fd_high(release_fd);
        if (control_fd < 0 || release_fd < 0)
                _exit(EXIT_FAILURE);
        /* Hold nothing of the daemon's while waiting. */
        if (close_range(3, 9, 0) < 0)
                _exit(EXIT_FAILURE);
        for (int fd = 10; fd < 1024; fd++)
                if (fd != control_fd && fd != release_fd)
                        (void) close(fd);
        (void) close_range(1024, ~0U, 0);

        /* Wait until we are in our scope. EOF means the daemon gave up on us. */
        for (;;) {
                ssize_t n = read(release_fd, &c, 1);
                if (n == 1 && c == 'G')
                        break;
                if (n < 0 && errno == EINTR)
                        continue;
                _exit(EXIT_FAILURE);
        }

        if (dup2(control_fd, AGENT_CONTROL_FD) < 0)
                _exit(EXIT_FAILURE);
        (void) close_range(AGENT_CONTROL_FD + 1, ~0U, 0);

        if (setgroups(0, NULL) < 0 ||
            setresgid(p->host_gid, p->host_gid, p->host_gid) < 0 ||
            setresuid(p->host_uid, p->host_uid, p->host_uid) < 0)
                _exit(EXIT_FAILURE);

        execve(argv[0], argv, p->environment ?: (char *[]) { NULL });
        _exit(127);
}

int payload_spawn_held(const PayloadParams *p, int control_fd, int stderr_fd, PayloadProcess *ret) {
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_close_ int null_fd = -EBADF;
        _cleanup_close_pair_ int release[2] = { -EBADF, -EBADF };
        int pidfd = -EBADF;
        pid_t pid;
        int r;

        r = bwrap_build_argv(p, &argv);
        if (r < 0)
                return r;
        if (pipe2(release, O_CLOEXEC) < 0)
                return -errno;
        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0)
                return -errno;

        /* CLONE_PARENT: the payload is a child of our own parent (the service manager), not
         * of sandboxd, so that sandboxes outlive a restart of the daemon and bwrap's
         * --die-with-parent ties the sandbox to its monitor, not to us. The pidfd lets us
         * watch it all the same. */
        pid = (pid_t) syscall(SYS_clone, CLONE_PARENT | CLONE_PIDFD, NULL, &pidfd, NULL, 0);
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                release[1] = -EBADF; /* not ours to close in the child; close_range does it */
                held_child(p, argv, control_fd, release[0], null_fd, stderr_fd >= 0 ? stderr_fd : null_fd);
        }

        *ret = (PayloadProcess) {
                .pid = pid,
                .pidfd = pidfd,
                .release_fd = TAKE_FD(release[1]),
        };
        return 0;
}
