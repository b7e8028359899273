#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Tenants (issue 14, item 6) by the real polkitd on the real bus: uid 65534 holding
io.sandboxd.Sandbox1.delegate (the HTTP bridge's part) creates sandboxes for tenants A and
B; acting for A (Manager.ActForTenant) it sees, finds and touches only A's, never B's,
although it owns both; the records carry the tenant; without delegate, naming a tenant is
refused. Names are unique per owner and tenant: other owners and other tenants may use
the same name. The same over varlink (ActForTenant there is the connection's): two
connections acting for two tenants never see or touch each other's sandboxes or
executions, and the refusals have the same names as on D-Bus."""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import polkitutil  # noqa: E402
import secutil  # noqa: E402
from polkitutil import grant_to_nobody  # noqa: E402
from secutil import DENIED, M, MGR, NOBODY, PROPS, SBX, Base, bus, call, sandbox_path, v, vcall  # noqa: E402

E = 'io.sandboxd.Sandbox1.'
VE = 'io.sandboxd.Sandbox.'
SPOOL_FILE = 'records.jsonl'
POLKIT = None


def setUpModule():
    global POLKIT
    POLKIT = polkitutil.setup_module()


def tearDownModule():
    polkitutil.teardown_module(POLKIT)


def create(template='shell', **options):
    return call(M, MGR, 'CreateSandbox', 'sa{sv}', template, {k: v('s', x) for k, x in options.items()})


def act_for(tenant):
    return call(M, MGR, 'ActForTenant', 's', tenant)


def exec_call(sid, *argv):
    return call(sandbox_path(sid), SBX, 'Exec', 'asa{sv}', list(argv), {})


class TenantBase(Base):
    rules = None

    @classmethod
    def setUpClass(cls):
        POLKIT.set_rules(cls.rules)

    def nobody(self, *calls):
        return bus(list(calls), uid=NOBODY)

    def created(self, res, what):
        self.assertIn('reply', res, f'{what}: {res}')
        sid = res['reply'][0]
        self.addCleanup(secutil.S.sandboxctl, 'destroy', sid, timeout=120)
        return sid

    def prop(self, sid, name):
        res = bus([call(sandbox_path(sid), PROPS, 'Get', 'ss', SBX, name)])[0]
        self.assertIn('reply', res, res)
        return res['reply'][0]

    def running(self, sid):
        return self.prop(sid, 'State') == 'running'


class DelegateGrant(TenantBase):
    """nobody holds delegate only: it may work for tenants, not for itself."""

    rules = grant_to_nobody('delegate')

    def test_tenants_do_not_see_each_other(self):
        res = self.nobody(create(Tenant='tenant-a', Name='agent'), create(Tenant='tenant-b', Name='agent'),
                          create())
        a = self.created(res[0], 'CreateSandbox for tenant A')
        b = self.created(res[1], 'CreateSandbox for tenant B')
        self.assertIn(res[2].get('error'), DENIED, f'without a tenant, delegate is not create: {res[2]}')
        self.assertEqual((self.prop(a, 'Tenant'), self.prop(b, 'Tenant')), ('tenant-a', 'tenant-b'))
        self.assertEqual((self.prop(a, 'Owner'), self.prop(b, 'Owner')), (NOBODY, NOBODY))
        self.assertEqual((self.prop(a, 'Name'), self.prop(b, 'Name')), ('agent', 'agent'))

        pb = sandbox_path(b)
        res = self.nobody(
            act_for('tenant-a'),
            call(M, MGR, 'ListSandboxes'),
            call(M, MGR, 'GetSandbox', 's', b),
            call(M, MGR, 'GetSandbox', 's', 'agent'),
            exec_call(a, 'sh', '-c', 'echo for-a > /work/f; cat /work/f'),
            exec_call(b, 'sh', '-c', 'echo pwned > /work/f'),
            call(pb, SBX, 'Destroy'),
            call(pb, SBX, 'Pause'),
            call(pb, SBX, 'SetTimeout', 'tt', 1, 1),
            call(pb, SBX, 'Start', 'asa{sv}', ['true'], {}),
            call(pb, SBX, 'WriteFile', 'saya{sv}', '/work/f', [112], {}),
            call(pb, SBX, 'ReadFile', 'stt', '/work/f', 0, 0),
            call(pb, PROPS, 'Get', 'ss', SBX, 'Tenant'),
            call(pb, PROPS, 'GetAll', 's', SBX),
            call(f'{M}/sandbox', 'org.freedesktop.DBus.Introspectable', 'Introspect'),
            create(Name='made-for-a'),
            create(Tenant='tenant-b'),
            call(sandbox_path(a), PROPS, 'Get', 'ss', SBX, 'Tenant'))
        self.assertEqual(res[0], {'reply': []}, res[0])
        self.assertEqual([row[0] for row in res[1]['reply'][0]], [a], f'acting for A lists: {res[1]}')
        self.assertEqual(res[2].get('error'), E + 'NoSuchSandbox', res[2])
        self.assertEqual(res[3].get('reply'), [sandbox_path(a)], f'the name is A\'s: {res[3]}')
        self.assertEqual(res[4]['reply'][:2], [0, {'len': len('for-a\n')}], res[4])
        for r, what in zip(res[5:12], ('Exec', 'Destroy', 'Pause', 'SetTimeout', 'Start', 'WriteFile', 'ReadFile')):
            self.assertEqual(r.get('error'), E + 'NoSuchSandbox', f'{what} on B\'s sandbox acting for A: {r}')
        self.assertNotIn('reply', res[12], f'B\'s properties read acting for A: {res[12]}')
        self.assertNotIn('reply', res[13], f'B\'s properties read acting for A: {res[13]}')
        self.assertIn(a, str(res[14].get('reply')), res[14])
        self.assertNotIn(b, str(res[14].get('reply')), 'acting for A, B\'s sandbox is in the object tree')
        made = self.created(res[15], 'CreateSandbox acting for A')
        self.assertEqual(self.prop(made, 'Tenant'), 'tenant-a', 'a sandbox created acting for A is A\'s')
        self.assertIn(res[16].get('error'), DENIED, f'acting for A, a sandbox for B: {res[16]}')
        self.assertEqual(res[17].get('reply'), ['tenant-a'], res[17])

        # B's sandbox is as it was.
        self.assertTrue(self.running(b))
        cp = self.ok(self.exec(b, 'sh', '-c', 'cat /work/f 2>/dev/null || echo none'))
        self.assertEqual(cp.stdout, 'none\n')

        # Acting for B: the other way round; acting for none: all of one's own.
        res = self.nobody(act_for('tenant-b'), call(M, MGR, 'ListSandboxes'), call(M, MGR, 'GetSandbox', 's', a),
                          act_for(''), call(M, MGR, 'ListSandboxes'), call(M, MGR, 'GetSandbox', 's', 'agent'))
        self.assertEqual([row[0] for row in res[1]['reply'][0]], [b], res[1])
        self.assertEqual(res[2].get('error'), E + 'NoSuchSandbox', res[2])
        self.assertEqual(sorted(row[0] for row in res[4]['reply'][0]), sorted([a, b, made]), res[4])
        # A name is looked up among the sandboxes for no tenant: neither of these.
        self.assertEqual(res[5].get('error'), E + 'NoSuchSandbox', res[5])

        # The tenant a connection acts for is the connection's: a new one acts for none.
        res = self.nobody(call(M, MGR, 'ListSandboxes'))[0]
        self.assertEqual(len(res['reply'][0]), 3, res)

    def test_records_carry_the_tenant(self):
        res = self.nobody(create(Tenant='rec-a'), create(Tenant='rec-b'))
        a, b = self.created(res[0], 'for rec-a'), self.created(res[1], 'for rec-b')
        res = self.nobody(act_for('rec-a'), exec_call(a, 'true'), act_for('rec-b'), exec_call(b, 'true'),
                          act_for('rec-a'), call(M, MGR, 'ListExecutions', 'a{sv}', {}),
                          call(M, MGR, 'ListExecutions', 'a{sv}', {'Tenant': v('s', 'rec-b')}))
        self.assertEqual(res[1]['reply'][0], 0, res[1])
        self.assertEqual(res[3]['reply'][0], 0, res[3])
        self.assertEqual({row[0] for row in res[5]['reply'][0]}, {a}, f'acting for rec-a, the records: {res[5]}')
        self.assertEqual(res[6]['reply'], [[]], 'acting for rec-a, rec-b\'s records by filter')

        # Root (acting for none) filters by tenant.
        rows = bus([call(M, MGR, 'ListExecutions', 'a{sv}', {'Tenant': v('s', 'rec-b')})])[0]['reply'][0]
        self.assertEqual({row[0] for row in rows}, {b})
        res = bus([call(M, MGR, 'ListExecutions', 'a{sv}', {'Tenant': v('s', 'not a tenant')})])[0]
        self.assertEqual(res.get('error'), E + 'InvalidOption', res)

        # The records themselves, in the spool.
        with open(secutil.S.path(f'{secutil.S.state_dir}/spool/{SPOOL_FILE}'), 'rb') as f:
            records = [json.loads(line) for line in f.read().splitlines() if line.strip()]
        mine = [r for r in records if r.get('sandbox') in (a, b)]
        self.assertEqual({(r['sandbox'], r['type'], r.get('tenant')) for r in mine},
                         {(a, 'sandbox', 'rec-a'), (a, 'exec', 'rec-a'), (b, 'sandbox', 'rec-b'),
                          (b, 'exec', 'rec-b')}, mine)


class CreateExecGrant(TenantBase):
    """nobody may create and exec for itself, but does not hold delegate."""

    rules = grant_to_nobody('create', 'exec')

    def test_tenant_without_delegate_is_refused(self):
        before = set(secutil.S.sandbox_scopes())
        res = self.nobody(create(Tenant='tenant-a'), act_for('tenant-a'), create(), act_for('no such!'))
        self.assertIn(res[0].get('error'), DENIED, res[0])
        self.assertEqual(res[1], {'reply': []}, 'acting for a tenant only narrows what one sees')
        self.assertIn(res[2].get('error'), DENIED, f'acting for a tenant, create without delegate: {res[2]}')
        self.assertEqual(res[3].get('error'), E + 'InvalidOption', res[3])
        self.assertEqual(set(secutil.S.sandbox_scopes()), before, 'a sandbox was created')

    def test_other_owners_may_use_the_same_name(self):
        mine = self.create('--name', 'same-name')
        res = self.nobody(create(Name='same-name'), call(M, MGR, 'GetSandbox', 's', 'same-name'),
                          create(Name='same-name'))
        theirs = self.created(res[0], 'nobody\'s CreateSandbox of a name root uses')
        self.assertNotEqual(theirs, mine)
        self.assertEqual(res[1].get('reply'), [sandbox_path(theirs)], 'nobody\'s name is nobody\'s sandbox')
        self.assertEqual(res[2].get('error'), E + 'SandboxExists', res[2])
        self.assertEqual(self.status('same-name')['id'], mine, 'root\'s name is root\'s sandbox')
        self.assertEqual((self.prop(mine, 'Owner'), self.prop(theirs, 'Owner')), (0, NOBODY))



def varlink_as_nobody(*calls):
    """CALLS made in order on one varlink connection by a process of nobody."""
    return secutil.varlink(calls, uid=NOBODY)


def as_dbus_name(res):
    """A varlink result's error in D-Bus's name (io.sandboxd.Sandbox.X is
    io.sandboxd.Sandbox1.X; AccessDenied and InteractiveAuthorizationRequired are the bus's)."""
    name = res.get('error')
    if not name:
        return None
    short = name.split('.')[-1]
    if short in ('AccessDenied', 'InteractiveAuthorizationRequired'):
        return 'org.freedesktop.DBus.Error.' + short
    return E + short


class VarlinkDelegateGrant(TenantBase):
    """nobody holds delegate; over varlink, each connection acts for the tenant it said."""

    rules = grant_to_nobody('delegate')

    def tenant_sandbox(self, tenant):
        """A sandbox for TENANT, made on a connection acting for it, with one exec run."""
        res = varlink_as_nobody(vcall('ActForTenant', tenant=tenant), vcall('CreateSandbox', template='shell'))
        self.assertEqual(res[0], {'replies': [{}]}, res[0])
        self.assertNotIn('error', res[1], res[1])
        sid = res[1]['replies'][0]['id']
        self.addCleanup(secutil.S.sandboxctl, 'destroy', sid, timeout=120)
        self.assertEqual(self.prop(sid, 'Tenant'), tenant)
        self.assertEqual(self.prop(sid, 'Owner'), NOBODY)
        res = varlink_as_nobody(vcall('ActForTenant', tenant=tenant), vcall('Exec', id=sid, argv=['true']))
        self.assertEqual(res[1]['replies'][0]['exitStatus'], 0, res[1])
        return sid

    def acting_for(self, tenant, other):
        """What a connection acting for TENANT gets of its own and of OTHER's sandbox."""
        return varlink_as_nobody(
            vcall('ActForTenant', tenant=tenant),
            vcall('ListSandboxes'),
            vcall('GetSandbox', id=other),
            vcall('Exec', id=other, argv=['sh', '-c', 'echo pwned > /work/f']),
            vcall('Destroy', id=other),
            vcall('GetMetrics', id=other),
            vcall('GetLogs', id=other),
            vcall('ReadFile', id=other, path='/work/f'),
            vcall('ListExecutions'),
            vcall('ListExecutions', filter={'SandboxId': other}))

    def test_two_tenants_on_two_connections(self):
        a, b = self.tenant_sandbox('vl-tenant-a'), self.tenant_sandbox('vl-tenant-b')
        for tenant, mine, other in (('vl-tenant-a', a, b), ('vl-tenant-b', b, a)):
            with self.subTest(tenant):
                res = self.acting_for(tenant, other)
                self.assertEqual([s['id'] for s in res[1]['replies'][0]['sandboxes']], [mine], res[1])
                for r, what in zip(res[2:8], ('GetSandbox', 'Exec', 'Destroy', 'GetMetrics', 'GetLogs', 'ReadFile')):
                    self.assertEqual(r.get('error'), VE + 'NoSuchSandbox', f'{what} of the other tenant\'s: {r}')
                    self.assertEqual(r['replies'], [], r)
                self.assertEqual({e['sandboxId'] for e in res[8]['replies'][0]['executions']}, {mine}, res[8])
                self.assertEqual(res[9]['replies'][0]['executions'], [], res[9])
                # The same calls on D-Bus, acting for the same tenant: the same answers.
                d = self.nobody(act_for(tenant), call(M, MGR, 'GetSandbox', 's', other),
                                call(M, MGR, 'ListSandboxes'),
                                call(M, MGR, 'ListExecutions', 'a{sv}', {'SandboxId': v('s', other)}))
                self.assertEqual(d[1].get('error'), as_dbus_name(res[2]), (d[1], res[2]))
                self.assertEqual([row[0] for row in d[2]['reply'][0]], [mine])
                self.assertEqual(d[3]['reply'], [[]])

        # Untouched: running, nothing written.
        for sid in (a, b):
            self.assertTrue(self.running(sid))
            cp = self.ok(self.exec(sid, 'sh', '-c', 'cat /work/f 2>/dev/null || echo none'))
            self.assertEqual(cp.stdout, 'none\n')

        # A connection that said nothing acts for none: all of nobody's own; "" ends acting.
        res = varlink_as_nobody(vcall('ListSandboxes'), vcall('ActForTenant', tenant='vl-tenant-a'),
                                vcall('ActForTenant', tenant=''), vcall('ListSandboxes'),
                                vcall('ActForTenant', tenant='not a tenant!'))
        self.assertEqual(sorted(s['id'] for s in res[0]['replies'][0]['sandboxes']), sorted([a, b]), res[0])
        self.assertEqual(sorted(s['id'] for s in res[3]['replies'][0]['sandboxes']), sorted([a, b]), res[3])
        d = self.nobody(act_for('not a tenant!'))[0]
        self.assertEqual(as_dbus_name(res[4]), d.get('error'), (res[4], d))
        self.assertEqual(d.get('error'), E + 'InvalidOption')
        # Acting for one tenant, creating for another is refused, the same on both.
        res = varlink_as_nobody(vcall('ActForTenant', tenant='vl-tenant-a'),
                                vcall('CreateSandbox', template='shell', options={'Tenant': 'vl-tenant-b'}))
        d = self.nobody(act_for('vl-tenant-a'), create(Tenant='vl-tenant-b'))
        self.assertIn(d[1].get('error'), DENIED, d[1])
        self.assertEqual(as_dbus_name(res[1]), d[1]['error'], (res[1], d[1]))


class VarlinkCreateExecGrant(TenantBase):
    """nobody may create and exec for itself, not for a tenant: the same refusals as on D-Bus."""

    rules = grant_to_nobody('create', 'exec')

    def test_tenant_without_delegate_is_refused(self):
        before = set(secutil.S.sandbox_scopes())
        res = varlink_as_nobody(vcall('CreateSandbox', template='shell', options={'Tenant': 'tenant-a'}),
                                vcall('ActForTenant', tenant='tenant-a'), vcall('CreateSandbox', template='shell'),
                                vcall('GetStatistics'))
        d = self.nobody(create(Tenant='tenant-a'), act_for('tenant-a'), create(), call(M, MGR, 'GetStatistics'))
        self.assertIn(d[0].get('error'), DENIED, d[0])
        self.assertEqual(as_dbus_name(res[0]), d[0]['error'], (res[0], d[0]))
        self.assertEqual(res[1], {'replies': [{}]}, 'acting for a tenant only narrows what one sees')
        self.assertIn(d[2].get('error'), DENIED, d[2])
        self.assertEqual(as_dbus_name(res[2]), d[2]['error'], (res[2], d[2]))
        self.assertEqual(as_dbus_name(res[3]), d[3].get('error'), (res[3], d[3]))
        self.assertEqual(set(secutil.S.sandbox_scopes()), before, 'a sandbox was created')


if __name__ == '__main__':
    unittest.main(verbosity=2)
