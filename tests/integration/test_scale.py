#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Many sandboxes at once (issue 17): COUNT sandboxes (3,000, the issue's figure; 500
under AddressSanitizer: the same paths, at a sixth of the count, so that CI's two passes
stay within their time) created side by side over varlink (bench/bench_scale.py goes to 10,000); their scopes
spread over the sub-slices sandbox-xx.slice of sandbox.slice as systemctl shows them;
ListSandboxes paged (Offset, Limit) and filtered (State, Template, Name) on both, with
bad filters refused; each costing sandboxd one descriptor and PID 1 one (counted over
all of them) and the host one process, its agent; then all destroyed, and no unit,
process or listing left. And across a kill -9 of sandboxd: sandboxes in their sub-slices
are adopted; an ephemeral one (whose control socket is not kept in systemd's fd store)
is stopped, as before; an idle sandbox's one process, its agent, is adopted by the pid its
state file names and stopped by it, leaving nothing.
"""

import json
import os
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

S = None
OWNED = False
# A sandboxd built with AddressSanitizer gets a smaller count: the same paths run, at a
# sixth of the sandboxes (setUpModule decides from the binary).
COUNT = 3000
COUNT_SANITIZED = 500
THREADS = 8
IFACE = harness.VARLINK_IFACE
MGR = ('io.sandboxd.Sandbox1', '/io/sandboxd/Sandbox1', 'io.sandboxd.Sandbox1.Manager')


def setUpModule():
    global S, OWNED, COUNT
    S, OWNED = harness.module_setup()
    cp = subprocess.run(['ldd', S.paths.sandboxd], capture_output=True, text=True)
    if 'libasan' in cp.stdout:
        COUNT = COUNT_SANITIZED


def tearDownModule():
    harness.module_teardown(OWNED)


def in_parallel(items, fn):
    """fn(connection, item) for every item, THREADS varlink connections side by side;
    returns the results in the order of items (an exception is re-raised)."""
    results = [None] * len(items)
    errors = []

    def worker(k):
        try:
            with S.varlink() as c:
                for i in range(k, len(items), THREADS):
                    results[i] = fn(c, items[i])
        except BaseException as e:  # noqa: BLE001 (re-raised below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def vl(c, method, parameters=None):
    replies, error, params = c.call(f'{IFACE}.{method}', parameters or {})
    if error:
        raise AssertionError(f'{method} {parameters}: {error} {params}')
    return replies[-1]


def vl_list(flt=None):
    params = {} if flt is None else {'filter': flt}
    replies, error, eparams = S.varlink_call('ListSandboxes', params)
    return replies, error, eparams


def dbus_list(flt):
    """ListSandboxesFiltered(a{sv}) → (ids in order, total); or raises with the error name."""
    args = []
    for k, (sig, val) in flt.items():
        args += [k, sig, str(val)]
    cp, data, error = S.bus_call(*MGR, 'ListSandboxesFiltered', 'a{sv}', str(len(flt)), *args)
    if error:
        return None, error
    return ([row[0] for row in data[0]], data[1]), None


def descriptors():
    """How many descriptors sandboxd and PID 1 of the system hold."""
    pid = S.show('sandboxd.service', 'MainPID')['MainPID']
    return tuple(len(S.run(['ls', f'/proc/{p}/fd'], check=True).stdout.split()) for p in (pid, 1))


class Scale(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.before = {s['id'] for s in vl_list()[0][-1]['sandboxes']}
        cls.fds_before = descriptors()
        t0 = time.monotonic()
        # Every tenth one named: the Name filter finds exactly it.
        items = [f'scale-{i}' if i % 10 == 0 else None for i in range(COUNT)]
        cls.ids = in_parallel(items, lambda c, name: vl(c, 'CreateSandbox', {
            'template': 'shell', 'options': {'Name': name} if name else {}})['id'])
        cls.names = {name: sid for name, sid in zip(items, cls.ids) if name}
        cls.create_seconds = time.monotonic() - t0
        print(f'\n# {COUNT} sandboxes created in {cls.create_seconds:.1f} s, {THREADS} in flight',
              file=sys.stderr)
        # PID 1 stores each control socket when it reads sandboxd's notification, a moment
        # after the create answered.
        deadline = time.monotonic() + 30
        cls.fds_after = descriptors()
        while cls.fds_after[1] < cls.fds_before[1] + COUNT and time.monotonic() < deadline:
            time.sleep(0.5)
            cls.fds_after = descriptors()

    @classmethod
    def tearDownClass(cls):
        left = [sid for sid in cls.ids if sid]
        if left:
            in_parallel(left, lambda c, sid: c.call(f'{IFACE}.Destroy', {'id': sid}))

    def test_0_one_descriptor_each(self):
        """docs/WORKSPACES.md, "Descriptors": one descriptor an idle sandbox in sandboxd and
        one in PID 1 (its fd store), at this scale too (10,000 fit a hard limit of 20,000)."""
        grown = [a - b for a, b in zip(self.fds_after, self.fds_before)]
        print(f'\n# descriptors per idle sandbox over {COUNT}: sandboxd {grown[0] / COUNT:.3f}, '
              f'PID 1 {grown[1] / COUNT:.3f}', file=sys.stderr)
        self.assertLessEqual(abs(grown[0] - COUNT), 10, f'sandboxd: {self.fds_before} -> {self.fds_after}')
        self.assertLessEqual(abs(grown[1] - COUNT), 10, f'PID 1: {self.fds_before} -> {self.fds_after}')

    def test_0_one_process_each(self):
        """docs/ARCHITECTURE.md, "Many sandboxes": an idle sandbox is one process, its
        agent (bwrap's monitor is gone once it is ready), at this scale too. Counted in
        sandbox.slice's cgroups, one walk."""
        top = S.cgroup_dir(S.show('sandbox.slice', 'ControlGroup')['ControlGroup'])
        ours = {f'sandbox-{sid}.scope' for sid in self.ids}
        deadline = time.monotonic() + 30
        while True:
            counts = {}
            for dirpath, _dirs, _files in os.walk(top):
                scope = os.path.basename(dirpath)
                if scope in ours:
                    try:
                        with open(os.path.join(dirpath, 'cgroup.procs')) as f:
                            counts[scope] = len(f.read().split())
                    except OSError:
                        pass
            if set(counts.values()) == {1} or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        many = {u: n for u, n in counts.items() if n != 1}
        print(f'\n# processes per idle sandbox over {COUNT}: {sum(counts.values()) / COUNT:.3f}', file=sys.stderr)
        self.assertEqual(len(counts), COUNT)
        self.assertEqual(many, {}, f'{len(many)} idle sandboxes hold other than one process')

    def test_1_scopes_spread_over_sub_slices(self):
        scopes = set(S.sandbox_scopes())
        want = {f'sandbox-{sid}.scope' for sid in self.ids}
        self.assertEqual(want - scopes, set(), 'created sandboxes without a scope')
        # As systemctl shows it: one sub-slice per id prefix, each in sandbox.slice, active.
        subs = S.subslices()
        prefixes = {sid[:2] for sid in self.ids}
        self.assertGreaterEqual(len(prefixes), 200, 'the ids should spread over most of the 256 prefixes')
        for p in prefixes:
            self.assertEqual(subs.get(f'sandbox-{p}.slice'), 'active', f'sandbox-{p}.slice: {subs}')
        slice_cg = S.show('sandbox.slice', 'ControlGroup')['ControlGroup']
        for sid in self.ids[:20]:
            props = S.show(f'sandbox-{sid}.scope', 'Slice', 'ControlGroup', 'MemoryMax', 'TasksMax')
            self.assertEqual(props['Slice'], f'sandbox-{sid[:2]}.slice', props)
            self.assertEqual(props['ControlGroup'], f'{slice_cg}/sandbox-{sid[:2]}.slice/sandbox-{sid}.scope')
            # Its own limits, as before.
            self.assertNotEqual(props['MemoryMax'], 'infinity', props)
            self.assertNotEqual(props['TasksMax'], 'infinity', props)
        sub = S.show(f'sandbox-{self.ids[0][:2]}.slice', 'Slice', 'ControlGroup')
        self.assertEqual(sub['Slice'], 'sandbox.slice', sub)
        # systemctl status of the slice tree names the scope under its sub-slice.
        cp = S.systemctl('status', f'sandbox-{self.ids[0][:2]}.slice')
        self.assertIn(f'sandbox-{self.ids[0]}.scope', cp.stdout)
        # A limit set on sandbox.slice holds for all of them: their cgroups are below its.
        old = S.show('sandbox.slice', 'TasksMax')['TasksMax']
        cp = S.systemctl('set-property', '--runtime', 'sandbox.slice', 'TasksMax=200000')
        self.assertEqual(cp.returncode, 0, cp.stderr)
        try:
            self.assertEqual(S.show('sandbox.slice', 'TasksMax')['TasksMax'], '200000')
            pids = os.path.join(harness.CGROUP_FS, 'pids', slice_cg.lstrip('/'))
            if not os.path.isdir(pids):  # unified
                pids = S.cgroup_dir(slice_cg)
            with open(os.path.join(pids, 'pids.max')) as f:
                self.assertEqual(f.read().strip(), '200000')
            scope = os.path.join(pids, f'sandbox-{self.ids[0][:2]}.slice', f'sandbox-{self.ids[0]}.scope')
            self.assertTrue(os.path.isdir(scope), scope)
        finally:
            S.systemctl('set-property', '--runtime', 'sandbox.slice', f'TasksMax={old}')

    def test_2_varlink_paging(self):
        seen = []
        offset = 0
        total = None
        while True:
            replies, error, params = vl_list({'Template': 'shell', 'Offset': offset, 'Limit': 97})
            self.assertIsNone(error, params)
            page = replies[-1]
            if total is None:
                total = page['total']
            self.assertEqual(page['total'], total, 'the total changed between pages')
            self.assertLessEqual(len(page['sandboxes']), 97)
            seen += [s['id'] for s in page['sandboxes']]
            offset += 97
            if offset >= total:
                break
        self.assertEqual(len(seen), len(set(seen)), 'a sandbox on two pages')
        self.assertEqual(len(seen), total)
        mine = [sid for sid in seen if sid in set(self.ids)]
        self.assertEqual(set(mine), set(self.ids))
        # In the order they were created (each thread's own creates come in its order).
        self.assertEqual([sid for sid in mine if sid in self.ids[::THREADS]], self.ids[::THREADS])
        # Without a filter: everything, no total (the reply of before).
        replies, error, _ = vl_list()
        self.assertIsNone(error)
        self.assertNotIn('total', replies[-1])
        self.assertTrue(set(self.ids) <= {s['id'] for s in replies[-1]['sandboxes']})

    def test_3_filters_both_faces(self):
        name, sid = next(iter(self.names.items()))
        replies, error, _ = vl_list({'Name': name})
        self.assertIsNone(error)
        self.assertEqual([s['id'] for s in replies[-1]['sandboxes']], [sid])
        self.assertEqual(replies[-1]['total'], 1)
        (ids, total), error = dbus_list({'Name': ('s', name)})
        self.assertIsNone(error)
        self.assertEqual((ids, total), ([sid], 1))

        (ids, total), error = dbus_list({'State': ('s', 'running'), 'Template': ('s', 'shell'),
                                         'Offset': ('t', 0), 'Limit': ('u', 10)})
        self.assertIsNone(error)
        self.assertEqual(len(ids), 10)
        self.assertGreaterEqual(total, COUNT)
        (ids, total), error = dbus_list({'State': ('s', 'paused')})
        self.assertIsNone(error)
        self.assertEqual(set(ids) & set(self.ids), set())
        (ids, total), error = dbus_list({'Template': ('s', 'no-such-template')})
        self.assertEqual((ids, total), ([], 0))
        # The last page: Offset past the end gives none, and the total still.
        (ids, total2), error = dbus_list({'Template': ('s', 'shell'), 'Offset': ('t', 1000000)})
        self.assertEqual(ids, [])
        self.assertGreaterEqual(total2, COUNT)

        # Someone else (uid 65534, not granted "manage") sees none of root's, on every page.
        cp = S.run(['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--', 'busctl', '--system',
                    '--json=short', 'call', *MGR, 'ListSandboxesFiltered', 'a{sv}', '1', 'Limit', 'u', '100'])
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(json.loads(cp.stdout)['data'], [[], 0])

        for flt in ({'Limit': ('u', 0)}, {'Limit': ('u', 10001)}, {'State': ('s', 'bogus')},
                    {'Bogus': ('s', 'x')}, {'Limit': ('s', '10')}, {'Template': ('s', '../x')}):
            _, error = dbus_list(flt)
            self.assertEqual(error, 'io.sandboxd.Sandbox1.InvalidOption', flt)
        for flt in ({'Limit': 0}, {'State': 'bogus'}, {'Bogus': 1}, {'Offset': -1}, {'Name': 5}):
            _, error, params = vl_list(flt)
            self.assertEqual(error, f'{IFACE}.InvalidOption', (flt, params))

    def test_4_destroyed_and_nothing_left(self):
        t0 = time.monotonic()
        results = in_parallel(self.ids, lambda c, sid: c.call(f'{IFACE}.Destroy', {'id': sid}))
        for sid, (_replies, error, params) in zip(self.ids, results):
            self.assertIsNone(error, f'Destroy {sid}: {params}')
        print(f'\n# {COUNT} sandboxes destroyed in {time.monotonic() - t0:.1f} s', file=sys.stderr)
        type(self).ids = []
        replies, error, _ = vl_list({'Template': 'shell'})
        self.assertEqual({s['id'] for s in replies[-1]['sandboxes']} - self.before, set())
        left = [u for u in S.sandbox_scopes() if u.endswith('.scope')]
        deadline = time.monotonic() + 30
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = [u for u in S.sandbox_scopes() if u.endswith('.scope')]
        self.assertEqual([u for u in left if u[len('sandbox-'):-len('.scope')] not in self.before], [])
        # No process left in any sub-slice (the pooled sandbox and older ones aside).
        keep = {f'sandbox-{sid}.scope' for sid in self.before} | set(S.sandbox_scopes(include_pool=True))
        for sub in S.subslices():
            cg = S.show(sub, 'ControlGroup')['ControlGroup']
            d = S.cgroup_dir(cg)
            for dirpath, dirs, files in os.walk(d) if d else ():
                if any(part in keep for part in dirpath.split('/')):
                    continue
                with open(os.path.join(dirpath, 'cgroup.procs')) as f:
                    self.assertEqual(f.read().split(), [], f'processes left in {dirpath}')



class RestartAdoption(harness.SandboxTestCase):

    @classmethod
    def setUpClass(cls):
        S.daemon_restart_on_failure(True)

    @classmethod
    def tearDownClass(cls):
        S.daemon_restart_on_failure(False)

    def the_agent_alone(self, sid):
        """The one process in an idle sandbox's unit, once bwrap's monitor is gone (killed
        as the sandbox became ready): its agent, sandbox-init, PID 1 of the sandbox's PID
        namespace and a child of the system's service manager. Its host pid."""
        deadline = time.monotonic() + 10
        while True:
            pids = self.unit_pids(sid)
            if len(pids) == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        cmdlines = {}
        for p in pids:
            try:
                with open(f'/proc/{p}/cmdline', 'rb') as f:
                    cmdlines[p] = f.read().replace(b'\0', b' ').decode(errors='replace')
            except OSError:
                pass
        self.assertEqual(len(pids), 1, f'the unit of idle sandbox {sid} holds {cmdlines}')
        (pid,) = pids
        self.assertIn('sandbox-init', cmdlines[pid])
        with open(f'/proc/{pid}/status') as f:
            status = dict(line.rstrip('\n').split(':\t', 1) for line in f if ':\t' in line)
        self.assertEqual(status['NSpid'].split()[-1], '1', status)
        with open(f'/proc/{status["PPid"]}/comm') as f:
            self.assertEqual(f.read().strip(), 'systemd', f'the agent\'s parent is pid {status["PPid"]}')
        return pid, int(status['NSpid'].split()[1])

    def test_idle_sandbox_is_its_agent_alone_across_kill9(self):
        """An idle bwrap sandbox keeps one process (docs/ARCHITECTURE.md, "Many
        sandboxes"); its state file names that agent, by which a sandboxd restarted after
        kill -9 adopts it, and stops it: nothing of it is left."""
        sid = self.create()
        agent, agent_ns = self.the_agent_alone(sid)
        with open(S.path(f'{S.state_dir}/sandboxes/{sid}.json')) as f:
            state = json.load(f)
        # The pid as sandboxd sees it (in the system's PID namespace), marked as the agent's:
        # a state file without the mark names the monitor of an older sandboxd.
        self.assertEqual((state['payload_pid'], state.get('pid_is_agent')), (agent_ns, True), state)
        self.assert_exec_works(sid)
        self.assertEqual(self.the_agent_alone(sid)[0], agent)

        since = time.time()
        S.kill9_daemon()
        self.assert_exec_works(sid, 'after kill -9')
        self.assertEqual(self.the_agent_alone(sid)[0], agent)
        self.assertNotIn(f'Not adopting sandbox {sid}', S.journal(units=('sandboxd.service',), since=since))

        unit = self.unit(sid)
        self.ok(self.ctl('destroy', sid))
        self.assertIsNotNone(self.wait_gone(sid, 30), f'{unit} outlived its destroy')
        self.assertFalse(S.unit_pids(unit), f'processes left in {unit}')
        self.assertFalse(os.path.exists(f'/proc/{agent}'), f'the agent (host pid {agent}) outlived its sandbox')

    def test_kill9_adopts_sub_slice_sandboxes_and_stops_ephemeral(self):
        sids = [self.create() for _ in range(3)]
        before = set(S.sandbox_scopes())
        run = self.popen_ctl('run', '--', 'sh', '-c', 'echo started; exec sleep 60')
        self.assertEqual(run.stdout.readline(), b'started\n')
        (eph,) = [u[len('sandbox-'):-len('.scope')] for u in set(S.sandbox_scopes()) - before]
        self.assertEqual(S.show(self.unit(eph), 'Slice')['Slice'], f'sandbox-{eph[:2]}.slice')

        since = time.time()
        S.kill9_daemon()

        for sid in sids:
            self.assert_exec_works(sid, 'after kill -9')
            self.assertEqual(S.show(self.unit(sid), 'Slice')['Slice'], f'sandbox-{sid[:2]}.slice')
        deadline = time.monotonic() + 30
        while self.exists(eph) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertFalse(self.exists(eph), 'the interrupted ephemeral sandbox outlived the restart')
        journal = S.journal(units=('sandboxd.service',), since=since)
        self.assertIn(f'Not adopting sandbox {eph}: it is ephemeral', journal)
        try:
            rc = run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.fail('sandboxctl run hangs after its sandboxd was killed')
        self.assertNotEqual(rc, 0)


if __name__ == '__main__':
    unittest.main(verbosity=2)
