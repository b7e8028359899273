/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The one seccomp policy every payload runs under. The table in seccomp-policy.c is the
 * single source of truth: it is compiled to BPF for bwrap (--seccomp FD) and rendered as a
 * Docker seccomp profile; man/sandboxd-seccomp.7.scd documents it. */

#include <stdbool.h>
#include <stddef.h>

#include <seccomp.h>

/* Each family fails with its own errno, so a test (or a user reading strace output) can
 * tell which rule refused a call: the probes in tests/unit/test-seccomp-policy.c get a
 * different answer from the kernel, as root or in an unfiltered sandbox. */
typedef enum SeccompFamily {
        SECCOMP_FAMILY_NAMESPACE,       /* EUSERS: new namespaces, setns */
        SECCOMP_FAMILY_TRACING,         /* EPERM: ptrace, process_vm_readv/writev */
        SECCOMP_FAMILY_UNAVAILABLE,     /* ENOSYS: clone3, keyrings, bpf, perf, userfaultfd, io_uring */
        SECCOMP_FAMILY_MOUNT,           /* EROFS: mount(2) and the new mount API */
        SECCOMP_FAMILY_HOST,            /* EACCES: kexec, modules, reboot, swap, clocks, ... */
        SECCOMP_FAMILY_PERSONALITY,     /* EINVAL: personality flags beyond ADDR_NO_RANDOMIZE */
        SECCOMP_FAMILY_TERMINAL,        /* EIO: TIOCSTI, TIOCLINUX */
        SECCOMP_FAMILY_SOCKET,          /* EAFNOSUPPORT: families other than unix, inet, inet6, rtnetlink */
        SECCOMP_FAMILY_QUOTA,           /* EDQUOT: btrfs subvolumes and snapshots (outside the workspace's quota) */
        _SECCOMP_FAMILY_MAX,
} SeccompFamily;

/* One row of the table: every name in names[] fails with the family's errno when all of
 * args[] match. At most one comparison per argument index: libseccomp refuses more, and
 * Docker (runc) would OR them rather than AND them. */
typedef struct SeccompRule {
        SeccompFamily family;
        const char *const *names;       /* NULL-terminated */
        unsigned n_args;
        struct scmp_arg_cmp args[2];
        const char *why;
        /* Left out of the Docker profile: the agent needs the call once (it makes the
         * container's user namespace), then loads the whole table as BPF. */
        bool agent_enforces_in_docker;
} SeccompRule;

const SeccompRule *seccomp_policy_rules(size_t *ret_n);
int seccomp_family_errno(SeccompFamily f);
const char *seccomp_family_to_string(SeccompFamily f);

/* A new filter context holding the whole policy; free it with seccomp_release(). */
int seccomp_policy_build(scmp_filter_ctx *ret);

/* The policy as BPF in a sealed memfd positioned at offset 0, O_CLOEXEC: the caller makes
 * it inheritable for bwrap. bwrap reads it to the end, so use one fd per bwrap. */
int seccomp_policy_export_bpf(int *ret_fd);

/* The same table as a Docker seccomp profile (JSON text), for the Docker payload: all but
 * the rules agent_enforces_in_docker, which the agent adds on top with the BPF. */
int seccomp_policy_to_docker_json(char **ret);

static inline void seccomp_releasep(scmp_filter_ctx *ctx) {
        if (*ctx)
                seccomp_release(*ctx);
}
