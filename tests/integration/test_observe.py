#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 14's observation API on a real systemd, a real journald and a real polkitd: a
sandbox's journal entries (Sandbox.GetLogs, `sandboxctl logs`), its live metrics
(Sandbox.GetMetrics, `sandboxctl status`) and the warm pools (Manager.ListPools,
`sandboxctl pool`).

Every test asserts on what a user of sandboxctl or busctl sees. One booted system serves
the module (see harness.py). Run through run.py, or directly:
python3 -m unittest -v test_observe
"""

import json
import os
import re
import select
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

S = None           # the harness.System
_owned = False     # True when this module booted it (not run.py)

MiB = 1024 * 1024
NOBODY = 65534
DENIED = ('org.freedesktop.DBus.Error.AccessDenied',
          'org.freedesktop.DBus.Error.InteractiveAuthorizationRequired')
BUSY = 'io.sandboxd.Sandbox1.Busy'
INVALID = 'io.sandboxd.Sandbox1.InvalidOption'
READERS_PER_UID = 16  # SANDBOX_LOGS_READERS_PER_UID_MAX
METRIC_KEYS = {'CPUUsageNSec', 'MemoryCurrent', 'MemoryPeak', 'TasksCurrent', 'WorkBytesUsed', 'TmpBytesUsed',
               'DiskBytesUsed', 'DiskBytesMax'}


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()


def tearDownModule():
    harness.module_teardown(_owned)


def as_nobody(cmd):
    return ['setpriv', f'--reuid={NOBODY}', f'--regid={NOBODY}', '--clear-groups', '--'] + list(cmd)


def wait_for(pred, timeout=30, interval=0.1):
    """pred()'s first true value within TIMEOUT seconds, else None."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v or None
        time.sleep(interval)


class Lines:
    """The lines a running process writes to its stdout, as they come."""

    def __init__(self, p):
        self.p = p
        self.buf = b''
        self.eof = False
        self.seen = []

    def next(self, timeout):
        """The next line (str, no newline), or None at the end; TimeoutError if none came."""
        deadline = time.monotonic() + timeout
        while b'\n' not in self.buf and not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f'no line within {timeout}s; so far: {self.seen[-5:]}')
            ready, _, _ = select.select([self.p.stdout], [], [], left)
            if ready:
                chunk = os.read(self.p.stdout.fileno(), 65536)
                self.eof = not chunk
                self.buf += chunk
        if b'\n' not in self.buf:
            return None
        line, self.buf = self.buf.split(b'\n', 1)
        self.seen.append(line.decode())
        return self.seen[-1]

    def until(self, pred, timeout):
        """Reads lines until pred(line) holds; returns that line."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.next(max(deadline - time.monotonic(), 0.01))
            if line is None:
                raise AssertionError(f'stream ended before the line awaited; got: {self.seen[-10:]}')
            if pred(line):
                return line


class Base(harness.SandboxTestCase):
    TIMEOUT = 60

    def sandbox_call(self, sid, method, sig='', *args, uid=None):
        """A call of SID's object, as UID (None: root); (CompletedProcess, error name)."""
        cmd = ['busctl', '--system', '--no-pager', 'call', '--', harness.BUS_NAME,
               f'/io/sandboxd/Sandbox1/sandbox/{sid}', harness.SANDBOX_IFACE, method]
        if sig:
            cmd += [sig] + [str(a) for a in args]
        cp = S.run(as_nobody(cmd) if uid == NOBODY else cmd, env={'SYSTEMD_LOG_LEVEL': 'debug'})
        m = re.findall(r'Got message type=error .*\berror-name=(\S+)', cp.stderr)
        return cp, (m[-1] if m else None)

    def entries(self, sid, *opts):
        cp = self.ok(self.ctl('logs', '--json', *opts, sid))
        return [json.loads(line) for line in cp.stdout.splitlines()]

    def wait_for_message(self, sid, text, timeout=30):
        """The entries once one has TEXT in its message (journald writes asynchronously)."""
        entries = wait_for(lambda: (lambda e: e if any(text in x['message'] for x in e) else None)(
            self.entries(sid)), timeout=timeout, interval=0.2)
        self.assertIsNotNone(entries, f'no entry with {text!r} in the logs of {sid}: {self.entries(sid)}')
        return entries

    def settled_entries(self, sid):
        """The entries once two reads half a second apart agree (PID 1's and sandboxd's
        messages reach the journal in no fixed order)."""
        last = None
        for _ in range(60):
            now = self.entries(sid)
            if now == last:
                return now
            last = now
            time.sleep(0.5)
        self.fail(f'the logs of {sid} did not settle: {last}')

    def metrics(self, sid):
        return self.status(sid)


class Logs(Base):
    def test_sandboxd_and_systemd_messages_about_it(self):
        sid = self.create()
        other = self.create()
        running = f'Sandbox {sid} running as sandbox-{sid}.scope.'
        entries = self.wait_for_message(sid, running)
        for e in entries:
            self.assertEqual(set(e) - {'priority', 'truncated'}, {'timestamp', 'identifier', 'message'}, e)
            self.assertNotIn(other, e['message'], "another sandbox's entry in this one's logs")
        ours = [e for e in entries if e['identifier'] == 'sandboxd']
        self.assertTrue(any(e['message'].startswith(f'Sandbox {sid} (template shell, owner 0) starting')
                            for e in ours), ours)
        self.assertTrue(any(e['message'] == running and e['priority'] == 6 for e in ours), ours)
        # PID 1's own word about the unit.
        self.assertTrue(any(e['identifier'] == 'systemd' and f'sandbox-{sid}.scope' in e['message']
                            for e in entries), entries)
        stamps = [e['timestamp'] for e in entries]
        self.assertEqual(stamps, sorted(stamps))
        self.assertLess(abs(stamps[-1] / 1e6 - time.time()), 300)

        # journalctl's short output: time, identifier, message.
        entries = self.settled_entries(sid)
        cp = self.ok(self.ctl('logs', sid))
        self.assertRegex(cp.stdout, re.compile(r'^[A-Z][a-z]{2} [ 0-9]\d \d\d:\d\d:\d\d sandboxd: '
                                               + re.escape(running) + '$', re.M))
        self.assertEqual(len(cp.stdout.splitlines()), len(entries))

    def test_ephemeral_sandbox_logs_its_end_only(self):
        """An ephemeral sandbox's routine lines (starting, running as, Destroying) are at
        debug level, its record has them; its last line and systemd's are there."""
        time.sleep(2.5)  # out of the window below: what earlier tests' sandboxes logged
        since = time.time()
        self.ok(self.ctl('run', '--', 'true'))

        def ours():
            text = S.journal(since=since)
            for sid in re.findall(r'Sandbox ([0-9a-f]{16}) removed\.', text):
                if f'Started sandbox-{sid}.scope' in text:
                    return sid, text
            return None
        found = wait_for(ours, timeout=30, interval=0.2)
        self.assertIsNotNone(found, S.journal(since=since)[-3000:])
        sid, text = found
        for routine in (f'Sandbox {sid} (template shell', f'Sandbox {sid} running as',
                        f'Destroying sandbox {sid}.'):
            self.assertNotIn(routine, text)

    def test_lines_bound_the_output(self):
        sid = self.create()
        self.ok(self.ctl('pause', sid))
        self.ok(self.ctl('resume', sid))
        self.wait_for_message(sid, f'Sandbox {sid} resumed.')
        entries = self.settled_entries(sid)
        self.assertGreaterEqual(len(entries), 4, entries)
        self.assertEqual(self.entries(sid, '-n', '2'), entries[-2:])
        self.assertEqual(self.entries(sid, '--lines=3'), entries[-3:])
        cp = self.ok(self.ctl('logs', '-n', '1', sid))
        self.assertEqual(len(cp.stdout.splitlines()), 1, cp.stdout)
        self.assertIn(entries[-1]['message'], cp.stdout)
        # -n stays --no-stdin for the other verbs.
        cp = self.ok(self.ctl('exec', '-n', sid, '--', 'echo', 'still-no-stdin'))
        self.assertEqual(cp.stdout, 'still-no-stdin\n')

        cp, error = self.sandbox_call(sid, 'GetLogs', 'ub', 10001, 'false')
        self.assertEqual(error, INVALID, cp.stderr[-500:])
        cp, error = self.sandbox_call(sid, 'GetLogs', 'ub', 10000, 'false')
        self.assertIsNone(error, cp.stderr[-500:])

    def test_follow_streams_new_entries_and_ends_with_the_sandbox(self):
        sid = self.create()
        self.wait_for_message(sid, f'Sandbox {sid} running')
        p = self.popen_ctl('logs', '--json', '-f', sid)
        lines = Lines(p)
        lines.until(lambda l: f'Sandbox {sid} running' in l, 30)

        self.ok(self.ctl('pause', sid))
        lines.until(lambda l: json.loads(l)['message'].startswith(f'Sandbox {sid} paused'), 30)
        self.assertIsNone(p.poll(), 'logs -f ended while the sandbox runs')
        self.ok(self.ctl('resume', sid))
        lines.until(lambda l: json.loads(l)['message'] == f'Sandbox {sid} resumed.', 30)

        self.ok(self.ctl('destroy', sid))
        gone = time.monotonic()
        lines.until(lambda l: json.loads(l)['message'] == f'Sandbox {sid} removed.', 30)
        self.assertIsNone(lines.next(15), f'more after the end: {lines.seen[-3:]}')
        self.assertEqual(p.wait(timeout=15), 0, p.stderr.read())
        self.assertLess(time.monotonic() - gone, 10, 'logs -f went on long after the sandbox was gone')

    def test_readers_are_bounded_per_user(self):
        sid = self.create()
        self.wait_for_message(sid, f'Sandbox {sid} running')
        followers = []
        for _ in range(READERS_PER_UID):
            p = self.popen_ctl('logs', '-f', '-n', '1', sid)
            Lines(p).next(30)     # its reader is there: it wrote the first line
            followers.append(p)

        cp = self.ctl('logs', '-n', '1', sid)
        self.assertNotEqual(cp.returncode, 0, cp.stdout)
        self.assertIn('Too many log readers', cp.stderr)
        _cp, error = self.sandbox_call(sid, 'GetLogs', 'ub', 1, 'false')
        self.assertEqual(error, BUSY)

        # A follower that goes frees its place (the daemon sees its pipe closed).
        for p in followers:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        self.assertTrue(wait_for(lambda: self.ctl('logs', '-n', '1', sid).returncode == 0, timeout=15),
                        'the readers of killed followers were not let go of')

    def test_other_users_cannot_read_them(self):
        sid = self.create()
        _cp, error = self.sandbox_call(sid, 'GetLogs', 'ub', 0, 'false', uid=NOBODY)
        self.assertIn(error, DENIED)
        cp = S.run(as_nobody([S.paths.sandboxctl, 'logs', sid]))
        self.assertNotEqual(cp.returncode, 0)
        self.assertEqual(cp.stdout, '')

    def test_entries_others_log_about_it_do_not_count(self):
        # Anyone may send the journal a SANDBOX_ID= field or any identifier; only what
        # journald knows came from root is the sandbox's.
        sid = self.create()
        forged = 'FORGED-' + sid
        fields = f'MESSAGE={forged}\nSANDBOX_ID={sid}\nSYSLOG_IDENTIFIER=sandbox-{sid}.scope\nUNIT=sandbox-{sid}.scope\n'
        cp = S.run(as_nobody(['logger', '--journald']), input=fields)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertTrue(wait_for(lambda: forged in S.run(['journalctl', '--no-pager', '-o', 'cat',
                                                          f'SANDBOX_ID={sid}']).stdout),
                        'the forged entry did not reach the journal: the test proves nothing')
        self.ok(self.ctl('pause', sid))
        self.ok(self.ctl('resume', sid))
        entries = self.wait_for_message(sid, f'Sandbox {sid} resumed.')
        self.assertFalse([e for e in entries if forged in e['message']], entries)

    def test_gone_sandbox_has_none(self):
        sid = self.create()
        self.ok(self.ctl('destroy', sid))
        cp = self.ctl('logs', sid)
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn('No sandbox', cp.stderr)


class Metrics(Base):
    def test_memory_of_a_background_process(self):
        sid = self.create(template='python')
        before = self.metrics(sid)
        self.assertLess(before['memory_current'], 100 * MiB, before)
        self.ok(self.ctl('start', sid, '--', 'python3', '-c',
                         "import time; b = b'x' * (100 << 20); print('ok', flush=True); time.sleep(600)"))
        m = wait_for(lambda: (lambda m: m if m['memory_current'] >= 100 * MiB else None)(self.metrics(sid)))
        self.assertIsNotNone(m, f'MemoryCurrent stayed below 100 MiB: {self.metrics(sid)}')
        self.assertGreaterEqual(m['memory_peak'], m['memory_current'])
        self.assertLess(m['memory_current'], 256 * MiB, m)
        # sandbox-init and python3.
        self.assertGreaterEqual(m['tasks_current'], 2, m)

    def test_work_and_tmp_usage(self):
        # In memory: each tmpfs on its own (test_workspaces has a workspace's).
        sid = self.create('--storage=tmpfs')
        m = self.metrics(sid)
        self.assertLess(m['work_bytes_used'], MiB, m)
        self.assertLess(m['tmp_bytes_used'], MiB, m)
        self.ok(self.exec(sid, 'sh', '-c', 'head -c 10485760 /dev/zero > /work/big && head -c 3145728 /dev/zero > /tmp/t'))
        m = self.metrics(sid)
        self.assertGreaterEqual(m['work_bytes_used'], 10 * MiB, m)
        self.assertLess(m['work_bytes_used'], 11 * MiB, m)
        self.assertGreaterEqual(m['tmp_bytes_used'], 3 * MiB, m)
        self.assertLess(m['tmp_bytes_used'], 4 * MiB, m)
        self.assertEqual(m['disk_bytes_used'], m['work_bytes_used'] + m['tmp_bytes_used'], m)
        # tmpfs pages are memory of the sandbox's own.
        self.assertGreaterEqual(m['memory_current'], 13 * MiB, m)

        # What is used now, not a peak; and also while paused (nothing in it runs).
        self.ok(self.exec(sid, 'rm', '/work/big'))
        self.ok(self.ctl('pause', sid))
        m = self.metrics(sid)
        self.assertEqual(m['state'], 'paused')
        self.assertLess(m['work_bytes_used'], MiB, m)
        self.assertGreaterEqual(m['tmp_bytes_used'], 3 * MiB, m)
        self.ok(self.ctl('resume', sid))

    def test_tasks_and_cpu(self):
        sid = self.create()
        before = self.metrics(sid)
        for _ in range(3):
            self.ok(self.ctl('start', sid, '--', 'sleep', '600'))
        m = wait_for(lambda: (lambda m: m if m['tasks_current'] >= before['tasks_current'] + 3 else None)(
            self.metrics(sid)))
        self.assertIsNotNone(m, f'TasksCurrent did not count the 3 started: {before} → {self.metrics(sid)}')
        self.ok(self.exec(sid, 'sh', '-c', 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'))
        after = self.metrics(sid)
        self.assertGreater(after['cpu_usage_nsec'] - before['cpu_usage_nsec'], 20 * 1000 * 1000, (before, after))

    def test_status_text_and_the_bus(self):
        sid = self.create('--storage=tmpfs')
        self.ok(self.exec(sid, 'sh', '-c', 'head -c 2097152 /dev/zero > /work/f'))
        cp = self.ok(self.ctl('status', sid))
        for label in ('CPU', 'Memory', 'Tasks', 'Work', 'Tmp'):
            self.assertRegex(cp.stdout, re.compile(rf'^ *{label}: \S', re.M))
        self.assertRegex(cp.stdout, re.compile(r'^ *Work: 2\.0M used$', re.M))

        cp, error = self.sandbox_call(sid, 'GetMetrics')
        self.assertIsNone(error, cp.stderr[-500:])
        self.assertEqual(set(re.findall(r'"(\w+)" t \d+', cp.stdout)), METRIC_KEYS, cp.stdout)
        _cp, error = self.sandbox_call(sid, 'GetMetrics', uid=NOBODY)
        self.assertIn(error, DENIED)


class Pools(Base):
    def pools(self, uid=None):
        cmd = [S.paths.sandboxctl, 'pool', '--json']
        cp = S.run(as_nobody(cmd) if uid == NOBODY else cmd)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        return {p['template']: p for p in json.loads(cp.stdout)}

    def ready(self):
        return wait_for(lambda: (lambda p: p if p[harness.POOLED_TEMPLATE]['ready'] == 1 else None)(self.pools()))

    def test_size_ready_and_in_use(self):
        pools = self.ready()
        self.assertIsNotNone(pools, f'the pool was not filled: {self.pools()}')
        # Only templates that have a pool.
        self.assertEqual(set(pools), {harness.POOLED_TEMPLATE}, pools)
        before = pools[harness.POOLED_TEMPLATE]
        self.assertEqual((before['size'], before['ready'], before['starting']), (1, 1, 0), before)

        sid = self.create(template=harness.POOLED_TEMPLATE)
        after = self.pools()[harness.POOLED_TEMPLATE]
        self.assertEqual(after['in_use'], before['in_use'] + 1, (before, after))
        self.assertEqual(after['size'], 1)
        refilled = self.ready()
        self.assertIsNotNone(refilled, f'the pool was not refilled: {self.pools()}')
        self.assertEqual(refilled[harness.POOLED_TEMPLATE]['in_use'], before['in_use'] + 1)

        cp = self.ok(self.ctl('pool'))
        self.assertRegex(cp.stdout, re.compile(r'^TEMPLATE +SIZE +READY +STARTING +IN USE +RECYCLED$', re.M))
        # A warm pool that does not recycle: "-".
        self.assertRegex(cp.stdout, re.compile(rf'^{harness.POOLED_TEMPLATE} +1 +1 +0 +\d+ +-$', re.M))

        # Someone without "manage" counts only their own sandboxes in use: none.
        theirs = self.pools(uid=NOBODY)[harness.POOLED_TEMPLATE]
        self.assertEqual((theirs['size'], theirs['in_use']), (1, 0), theirs)

        self.ok(self.ctl('destroy', sid))
        self.assertEqual(self.pools()[harness.POOLED_TEMPLATE]['in_use'], before['in_use'])


if __name__ == '__main__':
    unittest.main()
