#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Create + first command through E2B's own SDK against sandboxd-http, beside the same
through sandboxd's Python client and the REST API, in one run on this machine.

How to run (as root, after building; node and npm installed):

    python3 bench/bench_e2b.py              # 30 of each, medians and p90
    python3 bench/bench_e2b.py -n 10 --json out.json

It boots a system with tests/integration/harness.py (sandboxd; sandboxd-http started by its
socket unit as its dynamic user, with the shipped polkit rule), makes one token in E2B's
form (sandboxd-http token add --e2b), which the Python client and REST send as a bearer
token. It installs tests/e2b's pinned SDK (npm ci), and measures, in batches that alternate
so that load that comes and goes shifts them alike:
  e2b_sdk      Sandbox.create() + commands.run('echo ok') in one Node process (the SDK's
               own timing of each, after a warm-up create; node's start not counted):
               POST /v2/sandboxes, then envd's process.Process/Start stream
  python_http  sandboxd.Sandbox.create(transport=HttpTransport) + commands.run('echo ok')
  rest_node    POST /api/v1/sessions + POST …/execute {"argv": ["/bin/bash", "-l", "-c",
               "echo ok"]} (the command E2B's SDK runs) with Node's fetch, in the same
               process after the SDK's runs: the same client runtime
  rest         the same from Python's http.client on one keep-alive connection
Each sandbox is killed after it is timed, untimed.
"""

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (also puts tests/integration on sys.path)
import bench_docker  # noqa: E402

sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'security'))

ROWS = [
    ('e2b_sdk', "E2B's SDK: Sandbox.create() + commands.run('echo ok')"),
    ('e2b_create', "E2B's SDK: of that, Sandbox.create()"),
    ('rest_node', 'REST from Node (fetch): POST /api/v1/sessions + execute bash -l -c "echo ok"'),
    ('python_http', "Python client over HTTP: Sandbox.create() + commands.run('echo ok')"),
    ('rest', 'REST from Python (http.client): the same as rest_node'),
]
# E2B's own figure for a sandbox's start in its cloud (not measurable here).
E2B_PUBLISHED_START_MS = 150


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('-n', '--runs', type=int, default=30, help='runs of each (default 30)')
    ap.add_argument('--batch', type=int, default=5, help='runs of each per alternating batch (default 5)')
    ap.add_argument('--json', help='also write the samples (µs) and machine to this file')
    args = ap.parse_args()

    import harness
    import polkitutil
    system = harness.acquire(docker=False)
    polkit = polkitutil.Polkit(system)
    problems = []
    samples = {k: [] for k, _ in ROWS}
    try:
        polkit.install()
        with open(os.path.join(system.paths.source, 'polkit', 'io.sandboxd.Sandbox1-http.rules')) as f:
            polkit.set_rules(f.read(), name='io.sandboxd.Sandbox1-http.rules')
        key = system.run([system.paths.sandboxd_http, 'token', 'add', 'bench-e2b', '--tenant=bench', '--e2b',
                          f'--tokens-dir={harness.HTTP_TOKENS_DIR}'], check=True).stdout.strip()
        system.systemctl('start', 'sandboxd-http.socket', check=True)
        url = f'http://127.0.0.1:{system.http_port}'
        info = bench.machine_info(system)
        sdk = harness.npm_ci(system.paths.build, os.path.join(HERE, '..', 'tests', 'e2b'), 'e2b-sdk',
                             ('e2b-client.mjs',))
        sys.path.insert(0, os.path.join(system.paths.source, 'python'))
        import sandboxd

        transport = sandboxd.HttpTransport(url, key)
        conn = http.client.HTTPConnection('127.0.0.1', system.http_port, timeout=120)
        auth = {'Authorization': f'Bearer {key}', 'Content-Type': 'application/json'}

        def req(method, path, body=None):
            conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=auth)
            r = conn.getresponse()
            data = r.read()
            if r.status >= 300:
                raise RuntimeError(f'{method} {path}: {r.status} {data[:300]!r}')
            return json.loads(data) if data else None

        def e2b(n):
            env = dict(os.environ, E2B_API_URL=url, E2B_SANDBOX_URL=url, E2B_API_KEY=key, BENCH_N=str(n + 1))
            cp = subprocess.run([shutil.which('node'), os.path.join(sdk, 'e2b-client.mjs'), 'bench'],
                                capture_output=True, text=True, timeout=300, env=env)
            if cp.returncode != 0:
                raise RuntimeError(f'the E2B SDK failed: {cp.stderr[-2000:]}')
            out = json.loads(cp.stdout)
            samples['e2b_create'].extend(ms * 1000 for ms in out['createMs'][1:])
            samples['rest_node'].extend(ms * 1000 for ms in out['restMs'][1:])
            return [ms * 1000 for ms in out['ms'][1:]]   # the first warms the process up

        def python_http():
            t0 = time.monotonic()
            sbx = sandboxd.Sandbox.create('shell', transport=transport)
            r = sbx.commands.run('echo ok')
            samples['python_http'].append((time.monotonic() - t0) * 1e6)
            assert r.stdout == 'ok\n', r
            sbx.kill()

        def rest():
            t0 = time.monotonic()
            s = req('POST', '/api/v1/sessions', {'template': 'shell'})['id']
            r = req('POST', f'/api/v1/sessions/{s}/execute', {'argv': ['/bin/bash', '-l', '-c', 'echo ok']})
            samples['rest'].append((time.monotonic() - t0) * 1e6)
            assert r['stdout'] == 'ok\n', r
            req('DELETE', f'/api/v1/sessions/{s}')

        python_http()   # warm up
        rest()
        samples = {k: [] for k, _ in ROWS}
        done = 0
        while done < args.runs:
            b = min(args.batch, args.runs - done)
            samples['e2b_sdk'] += e2b(b)
            for _ in range(b):
                python_http()
                rest()
            done += b
            print(f'{done}/{args.runs}', file=sys.stderr)
        conn.close()
    finally:
        try:
            system.systemctl('stop', 'sandboxd-http.socket', 'sandboxd-http.service', timeout=60)
            polkit.uninstall()
        finally:
            problems += harness.release()

    stats = {k: bench_docker.summary(v) for k, v in samples.items() if v}
    print('\nmachine: ' + ', '.join(f'{k}={info[k]}' for k in ('nproc', 'cpu', 'kernel')))
    print(f'date: {info["date"]}; {info["systemd"]}; {info["mode"]} mode; sandboxd {info["sandboxd"]}, '
          f'source {info["commit"]}')
    bench_docker.print_table(ROWS, stats, args.runs, args.batch, digits=2)
    print('\nratios of medians:\n')
    for k in ('rest_node', 'python_http', 'rest'):
        r = stats['e2b_sdk']['median_us'] / stats[k]['median_us']
        print(f'  {"e2b_sdk / " + k:<50}{r:8.2f}')
    print(f'\nE2B\'s published sandbox start (its cloud, for reference): about {E2B_PUBLISHED_START_MS} ms')
    for p in problems:
        print(f'PROBLEM: {p}', file=sys.stderr)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'machine': info, 'stats': stats, 'samples_us': samples}, f, indent=1)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
