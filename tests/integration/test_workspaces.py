#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 30's workspaces on disk, on a real systemd, bwrap and btrfs pool
(sandboxd-workspaces.service, a loop-backed image here): a sandbox's files live on disk
within its DiskMax, not in its memory; what is written past DiskMax fails with "Disk quota
exceeded", never with an OOM kill; inodes are bounded by the same quota; a tmpfs above the
memory is refused; destroy removes the workspace without following what the sandbox
planted; the workspace is reachable from no other sandbox. docs/WORKSPACES.md.

Run through run.py, or directly: python3 -m unittest -v test_workspaces
"""

import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

S = None
_owned = False
MiB = 1024 * 1024


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()


def tearDownModule():
    harness.module_teardown(_owned)


# Writes files until the file system says no: prints the count and the errno's name.
MANY_FILES = r'''
import errno, os
os.makedirs("/work/many", exist_ok=True)
n = 0
try:
    while n < 2000000:
        with open("/work/many/f%d" % n, "w"):
            pass
        n += 1
    print(n, "none")
except OSError as e:
    print(n, errno.errorcode[e.errno])
'''

# BTRFS_IOC_SUBVOL_CREATE on /work: a subvolume would be a qgroup outside the quota.
SUBVOL = r'''
import array, errno, fcntl, os
BTRFS_IOC_SUBVOL_CREATE = 0x5000940e
fd = os.open("/work", os.O_RDONLY | os.O_DIRECTORY)
args = bytearray(4096)
args[8:12] = b"escp"
try:
    fcntl.ioctl(fd, BTRFS_IOC_SUBVOL_CREATE, args)
    print("created")
except OSError as e:
    print(errno.errorcode[e.errno])
'''


class WorkspaceTest(harness.SandboxTestCase):

    def pool(self):
        return S.workspace_dir

    def in_pool(self, sid):
        return S.run(['test', '-e', f'{self.pool()}/{sid}']).returncode == 0

    def sh(self, sid, script, timeout=None):
        return self.exec_json(sid, 'sh', '-c', script, timeout=timeout)[1]

    def status(self, sid):
        return json.loads(self.ok(self.ctl('status', '--json', sid)).stdout)

    def test_pool_is_set_up(self):
        cp = S.run(['findmnt', '-n', '-o', 'FSTYPE', '--target', self.pool()])
        self.assertEqual(cp.stdout.strip(), 'btrfs', f'no btrfs pool on {self.pool()}: {cp.stdout} {cp.stderr}')
        # Every deletion accounted: a tall tree's would otherwise stop every limit.
        self.assertEqual(self.qgroup_knob('drop_subtree_threshold'), '8')
        self.assertEqual(self.qgroup_knob('inconsistent'), '0')

    def qgroup_knob(self, name):
        uuid = S.run(['findmnt', '-n', '-o', 'UUID', '--target', self.pool()]).stdout.strip()
        return S.run(['cat', f'/sys/fs/btrfs/{uuid}/qgroups/{name}']).stdout.strip()

    def test_big_file_in_small_memory(self):
        """2 GiB written by a sandbox with 256 MiB of memory, within DiskMax; past it,
        EDQUOT and no OOM kill."""
        sid = self.create('--memory=256M', '--disk=2200M')
        t0 = time.monotonic()
        res = self.sh(sid, 'dd if=/dev/zero of=/work/big bs=1M count=2048 status=none && '
                      'stat -c %s /work/big', timeout=600)
        took = time.monotonic() - t0
        self.assertEqual(res['exit_code'], 0, f'writing 2 GiB failed: {res}')
        self.assertFalse(res['oom_killed'])
        self.assertEqual(res['stdout'].strip(), str(2048 * MiB))
        print(f'\n  2 GiB written in a 256 MiB sandbox in {took:.1f} s', file=sys.stderr)
        # Past DiskMax: the file system says no, the writer lives to say so.
        res = self.sh(sid, 'dd if=/dev/zero of=/work/more bs=1M count=512 status=none; echo rc=$?', timeout=300)
        self.assertFalse(res['oom_killed'], res)
        self.assertIn('rc=1', res['stdout'])
        self.assertIn('Disk quota exceeded', res['stderr'])
        # /tmp shares the quota.
        res = self.sh(sid, 'dd if=/dev/zero of=/tmp/more bs=1M count=512 status=none; echo rc=$?', timeout=300)
        self.assertIn('Disk quota exceeded', res['stderr'])
        # And the sandbox goes on: its memory was never the files'.
        self.assert_exec_works(sid, 'after its disk filled up')

    def test_many_files_against_quota(self):
        """Inodes cost the workspace's bytes (btrfs counts the metadata in the qgroup): a
        flood of empty files stops at EDQUOT, not in an OOM kill."""
        sid = self.create('--memory=128M', '--disk=16M')
        _, res = self.exec_json(sid, 'python3', '-c', MANY_FILES, timeout=600)
        self.assertEqual(res['exit_code'], 0, res)
        self.assertFalse(res['oom_killed'])
        n, err = res['stdout'].split()
        self.assertEqual(err, 'EDQUOT', res)
        self.assertGreater(int(n), 1000)
        print(f'\n  {n} empty files in a 16 MiB workspace, then EDQUOT', file=sys.stderr)

    def test_no_subvolumes_inside(self):
        sid = self.create()
        _, res = self.exec_json(sid, 'python3', '-c', SUBVOL)
        self.assertEqual(res['stdout'].strip(), 'EDQUOT', res)

    def test_tmpfs_above_memory_refused(self):
        cp = self.ctl('create', '--storage=tmpfs', '--memory=64M', '--disk=128M')
        self.assertNotEqual(cp.returncode, 0, cp.stdout)
        self.assertIn('above MemoryMax', cp.stderr)
        # On disk the same is sound.
        sid = self.create('--storage=disk', '--memory=64M', '--disk=128M')
        self.assert_exec_works(sid)

    def test_tmpfs_storage(self):
        sid = self.create('--storage=tmpfs', '--memory=256M', '--disk=32M')
        res = self.sh(sid, 'stat -f -c %T /work /tmp')
        self.assertEqual(res['stdout'].split(), ['tmpfs', 'tmpfs'])
        self.assertFalse(self.in_pool(sid))
        disk = self.create()
        res = self.sh(disk, 'stat -f -c %T /work /tmp')
        self.assertEqual(res['stdout'].split(), ['btrfs', 'btrfs'])
        self.assertTrue(self.in_pool(disk))

    def test_destroy_planted_links(self):
        """Links the sandbox planted towards host files: destroy removes the workspace and
        none of them is followed; a hard link to a file outside cannot be made at all."""
        victim = f'{S.workspace_dir}-victim'
        S.run(['sh', '-c', f'echo precious > {victim}'], check=True)
        self.addCleanup(S.run, ['rm', '-f', victim])
        sid = self.create()
        res = self.sh(sid, f'ln -s {victim} /work/sym && ln -s /etc/passwd /work/sym2 && '
                      f'mkdir -p /work/d && ln -s / /work/d/root && '
                      f'ln /usr/bin/env /work/hard; echo rc=$?')
        self.assertIn('rc=1', res['stdout'])
        self.assertIn('cross-device', res['stderr'])
        self.assertTrue(self.in_pool(sid))
        t0 = time.monotonic()
        self.ok(self.ctl('destroy', sid))
        took = time.monotonic() - t0
        self.assertFalse(self.in_pool(sid), 'the workspace is still in the pool after destroy')
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            left = S.run(['sh', '-c', f'ls -A {self.pool()} | grep -v "^\\.removing" | grep -c {sid}'])
            if left.stdout.strip() == '0':
                break
            time.sleep(0.2)
        self.assertEqual(S.run(['cat', victim]).stdout, 'precious\n')
        self.assertEqual(S.run(['test', '-d', '/usr/bin']).returncode, 0)
        print(f'\n  destroy with a workspace: {took * 1000:.0f} ms', file=sys.stderr)

    def exec_times(self, sid, n):
        times = []
        for _ in range(n):
            t0 = time.monotonic()
            self.ok(self.exec(sid, 'true'))
            times.append(time.monotonic() - t0)
        return sorted(times)

    def test_destroy_many_files(self):
        """Destroy of a workspace of 100,000 files answers at once, and another sandbox's
        execs keep their latency while the kernel drops the tree (bench_workspaces.py
        measures a million)."""
        many = self.create('--disk=512M')
        res = self.sh(many, 'mkdir /work/d && cd /work/d && seq 1 100000 | xargs touch && ls | wc -l',
                      timeout=300)
        self.assertEqual(res['stdout'], '100000\n', res)
        other = self.create()
        before = self.exec_times(other, 9)
        t0 = time.monotonic()
        self.ok(self.ctl('destroy', many))
        took = time.monotonic() - t0
        during = self.exec_times(other, 9)
        print(f'\n  destroy of 100,000 files: {took * 1000:.0f} ms; exec in another sandbox, median '
              f'{before[4] * 1000:.0f} ms before, {during[4] * 1000:.0f} ms during', file=sys.stderr)
        self.assertLess(took, 2)
        self.assertLess(during[4], max(3 * before[4], before[4] + 0.2), (before, during))
        self.assertFalse(self.in_pool(many))
        S.run(['btrfs', 'subvolume', 'sync', self.pool()], timeout=300)
        self.assertEqual(self.qgroup_knob('inconsistent'), '0')

    def test_fork_is_a_snapshot(self):
        """Fork of a 1 GiB workspace: a btrfs snapshot, in well under a second; the same
        files, owned by the fork's own user; each side diverges on its own."""
        src = self.create('--disk=2G')
        res = self.sh(src, 'head -c 1M /dev/urandom > /work/big && head -c 1023M /dev/zero >> /work/big && '
                      'echo one > /work/f && ln -s /etc/passwd /work/link && echo t > /tmp/t && sync && '
                      'sha256sum /work/big', timeout=600)
        self.assertEqual(res['exit_code'], 0, res)
        digest = res['stdout'].split()[0]
        t0 = time.monotonic()
        cp = self.ok(self.ctl('fork', src))
        took = time.monotonic() - t0
        fork = cp.stdout.strip()
        self.addCleanup(self.destroy_quietly, S, fork)
        print(f'\n  fork of a 1 GiB workspace: {took * 1000:.0f} ms (create and start included)', file=sys.stderr)
        self.assertLess(took, 1.5)
        res = self.sh(fork, 'sha256sum /work/big; cat /work/f /tmp/t; readlink /work/link; '
                      'stat -c %u /work/big /work /tmp/t', timeout=120)
        self.assertEqual(res['stdout'].split(), [digest, '/work/big', 'one', 't', '/etc/passwd',
                                                 '1000', '1000', '1000'])
        self.sh(src, 'echo src > /work/f')
        self.sh(fork, 'echo fork > /work/f; rm /work/big')
        self.assertEqual(self.sh(src, 'cat /work/f; stat -c %s /work/big')['stdout'], f'src\n{1024 * MiB}\n')
        self.assertEqual(self.sh(fork, 'cat /work/f; ls /work')['stdout'], 'fork\nf\nlink\n')
        self.assertIn('snapshot', self.ok(self.ctl('status', src)).stdout)

    def test_metrics(self):
        """Disk used and limit: GetMetrics, sandboxctl status (text and JSON)."""
        sid = self.create('--disk=256M')
        before = self.status(sid)
        self.assertEqual(before['storage'], 'disk')
        self.assertEqual(before['fork_method'], 'snapshot')
        self.assertEqual(before['disk_bytes_max'], 256 * MiB)
        self.assertNotIn('work_bytes_used', before)
        self.sh(sid, 'head -c 20M /dev/zero > /work/a && head -c 10M /dev/zero > /tmp/b && sync')
        after = self.status(sid)
        grown = after['disk_bytes_used'] - before['disk_bytes_used']
        self.assertGreaterEqual(grown, 30 * MiB, (before, after))
        self.assertLess(grown, 32 * MiB, (before, after))
        text = self.ok(self.ctl('status', sid)).stdout
        self.assertRegex(text, r'Disk: 3\d\.\dM used of 256\.0M')
        self.assertRegex(text, r'Storage: disk .*; fork: snapshot')
        tmp = self.create('--storage=tmpfs', '--memory=256M', '--disk=64M')
        st = self.status(tmp)
        self.assertEqual((st['storage'], st['fork_method'], st['disk_bytes_max']), ('tmpfs', 'copy', 128 * MiB))

    def test_hibernate_keeps_the_directory(self):
        """Hibernate on disk: the processes stop, the workspace stays (no archive); the
        sandbox is listed as stopped; Wake and CreateSandbox with ReuseExisting bring it
        back with the same id, name and files."""
        sid = self.create('--name=hib')
        self.sh(sid, 'echo kept > /work/k; echo t > /tmp/t; sleep 1000 >/dev/null 2>&1 &')
        cp = self.ok(self.ctl('hibernate', sid))
        self.assertEqual(cp.stdout, '')  # no snapshot archive
        self.assertEqual(self.status(sid)['state'], 'stopped')
        self.assertTrue(self.in_pool(sid))
        unit = f'sandbox-{sid}.scope'
        self.assertNotEqual(S.run(['systemctl', 'is-active', unit]).stdout.strip(), 'active')
        cp = self.exec(sid, 'true')
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn('stopped', cp.stderr)

        self.assertEqual(self.ok(self.ctl('wake', 'hib')).stdout.strip(), sid)
        self.assertEqual(self.status(sid)['state'], 'running')
        self.assertEqual(self.sh(sid, 'cat /work/k /tmp/t')['stdout'], 'kept\nt\n')

        # GetOrCreate of a stopped sandbox: the same one, started again.
        self.assertEqual(json.loads(self.ok(self.ctl('hibernate', '--json', sid)).stdout), {'snapshot': ''})
        replies, error, _ = S.varlink_call('CreateSandbox', {'template': 'shell',
                                                             'options': {'Name': 'hib', 'ReuseExisting': True}})
        self.assertIsNone(error, replies)
        self.assertEqual(replies[0]['id'], sid)
        self.assertEqual(self.status(sid)['state'], 'running')
        self.assertEqual(self.sh(sid, 'cat /work/k')['stdout'], 'kept\n')

    def test_idle_hibernate_on_disk(self):
        """IdleAction=hibernate on disk: the idle sandbox is stopped, its files kept."""
        sid = self.create('--idle-timeout=1', '--idle-action=hibernate')
        self.sh(sid, 'echo idle > /work/i')
        deadline = time.monotonic() + 30
        while self.status(sid)['state'] != 'stopped':
            self.assertLess(time.monotonic(), deadline, 'the idle sandbox was not stopped')
            time.sleep(0.2)
        self.assertTrue(self.in_pool(sid))
        self.ok(self.ctl('wake', sid))
        self.assertEqual(self.sh(sid, 'cat /work/i')['stdout'], 'idle\n')

    def qgroup(self, name):
        """The qgroup id (= subvolume id) of the pool's subvolume name."""
        cp = S.run(['btrfs', 'inspect-internal', 'rootid', f'{self.pool()}/{name}'])
        self.assertEqual(cp.returncode, 0, cp.stderr)
        return int(cp.stdout)

    def qgroup_exists(self, qid):
        # btrfs's own list, not sysfs: a destroyed qgroup's sysfs directory lingers a while.
        cp = S.run(['btrfs', 'qgroup', 'show', self.pool()])
        self.assertEqual(cp.returncode, 0, cp.stderr)
        return any(line.split()[:1] == [f'0/{qid}'] for line in cp.stdout.splitlines())

    def wait_qgroups_gone(self, qids, timeout=10):
        t0 = time.monotonic()
        while any(self.qgroup_exists(q) for q in qids):
            self.assertLess(time.monotonic() - t0, timeout, f'qgroups {qids} still there')
            time.sleep(0.1)
        return time.monotonic() - t0

    def test_destroy_removes_the_qgroup(self):
        """A workspace's qgroup goes with it (not at the kernel's next commit, or never)."""
        sid = self.create()
        self.sh(sid, 'head -c 8M /dev/zero > /work/f')
        qid = self.qgroup(sid)
        self.assertTrue(self.qgroup_exists(qid))
        self.ok(self.ctl('destroy', sid))
        took = self.wait_qgroups_gone([qid])
        print(f'\n  qgroup 0/{qid} gone {took * 1000:.0f} ms after destroy', file=sys.stderr)

    def test_orphans_removed_at_start(self):
        """What a crash left in the pool (a removal under way, a workspace of no sandbox)
        is removed when sandboxd starts, qgroups and all."""
        names = ['.removing-0123456789abcdef-0-1', 'fedcba9876543210']
        for name in names:
            cp = S.run(['btrfs', 'subvolume', 'create', f'{self.pool()}/{name}'])
            self.assertEqual(cp.returncode, 0, cp.stderr)
        qids = [self.qgroup(name) for name in names]
        self.assertEqual(S.systemctl('restart', 'sandboxd.service', timeout=90).returncode, 0)
        self.wait_qgroups_gone(qids)
        for name in names:
            self.assertFalse(self.in_pool(name))

    def test_workspace_unreachable_from_another(self):
        a = self.create()
        b = self.create()
        self.sh(a, 'echo secret > /work/s')
        res = self.sh(b, f'ls {self.pool()} 2>&1; cat {self.pool()}/{a}/work/s 2>&1; echo rc=$?')
        self.assertNotIn('secret', res['stdout'])


# POSIX shared memory as Python uses it: a shared_memory block (shm_open) and a semaphore
# (sem_open), both files in /dev/shm.
SHM_PY = r'''
import multiprocessing, os
from multiprocessing import shared_memory
m = shared_memory.SharedMemory(create=True, size=1 << 20, name="devshm-test")
m.buf[:5] = b"hello"
print(os.path.exists("/dev/shm/devshm-test"))
def child(q):
    o = shared_memory.SharedMemory(name="devshm-test")
    q.put(bytes(o.buf[:5]).decode())
    o.close()
q = multiprocessing.Queue()
p = multiprocessing.Process(target=child, args=(q,))
p.start()
print(q.get(timeout=30))
p.join()
s = multiprocessing.Semaphore(2)
s.acquire(); s.acquire(); print(s.acquire(block=False)); s.release()
m.close(); m.unlink()
'''


# Fills /dev/shm/many with argv[1] empty files.
FILL_PY = r'''
import os, sys
os.mkdir("/dev/shm/many")
for i in range(int(sys.argv[1])):
    os.close(os.open(f"/dev/shm/many/{i}", os.O_CREAT | os.O_WRONLY, 0o600))
'''


class DevShmTest(harness.SandboxTestCase):
    """A sandbox on disk has its /dev/shm in its workspace (DIR/ID/shm): no tmpfs of its
    own, so one superblock fewer per sandbox (each is kernel state in every memory cgroup:
    docs/ARCHITECTURE.md, "Many sandboxes"); bounded by DiskMax; emptied as the sandbox
    starts again. docs/WORKSPACES.md, "/dev/shm"."""

    def pool(self):
        return S.workspace_dir

    def sh(self, sid, script, timeout=None):
        return self.exec_json(sid, 'sh', '-c', script, timeout=timeout)[1]

    @staticmethod
    def mounts(pid):
        """[(mount point, fs type, superblock's device)] of pid's mount namespace, from
        /proc/PID/mountinfo (the device is the superblock's s_dev, field 3)."""
        out = []
        with open(f'/proc/{pid}/mountinfo') as f:
            for line in f:
                pre, _, post = line.partition(' - ')
                fields = pre.split()
                out.append((fields[4], post.split()[0], fields[2]))
        return out

    def agent_pid(self, sid):
        for pid in S.unit_pids(f'sandbox-{sid}.scope') or ():
            try:
                with open(f'/proc/{pid}/cmdline', 'rb') as f:
                    if f.read().split(b'\0')[0] == b'/run/sandbox-init':
                        return pid
            except OSError:
                pass
        self.fail(f'no agent found in sandbox-{sid}.scope')

    def own_superblocks(self, sid):
        """{device: [(mount point, fs type)]} of the superblocks mounted in the sandbox that
        are its own: not also in sandboxd's mount namespace (the host's /usr, the pool, the
        agent's binary and /etc tree are shared by every sandbox)."""
        daemon = next(iter(S.unit_pids('sandboxd.service')))
        shared = {dev for _, _, dev in self.mounts(daemon)}
        own = {}
        for point, fstype, dev in self.mounts(self.agent_pid(sid)):
            if dev not in shared:
                own.setdefault(dev, []).append((point, fstype))
        return own

    def dev_of(self, sid, point):
        return next(dev for p, _, dev in self.mounts(self.agent_pid(sid)) if p == point)

    def test_superblocks_per_sandbox(self):
        """Idle on disk: its own superblocks are bwrap's root, /proc, /dev and /dev/pts
        (plus its IPC namespace's mqueue, which is mounted nowhere); /dev/shm, /work and
        /tmp are the pool's. In memory, /dev/shm, /work and /tmp are three more."""
        sid = self.create('--storage=disk')
        own = self.own_superblocks(sid)
        # Each by its first mount (bwrap's root also holds the files it binds from data,
        # /etc/machine-id).
        kinds = sorted(min(mounts) for mounts in own.values())
        self.assertEqual(kinds, [('/', 'tmpfs'), ('/dev', 'tmpfs'), ('/dev/pts', 'devpts'), ('/proc', 'proc')],
                         f'superblocks of sandbox {sid} on disk: {own}')
        pool = self.dev_of(sid, '/work')
        self.assertEqual(self.dev_of(sid, '/dev/shm'), pool)
        self.assertEqual(self.dev_of(sid, '/tmp'), pool)
        print(f'\n  superblocks of an idle sandbox on disk: {len(own)} mounted + its mqueue = {len(own) + 1}',
              file=sys.stderr)

        mem = self.create('--storage=tmpfs', '--memory=256M', '--disk=64M')
        own = self.own_superblocks(mem)
        kinds = sorted(min(mounts) for mounts in own.values())
        self.assertEqual(kinds, [('/', 'tmpfs'), ('/dev', 'tmpfs'), ('/dev/pts', 'devpts'), ('/dev/shm', 'tmpfs'),
                                 ('/proc', 'proc'), ('/tmp', 'tmpfs'), ('/work', 'tmpfs')],
                         f'superblocks of sandbox {mem} in memory: {own}')

    def test_shm_works_and_counts_to_the_disk(self):
        """POSIX shared memory (Python's shared_memory, semaphores) works; what is in
        /dev/shm is on the pool, within DiskMax: EDQUOT at it, never an OOM kill."""
        sid = self.create('--memory=128M', '--disk=48M')
        _, res = self.exec_json(sid, 'python3', '-c', SHM_PY, timeout=120)
        self.assertEqual(res['exit_code'], 0, res)
        self.assertEqual(res['stdout'].split(), ['True', 'hello', 'False'])
        res = self.sh(sid, 'stat -f -c %T /dev/shm; stat -c %a /dev/shm; df --output=target /dev/shm | tail -1')
        self.assertEqual(res['stdout'].split(), ['btrfs', '1777', '/dev/shm'], res)
        res = self.sh(sid, 'dd if=/dev/zero of=/dev/shm/big bs=1M count=200 status=none; echo rc=$?', timeout=120)
        self.assertFalse(res['oom_killed'], res)
        self.assertIn('rc=1', res['stdout'])
        self.assertIn('Disk quota exceeded', res['stderr'])
        st = json.loads(self.ok(self.ctl('status', '--json', sid)).stdout)
        self.assertGreater(st['disk_bytes_used'], 40 * MiB, st)
        self.assert_exec_works(sid, 'after its /dev/shm filled its disk')

    def test_emptied_when_started_again(self):
        """What was in /dev/shm is gone once the sandbox starts again (Wake), links
        removed, not followed; /work stays. A workspace without shm/ (made by an older
        sandboxd) gets one; one that cannot hold one gets a tmpfs."""
        sid = self.create('--name=shmwake')
        shm = f'{self.pool()}/{sid}/shm'
        self.sh(sid, 'echo k > /work/k; echo x > /dev/shm/x; mkdir -p /dev/shm/d/e; echo y > /dev/shm/d/e/y; '
                'chmod 0500 /dev/shm/d/e; ln -s /work/k /dev/shm/l; ln -s /work /dev/shm/dl')
        self.ok(self.ctl('hibernate', sid))
        self.assertEqual(S.run(['test', '-e', f'{shm}/x']).returncode, 0)
        self.ok(self.ctl('wake', sid))
        res = self.sh(sid, 'ls -A /dev/shm; cat /work/k; ls /work')
        self.assertEqual(res['stdout'], 'k\nk\n', res)

        # As an older sandboxd left it: no shm/.
        self.ok(self.ctl('hibernate', sid))
        self.assertEqual(S.run(['rm', '-rf', '--one-file-system', shm]).returncode, 0)
        self.ok(self.ctl('wake', sid))
        _, res = self.exec_json(sid, 'python3', '-c', SHM_PY, timeout=120)
        self.assertEqual(res['stdout'].split(), ['True', 'hello', 'False'], res)
        self.assertEqual(S.run(['stat', '-c', '%a %u', shm]).stdout.split(), ['1777', '0'])

        # shm/ cannot be made (something else has the name): a tmpfs, and it starts.
        self.ok(self.ctl('hibernate', sid))
        self.assertEqual(S.run(['rmdir', shm]).returncode, 0)
        self.assertEqual(S.run(['touch', shm]).returncode, 0)
        self.ok(self.ctl('wake', sid))
        res = self.sh(sid, 'stat -f -c %T /dev/shm; echo s > /dev/shm/s && cat /dev/shm/s /work/k')
        self.assertEqual(res['stdout'].split(), ['tmpfs', 's', 'k'], res)

    def test_fork_starts_with_an_empty_shm(self):
        """A fork's /dev/shm is empty: the snapshot's shm/ is set aside as the fork starts
        and removed; so is an old /dev/shm of the source's the snapshot carries (here one
        a crash left); the source keeps its own."""
        src = self.create()
        self.sh(src, 'echo s > /dev/shm/s; mkdir /dev/shm/d; echo t > /dev/shm/d/t')
        old = f'{self.pool()}/{src}/.shm-trash-98-1'
        self.assertEqual(S.run(['sh', '-c', f'mkdir {old} && echo o > {old}/o && ln -s /etc {old}/etc']).returncode, 0)
        fork = self.ok(self.ctl('fork', src)).stdout.strip()
        self.addCleanup(self.destroy_quietly, S, fork)
        self.assertEqual(self.sh(fork, 'ls -A /dev/shm; stat -f -c %T /dev/shm')['stdout'], 'btrfs\n')
        self.wait_trash_gone(fork)
        self.assertEqual(self.sh(src, 'cat /dev/shm/s /dev/shm/d/t')['stdout'], 's\nt\n')
        self.assertEqual(S.run(['cat', f'{old}/o']).stdout, 'o\n')   # the source has not started again

    def trash(self, sid):
        """The old /dev/shm(s) in sid's workspace's root, not yet removed."""
        cp = S.run(['ls', '-A', f'{self.pool()}/{sid}'])
        return [n for n in cp.stdout.split('\n') if n.startswith('.shm-trash-')]

    def wait_trash_gone(self, sid, timeout=180):
        deadline = time.monotonic() + timeout
        while self.trash(sid):
            self.assertLess(time.monotonic(), deadline, f'old /dev/shm of {sid} not removed: {self.trash(sid)}')
            time.sleep(0.3)

    def used(self, sid):
        S.run(['btrfs', 'filesystem', 'sync', self.pool()])   # the qgroup's bytes are a commit's
        return json.loads(self.ok(self.ctl('status', '--json', sid)).stdout)['disk_bytes_used']

    def test_full_shm_set_aside_at_start(self):
        """Wake does not wait for what /dev/shm holds: 100,000 files (and links to a host
        file, to /work and to /, a hard link, directories made unwritable and unreadable, a
        deep tree, a name of odd bytes) are set aside as it starts, so it is ready with an
        empty /dev/shm while they are still there; they are then removed in the background,
        DiskBytesUsed drops, and nothing a link points at is touched."""
        n = int(os.environ.get('SANDBOXD_TEST_SHM_FILES', '100000'))
        target = f'/var/tmp/shm-target-{os.getpid()}'
        self.assertEqual(S.run(['sh', '-c', f'echo keep > {target}']).returncode, 0)
        self.addCleanup(S.run, ['rm', '-f', target])
        sid = self.create('--disk=1G')
        res = self.sh(sid, f'echo k > /work/k && ln -s {target} /dev/shm/host && ln -s /work/k /dev/shm/k && '
                      'ln -s / /dev/shm/root && mkdir -p /dev/shm/ro/in && echo y > /dev/shm/ro/in/y && '
                      'chmod 0500 /dev/shm/ro/in /dev/shm/ro && mkdir /dev/shm/none && chmod 0 /dev/shm/none && '
                      'echo h > /dev/shm/h1 && ln /dev/shm/h1 /dev/shm/h2 && '
                      'touch "$(printf "/dev/shm/odd\\001\\n\\377 name")" && '
                      'd=/dev/shm/deep; for i in $(seq 300); do d=$d/d; done; mkdir -p $d && touch $d/f && echo ok')
        self.assertEqual(res['stdout'], 'ok\n', res)
        _, res = self.exec_json(sid, 'python3', '-c', FILL_PY, str(n), timeout=600)
        self.assertEqual(res['exit_code'], 0, res)
        before = self.used(sid)
        self.ok(self.ctl('hibernate', sid))
        t0 = time.monotonic()
        self.ok(self.ctl('wake', sid))
        wake = time.monotonic() - t0
        # Ready, its /dev/shm new and empty, while the old one is still being removed.
        trash = self.trash(sid)
        print(f'\n  wake with {n} files in /dev/shm: {wake:.2f} s', file=sys.stderr)
        self.assertTrue(trash, f'woken with no old /dev/shm set aside ({wake:.2f} s)')
        self.assertEqual(self.sh(sid, 'ls -A /dev/shm; stat -c %a /dev/shm')['stdout'], '1777\n')
        self.wait_trash_gone(sid)
        deadline = time.monotonic() + 60
        while (after := self.used(sid)) > before - 16 * MiB:
            self.assertLess(time.monotonic(), deadline, f'DiskBytesUsed {before} then {after}')
            time.sleep(0.5)
        self.assertEqual(S.run(['cat', target]).stdout, 'keep\n')
        self.assertEqual(self.sh(sid, 'cat /work/k; ls /')['stdout'].split()[0], 'k')
        self.assert_exec_works(sid, 'after its old /dev/shm was removed')

    def test_trash_removed_after_restart(self):
        """An old /dev/shm a crash or a reboot left (here planted in a stopped sandbox's
        workspace, links and an unwritable directory in it) is removed when sandboxd starts,
        and counts no more; a second one while the first is removed (two starts in a row)
        goes too."""
        sid = self.create()
        self.sh(sid, 'echo k > /work/k')
        self.ok(self.ctl('hibernate', sid))
        ws = f'{self.pool()}/{sid}'
        uid = S.run(['stat', '-c', '%u', f'{ws}/work']).stdout.strip()
        for name in ('.shm-trash-7-1', '.shm-trash-8-1'):
            cp = S.run(['sh', '-c', f'mkdir -m 1777 {ws}/{name} && cd {ws}/{name} && mkdir -p a/b && echo x > a/b/x && '
                        f'ln -s {ws}/work/k l && ln -s / r && chown -R -h {uid}:{uid} a l r && chmod 0500 a/b a'])
            self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(S.systemctl('restart', 'sandboxd.service', timeout=90).returncode, 0)
        self.wait_trash_gone(sid)
        self.ok(self.ctl('wake', sid))
        self.assertEqual(self.sh(sid, 'cat /work/k')['stdout'], 'k\n')
        # Two starts in a row, the first's old /dev/shm not yet gone when the second comes.
        self.sh(sid, 'mkdir /dev/shm/m && cd /dev/shm/m && seq 10000 | xargs touch')
        self.ok(self.ctl('hibernate', sid))
        self.ok(self.ctl('wake', sid))
        self.sh(sid, 'mkdir /dev/shm/m && cd /dev/shm/m && seq 10000 | xargs touch')
        self.ok(self.ctl('hibernate', sid))
        self.ok(self.ctl('wake', sid))
        self.wait_trash_gone(sid)
        self.assertEqual(self.sh(sid, 'ls -A /dev/shm; cat /work/k')['stdout'], 'k\n')
        # Destroyed while its old /dev/shm is being removed: the workspace goes all the same.
        self.sh(sid, 'mkdir /dev/shm/m && cd /dev/shm/m && seq 10000 | xargs touch')
        self.ok(self.ctl('hibernate', sid))
        self.ok(self.ctl('wake', sid))
        self.ok(self.ctl('destroy', sid))
        deadline = time.monotonic() + 120
        while S.run(['ls', '-A', self.pool()]).stdout.find(sid) >= 0:
            self.assertLess(time.monotonic(), deadline, 'destroyed workspace still in the pool')
            time.sleep(0.3)

    def test_fork_of_a_workspace_without_shm(self):
        """A running source whose workspace has no shm/ (started by an older sandboxd,
        adopted by this one; here removed from the host) forks: the fork's snapshot has no
        shm/, and the fork makes its own as it starts, on the pool and usable."""
        src = self.create()
        self.sh(src, 'echo k > /work/k')
        shm = f'{self.pool()}/{src}/shm'
        self.assertEqual(S.run(['rm', '-rf', '--one-file-system', shm]).returncode, 0)
        fork = self.ok(self.ctl('fork', src)).stdout.strip()
        self.addCleanup(self.destroy_quietly, S, fork)
        res = self.sh(fork, 'cat /work/k; stat -f -c %T /dev/shm; ls -A /dev/shm')
        self.assertEqual(res['stdout'].split(), ['k', 'btrfs'], res)
        _, res = self.exec_json(fork, 'python3', '-c', SHM_PY, timeout=120)
        self.assertEqual(res['stdout'].split(), ['True', 'hello', 'False'], res)
        self.assertEqual(S.run(['stat', '-c', '%a %u', f'{self.pool()}/{fork}/shm']).stdout.split(), ['1777', '0'])
        self.assert_exec_works(src, 'after its fork')


# Capabilities by bit (capability.h): what the workspaces need, and sandboxd no longer holds.
CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_SYS_ADMIN = 0, 1, 2, 21
HELPER_SOCKET = '/run/sandboxd/workspace'
HELPER_UNIT = 'sandboxd-workspace.service'
VARLINKPROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'varlinkprobe.py')


class HelperTest(harness.SandboxTestCase):
    """What of the workspaces needs a privilege is sandboxd-workspace's (socket-activated,
    io.sandboxd.Workspace): sandboxd.service holds none of CAP_SYS_ADMIN, CAP_CHOWN and
    CAP_DAC_READ_SEARCH (nor do ports need it: test_ports); workspaces still work through
    it (WorkspaceTest: create, EDQUOT, fork, destroy); a caller other than sandboxd's
    process is refused; the service exits when idle and its socket starts it again."""

    DROPIN = '/run/systemd/system/sandboxd-workspace.service.d/60-test-idle.conf'

    def caps(self, pid):
        out = {}
        for line in S.run(['cat', f'/proc/{pid}/status']).stdout.splitlines():
            if line.startswith('Cap'):
                key, value = line.split(':', 1)
                out[key] = int(value.strip(), 16)
        return out

    def test_sandboxd_lacks_capabilities(self):
        pid = S.show('sandboxd.service', 'MainPID')['MainPID']
        caps = self.caps(pid)
        for name, bit in (('CAP_CHOWN', CAP_CHOWN), ('CAP_DAC_OVERRIDE', CAP_DAC_OVERRIDE),
                          ('CAP_DAC_READ_SEARCH', CAP_DAC_READ_SEARCH), ('CAP_SYS_ADMIN', CAP_SYS_ADMIN)):
            for kind in ('CapBnd', 'CapEff', 'CapPrm'):
                self.assertFalse(caps[kind] & (1 << bit), f'sandboxd (pid {pid}) has {name} in {kind}: {caps}')
        # And a workspace is made all the same: by the helper, which has them.
        sid = self.create('--storage=disk')
        self.assertTrue(S.run(['test', '-d', f'{S.workspace_dir}/{sid}/work']).returncode == 0)
        helper = S.show(HELPER_UNIT, 'MainPID')['MainPID']
        self.assertNotEqual(helper, '0', 'sandboxd-workspace.service is not running after a create')
        want = (1 << CAP_CHOWN) | (1 << CAP_DAC_OVERRIDE) | (1 << CAP_DAC_READ_SEARCH) | (1 << CAP_SYS_ADMIN)
        self.assertEqual(self.caps(helper)['CapBnd'], want)

    def probe(self, calls, wrap=()):
        cp = S.run(list(wrap) + ['python3', VARLINKPROBE, HELPER_SOCKET], input=json.dumps(calls))
        self.assertEqual(cp.returncode, 0, cp.stderr)
        return json.loads(cp.stdout)

    def test_other_peer_refused(self):
        """root, but not sandboxd's process: from a unit of its own in the system (its
        cgroup another unit's) and from outside every unit (nsenter)."""
        sid = self.create('--storage=disk')
        victim = f'{S.workspace_dir}/{sid}'
        uid = int(S.run(['stat', '-c', '%u', f'{victim}/work']).stdout)
        self.assertEqual(S.run(['sh', '-c', f'mkdir {victim}/.shm-trash-1-1 && touch {victim}/.shm-trash-1-1/f'])
                         .returncode, 0)
        calls = [{'method': 'io.sandboxd.Workspace.Remove', 'parameters': {'id': sid}},
                 {'method': 'io.sandboxd.Workspace.RemoveTrash', 'parameters': {'id': sid, 'trash': '.shm-trash-1-1'}},
                 {'method': 'io.sandboxd.Workspace.Clone',
                  'parameters': {'from': sid, 'id': '0123456789abcdee', 'fromUid': uid, 'uid': uid,
                                 'maxBytes': 1 << 40}},
                 {'method': 'io.sandboxd.Workspace.Create',
                  'parameters': {'id': '0123456789abcdef', 'uid': uid, 'maxBytes': 1 << 20}}]
        for wrap in ([], ['systemd-run', '--wait', '--pipe', '--quiet', '--property=Type=exec']):
            results = self.probe(calls, wrap)
            for call, res in zip(calls, results):
                self.assertEqual(res.get('error'), 'org.varlink.service.PermissionDenied', f'{wrap} {call}: {res}')
        self.assertTrue(S.run(['test', '-d', f'{victim}/work']).returncode == 0, 'the workspace was removed')
        self.assertTrue(S.run(['test', '-e', f'{victim}/.shm-trash-1-1/f']).returncode == 0, 'the trash was removed')
        self.assertFalse(S.run(['test', '-e', f'{S.workspace_dir}/0123456789abcdef']).returncode == 0)
        self.assert_exec_works(sid, 'after refused calls on its workspace')

    def test_exits_when_idle(self):
        args = [S.paths.sandboxd_workspace, f'--workspace-dir={S.workspace_dir}', '--exit-idle=1']
        with open(S.path(self.DROPIN), 'w') as f:
            f.write(f'{harness.MARKER}\n[Service]\nExecStart=\nExecStart={" ".join(args)}\n')
        self.addCleanup(self.restore)
        S.systemctl('daemon-reload', check=True)
        S.systemctl('stop', HELPER_UNIT, check=True)
        sid = self.create('--storage=disk')      # started by its socket
        self.ok(self.ctl('destroy', sid))          # a removal: it waits for its child too
        deadline = time.monotonic() + 20
        while S.systemctl('is-active', HELPER_UNIT).stdout.strip() == 'active':
            self.assertLess(time.monotonic(), deadline, 'sandboxd-workspace did not exit when idle')
            time.sleep(0.2)
        # Of itself, cleanly (under the sanitizers: no leak, no error).
        self.assertEqual(S.show(HELPER_UNIT, 'Result')['Result'], 'success', S.journal((HELPER_UNIT,)))
        self.assertFalse(S.run(['test', '-e', f'{S.workspace_dir}/{sid}']).returncode == 0)
        # The next create starts it again.
        sid = self.create('--storage=disk')
        self.assert_exec_works(sid, 'in a workspace made by a restarted sandboxd-workspace')

    def restore(self):
        if os.path.exists(S.path(self.DROPIN)):
            os.unlink(S.path(self.DROPIN))
        S.systemctl('daemon-reload')


class DescriptorTest(harness.SandboxTestCase):
    """sandboxd's RLIMIT_NOFILE is sized from --max-sandboxes (1 descriptor a sandbox and
    5,120); where it cannot be, a create past what it has room for is refused with
    TooManySandboxes, not failed on EMFILE."""

    DROPIN = '/run/systemd/system/sandboxd.service.d/65-test-nofile.conf'

    def restart_with(self, *lines):
        with open(S.path(self.DROPIN), 'w') as f:
            f.write(harness.MARKER + '\n[Service]\n' + ''.join(line + '\n' for line in lines))
        self.addCleanup(self.restore)
        self.restart()

    def restart(self):
        S.systemctl('daemon-reload', check=True)
        self.assertEqual(S.systemctl('restart', 'sandboxd.service', timeout=90).returncode, 0)

    def restore(self):
        if os.path.exists(S.path(self.DROPIN)):
            os.unlink(S.path(self.DROPIN))
            self.restart()

    def nofile(self, pid=None, hard=False):
        pid = pid or S.show('sandboxd.service', 'MainPID')['MainPID']
        for line in S.run(['cat', f'/proc/{pid}/limits']).stdout.splitlines():
            if line.startswith('Max open files'):
                return int(line.split()[4 if hard else 3])
        self.fail('no open files limit')

    def fds(self, pid):
        """How many descriptors process pid (of the test system) holds."""
        return len(S.run(['ls', f'/proc/{pid}/fd'], check=True).stdout.split())

    def settled_fds(self, pid, timeout=10):
        """fds(pid) once it has not changed for a second: what an earlier test's cleanup
        still holds (a destroy's workspace helper connection, a stop's pidfd) goes first."""
        deadline = time.monotonic() + timeout
        last, since = self.fds(pid), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.25)
            now = self.fds(pid)
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since >= 1:
                break
        return last

    def test_one_descriptor_per_idle_sandbox(self):
        """An idle sandbox costs sandboxd one descriptor (its agent's control socket) and
        PID 1 one (the same socket in sandboxd's fd store), on disk or in memory, after an
        exec as before one: counted over N of them."""
        n = 50
        pid = S.show('sandboxd.service', 'MainPID')['MainPID']
        before = (self.settled_fds(pid), self.settled_fds(1))
        with S.varlink() as c:
            for i in range(n):
                replies, error, params = c.call(f'{harness.VARLINK_IFACE}.CreateSandbox', {
                    'template': 'shell', 'options': {'Storage': 'disk' if i % 2 else 'tmpfs'}})
                self.assertIsNone(error, f'{error} {params}')
                sid = replies[-1]['id']
                self.addCleanup(self.destroy_quietly, S, sid)
                if i % 5:
                    # One that ran a command holds no more than one that did not.
                    replies, error, params = c.call(f'{harness.VARLINK_IFACE}.Exec',
                                                    {'id': sid, 'argv': ['sh', '-c', 'echo hi >&2']})
                    self.assertIsNone(error, f'{error} {params}')
        # PID 1 takes each socket into the fd store when it reads sandboxd's notification,
        # a moment after the create answered.
        deadline = time.monotonic() + 10
        after = (self.fds(pid), self.fds(1))
        while after[1] < before[1] + n and time.monotonic() < deadline:
            time.sleep(0.2)
            after = (self.fds(pid), self.fds(1))
        after = (self.settled_fds(pid), after[1])
        per_sandbox = [(a - b) / n for a, b in zip(after, before)]
        print(f'\n  descriptors per idle sandbox: sandboxd {per_sandbox[0]:.2f}, PID 1 {per_sandbox[1]:.2f} '
              f'(over {n}; sandboxd {before[0]} -> {after[0]}, PID 1 {before[1]} -> {after[1]})', file=sys.stderr)
        # Exactly one each, give or take a descriptor or two of the daemons' own (a bus
        # or journal connection coming or going meanwhile), never 2 a sandbox.
        self.assertLessEqual(abs(after[0] - before[0] - n), 3, f'sandboxd: {before[0]} -> {after[0]}')
        self.assertLessEqual(abs(after[1] - before[1] - n), 3, f'PID 1: {before[1]} -> {after[1]}')

    def test_end_seen_without_pidfd(self):
        """Without a pidfd of its payload, an idle sandbox whose agent (its one process,
        bwrap's monitor gone) is killed is still seen to end (its control socket's end),
        and its unit goes."""
        sid = self.create('--storage=tmpfs')
        pid = self.host_pid_of(sid, 'sandbox-init')
        os.kill(pid, 9)
        deadline = time.monotonic() + 20
        while True:
            cp = self.ctl('status', '--json', sid)
            if cp.returncode != 0 or json.loads(cp.stdout)['state'] not in ('running', 'paused'):
                break
            self.assertLess(time.monotonic(), deadline, 'the sandbox is still running without its payload')
            time.sleep(0.2)
        while S.unit_pids(self.unit(sid)):
            self.assertLess(time.monotonic(), deadline, 'its unit still has processes')
            time.sleep(0.2)

    def test_room_for_10000(self):
        """--max-sandboxes=10000 under this machine's hard RLIMIT_NOFILE: with one
        descriptor a sandbox it fits (the CI VM's hard limit is 20,000 and cannot be
        raised there), and sandboxd keeps its maximum rather than lowering it."""
        hard = self.nofile(1, hard=True)
        need = 5120 + 1 * 10000
        self.assertGreaterEqual(hard, need, f'a hard limit of {hard} has no room for 10,000 sandboxes')
        since = time.time()
        S.configure_daemon(args=['--max-sandboxes=10000'])
        self.addCleanup(S.configure_daemon, None)
        self.assertGreaterEqual(self.nofile(), need)
        pid = S.show('sandboxd.service', 'MainPID')['MainPID']
        said = [line for line in S.journal(units=('sandboxd.service',), since=since).splitlines()
                if f'sandboxd[{pid}]' in line and 'RLIMIT_NOFILE' in line]
        self.assertEqual(said, [], 'sandboxd lowered its maximum')

    def test_limit_sized_from_max_sandboxes(self):
        # Raised from the soft limit to what 4,096 sandboxes need, within the hard limit
        # (beyond it with CAP_SYS_RESOURCE, which this machine may not give).
        hard = min(self.nofile(1, hard=True), 100000)
        self.restart_with(f'LimitNOFILE=2048:{hard}')
        self.assertEqual(self.nofile(), min(5120 + 4096, hard))

    def test_refused_before_emfile(self):
        n0 = len(json.loads(self.ok(self.ctl('list', '--json')).stdout))
        # A hard limit it cannot raise: room for a few more than there are.
        self.restart_with(f'LimitNOFILE={5120 + n0 + 3}')
        for _ in range(40):
            cp = self.ctl('create', '--storage=tmpfs')
            if cp.returncode != 0:
                break
            self.addCleanup(self.destroy_quietly, S, cp.stdout.strip())
        self.assertNotEqual(cp.returncode, 0, 'no create was refused')
        self.assertIn('descriptor limit', cp.stderr)
        self.assertNotIn('Too many open files', cp.stderr)


class RebootTest(harness.SystemTestCase):
    """Files outlive processes: a sandbox on disk, its whole system killed (a power cut), a
    new system booted on the same pool: the sandbox is listed, stopped (files, no
    processes); Wake brings it back with the same id, name and files."""

    def call(self, system, method, parameters=None):
        replies, error, params = system.varlink_call(method, parameters)
        self.assertIsNone(error, f'{method}({parameters}) failed: {error} {params}')
        return replies[0]

    def boot(self, wsdir):
        try:
            return harness.boot_extra(workspace_dir=wsdir)
        except harness.Unavailable as e:
            if harness.ci():
                raise
            raise unittest.SkipTest(str(e))

    def test_reboot_keeps_files(self):
        if S.mode == 'host':
            self.skipTest('PID 1 is systemd: no second system to boot here')
        wsdir = f'{S.workspace_dir}-reboot'
        self.addCleanup(harness.remove_workspace_pool, wsdir)

        first = self.boot(wsdir)
        try:
            sid = self.call(first, 'CreateSandbox', {'template': 'shell', 'options': {'Name': 'keeper'}})['id']
            cp = first.sandboxctl('exec', sid, '--', 'sh', '-c',
                                  'echo "outlives its processes" > /work/k; mkdir /work/d; echo t > /tmp/t',
                                  timeout=120)
            self.assertEqual(cp.returncode, 0, cp.stderr)
            other = self.call(first, 'CreateSandbox', {'template': 'shell', 'options': {'Ephemeral': True}})['id']
        finally:
            # The whole system killed, nothing shut down cleanly.
            self.assertEqual(first.kill(), [])
            first.teardown()

        second = self.boot(wsdir)
        try:
            got = self.call(second, 'GetSandbox', {'id': 'keeper'})['sandbox']
            self.assertEqual((got['id'], got['name'], got['state']), (sid, 'keeper', 'stopped'))
            listed = {s['id']: s['state'] for s in self.call(second, 'ListSandboxes')['sandboxes']}
            self.assertEqual(listed, {sid: 'stopped'})  # the ephemeral one's files were in memory
            self.assertNotIn(other, listed)
            cp = second.sandboxctl('exec', sid, '--', 'true', timeout=60)
            self.assertNotEqual(cp.returncode, 0)
            self.assertIn('stopped', cp.stderr)
            # A name stays taken while its sandbox is stopped.
            _, error, _ = second.varlink_call('CreateSandbox', {'template': 'shell', 'options': {'Name': 'keeper'}})
            self.assertTrue(error and error.endswith('SandboxExists'), error)

            self.assertEqual(self.call(second, 'Wake', {'id': 'keeper'})['id'], sid)
            got = self.call(second, 'GetSandbox', {'id': 'keeper'})['sandbox']
            self.assertEqual((got['id'], got['name'], got['state']), (sid, 'keeper', 'running'))
            cp = second.sandboxctl('exec', sid, '--', 'sh', '-c', 'cat /work/k /tmp/t; test -d /work/d && id -u',
                                   timeout=120)
            self.assertEqual(cp.returncode, 0, cp.stderr)
            self.assertEqual(cp.stdout, 'outlives its processes\nt\n1000\n')
            self.assertEqual(second.sandboxctl('destroy', sid, timeout=120).returncode, 0)
            self.assertEqual(second.run(['test', '-e', f'{wsdir}/{sid}']).returncode, 1)
            self.assertEqual(self.call(second, 'ListSandboxes')['sandboxes'], [])
        finally:
            self.assertEqual(second.teardown(), [])


if __name__ == '__main__':
    unittest.main()
