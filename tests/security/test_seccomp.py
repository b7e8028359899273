#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The seccomp policy as code in a sandbox meets it: each blocked call fails with the errno
that man/sandboxd-seccomp.7.scd documents (src/core/seccomp-policy.c is the table), the
calls next to them still work, and ordinary programs (python3, sh) are not broken.

The probes run once, in one python sandbox, through seccomp_probe.py (raw syscall() via
ctypes, so that no libc wrapper emulates or falls back); each expectation is a test."""

import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import secutil  # noqa: E402
from secutil import Base  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE = os.path.join(HERE, 'seccomp_probe.py')
MANPAGE = os.path.join(HERE, '..', '..', 'man', 'sandboxd-seccomp.7.scd')


def setUpModule():
    secutil.setup_module()


def tearDownModule():
    secutil.teardown_module()


NS = ('NEWUSER', 'NEWNS', 'NEWCGROUP', 'NEWUTS', 'NEWIPC', 'NEWPID', 'NEWNET', 'NEWTIME')

# probe key -> the one acceptable outcome. Without the filter the kernel answers something
# else for each (ENOSPC, EFAULT, EBADF, ENOTTY, a new fd, ...): see seccomp_probe.py.
EXPECTED = {}
for _f in NS:
    EXPECTED[f'unshare:{_f}'] = {'errno': 'EUSERS'}
    EXPECTED[f'unshare:{_f}|high'] = {'errno': 'EUSERS'}
    if _f != 'NEWTIME':
        EXPECTED[f'clone:{_f}'] = {'errno': 'EUSERS'}
EXPECTED.update({
    'setns': {'errno': 'EUSERS'},
    'ptrace': {'errno': 'EPERM'},
    'process_vm_readv': {'errno': 'EPERM'},
    'process_vm_writev': {'errno': 'EPERM'},
})
for _c in ('clone3', 'add_key', 'request_key', 'keyctl', 'bpf', 'perf_event_open', 'userfaultfd',
           'io_uring_setup', 'io_uring_enter', 'io_uring_register'):
    EXPECTED[_c] = {'errno': 'ENOSYS'}
for _c in ('mount', 'umount2', 'pivot_root', 'move_mount', 'open_tree', 'fsopen', 'fsconfig', 'fsmount',
           'fspick', 'mount_setattr'):
    EXPECTED[_c] = {'errno': 'EROFS'}
for _c in ('kexec_load', 'kexec_file_load', 'init_module', 'finit_module', 'delete_module', 'reboot',
           'swapon', 'swapoff', 'settimeofday', 'clock_settime', 'adjtimex', 'clock_adjtime', 'acct',
           'syslog', 'quotactl', 'quotactl_fd', 'open_by_handle_at', 'name_to_handle_at', 'iopl',
           'ioperm', 'vhangup', 'lookup_dcookie', 'nfsservctl', 'uselib', 'sysfs', 'ustat', '_sysctl'):
    EXPECTED[_c] = {'errno': 'EACCES'}
for _p in ('READ_IMPLIES_EXEC', 'ADDR_COMPAT_LAYOUT', 'query', 'high'):
    EXPECTED[f'personality:{_p}'] = {'errno': 'EINVAL'}
for _i in ('TIOCSTI', 'TIOCSTI|high', 'TIOCSTI|ffff', 'TIOCLINUX', 'TIOCLINUX|high'):
    EXPECTED[f'ioctl:{_i}'] = {'errno': 'EIO'}
for _s in ('socket:AF_PACKET', 'socket:AF_PACKET/dgram', 'socket:AF_UNSPEC', 'socket:AF_AX25',
           'socket:AF_APPLETALK', 'socket:AF_IPX', 'socket:AF_BRIDGE', 'socket:AF_ATMPVC', 'socket:AF_X25',
           'socket:AF_ROSE', 'socket:AF_DECnet', 'socket:AF_KEY', 'socket:AF_ALG', 'socket:AF_VSOCK',
           'socket:AF_BLUETOOTH', 'socket:AF_INET|high', 'socket:AF_NETLINK/AUDIT',
           'socket:AF_NETLINK/UEVENT', 'socket:AF_NETLINK/4', 'socket:AF_NETLINK/ROUTE|high',
           'socketpair:AF_PACKET', 'socketpair:AF_APPLETALK'):
    EXPECTED[_s] = {'errno': 'EAFNOSUPPORT'}
# Foreign ABIs: see Seccomp.foreign_expected() (what the kernel does with them decides).
FOREIGN = ('x32:getpid', 'i386:getpid')
SIGSYS, SIGSEGV = 31, 11

# Allowed neighbours: these must succeed.
ALLOWED = ('personality:ADDR_NO_RANDOMIZE', 'personality:PER_LINUX32', 'personality:UNAME26',
           'personality:PER_LINUX', 'ioctl:FIONREAD',
           'socket:AF_NETLINK/ROUTE', 'socket:AF_UNIX', 'socket:AF_INET', 'socket:AF_INET6',
           'socketpair:AF_UNIX', 'unshare:0', 'clone:plain')

# Calls the policy names that no probe can reach on x86_64 (no such system call there).
NOT_ON_THIS_ARCH = {'umount', 'stime'}


class Seccomp(Base):
    results = None
    run_error = None

    @classmethod
    def setUpClass(cls):
        cp = secutil.S.sandboxctl('create', '--template', 'python', '--tasks', '64')
        if cp.returncode != 0:
            raise AssertionError(f'sandboxctl create --template python failed: {cp.stderr}')
        cls.sid = cp.stdout.strip()
        with open(PROBE) as f:
            code = f.read()
        cp = secutil.S.sandboxctl('exec', cls.sid, '--', 'python3', '-', input=code, timeout=120)
        try:
            cls.results = json.loads(cp.stdout)
        except ValueError:
            cls.run_error = f'the probe printed no JSON (exit {cp.returncode}):\n{cp.stdout}\n{cp.stderr}'
            return
        if 'skip' in cls.results:
            raise unittest.SkipTest(f'probes are for x86_64, this is {cls.results["skip"]}')

    @classmethod
    def tearDownClass(cls):
        secutil.S.sandboxctl('destroy', cls.sid, timeout=120)

    @classmethod
    def foreign_expected(cls, key):
        """A foreign ABI never reaches a system call in a sandbox. Where this kernel serves
        the entry point unfiltered (i386 with IA-32 emulation on) or answers ENOSYS (x32
        off), the filter must kill with SIGSYS. Where the kernel refuses the entry point
        itself (int 0x80 with IA-32 emulation off: SIGSEGV), no system call happens,
        filtered or not: the sandbox must see the same SIGSEGV (the unit test proves the
        filter has no foreign architecture and kills a bad one)."""
        if not hasattr(cls, 'host_foreign'):
            cp = secutil.S.run(['python3', PROBE, '--foreign'], timeout=60)
            cls.host_foreign = json.loads(cp.stdout)
        host = cls.host_foreign[key]
        if 'exit' in host:
            case = 'the kernel serves it unfiltered' if host['exit'] == 0 else 'the kernel says ENOSYS unfiltered'
            want = {'signal': SIGSYS}
        elif host == {'signal': SIGSEGV}:
            case, want = 'the kernel faults the entry point itself (SIGSEGV)', {'signal': SIGSEGV}
        else:
            raise AssertionError(f'{key} unfiltered on this host: {host}, neither served nor faulted')
        print(f'\n# {key}: {case} -> expecting {want} in a sandbox', file=sys.stderr, flush=True)
        return want

    def result(self, key):
        if self.run_error:
            self.fail(self.run_error)
        self.assertIn(key, self.results, f'probe {key} did not run')
        return self.results[key]

    def test_every_documented_call_is_probed_for_its_documented_errno(self):
        """Each call of the RULES table of man/sandboxd-seccomp.7.scd has a probe here, and
        each probe expects the errno documented for its call."""
        rules = documented_rules()
        self.assertGreater(len(rules), 20, f'only {len(rules)} rules read from {MANPAGE}')
        documented = {}
        for calls, _condition, err in rules:
            for c in calls:
                documented.setdefault(c, set()).add(err)
        probed = {}
        for key, want in EXPECTED.items():
            call = key.split(':')[0]
            if 'errno' in want:
                probed.setdefault(call, set()).add(want['errno'])
        missing = sorted(set(documented) - set(probed) - NOT_ON_THIS_ARCH)
        self.assertEqual(missing, [], f'documented as refused but not probed: {missing}')
        wrong = {c: (sorted(errs), sorted(documented.get(c, ()))) for c, errs in probed.items()
                 if not errs <= documented.get(c, set())}
        self.assertEqual(wrong, {}, 'probes expect errnos the man page does not document: '
                                    '{call: (expected here, documented)}')

    def test_ordinary_python_and_sh_work(self):
        prog = r'''
import json, os, socket, subprocess, threading, concurrent.futures
srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen(1)
port = srv.getsockname()[1]
def serve():
    c, _ = srv.accept(); c.sendall(c.recv(100).upper()); c.close()
t = threading.Thread(target=serve); t.start()
cli = socket.create_connection(('127.0.0.1', port)); cli.sendall(b'ping'); got = cli.recv(100); t.join()
with concurrent.futures.ThreadPoolExecutor(8) as ex:
    squares = sum(ex.map(lambda x: x * x, range(100)))
pid = os.fork()
if pid == 0:
    os._exit(7)
_, st = os.waitpid(pid, 0)
out = subprocess.run(['sh', '-c', 'echo a b c | tr a-z A-Z | wc -w'], capture_output=True, text=True).stdout
print(json.dumps({'echo': got.decode(), 'squares': squares, 'fork': os.WEXITSTATUS(st),
                  'pipeline': out.strip(), 'ifaces': [n for _, n in socket.if_nameindex()],
                  'json': json.loads('{"a": [1, 2]}')}))
'''
        cp = self.ok(self.exec(self.sid, 'python3', '-c', prog))
        self.assertEqual(json.loads(cp.stdout), {'echo': 'PING', 'squares': 328350, 'fork': 7,
                                                 'pipeline': '3', 'ifaces': ['lo'],
                                                 'json': {'a': [1, 2]}})
        cp = self.ok(self.exec(self.sid, 'sh', '-c',
                               'seq 1 1000 | sort -rn | head -3 | tr "\\n" " "; (sleep 0.1 & wait); '
                               'x=$(echo sub); echo "$x"'))
        self.assertEqual(cp.stdout, '1000 999 998 sub\n')

    def test_setarch_R_works(self):
        # personality(ADDR_NO_RANDOMIZE) is allowed by the policy (setarch -R, sanitizers).
        cp = self.exec(self.sid, 'setarch', os.uname().machine, '-R', 'true')
        self.assertEqual(cp.returncode, 0, f'setarch -R inside a sandbox: {cp.stderr}')

    def test_python_venv_and_pip_style_imports(self):
        # What pip-installed pure-Python packages do on import: compile, create files,
        # run the stdlib's ssl, hashlib, sqlite3, multiprocessing.
        prog = r'''
import hashlib, multiprocessing, sqlite3, ssl, tempfile, os
d = tempfile.mkdtemp()
open(os.path.join(d, 'm.py'), 'w').write('X = 41\n')
import sys; sys.path.insert(0, d); import m
db = sqlite3.connect(':memory:'); db.execute('create table t(x)'); db.execute('insert into t values (1)')
with multiprocessing.Pool(2) as p:
    r = p.map(abs, [-1, -2])
print(m.X + db.execute('select x from t').fetchone()[0], hashlib.sha256(b'').hexdigest()[:8], r,
      ssl.create_default_context().verify_mode == ssl.CERT_REQUIRED)
'''
        cp = self.ok(self.exec(self.sid, 'python3', '-c', prog))
        self.assertEqual(cp.stdout, '42 e3b0c442 [1, 2] True\n')


def documented_rules():
    """[(calls, condition, errno)] from the RULES table of man/sandboxd-seccomp.7.scd."""
    with open(MANPAGE) as f:
        text = f.read()
    section = text.split('# RULES', 1)[1].split('\n# ', 1)[0]
    rows, cells = [], None
    for line in section.splitlines():
        if line.startswith('|'):
            cells = [line[1:].strip()]
            rows.append(cells)
        elif line.startswith(':') and cells is not None:
            cells.append(line[1:].strip())
    out = []
    for cells in rows:
        if len(cells) < 3:
            continue
        calls = [c.strip().replace('\\_', '_') for c in cells[0].split(',')]
        out.append((calls, cells[1], cells[2]))
    return out


def _make_test(key, want):
    def test(self):
        self.assertEqual(self.result(key), want, f'{key}: expected {want}')
    test.__doc__ = f'{key} -> {want}'
    return test


def _make_allowed(key):
    def test(self):
        got = self.result(key)
        self.assertIn('ret', got, f'{key} should be allowed, got {got}')
        if isinstance(got['ret'], int):
            self.assertGreaterEqual(got['ret'], 0, f'{key}: {got}')
    test.__doc__ = f'{key} is allowed'
    return test


def _name(key):
    return re.sub(r'[^A-Za-z0-9]+', '_', key).strip('_')


def _make_foreign(key):
    def test(self):
        want = self.foreign_expected(key)
        self.assertEqual(self.result(key), want, f'{key}: expected {want}')
    test.__doc__ = f'{key} never reaches a system call'
    return test


for _k, _w in EXPECTED.items():
    setattr(Seccomp, f'test_blocked_{_name(_k)}', _make_test(_k, _w))
for _k in FOREIGN:
    setattr(Seccomp, f'test_blocked_{_name(_k)}', _make_foreign(_k))
for _k in ALLOWED:
    setattr(Seccomp, f'test_allowed_{_name(_k)}', _make_allowed(_k))


if __name__ == '__main__':
    unittest.main(verbosity=2)
