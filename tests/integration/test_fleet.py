#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A fleet (docs/SCALE-OUT.md): three sandboxd nodes behind HAProxy, as the generated
configuration (sandboxctl fleet haproxy-config) runs it.

The shape. Each node is a namespace-booted systemd of its own (harness.System) with
sandboxd, its bridge (socket-activated, as installed) and the agent-check socket unit, in
a network namespace of its own: three whole systems rather than three sandboxd instances
in one, because sandboxd owns io.sandboxd.Sandbox1 on its system bus and /run/sandboxd,
and a node is a machine. The first node is the module's own system (run.py booted it);
two more are booted here, each with private_network=True. A network namespace of the
test's own ("the front") holds a Linux bridge, 10.77.0.1/24; a veth pair joins each
node's namespace to it (node N at 10.77.0.1N): a node is reachable only by that address.
HAProxy runs in the front's namespace with the generated haproxy.cfg, bound on
10.77.0.1:8080 with TLS (--cert: a certificate made here with openssl, which the clients
trust); this process opens its sockets to HAProxy and to the nodes from inside
the front's namespace (setns around socket()), and calls the REST API with them.

What users see, through the front: creates land on the node with room (agent-check's
weight), never on a draining node (agent-check's drain and the bridge's 503); every id
names its node and each later call (execute, files, result, status, delete) reaches it;
one tenant's token (the same token file on every node) works on every node; a node
killed answers 503 NodeUnavailable (HAProxy's error file) for its sandboxes, never
NoSuchSandbox, while creates go to the other nodes."""

import concurrent.futures
import contextlib
import ctypes
import json
import re
import os
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import unittest
import http.client

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, '..', 'security'))
import harness  # noqa: E402
import polkitutil  # noqa: E402
import secutil  # noqa: E402

FRONT = '10.77.0.1'
FRONT_PORT = 8080
CLIENT = '10.77.0.100'         # the client's own address on the test bridge
CLIENT2 = '10.77.0.101'        # another client's
CONNECTIONS_PER_IP = 6         # each bridge's ConnectionsPerIP=: per client, through the front too
FLEET_QUOTA = 30               # [TenantQuota] Sandboxes= of every tenant, the fleet's ([Fleet] QuotaInterval=)
QUOTA_INTERVAL = 1             # seconds
BRIDGE_PORT = 8347
AGENT_PORT = 8348
HTTP_RULES = 'io.sandboxd.Sandbox1-http.rules'

NODES = {}                     # number -> Node
DBS = {}                       # number -> GaleraNode
DB_WORKDIR = None
FRONT_NS = None                # Popen holding the front's network namespace
HAPROXY = None
CFG_DIR = None
TOKEN = None
QUOTA_TOKEN = None             # tenant "quota"'s, for the fleet's quota alone
TLS = None                     # the client's ssl.SSLContext for the front (it trusts the front's certificate)
_libc = ctypes.CDLL(None, use_errno=True)


def node_address(n):
    return f'10.77.0.1{n}'


def db_address(n):
    return f'10.77.0.2{n}'


class GaleraNode:
    """One mariadbd of the records' Galera cluster, in the front's network namespace at its
    own address (10.77.0.2N; the three share that namespace, each bound to its address:
    three more namespaces would buy nothing the addresses do not). rsync moves the state
    to a joiner (SST); rsync's daemon runs as nobody, hence the open modes."""

    PASSWORD = 'fleet-records'

    def __init__(self, n, workdir):
        self.n, self.dir = n, os.path.join(workdir, f'db{n}')
        self.socket = os.path.join(self.dir, 'sock')
        self.proc = None

    def install(self):
        os.makedirs(self.dir)
        cp = subprocess.run(['mariadb-install-db', '--no-defaults', '--user=root', f'--datadir={self.dir}/data',
                             '--skip-test-db'], capture_output=True, text=True, timeout=180)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        subprocess.run(['chmod', '-R', 'a+rwX', self.dir], check=True)

    def start(self, bootstrap=False):
        a = db_address(self.n)
        argv = ['nsenter', f'--net=/proc/{FRONT_NS.pid}/ns/net', '--',
                shutil.which('mariadbd') or '/usr/sbin/mariadbd', '--no-defaults', '--user=root',
                f'--datadir={self.dir}/data', f'--socket={self.socket}', f'--pid-file={self.dir}/pid',
                f'--bind-address={a}', '--port=3306', '--innodb-buffer-pool-size=32M', '--skip-name-resolve',
                '--wsrep-on=ON',
                '--wsrep-provider=/usr/lib/galera/libgalera_smm.so', '--wsrep-cluster-name=sandboxd-test',
                '--wsrep-cluster-address=gcomm://' + ','.join(db_address(i) for i in (1, 2, 3)),
                f'--wsrep-node-address={a}', '--binlog-format=ROW', '--innodb-autoinc-lock-mode=2',
                '--wsrep-sst-method=rsync', f'--wsrep-sst-receive-address={a}:4444',
                f'--wsrep-provider-options=gmcast.listen_addr=tcp://{a}:4567;ist.recv_addr={a}:4568']
        if bootstrap:
            argv.append('--wsrep-new-cluster')
        with open(os.path.join(self.dir, 'log'), 'ab') as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=harness._pdeathsig_kill)

    def ready(self):
        try:
            rows = self.sql("SHOW STATUS LIKE 'wsrep_ready'", db=None)
        except AssertionError:
            return False
        return rows == [['wsrep_ready', 'ON']]

    def sql(self, statement, db='sandboxd'):
        cmd = ['mariadb', '--no-defaults', '-S', self.socket, '-u', 'root', '--batch', '--skip-column-names',
               '-e', statement] + ([db] if db else [])
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if cp.returncode != 0:
            raise AssertionError(f'mariadb {statement!r} on db{self.n}: {cp.stderr}')
        return [line.split('\t') for line in cp.stdout.split('\n') if line]

    def kill(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=60)

    def log(self):
        with open(os.path.join(self.dir, 'log'), errors='replace') as f:
            return f.read()[-2000:]


class Node:
    def __init__(self, number, system, owned):
        self.number, self.S, self.owned = number, system, owned
        self.polkit = None

    @property
    def address(self):
        return node_address(self.number)


@contextlib.contextmanager
def in_netns(pid):
    """This thread in PID's network namespace for the block."""
    here = os.open('/proc/thread-self/ns/net', os.O_RDONLY | os.O_CLOEXEC)
    there = os.open(f'/proc/{pid}/ns/net', os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(there, 0x40000000) != 0:
            raise OSError(ctypes.get_errno(), 'setns')
        try:
            yield
        finally:
            if _libc.setns(here, 0x40000000) != 0:
                raise OSError(ctypes.get_errno(), 'setns back')
    finally:
        os.close(here)
        os.close(there)


def front_run(argv, **kw):
    return subprocess.run(['nsenter', f'--net=/proc/{FRONT_NS.pid}/ns/net', '--'] + argv,
                          capture_output=True, text=True, timeout=60, **kw)


def connect(host, port, timeout=30, source=CLIENT):
    """A connection from SOURCE (an address of the front's namespace); to the front, TLS
    (HAProxy ends it: --cert)."""
    with in_netns(FRONT_NS.pid):
        s = socket.create_connection((host, port), timeout=timeout, source_address=(source, 0))
    # http.client writes a request's headers and body apart: without this, Nagle and the
    # peer's delayed ACK hold the body some 40 ms on a kept-alive connection.
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if (host, port) == (FRONT, FRONT_PORT):
        s = TLS.wrap_socket(s, server_hostname=FRONT)
    return s


def request(method, path, body=None, host=FRONT, port=FRONT_PORT, token=None, timeout=60, headers=None,
            source=CLIENT):
    """(status, parsed JSON or bytes), from the client's address in the front's namespace."""
    h = {'Authorization': f'Bearer {token or TOKEN}', **(headers or {})}
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
        h['Content-Type'] = 'application/json'
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    c.sock = connect(host, port, timeout, source)
    try:
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
    finally:
        c.close()
    try:
        return r.status, json.loads(data)
    except ValueError:
        return r.status, data


def agent_line(n):
    with connect(node_address(n), AGENT_PORT, timeout=10) as s:
        data = b''
        while not data.endswith(b'\n'):
            chunk = s.recv(256)
            if not chunk:
                break
            data += chunk
    return data.decode()


def node_ids(node):
    cp = node.S.sandboxctl('list', '--json')
    if cp.returncode != 0:
        raise AssertionError(cp.stderr)
    return {s['id'] for s in json.loads(cp.stdout or '[]')}


def create(body=None):
    status, s = request('POST', '/api/v1/sessions', {'template': 'shell', **(body or {})})
    assert status == 201, (status, s)
    return s['id']


def wait_for(what, predicate, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f'timed out waiting for {what}')
        time.sleep(0.2)


def setup_node(node, token_files):
    S = node.S
    # The records go to the Galera cluster through the front's TCP listener (one database
    # node at a time, the next when it is gone), through each node's spool as always;
    # the tenants' quotas are the fleet's, each node's use shared through it.
    S.configure_daemon(f'[Fleet]\nNode={node.number}\nQuotaInterval={QUOTA_INTERVAL}\n'
                       f'[TenantQuota]\nSandboxes={FLEET_QUOTA}\n[Snapshots]\nDirectory={S.state_dir}/snapshots\n'
                       f'[Recording]\nMariaDBHost={FRONT}\nMariaDBPort=3306\nDatabase=sandboxd\nUser=sandboxd\n'
                       f'PasswordFile=/run/{S.name}-config/mariadb-password\n',
                       credentials={'mariadb-password': GaleraNode.PASSWORD + '\n'},
                       args=[f'--max-sandboxes={node.max}'])
    node.polkit = polkitutil.Polkit(S)
    node.polkit.install()
    with open(os.path.join(S.paths.source, 'polkit', HTTP_RULES)) as f:
        node.polkit.set_rules(f.read(), name=HTTP_RULES)
    with open(S.path(harness.HTTP_CONFIG), 'w') as f:
        f.write(f'[HTTP]\nTrustedProxy={FRONT}\nConnectionsPerIP={CONNECTIONS_PER_IP}\n')
    tokens = S.path(harness.HTTP_TOKENS_DIR)
    os.makedirs(tokens, exist_ok=True)
    for f in token_files:
        shutil.copy(f, tokens)
    unitdir = S.path('/run/systemd/system')
    with open(os.path.join(unitdir, 'sandboxd-http.socket.d', '60-fleet.conf'), 'w') as f:
        f.write(f'[Socket]\nListenStream=\nListenStream=0.0.0.0:{BRIDGE_PORT}\n'
                f'ListenStream={harness.HTTP_UNIX_SOCKET}\n')
    shutil.copy(os.path.join(S.paths.source, 'units', 'sandboxd-http-agent.socket'), unitdir)
    S.systemctl('daemon-reload', check=True)
    S.systemctl('restart', 'sandboxd-http.socket', check=True)
    S.systemctl('start', 'sandboxd-http-agent.socket', check=True)
    # Its leg of the test bridge: the node's end is eth0 in its namespace.
    ok = front_run(['ip', 'link', 'add', f'vn{node.number}', 'type', 'veth', 'peer', 'name', 'eth0',
                    'netns', str(S.pid)])
    assert ok.returncode == 0, ok.stderr
    for cmd in (['ip', 'link', 'set', f'vn{node.number}', 'master', 'br0'],
                ['ip', 'link', 'set', f'vn{node.number}', 'up']):
        ok = front_run(cmd)
        assert ok.returncode == 0, ok.stderr
    for cmd in (['ip', 'addr', 'add', f'{node.address}/24', 'dev', 'eth0'], ['ip', 'link', 'set', 'eth0', 'up'],
                ['ip', 'link', 'set', 'lo', 'up']):
        subprocess.run(['nsenter', f'--net=/proc/{S.pid}/ns/net', '--'] + cmd, check=True)


def setUpModule():
    global FRONT_NS, HAPROXY, CFG_DIR, TOKEN, DB_WORKDIR, TLS, QUOTA_TOKEN
    if not shutil.which('haproxy'):
        raise (unittest.SkipTest if not harness.ci() else AssertionError)('haproxy is not installed')
    first = secutil.setup_module()
    try:
        FRONT_NS = subprocess.Popen(['unshare', '--net', '--', 'sleep', 'infinity'],
                                    preexec_fn=harness._pdeathsig_kill)
        wait_for('the front namespace', lambda: os.readlink(f'/proc/{FRONT_NS.pid}/ns/net')
                 != os.readlink('/proc/self/ns/net') and
                 os.readlink(f'/proc/{FRONT_NS.pid}/exe').endswith('sleep'))
        for cmd in (['ip', 'link', 'set', 'lo', 'up'], ['ip', 'link', 'add', 'br0', 'type', 'bridge'],
                    ['ip', 'addr', 'add', f'{FRONT}/24', 'dev', 'br0'],
                    ['ip', 'addr', 'add', f'{CLIENT}/24', 'dev', 'br0'],
                    ['ip', 'addr', 'add', f'{CLIENT2}/24', 'dev', 'br0'], ['ip', 'link', 'set', 'br0', 'up']):
            ok = front_run(cmd)
            assert ok.returncode == 0, (cmd, ok.stderr)
        # The records' cluster: the first database node bootstraps it while the nodes boot.
        DB_WORKDIR = tempfile.mkdtemp(prefix='fleet-galera-', dir='/var/tmp')
        os.chmod(DB_WORKDIR, 0o755)
        for n in (1, 2, 3):
            DBS[n] = GaleraNode(n, DB_WORKDIR)
            DBS[n].install()
            front_run(['ip', 'addr', 'add', f'{db_address(n)}/24', 'dev', 'br0'])
        DBS[1].start(bootstrap=True)
        # Node 1 has room for 8 sandboxes, the others for 64: the agent checks weigh them so.
        NODES[1] = Node(1, first, False)
        for n in (2, 3):
            system = harness.System(private_network=True)
            NODES[n] = Node(n, system, True)
            atexit_teardown(system)
            system.boot()
            system.install()
            system.start_daemon()
        for n, node in NODES.items():
            node.max = 8 if n == 1 else 64
        wait_for('the first database node', DBS[1].ready, timeout=60)
        DBS[1].sql("CREATE DATABASE sandboxd; CREATE USER 'sandboxd'@'%' IDENTIFIED BY "
                   f"'{GaleraNode.PASSWORD}'; GRANT ALL ON sandboxd.* TO 'sandboxd'@'%'; "
                   "CREATE USER 'haproxy_check'@'%'", db=None)
        DBS[2].start()
        DBS[3].start()
        cp = first.run([first.paths.sandboxd_http, 'token', 'add', 'fleet', '--tenant=acme',
                        '--tokens-dir=/run/fleet-token'], check=True)
        TOKEN = cp.stdout.strip()
        cp = first.run([first.paths.sandboxd_http, 'token', 'add', 'quota', '--tenant=quota',
                        '--tokens-dir=/run/fleet-token'], check=True)
        QUOTA_TOKEN = cp.stdout.strip()
        for node in NODES.values():
            setup_node(node, [first.path(f'/run/fleet-token/{name}.conf') for name in ('fleet', 'quota')])
        CFG_DIR = tempfile.mkdtemp(prefix='fleet-front-', dir='/var/tmp')
        # TLS ends at the front (the README's shape): a self-signed certificate for its
        # address, which the clients here trust.
        pem = os.path.join(CFG_DIR, 'front.pem')
        cp = subprocess.run(['openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
                             '-nodes', '-days', '1', '-subj', '/CN=sandboxd-front', '-addext',
                             f'subjectAltName=IP:{FRONT}', '-keyout', pem + '.key', '-out', pem + '.crt'],
                            capture_output=True, text=True)
        assert cp.returncode == 0, cp.stderr
        with open(pem, 'w') as out:
            for part in ('.crt', '.key'):
                with open(pem + part) as f:
                    out.write(f.read())
        TLS = ssl.create_default_context(cafile=pem + '.crt')
        cp = subprocess.run([first.paths.sandboxctl, 'fleet', 'haproxy-config', '--dir', CFG_DIR, '--cert', pem,
                             '--bind', f'{FRONT}:{FRONT_PORT}', '--database-bind', f'{FRONT}:3306']
                            + [f'--database={db_address(n)}:3306' for n in DBS]
                            + [f'{n}={node.address}:{BRIDGE_PORT}' for n, node in NODES.items()],
                            capture_output=True, text=True)
        assert cp.returncode == 0, cp.stderr
        HAPROXY = subprocess.Popen(['nsenter', f'--net=/proc/{FRONT_NS.pid}/ns/net', '--',
                                    'haproxy', '-db', '-f', os.path.join(CFG_DIR, 'haproxy.cfg')],
                                   stdout=subprocess.DEVNULL, stderr=open(os.path.join(CFG_DIR, 'haproxy.log'), 'w'),
                                   preexec_fn=harness._pdeathsig_kill)
        # Up when every node's backend has its server up (the health checks).
        wait_for('HAProxy and the nodes', all_nodes_answer, timeout=60)
        wait_for('the database cluster', lambda: DBS[2].ready() and DBS[3].ready(), timeout=90)
    except BaseException:
        diagnose()
        tearDownModule()
        raise


def diagnose():
    for db in DBS.values():
        if os.path.exists(os.path.join(db.dir, 'log')):
            harness.log(f'db{db.n}: ' + db.log())
    if CFG_DIR and os.path.exists(os.path.join(CFG_DIR, 'haproxy.log')):
        with open(os.path.join(CFG_DIR, 'haproxy.log')) as f:
            harness.log('haproxy: ' + f.read()[-3000:])
    for n, node in NODES.items():
        if node.S.pid and os.path.exists(f'/proc/{node.S.pid}'):
            cp = subprocess.run(['nsenter', f'--net=/proc/{node.S.pid}/ns/net', '--', 'ss', '-ltn'],
                                capture_output=True, text=True)
            harness.log(f'node {n} listens:\n{cp.stdout}')
            harness.log(f'node {n} bridge: ' + node.S.systemctl('status', 'sandboxd-http.service', '-l').stdout[-2000:])


def all_nodes_answer():
    try:
        return all(request('GET', f'/api/v1/sessions/{"0" * 14}{n:02x}/status', timeout=5)[0] == 404 for n in NODES)
    except OSError:
        return False


_teardowns = []


def atexit_teardown(system):
    _teardowns.append(system)


def tearDownModule():
    if HAPROXY:
        HAPROXY.kill()
        HAPROXY.wait()
    for db in DBS.values():
        db.kill()
    if DB_WORKDIR:
        shutil.rmtree(DB_WORKDIR, ignore_errors=True)
    if FRONT_NS:
        FRONT_NS.kill()
        FRONT_NS.wait()
    for node in NODES.values():
        if node.owned:
            continue
        S = node.S
        S.systemctl('stop', 'sandboxd-http-agent.socket', 'sandboxd-http.socket', 'sandboxd-http.service')
        for p in (S.path('/run/systemd/system/sandboxd-http-agent.socket'),
                  S.path('/run/systemd/system/sandboxd-http.socket.d/60-fleet.conf'),
                  S.path(harness.HTTP_CONFIG), S.path('/run/sandboxd/drain')):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
        S.run(['rm', '-rf', '/run/fleet-token', harness.HTTP_TOKENS_DIR])
        subprocess.run(['nsenter', f'--net=/proc/{S.pid}/ns/net', '--', 'ip', 'link', 'del', 'eth0'],
                       stderr=subprocess.DEVNULL)
        S.systemctl('daemon-reload')
        if node.polkit:
            node.polkit.uninstall()
        S.configure_daemon(None)
    for system in _teardowns:
        for p in system.teardown():
            harness.log(f'PROBLEM: {p}')
    if CFG_DIR:
        shutil.rmtree(CFG_DIR, ignore_errors=True)
    secutil.teardown_module()


def node_of(sid):
    return NODES[int(sid[-2:], 16)]


def fleet_list():
    """sandboxctl fleet list --json over every node's bridge, with the tenant's token."""
    return front_run([NODES[1].S.paths.sandboxctl, 'fleet', 'list', '--json']
                     + [f'{n}={node.address}:{BRIDGE_PORT}' for n, node in NODES.items()],
                     env={**os.environ, 'SANDBOXD_TOKEN': TOKEN})


def front_reads_no_drain():
    """Whether HAProxy sees no node of its create backend draining (its stats socket)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(os.path.join(CFG_DIR, 'admin.sock'))
        s.sendall(b'show stat\n')
        out = b''
        while chunk := s.recv(65536):
            out += chunk
    rows = [line.split(',') for line in out.decode().splitlines() if line.startswith('create,node')]
    return bool(rows) and not any(r[17].startswith('DRAIN') for r in rows)


class Fleet(unittest.TestCase):
    def tearDown(self):
        for node in NODES.values():
            if node.S.pid and os.path.exists(f'/proc/{node.S.pid}'):
                node.S.run(['rm', '-f', '/run/sandboxd/drain'])
        # Whoever undrained a node (this or the test), the next test's creates need
        # HAProxy to have read it (agent-inter 1s).
        wait_for('the front reading every node ready', front_reads_no_drain, timeout=15)

    def destroy_all(self, ids):
        for sid in ids:
            request('DELETE', f'/api/v1/sessions/{sid}')

    def test_agent_check_answers(self):
        weight = re.fullmatch(r'up ready (\d+)%\n', agent_line(2))
        self.assertTrue(weight and 90 <= int(weight.group(1)) <= 100, agent_line(2))
        node = NODES[2]
        self.assertEqual(node.S.sandboxctl('fleet', 'drain').returncode, 0)
        self.assertEqual(agent_line(2), 'drain\n')
        self.assertEqual(node.S.sandboxctl('fleet', 'draining').returncode, 0)
        node.S.sandboxctl('fleet', 'undrain')
        self.assertEqual(agent_line(2), weight.group(0))

    def test_seed_003_flow_reaches_the_node_the_id_names(self):
        """create → execute → files → result → status → delete, all through the front;
        the sandboxes land on every node and each call reaches the one its id names."""
        ids = [create() for _ in range(6)]
        try:
            self.assertEqual({int(s[-2:], 16) for s in ids}, {1, 2, 3}, ids)
            # The fleet's list: each node's, each sandbox with its node.
            cp = fleet_list()
            self.assertEqual(cp.returncode, 0, cp.stderr)
            listed = {sb['id']: sb['node'] for sb in json.loads(cp.stdout)}
            self.assertEqual({sid: listed.get(sid) for sid in ids}, {sid: int(sid[-2:], 16) for sid in ids})
            for sid in ids:
                node = node_of(sid)
                self.assertIn(sid, node_ids(node))
                for other in NODES.values():
                    if other is not node:
                        self.assertNotIn(sid, node_ids(other))
                url = f'/api/v1/sessions/{sid}'
                status, res = request('PUT', f'{url}/files?path=in.txt', body=f'hello {sid}\n'.encode())
                self.assertEqual(status, 201, res)
                status, res = request('POST', f'{url}/execute', {'argv': ['sh', '-c', 'cat in.txt > out.txt; echo ok']})
                self.assertEqual((status, res['exit_code'], res['stdout']), (200, 0, 'ok\n'), res)
                status, data = request('GET', f'{url}/files?path=out.txt')
                self.assertEqual((status, data), (200, f'hello {sid}\n'.encode()))
                status, res = request('POST', f'{url}/execute', {'argv': ['sh', '-c', 'sleep 0.2; exit 3'],
                                                                  'background': True})
                self.assertEqual(status, 202, res)
                status, res = request('GET', f'{url}/result?execution={res["execution_id"]}&wait=10')
                self.assertEqual((status, res['exit_code']), (200, 3), res)
                status, res = request('GET', f'{url}/status')
                self.assertEqual(status, 200, res)
        finally:
            self.destroy_all(ids)
        for sid in ids:
            self.assertNotIn(sid, node_ids(node_of(sid)))
            status, res = request('GET', f'/api/v1/sessions/{sid}/status')
            self.assertEqual((status, res['error']['code']), (404, 'NoSuchSandbox'))

    def test_client_address_through_tls(self):
        """TLS ends at HAProxy; each bridge believes the X-Forwarded-For of the front
        (TrustedProxy=) and of no one else: the access log names the real client, a
        client's own X-Forwarded-For is not believed (through the front: HAProxy drops it;
        straight to a node: the node ignores it), and ConnectionsPerIP counts each client
        through the front apart (one at its limit gets 429, another still gets in)."""
        sid = create()
        node = node_of(sid)
        url = f'/api/v1/sessions/{sid}'
        spoof = {'X-Forwarded-For': '203.0.113.9'}

        def entries(since, route):
            cp = node.S.run(['journalctl', '--no-pager', '-o', 'json', f'--since=@{int(since) - 1}',
                             'MESSAGE_ID=671182baab724d8cbd304b7fffae00f9', f'HTTP_ROUTE={route}'], timeout=30)
            return [e for e in map(json.loads, filter(str.strip, cp.stdout.splitlines()))
                    if int(e['__REALTIME_TIMESTAMP']) >= since * 1e6]

        try:
            t0 = time.time()
            self.assertEqual(request('GET', f'{url}/status', headers=spoof)[0], 200)
            self.assertEqual(request('GET', f'{url}/status', headers=spoof, host=node.address, port=BRIDGE_PORT)[0],
                             200)
            self.assertEqual(request('GET', f'{url}/status', source=CLIENT2)[0], 200)
            got = wait_for('three access log entries', lambda: (lambda e: e if len(e) >= 3 else None)(
                entries(t0, '/api/v1/sessions/{}/status')))
            self.assertEqual(sorted(e['HTTP_CLIENT'] for e in got), sorted([CLIENT, CLIENT, CLIENT2]), got)
            # CONNECTIONS_PER_IP slow requests of CLIENT's through the front: its next is
            # refused, CLIENT2's is not (the front's own connections are not counted).
            t1 = time.time()
            with concurrent.futures.ThreadPoolExecutor(CONNECTIONS_PER_IP) as pool:
                slow = [pool.submit(request, 'POST', f'{url}/execute', {'argv': ['sleep', '3']})
                        for _ in range(CONNECTIONS_PER_IP)]
                time.sleep(1.5)
                status, res = request('GET', f'{url}/status')
                self.assertEqual((status, res['error']['code']), (429, 'TooManyRequests'), res)
                self.assertIn('client address', res['error']['message'])
                self.assertEqual(request('GET', f'{url}/status', source=CLIENT2)[0], 200)
                self.assertEqual([f.result()[0] for f in slow], [200] * CONNECTIONS_PER_IP)
            got = entries(t1, '/api/v1/sessions/{}/status')
            self.assertEqual(sorted((e['HTTP_CLIENT'], e['HTTP_STATUS']) for e in got),
                             [(CLIENT, '429'), (CLIENT2, '200')], got)
        finally:
            self.destroy_all([sid])

    def test_creates_go_where_there_is_room(self):
        """Node 1 full (8 of 8, its warm pool's too): its agent answers 0%, and HAProxy
        sends no create there."""
        node = NODES[1]
        held = []
        try:
            for _ in range(node.max):
                cp = node.S.sandboxctl('create')
                if cp.returncode != 0:
                    self.assertIn(f'The maximum of {node.max} sandboxes is reached', cp.stderr)
                    break
                held.append(cp.stdout.strip())
            self.assertEqual(agent_line(1), 'up ready 0%\n')
            time.sleep(2.5)     # agent-inter 1s: HAProxy has read it
            ids = [create() for _ in range(6)]
            self.destroy_all(ids)
            self.assertNotIn(1, {int(s[-2:], 16) for s in ids}, ids)
        finally:
            for sid in held:
                node.S.sandboxctl('destroy', sid)

    def test_drain_sends_creates_elsewhere(self):
        node = NODES[2]
        node.S.sandboxctl('fleet', 'drain')
        # Straight to the node: refused, as the front is told to go on to the next.
        status, res = request('POST', '/api/v1/sessions', {'template': 'shell'}, host=node.address, port=BRIDGE_PORT)
        self.assertEqual((status, res['error']['code']), (503, 'NodeUnavailable'), res)
        ids = [create() for _ in range(6)]
        self.destroy_all(ids)
        self.assertNotIn(2, {int(s[-2:], 16) for s in ids}, ids)

    def test_measure(self):
        """The figures of bench/RESULTS.md (Fleet): creates per second through the front
        with 1, 2 and 3 nodes taking them (the others draining), 4 clients at once; an
        exec's latency straight to its node's bridge and through the front."""
        rates = {}
        # Node 1 (room for 8) last: 12 creates fit on node 2 alone.
        for taking in ({2}, {2, 3}, {1, 2, 3}):
            n_nodes = len(taking)
            for n, node in NODES.items():
                node.S.run(['rm', '-f', '/run/sandboxd/drain'] if n in taking else
                           ['touch', '/run/sandboxd/drain'])
            time.sleep(2.5)
            start = time.monotonic()
            ids = []
            try:
                with concurrent.futures.ThreadPoolExecutor(4) as pool:
                    for sid in pool.map(lambda _: request('POST', '/api/v1/sessions', {'template': 'shell'}),
                                        range(12)):
                        if sid[0] == 201:
                            ids.append(sid[1]['id'])
                rates[n_nodes] = len(ids) / (time.monotonic() - start)
                self.assertEqual(len(ids), 12)
                self.assertTrue({int(s[-2:], 16) for s in ids} <= taking, ids)
            finally:
                self.destroy_all(ids)
        sid = create()
        try:
            url = f'/api/v1/sessions/{sid}/execute'
            node = node_of(sid)
            lat = {}
            body = json.dumps({'argv': ['true']})
            headers = {'Authorization': f'Bearer {TOKEN}', 'Content-Type': 'application/json'}
            for name, (host, port) in (('direct', (node.address, BRIDGE_PORT)), ('front', (FRONT, FRONT_PORT))):
                # One kept-alive connection each: the figure is the proxy's, not TCP's setup.
                c = http.client.HTTPConnection(host, port, timeout=30)
                c.sock = connect(host, port)
                times = []
                for _ in range(40):
                    t = time.monotonic()
                    c.request('POST', url, body=body, headers=headers)
                    r = c.getresponse()
                    res = json.loads(r.read())
                    times.append(time.monotonic() - t)
                    self.assertEqual(r.status, 200, res)
                c.close()
                lat[name] = statistics.median(times) * 1000
        finally:
            self.destroy_all([sid])
        harness.log('fleet: creates/s through the front, 4 clients: ' +
                    ', '.join(f'{n} node(s) {r:.1f}' for n, r in rates.items()) +
                    f'; exec median direct {lat["direct"]:.2f} ms, through HAProxy (TLS) {lat["front"]:.2f} ms')

    def test_mcp_through_the_front(self):
        """/mcp through the front: sandbox_create lands by weight, and a tool call naming a
        sandbox (its arguments' sandbox_id) reaches the node that holds it."""
        def call(i, name, **arguments):
            status, res = request('POST', '/mcp', json.dumps({'jsonrpc': '2.0', 'id': i, 'method': 'tools/call',
                                                              'params': {'name': name, 'arguments': arguments}}),
                                  headers={'Content-Type': 'application/json',
                                           'Accept': 'application/json, text/event-stream'})
            self.assertEqual(status, 200, res)
            self.assertNotIn('error', res, res)
            self.assertFalse(res['result'].get('isError'), res)
            return res['result']

        ids = []
        try:
            for i in range(4):
                out = call(i, 'sandbox_create', template='shell')
                ids.append(out['structuredContent']['sandbox']['id'])
            self.assertEqual({int(s[-2:], 16) for s in ids} & {1, 2, 3}, {int(s[-2:], 16) for s in ids})
            self.assertGreater(len({s[-2:] for s in ids}), 1, ids)
            for i, sid in enumerate(ids):
                out = call(10 + i, 'run_command', sandbox_id=sid, command=f'echo {sid}')
                self.assertIn(sid, json.dumps(out))
        finally:
            self.destroy_all(ids)

    def test_e2b_through_the_front(self):
        """E2B's control plane (/sandboxes) and sandbox plane (E2b-Sandbox-Id) through the
        front: creates by weight, the rest to the node the id names."""
        ids = []
        try:
            for _ in range(4):
                status, res = request('POST', '/sandboxes', {'templateID': 'base', 'timeout': 300})
                self.assertEqual(status, 201, res)
                ids.append(res['sandboxID'])
            self.assertGreater(len({s[-2:] for s in ids}), 1, ids)
            for sid in ids:
                status, res = request('GET', f'/sandboxes/{sid}')
                self.assertEqual((status, res.get('sandboxID')), (200, sid), res)
                status, res = request('POST', '/filesystem.Filesystem/MakeDir', {'path': f'/home/user/{sid}'},
                                      headers={'E2b-Sandbox-Id': sid, 'E2b-Sandbox-Port': '49983'})
                self.assertEqual(status, 200, res)
                status, res = request('POST', '/filesystem.Filesystem/ListDir', {'path': '/home/user'},
                                      headers={'E2b-Sandbox-Id': sid, 'E2b-Sandbox-Port': '49983'})
                self.assertEqual(status, 200, res)
                self.assertIn(sid, json.dumps(res))
        finally:
            for sid in ids:
                request('DELETE', f'/sandboxes/{sid}')

    def test_ids_map_comes_first(self):
        """ids.map (ids that name no node, or moved) wins over the id's digits, and HAProxy's
        runtime API changes it without a reload."""
        def admin(command):
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(os.path.join(CFG_DIR, 'admin.sock'))
                s.sendall(command.encode() + b'\n')
                out = b''
                while chunk := s.recv(4096):
                    out += chunk
            return out.decode()

        sid = create()
        elsewhere = f'node{(int(sid[-2:], 16) % 3) + 1:02x}'
        ids_map = os.path.join(CFG_DIR, 'ids.map')
        try:
            self.assertEqual(request('GET', f'/api/v1/sessions/{sid}/status')[0], 200)
            admin(f'add map {ids_map} {sid} {elsewhere}')
            status, res = request('GET', f'/api/v1/sessions/{sid}/status')
            self.assertEqual((status, res['error']['code']), (404, 'NoSuchSandbox'), res)
            admin(f'del map {ids_map} {sid}')
            self.assertEqual(request('GET', f'/api/v1/sessions/{sid}/status')[0], 200)
        finally:
            self.destroy_all([sid])

    def test_records_fleet_wide_and_a_database_node_lost(self):
        """Every node's executions reach the Galera cluster and are read from any database
        node; the database node that takes the writes is killed and the records go on
        (the spools, HAProxy's next server), none lost, none doubled."""
        ids = [create() for _ in range(6)]
        counts = {}

        def run(sid, k):
            for _ in range(k):
                status, res = request('POST', f'/api/v1/sessions/{sid}/execute', {'argv': ['true']})
                self.assertEqual(status, 200, res)
            counts[sid] = counts.get(sid, 0) + k

        def recorded(db):
            try:
                rows = db.sql('SELECT sandbox_id, COUNT(*), COUNT(DISTINCT exec_id) FROM executions WHERE sandbox_id IN ('
                              + ','.join(f"'{sid}'" for sid in ids) + ') GROUP BY sandbox_id')
            except AssertionError as e:
                harness.log(str(e).strip().splitlines()[-1])
                return None     # no table yet: no recorder has reached the cluster
            got = {r[0]: (int(r[1]), int(r[2])) for r in rows}
            return got if all(got.get(sid) == (k, k) for sid, k in counts.items()) else None

        try:
            self.assertEqual({int(s[-2:], 16) for s in ids}, {1, 2, 3}, ids)
            for sid in ids:
                run(sid, 2)
            try:
                for db in (DBS[3], DBS[2], DBS[1]):
                    wait_for(f'the records on db{db.n}', lambda: recorded(db), timeout=40)
            except AssertionError:
                harness.log('node 1: ' + '\n'.join(line for line in NODES[1].S.journal().splitlines()
                                                    if 'MariaDB' in line or 'ecord' in line)[-3000:])
                raise
            # Any node's operator reads the fleet's history: node 2's sandboxctl history shows
            # what ran on node 1 (from the database), and node 2's own.
            for sid in ids:
                cp = NODES[2].S.sandboxctl('history', sid, '--json')
                self.assertEqual(cp.returncode, 0, cp.stderr)
                got = json.loads(cp.stdout)
                self.assertEqual((len(got), len({e['exec'] for e in got})), (counts[sid], counts[sid]), (sid, got))
                self.assertEqual({e['sandbox'] for e in got}, {sid})
            DBS[1].kill()
            for sid in ids:
                run(sid, 3)
            for db in (DBS[2], DBS[3]):
                wait_for(f'the records on db{db.n} without db1', lambda: recorded(db), timeout=60)
            self.assertEqual(DBS[2].sql("SHOW STATUS LIKE 'wsrep_cluster_size'", db=None),
                             [['wsrep_cluster_size', '2']])
        finally:
            self.destroy_all(ids)

    def test_move_a_hibernated_sandbox(self):
        """A sandbox with 100 MiB of files hibernated on node 2, moved to node 3 with the
        documented pipe (curl from node 2's export into node 3's import), woken there under
        an id naming node 3, its file intact; the source removed after the import
        answered. The move's time is bench/RESULTS.md's."""
        src, dst = NODES[2], NODES[3]
        status, res = request('POST', '/api/v1/sessions', {'template': 'shell', 'name': 'mover', 'storage': 'tmpfs',
                                                           'limits': {'memory_max': 512 << 20, 'disk_max': 256 << 20}},
                              host=src.address, port=BRIDGE_PORT)
        self.assertEqual(status, 201, res)
        sid = res['id']
        self.assertEqual(int(sid[-2:], 16), 2, sid)
        moved = None
        try:
            status, res = request('POST', f'/api/v1/sessions/{sid}/execute',
                                  {'argv': ['sh', '-c', 'head -c 104857600 /dev/urandom > big && sha256sum big']})
            self.assertEqual((status, res['exit_code']), (200, 0), res)
            digest = res['stdout'].split()[0]
            status, snap = request('POST', f'/api/v1/sessions/{sid}/hibernate', {})
            self.assertEqual((status, snap.get('hibernated'), snap.get('source')), (200, True, sid), snap)
            self.assertTrue(snap['id'], snap)      # in memory: an archive to move
            # Someone else's token moves nothing.
            status, res = request('GET', f'/api/v1/sessions/{sid}/export', host=src.address, port=BRIDGE_PORT,
                                  token='not-a-token')
            self.assertEqual(status, 401, res)
            auth = f'Authorization: Bearer {TOKEN}'
            start = time.monotonic()
            cp = front_run(['bash', '-c', 'set -o pipefail; '
                            f'curl -sSf -H "{auth}" http://{src.address}:{BRIDGE_PORT}/api/v1/sessions/{sid}/export | '
                            f'curl -sSf -H "{auth}" -H "Content-Type: application/vnd.sandboxd.move" -T - '
                            f'-X POST http://{dst.address}:{BRIDGE_PORT}/api/v1/sessions/import'])
            took = time.monotonic() - start
            self.assertEqual(cp.returncode, 0, cp.stderr)
            res = json.loads(cp.stdout)
            moved = res['id']
            self.assertEqual((int(moved[-2:], 16), res['hibernated']), (3, True), res)
            self.assertGreater(res['bytes'], 100 << 20)
            # The source goes only now that the import answered.
            status, res = request('DELETE', f'/api/v1/snapshots/{snap["id"]}', host=src.address, port=BRIDGE_PORT)
            self.assertEqual(status, 204, res)
            status, woke = request('POST', f'/api/v1/sessions/{moved}/wake', {})
            self.assertEqual((status, woke['id'], woke['name']), (200, moved, 'mover'), woke)
            self.assertIn(moved, node_ids(dst))
            status, res = request('POST', f'/api/v1/sessions/{moved}/execute', {'argv': ['sha256sum', 'big']})
            self.assertEqual((status, res['exit_code'], res['stdout'].split()[0]), (200, 0, digest), res)
            # Gone from node 2: neither a sandbox nor a hibernated one.
            status, res = request('POST', f'/api/v1/sessions/{sid}/wake', {}, host=src.address, port=BRIDGE_PORT)
            self.assertEqual((status, res['error']['code']), (404, 'NoSuchSandbox'), res)
            harness.log(f'fleet: move of a hibernated sandbox with 100 MiB of files, node to node: {took:.2f} s '
                        f'({(100 / took):.0f} MiB/s)')
            # A sandbox hibernated on disk (its workspace kept, no archive): the agent archives
            # the workspace as it is read, a link the sandbox planted stored as the link.
            status, res = request('POST', '/api/v1/sessions', {'template': 'shell'}, host=src.address,
                                  port=BRIDGE_PORT)
            self.assertEqual(status, 201, res)
            disk = res['id']
            status, res = request('POST', f'/api/v1/sessions/{disk}/execute',
                                  {'argv': ['sh', '-c', 'mkdir -p d && echo on-disk > d/f && ln -s /etc/shadow d/l && '
                                            'echo t > /tmp/t']}, host=src.address, port=BRIDGE_PORT)
            self.assertEqual((status, res['exit_code']), (200, 0), res)
            status, res = request('POST', f'/api/v1/sessions/{disk}/hibernate', {})
            self.assertEqual((status, res.get('id')), (200, ''), res)
            cp = front_run(['bash', '-c', 'set -o pipefail; '
                            f'curl -sSf -H "{auth}" http://{src.address}:{BRIDGE_PORT}/api/v1/sessions/{disk}/export | '
                            f'curl -sSf -H "{auth}" -T - -X POST http://{dst.address}:{BRIDGE_PORT}/api/v1/sessions/import'])
            self.assertEqual(cp.returncode, 0, cp.stderr)
            res = json.loads(cp.stdout)
            self.assertEqual(int(res['id'][-2:], 16), 3, res)
            disk_moved = res['id']
            status, res = request('DELETE', f'/api/v1/sessions/{disk}', host=src.address, port=BRIDGE_PORT)
            self.assertEqual(status, 204, res)
            status, res = request('POST', f'/api/v1/sessions/{disk_moved}/wake', {})
            self.assertEqual((status, res.get('id')), (200, disk_moved), res)
            status, res = request('POST', f'/api/v1/sessions/{disk_moved}/execute',
                                  {'argv': ['sh', '-c', 'cat d/f /tmp/t; readlink d/l']})
            self.assertEqual((status, res['exit_code'], res['stdout']), (200, 0, 'on-disk\nt\n/etc/shadow\n'), res)
            request('DELETE', f'/api/v1/sessions/{disk_moved}')
            # What is no export's stream makes nothing on the node.
            before = request('GET', '/api/v1/snapshots', host=dst.address, port=BRIDGE_PORT)[1]
            status, res = request('POST', '/api/v1/sessions/import', b'{"id": "x"}\n' + b'\0' * 4096,
                                  host=dst.address, port=BRIDGE_PORT)
            self.assertEqual((status, res['error']['code']), (400, 'InvalidOption'), res)
            self.assertEqual(request('GET', '/api/v1/snapshots', host=dst.address, port=BRIDGE_PORT)[1], before)
        finally:
            if moved:
                request('DELETE', f'/api/v1/sessions/{moved}')
            request('DELETE', f'/api/v1/sessions/{sid}', host=src.address, port=BRIDGE_PORT)

    def test_move_with_sandboxctl(self):
        """sandboxctl fleet move on node 2: a running sandbox on disk with 100 MiB of files
        hibernated (its workspace kept), streamed from node 2's bridge into node 3's, the
        source removed; its new id routed by the front to node 3, the file intact. Then
        drain --move-to on node 1: the persistent sandboxes (running, and hibernated to an
        archive) move to node 2, the ephemeral one stays to finish. The move's time is
        bench/RESULTS.md's."""
        env = {'SANDBOXD_TOKEN': TOKEN}

        def on_node(node, *argv, timeout=300):
            return subprocess.run(['nsenter', '-t', str(node.S.pid), '-m', '-p', '-n', '--', node.S.paths.sandboxctl,
                                   'fleet'] + list(argv), capture_output=True, text=True, timeout=timeout,
                                  env=dict(os.environ, **env))

        src, dst = NODES[2], NODES[3]
        status, res = request('POST', '/api/v1/sessions', {'template': 'shell', 'name': 'disk-mover',
                                                           'limits': {'disk_max': 256 << 20}},
                              host=src.address, port=BRIDGE_PORT)
        self.assertEqual(status, 201, res)
        sid, moved, ids = res['id'], None, []
        try:
            status, res = request('POST', f'/api/v1/sessions/{sid}/execute',
                                  {'argv': ['sh', '-c', 'head -c 104857600 /dev/urandom > big && sha256sum big']})
            self.assertEqual((status, res['exit_code']), (200, 0), res)
            digest = res['stdout'].split()[0]
            # A destination that is no bridge: the move fails and the source stays, running.
            cp = on_node(src, 'move', sid, '--to', f'http://{dst.address}:{AGENT_PORT + 100}')
            self.assertNotEqual(cp.returncode, 0, cp.stdout)
            self.assertIn('stays where it is', cp.stderr)
            # It stays hibernated on disk. A Wake ends an export under way: the stream (its
            # archive made as it is read, chunked) breaks off, so no import could commit it.
            c = http.client.HTTPConnection(src.address, BRIDGE_PORT, timeout=60)
            c.sock = connect(src.address, BRIDGE_PORT)
            c.request('GET', f'/api/v1/sessions/{sid}/export', headers={'Authorization': f'Bearer {TOKEN}'})
            r = c.getresponse()
            self.assertEqual((r.status, r.getheader('Transfer-Encoding')), (200, 'chunked'))
            self.assertIn(f'"source":"{sid}"', r.readline().decode().replace(' ', ''))
            status, res = request('POST', f'/api/v1/sessions/{sid}/wake', {})
            self.assertEqual((status, res.get('id')), (200, sid), res)
            with self.assertRaises(http.client.IncompleteRead):
                r.read()
            c.close()
            start = time.monotonic()
            cp = on_node(src, 'move', sid, '--to', f'http://{dst.address}:{BRIDGE_PORT}')
            took = time.monotonic() - start
            self.assertEqual(cp.returncode, 0, cp.stderr)
            moved = cp.stdout.strip()
            self.assertEqual(int(moved[-2:], 16), 3, cp.stdout)
            self.assertNotIn(sid, node_ids(src))
            self.assertEqual(request('GET', f'/api/v1/sessions/{sid}/status', host=src.address,
                                     port=BRIDGE_PORT)[0], 404)
            status, woke = request('POST', f'/api/v1/sessions/{moved}/wake', {})
            self.assertEqual((status, woke['id'], woke['name']), (200, moved, 'disk-mover'), woke)
            status, res = request('POST', f'/api/v1/sessions/{moved}/execute', {'argv': ['sha256sum', 'big']})
            self.assertEqual((status, res['exit_code'], res['stdout'].split()[0]), (200, 0, digest), res)
            harness.log(f'fleet: sandboxctl fleet move of a sandbox on disk with 100 MiB of files (hibernate, '
                        f'stream, remove the source): {took:.2f} s')

            # drain --move-to: node 1's persistent sandboxes go to node 2.
            first = NODES[1]
            for body in ({'name': 'drained-running'}, {'name': 'drained-archive', 'storage': 'tmpfs'},
                         {'mode': 'ephemeral'}):
                status, res = request('POST', '/api/v1/sessions', {'template': 'shell', **body},
                                      host=first.address, port=BRIDGE_PORT)
                self.assertEqual(status, 201, res)
                ids.append(res['id'])
                if 'mode' not in body:
                    status, res = request('POST', f'/api/v1/sessions/{ids[-1]}/execute',
                                          {'argv': ['sh', '-c', f'echo {body["name"]} > f']})
                    self.assertEqual((status, res['exit_code']), (200, 0), res)
            status, res = request('POST', f'/api/v1/sessions/{ids[1]}/hibernate', {})
            self.assertEqual((status, bool(res.get('id'))), (200, True), res)
            cp = on_node(first, 'drain', '--move-to', f'http://{src.address}:{BRIDGE_PORT}')
            self.assertEqual(cp.returncode, 0, cp.stderr)
            self.assertEqual(first.S.sandboxctl('fleet', 'draining').stdout.strip(), 'draining')
            pairs = dict(line.split() for line in cp.stdout.splitlines())
            self.assertEqual(set(pairs), set(ids[:2]), cp.stdout + cp.stderr)
            self.assertIn('1 ephemeral left', cp.stderr)
            self.assertEqual(node_ids(first) & set(ids), {ids[2]})
            for old, name in zip(ids[:2], ('drained-running', 'drained-archive')):
                new = pairs[old]
                ids.append(new)
                self.assertEqual(int(new[-2:], 16), 2, new)
                status, res = request('POST', f'/api/v1/sessions/{new}/wake', {})
                self.assertEqual(status, 200, res)
                status, res = request('POST', f'/api/v1/sessions/{new}/execute', {'argv': ['cat', 'f']})
                self.assertEqual((status, res.get('stdout')), (200, name + '\n'), res)
        finally:
            NODES[1].S.sandboxctl('fleet', 'undrain')
            for i in ([moved] if moved else []) + ids:
                request('DELETE', f'/api/v1/sessions/{i}')
            request('DELETE', f'/api/v1/sessions/{sid}', host=src.address, port=BRIDGE_PORT)

    def test_tenant_quota_across_the_fleet(self):
        """[TenantQuota] Sandboxes=30 with [Fleet] QuotaInterval=1s on every node: tenant
        "quota" fills it over nodes 2 and 3 (neither holds 30 alone), and then every node
        refuses its next create with QuotaExceeded, within the documented lag (two
        intervals and a round trip to the database); GetQuota on any node shows the
        fleet's use."""
        ids = []

        def use_on(node):
            status, res = request('GET', '/api/v1/quota', host=node.address, port=BRIDGE_PORT, token=QUOTA_TOKEN)
            self.assertEqual(status, 200, res)
            return {q['what']: q for q in res['quota']}['Sandboxes']

        try:
            # Filled on nodes 2 and 3 (node 1, room for 8, drained meanwhile): node 1 holds
            # none of the tenant's and must still refuse.
            NODES[1].S.sandboxctl('fleet', 'drain')
            time.sleep(2.5)     # agent-inter 1s: HAProxy has read "drain"
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                for status, res in pool.map(lambda _: request('POST', '/api/v1/sessions', {'template': 'shell'},
                                                              token=QUOTA_TOKEN), range(FLEET_QUOTA)):
                    self.assertEqual(status, 201, res)
                    ids.append(res['id'])
            filled = time.monotonic()
            NODES[1].S.sandboxctl('fleet', 'undrain')
            per_node = {n: sum(1 for s in ids if int(s[-2:], 16) == n) for n in NODES}
            self.assertGreater(sum(1 for k in per_node.values() if k), 1, per_node)
            try:
                for n, node in NODES.items():
                    wait_for(f'node {n} counting the fleet', lambda: use_on(node)['use'] == FLEET_QUOTA, timeout=10)
            except AssertionError:
                for n, node in NODES.items():
                    cp = node.S.run(['journalctl', '-u', 'sandboxd.service', '--no-pager', '-o', 'cat'])
                    harness.log(f'node {n}: {use_on(node)}; ' + '\n'.join(
                        line for line in cp.stdout.splitlines() if re.search('leet|MariaDB|Record|Started|Starting', line))[-3000:])
                harness.log('fleet_usage: ' + repr(DBS[2].sql('SELECT * FROM fleet_usage')))
                raise
            lag = time.monotonic() - filled
            self.assertEqual(use_on(NODES[1])['limit'], FLEET_QUOTA)
            for n, node in NODES.items():
                status, res = request('POST', '/api/v1/sessions', {'template': 'shell'}, host=node.address,
                                      port=BRIDGE_PORT, token=QUOTA_TOKEN)
                self.assertEqual((status, res['error']['code']), (403, 'QuotaExceeded'), (n, per_node, res))
            status, res = request('POST', '/api/v1/sessions', {'template': 'shell'}, token=QUOTA_TOKEN)
            self.assertEqual((status, res['error']['code']), (403, 'QuotaExceeded'), res)
            harness.log(f'fleet: a tenant at its fleet quota ({per_node} on nodes 1-3) seen by every node '
                        f'{lag:.2f} s after its last create (QuotaInterval={QUOTA_INTERVAL}s)')
            self.assertLessEqual(lag, 2 * QUOTA_INTERVAL + 1.5)
        finally:
            for sid in ids:
                request('DELETE', f'/api/v1/sessions/{sid}', token=QUOTA_TOKEN)

    def test_zz_node_killed(self):
        """Node 3 dies (its systemd killed: every process of it and its network namespace
        gone): its sandboxes answer 503 NodeUnavailable, not NoSuchSandbox; creates go to
        the nodes that are left; a sandbox of it is restored on node 2 from the copy
        sandboxctl fleet backup took before (a snapshot of it running, exported)."""
        NODES[1].S.sandboxctl('fleet', 'drain')
        NODES[2].S.sandboxctl('fleet', 'drain')
        time.sleep(2.5)
        sid = create()
        NODES[1].S.sandboxctl('fleet', 'undrain')
        NODES[2].S.sandboxctl('fleet', 'undrain')
        self.assertEqual(sid[-2:], '03')
        # Its last copy, taken while it runs (a snapshot exported, then removed): what
        # sandboxctl fleet backup keeps off the node, from any host that reaches its bridge.
        status, res = request('POST', f'/api/v1/sessions/{sid}/execute',
                              {'argv': ['sh', '-c', 'echo before-the-end > kept']})
        self.assertEqual((status, res['exit_code']), (200, 0), res)
        backups = os.path.join(CFG_DIR, 'backups')
        ctl = [NODES[1].S.paths.sandboxctl, 'fleet']
        env = dict(os.environ, SANDBOXD_TOKEN=TOKEN)
        cp = front_run(ctl + ['backup', '--dir', backups, '--from', f'http://{node_address(3)}:{BRIDGE_PORT}'],
                       env=env)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        saved = dict(line.split() for line in cp.stdout.splitlines())
        self.assertIn(sid, saved, cp.stdout)
        self.assertEqual(request('GET', f'/api/v1/sessions/{sid}')[1].get('state'), 'running')
        dead = NODES[3]
        os.kill(dead.S.pid, signal.SIGKILL)
        status, res = wait_for('503 from the front', lambda: (lambda r: r if r[0] == 503 else None)(
            request('GET', f'/api/v1/sessions/{sid}/status')), timeout=15)
        self.assertEqual(res['error']['code'], 'NodeUnavailable', res)
        status, res = request('POST', f'/api/v1/sessions/{sid}/execute', {'argv': ['true']})
        self.assertEqual((status, res['error']['code']), (503, 'NodeUnavailable'), res)
        # The fleet's list says which node did not answer, lists the others', and fails.
        cp = fleet_list()
        self.assertEqual(cp.returncode, 1, cp.stderr)
        self.assertIn(f'Node 3 ({dead.address}:{BRIDGE_PORT}) did not list its sandboxes', cp.stderr)
        self.assertNotIn(sid, {sb['id'] for sb in json.loads(cp.stdout)})
        time.sleep(2.5)
        ids = [create() for _ in range(4)]
        self.destroy_all(ids)
        self.assertTrue({int(s[-2:], 16) for s in ids} <= {1, 2}, ids)
        # Restored on node 2 from its last copy: a new id naming node 2, its file back.
        cp = front_run(ctl + ['restore', saved[sid], '--to', f'http://{node_address(2)}:{BRIDGE_PORT}'], env=env)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        old, new = cp.stdout.split()
        self.assertEqual((old, int(new[-2:], 16)), (sid, 2), cp.stdout)
        try:
            status, res = request('POST', f'/api/v1/sessions/{new}/wake', {})
            self.assertEqual((status, res.get('id')), (200, new), res)
            status, res = request('POST', f'/api/v1/sessions/{new}/execute', {'argv': ['cat', 'kept']})
            self.assertEqual((status, res.get('stdout')), (200, 'before-the-end\n'), res)
        finally:
            request('DELETE', f'/api/v1/sessions/{new}')


if __name__ == '__main__':
    unittest.main()
