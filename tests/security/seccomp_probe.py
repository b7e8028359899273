# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs inside a sandbox (python template, as `python3 -`): makes each probe's raw system
call through ctypes syscall(), so that no libc wrapper retries, emulates or falls back,
and prints {probe: result} as JSON. A result is {"ret": N} or {"errno": NAME} or, for the
probes that run in a child, {"signal": N} / {"exit": N}.

Every probe's arguments are chosen so that the kernel, without the filter, would answer
something harmless and different from the policy's errno (see test_seccomp.py), never
perform the operation: a missing filter shows up as a wrong answer, not as damage.
"""

import ctypes
import errno
import json
import mmap
import os
import platform
import signal
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NULL = None

# x86_64 system call numbers (asm/unistd_64.h); the test skips other architectures.
NR = dict(
    ioctl=16, socket=41, socketpair=53, clone=56, getpid=39, ptrace=101, syslog=103, uselib=134,
    personality=135, ustat=136, sysfs=139, vhangup=153, pivot_root=155, _sysctl=156, adjtimex=159,
    acct=163, settimeofday=164, mount=165, umount2=166, swapon=167, swapoff=168, reboot=169,
    iopl=172, ioperm=173, init_module=175, delete_module=176, quotactl=179, nfsservctl=180,
    lookup_dcookie=212, clock_settime=227, kexec_load=246, add_key=248, request_key=249,
    keyctl=250, unshare=272, perf_event_open=298, name_to_handle_at=303, open_by_handle_at=304,
    clock_adjtime=305, setns=308, process_vm_readv=310, process_vm_writev=311, finit_module=313,
    kexec_file_load=320, bpf=321, userfaultfd=323, io_uring_setup=425, io_uring_enter=426,
    io_uring_register=427, open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432,
    fspick=433, clone3=435, mount_setattr=442, quotactl_fd=443,
)

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x2000000, 0x4000000, 0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWTIME = 0x10000000, 0x20000000, 0x40000000, 0x80
TIOCSTI, TIOCLINUX, FIONREAD = 0x5412, 0x541C, 0x541B
HIGH = 1 << 32
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET = 1, 2, 10, 16, 17
SOCK_STREAM, SOCK_DGRAM, SOCK_RAW = 1, 2, 3
NETLINK_ROUTE, NETLINK_AUDIT, NETLINK_KOBJECT_UEVENT = 0, 9, 15
ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, ADDR_COMPAT_LAYOUT = 0x0040000, 0x0400000, 0x0200000
SIGCHLD = 17

results = {}


def arg(v):
    return ctypes.c_long(v) if isinstance(v, int) and v < 2 ** 63 else (
        ctypes.c_ulong(v) if isinstance(v, int) else v)


def raw(name, *args):
    """The raw call; returns {"ret": N} or {"errno": NAME}."""
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(NR[name]), *[arg(a) for a in args])
    if r == -1:
        e = ctypes.get_errno()
        return {'errno': errno.errorcode.get(e, str(e))}
    return {'ret': r}


def probe(key, name, *args, close=False):
    res = raw(name, *args)
    results[key] = res
    if close and 'ret' in res and res['ret'] >= 0:
        os.close(res['ret'])


def in_child(key, fn):
    """FN in a forked child: its fate as {"signal": N}, {"exit": N}."""
    pid = os.fork()
    if pid == 0:
        try:
            fn()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        results[key] = {'signal': os.WTERMSIG(status)}
    else:
        results[key] = {'exit': os.WEXITSTATUS(status)}


def raw_clone(key, flags):
    """clone(FLAGS|SIGCHLD) like fork(): a child that got through exits at once."""
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(NR['clone']), ctypes.c_ulong(flags | SIGCHLD), NULL, NULL, NULL,
                     ctypes.c_ulong(0))
    if r == 0:
        os._exit(0)
    if r == -1:
        e = ctypes.get_errno()
        results[key] = {'errno': errno.errorcode.get(e, str(e))}
    else:
        os.waitpid(r, 0)
        results[key] = {'ret': 'child'}


def foreign_abis():
    """An x32 getpid, and an i386 getpid through int 0x80 (mov eax, 20; int 0x80; ret), each
    in a child. In a sandbox both are killed with SIGSYS; where the kernel refuses int 0x80
    itself (IA-32 emulation off) the CPU faults first: SIGSEGV, filtered or not."""
    # A child that gets an answer exits 0 when the call was served, 1 when refused (ENOSYS).
    def x32():
        os._exit(0 if libc.syscall(ctypes.c_long(0x40000000 | NR['getpid'])) >= 0 else 1)
    in_child('x32:getpid', x32)

    def int80():
        code = b'\xb8\x14\x00\x00\x00\xcd\x80\xc3'
        m = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        m.write(code)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        os._exit(0 if ctypes.CFUNCTYPE(ctypes.c_int)(addr)() >= 0 else 1)
    in_child('i386:getpid', int80)


def main():
    if platform.machine() != 'x86_64':
        print(json.dumps({'skip': platform.machine()}))
        return
    if sys.argv[1:] == ['--foreign']:
        # Unfiltered, on the host: what this kernel itself does with foreign entry points.
        foreign_abis()
        print(json.dumps(results))
        return

    # Isolation: EPERM.
    for flag, fname in ((CLONE_NEWUSER, 'NEWUSER'), (CLONE_NEWNS, 'NEWNS'), (CLONE_NEWCGROUP, 'NEWCGROUP'),
                        (CLONE_NEWUTS, 'NEWUTS'), (CLONE_NEWIPC, 'NEWIPC'), (CLONE_NEWPID, 'NEWPID'),
                        (CLONE_NEWNET, 'NEWNET'), (CLONE_NEWTIME, 'NEWTIME')):
        probe(f'unshare:{fname}', 'unshare', flag)
        probe(f'unshare:{fname}|high', 'unshare', flag | HIGH)
        if flag != CLONE_NEWTIME:
            raw_clone(f'clone:{fname}', flag)
    probe('setns', 'setns', -1, 0)
    probe('ptrace', 'ptrace', 3, os.getpid(), 0, 0)            # PTRACE_PEEKUSER of an untraced self
    probe('process_vm_readv', 'process_vm_readv', os.getpid(), NULL, 0, NULL, 0, 0)
    probe('process_vm_writev', 'process_vm_writev', os.getpid(), NULL, 0, NULL, 0, 0)

    # Unavailable: ENOSYS.
    probe('clone3', 'clone3', NULL, 0)                          # kernel: EINVAL (size 0)
    probe('add_key', 'add_key', NULL, NULL, NULL, 0, 0)
    probe('request_key', 'request_key', NULL, NULL, NULL, 0)
    probe('keyctl', 'keyctl', 0, -3, 0)                         # KEYCTL_GET_KEYRING_ID session
    probe('bpf', 'bpf', 5, NULL, 0)                             # BPF_PROG_LOAD, no attr
    probe('perf_event_open', 'perf_event_open', NULL, 0, -1, -1, 0)
    probe('userfaultfd', 'userfaultfd', 0, close=True)
    probe('io_uring_setup', 'io_uring_setup', 0, NULL)
    probe('io_uring_enter', 'io_uring_enter', -1, 0, 0, 0, NULL, 0)
    probe('io_uring_register', 'io_uring_register', -1, 0, NULL, 0)

    # Mount: EROFS.
    probe('mount', 'mount', NULL, NULL, NULL, 0, NULL)
    probe('umount2', 'umount2', NULL, 0)
    probe('pivot_root', 'pivot_root', NULL, NULL)
    probe('move_mount', 'move_mount', -1, NULL, -1, NULL, 0)
    probe('open_tree', 'open_tree', -1, NULL, 0)
    probe('fsopen', 'fsopen', NULL, 0)
    probe('fsconfig', 'fsconfig', -1, 0, NULL, NULL, 0)
    probe('fsmount', 'fsmount', -1, 0, 0)
    probe('fspick', 'fspick', -1, NULL, 0)
    probe('mount_setattr', 'mount_setattr', -1, NULL, 0, NULL, 0)

    # Host: EACCES.
    probe('kexec_load', 'kexec_load', 0, 0, NULL, 0)
    probe('kexec_file_load', 'kexec_file_load', -1, -1, 0, NULL, 0)
    probe('init_module', 'init_module', NULL, 0, NULL)
    probe('finit_module', 'finit_module', -1, NULL, 0)
    probe('delete_module', 'delete_module', NULL, 0)
    probe('reboot', 'reboot', 0, 0, 0, NULL)                    # bad magic
    probe('swapon', 'swapon', NULL, 0)
    probe('swapoff', 'swapoff', NULL)
    probe('settimeofday', 'settimeofday', NULL, NULL)
    probe('clock_settime', 'clock_settime', 0, NULL)
    probe('adjtimex', 'adjtimex', NULL)
    probe('clock_adjtime', 'clock_adjtime', 0, NULL)
    probe('acct', 'acct', NULL)
    probe('syslog', 'syslog', 10, NULL, 0)                      # SYSLOG_ACTION_SIZE_BUFFER
    probe('quotactl', 'quotactl', 0, NULL, 0, NULL)
    probe('quotactl_fd', 'quotactl_fd', -1, 0, 0, NULL)
    probe('open_by_handle_at', 'open_by_handle_at', -1, NULL, 0)
    probe('name_to_handle_at', 'name_to_handle_at', -1, NULL, NULL, NULL, 0)
    probe('iopl', 'iopl', 0)
    probe('ioperm', 'ioperm', 0, 0, 0)
    probe('vhangup', 'vhangup')
    probe('lookup_dcookie', 'lookup_dcookie', 0, NULL, 0)
    probe('nfsservctl', 'nfsservctl', 0, NULL, NULL)
    probe('uselib', 'uselib', NULL)
    probe('sysfs', 'sysfs', 3)                                  # number of filesystem types
    probe('ustat', 'ustat', 0, NULL)
    probe('_sysctl', '_sysctl', NULL)

    # Personality: EINVAL beyond ADDR_NO_RANDOMIZE; these change only this process's persona.
    probe('personality:READ_IMPLIES_EXEC', 'personality', READ_IMPLIES_EXEC)
    probe('personality:ADDR_COMPAT_LAYOUT', 'personality', ADDR_COMPAT_LAYOUT)
    probe('personality:query', 'personality', 0xffffffff)
    probe('personality:high', 'personality', HIGH)              # the kernel would read 0 (PER_LINUX)
    probe('personality:ADDR_NO_RANDOMIZE', 'personality', ADDR_NO_RANDOMIZE)
    probe('personality:PER_LINUX32', 'personality', 0x0008)
    probe('personality:UNAME26', 'personality', 0x0020000)
    probe('personality:PER_LINUX', 'personality', 0)

    # Terminal: EIO, whatever the high half of the command. Without the filter the kernel
    # says ENOTTY: the standard input of an exec is not a terminal.
    probe('ioctl:TIOCSTI', 'ioctl', 0, TIOCSTI, NULL)
    probe('ioctl:TIOCSTI|high', 'ioctl', 0, TIOCSTI | HIGH, NULL)
    probe('ioctl:TIOCSTI|ffff', 'ioctl', 0, TIOCSTI | 0xffffffff00000000, NULL)
    probe('ioctl:TIOCLINUX', 'ioctl', 0, TIOCLINUX, NULL)
    probe('ioctl:TIOCLINUX|high', 'ioctl', 0, TIOCLINUX | HIGH, NULL)
    r, w = os.pipe()
    probe('ioctl:FIONREAD', 'ioctl', r, FIONREAD, ctypes.byref(ctypes.c_int()))

    # Socket: EAFNOSUPPORT for what the table names; the rest must work.
    probe('socket:AF_PACKET', 'socket', AF_PACKET, SOCK_RAW, 0, close=True)
    probe('socket:AF_PACKET/dgram', 'socket', AF_PACKET, SOCK_DGRAM, 0, close=True)
    probe('socket:AF_UNSPEC', 'socket', 0, SOCK_STREAM, 0, close=True)
    probe('socket:AF_AX25', 'socket', 3, SOCK_DGRAM, 0, close=True)
    probe('socket:AF_APPLETALK', 'socket', 5, SOCK_DGRAM, 0, close=True)
    probe('socket:AF_IPX', 'socket', 4, SOCK_DGRAM, 0, close=True)
    probe('socket:AF_BRIDGE', 'socket', 7, SOCK_DGRAM, 0, close=True)
    probe('socket:AF_ATMPVC', 'socket', 8, SOCK_DGRAM, 0, close=True)
    probe('socket:AF_X25', 'socket', 9, SOCK_STREAM, 0, close=True)
    probe('socket:AF_ROSE', 'socket', 11, SOCK_DGRAM, 0, close=True)
    probe('socket:AF_DECnet', 'socket', 12, SOCK_STREAM, 0, close=True)
    probe('socket:AF_KEY', 'socket', 15, SOCK_RAW, 2, close=True)
    probe('socket:AF_ALG', 'socket', 38, 5, 0, close=True)     # SOCK_SEQPACKET
    probe('socket:AF_VSOCK', 'socket', 40, SOCK_STREAM, 0, close=True)
    probe('socket:AF_BLUETOOTH', 'socket', 31, SOCK_RAW, 0, close=True)
    probe('socket:AF_INET|high', 'socket', AF_INET | HIGH, SOCK_STREAM, 0, close=True)
    probe('socket:AF_NETLINK/AUDIT', 'socket', AF_NETLINK, SOCK_RAW, NETLINK_AUDIT, close=True)
    probe('socket:AF_NETLINK/UEVENT', 'socket', AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT, close=True)
    probe('socket:AF_NETLINK/4', 'socket', AF_NETLINK, SOCK_RAW, 4, close=True)  # NETLINK_SOCK_DIAG
    probe('socket:AF_NETLINK/ROUTE|high', 'socket', AF_NETLINK, SOCK_RAW, NETLINK_ROUTE | HIGH, close=True)
    probe('socketpair:AF_PACKET', 'socketpair', AF_PACKET, SOCK_DGRAM, 0, NULL)
    probe('socketpair:AF_APPLETALK', 'socketpair', 5, SOCK_DGRAM, 0, NULL)
    probe('socket:AF_NETLINK/ROUTE', 'socket', AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, close=True)
    probe('socket:AF_UNIX', 'socket', AF_UNIX, SOCK_STREAM, 0, close=True)
    probe('socket:AF_INET', 'socket', AF_INET, SOCK_STREAM, 0, close=True)
    probe('socket:AF_INET6', 'socket', AF_INET6, SOCK_DGRAM, 0, close=True)
    fds = (ctypes.c_int * 2)()
    probe('socketpair:AF_UNIX', 'socketpair', AF_UNIX, SOCK_STREAM, 0, fds)

    # Allowed neighbours of refused calls.
    probe('unshare:0', 'unshare', 0)
    raw_clone('clone:plain', 0)

    foreign_abis()

    print(json.dumps(results))


if __name__ == '__main__':
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.stdout.flush()
    main()
