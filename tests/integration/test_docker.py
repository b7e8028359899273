#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 5: Docker payloads, on a real systemd, bus and dockerd (the harness starts one in
the booted system and builds harness.DOCKER_IMAGE with tools/build-image busybox).

Everything test_core checks of a bwrap sandbox, against the docker-busybox template: limits
on the unit and enforced, timeouts, /work kept across execs, files round trip, no network,
uid 1000 inside and a host uid of the sandbox's own outside (issue 13), read-only root,
destroy leaving no unit and no container. And what is Docker's
own: the container's cgroup under the sandbox's unit, Docker down or the image missing
(a clear error, nothing left, bwrap goes on), pause, kill -9 of sandboxd (adopted, nothing
orphaned).

Without docker.io the module is skipped, under CI=true it fails. Run through run.py, or
directly: python3 -m unittest -v test_docker
"""

import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'security'))
import busclient  # noqa: E402
import harness  # noqa: E402
import secutil  # noqa: E402

S = None           # the harness.System
_owned = False     # True when this module booted it (not run.py)

MiB = 1024 * 1024
TEMPLATE = harness.DOCKER_TEMPLATE
E = 'io.sandboxd.Sandbox1.'
COUNTER = 'i=0; while :; do i=$((i+1)); echo $i > /work/c; sleep 0.05; done'


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()
    if S.docker_unavailable:
        msg = f'Docker is not available in the test system: {S.docker_unavailable}'
        if harness.ci():
            raise AssertionError(f'CI=true: {msg}')
        raise unittest.SkipTest(msg)


def tearDownModule():
    harness.module_teardown(_owned)


def _proc_starttime(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[19]
    except OSError:
        return None


def host_uid(sid):
    """The host uid sandboxd gave the sandbox, from its state file."""
    with open(S.path(f'{S.state_dir}/sandboxes/{sid}.json')) as f:
        return json.load(f)['host_uid']


class Base(harness.SandboxTestCase):
    """Every sandbox created here (of the Docker template) is destroyed afterwards."""

    TEMPLATE = TEMPLATE

    def unit(self, sid):
        """The sandbox's unit: a scope, or a slice with Docker's systemd cgroup driver."""
        kind = 'slice' if getattr(S, 'docker_cgroup_driver', 'cgroupfs') == 'systemd' else 'scope'
        return f'sandbox-{sid}.{kind}'

    @staticmethod
    def units():
        return set(S.sandbox_scopes())

    @staticmethod
    def container(sid):
        return f'sandbox-{sid}'

    def containers(self):
        return set(S.docker_containers())

    def exists(self, sid):
        return self.unit(sid) in self.units() or self.container(sid) in self.containers()

    def inspect(self, sid):
        cp = self.ok(S.docker('inspect', self.container(sid)))
        return json.loads(cp.stdout)[0]

    def container_pid(self, sid):
        """The container's main process, as a pid of the test system (dockerd's namespace)."""
        cp = self.ok(S.docker('inspect', '-f', '{{.State.Pid}}', self.container(sid)))
        pid = int(cp.stdout.strip())
        self.assertGreater(pid, 0, f'container {self.container(sid)} has no running process')
        return pid

    def assert_gone(self, sid):
        self.assertNotIn(self.unit(sid), self.units(), 'the unit is still listed')
        load = S.show(self.unit(sid), 'LoadState')['LoadState']
        self.assertEqual(load, 'not-found', f'{self.unit(sid)} is {load}')
        self.assertNotIn(self.container(sid), self.containers(), 'the container is still there (docker ps -a)')
        cp = S.docker('ps', '-a', '-q', '--filter', f'label={harness.DOCKER_LABEL}={sid}')
        self.assertEqual(cp.stdout.strip(), '', f'docker ps -a --filter label={harness.DOCKER_LABEL}={sid}')


class Limits(Base):

    def test_limits_on_unit_bus_and_cgroup(self):
        sid = self.create('--memory', '256M', '--cpu', '50%', '--tasks', '32')
        props = S.show(self.unit(sid), 'LoadState', 'ActiveState', 'MemoryMax', 'TasksMax',
                       'CPUQuotaPerSecUSec', 'ControlGroup')
        self.assertEqual(props['LoadState'], 'loaded', props)
        self.assertEqual(props['ActiveState'], 'active', props)
        self.assertEqual(props['MemoryMax'], str(256 * MiB), props)
        self.assertEqual(props['TasksMax'], '32', props)
        self.assertEqual(props['CPUQuotaPerSecUSec'], '500ms', props)

        path = self.object_path(sid)
        for prop, want in (('MemoryMax', 256 * MiB), ('TasksMax', 32), ('CPUQuotaPerSecUSec', 500000),
                           ('Unit', self.unit(sid)), ('Id', sid), ('State', 'running')):
            self.assertEqual(self.bus_property(sid, prop), want, f'property {prop} of {path}')

        # The cgroup files systemd wrote for the unit (v1 here, v2 on modern distros).
        cg = props['ControlGroup']
        checks = [('memory/memory.limit_in_bytes', str(256 * MiB)), ('pids/pids.max', '32'),
                  ('cpu/cpu.cfs_quota_us', '50000'), ('memory.max', str(256 * MiB)),
                  ('pids.max', '32'), ('cpu.max', '50000 100000')]
        seen = 0
        for rel, want in checks:
            hierarchy, _, name = rel.rpartition('/')
            if hierarchy == '' and not os.path.exists(os.path.join(harness.CGROUP_FS, 'cgroup.controllers')):
                continue
            p = os.path.join(harness.CGROUP_FS, hierarchy, cg.lstrip('/'), name)
            if os.path.exists(p):
                with open(p) as f:
                    self.assertEqual(f.read().strip(), want, p)
                seen += 1
        self.assertGreaterEqual(seen, 2, f'no limit found in the cgroup files of {cg}')

    def test_limits_also_in_host_config(self):
        sid = self.create('--memory', '256M', '--cpu', '50%', '--tasks', '32')
        hc = self.inspect(sid)['HostConfig']
        self.assertEqual(hc.get('Memory'), 256 * MiB, 'HostConfig.Memory')
        self.assertEqual(hc.get('PidsLimit'), 32, 'HostConfig.PidsLimit')
        cpu = hc.get('NanoCpus') or 0
        if not cpu and hc.get('CpuQuota') and hc.get('CpuPeriod'):
            cpu = hc['CpuQuota'] * 10 ** 9 // hc['CpuPeriod']
        self.assertEqual(cpu, 5 * 10 ** 8, f'CPU limit in HostConfig: {hc.get("NanoCpus")} '
                                            f'{hc.get("CpuQuota")}/{hc.get("CpuPeriod")}')

    def test_memory_limit_oom_kills_and_reports(self):
        sid = self.create('--memory', '64M')
        # busybox dd allocates its block (200 MB) and fills it from /dev/zero.
        alloc = ('dd', 'if=/dev/zero', 'of=/dev/null', 'bs=200M', 'count=1')
        _cp, res = self.exec_json(sid, *alloc)
        self.assertIs(res.get('oom_killed'), True, f'{res}\nOOM kills counted by the cgroups:\n{self.oom_kills(sid)}')
        self.assertEqual(res.get('exit_status'), 137, res)
        self.assertEqual(res.get('signal'), 9, res)
        self.assertIs(res.get('timed_out'), False, res)

        cp = self.exec(sid, *alloc)
        self.assertEqual(cp.returncode, 137, f'sandboxctl exec after OOM kill: {cp.stderr}')
        # Only the allocation died.
        self.assert_exec_works(sid, 'after the OOM kill')
        self.assertEqual(S.show(self.unit(sid), 'ActiveState')['ActiveState'], 'active')

    def oom_kills(self, sid):
        """oom_kill counters of the unit's memory cgroup and those below it (v1 or v2)."""
        cg = S.show(self.unit(sid), 'ControlGroup')['ControlGroup'].lstrip('/')
        out = []
        for base, name in (('memory', 'memory.oom_control'), ('', 'memory.events')):
            top = os.path.join(harness.CGROUP_FS, base, cg)
            for dirpath, _dirs, files in os.walk(top):
                if name in files:
                    with open(os.path.join(dirpath, name)) as f:
                        kills = [l for l in f.read().splitlines() if l.startswith('oom_kill ')]
                    out.append(f'{dirpath[len(top):] or "."}: {kills}')
        return '\n'.join(out)

    def test_sigkill_is_not_reported_as_oom(self):
        sid = self.create()
        _cp, res = self.exec_json(sid, 'sh', '-c', 'kill -9 $$')
        self.assertEqual(res.get('exit_status'), 137, res)
        self.assertEqual(res.get('signal'), 9, res)
        self.assertIs(res.get('oom_killed'), False, res)

    def test_tasks_limit_stops_fork_loop(self):
        sid = self.create('--tasks', '16')
        self.assertEqual(S.show(self.unit(sid), 'TasksMax')['TasksMax'], '16')
        baseline = int(S.show(self.unit(sid), 'TasksCurrent')['TasksCurrent'])
        loop = ('i=0; while [ $i -lt 100 ]; do sleep 3 </dev/null >/dev/null 2>&1 & i=$((i+1)); done; '
                'echo all-started')
        cp = self.exec(sid, 'sh', '-c', loop, timeout=120)
        self.assertNotIn('all-started', cp.stdout, 'a loop of 100 forks ran to its end under TasksMax=16')
        self.assertNotEqual(cp.returncode, 0)
        self.assertRegex(cp.stderr, r'(?i)fork|resource temporarily unavailable',
                         'the fork failure is not visible to the caller')
        deadline = time.monotonic() + 30
        while int(S.show(self.unit(sid), 'TasksCurrent')['TasksCurrent']) > baseline:
            self.assertLess(time.monotonic(), deadline, 'the sleeps never ended')
            time.sleep(0.2)
        self.assert_exec_works(sid, 'after the fork loop')

    def test_exec_timeout(self):
        sid = self.create()
        start = time.monotonic()
        cp = self.exec(sid, 'sleep', '100', opts=('--timeout', '1'))
        self.assertEqual(cp.returncode, 124, cp.stderr)
        self.assertLess(time.monotonic() - start, 20)
        _cp, res = self.exec_json(sid, 'sleep', '100', opts=('--timeout', '1'))
        self.assertIs(res.get('timed_out'), True, res)
        self.assertIs(res.get('oom_killed'), False, res)
        self.assertGreaterEqual(res.get('duration_usec', 0), 900000, res)
        self.assert_exec_works(sid, 'after the timeout')


class Containment(Base):
    """The container is the sandbox's payload: inside its unit, configured as issue 5 says."""

    def test_container_cgroup_is_under_the_unit(self):
        sid = self.create()
        cid = self.inspect(sid)['Id']
        pid = self.container_pid(sid)
        cg = S.show(self.unit(sid), 'ControlGroup')['ControlGroup']
        # A scope in its sub-slice of sandbox.slice; a slice (systemd driver) in sandbox.slice.
        parent = '/sandbox.slice/' + ('' if self.unit(sid).endswith('.slice') else f'sandbox-{sid[:2]}.slice/')
        self.assertTrue(cg.endswith(f'{parent}{self.unit(sid)}'), cg)
        # The pid is one of the test system's: read it there.
        cp = self.ok(S.run(['cat', f'/proc/{pid}/cgroup']))
        lines = {}
        for line in cp.stdout.splitlines():
            _n, controllers, path = line.split(':', 2)
            for c in controllers.split(',') or ['']:
                lines[c] = path
        want = f'{parent}{self.unit(sid)}/'
        checked = 0
        for c in ('memory', 'name=systemd', 'pids', ''):
            if c in lines:
                self.assertIn(want, lines[c] + '/', f'{c} cgroup of the container\'s pid {pid}:\n{cp.stdout}')
                self.assertTrue((lines[c] + '/').startswith(cg + '/'),
                                f'{c} cgroup {lines[c]} is not below the unit\'s {cg}')
                if S.docker_cgroup_driver == 'cgroupfs':
                    self.assertIn(cid, lines[c], f'{c} cgroup {lines[c]} does not name the container')
                checked += 1
        self.assertGreaterEqual(checked, 2, cp.stdout)
        # And systemd counts it among the unit's processes.
        self.assertGreaterEqual(int(S.show(self.unit(sid), 'TasksCurrent')['TasksCurrent']), 1)
        status = S.systemctl('status', self.unit(sid), '-l').stdout
        self.assertIn(cid[:12], status.replace('\n', ' ') + cid, status)

    def test_container_configuration(self):
        sid = self.create()
        info = self.inspect(sid)
        cfg, hc = info['Config'], info['HostConfig']
        self.assertEqual(info['Name'], f'/{self.container(sid)}')
        self.assertEqual(cfg['Labels'].get(harness.DOCKER_LABEL), sid, cfg['Labels'])
        self.assertEqual(cfg['Image'], harness.DOCKER_IMAGE)
        uid = host_uid(sid)
        self.assertEqual(cfg.get('User'), f'{uid}:{uid}')
        self.assertEqual(hc.get('NetworkMode'), 'none')
        self.assertIs(hc.get('ReadonlyRootfs'), True)
        self.assertIn('ALL', [c.upper() for c in hc.get('CapDrop') or []])
        self.assertFalse(hc.get('CapAdd'), hc.get('CapAdd'))
        self.assertFalse(hc.get('Privileged'))
        sec = hc.get('SecurityOpt') or []
        self.assertTrue(any(o.startswith('no-new-privileges') for o in sec), sec)
        self.assertTrue(any(o.startswith('seccomp') and 'unconfined' not in o for o in sec), sec)
        mounts = [m.get('Source', '') + ' ' + m.get('Destination', '') for m in info.get('Mounts', [])]
        binds = (hc.get('Binds') or []) + mounts
        self.assertFalse([b for b in binds if 'docker.sock' in b], f'a Docker socket is mounted: {binds}')
        self.assertEqual(info['State'].get('Running'), True, info['State'])

    def test_nothing_of_docker_inside(self):
        sid = self.create()
        cp = self.ok(self.exec(sid, 'sh', '-c', 'grep -E "^(CapEff|NoNewPrivs|Seccomp):" /proc/self/status'))
        status = dict(line.split(':', 1) for line in cp.stdout.splitlines())
        self.assertEqual(status['CapEff'].strip(), '0000000000000000', cp.stdout)
        self.assertEqual(status['NoNewPrivs'].strip(), '1', cp.stdout)
        self.assertEqual(status['Seccomp'].strip(), '2', cp.stdout)
        for p in ('/run/docker.sock', '/var/run/docker.sock', S.docker_socket):
            cp = self.exec(sid, 'test', '-e', p)
            self.assertNotEqual(cp.returncode, 0, f'{p} exists inside the container')


class HostUid(Base):
    """Issue 13: a container runs as the sandbox's own host uid, as a bwrap sandbox does, not
    as host uid 1000 (an account on many hosts); inside it is still uid 1000."""

    def test_each_sandbox_runs_as_its_own_host_uid(self):
        sids = [self.create(), self.create()]
        uids = []
        for sid in sids:
            # A second process of the sandbox's, started the way sandboxed code starts them.
            self.ok(self.exec(sid, 'sh', '-c', 'setsid sleep 600 </dev/null >/dev/null 2>&1 &'))
            uid = host_uid(sid)
            uids.append(uid)
            self.assertTrue(0x70000000 <= uid < 0x70000000 + 65536, f'host uid {uid} of {sid}')
            with self.assertRaises(KeyError, msg=f'host uid {uid} is an account of the host'):
                pwd.getpwuid(uid)
            cp = S.run(['getent', 'passwd', str(uid)])
            self.assertEqual(cp.returncode, 2, f'host uid {uid} is an account of the test system: {cp.stdout}')

            # Every process in the unit, the container's too, as the host sees them.
            seen = {pid: secutil.proc_uids(pid) for pid in self.unit_pids(sid)}
            seen = {pid: u for pid, u in seen.items() if u is not None}
            self.assertGreaterEqual(len(seen), 2, f'processes of {sid}: {seen}')
            self.assertEqual(set(seen.values()), {(uid,) * 4}, f'uids of the processes of {sid}')
            self.assertIn(self.host_pid_of(sid, 'sleep'), seen)
            self.assertIn(self.host_pid_of(sid, '--connect'), seen)

            # Inside: still uid 1000, the only uid mapped, and /work is its.
            cp = self.ok(self.exec(sid, 'sh', '-c', 'id -u; id -g; cat /proc/self/uid_map; '
                                   'echo made by exec > /work/f; stat -c %u /work /work/f'))
            self.assertEqual(cp.stdout.split(), ['1000', '1000', '1000', str(uid), '1', '1000', '1000'])
        self.assertNotEqual(uids[0], uids[1], 'two sandboxes share a host uid')

        # The files API works and what it and the execs made belongs to the sandbox's uid.
        for sid, uid in zip(sids, uids):
            res = busclient.run_script(S, f'''
s = sandbox({sid!r})
wr = call(s, "WriteFile", "api.txt", dbus.ByteArray(b"made by WriteFile"), opts())
rd = call(s, "ReadFile", "/work/f", dbus.UInt64(0), dbus.UInt64(0))
emit({{"wr": wr, "rd": rd}})
''', timeout=120)
            self.assertIn('ok', res['wr'], res['wr'])
            got = res['rd']['ok']
            got = got[0] if isinstance(got, list) else got
            self.assertEqual(bytes.fromhex(got['bytes']), b'made by exec\n')
            root = f'/proc/{self.host_pid_of(sid, "--connect")}/root/work'
            for name in ('.', 'f', 'api.txt'):
                st = os.stat(os.path.join(root, name))
                self.assertEqual((st.st_uid, st.st_gid), (uid, uid), f'owner of /work/{name} of {sid} on the host')
            cp = self.ok(self.exec(sid, 'cat', '/work/api.txt'))
            self.assertEqual(cp.stdout, 'made by WriteFile')


    def test_no_user_namespace_and_no_capability_for_the_sandbox(self):
        # The Docker profile lets unshare(CLONE_NEWUSER) through for the agent, which then
        # loads the whole policy itself: the sandbox gets the policy's EUSERS.
        sid = self.create()
        cp = self.exec(sid, 'unshare', '-U', 'true')
        self.assertNotEqual(cp.returncode, 0, 'a Docker sandbox made a user namespace')
        self.assertIn('Too many users', cp.stderr)
        cp = self.ok(self.exec(sid, 'sh', '-c', 'grep -E "^(CapPrm|CapEff|CapBnd|CapAmb):" /proc/self/status'))
        caps = dict(line.split(':', 1) for line in cp.stdout.splitlines())
        self.assertEqual({k: int(v, 16) for k, v in caps.items()},
                         {'CapPrm': 0, 'CapEff': 0, 'CapBnd': 0, 'CapAmb': 0}, cp.stdout)


class Lifecycle(Base):

    def test_work_directory_persists_across_execs(self):
        sid = self.create()
        cp = self.ok(self.exec(sid, 'pwd'))
        self.assertEqual(cp.stdout, '/work\n')
        self.ok(self.exec(sid, 'sh', '-c', 'echo "written by exec 1" > note.txt'))
        cp = self.ok(self.exec(sid, 'cat', '/work/note.txt'))
        self.assertEqual(cp.stdout, 'written by exec 1\n')
        # On disk: the sandbox's workspace, as a bwrap sandbox's (test_workspaces).
        cp = self.ok(self.exec(sid, 'sh', '-c', 'grep " /work " /proc/mounts; stat -c %u /work'))
        self.assertIn('btrfs', cp.stdout, '/work is not the workspace')
        self.assertTrue(cp.stdout.endswith('\n1000\n'), cp.stdout)
        sid = self.create('--storage=tmpfs', '--memory=256M', '--disk=64M')
        cp = self.ok(self.exec(sid, 'sh', '-c', 'grep " /work " /proc/mounts'))
        self.assertIn('tmpfs', cp.stdout, '/work is not a tmpfs')

    def test_destroy_leaves_no_container_unit_or_process(self):
        sid = self.create()
        self.ok(self.exec(sid, 'sh', '-c', 'setsid sleep 600 </dev/null >/dev/null 2>&1 &'))
        self.assertIn(self.container(sid), self.containers())
        props = S.show(self.unit(sid), 'ControlGroup', 'ActiveState')
        self.assertEqual(props['ActiveState'], 'active')
        cgdir = S.cgroup_dir(props['ControlGroup'])
        pids = self.unit_pids(sid)
        self.assertTrue(pids, f'no process in {cgdir}')
        started = {pid: _proc_starttime(pid) for pid in pids}

        self.ok(self.ctl('destroy', sid))

        self.assert_gone(sid)
        alive = [pid for pid, st in started.items() if st is not None and _proc_starttime(pid) == st]
        self.assertEqual(alive, [], f'processes of the sandbox still alive after destroy: {alive}')
        self.assertFalse(os.path.exists(cgdir), f'{cgdir} still exists after destroy')
        self.assertEqual(self.ctl('status', sid).returncode, 1, 'status of a destroyed sandbox should fail')

    def test_lifetime_timeout_destroys_sandbox_and_container(self):
        start = time.monotonic()
        sid = self.create('--timeout', '2')
        self.assertIn(self.container(sid), self.containers())
        self.assertTrue(self.wait_gone(sid, 30), 'a Docker sandbox created with --timeout 2 is there after 30 s')
        self.assertGreaterEqual(time.monotonic() - start, 1.5, 'destroyed before its lifetime')
        self.assert_gone(sid)

    def test_run_is_ephemeral(self):
        before_units, before_containers = self.units(), self.containers()
        cp = self.ok(self.ctl('run', '--template', TEMPLATE, '--', 'sh', '-c', 'echo out; echo err >&2'))
        self.assertEqual(cp.stdout, 'out\n')
        self.assertIn('err', cp.stderr)
        cp = self.ctl('run', '--template', TEMPLATE, '--', 'sh', '-c', 'exit 7')
        self.assertEqual(cp.returncode, 7)
        self.assertEqual(self.units(), before_units, 'run left a unit behind')
        deadline = time.monotonic() + 10
        while self.containers() != before_containers and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.containers(), before_containers, 'run left a container behind')

    def test_template_listed_as_docker(self):
        cp = self.ok(self.ctl('templates', '--json'))
        doc = json.loads(cp.stdout)
        rows = doc if isinstance(doc, list) else doc.get('templates', doc)
        text = json.dumps(rows)
        self.assertIn(TEMPLATE, text, text)
        self.assertIn('docker', text, text)
        cp = self.ok(self.ctl('status', self.create(), '--json'))
        self.assertIn(TEMPLATE, cp.stdout)


class Inside(Base):
    """What the code in a Docker sandbox sees; one sandbox for all of them."""

    sid = None

    @classmethod
    def setUpClass(cls):
        cp = S.sandboxctl('create', '--template', TEMPLATE, timeout=120)
        if cp.returncode != 0:
            raise AssertionError(f'sandboxctl create --template {TEMPLATE} failed: {cp.stderr}\n'
                                 + S.journal(units=('sandboxd.service',))[-3000:])
        cls.sid = cp.stdout.strip()

    @classmethod
    def tearDownClass(cls):
        if cls.sid:
            S.sandboxctl('destroy', cls.sid, timeout=120)

    def test_only_loopback_network(self):
        cp = self.ok(self.exec(self.sid, 'cat', '/proc/net/dev'))
        ifaces = {line.split(':')[0].strip() for line in cp.stdout.splitlines()[2:] if ':' in line}
        self.assertEqual(ifaces, {'lo'})

    def test_runs_as_uid_1000(self):
        cp = self.ok(self.exec(self.sid, 'sh', '-c', 'id -u; id -g'))
        self.assertEqual(cp.stdout.split(), ['1000', '1000'])

    def test_root_is_read_only_work_and_tmp_writable(self):
        for p in ('/usr/probe', '/etc/probe', '/probe', '/bin/probe'):
            cp = self.exec(self.sid, 'touch', p)
            self.assertNotEqual(cp.returncode, 0, f'touch {p} succeeded')
        cp = self.ok(self.exec(self.sid, 'sh', '-c', 'grep -E "^[^ ]+ / " /proc/mounts'))
        self.assertRegex(cp.stdout, r'\sro[,\s]', f'/ is not mounted read-only: {cp.stdout}')
        self.ok(self.exec(self.sid, 'sh', '-c', 'echo x > /work/w && echo y > /tmp/t && cat /work/w /tmp/t'))

    def test_exit_status_env_workdir_stdin(self):
        self.assertEqual(self.exec(self.sid, 'sh', '-c', 'exit 42').returncode, 42)
        self.assertEqual(self.exec(self.sid, 'no-such-command-here').returncode, 127)
        cp = self.ok(self.exec(self.sid, 'sh', '-c', 'echo "$GREETING"; pwd',
                               opts=('--env', 'GREETING=hello there', '--workdir', '/tmp')))
        self.assertEqual(cp.stdout, 'hello there\n/tmp\n')
        cp = self.ok(self.exec(self.sid, 'sh', '-c', 'read a b; echo $((a * b))', input='6 7\n'))
        self.assertEqual(cp.stdout, '42\n')

    def test_output_is_captured_and_capped(self):
        cp, data, error = S.bus_call(harness.BUS_NAME, self.object_path(self.sid), harness.SANDBOX_IFACE,
                                     'Exec', 'asa{sv}', '3', 'sh', '-c',
                                     'head -c 100000 /dev/zero | tr "\\0" x; echo err >&2',
                                     '1', 'OutputMax', 't', '1000')
        self.assertIsNone(error, cp.stderr[-2000:])
        status, out, err, info = data
        self.assertEqual(status, 0)
        self.assertEqual(len(out), 1000)
        self.assertEqual(info['Truncated']['data'], True, info)
        self.assertEqual(info['StdoutBytes']['data'], 100000, info)


class Files(Base):
    """Upload/Download and WriteFile/ReadFile through D-Bus (a client in the test system)."""

    def test_round_trip(self):
        sid = self.create()
        d = tempfile.mkdtemp(prefix='docker-files-', dir=S.workdir)
        self.addCleanup(shutil.rmtree, d, ignore_errors=True)
        src = os.path.join(d, 'in.bin')
        data = os.urandom(8 * MiB + 12345)
        with open(src, 'wb') as f:
            f.write(data)
        want = hashlib.sha256(data).hexdigest()
        small = os.urandom(4096)
        res = busclient.run_script(S, f'''
s = sandbox({sid!r})
src = os.open({src!r}, os.O_RDONLY)
up = call(s, "Upload", "in/big.bin", fd(src), opts(CreateParents=True), timeout=120)
os.close(src)
r, w = os.pipe()
reader = PipeReader(r)
down = call(s, "Download", "/work/in/big.bin", fd(w), opts(), timeout=120)
os.close(w)
down["pipe"] = reader.result(timeout=60)
wr = call(s, "WriteFile", "small.bin", dbus.ByteArray(bytes.fromhex({small.hex()!r})), opts())
rd = call(s, "ReadFile", "/work/small.bin", dbus.UInt64(0), dbus.UInt64(0))
emit({{"up": up, "down": down, "wr": wr, "rd": rd}})
''', timeout=300)
        self.assertIn('ok', res['up'], res['up'])
        self.assertIn('ok', res['down'], res['down'])
        self.assertEqual(res['down']['pipe']['sha256'], want, 'Download differs from what was uploaded')
        self.assertIn('ok', res['wr'], res['wr'])
        self.assertIn('ok', res['rd'], res['rd'])
        got = res['rd']['ok']
        got = got[0] if isinstance(got, list) else got
        self.assertEqual(bytes.fromhex(got['bytes']), small, 'ReadFile differs from WriteFile')
        # The sandboxed code sees the same bytes.
        cp = self.ok(self.exec(sid, 'sha256sum', '/work/in/big.bin'))
        self.assertEqual(cp.stdout.split()[0], want)


class Pause(Base):

    def counter_value(self, pid):
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

    def test_pause_stops_counter_and_resume_continues(self):
        sid = self.create()
        self.ok(self.exec(sid, 'sh', '-c', f'{COUNTER} </dev/null >/dev/null 2>&1 &'))
        pid = self.host_pid_of(sid, 'echo $i > /work/c')
        v = self.wait_counter_moves(pid, 3)

        self.ok(self.ctl('pause', sid))
        self.assertEqual(self.bus_property(sid, 'State'), 'paused')
        paused_at = self.counter_value(pid)
        time.sleep(1.0)
        self.assertEqual(self.counter_value(pid), paused_at, 'the counter advanced while paused')
        self.assertGreaterEqual(paused_at, v)
        cp, _data, error = S.bus_call(harness.BUS_NAME, self.object_path(sid), harness.SANDBOX_IFACE,
                                      'Exec', 'asa{sv}', '1', 'true', '0')
        self.assertEqual(error, E + 'NotRunning', cp.stderr[-1000:])

        self.ok(self.ctl('resume', sid))
        self.assertEqual(self.bus_property(sid, 'State'), 'running')
        self.wait_counter_moves(pid, paused_at)
        self.assert_exec_works(sid, 'after resume')


class Failures(Base):
    """Docker down or the image missing: a clear error, nothing left, bwrap goes on."""

    def create_fails(self, template, *needles):
        """CreateSandbox TEMPLATE fails with SandboxFailed saying NEEDLES, leaving nothing.
        (While Docker is down its containers cannot be listed: test_docker_down compares them
        once it is back.)"""
        docker_up = S.docker_unavailable is None
        before_units = self.units()
        before_containers = self.containers() if docker_up else None
        start = time.monotonic()
        cp, _data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                      'CreateSandbox', 'sa{sv}', template, '0', timeout=120)
        took = time.monotonic() - start
        self.assertNotEqual(cp.returncode, 0, f'CreateSandbox {template} succeeded: {cp.stdout}')
        self.assertEqual(error, E + 'SandboxFailed', cp.stderr[-1500:])
        message = next((l for l in cp.stderr.splitlines() if l.startswith('Call failed')), cp.stderr)
        for n in needles:
            self.assertRegex(message, n, f'the error does not say what is wrong: {message!r}')
        self.assertLess(took, 60, f'CreateSandbox took {took:.1f}s to fail')
        self.assertEqual(self.units(), before_units, 'a unit was left behind')
        if docker_up:
            self.assertEqual(self.containers(), before_containers, 'a container was left behind')
        cp = self.ctl('create', '--template', template)
        self.assertEqual(cp.returncode, 1, f'sandboxctl create --template {template}: {cp.stdout}')
        for n in needles:
            self.assertRegex(cp.stderr, n, f'sandboxctl says: {cp.stderr!r}')
        self.assertEqual(self.units(), before_units, 'a unit was left behind')
        self.assert_serving()

    def test_image_missing(self):
        self.create_fails(harness.DOCKER_MISSING_TEMPLATE, re.escape(harness.DOCKER_MISSING_IMAGE.split(':')[0]))
        # And Docker sandboxes still work.
        self.assert_exec_works(self.create(), 'after a create with a missing image')

    def test_docker_down(self):
        before = self.containers()
        problems = S.stop_docker()
        self.assertEqual(problems, [], 'stopping dockerd found problems')
        try:
            self.create_fails(TEMPLATE, r'(?i)docker')
        finally:
            S.start_docker()
        self.assertEqual(self.containers(), before, 'a create while Docker was down left a container')
        # Docker is back: so are Docker sandboxes.
        sid = self.create()
        self.assert_exec_works(sid, 'after Docker came back')
        self.ok(self.ctl('destroy', sid))
        self.assert_gone(sid)


class Restart(Base):
    """kill -9 of sandboxd: Docker sandboxes are adopted, no container is orphaned."""

    DROPIN = '/run/systemd/system/sandboxd.service.d/60-docker-restart.conf'

    @classmethod
    def setUpClass(cls):
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

    def main_pid(self):
        pid = int(S.show('sandboxd.service', 'MainPID')['MainPID'])
        self.assertGreater(pid, 0, 'sandboxd.service has no MainPID')
        return pid

    def kill9(self):
        pid = self.main_pid()
        self.ok(S.run(['kill', '-KILL', str(pid)]))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            info = S.show('sandboxd.service', 'ActiveState', 'MainPID')
            if info['ActiveState'] == 'active' and info['MainPID'] not in ('0', str(pid)):
                if S.busctl('call', harness.BUS_NAME, harness.MANAGER_PATH,
                            'org.freedesktop.DBus.Peer', 'Ping').returncode == 0:
                    return
            time.sleep(0.1)
        self.fail(f'sandboxd did not come back within 30s: {info}')

    def listed(self):
        return {s['id'] for s in json.loads(self.ok(self.ctl('--json', 'list')).stdout)}

    def test_kill9_adopts_docker_sandbox(self):
        sid = self.create()
        self.ok(self.exec(sid, 'sh', '-c', 'echo kept > /work/note'))
        cp = self.ok(self.exec(sid, 'sh', '-c', 'sleep 1000 </dev/null >/dev/null 2>&1 & echo $!'))
        inner = cp.stdout.strip()
        started = self.ok(self.exec(sid, 'cat', f'/proc/{inner}/stat')).stdout.rsplit(')', 1)[1].split()[19]
        cid = self.inspect(sid)['Id']

        self.kill9()

        self.assertIn(sid, self.listed())
        self.assertEqual(self.bus_property(sid, 'State'), 'running')
        self.assert_exec_works(sid, 'after kill -9 of sandboxd')
        self.assertEqual(self.ok(self.exec(sid, 'cat', '/work/note')).stdout, 'kept\n')
        now = self.ok(self.exec(sid, 'cat', f'/proc/{inner}/stat')).stdout.rsplit(')', 1)[1].split()[19]
        self.assertEqual(now, started, 'the background process is not the same one any more')
        self.assertEqual(self.inspect(sid)['Id'], cid, 'the container was replaced')
        self.ok(self.ctl('destroy', sid))
        self.assert_gone(sid)

    def test_kill9_during_create_leaves_no_orphan(self):
        before = self.containers()
        p = subprocess.Popen(S.wrap([S.paths.sandboxctl, 'create', '--template', TEMPLATE]),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        # Kill the daemon as soon as the container exists (the sandbox may or may not be done).
        deadline = time.monotonic() + 60
        while not (self.containers() - before):
            self.assertLess(time.monotonic(), deadline, 'no container appeared for a create')
            time.sleep(0.02)
        self.kill9()
        out, _err = p.communicate(timeout=60)
        sid = out.decode().strip()
        if p.returncode == 0 and sid:
            self.addCleanup(lambda: S.sandboxctl('destroy', sid, timeout=120))
        # Every container is a listed sandbox's; an orphan is removed (give the daemon time).
        deadline = time.monotonic() + 30
        while True:
            listed = self.listed()
            orphans = {c for c in self.containers() - before if c[len('sandbox-'):] not in listed}
            units = {u for u in self.units() if u.split('.')[0][len('sandbox-'):] not in listed}
            if not orphans and not units:
                break
            self.assertLess(time.monotonic(), deadline,
                            f'orphans after kill -9 during create: containers {orphans}, units {units}')
            time.sleep(0.3)
        for s in listed & {c[len('sandbox-'):] for c in self.containers() - before}:
            self.assert_exec_works(s, 'adopted after kill -9 during its create')


if __name__ == '__main__':
    unittest.main(verbosity=2)
