#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 11: real programs run unchanged in a sandbox. A user with a name and a home,
localhost, a small /etc of the sandbox's own (never the host's), a bounded /dev/shm (a
tmpfs in memory; on disk see test_workspaces) and a read-only /dev; whoami, git, pip, venv and Node.js as their users would run them.

Run through run.py, or directly: python3 -m unittest -v test_programs
"""

import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

S = None
_owned = False

MiB = 1024 * 1024
SHM_DEFAULT = 64 * MiB  # TEMPLATE_SHM_DEFAULT, documented in sandboxd(8)


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()


def tearDownModule():
    harness.module_teardown(_owned)


class Base(harness.SystemTestCase):
    template = 'python'
    create_opts = ()
    sid = None

    @classmethod
    def setUpClass(cls):
        cp = S.sandboxctl('create', '--template', cls.template, *cls.create_opts)
        if cp.returncode != 0:
            raise AssertionError(f'sandboxctl create --template {cls.template} failed: {cp.stderr}')
        cls.sid = cp.stdout.strip()

    @classmethod
    def tearDownClass(cls):
        if cls.sid:
            S.sandboxctl('destroy', cls.sid, timeout=60)

    def sh(self, script, timeout=120, opts=(), sid=None, check=True):
        cp = S.sandboxctl('exec', *opts, sid or self.sid, '--', 'sh', '-c', script, timeout=timeout)
        if check:
            self.assertEqual(cp.returncode, 0, f'{script!r} failed ({cp.returncode}):\n'
                             f'stdout: {cp.stdout}\nstderr: {cp.stderr}')
        return cp

    def py(self, code, timeout=120):
        cp = S.sandboxctl('exec', self.sid, '--', 'python3', '-c', code, timeout=timeout)
        self.assertEqual(cp.returncode, 0, f'python3 -c failed ({cp.returncode}):\n{code}\n'
                         f'stdout: {cp.stdout}\nstderr: {cp.stderr}')
        return cp.stdout


class Identity(Base):
    """Who the code is, and what it is called."""

    def test_whoami_and_id(self):
        cp = self.sh('whoami; id -un; id -gn; id')
        lines = cp.stdout.splitlines()
        self.assertEqual(lines[:3], ['sandbox', 'sandbox', 'sandbox'])
        self.assertEqual(lines[3], 'uid=1000(sandbox) gid=1000(sandbox) groups=1000(sandbox)')

    def test_python_user_apis(self):
        out = self.py('import getpass, grp, os, pathlib, pwd\n'
                      'p = pwd.getpwuid(os.getuid())\n'
                      'print(getpass.getuser(), p.pw_name, p.pw_dir, p.pw_shell, grp.getgrgid(os.getgid()).gr_name)\n'
                      'print(pathlib.Path.home(), os.path.expanduser("~"), pwd.getpwnam("root").pw_uid)\n')
        self.assertEqual(out.splitlines(), ['sandbox sandbox /work /bin/sh sandbox', '/work /work 0'])

    def test_default_environment(self):
        cp = self.sh('echo "$USER $LOGNAME $HOME $SHELL $LANG"')
        self.assertEqual(cp.stdout, 'sandbox sandbox /work /bin/sh C.UTF-8\n')
        # The caller's environment overrides the defaults.
        cp = self.sh('echo "$USER $LANG"', opts=('--env', 'USER=alice', '--env', 'LANG=C'))
        self.assertEqual(cp.stdout, 'alice C\n')

    def test_hostname_and_localhost(self):
        cp = self.sh('hostname; cat /etc/hostname; getent hosts "$(hostname)"')
        lines = cp.stdout.splitlines()
        self.assertEqual(lines[:2], ['sandbox', 'sandbox'])
        self.assertEqual(lines[2].split(), ['127.0.1.1', 'sandbox'])
        out = self.py('import socket\n'
                      'print(sorted({a[4][0] for a in socket.getaddrinfo("localhost", 80)}))')
        self.assertEqual(out, "['127.0.0.1', '::1']\n")
        # Something listening on "localhost" is reached through "localhost", v4 and v6.
        out = self.py('import socket\n'
                      'for fam in (socket.AF_INET, socket.AF_INET6):\n'
                      '    s = socket.socket(fam); s.bind(("localhost", 0)); s.listen()\n'
                      '    c = socket.create_connection(("localhost", s.getsockname()[1]), timeout=5)\n'
                      '    a, _ = s.accept(); c.sendall(b"hi"); print(fam.name, a.recv(2).decode())\n')
        self.assertEqual(out.splitlines(), ['AF_INET hi', 'AF_INET6 hi'])

    def test_other_hosts_do_not_resolve(self):
        out = self.py('import socket\n'
                      'try:\n'
                      '    socket.getaddrinfo("example.com", 80)\n'
                      'except socket.gaierror as e:\n'
                      '    print(e.errno == socket.EAI_NONAME)\n')
        self.assertEqual(out, 'True\n')


class Etc(Base):
    """The sandbox's own /etc: generated, read-only, with nothing of the host's own."""

    def test_files_present_and_read_only(self):
        cp = self.sh('cd /etc && ls')
        names = set(cp.stdout.split())
        for name in ('passwd', 'group', 'hosts', 'nsswitch.conf', 'host.conf', 'hostname', 'machine-id', 'localtime',
                     'pip.conf', 'alternatives', 'ld.so.cache'):
            self.assertIn(name, names)
        for name in ('os-release', 'services', 'protocols'):
            if os.path.exists(S.path(f'/etc/{name}')):
                self.assertIn(name, names)
        # Nothing else of the host's: no shadow, no resolv.conf (no network), no fstab.
        for name in ('shadow', 'gshadow', 'resolv.conf', 'fstab', 'sudoers', 'sandboxd'):
            self.assertNotIn(name, names)
        self.assertLessEqual(len(names), 20, f'the sandbox /etc holds more than its own: {sorted(names)}')
        cp = self.sh('touch /etc/x 2>&1; (echo x >> /etc/passwd) 2>/dev/null || echo passwd-refused', check=False)
        self.assertIn('Read-only file system', cp.stdout)
        self.assertIn('passwd-refused', cp.stdout)

    def test_contents(self):
        cp = self.sh('cat /etc/passwd')
        self.assertIn('sandbox:x:1000:1000:sandbox:/work:/bin/sh\n', cp.stdout)
        self.assertNotIn(':x:1:', cp.stdout)  # not the host's (daemon, bin, …)
        cp = self.sh('grep -c files /etc/nsswitch.conf; grep -c dns /etc/nsswitch.conf || true')
        self.assertEqual(cp.stdout.split()[1], '0')
        if os.path.exists(S.path('/etc/os-release')):
            with open(S.path('/etc/os-release')) as f:
                self.assertEqual(self.sh('cat /etc/os-release').stdout, f.read())
        cp = self.sh('readlink /etc/localtime; date +%Z')
        self.assertEqual(cp.stdout.split(), ['/usr/share/zoneinfo/UTC', 'UTC'])
        out = self.py('import socket; print(socket.getservbyname("http", "tcp"), socket.getprotobyname("tcp"))')
        self.assertEqual(out, '80 6\n')

    def test_machine_id_is_the_sandboxs_own(self):
        mine = self.sh('cat /etc/machine-id').stdout
        self.assertRegex(mine, r'^[0-9a-f]{32}\n$')
        with open(S.path('/etc/machine-id')) as f:
            self.assertNotEqual(mine, f.read())
        cp = S.sandboxctl('run', '--template', self.template, '--', 'cat', '/etc/machine-id')
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertRegex(cp.stdout, r'^[0-9a-f]{32}\n$')
        self.assertNotEqual(cp.stdout, mine)


class Dev(Base):
    """In memory, /dev/shm is a tmpfs of the template's shm_max; on disk it is the
    workspace's shm/ (test_workspaces.DevShmTest)."""
    create_opts = ('--storage=tmpfs',)

    def test_shm_is_a_bounded_tmpfs(self):
        cp = self.sh('stat -f -c %T /dev/shm; stat -c %a /dev/shm; df -B1 --output=size /dev/shm | tail -1')
        fstype, mode, size = cp.stdout.split()
        self.assertEqual(fstype, 'tmpfs')
        self.assertEqual(mode, '1777')
        self.assertEqual(int(size), SHM_DEFAULT)
        # POSIX shared memory and semaphores live there.
        out = self.py('from multiprocessing import shared_memory, Semaphore\n'
                      's = shared_memory.SharedMemory(create=True, size=4096); s.buf[0] = 7\n'
                      't = shared_memory.SharedMemory(s.name); print(t.buf[0]); t.close(); s.close(); s.unlink()\n'
                      'Semaphore(1).acquire(); print("sem")\n')
        self.assertEqual(out, '7\nsem\n')

    def test_writing_past_the_bound_fails_with_enospc(self):
        cp = self.sh(f'dd if=/dev/zero of=/dev/shm/fill bs=1M count={SHM_DEFAULT // MiB + 8} 2>&1; '
                     'echo "rc=$?"; rm -f /dev/shm/fill', check=False)
        self.assertIn('No space left on device', cp.stdout)
        self.assertIn('rc=1', cp.stdout)
        # /dev itself takes nothing: read-only, its devices still work.
        cp = self.sh('{ echo x > /dev/fill; } 2>&1; echo x > /dev/null && head -c 4 /dev/zero | wc -c', check=False)
        self.assertIn('Read-only file system', cp.stdout)
        self.assertTrue(cp.stdout.rstrip().endswith('4'), cp.stdout)


class Tools(Base):
    """Tools whose users never think about the sandbox."""

    def test_git_init_and_commit(self):
        cp = self.sh('git init -q repo && cd repo && git config user.name "A Sandbox" && '
                     'git config user.email a@sandbox && echo hi > f && git add f && '
                     'git commit -q -m first && git log --format="%an <%ae> %s"')
        self.assertEqual(cp.stdout, 'A Sandbox <a@sandbox> first\n')

    def test_pip_install_user_of_a_local_wheel(self):
        # A wheel made here, offline: a zip with the metadata pip reads.
        self.py('import zipfile, base64, hashlib\n'
                'files = {"tinypkg/__init__.py": b"VALUE = 42\\n",\n'
                '  "tinypkg-0.1.dist-info/METADATA": b"Metadata-Version: 2.1\\nName: tinypkg\\nVersion: 0.1\\n",\n'
                '  "tinypkg-0.1.dist-info/WHEEL": b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\n'
                'Tag: py3-none-any\\n"}\n'
                'rec = ""\n'
                'with zipfile.ZipFile("/work/tinypkg-0.1-py3-none-any.whl", "w") as z:\n'
                '    for n, d in files.items():\n'
                '        z.writestr(n, d)\n'
                '        h = base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()\n'
                '        rec += f"{n},sha256={h},{len(d)}\\n"\n'
                '    z.writestr("tinypkg-0.1.dist-info/RECORD", rec + "tinypkg-0.1.dist-info/RECORD,,\\n")\n')
        cp = self.sh('python3 -m pip install --user --no-index /work/tinypkg-0.1-py3-none-any.whl 2>&1 && '
                     'python3 -c "import tinypkg, sys; print(tinypkg.VALUE, tinypkg.__file__)"', timeout=180)
        last = cp.stdout.splitlines()[-1]
        self.assertRegex(last, r'^42 /work/\.local/lib/python3\.\d+/site-packages/tinypkg/__init__\.py$')

    def test_venv(self):
        cp = self.sh('python3 -m venv /work/venv && /work/venv/bin/python -c '
                     '"import sys; print(sys.prefix, sys.prefix != sys.base_prefix)" && '
                     '/work/venv/bin/python -m pip --version', timeout=300)
        self.assertEqual(cp.stdout.splitlines()[0], '/work/venv True')
        self.assertIn('/work/venv/', cp.stdout.splitlines()[1])


NODE_CHECKS = r'''
const os = require('os'), http = require('http'), cp = require('child_process'),
      wt = require('worker_threads'), fs = require('fs'), path = require('path');
const out = [];
const u = os.userInfo();
out.push(`user ${u.username} ${u.uid} ${u.homedir} ${u.shell} ${os.hostname()} ${os.homedir()}`);
out.push('child ' + cp.execFileSync('sh', ['-c', 'echo $((6*7))']).toString().trim());
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'w-'));
const watcher = fs.watch(dir);
const watched = new Promise((res) => watcher.on('change', (ev, name) => { watcher.close(); res(name); }));
setTimeout(() => fs.writeFileSync(path.join(dir, 'x'), 'y'), 50);
const worker = new Promise((res, rej) => {
  const w = new wt.Worker('require("worker_threads").parentPort.postMessage(6*7)', { eval: true });
  w.on('message', res); w.on('error', rej);
});
const server = http.createServer((req, res) => res.end('hello ' + req.url));
server.listen(0, 'localhost', async () => {
  const port = server.address().port;
  const body = await new Promise((res, rej) => http.get({ host: 'localhost', port, path: '/x' }, (r) => {
    let b = ''; r.on('data', (d) => b += d); r.on('end', () => res(b));
  }).on('error', rej));
  out.push('http ' + body);
  server.close();
  out.push('worker ' + await worker);
  out.push('watch ' + await watched);
  console.log(out.join('\n'));
});
setTimeout(() => { console.error('timed out: ' + out.join('; ')); process.exit(3); }, 20000).unref();
'''


class Node(Base):
    template = 'node'

    def test_node_runs_unchanged(self):
        cp = S.sandboxctl('exec', self.sid, '--', 'node', '-e', NODE_CHECKS, timeout=120)
        self.assertEqual(cp.returncode, 0, f'node failed ({cp.returncode}):\n{cp.stdout}\n{cp.stderr}')
        self.assertEqual(cp.stdout.splitlines(), [
            'user sandbox 1000 /work /bin/sh sandbox /work',
            'child 42',
            'http hello /x',
            'worker 42',
            'watch x',
        ])


class ByDesign(Base):
    """What a sandbox forbids by design fails with the usual errno (sandboxd(8))."""

    def test_forbidden_fail_with_normal_errno(self):
        out = self.py('import os, socket, errno\n'
                      'def e(f):\n'
                      '    try:\n'
                      '        f(); return "ok"\n'
                      '    except OSError as x:\n'
                      '        return errno.errorcode[x.errno]\n'
                      'print(e(lambda: os.setuid(0)), e(lambda: os.setgid(0)),\n'
                      '      e(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),\n'
                      '      e(lambda: socket.create_connection(("192.0.2.1", 80), timeout=5)))\n')
        # Only uid and gid 1000 exist in the sandbox's user namespace: others are EINVAL.
        self.assertEqual(out.split(), ['EINVAL', 'EINVAL', 'EPERM', 'ENETUNREACH'])
        cp = self.sh('mount -t tmpfs none /tmp 2>&1; echo rc=$?', check=False)
        self.assertIn('rc=', cp.stdout)
        self.assertNotIn('rc=0', cp.stdout)


if __name__ == '__main__':
    unittest.main()
