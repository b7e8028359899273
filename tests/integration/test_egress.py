#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 18: network egress by domain (sandboxd-egress(8)).

A test HTTPS server (a CA of this test's own, made with openssl) listens in a network
namespace the test makes (ip netns, a veth pair, addresses of 10.231.0.0/24 that exist on
this system only). sandboxd-egress is installed from the build tree with its real units,
plus a drop-in that binds a hosts file of the test's over its /etc/hosts: c-ares reads the
hosts file first, so the test's names resolve without any DNS. Nothing leaves the machine.

Run through run.py, or directly: python3 -m unittest -v test_egress
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

S = None
_owned = False

NET = '10.231.0'
HOST_ADDR = f'{NET}.1'
SERVER_ADDR = f'{NET}.2'
NAMES = ['allowed.test', 'denied.test', 'other.test', 'www.wild.test', 'wild.test', 'api.anthropic.com']
HOSTS = (f'{SERVER_ADDR} {" ".join(NAMES)}\n'
         f'{SERVER_ADDR} nocert.test\n'
         f'{SERVER_ADDR} xn--bcher-kva.allowed.test\n'
         '127.0.0.1 loop.test\n'
         f'{HOST_ADDR} self.test\n'
         '169.254.169.254 meta.test\n')
BODY = 'egress-test-ok'
# The sandbox's network interfaces (it has no /sys), one a line.
NETDEVS = "sed -n '3,$p' /proc/net/dev | cut -d: -f1 | tr -d ' '"

SERVER = r'''
import http.server, json, ssl, sys, threading
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def do_GET(self):
        body = sys.argv[3].encode()
        if self.path.startswith('/big'):
            body = b'x' * int(self.path.split('=')[1])
        if self.path.startswith('/record'):
            body = self.record(b'')
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        if self.headers.get('Transfer-Encoding') == 'chunked':
            data = b''
            while True:
                n = int(self.rfile.readline().split(b';')[0], 16)
                if n == 0:
                    while self.rfile.readline() not in (b'\r\n', b''):
                        pass
                    break
                data += self.rfile.read(n)
                self.rfile.readline()
        else:
            data = self.rfile.read(int(self.headers.get('Content-Length', 0)))
        body = self.record(data)
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def record(self, data):
        # What a header-injecting proxy sent, for the test to read; never echoed back.
        with open(sys.argv[5], 'a') as f:
            f.write(json.dumps({'method': self.command, 'path': self.path, 'key': self.headers.get_all('x-api-key'),
                                'body': len(data)}) + '\n')
        return b'recorded %d' % len(data)
    def log_message(self, *a):
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv = http.server.ThreadingHTTPServer((sys.argv[4], 443), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print('ready', flush=True)
srv.serve_forever()
'''

# Runs inside a sandbox: a CONNECT for one name, then a TLS handshake that names another.
SNI_CLIENT = r'''
import socket, ssl, sys
s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
early = b""
if sys.argv[1] == "early":
    # The ClientHello right behind the request, before the proxy's 200.
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ssl.create_default_context(cafile="/work/ca.pem").wrap_bio(inc, out, server_hostname="allowed.test")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    early = out.read()
s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n" + early)
head = b""
while b"\r\n\r\n" not in head:
    chunk = s.recv(1)
    if not chunk:
        break
    head += chunk
print(head.split(b"\r\n")[0].decode())
if sys.argv[1] == "early":
    print("server record", s.recv(1)[:1].hex())   # 16: the ServerHello's handshake record
    sys.exit(0)
if sys.argv[1] == "garbage":
    s.sendall(b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n" + b"\0" * 600)
    print("closed" if s.recv(100) == b"" else "answered")
    sys.exit(0)
ctx = ssl.create_default_context(cafile="/work/ca.pem")
ctx.check_hostname = False
try:
    ctx.wrap_socket(s, server_hostname=sys.argv[1]).close()
    print("handshake")
except (ssl.SSLError, OSError) as e:
    print("refused", type(e).__name__)
'''

# Runs inside a sandbox: many connections to the proxy that never finish their request,
# one with a 1 MB header line, and tells what each got.
ABUSE_CLIENT = r'''
import resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
n = int(sys.argv[1])
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
    s.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\n")   # never ends: a slow header
    socks.append(s)
print("open", len(socks), flush=True)
big = socket.create_connection(("127.0.0.1", 3128), timeout=30)
try:
    big.sendall(b"CONNECT allowed.test:443 HTTP/1.1\r\nX: " + b"a" * (1024 * 1024) + b"\r\n\r\n")
except OSError:
    pass
try:
    got = big.recv(200).split(b"\r\n")[0].decode() or "closed"
except OSError:
    got = "closed"   # reset: the proxy closed with our megabyte unread
print("big", got, flush=True)
time.sleep(float(sys.argv[2]))
for s in socks:
    s.close()
print("done", flush=True)
'''


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()


def tearDownModule():
    harness.module_teardown(_owned)


def _run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


class EgressNetwork(harness.SandboxTestCase):
    """The test network, server, names and proxy, for the tests here and those of
    test_claude_code."""
    TEMPLATE = 'python'

    @classmethod
    def setUpClass(cls):
        cls.tag = f'eg{os.getpid() % 100000}'
        cls.netns = f'sbx-{cls.tag}'
        cls.veth = f've{cls.tag}'
        cls.dir = tempfile.mkdtemp(prefix='egress-', dir=S.workdir)
        cls.server = None
        cls.units = []
        cls.units_installed = False
        try:
            cls._make_certificates()
            cls._make_network()
            cls._start_server()
            cls._install_egress()
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            os.killpg(cls.server.pid, signal.SIGKILL)
            cls.server.wait()
        S.systemctl('stop', 'sandboxd-egress.socket', 'sandboxd-egress.service', timeout=60)
        # It ended as it should on SIGTERM (under the sanitizers: without a leak or error).
        result = S.show('sandboxd-egress.service', 'Result', 'ExecMainStatus')
        log = S.run(['journalctl', '--no-pager', '-o', 'cat', '-n', '40', '-u', 'sandboxd-egress.service']).stdout
        for path in reversed(cls.units):
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.exists(path):
                os.unlink(path)
        S.systemctl('daemon-reload', timeout=60)
        S.systemctl('reset-failed', 'sandboxd-egress.service', timeout=30)
        S.run(['ip', 'link', 'del', cls.veth])
        S.run(['ip', 'netns', 'del', cls.netns])
        shutil.rmtree(cls.dir, ignore_errors=True)
        if cls.units_installed:
            assert (result.get('Result'), result.get('ExecMainStatus')) in (('success', '0'),), \
                f'sandboxd-egress ended with {result}:\n{log}'

    @classmethod
    def _make_certificates(cls):
        d = cls.dir
        cls.ca = os.path.join(d, 'ca.pem')
        san = ','.join(f'DNS:{n}' for n in NAMES)
        for cmd in (
            ['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', f'{d}/ca.key', '-out', cls.ca,
             '-days', '2', '-subj', '/CN=sandboxd egress test CA'],
            ['openssl', 'req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f'{d}/server.key',
             '-out', f'{d}/server.csr', '-subj', '/CN=allowed.test'],
        ):
            cp = _run(cmd)
            assert cp.returncode == 0, cp.stderr
        with open(f'{d}/ext.cnf', 'w') as f:
            f.write(f'subjectAltName={san}\n')
        cp = _run(['openssl', 'x509', '-req', '-in', f'{d}/server.csr', '-CA', cls.ca, '-CAkey', f'{d}/ca.key',
                   '-CAcreateserial', '-out', f'{d}/server.pem', '-days', '2', '-extfile', f'{d}/ext.cnf'])
        assert cp.returncode == 0, cp.stderr
        with open(cls.ca) as f:
            cls.ca_text = f.read()

    @classmethod
    def _make_network(cls):
        S.run(['ip', 'netns', 'del', cls.netns])
        for cmd in (['ip', 'netns', 'add', cls.netns],
                    ['ip', 'link', 'add', cls.veth, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', cls.netns],
                    ['ip', 'addr', 'add', f'{HOST_ADDR}/24', 'dev', cls.veth],
                    ['ip', 'link', 'set', cls.veth, 'up'],
                    ['ip', '-n', cls.netns, 'addr', 'add', f'{SERVER_ADDR}/24', 'dev', 'eth0'],
                    ['ip', '-n', cls.netns, 'link', 'set', 'eth0', 'up'],
                    ['ip', '-n', cls.netns, 'link', 'set', 'lo', 'up']):
            S.run(cmd, check=True)

    @classmethod
    def _start_server(cls):
        script = os.path.join(cls.dir, 'server.py')
        with open(script, 'w') as f:
            f.write(SERVER)
        cls.server = subprocess.Popen(
            S.wrap(['ip', 'netns', 'exec', cls.netns, 'python3', script, f'{cls.dir}/server.pem',
                    f'{cls.dir}/server.key', BODY, SERVER_ADDR, f'{cls.dir}/requests.log']),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        line = cls.server.stdout.readline().decode()
        assert line.strip() == 'ready', f'test server did not start: {line}'
        # The host reaches it directly (the bench and the sanity check of the test itself).
        deadline = time.monotonic() + 10
        while True:
            cp = _run(['curl', '-sS', '--cacert', cls.ca, '--resolve', f'allowed.test:443:{SERVER_ADDR}',
                       'https://allowed.test/'])
            if cp.stdout == BODY or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert cp.stdout == BODY, f'the test server does not answer: {cp.stderr}'

    @classmethod
    def _install_egress(cls):
        p = S.paths
        unitdir = S.path('/run/systemd/system')
        binary = os.path.join(p.build, 'src', 'sandboxd-egress', 'sandboxd-egress')
        with open(os.path.join(p.source, 'units', 'sandboxd-egress.service.in')) as f:
            # The test's CA, for the servers of header injection (a copy the service's user reads).
            service = f.read().replace('@libexecdir@/sandboxd/sandboxd-egress',
                                       f'{binary} --trust=/run/{cls.tag}-egress/ca.pem')
        with open(os.path.join(p.source, 'units', 'sandboxd-egress.socket')) as f:
            socket_unit = f.read()
        hostsdir = f'/run/{cls.tag}-egress'
        os.makedirs(S.path(hostsdir), exist_ok=True)
        with open(S.path(f'{hostsdir}/hosts'), 'w') as f:
            f.write(HOSTS)
        os.chmod(S.path(f'{hostsdir}/hosts'), 0o644)
        shutil.copy(cls.ca, S.path(f'{hostsdir}/ca.pem'))
        os.chmod(S.path(f'{hostsdir}/ca.pem'), 0o644)
        dropin = ['[Service]', f'BindReadOnlyPaths={hostsdir}/hosts:/etc/hosts']
        with open(binary, 'rb') as f:
            sanitized = b'__asan_init' in f.read()
        if sanitized:
            # The sanitizers' runtime maps and reads what the filter and MDWE refuse. Its
            # LeakSanitizer cannot stop the threads of this service at exit ("fatal error"
            # with the unit's sandboxing, even run as root): leaks are not looked for here,
            # addresses and undefined behaviour are (and the exit status is checked).
            opts = os.environ.get('ASAN_OPTIONS', '')
            opts = ':'.join([o for o in opts.split(':') if o and not o.startswith('detect_leaks=')]
                            + ['detect_leaks=0'])
            dropin += [f'Environment=ASAN_OPTIONS={opts}', 'SystemCallFilter=', 'MemoryDenyWriteExecute=no',
                       'MemoryMax=infinity']
            for var in harness.SANITIZER_VARS:
                if var != 'ASAN_OPTIONS' and os.environ.get(var):
                    dropin.append(f'Environment={var}={os.environ[var]}')
        files = {
            f'{unitdir}/sandboxd-egress.service': service,
            f'{unitdir}/sandboxd-egress.socket': socket_unit,
            f'{unitdir}/sandboxd-egress.service.d/50-test.conf': '\n'.join(dropin) + '\n',
        }
        for path, text in files.items():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w') as f:
                f.write(harness.MARKER + '\n' + text)
            cls.units.append(path)
        cls.units += [f'{unitdir}/sandboxd-egress.service.d', S.path(hostsdir)]
        S.systemctl('daemon-reload', check=True)
        S.systemctl('start', 'sandboxd-egress.socket', check=True)
        cls.units_installed = True

    # ---- helpers ---------------------------------------------------------------------

    def egress_sandbox(self, *rules):
        sid = self.create(*rules)
        self.ok(self.exec(sid, 'sh', '-c', 'cat > /work/ca.pem', input=self.ca_text))
        return sid

    def curl(self, sid, url, *extra):
        """curl in the sandbox: (exit code, HTTP code or body, stderr)."""
        cp = self.exec(sid, 'curl', '-sS', '--max-time', '20', '--cacert', '/work/ca.pem', *extra, url)
        return cp

    def journal_entries(self, sid, since):
        cp = S.run(['journalctl', '--no-pager', '-o', 'json', f'--since=@{int(since) - 1}',
                    '-u', 'sandboxd-egress.service', f'SANDBOX_ID={sid}'], timeout=30)
        out = []
        for line in cp.stdout.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def assert_journal(self, sid, since, host, verdict, reason_re):
        deadline = time.monotonic() + 10
        while True:
            entries = [e for e in self.journal_entries(sid, since)
                       if e.get('EGRESS_HOST') == host and e.get('EGRESS_VERDICT') == verdict]
            if any(re.search(reason_re, e.get('EGRESS_REASON', '')) for e in entries):
                return
            if time.monotonic() > deadline:
                self.fail(f'no journal entry {verdict} {host} /{reason_re}/ for {sid}; have: '
                          + str([(e.get('EGRESS_HOST'), e.get('EGRESS_VERDICT'), e.get('EGRESS_REASON'))
                                 for e in self.journal_entries(sid, since)]))
            time.sleep(0.3)

    def recorded(self):
        try:
            with open(os.path.join(self.dir, 'requests.log')) as f:
                return [json.loads(line) for line in f]
        except FileNotFoundError:
            return []

    def assert_key_absent(self, sid, key):
        """key in no environment, file or process memory of sandbox sid. The memory first: the
        search inside gets the key on its standard input (never through the agent), and
        says only what it found."""
        self.assert_key_not_in_memory(sid, key)
        cp = self.ok(self.exec(sid, 'sh', '-c', 'read -r k; cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n" | '
                                                'grep -cF -- "$k"; grep -rlF -- "$k" /work /tmp /run /etc /dev/shm '
                                                '2>/dev/null; true', input=key + '\n'))
        self.assertEqual(cp.stdout, '0\n', 'the key in an environment or a file of the sandbox')

    def assert_key_not_in_memory(self, sid, key):
        pids = S.unit_pids(self.unit(sid))
        self.assertTrue(pids)
        needle = key.encode()
        for pid in pids:
            try:
                maps = open(f'/proc/{pid}/maps').read().splitlines()
                mem = open(f'/proc/{pid}/mem', 'rb')
            except OSError:
                continue
            with mem:
                for line in maps:
                    addr, perms = line.split()[:2]
                    if 'r' not in perms:
                        continue
                    lo, hi = (int(x, 16) for x in addr.split('-'))
                    try:
                        mem.seek(lo)
                        data = mem.read(hi - lo)
                    except (OSError, ValueError, OverflowError):
                        continue
                    self.assertFalse(needle in data, f'the key in the memory of {pid} ({line})')


class Egress(EgressNetwork):
    # ---- tests -----------------------------------------------------------------------

    def test_allowlist(self):
        since = time.time()
        sid = self.egress_sandbox('--allow-host=allowed.test', '--allow-host=denied.test',
                                  '--allow-host=*.wild.test', '--allow-host=loop.test', '--allow-host=meta.test',
                                  f'--allow-host={NET}.0/24', '--deny-host=denied.test')

        # The rules, as the sandbox keeps them.
        self.assertEqual(self.bus_property(sid, 'EgressAllow'),
                         ['allowed.test', 'denied.test', '*.wild.test', 'loop.test', 'meta.test', f'{NET}.0/24'])
        self.assertEqual(self.bus_property(sid, 'EgressDeny'), ['denied.test'])

        # Only lo, and the proxy in the environment.
        cp = self.ok(self.exec(sid, 'sh', '-c', NETDEVS + '; echo "$HTTPS_PROXY $http_proxy $NO_PROXY"'))
        self.assertEqual(cp.stdout, 'lo\nhttp://127.0.0.1:3128 http://127.0.0.1:3128 localhost,127.0.0.1,::1\n')

        # Allowed: curl and Python's urllib, through the proxy.
        cp = self.ok(self.curl(sid, 'https://allowed.test/'))
        self.assertEqual(cp.stdout, BODY)
        cp = self.ok(self.curl(sid, 'https://www.wild.test/'))
        self.assertEqual(cp.stdout, BODY)
        cp = self.ok(self.exec(sid, 'python3', '-c',
                               'import ssl, urllib.request; '
                               'ctx = ssl.create_default_context(cafile="/work/ca.pem"); '
                               'print(urllib.request.urlopen("https://allowed.test/", context=ctx, timeout=20)'
                               '.read().decode())'))
        self.assertEqual(cp.stdout, BODY + '\n')
        self.assert_journal(sid, since, 'allowed.test', 'allow', '^$')

        # Refused, each with its reason: 403 from the proxy, so curl fails the CONNECT.
        for url, host, reason in (
            ('https://denied.test/', 'denied.test', 'denied by EgressDeny'),
            ('https://other.test/', 'other.test', 'not in EgressAllow'),
            ('https://wild.test/', 'wild.test', 'not in EgressAllow'),            # *.x is not x
            ('https://allowed.test:22/', 'allowed.test', 'port not allowed'),
            ('https://loop.test/', 'loop.test', 'loopback'),
            ('https://meta.test/', 'meta.test', 'metadata'),
            ('https://192.0.2.1/', '192.0.2.1', 'IP address not in an address range'),
        ):
            with self.subTest(url=url):
                cp = self.curl(sid, url)
                self.assertNotEqual(cp.returncode, 0, f'{url} was not refused: {cp.stdout}')
                self.assertIn('403', cp.stderr)
                self.assert_journal(sid, since, host, 'deny', reason)

        # Plain HTTP is not relayed: 403, naming the option.
        cp = self.ok(self.exec(sid, 'curl', '-sS', '--max-time', '20', 'http://allowed.test/'))
        self.assertIn('plain HTTP is not relayed', cp.stdout)
        self.assertIn('EgressAllow=', cp.stdout)

        # A ClientHello for another name than the CONNECT's, and garbage instead of one.
        cp = self.ok(self.exec(sid, 'python3', '-c', SNI_CLIENT, 'other.test'))
        lines = cp.stdout.splitlines()
        self.assertEqual(lines[0], 'HTTP/1.1 200 Connection established')
        self.assertRegex(lines[1], r'^refused SSL')   # the proxy closed: no handshake
        self.assert_journal(sid, since, 'allowed.test', 'deny', 'TLS server name other.test is not the CONNECT host')
        cp = self.ok(self.exec(sid, 'python3', '-c', SNI_CLIENT, 'garbage'))
        self.assertEqual(cp.stdout.splitlines(), ['HTTP/1.1 200 Connection established', 'closed'])
        self.assert_journal(sid, since, 'allowed.test', 'deny', 'not a TLS ClientHello')
        cp = self.ok(self.exec(sid, 'python3', '-c', SNI_CLIENT, 'early'))
        self.assertEqual(cp.stdout.splitlines(), ['HTTP/1.1 200 Connection established', 'server record 16'])
        # And the right name still works on the same proxy.
        cp = self.ok(self.exec(sid, 'python3', '-c', SNI_CLIENT, 'allowed.test'))
        self.assertEqual(cp.stdout.splitlines()[-1], 'handshake')

    def test_header_injection(self):
        """Issue 32: a secret bound to allowed.test's x-api-key is added by the proxy, over
        TLS it ends with the sandbox's own CA and starts again to the server, verified; the
        sandbox holds none of it, and cannot choose the header's value."""
        key = 'sk-inject-7d1e5c3b9a2f4e6d'
        self.ok(self.ctl('secret', 'set', 'INJ_KEY', input=key))
        self.addCleanup(self.ctl, 'secret', 'remove', 'INJ_KEY')
        since = time.time()
        sid = self.create('--allow-host=allowed.test', '--allow-host=other.test', '--allow-host=nocert.test',
                          f'--allow-host={NET}.0/24',
                          '--secret=INJ_KEY@allowed.test:x-api-key', '--secret=INJ_KEY@nocert.test:x-api-key')
        before = len(self.recorded())

        # curl trusts the sandbox's CA through CURL_CA_BUNDLE; what it sends is replaced.
        cp = self.ok(self.exec(sid, 'curl', '-sS', '--max-time', '20', '-H', 'X-Api-Key: chosen-by-the-sandbox',
                               'https://allowed.test/record/1', 'https://allowed.test/record/2'))
        self.assertEqual(cp.stdout, 'recorded 0recorded 0')
        # Python's ssl (SSL_CERT_FILE): one connection, a chunked POST, a sized POST, a GET.
        script = (
            "import http.client, ssl\n"
            "c = http.client.HTTPSConnection('127.0.0.1', 3128, context=ssl.create_default_context(), timeout=20)\n"
            "c.set_tunnel('allowed.test', 443)\n"
            "def it():\n"
            "    yield b'abc'\n"
            "    yield b'defgh'\n"
            "c.request('POST', '/record/chunked', body=it(), encode_chunked=True)\n"
            "print(c.getresponse().read().decode())\n"
            "c.request('POST', '/record/sized', body=b'x' * 100000)\n"
            "print(c.getresponse().read().decode())\n"
            "c.request('GET', '/record/last')\n"
            "print(c.getresponse().read().decode())\n")
        cp = self.ok(self.exec(sid, 'python3', '-c', script))
        self.assertEqual(cp.stdout, 'recorded 8\nrecorded 100000\nrecorded 0\n')
        got = self.recorded()[before:]
        self.assertEqual([(r['method'], r['path'], r['key'], r['body']) for r in got],
                         [('GET', '/record/1', [key], 0), ('GET', '/record/2', [key], 0),
                          ('POST', '/record/chunked', [key], 8), ('POST', '/record/sized', [key], 100000),
                          ('GET', '/record/last', [key], 0)])

        # The sandbox saw a certificate of its own CA, not the server's.
        cp = self.ok(self.exec(sid, 'sh', '-c', 'echo | openssl s_client -connect allowed.test:443 -proxy '
                                                '127.0.0.1:3128 -servername allowed.test 2>/dev/null | '
                                                'openssl x509 -noout -issuer'))
        self.assertIn(f'sandboxd egress CA of sandbox {sid}', cp.stdout)
        # A host without a bound secret is relayed as before: the server's own certificate.
        cp = self.exec(sid, 'curl', '-sS', '--max-time', '20', 'https://other.test/')
        self.assertNotEqual(cp.returncode, 0, 'the test CA is not the sandbox\'s: other.test must not verify')
        # A server whose certificate does not name the host: 502, and no key sent.
        n = len(self.recorded())
        cp = self.exec(sid, 'curl', '-sS', '--max-time', '20', '-w', '%{http_code}', 'https://nocert.test/record/x')
        self.assertIn('502', cp.stdout)
        self.assertIn('does not verify', cp.stdout)
        self.assertEqual(len(self.recorded()), n)
        # A Host of another name (what a front that routes by Host would send elsewhere), and
        # an absolute target: 400, and no key sent.
        for extra in (['-H', 'Host: other.test'], ['--request-target', 'https://other.test/record/y']):
            cp = self.exec(sid, 'curl', '-sS', '--max-time', '20', '-w', '%{http_code}', *extra,
                           'https://allowed.test/record/fronted')
            self.assertIn('400', cp.stdout, extra)
            self.assertEqual(len(self.recorded()), n, extra)
        # Another host is refused, as without secrets.
        cp = self.exec(sid, 'curl', '-sS', '--max-time', '20', 'https://denied.test/')
        self.assertNotEqual(cp.returncode, 0)
        self.assert_journal(sid, since, 'allowed.test', 'allow', '')

        # One sandbox holds at most 64 of the proxy's 512 connections with a header added:
        # the 65th is refused, and the others' are left for the other sandboxes.
        hold = (
            "import socket, ssl\n"
            "ctx = ssl.create_default_context()\n"
            "held, refused = [], 0\n"
            "for i in range(65):\n"
            "    s = socket.create_connection(('127.0.0.1', 3128), timeout=20)\n"
            "    s.sendall(b'CONNECT allowed.test:443 HTTP/1.1\\r\\nHost: allowed.test:443\\r\\n\\r\\n')\n"
            "    r = b''\n"
            "    while not r.endswith(b'\\r\\n\\r\\n'):\n"
            "        r += s.recv(1)\n"
            "    try:\n"
            "        held.append(ctx.wrap_socket(s, server_hostname='allowed.test'))\n"
            "    except (ssl.SSLError, OSError):\n"
            "        refused += 1\n"
            "print(len(held), refused)\n")
        cp = self.ok(self.exec(sid, 'python3', '-c', hold))
        self.assertEqual(cp.stdout, '64 1\n')

        # Nowhere in the sandbox: its environment, its files, its processes' memory.
        self.assert_key_absent(sid, key)

    def test_usage_reported(self):
        """When the sandbox ends, what it moved through the proxy is in sandboxd's journal."""
        sid = self.egress_sandbox('--allow-host=allowed.test', f'--allow-host={NET}.0/24')
        cp = self.ok(self.curl(sid, 'https://allowed.test/big?n=300000', '-o', '/dev/null', '-w', '%{size_download}'))
        self.assertEqual(cp.stdout, '300000')
        self.ok(self.ctl('destroy', sid))
        deadline = time.monotonic() + 15
        while True:
            cp = S.run(['journalctl', '--no-pager', '-o', 'cat', '-u', 'sandboxd.service', f'SANDBOX_ID={sid}'])
            m = re.search(r'sent (\d+) bytes through the egress proxy and received (\d+); (\d+) connections allowed',
                          cp.stdout)
            if m or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        self.assertIsNotNone(m, cp.stdout)
        self.assertGreater(int(m.group(1)), 0)
        self.assertGreater(int(m.group(2)), 300000)
        self.assertEqual(int(m.group(3)), 1)

    def curl_until_it_works(self, sid, what):
        deadline = time.monotonic() + 20
        while True:
            cp = self.curl(sid, 'https://allowed.test/')
            if cp.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        self.assertEqual((cp.returncode, cp.stdout), (0, BODY), f'{what}: {cp.stderr}')

    def test_restarts(self):
        """The proxy restarted: sandboxd gives it every sandbox again. sandboxd restarted:
        it adopts the sandbox with its listener (from systemd's fd store), so a proxy that
        restarts after that gets it too."""
        sid = self.egress_sandbox('--allow-host=allowed.test', f'--allow-host={NET}.0/24')
        self.curl_until_it_works(sid, 'at first')
        self.ok(S.systemctl('restart', 'sandboxd-egress.service', timeout=60))
        self.curl_until_it_works(sid, 'after sandboxd-egress restarted')

        pid = S.show('sandboxd.service', 'MainPID')['MainPID']
        self.ok(S.systemctl('restart', 'sandboxd.service', timeout=90))
        deadline = time.monotonic() + 30
        while S.show('sandboxd.service', 'MainPID')['MainPID'] in ('0', pid) or \
                S.busctl('call', 'io.sandboxd.Sandbox1', '/io/sandboxd/Sandbox1', 'org.freedesktop.DBus.Peer',
                         'Ping').returncode != 0:
            self.assertLess(time.monotonic(), deadline, 'sandboxd did not come back')
            time.sleep(0.1)
        self.curl_until_it_works(sid, 'after sandboxd restarted')
        self.ok(S.systemctl('restart', 'sandboxd-egress.service', timeout=60))
        self.curl_until_it_works(sid, 'after sandboxd, then sandboxd-egress restarted')
        # A sandbox without the option has still nothing.
        other = self.create()
        cp = self.exec(other, 'curl', '-sS', '--max-time', '5', '-x', 'http://127.0.0.1:3128', 'https://allowed.test/')
        self.assertNotEqual(cp.returncode, 0)

    def test_secret_holders_undumpable(self):
        """sandboxd (the secret store's values) and sandboxd-egress (each sandbox's CA key,
        the secrets it injects) cannot be dumped: no core (LimitCORE=0) and undumpable
        (PR_SET_DUMPABLE 0, also under a unit that is not ours): their /proc/PID is
        root's, and root without CAP_SYS_PTRACE may not open their memory."""
        self.ok(S.systemctl('start', 'sandboxd-egress.service', timeout=60))
        self.assertTrue(harness.dumpable_control(S))
        daemon = harness.dump_guard(S, 'sandboxd.service')
        self.assertEqual((daemon['core'], daemon['memory_opens']), (('0', '0'), False), daemon)
        egress = harness.dump_guard(S, 'sandboxd-egress.service')
        self.assertNotEqual(egress['uid'], 0)
        self.assertEqual((egress['core'], egress['proc_owner']), (('0', '0'), 0), egress)
        # Without the unit's limit (as under a unit of someone else's): undumpable still.
        dropin = S.path('/run/systemd/system/sandboxd-egress.service.d/60-core.conf')
        with open(dropin, 'w') as f:
            f.write('[Service]\nLimitCORE=infinity\n')
        try:
            S.systemctl('daemon-reload', check=True)
            self.ok(S.systemctl('restart', 'sandboxd-egress.service', timeout=60))
            egress = harness.dump_guard(S, 'sandboxd-egress.service')
            self.assertEqual((egress['core'][1], egress['proc_owner']), ('unlimited', 0), egress)
        finally:
            os.unlink(dropin)
            S.systemctl('daemon-reload', check=True)
            self.ok(S.systemctl('restart', 'sandboxd-egress.service', timeout=60))

    def test_dns_failure_is_not_a_refusal(self):
        # Issue 27: a name the policy allows that does not resolve got 502 "cannot resolve
        # … (the sandbox's EgressAllow=/EgressDeny=)", which clients report as a refusal.
        since = time.time()
        sid = self.egress_sandbox('--allow-host=nx.invalid', '--deny-host=other.test')
        raw = ('import socket; s = socket.create_connection(("127.0.0.1", 3128), timeout=60); '
               's.sendall(b"CONNECT {0}:443 HTTP/1.1\\r\\nHost: {0}:443\\r\\n\\r\\n"); '
               'print(s.recv(4096).decode())')
        cp = self.ok(self.exec(sid, 'python3', '-c', raw.format('nx.invalid'), timeout=90))
        self.assertTrue(cp.stdout.startswith('HTTP/1.1 502'), cp.stdout)
        self.assertIn('DNS lookup failed', cp.stdout)
        self.assertIn('a network failure', cp.stdout)
        self.assertNotIn('EgressAllow', cp.stdout)
        self.assert_journal(sid, since, 'nx.invalid', 'fail', '^DNS lookup failed')
        # A refusal keeps its own answer, naming the option.
        cp = self.ok(self.exec(sid, 'python3', '-c', raw.format('other.test')))
        self.assertTrue(cp.stdout.startswith('HTTP/1.1 403'), cp.stdout)
        self.assertIn('EgressAllow=/EgressDeny=', cp.stdout)

    def test_private_address_needs_a_range(self):
        """A name that resolves to a private address is refused unless a range names it."""
        since = time.time()
        sid = self.egress_sandbox('--allow-host=allowed.test')
        cp = self.curl(sid, 'https://allowed.test/')
        self.assertNotEqual(cp.returncode, 0)
        self.assert_journal(sid, since, 'allowed.test', 'deny', 'private address')

    def test_host_own_address_refused(self):
        """A name resolving to an address of the proxy's host (the host side of the test's
        veth) is refused by the kernel's answer (RTN_LOCAL), although a range of
        EgressAllow= covers it; the server next to it, in the same range, is reached."""
        since = time.time()
        sid = self.egress_sandbox('--allow-host=self.test', '--allow-host=allowed.test', f'--allow-host={NET}.0/24')
        cp = self.curl(sid, 'https://self.test/')
        self.assertNotEqual(cp.returncode, 0, cp.stdout)
        self.assert_journal(sid, since, 'self.test', 'deny', 'address of this host')
        cp = self.ok(self.curl(sid, 'https://allowed.test/'))
        self.assertEqual(cp.stdout.strip(), BODY)

    def test_no_option_no_network(self):
        sid = self.create()
        cp = self.ok(self.exec(sid, 'sh', '-c', NETDEVS + '; echo "proxy=${HTTPS_PROXY-none}"'))
        self.assertEqual(cp.stdout, 'lo\nproxy=none\n')
        cp = self.exec(sid, 'python3', '-c',
                       'import socket\n'
                       'for a in (("%s", 443), ("127.0.0.1", 3128)):\n'
                       '    try:\n'
                       '        socket.create_connection(a, timeout=5); print("connected", a)\n'
                       '    except OSError as e:\n'
                       '        print("failed", e.errno)\n' % SERVER_ADDR)
        self.ok(cp)
        self.assertEqual([line.split()[0] for line in cp.stdout.splitlines()], ['failed', 'failed'])
        self.assertFalse(self.journal_entries(sid, time.time() - 600), 'a sandbox without egress has a proxy')

    def test_rules_are_checked(self):
        cp = self.ctl('create', '--allow-host=exa mple.com')
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn('EgressAllow', cp.stderr)
        cp = self.ctl('create', '--deny-host=*.')
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn('EgressDeny', cp.stderr)

    def test_varlink_and_idna(self):
        """The option over varlink; a Unicode name is matched in its A-label form."""
        replies, error, params = S.varlink_call('CreateSandbox', {
            'template': 'python', 'options': {'EgressAllow': ['BÜCHER.allowed.test', 'allowed.test']}})
        self.assertIsNone(error, params)
        sid = replies[0]['id']
        self.addCleanup(self.destroy_quietly, S, sid)
        replies, error, params = S.varlink_call('GetSandbox', {'id': sid})
        self.assertIsNone(error, params)
        self.assertEqual(replies[0]['sandbox']['egressAllow'], ['xn--bcher-kva.allowed.test', 'allowed.test'])
        self.assertEqual(replies[0]['sandbox']['egressDeny'], [])
        since = time.time()
        cp = self.exec(sid, 'curl', '-sS', '--max-time', '20', '-o', '/dev/null', '-w', '%{http_code}',
                       'https://xn--bcher-kva.allowed.test/')
        self.assertEqual(cp.stdout, '000')
        # Allowed by name, then refused for its address (no range here): the reason shows
        # the name passed the allowlist in its A-label form.
        self.assert_journal(sid, since, 'xn--bcher-kva.allowed.test', 'deny', 'private address')

    def test_docker_payload(self):
        """A Docker sandbox gets the same: its agent binds the listener in the container."""
        if S.docker_unavailable:
            if harness.ci():
                self.fail(f'Docker is not available in the test system: {S.docker_unavailable}')
            self.skipTest(f'Docker is not available: {S.docker_unavailable}')
        since = time.time()
        sid = self.create('--allow-host=allowed.test', template=harness.DOCKER_TEMPLATE)
        cp = self.ok(self.exec(sid, 'sh', '-c',
                               NETDEVS + '; echo "$HTTPS_PROXY"; '
                               'printf "CONNECT other.test:443 HTTP/1.1\\r\\n\\r\\n" | nc 127.0.0.1 3128'))
        lines = cp.stdout.splitlines()
        self.assertEqual(lines[:2], ['lo', 'http://127.0.0.1:3128'], cp.stdout)
        self.assertIn('HTTP/1.1 403 Forbidden', cp.stdout)
        self.assert_journal(sid, since, 'other.test', 'deny', 'not in EgressAllow')

    def test_abuse(self):
        """Many connections, slow headers and a 1 MB header line in one sandbox: memory
        stays bounded, and another sandbox's traffic flows meanwhile."""
        rules = ('--allow-host=allowed.test', f'--allow-host={NET}.0/24')
        noisy = self.egress_sandbox(*rules, '--tasks=64')
        quiet = self.egress_sandbox(*rules)
        proc = subprocess.Popen(
            S.wrap([S.paths.sandboxctl, 'exec', noisy, '--', 'python3', '-c', ABUSE_CLIENT, '1000', '6']),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            line = proc.stdout.readline()
            self.assertEqual(line.strip(), 'open 1000', proc.stderr.read() if not line else line)
            line = proc.stdout.readline()
            self.assertRegex(line.strip(), r'^big (HTTP/1.1 431|closed)')
            # Meanwhile: the other sandbox, and sandboxd.
            t0 = time.monotonic()
            cp = self.ok(self.curl(quiet, 'https://allowed.test/'))
            self.assertEqual(cp.stdout, BODY)
            self.assertLess(time.monotonic() - t0, 15)
            self.assert_exec_works(quiet, 'while another sandbox floods the proxy')
            mem = int(S.show('sandboxd-egress.service', 'MemoryCurrent')['MemoryCurrent'])
            harness.log(f'sandboxd-egress under abuse: {mem} bytes (MemoryCurrent); the other sandbox\'s '
                        f'request took {time.monotonic() - t0:.2f} s')
            self.assertLess(mem, 256 * 1024 * 1024, f'sandboxd-egress uses {mem} bytes')
            out, err = proc.communicate(timeout=60)
            self.assertIn('done', out, err)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.assertEqual(S.show('sandboxd-egress.service', 'ActiveState')['ActiveState'], 'active')
        cp = self.ok(self.curl(noisy, 'https://allowed.test/'))
        self.assertEqual(cp.stdout, BODY)


if __name__ == '__main__':
    unittest.main()
