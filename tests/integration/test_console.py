#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The console page of sandboxd-http (issue 33, docs/TERMINALS.md) in a real browser:
headless Chromium (Debian's chromium), driven over the DevTools protocol (cdpconsole.py),
opens /console, takes the token in its form (not in the URL), lists the tenant's sandbox
with its state and metrics, opens its terminal (xterm.js on the WebSocket), types
`echo $((6*7))` and reads 42 back from the screen; a resize from the page is what
`stty size` says inside. Heavy (a browser): PLAIN_ONLY in run.py."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, '..', 'security'))
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
    return httpbridge.request(method, path, body, TOKENS[token] if token else None)


class Console(unittest.TestCase):
    def test_page_and_files(self):
        status, headers, body = request('GET', '/console', token=None)
        self.assertEqual(status, 200)
        self.assertTrue(headers['Content-Type'].startswith('text/html'))
        self.assertIn("connect-src 'self'", headers['Content-Security-Policy'])
        self.assertIn(b'<script src="/console/xterm.js">', body)
        status, headers, body = request('GET', '/console/xterm.js', token=None)
        self.assertEqual(status, 200)
        self.assertIn(b'xterm', body[:4096])
        self.assertGreater(len(body), 100000, 'the real xterm.js, not a stub')
        self.assertEqual(request('GET', '/console/nope.js', token=None)[0], 404)

    def test_terminal_in_a_browser(self):
        status, _, body = request('POST', '/api/v1/sessions', {'template': 'shell'})
        self.assertEqual(status, 201, body)
        sid = json.loads(body)['id']
        self.addCleanup(request, 'DELETE', f'/api/v1/sessions/{sid}')
        status, _, body = request('GET', f'/api/v1/sessions/{sid}/metrics')
        self.assertEqual(status, 200, body)
        self.assertGreater(json.loads(body)['memoryCurrent'], 0)
        with tempfile.TemporaryDirectory(prefix='console-', dir=S.workdir) as work:
            plan = {'url': f'http://127.0.0.1:{S.http_port}/console', 'token': TOKENS['alice'], 'sandbox': sid,
                    'workdir': work}
            cp = subprocess.run(['/usr/bin/python3', os.path.join(HERE, 'cdpconsole.py')], input=json.dumps(plan),
                                capture_output=True, text=True, timeout=240)
            log = open(os.path.join(work, 'chromium.log')).read()[-3000:] if os.path.exists(
                os.path.join(work, 'chromium.log')) else ''
        self.assertEqual(cp.returncode, 0, cp.stderr)
        out = json.loads(cp.stdout)
        self.assertNotIn('error', out, f'{out}\n{cp.stderr[-3000:]}\n{log}')
        self.assertIn('running', out['row'])
        self.assertNotIn(TOKENS['alice'], out['url'])
        self.assertTrue(out['storage_has_token'])
        lines = [l.strip() for l in out['screen'].split('\n')]
        self.assertIn('42', lines)
        self.assertIn('33 91', lines)
        # The shell the page opened was a process of the session; the browser gone, the
        # terminal is hung up.
        replies, error, _ = S.varlink_call('ListProcesses', {'id': sid})
        self.assertIsNone(error)
        [p] = replies[0]['processes']
        self.assertEqual(p['argv'][0], '/bin/sh')


if __name__ == '__main__':
    unittest.main(verbosity=2)
