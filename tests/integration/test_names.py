#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Named sandboxes (issue 14, item 1), on the real daemon: a Name unique among the live
sandboxes of one owner (and tenant), SandboxExists for a second one, ReuseExisting for
"get or create", the name wherever an ID is taken, kept across a restart of sandboxd and
given to a sandbox handed out from the warm pool."""

import json
import os
import sys
import time
import unittest

import harness
from harness import BUS_NAME, MANAGER_IFACE, MANAGER_PATH, POOLED_TEMPLATE

E = 'io.sandboxd.Sandbox1.'
S = None
_owned = False


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()


def tearDownModule():
    harness.module_teardown(_owned)


class Base(harness.SandboxTestCase):
    def create_named(self, name, *opts, template=None):
        return self.create('--name', name, *opts, template=template)

    def bus_create(self, template='shell', **options):
        """CreateSandbox as root through busctl, options as {name: (signature, value)}:
        (id or None, the error's name or None)."""
        args = [str(len(options))]
        for k, (sig, value) in options.items():
            args += [k, sig, str(value).lower() if sig == 'b' else str(value)]
        cp, data, error = S.bus_call(BUS_NAME, MANAGER_PATH, MANAGER_IFACE, 'CreateSandbox', 'sa{sv}', template,
                                     *args)
        if data:
            self.addCleanup(self.destroy_quietly, S, data[0])
            return data[0], None
        self.assertIsNotNone(error, f'CreateSandbox failed without an error name: {cp.stderr[-2000:]}')
        return None, error

    def name_of(self, sid):
        return self.bus_property(sid, 'Name')


class Names(Base):
    def test_name_is_shown_and_takes_the_place_of_the_id(self):
        sid = self.create_named('agent-1')
        self.assertEqual(self.name_of(sid), 'agent-1')
        self.assertEqual(self.status(sid)['name'], 'agent-1')
        self.assertEqual(self.status('agent-1')['id'], sid, 'status by name')
        cp = self.ok(self.exec('agent-1', 'sh', '-c', 'echo by-name > /work/f; cat /work/f'))
        self.assertEqual(cp.stdout, 'by-name\n')
        self.assertEqual(self.ok(self.exec(sid, 'cat', '/work/f')).stdout, 'by-name\n', 'not the same sandbox')

        rows = json.loads(self.ok(self.ctl('list', '--json')).stdout)
        self.assertEqual([r['name'] for r in rows if r['id'] == sid], ['agent-1'])
        table = self.ok(self.ctl('list')).stdout
        header, row = table.splitlines()[0], next(l for l in table.splitlines() if l.startswith(sid))
        self.assertIn('NAME', header.split())
        self.assertEqual(row.split()[1], 'agent-1', table)

        # GetSandbox takes it too, and names the object by the id.
        _cp, data, error = S.bus_call(BUS_NAME, MANAGER_PATH, MANAGER_IFACE, 'GetSandbox', 's', 'agent-1')
        self.assertIsNone(error)
        self.assertEqual(data, [f'{MANAGER_PATH}/sandbox/{sid}'])

        # A sandbox without a name has "" for it; destroying by name works.
        plain = self.create()
        self.assertEqual(self.name_of(plain), '')
        self.ok(self.ctl('destroy', 'agent-1'))
        self.assertIsNotNone(self.wait_gone(sid, 30))
        cp = self.ctl('status', 'agent-1')
        self.assertNotEqual(cp.returncode, 0)

    def test_second_create_of_a_name_is_refused(self):
        sid = self.create_named('dup')
        other, error = self.bus_create(Name=('s', 'dup'))
        self.assertIsNone(other)
        self.assertEqual(error, E + 'SandboxExists')
        cp = self.ctl('create', '--name', 'dup')
        self.assertEqual(cp.returncode, 1, cp.stdout)
        self.assertIn(sid, cp.stderr, 'the message names the sandbox that has the name')
        # Another name is free; the name is free again once its sandbox is gone.
        self.create_named('dup2')
        self.ok(self.ctl('destroy', sid))
        again = self.create_named('dup')
        self.assertNotEqual(again, sid)

    def test_reuse_existing_returns_the_running_one(self):
        sid = self.create_named('worker', '--memory', '96M')
        self.ok(self.exec(sid, 'sh', '-c', 'echo state > /work/state'))
        # The same one, as it is: the call's own options change nothing.
        self.assertEqual(self.create_named('worker', '--reuse', '--memory', '200M'), sid)
        self.assertEqual(self.status(sid)['memory_max'], 96 << 20)
        again, error = self.bus_create(Name=('s', 'worker'), ReuseExisting=('b', True))
        self.assertEqual((again, error), (sid, None))
        self.assertEqual(self.ok(self.exec('worker', 'cat', '/work/state')).stdout, 'state\n')
        listed = [r['id'] for r in json.loads(self.ok(self.ctl('list', '--json')).stdout) if r['name'] == 'worker']
        self.assertEqual(listed, [sid], 'ReuseExisting made a second sandbox')
        # Of another template it is not the one asked for.
        other, error = self.bus_create('python', Name=('s', 'worker'), ReuseExisting=('b', True))
        self.assertEqual((other, error), (None, E + 'SandboxExists'))
        # Without one of that name: created.
        fresh, error = self.bus_create(Name=('s', 'worker-2'), ReuseExisting=('b', True))
        self.assertIsNone(error)
        self.assertNotEqual(fresh, sid)
        self.assertEqual(self.name_of(fresh), 'worker-2')

    def test_concurrent_get_or_create_makes_one(self):
        """Several "get or create" at once while the first still starts: all get the one."""
        procs = [self.popen_ctl('create', '--name', 'racer', '--reuse') for _ in range(4)]
        ids = set()
        for p in procs:
            out, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 0, err)
            ids.add(out.decode().strip())
        self.assertEqual(len(ids), 1, f'more than one sandbox for one name: {ids}')
        (sid,) = ids
        self.addCleanup(self.destroy_quietly, S, sid)
        self.assert_exec_works('racer')

    def test_invalid_names_are_refused(self):
        for bad in ('', 'a b', 'a/b', 'ü', 'x' * 65, '0123456789abcdef', 'semi;colon'):
            sid, error = self.bus_create(Name=('s', bad))
            self.assertEqual((sid, error), (None, E + 'InvalidOption'), f'Name {bad!r}')
        _cp, _data, error = S.bus_call(BUS_NAME, MANAGER_PATH, MANAGER_IFACE, 'CreateSandbox', 'sa{sv}', 'shell',
                                       '1', 'Name', 'u', '7')
        self.assertEqual(error, E + 'InvalidOption')
        self.assertNotEqual(self.ctl('create', '--reuse').returncode, 0, '--reuse without --name')
        # Longest allowed, and every kind of character there is.
        sid = self.create_named('A-z_0.9' + 'x' * 57)
        self.assertEqual(self.name_of(sid), 'A-z_0.9' + 'x' * 57)
        # An unknown name, or a string that is neither: no sandbox.
        for what in ('nobody-has-this-name', 'x' * 200, 'a b'):
            _cp, _data, error = S.bus_call(BUS_NAME, MANAGER_PATH, MANAGER_IFACE, 'GetSandbox', 's', what)
            self.assertEqual(error, E + 'NoSuchSandbox', what)

    def test_pooled_sandbox_gets_the_name(self):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(S.sandbox_scopes(include_pool=True)) == len(S.sandbox_scopes()):
            time.sleep(0.1)
        pooled = set(S.sandbox_scopes(include_pool=True)) - set(S.sandbox_scopes())
        self.assertTrue(pooled, 'the harness\'s pool was not filled')
        sid = self.create_named('from-pool', template=POOLED_TEMPLATE)
        self.assertIn(f'sandbox-{sid}.scope', pooled, 'not handed out from the pool')
        self.assertEqual(self.name_of(sid), 'from-pool')
        self.assertEqual(self.create_named('from-pool', '--reuse', template=POOLED_TEMPLATE), sid)
        self.assert_exec_works('from-pool')


class ManyNames(Base):
    def test_list_shows_the_names_of_many(self):
        """sandboxctl list asks each sandbox's Name, many questions at once (at most 64 in
        flight: the bus daemon's default limit of replies one connection awaits is 128):
        all the answers come back, each to its sandbox."""
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'security'))
        import secutil
        secutil.S = S
        n = 140
        res = secutil.bus([secutil.call(MANAGER_PATH, MANAGER_IFACE, 'CreateSandbox', 'sa{sv}', 'shell',
                                        {'Name': secutil.v('s', f'many-{i}')}) for i in range(n)], timeout=600)
        ids = [r['reply'][0] for r in res if 'reply' in r]
        self.addCleanup(secutil.bus, [secutil.call(f'{MANAGER_PATH}/sandbox/{sid}', harness.SANDBOX_IFACE, 'Destroy')
                                      for sid in ids], timeout=600)
        self.assertEqual(len(ids), n, [r for r in res if 'reply' not in r][:3])
        rows = {r['id']: r['name'] for r in json.loads(self.ok(self.ctl('list', '--json')).stdout)}
        self.assertEqual({sid: rows.get(sid) for sid in ids}, {sid: f'many-{i}' for i, sid in enumerate(ids)})


class NamesAcrossRestart(Base):
    def test_name_survives_a_restart_of_sandboxd(self):
        sid = self.create_named('survivor')
        pid = S.show('sandboxd.service', 'MainPID')['MainPID']
        self.ok(S.systemctl('restart', 'sandboxd.service', timeout=90))
        deadline = time.monotonic() + 30
        while S.show('sandboxd.service', 'MainPID')['MainPID'] in ('0', pid) or \
                S.busctl('call', BUS_NAME, MANAGER_PATH, 'org.freedesktop.DBus.Peer', 'Ping').returncode != 0:
            self.assertLess(time.monotonic(), deadline, 'sandboxd did not come back')
            time.sleep(0.1)
        self.assertEqual(self.name_of(sid), 'survivor')
        self.assert_exec_works('survivor', 'by name after the restart')
        self.assertEqual(self.create_named('survivor', '--reuse'), sid)
        _sid, error = self.bus_create(Name=('s', 'survivor'))
        self.assertEqual(error, E + 'SandboxExists', 'the adopted name is not taken')


if __name__ == '__main__':
    unittest.main(verbosity=2)
