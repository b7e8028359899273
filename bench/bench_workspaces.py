#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Workspaces on disk against tmpfs, measured in one run in one systemd (docs/WORKSPACES.md).

How to run (as root, after building; the default build dir is build/):

    python3 bench/bench_workspaces.py              # 20 rounds, 1 GiB files
    python3 bench/bench_workspaces.py -n 50 --size-mib 2048 --json out.json

It boots a system with tests/integration/harness.py (its workspace pool is a loop-backed
btrfs image, as on a machine whose root is ext4) and measures, through sandboxctl:
  create+exec   create (--storage=disk | tmpfs), then the first exec of /bin/true; medians
  run           sandboxctl run (an ephemeral sandbox: create, exec, destroy); medians
  write, read   dd of SIZE in /work (conv=fsync; read back with O_DIRECT) against the same
                file system used directly on the host (a subvolume of the pool): the ratio
                is the cost of being in a sandbox (target >= 0.9)
  fork          sandboxctl fork of a sandbox holding SIZE in /work: on disk a snapshot of
                its workspace, in memory (tmpfs) a copy through a compressed archive
  destroy       sandboxctl destroy of a workspace of FILES empty files (default a million),
                while another sandbox runs execs of /bin/true back to back: the destroy's
                time, the execs' latency before and while the kernel drops the tree, and
                how long it takes to (btrfs subvolume sync)

    python3 bench/bench_workspaces.py --only destroy --files 1000000
"""

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'integration'))


def ctl(system, *args, timeout=600):
    cp = system.sandboxctl(*args, timeout=timeout)
    if cp.returncode != 0:
        raise RuntimeError(f'sandboxctl {" ".join(args)} failed: {cp.stderr}')
    return cp.stdout


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return time.monotonic() - t0, out


def dd_rate(text):
    """MB/s from dd's last line ('..., 1.2 s, 900 MB/s' or GB/s)."""
    m = re.search(r'([\d.,]+) ([kMG]?B)/s', text.strip().splitlines()[-1])
    if not m:
        raise RuntimeError(f'no rate in dd output: {text!r}')
    v = float(m.group(1).replace(',', '.'))
    return v * {'kB': 1e-3, 'B': 1e-6, 'MB': 1, 'GB': 1e3}[m.group(2)]


def create_exec(system, storage, n):
    times = []
    for _ in range(n):
        def go():
            sid = ctl(system, 'create', f'--storage={storage}', '--memory=512M', '--disk=256M').strip()
            ctl(system, 'exec', sid, '--', 'true')
            return sid
        t, sid = timed(go)
        times.append(t)
        ctl(system, 'destroy', sid)
    return statistics.median(times) * 1000


def run_ephemeral(system, storage, n):
    times = [timed(lambda: ctl(system, 'run', f'--storage={storage}', '--memory=512M', '--disk=256M',
                               '--', 'true'))[0] for _ in range(n)]
    return statistics.median(times) * 1000


def seq_io_once(system, size_mib):
    sid = ctl(system, 'create', '--storage=disk', '--memory=256M', f'--disk={size_mib * 2}M').strip()
    try:
        w = ctl(system, 'exec', sid, '--', 'sh', '-c',
                f'dd if=/dev/zero of=/work/f bs=1M count={size_mib} conv=fsync 2>&1')
        r = ctl(system, 'exec', sid, '--', 'sh', '-c', 'dd if=/work/f of=/dev/null bs=1M iflag=direct 2>&1')
    finally:
        ctl(system, 'destroy', sid)
    host = f'{system.workspace_dir}/bench-host'
    system.run(['btrfs', 'subvolume', 'create', host], check=True)
    try:
        hw = system.run(['sh', '-c', f'dd if=/dev/zero of={host}/f bs=1M count={size_mib} conv=fsync 2>&1'],
                        timeout=600, check=True).stdout
        hr = system.run(['sh', '-c', f'dd if={host}/f of=/dev/null bs=1M iflag=direct 2>&1'],
                        timeout=600, check=True).stdout
    finally:
        system.run(['btrfs', 'subvolume', 'delete', host])
    return dd_rate(w), dd_rate(hw), dd_rate(r), dd_rate(hr)


def seq_io(system, size_mib, rounds):
    """Medians of ROUNDS alternated runs, sandbox then host: one run of each varies by
    ±20 % on a shared 2-core VM (the 0.84 of the first run was one such sample)."""
    runs = [seq_io_once(system, size_mib) for _ in range(rounds)]
    return tuple(statistics.median(r[i] for r in runs) for i in range(4))


def fork(system, storage, size_mib):
    opts = ['--storage=disk', f'--disk={size_mib * 2}M'] if storage == 'disk' else \
        ['--storage=tmpfs', f'--memory={size_mib * 2 + 512}M', f'--disk={size_mib + 64}M']
    sid = ctl(system, 'create', *opts).strip()
    try:
        ctl(system, 'exec', sid, '--', 'sh', '-c',
            f'head -c 1M /dev/urandom > /work/f && head -c {size_mib - 1}M /dev/zero >> /work/f && sync')
        t, out = timed(lambda: ctl(system, 'fork', sid))
        ctl(system, 'destroy', out.strip())
    finally:
        ctl(system, 'destroy', sid)
    return t * 1000


def exec_latencies(system, sid, seconds=None, count=None):
    """Wall times of execs of /bin/true in sid, back to back, for SECONDS or COUNT of them."""
    times, end = [], time.monotonic() + (seconds or 0)
    while (count and len(times) < count) or (seconds and time.monotonic() < end):
        t, _ = timed(lambda: ctl(system, 'exec', sid, '--', 'true'))
        times.append(t * 1000)
    return times


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))]


def destroy_many(system, files):
    """A workspace of FILES empty files destroyed while another sandbox runs execs."""
    import threading
    sid = ctl(system, 'create', '--storage=disk', f'--disk={max(1024, files // 2000)}M').strip()
    other = ctl(system, 'create', '--storage=disk').strip()
    try:
        fill, _ = timed(lambda: ctl(system, 'exec', sid, '--', 'sh', '-c',
                                    f'mkdir /work/d && cd /work/d && seq 1 {files} | xargs touch && sync',
                                    timeout=3600))
        before = exec_latencies(system, other, count=30)
        during, done = [], threading.Event()

        def sample():
            while not done.is_set():
                during.extend(exec_latencies(system, other, count=1))
        th = threading.Thread(target=sample)
        th.start()
        t_destroy, _ = timed(lambda: ctl(system, 'destroy', sid))
        # Until the kernel has dropped the tree: every deletion in the pool done.
        t_gone, _ = timed(lambda: system.run(['btrfs', 'subvolume', 'sync', system.workspace_dir], timeout=3600))
        done.set()
        th.join()
    finally:
        ctl(system, 'destroy', other)
        system.sandboxctl('destroy', sid)  # gone already, unless something failed
    return {'files': files, 'fill_s': fill, 'destroy_ms': t_destroy * 1000, 'dropped_s': t_destroy + t_gone,
            'exec_ms_before_p50': pct(before, 0.5), 'exec_ms_before_p90': pct(before, 0.9),
            'exec_ms_during_p50': pct(during, 0.5), 'exec_ms_during_p90': pct(during, 0.9),
            'execs_during': len(during)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('-n', '--count', type=int, default=20, help='rounds of create+exec and run (default 20)')
    ap.add_argument('--size-mib', type=int, default=1024, help='file size for write, read, fork (default 1024)')
    ap.add_argument('--io-rounds', type=int, default=5, help='alternated write/read runs, medians (default 5)')
    ap.add_argument('--files', type=int, default=1000000, help='files in the destroyed workspace (default 1000000)')
    ap.add_argument('--only', default='create,run,io,fork,destroy',
                    help='what to measure, of create,run,io,fork,destroy (default all)')
    ap.add_argument('--json', help='also write the results to this file')
    args = ap.parse_args()
    only = set(args.only.split(','))

    import harness
    system = harness.acquire(docker=False)
    res = {}
    # The copy (tmpfs) fork goes through a snapshot archive: a directory for them that the
    # unit (ProtectSystem=strict) may write.
    snapdir = tempfile.mkdtemp(prefix='sandboxd-bench-snapshots-', dir='/var/lib')
    with open(system.path('/run/systemd/system/sandboxd.service.d/70-bench-snapshots.conf'), 'w') as f:
        f.write(f'{harness.MARKER}\n[Service]\nReadWritePaths={snapdir}\n')
    system.configure_daemon(f'[Snapshots]\nDirectory={snapdir}/snapshots\n')
    try:
        for storage in ('disk', 'tmpfs'):
            if 'create' in only:
                res[f'create_exec_ms_{storage}'] = create_exec(system, storage, args.count)
            if 'run' in only:
                res[f'run_ms_{storage}'] = run_ephemeral(system, storage, args.count)
        if 'io' in only:
            w, hw, r, hr = seq_io(system, args.size_mib, args.io_rounds)
            res.update(write_mbs_work=w, write_mbs_host=hw, write_ratio=w / hw,
                       read_mbs_work=r, read_mbs_host=hr, read_ratio=r / hr)
        for storage in ('disk', 'tmpfs'):
            if 'fork' in only:
                res[f'fork_ms_{storage}'] = fork(system, storage, args.size_mib)
        if 'destroy' in only:
            res['destroy'] = destroy_many(system, args.files)
    finally:
        harness.release()
        shutil.rmtree(snapdir, ignore_errors=True)

    if 'create' in only:
        print(f'create + first exec (median of {args.count}): disk {res["create_exec_ms_disk"]:.1f} ms, '
              f'tmpfs {res["create_exec_ms_tmpfs"]:.1f} ms')
    if 'run' in only:
        print(f'sandboxctl run (ephemeral, median of {args.count}): disk {res["run_ms_disk"]:.1f} ms, '
              f'tmpfs {res["run_ms_tmpfs"]:.1f} ms')
    if 'io' in only:
        print(f'sequential write {args.size_mib} MiB (fsync, median of {args.io_rounds}): /work {res["write_mbs_work"]:.0f} MB/s, '
              f'host {res["write_mbs_host"]:.0f} MB/s, ratio {res["write_ratio"]:.2f}')
        print(f'sequential read {args.size_mib} MiB (O_DIRECT, median of {args.io_rounds}): /work {res["read_mbs_work"]:.0f} MB/s, '
              f'host {res["read_mbs_host"]:.0f} MB/s, ratio {res["read_ratio"]:.2f}')
    if 'fork' in only:
        print(f'fork of {args.size_mib} MiB: snapshot (disk) {res["fork_ms_disk"]:.0f} ms, '
              f'copy (tmpfs) {res["fork_ms_tmpfs"]:.0f} ms')
    if 'destroy' in only:
        d = res['destroy']
        print(f'destroy of {d["files"]} files (made in {d["fill_s"]:.0f} s): answered in {d["destroy_ms"]:.0f} ms, '
              f'tree dropped by the kernel after {d["dropped_s"]:.1f} s; exec in another sandbox p50/p90 '
              f'{d["exec_ms_before_p50"]:.0f}/{d["exec_ms_before_p90"]:.0f} ms before, '
              f'{d["exec_ms_during_p50"]:.0f}/{d["exec_ms_during_p90"]:.0f} ms during ({d["execs_during"]} execs)')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(res, f, indent=2)


if __name__ == '__main__':
    main()
