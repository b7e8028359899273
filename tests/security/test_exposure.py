#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What code in a sandbox can learn or reach of the host: environment, mounts, /proc,
inherited descriptors, the agent's descriptors, and the network. One python sandbox for
all of them; each probe asserts the exact safe outcome."""

import ctypes
import json
import os
import re
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import secutil  # noqa: E402
from secutil import Base  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def setUpModule():
    secutil.setup_module()


def tearDownModule():
    secutil.teardown_module()


# What every bwrap sandbox has before its template's own (sandboxd(8), ENVIRONMENT).
DEFAULT_ENVIRONMENT = {'USER': 'sandbox', 'LOGNAME': 'sandbox', 'HOME': '/work', 'SHELL': '/bin/sh',
                       'LANG': 'C.UTF-8'}


def template_environment(name):
    with open(os.path.join(secutil.S.paths.templates, f'{name}.json')) as f:
        return dict(DEFAULT_ENVIRONMENT, **dict(e.split('=', 1) for e in json.load(f).get('environment', [])))


# Paths that would give a sandbox a way to the host's services or secrets.
HOST_PATHS = ('/run/dbus/system_bus_socket', '/var/run/dbus/system_bus_socket', '/run/dbus',
              '/var/run/docker.sock', '/run/docker.sock', '/run/docker', '/var/lib/docker',
              '/run/mysqld/mysqld.sock', '/var/run/mysqld/mysqld.sock', '/run/mysqld', '/var/lib/mysql',
              '/tmp/mysql.sock', '/run/systemd/journal/socket', '/run/systemd/journal/stdout',
              '/run/systemd/notify', '/run/systemd/private', '/dev/log', '/run/sandboxd',
              '/var/lib/sandboxd', '/run/sandboxd-test-state', '/root', '/home', '/var', '/srv',
              '/etc/shadow', '/etc/sandboxd', '/etc/polkit-1', '/etc/ssh', '/sys/fs/cgroup',
              '/sys/kernel', '/boot', '/run/user', '/dev/kmsg', '/dev/mem', '/dev/sda', '/dev/vda')

FORBIDDEN_MOUNT_PREFIXES = ('/home', '/root', '/var', '/run/dbus', '/run/docker', '/run/mysqld',
                            '/run/systemd', '/run/user', '/srv', '/boot', '/sys', '/mnt', '/media',
                            '/opt', '/etc/polkit-1', '/etc/sandboxd', '/run/sandboxd')


class Inside(Base):
    sid = None

    @classmethod
    def setUpClass(cls):
        cp = secutil.S.sandboxctl('create', '--template', 'python')
        if cp.returncode != 0:
            raise AssertionError(f'sandboxctl create failed: {cp.stderr}')
        cls.sid = cp.stdout.strip()

    @classmethod
    def tearDownClass(cls):
        if cls.sid:
            secutil.S.sandboxctl('destroy', cls.sid, timeout=120)

    def py(self, code, *opts):
        cp = self.ok(self.exec(self.sid, 'python3', '-c', code, opts=opts))
        return json.loads(cp.stdout)

    # ---- environment ---------------------------------------------------------------

    def test_environment_is_template_plus_exec_only(self):
        # env(1) itself, not an interpreter (python adds LC_CTYPE, sh adds PWD).
        cp = self.ok(self.exec(self.sid, 'env', opts=('--env', 'EXTRA=given by exec', '--env', 'TERM=xterm')))
        env = dict(line.split('=', 1) for line in cp.stdout.splitlines())
        want = template_environment('python')
        want.update({'EXTRA': 'given by exec', 'TERM': 'xterm'})
        self.assertEqual(env, want)

    def test_environment_of_the_agent_is_not_readable(self):
        got = self.py('''
import json
out = {}
for f in ("environ", "cmdline", "maps", "mem", "auxv", "stack", "syscall", "fdinfo/0"):
    try:
        with open("/proc/1/" + f, "rb") as fh:
            out[f] = fh.read(4096).replace(b"\\0", b" ").decode(errors="replace")
    except OSError as e:
        out[f] = "error:" + str(e.errno)
print(json.dumps(out))''')
        for f in ('environ', 'maps', 'mem', 'auxv', 'stack', 'syscall', 'fdinfo/0'):
            self.assertEqual(got[f], 'error:13', f'/proc/1/{f} of the agent is readable: {got[f][:200]!r}')
        for secret in ('SANDBOX_', 'INVOCATION_ID', 'JOURNAL_STREAM', 'NOTIFY_SOCKET', 'DBUS_'):
            self.assertNotIn(secret, got['cmdline'])

    # ---- descriptors ---------------------------------------------------------------

    def test_exec_has_only_stdin_stdout_stderr(self):
        got = self.py('''
import json, os, stat
fds = {}
for fd in range(0, 65536):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    kind = "sock" if stat.S_ISSOCK(st.st_mode) else "fifo" if stat.S_ISFIFO(st.st_mode) else \\
           "chr" if stat.S_ISCHR(st.st_mode) else "other"
    fds[fd] = kind
print(json.dumps(fds))''')
        self.assertEqual(sorted(got), ['0', '1', '2'], f'descriptors open in an exec: {got}')
        self.assertNotIn('sock', got.values(), f'a socket is among the standard descriptors: {got}')

    def test_agent_descriptors_are_not_reachable(self):
        got = self.py('''
import json, os
out = {}
try:
    out["list"] = os.listdir("/proc/1/fd")
except OSError as e:
    out["list"] = e.errno
for fd in range(0, 8):
    try:
        out[fd] = os.readlink("/proc/1/fd/%d" % fd)
    except OSError as e:
        out[fd] = e.errno
    try:
        os.close(os.open("/proc/1/fd/%d" % fd, os.O_RDONLY))
        out["open%d" % fd] = "opened"
    except OSError as e:
        out["open%d" % fd] = e.errno
print(json.dumps(out))''')
        self.assertEqual(got['list'], 13, f'/proc/1/fd of the agent is listable: {got}')
        for fd in range(8):
            self.assertIn(got[str(fd)], (2, 13), f'/proc/1/fd/{fd}: {got}')
            self.assertIn(got[f'open{fd}'], (2, 13), f'/proc/1/fd/{fd} could be opened: {got}')

    def test_passed_descriptors_cannot_open_host_directories(self):
        # StandardInput/Output/Error take the caller's descriptors. A directory given as one
        # (by mistake, or by a front end that passes what it was handed) must not become a
        # way to the host's files: it is refused, or useless inside.
        # (python3 refuses a directory as stdio: sh moves 0-2 to 7-9 first.)
        look = ('import json, os\n'
                'out = {}\n'
                'for fd in (7, 8, 9):\n'
                '    try:\n'
                '        out[fd - 7] = sorted(os.listdir(fd))[:50]\n'
                '    except OSError as e:\n'
                '        out[fd - 7] = e.errno\n'
                'open("/work/fdprobe", "w").write(json.dumps(out))\n')
        argv = ['sh', '-c', 'rm -f /work/fdprobe; exec 7<&0 8<&1 9<&2 </dev/null >/dev/null 2>&1; '
                'exec python3 -c "$0"', look]
        leaks = {}
        for fd, name in enumerate(('StandardInput', 'StandardOutput', 'StandardError')):
            res = secutil.bus([secutil.call(secutil.sandbox_path(self.sid), secutil.SBX, 'Exec', 'asa{sv}',
                                            argv, {name: secutil.v('h', {'$fd': '/'})})])[0]
            if 'reply' in res:
                cp = self.ok(self.exec(self.sid, 'cat', '/work/fdprobe'))
                seen = json.loads(cp.stdout)[str(fd)]
                if isinstance(seen, list):
                    leaks[name] = seen[:8]
            else:
                self.assertEqual(res.get('error'), secutil.E + 'InvalidOption', res)
        self.assertEqual(leaks, {}, 'a directory passed as a standard descriptor lets the sandbox list '
                                    'the host\'s / (first entries shown)')

    def test_file_api_stays_inside_whatever_the_sandbox_planted(self):
        # Links planted by the sandboxed code, pointing at host paths; then the file API,
        # which the owner's tools use on these very paths.
        self.ok(self.exec(self.sid, 'sh', '-c',
                          'cd /work && ln -sf /etc/debian_version host-file && ln -sfn / host-root && '
                          'ln -sfn /var/tmp host-tmp && echo inside > mine'))
        marker = f'sbxsec-{os.getpid()}'
        p = secutil.sandbox_path(self.sid)
        c = secutil.call
        res = secutil.bus([
            c(p, secutil.SBX, 'ReadFile', 'stt', '/work/host-file', 0, 0),
            # (/etc/hostname is the sandbox's own now: a file only the host's /etc has.)
            c(p, secutil.SBX, 'ReadFile', 'stt', '/work/host-root/etc/debian_version', 0, 0),
            c(p, secutil.SBX, 'ReadFile', 'stt', '../../../../etc/debian_version', 0, 0),
            c(p, secutil.SBX, 'ReadFile', 'stt', '/proc/1/root/etc/debian_version', 0, 0),
            c(p, secutil.SBX, 'WriteFile', 'saya{sv}', f'/work/host-tmp/{marker}', [120], {}),
            c(p, secutil.SBX, 'WriteFile', 'saya{sv}', f'/work/host-root/var/tmp/{marker}', [120], {}),
            c(p, secutil.SBX, 'WriteFile', 'saya{sv}', '/work/host-file', [120], {}),
            c(p, secutil.SBX, 'Move', 'ss', '/work/mine', f'/work/host-tmp/{marker}'),
            c(p, secutil.SBX, 'MakeDirectory', 'sb', f'/work/host-tmp/{marker}', True),
            c(p, secutil.SBX, 'Download', 'sha{sv}', '/work/host-file', {'$fd': '/dev/null'}, {}),
        ])
        for r in res[:4]:
            self.assertNotIn('reply', r, f'ReadFile reached a host file: {r}')
        for r in res[4:]:
            self.assertNotIn('reply', r, f'the file API followed a planted link: {r}')
        for host in ('/var/tmp', '/tmp', secutil.S.path('/var/tmp'), secutil.S.path('/tmp')):
            self.assertFalse(os.path.lexists(os.path.join(host, marker)), f'{host}/{marker} was created')
        cp = self.ok(self.exec(self.sid, 'cat', '/work/mine'))
        self.assertEqual(cp.stdout, 'inside\n')

    # ---- mounts and files ----------------------------------------------------------

    def test_mounts_show_nothing_of_the_host_services(self):
        cp = self.ok(self.exec(self.sid, 'cat', '/proc/self/mountinfo'))
        lines = cp.stdout.splitlines()
        self.assertTrue(lines)
        for line in lines:
            pre, _, post = line.partition(' - ')
            fields = pre.split()
            root, point = fields[3], fields[4]
            fstype = post.split()[0]
            # (The agent is one file bound from wherever the daemon's build or package is.)
            for path in (point,) if point == '/run/sandbox-init' else (root, point):
                self.assertFalse(path.startswith(FORBIDDEN_MOUNT_PREFIXES),
                                 f'host path mounted into the sandbox: {line}')
            # (The sandbox's /etc is bound from the tree sandboxd wrote for its template.)
            etc_tree = point == '/etc' and re.fullmatch(r'/sandboxd-test-state/etc/[\w.-]+-[0-9a-f]{16}', root)
            # (The masked /proc directories: sandboxd's one empty directory, bound read-only.)
            empty = point.startswith('/proc/') and root == '/sandboxd-test-state/empty' and 'ro' in fields[5].split(',')
            for word in ('docker', 'mysql', 'dbus', 'sandboxd-test-state', 'polkit', 'journal'):
                if not (etc_tree or empty):
                    self.assertNotIn(word, line, f'mount line mentions {word}: {line}')
            self.assertIn('nosuid', fields[5].split(','), f'a mount without nosuid: {line}')
            self.assertNotIn(fstype, ('sysfs', 'cgroup', 'cgroup2', 'debugfs', 'securityfs', 'bpf',
                                      'tracefs', 'fusectl', 'configfs', 'hugetlbfs', 'mqueue'),
                             f'kernel interface mounted into the sandbox: {line}')
        points = [line.split(' - ')[0].split()[4] for line in lines]
        self.assertEqual(points[0], '/')
        self.assertIn('/work', points)
        self.assertIn('/tmp', points)

    def test_host_service_paths_do_not_exist_inside(self):
        got = self.py('import json, os; print(json.dumps({p: os.path.lexists(p) for p in %r}))' % (HOST_PATHS,))
        self.assertEqual([p for p, exists in got.items() if exists], [])

    def test_root_filesystem_is_read_only(self):
        got = self.py('''
import json, os
out = {}
for p in ("/usr/probe", "/etc/probe", "/probe", "/run/probe", "/proc/sys/kernel/hostname", "/proc/sysrq-trigger"):
    try:
        with open(p, "w") as f:
            f.write("x")
        out[p] = "written"
    except OSError as e:
        out[p] = e.errno
print(json.dumps(out))''')
        for p, r in got.items():
            self.assertNotEqual(r, 'written', f'{p} was writable inside')
        self.assertFalse(os.path.exists(secutil.S.path('/usr/probe')))

    # ---- /proc -----------------------------------------------------------------------

    def test_masked_proc_files_are_empty_or_unreadable(self):
        files = ('kallsyms', 'kcore', 'keys', 'key-users', 'timer_list', 'sched_debug', 'latency_stats',
                 'config.gz', 'kpagecount', 'kpageflags', 'kpagecgroup', 'iomem', 'ioports', 'vmallocinfo',
                 'slabinfo', 'mtrr', 'modules', 'buddyinfo', 'pagetypeinfo', 'zoneinfo', 'sysrq-trigger')
        # (/proc/sysvipc is left: it shows the sandbox's own IPC namespace, see below.)
        dirs = ('acpi', 'scsi', 'asound', 'bus', 'driver', 'fs', 'irq', 'tty')
        got = self.py('''
import json, os
out = {}
for f in %r:
    p = "/proc/" + f
    if not os.path.lexists(p):
        continue
    try:
        with open(p, "rb") as fh:
            data = fh.read(65536)
        out[p] = len(data)
    except OSError as e:
        out[p] = "error:%%d" %% e.errno
for d in %r:
    p = "/proc/" + d
    if not os.path.lexists(p):
        continue
    try:
        out[p] = sorted(os.listdir(p))
    except OSError as e:
        out[p] = "error:%%d" %% e.errno
print(json.dumps(out))''' % (files, dirs))
        self.assertIn('/proc/kallsyms', got, 'no /proc/kallsyms inside at all (this kernel has one)')
        self.assertIsInstance(got['/proc/kallsyms'], str, f'/proc/kallsyms is readable: {got["/proc/kallsyms"]}')
        for p, r in got.items():
            with self.subTest(p):
                self.assertTrue(r in (0, []) or (isinstance(r, str) and r.startswith('error:')),
                                f'{p} shows host details: {r}')

    def test_host_ipc_objects_are_invisible(self):
        # A System V shared memory segment of the host's (the test's own, removed after).
        libc = ctypes.CDLL(None, use_errno=True)
        shmid = libc.shmget(0, 4096, 0o600 | 0o1000)       # IPC_PRIVATE, IPC_CREAT
        self.assertGreaterEqual(shmid, 0, f'shmget: errno {ctypes.get_errno()}')
        self.addCleanup(libc.shmctl, shmid, 0, None)       # IPC_RMID
        with open('/proc/sysvipc/shm') as f:
            self.assertIn(str(shmid), [line.split()[1] for line in f.read().splitlines()[1:]])
        cp = self.ok(self.exec(self.sid, 'sh', '-c', 'cat /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem'))
        rows = [line for line in cp.stdout.splitlines() if not line.lstrip().startswith(('key', 'msqid'))]
        self.assertEqual(rows, [], 'System V IPC objects visible inside a sandbox')

    def test_only_the_sandboxes_own_processes_and_no_capabilities(self):
        got = self.py('''
import json, os
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
comm = {p: open("/proc/%d/comm" % p).read().strip() for p in pids if os.path.exists("/proc/%d" % p)}
st = {l.split(":")[0]: l.split(":", 1)[1].strip() for l in open("/proc/self/status")}
print(json.dumps({"comm": comm, "status": {k: st.get(k) for k in
      ("Uid", "Gid", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")},
      "hostname": os.uname().nodename, "uid_map": open("/proc/self/uid_map").read().split()}))''')
        self.assertEqual(got['comm'].get('1'), 'sandbox-init', got['comm'])
        self.assertNotIn('systemd', got['comm'].values())
        self.assertNotIn('sandboxd', got['comm'].values())
        self.assertLess(len(got['comm']), 10, got['comm'])
        st = got['status']
        self.assertEqual(st['Uid'].split(), ['1000'] * 4)
        self.assertEqual(st['Gid'].split(), ['1000'] * 4)
        for cap in ('CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb'):
            self.assertEqual(int(st[cap], 16), 0, f'{cap}={st[cap]}')
        self.assertEqual(st['NoNewPrivs'], '1')
        self.assertEqual(st['Seccomp'], '2')
        self.assertEqual(got['hostname'], 'sandbox')
        # uid 1000 is the only uid mapped (to the sandbox's own host uid: see
        # test_confinement.Daemonize for the host side).
        inside, _outside, count = got['uid_map']
        self.assertEqual((inside, count), ('1000', '1'), got['uid_map'])

    def test_no_user_namespace_can_be_made(self):
        # The one thing that refuses it is the seccomp policy (test_seccomp probes each
        # system call); here a real program meets it: util-linux's unshare(1).
        cp = self.exec(self.sid, 'unshare', '--user', '--map-root-user', 'id', '-u')
        self.assertNotEqual(cp.returncode, 0, cp.stdout)
        self.assertIn('Too many users', cp.stderr)

    # ---- network ---------------------------------------------------------------------

    def test_only_loopback_interface(self):
        cp = self.ok(self.exec(self.sid, 'cat', '/proc/net/dev'))
        ifaces = {line.split(':')[0].strip() for line in cp.stdout.splitlines()[2:] if ':' in line}
        self.assertEqual(ifaces, {'lo'})

    def test_no_network_address_is_reachable(self):
        # Listeners on the host's loopback (TCP v4, v6) and in its abstract unix namespace.
        listeners = []
        tcp4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp4.bind(('127.0.0.1', 0))
        listeners.append(tcp4)
        targets = {'tcp4-host-loopback': ('inet', '127.0.0.1', tcp4.getsockname()[1])}
        try:
            tcp6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            tcp6.bind(('::1', 0))
            listeners.append(tcp6)
            targets['tcp6-host-loopback'] = ('inet6', '::1', tcp6.getsockname()[1])
        except OSError:
            pass
        abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        name = f'\0sandboxd-test-{os.getpid()}-{id(abstract)}'
        abstract.bind(name)
        listeners.append(abstract)
        targets['abstract-unix'] = ('unix', name, 0)
        for s in listeners:
            s.listen(8)
            s.setblocking(False)
            self.addCleanup(s.close)
        targets.update({
            'private-10.0.0.1': ('inet', '10.0.0.1', 80),
            'public-1.1.1.1': ('inet', '1.1.1.1', 443),
            'host-address': ('inet', _host_address(), 22),
            'ipv6-public': ('inet6', '2606:4700:4700::1111', 443),
            'system-bus-path': ('unix', '/run/dbus/system_bus_socket', 0),
            'system-bus-via-proc-root': ('unix', '/proc/1/root/run/dbus/system_bus_socket', 0),
        })
        prog = '''
import errno, json, socket, sys
targets = json.loads(sys.argv[1])
out = {}
for key, (fam, host, port) in targets.items():
    f = {"inet": socket.AF_INET, "inet6": socket.AF_INET6, "unix": socket.AF_UNIX}[fam]
    s = socket.socket(f, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(host if fam == "unix" else (host, port))
        out[key] = "connected"
    except OSError as e:
        out[key] = errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__
    s.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("8.8.8.8", 53)); out["udp-8.8.8.8"] = "sent"
except OSError as e:
    out["udp-8.8.8.8"] = errno.errorcode[e.errno]
print(json.dumps(out))'''
        cp = self.ok(self.exec(self.sid, 'python3', '-c', prog, json.dumps(targets)))
        got = json.loads(cp.stdout)
        want = {k: 'ECONNREFUSED' for k in targets if 'loopback' in k or k == 'abstract-unix'}
        want.update({k: 'ENETUNREACH' for k in ('private-10.0.0.1', 'public-1.1.1.1', 'host-address',
                                                 'ipv6-public', 'udp-8.8.8.8')})
        want['system-bus-path'] = 'ENOENT'
        # /proc/1/root is the agent's, that is the sandbox's own root, and not even that is open.
        self.assertIn(got.pop('system-bus-via-proc-root', None), ('EACCES', 'ENOENT'))
        self.assertEqual(got, want)
        for s in listeners:
            with self.assertRaises(BlockingIOError, msg=f'{s} on the host got a connection from the sandbox'):
                s.accept()

    def test_sandboxes_cannot_reach_each_other(self):
        # A server in this sandbox on its loopback and in its abstract socket namespace,
        # which outlives the exec that started it.
        server = r'''
import os, socket, sys, threading
t = socket.socket(); t.bind(("127.0.0.1", 47123)); t.listen(8)
u = socket.socket(socket.AF_UNIX); u.bind("\0sandboxd-test-peer"); u.listen(8)
if os.fork():
    os._exit(0)
os.setsid()
def serve(s):
    while True:
        c, _ = s.accept(); c.sendall(b"hello"); c.close()
threading.Thread(target=serve, args=(u,), daemon=True).start()
serve(t)
'''
        self.ok(self.exec(self.sid, 'sh', '-c', 'python3 -c "$0" </dev/null >/dev/null 2>&1', server))
        client = r'''
import errno, json, socket, time
out = {}
for key, fam, addr in (("tcp", socket.AF_INET, ("127.0.0.1", 47123)),
                       ("abstract", socket.AF_UNIX, "\0sandboxd-test-peer")):
    for attempt in range(50):
        s = socket.socket(fam)
        try:
            s.connect(addr); out[key] = s.recv(5).decode(); break
        except OSError as e:
            out[key] = errno.errorcode[e.errno]
        finally:
            s.close()
        if out[key] != "ECONNREFUSED" or not RETRY:
            break
        time.sleep(0.05)
print(json.dumps(out))
'''
        # From the same sandbox the server answers (so it is up) ...
        cp = self.ok(self.exec(self.sid, 'python3', '-c', client.replace('RETRY', 'True')))
        self.assertEqual(json.loads(cp.stdout), {'tcp': 'hello', 'abstract': 'hello'})
        # ... and from another sandbox it is not there.
        other = self.create('--template', 'python')
        cp = self.ok(self.exec(other, 'python3', '-c', client.replace('RETRY', 'False')))
        self.assertEqual(json.loads(cp.stdout), {'tcp': 'ECONNREFUSED', 'abstract': 'ECONNREFUSED'})


def _host_address():
    """An address of the host's own (a route's source address; no packet is sent)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(('10.255.255.255', 9))
        return s.getsockname()[0]
    except OSError:
        return '10.0.2.15'
    finally:
        s.close()


if __name__ == '__main__':
    unittest.main(verbosity=2)
