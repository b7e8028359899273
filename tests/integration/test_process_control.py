#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Control of running processes (issue 33) over varlink and HTTP, on a real systemd, bus,
polkit and bwrap: a background process's input written and closed (WriteStdin,
CloseStdin; POST .../stdin), its output followed live (Follow with "more", paced by the
reader), signals and kill (Signal; DELETE .../executions/{eid}, POST .../signal), a
terminal started without descriptors (Start with TTY over varlink) and resized.

D-Bus's WriteStdin and CloseStdin are in test_processes.py.
"""

import base64
import os
import re
import shutil
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
IFACE = harness.VARLINK_IFACE


def setUpModule():
    global S, POLKIT
    S, POLKIT, tokens = httpbridge.start()
    TOKENS.update(tokens)


def tearDownModule():
    httpbridge.stop(S, POLKIT)


def b64(data):
    return base64.b64encode(data if isinstance(data, bytes) else data.encode()).decode()


def vl(method, **parameters):
    """One call on a connection of its own, as root: the last reply's parameters, or
    {"error": name, ...}."""
    replies, error, eparams = S.varlink_call(method, parameters)
    if error:
        return {'error': error.rsplit('.', 1)[-1], **eparams}
    return replies[-1]


def ok(r):
    assert 'error' not in r, r
    return r


class Follower:
    """A Follow call on a connection of its own, read as the test wants."""

    def __init__(self, sid, process, timeout=60):
        self.conn = S.varlink(timeout=timeout)
        self.conn.send({'method': f'{IFACE}.Follow', 'parameters': {'id': sid, 'process': process},
                        'more': True})
        self.out, self.err, self.end = b'', b'', None

    def read_until(self, pred, what):
        """Replies until pred(self) holds; fails (with what came) if the call ends first."""
        while not pred(self):
            assert self.end is None, f'{what}: ended first with {self.end}, output {self.out!r}'
            m = self.conn.receive()
            assert 'error' not in m, m
            p = m.get('parameters') or {}
            self.out += base64.b64decode(p.get('stdout', ''))
            self.err += base64.b64decode(p.get('stderr', ''))
            if not m.get('continues'):
                self.end = p
        return self

    def finish(self):
        self.read_until(lambda f: f.end is not None, 'end')
        self.conn.close()
        return self.end


class Varlink(unittest.TestCase):
    def setUp(self):
        self.sid = ok(vl('CreateSandbox', template='shell'))['id']
        self.addCleanup(vl, 'Destroy', id=self.sid)

    def start(self, argv, **options):
        return ok(vl('Start', id=self.sid, argv=argv, options=options))['process']

    def test_stdin_follow_live_and_close(self):
        proc = self.start(['sh', '-c', 'while read l; do echo "got $l"; done; echo eof >&2'], StdinPipe=True)
        f = Follower(self.sid, proc)
        t0 = time.monotonic()
        ok(vl('WriteStdin', id=self.sid, process=proc, data=b64('one\n')))
        # Live: the line comes back while the process runs on, waiting for more.
        f.read_until(lambda f: b'got one\n' in f.out, 'the first line')
        live = time.monotonic() - t0
        ok(vl('WriteStdin', id=self.sid, process=proc, data=b64(b'two\n')))
        f.read_until(lambda f: b'got two\n' in f.out, 'the second line')
        ok(vl('CloseStdin', id=self.sid, process=proc))
        end = f.finish()
        self.assertEqual(end['exitStatus'], 0, end)
        self.assertEqual(f.out, b'got one\ngot two\n')
        self.assertEqual(f.err, b'eof\n')
        self.assertLess(live, 5, 'output did not come live')
        # Ended: its input is gone with it; a new Follow gives what it wrote and the end.
        self.assertEqual(vl('WriteStdin', id=self.sid, process=proc, data=b64('x'))['error'], 'NoSuchProcess')
        g = Follower(self.sid, proc)
        self.assertEqual(g.finish()['exitStatus'], 0)
        self.assertEqual(g.out, b'got one\ngot two\n')

    def test_follow_from_offsets(self):
        proc = self.start(['sh', '-c', 'printf abcdef; sleep 100'])
        deadline = time.monotonic() + 10
        while ok(vl('ReadOutput', id=self.sid, process=proc))['stdoutTotal'] < 6:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        conn = S.varlink()
        conn.send({'method': f'{IFACE}.Follow', 'more': True,
                   'parameters': {'id': self.sid, 'process': proc, 'stdoutOffset': 4}})
        self.assertEqual(base64.b64decode(conn.receive()['parameters']['stdout']), b'ef')
        conn.close()
        self.assertEqual(vl('ReadOutput', id=self.sid, process=proc, stdoutOffset=7)['error'], 'InvalidOption')
        # Without "more" there is nothing to follow with.
        self.assertEqual(vl('Follow', id=self.sid, process=proc)['error'], 'ExpectedMore')

    def test_stdin_errors_and_busy(self):
        plain = self.start(['sleep', '100'])
        self.assertEqual(vl('WriteStdin', id=self.sid, process=plain, data=b64('x'))['error'], 'InvalidOption')
        self.assertEqual(vl('CloseStdin', id=self.sid, process=plain)['error'], 'InvalidOption')
        self.assertEqual(vl('WriteStdin', id=self.sid, process=999, data=b64('x'))['error'], 'NoSuchProcess')
        self.assertEqual(vl('Exec', id=self.sid, argv=['cat'], options={'StdinPipe': True})['error'],
                         'InvalidOption')
        self.assertEqual(vl('Start', id=self.sid, argv=['cat'],
                            options={'StdinPipe': True, 'Stdin': b64('x')})['error'], 'InvalidOption')
        # A process that does not read: its pipe, then 1 MiB waiting in sandboxd, then Busy.
        deaf = self.start(['sleep', '100'], StdinPipe=True)
        chunk = b64(b'y' * (512 * 1024))
        for _ in range(2):
            ok(vl('WriteStdin', id=self.sid, process=deaf, data=chunk))
        busy = vl('WriteStdin', id=self.sid, process=deaf, data=chunk)
        self.assertEqual(busy['error'], 'Busy', busy)
        # Closed once, closed for good.
        ok(vl('CloseStdin', id=self.sid, process=deaf))
        self.assertEqual(vl('WriteStdin', id=self.sid, process=deaf, data=b64('x'))['error'], 'InvalidOption')

    def test_signals(self):
        proc = self.start(['sh', '-c', 'trap "echo usr1" USR1; while :; do sleep 0.05; done'])
        f = Follower(self.sid, proc)
        time.sleep(0.3)   # the trap is set
        ok(vl('Signal', id=self.sid, process=proc, signal=10))
        f.read_until(lambda f: b'usr1' in f.out, 'SIGUSR1 trapped')
        ok(vl('Signal', id=self.sid, process=proc, signal=9))
        self.assertEqual(f.finish()['exitStatus'], 128 + 9)
        self.assertEqual(vl('Signal', id=self.sid, process=proc, signal=9)['error'], 'NoSuchProcess')

    def test_follow_paces_the_process(self):
        """A follower that does not read holds the writer up; all comes once it reads."""
        n = 16 * 1024 * 1024
        proc = self.start(['sh', '-c', f'echo ready; read x; head -c {n} /dev/zero; echo done'],
                          StdinPipe=True)
        f = Follower(self.sid, proc, timeout=120)
        f.read_until(lambda f: f.out == b'ready\n', 'ready')
        ok(vl('WriteStdin', id=self.sid, process=proc, data=b64('go\n')))
        time.sleep(2)
        r = ok(vl('ReadOutput', id=self.sid, process=proc))
        self.assertTrue(r['running'], 'the writer was not held up by the follower')
        self.assertLess(r['stdoutTotal'], 4 * 1024 * 1024, r)
        end = f.finish()
        self.assertEqual(end['exitStatus'], 0)
        self.assertEqual(len(f.out), 6 + n + 5)
        self.assertTrue(f.out.endswith(b'done\n'))

    def test_terminal_without_descriptors(self):
        proc = self.start(['sh'], TTY=True, TerminalRows=30, TerminalColumns=100)
        f = Follower(self.sid, proc)
        ok(vl('WriteStdin', id=self.sid, process=proc, data=b64('stty size; tty\n')))
        f.read_until(lambda f: re.search(rb'30 100\r\n', f.out), 'stty size')
        f.read_until(lambda f: re.search(rb'/dev/pts/\d+', f.out), 'tty')
        ok(vl('ResizeTerminal', id=self.sid, process=proc, rows=40, columns=120))
        ok(vl('WriteStdin', id=self.sid, process=proc, data=b64('stty size\n')))
        f.read_until(lambda f: re.search(rb'40 120\r\n', f.out), 'stty size after the resize')
        # Binary input reaches the terminal as it is (raw mode: the bytes, counted back).
        ok(vl('WriteStdin', id=self.sid, process=proc,
              data=b64(b'stty raw -echo; head -c 4 | od -An -tx1; stty sane\n')))
        time.sleep(0.3)
        ok(vl('WriteStdin', id=self.sid, process=proc, data=b64(b'\x00\xff\x1b\x7f')))
        f.read_until(lambda f: b'00 ff 1b 7f' in f.out, 'binary input')
        ok(vl('WriteStdin', id=self.sid, process=proc, data=b64('exit 3\n')))
        self.assertEqual(f.finish()['exitStatus'], 3)
        # Exec has no one at the other end of a terminal without descriptors.
        self.assertEqual(vl('Exec', id=self.sid, argv=['sh'], options={'TTY': True})['error'], 'InvalidOption')


class HTTP(unittest.TestCase):
    def request(self, method, path, body=None, token='alice'):
        import http.client
        import json
        c = http.client.HTTPConnection('127.0.0.1', S.http_port, timeout=60)
        try:
            h = {'Authorization': f'Bearer {TOKENS[token]}'}
            if body is not None:
                h['Content-Type'] = 'application/json'
            c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, json.loads(data) if data else None
        finally:
            c.close()

    def setUp(self):
        status, s = self.request('POST', '/api/v1/sessions', {'template': 'shell'})
        self.assertEqual(status, 201, s)
        self.url = f'/api/v1/sessions/{s["id"]}'
        self.addCleanup(self.request, 'DELETE', self.url)

    def start(self, body):
        status, r = self.request('POST', self.url + '/execute', dict(body, background=True))
        self.assertIn(status, (200, 201, 202), r)
        return f'{self.url}/executions/{r["execution_id"]}'

    def result(self, exe, wait=10):
        eid = exe.rsplit('/', 1)[1]
        return self.request('GET', f'{self.url}/result?execution={eid}&wait={wait}')

    def test_stdin_signal_kill(self):
        exe = self.start({'argv': ['sh', '-c', 'while read l; do echo "got $l"; done'], 'stdin_pipe': True})
        self.assertEqual(self.request('POST', exe + '/stdin', {'data': 'hi\n'})[0], 204)
        self.assertEqual(self.request('POST', exe + '/stdin', {'data_base64': b64(b'\xc3\xa9\n')})[0], 204)
        self.assertEqual(self.request('POST', exe + '/stdin/close', {})[0], 204)
        status, r = self.result(exe)
        self.assertEqual(status, 200, r)
        self.assertEqual(r['exit_code'], 0)
        self.assertEqual(r['stdout'], 'got hi\ngot é\n')
        self.assertEqual(self.request('POST', exe + '/stdin', {'data': 'x'})[1]['error']['code'], 'NoSuchProcess')
        self.assertEqual(self.request('POST', exe + '/stdin', {'data': 'x', 'data_base64': 'eA=='})[0], 400)

        exe = self.start({'argv': ['sleep', '100']})
        self.assertEqual(self.request('POST', exe + '/stdin', {'data': 'x'})[0], 400)
        self.assertEqual(self.request('POST', exe + '/signal', {'signal': 'sigterm'})[0], 204)
        self.assertEqual(self.result(exe)[1]['exit_code'], 128 + 15)
        exe = self.start({'argv': ['sleep', '100']})
        self.assertEqual(self.request('POST', exe + '/signal', {'signal': 'NOPE'})[0], 400)
        self.assertEqual(self.request('POST', exe + '/signal', {'signal': 65})[0], 400)
        self.assertEqual(self.request('POST', exe + '/signal', {'signal': 2})[0], 204)
        self.assertEqual(self.result(exe)[1]['exit_code'], 128 + 2)
        exe = self.start({'argv': ['sleep', '100']})
        # Another tenant does not see it.
        self.assertEqual(self.request('DELETE', exe, token='bob')[0], 404)
        self.assertEqual(self.request('DELETE', exe)[0], 204)
        self.assertEqual(self.result(exe)[1]['exit_code'], 128 + 9)
        self.assertEqual(self.request('DELETE', exe)[0], 404)
        self.assertEqual(self.request('DELETE', self.url + '/executions/77')[0], 404)


if __name__ == '__main__':
    unittest.main(verbosity=2)
