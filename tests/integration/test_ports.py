#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 33, ports: a server on a sandbox's own loopback reached by its owner, and no one
else: OpenPort over D-Bus (sandboxctl port-forward, with curl) and varlink (the descriptor
passed with the reply), ListPorts on every face, sandboxd-http's /ports/ proxy for HTTP
(streamed: the first bytes before the response ends) and WebSocket (python3-websockets'
echo server inside, its client outside), another tenant refused, another sandbox unable to
reach it, and the sandbox still without a route out.

Run through tests/integration/run.py, or: python3 tests/integration/run.py test_ports
"""

import array
import json
import os
import socket
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402


S = None
_owned = False
BRIDGE = None
# The bridge's limits here (sandboxd-http(8), LIMITS): upgraded connections per token, and
# connections per client address (upgraded ones among them).
UPGRADES = 3
PER_IP = 8
E = 'io.sandboxd.Sandbox1.'
V = 'io.sandboxd.Sandbox.'

# A server that streams: its first line at once, the last one a second later.
STREAMER = r'''
import http.server, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def do_GET(self):
        if self.path.startswith('/slow'):
            self.send_response(200)
            self.send_header('Content-Type', 'text/plain')
            self.send_header('Transfer-Encoding', 'chunked')
            self.end_headers()
            for part in (b'first\n', b'second\n'):
                self.wfile.write(b'%x\r\n%s\r\n' % (len(part), part))
                self.wfile.flush()
                time.sleep(1.5)
            self.wfile.write(b'0\r\n\r\n')
            return
        if self.path.startswith('/headers'):
            body = str(self.headers).encode()
            self.send_response(200)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        body = ('path=%s query-ok\n' % self.path).encode()
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.send_header('X-From-Sandbox', 'yes')
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        n = int(self.headers.get('Content-Length', 0))
        body = self.rfile.read(n)
        self.send_response(201)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body[::-1])
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(('127.0.0.1', 8000), H).serve_forever()
'''

ECHO = r'''
import asyncio, websockets
async def echo(ws):
    async for m in ws:
        await ws.send(m)
async def main():
    async with websockets.serve(echo, '127.0.0.1', 8765, max_size=None):
        await asyncio.Future()
asyncio.run(main())
'''


def setUpModule():
    global S, _owned, BRIDGE
    S, _owned = harness.module_setup()
    conf = os.path.join(S.workdir, 'ports-http.conf')
    with open(conf, 'w') as f:
        f.write(f'[HTTP]\nUpgradesPerToken={UPGRADES}\nConnectionsPerIP={PER_IP}\n')
    BRIDGE = harness.Bridge(S, {'alice': 'alice', 'alice2': 'alice', 'bob': 'bob'}, args=(f'--config={conf}',))


def tearDownModule():
    if BRIDGE:
        BRIDGE.stop()
    harness.module_teardown(_owned)


def varlink_open_port(sid, port):
    """OpenPort over varlink, as a raw client: (the reply, the descriptor or None)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
        c.connect(S.path(harness.VARLINK_SOCKET))
        c.sendall(json.dumps({'method': V + 'OpenPort', 'parameters': {'id': sid, 'port': port}}).encode() + b'\0')
        data, fds = b'', []
        while not data.endswith(b'\0'):
            msg, anc, _flags, _addr = c.recvmsg(65536, socket.CMSG_SPACE(4 * 8))
            if not msg:
                break
            data += msg
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    a = array.array('i')
                    a.frombytes(payload[:len(payload) - len(payload) % 4])
                    fds.extend(a)
        return json.loads(data[:-1]), (fds[0] if fds else None)


WS_HANDSHAKE = {'Upgrade': 'websocket', 'Connection': 'Upgrade', 'Sec-WebSocket-Version': '13',
                'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ=='}


def raw_get(path, headers):
    """GET path with exactly these headers (urllib would add Connection: close): (status,
    the answer's head and body as text)."""
    with socket.create_connection(('127.0.0.1', BRIDGE.port), timeout=30) as s:
        s.sendall((f'GET {path} HTTP/1.1\r\nHost: x\r\n' +
                   ''.join(f'{k}: {v}\r\n' for k, v in headers.items()) + '\r\n').encode())
        got = b''
        while True:
            head, sep, body = got.partition(b'\r\n\r\n')
            if sep:
                n = [int(line.split(b':')[1]) for line in head.split(b'\r\n')
                     if line.lower().startswith(b'content-length:')]
                if n and len(body) >= n[0]:
                    break
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    return int(got.split(b' ')[1]), got.decode(errors='replace')


def open_tunnel(sid, token):
    """A WebSocket handshake through the port proxy to the echo server, by hand: (the
    socket, left open, the status or None when the connection was refused, the head)."""
    s = socket.create_connection(('127.0.0.1', BRIDGE.port), timeout=30)
    try:
        s.sendall((f'GET /api/v1/sessions/{sid}/ports/8765/ HTTP/1.1\r\nHost: x\r\n'
                   f'Authorization: Bearer {BRIDGE.tokens[token]}\r\n' +
                   ''.join(f'{k}: {v}\r\n' for k, v in WS_HANDSHAKE.items()) + '\r\n').encode())
        got = b''
        while b'\r\n\r\n' not in got:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        if b'\r\n\r\n' in got and not got.startswith(b'HTTP/1.1 101'):
            got += s.recv(4096)       # the error's body
    except (ConnectionResetError, BrokenPipeError):
        got = b''
    return s, (int(got.split(b' ')[1]) if got.startswith(b'HTTP/1.1 ') else None), got


def http(method, path, token='alice', body=None):
    """(status, headers, body bytes) of a request to the bridge."""
    headers = {'Authorization': f'Bearer {BRIDGE.tokens[token]}'} if token else {}
    if body is not None and path == '/api/v1/sessions':
        headers['Content-Type'] = 'application/json'
    req = urllib.request.Request(BRIDGE.url + path, method=method, data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


class Ports(harness.SandboxTestCase):

    @classmethod
    def setUpClass(cls):
        # alice's, through the bridge; root (sandboxctl) may use it too.
        status, _, body = http('POST', '/api/v1/sessions', body=json.dumps({'template': 'python'}).encode())
        assert status == 201, body
        cls.sid = json.loads(body)['id']
        for code in (STREAMER, ECHO):
            cp = S.sandboxctl('start', cls.sid, '--', 'python3', '-c', code, timeout=60)
            assert cp.returncode == 0, cp.stderr
        deadline = time.monotonic() + 30
        while True:
            cp = S.sandboxctl('ports', '--json', cls.sid, timeout=60)
            ports = {p['port'] for p in json.loads(cp.stdout or '[]')} if cp.returncode == 0 else set()
            if {8000, 8765} <= ports:
                break
            assert time.monotonic() < deadline, f'the servers did not come up: {cp.stdout} {cp.stderr}'
            time.sleep(0.2)

    @classmethod
    def tearDownClass(cls):
        S.sandboxctl('destroy', cls.sid, timeout=120)

    def test_list_ports(self):
        rows = json.loads(self.ok(self.ctl('ports', '--json', self.sid)).stdout)
        self.assertIn({'address': '127.0.0.1', 'port': 8000}, rows)
        self.assertIn({'address': '127.0.0.1', 'port': 8765}, rows)
        cp = self.ok(self.ctl('ports', self.sid))
        self.assertRegex(cp.stdout, r'127\.0\.0\.1\s+8000')
        replies, error, _ = S.varlink_call('ListPorts', {'id': self.sid})
        self.assertIsNone(error)
        self.assertIn({'address': '127.0.0.1', 'port': 8000}, replies[0]['ports'])

    def test_varlink_open_port(self):
        reply, fd = varlink_open_port(self.sid, 8000)
        self.assertEqual(reply.get('parameters'), {'fd': 0}, reply)
        self.assertIsNotNone(fd)
        with socket.socket(fileno=fd) as s:
            s.sendall(b'GET /direct HTTP/1.0\r\n\r\n')
            data = b''
            while chunk := s.recv(65536):
                data += chunk
        self.assertIn(b'path=/direct', data)
        reply, fd = varlink_open_port(self.sid, 8001)
        self.assertEqual(reply.get('error'), V + 'NoSuchProcess', reply)
        self.assertIsNone(fd)
        reply, fd = varlink_open_port(self.sid, 70000)
        self.assertEqual(reply.get('error'), V + 'InvalidOption', reply)

    def test_port_forward(self):
        p = self.popen_ctl('port-forward', self.sid, '8000', '127.0.0.1:0')
        address = p.stdout.readline().decode().strip()
        self.assertRegex(address, r'^127\.0\.0\.1:\d+$')
        for i in range(3):   # each connection a fresh one into the sandbox
            cp = subprocess.run(['curl', '-sS', '--max-time', '20', f'http://{address}/fwd{i}'], capture_output=True,
                                text=True, timeout=30)
            self.assertEqual(cp.stdout, f'path=/fwd{i} query-ok\n', cp.stderr)
        # A unix socket listener too.
        path = os.path.join(S.workdir, f'fwd-{os.getpid()}.sock')
        q = self.popen_ctl('port-forward', self.sid, '8000', path)
        self.assertEqual(q.stdout.readline().decode().strip(), path)
        cp = subprocess.run(['curl', '-sS', '--max-time', '20', '--unix-socket', S.path(path), 'http://x/unix'],
                            capture_output=True, text=True, timeout=30)
        self.assertEqual(cp.stdout, 'path=/unix query-ok\n', cp.stderr)

    def test_http_proxy(self):
        base = f'/api/v1/sessions/{self.sid}/ports/8000'
        status, headers, body = http('GET', base + '/some/path?a=1&b=x%20y')
        self.assertEqual(status, 200, body)
        self.assertEqual(body, b'path=/some/path?a=1&b=x%20y query-ok\n')
        self.assertEqual(headers['X-From-Sandbox'], 'yes')
        status, _, body = http('GET', base)
        self.assertEqual((status, body), (200, b'path=/ query-ok\n'))
        status, _, body = http('POST', base + '/echo', body=b'0123456789')
        self.assertEqual((status, body), (201, b'9876543210'))
        status, headers, body = http('GET', f'/api/v1/sessions/{self.sid}/ports')
        self.assertEqual(status, 200, body)
        self.assertIn({'address': '127.0.0.1', 'port': 8000}, json.loads(body))
        # Nothing there, a bad port.
        status, _, body = http('GET', f'/api/v1/sessions/{self.sid}/ports/8001/')
        self.assertEqual((status, json.loads(body)['error']['code']), (502, 'NoSuchProcess'), body)
        status, _, body = http('GET', f'/api/v1/sessions/{self.sid}/ports/0/')
        self.assertEqual(status, 400, body)

    def test_http_proxy_streams(self):
        """The first line arrives while the server still sleeps before the second."""
        url = BRIDGE.url + f'/api/v1/sessions/{self.sid}/ports/8000/slow'
        p = subprocess.Popen(['curl', '-sSN', '--max-time', '30', '-H', f'Authorization: Bearer {BRIDGE.tokens["alice"]}',
                              url], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        start = time.monotonic()
        first = p.stdout.readline()
        first_at = time.monotonic() - start
        rest = p.stdout.read()
        done_at = time.monotonic() - start
        p.wait(timeout=30)
        self.assertEqual((first, rest), (b'first\n', b'second\n'), p.stderr.read())
        self.assertLess(first_at, 1.2)
        self.assertGreater(done_at, first_at + 1.0)

    def test_token_not_passed_to_sandbox(self):
        """A browser's token rides in Sec-WebSocket-Protocol ("bearer.TOKEN") of a WebSocket
        handshake: the server in the sandbox sees the client's other subprotocols, never the
        token (nor another header that carried it)."""
        token = BRIDGE.tokens['alice']
        path = f'/api/v1/sessions/{self.sid}/ports/8000/headers'
        for headers in (dict(WS_HANDSHAKE, **{'Sec-WebSocket-Protocol': f'chat.v1, bearer.{token}, x'}),
                        {'Authorization': f'Bearer {token}', 'X-Access-Token': token, 'X-API-Key': token,
                         'E2B-Traffic-Access-Token': token, 'Proxy-Authorization': f'Bearer {token}'}):
            status, seen = raw_get(path, headers)
            self.assertEqual(status, 200, seen)
            self.assertNotIn(token, seen)
            if 'Sec-WebSocket-Protocol' in headers:
                self.assertIn('sec-websocket-protocol: chat.v1, x\n', seen.lower())

    def test_protocol_token_only_on_websocket_handshakes(self):
        """The token in Sec-WebSocket-Protocol authenticates a WebSocket's handshake only: on
        a plain request (or another kind of upgrade) it is no credential, 401."""
        token = BRIDGE.tokens['alice']
        protocol = {'Sec-WebSocket-Protocol': f'bearer.{token}'}
        for path in (f'/api/v1/sessions/{self.sid}/ports/8000/headers', '/api/v1/sessions',
                     f'/api/v1/sessions/{self.sid}'):
            status, body = raw_get(path, protocol)
            self.assertEqual(status, 401, body)
            self.assertNotIn(token, body)
        status, body = raw_get(f'/api/v1/sessions/{self.sid}/ports/8000/headers',
                               dict(protocol, Upgrade='h2c', Connection='Upgrade'))
        self.assertEqual(status, 401, body)
        status, body = raw_get(f'/api/v1/sessions/{self.sid}/ports/8000/headers', dict(WS_HANDSHAKE, **protocol))
        self.assertEqual(status, 200, body)

    def test_upgrades_per_token_and_address(self):
        """Upgraded connections last: at most UpgradesPerToken= of one token at once, one
        more answered 429; they stay connections of their client address too
        (ConnectionsPerIP=). Closed, they count no more."""
        held = [open_tunnel(self.sid, 'alice') for _ in range(UPGRADES)]
        try:
            self.assertEqual([status for _, status, _ in held], [101] * UPGRADES)
            sock, status, head = open_tunnel(self.sid, 'alice')
            sock.close()
            self.assertEqual(status, 429, head)
            self.assertIn(b'TooManyRequests', head)
            self.assertIn(b'UpgradesPerToken', head)
            # The token's other requests go on; another token has its own upgrades.
            status, _, _ = http('GET', f'/api/v1/sessions/{self.sid}')
            self.assertEqual(status, 200)
            held += [open_tunnel(self.sid, 'alice2') for _ in range(UPGRADES)]
            self.assertEqual([status for _, status, _ in held], [101] * 2 * UPGRADES)
            # Two connections more fill the address's ConnectionsPerIP: the next is refused.
            idle = [socket.create_connection(('127.0.0.1', BRIDGE.port), timeout=10) for _ in range(PER_IP - 2 * UPGRADES)]
            held += [(s, None, None) for s in idle]
            time.sleep(0.3)
            sock, status, head = open_tunnel(self.sid, 'bob')
            sock.close()
            self.assertIsNone(status, head)
            # The tunnels still carry.
            tunnel = held[0][0]
            tunnel.sendall(bytes([0x81, 0x82, 1, 2, 3, 4]) + bytes(a ^ b for a, b in zip(b'hi', (1, 2))))
            self.assertEqual(tunnel.recv(64), bytes([0x81, 2]) + b'hi')
        finally:
            for s, _, _ in held:
                s.close()
        deadline = time.monotonic() + 10
        while True:
            sock, status, head = open_tunnel(self.sid, 'alice')
            sock.close()
            if status == 101 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertEqual(status, 101, head)

    def test_other_tenant_refused(self):
        base = f'/api/v1/sessions/{self.sid}/ports/8000/'
        status, _, body = http('GET', base, token='bob')
        self.assertEqual((status, json.loads(body)['error']['code']), (404, 'NoSuchSandbox'), body)
        status, _, body = http('GET', base, token=None)
        self.assertEqual(status, 401, body)
        status, _, body = http('GET', f'/api/v1/sessions/{self.sid}/ports', token='bob')
        self.assertEqual(status, 404, body)

    def test_websocket(self):
        """python3-websockets' client through the bridge to the echo server inside."""
        url = BRIDGE.url.replace('http://', 'ws://') + f'/api/v1/sessions/{self.sid}/ports/8765/'
        code = (
            'import asyncio, sys, websockets\n'
            'async def main():\n'
            f'    async with websockets.connect({url!r}, extra_headers={{"Authorization": "Bearer {BRIDGE.tokens["alice"]}"}}, max_size=None) as ws:\n'
            '        for m in ("hello", b"\\x00\\xffbinary", "x" * 300000):\n'
            '            await ws.send(m)\n'
            '            assert await ws.recv() == m\n'
            '    print("echoed")\n'
            'asyncio.run(main())\n')
        cp = subprocess.run(['/usr/bin/python3', '-c', code], capture_output=True, text=True, timeout=60)
        self.assertEqual(cp.stdout, 'echoed\n', cp.stderr[-3000:])

    def test_python_list_ports(self):
        sys.path.insert(0, os.path.join(S.paths.source, 'python'))
        import sandboxd
        from sandboxd.http import HttpTransport
        for t in (sandboxd.VarlinkTransport(S.path(harness.VARLINK_SOCKET)),
                  HttpTransport(BRIDGE.url, BRIDGE.tokens['alice'])):
            ports = sandboxd.Sandbox.connect(self.sid, transport=t).ports()
            self.assertIn(sandboxd.PortInfo('127.0.0.1', 8000), ports)

    def test_mcp_ports(self):
        mcp = os.path.join(S.paths.build, 'src', 'sandboxd-mcp', 'sandboxd-mcp')
        lines = [{'jsonrpc': '2.0', 'id': 1, 'method': 'initialize',
                  'params': {'protocolVersion': '2025-06-18', 'capabilities': {},
                             'clientInfo': {'name': 'ports', 'version': '0'}}},
                 {'jsonrpc': '2.0', 'method': 'notifications/initialized'},
                 {'jsonrpc': '2.0', 'id': 2, 'method': 'tools/call',
                  'params': {'name': 'sandbox_ports', 'arguments': {'sandbox_id': self.sid}}}]
        cp = self.ok(S.run([mcp], input=''.join(json.dumps(x) + '\n' for x in lines), timeout=120))
        reply = [json.loads(x) for x in cp.stdout.splitlines()][-1]
        self.assertIn({'address': '127.0.0.1', 'port': 8765}, reply['result']['structuredContent']['ports'])

    def test_watch_sees_an_exec_create(self):
        """WatchDirectory (sandboxctl watch): a file an exec creates, one in a directory made
        after the watch began (recursive), a removal; the watch ends with its reader."""
        self.ok(self.exec(self.sid, 'mkdir', '-p', '/work/watched'))
        p = self.popen_ctl('watch', self.sid, '/work/watched')
        time.sleep(0.5)   # the agent's inotify watch is set up
        self.ok(self.exec(self.sid, 'sh', '-c', 'echo hi > /work/watched/new.txt; mkdir /work/watched/sub; '
                          'sleep 0.3; touch /work/watched/sub/deep; rm /work/watched/new.txt'))
        seen = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(e['event'] == 'delete' for e in seen):
            line = p.stdout.readline()
            if not line:
                break
            seen.append(json.loads(line))
        pairs = {(e['event'], e['path']) for e in seen}
        self.assertIn(('create', '/work/watched/new.txt'), pairs, seen)
        self.assertIn(('modify', '/work/watched/new.txt'), pairs, seen)
        self.assertIn(('create', '/work/watched/sub'), pairs, seen)
        self.assertIn(('create', '/work/watched/sub/deep'), pairs, seen)
        self.assertIn(('delete', '/work/watched/new.txt'), pairs, seen)
        self.assertTrue(any(e['dir'] for e in seen if e['path'] == '/work/watched/sub'))
        # A directory that is not there.
        cp = self.ctl('watch', self.sid, '/work/nowhere')
        self.assertNotEqual(cp.returncode, 0)

    def test_watch_varlink_and_http(self):
        """WatchDirectory over varlink (replies that continue) and sandboxd-http (SSE)."""
        self.ok(self.exec(self.sid, 'mkdir', '-p', '/work/w2'))
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.addCleanup(c.close)
        c.connect(S.path(harness.VARLINK_SOCKET))
        c.sendall(json.dumps({'method': V + 'WatchDirectory', 'more': True,
                              'parameters': {'id': self.sid, 'path': '/work/w2'}}).encode() + b'\0')
        sse = subprocess.Popen(['curl', '-sSN', '--max-time', '30', '-H', f'Authorization: Bearer {BRIDGE.tokens["alice"]}',
                                BRIDGE.url + f'/api/v1/sessions/{self.sid}/watch?path=/work/w2'],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: (sse.kill(), sse.wait()))
        time.sleep(1.0)
        self.ok(self.exec(self.sid, 'touch', '/work/w2/from-exec'))
        c.settimeout(20)
        data = b''
        while b'from-exec' not in data:
            chunk = c.recv(65536)
            self.assertTrue(chunk, data)
            data += chunk
        reply = json.loads(data.split(b'\0')[0])
        self.assertTrue(reply.get('continues'), reply)
        self.assertEqual(reply['parameters']['event']['event'], 'create')
        self.assertEqual(reply['parameters']['event']['path'], '/work/w2/from-exec')
        lines = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any('from-exec' in x for x in lines):
            lines.append(sse.stdout.readline().decode())
        self.assertIn('event: change\n', lines)
        self.assertTrue(any(x.startswith('data: ') and '"path":"/work/w2/from-exec"' in x for x in lines), lines)
        # Without "more": refused.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as d:
            d.connect(S.path(harness.VARLINK_SOCKET))
            d.sendall(json.dumps({'method': V + 'WatchDirectory',
                                  'parameters': {'id': self.sid, 'path': '/work/w2'}}).encode() + b'\0')
            self.assertIn(b'ExpectedMore', d.recv(65536))

    def test_watch_python(self):
        sys.path.insert(0, os.path.join(S.paths.source, 'python'))
        import threading
        import sandboxd
        from sandboxd.http import HttpTransport
        self.ok(self.exec(self.sid, 'mkdir', '-p', '/work/w3'))
        for i, t in enumerate((sandboxd.VarlinkTransport(S.path(harness.VARLINK_SOCKET)),
                               HttpTransport(BRIDGE.url, BRIDGE.tokens['alice']))):
            sbx = sandboxd.Sandbox.connect(self.sid, transport=t)
            seen = []
            th = threading.Thread(target=lambda: sbx.files.watch_dir('/work/w3', seen.append, count=1), daemon=True)
            th.start()
            time.sleep(1.0)
            self.ok(self.exec(self.sid, 'touch', f'/work/w3/py{i}'))
            th.join(timeout=20)
            self.assertFalse(th.is_alive())
            self.assertEqual(seen, [{'event': 'create', 'path': f'/work/w3/py{i}', 'dir': False}])

    def test_other_sandbox_cannot_reach(self):
        other = self.create(template='python')
        cp = self.exec(other, 'python3', '-c', 'import socket; socket.create_connection(("127.0.0.1", 8000), 3)')
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn('ConnectionRefused', cp.stderr)
        # And the sandbox itself still has no route out.
        cp = self.exec(self.sid, 'python3', '-c', 'import socket; socket.create_connection(("192.0.2.1", 80), 3)')
        self.assertNotEqual(cp.returncode, 0)
        self.assertRegex(cp.stderr, 'unreachable|Network is unreachable')


if __name__ == '__main__':
    unittest.main(verbosity=2)
