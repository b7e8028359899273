#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 32: the secret store (docs/SECRETS.md) on the real daemon. sandboxctl secret
set/list/remove (the value from standard input), SetSecret/ListSecrets/RemoveSecret over
varlink (the Python client) and over the HTTP bridge (a tenant's own store), and sandboxes
that bind them at create: as environment variables and as files under /run/secrets
(tmpfs, 0400, the sandbox's uid). Values never appear in an API answer, in the sandbox's
state file, in the journal, or in the argv of any process sandboxd started.

Run through run.py, or directly: python3 -m unittest -v test_secrets
"""

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

SOURCE = os.environ.get('SANDBOXD_SOURCE_DIR', os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(SOURCE, 'python'))
import sandboxd  # noqa: E402
from sandboxd import Sandbox  # noqa: E402
from sandboxd.http import HttpTransport  # noqa: E402

S = None
_owned = False
BRIDGE = None     # (process, url, token)

VALUE = 'sk-test-4f1d2c9a8b7e6d5c'
FILE_VALUE = 'file-secret-0a9b8c7d6e'


def setUpModule():
    global S, _owned, BRIDGE
    S, _owned = harness.module_setup()
    binary = os.path.join(S.paths.build, 'src', 'sandboxd-http', 'sandboxd-http')
    tokens = tempfile.mkdtemp(prefix='http-tokens-', dir=S.workdir)
    token = subprocess.run([binary, 'token', 'add', 'secrets', f'--tokens-dir={tokens}'], capture_output=True,
                           text=True, check=True, timeout=30).stdout.strip()
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    url = f'http://127.0.0.1:{port}'
    with open(os.path.join(tokens, 'log'), 'w') as log:
        bridge = subprocess.Popen(S.wrap([binary, f'--listen=127.0.0.1:{port}', f'--tokens-dir={tokens}',
                                          f'--varlink={harness.VARLINK_SOCKET}']),
                                  stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
    BRIDGE = (bridge, url, token)
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + '/healthz', timeout=5):
                break
        except OSError:
            if bridge.poll() is not None or time.monotonic() > deadline:
                raise AssertionError('sandboxd-http did not come up:\n' + open(os.path.join(tokens, 'log')).read())
            time.sleep(0.05)


def tearDownModule():
    if BRIDGE is not None:
        os.killpg(BRIDGE[0].pid, signal.SIGTERM)
        BRIDGE[0].wait(timeout=30)
    harness.module_teardown(_owned)


def http(verb, path, body=None):
    """(status, parsed body or None) of a request to the bridge with its token."""
    _bridge, url, token = BRIDGE
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=verb,
                                 headers={'Authorization': f'Bearer {token}', 'Content-Type': 'application/json'})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            text = r.read()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        text = e.read()
        return e.code, json.loads(text) if text else None


class Secrets(harness.SandboxTestCase):
    TEMPLATE = 'shell'

    def set_secret(self, name, value):
        self.ok(self.ctl('secret', 'set', name, input=value + '\n'))
        self.addCleanup(self.ctl, 'secret', 'remove', name)

    def assert_nowhere(self, sid, *values):
        """None of values in sandboxd's state files, the journal, or a process's argv."""
        for path in glob.glob(S.path(f'{S.state_dir}/sandboxes/*')):
            with open(path, 'rb') as f:
                data = f.read()
            for v in values:
                self.assertNotIn(v.encode(), data, f'a secret in {path}')
        journal = S.journal()
        for v in values:
            self.assertNotIn(v, journal, 'a secret in the journal')
        for pid in S.unit_pids(self.unit(sid)):
            try:
                with open(f'/proc/{pid}/cmdline', 'rb') as f:
                    cmdline = f.read()
            except OSError:
                continue
            for v in values:
                self.assertNotIn(v.encode(), cmdline, f'a secret in the argv of {pid}')

    def test_cli_store_and_bindings(self):
        self.set_secret('TEST_TOKEN', VALUE)
        self.set_secret('TEST_FILE', FILE_VALUE)

        # Names only, in the list and in its JSON.
        listed = self.ok(self.ctl('secret', 'list')).stdout
        self.assertIn('TEST_TOKEN\n', listed)
        self.assertNotIn(VALUE, listed)
        self.assertIn('TEST_FILE', json.loads(self.ok(self.ctl('--json', 'secret', 'list')).stdout))

        sid = self.create('--secret', 'TEST_TOKEN', '--secret', 'TEST_FILE:file')
        self.assertEqual(self.ok(self.exec(sid, 'printenv', 'TEST_TOKEN')).stdout, VALUE + '\n')
        # A file bound is not a variable, and the other way round.
        self.assertNotEqual(self.exec(sid, 'printenv', 'TEST_FILE').returncode, 0)
        cp = self.ok(self.exec(sid, 'sh', '-c', 'stat -c "%a %u" /run/secrets/TEST_FILE; cat /run/secrets/TEST_FILE; echo; '
                                                'ls /run/secrets; grep " /run/secrets/TEST_FILE " /proc/self/mountinfo'))
        lines = cp.stdout.splitlines()
        self.assertEqual(lines[0], '400 1000')
        self.assertEqual(lines[1], FILE_VALUE)
        self.assertEqual(lines[2], 'TEST_FILE')
        self.assertIn(' ro,', lines[3])
        self.assertIn(' tmpfs ', lines[3])
        # The exec's own environment still wins.
        cp = self.ok(self.exec(sid, 'printenv', 'TEST_TOKEN', opts=('--env', 'TEST_TOKEN=mine')))
        self.assertEqual(cp.stdout, 'mine\n')

        # The sandbox says which bindings it has, never the values.
        self.assertNotIn(VALUE, json.dumps(self.status(sid)))
        self.assert_nowhere(sid, VALUE, FILE_VALUE)

    def test_refusals(self):
        cp = self.ctl('create', '--secret', 'NOT_THERE_AT_ALL')
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn('sandboxctl secret set NOT_THERE_AT_ALL', cp.stderr)
        cp = self.ctl('create', '--secret', 'bad name')
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn('NAME, NAME:file or NAME@HOST:HEADER', cp.stderr)
        cp = self.ctl('secret', 'set', '../etc', input='x')
        self.assertNotEqual(cp.returncode, 0)
        cp = self.ctl('secret', 'remove', 'NOT_THERE_AT_ALL')
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn('no secret NOT_THERE_AT_ALL', cp.stderr)

    def test_removed_secret_is_gone(self):
        self.ok(self.ctl('secret', 'set', 'TEST_GONE', input='gone-value'))
        self.ok(self.ctl('secret', 'remove', 'TEST_GONE'))
        self.assertNotIn('TEST_GONE', self.ok(self.ctl('secret', 'list')).stdout)
        self.assertNotEqual(self.ctl('create', '--secret', 'TEST_GONE').returncode, 0)

    def test_varlink_python_client(self):
        t = sandboxd.VarlinkTransport(S.path(harness.VARLINK_SOCKET))
        self.addCleanup(t.close)
        Sandbox.set_secret('PY_TOKEN', 'py-' + VALUE, transport=t)
        self.addCleanup(Sandbox.remove_secret, 'PY_TOKEN', transport=t)
        self.assertIn('PY_TOKEN', Sandbox.list_secrets(transport=t))
        sbx = Sandbox.create('shell', secrets=['PY_TOKEN'], allow_hosts=['example.com'], transport=t)
        self.addCleanup(sbx.kill)
        self.assertEqual(sbx.commands.run('printenv PY_TOKEN').stdout, 'py-' + VALUE + '\n')
        # The egress rules came with it: the proxy's variables are set.
        self.assertIn('127.0.0.1:3128', sbx.commands.run('printenv HTTPS_PROXY').stdout)
        with self.assertRaises(sandboxd.InvalidOption):
            Sandbox.create('shell', secrets=['PY_MISSING'], transport=t)

    def test_http_tenant_store(self):
        status, _ = http('PUT', '/api/v1/secrets/HTTP_TOKEN', {'value': 'http-' + VALUE})
        self.assertEqual(status, 204)
        self.addCleanup(http, 'DELETE', '/api/v1/secrets/HTTP_TOKEN')
        status, names = http('GET', '/api/v1/secrets')
        self.assertEqual((status, names), (200, ['HTTP_TOKEN']))
        # The tenant's store is its own: root's has no such secret.
        self.assertNotIn('HTTP_TOKEN', self.ok(self.ctl('secret', 'list')).stdout)
        status, body = http('PUT', '/api/v1/secrets/bad-name', {'value': 'x'})
        self.assertEqual(status, 400, body)

        status, session = http('POST', '/api/v1/sessions', {'template': 'shell', 'secrets': ['HTTP_TOKEN'],
                                                             'egress_allow': ['example.com']})
        self.assertEqual(status, 201, session)
        self.addCleanup(http, 'DELETE', f'/api/v1/sessions/{session["id"]}')
        self.assertNotIn(VALUE, json.dumps(session))
        t = HttpTransport(BRIDGE[1], BRIDGE[2])
        sbx = Sandbox.connect(session['id'], transport=t)
        self.assertEqual(sbx.commands.run('printenv HTTP_TOKEN').stdout, 'http-' + VALUE + '\n')

        # The Python client over HTTP: the same store.
        Sandbox.set_secret('HTTP_PY', 'v2', transport=t)
        self.assertEqual(sorted(Sandbox.list_secrets(transport=t)), ['HTTP_PY', 'HTTP_TOKEN'])
        Sandbox.remove_secret('HTTP_PY', transport=t)
        self.assertEqual(Sandbox.list_secrets(transport=t), ['HTTP_TOKEN'])

        status, _ = http('DELETE', '/api/v1/secrets/HTTP_TOKEN')
        self.assertEqual(status, 204)
        status, body = http('DELETE', '/api/v1/secrets/HTTP_TOKEN')
        self.assertEqual(status, 404, body)


if __name__ == '__main__':
    unittest.main()
