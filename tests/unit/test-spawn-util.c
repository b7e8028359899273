/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* spawn_vfork(): the child runs on our memory, its errors come back, handlers and mask are
 * reset, and what it leaves is reaped. (SPAWN_PARENT is exercised by the integration
 * tests: sandboxes outliving a restart of sandboxd.) */

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "spawn-util.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

static int exec_true(void *userdata) {
        char *argv[] = { (char *) "true", NULL };

        execve("/bin/true", argv, (char *[]) { NULL });
        return -errno;
}

static int exec_missing(void *userdata) {
        char *argv[] = { (char *) "missing", NULL };

        execve("/nonexistent/spawn-util-test", argv, (char *[]) { NULL });
        return -errno;
}

typedef struct Seen {
        pid_t pid;
        int usr2_blocked;
} Seen;

static int report(void *userdata) {
        Seen *seen = userdata;
        sigset_t mask;

        /* Written into the parent's memory: nothing is copied. */
        seen->pid = (pid_t) syscall(SYS_getpid);
        if (sigprocmask(SIG_SETMASK, NULL, &mask) < 0)
                return -errno;
        seen->usr2_blocked = sigismember(&mask, SIGUSR2);
        return 0;
}

static volatile sig_atomic_t handled;

static void on_usr1(int sig) {
        handled = 1;
}

static int raise_usr1(void *userdata) {
        (void) kill((pid_t) syscall(SYS_getpid), SIGUSR1);
        return 0; /* not reached: SIGUSR1's default ends the child */
}

static void test_exec(void **state) {
        siginfo_t si = {};
        pid_t pid = 0;
        int pidfd = -1;

        assert_int_equal(spawn_vfork(0, exec_true, NULL, &pid, &pidfd), 0);
        assert_true(pid > 0);
        assert_true(pidfd >= 0);
        assert_int_equal(waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED), 0);
        assert_int_equal(si.si_pid, pid);
        assert_int_equal(si.si_code, CLD_EXITED);
        assert_int_equal(si.si_status, 0);
        close(pidfd);
}

static void test_exec_fails(void **state) {
        pid_t pid = 0;
        int pidfd = -1;

        /* The exec's own errno, at once; the child is gone and reaped. */
        assert_int_equal(spawn_vfork(0, exec_missing, NULL, &pid, &pidfd), -ENOENT);
        assert_int_equal(pid, 0);
        assert_int_equal(pidfd, -1);
        assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
        assert_int_equal(errno, ECHILD);
}

static void test_shared_memory_and_mask(void **state) {
        Seen seen = { .pid = -1, .usr2_blocked = -1 };
        sigset_t usr2, saved;
        pid_t pid = 0;

        sigemptyset(&usr2);
        sigaddset(&usr2, SIGUSR2);
        assert_int_equal(sigprocmask(SIG_BLOCK, &usr2, &saved), 0);
        assert_int_equal(spawn_vfork(0, report, &seen, &pid, NULL), 0);
        assert_int_equal(sigprocmask(SIG_SETMASK, &saved, NULL), 0);

        assert_true(pid > 0);
        assert_int_equal(seen.pid, pid);      /* the child wrote our memory */
        assert_int_equal(seen.usr2_blocked, 0); /* and started with an empty mask */
        /* It returned: reaped already. */
        assert_int_equal(waitpid(pid, NULL, WNOHANG), -1);
        assert_int_equal(errno, ECHILD);
}

static void test_handlers_reset(void **state) {
        struct sigaction sa = { .sa_handler = on_usr1 }, old;
        siginfo_t si = {};
        pid_t pid = 0;
        int pidfd = -1;

        assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
        handled = 0;
        /* Our handler would run on our memory; the default ends the child instead. */
        assert_int_equal(spawn_vfork(0, raise_usr1, NULL, &pid, &pidfd), 0);
        assert_int_equal(waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED), 0);
        assert_int_equal(si.si_code, CLD_KILLED);
        assert_int_equal(si.si_status, SIGUSR1);
        assert_int_equal(handled, 0);
        close(pidfd);
        assert_int_equal(sigaction(SIGUSR1, &old, NULL), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exec),
                cmocka_unit_test(test_exec_fails),
                cmocka_unit_test(test_shared_memory_and_mask),
                cmocka_unit_test(test_handlers_reset),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
