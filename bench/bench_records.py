#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What recording costs an execution: exec latency with recording to MariaDB (up), with
MariaDB down (records spool only, the writer retrying), and with recording off, in one
boot, the three interleaved round by round.

    python3 bench/bench_records.py            # 8 rounds × 150 execs per mode
    python3 bench/bench_records.py -n 300 --rounds 12

It boots a system with tests/integration/harness.py (as bench/bench.py does), starts a
real mariadbd there, and between modes restarts sandboxd with another sandboxd.conf(5).
In each mode the C client bench/sandbox-bench times, over one bus connection, Exec in a
running sandbox of: /bin/true (exec, output passed as descriptors… and captured: exec
with --only exec) and `head -c 1M /dev/zero` (exec_output: 1 MiB captured, the record
carries its 4 KiB excerpt). Target: recording costs ≤ 5 % (median against off).

Restarting sandboxd moves the figures by ±10 % from one start to the next (seen here on
a 2-CPU VM), more than recording costs, so: many short rounds, each mode once per round
in turn, and two figures per mode: the median of all samples, and the median over rounds
of the ratio to that round's "off" (which cancels the drift between rounds).
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'integration'))
sys.path.insert(0, HERE)

MEASUREMENTS = ('exec', 'exec_output')


def config(mode, db, system):
    if mode == 'off':
        return '[Recording]\nRecord=no\n'
    text = '[Recording]\nSpoolDirectory=/run/sandboxd-test-state/bench-spool\n'
    if mode in ('mariadb', 'mariadb-down'):
        text += (f'MariaDBSocket={db.socket_in_system}\nDatabase=sandboxd\nUser=sandboxd\n'
                 f'PasswordFile=/run/{system.name}-config/mariadb-password\n')
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('-n', '--runs', type=int, default=150, help='execs per measurement, mode and round')
    ap.add_argument('--rounds', type=int, default=8)
    ap.add_argument('--warmup', type=int, default=20)
    ap.add_argument('--client', help='the sandbox-bench binary (default: as bench.py finds it)')
    args = ap.parse_args()

    import harness
    from bench import find_client
    system = harness.acquire()
    try:
        db = system.start_mariadb()
        client = find_client(system, args.client)
        modes = ['off', 'spool', 'mariadb', 'mariadb-down']
        samples = {m: {k: [] for k in MEASUREMENTS} for m in modes}
        ratios = {m: {k: [] for k in MEASUREMENTS} for m in modes}
        for rnd in range(args.rounds):
            for mode in modes:
                if mode == 'mariadb-down':
                    db.kill()
                elif mode == 'mariadb':
                    system.start_mariadb()
                system.configure_daemon(config(mode, db, system),
                                        credentials={'mariadb-password': harness.MariaDB.PASSWORD})
                cp = system.run([client, '--runs', str(args.runs), '--warmup', str(args.warmup),
                                 '--only', ','.join(MEASUREMENTS), '--samples', '--uid', str(0x70000000)],
                                timeout=120 + args.runs)
                if cp.returncode != 0:
                    raise RuntimeError(f'sandbox-bench failed:\n{cp.stderr}\n{system.journal()}')
                res = json.loads(cp.stdout)['results']
                for k in MEASUREMENTS:
                    samples[mode][k] += res[k]['samples_us']
                    if mode == 'off':
                        off_round = {k: res[k]['median_us'] for k in MEASUREMENTS}
                    ratios[mode][k].append(res[k]['median_us'] / off_round[k])
                print(f'round {rnd + 1}/{args.rounds} {mode}: ' +
                      ', '.join(f'{k} {res[k]["median_us"]:.0f} µs' for k in MEASUREMENTS), file=sys.stderr)
            system.start_mariadb()
        rows = db.sql('SELECT COUNT(*) FROM executions')
        print(f'\nexec latency, medians over {args.rounds} rounds × {args.runs} runs (µs); overhead vs off:')
        print(f'{"mode":<14}' + ''.join(f'{k + " (all / paired)":>36}' for k in MEASUREMENTS))
        base = {k: statistics.median(samples['off'][k]) for k in MEASUREMENTS}
        for mode in modes:
            cells = []
            for k in MEASUREMENTS:
                med = statistics.median(samples[mode][k])
                paired = (statistics.median(ratios[mode][k]) - 1) * 100
                cells.append(f'{med:>8.0f} ({(med / base[k] - 1) * 100:+6.1f} % / {paired:+6.1f} %)')
            print(f'{mode:<14}' + ''.join(f'{c:>36}' for c in cells))
        print(f'\nrows in MariaDB afterwards: {rows[0][0]}')
    finally:
        harness.release()


if __name__ == '__main__':
    main()
