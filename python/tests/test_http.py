# SPDX-License-Identifier: LGPL-2.1-or-later
"""HttpTransport and AsyncHttpTransport against a stand-in of sandboxd-http: a small
server here that answers the bridge's routes (src/sandboxd-http/http-routes.c) as the
bridge does, bodies, status codes, error objects and server-sent events included, and
records the requests, so that each translation of a method to its route is checked."""

import asyncio
import base64
import json
import os
import sys
import threading
import unittest
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import sandboxd  # noqa: E402
from sandboxd import AsyncSandbox, Sandbox  # noqa: E402
from sandboxd.http import AsyncHttpTransport, HttpTransport  # noqa: E402

TOKEN = 'sdh_' + '0' * 64
SANDBOX = {'id': 'a1b2c3d4e5f60718', 'template': 'python', 'state': 'running', 'memoryMax': 1 << 28,
           'cpuQuotaPerSecUSec': 500000, 'name': '', 'tenant': 'pyclient'}

SNAPSHOT = {'id': '00112233445566778899aabbccddeeff', 'source': SANDBOX['id'], 'template': 'python', 'size': 5,
            'contentSize': 9, 'created': 0, 'diskMax': 0, 'includesTmp': False, 'hibernated': False}


def sse(event, data):
    """As sandboxd-http writes them: output as {"data", "encoding"}, one data: line of JSON."""
    if event in ('stdout', 'stderr'):
        try:
            o = {'data': data.decode(), 'encoding': 'utf-8'}
        except UnicodeDecodeError:
            o = {'data': base64.b64encode(data).decode(), 'encoding': 'base64'}
        data = json.dumps(o).encode()
    return b'event: ' + event.encode() + b'\ndata: ' + data + b'\n\n'


class Bridge(BaseHTTPRequestHandler):
    files = {}
    requests = []

    def log_message(self, *args):
        pass

    def reply(self, status, body=None, ctype='application/json'):
        data = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else b''
        self.send_response(status)
        self.send_header('Content-Type', ctype)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, code, message):
        self.reply(status, {'error': {'code': code, 'message': message}})

    def handle_one(self, verb):
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        n = int(self.headers.get('Content-Length') or 0)
        raw = self.rfile.read(n) if n else b''
        body = json.loads(raw) if raw and self.headers.get('Content-Type') == 'application/json' else raw
        Bridge.requests.append((verb, u.path, q, body))
        if self.headers.get('Authorization') != f'Bearer {TOKEN}':
            return self.error(401, 'Unauthorized', 'A valid bearer token is needed.')
        parts = u.path.split('/')[3:]           # /api/v1/...
        if parts == ['sessions'] and verb == 'POST':
            return self.reply(201, SANDBOX)
        if parts == ['sessions']:
            return self.reply(200, [SANDBOX])
        if parts == ['snapshots']:
            return self.reply(200, [SNAPSHOT])
        if parts[0] == 'snapshots':
            return self.reply(204) if parts[1] == SNAPSHOT['id'] else self.error(404, 'NoSuchSnapshot', 'No.')
        if parts == ['templates']:
            return self.reply(200, [{'name': 'python', 'payload': 'bwrap', 'description': 'd'}])
        if parts[0] != 'sessions' or parts[1] != SANDBOX['id']:
            return self.error(404, 'NoSuchSandbox', f'No sandbox {parts[1]}.')
        rest = parts[2:]
        if not rest:
            return self.reply(200, SANDBOX) if verb == 'GET' else self.reply(204)
        if rest == ['execute']:
            if body.get('background'):
                return self.reply(202, {'execution_id': 7})
            if 'text/event-stream' in self.headers.get('Accept', ''):
                self.send_response(200)
                self.send_header('Content-Type', 'text/event-stream')
                self.end_headers()
                for event, chunk in (('stdout', b'caf\xc3'), ('stdout', b'\xa9\n\nx'), ('stderr', b'e\r\n'),
                                     ('stdout', b'\n')):
                    self.wfile.write(sse(event, chunk))
                    self.wfile.flush()
                result = {'exit_code': 3, 'stdout': '', 'stderr': '', 'info': {'exitCode': 3, 'durationUSec': 2000}}
                self.wfile.write(sse('result', json.dumps(result).encode()))
                return
            return self.reply(200, {'exit_code': 0, 'stdout': 'plain\n', 'stderr': '', 'stdout_base64': None,
                                    'info': {}})
        if rest in (['snapshot'], ['hibernate']):
            return self.reply(201 if rest == ['snapshot'] else 200, SNAPSHOT)
        if rest in (['fork'], ['wake']):
            return self.reply(201 if rest == ['fork'] else 200, SANDBOX)
        if rest == ['status']:
            return self.reply(200, [{'process': 7, 'pid': 9, 'argv': ['x'], 'state': 'exited', 'exitStatus': 5}])
        if rest == ['executions', '7']:
            return self.reply(200, {'running': False, 'stdout': 'bg\n', 'stderr': ''})
        if rest == ['executions', '7', 'logs']:
            return self.reply(200, {'running': False, 'stdout': 'bg\n', 'stderr': '', 'cursor': '3.0'})
        if rest == ['result']:
            return self.reply(200, {'exit_code': 5, 'stdout': 'bg\n', 'stderr': '', 'info': {}})
        if rest[:2] == ['executions', '7'] and verb == 'POST':
            return self.reply(204)
        if rest == ['files'] and verb == 'PUT':
            Bridge.files[q['path']] = raw
            return self.reply(201, {'bytes': len(raw)})
        if rest == ['files'] and verb == 'GET':
            if q['path'] not in Bridge.files:
                return self.error(404, 'SystemError', f'{q["path"]}: No such file or directory')
            return self.reply(200, Bridge.files[q['path']], 'application/octet-stream')
        if rest == ['files', 'list']:
            return self.reply(200, [{'path': p, 'type': 'file', 'size': len(d), 'mode': 0o644, 'mtime': 0, 'target': ''}
                                    for p, d in Bridge.files.items() if '/' not in p])
        if rest == ['files', 'mkdir']:
            return self.error(409, 'SystemError', f'{body["path"]}: File exists')
        if rest in (['pause'], ['resume'], ['timeout'], ['files', 'move']) or (rest == ['files'] and verb == 'DELETE'):
            return self.reply(204)
        return self.error(404, 'NotFound', f'No route {verb} {u.path}.')

    def do_GET(self):
        self.handle_one('GET')

    def do_POST(self):
        self.handle_one('POST')

    def do_PUT(self):
        self.handle_one('PUT')

    def do_DELETE(self):
        self.handle_one('DELETE')


class HttpTransports(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.server = ThreadingHTTPServer(('127.0.0.1', 0), Bridge)
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        cls.url = f'http://127.0.0.1:{cls.server.server_address[1]}'

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def setUp(self):
        Bridge.requests.clear()
        Bridge.files.clear()
        self.t = HttpTransport(self.url, TOKEN)

    def test_sessions(self):
        sbx = Sandbox.create('python', timeout=60, memory='256M', cpu=0.5, name='n', reuse=True, transport=self.t)
        self.assertEqual(sbx.sandbox_id, SANDBOX['id'])
        verb, path, _, body = Bridge.requests[0]
        self.assertEqual((verb, path), ('POST', '/api/v1/sessions'))
        self.assertEqual(body, {'template': 'python', 'timeout': 60, 'name': 'n', 'reuse': True,
                                'limits': {'memory_max': 256 << 20, 'cpu_quota_per_sec_usec': 500000}})
        info = sbx.get_info()
        self.assertEqual((info.memory, info.cpu, info.tenant), (256 << 20, 0.5, 'pyclient'))
        self.assertEqual([s.sandbox_id for s in Sandbox.list(transport=self.t)], [SANDBOX['id']])
        self.assertEqual([t.name for t in Sandbox.templates(transport=self.t)], ['python'])
        sbx.pause()
        sbx.resume()
        sbx.set_timeout(100, idle_timeout=5)
        self.assertEqual(Bridge.requests[-1][1:], (f'/api/v1/sessions/{SANDBOX["id"]}/timeout', {},
                                                   {'timeout': 100, 'idle_timeout': 5}))
        self.assertTrue(sbx.kill())
        self.assertEqual(Bridge.requests[-1][:2], ('DELETE', f'/api/v1/sessions/{SANDBOX["id"]}'))

    def test_snapshots(self):
        sid, url = SANDBOX['id'], f'/api/v1/sessions/{SANDBOX["id"]}'
        sbx = Sandbox.create(from_snapshot=SNAPSHOT['id'], idle_action='hibernate', transport=self.t)
        self.assertEqual(Bridge.requests[-1][3], {'from_snapshot': SNAPSHOT['id'], 'idle_action': 'hibernate'})
        self.assertEqual(sbx.snapshot(include_tmp=True), SNAPSHOT['id'])
        self.assertEqual(Bridge.requests[-1][:4:3], ('POST', {'include_tmp': True}))
        self.assertEqual(Bridge.requests[-1][1], url + '/snapshot')
        fork = sbx.fork(name='f', disk='8M')
        self.assertEqual(fork.sandbox_id, sid)
        self.assertEqual(Bridge.requests[-1][1:4:2], (url + '/fork', {'name': 'f', 'limits': {'disk_max': 8 << 20}}))
        self.assertEqual(sbx.hibernate(), SNAPSHOT['id'])
        self.assertEqual(Bridge.requests[-1][1:4:2], (url + '/hibernate', {}))
        self.assertEqual(Sandbox.wake(sid, transport=self.t).sandbox_id, sid)
        self.assertEqual(Bridge.requests[-1][:2], ('POST', url + '/wake'))
        (info,) = Sandbox.list_snapshots(transport=self.t)
        self.assertEqual((info.snapshot_id, info.source, info.content_size), (SNAPSHOT['id'], sid, 9))
        Sandbox.remove_snapshot(SNAPSHOT['id'], transport=self.t)
        self.assertEqual(Bridge.requests[-1][:2], ('DELETE', f'/api/v1/snapshots/{SNAPSHOT["id"]}'))
        with self.assertRaises(sandboxd.NoSuchSnapshot):
            Sandbox.remove_snapshot('gone', transport=self.t)
        with self.assertRaises(sandboxd.NotSupported):
            sbx.fork(options={'Tenant': 'x'})
        # Egress rules: the bridge's egress_allow and egress_deny (issue 32).
        sbx.fork(options={'EgressAllow': ['x.example'], 'EgressDeny': []})
        fork = [r for r in Bridge.requests if r[1].endswith('/fork')][-1]
        self.assertEqual(fork[3], {'egress_allow': ['x.example'], 'egress_deny': []})

    def test_streamed_exec_keeps_the_bytes(self):
        sbx = Sandbox(SANDBOX['id'], transport=self.t, envs={'A': '1'})
        out, err = [], []
        r = sbx.commands.run('echo', on_stdout=out.append, on_stderr=err.append, timeout=9, cwd='/tmp', stdin='in')
        self.assertEqual((r.stdout, r.stderr, r.exit_code, r.duration), ('café\n\nx\n', 'e\r\n', 3, 0.002))
        self.assertEqual(out[0], 'caf')
        body = Bridge.requests[0][3]
        self.assertEqual(body, {'argv': ['sh', '-c', 'echo'], 'env': {'A': '1'}, 'cwd': '/tmp', 'timeout': 9,
                                'stdin': 'in'})

    def test_background(self):
        sbx = Sandbox(SANDBOX['id'], transport=self.t)
        url = f'/api/v1/sessions/{SANDBOX["id"]}'
        got = []
        h = sbx.commands.run('sleep 1', background=True, stdin=True, on_stdout=got.append)
        # sandboxd's id, and the pid inside the sandbox (ListProcesses).
        self.assertEqual((h.process_id, h.pid), (7, 9))
        self.assertEqual(Bridge.requests[0][3], {'argv': ['sh', '-c', 'sleep 1'], 'background': True,
                                                 'stdin_pipe': True})
        r = h.wait(timeout=5)
        self.assertEqual((r.exit_code, r.stdout), (5, 'bg\n'))
        # Live output: the execution's logs followed with their cursor.
        self.assertEqual(got, ['bg\n'])
        self.assertEqual([(p.process_id, p.pid) for p in sbx.commands.list()], [(7, 9)])
        self.assertTrue(h.kill())
        self.assertEqual(Bridge.requests[-1][1:4:2], (url + '/executions/7/signal', {'signal': 9}))
        h.send_stdin(b'\xff')
        self.assertEqual(Bridge.requests[-1][1:4:2], (url + '/executions/7/stdin', {'data_base64': '/w=='}))
        sbx.commands.close_stdin(9)
        self.assertEqual(Bridge.requests[-1][1], url + '/executions/7/stdin/close')
        self.assertTrue(sbx.commands.kill(9, 15))
        self.assertEqual(Bridge.requests[-1][1:4:2], (url + '/executions/7/signal', {'signal': 15}))
        self.assertFalse(sbx.commands.kill(7), 'a pid, not sandboxd\'s id')
        with self.assertRaises(ValueError):
            sbx.commands.run('cat', stdin=True)

    def test_files(self):
        f = Sandbox(SANDBOX['id'], transport=self.t).files
        data = bytes(range(256)) * 100
        info = f.write('x.bin', data)
        self.assertEqual((info.path, info.size), ('x.bin', len(data)))
        self.assertEqual(f.read('x.bin', format='bytes'), data)
        self.assertTrue(f.exists('x.bin'))
        self.assertFalse(f.exists('y.bin'))
        with self.assertRaises(FileNotFoundError) as cm:
            f.read('y.bin')
        self.assertEqual(cm.exception.errno_name, 'ENOENT')
        self.assertFalse(f.make_dir('d'), 'an existing directory (409) is False')
        with self.assertRaises(sandboxd.NotSupported):
            f.write('z', b'', mode=0o600)
        f.remove('x.bin')
        self.assertEqual(Bridge.requests[-1][2], {'path': 'x.bin', 'recursive': 'true'})

    def test_errors(self):
        with self.assertRaises(sandboxd.NoSuchSandbox) as cm:
            Sandbox.connect('nope', transport=self.t)
        self.assertEqual(cm.exception.message, 'No sandbox nope.')
        with self.assertRaises(sandboxd.SandboxError) as cm:
            Sandbox.list(transport=HttpTransport(self.url, 'wrong'))
        self.assertEqual(cm.exception.name, 'io.sandboxd.http.Unauthorized')
        with self.assertRaises(sandboxd.NotSupported):
            Sandbox.pools(transport=self.t)
        with self.assertRaises(sandboxd.SandboxConnectionError):
            Sandbox.list(transport=HttpTransport('http://127.0.0.1:9', TOKEN))
        with self.assertRaises(ValueError):
            HttpTransport('ftp://x', TOKEN)

    def test_async(self):
        async def main():
            t = AsyncHttpTransport(self.url, TOKEN)
            sbx = await AsyncSandbox.connect(SANDBOX['id'], transport=t)
            got = [[], [], []]
            rs = await asyncio.gather(*(sbx.commands.run('x', on_stdout=got[i].append) for i in range(3)))
            await sbx.files.write('a.txt', 'hé')
            return rs, got, await sbx.files.read('a.txt')
        rs, got, text = asyncio.run(main())
        self.assertEqual([r.exit_code for r in rs], [3, 3, 3])
        self.assertEqual([''.join(g) for g in got], ['café\n\nx\n'] * 3)
        self.assertEqual(text, 'hé')

    def test_environment_chooses_the_bridge(self):
        old = dict(os.environ)
        try:
            os.environ.update(SANDBOXD_URL=self.url, SANDBOXD_TOKEN=TOKEN)
            self.assertIsInstance(sandboxd.transport.default_transport(), HttpTransport)
            self.assertIsInstance(sandboxd.transport.default_async_transport(), AsyncHttpTransport)
            self.assertEqual(Sandbox.connect(SANDBOX['id']).sandbox_id, SANDBOX['id'])
        finally:
            os.environ.clear()
            os.environ.update(old)
        self.assertIsInstance(sandboxd.transport.default_transport(), sandboxd.VarlinkTransport)


if __name__ == '__main__':
    unittest.main()
