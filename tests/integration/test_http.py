#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd-http, the REST/SSE bridge (sandboxd-http(8)), as users reach it: started by its
socket unit in the test systemd, as its own dynamic user, granted io.sandboxd.Sandbox1.delegate
by the shipped polkit rule, and driven with curl and Python's http.client over loopback TCP.
Covers every route of openapi.json, errors and statuses, SSE seen line by line while the
command runs, a 100 MiB upload and download with checksums and a flat bridge RSS, tenants
that do not see each other, tokens (absent, wrong, expired), Prometheus text checked by
promtool, and bad input (huge and endless bodies, malformed and deep JSON, slowloris, many
connections, traversal, odd ids) after which both daemons serve on with the same pids."""

import base64
import hashlib
import http.client
import json
import os
import resource
import select
import shutil
import socket
import subprocess
import sys
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, '..', 'security'))
import harness  # noqa: E402
import secutil  # noqa: E402
import polkitutil as authz  # noqa: E402

S = None
POLKIT = None
TOKENS = {}
MiB = 1024 * 1024
BODY_MAX = MiB
CONNECTION_TIMEOUT = 3
BODY_TIMEOUT = 2
BODY_MIN_RATE = 64 * 1024
PER_IP = 32
PER_TOKEN = 16
VARLINK_PER_TENANT = 8  # VarlinkConnectionsPerTenant=: below PER_TOKEN, so it is what refuses
PROXY = '127.0.0.2'     # a trusted proxy (TrustedProxy=): the tests connect from it too
# test_many_connections: one address's connections at once (this process's RLIMIT_NOFILE
# is raised for them in BadInput).
FLOOD = 10000
RULES = 'io.sandboxd.Sandbox1-http.rules'
NODE_SOURCES = os.path.join(HERE, '..', 'http')
NODE_DIR = None
OPENAPI = os.path.join(HERE, '..', '..', 'src', 'sandboxd-http', 'openapi.json')
VALIDATOR = None      # http-client.mjs validate, for the module
DOC = None
SNAPDIR = '/run/sandboxd-test-state/snapshots-http'


def setUpModule():
    global S, POLKIT, NODE_DIR
    POLKIT = authz.setup_module()
    S = secutil.S
    try:
        NODE_DIR = harness.npm_ci(S.paths.build, NODE_SOURCES, 'http-node', ('http-client.mjs',))
        start_validator()
    except BaseException:
        authz.teardown_module(POLKIT)
        raise
    S.configure_daemon(f'[Snapshots]\nDirectory={SNAPDIR}\nMaxPerOwner=4\n')
    # The shipped rule, as installed: the bridge's user may act for tenants.
    with open(os.path.join(S.paths.source, 'polkit', RULES)) as f:
        POLKIT.set_rules(f.read(), name=RULES)
    with open(S.path(harness.HTTP_CONFIG), 'w') as f:
        f.write(f'[HTTP]\nBodyMax={BODY_MAX}\nConnectionTimeoutSec={CONNECTION_TIMEOUT}\n'
                f'ConnectionsPerIP={PER_IP}\nBodyTimeoutSec={BODY_TIMEOUT}\nBodyMinRate={BODY_MIN_RATE}\n'
                f'RequestsPerToken={PER_TOKEN}\nTrustedProxy={PROXY}\n'
                f'VarlinkConnectionsPerTenant={VARLINK_PER_TENANT}\n')
    shutil.rmtree(S.path(harness.HTTP_TOKENS_DIR), ignore_errors=True)
    for name, tenant, extra in (('alice', 'alice', []), ('bob', 'bob', []),
                                ('old', 'alice', ['--expires-at=1000']), ('ops', 'ops', ['--operator'])):
        cp = S.run([S.paths.sandboxd_http, 'token', 'add', name, f'--tenant={tenant}',
                    f'--tokens-dir={harness.HTTP_TOKENS_DIR}'] + extra, check=True)
        TOKENS[name] = cp.stdout.strip()
    S.systemctl('start', 'sandboxd-http.socket', check=True)


def tearDownModule():
    if VALIDATOR:
        VALIDATOR.stdin.close()
        VALIDATOR.wait(timeout=30)
    try:
        S.systemctl('stop', 'sandboxd-http.socket', 'sandboxd-http.service', timeout=60)
        os.unlink(S.path(harness.HTTP_CONFIG))
        S.configure_daemon(None)
        S.run(['rm', '-rf', '--', SNAPDIR])
        # Under the sanitizers: what they found in the bridge (leaks are reported as it
        # stops), which no test would otherwise see.
        journal = bridge_journal()
        if 'Sanitizer' in journal or 'runtime error' in journal:
            raise AssertionError('sanitizer reports from sandboxd-http:' + journal)
    finally:
        authz.teardown_module(POLKIT)


def start_validator():
    """Every answer the tests get is checked against openapi.json (the source's, which the
    bridge serves) by ajv, a JSON Schema 2020-12 validator, in one node process."""
    global VALIDATOR, DOC
    with open(OPENAPI) as f:
        DOC = json.load(f)
    VALIDATOR = subprocess.Popen([shutil.which('node'), os.path.join(NODE_DIR, 'http-client.mjs'), 'validate', OPENAPI],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _pointer(*parts):
    return ''.join('/' + str(p).replace('~', '~0').replace('/', '~1') for p in parts)


def validate(pointer, value):
    """VALUE against the schema at POINTER of openapi.json: the errors, or None."""
    VALIDATOR.stdin.write(json.dumps({'pointer': pointer, 'body': value}) + '\n')
    VALIDATOR.stdin.flush()
    got = json.loads(VALIDATOR.stdout.readline())
    return None if got['ok'] else got['errors']


def document_path(path):
    """The document's path that PATH (no query) is an instance of, or None: the one with
    the most literal segments matching."""
    segs = path.strip('/').split('/')
    best, score = None, -1
    for p in DOC['paths']:
        ps = p.strip('/').split('/')
        if len(ps) != len(segs):
            continue
        if all(a == b or (a.startswith('{') and b) for a, b in zip(ps, segs)):
            n = sum(a == b for a, b in zip(ps, segs))
            if n > score:
                best, score = p, n
    return best


def check_answer(method, url, status, ctype, body):
    """An answer of the bridge is one the document describes: its status among the
    operation's responses, its content type among that response's, a JSON body valid
    against that schema; an unknown route's 404 and 405 are Error objects."""
    path = urllib.parse.urlsplit(url).path
    p = document_path(path)
    media = (ctype or '').split(';')[0].strip()
    if p is None or method.lower() not in DOC['paths'][p]:
        assert status in (400, 404, 405, 413), (method, url, status)
        errors = validate('/components/schemas/Error', body)
        assert errors is None, (method, url, status, body, errors)
        return
    op = DOC['paths'][p][method.lower()]
    key = str(status) if str(status) in op['responses'] else 'default'
    assert key in op['responses'], f'{method} {p} answered {status}, which the document does not list: {body!r:.300}'
    resp, pointer = op['responses'][key], _pointer('paths', p, method.lower(), 'responses', key)
    if '$ref' in resp:
        name = resp['$ref'].split('/')[-1]
        resp, pointer = DOC['components']['responses'][name], _pointer('components', 'responses', name)
    content = resp.get('content')
    if not content:
        assert not body, (method, url, status, body)
        return
    assert media in content, f'{method} {p} {status}: {media} is not among {list(content)}'
    if media == 'application/json':
        errors = validate(pointer + _pointer('content', media, 'schema'), body)
        assert errors is None, f'{method} {p} {status}: {json.dumps(body)[:600]}\n{errors}'


def conn(timeout=60):
    return http.client.HTTPConnection('127.0.0.1', S.http_port, timeout=timeout)


def request(method, path, body=None, token='alice', headers=None, timeout=60):
    """(status, headers, parsed JSON or bytes)."""
    h = dict(headers or {})
    if token:
        h['Authorization'] = f'Bearer {TOKENS.get(token, token)}'
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
        h.setdefault('Content-Type', 'application/json')
    c = conn(timeout)
    try:
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        ctype = r.getheader('Content-Type') or ''
        parsed = json.loads(data) if ctype.startswith('application/json') and data else data
        check_answer(method, path, r.status, ctype, parsed)
        return r.status, r, parsed
    finally:
        c.close()


def curl(*args, token='alice'):
    cmd = ['curl', '-sS', '-m', '60', '-w', '\\n%{http_code}']
    if token:
        cmd += ['-H', f'Authorization: Bearer {TOKENS[token]}']
    cp = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=90)
    body, _, code = cp.stdout.rpartition('\n')
    return int(code), body


def event_source(path, body=None, token='alice', timeout=60):
    """PATH read by a real EventSource (tests/http/http-client.mjs): ([(event, data, ms)],
    how it closed: {"code": HTTP status or None, "opened": bool})."""
    cmd = [shutil.which('node'), os.path.join(NODE_DIR, 'http-client.mjs'), 'sse',
           f'http://127.0.0.1:{S.http_port}{path}', TOKENS.get(token, token)]
    if body is not None:
        cmd.append(json.dumps(body))
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    lines = [json.loads(x) for x in cp.stdout.splitlines()]
    assert lines and lines[-1].get('closed'), cp.stdout + cp.stderr
    events = [(x['event'], x['data'], x['t']) for x in lines[:-1]]
    # Each event is one the document names, its data valid against its schema.
    names = DOC['components']['x-events']
    for event, data, _ in events:
        assert event in names, (event, list(names))
        errors = validate(_pointer('components', 'schemas', names[event]), json.loads(data))
        assert errors is None, (event, data, errors)
    return events, lines[-1]


def output_of(data):
    """The bytes of an output event's data ({"data", "encoding"})."""
    o = json.loads(data)
    assert set(o) == {'data', 'encoding'}, o
    return base64.b64decode(o['data']) if o['encoding'] == 'base64' else o['data'].encode()


def bridge_journal():
    return '\n' + S.journal(units=('sandboxd-http.service',))[-6000:]


def main_pid(unit):
    return int(S.show(unit, 'MainPID')['MainPID'])


def rss_kib(pid):
    with open(S.path(f'/proc/{pid}/status')) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    raise AssertionError('no VmRSS')


class Session:
    """A session of TOKEN's for a with block."""

    def __init__(self, token='alice', **body):
        self.token, self.body = token, {'template': 'shell', **body}

    def __enter__(self):
        status, _, s = request('POST', '/api/v1/sessions', self.body, token=self.token)
        assert status == 201, (status, s)
        self.id = s['id']
        self.url = f'/api/v1/sessions/{self.id}'
        return self

    def __exit__(self, *exc):
        request('DELETE', self.url, token=self.token)

    def execute(self, body, **kw):
        return request('POST', self.url + '/execute', body, token=self.token, **kw)


class Auth(unittest.TestCase):
    def test_public_routes(self):
        code, body = curl('http://127.0.0.1:%d/healthz' % S.http_port, token=None)
        self.assertEqual((code, json.loads(body)), (200, {'status': 'ok'}))
        status, r, doc = request('GET', '/api/v1/openapi.json', token=None)
        self.assertEqual(status, 200)
        self.assertEqual(doc['openapi'], '3.1.0')

    def test_tokens_refused(self):
        for token in (None, 'wrong', TOKENS['alice'] + 'x', 'old'):
            status, r, body = request('GET', '/api/v1/sessions', token=token)
            self.assertEqual(status, 401, token)
            self.assertTrue(r.getheader('WWW-Authenticate', '').startswith('Bearer'), token)
            self.assertEqual(body['error']['code'], 'Unauthorized')
        status, r, _ = request('GET', '/api/v1/sessions', headers={'Authorization': 'Basic YTpi'}, token=None)
        self.assertEqual(status, 401)

    def test_token_files_hold_hashes(self):
        with open(S.path(harness.HTTP_TOKENS_DIR + '/alice.conf')) as f:
            text = f.read()
        self.assertNotIn(TOKENS['alice'], text)
        self.assertIn('SHA256=' + hashlib.sha256(TOKENS['alice'].encode()).hexdigest(), text)

    def test_tokens_as_credentials(self):
        """Token files handed over as credentials: http-token.NAME for one file, and
        http-token_FILE as LoadCredential=http-token:DIR names a directory's files, read
        from $CREDENTIALS_DIRECTORY besides the tokens directory. The test systemd (PID 1
        in a namespace, systemd 252) hands a DynamicUser= service with mount namespacing an
        empty credentials directory only root may enter (seen with ExecStartPre=+ls, and
        with systemd-run -p DynamicUser=yes -p LoadCredential=), so LoadCredential= itself
        cannot deliver here: the drop-in points $CREDENTIALS_DIRECTORY at a directory laid
        out as LoadCredential= lays it out."""
        creds = '/run/sandboxd-http-test-cred'
        dropin = S.path('/run/systemd/system/sandboxd-http.service.d/60-test-cred.conf')
        secrets = {}
        shutil.rmtree(S.path(creds), ignore_errors=True)
        for name, cred in (('carol', 'http-token.carol'), ('dave', 'http-token_dave.conf'),
                           ('erin', 'other-credential')):
            cp = S.run([S.paths.sandboxd_http, 'token', 'add', name, f'--tokens-dir={creds}'], check=True)
            secrets[name] = cp.stdout.strip()
            os.rename(S.path(f'{creds}/{name}.conf'), S.path(f'{creds}/{cred}'))
        os.chmod(S.path(creds), 0o755)
        with open(dropin, 'w') as f:
            f.write(f'[Service]\nEnvironment=CREDENTIALS_DIRECTORY={creds}\n')
        try:
            S.systemctl('daemon-reload', check=True)
            S.systemctl('stop', 'sandboxd-http.service', check=True)
            for name in ('carol', 'dave'):
                status, _, body = request('GET', '/api/v1/sessions', token=secrets[name])
                self.assertEqual(status, 200, (name, body, bridge_journal()))
            # Not named http-token.*: not a token.
            self.assertEqual(request('GET', '/api/v1/sessions', token=secrets['erin'])[0], 401)
            with Session(token=secrets['dave']) as s:
                self.assertEqual(request('GET', s.url, token=secrets['dave'])[2]['tenant'], 'dave')
                self.assertEqual(request('GET', s.url, token=secrets['carol'])[0], 404)
            self.assertIn('2 token(s) from credentials', bridge_journal())
            # The tokens directory's tokens are still there.
            self.assertEqual(request('GET', '/api/v1/sessions')[0], 200)
        finally:
            os.unlink(dropin)
            S.systemctl('daemon-reload', check=True)
            S.systemctl('stop', 'sandboxd-http.service', check=True)
            S.systemctl('reset-failed', 'sandboxd-http.service', 'sandboxd-http.socket')
            S.systemctl('start', 'sandboxd-http.socket', check=True)
            shutil.rmtree(S.path(creds), ignore_errors=True)
        self.assertEqual(request('GET', '/api/v1/sessions', token=secrets['carol'])[0], 401)

    def test_tokens_reload(self):
        """Tokens added or removed are seen at once (inotify) and on systemctl reload
        (SIGHUP), without a restart: a keep-alive connection stays open throughout."""
        pid = main_pid('sandboxd-http.service')
        c = conn()
        h = {'Authorization': f'Bearer {TOKENS["alice"]}'}

        def on_c():
            c.request('GET', '/api/v1/sessions', headers=h)
            r = c.getresponse()
            r.read()
            return r.status, c.sock.getsockname()

        first = on_c()
        self.assertEqual(first[0], 200)
        cp = S.run([S.paths.sandboxd_http, 'token', 'add', 'frank', f'--tokens-dir={harness.HTTP_TOKENS_DIR}'],
                   check=True)
        frank = cp.stdout.strip()

        def until(status, token, seconds=5):
            deadline = time.monotonic() + seconds
            while True:
                got = request('GET', '/api/v1/sessions', token=token)[0]
                if got == status or time.monotonic() > deadline:
                    return got
                time.sleep(0.1)

        try:
            self.assertEqual(until(200, frank), 200, bridge_journal())
            self.assertEqual(on_c(), first)
            os.unlink(S.path(harness.HTTP_TOKENS_DIR + '/frank.conf'))
            self.assertEqual(until(401, frank), 401, bridge_journal())
            self.assertEqual(on_c(), first)
            # SIGHUP (ExecReload=) reads them again too, and the service stays.
            self.assertEqual(S.systemctl('reload', 'sandboxd-http.service').returncode, 0)
            deadline = time.monotonic() + 5
            while 'Tokens reloaded (SIGHUP)' not in bridge_journal() and time.monotonic() < deadline:
                time.sleep(0.1)
            self.assertIn('Tokens reloaded (SIGHUP)', bridge_journal())
            self.assertEqual(on_c(), first)
            self.assertEqual(main_pid('sandboxd-http.service'), pid)
        finally:
            c.close()
            if os.path.exists(S.path(harness.HTTP_TOKENS_DIR + '/frank.conf')):
                os.unlink(S.path(harness.HTTP_TOKENS_DIR + '/frank.conf'))

    def test_access_log(self):
        """One journal entry per request: method, route pattern, status, tenant and
        duration as fields; never a body, a token, a query or the path's ids."""
        t0 = time.time()
        marker = 'bodymarker' + str(os.getpid())
        with Session() as s:
            request('GET', s.url + '/files?path=' + marker)
            request('POST', s.url + '/execute', {'argv': ['echo', marker]})
            request('GET', '/api/v1/nothing-' + marker)
            request('GET', '/api/v1/sessions', token='wrong' + marker)
        request('GET', '/healthz', token=None)
        entries = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            cp = S.run(['journalctl', '--no-pager', '-o', 'json', f'--since=@{int(t0) - 1}',
                        'MESSAGE_ID=671182baab724d8cbd304b7fffae00f9'], timeout=30)
            entries = [json.loads(x) for x in cp.stdout.splitlines() if x.strip()]
            if any(e.get('HTTP_ROUTE') == '/healthz' for e in entries):
                break
            time.sleep(0.2)
        got = {(e['HTTP_METHOD'], e['HTTP_ROUTE'], e['HTTP_STATUS'], e['HTTP_TENANT']) for e in entries}
        for want in (('POST', '/api/v1/sessions', '201', 'alice'),
                     ('GET', '/api/v1/sessions/{}/files', '404', 'alice'),
                     ('POST', '/api/v1/sessions/{}/execute', '200', 'alice'),
                     ('DELETE', '/api/v1/sessions/{}', '204', 'alice'),
                     ('GET', '-', '404', '-'),
                     ('GET', '/api/v1/sessions', '401', '-'),
                     ('GET', '/healthz', '200', '-')):
            self.assertIn(want, got, entries)
        for e in entries:
            self.assertEqual(e['SYSLOG_IDENTIFIER'], 'sandboxd-http')
            self.assertGreater(int(e['HTTP_DURATION_USEC']), 0)
            text = json.dumps(e)
            for secret in [marker, s.id] + list(TOKENS.values()):
                self.assertNotIn(secret, text)

    def test_unknown_route_and_method(self):
        self.assertEqual(request('GET', '/api/v1/nothing')[0], 404)
        self.assertEqual(request('PATCH', '/api/v1/sessions')[0], 405)


class Sessions(unittest.TestCase):
    def test_lifecycle(self):
        with Session(name='life', timeout=600, limits={'memory_max': 128 * MiB, 'tasks_max': 64}) as s:
            status, _, got = request('GET', s.url)
            self.assertEqual(status, 200)
            self.assertEqual((got['id'], got['name'], got['tenant'], got['memoryMax'], got['tasksMax']),
                             (s.id, 'life', 'alice', 128 * MiB, 64))
            # By its name too.
            self.assertEqual(request('GET', '/api/v1/sessions/life')[2]['id'], s.id)
            ids = [x['id'] for x in request('GET', '/api/v1/sessions')[2]]
            self.assertIn(s.id, ids)
            self.assertIn(s.id, [x['id'] for x in request('GET', '/api/v1/containers')[2]])
            self.assertEqual(request('GET', f'/api/v1/containers/{s.id}')[2]['unit'], got['unit'])
            self.assertEqual(request('POST', s.url + '/pause')[0], 204)
            self.assertEqual(request('GET', s.url)[2]['state'], 'paused')
            self.assertEqual(request('POST', s.url + '/resume')[0], 204)
            self.assertEqual(request('POST', s.url + '/timeout', {'timeout': 900, 'idle_timeout': 300})[0], 204)
            self.assertEqual(request('GET', s.url)[2]['idleTimeout'], 300)
            # reuse: the same session again, by name.
            status, _, again = request('POST', '/api/v1/sessions', {'template': 'shell', 'name': 'life', 'reuse': True})
            self.assertEqual((status, again['id']), (201, s.id))
            status, _, err = request('POST', '/api/v1/sessions', {'template': 'shell', 'name': 'life'})
            self.assertEqual((status, err['error']['code']), (409, 'SandboxExists'))
            logs = request('GET', f'/api/v1/containers/{s.id}/logs?lines=50')[2]
            self.assertTrue(any(s.id in (e.get('message') or '') for e in logs), logs)
            # Without lines, sandboxd's default: all of them; its bound is sandboxd's.
            self.assertGreaterEqual(len(request('GET', f'/api/v1/containers/{s.id}/logs')[2]), len(logs))
            status, _, err = request('GET', f'/api/v1/containers/{s.id}/logs?lines=10001')
            self.assertEqual((status, err['error']['message']), (400, 'lines must be at most 10000 (0: all).'))
            self.assertEqual(request('DELETE', s.url)[0], 204)
            status, _, err = request('GET', s.url)
            self.assertEqual((status, err['error']['code']), (404, 'NoSuchSandbox'))

    def test_egress_rules(self):
        # Issue 32: egress rules at create, as CreateSandbox's EgressAllow= and EgressDeny=.
        with Session(egress_allow=['example.org', '*.example.net:8443'], egress_deny=['bad.example.org']) as s:
            got = request('GET', s.url)[2]
            self.assertEqual((got['egressAllow'], got['egressDeny']),
                             (['example.org', '*.example.net:8443'], ['bad.example.org']))
            status, _, f = request('POST', s.url + '/fork', {'egress_allow': []})
            self.assertEqual(status, 201, f)
            try:
                self.assertEqual((f['egressAllow'], f['egressDeny']), ([], ['bad.example.org']))
            finally:
                request('DELETE', f'/api/v1/sessions/{f["id"]}')

    def test_ephemeral(self):
        status, _, s = request('POST', '/api/v1/sessions', {'template': 'shell', 'mode': 'ephemeral'})
        self.assertEqual(status, 201)
        url = f'/api/v1/sessions/{s["id"]}'
        status, _, res = request('POST', url + '/execute', {'argv': ['echo', 'once']})
        self.assertEqual((status, res['stdout']), (200, 'once\n'))
        self.assertEqual(request('GET', url)[0], 404)

    def test_create_errors(self):
        for body, status, code in (({'template': 'no-such'}, 404, 'NoSuchTemplate'),
                                   ({'mode': 'forever'}, 400, 'InvalidOption'),
                                   ({'limits': {'memory_max': 'lots'}}, 400, 'InvalidOption'),
                                   ({'whatever': 1}, 400, 'InvalidOption'),
                                   ({'limits': {'memory_max': 1}}, 400, 'InvalidOption')):
            got = request('POST', '/api/v1/sessions', body)
            self.assertEqual((got[0], got[2]['error']['code']), (status, code), body)
        # Egress rules: each the core's to check (a bad rule, a non-string, a non-array).
        for body in ({'egress_allow': ['bad host!']}, {'egress_allow': [7]}, {'egress_deny': 'example.org'}):
            got = request('POST', '/api/v1/sessions', {'template': 'shell', **body})
            self.assertEqual((got[0], got[2]['error']['code']), (400, 'InvalidOption'), body)
        # A session-level environment: CreateSandbox has none, so refused and said why.
        got = request('POST', '/api/v1/sessions', {'template': 'shell', 'env': {'X': '1'}})
        self.assertEqual((got[0], got[2]['error']['code']), (400, 'InvalidOption'))
        self.assertIn("'env' is not taken at session creation", got[2]['error']['message'])


class Execute(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Session().__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.s.__exit__()

    def test_sync(self):
        status, _, res = self.s.execute({'argv': ['sh', '-c', 'echo out; echo err >&2; exit 3']})
        self.assertEqual(status, 200)
        self.assertEqual((res['exit_code'], res['stdout'], res['stderr']), (3, 'out\n', 'err\n'))
        status, _, res = self.s.execute({'code': 'import sys; print(sys.stdin.read().upper())', 'language': 'python',
                                         'stdin': 'abc', 'env': {'X': '1'}, 'cwd': '/tmp'})
        self.assertEqual((status, res['stdout']), (200, 'ABC\n'), res)
        status, _, res = self.s.execute({'argv': ['sh', '-c', 'echo $X; pwd'], 'env': {'X': 'y'}, 'cwd': '/tmp'})
        self.assertEqual(res['stdout'], 'y\n/tmp\n')
        status, _, res = self.s.execute({'argv': ['sleep', '5'], 'timeout': 1})
        self.assertTrue(res['info']['timedOut'])

    def test_bad_bodies(self):
        for body in ({'argv': 'ls'}, {'argv': []}, {'argv': [1]}, {'code': 'x', 'language': 'cobol'},
                     {'argv': ['ls'], 'nope': 1}, {'argv': ['ls'], 'timeout': 'x'}, {}):
            status, _, res = self.s.execute(body)
            self.assertEqual((status, res['error']['code']), (400, 'InvalidOption'), body)
        status, _, res = self.s.execute({'argv': ['ls'], 'timeout': 999999})
        self.assertEqual(status, 400)

    def test_sse_line_by_line(self):
        """Each line is seen while the command still runs: the second comes ~1 s after
        the first, and the result last."""
        events, closed = event_source(self.s.url + '/execute',
                                      {'argv': ['sh', '-c', 'echo one; sleep 1; echo two >&2; sleep 1; echo three']})
        self.assertTrue(events, (closed, bridge_journal()))
        names = [(e, output_of(d)) for e, d, _ in events[:3]]
        self.assertEqual(names, [('stdout', b'one\n'), ('stderr', b'two\n'), ('stdout', b'three\n')])
        self.assertEqual(events[3][0], 'result')
        self.assertEqual(json.loads(events[3][1])['exit_code'], 0)
        self.assertGreater(events[1][2] - events[0][2], 700)
        self.assertGreater(events[2][2] - events[1][2], 700)

    def test_sse_cannot_be_forged(self):
        """Output that holds CR, LF, CRLF, "event:" and "data:" lines, NUL and bytes that
        are not UTF-8 comes as the one event it was, every byte kept, and the only
        result is the real one (a browser's EventSource saw a forged exit 0 before)."""
        script = ("printf 'x\\r\\revent: result\\rdata: {\"exit_code\":0}\\r\\r'; "
                  "printf 'a\\n\\nevent: result\\ndata: {}\\n\\nb\\r\\n\\r\\nid: 9\\nretry: 1\\n\\0\\377'; exit 7")
        want = (b'x\r\revent: result\rdata: {"exit_code":0}\r\r'
                b'a\n\nevent: result\ndata: {}\n\nb\r\n\r\nid: 9\nretry: 1\n\0\xff')
        events, closed = event_source(self.s.url + '/execute', {'argv': ['sh', '-c', script]})
        self.assertEqual([e for e, _, _ in events if e != 'stdout'], ['result'], events)
        self.assertEqual(events[-1][0], 'result')
        self.assertEqual(json.loads(events[-1][1])['exit_code'], 7)
        self.assertEqual(b''.join(output_of(d) for e, d, _ in events if e == 'stdout'), want)

    def test_stream_of_missing_or_foreign_session(self):
        """A streamed execute or log follow of a session that is not there, or is another
        tenant's, is answered 404 before any event: EventSource sees the status."""
        body = {'argv': ['true']}
        for path, b, token in ((self.s.url + '/execute', body, 'bob'),
                               ('/api/v1/sessions/0123456789abcdef/execute', body, 'alice'),
                               (self.s.url + '/logs?follow=true', None, 'bob'),
                               ('/api/v1/containers/nope/logs?follow=1', None, 'alice')):
            events, closed = event_source(path, b, token=token)
            self.assertEqual((events, closed['code'], closed['opened']), ([], 404, False), (path, token))
            status, r, res = request('POST' if b else 'GET', path, b, token=token,
                                     headers={'Accept': 'text/event-stream'})
            self.assertEqual((status, res['error']['code']), (404, 'NoSuchSandbox'), (path, token))
        # The session itself is untouched: its owner streams from it.
        events, _ = event_source(self.s.url + '/execute', {'argv': ['echo', 'still']})
        self.assertEqual([(e, output_of(d) if e == 'stdout' else None) for e, d, _ in events][:1],
                         [('stdout', b'still\n')])

    def test_sse_with_curl(self):
        code, body = curl('-N', '-H', 'Accept: text/event-stream', '-d', '{"argv":["printf","a\\\\nb"]}',
                          f'http://127.0.0.1:{S.http_port}{self.s.url}/execute')
        self.assertEqual(code, 200)
        self.assertIn('event: stdout\ndata: {"data":"a\\nb","encoding":"utf-8"}\n\n', body, bridge_journal())

    def test_background(self):
        status, _, res = self.s.execute({'argv': ['sh', '-c', 'echo bg; sleep 3; exit 5'], 'background': True})
        self.assertEqual(status, 202)
        eid = res['execution_id']
        status, _, procs = request('GET', self.s.url + '/status')
        self.assertIn(eid, [p['process'] for p in procs])
        status, _, res = request('GET', f'{self.s.url}/result?execution={eid}')
        self.assertEqual((status, res['error']['code']), (409, 'StillRunning'))
        status, _, res = request('GET', f'{self.s.url}/result?execution={eid}&wait=3601')
        self.assertEqual((status, res['error']['message']), (400, 'Wait takes at most 3600 s.'))
        status, _, res = request('GET', f'{self.s.url}/result?execution={eid}&wait=10')
        self.assertEqual((status, res['exit_code'], res['stdout']), (200, 5, 'bg\n'))
        status, _, res = request('GET', f'{self.s.url}/executions/{eid}')
        self.assertEqual((status, res['running'], res['stdout']), (200, False, 'bg\n'))
        self.assertEqual(request('GET', f'{self.s.url}/executions/99999')[0], 404)

    def logs(self, eid, cursor=None):
        q = f'?cursor={urllib.parse.quote(cursor)}' if cursor is not None else ''
        return request('GET', f'{self.s.url}/executions/{eid}/logs{q}')

    def test_background_logs_by_cursor(self):
        """Polled with the cursor each reply gives, a background execution's output comes
        while it runs, every byte once, until running is false."""
        script = ('for i in 1 2 3 4 5 6 7 8 9 10; do echo "line $i"; echo "err $i" >&2; sleep 0.1; done; '
                  'printf "\\377end\\n"')
        status, _, res = self.s.execute({'argv': ['sh', '-c', script], 'background': True})
        self.assertEqual(status, 202, res)
        eid = res['execution_id']
        out, err, cursor, polls, running_with_output = b'', b'', None, 0, 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status, _, res = self.logs(eid, cursor)
            self.assertEqual(status, 200, res)
            polls += 1
            for name in ('stdout', 'stderr'):
                self.assertEqual(res[f'{name}_dropped'], 0, res)
            got_out = base64.b64decode(res['stdout_base64']) if 'stdout_base64' in res else res['stdout'].encode()
            got_err = res['stderr'].encode()
            if res['running'] and (got_out or got_err):
                running_with_output += 1
            out, err, cursor = out + got_out, err + got_err, res['cursor']
            if not res['running']:
                break
            time.sleep(0.15)
        self.assertFalse(res['running'], res)
        self.assertEqual(out, b''.join(b'line %d\n' % i for i in range(1, 11)) + b'\xffend\n')
        self.assertEqual(err, b''.join(b'err %d\n' % i for i in range(1, 11)))
        # Read while it ran, in several parts: the cursor moved on with the output.
        self.assertGreater(running_with_output, 2, polls)
        # At the end, nothing new; from the start again, all of it.
        status, _, res = self.logs(eid, cursor)
        self.assertEqual((status, res['stdout'], res['stderr'], res['cursor'], res['running']),
                         (200, '', '', cursor, False))
        status, _, res = self.logs(eid)
        self.assertEqual((base64.b64decode(res['stdout_base64']), res['stderr'].encode()), (out, err))
        # A cursor this route did not give: 400; a missing execution: 404.
        for bad in ('x', '5', '1.x', '1.2.3', '-1.0', ' 1.0', '99999.0', '0.99999'):
            status, _, res = self.logs(eid, bad)
            self.assertEqual((status, res['error']['code']), (400, 'InvalidOption'), bad)
        status, _, res = self.logs(99999)
        self.assertEqual((status, res['error']['code']), (404, 'NoSuchProcess'))

    def test_background_logs_dropped(self):
        """What the daemon's bound dropped is counted, not silently skipped."""
        n = 3 * 1024 * 1024
        status, _, res = self.s.execute({'argv': ['sh', '-c', f'head -c {n} /dev/zero | tr "\\0" x'],
                                         'background': True})
        eid = res['execution_id']
        self.assertEqual(request('GET', f'{self.s.url}/result?execution={eid}&wait=60')[0], 200)
        status, _, res = self.logs(eid, '1.0')
        kept = len(res['stdout'])
        self.assertEqual(res['stdout'], 'x' * kept)
        self.assertGreater(res['stdout_dropped'], 0)
        self.assertEqual((res['stdout_dropped'], res['cursor']), (n - 1 - kept, f'{n}.0'))


class StrictInput(unittest.TestCase):
    """A NUL byte, loose JSON or a timeout out of range: refused naming the field or the
    bound, never cut, clamped or rounded (sandboxd-http(8))."""

    def assert_invalid(self, res, status, code, *words):
        self.assertEqual((status, res['error']['code']), (400, code), res)
        for w in words:
            self.assertIn(w, res['error']['message'])

    def test_nul_in_path_and_query(self):
        with Session() as s:
            self.assertEqual(request('PUT', s.url + '/files?path=secret.txt', body=b'secret')[0], 201)
            status, _, res = request('GET', s.url + '/files?path=secret.txt%00.png')
            self.assert_invalid(res, status, 'InvalidParameter', 'path', '%00')
            status, _, res = request('PUT', s.url + '/files?path=a%00b', body=b'x')
            self.assert_invalid(res, status, 'InvalidParameter', 'path')
            self.assertEqual(request('GET', s.url + '/files?path=a')[0], 404)     # nothing was made
            status, _, res = request('GET', s.url + '%00junk')
            self.assert_invalid(res, status, 'InvalidParameter', 'the path')
            code, body = curl(f'http://127.0.0.1:{S.http_port}{s.url}/files?path=secret.txt%00.png')
            self.assertEqual(code, 400, body)
            # The next request on the same connection is not taken for one with a NUL.
            c = conn()
            h = {'Authorization': f'Bearer {TOKENS["alice"]}'}
            for path, want in (('/files?path=secret.txt%00', 400), ('/files?path=secret.txt', 200)):
                c.request('GET', s.url + path, headers=h)
                r = c.getresponse()
                r.read()
                self.assertEqual(r.status, want, path)
            c.close()

    def test_integers_and_null_in_session_options(self):
        status, _, res = request('POST', '/api/v1/sessions',
                                 {'template': 'shell', 'timeout': 600.0, 'limits': {'memory_max': 268435456.0}})
        self.assertEqual(status, 201, res)
        request('DELETE', f'/api/v1/sessions/{res["id"]}')
        self.assertEqual((res['timeout'], res['memoryMax']), (600, 256 * MiB), res)
        for body in ({'template': 'shell', 'timeout': None}, {'template': 'shell', 'timeout': 600.5},
                     {'template': 'shell', 'limits': {'memory_max': None}}):
            status, _, res = request('POST', '/api/v1/sessions', body)
            self.assert_invalid(res, status, 'InvalidOption', 'timeout' if 'timeout' in body else 'memory_max')

    def test_nul_in_json_bodies(self):
        with Session() as s:
            for body, field in (({'code': 'print(1)\u0000print(2)', 'language': 'python'}, 'code'),
                                ({'argv': ['echo', 'a\u0000b']}, 'argv[1]'),
                                ({'argv': ['env'], 'env': {'X': 'a\u0000b'}}, 'env.X'),
                                ({'argv': ['true'], 'cwd': '/tmp\u0000/x'}, 'cwd')):
                status, _, res = s.execute(body)
                self.assert_invalid(res, status, 'InvalidParameter', field)
            status, _, res = request('POST', s.url + '/files/mkdir', {'path': 'd\u0000x'})
            self.assert_invalid(res, status, 'InvalidParameter', 'path')
            # stdin is bytes: its NUL goes through.
            status, _, res = s.execute({'argv': ['wc', '-c'], 'stdin': 'a\u0000b'})
            self.assertEqual((status, res['stdout'].strip()), (200, '3'), res)

    def test_loose_json(self):
        with Session() as s:
            for body in (b'{"argv": ["echo", "a\tb"]}', b'{"argv": ["true"], "timeout": NaN}',
                         b'{"argv": ["true"], "timeout": Infinity}', b'{"argv": ["true"], "timeout": 1.}',
                         b'{"argv": ["true"], "timeout": 18446744073709551616}',
                         b'{"argv": ["true"], "timeout": 1e400}'):
                status, _, res = request('POST', s.url + '/execute', body=body)
                self.assert_invalid(res, status, 'InvalidBody')

    def test_timeouts(self):
        with Session() as s:
            status, _, res = s.execute({'argv': ['true'], 'timeout': 4000})
            self.assert_invalid(res, status, 'InvalidOption', '3600')
            status, _, res = s.execute({'argv': ['true'], 'timeout': 3600.5})
            self.assert_invalid(res, status, 'InvalidOption', '3600000000')
            for bad in (None, -1, '5'):
                status, _, res = s.execute({'argv': ['true'], 'timeout': bad})
                self.assert_invalid(res, status, 'InvalidOption', 'timeout')
            status, _, res = s.execute({'argv': ['sh', '-c', 'echo ok'], 'timeout': 2.0})
            self.assertEqual((status, res['stdout']), (200, 'ok\n'), res)
            status, _, res = s.execute({'argv': ['sleep', '5'], 'timeout': 0.5})
            self.assertEqual(status, 200, res)
            self.assertTrue(res['info']['timedOut'], res)
            self.assertLess(res['info']['durationUSec'], 900000, res)


class Files(unittest.TestCase):
    def test_small_ops(self):
        with Session() as s:
            self.assertEqual(request('PUT', s.url + '/files?path=d/a.txt', body=b'hello')[0], 201)
            status, _, data = request('GET', s.url + '/files?path=d/a.txt')
            self.assertEqual((status, data), (200, b'hello'))
            self.assertEqual(request('PUT', s.url + '/files?path=empty', body=b'')[0], 201)
            self.assertEqual(request('GET', s.url + '/files?path=empty')[2], b'')
            self.assertEqual(request('POST', s.url + '/files/mkdir', {'path': 'x/y', 'parents': True})[0], 204)
            self.assertEqual(request('POST', s.url + '/files/move', {'from': 'd/a.txt', 'to': 'x/y/b.txt'})[0], 204)
            entries = request('GET', s.url + '/files/list?path=x&depth=3')[2]
            self.assertIn(('y/b.txt', 'file', 5), [(e['path'], e['type'], e['size']) for e in entries])
            self.assertEqual(request('DELETE', s.url + '/files?path=x')[0], 409)
            self.assertEqual(request('DELETE', s.url + '/files?path=x&recursive=true')[0], 204)
            self.assertEqual(request('GET', s.url + '/files?path=x/y/b.txt')[0], 404)
            self.assertEqual(request('GET', s.url + '/files?path=x')[0], 404)
            self.assertEqual(request('GET', s.url + '/files')[0], 400)
            # Bounds are sandboxd's: the bridge reads numbers and passes them on.
            status, _, err = request('GET', s.url + '/files/list?depth=99')
            self.assertEqual((status, err['error']['message']), (400, 'depth must be between 1 and 16.'))

    def test_upload_past_disk_max(self):
        """An upload that outgrows the session's disk_max is answered (413 or 507, with
        sandboxd's reason) after its body, not dropped, and leaves no partial file; a
        file that was there and an upload refused for another reason are untouched."""
        with Session(limits={'disk_max': 8 * MiB}) as s:
            self.assertEqual(request('PUT', s.url + '/files?path=keep', body=b'kept')[0], 201)
            for body in (b'x' * (48 * MiB), b'y' * (9 * MiB)):
                status, r, res = request('PUT', s.url + '/files?path=big.bin', body=body)
                self.assertIn(status, (413, 507), res)
                self.assertIn(res['error']['code'], ('QuotaExceeded', 'SystemError', 'FileTooLarge'), res)
                self.assertTrue(res['error']['message'], res)
                self.assertEqual(request('GET', s.url + '/files?path=big.bin')[0], 404)
                names = [e['path'] for e in request('GET', s.url + '/files/list')[2]]
                self.assertNotIn('big.bin', names)
                self.assertIn('keep', names)
            # A path that is a directory: refused, and the directory stays.
            self.assertEqual(request('POST', s.url + '/files/mkdir', {'path': 'dir'})[0], 204)
            status, _, res = request('PUT', s.url + '/files?path=dir', body=b'z' * (5 * MiB))
            self.assertGreaterEqual(status, 400, res)
            self.assertIn('dir', [e['path'] for e in request('GET', s.url + '/files/list')[2]])
            # And the session takes files again.
            self.assertEqual(request('PUT', s.url + '/files?path=small', body=b'ok')[0], 201)
            self.assertEqual(request('GET', s.url + '/files?path=keep')[2], b'kept')

    def test_traversal_stays_inside(self):
        marker = f'/var/tmp/http-traversal-{os.getpid()}'
        with open(S.path(marker), 'w') as f:
            f.write('host')
        try:
            with Session() as s:
                for path in ('../../../../' + marker, marker, '/work/../../' + marker):
                    status, _, _ = request('GET', s.url + '/files?path=' + path)
                    self.assertIn(status, (403, 404), path)
                    status, _, _ = request('PUT', s.url + '/files?path=' + path, body=b'x')
                    self.assertIn(status, (403, 404), path)
                with open(S.path(marker)) as f:
                    self.assertEqual(f.read(), 'host')
        finally:
            os.unlink(S.path(marker))

    def test_100mib_both_ways(self):
        size = 100 * MiB
        pid = main_pid('sandboxd-http.service')
        before = rss_kib(pid)
        block = os.urandom(MiB)
        want = hashlib.sha256()
        for i in range(100):
            want.update(bytes([i]) + block[1:])

        def body():
            for i in range(100):
                yield bytes([i]) + block[1:]

        with Session(limits={'disk_max': 256 * MiB}) as s:
            c = conn(timeout=300)
            t0 = time.monotonic()
            c.request('PUT', s.url + '/files?path=big.bin', body=body(), encode_chunked=True,
                      headers={'Authorization': f'Bearer {TOKENS["alice"]}', 'Transfer-Encoding': 'chunked'})
            r = c.getresponse()
            self.assertEqual((r.status, json.loads(r.read())['bytes']), (201, size))
            up = time.monotonic() - t0
            c.close()
            status, _, res = s.execute({'argv': ['sha256sum', 'big.bin']})
            self.assertEqual(res['stdout'].split()[0], want.hexdigest())
            c = conn(timeout=300)
            t0 = time.monotonic()
            c.request('GET', s.url + '/files?path=big.bin', headers={'Authorization': f'Bearer {TOKENS["alice"]}'})
            r = c.getresponse()
            self.assertEqual((r.status, int(r.getheader('Content-Length'))), (200, size))
            got, n = hashlib.sha256(), 0
            while True:
                chunk = r.read(MiB)
                if not chunk:
                    break
                got.update(chunk)
                n += len(chunk)
            down = time.monotonic() - t0
            c.close()
            self.assertEqual((n, got.hexdigest()), (size, want.hexdigest()))
        after = rss_kib(pid)
        print(f'\n# 100 MiB over sandboxd-http: up {up:.1f} s, down {down:.1f} s; bridge RSS {before} -> {after} KiB',
              file=sys.stderr)
        if not S.paths.http_sanitized():
            # (Under AddressSanitizer freed memory stays in its quarantine and the
            # allocator's caches: RSS says nothing there.)
            self.assertLess(after - before, 40 * 1024, 'the bridge buffered the file')


class Tenants(unittest.TestCase):
    def test_isolated(self):
        with Session('alice', name='mine') as a, Session('bob', name='mine') as b:
            self.assertNotEqual(a.id, b.id)
            self.assertEqual([x['id'] for x in request('GET', '/api/v1/sessions', token='bob')[2]], [b.id])
            for method, path, body in (('GET', a.url, None), ('DELETE', a.url, None),
                                       ('POST', a.url + '/execute', {'argv': ['true']}),
                                       ('GET', a.url + '/files?path=x', None),
                                       ('GET', a.url + '/status', None),
                                       ('GET', a.url + '/executions/1/logs?cursor=0.0', None),
                                       ('GET', f'/api/v1/containers/{a.id}/logs', None),
                                       ('POST', a.url + '/pause', None)):
                status, _, res = request(method, path, body, token='bob')
                self.assertEqual((status, res['error']['code']), (404, 'NoSuchSandbox'), path)
                # The same answer as for an id that never was: nothing tells it exists.
                _, _, none = request(method, path.replace(a.id, '0123456789abcdef'), body, token='bob')
                self.assertEqual(json.dumps(res).replace(a.id, '0123456789abcdef'), json.dumps(none), path)
            # Each one's name is its own.
            self.assertEqual(request('GET', '/api/v1/sessions/mine', token='bob')[2]['id'], b.id)
            self.assertEqual(request('GET', '/api/v1/sessions/mine', token='alice')[2]['id'], a.id)
            self.assertEqual(request('GET', a.url, token='alice')[2]['tenant'], 'alice')


class Snapshots(unittest.TestCase):
    """POST .../snapshot, .../fork, .../hibernate, .../wake, GET and DELETE /api/v1/snapshots,
    from_snapshot and idle_action at creation: each a translation of the varlink method."""

    def put(self, s, path, data, token='alice'):
        self.assertEqual(request('PUT', s.url + f'/files?path={path}', body=data, token=token)[0], 201)

    def get(self, url, path, token='alice'):
        return request('GET', url + f'/files?path={path}', token=token)

    def test_snapshot_restore_fork(self):
        with Session() as s:
            self.put(s, 'a.txt', b'first')
            status, _, snap = request('POST', s.url + '/snapshot', {})
            self.assertEqual(status, 201, snap)
            self.assertEqual((snap['source'], snap['tenant'], snap['hibernated'], snap['includesTmp']),
                             (s.id, 'alice', False, False))
            self.assertIn(snap['id'], [x['id'] for x in request('GET', '/api/v1/snapshots')[2]])
            with Session(from_snapshot=snap['id'], idle_action='pause', idle_timeout=600) as r:
                self.assertEqual(self.get(r.url, 'a.txt')[:3:2], (200, b'first'))
            # Fork: a second session with the files, then each goes its own way.
            status, _, f = request('POST', s.url + '/fork', {'name': 'forked'})
            self.assertEqual((status, f['name'], f['tenant']), (201, 'forked', 'alice'), f)
            furl = f'/api/v1/sessions/{f["id"]}'
            try:
                self.assertEqual(self.get(furl, 'a.txt')[2], b'first')
                self.put(s, 'a.txt', b'source')
                self.assertEqual(request('PUT', furl + '/files?path=a.txt', body=b'fork')[0], 201)
                self.assertEqual((self.get(s.url, 'a.txt')[2], self.get(furl, 'a.txt')[2]), (b'source', b'fork'))
            finally:
                self.assertEqual(request('DELETE', furl)[0], 204)
            self.assertEqual(request('DELETE', f'/api/v1/snapshots/{snap["id"]}')[0], 204)
            self.assertNotIn(snap['id'], [x['id'] for x in request('GET', '/api/v1/snapshots')[2]])
            # Errors, each the daemon's with its status.
            for method, path, body, want in (
                    ('DELETE', f'/api/v1/snapshots/{snap["id"]}', None, (404, 'NoSuchSnapshot')),
                    ('POST', '/api/v1/sessions', {'from_snapshot': snap['id']}, (404, 'NoSuchSnapshot')),
                    ('POST', '/api/v1/sessions', {'idle_action': 'explode'}, (400, 'InvalidOption')),
                    ('POST', '/api/v1/sessions', {'from_snapshot': 7}, (400, 'InvalidOption')),
                    ('POST', s.url + '/snapshot', {'include_tmp': 'yes'}, (400, 'InvalidOption')),
                    ('POST', s.url + '/fork', {'template': 'shell'}, (400, 'InvalidOption')),
                    ('POST', '/api/v1/sessions/0123456789abcdef/snapshot', {}, (404, 'NoSuchSandbox')),
                    ('POST', '/api/v1/sessions/0123456789abcdef/wake', None, (404, 'NoSuchSandbox'))):
                status, _, res = request(method, path, body)
                self.assertEqual((status, res['error']['code']), want, (method, path, body))

    def test_too_large_and_quota(self):
        with Session(limits={'disk_max': 64 * MiB}) as s:
            s.execute({'argv': ['sh', '-c', 'head -c 5000000 /dev/urandom > /work/r.bin']})
            status, _, snap = request('POST', s.url + '/snapshot', {'include_tmp': True})
            self.assertEqual((status, snap['includesTmp']), (201, True), snap)
            try:
                # 5 MB of files: more than a 2 MiB /work and /tmp hold together.
                status, _, res = request('POST', '/api/v1/sessions', {'from_snapshot': snap['id'],
                                                                      'limits': {'disk_max': 2 * MiB}})
                self.assertEqual((status, res['error']['code']), (413, 'SnapshotTooLarge'), res)
                taken = [snap['id']]
                try:
                    for _ in range(8):
                        status, _, res = request('POST', s.url + '/snapshot', {})
                        if status != 201:
                            break
                        taken.append(res['id'])
                    self.assertEqual((status, res['error']['code']), (403, 'QuotaExceeded'), res)
                finally:
                    for sid in taken[1:]:
                        request('DELETE', f'/api/v1/snapshots/{sid}')
            finally:
                request('DELETE', f'/api/v1/snapshots/{snap["id"]}')

    def test_hibernate_wake_and_tenants(self):
        with Session(name='sleeper') as s:
            self.put(s, 'keep.txt', b'kept')
            # bob sees none of it: not the session, nor its snapshots.
            status, _, res = request('POST', s.url + '/hibernate', {}, token='bob')
            self.assertEqual((status, res['error']['code']), (404, 'NoSuchSandbox'))
            before = [x['id'] for x in request('GET', '/api/v1/snapshots')[2]]
            status, _, snap = request('POST', s.url + '/hibernate', {})
            # On disk: stopped, its files kept, no snapshot archive (an empty id).
            self.assertEqual((status, snap['hibernated'], snap['source'], snap['name'], snap['id']),
                             (200, True, s.id, 'sleeper', ''))
            status, _, got = request('GET', s.url)
            self.assertEqual((status, got['state']), (200, 'stopped'))
            self.assertEqual([x['id'] for x in request('GET', '/api/v1/snapshots')[2]], before)
            self.assertEqual(request('GET', '/api/v1/snapshots', token='bob')[2], [])
            for path in ('/api/v1/sessions/sleeper/wake', s.url + '/wake'):
                status, _, res = request('POST', path, {}, token='bob')
                self.assertEqual(status, 404, (path, res))
            status, _, woke = request('POST', '/api/v1/sessions/sleeper/wake', {})
            self.assertEqual((status, woke['id'], woke['name'], woke['tenant']), (200, s.id, 'sleeper', 'alice'), woke)
            self.assertEqual(self.get(s.url, 'keep.txt')[2], b'kept')


class Metrics(unittest.TestCase):
    def scrape(self, token='alice'):
        status, r, text = request('GET', '/metrics', token=token)
        self.assertEqual(status, 200)
        self.assertTrue(r.getheader('Content-Type').startswith('text/plain; version=0.0.4'))
        text = text.decode()
        cp = subprocess.run(['promtool', 'check', 'metrics'], input=text, capture_output=True, text=True)
        self.assertEqual(cp.returncode, 0, cp.stdout + cp.stderr)
        return text

    def value(self, text, name):
        for line in text.splitlines():
            if line.startswith(name + ' '):
                return float(line.split()[1])
        raise AssertionError(f'{name} not in metrics')

    def test_promtool_and_counters(self):
        before = self.scrape()
        with Session() as s:
            for _ in range(3):
                s.execute({'argv': ['true']})
        after = self.scrape()
        for name, delta in (('sandboxd_execs_total', 3), ('sandboxd_exec_duration_seconds_count', 3),
                            ('sandboxd_sandboxes_created_total', 1)):
            self.assertGreaterEqual(self.value(after, name) - self.value(before, name), delta, name)
        self.assertIn('sandboxd_http_requests_total', self.scrape('ops'))
        self.assertEqual(request('GET', '/metrics', token=None)[0], 401)

    def test_workspace_bytes(self):
        """The workspaces on disk: bytes used and their limits, the tenant's own; the
        pool's size and free bytes for an operator only."""
        used, most = 'sandboxd_workspace_bytes{kind="used"}', 'sandboxd_workspace_bytes{kind="max"}'
        alice0, bob0 = self.scrape(), self.scrape('bob')
        with Session(limits={'disk_max': 64 * MiB}) as s:
            status, _, res = s.execute({'argv': ['sh', '-c', 'head -c 3M /dev/zero > /work/f && sync']})
            self.assertEqual((status, res.get('exit_code')), (200, 0), res)
            alice, bob, ops = self.scrape(), self.scrape('bob'), self.scrape('ops')
            self.assertGreaterEqual(self.value(alice, used) - self.value(alice0, used), 3 * MiB)
            self.assertEqual(self.value(alice, most) - self.value(alice0, most), 64 * MiB)
            self.assertEqual((self.value(bob, used), self.value(bob, most)), (self.value(bob0, used),
                                                                             self.value(bob0, most)))
            self.assertNotIn('sandboxd_workspace_pool_bytes', alice)
            size = self.value(ops, 'sandboxd_workspace_pool_bytes{kind="size"}')
            self.assertGreater(size, 0)
            self.assertLess(self.value(ops, 'sandboxd_workspace_pool_bytes{kind="free"}'), size)

    def test_scoped_to_the_tenant(self):
        """A tenant's token sees its own sandboxes and counters, never another's nor the
        bridge's traffic; an operator's token (Operator=yes) sees the daemon's. A gauge
        whose sandboxes left drops to 0 rather than vanishing."""
        paused = 'sandboxd_sandboxes{state="paused",template="shell"}'
        alice0, bob0, ops0 = self.scrape(), self.scrape('bob'), self.scrape('ops')
        with Session() as s:
            for _ in range(3):
                s.execute({'argv': ['true']})
            self.assertEqual(request('POST', s.url + '/pause')[0], 204)
            alice, bob, ops = self.scrape(), self.scrape('bob'), self.scrape('ops')
            self.assertEqual(self.value(alice, paused), 1)
            self.assertEqual(self.value(bob, paused), 0)
            self.assertGreaterEqual(self.value(ops, paused), 1)
            self.assertEqual(self.value(alice, 'sandboxd_execs_total') - self.value(alice0, 'sandboxd_execs_total'), 3)
            self.assertEqual(self.value(bob, 'sandboxd_execs_total'), self.value(bob0, 'sandboxd_execs_total'))
            self.assertEqual(self.value(bob, 'sandboxd_sandboxes_created_total'),
                             self.value(bob0, 'sandboxd_sandboxes_created_total'))
            self.assertGreaterEqual(self.value(ops, 'sandboxd_execs_total') - self.value(ops0, 'sandboxd_execs_total'), 3)
            for text in (alice, bob):
                self.assertNotIn('sandboxd_http_', text)
                self.assertNotIn('sandboxd_spool_backlog', text)
                self.assertNotIn('sandboxd_pool_sandboxes{', text)
            self.assertIn('sandboxd_spool_backlog', ops)
            self.assertEqual(request('POST', s.url + '/resume')[0], 204)
            self.assertEqual(self.value(self.scrape(), paused), 0)
        self.assertEqual(self.value(self.scrape(), 'sandboxd_sandboxes{state="running",template="shell"}'), 0)


class OpenAPI(unittest.TestCase):
    def test_document_and_routes(self):
        doc = request('GET', '/api/v1/openapi.json', token=None)[2]
        self.assertEqual(doc['openapi'], '3.1.0')
        for key in ('info', 'paths', 'components'):
            self.assertIn(key, doc)
        self.assertIn('bearer', json.dumps(doc['components']['securitySchemes']).lower())
        # The document the tests hold every answer to is the one served.
        self.assertEqual(doc, DOC)
        # And the check is a real one: what the document does not allow is refused.
        for pointer, bad in (('/components/schemas/ExecResult', {'exit_code': 0}),
                             ('/components/schemas/Session', {'id': 'x'}),
                             ('/components/schemas/EventOutput', {'data': 'x', 'encoding': 'latin1'}),
                             ('/components/schemas/Started', {'execution_id': '1'})):
            self.assertIsNotNone(validate(pointer, bad), pointer)
        before = {x['id'] for x in request('GET', '/api/v1/sessions')[2]}
        snapshots = {x['id'] for x in request('GET', '/api/v1/snapshots')[2]}
        with Session() as s:
            n = 0
            for path, item in doc['paths'].items():
                for method, op in item.items():
                    self.assertIn('responses', op, f'{method} {path}')
                    url = (path.replace('{id}', s.id).replace('{eid}', '1').replace('{name}', 'no-such-template')
                           .replace('{sid}', '0123456789abcdef').replace('{cid}', '0123456789ab'))
                    status = request(method.upper(), url, body={} if method in ('post', 'put') else None)[0]
                    # Answered by its route (whatever the answer): not an unknown route.
                    self.assertNotIn(status, (405, 501), f'{method} {path}')
                    if status == 404:
                        self.assertNotIn(url, ('/api/v1/openapi.json',), f'{method} {path}')
                    n += 1
            self.assertGreaterEqual(n, 25)
        # POST /api/v1/sessions with {} made one: not left behind.
        for x in request('GET', '/api/v1/sessions')[2]:
            if x['id'] not in before:
                self.assertEqual(request('DELETE', f'/api/v1/sessions/{x["id"]}')[0], 204)
        # Nor the snapshot POST .../snapshot took (hibernate's was woken and is gone).
        for x in request('GET', '/api/v1/snapshots')[2]:
            if x['id'] not in snapshots:
                self.assertEqual(request('DELETE', f'/api/v1/snapshots/{x["id"]}')[0], 204)
        # And the other way: each route of the bridge is in the document.
        with open(os.path.join(S.paths.source, 'src', 'sandboxd-http', 'http-routes.c')) as f:
            src = f.read()
        table = src[src.index('const HttpRoute http_routes[]'):]
        for line in table.splitlines():
            line = line.strip()
            if line.startswith('{ "'):
                method, pattern = [x.strip() for x in line[2:].split(',')[:2]]
                method = method.strip('"')
                if pattern.startswith('S'):
                    pattern = '/api/v1/sessions/{}' + pattern[1:]
                pattern = pattern.replace('"', '').replace(' ', '')
                self.assertTrue(any(_matches(p, pattern) and method.lower() in doc['paths'][p]
                                    for p in doc['paths']), f'{method} {pattern} not documented')


def _matches(doc_path, pattern):
    a, b = doc_path.strip('/').split('/'), pattern.strip('/').split('/')
    # "{...}" (the rest of the path, the port proxy's) stands for the document's last parameter.
    return len(a) == len(b) and all(x == y or (x.startswith('{') and y in ('{}', '{...}')) for x, y in zip(a, b))


class Limits(unittest.TestCase):
    """ConnectionsPerIP= for direct clients, RequestsPerToken=, and a trusted proxy's
    clients counted by X-Forwarded-For (not the proxy's own address)."""

    def send(self, path, source='127.0.0.1', token=None, xff=None, body_pending=False):
        s = socket.create_connection(('127.0.0.1', S.http_port), timeout=10, source_address=(source, 0))
        h = f'GET {path} HTTP/1.1\r\nHost: x\r\n'
        if token:
            h += f'Authorization: Bearer {TOKENS[token]}\r\n'
        if xff:
            h += f'X-Forwarded-For: {xff}\r\n'
        if body_pending:
            h += 'Content-Length: 10\r\n'     # in progress until its body comes (or its deadline)
        s.sendall(h.encode() + b'\r\n')
        return s

    def status(self, path, **kw):
        """The status answered, or None when the connection was refused (closed or reset)."""
        try:
            s = self.send(path, **kw)
        except (ConnectionResetError, BrokenPipeError):
            return None
        try:
            got = s.recv(65536)
        except ConnectionResetError:
            got = b''
        finally:
            s.close()
        return int(got.split(b' ')[1]) if got.startswith(b'HTTP/1.1 ') else None

    def hold(self, n, path, **kw):
        socks = [self.send(path, body_pending=True, **kw) for _ in range(n)]
        time.sleep(0.3)
        return socks

    def release(self, socks):
        for s in socks:
            s.close()
        time.sleep(0.3)

    def test_per_token(self):
        held = self.hold(PER_TOKEN, '/api/v1/sessions', token='alice')
        try:
            self.assertEqual(self.status('/api/v1/sessions', token='alice'), 429)
            self.assertEqual(self.status('/api/v1/sessions', token='bob'), 200)
            status, _, res = request('GET', '/api/v1/sessions')
            self.assertEqual((status, res['error']['code']), (429, 'TooManyRequests'))
        finally:
            self.release(held)
        self.assertEqual(self.status('/api/v1/sessions', token='alice'), 200)

    def test_varlink_connections_per_tenant(self):
        """One tenant's long requests hold at most VarlinkConnectionsPerTenant= of the
        bridge's connections to sandboxd; one more is 429 naming the setting, and another
        tenant's requests go on at once."""
        with Session('alice') as s:
            body = json.dumps({'argv': ['sleep', '20']}).encode()
            held = []
            try:
                for _ in range(VARLINK_PER_TENANT):
                    c = socket.create_connection(('127.0.0.1', S.http_port), timeout=10)
                    c.sendall(f'POST {s.url}/execute HTTP/1.1\r\nHost: x\r\n'
                              f'Authorization: Bearer {TOKENS["alice"]}\r\nContent-Type: application/json\r\n'
                              f'Content-Length: {len(body)}\r\n\r\n'.encode() + body)
                    held.append(c)
                time.sleep(1.5)      # each has its connection, its command running
                status, _, res = request('GET', '/api/v1/sessions', timeout=10)
                self.assertEqual((status, res['error']['code']), (429, 'TooManyRequests'), res)
                self.assertIn('VarlinkConnectionsPerTenant=', res['error']['message'])
                start = time.monotonic()
                status, _, res = request('GET', '/api/v1/sessions', token='bob', timeout=10)
                self.assertEqual(status, 200, res)
                with Session('bob') as b:
                    self.assertEqual(b.execute({'argv': ['true']})[0], 200)
                self.assertLess(time.monotonic() - start, 8)
            finally:
                self.release(held)
            deadline = time.monotonic() + 10
            while request('GET', '/api/v1/sessions')[0] != 200:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.2)

    def test_sandboxd_counts_tenants_apart(self):
        """sandboxd counts the connections of a caller that may act for tenants (root
        here, the bridge's user with delegate) per tenant: 128 for one tenant leave room
        for the caller's others, and the 129th for that tenant is Busy."""
        conns = []
        try:
            for _ in range(128):
                c = S.varlink(timeout=10)
                conns.append(c)
                _, error, params = c.call(f'{harness.VARLINK_IFACE}.ActForTenant', {'tenant': 'crowd'})
                self.assertIsNone(error, params)
            c = S.varlink(timeout=10)
            conns.append(c)
            _, error, params = c.call(f'{harness.VARLINK_IFACE}.ActForTenant', {'tenant': 'crowd'})
            self.assertEqual(error, f'{harness.VARLINK_IFACE}.Busy', params)
            _, error, params = c.call(f'{harness.VARLINK_IFACE}.ActForTenant', {'tenant': 'other'})
            self.assertIsNone(error, params)
            _, error, _ = S.varlink_call('ListSandboxes', {})
            self.assertIsNone(error)
        finally:
            for c in conns:
                c.close()

    def test_trusted_proxy(self):
        """Behind a trusted proxy each forwarded client has its own ConnectionsPerIP, and
        the proxy itself may hold more connections than that; from anyone else,
        X-Forwarded-For is ignored."""
        one, two = '198.51.100.7', '198.51.100.9'
        held = self.hold(PER_IP, '/healthz', source=PROXY, xff=one)
        held += self.hold(8, '/healthz', source=PROXY, xff=f'{two}, {PROXY}')
        try:
            # 40 connections from the proxy: more than one address may have.
            self.assertEqual(self.status('/healthz', source=PROXY, xff=one), 429)
            self.assertEqual(self.status('/healthz', source=PROXY, xff=f'203.0.113.1, {one}'), 429)
            self.assertEqual(self.status('/healthz', source=PROXY, xff=f'::ffff:{one}'), 429)  # the same client
            self.assertEqual(self.status('/healthz', source=PROXY, xff='198.51.100.8'), 200)
            self.assertEqual(self.status('/healthz', source=PROXY, xff=two), 200)
            # Not from the proxy: the header is the client's word, and not taken.
            self.assertEqual(self.status('/healthz', xff=one), 200)
        finally:
            self.release(held)
        self.assertEqual(self.status('/healthz', source=PROXY, xff=one), 200)
        # Words that are no address are one client: new words do not buy new connections.
        held = self.hold(PER_IP, '/healthz', source=PROXY, xff='word-1')
        try:
            self.assertEqual(self.status('/healthz', source=PROXY, xff='word-2'), 429)
            self.assertEqual(self.status('/healthz', source=PROXY, xff=one), 200)
        finally:
            self.release(held)

    def test_direct_clients_per_address(self):
        held = self.hold(PER_IP, '/healthz', xff='198.51.100.50')
        try:
            # One more from this address is refused, whatever it says it forwards for.
            self.assertIsNone(self.status('/healthz', xff='198.51.100.51'))
            self.assertEqual(self.status('/healthz', source=PROXY), 200)
        finally:
            self.release(held)
        self.assertEqual(self.status('/healthz'), 200)


class BadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 16384), hard))
        # Started by the earlier tests' connections (or now).
        request('GET', '/healthz', token=None)
        cls.pids = (main_pid('sandboxd-http.service'), main_pid('sandboxd.service'))

    def tearDown(self):
        self.assertEqual(request('GET', '/healthz', token=None)[0], 200)
        self.assertEqual((main_pid('sandboxd-http.service'), main_pid('sandboxd.service')), self.pids)

    def raw(self, data, read=True, timeout=30):
        s = socket.create_connection(('127.0.0.1', S.http_port), timeout=timeout)
        try:
            s.sendall(data)
            return s.recv(65536) if read else b''
        finally:
            s.close()

    def test_huge_bodies(self):
        auth = f'Authorization: Bearer {TOKENS["alice"]}\r\n'.encode()
        # 1 GB announced: refused before it is sent.
        got = self.raw(b'POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\n' + auth +
                       b'Content-Length: 1000000000\r\n\r\n{')
        self.assertTrue(got.startswith(b'HTTP/1.1 413'), got[:100])
        # Chunked past the cap: read and dropped to its end, then 413.
        chunk = b'%x\r\n' % (64 * 1024) + b' ' * (64 * 1024) + b'\r\n'
        got = self.raw(b'POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\n' + auth +
                       b'Transfer-Encoding: chunked\r\n\r\n' + chunk * 40 + b'0\r\n\r\n')
        self.assertTrue(got.startswith(b'HTTP/1.1 413'), got[:100])
        # Chunked without end: the connection is closed once 16 MiB past the cap.
        s = socket.create_connection(('127.0.0.1', S.http_port), timeout=30)
        s.sendall(b'POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\n' + auth + b'Transfer-Encoding: chunked\r\n\r\n')
        closed = False
        try:
            for _ in range(64 * MiB // len(chunk)):
                s.sendall(chunk)
            s.settimeout(10)
            closed = s.recv(100) == b''
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        s.close()
        self.assertTrue(closed)
        # Just over the cap, announced: refused at once too (the body need not be sent).
        got = self.raw(b'POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\n' + auth +
                       b'Content-Length: %d\r\n\r\n' % (BODY_MAX + 1))
        self.assertTrue(got.startswith(b'HTTP/1.1 413'), got[:100])
        # At the cap: read, and judged as JSON.
        status, _, res = request('POST', '/api/v1/sessions', body=b' ' * (BODY_MAX - 2) + b'{}')
        self.assertEqual(status, 201, res)
        request('DELETE', f'/api/v1/sessions/{res["id"]}')

    def test_bad_json(self):
        for body in (b'{', b'[1]', b'"x"', b'{"a":}', b'{"template": "shell"} x', b'\xff\xfe',
                     b'[' * 100 + b']' * 100, b'{"a":' * 100 + b'1' + b'}' * 100,
                     b'{"template": "shell", "template": "python"}', b'{"name": "\xff"}'):
            status, _, res = request('POST', '/api/v1/sessions', body=body)
            self.assertEqual((status, res['error']['code']), (400, 'InvalidBody'), body[:20])

    def test_odd_ids(self):
        for sid in ('..%2Fx', "'%20OR%201=1", '%01', 'x' * 300, '%2e%2e', '%2e%2e%2f%2e%2e%2fx'):
            status, _, res = request('GET', f'/api/v1/sessions/{sid}')
            self.assertIn(status, (400, 404), sid)
        status, _, res = request('GET', '/api/v1/sessions/../x')
        self.assertEqual(status, 404)

    def test_slowloris(self):
        """A client that sends its headers a byte at a time is cut off at the timeout."""
        s = socket.create_connection(('127.0.0.1', S.http_port), timeout=30)
        t0 = time.monotonic()
        closed = False
        try:
            for b in b'GET /healthz HTTP/1.1\r\nX-Slow: ' + b'a' * 100:
                s.sendall(bytes([b]))
                if select.select([s], [], [], 0.5)[0]:
                    closed = s.recv(100) == b''
                    break
                if time.monotonic() - t0 > 20:
                    break
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        s.close()
        self.assertTrue(closed)
        self.assertLess(time.monotonic() - t0, 20)

    def test_content_length_and_chunked(self):
        """Both Content-Length and Transfer-Encoding: refused and the connection closed
        (RFC 9112 §6.1), so that a request hidden in the body is never read."""
        auth = f'Authorization: Bearer {TOKENS["alice"]}\r\n'.encode()
        smuggled = b'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'
        for order in ((b'Content-Length: 5\r\n', b'Transfer-Encoding: chunked\r\n'),
                      (b'Transfer-Encoding: chunked\r\n', b'Content-Length: 40\r\n')):
            s = socket.create_connection(('127.0.0.1', S.http_port), timeout=10)
            try:
                s.sendall(b'POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\n' + auth + b''.join(order) + b'\r\n' +
                          b'2\r\n{}\r\n0\r\n\r\n' + smuggled)
                got = b''
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += chunk
            finally:
                s.close()
            head, _, body = got.partition(b'\r\n\r\n')
            self.assertTrue(head.startswith(b'HTTP/1.1 400'), got)
            self.assertIn(b'connection: close', head.lower())
            self.assertEqual(json.loads(body)['error']['code'], 'InvalidRequest')
            # One answer only: the request in the body was not served, and nothing created.
            self.assertEqual(got.count(b'HTTP/1.1 '), 1, got)

    def slow_body(self, head, pause=0.25, limit=20):
        """Sends HEAD (a request's headers) and then a body byte every PAUSE s: the seconds
        until the bridge closed the connection (or LIMIT)."""
        s = socket.create_connection(('127.0.0.1', S.http_port), timeout=30)
        t0 = time.monotonic()
        try:
            s.sendall(head)
            while time.monotonic() - t0 < limit:
                s.sendall(b' ')
                if select.select([s], [], [], pause)[0]:
                    while s.recv(65536):
                        pass
                    break
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            s.close()
        return time.monotonic() - t0

    def test_slow_body(self):
        """A body that trickles in is cut off (a byte every 0.25 s): with no token at a
        public route that takes none, on a JSON route, and an upload below the minimum
        rate; a connection is not held for ever by anyone."""
        auth = f'Authorization: Bearer {TOKENS["alice"]}\r\n'.encode()
        with Session() as sess:
            # (A body without a token to a route that takes one is answered 401 at once and
            # the connection closed: not a case.)
            for head in (b'GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n',
                         b'POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\n' + auth + b'Content-Length: 100000\r\n\r\n',
                         b'PUT ' + sess.url.encode() + b'/files?path=slow HTTP/1.1\r\nHost: x\r\n' + auth +
                         b'Content-Length: 100000000\r\n\r\n'):
                took = self.slow_body(head)
                self.assertLess(took, 3 * BODY_TIMEOUT + 1, head)
                self.assertGreater(took, BODY_TIMEOUT - 0.5, head)

    def test_many_connections(self):
        """FLOOD connections at once from one address: beyond the per-IP cap they are
        refused, and the bridge serves on."""
        socks, refused = [], 0
        t0 = time.monotonic()
        try:
            for _ in range(FLOOD):
                try:
                    socks.append(socket.create_connection(('127.0.0.1', S.http_port), timeout=5))
                except OSError:
                    refused += 1
            served = 0
            for s in socks:
                try:
                    s.sendall(b'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
                except OSError:
                    continue
            for s in socks:
                try:
                    s.settimeout(10)
                    if s.recv(100).startswith(b'HTTP/1.1 200'):
                        served += 1
                except OSError:
                    pass
        finally:
            for s in socks:
                s.close()
        print(f'\n# {FLOOD} connections in {time.monotonic() - t0:.1f} s: {served} served, '
              f'{refused} refused at connect', file=sys.stderr)
        self.assertGreater(served, 0)
        self.assertLessEqual(served, PER_IP)


if __name__ == '__main__':
    unittest.main()
