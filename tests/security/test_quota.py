#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Many tenants on one node (issue 31), on a real systemd: sandbox.slice gets the ceilings
of sandboxd.conf [Node] and a ceiling the host cannot honour stops sandboxd; the PID attack
(a user fills sandboxes to their TasksMax) is refused with QuotaExceeded and systemctl,
sandboxd and a fork outside the slice keep working; memory beyond the slice's ceiling is
OOM-killed among the sandboxes only; the admin's maxima on every face (D-Bus, varlink,
sandboxctl, HTTP, MCP, Python); two HTTP tenants with quotas on count, memory and rate, and
GetQuota everywhere; code sent by every face that takes code never shows in any
/proc/*/cmdline, the journal or systemctl's output."""

import http.client
import json
import os
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, '..', 'integration'))
import harness  # noqa: E402
import polkitutil  # noqa: E402
import secutil  # noqa: E402
from secutil import M, MGR, NOBODY, SBX, bus, call, sandbox_path, v, vcall  # noqa: E402

SOURCE = os.environ.get('SANDBOXD_SOURCE_DIR', os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(SOURCE, 'python'))
import sandboxd  # noqa: E402
from sandboxd.code import CodeSandbox, SandboxConfig  # noqa: E402

MiB = 1024 * 1024
S = None
POLKIT = None
TOKENS = {}
RULES = 'io.sandboxd.Sandbox1-http.rules'
E = 'io.sandboxd.Sandbox1.'
VE = 'io.sandboxd.Sandbox.'
SNAPDIR = '/run/sandboxd-test-state/snapshots-quota'
CONFIG = f"""
[Node]
MemoryMax=700M
TasksMax=3000
CPUWeight=30
StartsInFlight=2
[Limits]
MemoryMax=1G
TasksMax=512
TimeoutMax=1h
OutputMax=512K
StdinMax=64K
[OwnerQuota]
TasksMax=300
[TenantQuota]
Sandboxes=3
MemoryMax=600M
CreatesPerSecond=1
CreatesBurst=5
Snapshots=1
[Snapshots]
Directory={SNAPDIR}
"""


def setUpModule():
    global S, POLKIT
    POLKIT = polkitutil.setup_module()
    S = secutil.S
    S.configure_daemon(CONFIG)
    with open(os.path.join(S.paths.source, 'polkit', RULES)) as f:
        rules = f.read()
    POLKIT.set_rules(rules + polkitutil.grant_to_nobody('create', 'exec'), name=RULES)
    for name in ('alice', 'bob'):
        cp = S.run([S.paths.sandboxd_http, 'token', 'add', name, f'--tenant={name}',
                    f'--tokens-dir={harness.HTTP_TOKENS_DIR}'], check=True)
        TOKENS[name] = cp.stdout.strip()
    S.systemctl('start', 'sandboxd-http.socket', check=True)


def tearDownModule():
    try:
        S.systemctl('stop', 'sandboxd-http.socket', 'sandboxd-http.service', timeout=60)
        S.configure_daemon(None)
    finally:
        polkitutil.teardown_module(POLKIT)


def request(method, path, body=None, token='alice', timeout=120):
    """(status, parsed JSON or bytes), over loopback TCP from this process (no argv)."""
    h = {'Authorization': f'Bearer {TOKENS[token]}'}
    if body is not None:
        body = json.dumps(body)
        h['Content-Type'] = 'application/json'
    c = http.client.HTTPConnection('127.0.0.1', S.http_port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data and (r.getheader('Content-Type') or '').startswith(
            'application/json') else data
    finally:
        c.close()


def mcp_tool(name, token='alice', **arguments):
    status, res = request('POST', '/mcp', {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/call',
                                            'params': {'name': name, 'arguments': arguments}}, token=token)
    assert status == 200, (status, res)
    return res['result']


def create(uid=None, **options):
    opts = {k: v('t', x) for k, x in options.items()}
    return bus([call(M, MGR, 'CreateSandbox', 'sa{sv}', 'shell', opts)], uid=uid)[0]


def cmdlines():
    """Every process's command line on this machine (the test systemd's included)."""
    out = []
    for pid in os.listdir('/proc'):
        if pid.isdigit():
            try:
                with open(f'/proc/{pid}/cmdline', 'rb') as f:
                    out.append(f.read())
            except OSError:
                pass
    return out


class Quota(secutil.Base):

    def destroy_all(self, token):
        status, res = request('GET', '/api/v1/sessions', token=token)
        for s in res if isinstance(res, list) else []:
            request('DELETE', f'/api/v1/sessions/{s["id"]}', token=token)

    def test_ceilings_on_the_slice(self):
        props = self.wait_until(
            lambda: (lambda p: p if p['TasksMax'] == '3000' else None)(
                S.show('sandbox.slice', 'MemoryMax', 'TasksMax', 'CPUWeight')), 30, 'sandbox.slice ceilings')
        self.assertEqual(props, {'MemoryMax': str(700 * MiB), 'TasksMax': '3000', 'CPUWeight': '30'})
        # A ceiling the host cannot honour: sandboxd refuses to start, and says why.
        with self.assertRaises(harness.HarnessError) as cm:
            S.configure_daemon('[Node]\nTasksMax=100000000\n')
        self.assertIn('cannot honour', str(cm.exception) + S.journal(units=('sandboxd.service',)))
        S.configure_daemon(CONFIG)

    def test_pid_attack(self):
        # Three sandboxes of nobody's, each filled to its TasksMax with sleeping processes.
        fill = ('i=0; while [ $i -lt 150 ]; do sleep 600 >/dev/null 2>&1 & i=$((i+1)); done 2>/dev/null; '
                'echo filled')
        for _ in range(3):
            res = create(uid=NOBODY, TasksMax=100)
            self.assertIn('reply', res, res)
            sid = res['reply'][0]
            self.addCleanup(S.sandboxctl, 'destroy', sid, timeout=120)
            out = bus([call(sandbox_path(sid), SBX, 'Exec', 'asa{sv}', ['sh', '-c', fill], {})], uid=NOBODY)[0]
            self.assertIn('reply', out, out)
        tasks = int(S.show('sandbox.slice', 'TasksCurrent')['TasksCurrent'])
        self.assertGreater(tasks, 250)
        # The fourth is over the owner's quota of 300 tasks: refused before anything starts,
        # on D-Bus and on varlink, with what, the limit and the use.
        res = create(uid=NOBODY, TasksMax=100)
        self.assertEqual(res.get('error'), E + 'QuotaExceeded', res)
        self.assertIn('TasksMax', res['message'])
        self.assertIn('limit 300, in use 300', res['message'])
        vres = secutil.varlink([vcall('CreateSandbox', template='shell', options={'TasksMax': 100})], uid=NOBODY)[0]
        self.assertEqual(vres['error'], VE + 'QuotaExceeded', vres)
        self.assertEqual((vres['parameters']['what'], vres['parameters']['limit'], vres['parameters']['use']),
                         ('TasksMax', 300, 300), vres)
        # A fork is a new sandbox of the caller's: the same quota.
        fres = bus([call(sandbox_path(sid), SBX, 'Fork', 'a{sv}', {})], uid=NOBODY)[0]
        self.assertEqual(fres.get('error'), E + 'QuotaExceeded', fres)
        # The host keeps working: systemctl, sandboxd, a fork outside the slice.
        self.ok(S.systemctl('list-units', '--no-pager'))
        self.ok(S.run(['sh', '-c', 'for i in 1 2 3 4 5 6 7 8; do /bin/true & done; wait']))
        quota = bus([call(M, MGR, 'GetQuota')], uid=NOBODY)[0]['reply']
        self.assertEqual(quota[0], f'owner {NOBODY}')
        self.assertIn(['TasksMax', 300, 300], quota[1])
        self.assertIn(['Sandboxes', 0, 3], quota[1])
        self.assert_serving()

    def test_memory_overcommit_stays_in_the_slice(self):
        ids = [self.create('--memory', '500M') for _ in range(2)]
        pid = S.show('sandboxd.service', 'MainPID')['MainPID']
        results = {}

        def hog(sid):
            results[sid] = self.ctl('exec', sid, '--', 'sh', '-c',
                                    '(head -c 450M /dev/zero; sleep 3) | tail >/dev/null')
        threads = [threading.Thread(target=hog, args=(sid,)) for sid in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        codes = sorted(results[sid].returncode for sid in ids)
        # 900 MiB do not fit the slice's 700 (each fits its own 500): the kernel kills among
        # the sandboxes.
        self.assertEqual(codes[-1], 137, {sid: (r.returncode, r.stdout, r.stderr) for sid, r in results.items()})
        self.assertEqual(S.show('sandboxd.service', 'MainPID')['MainPID'], pid)
        self.ok(S.run(['python3', '-c', 'b = bytearray(300 << 20); print(len(b))']))
        self.assert_serving()

    def test_admin_maxima_on_every_face(self):
        msg = 'MemoryMax=2147483648 exceeds the maximum of 1073741824'
        res = create(MemoryMax=2048 * MiB)
        self.assertEqual(res.get('error'), E + 'InvalidOption', res)
        self.assertIn(msg, res['message'])
        vres = secutil.varlink([vcall('CreateSandbox', template='shell', options={'MemoryMax': 2048 * MiB})])[0]
        self.assertEqual(vres['error'], VE + 'InvalidOption', vres)
        self.assertIn(msg, vres['parameters']['message'])
        cp = self.ctl('create', '--tasks', '1000')
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn('TasksMax=1000 exceeds the maximum of 512', cp.stderr)
        status, res = request('POST', '/api/v1/sessions', {'template': 'shell', 'limits': {'memory_max': 2048 * MiB}})
        self.assertEqual((status, res['error']['code']), (400, 'InvalidOption'), res)
        self.assertIn(msg, res['error']['message'])
        res = mcp_tool('sandbox_create', template='shell', memory_mb=2048)
        self.assertTrue(res['isError'], res)
        self.assertIn(msg, res['content'][0]['text'])
        t = sandboxd.VarlinkTransport(S.path(harness.VARLINK_SOCKET))
        with self.assertRaises(sandboxd.InvalidOption) as cm:
            sandboxd.Sandbox.create('shell', memory='2G', transport=t)
        self.assertIn(msg, str(cm.exception))

    def test_lifetime_output_and_stdin_maxima_on_every_face(self):
        life = 'Timeout=7200 exceeds the maximum of 3600'
        out = 'OutputMax=1048576 exceeds the maximum of 524288'
        stdin = 'Stdin=100000 exceeds the maximum of 65536'
        big = 'x' * 100000
        # D-Bus and varlink: a lifetime, an exec's OutputMax and its stdin beyond the maxima.
        res = create(Timeout=7200)
        self.assertEqual(res.get('error'), E + 'InvalidOption', res)
        self.assertIn(life, res['message'])
        vres = secutil.varlink([vcall('CreateSandbox', template='shell', options={'Timeout': 7200})])[0]
        self.assertEqual(vres['error'], VE + 'InvalidOption', vres)
        self.assertIn(life, vres['parameters']['message'])
        sid = self.create()
        path = sandbox_path(sid)
        res = bus([call(path, SBX, 'Exec', 'asa{sv}', ['true'], {'OutputMax': v('t', 1024 * 1024)})])[0]
        self.assertEqual(res.get('error'), E + 'InvalidOption', res)
        self.assertIn(out, res['message'])
        res = bus([call(path, SBX, 'Exec', 'asa{sv}', ['cat'], {'Stdin': v('ay', {'$bytes': [120, 100000]})})])[0]
        self.assertEqual(res.get('error'), E + 'InvalidOption', res)
        self.assertIn(stdin, res['message'])
        vres = secutil.varlink([vcall('Exec', id=sid, argv=['true'], options={'OutputMax': 1024 * 1024})])[0]
        self.assertEqual(vres['error'], VE + 'InvalidOption', vres)
        self.assertIn(out, vres['parameters']['message'])
        # An exec that asks for no OutputMax gets the maximum, not a refusal: 600 KiB
        # written, 512 KiB kept.
        vres = secutil.varlink([vcall('Exec', id=sid, argv=['head', '-c', '614400', '/dev/zero'])])
        self.assertIn('replies', vres[0], vres)
        self.assertEqual(vres[0]['replies'][0]['stdout'], {'len': 512 * 1024})  # varlinkprobe's summary
        # HTTP: a session's lifetime, an execute's stdin.
        status, res = request('POST', '/api/v1/sessions', {'template': 'shell', 'timeout': 7200})
        self.assertEqual((status, res['error']['code']), (400, 'InvalidOption'), res)
        self.assertIn(life, res['error']['message'])
        status, sess = request('POST', '/api/v1/sessions', {'template': 'shell', 'limits': {'memory_max': 64 * MiB}})
        self.assertEqual(status, 201, sess)
        self.addCleanup(request, 'DELETE', f'/api/v1/sessions/{sess["id"]}')
        status, res = request('POST', f'/api/v1/sessions/{sess["id"]}/execute', {'argv': ['cat'], 'stdin': big})
        self.assertEqual((status, res['error']['code']), (400, 'InvalidOption'), res)
        self.assertIn(stdin, res['error']['message'])
        # MCP: sandbox_create's lifetime, run_command's stdin.
        res = mcp_tool('sandbox_create', template='shell', lifetime=7200)
        self.assertTrue(res['isError'], res)
        self.assertIn(life, res['content'][0]['text'])
        res = mcp_tool('run_command', sandbox_id=sess['id'], command='cat', stdin=big)
        self.assertTrue(res['isError'], res)
        self.assertIn(stdin, res['content'][0]['text'])
        # Python: create's timeout, run's stdin.
        t = sandboxd.VarlinkTransport(S.path(harness.VARLINK_SOCKET))
        with self.assertRaises(sandboxd.InvalidOption) as cm:
            sandboxd.Sandbox.create('shell', timeout=7200, transport=t)
        self.assertIn(life, str(cm.exception))
        sbx = sandboxd.Sandbox.connect(sid, transport=t)
        with self.assertRaises(sandboxd.InvalidOption) as cm:
            sbx.commands.run('cat', stdin=big)
        self.assertIn(stdin, str(cm.exception))

    def test_tenant_snapshot_quota(self):
        # [TenantQuota] Snapshots=1: bob's second snapshot is refused (403, what, limit and
        # use), and GetQuota counts the tenant's snapshots.
        status, sess = request('POST', '/api/v1/sessions', {'template': 'shell', 'limits': {'memory_max': 64 * MiB}},
                               token='bob')
        self.assertEqual(status, 201, sess)
        self.addCleanup(request, 'DELETE', f'/api/v1/sessions/{sess["id"]}', token='bob')
        url = f'/api/v1/sessions/{sess["id"]}/snapshot'
        status, snap = request('POST', url, {}, token='bob')
        self.assertEqual(status, 201, snap)
        self.addCleanup(request, 'DELETE', f'/api/v1/snapshots/{snap["id"]}', token='bob')
        status, res = request('POST', url, {}, token='bob')
        self.assertEqual((status, res['error']['code'], res['error']['what']), (403, 'QuotaExceeded', 'Snapshots'), res)
        self.assertEqual((res['error']['limit'], res['error']['use']), (1, 1), res)
        self.assertIn('Tenant bob', res['error']['message'])
        status, q = request('GET', '/api/v1/quota', token='bob')
        self.assertEqual({e['what']: (e['limit'], e['use']) for e in q['quota']}['Snapshots'], (1, 1), q)
        # alice is another tenant: her own count.
        status, other = request('POST', '/api/v1/sessions', {'template': 'shell', 'limits': {'memory_max': 64 * MiB}})
        self.assertEqual(status, 201, other)
        self.addCleanup(request, 'DELETE', f'/api/v1/sessions/{other["id"]}')
        status, snap = request('POST', f'/api/v1/sessions/{other["id"]}/snapshot', {})
        self.assertEqual(status, 201, snap)
        self.addCleanup(request, 'DELETE', f'/api/v1/snapshots/{snap["id"]}')

    def test_two_tenants_with_quotas(self):
        self.addCleanup(self.destroy_all, 'alice')
        self.addCleanup(self.destroy_all, 'bob')
        # alice: memory. Two of 256 MiB fit 600 MiB; a third does not (403).
        for _ in range(2):
            status, res = request('POST', '/api/v1/sessions', {'template': 'shell', 'limits': {'memory_max': 256 * MiB}})
            self.assertEqual(status, 201, res)
        status, res = request('POST', '/api/v1/sessions', {'template': 'shell', 'limits': {'memory_max': 256 * MiB}})
        self.assertEqual((status, res['error']['code'], res['error']['what']), (403, 'QuotaExceeded', 'MemoryMax'), res)
        self.assertEqual((res['error']['limit'], res['error']['use']), (600 * MiB, 512 * MiB), res)
        # bob is not alice: his own count, 3 sandboxes.
        for _ in range(3):
            status, res = request('POST', '/api/v1/sessions', {'template': 'shell', 'limits': {'memory_max': 64 * MiB}},
                                  token='bob')
            self.assertEqual(status, 201, res)
        status, res = request('POST', '/api/v1/sessions', {'template': 'shell', 'limits': {'memory_max': 64 * MiB}},
                              token='bob')
        self.assertEqual((status, res['error']['what']), (403, 'Sandboxes'), res)
        status, q = request('GET', '/api/v1/quota', token='bob')
        self.assertEqual(status, 200, q)
        self.assertEqual(q['scope'], 'tenant bob')
        items = {e['what']: (e['limit'], e['use']) for e in q['quota']}
        self.assertEqual(items['Sandboxes'], (3, 3))
        self.assertEqual(items['MemoryMax'], (600 * MiB, 192 * MiB))
        self.assertEqual(items['CreatesPerSecond'][0], 1)
        # bob's rate: 1 a second after a burst of 5; at once, 429.
        self.destroy_all('bob')
        seen = None
        for _ in range(8):
            status, res = request('POST', '/api/v1/sessions', {'template': 'shell'}, token='bob')
            if status != 201:
                seen = (status, res)
                break
            request('DELETE', f'/api/v1/sessions/{res["id"]}', token='bob')
        self.assertIsNotNone(seen, 'no create was refused for its rate')
        self.assertEqual((seen[0], seen[1]['error']['code'], seen[1]['error']['what']),
                         (429, 'QuotaExceeded', 'CreatesPerSecond'), seen)
        # MCP's quota_info and the Python client say the same as /api/v1/quota.
        res = mcp_tool('quota_info', token='alice')
        self.assertFalse(res.get('isError'), res)
        self.assertEqual(res['structuredContent']['scope'], 'tenant alice')
        self.assertIn({'what': 'Sandboxes', 'limit': 3, 'use': 2}, res['structuredContent']['quota'])
        t = sandboxd.HttpTransport(f'http://127.0.0.1:{S.http_port}', token=TOKENS['alice'])
        q = sandboxd.Sandbox.quota(transport=t)
        self.assertEqual((q.scope, q['MemoryMax'].limit, q['MemoryMax'].use), ('tenant alice', 600 * MiB, 512 * MiB))
        with self.assertRaises(sandboxd.QuotaExceeded) as cm:
            sandboxd.Sandbox.create('shell', memory='256M', transport=t)
        self.assertEqual((cm.exception.what, cm.exception.limit), ('MemoryMax', 600 * MiB))
        # sandboxctl and varlink, for root (no quota of its own).
        cp = self.ok(self.ctl('quota', '--json'))
        self.assertEqual(json.loads(cp.stdout)['scope'], 'owner 0')
        vq = secutil.varlink([vcall('GetQuota')], uid=NOBODY)[0]['replies'][0]
        self.assertEqual(vq['scope'], f'owner {NOBODY}')

    def test_a_flood_does_not_stall_another(self):
        # root keeps 60 creates in flight; 2 at a time reach systemd (StartsInFlight=2), the
        # rest wait in sandboxd. nobody's create, made during the flood, does not wait
        # behind them: it is answered while most of root's are not.
        t = sandboxd.VarlinkTransport(S.path(harness.VARLINK_SOCKET))
        pending, made, lock = [60], [], threading.Lock()

        def one():
            sbx = sandboxd.Sandbox.create('shell', transport=t)
            with lock:
                pending[0] -= 1
                made.append(sbx)
        threads = [threading.Thread(target=one) for _ in range(60)]
        for th in threads:
            th.start()
        try:
            time.sleep(0.3)
            starting = [s for s in secutil.varlink([vcall('ListSandboxes')])[0]['replies'][0]['sandboxes']
                        if s['state'] == 'starting' and s['owner'] == 0]
            self.assertLessEqual(len(starting), 2, [s['id'] for s in starting])
            res = create(uid=NOBODY)
            with lock:
                left = pending[0]
            self.assertIn('reply', res, res)
            self.addCleanup(S.sandboxctl, 'destroy', res['reply'][0], timeout=120)
            self.assertGreaterEqual(left, 10, f'nobody\'s create was answered after root\'s flood ({left} left)')
        finally:
            for th in threads:
                th.join()
            for sbx in made:
                sbx.kill()

    def test_a_flood_of_snapshots_does_not_stall_another(self):
        # root keeps 24 snapshots in flight, 3 of each of 8 sandboxes with 32 MiB of files;
        # 2 at a time are taken (StartsInFlight=, one queue with the creates), the rest
        # wait. nobody's snapshot, asked during the flood, waits behind none of them.
        t = sandboxd.VarlinkTransport(S.path(harness.VARLINK_SOCKET))
        ids = [self.create('--memory', '64M') for _ in range(8)]
        for sid in ids:
            self.ok(self.exec(sid, 'sh', '-c', 'head -c 32M /dev/urandom > /work/blob'))
        res = create(uid=NOBODY)
        self.assertIn('reply', res, res)
        theirs = res['reply'][0]
        self.addCleanup(S.sandboxctl, 'destroy', theirs, timeout=120)
        pending, snaps, errors, lock = [24], [], [], threading.Lock()

        def one(sid):
            try:
                snap = sandboxd.Sandbox.connect(sid, transport=t).snapshot()
                with lock:
                    snaps.append(snap)
            except sandboxd.SandboxError as e:
                with lock:
                    errors.append(e)
            finally:
                with lock:
                    pending[0] -= 1
        threads = [threading.Thread(target=one, args=(sid,)) for sid in ids * 3]
        taking, done = [0], threading.Event()

        def watch():
            # Snapshots being taken: their .partial files in the directory.
            d = S.path(SNAPDIR)
            while not done.is_set():
                try:
                    taking[0] = max(taking[0], sum(n.endswith('.partial') for n in os.listdir(d)))
                except OSError:
                    pass
                time.sleep(0.005)
        watcher = threading.Thread(target=watch)
        watcher.start()
        for th in threads:
            th.start()
        try:
            time.sleep(0.3)
            res = bus([call(sandbox_path(theirs), SBX, 'Snapshot', 'a{sv}', {})], uid=NOBODY)[0]
            with lock:
                left = pending[0]
            self.assertIn('reply', res, res)
            snaps.append(res['reply'][0])
            self.assertGreaterEqual(left, 8, f'nobody\'s snapshot was answered after root\'s flood ({left} left)')
        finally:
            for th in threads:
                th.join()
            done.set()
            watcher.join()
            for snap in snaps:
                secutil.varlink([vcall('RemoveSnapshot', snapshot=snap)])
        # root's 24 were taken at most 2 at a time; nobody's may have been a third.
        self.assertLessEqual(taking[0], 3, 'more snapshots taken at once than StartsInFlight= allows')
        self.assertGreaterEqual(taking[0], 2)
        self.assertEqual(errors, [])

    def test_code_never_in_a_command_line(self):
        marker = f'QUOTA-MARKER-{os.getpid()}-{time.monotonic_ns()}'
        found = []
        done = threading.Event()

        def watch():
            while not done.is_set():
                found.extend(c for c in cmdlines() if marker.encode() in c)
                time.sleep(0.05)
        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            code = f"import time\nsecret = '{marker}'\ntime.sleep(1.5)\nprint(len(secret))\n"
            with_session = request('POST', '/api/v1/sessions', {'template': 'python',
                                                                'limits': {'memory_max': 128 * MiB}})[1]
            self.addCleanup(request, 'DELETE', f'/api/v1/sessions/{with_session["id"]}')
            status, res = request('POST', f'/api/v1/sessions/{with_session["id"]}/execute',
                                  {'code': code, 'language': 'python'})
            self.assertEqual((status, res['stdout'].strip()), (200, str(len(marker))), res)
            status, res = request('POST', f'/api/v1/sessions/{with_session["id"]}/execute',
                                  {'code': f'read x; m={marker}; sleep 1.5; echo "$x ${{#m}}"', 'language': 'bash',
                                   'stdin': 'given\n'})
            self.assertEqual(res['stdout'].strip(), f'given {len(marker)}', res)
            res = mcp_tool('run_code', language='python', code=code, memory_mb=128)
            self.assertFalse(res.get('isError'), res)
            self.assertEqual(res['structuredContent']['stdout'].strip(), str(len(marker)))
            t = sandboxd.VarlinkTransport(S.path(harness.VARLINK_SOCKET))
            sbx = sandboxd.Sandbox.create('python', transport=t)
            self.addCleanup(sbx.kill)
            cs = CodeSandbox(SandboxConfig(language='python'), sbx)
            self.assertEqual(cs.execute(code).stdout.strip(), str(len(marker)))
        finally:
            done.set()
            watcher.join()
        self.assertEqual(found, [], 'code seen in a command line')
        self.assertNotIn(marker, S.journal(units=('sandboxd.service', 'sandbox-*.scope', 'sandboxd-http.service')))
        self.assertNotIn(marker, S.systemctl('list-units', '--all', '--no-pager').stdout)


if __name__ == '__main__':
    unittest.main()
