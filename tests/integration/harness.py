#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A real systemd, a real system bus and a running sandboxd, for tests and tools.

When PID 1 is systemd and we are root, that systemd is used: sandboxd.service and
sandbox.slice go to /run/systemd/system, the bus policy to /etc/dbus-1/system.d, and all
of it is removed again afterwards.

Otherwise systemd is booted as PID 1 of a new PID + mount namespace, as
/work/shared/MACHINE.md shows, with these additions, all confined to that namespace:
  - private tmpfs on /tmp and /run (else systemd-tmpfiles empties the host's /tmp, and
    two systemds would share /run/systemd and /run/dbus);
  - a tmpfs over /var/log/journal and a volatile journal (else two journalds write one
    file), timers.target masked (no apt/fstrim/tmpfiles-clean runs on the host's disks),
    and the tmpfiles.d lines that remove files outside /run and /tmp filtered out;
  - its own top-level cgroup, named like its work directory, so that it and any other
    namespace systemd on the machine never manage the same cgroup paths.
The bus policy is bind-mounted over /etc/dbus-1/system.d inside the namespace only.

A test system is hermetic against a sandboxd installed on this machine (tools/quickstart,
the packages) and its running services:
  - it sees none of that install's files: the directories where units, bus policy and
    activation files, polkit actions and rules, tmpfiles.d and sysusers.d entries live are
    replaced, in its mount namespace, by copies without sandboxd's entries, and sandboxd's
    own directories (/etc/sandboxd, /var/lib/sandboxd, /usr/lib/sandboxd, …) by empty ones:
    it sees only the build tree's units and files, which install() puts in its /run;
  - it has a network namespace of its own (loopback only), and the test process joins it
    once the system is up (join_network()), so that whatever the tests and the system bind
    (the bridge's ports, servers of the tests) never meets the host's ports, e.g. an
    installed bridge on 127.0.0.1:8347. What needs the host's network (npm ci of a test's
    SDK) runs through host_network(). The persistent system of tools/quickstart is the
    install itself: it keeps the host's files and network.

Library use (tests/integration/test_core.py, bench/bench.py):
    system = harness.acquire()        # boot + install + start sandboxd (or reuse)
    system.run([...]) / system.sandboxctl(...) / system.busctl(...)
    harness.release()                 # stop, check for leftovers, kill, clean up
    other = harness.boot_extra(cgroup='unified')   # a second system, systemd in cgroup-v2-only
    other.teardown()                                # mode (FreezeUnit works there)

Command line (tools/quickstart):
    harness.py boot      boot a persistent namespace systemd; prints its PID
    harness.py boot --daemon   … and start sandboxd from the build dir in it (debugging)
    harness.py find      prints the PIDs of such systemds still running
    harness.py stop PID  kill such a systemd and remove its cgroup and work directory
    harness.py mode      prints "host" or "namespace"

Paths come from the environment that meson's test() sets (see tests/meson.build):
SANDBOXD_SOURCE_DIR, SANDBOXD_BUILD_DIR, SANDBOXD_BIN, SANDBOXCTL_BIN, SANDBOX_INIT_BIN, SANDBOX_RUN_BIN,
SANDBOXD_UNITS_DIR, SANDBOXD_TEMPLATES_DIR; by default <repo>/build. Other knobs:
SANDBOXD_TEST_MODE=host|namespace, SANDBOXD_TEST_TMPDIR (default /var/tmp),
SANDBOXD_TEST_KEEP=1 (keep the work directory), SANDBOXD_BWRAP.

Docker (tests/integration/test_docker.py, bench/bench_docker.py): acquire() also starts a
dockerd of its own inside the system (nsenter, like every command here; --iptables=false
--bridge=none), its data root in the work directory and its socket and exec root in the
system's /run (the daemon's PrivateTmp= hides /var/tmp from it), builds DOCKER_IMAGE with
tools/build-image busybox, passes --docker-socket= to sandboxd and adds a template
directory of the harness's own (DOCKER_MISSING_TEMPLATE: an image that does not exist).
system.docker_unavailable says why Docker is not there (docker.io not installed, dockerd
did not start); SANDBOXD_TEST_DOCKER=0 skips it all, SANDBOXD_TEST_DOCKER_CGROUP_DRIVER=
systemd runs dockerd with the systemd cgroup driver instead of cgroupfs.
"""

import atexit
import ctypes
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import varlinkprobe  # noqa: E402

SYSTEMD = '/lib/systemd/systemd'
CGROUP_FS = '/sys/fs/cgroup'
NS_PREFIXES = ('sandboxd-test-', 'sandboxd-ns-', 'sandboxd-pkg-')
BUS_NAME = 'io.sandboxd.Sandbox1'
MANAGER_PATH = '/io/sandboxd/Sandbox1'
MANAGER_IFACE = 'io.sandboxd.Sandbox1.Manager'
SANDBOX_IFACE = 'io.sandboxd.Sandbox1.Sandbox'
VARLINK_SOCKET = '/run/sandboxd/io.sandboxd.Sandbox'  # sandboxd-varlink.socket's, in the system
VARLINK_IFACE = 'io.sandboxd.Sandbox'
VARLINK_UNIT = 'sandboxd-varlink.socket'
HTTP_UNIX_SOCKET = '/run/sandboxd/http.sock'        # sandboxd-http.socket's, in the system
HTTP_TOKENS_DIR = '/run/sandboxd-http-test-tokens'  # the test bridge's --tokens-dir, in the system
HTTP_CONFIG = '/run/sandboxd-http-test.conf'        # … and its --config (absent: the defaults)
SANITIZER_VARS = ('ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS')
MARKER = '# written by tests/integration/harness.py; removed when the tests end'
DOCKER_IMAGE = 'sandboxd-busybox:latest'          # what templates/docker-busybox.json names
DOCKER_TEMPLATE = 'docker-busybox'
POOLED_TEMPLATE = 'pooled-shell'
DOCKER_MISSING_TEMPLATE = 'docker-missing-image'  # in the harness's own template directory
DOCKER_MISSING_IMAGE = 'sandboxd-test-no-such-image:latest'
DOCKER_LABEL = 'io.sandboxd.id'
# The sub-slices of sandbox.slice that scopes are spread over (sandbox_subslice_name()).
SUBSLICE_RE = re.compile(r'sandbox-[0-9a-f]{2}\.slice')


# Runs as the new namespace's PID 1 until it execs systemd. $1: files to seed /run with,
# $4: the harness's work directory, $2: name of the cgroup to move into, $3: empty, or the options of the host's cgroup2
# mount, to boot in unified mode: cgroup2 alone on /sys/fs/cgroup, in this namespace only
# (the same options, as a cgroup2 mount sets its hierarchy-wide flags such as nsdelegate);
# $5: empty, or another root directory to boot the systemd of (pivot_root);
# $6: empty, or a file of lines "SOURCE TARGET" (bind SOURCE over TARGET) and "- TARGET" (an
# empty tmpfs over TARGET): what hides a system-wide install of sandboxd (hermetic_view()).
BOOT_SCRIPT = r'''
set -e
R=${5:-}
if [ -n "${6:-}" ]; then
        while read -r src dst; do
                if [ "$src" = - ]; then
                        mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$dst"
                else
                        mount --bind "$src" "$dst"
                fi
        done <"$6"
fi
# A network namespace of its own starts with loopback down (a no-op in the host's).
ip link set lo up 2>/dev/null || true
if [ -n "$R" ]; then
        # Another root (tools/test-packages: a fresh Debian with only the package installed):
        # the host's /sys and /dev bound in, as they are for the host's root below. It is
        # bound onto itself first: services' mount namespaces need their root a mount point.
        mount --bind "$R" "$R"
        mount --rbind /sys "$R/sys"
        mount --rbind /dev "$R/dev"
fi
mount -t proc proc "$R/proc"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$R/tmp"
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$R/run"
if [ -d "$R/var/log/journal" ]; then
        mount -t tmpfs -o mode=2755,nosuid,nodev tmpfs "$R/var/log/journal"
fi
if [ -n "$R" ]; then
        mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$R/var/tmp"
else
        # A private /var/tmp as well (services' PrivateTmp= directories go there), with this
        # harness's own work directory $4 bound back in at the same path.
        mkdir /tmp/.harness-work
        mount --bind "$4" /tmp/.harness-work
        mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /var/tmp
        mkdir -p "$4"
        mount --bind /tmp/.harness-work "$4"
        umount /tmp/.harness-work
        rmdir /tmp/.harness-work
fi
cp -a "$1"/. "$R/run/"
for h in /sys/fs/cgroup/* /sys/fs/cgroup; do
        [ ! -L "$h" ] && [ -f "$h/cgroup.procs" ] || continue
        case "$h" in */cpuset) continue ;; esac
        if mkdir -p "$h/$2" && echo 0 >"$h/$2/cgroup.procs"; then
                :
        else
                case "$h" in */systemd|*/unified|/sys/fs/cgroup) exit 1 ;; esac
        fi
done
if [ -n "$R" ]; then
        # pivot_root, not chroot: a chrooted process may not make user namespaces (bwrap).
        mkdir -p "$R/.harness-oldroot"
        cd "$R"
        pivot_root . .harness-oldroot
        cd /
        umount -l /.harness-oldroot
        rmdir /.harness-oldroot
fi
boot='exec env -i container=unshare /lib/systemd/systemd --system --unit=basic.target'
if [ -n "$3" ]; then
        # A cgroup namespace rooted at $2, and cgroup2 mounted from inside it: systemd sees
        # its own init.scope at /sys/fs/cgroup/init.scope, which is where systemd 252 looks
        # to decide whether units can be frozen at all.
        exec unshare --cgroup sh -c 'umount -l /sys/fs/cgroup && mount -t cgroup2 -o "$1" cgroup2 /sys/fs/cgroup && '"$boot" sh "$3"
fi
eval "$boot"
'''


class Unavailable(Exception):
    """A component the tests need is missing or cannot start (skip, or fail under CI)."""


class HarnessError(Exception):
    """The harness itself failed to bring the system up or down."""


def log(msg):
    print(f'harness: {msg}', file=sys.stderr, flush=True)


def _systemd_quote(s):
    s = s.replace('%', '%%')
    if re.search(r'[\s"\\\']', s):
        return '"' + s.replace('\\', '\\\\').replace('"', '\\"') + '"'
    return s


class Paths:
    """Where the things under test are: the build dir, or what meson told us."""

    def __init__(self):
        here = os.path.dirname(os.path.abspath(__file__))
        env = os.environ.get
        self.source = os.path.abspath(env('SANDBOXD_SOURCE_DIR') or os.path.join(here, '..', '..'))
        self.build = os.path.abspath(env('SANDBOXD_BUILD_DIR') or os.path.join(self.source, 'build'))
        self.sandboxd = env('SANDBOXD_BIN') or os.path.join(self.build, 'src/sandboxd/sandboxd')
        self.sandboxctl = env('SANDBOXCTL_BIN') or os.path.join(self.build, 'src/sandboxctl/sandboxctl')
        self.sandbox_init = env('SANDBOX_INIT_BIN') or os.path.join(self.build, 'src/sandbox-init/sandbox-init')
        self.sandbox_run = env('SANDBOX_RUN_BIN') or os.path.join(self.build, 'src/sandbox-run/sandbox-run')
        self.sandboxd_http = env('SANDBOXD_HTTP_BIN') or os.path.join(self.build, 'src/sandboxd-http/sandboxd-http')
        self.sandboxd_workspace = env('SANDBOXD_WORKSPACE_BIN') or os.path.join(
            self.build, 'src/sandboxd-workspace/sandboxd-workspace')
        self.units = env('SANDBOXD_UNITS_DIR') or os.path.join(self.build, 'units')
        self.templates = env('SANDBOXD_TEMPLATES_DIR') or os.path.join(self.source, 'templates')
        self.policy = os.path.join(self.source, 'dbus', 'io.sandboxd.Sandbox1.conf')
        self.activation = os.path.join(self.source, 'dbus', 'io.sandboxd.Sandbox1.service')
        self.slice = os.path.join(self.source, 'units', 'sandbox.slice')
        self.varlink_socket_unit = os.path.join(self.source, 'units', VARLINK_UNIT)
        self.service_in = os.path.join(self.source, 'units', 'sandboxd.service.in')
        self.bwrap = env('SANDBOXD_BWRAP') or shutil.which('bwrap') or '/usr/bin/bwrap'
        # Commands run through nsenter -m start in the namespace's /, not in our cwd.
        for attr in ('sandboxd', 'sandboxctl', 'sandbox_init', 'sandbox_run', 'sandboxd_http', 'sandboxd_workspace',
                     'units', 'templates', 'bwrap'):
            setattr(self, attr, os.path.abspath(getattr(self, attr)))

    def service_text(self):
        built = os.path.join(self.units, 'sandboxd.service')
        if os.path.exists(built):
            with open(built) as f:
                return f.read()
        # Not configured yet (running by hand): ExecStart is overridden by the drop-in.
        with open(self.service_in) as f:
            return f.read().replace('@sbindir@', os.path.dirname(self.sandboxd))

    def unit_text(self, name):
        """A unit as built (its ExecStart is overridden by a drop-in)."""
        built = os.path.join(self.units, name)
        if os.path.exists(built):
            with open(built) as f:
                return f.read()
        with open(os.path.join(self.source, 'units', name + '.in')) as f:
            return f.read().replace('@sbindir@', os.path.dirname(self.sandboxd))

    def http_service_text(self):
        """sandboxd-http.service as built (its ExecStart is overridden by the drop-in)."""
        built = os.path.join(self.units, 'sandboxd-http.service')
        if os.path.exists(built):
            with open(built) as f:
                return f.read()
        with open(os.path.join(self.source, 'units', 'sandboxd-http.service.in')) as f:
            return f.read().replace('@libexecdir@', '/usr/libexec')

    def http_sanitized(self):
        """Whether sandboxd-http is built with AddressSanitizer."""
        return self.sanitized(self.sandboxd_http)

    @staticmethod
    def sanitized(binary):
        """Whether BINARY is built with AddressSanitizer."""
        cp = subprocess.run(['ldd', binary], capture_output=True, text=True)
        return 'libasan' in cp.stdout

    def missing(self, daemon=True):
        """Names of the components that are absent, for a clear skip or failure."""
        out = []
        for tool in ('unshare', 'nsenter', 'systemctl', 'busctl', 'journalctl', 'mount'):
            if not shutil.which(tool):
                out.append(f'{tool} (util-linux/systemd)')
        if not os.access(self.bwrap, os.X_OK):
            out.append(f'bwrap ({self.bwrap}; package bubblewrap)')
        if detect_mode() == 'namespace' and not os.access(SYSTEMD, os.X_OK):
            out.append(f'systemd ({SYSTEMD}; package systemd)')
        if not shutil.which('dbus-daemon') and not shutil.which('dbus-broker'):
            out.append('dbus-daemon (package dbus)')
        # bwrap runs as each sandbox's unprivileged uid and needs user namespaces.
        for knob, path in (('kernel.unprivileged_userns_clone', '/proc/sys/kernel/unprivileged_userns_clone'),
                           ('user.max_user_namespaces', '/proc/sys/user/max_user_namespaces')):
            try:
                with open(path) as f:
                    if f.read().strip() == '0':
                        out.append(f'unprivileged user namespaces ({knob} is 0; sysctl -w {knob}=... to allow them)')
            except OSError:
                pass
        if daemon:
            for p in (self.sandboxd, self.sandboxctl, self.sandbox_init):
                if not os.access(p, os.X_OK):
                    out.append(f'{p} (not built)')
            for p in (self.policy, self.slice, self.varlink_socket_unit, self.templates):
                if not os.path.exists(p):
                    out.append(p)
        return out


def detect_mode():
    forced = os.environ.get('SANDBOXD_TEST_MODE')
    if forced in ('host', 'namespace'):
        return forced
    try:
        with open('/proc/1/comm') as f:
            pid1 = f.read().strip()
    except OSError:
        pid1 = ''
    return 'host' if pid1 == 'systemd' and os.geteuid() == 0 else 'namespace'


def _children(pid):
    try:
        with open(f'/proc/{pid}/task/{pid}/children') as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        pass
    kids = []
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        try:
            with open(f'/proc/{d}/stat') as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(')', 1)[1].split()[1]) == pid:
            kids.append(int(d))
    return kids


def _comm(pid):
    try:
        with open(f'/proc/{pid}/comm') as f:
            return f.read().strip()
    except OSError:
        return None


def _alive(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def _cgroup_root_of(pid):
    """The top-level cgroup a namespace systemd was put in, from its name=systemd line."""
    with open(f'/proc/{pid}/cgroup') as f:
        lines = f.read().splitlines()
    for want in (':name=systemd:', '0::'):
        for line in lines:
            if want in line or line.startswith(want):
                path = line.split(':', 2)[2].strip('/')
                top = path.split('/')[0]
                if top.startswith(NS_PREFIXES):
                    return top
    return None


def _remove_cgroups(name, timeout=15):
    """rmdir the cgroup subtree NAME (ours) in every hierarchy, deepest first."""
    if not name or '/' in name or not name.startswith(NS_PREFIXES):
        return []
    left = []
    deadline = time.monotonic() + timeout
    for h in sorted(os.listdir(CGROUP_FS)) + ['.']:
        top = os.path.join(CGROUP_FS, h, name)
        if os.path.islink(os.path.join(CGROUP_FS, h)) or not os.path.isdir(top):
            continue
        while True:
            for dirpath, _dirs, _files in os.walk(top, topdown=False):
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass
            if not os.path.exists(top) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if os.path.exists(top):
            left.append(top)
    return left


def _pid_identity(pid):
    """What tells a process apart from a later one with the same pid: its pid namespace as
    seen from here, and its start time."""
    with open(f'/proc/{pid}/stat') as f:
        start = f.read().rsplit(')', 1)[1].split()[19]
    return f'{os.readlink("/proc/self/ns/pid")} {start}'


def sweep_stale(tmp=None):
    """Remove what a harness killed by SIGKILL left: work directories whose systemd is dead
    and their cgroups. Judged only from the pid namespace the pid was recorded in; work
    directories without a recorded pid may be booting right now and are left alone."""
    tmp = tmp or os.environ.get('SANDBOXD_TEST_TMPDIR', '/var/tmp')
    ours = os.readlink('/proc/self/ns/pid')
    for name in sorted(os.listdir(tmp)):
        if not name.startswith(NS_PREFIXES):
            continue
        try:
            with open(os.path.join(tmp, name, 'systemd.pid')) as f:
                pid, pidns, start = f.read().split()
        except (OSError, ValueError):
            continue
        if pidns != ours:
            continue
        try:
            if _pid_identity(int(pid)) == f'{pidns} {start}' and _alive(int(pid)):
                continue
        except OSError:
            pass
        log(f'removing leftovers of a dead test system: {os.path.join(tmp, name)}')
        _remove_cgroups(name, timeout=2)
        shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


def _pdeathsig_kill():
    """preexec: our child gets SIGKILL when we die, however we die."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _tmpfiles_seed(dest):
    """tmpfiles.d overrides (/run has priority) without lines that delete or replace
    files outside /run and /tmp, which are private; everything else stays as shipped."""
    os.makedirs(dest, exist_ok=True)
    for d in ('/usr/lib/tmpfiles.d', '/lib/tmpfiles.d', '/etc/tmpfiles.d'):
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if not name.endswith('.conf') or _installed_entry(name):
                continue
            try:
                with open(os.path.join(d, name)) as f:
                    lines = f.read().splitlines()
            except OSError:
                continue
            keep, dropped = [], False
            for line in lines:
                fields = line.split()
                if fields and not line.lstrip().startswith('#') and len(fields) >= 2:
                    kind, path = fields[0], fields[1]
                    private = path.startswith(('/run/', '/tmp/', '/dev/')) or path in ('/run', '/tmp')
                    if not private and (kind[0] in 'rRD' or '+' in kind):
                        dropped = True
                        continue
                keep.append(line)
            if dropped:
                with open(os.path.join(dest, name), 'w') as f:
                    f.write('# filtered by tests/integration/harness.py\n' + '\n'.join(keep) + '\n')


# Where a system-wide install of sandboxd puts files that a booted systemd, its bus or
# polkit read: their sandboxd entries are hidden from test systems (hermetic_view()).
SHARED_DIRS = ('/etc/systemd/system', '/lib/systemd/system', '/usr/lib/systemd/system',
               '/usr/local/lib/systemd/system', '/etc/dbus-1/system.d', '/usr/share/dbus-1/system.d',
               '/usr/share/dbus-1/system-services', '/usr/local/share/dbus-1/system.d',
               '/usr/local/share/dbus-1/system-services', '/etc/polkit-1/rules.d',
               '/usr/share/polkit-1/actions', '/usr/share/polkit-1/rules.d', '/usr/local/share/polkit-1/actions',
               '/usr/local/share/polkit-1/rules.d', '/usr/lib/tmpfiles.d', '/etc/tmpfiles.d',
               '/usr/local/lib/tmpfiles.d', '/usr/lib/sysusers.d', '/etc/sysusers.d', '/usr/local/lib/sysusers.d')
# … and sandboxd's own directories, replaced by empty ones.
OWN_DIRS = ('/etc/sandboxd', '/var/lib/sandboxd', '/usr/lib/sandboxd', '/usr/libexec/sandboxd',
            '/usr/local/lib/sandboxd', '/usr/local/libexec/sandboxd')


def _installed_entry(name):
    """Whether a directory entry is one a sandboxd install makes (units, their enablement
    links and drop-in directories, io.sandboxd.* policies, sandboxd*.conf)."""
    return name.startswith(('sandbox', 'io.sandboxd.'))


def hermetic_view(workdir):
    """Lines for BOOT_SCRIPT's $6 that hide a system-wide sandboxd install from a test
    system; [] when nothing of one is on this machine."""
    lines, seen = [], set()
    for d in SHARED_DIRS:
        real = os.path.realpath(d)
        if real in seen or not os.path.isdir(real):
            continue
        seen.add(real)
        hits = [os.path.join(dirpath, n) for dirpath, dirs, files in os.walk(real)
                for n in dirs + files if _installed_entry(n)]
        if not hits:
            continue
        copy = os.path.join(workdir, 'hermetic', real.strip('/').replace('/', '_'))
        shutil.copytree(real, copy, symlinks=True,
                        ignore=lambda _dir, names: [n for n in names if _installed_entry(n)])
        lines.append(f'{copy} {real}')
        log(f'hiding from the test system what a sandboxd install put in {real}: '
            + ', '.join(os.path.relpath(h, real) for h in hits[:6]) + (' …' if len(hits) > 6 else ''))
    for d in OWN_DIRS:
        if os.path.isdir(d) and os.path.realpath(d) not in seen:
            seen.add(os.path.realpath(d))
            lines.append(f'- {os.path.realpath(d)}')
            log(f'hiding {d} from the test system (an empty directory in its place)')
    return lines


_host_netns = None   # an fd of the network namespace this process had before join_network()


def join_network(system):
    """Moves this (single-threaded so far) process into SYSTEM's network namespace, so that
    the tests reach what binds in it on its loopback. setns() applies to the calling thread,
    and threads and children made afterwards inherit it."""
    global _host_netns
    if _host_netns is not None:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    host = os.open('/proc/self/ns/net', os.O_RDONLY | os.O_CLOEXEC)
    fd = os.open(f'/proc/{system.pid}/ns/net', os.O_RDONLY | os.O_CLOEXEC)
    try:
        if libc.setns(fd, 0x40000000) != 0:   # CLONE_NEWNET
            err = ctypes.get_errno()
            os.close(host)
            raise HarnessError(f'cannot join the test system\'s network namespace: {os.strerror(err)}')
    finally:
        os.close(fd)
    _host_netns = host
    log(f'this process now uses the network namespace of systemd {system.pid} (loopback only)')


def host_network(argv):
    """ARGV run in the host's network namespace (e.g. npm ci, which needs the registry),
    when this process has joined a test system's."""
    if _host_netns is None:
        return list(argv)
    return ['nsenter', f'--net=/proc/{os.getpid()}/fd/{_host_netns}', '--'] + list(argv)


class System:
    """One systemd (the host's or a namespace's) with sandboxd installed into it."""

    def __init__(self, paths=None, mode=None, persistent=False, prefix='sandboxd-test-', cgroup=None,
                 rootdir=None, private_network=None, workspace_dir=None):
        self.paths = paths or Paths()
        # A network namespace of its own (a namespace system only): by default, every system
        # but the persistent one of tools/quickstart, which serves this machine.
        self.private_network = (not persistent) if private_network is None else private_network
        # rootdir: boot the systemd of that root instead (the namespace's root; boot() only:
        # nothing of the build directory is installed there).
        self.rootdir = rootdir
        self.mode = 'namespace' if rootdir else (mode or detect_mode())
        self.persistent = persistent
        # None: systemd's own choice (hybrid on a hybrid host); 'unified': cgroup v2 only.
        self.cgroup = cgroup
        tmp = os.environ.get('SANDBOXD_TEST_TMPDIR', '/var/tmp')
        self.workdir = tempfile.mkdtemp(prefix=prefix, dir=tmp)
        os.chmod(self.workdir, 0o755)
        self.name = os.path.basename(self.workdir)
        # Inside the system under test: the unit's own RuntimeDirectory (ProtectSystem=strict).
        self.state_dir = '/run/sandboxd-test-state'
        # The workspace pool (sandboxd-workspaces.service): on the host's disk, outlives a
        # reboot of the system under test (as /var/lib does), removed at teardown. Not
        # under /var/tmp, which the units' PrivateTmp= hides.
        self.workspace_dir = workspace_dir or f'/var/lib/{self.name}-workspaces'
        # One given is the caller's to remove (it outlives this system: a reboot).
        self.own_workspaces = workspace_dir is None
        self.pid = None            # host pid of the namespace's systemd
        self.unshare = None        # our Popen of unshare
        self.root = ''             # prefix to reach the system's files from here
        self.installed = []        # host-mode files to remove
        self.daemon_started = False
        self.host_daemon_was_active = False
        self.host_socket_was_active = False
        self.torn_down = False
        # Docker: a dockerd of our own in the system. Its socket and exec root live in the
        # system's /run (sandboxd's PrivateTmp= hides the work directory under /var/tmp).
        rundir = f'/run/{self.name}-docker'
        self.docker_rundir = rundir
        self.docker_socket = os.path.join(rundir, 'docker.sock')
        self.docker_host = 'unix://' + self.docker_socket
        self.docker_data = os.path.join(self.workdir, 'docker-data')
        self.extra_templates = os.path.join(rundir, 'templates')
        self.docker_proc = None    # our Popen of (nsenter …) dockerd
        self.docker_pid = None     # host pid of dockerd
        self.docker_unavailable = 'not started'
        self.mariadb = None        # start_mariadb()

    # ---- running things ---------------------------------------------------------------

    def wrap(self, cmd):
        if self.mode == 'namespace':
            # Another root: its root and working directory too.
            chroot = ['-r', '-w'] if self.rootdir else []
            return ['nsenter', '-t', str(self.pid), '-m', '-p'] + chroot + ['--'] + list(cmd)
        return list(cmd)

    def run(self, cmd, input=None, timeout=60, check=False, env=None):
        """Run CMD on the system; returns CompletedProcess with text stdout/stderr.
        On timeout the whole process group is killed and TimeoutExpired raised."""
        full_env = dict(os.environ, SYSTEMD_PAGER='', PAGER='cat', SYSTEMD_COLORS='0',
                        LC_ALL='C.UTF-8')
        full_env.pop('NOTIFY_SOCKET', None)
        if env:
            full_env.update(env)
        p = subprocess.Popen(self.wrap(cmd), stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env,
                             start_new_session=True)
        try:
            out, err = p.communicate(input=input.encode() if isinstance(input, str) else input,
                                     timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = p.communicate()
            raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err)
        cp = subprocess.CompletedProcess(cmd, p.returncode, out.decode(errors='replace'),
                                         err.decode(errors='replace'))
        if check and cp.returncode != 0:
            raise HarnessError(f'{shlex.join(cmd)} failed ({cp.returncode}):\n{cp.stdout}{cp.stderr}')
        return cp

    def sandboxctl(self, *args, **kw):
        return self.run([self.paths.sandboxctl] + list(args), **kw)

    def busctl(self, *args, **kw):
        return self.run(['busctl', '--system', '--no-pager'] + list(args), **kw)

    def bus_call(self, *args, timeout=60, as_json=True):
        """busctl call ARGS. Returns (CompletedProcess, data, error_name): data is the
        reply's JSON "data" list, error_name the D-Bus error's name (busctl itself prints
        only the message; its debug log shows the name)."""
        cmd = ['busctl', '--system', '--no-pager'] + (['--json=short'] if as_json else []) + ['call', '--']
        cp = self.run(cmd + list(args), env={'SYSTEMD_LOG_LEVEL': 'debug'}, timeout=timeout)
        error = None
        for line in cp.stderr.splitlines():
            m = re.match(r'Got message type=error .*\berror-name=(\S+)', line)
            if m:
                error = m.group(1)
        data = None
        if cp.returncode == 0 and as_json and cp.stdout.strip():
            data = json.loads(cp.stdout)['data']
        return cp, data, error

    def varlink(self, timeout=120):
        """A varlinkprobe.Connection to sandboxd's varlink socket, from this (root) process:
        in namespace mode the socket is reached through /proc/PID/root."""
        return varlinkprobe.Connection(self.path(VARLINK_SOCKET), timeout=timeout)

    def varlink_call(self, method, parameters=None, more=False, timeout=120):
        """One call on a connection of its own: (replies, error name, error parameters)."""
        with self.varlink(timeout=timeout) as c:
            return c.call(f'{VARLINK_IFACE}.{method}' if '.' not in method else method, parameters, more=more)

    def systemctl(self, *args, **kw):
        return self.run(['systemctl', '--no-pager'] + list(args), **kw)

    def show(self, unit, *props):
        """systemctl show UNIT -p … as a dict."""
        args = ['show', unit]
        for p in props:
            args += ['-p', p]
        cp = self.systemctl(*args, check=True)
        return dict(line.split('=', 1) for line in cp.stdout.splitlines() if '=' in line)

    def journal(self, units=('sandboxd.service', 'sandboxd-workspace.service', 'sandbox-*.scope'), since=None):
        """The journal of sandboxd and of its sandboxes (bwrap and the agent log there)."""
        args = ['journalctl', '--no-pager', '-o', 'short-precise']
        for unit in units:
            args += ['-u', unit]
        if since:
            args += [f'--since=@{int(since) - 1}']
        try:
            cp = self.run(args, timeout=30)
            return cp.stdout + cp.stderr
        except Exception as e:  # a broken journal must not hide the test failure
            return f'(journalctl failed: {e})'

    def path(self, p):
        """P as seen by the system, reachable from here (namespace: through /proc/PID/root)."""
        return self.root + p

    def unit_pids(self, unit):
        """Host pids of every process in UNIT's cgroup and its sub-cgroups; None when it
        has no cgroup directory."""
        cg = self.show(unit, 'ControlGroup').get('ControlGroup')
        top = self.cgroup_dir(cg) if cg else None
        if not top or not os.path.isdir(top):
            return None
        pids = set()
        for dirpath, _dirs, _files in os.walk(top):
            try:
                with open(os.path.join(dirpath, 'cgroup.procs')) as f:
                    pids.update(int(p) for p in f.read().split())
            except OSError:
                pass
        return pids

    def sandbox_scopes(self, include_pool=False):
        """Units of sandboxes. The harness's pooled template keeps one sandbox started and
        hidden (test_pool); other tests do not count it unless asked. The sub-slices the
        scopes are spread over (sandbox-xx.slice) are no sandbox's: see subslices()."""
        cp = self.systemctl('list-units', '--all', '--plain', '--no-legend', 'sandbox-*.scope', 'sandbox-*.slice')
        units = []
        for line in cp.stdout.splitlines():
            if not line.strip() or SUBSLICE_RE.fullmatch(line.split()[0]):
                continue
            # UNIT LOAD ACTIVE SUB DESCRIPTION…: the description names the template.
            if not include_pool and line.rstrip().endswith(f'({POOLED_TEMPLATE})'):
                continue
            units.append(line.split()[0])
        return units

    RESTART_DROPIN = '/run/systemd/system/sandboxd.service.d/60-restart.conf'

    def daemon_restart_on_failure(self, on):
        """Restart=on-failure for sandboxd.service, as the shipped unit has it (systemd
        keeps the fd store across such a restart); off: the harness's Restart=no again, and
        the daemon started if it is not running."""
        if on:
            with open(self.path(self.RESTART_DROPIN), 'w') as f:
                f.write(MARKER + '\n[Service]\nRestart=on-failure\n')
        else:
            try:
                os.unlink(self.path(self.RESTART_DROPIN))
            except FileNotFoundError:
                pass
        self.systemctl('daemon-reload', check=True)
        if not on and self.systemctl('is-active', 'sandboxd.service').stdout.strip() != 'active':
            self.start_daemon()

    def kill9_daemon(self, timeout=30):
        """kill -9 sandboxd and wait for systemd to have restarted it (Restart=on-failure)
        and for the new one to answer on the bus."""
        pid = self.show('sandboxd.service', 'MainPID')['MainPID']
        self.run(['kill', '-KILL', pid], check=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.show('sandboxd.service', 'ActiveState', 'MainPID')
            if info['ActiveState'] == 'active' and info['MainPID'] not in ('0', pid) and \
                    self.busctl('call', BUS_NAME, MANAGER_PATH, 'org.freedesktop.DBus.Peer', 'Ping').returncode == 0:
                return
            time.sleep(0.1)
        raise HarnessError(f'sandboxd did not come back within {timeout}s after kill -9')

    def subslices(self):
        """{sub-slice: ActiveState} of the loaded sandbox-xx.slice units under sandbox.slice."""
        cp = self.systemctl('list-units', '--all', '--plain', '--no-legend', 'sandbox-??.slice')
        return {f[0]: f[2] for f in (line.split() for line in cp.stdout.splitlines())
                if len(f) >= 3 and SUBSLICE_RE.fullmatch(f[0])}

    def cgroup_dir(self, control_group):
        """Host directory of a unit's ControlGroup (as systemctl shows it) in the hierarchy
        systemd tracks processes with. A hybrid-mode system in a namespace shows the full
        path; a unified one runs in its own cgroup namespace, rooted at /<name>."""
        for h in (('unified', '') if self.cgroup == 'unified' else ('systemd', 'unified', '')):
            base = os.path.join(CGROUP_FS, h)
            if os.path.exists(os.path.join(base, 'cgroup.procs')):
                if self.cgroup == 'unified' and self.mode == 'namespace':
                    base = os.path.join(base, self.name)
                return os.path.join(base, control_group.lstrip('/')).rstrip('/')
        return None

    def docker(self, *args, **kw):
        """The docker CLI against the harness's dockerd."""
        return self.run(['docker'] + list(args), env={'DOCKER_HOST': self.docker_host}, **kw)

    def docker_containers(self, label=DOCKER_LABEL):
        """Names of all containers (also stopped ones) with LABEL."""
        cp = self.docker('ps', '-a', '--filter', f'label={label}', '--format', '{{.Names}}', timeout=30)
        if cp.returncode != 0:
            raise HarnessError(f'docker ps failed: {cp.stderr.strip()}')
        return cp.stdout.split()

    # ---- Docker ----------------------------------------------------------------------

    def start_docker(self, timeout=90):
        """Start dockerd inside the system and build DOCKER_IMAGE; raises Unavailable."""
        if os.environ.get('SANDBOXD_TEST_DOCKER') == '0':
            raise Unavailable('SANDBOXD_TEST_DOCKER=0')
        dockerd = shutil.which('dockerd', path='/usr/sbin:/usr/bin:/sbin:/bin')
        if not dockerd:
            raise Unavailable('dockerd is not installed (package docker.io)')
        if not shutil.which('docker'):
            raise Unavailable('the docker client is not installed (package docker.io)')
        if self.docker_proc is None:
            self._write_extra_templates()
        for d in (self.path(self.docker_rundir), self.docker_data):
            os.makedirs(d, exist_ok=True)
        argv = [dockerd, '--host', self.docker_host, '--data-root', self.docker_data,
                '--exec-root', os.path.join(self.docker_rundir, 'exec'),
                '--pidfile', os.path.join(self.docker_rundir, 'dockerd.pid'),
                '--iptables=false', '--ip6tables=false', '--bridge=none', '--ip-masq=false']
        if self.mode == 'namespace':
            # Containers not made by sandboxd (bench_docker's docker run) go below the
            # system's own top-level cgroup, not into the host's /docker.
            argv.append(f'--cgroup-parent=/{self.name}/docker')
        driver = os.environ.get('SANDBOXD_TEST_DOCKER_CGROUP_DRIVER')
        if driver:
            argv += ['--exec-opt', f'native.cgroupdriver={driver}']
        # dockerd dies with the nsenter we start (which dies with us).
        argv = ['setpriv', '--pdeathsig', 'KILL', '--'] + argv
        logf = open(os.path.join(self.workdir, 'dockerd.log'), 'ab')
        try:
            self.docker_proc = subprocess.Popen(
                self.wrap(argv), stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=_pdeathsig_kill)
        finally:
            logf.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.docker_pid is None:
                self.docker_pid = self._find_descendant(self.docker_proc.pid, 'dockerd')
            if self.docker_proc.poll() is not None:
                self.docker_proc = self.docker_pid = None
                raise Unavailable('dockerd exited at start:\n' + self.docker_log())
            cp = self.docker('info', '--format', '{{.ServerVersion}} {{.CgroupDriver}}', timeout=30)
            if cp.returncode == 0 and self.docker_pid:
                break
            if time.monotonic() > deadline:
                self.stop_docker()
                raise Unavailable(f'dockerd does not answer on {self.docker_socket}: {cp.stderr.strip()}\n'
                                  + self.docker_log())
            time.sleep(0.2)
        version, self.docker_cgroup_driver = cp.stdout.split()
        log(f'dockerd {version} ({self.docker_cgroup_driver} cgroup driver) is running as host pid '
            f'{self.docker_pid}, socket {self.docker_socket}')
        cp = self.docker('image', 'inspect', DOCKER_IMAGE, timeout=30)
        if cp.returncode != 0:
            tool = os.path.join(self.paths.source, 'tools', 'build-image')
            cp = self.run([tool, 'busybox', DOCKER_IMAGE], timeout=300,
                          env={'DOCKER_HOST': self.docker_host, 'TMPDIR': self.workdir})
            if cp.returncode != 0:
                raise Unavailable(f'tools/build-image busybox failed ({cp.returncode}):\n{cp.stdout}{cp.stderr}')
            log(cp.stdout.strip())
        self.docker_unavailable = None

    def stop_docker(self, timeout=60):
        """SIGTERM dockerd (it stops its containers and containerd), SIGKILL after TIMEOUT;
        returns problems: containers of sandboxd still there, processes of Docker left."""
        problems = []
        if self.docker_proc is None:
            return problems
        if self.docker_unavailable is None:
            try:
                left = self.docker_containers()
                if left:
                    problems.append(f'containers left by sandboxd: {left}')
                    self.docker('rm', '-f', *left, timeout=60)
            except Exception as e:
                problems.append(f'cannot list containers: {e}')
        self.docker_unavailable = 'stopped'
        exec_root = os.path.join(self.docker_rundir, 'exec')
        pid, self.docker_pid = self.docker_pid, None
        if pid and _alive(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                problems.append(f'dockerd (pid {pid}) did not stop within {timeout}s; killed')
                os.kill(pid, signal.SIGKILL)
        try:
            self.docker_proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            problems.append(f'nsenter of dockerd (pid {self.docker_proc.pid}) did not exit')
        self.docker_proc = None
        # containerd and its shims name the exec root on their command lines.
        for p in self._processes_mentioning(exec_root.encode(), self.pid):
            problems.append(f'Docker process left after dockerd stopped: pid {p} {_comm(p)}')
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return problems

    def docker_log(self):
        try:
            with open(os.path.join(self.workdir, 'dockerd.log'), errors='replace') as f:
                return f.read()[-4000:]
        except OSError:
            return ''

    def _write_extra_templates(self):
        """The harness's own template directory: a Docker template whose image does not exist,
        and a bwrap template with a warm pool of one."""
        d = self.path(self.extra_templates)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(self.paths.templates, 'shell.json')) as f:
            pooled = json.load(f)
        pooled.update(description='harness: shell with a warm pool of one', pool=1)
        with open(os.path.join(d, f'{POOLED_TEMPLATE}.json'), 'w') as f:
            json.dump(pooled, f)
        with open(os.path.join(d, f'{DOCKER_MISSING_TEMPLATE}.json'), 'w') as f:
            json.dump({'description': 'harness: a Docker image that does not exist', 'payload': 'docker',
                       'image': DOCKER_MISSING_IMAGE, 'environment': ['PATH=/usr/bin:/bin'],
                       'limits': {'MemoryMax': 268435456, 'CPUQuotaPerSecUSec': 1000000, 'TasksMax': 64}}, f)

    @staticmethod
    def _find_descendant(pid, comm):
        pending = [pid]
        while pending:
            p = pending.pop()
            if _comm(p) == comm:
                return p
            pending += _children(p)
        return None

    @staticmethod
    def _processes_mentioning(needle, pid1=None):
        """Live processes whose command line contains NEEDLE (in PID1's pid namespace)."""
        found = []
        pidns = os.readlink(f'/proc/{pid1}/ns/pid') if pid1 else None
        for d in os.listdir('/proc'):
            if not d.isdigit() or int(d) == os.getpid():
                continue
            try:
                if pidns and os.readlink(f'/proc/{d}/ns/pid') != pidns:
                    continue
                with open(f'/proc/{d}/cmdline', 'rb') as f:
                    if needle in f.read() and _alive(int(d)):
                        found.append(int(d))
            except OSError:
                pass
        return found

    def daemon_supports_docker(self):
        cp = subprocess.run([self.paths.sandboxd, '--help'], capture_output=True, text=True)
        return '--docker-socket' in cp.stdout

    # ---- bringing it up --------------------------------------------------------------

    def boot(self, timeout=120, bus=True):
        """BUS=False: do not wait for a system bus (tools/test-packages boots a root that
        has none until its packages bring dbus)."""
        if self.mode == 'host':
            return
        seed = os.path.join(self.workdir, 'run-seed')
        units = os.path.join(seed, 'systemd', 'system')
        os.makedirs(units)
        for masked in ('timers.target', 'systemd-tmpfiles-clean.timer'):
            os.symlink('/dev/null', os.path.join(units, masked))
        os.makedirs(os.path.join(seed, 'systemd', 'journald.conf.d'))
        with open(os.path.join(seed, 'systemd', 'journald.conf.d', '50-volatile.conf'), 'w') as f:
            f.write('[Journal]\nStorage=volatile\n')
        _tmpfiles_seed(os.path.join(seed, 'tmpfiles.d'))

        view = ''
        if not self.persistent and not self.rootdir:
            lines = hermetic_view(self.workdir)
            if lines:
                view = os.path.join(self.workdir, 'hermetic.list')
                with open(view, 'w') as f:
                    f.write('\n'.join(lines) + '\n')
        logpath = os.path.join(self.workdir, 'boot.log')
        argv = ['unshare', '--pid', '--fork', '--mount', '--propagation', 'private']
        if self.private_network:
            argv.append('--net')
        if not self.persistent:
            argv.append('--kill-child')
        argv += ['sh', '-c', BOOT_SCRIPT, 'sh', seed, self.name, self._cgroup2_options(), self.workdir,
                 self.rootdir or '', view]
        with open(logpath, 'wb') as logf:
            self.unshare = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                start_new_session=True, env={'PATH': '/usr/sbin:/usr/bin:/sbin:/bin'},
                preexec_fn=None if self.persistent else _pdeathsig_kill)
        deadline = time.monotonic() + timeout

        # The systemd we want is the child of the unshare we started, once it has exec'd.
        while True:
            if self.unshare.poll() is not None:
                raise Unavailable(f'cannot boot systemd: unshare exited {self.unshare.returncode}:\n'
                                  + self._boot_log())
            kids = _children(self.unshare.pid)
            if kids and _comm(kids[0]) == 'systemd':
                self.pid = kids[0]
                break
            if time.monotonic() > deadline:
                raise Unavailable('cannot boot systemd: no systemd process appeared\n' + self._boot_log())
            time.sleep(0.05)
        self.root = f'/proc/{self.pid}/root'
        with open(os.path.join(self.workdir, 'systemd.pid'), 'w') as f:
            f.write(f'{self.pid} {_pid_identity(self.pid)}\n')
        log(f'booted systemd as host pid {self.pid} (namespace {self.name})')

        state = ''
        while time.monotonic() < deadline:
            try:
                cp = self.run(['systemctl', 'is-system-running', '--wait'],
                              timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
            state = cp.stdout.strip()
            if state in ('running', 'degraded'):
                break
            if self.unshare.poll() is not None:
                break
            time.sleep(0.2)
        if state not in ('running', 'degraded'):
            raise Unavailable(f'systemd did not finish booting (state {state!r}):\n' + self._boot_log())
        if state == 'degraded':
            failed = self.systemctl('--failed', '--plain', '--no-legend').stdout.strip()
            log(f'system is degraded; failed units:\n{failed}')
        if bus:
            self.wait_for_bus(deadline)

    def wait_for_bus(self, deadline):
        while True:
            cp = self.busctl('list', '--acquired', timeout=30)
            if cp.returncode == 0 and 'org.freedesktop.systemd1' in cp.stdout:
                return
            if time.monotonic() > deadline:
                raise Unavailable('the system bus does not answer, or systemd is not on it:\n'
                                  + cp.stdout + cp.stderr)
            time.sleep(0.2)

    def _cgroup2_options(self):
        """For a unified-mode boot, the options to mount cgroup2 with: those of the host's
        own cgroup2 mount, so that the hierarchy-wide flags stay as they are; '' when no
        remount is needed (the host is unified already)."""
        if self.cgroup != 'unified' or os.path.exists(os.path.join(CGROUP_FS, 'cgroup.controllers')):
            return ''
        with open('/proc/self/mounts') as f:
            for line in f:
                fields = line.split()
                if fields[2] == 'cgroup2' and fields[1] == os.path.join(CGROUP_FS, 'unified'):
                    return fields[3]
        raise Unavailable('no cgroup2 hierarchy on this host to boot systemd in unified mode with')

    def _boot_log(self):
        try:
            with open(os.path.join(self.workdir, 'boot.log'), errors='replace') as f:
                return f.read()[-4000:]
        except OSError:
            return ''

    def install(self):
        """Units, drop-in and bus policy into the system; sandboxd not started yet."""
        p = self.paths
        unitdir = self.path('/run/systemd/system')
        dropdir = os.path.join(unitdir, 'sandboxd.service.d')
        exec_start = [p.sandboxd, f'--template-dir={p.templates}', f'--agent={p.sandbox_init}',
                      f'--state-dir={self.state_dir}', f'--workspace-dir={self.workspace_dir}',
                      f'--secrets-dir={self.state_dir}/secrets']
        if os.environ.get('SANDBOXD_BWRAP'):
            exec_start.append(f'--bwrap={p.bwrap}')
        self._write_extra_templates()
        exec_start.append(f'--template-dir={self.extra_templates}')
        if self.docker_proc is not None:
            if self.daemon_supports_docker():
                exec_start.append(f'--docker-socket={self.docker_socket}')
            else:
                log(f'{p.sandboxd} has no --docker-socket option: Docker sandboxes will fail')
        self.exec_start = exec_start  # configure_daemon() adds to it
        # The harness's template directory is the last: the one CreateTemplate writes to.
        dropin = ['[Service]', 'ExecStart=',
                  'ExecStart=' + ' '.join(_systemd_quote(a) for a in exec_start),
                  'StateDirectory=', 'RuntimeDirectory=sandboxd-test-state', 'Restart=no',
                  'ReadWritePaths=' + _systemd_quote(self.extra_templates),
                  'ReadWritePaths=' + _systemd_quote(self.workspace_dir)]
        ws_dropin = ['[Service]', 'ExecStart=', 'ExecStart=' + ' '.join(_systemd_quote(a) for a in [
                         p.sandboxd, '--setup-workspaces', f'--workspace-dir={self.workspace_dir}']),
                     'StateDirectory=']
        for var in SANITIZER_VARS:
            if os.environ.get(var):
                dropin.append('Environment=' + _systemd_quote(f'{var}={os.environ[var]}'))
        files = {
            os.path.join(unitdir, 'sandboxd.service'): p.service_text(),
            os.path.join(unitdir, 'sandbox.slice'): open(p.slice).read(),
            # sandboxd.service wants it: started with it, its socket passed in.
            os.path.join(unitdir, VARLINK_UNIT): open(p.varlink_socket_unit).read(),
            os.path.join(dropdir, '50-test.conf'): '\n'.join(dropin) + '\n',
            os.path.join(unitdir, 'sandboxd-workspaces.service'): p.unit_text('sandboxd-workspaces.service'),
            os.path.join(unitdir, 'sandboxd-workspaces.service.d', '50-test.conf'): '\n'.join(ws_dropin) + '\n',
        }
        files.update(self._http_units(unitdir))
        files.update(self._workspace_units(unitdir))
        if self.mode == 'host':
            # A sandboxd installed on this machine: stopped for the tests, started again after.
            self.host_daemon_was_active = self.systemctl('is-active', 'sandboxd.service').stdout.strip() == 'active'
            self.host_socket_was_active = self.systemctl('is-active', VARLINK_UNIT).stdout.strip() == 'active'
            if self.host_daemon_was_active or self.host_socket_was_active:
                log('stopping the sandboxd.service (and its socket) of this machine for the tests')
                self.systemctl('stop', VARLINK_UNIT, 'sandboxd.service', check=True, timeout=90)
            if not os.path.isdir(dropdir):
                os.makedirs(dropdir)
                self.installed.append(dropdir)
        for path, text in files.items():
            if os.path.exists(path):
                with open(path) as f:
                    if f.readline().rstrip('\n') != MARKER:
                        raise HarnessError(f'{path} exists and is not ours; not overwriting it')
                log(f'overwriting {path}, left by an earlier run')
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as f:
                f.write(MARKER + '\n' + text)
            self.installed.append(path)
        self.systemctl('daemon-reload', check=True)
        self.install_policy()

    def _workspace_units(self, unitdir):
        """sandboxd-workspace's socket and service (started by its socket, as installed),
        on this run's pool."""
        p = self.paths
        service = ['[Service]', 'ExecStart=',
                   'ExecStart=' + ' '.join(_systemd_quote(a) for a in [
                       p.sandboxd_workspace, f'--workspace-dir={self.workspace_dir}']),
                   'StateDirectory=',
                   'ReadWritePaths=' + _systemd_quote(self.workspace_dir)]
        for var in SANITIZER_VARS:
            if os.environ.get(var):
                service.append('Environment=' + _systemd_quote(f'{var}={os.environ[var]}'))
        if p.sanitized(p.sandboxd_workspace):
            # LeakSanitizer stops the world with ptrace, which @system-service leaves out.
            service.append('SystemCallFilter=')
        d = 'sandboxd-workspace.service.d'
        if self.mode == 'host' and not os.path.isdir(os.path.join(unitdir, d)):
            os.makedirs(os.path.join(unitdir, d))
            self.installed.append(os.path.join(unitdir, d))
        with open(os.path.join(p.source, 'units', 'sandboxd-workspace.socket')) as f:
            socket_text = f.read()
        return {
            os.path.join(unitdir, 'sandboxd-workspace.socket'): socket_text,
            os.path.join(unitdir, 'sandboxd-workspace.service'): p.unit_text('sandboxd-workspace.service'),
            os.path.join(unitdir, d, '50-test.conf'): '\n'.join(service) + '\n',
        }

    def _http_units(self, unitdir):
        """sandboxd-http's socket and service (started by its socket, as installed), on a
        free loopback port of this run's (HTTP_TOKENS_DIR: where tests put token files)."""
        p = self.paths
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            self.http_port = s.getsockname()[1]
        self.http_unix_socket = HTTP_UNIX_SOCKET
        service = ['[Service]', 'ExecStart=',
                   'ExecStart=' + ' '.join(_systemd_quote(a) for a in [p.sandboxd_http, f'--tokens-dir={HTTP_TOKENS_DIR}',
                                                                  f'--config={HTTP_CONFIG}'])]
        for var in SANITIZER_VARS:
            if os.environ.get(var):
                service.append('Environment=' + _systemd_quote(f'{var}={os.environ[var]}'))
        if p.http_sanitized():
            # LeakSanitizer stops the world with ptrace, which @system-service leaves out.
            service.append('SystemCallFilter=')
        with open(os.path.join(p.source, 'units', 'sandboxd-http.socket')) as f:
            socket_text = f.read()
        for d in ('sandboxd-http.service.d', 'sandboxd-http.socket.d'):
            if self.mode == 'host' and not os.path.isdir(os.path.join(unitdir, d)):
                os.makedirs(os.path.join(unitdir, d))
                self.installed.append(os.path.join(unitdir, d))
        return {
            os.path.join(unitdir, 'sandboxd-http.service'): p.http_service_text(),
            os.path.join(unitdir, 'sandboxd-http.socket'): socket_text,
            os.path.join(unitdir, 'sandboxd-http.service.d', '50-test.conf'): '\n'.join(service) + '\n',
            os.path.join(unitdir, 'sandboxd-http.socket.d', '50-test.conf'):
                f'[Socket]\nListenStream=\nListenStream=127.0.0.1:{self.http_port}\n'
                f'ListenStream={HTTP_UNIX_SOCKET}\n',
        }

    def install_policy(self):
        if self.mode == 'host':
            dest = '/etc/dbus-1/system.d/io.sandboxd.Sandbox1.conf'
            with open(self.paths.policy) as f:
                policy = f.read()
            if os.path.exists(dest):
                with open(dest) as f:
                    if f.read() != policy:
                        raise HarnessError(f'{dest} exists and differs from {self.paths.policy}; '
                                           'not overwriting it')
                # The same policy, installed by someone: use it, and leave it there.
            else:
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                shutil.copy(self.paths.policy, dest)
                self.installed.append(dest)
        else:
            target = next((d for d in ('/etc/dbus-1/system.d', '/usr/share/dbus-1/system.d')
                           if os.path.isdir(d)), None)
            if not target:
                raise Unavailable('no dbus system.d directory to put the policy in (package dbus)')
            mine = os.path.join(self.workdir, 'dbus-system.d')
            os.makedirs(mine)
            # As the system sees it: without a system-wide install's policy (hermetic_view()).
            for n in os.listdir(self.path(target)):
                src = os.path.join(self.path(target), n)
                if os.path.isfile(src):
                    shutil.copy(src, mine)
            shutil.copy(self.paths.policy, mine)
            # What an installed sandboxd has too: the bus activation file (a call to
            # io.sandboxd.Sandbox1 while sandboxd is not running starts sandboxd.service), in
            # a service directory of this system's own. (Host mode: the installed one, if any.)
            services = os.path.join(self.workdir, 'dbus-system-services')
            os.makedirs(services)
            shutil.copy(self.paths.activation, services)
            with open(os.path.join(mine, 'zz-sandboxd-test-services.conf'), 'w') as f:
                f.write('<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"\n'
                        ' "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">\n'
                        f'<busconfig><servicedir>{services}</servicedir></busconfig>\n')
            self.run(['mount', '--bind', mine, target], check=True)
        self.busctl('call', 'org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus',
                    'ReloadConfig', check=True)

    def start_daemon(self, timeout=90):
        self.daemon_started = True
        cp = self.systemctl('start', 'sandboxd.service', timeout=timeout)
        if cp.returncode != 0:
            status = self.systemctl('status', 'sandboxd.service', '-l').stdout
            raise HarnessError(f'systemctl start sandboxd failed:\n{cp.stderr}\n{status}\n'
                               + self.journal())
        deadline = time.monotonic() + 30
        while True:
            cp = self.busctl('call', BUS_NAME, MANAGER_PATH, 'org.freedesktop.DBus.Peer', 'Ping')
            if cp.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise HarnessError(f'sandboxd runs but {BUS_NAME} does not answer: {cp.stderr}\n'
                                   + self.journal())
            time.sleep(0.1)
        log('sandboxd is running and answers on the bus')

    def configure_daemon(self, config=None, credentials=None, args=()):
        """Restart sandboxd with --config=<CONFIG, the text of a sandboxd.conf>, LoadCredential=
        of CREDENTIALS ({name: text}) and the command line's extra ARGS; all None/empty: as
        install() left it. The files go to the system's /run (the unit has PrivateTmp=: not
        /tmp or /var/tmp)."""
        confdir = f'/run/{self.name}-config'
        dropin = self.path('/run/systemd/system/sandboxd.service.d/60-test-config.conf')
        if config is None and not credentials and not args:
            if os.path.exists(dropin):
                os.unlink(dropin)
        else:
            os.makedirs(self.path(confdir), mode=0o700, exist_ok=True)
            extra = list(args)
            if config is not None:
                with open(self.path(f'{confdir}/sandboxd.conf'), 'w') as f:
                    f.write(config)
                extra.append(f'--config={confdir}/sandboxd.conf')
            lines = ['[Service]', 'ExecStart=', 'ExecStart=' + ' '.join(
                _systemd_quote(a) for a in self.exec_start + extra)]
            for name, text in (credentials or {}).items():
                with open(self.path(f'{confdir}/{name}'), 'w') as f:
                    os.fchmod(f.fileno(), 0o600)
                    f.write(text)
                lines.append(f'LoadCredential={name}:{confdir}/{name}')
            with open(dropin, 'w') as f:
                f.write(MARKER + '\n' + '\n'.join(lines) + '\n')
            if dropin not in self.installed:
                self.installed.append(dropin)
                if self.mode == 'host':
                    self.installed.append(self.path(confdir))
        self.systemctl('daemon-reload', check=True)
        cp = self.systemctl('stop', 'sandboxd.service', timeout=90)
        if cp.returncode != 0:
            raise HarnessError(f'systemctl stop sandboxd failed: {cp.stderr}')
        self.start_daemon()

    def start_mariadb(self):
        """A real mariadbd for this system (class MariaDB); stopped at teardown."""
        if self.mariadb is None:
            self.mariadb = MariaDB(self)
        if self.mariadb.proc is None or self.mariadb.proc.poll() is not None:
            self.mariadb.start()
        return self.mariadb

    # ---- taking it down --------------------------------------------------------------

    def teardown(self):
        """Stop everything; returns a list of problems found (leftovers, daemon failures)."""
        if self.torn_down:
            return []
        self.torn_down = True
        problems = []
        reachable = self.mode == 'host' or (self.pid and _alive(self.pid))
        if reachable and self.daemon_started:
            try:
                problems += self._stop_daemon()
            except Exception as e:
                problems.append(f'stopping sandboxd failed: {e}')
        if reachable and self.docker_proc is not None:
            try:
                problems += self.stop_docker()
            except Exception as e:
                problems.append(f'stopping dockerd failed: {e}')
        if self.mode == 'host' and os.path.isdir(self.docker_rundir):
            shutil.rmtree(self.docker_rundir, ignore_errors=True)
        if self.mariadb:
            problems += self.mariadb.stop()
        if self.mode == 'namespace':
            problems += self.kill()
        else:
            self.systemctl('reset-failed', 'sandboxd.service', timeout=30)
            problems += self._uninstall()
        if self.own_workspaces:
            problems += self._remove_workspaces()
        if os.environ.get('SANDBOXD_TEST_KEEP') == '1':
            log(f'keeping {self.workdir}')
        else:
            shutil.rmtree(self.workdir, ignore_errors=True)
        return problems

    def _stop_daemon(self):
        problems = []
        # Sandboxes outlive sandboxd by design: what the tests left is destroyed first.
        cp = self.run([self.paths.sandboxctl, 'list', '--json'], timeout=30)
        try:
            left = [s['id'] for s in json.loads(cp.stdout or '[]')] if cp.returncode == 0 else []
        except (ValueError, KeyError, TypeError):
            left = []
        if left:
            log(f'destroying sandboxes the tests left: {left}')
            self.run([self.paths.sandboxctl, 'destroy', *left], timeout=120)
        # The bridge first (a client of sandboxd's), socket and all.
        self.systemctl('stop', 'sandboxd-http.socket', 'sandboxd-http.service', timeout=90)
        cp = self.systemctl('stop', VARLINK_UNIT, 'sandboxd.service', timeout=90)
        if cp.returncode != 0:
            problems.append(f'systemctl stop sandboxd failed: {cp.stderr.strip()}')
        info = self.show('sandboxd.service', 'Result', 'NRestarts', 'ExecMainStatus', 'ExecMainCode')
        if info.get('Result') not in ('success', None):
            problems.append(f'sandboxd ended badly: {info}\n{self.journal()}')
        leftovers = self.sandbox_scopes(include_pool=True)
        if leftovers:
            problems.append(f'sandbox scopes left after the tests: {leftovers}')
            for unit in leftovers:
                self.systemctl('stop', unit, timeout=60)
        return problems

    def _remove_workspaces(self):
        return remove_workspace_pool(self.workspace_dir)

    def kill(self):
        """kill -KILL the namespace's systemd (ends everything in it) and clean up."""
        problems = []
        if self.pid and _alive(self.pid):
            os.kill(self.pid, signal.SIGKILL)
        if self.unshare is not None:
            try:
                self.unshare.wait(timeout=30)
            except subprocess.TimeoutExpired:
                problems.append(f'unshare (pid {self.unshare.pid}) did not exit')
        deadline = time.monotonic() + 30
        while self.pid and _alive(self.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.pid and _alive(self.pid):
            problems.append(f'systemd (pid {self.pid}) still alive after SIGKILL')
        left = _remove_cgroups(self.name)
        if left:
            problems.append(f'could not remove cgroups {left}')
        return problems

    def _uninstall(self):
        problems = []
        for path in reversed(self.installed):
            try:
                if os.path.isdir(path):
                    os.rmdir(path)
                else:
                    os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError as e:
                problems.append(f'cannot remove {path}: {e}')
        self.installed = []
        try:
            self.systemctl('daemon-reload', timeout=60)
            self.busctl('call', 'org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus',
                        'ReloadConfig', timeout=30)
        except Exception as e:
            problems.append(f'reload after uninstall failed: {e}')
        if self.host_socket_was_active:
            cp = self.systemctl('start', VARLINK_UNIT, timeout=90)
            if cp.returncode != 0:
                problems.append(f'could not start this machine\'s {VARLINK_UNIT} again: {cp.stderr.strip()}')
        if self.host_daemon_was_active:
            cp = self.systemctl('start', 'sandboxd.service', timeout=90)
            if cp.returncode != 0:
                problems.append(f'could not start this machine\'s sandboxd.service again: {cp.stderr.strip()}')
        return problems


class MariaDB:
    """A real mariadbd (Debian's mariadb-server) with its data in the harness's work
    directory. It runs on the host, so that its pid is ours to stop or kill; its socket is
    in the system's /run, where sandboxd (PrivateTmp=) reaches it. Database `sandboxd`,
    user `sandboxd` identified by PASSWORD; root connects through the socket (unix_socket
    authentication). No networking."""

    PASSWORD = "pw-'\"; not a shell word"

    def __init__(self, system):
        for tool in ('mariadbd', 'mariadb-install-db', 'mariadb'):
            if not shutil.which(tool) and not os.access(f'/usr/sbin/{tool}', os.X_OK):
                raise Unavailable(f'{tool} (package mariadb-server)')
        self.dir = os.path.join(system.workdir, 'mariadb')
        self.socket_in_system = f'/run/{system.name}-mariadb/mysqld.sock'   # as sandboxd sees it
        self.socket = system.path(self.socket_in_system)                  # as we see it
        self.proc = None

    def start(self, timeout=60):
        data = os.path.join(self.dir, 'data')
        os.makedirs(os.path.dirname(self.socket), exist_ok=True)
        first = not os.path.isdir(data)
        if first:
            os.makedirs(self.dir, exist_ok=True)
            cp = subprocess.run(['mariadb-install-db', '--no-defaults', '--user=root', f'--datadir={data}',
                                 '--skip-test-db'], capture_output=True, text=True, timeout=180)
            if cp.returncode != 0:
                raise Unavailable(f'mariadb-install-db failed:\n{cp.stdout}{cp.stderr}')
        mariadbd = shutil.which('mariadbd') or '/usr/sbin/mariadbd'
        with open(os.path.join(self.dir, 'mariadbd.log'), 'ab') as logf:
            self.proc = subprocess.Popen(
                [mariadbd, '--no-defaults', '--user=root', f'--datadir={data}', f'--socket={self.socket}',
                 '--skip-networking', f'--pid-file={self.dir}/mariadbd.pid', '--innodb-buffer-pool-size=32M'],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_pdeathsig_kill)
        deadline = time.monotonic() + timeout
        while True:
            cp = subprocess.run(['mariadb', '--no-defaults', '-S', self.socket, '-u', 'root', '-e', 'SELECT 1'],
                                capture_output=True, text=True, timeout=30)
            if cp.returncode == 0:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise Unavailable(f'mariadbd did not start: {cp.stderr}\n' + self.log())
            time.sleep(0.1)
        if first:
            pw = self.PASSWORD.replace('\\', '\\\\').replace("'", "\\'")
            self.sql("CREATE DATABASE sandboxd; "
                     f"CREATE USER 'sandboxd'@'localhost' IDENTIFIED BY '{pw}'; "
                     "GRANT ALL ON sandboxd.* TO 'sandboxd'@'localhost'", db=None)
        log(f'mariadbd running as pid {self.proc.pid}, socket {self.socket}')

    def sql(self, statement, db='sandboxd', timeout=60):
        """Runs STATEMENT with the mariadb client as root; returns the rows, each a list of
        str (None for NULL)."""
        cmd = ['mariadb', '--no-defaults', '-S', self.socket, '-u', 'root', '--batch', '--skip-column-names',
               '-e', statement]
        if db:
            cmd.insert(2, f'--database={db}')
        cp = subprocess.run(cmd, capture_output=True, timeout=timeout)
        if cp.returncode != 0:
            raise HarnessError(f'mariadb {statement!r} failed: {cp.stderr.decode(errors="replace")}')
        return [[None if c == 'NULL' else c for c in line.split('\t')]
                for line in cp.stdout.decode(errors='replace').split('\n') if line]

    def kill(self, sig=signal.SIGKILL):
        """Signals mariadbd (ours, by pid) and waits until it is gone."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(timeout=120)

    def stop(self):
        try:
            self.kill(signal.SIGTERM)
        except subprocess.TimeoutExpired:
            self.kill()
            return [f'mariadbd (pid {self.proc.pid}) ignored SIGTERM for 120 s; killed']
        finally:
            shutil.rmtree(os.path.dirname(self.socket), ignore_errors=True)
        return []

    def log(self):
        try:
            with open(os.path.join(self.dir, 'mariadbd.log'), errors='replace') as f:
                return f.read()[-3000:]
        except OSError:
            return ''


# ---- one system per process ----------------------------------------------------------

_current = None


def _on_sigterm(signum, frame):
    # KeyboardInterrupt passes through unittest (other exceptions would be swallowed as a
    # test error), so finally: clauses and atexit run the teardown.
    raise KeyboardInterrupt(f'signal {signum}')


def current():
    return _current


def acquire(start_daemon=True, docker=True):
    """Boot (or reuse) the system for this process, with sandboxd installed and running;
    with DOCKER, a dockerd in it too (Unavailable is then noted in docker_unavailable)."""
    global _current
    if _current is not None:
        return _current
    if os.geteuid() != 0:
        raise Unavailable('the integration tests need root')
    missing = Paths().missing(daemon=start_daemon)
    if missing:
        raise Unavailable('missing: ' + ', '.join(missing))
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _on_sigterm)
    sweep_stale()
    system = System()
    _current = system
    atexit.register(release)
    try:
        system.boot()
        if system.mode == 'namespace' and system.private_network:
            join_network(system)
        if start_daemon:
            try:
                if not docker:
                    raise Unavailable('not asked for (no module run here needs it)')
                system.start_docker()
            except Unavailable as e:
                system.docker_unavailable = str(e)
                log(f'no Docker in this system: {e}')
            system.install()
            system.start_daemon()
    except BaseException:
        for p in release():
            log(p)
        raise
    return system


def remove_workspace_pool(d):
    """A workspace pool's mount (host mode: in the host's namespace), image and directory;
    returns the problems found."""
    with open('/proc/self/mountinfo') as f:
        mounted = any(line.split()[4] == d for line in f)
    if mounted and subprocess.run(['umount', d]).returncode != 0:
        return [f'cannot unmount the workspace pool {d}']
    shutil.rmtree(d, ignore_errors=True)
    try:
        os.unlink(d + '.img')
    except FileNotFoundError:
        pass
    return []


def boot_extra(cgroup=None, workspace_dir=None):
    """A second system, with sandboxd, for tests that need another setup than acquire()'s
    (cgroup='unified': systemd in cgroup-v2-only mode, where units can be frozen). The caller
    tears it down with System.teardown() (also done at exit)."""
    if os.geteuid() != 0:
        raise Unavailable('the integration tests need root')
    if detect_mode() == 'host':
        raise Unavailable('PID 1 is systemd: a second system is booted only in namespace mode')
    missing = Paths().missing()
    if missing:
        raise Unavailable('missing: ' + ', '.join(missing))
    # In the network namespace of acquire()'s system, which this process has joined.
    system = System(cgroup=cgroup, private_network=_host_netns is None, workspace_dir=workspace_dir)
    atexit.register(system.teardown)
    try:
        system.boot()
        if system.private_network:
            join_network(system)
        system.install()
        system.start_daemon()
    except BaseException:
        for p in system.teardown():
            log(p)
        raise
    return system


def release():
    """Tear the system down; returns the problems found (also logged)."""
    global _current
    system, _current = _current, None
    if system is None:
        return []
    problems = system.teardown()
    for p in problems:
        log(f'PROBLEM: {p}')
    return problems


def ci():
    """CI=true: a component the tests need that is missing is a failure, not a skip."""
    return os.environ.get('CI', '').lower() in ('1', 'true', 'yes')


def npm_ci(build, sources, name, files=()):
    """npm ci of SOURCES' package-lock.json into BUILD/tests/NAME, once per lockfile, with
    FILES of SOURCES beside it (Node resolves a script's imports from where it is); every
    directory world-readable (tests run node as other users too). The directory."""
    import hashlib
    dest = os.path.join(build, 'tests', name)
    node, npm = shutil.which('node'), shutil.which('npm')
    if not node or not npm:
        msg = 'node and npm are missing (tools/test installs them)'
        if ci():
            raise AssertionError(msg + '; CI=true makes this a failure')
        raise unittest.SkipTest(msg)
    with open(os.path.join(sources, 'package-lock.json'), 'rb') as f:
        stamp = hashlib.sha256(f.read()).hexdigest()
    stamp_file = os.path.join(dest, '.installed')
    try:
        with open(stamp_file) as f:
            done = f.read() == stamp
    except OSError:
        done = False
    if not done:
        os.makedirs(dest, exist_ok=True)
        for n in ('package.json', 'package-lock.json'):
            shutil.copy(os.path.join(sources, n), dest)
        # The registry is reached from the host's network, not a test system's (host_network()).
        cp = subprocess.run(host_network([npm, 'ci', '--prefix', dest, '--ignore-scripts', '--no-audit', '--no-fund']),
                            capture_output=True, text=True, timeout=600)
        if cp.returncode != 0:
            raise AssertionError(f'npm ci of {sources} failed:\n{cp.stdout}{cp.stderr}')
        with open(stamp_file, 'w') as f:
            f.write(stamp)
    for n in files:
        shutil.copy(os.path.join(sources, n), dest)
    for root, dirs, _ in os.walk(dest):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
    return dest


# Opening a process's memory (PTRACE_MODE_ATTACH) as root without CAP_SYS_PTRACE: allowed
# for a dumpable process of root's with no capability the opener lacks, refused for an
# undumpable one.
_NO_PTRACE = ['setpriv', '--inh-caps=-all', '--ambient-caps=-all', '--bounding-set=-sys_ptrace', '--']


def _memory_opens(system, pid):
    return system.run(_NO_PTRACE + ['dd', f'if=/proc/{pid}/mem', 'count=0', 'status=none']).returncode == 0


def dump_guard(system, unit):
    """How UNIT's main process is kept from dumping its memory: {'core': its core size
    limit (soft, hard), 'uid': its uid, 'proc_owner': the owner of its /proc/PID/status
    (root's when it is undumpable), 'memory_opens': whether root without CAP_SYS_PTRACE may open
    its /proc/PID/mem (not when it is undumpable)}."""
    pid = system.show(unit, 'MainPID')['MainPID']
    assert pid != '0', f'{unit} is not running'
    limits = system.run(['cat', f'/proc/{pid}/limits'], check=True).stdout
    core = next(line.split()[4:6] for line in limits.splitlines() if line.startswith('Max core file size'))
    status = system.run(['cat', f'/proc/{pid}/status'], check=True).stdout
    uid = int(next(line.split()[1] for line in status.splitlines() if line.startswith('Uid:')))
    # The directory keeps the process's uid; its files are root's once it is undumpable.
    owner = int(system.run(['stat', '-c', '%u', f'/proc/{pid}/status'], check=True).stdout)
    return {'core': tuple(core), 'uid': uid, 'proc_owner': owner, 'memory_opens': _memory_opens(system, pid)}


def dumpable_control(system):
    """Whether dump_guard()'s memory_opens is true of a dumpable root process (so that it
    being false says something)."""
    cp = system.run(['sh', '-c', ' '.join(_NO_PTRACE) + ' sleep 30 & p=$!; sleep 0.2; ' + ' '.join(_NO_PTRACE) +
                     ' dd if=/proc/$p/mem count=0 status=none; r=$?; kill $p; exit $r'])
    return cp.returncode == 0


def free_port():
    """A TCP port of 127.0.0.1 that nothing listens on (now)."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Bridge:
    """sandboxd-http from the build directory, on this host's loopback (the system's
    namespace shares this host's network), calling the system's varlink socket as root,
    with a token per name of TOKENS ({name: its tenant, or None for the token's own}): url,
    tokens {name: token}, stop()."""

    def __init__(self, system, tokens=None, args=()):
        self.system = system
        binary = os.path.join(system.paths.build, 'src', 'sandboxd-http', 'sandboxd-http')
        self.dir = tempfile.mkdtemp(prefix='http-tokens-', dir=system.workdir)
        self.tokens = {}
        for name, tenant in (tokens or {'pyclient': None}).items():
            self.tokens[name] = subprocess.run(
                [binary, 'token', 'add', name, *((f'--tenant={tenant}',) if tenant else ()),
                 f'--tokens-dir={self.dir}'], capture_output=True, text=True, check=True, timeout=30).stdout.strip()
        port = free_port()
        self.port = port
        self.url = f'http://127.0.0.1:{port}'
        self.log = os.path.join(self.dir, 'log')
        with open(self.log, 'w') as log:
            self.proc = subprocess.Popen(system.wrap([binary, f'--listen=127.0.0.1:{port}', f'--tokens-dir={self.dir}',
                                                      f'--varlink={VARLINK_SOCKET}', *args]),
                                         stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.url + '/healthz', timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError('sandboxd-http did not come up:\n' + self.journal())
                time.sleep(0.05)

    def journal(self):
        with open(self.log, errors='replace') as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(timeout=30)
        text = self.journal()
        if 'Sanitizer' in text or 'runtime error' in text:
            raise AssertionError('sanitizer reports from sandboxd-http:\n' + text[-5000:])


def module_setup():
    """setUpModule of every test module: (the system, whether this module booted it).
    The system run.py booted is shared; a module run alone boots its own. Skips the
    module when the system cannot be had, unless ci()."""
    owned = current() is None
    try:
        return acquire(), owned
    except Unavailable as e:
        if ci():
            raise
        raise unittest.SkipTest(str(e))


def module_teardown(owned):
    """tearDownModule: releases the system if module_setup() booted it."""
    if owned:
        problems = release()
        if problems:
            raise AssertionError('teardown found problems:\n' + '\n'.join(problems))


class SystemTestCase(unittest.TestCase):
    """Prints sandboxd's journal into the test log when a test fails or errors."""

    def run(self, result=None):
        result = result or self.defaultTestResult()
        before = len(result.failures) + len(result.errors)
        start = time.time()
        out = super().run(result)
        if len(result.failures) + len(result.errors) > before and _current is not None:
            print(f'\n----- journal of sandboxd and its sandboxes during {self.id()} -----\n'
                  + _current.journal(since=start) + '----- end of journal -----',
                  file=sys.stderr, flush=True)
        return out


class SandboxTestCase(SystemTestCase):
    """What the test modules share: sandboxctl, bus and cgroup helpers on `system` (the
    module's system, unless a class booted its own into `booted`). Every sandbox created
    through create() is destroyed after the test. TIMEOUT is the default per command;
    TEMPLATE, when set, is passed to every create()."""

    booted = None
    TIMEOUT = 120
    TEMPLATE = None

    @property
    def system(self):
        return self.booted or _current

    def ctl(self, *args, timeout=None, input=None):
        return self.system.sandboxctl(*args, timeout=timeout or self.TIMEOUT, input=input)

    def ok(self, cp, what=None):
        self.assertEqual(cp.returncode, 0,
                         f'{what or " ".join(map(str, cp.args))[:300]} failed ({cp.returncode}):\n'
                         f'stdout: {cp.stdout[-2000:]}\nstderr: {cp.stderr[-2000:]}')
        return cp

    def create(self, *opts, template=None):
        template = template or self.TEMPLATE
        cp = self.ok(self.ctl('create', *(('--template', template) if template else ()), *opts))
        sid = cp.stdout.strip()
        self.assertRegex(sid, r'^[A-Za-z0-9_-]+$', f'create printed no id: {cp.stdout!r}')
        self.addCleanup(self.destroy_quietly, self.system, sid)
        return sid

    @staticmethod
    def destroy_quietly(system, sid):
        system.sandboxctl('destroy', sid, timeout=120)

    def exec(self, sid, *cmd, opts=(), timeout=None, input=None):
        return self.ctl('exec', *opts, sid, '--', *cmd, timeout=timeout, input=input)

    def exec_json(self, sid, *cmd, opts=(), timeout=None, input=None):
        """exec --json: (CompletedProcess, the result), the result's keys checked."""
        cp = self.ctl('exec', '--json', *opts, sid, '--', *cmd, timeout=timeout, input=input)
        try:
            result = json.loads(cp.stdout)
        except ValueError:
            self.fail(f'exec --json printed no JSON (exit {cp.returncode}):\n'
                      f'stdout: {cp.stdout[-2000:]}\nstderr: {cp.stderr[-2000:]}')
        for key in ('exit_status', 'exit_code', 'signal', 'timed_out', 'oom_killed', 'truncated',
                    'duration_usec', 'cpu_usec', 'stdout', 'stderr'):
            self.assertIn(key, result, f'exec --json lacks {key}: {result}')
        return cp, result

    def assert_exec_works(self, sid, what=''):
        cp = self.ok(self.exec(sid, 'echo', 'alive'), f'exec in {sid} {what}')
        self.assertEqual(cp.stdout, 'alive\n')

    def popen_ctl(self, *args, stdin=subprocess.DEVNULL):
        """sandboxctl ARGS, running: its stdout and stderr are pipes we read ourselves."""
        env = dict(os.environ, LC_ALL='C.UTF-8')
        env.pop('NOTIFY_SOCKET', None)
        p = subprocess.Popen(self.system.wrap([self.system.paths.sandboxctl, *args]), stdin=stdin,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                             start_new_session=True)

        def reap():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            if p.stdin:
                p.stdin.close()
                p.stdin = None
            p.communicate()
        self.addCleanup(reap)
        return p

    def unit(self, sid):
        return f'sandbox-{sid}.scope'

    def exists(self, sid):
        return self.unit(sid) in self.system.sandbox_scopes()

    def wait_gone(self, sid, timeout):
        """Waits until the sandbox is gone (exists() false); returns the monotonic time it
        was seen gone, or None."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.exists(sid):
                return time.monotonic()
            time.sleep(0.1)
        return None

    def status(self, sid):
        return json.loads(self.ok(self.ctl('--json', 'status', sid)).stdout)

    def object_path(self, sid):
        _cp, data, error = self.system.bus_call(BUS_NAME, MANAGER_PATH, MANAGER_IFACE, 'GetSandbox', 's', sid)
        self.assertIsNone(error, f'GetSandbox {sid}: {error}')
        return data[0]

    def bus_property(self, sid, prop):
        cp = self.ok(self.system.busctl('--json=short', 'get-property', BUS_NAME, self.object_path(sid),
                                        SANDBOX_IFACE, prop))
        return json.loads(cp.stdout)['data']

    def unit_pids(self, sid):
        """Host pids of every process in the sandbox's unit (its sub-cgroups included)."""
        pids = self.system.unit_pids(self.unit(sid))
        self.assertIsNotNone(pids, f'no cgroup directory for {self.unit(sid)}')
        return pids

    def host_pid_of(self, sid, needle):
        """Host pid of the sandbox's process whose command line contains NEEDLE."""
        for pid in sorted(self.unit_pids(sid)):
            try:
                with open(f'/proc/{pid}/cmdline', 'rb') as f:
                    if needle.encode() in f.read():
                        return pid
            except OSError:
                pass
        self.fail(f'no process in the unit of {sid} runs {needle!r}')

    def assert_serving(self):
        """The daemon still does its job: an ephemeral run of `true` succeeds."""
        cp = self.ctl('run', '--', 'true')
        self.assertEqual(cp.returncode, 0, f'sandboxctl run -- true failed:\n{cp.stderr}')


# ---- command line ------------------------------------------------------------------


def _cli_boot(with_daemon=False, persistent_prefix='sandboxd-ns-'):
    mode = detect_mode()
    if mode == 'host':
        print('PID 1 is systemd: nothing to boot; use systemctl directly.', file=sys.stderr)
        return 1
    system = System(mode='namespace', persistent=True, prefix=persistent_prefix)
    try:
        system.boot()
        if with_daemon:
            missing = system.paths.missing()
            if missing:
                raise Unavailable('missing: ' + ', '.join(missing))
            system.install()
            system.start_daemon()
    except Exception:
        system.kill()
        shutil.rmtree(system.workdir, ignore_errors=True)
        raise
    print(system.pid)
    log(f'enter it with:  nsenter -t {system.pid} -m -p systemctl status')
    log(f'stop it with:   kill -KILL {system.pid}   '
        f'(or {sys.argv[0]} stop {system.pid}, which also removes its cgroup and {system.workdir})')
    return 0


def _cli_stop(pid):
    if _comm(pid) != 'systemd':
        print(f'pid {pid} is not a systemd', file=sys.stderr)
        return 1
    name = _cgroup_root_of(pid)
    if not name:
        print(f'pid {pid} was not booted by this harness (no {NS_PREFIXES[1]}* cgroup); not touching it',
              file=sys.stderr)
        return 1
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _remove_cgroups(name)
    workdir = os.path.join(os.environ.get('SANDBOXD_TEST_TMPDIR', '/var/tmp'), name)
    if os.path.isdir(workdir):
        shutil.rmtree(workdir, ignore_errors=True)
    if _alive(pid) or left:
        print(f'still there: pid alive={_alive(pid)}, cgroups={left}', file=sys.stderr)
        return 1
    return 0


def _cli_find():
    """PIDs of the persistent namespace systemds this harness booted (tools/quickstart
    reuses one instead of booting a second)."""
    found = []
    for d in os.listdir('/proc'):
        if d.isdigit() and _comm(int(d)) == 'systemd' and _alive(int(d)):
            try:
                name = _cgroup_root_of(int(d))
            except OSError:
                continue
            if name and name.startswith(NS_PREFIXES[1]):
                found.append(int(d))
    for pid in sorted(found):
        print(pid)
    return 0


def main(argv):
    if len(argv) == 1 and argv[0] == 'find':
        return _cli_find()
    if argv in (['boot'], ['boot', '--daemon']):
        return _cli_boot(with_daemon='--daemon' in argv)
    if len(argv) == 2 and argv[0] == 'stop' and argv[1].isdigit():
        return _cli_stop(int(argv[1]))
    if len(argv) == 1 and argv[0] == 'mode':
        print(detect_mode())
        return 0
    print(f'usage: {sys.argv[0]} boot [--daemon] | find | stop PID | mode', file=sys.stderr)
    return 2


if __name__ == '__main__':
    try:
        sys.exit(main(sys.argv[1:]))
    except (Unavailable, HarnessError) as e:
        print(f'harness: {e}', file=sys.stderr)
        sys.exit(1)
