/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* sandboxd-egress asks the kernel whether an address is the host's own (route.h): in a
 * network namespace of the test's own, with a public (non-special) address on its
 * loopback, that address is refused like 127.0.0.1 and ::1 (also IPv4-mapped), and its
 * neighbour is not. */

#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "egress-policy.h"
#include "route.h"

/* Public by every class egress-policy.h knows: the kernel alone can tell it is ours. */
#define OWN "45.33.32.156"
#define NEIGHBOUR "45.33.32.157"

static void run_ip(const char *a, const char *b, const char *c, const char *d, const char *e, const char *f) {
        pid_t pid = fork();
        int status;

        assert_true(pid >= 0);
        if (pid == 0) {
                execlp("ip", "ip", a, b, c, d, e, f, (char *) NULL);
                _exit(127);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static int is_local(int fd, const char *s) {
        EgressAddress a;

        assert_int_equal(egress_address_parse(s, &a), 0);
        return route_is_local(fd, &a);
}

static void test_own_address_is_local(void **state) {
        EgressAddress a;
        int fd;

        if (unshare(CLONE_NEWNET) < 0) {
                assert_true(errno == EPERM);
                skip(); /* not root: no namespace of our own */
        }
        run_ip("link", "set", "lo", "up", NULL, NULL);
        run_ip("addr", "add", OWN "/32", "dev", "lo", NULL);

        assert_int_equal(egress_address_parse(OWN, &a), 0);
        assert_null(egress_address_class(&a));   /* the policy sees a public address */

        fd = route_socket_open();
        assert_true(fd >= 0);
        assert_int_equal(is_local(fd, OWN), 1);
        assert_int_equal(is_local(fd, "127.0.0.1"), 1);
        assert_int_equal(is_local(fd, "::1"), 1);
        assert_int_equal(is_local(fd, NEIGHBOUR), 0);   /* no route at all */
        assert_int_equal(is_local(fd, "2606:4700::1111"), 0);
        /* An AF_INET6 socket connects to an IPv4-mapped address over IPv4: asked as such. */
        assert_int_equal(is_local(fd, "::ffff:" OWN), 1);
        assert_int_equal(is_local(fd, "::ffff:127.0.0.1"), 1);
        assert_int_equal(is_local(fd, "::ffff:" NEIGHBOUR), 0);
        /* connect() to an unspecified address reaches the loopback (0.0.0.0 is routed as
         * local; ::, by the IPv6 table, as the default route would). */
        assert_int_equal(is_local(fd, "0.0.0.0"), 1);
        assert_int_equal(is_local(fd, "::"), 1);
        assert_int_equal(is_local(fd, "::ffff:0.0.0.0"), 1);
        /* Asked many times on one socket: each answer is its own. */
        for (int i = 0; i < 100; i++) {
                assert_int_equal(is_local(fd, OWN), 1);
                assert_int_equal(is_local(fd, NEIGHBOUR), 0);
        }
        close(fd);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_own_address_is_local),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
