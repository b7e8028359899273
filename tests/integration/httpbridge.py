# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd-http as the harness installs it (socket-activated, its own user, allowed to act
for tenants by the shipped polkit rule), with a token per tenant, for the modules that
drive the bridge as its clients do (test_process_control, test_terminal, test_console)."""

import http.client
import json
import os

import harness
import polkitutil as authz
import secutil

RULES = 'io.sandboxd.Sandbox1-http.rules'


def start(tenants=('alice', 'bob')):
    """polkit's rules, tokens (name: tenant of that name) and the bridge's socket: (the
    System, the polkit handle, {tenant: token}). Undo with stop()."""
    polkit = authz.setup_module()
    s = secutil.S
    tokens = {}
    try:
        with open(os.path.join(s.paths.source, 'polkit', RULES)) as f:
            polkit.set_rules(f.read(), name=RULES)
        s.run(['rm', '-rf', '--', harness.HTTP_TOKENS_DIR])
        for name in tenants:
            cp = s.run([s.paths.sandboxd_http, 'token', 'add', name, f'--tenant={name}',
                        f'--tokens-dir={harness.HTTP_TOKENS_DIR}'], check=True)
            tokens[name] = cp.stdout.strip()
        s.systemctl('start', 'sandboxd-http.socket', check=True)
    except BaseException:
        authz.teardown_module(polkit)
        raise
    return s, polkit, tokens


def stop(s, polkit):
    """The bridge stopped; what the sanitizers reported of it (an ASan build) is a failure."""
    try:
        s.systemctl('stop', 'sandboxd-http.socket', 'sandboxd-http.service', timeout=60)
        journal = s.journal(units=('sandboxd-http.service',))
        if 'Sanitizer' in journal or 'runtime error' in journal:
            raise AssertionError('sanitizer reports from sandboxd-http:\n' + journal[-6000:])
    finally:
        authz.teardown_module(polkit)


def request(method, path, body=None, token=None, port=None):
    """One request to the bridge with a bearer TOKEN (None: none), a JSON BODY: (status,
    headers, the body's bytes)."""
    c = http.client.HTTPConnection('127.0.0.1', port or secutil.S.http_port, timeout=60)
    try:
        h = {'Authorization': f'Bearer {token}'} if token else {}
        if body is not None:
            h['Content-Type'] = 'application/json'
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
        r = c.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        c.close()
