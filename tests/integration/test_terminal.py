#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Terminals over a WebSocket on sandboxd-http (issue 33, docs/TERMINALS.md), with Debian's
python3-websockets as the client (wsclient.py): a shell answers, a resize is seen by stty,
input and output are binary-safe, the client's slowness holds the shell's output up, the
shell's end closes the WebSocket with its exit status, a client that goes away hangs the
shell up; the token's tenant only (as a subprotocol, as a browser sends it, or a header).
The console page that uses it is test_console.py's."""

import base64
import json
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, '..', 'security'))
import harness  # noqa: E402
import httpbridge  # noqa: E402

S = None
POLKIT = None
TOKENS = {}


def setUpModule():
    global S, POLKIT
    S, POLKIT, tokens = httpbridge.start()
    TOKENS.update(tokens)


def tearDownModule():
    httpbridge.stop(S, POLKIT)


def request(method, path, body=None, token='alice'):
    """(status, the parsed JSON body or the bytes)."""
    status, headers, data = httpbridge.request(method, path, body, TOKENS[token] if token else None)
    return status, json.loads(data) if data and headers.get('Content-Type', '').startswith('application/json') else data


def ws(path, steps, token='alice', auth='protocol', timeout=300, **extra):
    plan = dict(url=f'ws://127.0.0.1:{S.http_port}{path}', token=TOKENS.get(token, token), auth=auth, steps=steps,
                **extra)
    cp = subprocess.run(['/usr/bin/python3', os.path.join(HERE, 'wsclient.py')], input=json.dumps(plan),
                        capture_output=True, text=True, timeout=timeout)
    assert cp.returncode == 0, cp.stderr
    out = json.loads(cp.stdout)
    out['output'] = base64.b64decode(out['output'])
    return out


def b64(data):
    return base64.b64encode(data).decode()


class Terminal(unittest.TestCase):
    def setUp(self):
        status, s = request('POST', '/api/v1/sessions', {'template': 'shell'})
        self.assertEqual(status, 201, s)
        self.sid = s['id']
        self.url = f'/api/v1/sessions/{self.sid}'
        self.addCleanup(request, 'DELETE', self.url)

    def terminals(self):
        replies, error, _ = S.varlink_call('ListProcesses', {'id': self.sid})
        self.assertIsNone(error)
        return replies[0]['processes']

    def test_bridge_undumpable(self):
        """Tokens and secret values pass through the bridge's memory: its unit sets
        LimitCORE=0 and it makes itself undumpable (sandboxd-http(8), SERVICE)."""
        self.assertTrue(harness.dumpable_control(S))
        bridge = harness.dump_guard(S, 'sandboxd-http.service')
        self.assertNotEqual(bridge['uid'], 0)
        self.assertEqual((bridge['core'], bridge['proc_owner']), (('0', '0'), 0), bridge)

    def test_shell_resize_binary_and_exit(self):
        out = ws(self.url + '/terminal?rows=30&cols=100', [
            {'send': 'echo $((6*7))\n'}, {'expect': r'42\r\n'},
            {'send': 'stty size\n'}, {'expect': r'30 100\r\n'},
            {'control': {'type': 'resize', 'rows': 40, 'cols': 120}},
            {'send': 'stty size\n'}, {'expect': r'40 120\r\n'},
            # Output bytes as they are (a NUL, 0xff, an escape)…
            {'send': "printf 'A\\000\\377\\033[0mB\\n'\n"}, {'expect': 'A\x00\xff\x1b\\[0mB'},
            # …and input: raw mode, four bytes read and shown in hex.
            {'send': 'stty raw -echo; head -c 4 | od -An -tx1; stty sane\n'}, {'sleep': 0.5},
            {'send_b64': b64(b'\x00\xff\x1b\x7f')}, {'expect': '00 ff 1b 7f'},
            {'control': {'type': 'input', 'data': 'exit 5\n'}},
            {'wait_close': 20},
        ])
        self.assertEqual(out['status'], 101)
        self.assertEqual(out['protocol'], 'sandboxd.terminal.v1')
        self.assertNotIn('error', out, out)
        self.assertEqual(out['close'], [1000, 'the shell ended'])
        # Everything it wrote came before the close: its exit status too.
        self.assertIn(b'exit 5\r\n', out['output'][-80:])
        self.assertEqual([json.loads(t) for t in out['texts']], [{'type': 'exit', 'exit_code': 5}])
        # It was a background process of the sandbox, with a terminal; it ended.
        [p] = self.terminals()
        self.assertEqual((p['state'], p['exitStatus']), ('exited', 5))

    def test_auth_and_errors(self):
        # The header works as the subprotocol does; no token, a wrong one, another tenant's
        # session, a plain GET: refused before any upgrade.
        out = ws(self.url + '/terminal', [{'send': 'echo ok-$((1+1))\n'}, {'expect': 'ok-2'}], auth='header')
        self.assertEqual((out['status'], out.get('error')), (101, None), out)
        self.assertIsNone(out['protocol'])
        self.assertEqual(ws(self.url + '/terminal', [], auth='none')['status'], 401)
        self.assertEqual(ws(self.url + '/terminal', [], token='sdh_0000')['status'], 401)
        self.assertEqual(ws(self.url + '/terminal', [], token='bob')['status'], 404)
        self.assertEqual(ws('/api/v1/sessions/0123456789abcdef/terminal', [])['status'], 404)
        status, body = request('GET', self.url + '/terminal')
        self.assertEqual(status, 400, body)
        self.assertIn('WebSocket', body['error']['message'])
        # Text that is not a command: closed as unsupported data.
        out = ws(self.url + '/terminal', [{'send': 'true\n'}, {'sleep': 0.3}, {'control': {'type': 'nope'}},
                                          {'wait_close': 20}])
        self.assertEqual(out['close'][0], 1003, out)

    def test_client_gone_hangs_up(self):
        out = ws(self.url + '/terminal', [{'send': 'echo ready\n'}, {'expect': 'ready\r\n'}, {'drop': True}])
        self.assertEqual(out['status'], 101)
        deadline = time.monotonic() + 10
        while True:
            [p] = self.terminals()
            if p['state'] == 'exited':
                break
            self.assertLess(time.monotonic(), deadline, f'the shell outlived its client: {p}')
            time.sleep(0.1)
        self.assertIn(p['exitStatus'], (128 + 1, 128 + 9), p)   # SIGHUP (or its SIGKILL)

    def test_clients_gone_while_the_shell_starts_leave_none(self):
        """Clients that reset their connection while their shell starts, before or after
        the bridge heard of it, even before the 101 went out: every shell started for them
        is ended (none is left running for nobody)."""
        handshake = (f'GET {self.url}/terminal HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n'
                     'Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n'
                     'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n'
                     f'Sec-WebSocket-Protocol: sandboxd.terminal.v1, bearer.{TOKENS["alice"]}\r\n\r\n').encode()
        # 20: each terminal holds two of the bridge's connections to sandboxd, which takes
        # 128 of one uid (sandboxd-http(8), LIMITS); the test stays well below.
        for i in range(20):
            c = socket.create_connection(('127.0.0.1', S.http_port), timeout=10)
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
            c.sendall(handshake)
            time.sleep(i * 0.004)
            c.close()       # a reset, at a point of the shell's start that varies
        deadline = time.monotonic() + 30
        while True:
            running = [p for p in self.terminals() if p['state'] != 'exited']
            if not running:
                break
            self.assertLess(time.monotonic(), deadline, f'shells outlived their clients: {running}')
            time.sleep(0.2)
        # The bridge serves on: a terminal works.
        out = ws(self.url + '/terminal', [{'send': 'echo ready\n'}, {'expect': 'ready\r\n'}])
        self.assertEqual(out['status'], 101)

    def test_slow_client_holds_the_shell(self):
        n = 4 * 1000 * 1000
        out = ws(self.url + '/terminal', [
            {'send': 'stty -echo; echo go\n'}, {'expect': 'go\r\n'},
            {'send': f'head -c {n} /dev/zero; echo; echo done\n'},
            # Not read for 2 s: the client's queue fills, then TCP, then the bridge's,
            # then sandboxd's follower; the shell blocks in write().
            {'sleep': 2},
            {'count_zeros': n, 'timeout': 120}, {'expect': 'done\r\n', 'timeout': 60},
        ], max_queue=4)
        self.assertNotIn('error', out, {k: v for k, v in out.items() if k != 'output'})
        self.assertEqual(out['output'].count(0), n)

    def test_paced_output_is_held(self):
        """While the client reads nothing, what the shell wrote stays far below all of it."""
        n = 20 * 1000 * 1000
        plan = [{'send': 'stty -echo; echo go\n'}, {'expect': 'go\r\n'},
                {'send': f'head -c {n} /dev/zero; echo done\n'}, {'sleep': 3}, {'drop': True}]
        cp = subprocess.Popen(['/usr/bin/python3', os.path.join(HERE, 'wsclient.py')], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
        cp.stdin.write(json.dumps(dict(url=f'ws://127.0.0.1:{S.http_port}{self.url}/terminal',
                                       token=TOKENS['alice'], auth='protocol', steps=plan, max_queue=1)))
        cp.stdin.close()
        time.sleep(2.5)
        [p] = self.terminals()
        replies, error, _ = S.varlink_call('ReadOutput', {'id': self.sid, 'process': p['process']})
        self.assertIsNone(error)
        self.assertTrue(replies[0]['running'])
        self.assertLess(replies[0]['stdoutTotal'], n // 4, 'the shell was not held up by its slow client')
        cp.wait(timeout=60)

    def test_keystroke_round_trip(self):
        out = ws(self.url + '/terminal', [{'send': 'stty -icanon\n'}, {'sleep': 0.5}, {'rtt': 200}])
        self.assertNotIn('error', out, out)
        rtt = out['rtt_ms']
        median, p99 = statistics.median(rtt), sorted(rtt)[int(len(rtt) * 0.99) - 1]
        print(f'\n# terminal keystroke round trip over the WebSocket: median {median:.2f} ms, '
              f'p99 {p99:.2f} ms (n={len(rtt)})', file=sys.stderr)
        self.assertLess(median, 50)


if __name__ == '__main__':
    unittest.main(verbosity=2)
