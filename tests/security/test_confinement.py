#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Hostile code against the limits: a fork bomb, a memory bomb, a disk fill, a 5 GB output
flood and processes that try to outlive their sandbox. Each must meet its limit inside its
own sandbox, with the host, the daemon and other sandboxes unharmed."""

import json
import os
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import secutil  # noqa: E402
from secutil import Base, MiB, M, SBX, bus, call, sandbox_path, v  # noqa: E402


def setUpModule():
    secutil.setup_module()


def tearDownModule():
    secutil.teardown_module()


def in_thread(fn, *args, **kw):
    """Run FN in a thread; returns a function that joins it and returns (or raises) its result."""
    box = {}

    def target():
        try:
            box['value'] = fn(*args, **kw)
        except BaseException as e:  # handed to the joining test
            box['error'] = e
    t = threading.Thread(target=target, daemon=True)
    t.start()

    def join(timeout=None):
        t.join(timeout)
        if t.is_alive():
            raise AssertionError(f'{fn} still running after {timeout}s')
        if 'error' in box:
            raise box['error']
        return box['value']
    join.alive = t.is_alive
    return join


def note(msg):
    print(f'\n  [{msg}] ', end='', file=sys.stderr, flush=True)


def read_int(path):
    with open(path) as f:
        return int(f.read().split()[0])


def host_free_bytes(paths):
    """Free bytes of each distinct host filesystem among PATHS: {st_dev: (path, bytes)}."""
    out = {}
    for p in paths:
        try:
            st = os.statvfs(p)
            dev = os.stat(p).st_dev
        except OSError:
            continue
        out.setdefault(dev, (p, st.f_bavail * st.f_frsize))
    return out


class ForkBomb(Base):

    def test_fork_bomb_stops_at_tasks_max_and_host_stays_responsive(self):
        tasks = 32
        sid = self.create('--template', 'python', '--tasks', str(tasks))
        unit = self.unit(sid)
        current = secutil.cgroup_file(unit, 'pids', 'pids.current')
        self.assertIsNotNone(current, f'no pids.current for {unit}')
        events = secutil.cgroup_file(unit, 'pids', 'pids.events')
        baseline = read_int(current)

        # Every process forks for ever and ignores failures: the limit is all that holds it.
        bomb = 'import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n'
        started = time.monotonic()
        join = in_thread(self.exec_json, sid, 'python3', '-c', bomb, opts=('--timeout', '2'), timeout=90)

        peak, host_worst, daemon_worst, shown_worst = 0, 0.0, 0.0, 0
        while join.alive() and time.monotonic() - started < 60:
            peak = max(peak, read_int(current))
            t = time.monotonic()
            subprocess.run(['/bin/true'], check=True)                # a host command
            host_worst = max(host_worst, time.monotonic() - t)
            t = time.monotonic()
            cp = secutil.S.busctl('call', secutil.harness.BUS_NAME, M, 'org.freedesktop.DBus.Peer', 'Ping',
                                  timeout=30)
            daemon_worst = max(daemon_worst, time.monotonic() - t)
            self.assertEqual(cp.returncode, 0, f'sandboxd does not answer Ping during the bomb: {cp.stderr}')
            shown = secutil.S.show(unit, 'TasksCurrent', 'TasksMax')
            if shown.get('TasksCurrent', '').isdigit():
                shown_worst = max(shown_worst, int(shown['TasksCurrent']))
            self.assertEqual(shown['TasksMax'], str(tasks))
            time.sleep(0.02)
        _cp, res = join(60)
        note(f'fork bomb: peak {peak}/{tasks} tasks, host /bin/true worst {host_worst * 1000:.0f} ms, '
             f'daemon Ping worst {daemon_worst * 1000:.0f} ms')

        # The kernel charges a fork before it checks the limit and takes the charge back
        # when over it, so a sample of pids.current (TasksCurrent reads it too) may catch
        # one transient charge per CPU forking at that moment; pids.peak (kernel >= 6.1)
        # counts only charges that passed the check, and must hold exactly.
        slack = os.cpu_count() or 1
        self.assertLessEqual(peak, tasks + slack, f'pids.current reached {peak} > TasksMax={tasks} + {slack} CPUs')
        self.assertLessEqual(shown_worst, tasks + slack,
                             f'TasksCurrent reached {shown_worst} > TasksMax={tasks} + {slack} CPUs')
        peak_file = secutil.cgroup_file(unit, 'pids', 'pids.peak')      # the kernel's own record
        if peak_file:
            note(f'fork bomb: pids.peak {read_int(peak_file)} (sampled pids.current may exceed TasksMax '
                 f'by up to {slack}, one transient charge per CPU)')
            self.assertLessEqual(read_int(peak_file), tasks, peak_file)
        else:
            note('fork bomb: no pids.peak on this kernel; sampled pids.current checked within '
                 f'TasksMax + {slack} CPUs')
        # The bomb did press against the limit (else this test proved nothing).
        self.assertIsNotNone(events, f'no pids.events for {unit}')
        with open(events) as f:
            refused = int(dict(line.split() for line in f if line.strip()).get('max', '0'))
        self.assertGreater(refused, 0, 'no fork was refused: the bomb never reached TasksMax')
        self.assertGreaterEqual(peak, tasks - 4, f'the bomb only reached {peak} tasks')
        self.assertLess(host_worst, 2.0, f'a host /bin/true took {host_worst:.2f}s during the bomb')
        self.assertLess(daemon_worst, 2.0, f'sandboxd answered Ping after {daemon_worst:.2f}s during the bomb')
        self.assertIs(res['timed_out'], True, f'the bomb was not ended by its timeout: {res}')
        self.assertIs(res['oom_killed'], False, res)

        # Killed as a process group at the timeout: the tasks drain, the sandbox serves on.
        self.wait_until(lambda: read_int(current) <= baseline, 20, f'{unit} to drain back to {baseline} tasks')
        cp = self.ok(self.exec(sid, 'echo', 'alive'))
        self.assertEqual(cp.stdout, 'alive\n')


class MemoryBomb(Base):

    def test_memory_bomb_is_oom_killed_inside_its_scope_only(self):
        identity = secutil.daemon_identity()
        victim = self.create('--template', 'python', '--memory', '64M')
        bystander = self.create('--template', 'python', '--memory', '128M')
        self.ok(self.exec(bystander, 'sh', '-c', 'sleep 600 </dev/null >/dev/null 2>&1 &'))
        bystander_pids = secutil.scope_pids(self.unit(bystander))
        self.assertTrue(bystander_pids)
        bystander_oom = secutil.cgroup_file(self.unit(bystander), 'memory', 'memory.oom_control') or \
            secutil.cgroup_file(self.unit(bystander), 'memory', 'memory.events')

        bomb = 'chunks = []\nwhile True:\n    chunks.append(bytearray(8 << 20))\n'
        _cp, res = self.exec_json(victim, 'python3', '-c', bomb, opts=('--timeout', '60'))
        self.assertIs(res['oom_killed'], True, res)
        self.assertEqual(res['exit_status'], 137, res)
        self.assertEqual(res['signal'], 9, res)
        self.assertIs(res['timed_out'], False, res)

        # The daemon is the same process; the other sandbox's processes all live, it had no
        # OOM kill of its own, and it serves; so does the victim.
        self.assert_serving(identity)
        alive = {p for p in bystander_pids if secutil.proc_uids(p) is not None}
        self.assertEqual(alive, bystander_pids, 'processes of the other sandbox died')
        if bystander_oom:
            with open(bystander_oom) as f:
                counts = dict(line.split() for line in f if line.strip())
            self.assertEqual(counts.get('oom_kill', '0'), '0', f'{bystander_oom}: {counts}')
        cp = self.ok(self.exec(bystander, 'python3', '-c', 'print(len(bytearray(32 << 20)))'))
        self.assertEqual(cp.stdout, f'{32 << 20}\n')
        cp = self.ok(self.exec(victim, 'echo', 'alive'))
        self.assertEqual(cp.stdout, 'alive\n')


class DiskFill(Base):
    FILL = r'''
import errno, json, os
out = {}
chunk = b'x' * (1 << 20)
for d in ('/work', '/tmp'):
    n, err = 0, None
    with open(os.path.join(d, 'fill'), 'wb', buffering=0) as f:
        while n < (LIMIT << 20):
            try:
                n += f.write(chunk)
            except OSError as e:
                err = errno.errorcode[e.errno]
                break
    st = os.statvfs(d)
    out[d] = {'written': n, 'error': err, 'size': st.f_blocks * st.f_frsize}
print(json.dumps(out))
'''

    def test_disk_fill_stops_at_disk_max_and_host_disk_is_untouched(self):
        # Storage=tmpfs: /work and /tmp are each a tmpfs of DiskMax (the workspace on disk,
        # where both share one quota, is tests/integration/test_workspaces.py's).
        disk_max = 64 * MiB
        sid = self.create_bus('python', MemoryMax=512 * MiB, DiskMax=disk_max, Storage='tmpfs')
        host_paths = ['/', '/var/tmp', '/tmp', '/var', secutil.S.path('/'), secutil.S.path('/var/tmp'),
                      os.path.dirname(secutil.S.paths.sandboxd)]
        before = host_free_bytes(host_paths)
        code = self.FILL.replace('LIMIT', str(4 * disk_max // MiB))
        cp = self.ok(self.exec(sid, 'python3', '-c', code))
        after = host_free_bytes(host_paths)          # the files still exist in the sandbox
        res = json.loads(cp.stdout)
        note(f'disk fill: {res}; host free bytes before {before}, after {after}')

        for d in ('/work', '/tmp'):
            with self.subTest(d):
                self.assertEqual(res[d]['error'], 'ENOSPC', res)
                self.assertLessEqual(res[d]['written'], disk_max, res)
                self.assertGreaterEqual(res[d]['written'], disk_max - 2 * MiB, res)
                self.assertEqual(res[d]['size'], disk_max, res)
        # 128 MiB went into the sandbox: none of it may show on a host filesystem.
        for dev, (path, free) in before.items():
            used = free - after[dev][1]
            self.assertLess(used, 32 * MiB, f'{path}: {used / MiB:.1f} MiB of host disk used by the fill')
        # It is memory of the sandbox's scope instead (tmpfs pages count against MemoryMax).
        mem = secutil.S.show(self.unit(sid), 'MemoryCurrent').get('MemoryCurrent', '')
        if mem.isdigit():
            self.assertGreaterEqual(int(mem), 2 * disk_max - 8 * MiB, f'MemoryCurrent={mem}')

        # Removing the files makes room again.
        cp = self.ok(self.exec(sid, 'sh', '-c', 'rm /work/fill /tmp/fill && head -c 1048576 /dev/zero > /work/again '
                                                '&& wc -c < /work/again'))
        self.assertEqual(cp.stdout.strip(), '1048576')


class OutputFlood(Base):

    def test_5gb_stdout_flood_is_truncated_and_daemon_rss_stays_bounded(self):
        sid = self.create()
        identity = secutil.daemon_identity()
        pid = identity[0]
        rss_before = secutil.daemon_rss_kib(pid)
        gib = 1 << 30
        flood = call(sandbox_path(sid), SBX, 'Exec', 'asa{sv}',
                     ['sh', '-c', 'head -c 5G /dev/zero & head -c 1G /dev/zero >&2; wait'],
                     {'Timeout': v('t', 600)}, timeout=600)
        join = in_thread(bus, [flood], timeout=660)
        rss_peak = rss_before
        while join.alive():
            rss_peak = max(rss_peak, secutil.daemon_rss_kib(pid))
            time.sleep(0.05)
        res = join(30)[0]
        note(f'output flood: sandboxd VmRSS {rss_before} KiB before, {rss_peak} KiB at most during')

        self.assertIn('reply', res, res)
        status, out, err, info = res['reply']
        self.assertEqual(status, 0, info)
        self.assertEqual(out, {'len': 1 * MiB}, 'stdout kept is not OutputMax (default 1 MiB)')
        self.assertEqual(err, {'len': 1 * MiB}, 'stderr kept is not OutputMax (default 1 MiB)')
        self.assertIs(info['Truncated'], True, info)
        self.assertEqual(info['StdoutBytes'], 5 * gib, info)
        self.assertEqual(info['StderrBytes'], 1 * gib, info)
        growth = (rss_peak - rss_before) * 1024
        self.assertLess(growth, 64 * MiB, f'sandboxd RSS grew by {growth / MiB:.1f} MiB during the flood '
                                          f'({rss_before} -> {rss_peak} KiB)')
        self.assert_serving(identity)

    def test_flood_with_output_max_zero_keeps_nothing(self):
        sid = self.create()
        res = bus([call(sandbox_path(sid), SBX, 'Exec', 'asa{sv}', ['sh', '-c', 'yes | head -c 100000000'],
                        {'OutputMax': v('t', 0)})])[0]
        self.assertIn('reply', res, res)
        status, out, err, info = res['reply']
        self.assertEqual((status, out, info['Truncated'], info['StdoutBytes']), (0, {'len': 0}, True, 100000000))


class Daemonize(Base):
    ESCAPES = r'''
setsid sh -c 'sleep 1001 </dev/null >/dev/null 2>&1 &' </dev/null >/dev/null 2>&1 &
nohup sleep 1002 </dev/null >/dev/null 2>&1 &
sh -c 'trap "" HUP TERM INT; exec sleep 1003' </dev/null >/dev/null 2>&1 &
python3 -c '
import os, time
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
os.chdir("/"); os.closerange(0, 3)
time.sleep(1004)
' </dev/null >/dev/null 2>&1 &
sleep 0.3
'''

    def test_daemonized_processes_die_with_the_sandbox(self):
        sid = self.create('--template', 'python')
        unit = self.unit(sid)
        self.ok(self.exec(sid, 'sh', '-c', self.ESCAPES))
        # The escapes run on after their exec: orphans, new sessions, double forks.
        cp = self.ok(self.exec(sid, 'sh', '-c', 'ps -eo args 2>/dev/null || cat /proc/[0-9]*/cmdline | tr "\\0" " "'))
        for n in ('1001', '1002', '1003', '1004'):
            self.assertIn(n, cp.stdout, f'the escape sleeping {n}s is not running inside: {cp.stdout}')

        pids = secutil.scope_pids(unit)
        uids = {secutil.proc_uids(p) for p in pids} - {None}
        self.assertTrue(uids, f'no process found in {unit}')
        real = {u[0] for u in uids}
        self.assertEqual(len(real), 1, f'processes of {unit} run as several host uids: {uids}')
        host_uid = real.pop()
        self.assertGreaterEqual(host_uid, 0x70000000, f'sandbox runs as host uid {host_uid}')
        self.assertEqual(uids, {(host_uid,) * 4}, f'mixed uids in {unit}: {uids}')
        # One user namespace for all of the sandbox (bwrap's monitor, in the host's, is
        # gone once the sandbox is ready), mapping uid 1000 to that host uid alone: none nested (no bwrap
        # --disable-userns; the seccomp policy refuses new ones: test_exposure and
        # test_seccomp).
        userns = {}
        for p in pids:
            try:
                userns[p] = os.readlink(f'/proc/{p}/ns/user')
            except FileNotFoundError:
                pass
        inner = set(userns.values()) - {os.readlink('/proc/self/ns/user')}
        self.assertEqual(len(inner), 1, f'{unit} has several user namespaces: {userns}')
        agent = next(p for p, ns in userns.items() if ns in inner)
        with open(f'/proc/{agent}/uid_map') as f:
            self.assertEqual(f.read().split(), ['1000', str(host_uid), '1'])
        mine = secutil.processes_of_uid(host_uid)
        self.assertGreaterEqual(len(mine), 5, f'expected the agent and 4 escapes, saw {mine}')

        self.ok(self.ctl('destroy', sid))
        deadline = time.monotonic() + 5
        left = secutil.processes_of_uid(host_uid)
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = secutil.processes_of_uid(host_uid)
        self.assertEqual(left, [], f'processes of host uid {host_uid} remain after destroy')


class AgentSignals(Base):

    def test_code_in_a_sandbox_cannot_end_its_agent(self):
        # The agent is PID 1 of the sandbox's PID namespace: the code it runs shares its uid
        # and may signal it. A persistent sandbox is its owner's to end (Destroy, lifetime),
        # not the untrusted code's.
        for sig in ('KILL', 'STOP', 'TERM', 'INT', 'HUP', 'QUIT', 'USR1', 'SEGV'):
            with self.subTest(sig):
                sid = self.create()
                cp = self.exec(sid, 'sh', '-c', f'kill -{sig} 1; sleep 0.2; echo sent')
                self.assertEqual((cp.returncode, cp.stdout), (0, 'sent\n'),
                                 f'kill -{sig} 1 inside: exit {cp.returncode}, {cp.stderr.strip()}')
                cp = self.exec(sid, 'echo', 'alive')
                self.assertEqual((cp.returncode, cp.stdout), (0, 'alive\n'),
                                 f'after kill -{sig} 1 inside: exit {cp.returncode}, {cp.stderr.strip()}')
                self.assertIn(self.unit(sid), secutil.S.sandbox_scopes())


if __name__ == '__main__':
    unittest.main(verbosity=2)
