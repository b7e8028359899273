#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The recycling pool against its floors, measured in one run in one systemd.

How to run (as root, after building; the default build dir is build/; not on an ASan build):

    python3 bench/bench_recycle.py                 # K = 1, 4, 16; 300 cycles each
    python3 bench/bench_recycle.py -n 1000 --inflight 4

It boots a system with tests/integration/harness.py, creates a template like --template
whose pool recycles ("pool": {"recycle": true, "recycle_max": 64}) and runs the C client
<build>/bench/sandbox-scale (one process, one bus connection, K calls in flight):
  recycled   CreateSandbox(Ephemeral) + Exec /bin/true of the recycling template, after an
             untimed warm-up at the same K (max(20, 4K) cycles) in which the pool grows to
             what K in flight need: each create takes one of the caller's own sandboxes
             back, reset (every process killed, /work, /tmp and /dev/shm fresh, under a new
             id) - every sandbox still its own transient unit with its own limits
  ephemeral  the same with --template itself: each a new unit, gone after its exec
  exec       Exec /bin/true in one running sandbox, K in flight: the floor of a recycled cycle
  bwrap      the argv sandboxd gave a real sandbox's bwrap, running /bin/true, K at once
Ratios: recycled / bwrap throughput (target ≥ 5), recycled cycle / exec cycle latency at
K=1 (target ≤ 1.5: "pooled acquire + exec"), recycled / ephemeral.

At the end it removes its template, which destroys the sandboxes the pool kept, and waits
until systemd has stopped their units: it leaves no scope behind, and exits 1 if one is
still there after a minute (named on stderr). The "12 left" it once reported were those
kept sandboxes, counted while their units were still stopping.
"""

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'integration'))

import bench  # noqa: E402
import bench_scale  # noqa: E402

RECYCLE_TEMPLATE = 'bench-recycled'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('-n', '--count', type=int, default=300, help='cycles per run (default 300)')
    ap.add_argument('--inflight', default='1,4,16', help='K values (default 1,4,16)')
    ap.add_argument('--template', default='shell')
    ap.add_argument('--json', help='also write the results and machine to this file')
    args = ap.parse_args()
    ks = [int(k) for k in args.inflight.split(',') if k]

    import harness
    system = harness.acquire(docker=False)
    runs = []
    try:
        with open(os.path.join(system.paths.templates, f'{args.template}.json')) as f:
            t = json.load(f)
        t.update(description='bench: recycled', pool={'recycle': True, 'recycle_max': 64})
        _, error, params = system.varlink_call('CreateTemplate', {'name': RECYCLE_TEMPLATE, 'json': json.dumps(t)})
        if error:
            raise RuntimeError(f'CreateTemplate: {error} {params}')
        bw = bench.bwrap_floor_argv(system, args.template)
        client = os.path.join(system.paths.build, 'bench', 'sandbox-scale')
        info = bench.machine_info(system)
        probe = bench_scale.Probe(system)

        def measure(mode, template, k, n):
            r = bench_scale.client_run(system, client, probe,
                                       ['--mode', mode, '--inflight', str(k), '--count', str(n), '--template',
                                        template, '--uid', str(bench.SANDBOX_UID), '--'] + bw, 300 + n * 5)
            r['what'] = 'recycled' if template == RECYCLE_TEMPLATE and mode == 'ephemeral' else mode
            return r

        for mode, template in (('ephemeral', RECYCLE_TEMPLATE), ('exec', args.template), ('bwrap', args.template)):
            measure(mode, template, 2, 10)  # warm up, untimed
        for k in ks:
            for mode, template in (('bwrap', args.template), ('exec', args.template),
                                   ('ephemeral', args.template), ('ephemeral', RECYCLE_TEMPLATE)):
                if template == RECYCLE_TEMPLATE:
                    # The pool grows to what K in flight need (those in use and those being
                    # reset) once; steady state is what is measured.
                    measure(mode, template, k, max(20, 4 * k))
                r = measure(mode, template, k, args.count)
                runs.append(r)
                print(f'K={k} {r["what"]}: {r["per_sec"]:.1f}/s', file=sys.stderr)
        # Its kept sandboxes go with it; their units stop after the answer.
        _, error, params = system.varlink_call('RemoveTemplate', {'name': RECYCLE_TEMPLATE})
        if error:
            raise RuntimeError(f'RemoveTemplate: {error} {params}')
        left = bench_scale.count_left(system)
    finally:
        problems = harness.release()
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'runs': runs, 'machine': info}, f, indent=1)
    report(runs, info, args, left)
    # A bench leaves nothing behind, as a test does.
    return 1 if problems or left else 0


def report(runs, info, args, left):
    print('\nmachine: ' + ', '.join(f'{k}={info[k]}' for k in ('nproc', 'cpu', 'kernel')))
    print(f'date: {info["date"]}; {info["systemd"]}; {info["bwrap"]}; {info["mode"]} mode; '
          f'load average before: {info["loadavg"]}, after: {" ".join(open("/proc/loadavg").read().split()[:3])}')
    print(f'sandboxd: {info["sandboxd"]}, source {info["commit"]}')
    print(f'\n{args.count} cycles per run, K in flight; per sandbox CPU in ms:\n')
    print(bench_scale.HEADER)
    by = {}
    for r in runs:
        by[(r['what'], r['inflight'])] = r
        print(bench_scale.fmt_row(f'K={r["inflight"]:<3} {r["what"]}', r))
    print('\nratios:\n')
    for k in sorted({r['inflight'] for r in runs}):
        rc, b, e, x = (by.get((w, k)) for w in ('recycled', 'bwrap', 'ephemeral', 'exec'))
        if not (rc and b and e and x):
            continue
        rb = rc['per_sec'] / b['per_sec']
        lat = rc['cycle_median_us'] / x['cycle_median_us']
        line = (f'  K={k:<3} recycled / bwrap throughput {rb:5.2f} (target ≥ 5 {"MET" if rb >= 5 else "MISSED"})'
                f'   recycled / ephemeral {rc["per_sec"] / e["per_sec"]:5.2f}'
                f'   recycled cycle / exec cycle (median) {lat:5.2f}')
        if k == 1:
            line += f' (target ≤ 1.5 {"MET" if lat <= 1.5 else "MISSED"})'
        print(line)
    print(f'\n  scopes left after the run: {left}')


if __name__ == '__main__':
    sys.exit(main())
