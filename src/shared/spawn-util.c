/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "spawn-util.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#else
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void) (addr), (void) (size))
#endif

/* Enough for a child that sets up descriptors and execs (even with the sanitizers' larger
 * frames); it is the caller's stack that pays, for the moment of the spawn. */
#define SPAWN_STACK_SIZE (64 * 1024)

typedef struct SpawnChild {
        int (*fn)(void *userdata);
        void *userdata;
        /* Written by the child, read by the parent once the child has exec'd or exited (the
         * parent is suspended until then: CLONE_VFORK). */
        volatile int result;
        volatile bool returned;
} SpawnChild;

int drop_to_uid(uid_t uid, gid_t gid) {
        if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, gid, gid, gid) < 0 ||
            syscall(SYS_setresuid, uid, uid, uid) < 0)
                return -errno;
        return 0;
}

static int spawn_child(void *p) {
        SpawnChild *c = p;
        const struct sigaction dfl = { .sa_handler = SIG_DFL };
        sigset_t none;
        int r;

        /* A handler of ours must never run here, on our memory: back to the defaults before
         * the mask (everything blocked by the parent) is lifted. Ignored ones stay ignored,
         * as across exec. (glibc's own signals refuse sigaction and are skipped.) */
        for (int sig = 1; sig < _NSIG; sig++) {
                struct sigaction sa;

                if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &sa) < 0)
                        continue;
                if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN)
                        (void) sigaction(sig, &dfl, NULL);
        }
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);

        r = c->fn(c->userdata);
        c->result = r;
        c->returned = true;
        _exit(r < 0 ? EXIT_FAILURE : EXIT_SUCCESS);
}

/* Not instrumented: the stack array must be on the real stack (AddressSanitizer may move
 * locals to a "fake stack" elsewhere, and a child running there looks to it like a stack
 * switch). */
__attribute__((no_sanitize_address))
int spawn_vfork(SpawnFlags flags, int (*fn)(void *userdata), void *userdata, pid_t *ret_pid, int *ret_pidfd) {
        /* The child's stack: in our frame, which stays as it is while we are suspended. */
        _Alignas(16) char stack[SPAWN_STACK_SIZE];
        SpawnChild c = { .fn = fn, .userdata = userdata };
        int cflags = CLONE_VM | CLONE_VFORK, pidfd = -EBADF, e, k;
        sigset_t all, saved;
        pid_t pid;

        if (flags & SPAWN_PARENT)
                cflags |= CLONE_PARENT;
        if (ret_pidfd)
                cflags |= CLONE_PIDFD;
        /* Exit signal: SIGCHLD to whoever is the parent (with CLONE_PARENT the kernel uses
         * our own exit signal instead, which is SIGCHLD too). */
        cflags |= SIGCHLD;

        /* Nothing may be delivered to the child before it has reset the handlers. */
        sigfillset(&all);
        k = pthread_sigmask(SIG_SETMASK, &all, &saved);
        if (k != 0)
                return -k;
        /* glibc's clone(): CLONE_PIDFD stores the pidfd where parent_tid points. The stack
         * grows down on every architecture we build for. */
        pid = clone(spawn_child, stack + sizeof(stack), cflags, &c, &pidfd);
        e = errno;
        (void) pthread_sigmask(SIG_SETMASK, &saved, NULL);
        /* The child's instrumented frames left their redzones in the (shared) shadow of
         * the stack it ran on, and never returned to lift them: our own frames will use
         * that memory next. */
        ASAN_UNPOISON_MEMORY_REGION(stack, sizeof(stack));
        if (pid < 0)
                return -e;

        if (c.returned) {
                if (!(flags & SPAWN_PARENT)) {
                        siginfo_t si;
                        while (waitid(P_PID, (id_t) pid, &si, WEXITED) < 0 && errno == EINTR)
                                ;
                }
                if (c.result < 0) {
                        if (pidfd >= 0)
                                close(pidfd);
                        return c.result;
                }
        }

        if (ret_pid)
                *ret_pid = pid;
        if (ret_pidfd)
                *ret_pidfd = pidfd;
        return 0;
}
