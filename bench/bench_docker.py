#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Docker sandboxes against `docker run`, measured in one run on this machine.

How to run (as root, after building; docker.io installed):

    python3 bench/bench_docker.py              # 50 runs of each, medians, p90 and ratios
    python3 bench/bench_docker.py -n 20 --json out.json

It boots a system with tests/integration/harness.py, which starts a dockerd of its own in
it and builds sandboxd-busybox:latest with tools/build-image busybox, then measures, in
batches that alternate (so that load that comes and goes shifts them alike):
  create_exec_persistent  CreateSandbox(docker-busybox) + Exec /bin/true through D-Bus, by
                          bench/sandbox-bench (one bus connection, no client start in the
                          figure); Destroy not timed            <- the target's numerator
  create, create_first_exec, destroy   its parts
  create_exec             CreateSandbox(Ephemeral) + Exec: returns once the sandbox and its
                          container are gone (the whole cycle, like docker run --rm)
and the floors, timed by a Python loop inside the system:
  docker_run              `docker run --rm --network none IMAGE /bin/true` (the CLI, as a
                          user runs it)                           <- the target's denominator
  docker_api              the same through the Engine API directly (create, start, wait,
                          delete over the socket; no CLI start) (informational)
Target (issue 5): create_exec_persistent ≤ 1.0 × docker_run.
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (also puts tests/integration on sys.path)

# Runs inside the system: times N of each docker floor; argv: image, n, socket.
FLOOR_SCRIPT = r'''
import http.client, json, socket, subprocess, sys, time
image, n, sock = sys.argv[1], int(sys.argv[2]), sys.argv[3]

class Conn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(sock)

def api(method, path, body=None):
    c = Conn('localhost')
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={'Content-Type': 'application/json'})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status >= 300:
        raise SystemExit(f'{method} {path}: {r.status} {data[:300]!r}')
    return json.loads(data) if data else None

def run_cli():
    subprocess.run(['docker', 'run', '--rm', '--network', 'none', image, '/bin/true'], check=True,
                   stdout=subprocess.DEVNULL)

def run_api():
    cid = api('POST', '/containers/create', {'Image': image, 'Cmd': ['/bin/true'],
                                              'HostConfig': {'NetworkMode': 'none'}})['Id']
    api('POST', f'/containers/{cid}/start')
    api('POST', f'/containers/{cid}/wait')
    api('DELETE', f'/containers/{cid}?force=1')

out = {'docker_run': [], 'docker_api': []}
for _ in range(n):
    for name, f in (('docker_run', run_cli), ('docker_api', run_api)):
        t0 = time.monotonic()
        f()
        out[name].append((time.monotonic() - t0) * 1e6)
print(json.dumps(out))
'''

CLIENT_SERIES = ('create_exec_persistent', 'create', 'create_first_exec', 'destroy', 'create_exec')
ROWS = [
    ('create_exec_persistent', 'sandboxd: Docker create + first exec'),
    ('create', '  of which CreateSandbox'),
    ('create_first_exec', '  of which the first Exec'),
    ('destroy', 'then Destroy (not in the line above)'),
    ('create_exec', 'sandboxd: ephemeral create + exec (till gone)'),
    ('docker_run', 'docker run --rm --network none IMG /bin/true'),
    ('docker_api', 'the same through the Engine API, no CLI'),
]


def summary(samples):
    v = sorted(samples)
    n = len(v)
    return {'runs': n, 'median_us': statistics.median(v), 'p90_us': v[(9 * n + 9) // 10 - 1],
            'min_us': v[0], 'max_us': v[-1]}


def print_table(rows, stats, runs, batch, digits=1):
    """Median, p90 and min of each row (key, what) that has samples, in ms."""
    print(f'\n{runs} runs of each, in alternating batches of {batch}, in ms:\n')
    print(f'  {"":<50}{"median":>8}{"p90":>8}{"min":>8}')
    for k, what in rows:
        if k in stats:
            s = stats[k]
            print(f'  {what:<50}' + ''.join(f'{s[f] / 1000:8.{digits}f}' for f in ('median_us', 'p90_us', 'min_us')))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('-n', '--runs', type=int, default=50, help='runs of each (default 50)')
    ap.add_argument('--batch', type=int, default=5, help='runs of each per alternating batch (default 5)')
    ap.add_argument('--warmup', type=int, default=3, help='untimed runs of each first (default 3)')
    ap.add_argument('--template', default='docker-busybox')
    ap.add_argument('--client', help='the sandbox-bench binary (default: as bench.py finds it)')
    ap.add_argument('--json', help='also write the samples (µs) and machine to this file')
    args = ap.parse_args()

    import harness
    system = harness.acquire()
    problems = []
    try:
        if system.docker_unavailable:
            print(f'bench_docker: Docker is not available: {system.docker_unavailable}', file=sys.stderr)
            return 77
        with open(os.path.join(system.paths.templates, f'{args.template}.json')) as f:
            image = json.load(f)['image']
        client = bench.find_client(system, args.client)
        info = bench.machine_info(system)
        info['docker'] = system.docker('version', '--format', '{{.Server.Version}}').stdout.strip()
        info['cgroup_driver'] = system.docker_cgroup_driver
        print(f'client: {client}; image {image}; dockerd {info["docker"]} ({info["cgroup_driver"]})',
              file=sys.stderr)

        def client_batch(n, warmup=0):
            cp = system.run([client, '--runs', str(n), '--warmup', str(warmup), '--template', args.template,
                             '--only', 'create_exec_persistent,create_exec', '--samples'],
                            timeout=120 + n * 30)
            if cp.returncode != 0:
                raise RuntimeError(f'sandbox-bench failed ({cp.returncode}):\n{cp.stderr[-3000:]}\n'
                                   + system.journal()[-3000:])
            return json.loads(cp.stdout)['results']

        def floor_batch(n):
            cp = system.run(['/usr/bin/python3', '-c', FLOOR_SCRIPT, image, str(n), system.docker_socket],
                            env={'DOCKER_HOST': system.docker_host}, timeout=120 + n * 30)
            if cp.returncode != 0:
                raise RuntimeError(f'docker floor failed ({cp.returncode}):\n{cp.stderr[-3000:]}')
            return json.loads(cp.stdout)

        if args.warmup:
            client_batch(0, args.warmup)
            floor_batch(args.warmup)
        samples = {k: [] for k, _ in ROWS}
        done = 0
        while done < args.runs:
            b = min(args.batch, args.runs - done)
            res = client_batch(b)
            for k in CLIENT_SERIES:
                samples[k] += res[k]['samples_us']
            for k, v in floor_batch(b).items():
                samples[k] += v
            done += b
            print(f'{done}/{args.runs}', file=sys.stderr)
        left = system.docker_containers()
        if left:
            problems.append(f'containers of sandboxd left after the bench: {left}')
    finally:
        problems += harness.release()

    stats = {k: summary(v) for k, v in samples.items() if v}
    print('\nmachine: ' + ', '.join(f'{k}={info[k]}' for k in ('nproc', 'cpu', 'kernel')))
    print(f'date: {info["date"]}; {info["systemd"]}; dockerd {info["docker"]}, {info["cgroup_driver"]} '
          f'cgroup driver; {info["mode"]} mode; sandboxd {info["sandboxd"]}, source {info["commit"]}')
    print_table(ROWS, stats, args.runs, args.batch)
    ratio = stats['create_exec_persistent']['median_us'] / stats['docker_run']['median_us']
    ratio_eph = stats['create_exec']['median_us'] / stats['docker_run']['median_us']
    ratio_api = stats['create_exec_persistent']['median_us'] / stats['docker_api']['median_us']
    met = ratio <= 1.0
    print('\nratios of medians:\n')
    print(f'  {"create + first exec / docker run":<50}{ratio:8.2f}   target ≤ 1.0 {"MET" if met else "MISSED"}')
    print(f'  {"(ephemeral create + exec / docker run)":<50}{ratio_eph:8.2f}')
    print(f'  {"(create + first exec / Engine API floor)":<50}{ratio_api:8.2f}')
    for p in problems:
        print(f'PROBLEM: {p}', file=sys.stderr)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'machine': info, 'stats': stats, 'samples_us': samples}, f, indent=1)
    return 1 if problems else (0 if met else 2)


if __name__ == '__main__':
    sys.exit(main())
