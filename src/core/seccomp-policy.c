/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The seccomp policy of every sandbox, on top of bwrap's namespaces and --cap-drop ALL.
 *
 * Default ALLOW: a denylist of calls that reach kernel attack surface or the host, so that
 * ordinary programs (sh, python3, node, pip) keep working. Only the native ABI passes the
 * architecture check; i386 entry points (int 0x80) and x32 system calls (__X32_SYSCALL_BIT)
 * kill the process. no_new_privs is set when the filter is loaded.
 *
 * Each family has its own errno, chosen so that callers degrade gracefully and so that a
 * test can tell the filter's answer from the kernel's, also inside a sandbox where missing
 * capabilities already make many calls fail with EPERM (man/sandboxd-seccomp.7.scd):
 *
 *   call(s)                       condition               errno   why
 *   unshare                       flags & CLONE_NEWUSER,  EUSERS  new namespaces; nested user
 *                                 NEWNS, NEWCGROUP, NEWUTS,       namespaces open most kernel
 *                                 NEWIPC, NEWPID, NEWNET,         exploits to unprivileged code
 *                                 NEWTIME (rule per flag)
 *   clone                         the same but NEWTIME    EUSERS  the same
 *   setns                         always                  EUSERS  joining other namespaces
 *   ptrace                        always                  EPERM   attack surface; bypasses seccomp
 *                                                                 on kernels before 4.8
 *   process_vm_readv/writev       always                  EPERM   other processes' memory
 *   clone3                        always                  ENOSYS  flags in memory, unfilterable;
 *                                                                 glibc falls back to clone()
 *   add_key, request_key, keyctl  always                  ENOSYS  keyrings are the host uid's
 *   bpf                           always                  ENOSYS  verifier and maps: exploits
 *   perf_event_open               always                  ENOSYS  CVEs, side channels
 *   userfaultfd                   always                  ENOSYS  kernel race exploit primitive
 *   io_uring_setup/enter/register always                  ENOSYS  attack surface; its operations
 *                                                                 bypass seccomp
 *   mount, umount, umount2,       always                  EROFS   the mount table is bwrap's
 *   pivot_root
 *   move_mount, open_tree,        always                  EROFS   the same by the new mount API
 *   fsopen, fsconfig, fsmount, fspick,
 *   mount_setattr
 *   kexec_load, kexec_file_load   always                  EACCES  replacing the kernel
 *   init/finit/delete_module      always                  EACCES  kernel code
 *   reboot                        always                  EACCES  the machine
 *   swapon, swapoff               always                  EACCES  the host's swap
 *   settimeofday, stime,          always                  EACCES  the host's clock
 *   clock_settime, adjtimex,
 *   clock_adjtime
 *   acct                          always                  EACCES  the host's accounting
 *   syslog                        always                  EACCES  the host's kernel log
 *   quotactl, quotactl_fd         always                  EACCES  the host's quotas
 *   open_by_handle_at,            always                  EACCES  past the mount namespace
 *   name_to_handle_at                                             ("shocker")
 *   iopl, ioperm                  always                  EACCES  I/O ports
 *   vhangup                       always                  EACCES  terminals
 *   lookup_dcookie, nfsservctl,   always                  EACCES  obsolete: surface, no users
 *   uselib, sysfs, ustat, _sysctl
 *   personality                   persona > 0x40000       EINVAL  flags that weaken the memory
 *                                 (ADDR_NO_RANDOMIZE)             layout; also the 0xffffffff query
 *   ioctl                         cmd & 0xffffffff ==     EIO     pushing input into a terminal
 *                                 TIOCSTI                         (CVE-2017-5226)
 *   ioctl                         cmd & 0xffffffff ==     EIO     the same by console paste
 *                                 TIOCLINUX                       (CVE-2023-28100)
 *   ioctl                         cmd & 0xffffffff ==     EDQUOT  a btrfs subvolume or snapshot:
 *                                 BTRFS_IOC_SUBVOL_CREATE         its own qgroup, outside the
 *                                 (_V2), BTRFS_IOC_SNAP_-         workspace's quota
 *                                 CREATE (_V2)
 *   socket, socketpair            family 0, 3, 4-7, 8-9,  EAFNO-  uncommon protocol families;
 *                                 11, 12-15, >= 17        SUPPORT AF_VSOCK reaches the hypervisor
 *                                 (rule per range)
 *   socket, socketpair            AF_NETLINK, protocol    EAFNO-  audit, uevents, netfilter, ...
 *                                 != NETLINK_ROUTE        SUPPORT
 *
 * Every argument compare is against the full 64-bit register, so a caller cannot slip past
 * a rule by setting high bits the kernel ignores: ioctl commands are masked to 32 bits,
 * the socket and personality rules deny anything above the allowed values, and the
 * allowed values are exact. */

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <unistd.h>

#include <json-c/json.h>

#include "json-util.h"
#include "macro.h"
#include "seccomp-policy.h"

/* Architectures with CONFIG_CLONE_BACKWARDS2 take the stack first and the flags second. */
#if defined(__s390__) || defined(__s390x__) || defined(__CRIS__)
#  define CLONE_FLAGS_ARG 1
#else
#  define CLONE_FLAGS_ARG 0
#endif

/* The socket rules below deny the gaps between these numbers. */
_Static_assert(AF_UNSPEC == 0 && AF_UNIX == 1 && AF_INET == 2 && AF_INET6 == 10 &&
               AF_NETLINK == 16 && AF_PACKET == 17, "socket family numbers moved");
_Static_assert(ADDR_NO_RANDOMIZE == 0x0040000 && UNAME26 == 0x0020000,
               "personality flag numbers moved");

static const struct {
        const char *name;
        int error;
} families[_SECCOMP_FAMILY_MAX] = {
        /* The kernel's answer when user namespaces nest too deep, and one of the errnos
         * Chromium accepts from clone(CLONE_NEWUSER) (it aborts on others). Not EPERM or
         * ENOSPC, which the kernel gives by itself (no capability, a ucount limit): a test
         * in the sandbox must see that the filter refused. This rule is what keeps a bwrap
         * sandbox from making user namespaces (bwrap's --disable-userns is not used). */
        [SECCOMP_FAMILY_NAMESPACE]   = { "namespace",   EUSERS },
        /* What Yama's ptrace_scope answers; gdb and strace explain it. */
        [SECCOMP_FAMILY_TRACING]     = { "tracing",     EPERM },
        /* What a kernel without the feature says; callers fall back (glibc: clone3 to
         * clone, libuv: io_uring to threads, keyutils: no keyring). */
        [SECCOMP_FAMILY_UNAVAILABLE] = { "unavailable", ENOSYS },
        /* The mount table is as bwrap left it. Not EPERM, which is what a missing
         * capability looks like. */
        [SECCOMP_FAMILY_MOUNT]       = { "mount",       EROFS },
        /* The machine belongs to the host; dmesg, date -s and swapon print "Permission
         * denied". */
        [SECCOMP_FAMILY_HOST]        = { "host",        EACCES },
        /* personality(2) never fails by itself, so any errno is unambiguous. */
        [SECCOMP_FAMILY_PERSONALITY] = { "personality", EINVAL },
        /* What the kernel answers when legacy TIOCSTI is disabled (dev.tty.legacy_tiocsti). */
        [SECCOMP_FAMILY_TERMINAL]    = { "terminal",    EIO },
        /* What a kernel without the protocol family says. */
        [SECCOMP_FAMILY_SOCKET]      = { "socket",      EAFNOSUPPORT },
        /* "Disk quota exceeded": a subvolume would be a qgroup of its own, outside the
         * workspace's limit (docs/WORKSPACES.md). */
        [SECCOMP_FAMILY_QUOTA]       = { "quota",       EDQUOT },
};

#define NAMES(...) ((const char *const[]) { __VA_ARGS__, NULL })
#define CMP(i, o, a, b) { .arg = (i), .op = (o), .datum_a = (a), .datum_b = (b) }

#define FLAG_RULE(call, i, flag, reason)                                        \
        { SECCOMP_FAMILY_NAMESPACE, NAMES(call), 1,                             \
          { CMP(i, SCMP_CMP_MASKED_EQ, (flag), (flag)) }, reason }

#define ALWAYS(family, names, reason) \
        { family, names, 0, {}, reason }

/* The kernel takes the ioctl command as a 32-bit int: compare only the low half, so that
 * high bits cannot make the same command look different (CVE-2019-10063). */
#define IOCTL_RULE(cmd, reason)                                                 \
        { SECCOMP_FAMILY_TERMINAL, NAMES("ioctl"), 1,                           \
          { CMP(1, SCMP_CMP_MASKED_EQ, UINT32_MAX, (cmd)) }, reason }

#define QUOTA_IOCTL_RULE(cmd)                                                   \
        { SECCOMP_FAMILY_QUOTA, NAMES("ioctl"), 1,                              \
          { CMP(1, SCMP_CMP_MASKED_EQ, UINT32_MAX, (cmd)) },                    \
          "a btrfs subvolume or snapshot is a qgroup of its own: written to, it would be outside "  \
          "the workspace's quota" }

#define SOCKET_RULE(op, a, b, reason)                                           \
        { SECCOMP_FAMILY_SOCKET, NAMES("socket", "socketpair"), 1,              \
          { CMP(0, op, (a), (b)) }, reason }

/* Family numbers f..f+n-1 (n a power of two, f aligned to n) in one masked compare. */
#define SOCKET_RANGE(f, n, reason) \
        SOCKET_RULE(SCMP_CMP_MASKED_EQ, ~(scmp_datum_t) ((n) - 1), (f), reason)

static const char ns_reason[] =
        "a new namespace: bwrap made every one the sandbox needs, more are kernel attack surface";

static const SeccompRule rules[] = {
        { SECCOMP_FAMILY_NAMESPACE, NAMES("unshare"), 1,
          { CMP(0, SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER) },
          "nested user namespaces: the way in to most unprivileged kernel exploits",
          .agent_enforces_in_docker = true },
        FLAG_RULE("unshare", 0, CLONE_NEWNS, ns_reason),
        FLAG_RULE("unshare", 0, CLONE_NEWCGROUP, ns_reason),
        FLAG_RULE("unshare", 0, CLONE_NEWUTS, ns_reason),
        FLAG_RULE("unshare", 0, CLONE_NEWIPC, ns_reason),
        FLAG_RULE("unshare", 0, CLONE_NEWPID, ns_reason),
        FLAG_RULE("unshare", 0, CLONE_NEWNET, ns_reason),
        FLAG_RULE("unshare", 0, CLONE_NEWTIME, ns_reason),
        FLAG_RULE("clone", CLONE_FLAGS_ARG, CLONE_NEWUSER,
                  "nested user namespaces: the way in to most unprivileged kernel exploits"),
        /* No CLONE_NEWTIME: for clone() that bit is part of the exit signal. */
        FLAG_RULE("clone", CLONE_FLAGS_ARG, CLONE_NEWNS, ns_reason),
        FLAG_RULE("clone", CLONE_FLAGS_ARG, CLONE_NEWCGROUP, ns_reason),
        FLAG_RULE("clone", CLONE_FLAGS_ARG, CLONE_NEWUTS, ns_reason),
        FLAG_RULE("clone", CLONE_FLAGS_ARG, CLONE_NEWIPC, ns_reason),
        FLAG_RULE("clone", CLONE_FLAGS_ARG, CLONE_NEWPID, ns_reason),
        FLAG_RULE("clone", CLONE_FLAGS_ARG, CLONE_NEWNET, ns_reason),
        ALWAYS(SECCOMP_FAMILY_NAMESPACE, NAMES("setns"),
               "joining another namespace"),
        ALWAYS(SECCOMP_FAMILY_TRACING, NAMES("ptrace"),
               "tracing: large attack surface, and on kernels before 4.8 a way round seccomp"),
        ALWAYS(SECCOMP_FAMILY_TRACING, NAMES("process_vm_readv", "process_vm_writev"),
               "reading and writing another process's memory"),

        ALWAYS(SECCOMP_FAMILY_UNAVAILABLE, NAMES("clone3"),
               "its flags are in memory where seccomp cannot see them; glibc falls back to "
               "clone(), whose flags the rules above check"),
        ALWAYS(SECCOMP_FAMILY_UNAVAILABLE, NAMES("add_key", "request_key", "keyctl"),
               "kernel keyrings belong to the host uid, not the sandbox: shared with the "
               "user's other sandboxes and sessions"),
        ALWAYS(SECCOMP_FAMILY_UNAVAILABLE, NAMES("bpf"),
               "the BPF verifier and maps: a long history of kernel exploits"),
        ALWAYS(SECCOMP_FAMILY_UNAVAILABLE, NAMES("perf_event_open"),
               "perf events: many kernel CVEs, and side channels"),
        ALWAYS(SECCOMP_FAMILY_UNAVAILABLE, NAMES("userfaultfd"),
               "stalls kernel page faults at will: the classic primitive for winning kernel races"),
        ALWAYS(SECCOMP_FAMILY_UNAVAILABLE,
               NAMES("io_uring_setup", "io_uring_enter", "io_uring_register"),
               "io_uring: large attack surface, and its operations never pass through seccomp"),

        ALWAYS(SECCOMP_FAMILY_MOUNT, NAMES("mount", "umount", "umount2", "pivot_root"),
               "the mount table is the one bwrap built"),
        ALWAYS(SECCOMP_FAMILY_MOUNT,
               NAMES("move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
                     "mount_setattr"),
               "the new mount API changes the mount table by other calls"),

        ALWAYS(SECCOMP_FAMILY_HOST, NAMES("kexec_load", "kexec_file_load"),
               "replacing the running kernel"),
        ALWAYS(SECCOMP_FAMILY_HOST, NAMES("init_module", "finit_module", "delete_module"),
               "loading and unloading kernel code"),
        ALWAYS(SECCOMP_FAMILY_HOST, NAMES("reboot"),
               "rebooting the machine"),
        ALWAYS(SECCOMP_FAMILY_HOST, NAMES("swapon", "swapoff"),
               "the host's swap"),
        ALWAYS(SECCOMP_FAMILY_HOST,
               NAMES("settimeofday", "stime", "clock_settime", "adjtimex", "clock_adjtime"),
               "the clock is the host's (time namespaces are refused above)"),
        ALWAYS(SECCOMP_FAMILY_HOST, NAMES("acct"),
               "process accounting is the host's"),
        ALWAYS(SECCOMP_FAMILY_HOST, NAMES("syslog"),
               "the host's kernel log, with kernel addresses"),
        ALWAYS(SECCOMP_FAMILY_HOST, NAMES("quotactl", "quotactl_fd"),
               "disk quotas are the host's"),
        ALWAYS(SECCOMP_FAMILY_HOST, NAMES("open_by_handle_at", "name_to_handle_at"),
               "file handles open files past the mount namespace (the \"shocker\" escape)"),
        ALWAYS(SECCOMP_FAMILY_HOST, NAMES("iopl", "ioperm"),
               "direct access to I/O ports"),
        ALWAYS(SECCOMP_FAMILY_HOST, NAMES("vhangup"),
               "hanging up terminals"),
        ALWAYS(SECCOMP_FAMILY_HOST,
               NAMES("lookup_dcookie", "nfsservctl", "uselib", "sysfs", "ustat", "_sysctl"),
               "obsolete interfaces nothing current uses: surface without a user"),

        /* Allowed: PER_LINUX (0), PER_LINUX32, UNAME26 and ADDR_NO_RANDOMIZE alone (setarch
         * -R, sanitizer runtimes). Refused: every flag that changes the memory layout or
         * makes mappings executable, and the query 0xffffffff with them, because "anything
         * but 0, 0x40000 and 0xffffffff" needs several compares on one argument, which
         * neither libseccomp nor Docker can express in a denylist. */
        { SECCOMP_FAMILY_PERSONALITY, NAMES("personality"), 1,
          { CMP(0, SCMP_CMP_GT, ADDR_NO_RANDOMIZE, 0) },
          "personality flags that weaken memory layout (READ_IMPLIES_EXEC, MMAP_PAGE_ZERO, "
          "ADDR_COMPAT_LAYOUT, ...)" },

        IOCTL_RULE(TIOCSTI, "pushing input into a terminal another process reads (CVE-2017-5226)"),
        IOCTL_RULE(TIOCLINUX, "console selection pastes like TIOCSTI (CVE-2023-28100)"),
        QUOTA_IOCTL_RULE(BTRFS_IOC_SUBVOL_CREATE),
        QUOTA_IOCTL_RULE(BTRFS_IOC_SUBVOL_CREATE_V2),
        QUOTA_IOCTL_RULE(BTRFS_IOC_SNAP_CREATE),
        QUOTA_IOCTL_RULE(BTRFS_IOC_SNAP_CREATE_V2),

        /* Allowed: AF_UNIX (1), AF_INET (2), AF_INET6 (10) and AF_NETLINK (16) with
         * NETLINK_ROUTE, which getifaddrs(3) needs (Node's os.networkInterfaces()); the
         * network namespace is the sandbox's and no capability is left to change it. */
        SOCKET_RULE(SCMP_CMP_EQ, AF_UNSPEC, 0, "no such family"),
        SOCKET_RULE(SCMP_CMP_EQ, AF_AX25, 0, "uncommon protocol family: kernel attack surface"),
        SOCKET_RANGE(4, 4, "AF_IPX, AF_APPLETALK, AF_NETROM, AF_BRIDGE: uncommon protocol families"),
        SOCKET_RANGE(8, 2, "AF_ATMPVC, AF_X25: uncommon protocol families"),
        SOCKET_RULE(SCMP_CMP_EQ, AF_ROSE, 0, "uncommon protocol family: kernel attack surface"),
        SOCKET_RANGE(12, 4, "AF_DECnet, AF_NETBEUI, AF_SECURITY, AF_KEY: uncommon protocol families"),
        { SECCOMP_FAMILY_SOCKET, NAMES("socket", "socketpair"), 2,
          { CMP(0, SCMP_CMP_EQ, AF_NETLINK, 0), CMP(2, SCMP_CMP_NE, NETLINK_ROUTE, 0) },
          "netlink other than NETLINK_ROUTE (audit, uevents, netfilter, sock_diag, ...)" },
        SOCKET_RULE(SCMP_CMP_GE, AF_PACKET, 0,
                    "AF_PACKET and every later family (AF_ALG, AF_BLUETOOTH, AF_VSOCK which "
                    "reaches the hypervisor, ...), and any value with high bits set"),
};

const SeccompRule *seccomp_policy_rules(size_t *ret_n) {
        assert(ret_n);

        *ret_n = ELEMENTSOF(rules);
        return rules;
}

int seccomp_family_errno(SeccompFamily f) {
        assert(f >= 0 && f < _SECCOMP_FAMILY_MAX);
        return families[f].error;
}

const char *seccomp_family_to_string(SeccompFamily f) {
        if (f < 0 || f >= _SECCOMP_FAMILY_MAX)
                return NULL;
        return families[f].name;
}

static int restrict_to_native_arch(scmp_filter_ctx ctx) {
        /* The 32-bit ABIs a 64-bit process can still enter must meet the bad-arch action.
         * seccomp_init() adds only the native ABI; make sure no other is present. x32 calls
         * arrive with the x86_64 token and __X32_SYSCALL_BIT set: libseccomp sends those to
         * the bad-arch action too, as long as SCMP_ARCH_X32 is not in the filter. */
        static const uint32_t compat[] = { SCMP_ARCH_X86, SCMP_ARCH_X32, SCMP_ARCH_ARM };
        uint32_t native = seccomp_arch_native();
        int r;

        for (size_t i = 0; i < ELEMENTSOF(compat); i++) {
                if (compat[i] == native || seccomp_arch_exist(ctx, compat[i]) == -EEXIST)
                        continue;
                r = seccomp_arch_remove(ctx, compat[i]);
                if (r < 0)
                        return r;
        }

        return seccomp_arch_exist(ctx, native);
}

static int rule_add(scmp_filter_ctx ctx, const SeccompRule *rule) {
        uint32_t action = SCMP_ACT_ERRNO(seccomp_family_errno(rule->family));
        int r;

        assert(rule->n_args <= ELEMENTSOF(rule->args));

        for (const char *const *name = rule->names; *name; name++) {
                int nr = seccomp_syscall_resolve_name(*name);

                /* Skipping a name libseccomp does not know would silently allow the call:
                 * it is a typo, or libseccomp is older than the table. */
                if (nr == __NR_SCMP_ERROR)
                        return -EINVAL;
                /* Known, but not a system call of this architecture. */
                if (nr < 0)
                        continue;

                r = seccomp_rule_add_array(ctx, action, nr, rule->n_args, rule->args);
                if (r < 0)
                        return r;
        }

        return 0;
}

int seccomp_policy_build(scmp_filter_ctx *ret) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        int r;

        assert(ret);

        ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;

        r = restrict_to_native_arch(ctx);
        if (r < 0)
                return r;

        /* Kill rather than fail with ENOSYS: a process entering through a foreign ABI is
         * not an ordinary program, and a half-working one helps nobody. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                return r;
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1);
        if (r < 0)
                return r;
        /* The kernel's errno from seccomp_load(), not libseccomp's -ECANCELED. */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_API_SYSRAWRC, 1);
        if (r < 0)
                return r;

        for (size_t i = 0; i < ELEMENTSOF(rules); i++) {
                r = rule_add(ctx, &rules[i]);
                if (r < 0)
                        return r;
        }

        *ret = TAKE_PTR(ctx);
        return 0;
}

int seccomp_policy_export_bpf(int *ret_fd) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        assert(ret_fd);

        r = seccomp_policy_build(&ctx);
        if (r < 0)
                return r;

        fd = memfd_create("sandboxd-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;

        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;

        /* Another process of the same uid could reopen the memfd through /proc and rewrite
         * the filter before bwrap reads it. */
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
                return -errno;
        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;

        *ret_fd = TAKE_FD(fd);
        return 0;
}



static int json_append(json_object *array, json_object *v) {
        if (!v)
                return -ENOMEM;
        if (json_object_array_add(array, v) < 0) {
                json_object_put(v);
                return -ENOMEM;
        }
        return 0;
}

static const char *docker_arch_name(uint32_t arch) {
        switch (arch) {
        case SCMP_ARCH_X86_64:    return "SCMP_ARCH_X86_64";
        case SCMP_ARCH_X86:       return "SCMP_ARCH_X86";
        case SCMP_ARCH_AARCH64:   return "SCMP_ARCH_AARCH64";
        case SCMP_ARCH_ARM:       return "SCMP_ARCH_ARM";
        case SCMP_ARCH_PPC64LE:   return "SCMP_ARCH_PPC64LE";
        case SCMP_ARCH_S390X:     return "SCMP_ARCH_S390X";
        case SCMP_ARCH_RISCV64:   return "SCMP_ARCH_RISCV64";
        default:                  return NULL;
        }
}

static const char *docker_op_name(enum scmp_compare op) {
        switch (op) {
        case SCMP_CMP_NE:         return "SCMP_CMP_NE";
        case SCMP_CMP_LT:         return "SCMP_CMP_LT";
        case SCMP_CMP_LE:         return "SCMP_CMP_LE";
        case SCMP_CMP_EQ:         return "SCMP_CMP_EQ";
        case SCMP_CMP_GE:         return "SCMP_CMP_GE";
        case SCMP_CMP_GT:         return "SCMP_CMP_GT";
        case SCMP_CMP_MASKED_EQ:  return "SCMP_CMP_MASKED_EQ";
        default:                  return NULL;
        }
}

static int docker_rule(const SeccompRule *rule, json_object **ret) {
        _cleanup_json_ json_object *entry = NULL, *names = NULL;
        _cleanup_free_ char *comment = NULL;
        int r;

        entry = json_object_new_object();
        names = json_object_new_array();
        if (!entry || !names)
                return -ENOMEM;

        for (const char *const *name = rule->names; *name; name++) {
                r = json_append(names, json_object_new_string(*name));
                if (r < 0)
                        return r;
        }
        r = json_add(entry, "names", TAKE_PTR(names));
        if (r < 0)
                return r;

        r = json_add(entry, "action", json_object_new_string("SCMP_ACT_ERRNO"));
        if (r < 0)
                return r;
        r = json_add(entry, "errnoRet", json_object_new_int(seccomp_family_errno(rule->family)));
        if (r < 0)
                return r;

        if (rule->n_args > 0) {
                _cleanup_json_ json_object *args = json_object_new_array();
                if (!args)
                        return -ENOMEM;

                /* Docker's value and valueTwo are libseccomp's datum_a and datum_b (for
                 * SCMP_CMP_MASKED_EQ: the mask, then the value). */
                for (unsigned i = 0; i < rule->n_args; i++) {
                        const struct scmp_arg_cmp *c = &rule->args[i];
                        _cleanup_json_ json_object *arg = json_object_new_object();
                        const char *op = docker_op_name(c->op);

                        if (!op)
                                return -EINVAL;
                        if (!arg)
                                return -ENOMEM;

                        r = json_add(arg, "index", json_object_new_int((int) c->arg));
                        if (r >= 0)
                                r = json_add(arg, "value", json_object_new_uint64(c->datum_a));
                        if (r >= 0)
                                r = json_add(arg, "valueTwo", json_object_new_uint64(c->datum_b));
                        if (r >= 0)
                                r = json_add(arg, "op", json_object_new_string(op));
                        if (r >= 0)
                                r = json_append(args, TAKE_PTR(arg));
                        if (r < 0)
                                return r;
                }

                r = json_add(entry, "args", TAKE_PTR(args));
                if (r < 0)
                        return r;
        }

        if (asprintf(&comment, "%s: %s", seccomp_family_to_string(rule->family), rule->why) < 0)
                return -ENOMEM;
        r = json_add(entry, "comment", json_object_new_string(comment));
        if (r < 0)
                return r;

        *ret = TAKE_PTR(entry);
        return 0;
}

int seccomp_policy_to_docker_json(char **ret) {
        _cleanup_json_ json_object *profile = NULL, *arches = NULL, *syscalls = NULL;
        const char *arch, *text;
        char *s;
        int r;

        assert(ret);

        arch = docker_arch_name(seccomp_arch_native());
        if (!arch)
                return -EOPNOTSUPP;

        profile = json_object_new_object();
        arches = json_object_new_array();
        syscalls = json_object_new_array();
        if (!profile || !arches || !syscalls)
                return -ENOMEM;

        r = json_add(profile, "defaultAction", json_object_new_string("SCMP_ACT_ALLOW"));
        if (r < 0)
                return r;

        /* Only the native ABI, as in the BPF: no subArchitectures. */
        r = json_append(arches, json_object_new_string(arch));
        if (r < 0)
                return r;
        r = json_add(profile, "architectures", TAKE_PTR(arches));
        if (r < 0)
                return r;

        for (size_t i = 0; i < ELEMENTSOF(rules); i++) {
                json_object *entry = NULL;

                if (rules[i].agent_enforces_in_docker)
                        continue;
                r = docker_rule(&rules[i], &entry);
                if (r < 0)
                        return r;
                r = json_append(syscalls, entry);
                if (r < 0)
                        return r;
        }
        r = json_add(profile, "syscalls", TAKE_PTR(syscalls));
        if (r < 0)
                return r;

        text = json_object_to_json_string_ext(profile, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                       JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text)
                return -ENOMEM;
        s = strdup(text);
        if (!s)
                return -ENOMEM;

        *ret = s;
        return 0;
}
