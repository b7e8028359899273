#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 33, labels: key/value labels given at create on every face (D-Bus, varlink,
sandboxd-http, MCP, the Python client, sandboxctl), returned with the sandbox, filtered on
in list, refused with InvalidOption when malformed, kept across a restart of sandboxd,
shown in the unit's Description (systemctl status) and carried into the records.

Run through tests/integration/run.py, or: python3 tests/integration/run.py test_labels
"""

import json
import os
import sys
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

SOURCE = os.environ.get('SANDBOXD_SOURCE_DIR', os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(SOURCE, 'python'))
import sandboxd  # noqa: E402
from sandboxd.http import HttpTransport  # noqa: E402

S = None
_owned = False
BRIDGE = None
E = 'io.sandboxd.Sandbox1.'


def setUpModule():
    global S, _owned, BRIDGE
    S, _owned = harness.module_setup()
    BRIDGE = harness.Bridge(S, {'alice': 'alice', 'bob': 'bob'})


def tearDownModule():
    if BRIDGE:
        BRIDGE.stop()
    harness.module_teardown(_owned)


def http(method, path, token, body=None):
    """(status, the JSON answer)."""
    req = urllib.request.Request(BRIDGE.url + '/api/v1' + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={'Authorization': f'Bearer {BRIDGE.tokens[token]}',
                                          'Content-Type': 'application/json'})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b'null')
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b'null')


class Labels(harness.SandboxTestCase):

    def ids(self, sandboxes):
        return {s['id'] for s in sandboxes}

    def bus_create(self, labels):
        """CreateSandbox over D-Bus with Labels (a{ss}): (id, error name)."""
        args = ['Labels', 'a{ss}', str(len(labels))]
        for k, v in labels.items():
            args += [k, v]
        _cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                      'CreateSandbox', 'sa{sv}', '', '1', *args)
        if error:
            return None, error
        self.addCleanup(self.destroy_quietly, S, data[0])
        return data[0], None

    def test_dbus(self):
        sid, error = self.bus_create({'team': 'ml', 'example.com/run': 'run 4'})
        self.assertIsNone(error)
        other, _ = self.bus_create({'team': 'web'})
        self.assertEqual(self.bus_property(sid, 'Labels'), {'example.com/run': 'run 4', 'team': 'ml'})
        self.assertEqual(self.bus_property(other, 'Labels'), {'team': 'web'})
        _cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                      'ListSandboxesFiltered', 'a{sv}', '1', 'Label', 'as', '1', 'team=ml')
        self.assertIsNone(error)
        self.assertEqual([s[0] for s in data[0]], [sid])
        _cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                      'ListSandboxesFiltered', 'a{sv}', '1', 'Label', 'as', '1', 'team')
        self.assertEqual({s[0] for s in data[0]} & {sid, other}, {sid, other})
        # Refused, naming what is wrong.
        _sid, error = self.bus_create({'bad key': 'v'})
        self.assertEqual(error, E + 'InvalidOption')
        cp, _data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                      'CreateSandbox', 'sa{sv}', '', '1', 'Labels', 'a{ss}', '1', 'k', 'a\nb')
        self.assertEqual(error, E + 'InvalidOption')
        self.assertIn('control characters', cp.stderr)
        _cp, _data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                       'ListSandboxesFiltered', 'a{sv}', '1', 'Label', 'as', '1', '=x')
        self.assertEqual(error, E + 'InvalidOption')

    def test_unit_description(self):
        """systemctl status shows them: the scope's Description."""
        sid, _ = self.bus_create({'team': 'ml', 'owner': 'a b'})
        desc = S.show(self.unit(sid), 'Description')['Description']
        self.assertEqual(desc, f'Sandbox {sid} (shell) owner="a b" team=ml')
        cp = self.ok(S.systemctl('status', self.unit(sid)))
        self.assertIn('team=ml', cp.stdout)
        # From the warm pool: the unit started before the labels were known; its
        # description is set when it is handed out.
        deadline = time.monotonic() + 30
        while not any(p['template'] == harness.POOLED_TEMPLATE and p.get('ready', 0) > 0
                      for p in S.varlink_call('ListPools')[0][0]['pools']):
            self.assertLess(time.monotonic(), deadline, 'the warm pool has no sandbox ready')
            time.sleep(0.1)
        replies, error, params = S.varlink_call('AcquireSandbox', {'template': harness.POOLED_TEMPLATE,
                                                                   'options': {'Labels': {'pool': 'yes'}}})
        self.assertIsNone(error, params)
        pooled = replies[0]['id']
        self.addCleanup(self.destroy_quietly, S, pooled)
        self.assertEqual(replies[0]['source'], 'pool')
        deadline = time.monotonic() + 10
        while S.show(self.unit(pooled), 'Description')['Description'] != f'Sandbox {pooled} (pooled-shell) pool=yes':
            self.assertLess(time.monotonic(), deadline, S.show(self.unit(pooled), 'Description'))
            time.sleep(0.05)

    def test_varlink(self):
        replies, error, params = S.varlink_call('CreateSandbox', {'options': {'Labels': {'team': 'vl', 'tier': '1'}}})
        self.assertIsNone(error, params)
        sid = replies[0]['id']
        self.addCleanup(self.destroy_quietly, S, sid)
        replies, error, _ = S.varlink_call('GetSandbox', {'id': sid})
        self.assertEqual(replies[0]['sandbox']['labels'], {'team': 'vl', 'tier': '1'})
        replies, error, _ = S.varlink_call('ListSandboxes', {'filter': {'Label': ['team=vl', 'tier']}})
        self.assertIsNone(error)
        self.assertEqual(self.ids(replies[0]['sandboxes']), {sid})
        self.assertEqual(replies[0]['total'], 1)
        replies, error, _ = S.varlink_call('ListSandboxes', {'filter': {'Label': ['team=other']}})
        self.assertEqual(replies[0]['sandboxes'], [])
        _r, error, params = S.varlink_call('CreateSandbox', {'options': {'Labels': {'k': 7}}})
        self.assertEqual(error, 'io.sandboxd.Sandbox.InvalidOption')
        self.assertIn('must be a string', json.dumps(params))
        _r, error, params = S.varlink_call('CreateSandbox', {'options': {'Labels': {f'k{i}': 'v' for i in range(65)}}})
        self.assertEqual(error, 'io.sandboxd.Sandbox.InvalidOption')
        self.assertIn('at most 64', json.dumps(params))

    def test_sandboxctl(self):
        sid = self.create('--label', 'team=cli', '-l', 'stage=dev')
        other = self.create('--label', 'team=cli')
        self.assertEqual(self.status(sid)['labels'], {'stage': 'dev', 'team': 'cli'})
        cp = self.ok(self.ctl('status', sid))
        self.assertIn('Labels: stage=dev team=cli', cp.stdout)
        rows = json.loads(self.ok(self.ctl('list', '--json', '--label', 'team=cli', '--label', 'stage')).stdout)
        self.assertEqual([r['id'] for r in rows], [sid])
        self.assertEqual(rows[0]['labels'], {'stage': 'dev', 'team': 'cli'})
        rows = json.loads(self.ok(self.ctl('list', '--json', '-l', 'team=cli')).stdout)
        self.assertEqual({r['id'] for r in rows}, {sid, other})
        cp = self.ctl('create', '--label', 'Bad_Key_=1')
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn('is not a label key', cp.stderr)

    def test_http_and_tenants(self):
        status, a = http('POST', '/sessions', 'alice', {'labels': {'team': 'h', 'user': 'u1'}})
        self.assertEqual(status, 201, a)
        self.addCleanup(self.destroy_quietly, S, a['id'])
        self.assertEqual(a['labels'], {'team': 'h', 'user': 'u1'})
        status, b = http('POST', '/sessions', 'bob', {'labels': {'team': 'h'}})
        self.assertEqual(status, 201, b)
        self.addCleanup(self.destroy_quietly, S, b['id'])
        q = urllib.parse.urlencode([('label', 'team=h'), ('label', 'user')])
        status, rows = http('GET', f'/sessions?{q}', 'alice')
        self.assertEqual((status, self.ids(rows)), (200, {a['id']}))
        # bob's label filter sees only bob's.
        status, rows = http('GET', '/sessions?label=team%3Dh', 'bob')
        self.assertEqual(self.ids(rows), {b['id']})
        status, rows = http('GET', '/sessions?label=user', 'bob')
        self.assertEqual(rows, [])
        status, err = http('POST', '/sessions', 'alice', {'labels': {'team': 1}})
        self.assertEqual((status, err['error']['code']), (400, 'InvalidOption'))
        status, err = http('POST', '/sessions', 'alice', {'labels': ['team=h']})
        self.assertEqual(status, 400)
        status, err = http('GET', '/sessions?label=a%20b', 'alice')
        self.assertEqual((status, err['error']['code']), (400, 'InvalidOption'))

    def test_mcp(self):
        mcp = os.path.join(S.paths.build, 'src', 'sandboxd-mcp', 'sandboxd-mcp')
        lines = [{'jsonrpc': '2.0', 'id': 1, 'method': 'initialize',
                  'params': {'protocolVersion': '2025-06-18', 'capabilities': {},
                             'clientInfo': {'name': 'labels', 'version': '0'}}},
                 {'jsonrpc': '2.0', 'method': 'notifications/initialized'},
                 {'jsonrpc': '2.0', 'id': 2, 'method': 'tools/call',
                  'params': {'name': 'sandbox_create', 'arguments': {'template': 'shell', 'labels': {'team': 'mcp'}}}}]
        cp = self.ok(S.run([mcp], input=''.join(json.dumps(x) + '\n' for x in lines), timeout=120))
        created = [json.loads(x) for x in cp.stdout.splitlines()][-1]['result']['structuredContent']['sandbox']
        self.addCleanup(self.destroy_quietly, S, created['id'])
        self.assertEqual(created['labels'], {'team': 'mcp'})
        lines[2:] = [{'jsonrpc': '2.0', 'id': 3, 'method': 'tools/call',
                      'params': {'name': 'sandbox_list', 'arguments': {'label': ['team=mcp']}}},
                     {'jsonrpc': '2.0', 'id': 4, 'method': 'tools/call',
                      'params': {'name': 'sandbox_create', 'arguments': {'labels': {'a': 'x\ny'}}}}]
        cp = self.ok(S.run([mcp], input=''.join(json.dumps(x) + '\n' for x in lines), timeout=120))
        replies = {r.get('id'): r for r in map(json.loads, cp.stdout.splitlines())}
        listed = replies[3]['result']['structuredContent']['sandboxes']
        self.assertEqual(self.ids(listed), {created['id']})
        self.assertTrue(replies[4]['result']['isError'])
        self.assertIn('control characters', replies[4]['result']['content'][0]['text'])

    def test_python(self):
        for t in (sandboxd.VarlinkTransport(S.path(harness.VARLINK_SOCKET)),
                  HttpTransport(BRIDGE.url, BRIDGE.tokens['alice'])):
            sbx = sandboxd.Sandbox.create('shell', metadata={'kind': 'py', 'via': type(t).__name__}, transport=t)
            self.addCleanup(sbx.kill)
            self.assertEqual(sbx.get_info().metadata, {'kind': 'py', 'via': type(t).__name__})
            found = sandboxd.Sandbox.list(transport=t, labels={'kind': 'py', 'via': type(t).__name__})
            self.assertEqual([i.sandbox_id for i in found], [sbx.sandbox_id])
            self.assertEqual(sandboxd.Sandbox.list(transport=t, labels=['kind=none']), [])
            with self.assertRaises(sandboxd.InvalidOption):
                sandboxd.Sandbox.create('shell', labels={'-x': '1'}, transport=t)

    def test_restart_and_records(self):
        """Kept with the sandbox across a restart of sandboxd; in the spool's records."""
        sid = self.create('--label', 'keep=yes')
        self.ok(self.exec(sid, 'true'))
        pid = S.show('sandboxd.service', 'MainPID')['MainPID']
        self.ok(S.systemctl('restart', 'sandboxd.service', timeout=90))
        deadline = time.monotonic() + 30
        while S.show('sandboxd.service', 'MainPID')['MainPID'] in ('0', pid) or \
                S.busctl('call', harness.BUS_NAME, harness.MANAGER_PATH, 'org.freedesktop.DBus.Peer',
                         'Ping').returncode != 0:
            self.assertLess(time.monotonic(), deadline, 'sandboxd did not come back')
            time.sleep(0.1)
        self.assertEqual(self.status(sid)['labels'], {'keep': 'yes'})
        rows = json.loads(self.ok(self.ctl('list', '--json', '--label', 'keep=yes')).stdout)
        self.assertEqual([r['id'] for r in rows], [sid])
        with open(S.path(f'{S.state_dir}/spool/records.jsonl')) as f:
            records = [json.loads(line) for line in f if sid in line]
        kinds = {r['type'] for r in records if r.get('labels') == {'keep': 'yes'}}
        self.assertEqual(kinds, {'sandbox', 'exec'}, records)


if __name__ == '__main__':
    unittest.main(verbosity=2)
