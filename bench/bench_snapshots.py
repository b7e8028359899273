#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Snapshot and restore of a sandbox's /work holding 100 MiB of mixed files, against
`tar --zstd` of the same tree on the host, in the same run.

    python3 bench/bench_snapshots.py             # 5 rounds
    python3 bench/bench_snapshots.py --rounds 10

It boots a system with tests/integration/harness.py (as bench/bench.py does) and points
sandboxd's [Snapshots] Directory= at the system's /run (a tmpfs, as /work is). The tree,
made by the same seeded script in the sandbox and on the host (in a tmpfs of our own):
30 MiB of random bytes in 30 files (incompressible), 40 MiB of text in 40 files
(compressible), 20 MiB in 5000 small files of either kind, a 10 MiB sparse file with 1 MiB
of data, and 500 symlinks. Measured:

  - snapshot: Snapshot's round trip over varlink (freeze, the agent's archive, the stream
    spliced to disk, the record), against `tar --zstd -cf` of the host's tree;
  - restore: CreateSandbox with FromSnapshot minus a plain CreateSandbox of the same
    template (the time the restore adds), against `tar --zstd -xf` into an empty tmpfs;
  - size: the stream's bytes, against the host's archive.

libarchive's zstd filter and GNU tar's --zstd both use zstd's default level (3).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'integration'))

MiB = 1024 * 1024
SNAPDIR = '/run/sandboxd-test-state/bench-snapshots'

MAKE_TREE = r'''
import os, random, sys
root = sys.argv[1]
rnd = random.Random(19)
words = [bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 10))) for _ in range(5000)]
def text(n):
    out = bytearray()
    while len(out) < n:
        out += b" ".join(rnd.choice(words) for _ in range(12)) + b"\n"
    return bytes(out[:n])
def randbytes(n):
    return rnd.getrandbits(8 * n).to_bytes(n, "little")
os.makedirs(f"{root}/random"); os.makedirs(f"{root}/text"); os.makedirs(f"{root}/small")
for i in range(30):
    open(f"{root}/random/{i}.bin", "wb").write(randbytes(1 << 20))
for i in range(40):
    open(f"{root}/text/{i}.txt", "wb").write(text(1 << 20))
for i in range(5000):
    d = f"{root}/small/{i % 50}"
    os.makedirs(d, exist_ok=True)
    n = (20 << 20) // 5000
    open(f"{d}/{i}", "wb").write(text(n) if i % 2 else randbytes(n))
with open(f"{root}/sparse", "wb") as f:
    for k in range(10):
        f.seek(k << 20)
        f.write(randbytes(100 << 10))
    f.truncate(10 << 20)
for i in range(500):
    os.symlink(f"small/{i % 50}/{i}", f"{root}/link{i}")
'''


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return time.monotonic() - t0, out


def call(system, method, parameters=None):
    replies, error, params = system.varlink_call(method, parameters, timeout=600)
    if error:
        raise RuntimeError(f'{method} failed: {error} {params}')
    return replies[0]


def host_tar(rounds):
    """(create seconds, extract seconds, archive bytes) per round, on a tmpfs of our own."""
    results = []
    base = tempfile.mkdtemp(prefix='bench-snapshots-', dir='/var/tmp')
    try:
        subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1G', 'tmpfs', base], check=True)
        try:
            src, dst, out = f'{base}/src', f'{base}/dst', f'{base}/tree.tar.zst'
            subprocess.run([sys.executable, '-c', MAKE_TREE, src], check=True)
            for _ in range(rounds):
                subprocess.run(['rm', '-rf', dst, out], check=True)
                os.mkdir(dst)
                c, _ = timed(lambda: subprocess.run(['tar', '--zstd', '-cf', out, '-C', src, '.'], check=True))
                x, _ = timed(lambda: subprocess.run(['tar', '--zstd', '-xf', out, '-C', dst], check=True))
                results.append((c, x, os.path.getsize(out)))
        finally:
            subprocess.run(['umount', base], check=True)
    finally:
        os.rmdir(base)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--rounds', type=int, default=5)
    args = ap.parse_args()

    import harness
    system = harness.acquire(docker=False)
    snap_s, restore_s, create_s, sizes, content = [], [], [], [], 0
    try:
        system.configure_daemon(f'[Snapshots]\nDirectory={SNAPDIR}\nMaxBytesPerOwner=0\nMaxPerOwner=0\n')
        opts = {'DiskMax': 512 * MiB, 'MemoryMax': 512 * MiB}
        src = call(system, 'CreateSandbox', {'template': 'shell', 'options': opts})['id']
        try:
            cp = system.sandboxctl('exec', '--timeout', '600', src, '--', 'python3', '-c', MAKE_TREE, '/work/tree',
                                   timeout=700)
            if cp.returncode != 0:
                raise RuntimeError(f'making the tree failed: {cp.stderr}')
            for rnd in range(args.rounds):
                t, res = timed(lambda: call(system, 'Snapshot', {'id': src}))
                snap = res['snapshot']
                snap_s.append(t)
                sizes.append(snap['size'])
                content = snap['contentSize']
                t0, plain = timed(lambda: call(system, 'CreateSandbox', {'template': 'shell', 'options': opts}))
                t1, restored = timed(lambda: call(system, 'CreateSandbox', {
                    'template': 'shell', 'options': dict(opts, FromSnapshot=snap['id'])}))
                create_s.append(t0)
                restore_s.append(t1 - t0)
                for sid in (plain['id'], restored['id']):
                    system.sandboxctl('destroy', sid, timeout=120)
                call(system, 'RemoveSnapshot', {'snapshot': snap['id']})
                print(f'round {rnd + 1}/{args.rounds}: snapshot {t:.3f} s ({snap["size"]} bytes), '
                      f'create {t0:.3f} s, create from snapshot {t1:.3f} s', file=sys.stderr)
        finally:
            system.sandboxctl('destroy', src, timeout=120)
            system.configure_daemon(None)
    finally:
        harness.release()

    host = host_tar(args.rounds)
    med = statistics.median
    print(f'\n/work: {content / MiB:.1f} MiB of files (sparse at full size); medians of {args.rounds} rounds')
    print(f'{"":<28}{"sandboxd":>12}{"host tar --zstd":>18}')
    print(f'{"snapshot / tar -c (s)":<28}{med(snap_s):>12.3f}{med(h[0] for h in host):>18.3f}')
    print(f'{"restore / tar -x (s)":<28}{med(restore_s):>12.3f}{med(h[1] for h in host):>18.3f}')
    print(f'{"size (MiB)":<28}{med(sizes) / MiB:>12.2f}{med(h[2] for h in host) / MiB:>18.2f}')
    print(f'(restore: CreateSandbox with FromSnapshot minus a plain one, median {med(create_s):.3f} s)')


if __name__ == '__main__':
    main()
