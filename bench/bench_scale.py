#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd's ephemeral throughput at K in flight against its floors, and with thousands of
idle sandboxes present, measured in one run in one systemd.

How to run (as root, after building; the default build dir is build/):

    python3 bench/bench_scale.py                       # K = 1, 4, 16; 0, 1000, 3000 idle
    python3 bench/bench_scale.py -n 200 --idle 0,1000  # fewer
    python3 bench/bench_scale.py --idle 0,1000 --inflight 4 --perf DIR   # and where the CPU goes
    python3 bench/bench_scale.py --idle 0,10000 --inflight '' --memory   # 10,000 at once: memory
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
idle sandboxes are destroyed (timed) and the system torn down. The bare bwrap floor is
run again at each idle count too: what the kernel's own per-sandbox work does to it
(pivot_root walks every task of the machine; bwrap's --disable-userns looks up
/proc/sys/user/max_user_namespaces, whose dentries of all the live user namespaces share
one hash chain) is not sandboxd's, and the ratio ephemeral ÷ bwrap at the same idle count
says what is. With --memory, memory is sampled before the first fill and after each
(see memory_sample()): per idle sandbox, the host's MemAvailable drop (the whole machine:
other load moves it, so it is printed beside the rest), the growth of the memory cgroup of
the system under test (every process in it and the kernel memory charged to them: the
sandboxes, systemd, the bus, journald, sandboxd), of sandbox.slice's alone, and of the
kernel's unreclaimable slab (namespaces, mounts, superblocks: not all of it is charged to
a cgroup); and the RSS of sandboxd, systemd, the bus daemon and journald. Idle counts above
sandboxd's default maximum (4,096) raise it for this system only: a drop-in with
--max-sandboxes= and FileDescriptorStoreMax= (each persistent sandbox's control socket is
kept in systemd's fd store). Each idle sandbox is two processes (bwrap's monitor and
sandbox-init) of the machine's pid_max: the bench says what is short instead of starting.
With --perf DIR, each
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


def count_left(system, timeout=60):
    """Sandbox scopes left (the harness's pooled sandbox not counted), once the stops
    under way are done: a destroy or a RemoveTemplate answers before systemd has stopped
    the units (a recycling template's kept sandboxes were still "deactivating" when this
    counted at once, the "12 left" of issue 27). What is still there after TIMEOUT
    seconds is named on stderr."""
    deadline = time.monotonic() + timeout
    while True:
        left = [u for u in system.sandbox_scopes() if u.endswith('.scope')]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if left:
        cp = system.systemctl('list-units', '--all', '--plain', '--no-legend', *left)
        print(f'scopes left after {timeout} s:\n{cp.stdout}', file=sys.stderr)
    return len(left)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('-n', '--count', type=int, default=300, help='sandboxes per throughput run (default 300)')
    ap.add_argument('--inflight', default='1,4,16', help='K values (default 1,4,16)')
    ap.add_argument('--idle', default='0,1000,3000', help='idle sandbox counts (default 0,1000,3000)')
    ap.add_argument('--idle-k', type=int, default=4, help='K for the runs with idle sandboxes (default 4)')
    ap.add_argument('--fill-k', type=int, default=4, help='creates in flight while filling (default 4)')
    ap.add_argument('--template', default='shell')
    ap.add_argument('--json', help='also write the results and machine to this file')
    ap.add_argument('--memory', action='store_true',
                    help='sample host, cgroup and process memory before the first fill and after each chunk')
    ap.add_argument('--chunk', type=int, default=500,
                    help='with --memory, fill in chunks of this many, sampling memory after each (default 500)')
    ap.add_argument('--mem-floor', type=int, default=4096, metavar='MIB',
                    help='with --memory, stop filling when the host\'s MemAvailable falls below this (default 4096)')
    ap.add_argument('--perf', metavar='DIR',
                    help='perf record (-g) systemd, the bus daemon and sandboxd during each ephemeral run with '
                         'idle sandboxes, into DIR/perf-<idle>.data, and print the top symbols')
    args = ap.parse_args()
    ks = [int(k) for k in args.inflight.split(',') if k]
    idles = sorted(int(i) for i in args.idle.split(',') if i)

    import harness
    check_room(max(idles, default=0), guarded=args.memory)
    system = harness.acquire(docker=False)
    out = {'runs': [], 'idle': [], 'curve': []}
    try:
        if max(idles, default=0) > SANDBOX_MAX_DEFAULT - 96:
            raise_max_sandboxes(system, max(idles) + 256)
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
        mem0 = memory_sample(system, probe) if args.memory else None
        if args.memory:
            out['memcg_kib'] = memcg_kernel_cost(system)
        for idle in idles:
            fill = stop = None
            if idle > ids_in:
                fill, ids_in, stop = fill_to(system, client, probe, args, base, ids_file, ids_in, idle, all_ids,
                                             mem0, out['curve'])
                if fill:
                    print(f'filled to {ids_in} idle sandboxes in {fill["seconds"]:.1f} s', file=sys.stderr)
            probe.refresh()
            mem = None
            if mem0 and ids_in > 0:
                time.sleep(5)  # the last creates' deferred work (journald, systemd's GC) done
                mem = memory_delta(mem0, memory_sample(system, probe), ids_in)
            if ids_in < idle:
                out['stopped'] = stop or f'stopped filling at {ids_in} of {idle} idle sandboxes'
                print(out['stopped'], file=sys.stderr)
                idle = ids_in
            rec = perf_start(args.perf, idle, probe) if args.perf else None
            eph = measure('ephemeral', args.idle_k, args.count)
            if rec:
                perf_stop(rec)
            row = {'idle': idle, 'fill': fill, 'memory': mem,
                   'ephemeral': eph,
                   'bwrap': measure('bwrap', args.idle_k, args.count),
                   'systemd-run': measure('systemd-run', args.idle_k, args.count),
                   'sandboxd_rss_kib': rss_kib(probe.pids['sandboxd'])}
            out['idle'].append(row)
            print(f'{idle} idle: ephemeral {row["ephemeral"]["per_sec"]:.1f}/s', file=sys.stderr)
            if 'stopped' in out:
                break
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


SANDBOX_MAX_DEFAULT = 4096  # sandboxd's --max-sandboxes default (src/core/manager.h)
TASKS_PER_IDLE_SANDBOX = 2  # bwrap's monitor and sandbox-init


def meminfo():
    with open('/proc/meminfo') as f:
        return {line.split(':')[0]: int(line.split()[1]) * 1024 for line in f}


def check_room(idle, guarded=False):
    """Refuse to start what the machine cannot hold: pids (the kernel's pid_max, shared
    with everything else running) and, unless --memory watches it chunk by chunk, memory
    (2 MiB per sandbox, a margin over the issue's 1.5, and 1 GiB)."""
    if idle <= 0:
        return
    with open('/proc/sys/kernel/pid_max') as f:
        pid_max = int(f.read())
    with open('/proc/loadavg') as f:
        tasks = int(f.read().split()[3].split('/')[1])
    need = idle * TASKS_PER_IDLE_SANDBOX + 2000
    if tasks + need > pid_max:
        raise SystemExit(f'bench_scale: {idle} idle sandboxes need about {need} more tasks; the machine runs '
                         f'{tasks} of kernel.pid_max={pid_max}. Raise it (sysctl kernel.pid_max=...) or ask for fewer.')
    avail = meminfo()['MemAvailable']
    if not guarded and avail < idle * 2 * 2**20 + 2**30:
        raise SystemExit(f'bench_scale: {idle} idle sandboxes may need {idle * 2} MiB; '
                         f'MemAvailable is {avail // 2**20} MiB.')


def raise_max_sandboxes(system, n):
    """sandboxd of this system only: --max-sandboxes=N and room for N control sockets in
    its fd store, through a drop-in after the harness's (restarts it)."""
    import harness
    dropin = system.path('/run/systemd/system/sandboxd.service.d/70-bench-scale.conf')
    lines = ['[Service]', 'ExecStart=',
             'ExecStart=' + ' '.join(harness._systemd_quote(a) for a in system.exec_start + [f'--max-sandboxes={n}']),
             f'FileDescriptorStoreMax={n + 64}']
    with open(dropin, 'w') as f:
        f.write(harness.MARKER + '\n' + '\n'.join(lines) + '\n')
    system.installed.append(dropin)
    system.systemctl('daemon-reload', check=True)
    cp = system.systemctl('stop', 'sandboxd.service', timeout=90)
    if cp.returncode != 0:
        raise RuntimeError(f'systemctl stop sandboxd failed: {cp.stderr}')
    system.start_daemon()
    print(f'sandboxd restarted with --max-sandboxes={n}, FileDescriptorStoreMax={n + 64}', file=sys.stderr)


def cgroup_memory(system, sub=''):
    """Bytes charged to the memory cgroup of the system under test (namespace mode), or to
    SUB below it: cgroup v1's memory.usage_in_bytes minus its page cache (files read: not
    the sandboxes' own), or v2's memory.current minus file. None where there is none."""
    import harness
    top = harness._cgroup_root_of(system.pid) if system.mode == 'namespace' else None
    if not top:
        return None
    for d, usage, stat, cache in ((os.path.join(harness.CGROUP_FS, 'memory', top, sub), 'memory.usage_in_bytes',
                                   'memory.stat', 'total_cache'),
                                  (os.path.join(harness.CGROUP_FS, 'unified', top, sub), 'memory.current',
                                   'memory.stat', 'file')):
        try:
            with open(os.path.join(d, usage)) as f:
                used = int(f.read())
            with open(os.path.join(d, stat)) as f:
                st = dict(line.split() for line in f)
        except OSError:
            continue
        # tmpfs pages (the sandboxes' /work, /tmp, /dev) count as cache but are theirs.
        shmem = int(st.get('total_shmem', st.get('shmem', 0)))
        return used - int(st.get(cache, 0)) + shmem
    return None


def slab_bytes(cache):
    """Bytes of the kernel's slab cache CACHE (/proc/slabinfo: active objects × size), 0 if
    it is not there. kmalloc-1k is where the kernel keeps each memory cgroup's state of
    every shrinker (one per superblock): see docs/ARCHITECTURE.md, "Many sandboxes"."""
    try:
        with open('/proc/slabinfo') as f:
            for line in f:
                v = line.split()
                if v and v[0] == cache:
                    return int(v[1]) * int(v[3])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def memcg_kernel_cost(system, n=50):
    """KiB of kmalloc-1k that one new, empty memory cgroup costs on this machine now: the
    floor under every sandbox's memory (each scope is one). Most of it is the kernel's
    state for every shrinker id (one per superblock) the machine has had at once since it
    booted (docs/ARCHITECTURE.md, "Many sandboxes"), so it is a property of the machine's
    history, measured here beside the rest. None where there is no v1 memory hierarchy of
    the system under test to make them in."""
    import harness
    top = harness._cgroup_root_of(system.pid) if system.mode == 'namespace' else None
    base = os.path.join(harness.CGROUP_FS, 'memory', top or '', f'bench-memcg-probe-{os.getpid()}')
    if not top or not os.path.isdir(os.path.dirname(base)):
        return None
    made = []
    try:
        os.mkdir(base)
        made.append(base)
        before = slab_bytes('kmalloc-1k')
        for i in range(n):
            os.mkdir(os.path.join(base, str(i)))
            made.append(os.path.join(base, str(i)))
        return (slab_bytes('kmalloc-1k') - before) / n / 1024
    except OSError:
        return None
    finally:
        for d in reversed(made):
            try:
                os.rmdir(d)
            except OSError:
                pass


def memory_sample(system, probe):
    m = meminfo()
    s = {'MemAvailable': m['MemAvailable'], 'SUnreclaim': m.get('SUnreclaim', 0),
         'kmalloc_1k': slab_bytes('kmalloc-1k'),
         'system_cgroup': cgroup_memory(system), 'sandbox_slice': cgroup_memory(system, 'sandbox.slice')}
    for name, pid in probe.pids.items():
        s[f'rss_{name}'] = rss_kib(pid) * 1024
    return s


def memory_delta(before, after, n):
    """KiB per sandbox of each figure, and the absolute RSS after."""
    d = {}
    for k in before:
        if before[k] is None or after[k] is None:
            continue
        d[k] = ((before[k] - after[k]) if k == 'MemAvailable' else (after[k] - before[k])) / n / 1024
    d['rss_after_kib'] = {k[4:]: after[k] / 1024 for k in after if k.startswith('rss_')}
    return d


def fill_to(system, client, probe, args, base, ids_file, ids_in, idle, all_ids, mem0, curve):
    """Persistent sandboxes from ids_in up to idle, K in flight: at once, or with --memory
    in chunks with the memory sampled after each (the curve: per sandbox, does it grow
    with the sandboxes there?), stopping early below --mem-floor. Returns the fill's
    figures (the first 100 creates' median from the first chunk, the last 100's from the
    last), how many there are now, and why it stopped short (None if it did not)."""
    chunk = args.chunk if mem0 else idle - ids_in
    total = None
    while ids_in < idle:
        n = min(chunk, idle - ids_in)
        part = f'{ids_file}.{ids_in + n}'
        try:
            r = client_run(system, client, probe,
                           ['--mode', 'fill', '--inflight', str(args.fill_k), '--count', str(n), '--ids', part] + base,
                           timeout=600 + n)
        except RuntimeError as e:
            # A create refused or failed (a start past its timeout on a loaded machine, say):
            # the filling stops there, and the run goes on with what was made (the client
            # wrote each id as it came).
            made = []
            if os.path.exists(part):
                with open(part) as f:
                    made = f.read().split()
            all_ids += made
            ids_in += len(made)
            why = next((line for line in str(e).splitlines()[1:] if line.strip()), str(e))
            return total, ids_in, f'stopped filling at {ids_in} idle sandboxes: {why}'
        with open(part) as f:
            all_ids += f.read().split()
        ids_in += n
        if total is None:
            total = dict(r)
        else:
            secs = total['seconds'] + r['seconds']
            total['cpu_ms'] = {k: (total['cpu_ms'][k] * total['count'] + r['cpu_ms'][k] * n) / (total['count'] + n)
                               for k in total['cpu_ms']}
            total.update(count=total['count'] + n, seconds=secs, per_sec=(total['count'] + n) / secs,
                         create_last100_median_us=r.get('create_last100_median_us'))
        if mem0:
            m = memory_sample(system, probe)
            curve.append({'idle': ids_in, 'create_median_us': r.get('create_median_us'),
                          'per_sec': r['per_sec'], 'systemd_cpu_ms': r['cpu_ms']['systemd'],
                          'memory': memory_delta(mem0, m, ids_in)})
            c = curve[-1]['memory']
            print(f'  {ids_in} idle: {r["per_sec"]:.1f}/s, MemAvailable {m["MemAvailable"] >> 20} MiB, per sandbox: '
                  f'host {c["MemAvailable"] / 1024:.2f} MiB, cgroup {c.get("system_cgroup", 0) / 1024:.2f} MiB, '
                  f'slab {c["SUnreclaim"] / 1024:.2f} MiB (kmalloc-1k {c["kmalloc_1k"] / 1024:.2f}); sandboxd RSS {c["rss_after_kib"]["sandboxd"] / 1024:.1f} MiB',
                  file=sys.stderr)
            if m['MemAvailable'] < args.mem_floor * 2**20:
                return total, ids_in, (f'stopped filling at {ids_in} of {idle} idle sandboxes: MemAvailable '
                                       f'below --mem-floor ({args.mem_floor} MiB)')
    return total, ids_in, None


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
            print(fmt_row(f'{row["idle"]:>5} idle: bwrap', row['bwrap']))
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
            mem = row.get('memory')
            if mem:
                mib = 1024
                print(f'  memory per idle sandbox at {row["idle"]}: host (MemAvailable drop) '
                      f'{mem["MemAvailable"] / mib:.2f} MiB (target ≤ 1.5 '
                      f'{"MET" if mem["MemAvailable"] / mib <= 1.5 else "MISSED"}); system under test\'s cgroup '
                      f'{mem.get("system_cgroup", float("nan")) / mib:.2f} MiB, of it sandbox.slice '
                      f'{mem.get("sandbox_slice", float("nan")) / mib:.2f} MiB; kernel unreclaimable slab '
                      f'{mem["SUnreclaim"] / mib:.2f} MiB (of it kmalloc-1k {mem["kmalloc_1k"] / mib:.2f}); RSS growth: sandboxd {mem["rss_sandboxd"]:.1f} KiB, '
                      f'systemd {mem["rss_systemd"]:.1f} KiB, bus {mem["rss_bus"]:.1f} KiB, '
                      f'journald {mem["rss_journald"]:.1f} KiB')
                if out.get('memcg_kib') is not None:
                    print(f'  of that, the kernel\'s state for one new memory cgroup (each sandbox\'s scope is '
                          f'one), measured alone: {out["memcg_kib"] / mib:.2f} MiB of kmalloc-1k - sized by '
                          f'the most superblocks this machine has had at once since it booted')
                rss = mem['rss_after_kib']
                print(f'  RSS at {row["idle"]}: sandboxd {rss["sandboxd"] / mib:.1f} MiB (target < 50 '
                      f'{"MET" if rss["sandboxd"] / mib < 50 else "MISSED"}), systemd {rss["systemd"] / mib:.1f} MiB, '
                      f'bus {rss["bus"] / mib:.1f} MiB, journald {rss["journald"] / mib:.1f} MiB')
        first, last = out['idle'][0], out['idle'][-1]
        if first is not last:
            r = last['ephemeral']['per_sec'] / first['ephemeral']['per_sec']
            rsr = last['systemd-run']['per_sec'] / first['systemd-run']['per_sec']
            rbw = last['bwrap']['per_sec'] / first['bwrap']['per_sec']
            print(f'\n  ephemeral with {last["idle"]} idle / with {first["idle"]}: {r:.2f} '
                  f'(target ≥ 0.8 {"MET" if r >= 0.8 else "MISSED"}); systemd-run in sandbox.slice: {rsr:.2f}; '
                  f'the bare bwrap floor: {rbw:.2f}')
            for row in out['idle']:
                print(f'  ephemeral / bwrap with {row["idle"]} idle: '
                      f'{row["ephemeral"]["per_sec"] / row["bwrap"]["per_sec"]:.2f}')
    if out.get('curve'):
        print('\n  filling, chunk by chunk: idle sandboxes, creates per s, create median ms, systemd CPU ms per '
              'create; memory per idle sandbox so far (MiB): host, system cgroup, unreclaimable slab (of it '
              'kmalloc-1k); sandboxd RSS MiB')
        for c in out['curve']:
            m = c['memory']
            print(f'  {c["idle"]:>6} {c["per_sec"]:7.1f} {c["create_median_us"] / 1000:8.1f} {c["systemd_cpu_ms"]:7.1f}'
                  f'   {m["MemAvailable"] / 1024:6.2f} {m.get("system_cgroup", float("nan")) / 1024:6.2f} '
                  f'{m["SUnreclaim"] / 1024:6.2f} ({m["kmalloc_1k"] / 1024:5.2f})   '
                  f'{m["rss_after_kib"]["sandboxd"] / 1024:6.1f}')
    if out.get('stopped'):
        print(f'  {out["stopped"]}')
    if 'drain' in out:
        d = out['drain']
        print(f'  destroying the {d["count"]} idle sandboxes: {d["seconds"]:.1f} s ({d["per_sec"]:.1f}/s); '
              f'scopes left: {out["left_after_drain"]}')


if __name__ == '__main__':
    sys.exit(main())
