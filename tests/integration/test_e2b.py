#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""E2B's own SDKs (the npm packages e2b and @e2b/code-interpreter, pinned by tests/e2b/package-lock.json, installed
with `npm ci` into the build directory), unchanged, against sandboxd-http as the harness
installs it (socket-activated, acting for tenants by the shipped polkit rule): only
E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY (a token from `sandboxd-http token add
--e2b`) set. Each test is a scenario of tests/e2b/e2b-client.mjs, which asserts what the
SDK returns (docs/E2B.md); here, what sandboxd itself shows of it. Also raw requests for
what the SDK does not show: the Connect envelopes and error shapes."""

import json
import os
import shutil
import struct
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, '..', 'security'))
import harness  # noqa: E402
import polkitutil as authz  # noqa: E402
import secutil  # noqa: E402

S = None
POLKIT = None
SDK_DIR = None
SOURCES = os.path.join(HERE, '..', 'e2b')
RULES = 'io.sandboxd.Sandbox1-http.rules'
SNAPDIR = '/run/sandboxd-test-state/snapshots-e2b'


def setUpModule():
    global S, POLKIT, SDK_DIR
    POLKIT = authz.setup_module()
    S = secutil.S
    try:
        SDK_DIR = harness.npm_ci(S.paths.build, SOURCES, 'e2b-sdk', ('e2b-client.mjs',))
        with open(os.path.join(S.paths.source, 'polkit', RULES)) as f:
            POLKIT.set_rules(f.read(), name=RULES)
    except BaseException:
        authz.teardown_module(POLKIT)
        raise


def tearDownModule():
    try:
        S.systemctl('stop', 'sandboxd-http.socket', 'sandboxd-http.service', timeout=60)
    finally:
        POLKIT.set_rules(None, name=RULES)
        authz.teardown_module(POLKIT)


class E2B(secutil.Base):
    """A token for the tenant "acme" in E2B's form; the bridge at E2B_API_URL and
    E2B_SANDBOX_URL."""

    @classmethod
    def setUpClass(cls):
        tokens = S.path(harness.HTTP_TOKENS_DIR)
        shutil.rmtree(tokens, ignore_errors=True)
        cp = S.run([S.paths.sandboxd_http, 'token', 'add', 'e2b-test', '--tenant=acme', '--e2b',
                    f'--tokens-dir={harness.HTTP_TOKENS_DIR}'], check=True)
        cls.key = cp.stdout.strip()
        S.systemctl('start', 'sandboxd-http.socket', check=True)
        cls.url = f'http://127.0.0.1:{S.http_port}'

    def tearDown(self):
        super().tearDown()
        replies, error, _ = S.varlink_call('ListSandboxes')
        for s in (replies[0]['sandboxes'] if not error else []):
            if s['tenant'] == 'acme':
                S.sandboxctl('destroy', s['id'], timeout=120)

    @staticmethod
    def bridge_log():
        cp = S.run(['journalctl', '--no-pager', '-o', 'cat', '-n', '80', '-u', 'sandboxd-http.service'])
        return f'\n----- sandboxd-http.service -----\n{cp.stdout}'

    def scenario(self, name, timeout=300):
        env = dict(os.environ, E2B_API_URL=self.url, E2B_SANDBOX_URL=self.url, E2B_API_KEY=self.key)
        env.pop('E2B_DOMAIN', None)
        cp = subprocess.run([shutil.which('node'), os.path.join(SDK_DIR, 'e2b-client.mjs'), name],
                            capture_output=True, text=True, timeout=timeout, env=env)
        if cp.returncode != 0:
            raise AssertionError(f'scenario {name} failed ({cp.returncode}):\n{cp.stdout[-3000:]}{cp.stderr[-4000:]}'
                                 + self.bridge_log())
        return json.loads(cp.stdout)

    def request(self, method, path, body=None, headers=None):
        h = {'X-API-Key': self.key}
        h.update(headers or {})
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=h)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def test_key_form(self):
        self.assertRegex(self.key, r'^e2b_[0-9a-f]{64}$')

    def test_commands(self):
        out = self.scenario('commands')
        self.assertGreaterEqual(out['lastAt'] - out['firstAt'], 1000)
        # sandboxd's own view: the SDK's sandbox was the tenant's, and it is gone
        replies, error, _ = S.varlink_call('ListSandboxes')
        self.assertFalse(any(s['id'] == out['id'] for s in replies[0]['sandboxes']))

    def test_background(self):
        out = self.scenario('background')
        self.assertEqual(out['exitCode'], -1, out)

    def test_stdin(self):
        self.scenario('stdin')

    def test_pty(self):
        self.scenario('pty')

    def test_files(self):
        self.scenario('files')

    def test_watch(self):
        out = self.scenario('watch')
        self.assertIn('create new.txt', out['events'])
        self.assertIn('remove moved.txt', out['events'])

    def test_lifecycle(self):
        self.scenario('lifecycle')

    def test_metadata(self):
        """E2B's metadata are sandboxd's labels: given at create, returned, filtered on."""
        out = self.scenario('metadata')
        self.assertEqual(out['listed'], 2)

    def test_ports(self):
        """A server in the sandbox through getHost()'s name (the Host header) and through
        E2b-Sandbox-Port, as the SDKs route their own ports."""
        self.scenario('ports')

    def test_code(self):
        """@e2b/code-interpreter: runCode with state, a chart (PNG), an error, contexts, JS."""
        out = self.scenario('code')
        self.assertGreater(out['png'], 1000)

    def test_errors(self):
        self.scenario('errors')

    def test_snapshots(self):
        """createSnapshot, listSnapshots, create from one, fork, deleteSnapshot."""
        S.configure_daemon(f'[Snapshots]\nDirectory={SNAPDIR}\n')
        try:
            self.scenario('snapshots')
        finally:
            S.configure_daemon(None)
            S.run(['rm', '-rf', '--', SNAPDIR])

    def test_rate_limit(self):
        """A create past the tenant's quota is E2B's 429: the SDK's RateLimitError."""
        S.configure_daemon('[TenantQuota]\nSandboxes=1\n')
        try:
            self.scenario('ratelimit')
        finally:
            S.configure_daemon(None)

    def test_connect_protocol(self):
        """A streamed call's reply is Connect's: enveloped messages, then the end; an error
        of a unary call is Connect's code and HTTP status."""
        status, _, body = self.request('POST', '/v2/sandboxes', json.dumps({'templateID': 'base'}).encode(),
                                       {'Content-Type': 'application/json'})
        self.assertEqual(status, 201, body)
        sid = json.loads(body)['sandboxID']
        sandbox = {'E2b-Sandbox-Id': sid, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': self.key}
        msg = json.dumps({'process': {'cmd': '/bin/echo', 'args': ['hi']}}).encode()
        status, headers, body = self.request('POST', '/process.Process/Start', struct.pack('>BI', 0, len(msg)) + msg,
                                             dict(sandbox, **{'Content-Type': 'application/connect+json'}))
        self.assertEqual(status, 200)
        self.assertEqual(headers['Content-Type'], 'application/connect+json')
        frames = []
        while body:
            flags, n = struct.unpack('>BI', body[:5])
            frames.append((flags, json.loads(body[5:5 + n])))
            body = body[5 + n:]
        self.assertIn('start', frames[0][1]['event'])
        self.assertEqual(frames[-1], (2, {}))
        end = [f[1]['event']['end'] for f in frames[:-1] if 'end' in f[1]['event']]
        self.assertEqual(end, [{'exitCode': 0, 'exited': True, 'status': 'exit status 0'}])
        status, _, body = self.request('POST', '/filesystem.Filesystem/Stat', b'{"path": "/home/user/none"}',
                                       dict(sandbox, **{'Content-Type': 'application/json'}))
        self.assertEqual((status, json.loads(body)['code']), (404, 'not_found'))
        # the sandbox plane needs a token too; another port is not served
        status, _, _ = self.request('GET', '/health', headers={'E2b-Sandbox-Id': sid, 'E2b-Sandbox-Port': '49983',
                                                               'X-API-Key': 'e2b_00'})
        self.assertEqual(status, 401)
        status, _, _ = self.request('GET', '/health', headers=sandbox)
        self.assertEqual(status, 204)
        # the control plane's errors: {"code": STATUS, "message"}
        status, _, body = self.request('GET', '/sandboxes/nosuch')
        self.assertEqual((status, json.loads(body)['code']), (404, 404))


    def test_watchers(self):
        """envd's polling watchers (CreateWatcher, GetWatcherEvents, RemoveWatcher): the
        events of files a command makes, polled; a watcher is its tenant's and sandbox's
        only; one removed or never made is not_found."""
        status, _, body = self.request('POST', '/v2/sandboxes', json.dumps({'templateID': 'base'}).encode(),
                                       {'Content-Type': 'application/json'})
        self.assertEqual(status, 201, body)
        sid = json.loads(body)['sandboxID']
        sandbox = {'E2b-Sandbox-Id': sid, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': self.key,
                   'Content-Type': 'application/json'}

        def rpc(method, message, headers=sandbox):
            status, _, body = self.request('POST', '/filesystem.Filesystem/' + method, json.dumps(message).encode(),
                                           headers)
            return status, json.loads(body)

        self.assertEqual(rpc('MakeDir', {'path': '/home/user/wd'})[0], 200)
        self.assertEqual(rpc('CreateWatcher', {'path': '/home/user/nosuch'})[1]['code'], 'not_found')
        status, reply = rpc('CreateWatcher', {'path': '/home/user/wd', 'recursive': False})
        self.assertEqual(status, 200, reply)
        watcher = reply['watcherId']
        self.assertEqual(rpc('GetWatcherEvents', {'watcherId': watcher}), (200, {'events': []}))
        msg = json.dumps({'process': {'cmd': '/bin/sh', 'args': ['-c', 'touch /work/wd/a && rm /work/wd/a'
                                                                  ' && mkdir /work/wd/d']}}).encode()
        status, _, _ = self.request('POST', '/process.Process/Start', struct.pack('>BI', 0, len(msg)) + msg,
                                    dict(sandbox, **{'Content-Type': 'application/connect+json'}))
        self.assertEqual(status, 200)
        events = []
        for _ in range(50):
            status, reply = rpc('GetWatcherEvents', {'watcherId': watcher})
            self.assertEqual(status, 200, reply)
            events += [(e['name'], e['type']) for e in reply['events']]
            if ('d', 'EVENT_TYPE_CREATE') in events:
                break
            time.sleep(0.2)
        self.assertEqual([e for e in events if e[1] != 'EVENT_TYPE_WRITE'],
                         [('a', 'EVENT_TYPE_CREATE'), ('a', 'EVENT_TYPE_REMOVE'), ('d', 'EVENT_TYPE_CREATE')])
        # events since the last poll only
        self.assertEqual(rpc('GetWatcherEvents', {'watcherId': watcher}), (200, {'events': []}))
        # another tenant's key: not its watcher (nor its sandbox)
        cp = S.run([S.paths.sandboxd_http, 'token', 'add', 'e2b-other', '--tenant=other', '--e2b',
                    f'--tokens-dir={harness.HTTP_TOKENS_DIR}'], check=True)
        other = dict(sandbox, **{'X-API-Key': cp.stdout.strip(), 'X-Access-Token': cp.stdout.strip()})
        for _ in range(50):
            status, reply = rpc('GetWatcherEvents', {'watcherId': watcher}, other)
            if status != 401:
                break
            time.sleep(0.1)
        self.assertEqual((status, reply['code']), (404, 'not_found'))
        self.assertEqual(rpc('RemoveWatcher', {'watcherId': watcher}, other)[1]['code'], 'not_found')
        self.assertEqual(rpc('RemoveWatcher', {'watcherId': watcher}), (200, {}))
        self.assertEqual(rpc('GetWatcherEvents', {'watcherId': watcher})[1]['code'], 'not_found')
        self.assertEqual(rpc('RemoveWatcher', {'watcherId': watcher})[1]['code'], 'not_found')
        self.assertEqual(rpc('GetWatcherEvents', {'watcherId': 'nosuch'})[1]['code'], 'not_found')
        # more events between two polls than a watcher keeps (4096): that poll fails, the next goes on
        watcher = rpc('CreateWatcher', {'path': '/home/user/wd'})[1]['watcherId']
        msg = json.dumps({'process': {'cmd': '/bin/sh', 'args': ['-c', 'cd /work/wd && i=0; while [ $i -lt 6000 ];'
                                                                  ' do mkdir m$i; i=$((i+1)); done']}}).encode()
        status, _, _ = self.request('POST', '/process.Process/Start', struct.pack('>BI', 0, len(msg)) + msg,
                                    dict(sandbox, **{'Content-Type': 'application/connect+json'}))
        self.assertEqual(status, 200)
        time.sleep(1.5)  # the events on their way from the agent
        status, reply = rpc('GetWatcherEvents', {'watcherId': watcher})
        self.assertEqual((status, reply['code']), (429, 'resource_exhausted'), reply)
        self.assertEqual(rpc('GetWatcherEvents', {'watcherId': watcher})[0], 200)
        # sandboxd takes 8 watches a sandbox: 7 more watchers beside that one, each polled
        # (its watch taken), then one more refused at once, not an id that polls not_found
        more = [rpc('CreateWatcher', {'path': '/home/user/wd'}) for _ in range(7)]
        self.assertEqual([status for status, _ in more], [200] * 7, more)
        time.sleep(0.5)  # each watch on its way to the agent
        for _, reply in more:
            self.assertEqual(rpc('GetWatcherEvents', {'watcherId': reply['watcherId']})[0], 200, reply)
        status, reply = rpc('CreateWatcher', {'path': '/home/user/wd'})
        self.assertEqual((status, reply.get('code')), (429, 'resource_exhausted'), reply)
        # a watcher ends with its sandbox
        S.sandboxctl('destroy', sid, timeout=120)
        self.assertEqual(rpc('GetWatcherEvents', {'watcherId': watcher})[1]['code'], 'not_found')

if __name__ == '__main__':
    unittest.main()
