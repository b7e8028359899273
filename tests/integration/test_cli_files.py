#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 4 through sandboxctl: cp in both directions (files and "-"), ls, cat, stat, the
errors a user sees, a planted symlink to a host file, exec --tty on a real pseudo-terminal
(size, resize, the terminal restored), and start/ps/kill of background processes.

Every test runs the built sandboxctl on the booted system (see harness.py) and asserts on
what its user sees: bytes, exit status, messages. Host files live in a directory of the
test's own under the harness's work directory, which the system sees at the same path.
Run through run.py, or directly: python3 -m unittest -v test_cli_files
"""

import fcntl
import hashlib
import json
import os
import pty
import re
import secrets
import select
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import termios
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

S = None           # the harness.System
_owned = False     # True when this module booted it (not run.py)

MiB = 1024 * 1024


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()


def tearDownModule():
    harness.module_teardown(_owned)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(MiB), b''):
            h.update(chunk)
    return h.hexdigest()


def _env():
    env = dict(os.environ, LC_ALL='C.UTF-8', SYSTEMD_COLORS='0')
    env.pop('NOTIFY_SOCKET', None)
    return env


class PtySession:
    """sandboxctl ARGS with a new pseudo-terminal of ROWS x COLUMNS as its controlling
    terminal and standard streams, as in an interactive shell."""

    def __init__(self, argv, rows=33, cols=111):
        self.pid, self.master = pty.fork()
        if self.pid == 0:  # the child: the size is set before sandboxctl can ask for it
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack('HHHH', rows, cols, 0, 0))
                os.execvpe(argv[0], argv, _env())
            finally:
                os._exit(127)
        self.out = b''
        self.status = None
        self.termios_before = termios.tcgetattr(self.master)

    def read_until(self, pattern, timeout=30):
        """Reads until PATTERN (bytes regex) appears in the output; returns the match."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.out)
            if m:
                return m
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                raise AssertionError(f'{pattern!r} not seen within {timeout}s; output: {self.out!r}')

    def _read(self, timeout):
        ready, _, _ = select.select([self.master], [], [], min(timeout, 1.0))
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every end of the terminal is closed
            return False
        self.out += data
        return bool(data)

    def finish(self, timeout=60):
        """Reads to the end and reaps sandboxctl; returns its exit status."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._read(deadline - time.monotonic()):
            if self.status is None:
                pid, st = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.status = os.waitstatus_to_exitcode(st)
        if self.status is None:
            pid, st = os.waitpid(self.pid, 0 if time.monotonic() < deadline else os.WNOHANG)
            if not pid:
                raise AssertionError(f'sandboxctl did not end within {timeout}s; output: {self.out!r}')
            self.status = os.waitstatus_to_exitcode(st)
        return self.status

    def termios_now(self):
        return termios.tcgetattr(self.master)

    def close(self):
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.status = -9
        try:
            os.close(self.master)
        except OSError:
            pass


class Base(harness.SandboxTestCase):
    """sandboxctl with its stdout as bytes (ctl, create); the rest as the harness's."""

    def setUp(self):
        self.hostdir = tempfile.mkdtemp(prefix='cli-files-', dir=S.workdir)
        self.addCleanup(shutil.rmtree, self.hostdir, ignore_errors=True)

    def ctl(self, *args, input=None, timeout=120):
        """sandboxctl ARGS on the system; stdout as bytes, stderr as text."""
        p = subprocess.run(S.wrap([S.paths.sandboxctl, *args]), input=input,
                           stdin=None if input is not None else subprocess.DEVNULL,
                           capture_output=True, env=_env(), timeout=timeout)
        p.stderr = p.stderr.decode(errors='replace')
        return p

    def create(self):
        cp = self.ok(self.ctl('create'))
        sid = cp.stdout.decode().strip()
        self.assertRegex(sid, r'^[A-Za-z0-9_-]+$')
        self.addCleanup(lambda: S.sandboxctl('destroy', sid, timeout=120))
        return sid

    def sh(self, sid, script):
        return self.ok(self.ctl('exec', sid, '--', 'sh', '-c', script))

    def host(self, name):
        return os.path.join(self.hostdir, name)

    def ls_json(self, sid, *args):
        return {e['path']: e for e in json.loads(self.ok(self.ctl('--json', 'ls', sid, *args)).stdout)}


class HostileNames(Base):
    """Issue 13: names planted by the sandboxed code reach the operator's terminal quoted,
    as GNU ls quotes them there; never raw escape sequences or line breaks."""

    def test_ls_and_stat_quote_hostile_names(self):
        sid = self.create()
        # A name with ESC [2J (clear screen) and a newline that forges a listing line; one
        # that is not UTF-8; a symlink whose target is both.
        self.sh(sid, "cd /work && : > \"$(printf 'a\\033[2Jb\\nfile 0644 1 2000-01-01 00:00:00 forged')\" && "
                     ": > \"$(printf 'bad\\377name')\" && "
                     "ln -s \"$(printf 'tgt\\033]0;x\\007\\377')\" lnk && : > 'it s'")
        cp = self.ctl('ls', sid, timeout=60)
        self.ok(cp)
        out = cp.stdout
        self.assertNotIn(b'\033', out, f'ls printed an escape character: {out!r}')
        self.assertNotIn(b'\007', out, f'ls printed a BEL: {out!r}')
        self.assertNotIn(b'\377', out, f'ls printed a byte that is not UTF-8: {out!r}')
        self.assertNotRegex(out.decode(), r'(?m)^file 0644 1 2000', 'a forged listing line')
        text = out.decode()
        self.assertIn("'a'$'\\033''[2Jb'$'\\n''file 0644 1 2000-01-01 00:00:00 forged'", text)
        self.assertIn("'bad'$'\\377''name'", text)
        self.assertIn("lnk -> 'tgt'$'\\033'']0;x'$'\\a'$'\\377'", text)
        self.assertIn("'it s'", text)
        # stat follows the link (stat -L): to nothing here.
        cp = self.ctl('stat', sid, 'lnk', timeout=60)
        self.assertEqual(cp.returncode, 1)
        self.assertNotIn('\033', cp.stderr)
        # --json: the escaped form, and the exact bytes in hex.
        entries = self.ls_json(sid)
        self.assertEqual(entries['bad\\xffname']['path_hex'], b'bad\xffname'.hex())
        self.assertEqual(entries['lnk']['target_hex'], b'tgt\033]0;x\007\xff'.hex())
        self.assertNotIn('path_hex', entries['it s'])


class Unbounded(Base):
    """Issue 13: a download ends when its client is gone, and a sparse terabyte is refused
    unless the caller raises the bound."""

    def test_killed_cp_stops_the_transfer(self):
        sid = self.create()
        self.sh(sid, 'truncate -s 1T /work/sparse')
        # Our pipe is sandboxctl's standard output, so the agent writes straight into it
        # and this reader outlives sandboxctl: only sandboxd can end the transfer.
        r, w = os.pipe()
        p = subprocess.Popen(S.wrap([S.paths.sandboxctl, 'cp', '--max', '2T', f'{sid}:sparse', '-']),
                             stdout=w, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=_env())
        os.close(w)
        got = 0
        while got < 64 * MiB:
            b = os.read(r, MiB)
            self.assertTrue(b, 'the download ended early')
            got += len(b)
        ctl = None
        for pid in harness._children(p.pid):
            if harness._comm(pid) == 'sandboxctl':
                ctl = pid
        self.assertIsNotNone(ctl, 'no sandboxctl process under nsenter')
        os.kill(ctl, signal.SIGKILL)
        p.wait(30)
        after_kill = got
        deadline = time.monotonic() + 30
        ended = False
        while time.monotonic() < deadline:
            ready, _, _ = select.select([r], [], [], 1)
            if ready:
                b = os.read(r, MiB)
                if not b:
                    ended = True
                    break
                got += len(b)
        os.close(r)
        self.assertTrue(ended, f'the transfer went on after sandboxctl was killed: '
                               f'{(got - after_kill) // MiB} MiB more in 30 s')
        # The sandbox is fine, and free for more.
        self.assertEqual(self.sh(sid, 'echo ok').stdout, b'ok\n')

    def test_sparse_terabyte_needs_max(self):
        sid = self.create()
        self.sh(sid, 'truncate -s 1T /work/sparse && echo small > /work/small')
        # Through head: should the download stream, it is bounded here all the same.
        err = self.host('err')
        t0 = time.monotonic()
        script = f'({S.paths.sandboxctl} cp {sid}:sparse - 2>{err}; echo "status $?" >>{err}) | head -c 1048576'
        cp = subprocess.run(S.wrap(['sh', '-c', script]), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=_env(), timeout=120)
        self.assertLess(time.monotonic() - t0, 60)
        with open(err) as f:
            stderr = f.read()
        self.assertEqual(cp.stdout, b'', stderr)
        self.assertIn('more than 1073741824 bytes', stderr)
        self.assertIn('Max', stderr)
        self.assertRegex(stderr, r'status [1-9]')
        self.assertEqual(self.ok(self.ctl('cp', f'{sid}:small', '-')).stdout, b'small\n')
        head = subprocess.run(S.wrap(['sh', '-c', f'{S.paths.sandboxctl} cp --max 2T {sid}:sparse - | head -c 1000']),
                              capture_output=True, env=_env(), timeout=60)
        self.assertEqual(head.stdout, b'\0' * 1000, 'an explicit Max lets the download through')


class Copy(Base):
    def test_round_trip_20MiB(self):
        sid = self.create()
        src, back = self.host('big.bin'), self.host('back.bin')
        with open(src, 'wb') as f:
            f.write(secrets.token_bytes(20 * MiB))
        os.chmod(src, 0o600)
        want = sha256_file(src)

        self.ok(self.ctl('cp', src, f'{sid}:/work/big.bin'))
        # Inside, by a tool of the sandbox's own: the same bytes, and the source's mode.
        inside = self.sh(sid, 'sha256sum /work/big.bin; stat -c %a /work/big.bin').stdout.decode().split()
        self.assertEqual(inside[0], want)
        self.assertEqual(inside[-1], '600')

        self.ok(self.ctl('cp', f'{sid}:/work/big.bin', back))
        self.assertEqual(sha256_file(back), want)
        self.assertEqual(os.stat(back).st_size, 20 * MiB)
        self.assertEqual(stat.S_IMODE(os.stat(back).st_mode), 0o644)

        # --mode for a created file; into a host directory under the source's name.
        sub = self.host('sub')
        os.mkdir(sub)
        self.ok(self.ctl('cp', '--mode', '0640', f'{sid}:/work/big.bin', sub))
        self.assertEqual(sha256_file(os.path.join(sub, 'big.bin')), want)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(sub, 'big.bin')).st_mode), 0o640)

    def test_stdin_and_stdout(self):
        sid = self.create()
        data = bytes(range(256)) * 1024 + b'\0tail\n'
        self.ok(self.ctl('cp', '-', f'{sid}:/work/in.bin', input=data))
        self.assertEqual(self.sh(sid, 'wc -c < /work/in.bin').stdout.strip(), str(len(data)).encode())
        self.assertEqual(self.ok(self.ctl('cp', f'{sid}:/work/in.bin', '-')).stdout, data)

        # -p creates the missing directories; without it the copy fails.
        cp = self.ctl('cp', '-', f'{sid}:/work/a/b/c.txt', input=b'x')
        self.assertEqual(cp.returncode, 1)
        self.assertIn(f'Failed to copy to {sid}:/work/a/b/c.txt: No such file or directory', cp.stderr)
        self.ok(self.ctl('cp', '-p', '-', f'{sid}:/work/a/b/c.txt', input=b'nested'))
        self.assertEqual(self.ok(self.ctl('cat', sid, '/work/a/b/c.txt')).stdout, b'nested')

    def test_max(self):
        sid = self.create()
        self.ok(self.ctl('cp', '-', f'{sid}:/work/k.bin', input=b'x' * 4096))
        dest = self.host('k.bin')
        cp = self.ctl('cp', '--max', '1K', f'{sid}:/work/k.bin', dest)
        self.assertEqual(cp.returncode, 1, cp.stderr)
        self.assertIn('File too large', cp.stderr)
        self.assertFalse(os.path.exists(dest), 'a failed copy left the file it created')
        self.assertEqual(len(self.ok(self.ctl('cat', '--max', '4K', sid, '/work/k.bin')).stdout), 4096)

    def test_errors(self):
        sid = self.create()
        dest = self.host('never')
        cp = self.ctl('cp', f'{sid}:/work/missing', dest)
        self.assertEqual(cp.returncode, 1)
        self.assertIn(f'Failed to copy {sid}:/work/missing: No such file or directory', cp.stderr)
        self.assertFalse(os.path.exists(dest))

        # An existing destination is left alone when the source is missing.
        with open(dest, 'wb') as f:
            f.write(b'keep me')
        self.assertEqual(self.ctl('cp', f'{sid}:/work/missing', dest).returncode, 1)
        with open(dest, 'rb') as f:
            self.assertEqual(f.read(), b'keep me')

        src = self.host('src.txt')
        with open(src, 'wb') as f:
            f.write(b'data')
        cp = self.ctl('cp', src, 'nosuchsandbox:/work/x')
        self.assertEqual(cp.returncode, 1)
        self.assertIn('Failed to copy to nosuchsandbox:/work/x', cp.stderr)
        self.assertIn('nosuchsandbox', cp.stderr.split(':/work/x', 1)[1])

        cp = self.ctl('cp', f'{sid}:/work', self.host('w'))
        self.assertEqual(cp.returncode, 1)
        self.assertIn(f'Failed to copy {sid}:/work: Is a directory', cp.stderr)
        cp = self.ctl('cp', self.hostdir, f'{sid}:/work/d')
        self.assertEqual(cp.returncode, 1)
        self.assertIn('Is a directory', cp.stderr)

        for args in (('cp', src, self.host('x')), ('cp', f'{sid}:/a', f'{sid}:/b'), ('cp', src)):
            cp = self.ctl(*args)
            self.assertEqual(cp.returncode, 1, args)
            self.assertTrue(cp.stderr.strip(), args)

        cp = self.ctl('cat', sid, '/work/missing')
        self.assertEqual((cp.returncode, cp.stdout), (1, b''))
        self.assertIn(f'Failed to read {sid}:/work/missing: No such file or directory', cp.stderr)

    def test_symlinks_resolve_inside_the_sandbox(self):
        """cat and cp follow a final symlink as cat(1) does, inside the sandbox's root: a link
        to /etc/passwd is the sandbox's own passwd, one to a host-only file is not found."""
        sid = self.create()
        self.sh(sid, 'echo inside > /work/a.txt; ln -s a.txt /work/rel; ln -s /etc/passwd /work/link; '
                     'ln -s /etc/debian_version /work/hostonly; mkfifo /work/fifo; ln -s fifo /work/fifolink')
        with open('/etc/passwd', 'rb') as f:
            passwd = f.read()
        own = self.sh(sid, 'cat /etc/passwd').stdout

        self.assertEqual(self.ok(self.ctl('cat', sid, 'rel')).stdout, b'inside\n')
        cp = self.ok(self.ctl('cat', sid, '/work/link'))
        self.assertEqual(cp.stdout, own)
        self.assertNotEqual(cp.stdout, passwd)

        dest = self.host('passwd')
        cp = self.ctl('cp', f'{sid}:/work/hostonly', dest)
        self.assertEqual(cp.returncode, 1)
        self.assertIn('No such file or directory', cp.stderr)
        self.assertFalse(os.path.exists(dest))

        for p in ('/work/fifo', 'fifolink'):   # refused, not waited on; the type named
            cp = self.ctl('cat', sid, p)
            self.assertEqual(cp.returncode, 1)
            self.assertIn(f'Failed to read {sid}:{p}: not a regular file: FIFO', cp.stderr)
            cp = self.ctl('cp', f'{sid}:{p}', dest)
            self.assertEqual(cp.returncode, 1)
            self.assertIn('not a regular file: FIFO', cp.stderr)
            self.assertFalse(os.path.exists(dest))


class Listing(Base):
    def test_ls_cat_stat(self):
        sid = self.create()
        data = secrets.token_bytes(100000) + b'\0\xff\n'
        self.ok(self.ctl('cp', '-', f'{sid}:/work/blob.bin', input=data))
        self.sh(sid, 'mkdir -p /work/dir/sub && echo hi > /work/dir/sub/f && ln -s blob.bin /work/ln')

        table = self.ok(self.ctl('ls', sid)).stdout.decode()
        self.assertRegex(table, rf'(?m)^file\s+0644\s+{len(data)}\s+\S+ \S+ blob\.bin$')
        self.assertRegex(table, r'(?m)^dir\s+0755\s+\d+\s+\S+ \S+ dir$')
        self.assertRegex(table, r'(?m)^link\s+0777\s+\d+\s+\S+ \S+ ln -> blob\.bin$')
        self.assertNotIn('dir/sub', table)

        entries = self.ls_json(sid)
        self.assertEqual(sorted(entries), ['blob.bin', 'dir', 'ln'])
        self.assertEqual((entries['blob.bin']['type'], entries['blob.bin']['size']), ('file', len(data)))
        self.assertEqual(entries['blob.bin']['mode'], 0o644)
        self.assertEqual(entries['dir']['type'], 'dir')
        self.assertEqual((entries['ln']['type'], entries['ln']['target']), ('link', 'blob.bin'))
        deep = self.ls_json(sid, '/work/dir', '--depth', '2')
        self.assertEqual(deep['sub/f']['size'], 3)

        # Binary-safe, in order, several files.
        self.assertEqual(self.ok(self.ctl('cat', sid, '/work/blob.bin', 'dir/sub/f')).stdout, data + b'hi\n')

        st = json.loads(self.ok(self.ctl('--json', 'stat', sid, '/work/blob.bin')).stdout)
        self.assertEqual((st['type'], st['size'], st['path']), ('file', len(data), '/work/blob.bin'))
        # stat follows a symlink, as stat -L; ls showed the link itself.
        text = self.ok(self.ctl('stat', sid, '/work/ln')).stdout.decode()
        self.assertIn('Type: file', text)
        self.assertIn(f'Size: {len(data)}', text)
        self.assertNotIn('Target:', text)

        cp = self.ctl('ls', sid, '/work/nothere')
        self.assertEqual(cp.returncode, 1)
        self.assertIn('No such file or directory', cp.stderr)


class Terminal(Base):
    def session(self, *args, rows=33, cols=111):
        s = PtySession(S.wrap([S.paths.sandboxctl, *args]), rows=rows, cols=cols)
        self.addCleanup(s.close)
        return s

    def assert_restored(self, s):
        lflag = s.termios_now()[3]
        self.assertTrue(lflag & termios.ICANON and lflag & termios.ECHO,
                        'the terminal was left in raw mode')
        self.assertEqual(s.termios_now(), s.termios_before)

    def test_tty_and_size(self):
        sid = self.create()
        s = self.session('exec', '--tty', sid, '--', 'sh', '-c', 'tty; stty size; exit 3')
        self.assertEqual(s.finish(), 3, s.out)
        self.assertIn(b'/dev/pts/', s.out)
        self.assertIn(b'33 111', s.out)
        self.assert_restored(s)

    def test_resize(self):
        sid = self.create()
        s = self.session('exec', '--tty', sid, '--', 'sh', '-c',
                         'echo ready; i=0; while [ "$(stty size)" != "40 120" ] && [ $i -lt 300 ]; '
                         'do sleep 0.1; i=$((i+1)); done; echo "now $(stty size)"')
        s.read_until(rb'ready')
        # The kernel sends SIGWINCH to the terminal's foreground process group: sandboxctl.
        fcntl.ioctl(s.master, termios.TIOCSWINSZ, struct.pack('HHHH', 40, 120, 0, 0))
        s.read_until(rb'now 40 120', timeout=40)
        self.assertEqual(s.finish(), 0, s.out)
        self.assert_restored(s)

    def test_input_and_sigterm(self):
        sid = self.create()
        s = self.session('exec', '--tty', sid, '--', 'sh', '-c', 'echo ready; read line; echo "got $line"; sleep 100')
        s.read_until(rb'ready')
        os.write(s.master, b'typed\r')
        s.read_until(rb'got typed')
        ctl = harness.System._find_descendant(s.pid, 'sandboxctl')   # under nsenter in namespace mode
        self.assertTrue(ctl, 'sandboxctl not found under the pty\'s child')
        os.kill(ctl, signal.SIGTERM)
        self.assertEqual(s.finish(), 128 + signal.SIGTERM, s.out)
        self.assert_restored(s)
        # The session was hung up, not left running.
        deadline = time.monotonic() + 20
        while True:
            procs = json.loads(self.ok(self.ctl('--json', 'ps', sid)).stdout)
            mine = [p for p in procs if p['argv'][:2] == ['sh', '-c']]
            self.assertEqual(len(mine), 1, procs)
            if mine[0]['state'] == 'exited':
                break
            self.assertLess(time.monotonic(), deadline, f'the session still runs: {procs}')
            time.sleep(0.2)
        self.assertEqual(mine[0]['exit_status'], 128 + signal.SIGHUP)

    def test_needs_a_terminal(self):
        sid = self.create()
        cp = self.ctl('exec', '--tty', sid, '--', 'true')
        self.assertEqual(cp.returncode, 125)
        self.assertIn('--tty needs a terminal on standard input', cp.stderr)


class Processes(Base):
    def test_start_ps_kill(self):
        sid = self.create()
        proc = self.ok(self.ctl('start', sid, '--', 'sleep', '100')).stdout.decode().strip()
        self.assertRegex(proc, r'^\d+$')

        table = self.ok(self.ctl('ps', sid)).stdout.decode()
        self.assertRegex(table, rf'(?m)^\s*{proc}\s+\d+\s+running\s+-\s+sleep 100$')
        procs = {str(p['id']): p for p in json.loads(self.ok(self.ctl('--json', 'ps', sid)).stdout)}
        self.assertEqual((procs[proc]['state'], procs[proc]['argv']), ('running', ['sleep', '100']))
        # The pid is the one inside the sandbox, where sleep runs.
        self.assertIn(str(procs[proc]['pid']).encode(), self.sh(sid, 'pidof sleep || ps -o pid,comm').stdout)

        self.ok(self.ctl('kill', sid, proc, '--signal', 'KILL'))
        deadline = time.monotonic() + 20
        while procs[proc]['state'] == 'running' and time.monotonic() < deadline:
            time.sleep(0.1)
            procs = {str(p['id']): p for p in json.loads(self.ok(self.ctl('--json', 'ps', sid)).stdout)}
        self.assertEqual((procs[proc]['state'], procs[proc]['exit_status']), ('exited', 128 + signal.SIGKILL))

        cp = self.ctl('kill', sid, '987654')
        self.assertEqual(cp.returncode, 1)
        self.assertIn('No process 987654', cp.stderr)
        cp = self.ctl('kill', sid, proc, '--signal', 'NOTASIGNAL')
        self.assertEqual(cp.returncode, 1)
        self.assertIn("Invalid --signal 'NOTASIGNAL'", cp.stderr)

    def test_stdin_output_and_signal(self):
        sid = self.create()
        proc = self.ok(self.ctl('start', '--stdin-pipe', sid, '--', 'sh', '-c',
                                'while read l; do echo "got $l"; done; echo eof >&2')).stdout.decode().strip()
        # Input as it comes, in two calls; the process reads on until its input is closed.
        self.ok(self.ctl('send-stdin', sid, proc, input=b'one\n'))
        self.ok(self.ctl('send-stdin', sid, proc, input=b'two\n'))
        follow = subprocess.Popen(S.wrap([S.paths.sandboxctl, 'output', '-f', sid, proc]),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=_env())
        time.sleep(0.5)
        self.assertIsNone(follow.poll(), 'output -f ended while the process runs')
        self.ok(self.ctl('close-stdin', sid, proc))
        out, err = follow.communicate(timeout=30)
        self.assertEqual((follow.returncode, out), (0, b'got one\ngot two\n'), err)
        self.assertIn(b'eof\n', err)
        self.assertEqual(self.ok(self.ctl('output', sid, proc)).stdout, b'got one\ngot two\n')
        cp = self.ctl('send-stdin', sid, proc, input=b'late\n')
        self.assertEqual(cp.returncode, 1)
        self.assertIn('has ended', cp.stderr)

        # A process without --stdin-pipe has no input to write; a trapped signal by name.
        proc = self.ok(self.ctl('start', sid, '--', 'sh', '-c',
                                'trap "echo usr1; exit 7" USR1; while :; do sleep 0.05; done')).stdout.decode().strip()
        cp = self.ctl('send-stdin', sid, proc, input=b'x')
        self.assertEqual(cp.returncode, 1)
        self.assertIn('has no open input', cp.stderr)
        time.sleep(0.3)
        self.ok(self.ctl('kill', sid, proc, '--signal', 'USR1'))
        self.assertEqual(self.ok(self.ctl('output', '-f', sid, proc)).stdout, b'usr1\n')


if __name__ == '__main__':
    unittest.main()
