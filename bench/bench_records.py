#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What recording costs an execution: exec latency with recording to MariaDB (up), with
MariaDB down (records spool only, the writer retrying), with the spool alone, and with
recording off, in one boot, interleaved round by round.

    python3 bench/bench_records.py            # 30 rounds × 150 execs per mode (~15 min)
    python3 bench/bench_records.py -n 300 --rounds 16

It boots a system with tests/integration/harness.py (as bench/bench.py does), starts a
real mariadbd there, and between modes restarts sandboxd with another sandboxd.conf(5).
In each mode the C client bench/sandbox-bench times, over one bus connection, Exec in a
running sandbox of: /bin/true (exec, output captured) and `head -c 1M /dev/zero`
(exec_output: 1 MiB captured, the record carries its 4 KiB excerpt). Target: recording
costs ≤ 5 % (median against off).

Latency on a shared 2-CPU VM drifts by ±10 % over minutes, more than recording costs,
so the method is built to see through that:
  - many short rounds; each round runs every mode once, in an order rotated from round to
    round (no mode always follows a restart of mariadbd, or always comes last);
  - "off-again", a second run with recording off in every round: the A/A control. Its
    "overhead" is what the method cannot tell from zero;
  - two figures per mode: the median of all samples, and the median over rounds of the
    ratio to that round's "off";
  - and, not subject to drift, CPU time per exec from /proc/PID/task/TID/schedstat: the
    event loop's thread (on every exec's path: this is what recording adds to latency),
    the record writer thread (off the path, at nice +10) and mariadbd (off the path).
"""

import argparse
import json
import os
import signal
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'integration'))
sys.path.insert(0, HERE)

MEASUREMENTS = ('exec', 'exec_output')
MODES = ('off', 'spool', 'mariadb', 'mariadb-down', 'off-again')


def config(mode, db, system):
    if mode.startswith('off'):
        return '[Recording]\nRecord=no\n'
    # A spool per mode: "mariadb" would otherwise replay what "spool" and "mariadb-down"
    # left, inside its own measurement.
    text = f'[Recording]\nSpoolDirectory=/run/sandboxd-test-state/bench-spool-{mode}\n'
    if mode in ('mariadb', 'mariadb-down'):
        text += (f'MariaDBSocket={db.socket_in_system}\nDatabase=sandboxd\nUser=sandboxd\n'
                 f'PasswordFile=/run/{system.name}-config/mariadb-password\n')
    return text


def daemon_cpu(system):
    """{'loop': ns, 'writer': ns} of the running sandboxd, from schedstat (its first field
    is the time the thread ran, in ns)."""
    pid = system.run(['systemctl', 'show', '-P', 'MainPID', 'sandboxd.service'], check=True).stdout.strip()
    cp = system.run(['sh', '-c', f'cd /proc/{pid}/task && for t in *; do echo "$t $(cat $t/comm) $(cut -d" " -f1 $t/schedstat)"; done'],
                    check=True)
    out = {'loop': 0, 'writer': 0}
    for line in cp.stdout.splitlines():
        tid, comm, ns = line.split()
        if tid == pid:
            out['loop'] += int(ns)
        elif comm == 'sandboxd-record':
            out['writer'] += int(ns)
    return out


def mariadb_cpu(db):
    if not db.proc or db.proc.poll() is not None:
        return 0
    total = 0
    base = f'/proc/{db.proc.pid}/task'
    for t in os.listdir(base):
        try:
            with open(f'{base}/{t}/schedstat') as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('-n', '--runs', type=int, default=150, help='execs per measurement, mode and round')
    ap.add_argument('--rounds', type=int, default=30)
    ap.add_argument('--warmup', type=int, default=20)
    ap.add_argument('--client', help='the sandbox-bench binary (default: as bench.py finds it)')
    args = ap.parse_args()

    import harness
    from bench import find_client
    system = harness.acquire()
    try:
        db = system.start_mariadb()
        client = find_client(system, args.client)
        samples = {m: {k: [] for k in MEASUREMENTS} for m in MODES}
        medians = {m: {k: [] for k in MEASUREMENTS} for m in MODES}
        cpu = {m: {'loop': 0, 'writer': 0, 'mariadbd': 0, 'execs': 0} for m in MODES}
        for rnd in range(args.rounds):
            order = MODES[rnd % len(MODES):] + MODES[:rnd % len(MODES)]
            for mode in order:
                up = db.proc is not None and db.proc.poll() is None
                if mode == 'mariadb-down' and up:
                    db.kill(signal.SIGTERM)
                elif mode != 'mariadb-down' and not up:
                    system.start_mariadb()
                system.configure_daemon(config(mode, db, system),
                                        credentials={'mariadb-password': harness.MariaDB.PASSWORD})
                # Let start-up work (the writer finding its place in the spool) pass first.
                time.sleep(1.5)
                d0, m0 = daemon_cpu(system), mariadb_cpu(db)
                cp = system.run([client, '--runs', str(args.runs), '--warmup', str(args.warmup),
                                 '--only', ','.join(MEASUREMENTS), '--samples', '--uid', str(0x70000000)],
                                timeout=120 + args.runs)
                if cp.returncode != 0:
                    raise RuntimeError(f'sandbox-bench failed:\n{cp.stderr}\n{system.journal()}')
                d1, m1 = daemon_cpu(system), mariadb_cpu(db)
                # The writer replays within COALESCE of the last record: give it that.
                time.sleep(1.5)
                d2, m2 = daemon_cpu(system), mariadb_cpu(db)
                cpu[mode]['loop'] += d1['loop'] - d0['loop']
                cpu[mode]['writer'] += d2['writer'] - d0['writer']
                cpu[mode]['mariadbd'] += (m2 - m0) if mode == 'mariadb' else 0
                cpu[mode]['execs'] += (args.runs + args.warmup) * len(MEASUREMENTS)
                res = json.loads(cp.stdout)['results']
                for k in MEASUREMENTS:
                    samples[mode][k] += res[k]['samples_us']
                    medians[mode][k].append(res[k]['median_us'])
                print(f'round {rnd + 1}/{args.rounds} {mode}: ' +
                      ', '.join(f'{k} {res[k]["median_us"]:.0f} µs' for k in MEASUREMENTS), file=sys.stderr)
        if db.proc is None or db.proc.poll() is not None:
            system.start_mariadb()
        rows = db.sql('SELECT COUNT(*) FROM executions')
        print(f'\nexec latency, medians over {args.rounds} rounds × {args.runs} runs (µs); overhead vs off:')
        print(f'{"mode":<14}' + ''.join(f'{k + " (all / paired)":>36}' for k in MEASUREMENTS))
        base = {k: statistics.median(samples['off'][k]) for k in MEASUREMENTS}
        for mode in MODES:
            cells = []
            for k in MEASUREMENTS:
                med = statistics.median(samples[mode][k])
                paired = (statistics.median(a / b for a, b in zip(medians[mode][k], medians['off'][k])) - 1) * 100
                cells.append(f'{med:>8.0f} ({(med / base[k] - 1) * 100:+6.1f} % / {paired:+6.1f} %)')
            print(f'{mode:<14}' + ''.join(f'{c:>36}' for c in cells))
        print('\n"off-again" is recording off as well: its figures are the noise of the method.')
        print(f'\nCPU time per exec (µs), both measurements together:')
        print(f'{"mode":<14}{"event loop":>12}{"  loop vs off":>14}{"writer":>10}{"mariadbd":>10}')
        loop_off = cpu['off']['loop'] / cpu['off']['execs']
        for mode in MODES:
            c = cpu[mode]
            loop = c['loop'] / c['execs']
            print(f'{mode:<14}{loop / 1000:>12.1f}{(loop - loop_off) / 1000:>+14.1f}'
                  f'{c["writer"] / c["execs"] / 1000:>10.1f}{c["mariadbd"] / c["execs"] / 1000:>10.1f}')
        print(f'\nrows in MariaDB afterwards: {rows[0][0]}')
    finally:
        harness.release()


if __name__ == '__main__':
    main()
