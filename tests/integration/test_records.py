#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 6: every sandbox and execution recorded, in a real MariaDB started by the harness
and in the local spool, without slowing or failing an execution.

Run through tests/integration/run.py, or: python3 tests/integration/run.py test_records
"""

import json
import os
import shutil
import statistics
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import busclient  # noqa: E402
import harness  # noqa: E402

S = None
_owned = False
MiB = 1024 * 1024
SPOOL_FILE = "records.jsonl"   # SPOOL_FILE in src/core/recorder-spool.h


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()


def tearDownModule():
    if S is not None and not S.torn_down:
        S.configure_daemon(None)   # the others' sandboxd again: no --config
    harness.module_teardown(_owned)


class Base(harness.SandboxTestCase):
    TIMEOUT = 60

    def exec_captured(self, sid, *cmd, opts=()):
        """exec --json: the output goes through sandboxd (plain exec hands the command
        sandboxctl's own descriptors, so sandboxd never sees, nor records, the output)."""
        cp = self.exec(sid, *cmd, opts=('--json',) + tuple(opts))
        return cp, json.loads(cp.stdout)


EXEC_COLUMNS = ('exec_id', 'owner_uid', 'caller_uid', 'HEX(argv)', 'cwd', 'started_usec', 'ended_usec', 'exit_status',
                'exit_code', 'term_signal', 'timed_out', 'oom_killed', 'cpu_usec', 'cgroup_cpu_nsec',
                'cgroup_memory_peak', 'stdout_bytes', 'stderr_bytes', 'HEX(stdout_excerpt)', 'HEX(stderr_excerpt)',
                'disk_bytes_used', 'disk_bytes_max')


SNAPSHOT_COLUMNS = ('snapshot_id', 'event', 'cause', 'source_sandbox_id', 'restored_into', 'owner_uid', 'tenant',
                    'bytes', 'content_bytes', 'event_usec')


class WithMariaDB(Base):
    """sandboxd configured for a real mariadbd; the password through LoadCredential=."""

    @classmethod
    def setUpClass(cls):
        try:
            cls.db = S.start_mariadb()
        except harness.Unavailable as e:
            if harness.ci():
                raise
            raise unittest.SkipTest(str(e))
        cls.configured_at = time.time()
        S.configure_daemon(
            '# written by test_records.py\n'
            '[Recording]\n'
            f'MariaDBSocket = {cls.db.socket_in_system}\n'
            'Database = sandboxd\n'
            'User = sandboxd\n'
            # The credential wins when systemd provides it (LoadCredential=); the
            # namespace systemd of the harness leaves $CREDENTIALS_DIRECTORY empty.
            f'PasswordFile = /run/{S.name}-config/mariadb-password\n'
            'Retention = 30d\n'
            '[Snapshots]\n'
            'Directory = /run/sandboxd-test-state/snapshots-records\n',
            credentials={'mariadb-password': harness.MariaDB.PASSWORD + '\n'})

    def rows(self, sid, timeout=30, n=1):
        """The executions of sandbox SID as dicts, once at least N are there."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                rows = self.db.sql(f"SELECT {', '.join(EXEC_COLUMNS)} FROM executions "
                                   f"WHERE sandbox_id = '{sid}' ORDER BY exec_id")
            except harness.HarnessError as e:
                # Not there yet: sandboxd makes the tables (and migrates them) as it connects.
                if "doesn't exist" not in str(e) and 'Unknown column' not in str(e):
                    raise
                rows = []
            if len(rows) >= n:
                # The client's batch mode escapes backslashes: read bytes as HEX().
                rows = [dict(zip(EXEC_COLUMNS, r)) for r in rows]
                for r in rows:
                    r['argv'] = bytes.fromhex(r.pop('HEX(argv)')).decode()
                return rows
            if time.monotonic() > deadline:
                self.fail(f'{n} execution(s) of {sid} not in MariaDB after {timeout}s: {rows}\n'
                          + S.journal(since=self.configured_at))
            time.sleep(0.1)

    def test_normal_exit(self):
        sid = self.create()
        cp, res = self.exec_captured(sid, 'sh', '-c', 'echo out; echo err >&2; exit 3')
        self.assertEqual(res['exit_status'], 3, cp.stderr)
        (r,) = self.rows(sid)
        self.assertEqual(json.loads(r['argv']), ['sh', '-c', 'echo out; echo err >&2; exit 3'])
        self.assertEqual((r['exit_status'], r['exit_code'], r['term_signal']), ('3', '3', '0'))
        self.assertEqual((r['timed_out'], r['oom_killed']), ('0', '0'))
        self.assertEqual((r['owner_uid'], r['caller_uid']), ('0', '0'))
        self.assertEqual(r['HEX(stdout_excerpt)'], b'out\n'.hex().upper())
        self.assertEqual(r['HEX(stderr_excerpt)'], b'err\n'.hex().upper())
        self.assertEqual((r['stdout_bytes'], r['stderr_bytes']), ('4', '4'))
        started, ended = int(r['started_usec']), int(r['ended_usec'])
        self.assertLessEqual(abs(started / 1e6 - time.time()), 60)
        self.assertLessEqual(started, ended)
        self.assertGreater(int(r['cgroup_memory_peak']), 0, r)

        # The sandbox: its row at creation, its end when destroyed.
        row = self.db.sql(f"SELECT owner_uid, template, payload, memory_max, destroyed_usec FROM sandboxes "
                          f"WHERE id = '{sid}'")
        self.assertEqual(len(row), 1, row)
        self.assertEqual(row[0][:3], ['0', 'shell', 'bwrap'])
        self.assertGreater(int(row[0][3]), 0)
        self.assertIsNone(row[0][4])
        self.ok(self.ctl('destroy', sid))
        deadline = time.monotonic() + 30
        while self.db.sql(f"SELECT end_reason FROM sandboxes WHERE id = '{sid}'") != [['destroyed']]:
            self.assertLess(time.monotonic(), deadline, 'the sandbox\'s end never reached MariaDB')
            time.sleep(0.1)

        # What the daemon loaded at start; and the schema's version.
        names = {n for (n,) in self.db.sql('SELECT name FROM templates')}
        self.assertIn('shell', names)
        self.assertEqual(self.db.sql('SELECT MAX(version) FROM schema_version'), [['6']])

    def test_disk_figures(self):
        """Schema version 5: a sandbox on disk's executions carry its workspace's bytes at
        their end and its DiskMax (also in ListExecutions); one in memory's carry NULL."""
        sid = self.create('--disk', '256M')
        self.ok(self.exec(sid, 'sh', '-c', 'head -c 5M /dev/zero > /work/f && sync'))
        (r,) = self.rows(sid)
        self.assertGreaterEqual(int(r['disk_bytes_used']), 5 * MiB, r)
        self.assertLess(int(r['disk_bytes_used']), 6 * MiB, r)
        self.assertEqual(int(r['disk_bytes_max']), 256 * MiB, r)
        replies, error, _ = S.varlink_call('ListExecutions', {'filter': {'SandboxId': sid}})
        self.assertIsNone(error, replies)
        (e,) = replies[0]['executions']
        self.assertEqual((e['diskBytesUsed'], e['diskBytesMax']), (int(r['disk_bytes_used']), 256 * MiB))
        # D-Bus: ListExecutionsEx's last three (tenant, disk used, DiskMax); ListExecutions'
        # signature is the one clients know.
        disk = (int(r['disk_bytes_used']), 256 * MiB)
        cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                     'ListExecutionsEx', 'a{sv}', '1', 'SandboxId', 's', sid)
        self.assertIsNone(error, cp.stderr)
        (x,) = data[0]
        self.assertEqual((x[0], x[-3], x[-2], x[-1]), (sid, '', *disk))
        cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                     'ListExecutions', 'a{sv}', '1', 'SandboxId', 's', sid)
        self.assertIsNone(error, cp.stderr)
        self.assertEqual(data[0][0], x[:-3])
        # sandboxctl history (over ListExecutionsEx): the table's DISK, and --json's.
        (h,) = json.loads(self.ok(self.ctl('history', sid, '--json')).stdout)
        self.assertEqual((h['disk_bytes_used'], h['disk_bytes_max'], h['tenant']), (*disk, ''))
        (line,) = [l for l in self.ok(self.ctl('history', sid)).stdout.splitlines() if sid in l]
        self.assertRegex(line, r'\s5\.\d+M/256\.0M\s+sh -c')
        mem = self.create('--storage', 'tmpfs')
        self.ok(self.exec(mem, 'true'))
        (r,) = self.rows(mem)
        self.assertEqual((r['disk_bytes_used'], r['disk_bytes_max']), (None, None), r)
        cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                     'ListExecutionsEx', 'a{sv}', '1', 'SandboxId', 's', mem)
        self.assertIsNone(error, cp.stderr)
        self.assertEqual(data[0][0][-2:], [2**64 - 1, 2**64 - 1])
        (h,) = json.loads(self.ok(self.ctl('history', mem, '--json')).stdout)
        self.assertEqual((h['disk_bytes_used'], h['disk_bytes_max']), (None, None))
        (line,) = [l for l in self.ok(self.ctl('history', mem)).stdout.splitlines() if mem in l]
        self.assertRegex(line, r'\s-\s+true$')

    def test_hibernate_and_wake(self):
        """A woken sandbox has the id it had: its row runs again, and its executions are
        new rows next to those from before it hibernated."""
        sid = self.create('--name', 'rec-sleeper')
        self.ok(self.exec(sid, 'echo', 'before'))
        self.rows(sid, n=1)
        # On disk: stopped, its files kept (no snapshot archive).
        self.assertEqual(self.ok(self.ctl('hibernate', sid)).stdout, '')

        def row():
            return self.db.sql(f"SELECT end_reason, destroyed_usec IS NULL FROM sandboxes WHERE id = '{sid}'")
        deadline = time.monotonic() + 30
        while row() != [['hibernated: stopped, its files kept on disk', '0']]:
            self.assertLess(time.monotonic(), deadline, f'the hibernation never reached MariaDB: {row()}')
            time.sleep(0.1)
        self.assertEqual(self.ok(self.ctl('wake', 'rec-sleeper')).stdout.strip(), sid)
        while row() != [[None, '1']]:
            self.assertLess(time.monotonic(), deadline, f'the woken sandbox\'s row does not run again: {row()}')
            time.sleep(0.1)
        self.ok(self.exec(sid, 'echo', 'after'))
        rows = self.rows(sid, n=2)
        self.assertEqual([json.loads(r['argv']) for r in rows], [['echo', 'before'], ['echo', 'after']])
        self.ok(self.ctl('destroy', sid))
        while row() != [['destroyed', '0']]:
            self.assertLess(time.monotonic(), deadline + 30, f'the end never reached MariaDB: {row()}')
            time.sleep(0.1)

    def snapshot_events(self, where, n, timeout=30):
        """The snapshot_events rows WHERE (as dicts, in the order sandboxd recorded them),
        once at least N are there."""
        deadline = time.monotonic() + timeout
        while True:
            rows = self.db.sql(f"SELECT {', '.join(SNAPSHOT_COLUMNS)} FROM snapshot_events WHERE {where} "
                               "ORDER BY spool_seq")
            if len(rows) >= n:
                return [dict(zip(SNAPSHOT_COLUMNS, r)) for r in rows]
            if time.monotonic() > deadline:
                self.fail(f'{n} snapshot event(s) where {where} not in MariaDB after {timeout}s: {rows}\n'
                          + S.journal(since=self.configured_at))
            time.sleep(0.1)

    def test_snapshot_events(self):
        """Schema version 3: every snapshot taken, restored and removed, in the order it
        happened, through Snapshot, CreateSandbox FromSnapshot, Fork, Hibernate, Wake and
        RemoveSnapshot. In memory (Storage=tmpfs), where a fork goes through an archive
        snapshot; a fork on disk is a btrfs snapshot of the workspace, not a snapshot event."""
        sid = self.create('--name', 'rec-snap', '--storage', 'tmpfs')
        self.ok(self.exec(sid, 'sh', '-c', 'head -c 100000 /dev/urandom > /work/f'))
        snap = self.ok(self.ctl('snapshot', sid)).stdout.strip()
        dst = self.create('--from-snapshot', snap)
        fork = self.ok(self.ctl('fork', sid)).stdout.strip()
        self.addCleanup(self.destroy_quietly, S, fork)
        hib = self.ok(self.ctl('hibernate', sid)).stdout.strip()
        self.assertEqual(self.ok(self.ctl('wake', 'rec-snap')).stdout.strip(), sid)
        self.ok(self.ctl('snapshot-remove', snap))

        rows = self.snapshot_events(f"source_sandbox_id = '{sid}'", n=9)
        forked = rows[2]['snapshot_id']   # Fork's snapshot: no call names it
        self.assertNotIn(forked, (snap, hib))
        self.assertEqual([(r['snapshot_id'], r['event'], r['cause'], r['restored_into']) for r in rows], [
            (snap, 'taken', 'snapshot', ''),
            (snap, 'restored', 'create', dst),
            (forked, 'taken', 'fork', ''),
            (forked, 'restored', 'fork', fork),
            (forked, 'removed', 'fork', ''),      # Fork's snapshot goes once restored
            (hib, 'taken', 'hibernate', ''),
            (hib, 'restored', 'wake', sid),       # the same id again
            (hib, 'removed', 'wake', ''),
            (snap, 'removed', 'remove', ''),
        ])
        for r in rows:
            self.assertEqual((r['owner_uid'], r['tenant']), ('0', None), r)
            self.assertGreater(int(r['bytes']), 0, r)
            self.assertGreaterEqual(int(r['content_bytes']), 100000, r)
            self.assertLessEqual(abs(int(r['event_usec']) / 1e6 - time.time()), 120, r)
        times = [int(r['event_usec']) for r in rows]
        self.assertEqual(times, sorted(times))
        # One stream per snapshot: the same bytes in each of its events.
        for i in (snap, forked, hib):
            self.assertEqual(len({r['bytes'] for r in rows if r['snapshot_id'] == i}), 1, rows)

    def test_snapshot_events_outage(self):
        """Snapshot events while mariadbd is down reach it once it is back, from the spool;
        replayed again (the cursor put back), they are not doubled."""
        sid = self.create()
        self.db.kill()
        try:
            snap = self.ok(self.ctl('snapshot', sid)).stdout.strip()
            self.ok(self.ctl('snapshot-remove', snap))
        finally:
            S.start_mariadb()
        rows = self.snapshot_events(f"snapshot_id = '{snap}'", n=2, timeout=90)
        self.assertEqual([(r['event'], r['cause'], r['source_sandbox_id']) for r in rows],
                         [('taken', 'snapshot', sid), ('removed', 'remove', sid)])

        # Replay the whole spool: idempotent keys, no second row.
        spool_dir = S.path(f'{S.state_dir}/spool')
        S.systemctl('stop', 'sandboxd.service', check=True, timeout=90)
        with open(os.path.join(spool_dir, SPOOL_FILE), 'rb') as f:
            last = json.loads(f.read().rstrip(b'\n').rsplit(b'\n', 1)[-1])['seq']
        with open(os.path.join(spool_dir, 'cursor'), 'w') as f:
            f.write('0\n')
        S.start_daemon()
        deadline = time.monotonic() + 90
        while True:
            with open(os.path.join(spool_dir, 'cursor')) as f:
                if int(f.read().split()[0] or 0) >= last:
                    break
            self.assertLess(time.monotonic(), deadline, 'the spool was not replayed')
            time.sleep(0.1)
        self.assertEqual(self.db.sql(f"SELECT COUNT(*) FROM snapshot_events WHERE snapshot_id = '{snap}'"), [['2']])

    def test_name_and_tenant(self):
        """Schema version 2: a sandbox's name and tenant, and its executions' tenant."""
        cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE, 'CreateSandbox',
                                     'sa{sv}', 'shell', '2', 'Name', 's', 'recorded', 'Tenant', 's', 'tenant-r')
        self.assertIsNone(error, cp.stderr)
        sid = data[0]
        self.addCleanup(self.destroy_quietly, S, sid)
        self.ok(self.exec(sid, 'true'))
        self.rows(sid)
        self.assertEqual(self.db.sql(f"SELECT tenant FROM executions WHERE sandbox_id = '{sid}'"), [['tenant-r']])
        self.assertEqual(self.db.sql(f"SELECT name, tenant FROM sandboxes WHERE id = '{sid}'"),
                         [['recorded', 'tenant-r']])
        # Without them: NULL.
        plain = self.create()
        self.ok(self.exec(plain, 'true'))
        self.rows(plain)
        self.assertEqual(self.db.sql(f"SELECT tenant FROM executions WHERE sandbox_id = '{plain}'"), [[None]])
        self.assertEqual(self.db.sql(f"SELECT name, tenant FROM sandboxes WHERE id = '{plain}'"), [[None, None]])

    def test_labels(self):
        """Schema version 4: a sandbox's labels (a JSON object) in its row and its executions'."""
        sid = self.create('--label', 'team=rec', '--label', 'run=a b')
        self.ok(self.exec(sid, 'true'))
        self.rows(sid)
        (labels,), = self.db.sql(f"SELECT labels FROM executions WHERE sandbox_id = '{sid}'")
        self.assertEqual(json.loads(labels), {'run': 'a b', 'team': 'rec'})
        (labels,), = self.db.sql(f"SELECT labels FROM sandboxes WHERE id = '{sid}'")
        self.assertEqual(json.loads(labels), {'run': 'a b', 'team': 'rec'})
        plain = self.create()
        self.ok(self.exec(plain, 'true'))
        self.rows(plain)
        self.assertEqual(self.db.sql(f"SELECT labels FROM executions WHERE sandbox_id = '{plain}'"), [[None]])

    def test_timeout(self):
        sid = self.create()
        cp = self.exec(sid, 'sleep', '100', opts=('--timeout', '1'))
        self.assertEqual(cp.returncode, 124, cp.stderr)
        (r,) = self.rows(sid)
        self.assertEqual((r['timed_out'], r['oom_killed']), ('1', '0'), r)
        self.assertGreaterEqual(int(r['ended_usec']) - int(r['started_usec']), 900000, r)
        self.assertEqual(json.loads(r['argv']), ['sleep', '100'])

    def test_oom_kill(self):
        sid = self.create('--template', 'python', '--memory', '64M')
        cp = self.exec(sid, 'python3', '-c', "s = b'x' * (200 * 1024 * 1024)")
        self.assertEqual(cp.returncode, 137, cp.stderr)
        (r,) = self.rows(sid)
        self.assertEqual((r['oom_killed'], r['timed_out']), ('1', '0'), r)
        self.assertEqual((r['exit_status'], r['term_signal']), ('137', '9'), r)
        # From the unit's cgroup: it went up to the limit.
        self.assertGreaterEqual(int(r['cgroup_memory_peak']), 32 * MiB, r)
        self.assertLessEqual(int(r['cgroup_memory_peak']), 80 * MiB, r)
        # cgroup_cpu_nsec: read by the core (cgroup_read_cpu_nsec()); 0 when it cannot.
        self.assertGreaterEqual(int(r['cgroup_cpu_nsec']), 0, r)

    def test_oom_kill_of_a_child(self):
        # Issue 27: a shell's child (the shell exits 137 itself) and a pipeline's first
        # member (exit 0): the record says oom_killed from the cgroup's count.
        sid = self.create('--template', 'python', '--memory', '128M')
        cp = self.exec(sid, 'sh', '-c', 'python3 -c "b = bytearray(400 << 20)"; exit $?')
        self.assertEqual(cp.returncode, 137, cp.stderr)
        cp = self.exec(sid, 'sh', '-c', 'dd if=/dev/zero bs=400M count=1 2>/dev/null | tail -c 1 | wc -c')
        self.assertEqual(cp.returncode, 137, cp.stderr)
        rows = self.rows(sid, n=2)
        self.assertEqual([(r['oom_killed'], r['exit_status'], r['term_signal']) for r in rows],
                         [('1', '137', '0'), ('1', '0', '0')], rows)

    def test_streamed_output_is_counted(self):
        # Issue 27: every streamed exec recorded stdoutBytes 0. sandboxctl exec hands the
        # command its own descriptors (through sandboxd's counting forward now), varlink
        # "more" and the Python client's commands.run and SandboxProvider.execute stream.
        sys.path.insert(0, os.path.join(S.paths.source, 'python'))
        import sandboxd
        from sandboxd.code import SandboxProvider
        import asyncio

        sid = self.create('--template', 'python')
        script = 'head -c 100000 /dev/zero; echo err >&2'
        cp = self.exec(sid, 'sh', '-c', script)                     # stdout, stderr: pipes of the test
        self.assertEqual((cp.returncode, len(cp.stdout), cp.stderr), (0, 100000, 'err\n'))
        # /dev/null: read and dropped, counted all the same.
        cp = self.ok(S.run(['sh', '-c', f'exec "$0" exec {sid} -- sh -c "{script}" >/dev/null', S.paths.sandboxctl]))
        self.assertEqual(cp.stderr, 'err\n')
        replies, error, _ = S.varlink_call('Exec', {'id': sid, 'argv': ['sh', '-c', script]}, more=True)
        self.assertIsNone(error)
        t = sandboxd.VarlinkTransport(S.path(harness.VARLINK_SOCKET))
        try:
            r = sandboxd.Sandbox.connect(sid, transport=t).commands.run(script)
            self.assertEqual(len(r.stdout), 100000)

            async def provider():
                p = SandboxProvider(transport=sandboxd.AsyncVarlinkTransport(S.path(harness.VARLINK_SOCKET)))
                try:
                    box = await p.create_sandbox('python')
                    res = await p.execute('import sys; sys.stdout.write("x" * 12345); print("e", file=sys.stderr)')
                    self.assertEqual(len(res.stdout), 12345)
                    return box
                finally:
                    await p.cleanup()
            other = asyncio.run(provider())
        finally:
            t.close()
        rows = self.rows(sid, n=4)
        self.assertEqual([(r['stdout_bytes'], r['stderr_bytes']) for r in rows], [('100000', '4')] * 4, rows)
        # A reader that goes away still stops a writer, as with the caller's pipe itself.
        cp = S.run(['sh', '-c', f'"$0" exec {sid} -- yes | head -1', S.paths.sandboxctl], timeout=30)
        self.assertEqual(cp.stdout, 'y\n', cp.stderr)
        other_id = getattr(other, 'sandbox_id', None) or getattr(other, 'id')
        (row,) = self.rows(other_id)
        self.assertEqual((row['stdout_bytes'], row['stderr_bytes']), ('12345', '2'), row)

    def test_signal(self):
        sid = self.create()
        cp = self.exec(sid, 'sh', '-c', 'kill -TERM $$')
        self.assertEqual(cp.returncode, 143, cp.stderr)
        (r,) = self.rows(sid)
        self.assertEqual((r['term_signal'], r['exit_status'], r['exit_code']), ('15', '143', '-1'), r)
        self.assertEqual((r['oom_killed'], r['timed_out']), ('0', '0'), r)

    def test_hostile_content_verbatim(self):
        sid = self.create()
        evil = "'; DROP TABLE executions;--"
        # quotes, a NUL byte, invalid UTF-8 (\377\376, a lone continuation byte), a backslash
        script = 'printf "a\'b\\"c\\000d\\377\\376\\200e\\\\\\\\"'
        expected = b'a\'b"c\x00d\xff\xfe\x80e\\'
        cp, res = self.exec_captured(sid, 'sh', '-c', script, evil)
        self.assertEqual(res['exit_status'], 0, cp.stderr)
        (r,) = self.rows(sid)
        self.assertEqual(r['HEX(stdout_excerpt)'], expected.hex().upper())
        self.assertEqual(int(r['stdout_bytes']), len(expected))
        self.assertEqual(json.loads(r['argv']), ['sh', '-c', script, evil])
        self.assertEqual(self.db.sql("SELECT COUNT(*) FROM information_schema.tables "
                                     "WHERE table_schema = 'sandboxd' AND table_name = 'executions'"), [['1']])

    def inject_execs(self, n, edit=None):
        """Stops sandboxd, appends N execution records of a made-up sandbox to its spool
        (as sandboxd writes them, numbered after its last record and its cursor; edit(i,
        record) may change each), and starts it again. Returns (sandbox id, seq of the
        record before the first, time of the start)."""
        spool = S.path(f'{S.state_dir}/spool/{SPOOL_FILE}')
        S.systemctl('stop', 'sandboxd.service', check=True, timeout=90)
        with open(spool, 'rb') as f:
            last = json.loads(f.read().rstrip(b'\n').rsplit(b'\n', 1)[-1])['seq']
        with open(os.path.join(os.path.dirname(spool), 'cursor')) as f:
            last = max(last, int(f.read().split()[0]))   # sandboxd goes on after both
        sid = 'feed%012x' % (last & 0xffffffffffff)
        now = int(time.time() * 1e6)
        lines = []
        for i in range(1, n + 1):
            rec = {'seq': last + i, 'type': 'exec', 'time': now, 'argv': ['echo', str(i)], 'sandbox': sid,
                   'exec': i, 'owner': 0, 'caller': 0, 'cwd': '/work', 'background': False,
                   'started': now, 'ended': now, 'exit_status': 0, 'exit_code': 0, 'signal': 0,
                   'timed_out': False, 'oom_killed': False, 'truncated': False, 'cpu_usec': 1,
                   'cgroup_cpu_nsec': 1, 'memory_peak': 1, 'stdout_bytes': 2, 'stderr_bytes': 0,
                   'stdout': f'{i}\n'.encode().hex(), 'stderr': ''}
            if edit:
                edit(i, rec)
            lines.append(json.dumps(rec, separators=(',', ':')) + '\n')
        with open(spool, 'a') as f:
            f.write(''.join(lines))
        since = time.time()
        S.start_daemon()
        return sid, last, since

    def test_unstorable_record_in_a_run(self):
        """Executions go in as multi-row INSERTs; one record in such a run that can never be
        stored (here: an excerpt that is not hex) costs only itself: the rest of the run is
        stored, it is logged and skipped, and nothing is written twice."""
        def edit(i, rec):
            if i == 3:
                rec['stdout'] = 'not hex'
        sid, last, since = self.inject_execs(7, edit)
        rows = self.rows(sid, n=6)
        time.sleep(1.5)   # anything doubled or late would show now
        rows = self.rows(sid, n=6)
        self.assertEqual([int(r['exec_id']) for r in rows], [1, 2, 4, 5, 6, 7])
        self.assertEqual([bytes.fromhex(r['HEX(stdout_excerpt)']).decode() for r in rows],
                         [f'{i}\n' for i in (1, 2, 4, 5, 6, 7)])
        self.assertIn(f'Record {last + 3} of the spool cannot be stored in MariaDB, skipping it',
                      S.journal(since=since))
        # sandboxd writes on after it: a new execution is recorded.
        new = self.create()
        self.ok(self.exec(new, 'true'))
        self.rows(new)

    def test_large_records_under_a_small_packet_limit(self):
        """A run of executions with large argv against a server whose max_allowed_packet
        is its minimum, 1 MiB: the multi-row statements stay under it (a statement over it
        would fail on every retry and stall the writer for good). Half the argv are
        control characters, which the stored JSON spells as \\u0001: six bytes each."""
        self.db.sql('SET GLOBAL max_allowed_packet = 1048576', db=None)
        self.addCleanup(self.db.sql, 'SET GLOBAL max_allowed_packet = 16777216', db=None)
        big = 'x' * (60 * 1024) + '\x01' * (60 * 1024)

        def edit(i, rec):
            rec['argv'] = ['echo', big, str(i)]
        sid, last, since = self.inject_execs(16, edit)
        rows = self.rows(sid, n=16)
        self.assertEqual([int(r['exec_id']) for r in rows], list(range(1, 17)))
        self.assertEqual([json.loads(r['argv']) for r in rows], [['echo', big, str(i)] for i in range(1, 17)])
        self.assertNotIn('not reachable', S.journal(since=since))

    def test_outage(self):
        """mariadbd killed and restarted while execs run: none fails or stalls, every one is
        in the table exactly once, in order."""
        sid = self.create()
        results = []          # (n, returncode, stdout, seconds)
        stop = threading.Event()

        def loop():
            n = 0
            while not stop.is_set():
                t = time.monotonic()
                cp = self.exec(sid, 'echo', str(n), opts=('--json',))
                try:
                    out = json.loads(cp.stdout)['stdout']
                except (ValueError, KeyError):
                    out = None
                results.append((n, cp.returncode, out, time.monotonic() - t))
                n += 1

        thread = threading.Thread(target=loop)
        thread.start()
        try:
            time.sleep(2)
            before = len(results)
            self.db.kill()                 # SIGKILL, by pid: a crash, not a shutdown
            down_at = time.monotonic()
            time.sleep(5)
            during = len(results)
            S.start_mariadb()
            up_at = time.monotonic()
            time.sleep(2)
        finally:
            stop.set()
            thread.join(timeout=120)
        self.assertFalse(thread.is_alive())

        failed = [r for r in results if r[1] != 0 or r[2] != f'{r[0]}\n']
        self.assertEqual(failed, [], 'execs failed while MariaDB was away')
        self.assertGreater(during - before, 5, f'only {during - before} execs ran in 5 s without MariaDB')
        normal = [r[3] for r in results[:before]] or [r[3] for r in results]
        outage = [r[3] for r in results[before:during]]
        med_normal, med_outage = statistics.median(normal), statistics.median(outage)
        self.assertLess(med_outage, med_normal * 1.5 + 0.05,
                        f'execs slowed down without MariaDB: median {med_outage:.3f}s vs {med_normal:.3f}s')
        self.assertLess(max(outage), 5, f'an exec stalled for {max(outage):.1f}s during the outage')
        print(f'\n  outage: {len(results)} execs, {during - before} while mariadbd was down '
              f'({up_at - down_at:.1f}s); median {med_normal * 1000:.0f} ms before, '
              f'{med_outage * 1000:.0f} ms during, max {max(outage) * 1000:.0f} ms', file=sys.stderr)

        rows = self.rows(sid, timeout=90, n=len(results))
        self.assertEqual(len(rows), len(results), 'executions missing or doubled in MariaDB')
        outputs = [bytes.fromhex(r['HEX(stdout_excerpt)']).decode() for r in rows]
        self.assertEqual(outputs, [f'{n}\n' for n in range(len(results))], 'not each exactly once, in order')
        starts = [int(r['started_usec']) for r in rows]
        self.assertEqual(starts, sorted(starts))
        self.assertEqual(self.db.sql(f"SELECT COUNT(*), COUNT(DISTINCT exec_id) FROM executions "
                                     f"WHERE sandbox_id = '{sid}'"), [[str(len(results))] * 2])


class WithoutMariaDB(Base):
    """No MariaDB configured: the spool is the store, and history reads it."""

    @classmethod
    def setUpClass(cls):
        S.configure_daemon('[Recording]\nSpoolDirectory=/run/sandboxd-test-state/spool-only\n')

    def test_history_from_spool(self):
        sid = self.create()
        for word in ('one', 'two', 'three'):
            self.ok(self.exec(sid, 'echo', word))
        cp = self.exec(sid, 'sh', '-c', 'exit 7')
        self.assertEqual(cp.returncode, 7)

        cp = self.ok(self.ctl('history', sid))
        lines = cp.stdout.splitlines()
        self.assertRegex(lines[0], r'^TIME\s+SANDBOX\s+EXEC\s+EXIT\s+DURATION\s+DISK\s+COMMAND')
        body = [l for l in lines[1:] if sid in l]
        self.assertEqual(len(body), 4, cp.stdout)
        self.assertIn('echo one', body[0])      # oldest first
        self.assertIn("sh -c 'exit 7'", body[3])
        self.assertRegex(body[3], r'\s7\s')

        cp = self.ok(self.ctl('history', sid, '--json'))
        data = json.loads(cp.stdout)
        self.assertEqual([d['argv'] for d in data],
                         [['echo', 'one'], ['echo', 'two'], ['echo', 'three'], ['sh', '-c', 'exit 7']])
        self.assertEqual(data[3]['exit_status'], 7)
        self.assertTrue(all(d['sandbox'] == sid and d['caller'] == 0 for d in data))

        cp = self.ok(self.ctl('history', sid, '--json', '--limit', '2'))
        self.assertEqual([d['argv'][-1] for d in json.loads(cp.stdout)], ['three', 'exit 7'])
        cp = self.ok(self.ctl('history', sid, '--json', '--since', '@' + str(int(time.time()) + 60)))
        self.assertEqual(json.loads(cp.stdout), [])
        cp = self.ok(self.ctl('history', '--json', '--since', '10min'))
        self.assertGreaterEqual(len([d for d in json.loads(cp.stdout) if d['sandbox'] == sid]), 4)

        # The spool outlives sandboxd.
        S.configure_daemon('[Recording]\nSpoolDirectory=/run/sandboxd-test-state/spool-only\n')
        cp = self.ok(self.ctl('history', sid, '--json'))
        self.assertEqual(len(json.loads(cp.stdout)), 4)

    def test_list_executions_authorization(self):
        sid = self.create()
        self.ok(self.exec(sid, 'true'))
        # root sees it; someone else, without "manage", sees only their own: none.
        cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                     'ListExecutions', 'a{sv}', '1', 'SandboxId', 's', sid)
        self.assertIsNone(error, cp.stderr)
        self.assertEqual(len(data[0]), 1)
        self.assertEqual(data[0][0][0], sid)
        cp = S.run(['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups',
                    S.paths.sandboxctl, 'history', '--json'])
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual([d for d in json.loads(cp.stdout) if d['sandbox'] == sid], [])

        cp, _data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                      'ListExecutions', 'a{sv}', '1', 'Bogus', 's', 'x')
        self.assertEqual(error, 'io.sandboxd.Sandbox1.InvalidOption')

    def test_recording_off(self):
        S.configure_daemon('[Recording]\nRecord=no\n')
        try:
            cp = self.ok(self.ctl('run', '--', 'echo', 'still-runs'))
            self.assertEqual(cp.stdout, 'still-runs\n')
            cp = self.ctl('history')
            self.assertNotEqual(cp.returncode, 0)
            self.assertIn('off', cp.stderr)
        finally:
            S.configure_daemon('[Recording]\nSpoolDirectory=/run/sandboxd-test-state/spool-only\n')


def exec_line(seq, sid, exec_id, owner, caller, ended, argv, cwd='', exit_status=0):
    """One exec record as the spool holds it (recorder-spool.c, spool_format_exec())."""
    return json.dumps({
        'seq': seq, 'type': 'exec', 'time': ended, 'argv': argv, 'sandbox': sid, 'exec': exec_id,
        'owner': owner, 'caller': caller, 'cwd': cwd, 'background': False, 'started': ended - 1000,
        'ended': ended, 'exit_status': exit_status, 'exit_code': exit_status, 'signal': 0, 'timed_out': False,
        'oom_killed': False, 'truncated': False, 'cpu_usec': 7, 'cgroup_cpu_nsec': 8000, 'memory_peak': MiB,
        'stdout_bytes': 3, 'stderr_bytes': 0, 'stdout': '6f6b0a', 'stderr': ''},
        separators=(',', ':')).encode() + b'\n'


class WithBigSpool(Base):
    """A spool larger than ListExecutions reads (RECORDER_LIST_SCAN_MAX, 16 MiB), written
    before sandboxd starts: the query reads it off the event loop, and answers as before."""

    SPOOL = '/run/sandboxd-test-state/spool-big'
    BASE = 1700000000 * 10**6      # µs; the recent execs are one second apart from here
    KINDS = (('big-a', 1000, 1000), ('big-b', 2000, 2000), ('big-c', 0, 65534))  # sandbox, owner, caller
    N_RECENT = 180

    @classmethod
    def setUpClass(cls):
        # The oldest record, then some 20 MiB of someone else's, then N_RECENT in three
        # sandboxes: the newest ones, which every filter below finds.
        cls.recent = []
        lines = [exec_line(1, 'big-old', 1, 0, 0, cls.BASE - 10**9, ['echo', 'old'])]
        filler = ['sh', '-c', 'echo ' + 'x' * 300]
        for i in range(45000):
            lines.append(exec_line(len(lines) + 1, 'filler', i + 1, 3000, 3000, cls.BASE - 10**8 + i, filler))
        for i in range(cls.N_RECENT):
            sid, owner, caller = cls.KINDS[i % 3]
            e = {'sandbox': sid, 'exec': i // 3 + 1, 'owner': owner, 'caller': caller,
                 'ended': cls.BASE + i * 10**6, 'argv': ['echo', str(i)], 'exit_status': i % 7}
            cls.recent.append(e)
            lines.append(exec_line(len(lines) + 1, sid, e['exec'], owner, caller, e['ended'], e['argv'],
                                   cwd='/w/@', exit_status=e['exit_status']))
        # Bytes that are not UTF-8 go through the spool verbatim; the reply shows U+FFFD.
        lines[-1] = lines[-1].replace(b'/w/@', b'/w/\xff')
        data = b''.join(lines)
        assert len(data) > 20 * MiB, len(data)
        os.makedirs(S.path(cls.SPOOL), mode=0o700, exist_ok=True)
        with open(S.path(cls.SPOOL + '/records.jsonl'), 'wb') as f:
            f.write(data)
        S.configure_daemon(f'[Recording]\nSpoolDirectory={cls.SPOOL}\n')

    @classmethod
    def tearDownClass(cls):
        S.configure_daemon(None)
        shutil.rmtree(S.path(cls.SPOOL), ignore_errors=True)

    def list_executions(self, *filter_args):
        n = len(filter_args) // 3
        cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                     'ListExecutions', 'a{sv}', str(n), *filter_args)
        self.assertIsNone(error, cp.stderr)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        return data[0]

    def expect(self, match, limit=100):
        """(sandbox, exec id) of the recent execs that match, newest first."""
        return [(e['sandbox'], e['exec']) for e in reversed(self.recent) if match(e)][:limit]

    def test_filters(self):
        ids = lambda rows: [(r[0], r[1]) for r in rows]  # noqa: E731

        self.assertEqual(ids(self.list_executions()), self.expect(lambda e: True))
        self.assertEqual(ids(self.list_executions('SandboxId', 's', 'big-a')),
                         self.expect(lambda e: e['sandbox'] == 'big-a'))
        self.assertEqual(ids(self.list_executions('Owner', 'u', '2000')),
                         self.expect(lambda e: e['owner'] == 2000))
        since = self.recent[150]['ended'] - 1000   # started at or after the 151st
        self.assertEqual(ids(self.list_executions('Since', 't', str(since), 'Limit', 'u', '1000')),
                         self.expect(lambda e: e['ended'] - 1000 >= since))
        self.assertEqual(len(self.expect(lambda e: e['ended'] - 1000 >= since)), 30)
        self.assertEqual(ids(self.list_executions('SandboxId', 's', 'big-b', 'Limit', 'u', '5')),
                         self.expect(lambda e: e['sandbox'] == 'big-b', limit=5))
        # Past the newest 16 MiB: not read (MariaDB has it).
        self.assertEqual(self.list_executions('SandboxId', 's', 'big-old'), [])

        # The newest, field by field.
        e = self.recent[-1]
        self.assertEqual(self.list_executions('Limit', 'u', '1'),
                         [[e['sandbox'], e['exec'], e['owner'], e['caller'], e['argv'], '/w/\ufffd',
                           e['ended'] - 1000, e['ended'], e['exit_status'], e['exit_status'], 0, False, False,
                           7, 8000, MiB, 3, 0]])

        # Without "manage": what one started in someone's sandbox, nothing else.
        cp = S.run(['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups',
                    S.paths.sandboxctl, 'history', '--json'])
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual([(d['sandbox'], d['exec']) for d in reversed(json.loads(cp.stdout))],
                         self.expect(lambda e: e['caller'] == 65534))

    def test_loop_not_blocked(self):
        """While ListExecutions reads the whole 16 MiB (no record matches), sandboxd answers
        other calls: ListTemplates, on a second connection, returns again and again before
        ListExecutions does. (With the scan on the event loop, none would.)"""
        out = busclient.run_script(S, r"""
import threading
def manager_on_own_connection():
    return dbus.Interface(dbus.SystemBus(private=True).get_object(BUS_NAME, MANAGER_PATH), MANAGER_IFACE)
lister, other = manager_on_own_connection(), manager_on_own_connection()
call(other, 'ListTemplates')
listed = {}
thread = threading.Thread(target=lambda: listed.update(
    call(lister, 'ListExecutions', opts(SandboxId='no-such-sandbox'), timeout=120)))
thread.start()
time.sleep(0.05)   # ListExecutions is on its way first
during = []
while not listed:
    r = call(other, 'ListTemplates')
    if not listed:
        during.append(r)
thread.join()
emit({'listed': listed, 'during': during})
""")
        listed, during = out['listed'], out['during']
        self.assertEqual(listed.get('ok'), [], listed)
        self.assertGreaterEqual(len(during), 3, f'sandboxd did not answer while ListExecutions ran: {out}')
        for r in during:
            self.assertIn('shell', [t[0] for t in r.get('ok', [])], r)
        print(f'\n  ListExecutions over 16 MiB took {listed["seconds"] * 1000:.0f} ms; meanwhile '
              f'{len(during)} ListTemplates, the slowest {max(r["seconds"] for r in during) * 1000:.0f} ms',
              file=sys.stderr)


    def test_too_many_queries(self):
        """Twelve at once: four are answered at a time, the others are refused with Busy
        (the first four each read 16 MiB, the rest arrive within milliseconds)."""
        out = busclient.run_script(S, r"""
import threading
managers = [dbus.Interface(dbus.SystemBus(private=True).get_object(BUS_NAME, MANAGER_PATH), MANAGER_IFACE)
            for _ in range(12)]
results = [None] * len(managers)
def ask(i):
    results[i] = call(managers[i], 'ListExecutions', opts(SandboxId='no-such-sandbox'), timeout=120)
threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(managers))]
for t in threads:
    t.start()
for t in threads:
    t.join()
emit({'results': results})
""")['results']
        ok = [r for r in out if 'ok' in r]
        busy = [r for r in out if r.get('error') == 'io.sandboxd.Sandbox1.Busy']
        self.assertEqual(len(ok) + len(busy), len(out), out)
        self.assertTrue(all(r['ok'] == [] for r in ok), ok)
        self.assertGreaterEqual(len(ok), 4, out)
        self.assertGreaterEqual(len(busy), 1, out)
        self.assertIn('try again', busy[0]['message'])
        # Refused, not queued: sandboxd answers a later call.
        self.assertEqual(self.list_executions('SandboxId', 's', 'big-a', 'Limit', 'u', '1'),
                         [self.list_executions('Limit', 'u', '3')[2]])

    def test_stop_while_listing(self):
        """sandboxd stopped while a query reads the spool: it exits cleanly (under ASan: no
        leak, no use after free), and the caller gets the answer or NoReply, not a hang."""
        self.addCleanup(S.start_daemon)
        out = busclient.run_script(S, r"""
import subprocess, threading
lister = manager()
listed = {}
thread = threading.Thread(target=lambda: listed.update(
    call(lister, 'ListExecutions', opts(SandboxId='no-such-sandbox'), timeout=120)))
thread.start()
time.sleep(0.05)
stop = subprocess.run(['systemctl', 'stop', 'sandboxd.service'], capture_output=True, text=True)
thread.join()
emit({'listed': listed, 'stop': [stop.returncode, stop.stderr]})
""")
        self.assertEqual(out['stop'][0], 0, out)
        listed = out['listed']
        self.assertTrue(listed.get('ok') == [] or listed.get('error') == 'org.freedesktop.DBus.Error.NoReply',
                        listed)
        status = S.show('sandboxd.service', 'Result', 'ExecMainStatus')
        self.assertEqual((status['Result'], status['ExecMainStatus']), ('success', '0'),
                         S.journal(units=('sandboxd.service',), since=time.time() - 60))
        print(f'\n  stopped while listing: {listed.get("error") or "answered"}', file=sys.stderr)


if __name__ == '__main__':
    unittest.main()
