#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 4's sessions on a real systemd: streaming exec, pause/resume, lifetime and idle
timeouts changed while a sandbox runs, and sandboxes that outlive sandboxd.

Every test asserts on what a user of sandboxctl, busctl or systemctl sees. One booted
system serves the module (see harness.py); the FreezeUnit test boots a second one in
cgroup-v2-only ("unified") mode, as on modern distros. Run through run.py, or directly:
python3 -m unittest -v test_sessions
"""

import hashlib
import json
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

S = None           # the harness.System
_owned = False     # True when this module booted it (not run.py)

MiB = 1024 * 1024
NOT_RUNNING = 'io.sandboxd.Sandbox1.NotRunning'
# Writes an increasing number to /work/c every 100 ms, detached from the exec's streams.
COUNTER = 'i=0; while :; do i=$((i+1)); echo $i > /work/c; sleep 0.1; done'


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()


def tearDownModule():
    harness.module_teardown(_owned)


class LineReader:
    """Lines of a pipe as they arrive, each with the monotonic time it was read."""

    def __init__(self, f):
        self.fd = f.fileno()
        self.buf = b''
        self.eof = False

    def readline(self, timeout):
        """The next line (bytes, with its newline) and its arrival time, or (None, None)
        at end of file; raises TimeoutError when none is complete within TIMEOUT."""
        deadline = time.monotonic() + timeout
        while b'\n' not in self.buf and not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f'no complete line within {timeout}s (have {self.buf!r})')
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                chunk = os.read(self.fd, 65536)
                self.eof = not chunk
                self.buf += chunk
        now = time.monotonic()
        if b'\n' not in self.buf:
            return None, None
        line, self.buf = self.buf.split(b'\n', 1)
        return line + b'\n', now


class Base(harness.SandboxTestCase):
    """Every sandbox created here is destroyed afterwards. `system` is the harness.System
    the test talks to: the module's, unless a class boots its own."""

    TIMEOUT = 60

    def daemon_status(self, key):
        cp = self.ok(self.system.run(['cat', f'/proc/{self.main_pid()}/status']))
        m = re.search(rf'^{key}:\s+(\d+) kB$', cp.stdout, re.M)
        self.assertIsNotNone(m, f'no {key} in sandboxd\'s /proc status')
        return int(m.group(1)) * 1024

    def main_pid(self):
        pid = int(self.system.show('sandboxd.service', 'MainPID')['MainPID'])
        self.assertGreater(pid, 0, 'sandboxd.service has no MainPID')
        return pid


class Streaming(Base):

    sid = None

    @classmethod
    def setUpClass(cls):
        cp = S.sandboxctl('create')
        if cp.returncode != 0:
            raise AssertionError(f'sandboxctl create failed: {cp.stderr}')
        cls.sid = cp.stdout.strip()

    @classmethod
    def tearDownClass(cls):
        if cls.sid:
            S.sandboxctl('destroy', cls.sid)

    def test_output_is_seen_line_by_line(self):
        p = self.popen_ctl('exec', self.sid, '--', 'sh', '-c',
                           'for i in 1 2 3 4 5 6 7 8 9 10; do echo "line $i"; sleep 0.1; done')
        reader = LineReader(p.stdout)
        lines, times = [], []
        while True:
            line, t = reader.readline(timeout=30)
            if line is None:
                break
            lines.append(line.decode())
            times.append(t)
        p.wait(timeout=30)
        ended = time.monotonic()
        self.assertEqual(p.returncode, 0, p.stderr.read().decode())
        self.assertEqual(lines, [f'line {i}\n' for i in range(1, 11)])
        # The command runs ~1 s: its first line must be here long before it ends, and the
        # lines ~100 ms apart, not all at once at the end.
        self.assertGreater(ended - times[0], 0.6,
                           f'the first line came {ended - times[0]:.2f}s before sandboxctl ended')
        gaps = [b - a for a, b in zip(times, times[1:])]
        self.assertGreater(statistics.median(gaps), 0.05, f'lines came in a burst: gaps {gaps}')
        self.assertLess(statistics.median(gaps), 0.5, f'lines came too slowly: gaps {gaps}')

    def test_stdin_reaches_the_command(self):
        cp = self.ok(self.exec(self.sid, 'cat', input='abc'))
        self.assertEqual(cp.stdout, 'abc')

        payload = os.urandom(10 * MiB)
        cp = self.ok(self.exec(self.sid, 'sha256sum', input=payload, timeout=120))
        self.assertEqual(cp.stdout.split()[0], hashlib.sha256(payload).hexdigest(),
                         '10 MiB through sandboxctl exec arrived changed')

        # More than the 16 MiB that a copy through the call could carry.
        payload = os.urandom(40 * MiB)
        cp = self.ok(self.exec(self.sid, 'sha256sum', input=payload, timeout=120))
        self.assertEqual(cp.stdout.split()[0], hashlib.sha256(payload).hexdigest())

        # --no-stdin: the command reads /dev/null, and our input stays ours.
        cp = self.ok(self.exec(self.sid, 'cat', opts=('--no-stdin',), input='not for cat'))
        self.assertEqual(cp.stdout, '')

    def test_stdin_is_forwarded_live(self):
        # The command answers a line before our input ends: nothing waits for EOF.
        p = self.popen_ctl('exec', self.sid, '--', 'sh', '-c',
                           'read a; echo "got $a"; read b; echo "got $b"', stdin=subprocess.PIPE)
        reader = LineReader(p.stdout)
        p.stdin.write(b'first\n')
        p.stdin.flush()
        line, _t = reader.readline(timeout=20)
        self.assertEqual(line, b'got first\n')
        self.assertIsNone(p.poll(), 'sandboxctl ended before its input did')
        p.stdin.write(b'second\n')
        p.stdin.close()
        line, _t = reader.readline(timeout=20)
        self.assertEqual(line, b'got second\n')
        self.assertEqual(p.wait(timeout=20), 0)

    def test_stderr_and_exit_status_while_streaming(self):
        cp = self.exec(self.sid, 'sh', '-c', 'echo out; echo err >&2; exit 3')
        self.assertEqual((cp.returncode, cp.stdout), (3, 'out\n'))
        self.assertEqual(cp.stderr, 'err\n')
        cp = self.exec(self.sid, 'sleep', '100', opts=('--timeout', '1'))
        self.assertEqual(cp.returncode, 124, cp.stderr)
        cp = self.exec(self.sid, 'sh', '-c', 'kill -TERM $$')
        self.assertEqual(cp.returncode, 128 + signal.SIGTERM, cp.stderr)

    def test_json_still_captures(self):
        cp = self.ctl('--json', 'exec', self.sid, '--', 'sh', '-c', 'cat; echo err >&2', input='in\n')
        res = json.loads(cp.stdout)
        self.assertEqual((res['stdout'], res['stderr'], res['exit_status']), ('in\n', 'err\n', 0), res)

    def test_gigabyte_stream_leaves_daemon_memory_flat(self):
        rss_before = self.daemon_status('VmRSS')
        # Peak RSS from here on (clear_refs 5 resets VmHWM); else sample while it runs.
        cleared = self.system.run(['sh', '-c', f'echo 5 > /proc/{self.main_pid()}/clear_refs']).returncode == 0
        samples, stop = [], threading.Event()

        def sample():
            while not stop.wait(0.2):
                try:
                    samples.append(self.daemon_status('VmRSS'))
                except Exception:
                    pass
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            cp = self.ok(self.system.run(['sh', '-c', f'{self.system.paths.sandboxctl} exec {self.sid} -- '
                                       'head -c 1G /dev/zero | wc -c'], timeout=300))
        finally:
            stop.set()
            sampler.join()
        self.assertEqual(cp.stdout.strip(), str(1 << 30))
        rss_after = self.daemon_status('VmRSS')
        peak = max([rss_after] + samples + ([self.daemon_status('VmHWM')] if cleared else []))
        self.assertLess(abs(rss_after - rss_before), 4 * MiB,
                        f'sandboxd VmRSS {rss_before} before, {rss_after} after a 1 GiB stream')
        self.assertLess(peak - rss_before, 8 * MiB,
                        f'sandboxd grew to {peak} bytes (from {rss_before}) during a 1 GiB stream')


class PauseBase(Base):
    """The pause test, for the module's system and the unified one."""

    def counter_value(self, pid):
        """/work/c of the sandbox, read from here through the counter's own root."""
        with open(f'/proc/{pid}/root/work/c') as f:
            return int(f.read().strip() or 0)

    def wait_counter_moves(self, pid, since, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = self.counter_value(pid)
            if v > since:
                return v
            time.sleep(0.1)
        self.fail(f'the counter stayed at {since} for {timeout}s')

    def check_pause_stops_counter_and_resume_continues(self, methods):
        start = time.time()
        sid = self.create()
        self.ok(self.exec(sid, 'sh', '-c', f'{COUNTER} </dev/null >/dev/null 2>&1 &'))
        pid = self.host_pid_of(sid, 'echo $i > /work/c')
        v = self.wait_counter_moves(pid, 3)

        self.ok(self.ctl('pause', sid))
        self.assertEqual(self.bus_property(sid, 'State'), 'paused')
        self.assertEqual(self.status(sid)['state'], 'paused')
        self.assertRegex(self.ok(self.ctl('status', sid)).stdout, r'State: paused\n')
        listed = {s['id']: s['state'] for s in json.loads(self.ok(self.ctl('--json', 'list')).stdout)}
        self.assertEqual(listed.get(sid), 'paused', listed)

        paused_at = self.counter_value(pid)
        time.sleep(1.0)
        self.assertEqual(self.counter_value(pid), paused_at, 'the counter advanced while paused')
        self.assertGreaterEqual(paused_at, v)

        # Exec is refused with NotRunning, and sandboxctl says why and what to do.
        cp, _data, error = self.system.bus_call(harness.BUS_NAME, self.object_path(sid), harness.SANDBOX_IFACE,
                                             'Exec', 'asa{sv}', '1', 'true', '0')
        self.assertEqual(error, NOT_RUNNING, cp.stderr[-1000:])
        cp = self.exec(sid, 'true')
        self.assertEqual(cp.returncode, 125)
        self.assertIn('paused', cp.stderr)
        self.assertIn('resume', cp.stderr)
        # Pausing twice is refused, not hung.
        cp = self.ctl('pause', sid)
        self.assertEqual(cp.returncode, 1)
        self.assertTrue(cp.stderr.strip())
        self.assertEqual(self.counter_value(pid), paused_at)

        self.ok(self.ctl('resume', sid))
        self.assertEqual(self.bus_property(sid, 'State'), 'running')
        self.wait_counter_moves(pid, paused_at)
        self.assert_exec_works(sid, 'after resume')
        cp = self.ctl('resume', sid)
        self.assertEqual(cp.returncode, 1, 'resuming a running sandbox succeeded')

        journal = self.system.journal(units=('sandboxd.service',), since=start)
        m = re.search(rf'Sandbox {sid} paused \((\w+)\)', journal)
        self.assertIsNotNone(m, f'no "paused" line for {sid} in the journal:\n{journal[-3000:]}')
        self.assertIn(m.group(1), methods, m.group(0))


class Pause(PauseBase):
    """On the module's system: hybrid here, so SIGSTOP (or FreezeUnit where it is unified)."""

    def test_pause_stops_counter_and_resume_continues(self):
        self.check_pause_stops_counter_and_resume_continues(('freeze', 'sigstop'))

    def test_sigstop_while_hybrid(self):
        if self.system.run(['test', '-f', '/sys/fs/cgroup/cgroup.controllers']).returncode == 0:
            self.skipTest('this system is unified: units are frozen, not stopped')
        sid = self.create()
        self.ok(self.exec(sid, 'sh', '-c', f'{COUNTER} </dev/null >/dev/null 2>&1 &'))
        pid = self.host_pid_of(sid, 'echo $i > /work/c')
        self.ok(self.ctl('pause', sid))
        with open(f'/proc/{pid}/stat') as f:
            state = f.read().rsplit(')', 1)[1].split()[0]
        self.assertEqual(state, 'T', 'a paused process of a hybrid-mode sandbox is not stopped')
        self.ok(self.ctl('resume', sid))


class FreezeUnified(PauseBase):
    """Pause through FreezeUnit, on a second system booted in unified mode."""

    @classmethod
    def setUpClass(cls):
        if S.mode == 'host':
            if not os.path.exists(os.path.join(harness.CGROUP_FS, 'cgroup.controllers')):
                raise unittest.SkipTest('PID 1 is a hybrid-mode systemd: no unified system to boot here')
            cls.booted = S
            return
        try:
            cls.booted = harness.boot_extra(cgroup='unified')
        except harness.Unavailable as e:
            if harness.ci():
                raise
            raise unittest.SkipTest(str(e))

    @classmethod
    def tearDownClass(cls):
        if cls.booted is not None and cls.booted is not S:
            problems = cls.booted.teardown()
            cls.booted = None
            if problems:
                raise AssertionError('teardown of the unified system found problems:\n' + '\n'.join(problems))

    def test_pause_stops_counter_and_resume_continues(self):
        self.check_pause_stops_counter_and_resume_continues(('freeze',))

    def test_frozen_cgroup(self):
        cp = self.ok(self.system.run(['stat', '-f', '-c', '%T', '/sys/fs/cgroup']))
        self.assertEqual(cp.stdout.strip(), 'cgroup2fs', 'the second system is not in unified mode')
        sid = self.create()
        cg = self.system.show(self.unit(sid), 'ControlGroup')['ControlGroup']
        freeze = f'/sys/fs/cgroup{cg}/cgroup.freeze'
        self.ok(self.ctl('pause', sid))
        self.assertEqual(self.ok(self.system.run(['cat', freeze])).stdout.strip(), '1')
        self.assertEqual(self.system.show(self.unit(sid), 'FreezerState')['FreezerState'], 'frozen')
        self.ok(self.ctl('resume', sid))
        self.assertEqual(self.ok(self.system.run(['cat', freeze])).stdout.strip(), '0')
        self.assert_exec_works(sid, 'after thaw')


class Timeouts(Base):

    def test_set_timeout_extends_and_shortens_lifetime(self):
        sid = self.create('--timeout', '3', '--idle-timeout', '300')
        self.ok(self.ctl('set-timeout', sid, '600'))
        st = self.status(sid)
        self.assertEqual(st['timeout'], 600, st)
        self.assertEqual(st['idle_timeout'], 300, 'set-timeout without --idle-timeout changed it')
        self.assertAlmostEqual(st['deadline'] / 1e6, time.time() + 600, delta=10)
        self.assertRegex(self.ok(self.ctl('status', sid)).stdout, r'Timeout: 10min\n')

        time.sleep(5)
        self.assertTrue(self.exists(sid), 'destroyed after its first lifetime although extended to 600 s')
        self.assert_exec_works(sid, 'after its first lifetime')

        self.ok(self.ctl('set-timeout', sid, '1'))
        t = time.monotonic()
        gone = self.wait_gone(sid, 15)
        self.assertIsNotNone(gone, 'still there 15 s after set-timeout 1')
        self.assertLess(gone - t, 5, f'set-timeout 1 took {gone - t:.1f}s')

    def test_set_timeout_zero_means_never(self):
        sid = self.create('--timeout', '2')
        self.ok(self.ctl('set-timeout', sid, '0', '--idle', '0'))
        st = self.status(sid)
        self.assertEqual((st['timeout'], st['deadline'], st['idle_timeout']), (0, 0, 0), st)
        self.assertRegex(self.ok(self.ctl('status', sid)).stdout, r'Deadline: never\n')
        time.sleep(3)
        self.assertTrue(self.exists(sid), 'set-timeout 0 did not cancel the lifetime')

    def test_idle_timeout(self):
        sid = self.create('--idle-timeout', '2', '--disk', '64M')
        st = self.status(sid)
        self.assertEqual((st['idle_timeout'], st['disk_max']), (2, 64 * MiB), st)

        # Twice the idle timeout inside one exec: busy, not idle.
        self.ok(self.exec(sid, 'sleep', '4'), 'a 4 s exec in a sandbox with a 2 s idle timeout')
        ended = time.monotonic()
        time.sleep(1.0)
        self.assertTrue(self.exists(sid), 'destroyed within 1 s after its exec, with a 2 s idle timeout')
        gone = self.wait_gone(sid, 15)
        self.assertIsNotNone(gone, 'not destroyed 15 s after its last exec, with a 2 s idle timeout')
        self.assertGreater(gone - ended, 1.5)
        self.assertLess(gone - ended, 5)

    def test_disk_limit(self):
        # In memory a full tmpfs says ENOSPC; on disk the workspace's qgroup says EDQUOT.
        for storage, error in (('tmpfs', 'No space left'), ('disk', 'Disk quota exceeded')):
            with self.subTest(storage):
                sid = self.create('--disk', '8M', '--storage', storage)
                cp = self.exec(sid, 'sh', '-c', 'head -c 20M /dev/zero > /work/big')
                self.assertNotEqual(cp.returncode, 0, f'20 MiB written to a /work of 8 MiB ({storage})')
                self.assertIn(error, cp.stderr)


class Restart(Base):
    """sandboxd goes away (kill -9, or a clean restart) and its sandboxes live on."""

    DROPIN = '/run/systemd/system/sandboxd.service.d/60-restart.conf'

    @classmethod
    def setUpClass(cls):
        # The harness's drop-in says Restart=no; the shipped unit says on-failure.
        with open(S.path(cls.DROPIN), 'w') as f:
            f.write(harness.MARKER + '\n[Service]\nRestart=on-failure\n')
        S.systemctl('daemon-reload', check=True)

    @classmethod
    def tearDownClass(cls):
        try:
            os.unlink(S.path(cls.DROPIN))
        except FileNotFoundError:
            pass
        S.systemctl('daemon-reload', check=True)
        if S.systemctl('is-active', 'sandboxd.service').stdout.strip() != 'active':
            S.start_daemon()

    def wait_daemon_back(self, old_pid, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = S.show('sandboxd.service', 'ActiveState', 'MainPID', 'NRestarts')
            if info['ActiveState'] == 'active' and info['MainPID'] not in ('0', str(old_pid)):
                if S.busctl('call', harness.BUS_NAME, harness.MANAGER_PATH,
                            'org.freedesktop.DBus.Peer', 'Ping').returncode == 0:
                    return info
            time.sleep(0.1)
        self.fail(f'sandboxd did not come back within {timeout}s: {info}')

    def proc_starttime(self, sid, pid):
        stat = self.ok(self.exec(sid, 'cat', f'/proc/{pid}/stat')).stdout
        return stat.rsplit(')', 1)[1].split()[19]

    def kill9(self):
        pid = self.main_pid()
        restarts = int(S.show('sandboxd.service', 'NRestarts')['NRestarts'])
        self.ok(S.run(['kill', '-KILL', str(pid)]))
        info = self.wait_daemon_back(pid)
        self.assertEqual(int(info['NRestarts']), restarts + 1, info)

    def clean_restart(self):
        pid = self.main_pid()
        self.ok(S.systemctl('restart', 'sandboxd.service', timeout=90))
        self.wait_daemon_back(pid)

    def three_sandboxes_survive(self, go_away):
        timed = self.create('--timeout', '9')
        created = time.monotonic()
        deadline = self.status(timed)['deadline']

        with_file = self.create()
        self.ok(self.exec(with_file, 'sh', '-c', 'echo kept > /work/note'))

        with_process = self.create()
        cp = self.ok(self.exec(with_process, 'sh', '-c', 'sleep 1000 </dev/null >/dev/null 2>&1 & echo $!'))
        inner_pid = cp.stdout.strip()
        started = self.proc_starttime(with_process, inner_pid)

        # Long enough before the deadline that a lifetime started again would show.
        time.sleep(max(0, 3 - (time.monotonic() - created)))
        went_at = time.monotonic()
        go_away()
        self.assertLess(time.monotonic() - created, 7, 'the restart took too long to tell the deadlines apart')

        listed = [s['id'] for s in json.loads(self.ok(self.ctl('--json', 'list')).stdout)]
        for sid in (timed, with_file, with_process):
            self.assertIn(sid, listed, f'{sid} not listed after sandboxd came back')
            self.assertEqual(self.bus_property(sid, 'State'), 'running')
            self.assert_exec_works(sid, 'after sandboxd came back')

        cp = self.ok(self.exec(with_file, 'cat', '/work/note'))
        self.assertEqual(cp.stdout, 'kept\n')
        self.assertEqual(self.proc_starttime(with_process, inner_pid), started,
                         'the background process is not the same one any more')
        self.assertIn(b'sleep\x001000', self.ok(self.exec(with_process, 'cat', f'/proc/{inner_pid}/cmdline'))
                      .stdout.encode())

        self.assertAlmostEqual(self.status(timed)['deadline'] / 1e6, deadline / 1e6, delta=0.5,
                               msg='the deadline changed across the restart')
        gone = self.wait_gone(timed, 20)
        self.assertIsNotNone(gone, 'the timed sandbox outlived its deadline after the restart')
        self.assertLess(gone - created, 9 + 2.5,
                        f'gone {gone - created:.1f}s after creation, {gone - went_at:.1f}s after the restart: '
                        'its lifetime started again')
        self.assertGreater(gone - created, 8)

    def test_kill9_keeps_sandboxes(self):
        self.three_sandboxes_survive(self.kill9)

    def test_clean_restart_keeps_sandboxes(self):
        self.three_sandboxes_survive(self.clean_restart)

    def test_exec_in_flight_when_killed(self):
        sid = self.create()
        p = self.popen_ctl('exec', sid, '--', 'sh', '-c', 'echo started; sleep 3; echo finished')
        reader = LineReader(p.stdout)
        line, _t = reader.readline(timeout=20)
        self.assertEqual(line, b'started\n')

        self.kill9()
        try:
            rc = p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.fail('sandboxctl exec hangs after sandboxd was killed')
        err = p.stderr.read().decode()
        self.assertEqual(rc, 125, f'sandboxctl exec whose daemon died: exit {rc}, stderr {err!r}')
        self.assertIn('may have run', err)

        # The sandbox serves, also once the orphaned command has ended.
        self.assert_exec_works(sid, 'right after the restart')
        time.sleep(3.5)
        self.assert_exec_works(sid, 'after the interrupted command ended')
        self.assertTrue(self.exists(sid))

    def test_clean_stop_with_calls_in_flight(self):
        """A clean stop while an ephemeral run and an exec are running: both callers hear
        NoReply ("may have run"), sandboxd exits with success (under ASan: having freed
        what those calls held), and the next sandboxd leaves no ephemeral sandbox behind."""
        units_before = set(S.sandbox_scopes())
        sid = self.create()
        cmd = ['sh', '-c', 'echo started; sleep 4; echo finished']
        calls = {'run': self.popen_ctl('run', '--', *cmd), 'exec': self.popen_ctl('exec', sid, '--', *cmd)}
        for what, p in calls.items():
            line, _t = LineReader(p.stdout).readline(timeout=20)
            self.assertEqual(line, b'started\n', f'{what} did not start')

        since = time.time()
        cp = S.systemctl('stop', 'sandboxd.service', timeout=90)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        info = S.show('sandboxd.service', 'Result', 'ExecMainStatus')
        journal = S.journal(units=('sandboxd.service',), since=since)
        self.assertEqual((info['Result'], info['ExecMainStatus']), ('success', '0'), f'{info}\n{journal[-6000:]}')
        self.assertNotIn('LeakSanitizer', journal)

        for what, p in calls.items():
            try:
                rc = p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.fail(f'sandboxctl {what} hangs after sandboxd stopped')
            err = p.stderr.read().decode()
            self.assertEqual(rc, 125, f'sandboxctl {what} whose daemon stopped: exit {rc}, stderr {err!r}')
            self.assertIn('may have run', err)

        # (systemd 252 empties the fd store on a stop: the next sandboxd adopts nothing and
        # stops them; a newer one may keep sid, but never the ephemeral one.)
        S.start_daemon()
        deadline = time.monotonic() + 20
        while set(S.sandbox_scopes()) - units_before - {self.unit(sid)} and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertEqual(set(S.sandbox_scopes()) - units_before - {self.unit(sid)}, set(),
                         'the interrupted ephemeral sandbox outlived the restart')

if __name__ == '__main__':
    unittest.main(verbosity=2)
