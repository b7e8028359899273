#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fairness between tenants (issue 31): another tenant's exec and create latency while one
tenant keeps hundreds of creates in flight.

How to run (as root, after building):

    python3 bench/bench_fairness.py                  # K=100 flooding, 40 of each measured
    python3 bench/bench_fairness.py -k 200 -n 60 --json out.json

It boots a system with tests/integration/harness.py and measures, over varlink from this
process, tenant "victim"'s Exec of /bin/true in a sandbox it has, and its CreateSandbox
(shell) + Destroy, each p50 and p99:
  quiet        nothing else runs
  flood        tenant "flood" keeps K creates in flight (K connections, each CreateSandbox
               then Destroy in a loop), with sandboxd.conf [Node] StartsInFlight= as
               shipped (16 per owner or tenant)
  flood-cap4   the same with StartsInFlight=4
  flood-nocap  the same with StartsInFlight=100000 (no queue in sandboxd: every create
               goes to systemd's one job queue at once, as before issue 31)
"""

import argparse
import json
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (also puts tests/integration on sys.path)

IFACE = 'io.sandboxd.Sandbox.'


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else float('nan')


def call(conn, method, params):
    replies, error, eparams = conn.call(IFACE + method, params)
    if error:
        raise RuntimeError(f'{method}: {error} {eparams}')
    return replies[-1]


def measure(system, runs):
    """The victim's exec and create+destroy latencies, ms."""
    vl = system.varlink()
    call(vl, 'ActForTenant', {'tenant': 'victim'})
    sid = call(vl, 'CreateSandbox', {'template': 'shell', 'options': {}})['id']
    out = {'exec': [], 'create': []}
    for _ in range(runs):
        t0 = time.monotonic()
        call(vl, 'Exec', {'id': sid, 'argv': ['true']})
        out['exec'].append((time.monotonic() - t0) * 1e3)
        t0 = time.monotonic()
        s = call(vl, 'CreateSandbox', {'template': 'shell', 'options': {}})['id']
        out['create'].append((time.monotonic() - t0) * 1e3)
        call(vl, 'Destroy', {'id': s})
    call(vl, 'Destroy', {'id': sid})
    vl.close()
    return out


def flood(system, k, stop, counts, failures):
    def worker():
        vl = system.varlink(timeout=600)
        call(vl, 'ActForTenant', {'tenant': 'flood'})
        while not stop.is_set():
            replies, error, _ = vl.call(IFACE + 'CreateSandbox', {'template': 'shell', 'options': {}})
            if error:
                failures.append(error)   # under this load a start may fail; the flood goes on
                continue
            counts.append(1)
            vl.call(IFACE + 'Destroy', {'id': replies[-1]['id']})
        vl.close()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(k)]
    for t in threads:
        t.start()
    return threads


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('-k', type=int, default=100, help='creates the flooding tenant keeps in flight (default 100)')
    ap.add_argument('-n', '--runs', type=int, default=40, help='measurements of each (default 40)')
    ap.add_argument('--json', help='also write the samples (ms) to this file')
    args = ap.parse_args()

    import harness
    system = harness.acquire(docker=False)
    results = {}
    rates = {}
    fails = {}
    try:
        info = bench.machine_info(system)
        for name, conf in (('quiet', None), ('flood', None), ('flood-cap4', '[Node]\nStartsInFlight=4\n'),
                           ('flood-nocap', '[Node]\nStartsInFlight=100000\n')):
            system.configure_daemon(conf)
            stop, counts, threads, failures = threading.Event(), [], [], []
            if name != 'quiet':
                threads = flood(system, args.k, stop, counts, failures)
                time.sleep(3)   # the flood at full height
            t0, n0 = time.monotonic(), len(counts)
            results[name] = measure(system, args.runs)
            rates[name] = (len(counts) - n0) / (time.monotonic() - t0)
            fails[name] = len(failures)
            stop.set()
            for t in threads:
                t.join(timeout=600)
            print(f'{name}: done', file=sys.stderr)
        system.configure_daemon(None)
    finally:
        problems = harness.release()

    print('\nmachine: ' + ', '.join(f'{k}={info[k]}' for k in ('nproc', 'cpu', 'kernel')))
    print(f'date: {info["date"]}; sandboxd {info["sandboxd"]}, source {info["commit"]}; K={args.k}, '
          f'{args.runs} of each\n')
    print(f'{"victim latency, ms":<22}{"exec p50":>10}{"exec p99":>10}{"create p50":>12}{"create p99":>12}'
          f'{"flood creates/s":>17}{"flood failed":>14}')
    for name, r in results.items():
        print(f'{name:<22}{pct(r["exec"], 50):10.2f}{pct(r["exec"], 99):10.2f}{pct(r["create"], 50):12.1f}'
              f'{pct(r["create"], 99):12.1f}{rates[name]:17.1f}{fails[name]:14d}')
    for p in problems:
        print(f'PROBLEM: {p}', file=sys.stderr)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'machine': info, 'k': args.k, 'samples_ms': results, 'flood_rate': rates,
                       'medians': {n: {k: statistics.median(v) for k, v in r.items()} for n, r in results.items()}},
                      f, indent=1)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
