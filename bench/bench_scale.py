#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd's ephemeral throughput at K in flight against its floors, and with thousands of
idle sandboxes present, measured in one run in one systemd.

How to run (as root, after building; the default build dir is build/):

    python3 bench/bench_scale.py                       # K = 1, 4, 16; 0, 1000, 3000 idle
    python3 bench/bench_scale.py -n 200 --idle 0,1000  # fewer
    python3 bench/bench_scale.py --idle 0,1000 --inflight 4 --perf DIR   # and where the CPU goes
    SANDBOXD_BUILD_DIR=build-release python3 bench/bench_scale.py

It boots a system with tests/integration/harness.py and runs the C client
<build>/bench/sandbox-scale in it (one process, one bus connection, K calls in flight):
  ephemeral    CreateSandbox(Ephemeral) + Exec /bin/true, K cycles in flight
  bwrap        the argv sandboxd gave a real sandbox's bwrap (bench.py's bwrap_floor_argv),
               running /bin/true, as a sandbox uid, K at once: the floor
  systemd-run  systemd-run --scope --slice=sandbox.slice with sandboxd's unit properties +
               that bwrap, K at once
For each it prints sandboxes per second and, per sandbox, the CPU (from /proc/PID/stat
deltas, user + system, own threads only) of systemd (PID 1 of the system), the bus daemon,
journald and sandboxd; "all", the CPU of everything in the system under test and of the
client (the system's cpuacct cgroup, which the client joins: namespace mode), "rest" what
of it the four do not account for (bwrap, sandbox-init, the client, the kernel's work for
them); and "machine", the whole machine's busy CPU (/proc/stat; other load included).
Then it creates idle (persistent) sandboxes up to each --idle count (timing the creates:
the first and the last 100) and runs ephemeral (and systemd-run, to tell systemd's share)
at --idle-k in flight again. Ratios: ephemeral / bwrap (target ≥ 0.8), ephemeral /
systemd-run (≥ 1.5), ephemeral at the largest idle count / at 0 (≥ 0.8). At the end the
idle sandboxes are destroyed (timed) and the system torn down. With --perf DIR, each
ephemeral run with idle sandboxes is recorded (perf record -g of systemd, the bus daemon
and sandboxd, and what they fork) into DIR/perf-<idle>.data and the top symbols printed;
`perf report -i DIR/perf-1000.data --comms systemd` shows one of them.
Do not run it on an ASan build.
"""

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'integration'))

import bench  # noqa: E402  (bwrap_floor_argv, machine_info)

CLK_TCK = os.sysconf('SC_CLK_TCK')


def proc_cpu(pid):
    """Seconds of CPU (user + system) PID has used itself, 0 if it is gone."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, ValueError, IndexError):
        return 0.0


def machine_busy():
    """Seconds of busy CPU of the whole machine, all cores (/proc/stat: all but idle and iowait)."""
    with open('/proc/stat') as f:
        vals = [int(x) for x in f.readline().split()[1:]]
    return (sum(vals[:8]) - vals[3] - vals[4]) / CLK_TCK


class Probe:
    """The processes whose CPU is reported (host pids), and the system's cpuacct cgroup:
    all CPU spent in the system under test and by the client, whatever else the machine
    runs. (Host mode: no such cgroup; the machine's busy CPU stands in.)"""

    def __init__(self, system):
        import harness
        self.system = system
        self.cpuacct = None
        if system.mode == 'namespace':
            top = harness._cgroup_root_of(system.pid)
            d = os.path.join(harness.CGROUP_FS, 'cpuacct', top or '')
            if top and os.path.exists(os.path.join(d, 'cpuacct.usage')):
                self.cpuacct = d
        self.refresh()

    def _main_pid(self, unit):
        pids = self.system.unit_pids(unit) or set()
        return min(pids) if pids else None

    def refresh(self):
        pid1 = self.system.pid if self.system.mode == 'namespace' else 1
        bus = self._main_pid('dbus.service') or self._main_pid('dbus-broker.service')
        self.pids = {'systemd': pid1, 'bus': bus, 'journald': self._main_pid('systemd-journald.service'),
                     'sandboxd': self._main_pid('sandboxd.service')}
        for name, pid in self.pids.items():
            if not pid:
                raise RuntimeError(f'no process found for {name}')

    def sample(self):
        s = {name: proc_cpu(pid) for name, pid in self.pids.items()}
        s['machine'] = machine_busy()
        if self.cpuacct:
            with open(os.path.join(self.cpuacct, 'cpuacct.usage')) as f:
                s['all'] = int(f.read()) / 1e9
        else:
            s['all'] = s['machine']
        return s


def client_run(system, client, probe, args, timeout):
    """One run of the client (in the system's cpuacct cgroup, so that the floors' bwraps,
    which it forks, are counted there too); its JSON with 'cpu_ms' per sandbox beside."""
    def join_cgroup():
        if probe.cpuacct:
            with open(os.path.join(probe.cpuacct, 'cgroup.procs'), 'w') as f:
                f.write(str(os.getpid()))

    before = probe.sample()
    cp = subprocess.run(system.wrap([client] + args), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                        timeout=timeout, preexec_fn=join_cgroup)
    after = probe.sample()
    if cp.returncode != 0:
        raise RuntimeError(f'sandbox-scale {shlex.join(args[:6])} failed ({cp.returncode}):\n{cp.stderr}\n'
                           f'{system.journal()[-5000:]}')
    res = json.loads(cp.stdout)
    n = max(res['count'], 1)
    res['cpu_ms'] = {k: (after[k] - before[k]) * 1000 / n for k in before}
    named = sum(v for k, v in res['cpu_ms'].items() if k not in ('machine', 'all'))
    res['cpu_ms']['rest'] = res['cpu_ms']['all'] - named
    return res


def fmt_row(what, r):
    c = r['cpu_ms']
    create = f'{r["create_median_us"] / 1000:8.1f}' if 'create_median_us' in r else f'{"":8}'
    return (f'  {what:<34}{r["per_sec"]:8.1f}{r["cycle_median_us"] / 1000:8.1f}{create}'
            f'{c["systemd"]:8.2f}{c["bus"]:7.2f}{c["journald"]:7.2f}{c["sandboxd"]:7.2f}{c["rest"]:7.2f}'
            f'{c["all"]:7.2f}{c["machine"]:8.2f}')


HEADER = (f'  {"":<34}{"/s":>8}{"cycle":>8}{"create":>8}{"systemd":>8}{"bus":>7}{"jrnld":>7}{"sbxd":>7}'
          f'{"rest":>7}{"all":>7}{"machine":>8}\n'
          f'  {"":<34}{"":>8}{"ms med":>8}{"ms med":>8}{"CPU ms per sandbox (all cores)":>58}')


def count_left(system):
    """Sandbox scopes left (the harness's pooled sandbox not counted)."""
    return sum(1 for u in system.sandbox_scopes() if u.endswith('.scope'))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('-n', '--count', type=int, default=300, help='sandboxes per throughput run (default 300)')
    ap.add_argument('--inflight', default='1,4,16', help='K values (default 1,4,16)')
    ap.add_argument('--idle', default='0,1000,3000', help='idle sandbox counts (default 0,1000,3000)')
    ap.add_argument('--idle-k', type=int, default=4, help='K for the runs with idle sandboxes (default 4)')
    ap.add_argument('--fill-k', type=int, default=4, help='creates in flight while filling (default 4)')
    ap.add_argument('--template', default='shell')
    ap.add_argument('--json', help='also write the results and machine to this file')
    ap.add_argument('--perf', metavar='DIR',
                    help='perf record (-g) systemd, the bus daemon and sandboxd during each ephemeral run with '
                         'idle sandboxes, into DIR/perf-<idle>.data, and print the top symbols')
    args = ap.parse_args()
    ks = [int(k) for k in args.inflight.split(',') if k]
    idles = sorted(int(i) for i in args.idle.split(',') if i)

    import harness
    system = harness.acquire(docker=False)
    out = {'runs': [], 'idle': []}
    try:
        bw = bench.bwrap_floor_argv(system, args.template)
        client = os.path.join(system.paths.build, 'bench', 'sandbox-scale')
        if not os.access(client, os.X_OK):
            raise RuntimeError(f'{client} is not built (ninja -C {system.paths.build})')
        info = bench.machine_info(system)
        probe = Probe(system)
        print(f'bwrap floor: {shlex.join(bw)}', file=sys.stderr)
        base = ['--template', args.template, '--uid', str(bench.SANDBOX_UID)]
        timeout = 300 + args.count * 5

        def measure(mode, k, n):
            return client_run(system, client, probe,
                              ['--mode', mode, '--inflight', str(k), '--count', str(n)] + base + ['--'] + bw,
                              timeout)

        # Warm up each path once (page cache, first-time costs), untimed.
        for mode in ('ephemeral', 'bwrap', 'systemd-run'):
            measure(mode, 2, 10)
        for k in ks:
            for mode in ('bwrap', 'systemd-run', 'ephemeral'):
                r = measure(mode, k, args.count)
                out['runs'].append(r)
                print(f'K={k} {mode}: {r["per_sec"]:.1f}/s', file=sys.stderr)

        ids_file = os.path.join(system.workdir, 'idle-ids')
        ids_in = 0
        all_ids = []
        for idle in idles:
            fill = None
            if idle > ids_in:
                part = f'{ids_file}.{idle}'
                fill = client_run(system, client, probe,
                                  ['--mode', 'fill', '--inflight', str(args.fill_k), '--count', str(idle - ids_in),
                                   '--ids', part] + base, timeout=600 + idle)
                with open(part) as f:
                    all_ids += f.read().split()
                ids_in = idle
                print(f'filled to {idle} idle sandboxes in {fill["seconds"]:.1f} s', file=sys.stderr)
            probe.refresh()
            rec = perf_start(args.perf, idle, probe) if args.perf else None
            eph = measure('ephemeral', args.idle_k, args.count)
            if rec:
                perf_stop(rec)
            row = {'idle': idle, 'fill': fill,
                   'ephemeral': eph,
                   'systemd-run': measure('systemd-run', args.idle_k, args.count),
                   'sandboxd_rss_kib': rss_kib(probe.pids['sandboxd'])}
            out['idle'].append(row)
            print(f'{idle} idle: ephemeral {row["ephemeral"]["per_sec"]:.1f}/s', file=sys.stderr)
        if all_ids:
            with open(ids_file, 'w') as f:
                f.write('\n'.join(all_ids) + '\n')
            out['drain'] = client_run(system, client, probe,
                                      ['--mode', 'drain', '--inflight', str(args.fill_k), '--ids', ids_file] + base,
                                      timeout=600 + len(all_ids))
            out['left_after_drain'] = count_left(system)
    finally:
        problems = harness.release()
    out['machine'] = info
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(out, f, indent=1)
    report(out, args)
    return 1 if problems else 0


def perf_start(outdir, idle, probe):
    os.makedirs(outdir, exist_ok=True)
    out = os.path.join(os.path.abspath(outdir), f'perf-{idle}.data')
    pids = ','.join(str(probe.pids[k]) for k in ('systemd', 'bus', 'sandboxd'))
    p = subprocess.Popen(['perf', 'record', '-q', '-g', '-F', '499', '-p', pids, '-o', out],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return p, out


def perf_stop(rec):
    import signal
    p, out = rec
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)
    cp = subprocess.run(['perf', 'report', '-i', out, '--stdio', '--no-children', '--sort', 'comm,dso,sym',
                         '-g', 'none', '--percent-limit', '1.5'], capture_output=True, text=True)
    print(f'perf: {out}', file=sys.stderr)
    print('\n'.join(line for line in cp.stdout.splitlines() if line and not line.startswith('#'))[:4000],
          file=sys.stderr)


def rss_kib(pid):
    try:
        with open(f'/proc/{pid}/status') as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def report(out, args):
    info = out['machine']
    print('\nmachine: ' + ', '.join(f'{k}={info[k]}' for k in ('nproc', 'cpu', 'kernel')))
    print(f'date: {info["date"]}; {info["systemd"]}; {info["bwrap"]}; {info["mode"]} mode; '
          f'load average before: {info["loadavg"]}, after: {" ".join(open("/proc/loadavg").read().split()[:3])}')
    print(f'sandboxd: {info["sandboxd"]}, source {info["commit"]}')
    print(f'\nthroughput, {args.count} sandboxes per run, K in flight (bwrap and systemd-run run /bin/true in '
          f'the hardened bwrap; ephemeral is CreateSandbox(Ephemeral) + Exec /bin/true):\n')
    print(HEADER)
    by = {}
    for r in out['runs']:
        by[(r['mode'], r['inflight'])] = r
        print(fmt_row(f'K={r["inflight"]:<3} {r["mode"]}', r))
    print('\nratios of throughput:\n')
    for k in sorted({r['inflight'] for r in out['runs']}):
        e, b, s = by.get(('ephemeral', k)), by.get(('bwrap', k)), by.get(('systemd-run', k))
        if e and b and s:
            rb, rs = e['per_sec'] / b['per_sec'], e['per_sec'] / s['per_sec']
            print(f'  K={k:<3} ephemeral / bwrap {rb:5.2f} (target ≥ 0.8 {"MET" if rb >= 0.8 else "MISSED"})   '
                  f'ephemeral / systemd-run {rs:5.2f} (target ≥ 1.5 {"MET" if rs >= 1.5 else "MISSED"})')
    if out['idle']:
        print(f'\nwith idle sandboxes present, K={args.idle_k}:\n')
        print(HEADER)
        for row in out['idle']:
            print(fmt_row(f'{row["idle"]:>5} idle: ephemeral', row['ephemeral']))
            print(fmt_row(f'{row["idle"]:>5} idle: systemd-run', row['systemd-run']))
        for row in out['idle']:
            f = row['fill']
            if f:
                extra = ''
                if 'create_first100_median_us' in f:
                    extra = (f', create median first 100 {f["create_first100_median_us"] / 1000:.1f} ms, '
                             f'last 100 {f["create_last100_median_us"] / 1000:.1f} ms')
                print(f'  fill to {row["idle"]}: {f["count"]} creates in {f["seconds"]:.1f} s '
                      f'({f["per_sec"]:.1f}/s; systemd {f["cpu_ms"]["systemd"]:.1f} ms CPU each){extra}')
            print(f'  sandboxd RSS with {row["idle"]} idle: {row["sandboxd_rss_kib"] / 1024:.1f} MiB')
        first, last = out['idle'][0], out['idle'][-1]
        if first is not last:
            r = last['ephemeral']['per_sec'] / first['ephemeral']['per_sec']
            rsr = last['systemd-run']['per_sec'] / first['systemd-run']['per_sec']
            print(f'\n  ephemeral with {last["idle"]} idle / with {first["idle"]}: {r:.2f} '
                  f'(target ≥ 0.8 {"MET" if r >= 0.8 else "MISSED"}); systemd-run in sandbox.slice: {rsr:.2f}')
    if 'drain' in out:
        d = out['drain']
        print(f'  destroying the {d["count"]} idle sandboxes: {d["seconds"]:.1f} s ({d["per_sec"]:.1f}/s); '
              f'scopes left: {out["left_after_drain"]}')


if __name__ == '__main__':
    sys.exit(main())
