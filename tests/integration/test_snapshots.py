#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Filesystem snapshots (sandboxd-api(7), SNAPSHOTS) against the real daemon:

  - Snapshot -> CreateSandbox FromSnapshot: a tree with a symlink, a hard link, a FIFO, a
    sparse file, mode bits, mtimes and a non-UTF-8 name comes back byte-identical;
  - a symlink to /etc/shadow planted in /work is stored and restored as a link, and the
    host's file is never read or written;
  - Fork: both sandboxes diverge; Hibernate -> restart sandboxd -> Wake: the files are
    back under the same id and name;
  - bombs: a 1 TB sparse file, 10^5 files, a highly compressible file: bounded by DiskMax
    and the quota, a clear error, nothing half-written in the snapshot directory;
  - another owner (uid 65534) and another tenant cannot list, restore or remove them.
"""

import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, '..', 'security'))
import harness  # noqa: E402
import polkitutil  # noqa: E402
import secutil  # noqa: E402
from secutil import NOBODY, vcall  # noqa: E402

S = None
POLKIT = None
MiB = 1024 * 1024
SNAPDIR = '/run/sandboxd-test-state/snapshots-test'
CONFIG = f'[Snapshots]\nDirectory={SNAPDIR}\nMaxPerOwner=6\nMaxBytesPerOwner=64M\n'

# Run inside a sandbox: every entry of /work (names as bytes, hex), what lstat says of it
# (type, mode, size, mtime, link count, blocks for regular files), a hash of a regular
# file's contents and a link's target.
MANIFEST = r'''
import hashlib, os, stat, sys
out = []
root = b"/work"
for d, dirs, files in os.walk(root):
    dirs.sort()
    for n in sorted(dirs + files):
        p = os.path.join(d, n)
        st = os.lstat(p)
        e = [os.path.relpath(p, root).hex(), oct(st.st_mode), st.st_mtime_ns]
        if stat.S_ISREG(st.st_mode):
            h = hashlib.sha256()
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            e += [st.st_size, st.st_nlink, h.hexdigest(), st.st_blocks * 512 < st.st_size]
        elif stat.S_ISLNK(st.st_mode):
            e += [os.readlink(p).hex()]
        out.append(e)
print(repr(out))
'''

# Builds the tree MANIFEST describes.
BUILD = r'''
import os
os.chdir("/work")
os.makedirs("dir/sub", mode=0o750)
with open("dir/sub/data.bin", "wb") as f:
    f.write(os.urandom(300000))
os.chmod("dir/sub/data.bin", 0o640)
with open("exec.sh", "w") as f:
    f.write("#!/bin/sh\necho hi\n")
os.chmod("exec.sh", 0o751)
os.link("dir/sub/data.bin", "hardlink.bin")
os.symlink("dir/sub/data.bin", "rel-link")
os.symlink("/nonexistent/target", "dangling")
os.mkfifo("fifo", 0o600)
with open("sparse", "wb") as f:
    f.seek(50 * 1024 * 1024)
    f.write(b"end")
with open(b"name-\xff\xfe-not-utf8", "wb") as f:
    f.write(b"bytes")
os.mkdir("empty-dir", 0o700)
os.utime("exec.sh", ns=(1000000000123456789, 1000000000123456789))
os.utime("dir/sub", ns=(1200000000000000000, 1200000000000000000))
os.utime(b"name-\xff\xfe-not-utf8", ns=(900000000000000000, 900000000000000000))
'''


def setUpModule():
    global S, POLKIT
    POLKIT = polkitutil.setup_module()
    S = secutil.S
    S.configure_daemon(CONFIG)


def tearDownModule():
    try:
        if S is not None:
            S.configure_daemon(None)
            S.run(['rm', '-rf', '--', SNAPDIR])
    finally:
        polkitutil.teardown_module(POLKIT)


def vl(method, parameters=None, timeout=180):
    """One varlink call as root: (replies, error name, error parameters)."""
    return S.varlink_call(method, parameters, timeout=timeout)


def vl_ok(test, method, parameters=None, timeout=180):
    replies, error, params = vl(method, parameters, timeout=timeout)
    test.assertIsNone(error, f'{method}({parameters}) failed: {error} {params}')
    return replies[0]


def short(name):
    return name.rsplit('.', 1)[-1] if name else name


class SnapshotTest(harness.SandboxTestCase):

    def sandbox(self, **options):
        res = vl_ok(self, 'CreateSandbox', {'template': 'shell', 'options': options})
        sid = res['id']
        self.addCleanup(self.destroy_quietly, S, sid)
        return sid

    def snapshot(self, sid, **options):
        snap = vl_ok(self, 'Snapshot', {'id': sid, 'options': options})['snapshot']
        self.addCleanup(vl, 'RemoveSnapshot', {'snapshot': snap['id']})
        return snap

    def py(self, sid, code, *args):
        return self.ok(self.exec(sid, 'python3', '-c', code, *args), f'python3 in {sid}').stdout

    def sh(self, sid, script):
        return self.ok(self.exec(sid, 'sh', '-c', script), f'sh in {sid}: {script}').stdout

    def snapdir_files(self):
        return sorted(os.listdir(S.path(SNAPDIR)))

    def test_roundtrip_byte_identical(self):
        src = self.sandbox()
        self.py(src, BUILD)
        before = self.py(src, MANIFEST)
        snap = self.snapshot(src)
        self.assertEqual(snap['source'], src)
        self.assertGreater(snap['size'], 0)
        self.assertLess(snap['size'], 2 * MiB, 'the sparse file and the hole must not be stored')
        self.assertGreaterEqual(snap['contentSize'], 50 * MiB)
        # Owner-only, in the directory of sandboxd.conf.
        st = os.stat(S.path(SNAPDIR))
        self.assertEqual((st.st_mode & 0o7777, st.st_uid), (0o700, 0))
        st = os.stat(os.path.join(S.path(SNAPDIR), snap['id'] + '.json'))
        self.assertEqual(st.st_mode & 0o7777, 0o600)
        self.assertIn(f'{snap["id"]}.json', self.snapdir_files())
        self.assertIn(f'{snap["id"]}.tar.zst', self.snapdir_files())

        dst = self.sandbox(FromSnapshot=snap['id'])
        after = self.py(dst, MANIFEST)
        self.assertEqual(eval(before), eval(after))
        kinds = {bytes.fromhex(e[0]): int(e[1], 8) >> 12 for e in eval(after)}
        self.assertEqual(kinds[b'fifo'], 0o01)   # S_IFIFO
        self.assertEqual(kinds[b'rel-link'], 0o12)  # S_IFLNK
        self.assertIn(b'name-\xff\xfe-not-utf8', kinds)
        # The source is untouched and still running.
        self.assertEqual(self.py(src, MANIFEST), before)

    def test_shadow_symlink_stays_a_link(self):
        src = self.sandbox()
        with open('/etc/shadow', 'rb') as f:
            shadow = hashlib.sha256(f.read()).hexdigest()
        shadow_mtime = os.stat('/etc/shadow').st_mtime_ns
        self.sh(src, 'ln -s /etc/shadow /work/shadow && ln -s ../../../../etc/shadow /work/up '
                     '&& ln /work/shadow /work/shadow-hard 2>/dev/null; true')
        snap = self.snapshot(src)
        dst = self.sandbox(FromSnapshot=snap['id'])
        out = self.sh(dst, 'readlink /work/shadow; readlink /work/up; cat /work/shadow 2>&1 | head -c 200; echo')
        lines = out.splitlines()
        self.assertEqual(lines[0], '/etc/shadow')
        self.assertEqual(lines[1], '../../../../etc/shadow')
        self.assertNotIn('root:', out, 'the host\'s /etc/shadow leaked into the sandbox')
        with open('/etc/shadow', 'rb') as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), shadow)
        self.assertEqual(os.stat('/etc/shadow').st_mtime_ns, shadow_mtime)

    def test_fork_diverges(self):
        src = self.sandbox(Name='fork-src')
        self.sh(src, 'echo one > /work/f')
        fork = vl_ok(self, 'Fork', {'id': src, 'options': {'Name': 'fork-child'}})['id']
        self.addCleanup(self.destroy_quietly, S, fork)
        self.assertNotEqual(fork, src)
        self.assertEqual(self.sh(fork, 'cat /work/f'), 'one\n')
        self.sh(src, 'echo src > /work/f; touch /work/only-src')
        self.sh(fork, 'echo fork > /work/f; touch /work/only-fork')
        self.assertEqual(self.sh(src, 'cat /work/f; ls /work'), 'src\nf\nonly-src\n')
        self.assertEqual(self.sh(fork, 'cat /work/f; ls /work'), 'fork\nf\nonly-fork\n')
        got = vl_ok(self, 'GetSandbox', {'id': 'fork-child'})['sandbox']
        self.assertEqual(got['id'], fork)
        # The fork's snapshot is gone once it is restored: nothing left to the quota.
        self.assertEqual([s for s in vl_ok(self, 'ListSnapshots')['snapshots'] if s['source'] == src], [])

    def test_fork_inherits_what_is_not_given(self):
        # Issue 27: a fork of a sandbox with Timeout 900 and IdleTimeout 600 lived forever.
        # Every CreateSandbox option not given is the source's (sandboxd-api(7), Fork).
        src = self.sandbox(MemoryMax=96 << 20, CPUQuotaPerSecUSec=300000, TasksMax=40, DiskMax=8 << 20,
                           Timeout=900, IdleTimeout=600, IdleAction='pause',
                           EgressAllow=['example.org', '*.example.net'], EgressDeny=['bad.example.org'])
        fork = vl_ok(self, 'Fork', {'id': src})['id']
        self.addCleanup(self.destroy_quietly, S, fork)
        want = vl_ok(self, 'GetSandbox', {'id': src})['sandbox']
        got = vl_ok(self, 'GetSandbox', {'id': fork})['sandbox']
        for key in ('memoryMax', 'cpuQuotaPerSecUSec', 'tasksMax', 'diskMax', 'timeout', 'idleTimeout',
                    'egressAllow', 'egressDeny', 'template', 'tenant'):
            self.assertEqual(got[key], want[key], key)
        self.assertEqual((got['timeout'], got['idleTimeout']), (900, 600))
        self.assertGreater(got['deadline'], 0, 'the fork has a lifetime')
        self.assertEqual(got['egressAllow'], ['example.org', '*.example.net'])
        self.assertEqual(S.show(f'sandbox-{fork}.scope', 'MemoryMax')['MemoryMax'], str(96 << 20))

        # What is given wins, 0 included (no timeout); IdleAction, seen in what the idle
        # timeout does: the source's "pause" pauses the fork instead of destroying it.
        fork2 = vl_ok(self, 'Fork', {'id': src, 'options': {'Timeout': 0, 'IdleTimeout': 1,
                                                            'EgressAllow': []}})['id']
        self.addCleanup(self.destroy_quietly, S, fork2)
        got = vl_ok(self, 'GetSandbox', {'id': fork2})['sandbox']
        self.assertEqual((got['timeout'], got['idleTimeout'], got['egressAllow']), (0, 1, []))
        self.assertEqual(got['egressDeny'], ['bad.example.org'])
        deadline = time.monotonic() + 20
        while vl_ok(self, 'GetSandbox', {'id': fork2})['sandbox']['state'] != 'paused':
            self.assertLess(time.monotonic(), deadline, 'the fork was not paused by its idle timeout')
            time.sleep(0.2)

    def test_hibernate_restart_wake(self):
        # In memory: a snapshot archive. On disk, Hibernate keeps the workspace instead
        # (test_workspaces).
        sid = vl_ok(self, 'CreateSandbox', {'template': 'shell',
                                            'options': {'Name': 'sleeper', 'Storage': 'tmpfs',
                                                        'Labels': {'team': 'night'}}})['id']
        self.addCleanup(self.destroy_quietly, S, sid)
        self.sh(sid, 'mkdir -p /work/a && echo dreams > /work/a/f && chmod 600 /work/a/f')
        snap = vl_ok(self, 'Hibernate', {'id': sid})['snapshot']
        self.addCleanup(vl, 'RemoveSnapshot', {'snapshot': snap['id']})
        self.assertTrue(snap['hibernated'])
        self.assertEqual(snap['name'], 'sleeper')
        _, error, _ = vl('GetSandbox', {'id': sid})
        self.assertEqual(short(error), 'NoSuchSandbox')

        self.assertEqual(S.systemctl('stop', 'sandboxd.service', timeout=90).returncode, 0)
        S.start_daemon()  # a new sandboxd: the snapshot is on disk, nothing in memory
        woken = vl_ok(self, 'Wake', {'id': 'sleeper'})['id']
        self.assertEqual(woken, sid)
        got = vl_ok(self, 'GetSandbox', {'id': 'sleeper'})['sandbox']
        self.assertEqual(got['id'], sid)
        self.assertEqual(got['labels'], {'team': 'night'})  # read from the snapshot's record
        self.assertEqual(self.sh(sid, 'cat /work/a/f; stat -c %a /work/a/f'), 'dreams\n600\n')
        # Woken: its snapshot is used up; a second Wake finds nothing to wake.
        _, error, _ = vl('Wake', {'id': sid})
        self.assertEqual(short(error), 'NoSuchSandbox')
        self.assertNotIn(snap['id'], [s['id'] for s in vl_ok(self, 'ListSnapshots')['snapshots']])

    def test_paused_sandbox(self):
        sid = self.sandbox()
        self.sh(sid, 'echo paused > /work/p')
        vl_ok(self, 'Pause', {'id': sid})
        snap = self.snapshot(sid)
        self.assertEqual(vl_ok(self, 'GetSandbox', {'id': sid})['sandbox']['state'], 'paused')
        dst = self.sandbox(FromSnapshot=snap['id'])
        self.assertEqual(self.sh(dst, 'cat /work/p'), 'paused\n')

    def assert_nothing_half_written(self):
        for name in self.snapdir_files():
            self.assertFalse(name.endswith('.partial'), f'half-written {name} left in {SNAPDIR}')

    def test_bombs(self):
        # A 1 TB sparse file: more than DiskMax, refused while it is taken. In memory: on disk
        # (test_workspaces) the 100,000 files below would exceed DiskMax by their metadata.
        sid = self.sandbox(DiskMax=64 * MiB, Storage='tmpfs')
        self.sh(sid, 'truncate -s 1T /work/huge')
        t0 = time.monotonic()
        _, error, params = vl('Snapshot', {'id': sid})
        self.assertEqual(short(error), 'SnapshotTooLarge', params)
        self.assertIn('DiskMax', params['message'])
        self.assertLess(time.monotonic() - t0, 30)
        self.assert_nothing_half_written()

        # Highly compressible: 48 MiB of zeros fit the source's DiskMax and compress to
        # almost nothing; a sandbox with a smaller DiskMax is refused before it starts.
        self.sh(sid, 'rm /work/huge; head -c 48M /dev/zero > /work/zeros; mkdir /work/many; cd /work/many; '
                     'seq 1 100000 | xargs touch')
        snap = self.snapshot(sid)
        self.assertLess(snap['size'], MiB)
        before = {s['id'] for s in vl_ok(self, 'ListSnapshots')['snapshots']}
        _, error, params = vl('CreateSandbox', {'template': 'shell',
                                                'options': {'FromSnapshot': snap['id'], 'DiskMax': 16 * MiB}})
        self.assertEqual(short(error), 'SnapshotTooLarge', params)
        self.assertIn(snap['id'], params['message'])
        dst = self.sandbox(FromSnapshot=snap['id'], DiskMax=64 * MiB, Storage='tmpfs')
        self.assertEqual(self.sh(dst, 'ls /work/many | wc -l; stat -c %s /work/zeros'), '100000\n50331648\n')
        self.assertEqual(before, {s['id'] for s in vl_ok(self, 'ListSnapshots')['snapshots']})

        # The quota: incompressible data beyond MaxBytesPerOwner= (64M) is cut off, and
        # nothing of it stays.
        big = self.sandbox(DiskMax=200 * MiB)
        self.sh(big, 'head -c 80M /dev/urandom > /work/random')
        # A process running meanwhile: stopped while the snapshot is taken, continued after,
        # also when the snapshot is cut off.
        ticker = 'while :; do date +%s%N > /tmp/t.new; mv /tmp/t.new /tmp/tick; sleep 0.05; done'
        self.ok(self.ctl('start', big, '--', 'sh', '-c', ticker))
        _, error, params = vl('Snapshot', {'id': big})
        self.assertEqual(short(error), 'QuotaExceeded', params)
        self.assert_nothing_half_written()
        self.assertEqual(before, {s['id'] for s in vl_ok(self, 'ListSnapshots')['snapshots']})
        # The sandbox runs on, its processes continued.
        self.assertEqual(self.sh(big, 'echo alive'), 'alive\n')
        t1 = self.sh(big, 'cat /tmp/tick')
        time.sleep(0.5)
        self.assertNotEqual(self.sh(big, 'cat /tmp/tick'), t1, 'the background process stayed stopped')

    def test_quota_count(self):
        sid = self.sandbox()
        have = len([s for s in vl_ok(self, 'ListSnapshots')['snapshots'] if s['owner'] == 0])
        for _ in range(6 - have):
            self.snapshot(sid)
        _, error, params = vl('Snapshot', {'id': sid})
        self.assertEqual(short(error), 'QuotaExceeded', params)
        self.assertIn('quota', params['message'])

    def test_quota_count_concurrent(self):
        """Two snapshots taken at once with room for one: each passes the check at its start,
        the quota is checked again as each is stored, and only one is."""
        a, b = self.sandbox(), self.sandbox()
        for sid in (a, b):   # a few MiB that do not compress: both are still streaming together
            self.sh(sid, 'head -c 6M /dev/urandom > /work/noise')
        have = len([s for s in vl_ok(self, 'ListSnapshots')['snapshots'] if s['owner'] == 0])
        for _ in range(5 - have):
            self.snapshot(a)
        results = {}

        def take(sid):
            results[sid] = vl('Snapshot', {'id': sid})

        threads = [threading.Thread(target=take, args=(sid,)) for sid in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        taken = [r[0][0]['snapshot']['id'] for r in results.values() if r[1] is None]
        for snap in taken:
            self.addCleanup(vl, 'RemoveSnapshot', {'snapshot': snap})
        errors = [short(r[1]) for r in results.values() if r[1] is not None]
        # Either both passed the start check and the second to be stored was refused, or the
        # second started after the first was stored and was refused at once: one, never two.
        self.assertEqual((len(taken), errors), (1, ['QuotaExceeded']), results)
        mine = [s for s in vl_ok(self, 'ListSnapshots')['snapshots'] if s['owner'] == 0]
        self.assertEqual(len(mine), 6)
        self.assertFalse([f for f in self.snapdir_files() if f.endswith('.partial')], self.snapdir_files())

    def test_other_owner_and_tenant(self):
        sid = self.sandbox()
        self.sh(sid, 'echo secret > /work/s')
        snap = self.snapshot(sid)
        # uid 65534, allowed to create sandboxes of its own.
        POLKIT.set_rules(polkitutil.grant_to_nobody('create'))
        self.addCleanup(POLKIT.set_rules, None)
        res = secutil.varlink([vcall('ListSnapshots'),
                               vcall('CreateSandbox', template='shell', options={'FromSnapshot': snap['id']}),
                               vcall('RemoveSnapshot', snapshot=snap['id']),
                               vcall('Wake', id=sid)], uid=NOBODY)
        self.assertEqual(res[0]['replies'][0]['snapshots'], [], res[0])
        self.assertEqual(short(res[1].get('error')), 'NoSuchSnapshot', res[1])
        self.assertIn(short(res[2].get('error')), ('AccessDenied', 'InteractiveAuthorizationRequired'), res[2])
        self.assertEqual(short(res[3].get('error')), 'NoSuchSandbox', res[3])
        self.assertIn(snap['id'], [s['id'] for s in vl_ok(self, 'ListSnapshots')['snapshots']])

        # Tenants: a snapshot of tenant A's sandbox is not there for a caller acting for B.
        res = secutil.varlink([vcall('ActForTenant', tenant='snap-a'),
                               vcall('CreateSandbox', template='shell')])
        a_sid = res[1]['replies'][0]['id']
        self.addCleanup(self.destroy_quietly, S, a_sid)
        res = secutil.varlink([vcall('ActForTenant', tenant='snap-a'), vcall('Snapshot', id=a_sid)])
        a_snap = res[1]['replies'][0]['snapshot']
        self.addCleanup(vl, 'RemoveSnapshot', {'snapshot': a_snap['id']})
        self.assertEqual(a_snap['tenant'], 'snap-a')
        res = secutil.varlink([vcall('ActForTenant', tenant='snap-b'),
                               vcall('ListSnapshots'),
                               vcall('CreateSandbox', template='shell', options={'FromSnapshot': a_snap['id']}),
                               vcall('RemoveSnapshot', snapshot=a_snap['id'])])
        self.assertEqual(res[1]['replies'][0]['snapshots'], [], res[1])
        self.assertEqual(short(res[2].get('error')), 'NoSuchSnapshot', res[2])
        self.assertEqual(short(res[3].get('error')), 'NoSuchSnapshot', res[3])
        res = secutil.varlink([vcall('ActForTenant', tenant='snap-a'), vcall('ListSnapshots')])
        self.assertEqual([s['id'] for s in res[1]['replies'][0]['snapshots']], [a_snap['id']])

    def wait_for(self, fn, what, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            value = fn()
            if value:
                return value
            if time.monotonic() > deadline:
                self.fail(f'timed out waiting for {what}')
            time.sleep(0.2)

    def test_idle_actions(self):
        sleeper = self.sandbox(Name='idle-sleeper', IdleTimeout=1, IdleAction='hibernate', Storage='tmpfs')
        self.sh(sleeper, 'echo idle > /work/i')
        pauser = self.sandbox(IdleTimeout=1, IdleAction='pause')
        self.assertEqual(vl_ok(self, 'GetSandbox', {'id': pauser})['sandbox']['state'], 'running')

        def hibernated():
            return [s for s in vl_ok(self, 'ListSnapshots')['snapshots'] if s['source'] == sleeper]
        snaps = self.wait_for(hibernated, 'the idle sandbox to hibernate')
        self.addCleanup(vl, 'RemoveSnapshot', {'snapshot': snaps[0]['id']})
        self.assertTrue(snaps[0]['hibernated'])
        self.wait_for(lambda: short(vl('GetSandbox', {'id': sleeper})[1]) == 'NoSuchSandbox', 'it to be gone')
        self.wait_for(lambda: vl_ok(self, 'GetSandbox', {'id': pauser})['sandbox']['state'] == 'paused',
                      'the other to pause')

        # sandboxctl wakes it by name; the same id answers, with its files and idle action.
        cp = self.ok(self.ctl('wake', 'idle-sleeper'))
        self.assertEqual(cp.stdout.strip(), sleeper)
        self.assertEqual(self.sh(sleeper, 'cat /work/i'), 'idle\n')

    def test_dbus_and_sandboxctl(self):
        sid = self.create('--name', 'ctl-src')
        self.sh(sid, 'echo ctl > /work/c; echo t > /tmp/t')
        cp = self.ok(self.ctl('snapshot', '--tmp', sid))
        snap = cp.stdout.strip()
        self.addCleanup(vl, 'RemoveSnapshot', {'snapshot': snap})
        listed = json.loads(self.ok(self.ctl('snapshots', '--json')).stdout)
        mine = [s for s in listed if s['id'] == snap]
        self.assertEqual(len(mine), 1, listed)
        self.assertTrue(mine[0]['includes_tmp'])
        self.assertEqual(mine[0]['source'], sid)
        self.assertIn(snap, self.ok(self.ctl('snapshots')).stdout)

        # D-Bus: the Manager's list and the Sandbox's methods, as busctl calls them.
        cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE, 'ListSnapshots')
        self.assertIsNone(error, cp.stderr)
        self.assertIn(snap, [e['Id']['data'] for e in data[0]])
        path = f'{harness.MANAGER_PATH}/sandbox/{sid}'
        cp, data, error = S.bus_call(harness.BUS_NAME, path, harness.SANDBOX_IFACE, 'Snapshot', 'a{sv}', '0')
        self.assertIsNone(error, cp.stderr)
        self.addCleanup(vl, 'RemoveSnapshot', {'snapshot': data[0]})
        cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                     'RemoveSnapshot', 's', data[0])
        self.assertIsNone(error, cp.stderr)
        cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                     'RemoveSnapshot', 's', '0123456789abcdef')
        self.assertEqual(error, 'io.sandboxd.Sandbox1.NoSuchSnapshot')

        # create --from-snapshot: /tmp came along too.
        dst = self.create('--from-snapshot', snap)
        self.assertEqual(self.sh(dst, 'cat /work/c /tmp/t'), 'ctl\nt\n')
        cp = self.ok(self.ctl('fork', sid, '--name', 'ctl-fork'))
        fork = cp.stdout.strip()
        self.addCleanup(self.destroy_quietly, S, fork)
        self.assertEqual(self.sh('ctl-fork', 'cat /work/c'), 'ctl\n')

        # hibernate and wake, through D-Bus's Wake.
        self.ok(self.ctl('hibernate', 'ctl-src'))
        cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE, 'Wake', 's',
                                     'ctl-src')
        self.assertIsNone(error, cp.stderr)
        self.assertEqual(data[0], sid)
        self.assertEqual(self.sh(sid, 'cat /work/c'), 'ctl\n')
        self.ok(self.ctl('snapshot-remove', snap))
        self.assertNotIn(snap, self.ok(self.ctl('snapshots')).stdout)

    def test_docker(self):
        if S.docker_unavailable:
            if harness.ci():
                self.fail(f'CI=true: Docker is not available in the test system: {S.docker_unavailable}')
            self.skipTest(S.docker_unavailable)
        src = vl_ok(self, 'CreateSandbox', {'template': harness.DOCKER_TEMPLATE})['id']
        self.addCleanup(self.destroy_quietly, S, src)
        self.sh(src, 'mkdir -p /work/d && echo docker > /work/d/f && ln -s d/f /work/l && ln -s /etc/shadow /work/s')
        snap = self.snapshot(src)
        # Into another container, and into a bwrap sandbox: the same stream.
        for template in (harness.DOCKER_TEMPLATE, 'shell'):
            dst = vl_ok(self, 'CreateSandbox', {'template': template, 'options': {'FromSnapshot': snap['id']}})['id']
            self.addCleanup(self.destroy_quietly, S, dst)
            self.assertEqual(self.sh(dst, 'cat /work/l; readlink /work/s'), 'docker\n/etc/shadow\n', template)
        fork = vl_ok(self, 'Fork', {'id': src})['id']
        self.addCleanup(self.destroy_quietly, S, fork)
        self.sh(fork, 'echo forked > /work/d/f')
        self.assertEqual(self.sh(src, 'cat /work/d/f'), 'docker\n')
        self.assertEqual(self.sh(fork, 'cat /work/d/f'), 'forked\n')

    def test_retention(self):
        # (A stopped sandboxd's sandboxes are not adopted: the sandbox comes after.)
        S.configure_daemon(CONFIG + 'Retention=2s\n')
        self.addCleanup(S.configure_daemon, CONFIG)
        sid = self.sandbox()
        snap = vl_ok(self, 'Snapshot', {'id': sid})['snapshot']['id']
        self.wait_for(lambda: snap not in [s['id'] for s in vl_ok(self, 'ListSnapshots')['snapshots']],
                      'Retention= to remove the snapshot', timeout=15)
        self.assertNotIn(f'{snap}.tar.zst', self.snapdir_files())


class RebootTest(harness.SystemTestCase):
    """Hibernate, restart sandboxd, kill the whole (test) system, boot a new one, Wake: the
    files are back under the same id and name. Both systems are cgroup-v2-only, where
    Pause freezes the unit: a frozen sandbox is thawed for its snapshot."""

    def boot(self, snapdir):
        try:
            system = harness.boot_extra(cgroup='unified')
        except harness.Unavailable as e:
            if harness.ci():
                raise
            raise unittest.SkipTest(str(e))
        # The snapshot directory outlives the system: a host directory both see, which the
        # unit (ProtectSystem=strict) may write.
        with open(system.path('/run/systemd/system/sandboxd.service.d/70-test-snapshots.conf'), 'w') as f:
            f.write(f'{harness.MARKER}\n[Service]\nReadWritePaths={snapdir}\n')
        system.configure_daemon(f'[Snapshots]\nDirectory={snapdir}/snapshots\n')
        return system

    def teardown_system(self, system):
        problems = system.teardown()
        self.assertEqual(problems, [], 'teardown found problems')

    def call(self, system, method, parameters=None):
        replies, error, params = system.varlink_call(method, parameters)
        self.assertIsNone(error, f'{method}({parameters}) failed: {error} {params}')
        return replies[0]

    def sh(self, system, sid, script):
        cp = system.sandboxctl('exec', sid, '--', 'sh', '-c', script, timeout=120)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        return cp.stdout

    def test_hibernate_reboot_wake(self):
        if S.mode == 'host':
            self.skipTest('PID 1 is systemd: no second system to boot here')
        snapdir = tempfile.mkdtemp(prefix='sandboxd-test-snapshots-', dir='/var/lib')
        self.addCleanup(shutil.rmtree, snapdir, True)

        first = self.boot(snapdir)
        try:
            # In memory: Hibernate takes an archive (on disk it keeps the workspace: test_workspaces).
            sid = self.call(first, 'CreateSandbox', {'template': 'shell',
                                                     'options': {'Name': 'rebooter', 'Storage': 'tmpfs'}})['id']
            self.sh(first, sid, 'echo "survives a reboot" > /work/r; mkfifo /work/p')
            self.call(first, 'Pause', {'id': sid})
            self.assertEqual(self.call(first, 'GetSandbox', {'id': sid})['sandbox']['state'], 'paused')
            snap = self.call(first, 'Hibernate', {'id': sid})['snapshot']
            self.assertTrue(snap['hibernated'])
            self.assertEqual(first.systemctl('restart', 'sandboxd.service', timeout=90).returncode, 0)
            listed = self.call(first, 'ListSnapshots')['snapshots']
            self.assertEqual([s['id'] for s in listed], [snap['id']])
        finally:
            self.teardown_system(first)  # the whole system killed, not shut down cleanly

        second = self.boot(snapdir)
        try:
            self.assertEqual(self.call(second, 'Wake', {'id': 'rebooter'})['id'], sid)
            got = self.call(second, 'GetSandbox', {'id': 'rebooter'})['sandbox']
            self.assertEqual((got['id'], got['name'], got['state']), (sid, 'rebooter', 'running'))
            self.assertEqual(self.sh(second, sid, 'cat /work/r; stat -c %F /work/p'),
                             'survives a reboot\nfifo\n')
            self.assertEqual(self.call(second, 'ListSnapshots')['snapshots'], [])
            self.assertEqual(second.sandboxctl('destroy', sid, timeout=120).returncode, 0)
        finally:
            self.teardown_system(second)


if __name__ == '__main__':
    unittest.main()
