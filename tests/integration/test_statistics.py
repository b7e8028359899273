#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The daemon's statistics (Manager.GetStatistics on D-Bus, GetStatistics on varlink), on
a real system: the counters move where their events happen (a sandbox created and
destroyed, an exec, an exec killed at its Timeout, one the OOM killer ended), the latency
histogram counts every exec, the sandboxes are counted by state and template, the pools
are ListPools', and both transports give the same numbers; who may ask (root, manage,
delegate; not a plain user), the same error on both."""

import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, '..', 'security'))
import harness  # noqa: E402
import polkitutil  # noqa: E402
import secutil  # noqa: E402
from secutil import M, MGR, NOBODY, bus, call, vcall  # noqa: E402

S = None
POLKIT = None
IFACE = harness.VARLINK_IFACE
COUNTERS = {'StartedAt': 'startedAt', 'SandboxesCreated': 'sandboxesCreated', 'CreateFailures': 'createFailures',
            'SandboxesDestroyed': 'sandboxesDestroyed', 'Execs': 'execs', 'ExecFailures': 'execFailures',
            'ExecTimeouts': 'execTimeouts', 'OOMKills': 'oomKills', 'SandboxesRecycled': 'sandboxesRecycled',
            'RecycleFailures': 'recycleFailures'}


def setUpModule():
    global S, POLKIT
    POLKIT = polkitutil.setup_module()
    S = secutil.S


def tearDownModule():
    polkitutil.teardown_module(POLKIT)


def dbus_statistics(uid=None):
    """D-Bus's a{sv}, in varlink's shape (the table of sandboxd-api(7))."""
    res = bus([call(M, MGR, 'GetStatistics')], uid=uid)[0]
    if 'error' in res:
        return res
    d = res['reply'][0]
    out = {COUNTERS[k]: d[k] for k in COUNTERS}
    out['sandboxes'] = [{'state': s, 'template': t, 'count': n} for s, t, n in d['Sandboxes']]
    out['execLatency'] = {'bounds': [b for b, _ in d['ExecLatencyBuckets']],
                          'counts': [c for _, c in d['ExecLatencyBuckets']],
                          'count': d['ExecLatencyCount'], 'sum': d['ExecLatencySum']}
    out['pools'] = [{'template': p[0], 'size': p[1], 'ready': p[2], 'starting': p[3], 'inUse': p[4]}
                    for p in d['Pools']]
    out['spoolBacklog'] = d['SpoolBacklog']
    # Daemon-wide only: the node's size and fleet number.
    node = {'SandboxesMax': 'sandboxesMax', 'SandboxesLive': 'sandboxesLive', 'Node': 'node',
            # The workspaces on disk (docs/WORKSPACES.md), and daemon-wide their pool.
            'WorkspaceBytesUsed': 'workspaceBytesUsed', 'WorkspaceBytesMax': 'workspaceBytesMax',
            'WorkspacePoolBytes': 'workspacePoolBytes', 'WorkspacePoolBytesFree': 'workspacePoolBytesFree'}
    out.update({node[k]: d[k] for k in node if k in d})
    assert set(d) - set(node) == set(COUNTERS) | {'Sandboxes', 'ExecLatencyBuckets', 'ExecLatencyCount',
                                                  'ExecLatencySum', 'Pools', 'SpoolBacklog'}, sorted(d)
    return {'statistics': out}


def varlink_statistics(uid=None):
    """varlink's, its pools as D-Bus's (a(suuuu), as ListPools: no room for a recycling
    pool's recycle, recycled, resetting and waiting, which GetPool has on both)."""
    res = secutil.varlink([vcall('GetStatistics')], uid=uid)[0]
    if 'error' in res:
        return res
    reply = res['replies'][0]
    for p in reply['statistics']['pools']:
        assert p.pop('recycle') is False and p.pop('recycled') == 0 and p.pop('resetting') == 0, p
        assert p.pop('waiting') == 0, p
    return reply


class Statistics(harness.SandboxTestCase):

    def both(self):
        """The statistics over D-Bus and over varlink, taken while nothing happens (the
        warm pool settled): equal, or taken again."""
        for _ in range(20):
            d, v = dbus_statistics()['statistics'], varlink_statistics()['statistics']
            if d == v:
                return v
            time.sleep(0.5)
        self.assertEqual(d, v, 'D-Bus and varlink disagree')

    def settled(self):
        """The statistics once the warm pool is full (it starts sandboxes on its own)."""
        for _ in range(120):
            st = self.both()
            if all(p['ready'] == p['size'] and p['starting'] == 0 for p in st['pools']):
                return st
            time.sleep(0.5)
        self.fail(f'the pools did not fill: {st["pools"]}')

    def delta(self, before, after):
        return {k: after[k] - before[k] for k in COUNTERS.values() if k != 'startedAt'}

    def test_counters_move_and_both_transports_agree(self):
        t0 = self.settled()
        self.assertLessEqual(t0['startedAt'], time.time() * 1e6)
        self.assertGreater(t0['startedAt'], (time.time() - 86400) * 1e6)
        h = t0['execLatency']
        self.assertEqual(len(h['bounds']), len(h['counts']))
        self.assertEqual(h['bounds'], sorted(h['bounds']))
        self.assertEqual(h['counts'], sorted(h['counts']), 'cumulative counts never go down')
        self.assertLessEqual(h['counts'][-1], h['count'])
        # Without MariaDB, nothing waits to be written to it.
        self.assertEqual(t0['spoolBacklog'], 0)

        sid = self.create('--template', 'python', '--memory', '64M')
        t1 = self.both()
        self.assertEqual(self.delta(t0, t1), {'sandboxesCreated': 1, 'createFailures': 0, 'sandboxesDestroyed': 0,
                                              'execs': 0, 'execFailures': 0, 'execTimeouts': 0, 'oomKills': 0,
                                              'sandboxesRecycled': 0, 'recycleFailures': 0})
        counts = {(c['state'], c['template']): c['count'] for c in t1['sandboxes']}
        before = {(c['state'], c['template']): c['count'] for c in t0['sandboxes']}
        self.assertEqual(counts.get(('running', 'python'), 0), before.get(('running', 'python'), 0) + 1, counts)

        # An exec that takes about 0.3 s: the histogram's buckets from 0.5 s on count it.
        self.ok(self.exec(sid, 'python3', '-c', 'import time; time.sleep(0.3)'))
        t2 = self.both()
        self.assertEqual(self.delta(t1, t2)['execs'], 1)
        h1, h2 = t1['execLatency'], t2['execLatency']
        self.assertEqual(h2['count'], h1['count'] + 1)
        self.assertGreater(h2['sum'] - h1['sum'], 0.29)
        self.assertLess(h2['sum'] - h1['sum'], 5)
        moved = [b for b, c1, c2 in zip(h2['bounds'], h1['counts'], h2['counts']) if c2 == c1 + 1]
        self.assertEqual(moved, [b for b in h2['bounds'] if b >= h2['sum'] - h1['sum']], h2)

        # A timeout and an OOM kill.
        cp, res = self.exec_json(sid, 'sleep', '30', opts=('--timeout', '1'))
        self.assertIs(res['timed_out'], True, res)
        cp, res = self.exec_json(sid, 'python3', '-c', "s = b'x' * (200 * 1024 * 1024)")
        self.assertIs(res['oom_killed'], True, res)
        t3 = self.both()
        self.assertEqual(self.delta(t2, t3), {'sandboxesCreated': 0, 'createFailures': 0, 'sandboxesDestroyed': 0,
                                              'execs': 2, 'execFailures': 0, 'execTimeouts': 1, 'oomKills': 1,
                                              'sandboxesRecycled': 0, 'recycleFailures': 0})

        # Paused, then destroyed.
        self.ok(self.ctl('pause', sid))
        counts = {(c['state'], c['template']): c['count'] for c in self.both()['sandboxes']}
        self.assertEqual(counts.get(('paused', 'python')), 1, counts)
        self.ok(self.ctl('destroy', sid))
        t4 = self.both()
        self.assertEqual(self.delta(t3, t4)['sandboxesDestroyed'], 1)
        # Counted 0, not left out (a gauge drops to 0 rather than vanishing).
        self.assertEqual({(c['state'], c['template']): c['count'] for c in t4['sandboxes']}.get(('paused', 'python')), 0)

    def test_pools_are_list_pools(self):
        st = self.settled()
        pools = secutil.varlink([vcall('ListPools')])[0]['replies'][0]['pools']
        self.assertEqual(st['pools'], [{k: v for k, v in p.items() if k not in ('recycle', 'recycled', 'resetting', 'waiting')}
                                       for p in pools])
        self.assertIn(harness.POOLED_TEMPLATE, [p['template'] for p in pools])
        counts = {(c['state'], c['template']): c['count'] for c in st['sandboxes']}
        self.assertGreaterEqual(counts.get(('running', harness.POOLED_TEMPLATE), 0), 1, counts)


class Who(harness.SandboxTestCase):
    """Root, and holders of manage or delegate; a plain user is refused, the same on both."""

    def asked_as_nobody(self, rules):
        POLKIT.set_rules(rules)
        try:
            return dbus_statistics(uid=NOBODY), varlink_statistics(uid=NOBODY)
        finally:
            POLKIT.set_rules(None)

    def test_plain_user_is_refused(self):
        d, v = self.asked_as_nobody(polkitutil.grant_to_nobody('create', 'exec'))
        # The last action asked (delegate) is auth_admin: polkit would ask for a password.
        self.assertIn(d.get('error'), secutil.DENIED, d)
        self.assertEqual(v.get('error'), f'{IFACE}.' + d['error'].split('.')[-1], v)
        self.assertIn('delegate', v['parameters']['message'])

    def test_manage_or_delegate_is_enough(self):
        for action in ('manage', 'delegate'):
            with self.subTest(action):
                d, v = self.asked_as_nobody(polkitutil.grant_to_nobody(action))
                self.assertIn('statistics', d, d)
                self.assertIn('statistics', v, v)
                self.assertEqual(set(d['statistics']), set(v['statistics']))


if __name__ == '__main__':
    unittest.main(verbosity=2)
