#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd-http against varlink and `docker run`, measured in one run on this machine.

How to run (as root, after building; docker.io installed for the Docker rows):

    python3 bench/bench_http.py              # 50 runs of each, medians, p90 and ratios
    python3 bench/bench_http.py -n 20 --json out.json

It boots a system with tests/integration/harness.py (sandboxd, sandboxd-http started by its
socket unit as its dynamic user, the shipped polkit rule for it, a dockerd of its own), makes
a token, and measures from this process, in batches that alternate (so that load that comes
and goes shifts them alike):
  exec_http        POST /api/v1/sessions/ID/execute {"argv": ["true"]} on one keep-alive
                   HTTP connection (Python http.client)          <- numerator
  exec_varlink     the same Exec of the same sandbox over one varlink connection to
                   sandboxd (as root)                             <- denominator
  cycle_http       POST /api/v1/sessions (shell) + execute /bin/true + DELETE, over HTTP
  cycle_http_docker  the same with the docker-busybox template
and, by a Python loop inside the system (bench_docker.py's), the floor:
  docker_run       `docker run --rm --network none IMAGE /bin/true`
"""

import argparse
import http.client
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (also puts tests/integration on sys.path)
import bench_docker  # noqa: E402

sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'security'))

ROWS = [
    ('exec_http', 'execute /bin/true over HTTP (keep-alive)'),
    ('exec_varlink', 'Exec /bin/true over varlink'),
    ('cycle_http', 'HTTP create + execute + delete (shell)'),
    ('cycle_http_docker', 'HTTP create + execute + delete (docker-busybox)'),
    ('docker_run', 'docker run --rm --network none IMG /bin/true'),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('-n', '--runs', type=int, default=50, help='runs of each (default 50)')
    ap.add_argument('--batch', type=int, default=5, help='runs of each per alternating batch (default 5)')
    ap.add_argument('--json', help='also write the samples (µs) and machine to this file')
    args = ap.parse_args()

    import harness
    import polkitutil
    system = harness.acquire()
    polkit = polkitutil.Polkit(system)
    problems = []
    samples = {k: [] for k, _ in ROWS}
    try:
        polkit.install()
        with open(os.path.join(system.paths.source, 'polkit', 'io.sandboxd.Sandbox1-http.rules')) as f:
            polkit.set_rules(f.read(), name='io.sandboxd.Sandbox1-http.rules')
        token = system.run([system.paths.sandboxd_http, 'token', 'add', 'bench', '--tenant=bench',
                            f'--tokens-dir={harness.HTTP_TOKENS_DIR}'], check=True).stdout.strip()
        system.systemctl('start', 'sandboxd-http.socket', check=True)
        auth = {'Authorization': f'Bearer {token}', 'Content-Type': 'application/json'}
        info = bench.machine_info(system)
        docker = not system.docker_unavailable
        image = None
        if docker:
            with open(os.path.join(system.paths.templates, 'docker-busybox.json')) as f:
                image = json.load(f)['image']

        conn = http.client.HTTPConnection('127.0.0.1', system.http_port, timeout=120)

        def req(method, path, body=None):
            conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=auth)
            r = conn.getresponse()
            data = r.read()
            if r.status >= 300:
                raise RuntimeError(f'{method} {path}: {r.status} {data[:300]!r}')
            return json.loads(data) if data else None

        def timed(name, f):
            t0 = time.monotonic()
            f()
            samples[name].append((time.monotonic() - t0) * 1e6)

        sid = req('POST', '/api/v1/sessions', {'template': 'shell'})['id']
        vl = system.varlink()
        execute = {'argv': ['true']}

        def exec_varlink():
            _, error, _ = vl.call('io.sandboxd.Sandbox.Exec', {'id': sid, 'argv': ['true']})
            if error:
                raise RuntimeError(error)

        def cycle(template):
            def f():
                s = req('POST', '/api/v1/sessions', {'template': template})['id']
                req('POST', f'/api/v1/sessions/{s}/execute', execute)
                req('DELETE', f'/api/v1/sessions/{s}')
            return f

        for _ in range(3):   # warm up
            req('POST', f'/api/v1/sessions/{sid}/execute', execute)
            exec_varlink()
        done = 0
        while done < args.runs:
            b = min(args.batch, args.runs - done)
            for _ in range(b):
                timed('exec_http', lambda: req('POST', f'/api/v1/sessions/{sid}/execute', execute))
                timed('exec_varlink', exec_varlink)
                timed('cycle_http', cycle('shell'))
                if docker:
                    timed('cycle_http_docker', cycle('docker-busybox'))
            if docker:
                cp = system.run(['/usr/bin/python3', '-c', bench_docker.FLOOR_SCRIPT, image, str(b),
                                 system.docker_socket], env={'DOCKER_HOST': system.docker_host},
                                timeout=120 + b * 30)
                if cp.returncode != 0:
                    raise RuntimeError(f'docker floor failed: {cp.stderr[-2000:]}')
                samples['docker_run'] += json.loads(cp.stdout)['docker_run']
            done += b
            print(f'{done}/{args.runs}', file=sys.stderr)
        req('DELETE', f'/api/v1/sessions/{sid}')
        conn.close()
        vl.close()
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
    ratio = stats['exec_http']['median_us'] / stats['exec_varlink']['median_us']
    print(f'  {"execute over HTTP / Exec over varlink":<50}{ratio:8.2f}')
    if 'docker_run' in stats:
        for k in ('cycle_http', 'cycle_http_docker'):
            r = stats[k]['median_us'] / stats['docker_run']['median_us']
            print(f'  {k + " / docker run --rm":<50}{r:8.2f}')
    for p in problems:
        print(f'PROBLEM: {p}', file=sys.stderr)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'machine': info, 'stats': stats, 'samples_us': samples}, f, indent=1)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
