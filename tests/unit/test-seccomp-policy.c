/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The seccomp policy, proven on the real kernel: every blocked call is made for real in a
 * child that loaded the filter and must fail with exactly its documented errno; the same
 * call without the filter must not (else the probe would prove nothing); ordinary programs
 * must keep working under it; the Docker rendering must be the same table; and bwrap must
 * accept the exported BPF and enforce it in a sandbox set up like sandboxd's. */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/netlink.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <pthread.h>
#include <pty.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <linux/btrfs.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "macro.h"
#include "seccomp-policy.h"

/* The documented errno of each family (man/sandboxd-seccomp.7). Written out here, not
 * read from the table, so that a change to the table that the manual does not follow
 * fails. */
#define NAMESPACE   EUSERS
#define TRACING     EPERM
#define UNAVAILABLE ENOSYS
#define MOUNT       EROFS
#define HOST        EACCES
#define PERSONALITY EINVAL
#define TERMINAL    EIO
#define SOCKET      EAFNOSUPPORT
#define QUOTA       EDQUOT

/* A path that does not exist: probes that would act on the host if the filter let them
 * through are given arguments that make the kernel refuse them anyway. */
#define NOWHERE "/nonexistent/sandboxd-seccomp-probe"

#define PROBE_SETUP_FAILED (-4096L)
#define EXIT_LOAD_FAILED 90
#define EXIT_IO_FAILED 91

extern char **environ;

typedef long (*probe_fn_t)(void);

typedef struct Probe {
        const char *name;
        const char *call;       /* the system call it proves, as the table names it */
        probe_fn_t fn;
        int expected;           /* the documented errno under the policy */
        bool no_baseline;       /* unfiltered, it could make the kernel load a module */
} Probe;

typedef struct Outcome {
        long ret;
        int error;
        int status;             /* wait status of the probe's process */
} Outcome;

static long close_if_fd(long r) {
        if (r >= 0)
                (void) close((int) r);
        return r;
}

static long reap_if_child(long r) {
        /* A raw clone() child runs on a copy of our stack: leave at once. */
        if (r == 0)
                _exit(0);
        if (r > 0) {
                int saved = errno;
                (void) waitpid((pid_t) r, NULL, 0);
                errno = saved;
        }
        return r;
}

static long do_unshare(unsigned long flags) {
        return syscall(SYS_unshare, flags);
}

static long do_clone(unsigned long flags) {
        return reap_if_child(syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL));
}

static int open_pty(void) {
        int master, slave;

        /* The master stays open (and leaks) for the life of the probe's process. */
        if (openpty(&master, &slave, NULL, NULL, NULL) < 0)
                return -1;
        return slave;
}

static long tty_ioctl(unsigned long cmd, char c) {
        int fd = open_pty();

        if (fd < 0)
                return PROBE_SETUP_FAILED;
        return syscall(SYS_ioctl, fd, cmd, &c);
}

static long do_socket(unsigned long family, int type, unsigned long protocol) {
        return close_if_fd(syscall(SYS_socket, family, type, protocol));
}

static long do_socketpair(unsigned long family, int type, unsigned long protocol) {
        int sv[2];
        long r = syscall(SYS_socketpair, family, type, protocol, sv);

        if (r >= 0) {
                (void) close(sv[0]);
                (void) close(sv[1]);
        }
        return r;
}

/* isolation */
static long probe_unshare_user(void)    { return do_unshare(CLONE_NEWUSER); }
static long probe_unshare_ns(void)      { return do_unshare(CLONE_NEWNS); }
static long probe_unshare_cgroup(void)  { return do_unshare(CLONE_NEWCGROUP); }
static long probe_unshare_uts(void)     { return do_unshare(CLONE_NEWUTS); }
static long probe_unshare_ipc(void)     { return do_unshare(CLONE_NEWIPC); }
static long probe_unshare_pid(void)     { return do_unshare(CLONE_NEWPID); }
static long probe_unshare_net(void)     { return do_unshare(CLONE_NEWNET); }
static long probe_unshare_time(void)    { return do_unshare(CLONE_NEWTIME); }
static long probe_unshare_mixed(void)   { return do_unshare(CLONE_FILES | CLONE_FS | CLONE_NEWUSER); }
static long probe_clone_user(void)      { return do_clone(CLONE_NEWUSER); }
static long probe_clone_ns(void)        { return do_clone(CLONE_NEWNS); }
static long probe_clone_cgroup(void)    { return do_clone(CLONE_NEWCGROUP); }
static long probe_clone_uts(void)       { return do_clone(CLONE_NEWUTS); }
static long probe_clone_ipc(void)       { return do_clone(CLONE_NEWIPC); }
static long probe_clone_pid(void)       { return do_clone(CLONE_NEWPID); }
static long probe_clone_net(void)       { return do_clone(CLONE_NEWNET); }

static long probe_setns(void) {
        int fd = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC);
        long r;

        if (fd < 0)
                return PROBE_SETUP_FAILED;
        r = syscall(SYS_setns, fd, CLONE_NEWUTS);
        safe_close(fd);
        return r;
}

static long probe_ptrace(void) {
        /* Our parent is not our tracee: the kernel says ESRCH. */
        return syscall(SYS_ptrace, PTRACE_PEEKDATA, getppid(), NULL, NULL);
}

static char vm_src[8] = "sandbox", vm_dst[8];

static long probe_process_vm_readv(void) {
        struct iovec local = { vm_dst, sizeof vm_dst }, remote = { vm_src, sizeof vm_src };
        return syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0);
}

static long probe_process_vm_writev(void) {
        struct iovec local = { vm_src, sizeof vm_src }, remote = { vm_dst, sizeof vm_dst };
        return syscall(SYS_process_vm_writev, getpid(), &local, 1, &remote, 1, 0);
}

/* unavailable */
static long probe_clone3(void) {
        struct clone_args args = {
                .flags = CLONE_NEWUSER,
                .exit_signal = SIGCHLD,
        };
        return reap_if_child(syscall(SYS_clone3, &args, sizeof args));
}

static long probe_add_key(void) {
        return syscall(SYS_add_key, "user", "sandboxd-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING);
}

static long probe_request_key(void) {
        return syscall(SYS_request_key, "user", "sandboxd-probe-absent", NULL, 0);
}

static long probe_keyctl(void) {
        return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
}

static long probe_bpf(void) {
        union bpf_attr attr = {
                .map_type = BPF_MAP_TYPE_ARRAY,
                .key_size = 4,
                .value_size = 4,
                .max_entries = 1,
        };
        return close_if_fd(syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr));
}

static long probe_perf_event_open(void) {
        struct perf_event_attr attr = {
                .type = PERF_TYPE_SOFTWARE,
                .size = sizeof attr,
                .config = PERF_COUNT_SW_DUMMY,
                .disabled = 1,
        };
        return close_if_fd(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
}

static long probe_userfaultfd(void) {
        return close_if_fd(syscall(SYS_userfaultfd, O_CLOEXEC));
}

static long probe_io_uring_setup(void) {
        struct io_uring_params params = {};
        return close_if_fd(syscall(SYS_io_uring_setup, 1, &params));
}

static long probe_io_uring_enter(void) {
        return syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0);
}

static long probe_io_uring_register(void) {
        return syscall(SYS_io_uring_register, -1, 0, NULL, 0);
}

/* mount */
static long probe_mount(void)          { return syscall(SYS_mount, "none", NOWHERE, "tmpfs", 0, NULL); }
static long probe_umount2(void)        { return syscall(SYS_umount2, NOWHERE, 0); }
static long probe_pivot_root(void)     { return syscall(SYS_pivot_root, NOWHERE, NOWHERE); }
static long probe_move_mount(void)     { return syscall(SYS_move_mount, -1, "", -1, "", 0); }
static long probe_open_tree(void)      { return close_if_fd(syscall(SYS_open_tree, AT_FDCWD, NOWHERE, 0)); }
static long probe_fsopen(void)         { return close_if_fd(syscall(SYS_fsopen, "sandboxd-no-such-fs", 0)); }
static long probe_fsconfig(void)       { return syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0); }
static long probe_fsmount(void)        { return close_if_fd(syscall(SYS_fsmount, -1, 0, 0)); }
static long probe_fspick(void)         { return close_if_fd(syscall(SYS_fspick, AT_FDCWD, NOWHERE, 0)); }
static long probe_mount_setattr(void)  { return syscall(SYS_mount_setattr, AT_FDCWD, NOWHERE, 0, NULL, 0); }

/* host: each with arguments the kernel refuses or that change nothing */
static long probe_kexec_load(void) {
        /* An architecture that is neither ours nor the default: EINVAL before anything. */
        return syscall(SYS_kexec_load, 0, 1, NULL, 0x7fUL << 16);
}
static long probe_kexec_file_load(void) { return syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0); }
static long probe_init_module(void)     { return syscall(SYS_init_module, NULL, 0, ""); }
static long probe_finit_module(void)    { return syscall(SYS_finit_module, -1, "", 0); }
static long probe_delete_module(void)   { return syscall(SYS_delete_module, "sandboxd_no_such_module", O_NONBLOCK); }
static long probe_reboot(void)          { return syscall(SYS_reboot, 0, 0, 0, NULL); /* wrong magic */ }
static long probe_swapon(void)          { return syscall(SYS_swapon, NOWHERE, 0); }
static long probe_swapoff(void)         { return syscall(SYS_swapoff, NOWHERE); }
static long probe_settimeofday(void)    { return syscall(SYS_settimeofday, NULL, NULL); }
static long probe_clock_settime(void)   { return syscall(SYS_clock_settime, CLOCK_REALTIME, NULL); }
static long probe_adjtimex(void)        { return syscall(SYS_adjtimex, NULL); }
static long probe_clock_adjtime(void)   { return syscall(SYS_clock_adjtime, CLOCK_REALTIME, NULL); }
static long probe_acct(void)            { return syscall(SYS_acct, NOWHERE); }
static long probe_syslog(void)          { return syscall(SYS_syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0); }
static long probe_quotactl(void)        { return syscall(SYS_quotactl, 0, NULL, 0, NULL); }
static long probe_quotactl_fd(void)     { return syscall(SYS_quotactl_fd, -1, 0, 0, NULL); }
static long probe_open_by_handle_at(void) { return syscall(SYS_open_by_handle_at, AT_FDCWD, NULL, 0); }
static long probe_name_to_handle_at(void) {
        struct file_handle fh = { .handle_bytes = 0 };
        int mount_id;
        return syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &fh, &mount_id, 0);
}
/* Probes run after setsid(): no controlling terminal to hang up. */
static long probe_vhangup(void)         { return syscall(SYS_vhangup); }
static long probe_lookup_dcookie(void)  { return syscall(SYS_lookup_dcookie, 0, NULL, 0); }
#if defined(__x86_64__) || defined(__i386__)
static long probe_iopl(void)            { return syscall(SYS_iopl, 0); }
static long probe_ioperm(void)          { return syscall(SYS_ioperm, 0, 0, 0); }
#endif
#ifdef SYS_nfsservctl
static long probe_nfsservctl(void)      { return syscall(SYS_nfsservctl, 0, NULL, NULL); }
#endif
#ifdef SYS_uselib
static long probe_uselib(void)          { return syscall(SYS_uselib, NULL); }
#endif
#ifdef SYS_sysfs
static long probe_sysfs(void)           { return syscall(SYS_sysfs, 3); }
#endif
#ifdef SYS_ustat
static long probe_ustat(void)           { return syscall(SYS_ustat, 0, NULL); }
#endif
#ifdef SYS__sysctl
static long probe_sysctl(void)          { return syscall(SYS__sysctl, NULL); }
#endif

/* personality */
static long probe_personality_rie(void)   { return syscall(SYS_personality, READ_IMPLIES_EXEC); }
static long probe_personality_zero(void)  { return syscall(SYS_personality, MMAP_PAGE_ZERO); }
static long probe_personality_compat(void) { return syscall(SYS_personality, ADDR_COMPAT_LAYOUT); }
/* The kernel takes an unsigned int and would see PER_LINUX; the filter sees more. */
static long probe_personality_high(void)  { return syscall(SYS_personality, 1UL << 32); }
static long probe_personality_query(void) { return syscall(SYS_personality, 0xffffffffUL); }

/* terminal */
static long probe_tiocsti(void)       { return tty_ioctl(TIOCSTI, ' '); }
/* The kernel takes the command as an unsigned int: this is TIOCSTI to it. */
static long probe_tiocsti_high(void)  { return tty_ioctl(0xffffffff00000000UL | TIOCSTI, ' '); }
static long probe_tioclinux(void)     { return tty_ioctl(TIOCLINUX, 6 /* TIOCL_GETSHIFTSTATE */); }

/* quota: on a directory that is no btrfs, the kernel says ENOTTY (the baseline). */
static long btrfs_ioctl(unsigned long cmd) {
        char args[4096] = {};
        int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return PROBE_SETUP_FAILED;
        long r = syscall(SYS_ioctl, fd, cmd, args);
        int e = errno;
        close(fd);
        errno = e;
        return r;
}
static long probe_btrfs_subvol_create(void)    { return btrfs_ioctl(BTRFS_IOC_SUBVOL_CREATE); }
static long probe_btrfs_subvol_create_v2(void) { return btrfs_ioctl(BTRFS_IOC_SUBVOL_CREATE_V2); }
static long probe_btrfs_snap_create(void)      { return btrfs_ioctl(BTRFS_IOC_SNAP_CREATE); }
static long probe_btrfs_snap_create_v2(void)   { return btrfs_ioctl(0xffffffff00000000UL | BTRFS_IOC_SNAP_CREATE_V2); }

/* socket */
static long probe_socket_packet(void)    { return do_socket(AF_PACKET, SOCK_DGRAM, 0); }
static long probe_socket_inet_high(void) { return do_socket(0xffffffff00000000UL | AF_INET, SOCK_DGRAM, 0); }
static long probe_socket_uevent(void)    { return do_socket(AF_NETLINK, SOCK_DGRAM, NETLINK_KOBJECT_UEVENT); }
static long probe_socket_route_high(void) { return do_socket(AF_NETLINK, SOCK_RAW, (1UL << 32) | NETLINK_ROUTE); }
static long probe_socketpair_audit(void) { return do_socketpair(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT); }
static long probe_socket_unspec(void)    { return do_socket(AF_UNSPEC, SOCK_STREAM, 0); }
static long probe_socket_ax25(void)      { return do_socket(AF_AX25, SOCK_SEQPACKET, 0); }
static long probe_socket_appletalk(void) { return do_socket(AF_APPLETALK, SOCK_DGRAM, 0); }
static long probe_socket_bridge(void)    { return do_socket(AF_BRIDGE, SOCK_DGRAM, 0); }
static long probe_socket_x25(void)       { return do_socket(AF_X25, SOCK_SEQPACKET, 0); }
static long probe_socket_rose(void)      { return do_socket(AF_ROSE, SOCK_SEQPACKET, 0); }
static long probe_socket_key(void)       { return do_socket(AF_KEY, SOCK_RAW, 2 /* PF_KEY_V2 */); }
static long probe_socket_alg(void)       { return do_socket(AF_ALG, SOCK_SEQPACKET, 0); }
static long probe_socket_vsock(void)     { return do_socket(AF_VSOCK, SOCK_STREAM, 0); }
static long probe_socketpair_packet(void) { return do_socketpair(AF_PACKET, SOCK_DGRAM, 0); }

#define P(n, c, f, e) { .name = n, .call = c, .fn = f, .expected = e }
#define P_NO_BASELINE(n, c, f, e) { .name = n, .call = c, .fn = f, .expected = e, .no_baseline = true }

static const Probe blocked_probes[] = {
        P("unshare(CLONE_NEWUSER)", "unshare", probe_unshare_user, NAMESPACE),
        P("unshare(CLONE_NEWNS)", "unshare", probe_unshare_ns, NAMESPACE),
        P("unshare(CLONE_NEWCGROUP)", "unshare", probe_unshare_cgroup, NAMESPACE),
        P("unshare(CLONE_NEWUTS)", "unshare", probe_unshare_uts, NAMESPACE),
        P("unshare(CLONE_NEWIPC)", "unshare", probe_unshare_ipc, NAMESPACE),
        P("unshare(CLONE_NEWPID)", "unshare", probe_unshare_pid, NAMESPACE),
        P("unshare(CLONE_NEWNET)", "unshare", probe_unshare_net, NAMESPACE),
        P("unshare(CLONE_NEWTIME)", "unshare", probe_unshare_time, NAMESPACE),
        P("unshare(CLONE_FILES|CLONE_FS|CLONE_NEWUSER)", "unshare", probe_unshare_mixed, NAMESPACE),
        P("clone(CLONE_NEWUSER)", "clone", probe_clone_user, NAMESPACE),
        P("clone(CLONE_NEWNS)", "clone", probe_clone_ns, NAMESPACE),
        P("clone(CLONE_NEWCGROUP)", "clone", probe_clone_cgroup, NAMESPACE),
        P("clone(CLONE_NEWUTS)", "clone", probe_clone_uts, NAMESPACE),
        P("clone(CLONE_NEWIPC)", "clone", probe_clone_ipc, NAMESPACE),
        P("clone(CLONE_NEWPID)", "clone", probe_clone_pid, NAMESPACE),
        P("clone(CLONE_NEWNET)", "clone", probe_clone_net, NAMESPACE),
        P("setns(uts)", "setns", probe_setns, NAMESPACE),
        P("ptrace(PTRACE_PEEKDATA)", "ptrace", probe_ptrace, TRACING),
        P("process_vm_readv(self)", "process_vm_readv", probe_process_vm_readv, TRACING),
        P("process_vm_writev(self)", "process_vm_writev", probe_process_vm_writev, TRACING),

        P("clone3(CLONE_NEWUSER)", "clone3", probe_clone3, UNAVAILABLE),
        P("add_key(user)", "add_key", probe_add_key, UNAVAILABLE),
        P("request_key(user)", "request_key", probe_request_key, UNAVAILABLE),
        P("keyctl(KEYCTL_GET_KEYRING_ID)", "keyctl", probe_keyctl, UNAVAILABLE),
        P("bpf(BPF_MAP_CREATE)", "bpf", probe_bpf, UNAVAILABLE),
        P("perf_event_open(sw dummy)", "perf_event_open", probe_perf_event_open, UNAVAILABLE),
        P("userfaultfd()", "userfaultfd", probe_userfaultfd, UNAVAILABLE),
        P("io_uring_setup(1)", "io_uring_setup", probe_io_uring_setup, UNAVAILABLE),
        P("io_uring_enter(-1)", "io_uring_enter", probe_io_uring_enter, UNAVAILABLE),
        P("io_uring_register(-1)", "io_uring_register", probe_io_uring_register, UNAVAILABLE),

        P("mount(tmpfs)", "mount", probe_mount, MOUNT),
        P("umount2()", "umount2", probe_umount2, MOUNT),
        P("pivot_root()", "pivot_root", probe_pivot_root, MOUNT),
        P("move_mount()", "move_mount", probe_move_mount, MOUNT),
        P("open_tree()", "open_tree", probe_open_tree, MOUNT),
        P("fsopen()", "fsopen", probe_fsopen, MOUNT),
        P("fsconfig()", "fsconfig", probe_fsconfig, MOUNT),
        P("fsmount()", "fsmount", probe_fsmount, MOUNT),
        P("fspick()", "fspick", probe_fspick, MOUNT),
        P("mount_setattr()", "mount_setattr", probe_mount_setattr, MOUNT),

        P("kexec_load()", "kexec_load", probe_kexec_load, HOST),
        P("kexec_file_load()", "kexec_file_load", probe_kexec_file_load, HOST),
        P("init_module()", "init_module", probe_init_module, HOST),
        P("finit_module()", "finit_module", probe_finit_module, HOST),
        P("delete_module()", "delete_module", probe_delete_module, HOST),
        P("reboot(bad magic)", "reboot", probe_reboot, HOST),
        P("swapon()", "swapon", probe_swapon, HOST),
        P("swapoff()", "swapoff", probe_swapoff, HOST),
        P("settimeofday(NULL, NULL)", "settimeofday", probe_settimeofday, HOST),
        P("clock_settime()", "clock_settime", probe_clock_settime, HOST),
        P("adjtimex()", "adjtimex", probe_adjtimex, HOST),
        P("clock_adjtime()", "clock_adjtime", probe_clock_adjtime, HOST),
        P("acct()", "acct", probe_acct, HOST),
        P("syslog(SIZE_BUFFER)", "syslog", probe_syslog, HOST),
        P("quotactl()", "quotactl", probe_quotactl, HOST),
        P("quotactl_fd()", "quotactl_fd", probe_quotactl_fd, HOST),
        P("open_by_handle_at()", "open_by_handle_at", probe_open_by_handle_at, HOST),
        P("name_to_handle_at(/)", "name_to_handle_at", probe_name_to_handle_at, HOST),
        P("vhangup()", "vhangup", probe_vhangup, HOST),
        P("lookup_dcookie()", "lookup_dcookie", probe_lookup_dcookie, HOST),
#if defined(__x86_64__) || defined(__i386__)
        P("iopl(0)", "iopl", probe_iopl, HOST),
        P("ioperm(0, 0, 0)", "ioperm", probe_ioperm, HOST),
#endif
#ifdef SYS_nfsservctl
        P("nfsservctl()", "nfsservctl", probe_nfsservctl, HOST),
#endif
#ifdef SYS_uselib
        P("uselib()", "uselib", probe_uselib, HOST),
#endif
#ifdef SYS_sysfs
        P("sysfs(3)", "sysfs", probe_sysfs, HOST),
#endif
#ifdef SYS_ustat
        P("ustat()", "ustat", probe_ustat, HOST),
#endif
#ifdef SYS__sysctl
        P("_sysctl()", "_sysctl", probe_sysctl, HOST),
#endif

        P("personality(READ_IMPLIES_EXEC)", "personality", probe_personality_rie, PERSONALITY),
        P("personality(MMAP_PAGE_ZERO)", "personality", probe_personality_zero, PERSONALITY),
        P("personality(ADDR_COMPAT_LAYOUT)", "personality", probe_personality_compat, PERSONALITY),
        P("personality(1 << 32)", "personality", probe_personality_high, PERSONALITY),
        P("personality(0xffffffff) (query)", "personality", probe_personality_query, PERSONALITY),

        P("ioctl(TIOCSTI)", "ioctl", probe_tiocsti, TERMINAL),
        P("ioctl(TIOCSTI | 0xffffffff00000000)", "ioctl", probe_tiocsti_high, TERMINAL),
        P("ioctl(TIOCLINUX)", "ioctl", probe_tioclinux, TERMINAL),
        P("ioctl(BTRFS_IOC_SUBVOL_CREATE)", "ioctl", probe_btrfs_subvol_create, QUOTA),
        P("ioctl(BTRFS_IOC_SUBVOL_CREATE_V2)", "ioctl", probe_btrfs_subvol_create_v2, QUOTA),
        P("ioctl(BTRFS_IOC_SNAP_CREATE)", "ioctl", probe_btrfs_snap_create, QUOTA),
        P("ioctl(BTRFS_IOC_SNAP_CREATE_V2 | 0xffffffff00000000)", "ioctl", probe_btrfs_snap_create_v2, QUOTA),

        P("socket(AF_PACKET)", "socket", probe_socket_packet, SOCKET),
        P("socket(AF_INET | 0xffffffff00000000)", "socket", probe_socket_inet_high, SOCKET),
        P("socket(AF_NETLINK, NETLINK_KOBJECT_UEVENT)", "socket", probe_socket_uevent, SOCKET),
        P("socket(AF_NETLINK, NETLINK_ROUTE | 1 << 32)", "socket", probe_socket_route_high, SOCKET),
        P("socketpair(AF_NETLINK, NETLINK_AUDIT)", "socketpair", probe_socketpair_audit, SOCKET),
        P_NO_BASELINE("socket(AF_UNSPEC)", "socket", probe_socket_unspec, SOCKET),
        P_NO_BASELINE("socket(AF_AX25)", "socket", probe_socket_ax25, SOCKET),
        P_NO_BASELINE("socket(AF_APPLETALK)", "socket", probe_socket_appletalk, SOCKET),
        P_NO_BASELINE("socket(AF_BRIDGE)", "socket", probe_socket_bridge, SOCKET),
        P_NO_BASELINE("socket(AF_X25)", "socket", probe_socket_x25, SOCKET),
        P_NO_BASELINE("socket(AF_ROSE)", "socket", probe_socket_rose, SOCKET),
        P_NO_BASELINE("socket(AF_KEY)", "socket", probe_socket_key, SOCKET),
        P_NO_BASELINE("socket(AF_ALG)", "socket", probe_socket_alg, SOCKET),
        P_NO_BASELINE("socket(AF_VSOCK)", "socket", probe_socket_vsock, SOCKET),
        P_NO_BASELINE("socketpair(AF_PACKET)", "socketpair", probe_socketpair_packet, SOCKET),
};

/* Calls the policy must leave alone: under it they behave exactly as without it. */
static long probe_socket_unix(void)    { return do_socket(AF_UNIX, SOCK_STREAM, 0); }
static long probe_socket_inet(void)    { return do_socket(AF_INET, SOCK_DGRAM, 0); }
static long probe_socket_inet6(void)   { return do_socket(AF_INET6, SOCK_STREAM, 0); }
static long probe_socket_route(void)   { return do_socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE); }
static long probe_socketpair_unix(void) { return do_socketpair(AF_UNIX, SOCK_STREAM, 0); }
static long probe_unshare_files(void)  { return do_unshare(CLONE_FILES | CLONE_FS); }
static long probe_clone_plain(void)    { return do_clone(0); }
static long probe_personality_linux(void) { return syscall(SYS_personality, PER_LINUX); }
static long probe_personality_norandom(void) { return syscall(SYS_personality, ADDR_NO_RANDOMIZE); }
static long probe_personality_linux32(void) { return syscall(SYS_personality, PER_LINUX32); }
static long probe_tiocgwinsz(void) {
        struct winsize ws;
        int fd = open_pty();

        if (fd < 0)
                return PROBE_SETUP_FAILED;
        return syscall(SYS_ioctl, fd, TIOCGWINSZ, &ws);
}
static long probe_fionread(void) {
        int n, fd = open_pty();

        if (fd < 0)
                return PROBE_SETUP_FAILED;
        return syscall(SYS_ioctl, fd, FIONREAD, &n);
}

static long probe_read_file(void) {
        char buf[256];
        int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return -1;
        n = read(fd, buf, sizeof buf);
        safe_close(fd);
        return n > 0 ? 0 : -1;
}

static void *thread_main(void *arg) {
        return arg;
}

static long probe_threads(void) {
        /* glibc tries clone3() first and must fall back to clone() on ENOSYS. */
        pthread_t t[4];
        void *ret;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                r = pthread_create(&t[i], NULL, thread_main, (void *) (uintptr_t) (i + 1));
                if (r != 0) {
                        errno = r;
                        return -1;
                }
        }
        for (size_t i = 0; i < ELEMENTSOF(t); i++)
                if (pthread_join(t[i], &ret) != 0 || ret != (void *) (uintptr_t) (i + 1))
                        return -1;
        return 0;
}

static long probe_posix_spawn(void) {
        char *argv[] = { (char *) "true", NULL };
        int r, status;
        pid_t pid;

        r = posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ);
        if (r != 0) {
                errno = r;
                return -1;
        }
        if (waitpid(pid, &status, 0) < 0)
                return -1;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static const Probe allowed_probes[] = {
        P("socket(AF_UNIX)", "socket", probe_socket_unix, 0),
        P("socket(AF_INET)", "socket", probe_socket_inet, 0),
        P("socket(AF_INET6)", "socket", probe_socket_inet6, 0),
        P("socket(AF_NETLINK, NETLINK_ROUTE)", "socket", probe_socket_route, 0),
        P("socketpair(AF_UNIX)", "socketpair", probe_socketpair_unix, 0),
        P("unshare(CLONE_FILES|CLONE_FS)", "unshare", probe_unshare_files, 0),
        P("clone(SIGCHLD)", "clone", probe_clone_plain, 0),
        P("personality(PER_LINUX)", "personality", probe_personality_linux, 0),
        P("personality(ADDR_NO_RANDOMIZE)", "personality", probe_personality_norandom, 0),
        P("personality(PER_LINUX32)", "personality", probe_personality_linux32, 0),
        P("ioctl(TIOCGWINSZ)", "ioctl", probe_tiocgwinsz, 0),
        P("ioctl(FIONREAD)", "ioctl", probe_fionread, 0),
        P("open+read /etc/passwd", "read", probe_read_file, 0),
        P("pthread_create x4", "clone", probe_threads, 0),
        P("posix_spawn(/bin/true)", "clone", probe_posix_spawn, 0),
};

static int write_all(int fd, const void *p, size_t n) {
        while (n > 0) {
                ssize_t k = write(fd, p, n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p = (const char *) p + k;
                n -= (size_t) k;
        }
        return 0;
}

static ssize_t read_all(int fd, void *p, size_t n) {
        size_t done = 0;

        while (done < n) {
                ssize_t k = read(fd, (char *) p + done, n - done);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                done += (size_t) k;
        }
        return (ssize_t) done;
}

/* Runs fn in a new process, after loading filter unless it is NULL. No cmocka in here:
 * the in-sandbox mode uses it too. */
static int run_probe(probe_fn_t fn, scmp_filter_ctx filter, Outcome *ret) {
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };
        struct { long ret; int error; } m = { PROBE_SETUP_FAILED, 0 };
        ssize_t n;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;

        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                p[0] = safe_close(p[0]);
                /* No controlling terminal: vhangup() and TIOCSTI reach only the probe's own pty. */
                (void) setsid();
                if (filter && seccomp_load(filter) < 0)
                        _exit(EXIT_LOAD_FAILED);
                errno = 0;
                m.ret = fn();
                m.error = errno;
                _exit(write_all(p[1], &m, sizeof m) < 0 ? EXIT_IO_FAILED : 0);
        }

        p[1] = safe_close(p[1]);
        n = read_all(p[0], &m, sizeof m);
        *ret = (Outcome) { .ret = PROBE_SETUP_FAILED, .status = 0 };
        if (waitpid(pid, &ret->status, 0) < 0)
                return -errno;
        if (n == (ssize_t) sizeof m) {
                ret->ret = m.ret;
                ret->error = m.error;
        }
        return 0;
}

static const char *errno_name(int e) {
        return strerrorname_np(e) ?: "E?";
}

static const char *outcome_to_string(const Outcome *o, char *buf, size_t size) {
        if (WIFSIGNALED(o->status))
                snprintf(buf, size, "killed by SIG%s", sigabbrev_np(WTERMSIG(o->status)) ?: "?");
        else if (!WIFEXITED(o->status) || WEXITSTATUS(o->status) != 0)
                snprintf(buf, size, "probe exited %d", WEXITSTATUS(o->status));
        else if (o->ret == PROBE_SETUP_FAILED)
                snprintf(buf, size, "probe setup failed (%s)", errno_name(o->error));
        else if (o->ret < 0)
                snprintf(buf, size, "%ld %s", o->ret, errno_name(o->error));
        else
                snprintf(buf, size, "returned %ld", o->ret);
        return buf;
}

static bool outcome_is_errno(const Outcome *o, int error) {
        return WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0 && o->ret == -1 && o->error == error;
}

static bool outcome_same(const Outcome *a, const Outcome *b) {
        if (!WIFEXITED(a->status) || !WIFEXITED(b->status) ||
            WEXITSTATUS(a->status) != 0 || WEXITSTATUS(b->status) != 0 ||
            a->ret == PROBE_SETUP_FAILED || b->ret == PROBE_SETUP_FAILED)
                return false;
        if ((a->ret >= 0) != (b->ret >= 0))
                return false;
        return a->ret >= 0 || a->error == b->error;
}

static void test_family_errnos(void **state) {
        static const int documented[_SECCOMP_FAMILY_MAX] = {
                [SECCOMP_FAMILY_NAMESPACE] = NAMESPACE,
                [SECCOMP_FAMILY_TRACING] = TRACING,
                [SECCOMP_FAMILY_UNAVAILABLE] = UNAVAILABLE,
                [SECCOMP_FAMILY_MOUNT] = MOUNT,
                [SECCOMP_FAMILY_HOST] = HOST,
                [SECCOMP_FAMILY_PERSONALITY] = PERSONALITY,
                [SECCOMP_FAMILY_TERMINAL] = TERMINAL,
                [SECCOMP_FAMILY_SOCKET] = SOCKET,
                [SECCOMP_FAMILY_QUOTA] = QUOTA,
        };

        for (int f = 0; f < _SECCOMP_FAMILY_MAX; f++) {
                assert_non_null(seccomp_family_to_string(f));
                assert_int_equal(seccomp_family_errno(f), documented[f]);
                /* Distinct: the errno alone says which family refused. */
                for (int g = 0; g < f; g++)
                        assert_int_not_equal(seccomp_family_errno(f), seccomp_family_errno(g));
        }
        assert_null(seccomp_family_to_string(_SECCOMP_FAMILY_MAX));
}

static void test_table_well_formed(void **state) {
        size_t n;
        const SeccompRule *rules = seccomp_policy_rules(&n);
        bool used[_SECCOMP_FAMILY_MAX] = {};

        assert_true(n > 0);
        for (size_t i = 0; i < n; i++) {
                const SeccompRule *rule = &rules[i];

                assert_true(rule->family >= 0 && rule->family < _SECCOMP_FAMILY_MAX);
                used[rule->family] = true;
                assert_non_null(rule->names);
                assert_non_null(rule->names[0]);
                assert_non_null(rule->why);
                assert_true(rule->n_args <= ELEMENTSOF(rule->args));
                /* One compare per argument: what libseccomp and Docker can both AND. */
                for (unsigned a = 0; a < rule->n_args; a++)
                        for (unsigned b = 0; b < a; b++)
                                assert_int_not_equal(rule->args[a].arg, rule->args[b].arg);
        }
        for (int f = 0; f < _SECCOMP_FAMILY_MAX; f++)
                assert_true(used[f]);
}

static void test_table_names_known(void **state) {
        size_t n;
        const SeccompRule *rules = seccomp_policy_rules(&n);
        unsigned unknown = 0;

        /* A name libseccomp does not know is a typo (or a libseccomp older than the
         * table): seccomp_policy_build() refuses it, this says which. */
        for (size_t i = 0; i < n; i++)
                for (const char *const *name = rules[i].names; *name; name++) {
                        int nr = seccomp_syscall_resolve_name(*name);

                        if (nr == __NR_SCMP_ERROR) {
                                print_error("unknown system call name in the table: \"%s\"\n", *name);
                                unknown++;
                        } else if (nr < 0)
                                print_message("# not a system call of this architecture: %s\n", *name);
                }
        assert_int_equal(unknown, 0);
}

static void test_every_blocked_call_is_probed(void **state) {
        size_t n;
        const SeccompRule *rules = seccomp_policy_rules(&n);
        unsigned missing = 0;

        for (size_t i = 0; i < n; i++)
                for (const char *const *name = rules[i].names; *name; name++) {
                        bool found = false;

                        if (seccomp_syscall_resolve_name(*name) < 0)
                                continue;
                        for (size_t j = 0; j < ELEMENTSOF(blocked_probes) && !found; j++)
                                found = streq(blocked_probes[j].call, *name) &&
                                        blocked_probes[j].expected == seccomp_family_errno(rules[i].family);
                        if (!found) {
                                print_error("no probe proves the rule on %s\n", *name);
                                missing++;
                        }
                }
        assert_int_equal(missing, 0);
}

static void test_build(void **state) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        uint32_t v;

        assert_int_equal(seccomp_policy_build(&ctx), 0);
        assert_non_null(ctx);

        assert_int_equal(seccomp_arch_exist(ctx, seccomp_arch_native()), 0);
#ifdef __x86_64__
        assert_int_equal(seccomp_arch_native(), SCMP_ARCH_X86_64);
        assert_int_equal(seccomp_arch_exist(ctx, SCMP_ARCH_X86), -EEXIST);
        assert_int_equal(seccomp_arch_exist(ctx, SCMP_ARCH_X32), -EEXIST);
#endif

        assert_int_equal(seccomp_attr_get(ctx, SCMP_FLTATR_ACT_DEFAULT, &v), 0);
        assert_int_equal(v, SCMP_ACT_ALLOW);
        assert_int_equal(seccomp_attr_get(ctx, SCMP_FLTATR_ACT_BADARCH, &v), 0);
        assert_int_equal(v, SCMP_ACT_KILL_PROCESS);
        assert_int_equal(seccomp_attr_get(ctx, SCMP_FLTATR_CTL_NNP, &v), 0);
        assert_int_equal(v, 1);
}

static void test_export_bpf(void **state) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx ctx = NULL;
        _cleanup_close_ int fd = -EBADF, ref = -EBADF;
        _cleanup_free_ char *a = NULL, *b = NULL;
        struct stat st;
        int seals;

        assert_int_equal(seccomp_policy_export_bpf(&fd), 0);
        assert_true(fd >= 0);
        assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
        assert_int_equal(lseek(fd, 0, SEEK_CUR), 0);
        assert_int_equal(fstat(fd, &st), 0);
        /* struct sock_filter is 8 bytes; bwrap refuses anything else. */
        assert_true(st.st_size > 0);
        assert_int_equal(st.st_size % 8, 0);

        seals = fcntl(fd, F_GET_SEALS);
        assert_int_equal(seals & (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL),
                         F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
        assert_int_equal(pwrite(fd, "x", 1, 0), -1);
        assert_int_equal(errno, EPERM);

        /* The same program as the filter seccomp_policy_build() returns. */
        assert_int_equal(seccomp_policy_build(&ctx), 0);
        ref = memfd_create("ref", MFD_CLOEXEC);
        assert_true(ref >= 0);
        assert_int_equal(seccomp_export_bpf(ctx, ref), 0);
        assert_int_equal(lseek(ref, 0, SEEK_END), st.st_size);

        a = malloc(st.st_size);
        b = malloc(st.st_size);
        assert_non_null(a);
        assert_non_null(b);
        assert_int_equal(pread(fd, a, st.st_size, 0), st.st_size);
        assert_int_equal(pread(ref, b, st.st_size, 0), st.st_size);
        assert_memory_equal(a, b, st.st_size);
}

static void test_blocked_calls(void **state) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx filter = NULL;
        unsigned failures = 0;

        assert_int_equal(seccomp_policy_build(&filter), 0);

        for (size_t i = 0; i < ELEMENTSOF(blocked_probes); i++) {
                const Probe *p = &blocked_probes[i];
                char fbuf[64], bbuf[64] = "(not run)";
                Outcome f, b;

                assert_int_equal(run_probe(p->fn, filter, &f), 0);
                if (!outcome_is_errno(&f, p->expected)) {
                        print_error("%s: %s under the policy, expected -1 %s\n", p->name,
                                    outcome_to_string(&f, fbuf, sizeof fbuf), errno_name(p->expected));
                        failures++;
                        continue;
                }

                if (!p->no_baseline) {
                        assert_int_equal(run_probe(p->fn, NULL, &b), 0);
                        outcome_to_string(&b, bbuf, sizeof bbuf);
                        if (outcome_is_errno(&b, p->expected)) {
                                /* As root every rule must be provable; as another user the
                                 * kernel may refuse first, for want of a capability. */
                                if (geteuid() == 0) {
                                        print_error("%s: the kernel itself answers %s: the probe proves nothing\n",
                                                    p->name, bbuf);
                                        failures++;
                                        continue;
                                }
                                print_message("# %s: as uid %u the kernel already answers %s\n",
                                              p->name, (unsigned) geteuid(), bbuf);
                        }
                }

                print_message("# %-45s without: %-28s with: %s\n", p->name, bbuf,
                              outcome_to_string(&f, fbuf, sizeof fbuf));
        }

        assert_int_equal(failures, 0);
}

static void test_allowed_calls(void **state) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx filter = NULL;
        unsigned failures = 0;

        assert_int_equal(seccomp_policy_build(&filter), 0);

        for (size_t i = 0; i < ELEMENTSOF(allowed_probes); i++) {
                const Probe *p = &allowed_probes[i];
                char fbuf[64], bbuf[64];
                Outcome f, b;

                assert_int_equal(run_probe(p->fn, filter, &f), 0);
                assert_int_equal(run_probe(p->fn, NULL, &b), 0);
                outcome_to_string(&f, fbuf, sizeof fbuf);
                outcome_to_string(&b, bbuf, sizeof bbuf);
                if (!outcome_same(&f, &b)) {
                        print_error("%s: %s under the policy, %s without\n", p->name, fbuf, bbuf);
                        failures++;
                } else
                        print_message("# %-45s without: %-28s with: %s\n", p->name, bbuf, fbuf);
        }

        assert_int_equal(failures, 0);
}

#ifdef __x86_64__
static long probe_i386_getpid(void) {
        long r;

        /* The i386 entry point, from a 64-bit process: 20 is getpid there. */
        __asm__ volatile ("int $0x80" : "=a" (r) : "a" (20L) : "memory");
        return r;
}

static long probe_x32_getpid(void) {
        return syscall(__X32_SYSCALL_BIT | SYS_getpid);
}

/* A foreign ABI never reaches a system call in a sandbox. What the kernel does with the
 * entry point unfiltered decides what the filter can be seen doing:
 *   - it serves it (i386 with IA-32 emulation on) or answers ENOSYS (x32 off): the filter
 *     must kill with SIGSYS;
 *   - it refuses the entry point itself (int $0x80 with IA-32 emulation off, as some
 *     hypervisors force: "IA-32 emulation off"): the CPU faults before any system call, so
 *     no filter runs; the probe must die the same way under the filter, and test_build
 *     proves the filter would kill it anyway (no foreign architecture in it, and
 *     SCMP_ACT_KILL_PROCESS for a bad one). */
static void test_foreign_abis_killed(void **state) {
        static const struct {
                const char *name;
                probe_fn_t fn;
        } abis[] = {
                { "int $0x80 (i386)", probe_i386_getpid },
                { "__X32_SYSCALL_BIT|getpid (x32)", probe_x32_getpid },
        };
        _cleanup_(seccomp_releasep) scmp_filter_ctx filter = NULL;

        assert_int_equal(seccomp_policy_build(&filter), 0);

        for (size_t i = 0; i < ELEMENTSOF(abis); i++) {
                char fbuf[64], bbuf[64];
                Outcome f, b;

                assert_int_equal(run_probe(abis[i].fn, NULL, &b), 0);
                assert_int_equal(run_probe(abis[i].fn, filter, &f), 0);
                print_message("# %-45s without: %-28s with: %s\n", abis[i].name,
                              outcome_to_string(&b, bbuf, sizeof bbuf),
                              outcome_to_string(&f, fbuf, sizeof fbuf));

                if (WIFEXITED(b.status)) {
                        print_message("# %s: this kernel %s unfiltered -> SIGSYS expected\n", abis[i].name,
                                      b.ret < 0 ? "refuses it (ENOSYS)" : "serves it");
                        assert_true(WIFSIGNALED(f.status));
                        assert_int_equal(WTERMSIG(f.status), SIGSYS);
                } else {
                        print_message("# %s: this kernel faults the entry point itself (%s): "
                                      "no system call is made, filtered or not\n",
                                      abis[i].name, strsignal(WTERMSIG(b.status)));
                        assert_true(WIFSIGNALED(b.status));
                        assert_int_equal(WTERMSIG(b.status), SIGSEGV);
                        assert_true(WIFSIGNALED(f.status));
                        assert_int_equal(WTERMSIG(f.status), SIGSEGV);
                }
        }
}
#endif

static const char *python3_path(void) {
        return access("/usr/bin/python3", X_OK) >= 0 ? "/usr/bin/python3" : "python3";
}

/* Runs argv under the filter (NULL: as it is), returns its exit status and stdout. */
static int run_program(scmp_filter_ctx filter, char *const argv[], int *ret_status,
                       char *out, size_t size) {
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };
        ssize_t n;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;

        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                if (dup2(p[1], STDOUT_FILENO) < 0)
                        _exit(EXIT_IO_FAILED);
                if (filter && seccomp_load(filter) < 0)
                        _exit(EXIT_LOAD_FAILED);
                execvp(argv[0], argv);
                _exit(127);
        }

        p[1] = safe_close(p[1]);
        n = read_all(p[0], out, size - 1);
        out[n > 0 ? n : 0] = 0;
        if (waitpid(pid, ret_status, 0) < 0)
                return -errno;
        return 0;
}

static const char python_script[] =
        "import asyncio, json, os, socket, subprocess, tempfile, threading\n"
        "t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
        "socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()\n"
        "a, b = socket.socketpair(); a.close(); b.close()\n"
        "assert subprocess.run(['true']).returncode == 0\n"
        "assert subprocess.run(['sh', '-c', 'exit 3']).returncode == 3\n"
        "asyncio.run(asyncio.sleep(0))\n"
        "socket.getaddrinfo('localhost', 80)\n"
        "with open('/etc/passwd') as f: f.read()\n"
        "json.loads(json.dumps({'a': [1, 2]}))\n"
        "print(1)\n";

static const char node_script[] =
        "const os = require('os'); os.networkInterfaces(); os.cpus();"
        "require('child_process').execFileSync('true');"
        "require('fs').readFileSync('/etc/passwd');"
        "require('fs').promises.readFile('/etc/passwd')"
        ".then(() => new Promise(r => setTimeout(r, 1)))"
        ".then(() => console.log('ok'));";

static void check_program(scmp_filter_ctx filter, char *const argv[], const char *expected) {
        char out[4096];
        int status;

        assert_int_equal(run_program(filter, argv, &status, out, sizeof out), 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !streq(out, expected)) {
                print_error("%s: status %#x, output \"%s\", expected \"%s\"\n", argv[0], (unsigned) status, out, expected);
                fail();
        }
}

static void test_ordinary_programs(void **state) {
        _cleanup_(seccomp_releasep) scmp_filter_ctx filter = NULL;
        char *const sh[] = { (char *) "/bin/sh", (char *) "-c", (char *) "x=$(echo ok); echo \"$x\"", NULL };
        char *const python[] = { (char *) python3_path(), (char *) "-c", (char *) python_script, NULL };
        char *const node[] = { (char *) "node", (char *) "-e", (char *) node_script, NULL };

        assert_int_equal(seccomp_policy_build(&filter), 0);

        check_program(filter, sh, "ok\n");
        check_program(filter, python, "1\n");

        if (access("/usr/bin/node", X_OK) < 0 && access("/usr/local/bin/node", X_OK) < 0) {
                print_message("# node is not installed: not tried\n");
                return;
        }
        /* The script itself must work without the filter, or the comparison means nothing. */
        check_program(NULL, node, "ok\n");
        check_program(filter, node, "ok\n");
}

static json_object *docker_entry_for(json_object *syscalls, const char *name, size_t *ret_index) {
        for (size_t i = 0; i < json_object_array_length(syscalls); i++) {
                json_object *entry = json_object_array_get_idx(syscalls, i), *names;

                if (!json_object_object_get_ex(entry, "names", &names))
                        continue;
                for (size_t j = 0; j < json_object_array_length(names); j++)
                        if (streq(json_object_get_string(json_object_array_get_idx(names, j)), name)) {
                                *ret_index = i;
                                return entry;
                        }
        }
        return NULL;
}

static void test_docker_json(void **state) {
        _cleanup_free_ char *text = NULL;
        json_object *profile, *v, *syscalls, *entry, *args, *arg;
        const SeccompRule *rules;
        size_t n, idx;

        assert_int_equal(seccomp_policy_to_docker_json(&text), 0);
        profile = json_tokener_parse(text);
        assert_non_null(profile);

        assert_true(json_object_object_get_ex(profile, "defaultAction", &v));
        assert_string_equal(json_object_get_string(v), "SCMP_ACT_ALLOW");
        assert_true(json_object_object_get_ex(profile, "architectures", &v));
        assert_int_equal(json_object_array_length(v), 1);
#ifdef __x86_64__
        assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 0)), "SCMP_ARCH_X86_64");
#endif

        /* The same table: one entry per rule, in order, with the same names, errno and
         * argument compares; but unshare(CLONE_NEWUSER), which the agent needs once and
         * then refuses itself (test-sandbox-init). */
        rules = seccomp_policy_rules(&n);
        assert_true(json_object_object_get_ex(profile, "syscalls", &syscalls));
        size_t skipped = 0;
        for (size_t i = 0; i < n; i++)
                if (rules[i].agent_enforces_in_docker) {
                        assert_string_equal(rules[i].names[0], "unshare");
                        assert_true(rules[i].args[0].datum_b == CLONE_NEWUSER);
                        skipped++;
                }
        assert_int_equal(skipped, 1);
        assert_int_equal(json_object_array_length(syscalls), n - skipped);
        for (size_t i = 0, e = 0; i < n; i++) {
                json_object *names, *a;
                size_t k = 0;

                if (rules[i].agent_enforces_in_docker)
                        continue;
                entry = json_object_array_get_idx(syscalls, e++);
                assert_true(json_object_object_get_ex(entry, "names", &names));
                for (const char *const *name = rules[i].names; *name; name++, k++)
                        assert_string_equal(json_object_get_string(json_object_array_get_idx(names, k)), *name);
                assert_int_equal(json_object_array_length(names), k);

                assert_true(json_object_object_get_ex(entry, "action", &v));
                assert_string_equal(json_object_get_string(v), "SCMP_ACT_ERRNO");
                assert_true(json_object_object_get_ex(entry, "errnoRet", &v));
                assert_int_equal(json_object_get_int(v), seccomp_family_errno(rules[i].family));

                if (rules[i].n_args == 0) {
                        assert_false(json_object_object_get_ex(entry, "args", &a));
                        continue;
                }
                assert_true(json_object_object_get_ex(entry, "args", &a));
                assert_int_equal(json_object_array_length(a), rules[i].n_args);
                for (unsigned j = 0; j < rules[i].n_args; j++) {
                        json_object *x = json_object_array_get_idx(a, j);

                        assert_true(json_object_object_get_ex(x, "index", &v));
                        assert_int_equal(json_object_get_int(v), rules[i].args[j].arg);
                        assert_true(json_object_object_get_ex(x, "value", &v));
                        assert_true(json_object_get_uint64(v) == rules[i].args[j].datum_a);
                        assert_true(json_object_object_get_ex(x, "valueTwo", &v));
                        assert_true(json_object_get_uint64(v) == rules[i].args[j].datum_b);
                        assert_true(json_object_object_get_ex(x, "op", &v));
                        assert_true(startswith_str(json_object_get_string(v), "SCMP_CMP_"));
                }
        }

        /* And the values the manual promises, spelled out. */
        entry = docker_entry_for(syscalls, "keyctl", &idx);
        assert_non_null(entry);
        assert_true(json_object_object_get_ex(entry, "errnoRet", &v));
        assert_int_equal(json_object_get_int(v), ENOSYS);

        entry = docker_entry_for(syscalls, "ioctl", &idx);
        assert_non_null(entry);
        assert_true(json_object_object_get_ex(entry, "errnoRet", &v));
        assert_int_equal(json_object_get_int(v), EIO);
        assert_true(json_object_object_get_ex(entry, "args", &args));
        arg = json_object_array_get_idx(args, 0);
        assert_true(json_object_object_get_ex(arg, "index", &v));
        assert_int_equal(json_object_get_int(v), 1);
        assert_true(json_object_object_get_ex(arg, "op", &v));
        assert_string_equal(json_object_get_string(v), "SCMP_CMP_MASKED_EQ");
        assert_true(json_object_object_get_ex(arg, "value", &v));
        assert_true(json_object_get_uint64(v) == 0xffffffffU);
        assert_true(json_object_object_get_ex(arg, "valueTwo", &v));
        assert_true(json_object_get_uint64(v) == TIOCSTI);

        json_object_put(profile);
}

static void test_man_page(void **state) {
        const char *path = getenv("SECCOMP_MAN_PAGE");
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        const SeccompRule *rules;
        unsigned missing = 0;
        struct stat st;
        size_t n;

        if (!path) {
                print_message("# SECCOMP_MAN_PAGE not set: not checked\n");
                skip();
        }

        fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(fstat(fd, &st), 0);
        text = calloc(1, st.st_size + 1);
        assert_non_null(text);
        assert_int_equal(read_all(fd, text, st.st_size), st.st_size);

        /* Every call and every family errno of the table appears in the manual. */
        rules = seccomp_policy_rules(&n);
        for (size_t i = 0; i < n; i++)
                for (const char *const *name = rules[i].names; *name; name++)
                        if (!strstr(text, *name)) {
                                print_error("%s does not mention %s\n", path, *name);
                                missing++;
                        }
        for (int f = 0; f < _SECCOMP_FAMILY_MAX; f++)
                if (!strstr(text, errno_name(seccomp_family_errno(f)))) {
                        print_error("%s does not mention %s\n", path, errno_name(seccomp_family_errno(f)));
                        missing++;
                }
        assert_int_equal(missing, 0);
}

/* Inside bwrap. With check, bwrap loaded the exported filter and every blocked probe must
 * fail with its errno; without, the probes only report what the sandbox alone answers. */
static int in_sandbox_main(bool check) {
        char *const sh[] = { (char *) "/bin/sh", (char *) "-c", (char *) "x=$(echo ok); echo \"$x\"", NULL };
        char *const python[] = { (char *) python3_path(), (char *) "-c", (char *) python_script, NULL };
        char line[256], out[4096];
        unsigned failures = 0;
        bool seccomp = false, nnp = false;
        FILE *f;
        int status;

        f = fopen("/proc/self/status", "re");
        if (!f) {
                printf("FAIL cannot read /proc/self/status: %m\n");
                return 1;
        }
        while (fgets(line, sizeof line, f)) {
                seccomp = seccomp || streq(line, "Seccomp:\t2\n");
                nnp = nnp || streq(line, "NoNewPrivs:\t1\n");
        }
        fclose(f);
        if (check && (!seccomp || !nnp)) {
                printf("FAIL not under a seccomp filter with no_new_privs\n");
                failures++;
        }

        for (size_t i = 0; i < ELEMENTSOF(blocked_probes); i++) {
                const Probe *p = &blocked_probes[i];
                char buf[64];
                Outcome o;

                if (run_probe(p->fn, NULL, &o) < 0) {
                        printf("FAIL %s: cannot run probe: %m\n", p->name);
                        failures++;
                        continue;
                }
                outcome_to_string(&o, buf, sizeof buf);
                if (!check)
                        printf("%s %-45s %s\n", outcome_is_errno(&o, p->expected) ? "same" : "    ",
                               p->name, buf);
                else if (outcome_is_errno(&o, p->expected))
                        printf("ok   %-45s %s\n", p->name, buf);
                else {
                        printf("FAIL %-45s %s, expected %s\n", p->name, buf, errno_name(p->expected));
                        failures++;
                }
        }

        if (!check) {
                fflush(stdout);
                _exit(EXIT_SUCCESS);
        }

        if (run_program(NULL, sh, &status, out, sizeof out) < 0 ||
            !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !streq(out, "ok\n")) {
                printf("FAIL /bin/sh: status %#x, output \"%s\"\n", (unsigned) status, out);
                failures++;
        } else
                printf("ok   /bin/sh\n");
        if (run_program(NULL, python, &status, out, sizeof out) < 0 ||
            !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !streq(out, "1\n")) {
                printf("FAIL python3: status %#x, output \"%s\"\n", (unsigned) status, out);
                failures++;
        } else
                printf("ok   python3\n");

        fflush(stdout);
        /* _exit(): no sanitizer leak check at exit, which would need ptrace(). */
        _exit(failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}

static int run_bwrap(const char *bwrap, int seccomp_fd, char *const extra[], char *out, size_t size,
                     int *ret_status) {
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };
        char fd_str[16];
        char *argv[64];
        size_t k = 0;
        ssize_t n;
        pid_t pid;

        /* As sandboxd's payload-bwrap.c sets it up, with / read-only instead of a template. */
        argv[k++] = (char *) bwrap;
        argv[k++] = (char *) "--unshare-all";
        argv[k++] = (char *) "--unshare-user";
        argv[k++] = (char *) "--uid"; argv[k++] = (char *) "1000";
        argv[k++] = (char *) "--gid"; argv[k++] = (char *) "1000";
        argv[k++] = (char *) "--cap-drop"; argv[k++] = (char *) "ALL";
        argv[k++] = (char *) "--new-session";
        argv[k++] = (char *) "--die-with-parent";
        argv[k++] = (char *) "--as-pid-1";
        argv[k++] = (char *) "--ro-bind"; argv[k++] = (char *) "/"; argv[k++] = (char *) "/";
        argv[k++] = (char *) "--proc"; argv[k++] = (char *) "/proc";
        argv[k++] = (char *) "--dev"; argv[k++] = (char *) "/dev";
        if (seccomp_fd >= 0) {
                snprintf(fd_str, sizeof fd_str, "%d", seccomp_fd);
                argv[k++] = (char *) "--seccomp";
                argv[k++] = fd_str;
        }
        argv[k++] = (char *) "--";
        for (char *const *e = extra; *e; e++)
                argv[k++] = *e;
        argv[k] = NULL;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                if (dup2(p[1], STDOUT_FILENO) < 0 || dup2(p[1], STDERR_FILENO) < 0)
                        _exit(EXIT_IO_FAILED);
                /* The inheritance the caller of seccomp_policy_export_bpf() owes bwrap. */
                if (seccomp_fd >= 0 && fcntl(seccomp_fd, F_SETFD, 0) < 0)
                        _exit(EXIT_IO_FAILED);
                execv(bwrap, argv);
                _exit(127);
        }
        p[1] = safe_close(p[1]);
        n = read_all(p[0], out, size - 1);
        out[n > 0 ? n : 0] = 0;
        if (waitpid(pid, ret_status, 0) < 0)
                return -errno;
        return 0;
}

static void print_lines(const char *prefix, const char *text) {
        /* cmocka's print_message() truncates long messages: one line at a time. */
        for (const char *l = text; *l; ) {
                size_t len = strcspn(l, "\n");

                print_message("%s%.*s\n", prefix, (int) len, l);
                l += len;
                if (*l)
                        l++;
        }
}

static void test_bwrap(void **state) {
        const char *bwrap = getenv("BWRAP") ?: "/usr/bin/bwrap";
        char *const true_argv[] = { (char *) "/bin/true", NULL };
        char self[PATH_MAX], out[16384];
        _cleanup_close_ int fd = -EBADF;
        ssize_t n;
        int status;

        if (access(bwrap, X_OK) < 0 ||
            run_bwrap(bwrap, -1, true_argv, out, sizeof out, &status) < 0 ||
            !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                print_message("# %s cannot make a sandbox here (not root, no user namespaces?): not tried\n", bwrap);
                skip();
        }

        n = readlink("/proc/self/exe", self, sizeof self - 1);
        assert_true(n > 0);
        self[n] = 0;

        /* What the sandbox answers by itself: where it already says the documented errno
         * ("same"), only the filtered run below tells the two apart. For the record. */
        {
                char *const argv[] = { self, (char *) "--in-sandbox-unfiltered", NULL };

                assert_int_equal(run_bwrap(bwrap, -1, argv, out, sizeof out, &status), 0);
                assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
                print_lines("# unfiltered sandbox: ", out);
        }

        assert_int_equal(seccomp_policy_export_bpf(&fd), 0);
        {
                char *const argv[] = { self, (char *) "--in-sandbox", NULL };

                assert_int_equal(run_bwrap(bwrap, fd, argv, out, sizeof out, &status), 0);
        }
        print_lines("# sandbox with the policy: ", out);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                print_error("in the sandbox: status %#x\n", (unsigned) status);
                fail();
        }
}

int main(int argc, char *argv[]) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_family_errnos),
                cmocka_unit_test(test_table_well_formed),
                cmocka_unit_test(test_table_names_known),
                cmocka_unit_test(test_every_blocked_call_is_probed),
                cmocka_unit_test(test_build),
                cmocka_unit_test(test_export_bpf),
                cmocka_unit_test(test_blocked_calls),
                cmocka_unit_test(test_allowed_calls),
#ifdef __x86_64__
                cmocka_unit_test(test_foreign_abis_killed),
#endif
                cmocka_unit_test(test_ordinary_programs),
                cmocka_unit_test(test_docker_json),
                cmocka_unit_test(test_man_page),
                cmocka_unit_test(test_bwrap),
        };

        if (argc > 1 && streq(argv[1], "--in-sandbox"))
                return in_sandbox_main(true);
        if (argc > 1 && streq(argv[1], "--in-sandbox-unfiltered"))
                return in_sandbox_main(false);

        return cmocka_run_group_tests(tests, NULL, NULL);
}
