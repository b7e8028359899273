#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd latency against its floors, measured in one run on this machine.

How to run (as root, after building; the default build dir is build/):

    python3 bench/bench.py                  # 50 runs of each, medians and ratios
    python3 bench/bench.py -n 200
    SANDBOXD_BUILD_DIR=build-release python3 bench/bench.py

It boots a system with tests/integration/harness.py (the host's systemd when it is PID 1,
else one in a PID + mount namespace), starts sandboxd from the build dir, and times,
inside that system, whole processes spawned the same way each time:
  a. bwrap --unshare-all … /bin/true, with the arguments sandboxd gives a shell-template
     sandbox (binds read from templates/shell.json); run as root, where sandboxd runs
     bwrap as the sandbox's own host uid
  b. fork+exec of /bin/true
  c. systemd-run --scope bwrap … /bin/true
  d. sandboxctl run -- /bin/true (create + exec + destroy, end to end)
  e. create + first exec through D-Bus: busctl call CreateSandbox, then busctl call Exec;
     also sandboxctl create + sandboxctl exec
  f. exec of /bin/true in a running sandbox: busctl call Exec; also sandboxctl exec
  p. busctl call … org.freedesktop.DBus.Peer Ping to sandboxd: what starting busctl and
     connecting to the bus costs; e and f are also shown net of it.
Targets (SPEC.md): e ≤ 2 × a, f ≤ 3 × b, and e faster than c.
Do not run it on an ASan build: the figures would measure the sanitizer.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'integration'))

BUS = 'io.sandboxd.Sandbox1'
MANAGER = '/io/sandboxd/Sandbox1'
DEFAULT_BINDS = ['/usr', '/bin', '/sbin', '/lib', '/lib64', '/etc']
DISK_DEFAULT = 1024 ** 3
# The masks of src/core/payload-bwrap.c (masked where they exist).
PROC_MASKS = ['/proc/kcore', '/proc/keys', '/proc/key-users', '/proc/timer_list', '/proc/timer_stats',
              '/proc/sched_debug', '/proc/latency_stats', '/proc/kallsyms', '/proc/config.gz',
              '/proc/kpagecount', '/proc/kpageflags', '/proc/kpagecgroup', '/proc/iomem', '/proc/ioports',
              '/proc/vmallocinfo', '/proc/slabinfo', '/proc/mtrr', '/proc/sysrq-trigger', '/proc/modules',
              '/proc/buddyinfo', '/proc/pagetypeinfo', '/proc/zoneinfo']
PROC_MASK_DIRS = ['/proc/acpi', '/proc/scsi', '/proc/asound', '/proc/bus', '/proc/driver', '/proc/fs',
                  '/proc/irq', '/proc/tty', '/proc/sysvipc']


def bwrap_argv(bwrap, binds, agent):
    """The argv sandboxd builds (bwrap_build_argv() in src/core/payload-bwrap.c; keep them
    alike), running /bin/true instead of the agent."""
    argv = [bwrap, '--unshare-all', '--unshare-user', '--disable-userns', '--uid', '1000', '--gid', '1000',
            '--hostname', 'sandbox', '--cap-drop', 'ALL', '--new-session', '--die-with-parent',
            '--as-pid-1', '--clearenv']
    for b in binds:
        argv += ['--ro-bind-try', b, b]
    argv += ['--proc', '/proc']
    for m in PROC_MASKS:
        if os.path.exists(m):
            argv += ['--ro-bind', '/dev/null', m]
    for m in PROC_MASK_DIRS:
        if os.path.exists(m):
            argv += ['--tmpfs', m, '--remount-ro', m]
    argv += ['--dev', '/dev',
             '--size', str(DISK_DEFAULT), '--perms', '0700', '--tmpfs', '/work',
             '--size', str(DISK_DEFAULT), '--tmpfs', '/tmp',
             '--ro-bind', agent, '/run/sandbox-init',
             '--remount-ro', '/', '--chdir', '/work', '--', '/bin/true']
    return argv


def timed(argv):
    start = time.perf_counter()
    cp = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    took = time.perf_counter() - start
    if cp.returncode != 0:
        raise RuntimeError(f'{argv} failed ({cp.returncode}): {cp.stderr.decode(errors="replace")}')
    return took, cp.stdout.decode()


def measure(n, fn, warmup=3):
    for _ in range(warmup):
        fn()
    return [fn() for _ in range(n)]


def inner(cfg):
    """Runs inside the booted system; prints {name: [seconds…]}."""
    n = cfg['n']
    bw = bwrap_argv(cfg['bwrap'], cfg['binds'], cfg['agent'])
    ctl = cfg['sandboxctl']
    busctl = ['busctl', '--system', '--json=short', 'call', BUS]
    out = {}

    out['a_bwrap'] = measure(n, lambda: timed(bw)[0])
    out['b_fork_exec'] = measure(n, lambda: timed(['/bin/true'])[0])
    out['c_systemd_run_scope_bwrap'] = measure(n, lambda: timed(['systemd-run', '--scope', '--quiet',
                                                                  '--collect'] + bw)[0])
    out['d_sandboxctl_run'] = measure(n, lambda: timed([ctl, 'run', '--', '/bin/true'])[0])
    out['p_busctl_ping'] = measure(n, lambda: timed(['busctl', '--system', 'call', BUS, MANAGER,
                                                     'org.freedesktop.DBus.Peer', 'Ping'])[0])

    def create_first_exec():
        t1, o = timed(busctl + [MANAGER, f'{BUS}.Manager', 'CreateSandbox', 'sa{sv}', 'shell', '0'])
        sid, path = json.loads(o)['data']
        t2, o = timed(busctl + [path, f'{BUS}.Sandbox', 'Exec', 'asa{sv}', '1', '/bin/true', '0'])
        if json.loads(o)['data'][0] != 0:
            raise RuntimeError(f'/bin/true in a sandbox returned {o}')
        timed(busctl + [path, f'{BUS}.Sandbox', 'Destroy'])
        return t1 + t2

    out['e_create_first_exec'] = measure(n, create_first_exec)

    def ctl_create_first_exec():
        t1, o = timed([ctl, 'create'])
        sid = o.strip()
        t2, _o = timed([ctl, 'exec', sid, '--', '/bin/true'])
        timed([ctl, 'destroy', sid])
        return t1 + t2

    out['e_sandboxctl_create_exec'] = measure(n, ctl_create_first_exec)

    _t, o = timed(busctl + [MANAGER, f'{BUS}.Manager', 'CreateSandbox', 'sa{sv}', 'shell', '0'])
    sid, path = json.loads(o)['data']
    try:
        out['f_exec_busctl'] = measure(n, lambda: timed(busctl + [path, f'{BUS}.Sandbox', 'Exec', 'asa{sv}',
                                                                  '1', '/bin/true', '0'])[0])
        out['f_exec_sandboxctl'] = measure(n, lambda: timed([ctl, 'exec', sid, '--', '/bin/true'])[0])
    finally:
        timed(busctl + [path, f'{BUS}.Sandbox', 'Destroy'])
    json.dump(out, sys.stdout)


def report(samples, n):
    med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    ping = med['p_busctl_ping']
    med['e_create_first_exec_net'] = med['e_create_first_exec'] - 2 * ping
    med['f_exec_busctl_net'] = med['f_exec_busctl'] - ping
    rows = [
        ('a', 'bwrap --unshare-all … /bin/true', 'a_bwrap'),
        ('b', 'fork+exec /bin/true', 'b_fork_exec'),
        ('c', 'systemd-run --scope bwrap … /bin/true', 'c_systemd_run_scope_bwrap'),
        ('d', 'sandboxctl run -- /bin/true', 'd_sandboxctl_run'),
        ('e', 'create + first exec, 2 × busctl (raw)', 'e_create_first_exec'),
        ('e', 'create + first exec, net of busctl', 'e_create_first_exec_net'),
        ('e', 'sandboxctl create + sandboxctl exec', 'e_sandboxctl_create_exec'),
        ('f', 'exec in running sandbox, busctl (raw)', 'f_exec_busctl'),
        ('f', 'exec in running sandbox, net of busctl', 'f_exec_busctl_net'),
        ('f', 'sandboxctl exec ID -- /bin/true', 'f_exec_sandboxctl'),
        ('p', 'busctl … Peer.Ping (busctl overhead)', 'p_busctl_ping'),
    ]
    print(f'\nmedians of {n} runs (ms), whole processes, this machine:\n')
    for tag, what, key in rows:
        print(f'  {tag}  {what:<44} {med[key]:8.2f}')

    def ratio(name, num, den, target, ok):
        r = med[num] / med[den]
        print(f'  {name:<58} {r:6.2f}  target {target:<8} {"MET" if ok(r) else "MISSED"}')

    print('\nratios:\n')
    ratio('create+first exec (net) / bare bwrap', 'e_create_first_exec_net', 'a_bwrap', '≤ 2', lambda r: r <= 2)
    ratio('create+first exec (raw) / bare bwrap', 'e_create_first_exec', 'a_bwrap', '≤ 2', lambda r: r <= 2)
    ratio('exec (net) / fork+exec', 'f_exec_busctl_net', 'b_fork_exec', '≤ 3', lambda r: r <= 3)
    ratio('exec (raw) / fork+exec', 'f_exec_busctl', 'b_fork_exec', '≤ 3', lambda r: r <= 3)
    ratio('create+first exec (net) / systemd-run --scope bwrap', 'e_create_first_exec_net',
          'c_systemd_run_scope_bwrap', '< 1', lambda r: r < 1)
    ratio('create+first exec (raw) / systemd-run --scope bwrap', 'e_create_first_exec',
          'c_systemd_run_scope_bwrap', '< 1', lambda r: r < 1)
    ratio('sandboxctl create + exec / systemd-run --scope bwrap', 'e_sandboxctl_create_exec',
          'c_systemd_run_scope_bwrap', '< 1', lambda r: r < 1)
    ratio('sandboxctl exec / fork+exec', 'f_exec_sandboxctl', 'b_fork_exec', '≤ 3', lambda r: r <= 3)
    ratio('sandboxctl run / systemd-run --scope bwrap', 'd_sandboxctl_run', 'c_systemd_run_scope_bwrap',
          '< 1', lambda r: r < 1)
    return med


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('-n', type=int, default=50, help='runs of each measurement (default 50)')
    ap.add_argument('--json', help='also write the raw samples (seconds) to this file')
    ap.add_argument('--inner', help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        inner(json.loads(args.inner))
        return 0

    import harness
    system = harness.acquire()
    try:
        binds = DEFAULT_BINDS
        shell = os.path.join(system.paths.templates, 'shell.json')
        if os.path.exists(shell):
            with open(shell) as f:
                binds = json.load(f).get('ro_binds', binds)
        cfg = {'n': args.n, 'bwrap': system.paths.bwrap, 'binds': binds, 'agent': system.paths.sandbox_init,
               'sandboxctl': system.paths.sandboxctl}
        cp = system.run([sys.executable, os.path.abspath(__file__), '--inner', json.dumps(cfg)],
                        timeout=60 + args.n * 10)
        if cp.returncode != 0:
            print(cp.stderr, file=sys.stderr)
            return 1
        samples = json.loads(cp.stdout)
    finally:
        problems = harness.release()
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(samples, f)
    print(f'system: {system.mode} mode; sandboxd from {system.paths.sandboxd}')
    report(samples, args.n)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
