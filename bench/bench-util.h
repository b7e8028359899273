/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the bench clients (sandbox-bench.c, sandbox-scale.c) share: the clock, failing,
 * argv vectors, the bare-bwrap floor's child and systemd-run's floor. Header-only: each
 * client is one file built on its own (bench.py compiles sandbox-bench.c by itself when
 * no build has it). */

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline double now_us(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec / 1e3;
}

static inline void fail(const char *what, int r) {
        fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, strerror(r < 0 ? -r : r));
        exit(EXIT_FAILURE);
}

static inline int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static inline char **strv_concat(char * const *a, char * const *b) {
        size_t na = 0, nb = 0;
        char **v;

        while (a[na])
                na++;
        while (b[nb])
                nb++;
        v = calloc(na + nb + 1, sizeof(char *));
        if (!v)
                fail("Out of memory", ENOMEM);
        memcpy(v, a, na * sizeof(char *));
        memcpy(v + na, b, nb * sizeof(char *));
        return v;
}

/* In a forked child, as sandboxd's held payload does it (src/core/payload-bwrap.c): stdin
 * and stdout to devnull, drop to uid (and the gid of the same number), exec argv with an
 * empty environment. */
_Noreturn static inline void exec_as_uid(char **argv, int devnull, uid_t uid) {
        if (dup2(devnull, STDIN_FILENO) < 0 || dup2(devnull, STDOUT_FILENO) < 0 || setgroups(0, NULL) < 0 ||
            setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
                _exit(125);
        execve(argv[0], argv, (char *[]) { NULL });
        _exit(127);
}

/* systemd-run --scope + bwrap (the argv after it): with props, in sandbox.slice with the
 * unit properties sandboxd sets (src/core/scope.c) and the shell template's limits.
 * systemd-run resolves --uid= through NSS; sandboxd's uids have no entry, so it runs bwrap
 * as "nobody" then: the same unprivileged path, dropped to after its scope exists, as
 * sandboxd's payload does after release. Freed with free(). */
static inline char **systemd_run_argv(bool props, uid_t uid, char **bwrap) {
        static char uid_opt[64];
        struct passwd *pw = getpwuid(uid);

        snprintf(uid_opt, sizeof(uid_opt), "--uid=%s", pw ? pw->pw_name : "nobody");
        char *plain[] = { (char *) "/usr/bin/systemd-run", (char *) "--scope", (char *) "--quiet",
                          (char *) "--collect", uid_opt, NULL };
        char *with_props[] = { (char *) "/usr/bin/systemd-run", (char *) "--scope", (char *) "--quiet",
                               (char *) "--collect", uid_opt, (char *) "--slice=sandbox.slice",
                               (char *) "-pMemoryAccounting=yes", (char *) "-pMemoryMax=268435456",
                               (char *) "-pCPUAccounting=yes", (char *) "-pCPUQuota=100%",
                               (char *) "-pTasksAccounting=yes", (char *) "-pTasksMax=128",
                               (char *) "-pKillSignal=SIGKILL", (char *) "-pSendSIGHUP=no", NULL };
        return strv_concat(props ? with_props : plain, bwrap);
}
