#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The fleet's figures (docs/SCALE-OUT.md, bench/RESULTS.md "bench_fleet.py"): creates per
second through HAProxy with 1, 2 and 3 nodes taking them (4 clients at once), and an
exec's median latency straight to its node's bridge and through HAProxy, on kept-alive
connections; the time to move a hibernated sandbox of 100 MiB from one node to another
through their bridges (export piped into import). The setup is test_fleet's (three namespace-booted nodes, HAProxy and a
Galera cluster in network namespaces); its test_measure and test_move_a_hibernated_sandbox do
the measuring, once per run.

    python3 bench/bench_fleet.py [--runs N]        (root; after meson compile -C build)
"""

import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, '..', 'tests', 'integration', 'run.py')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--runs', type=int, default=1)
    args = ap.parse_args()
    for i in range(args.runs):
        cp = subprocess.run([sys.executable, RUN, 'test_fleet.Fleet.test_measure',
                             'test_fleet.Fleet.test_move_a_hibernated_sandbox'], capture_output=True, text=True)
        line = re.search(r'fleet: (creates/s.*)', cp.stderr)
        move = re.search(r'fleet: (move of .*)', cp.stderr)
        if cp.returncode != 0 or not line or not move:
            print(cp.stderr[-3000:], file=sys.stderr)
            return 1
        print(f'run {i + 1}: {line.group(1)}; {move.group(1)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
