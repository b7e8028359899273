#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the egress proxy (sandboxd-egress(8)) costs: throughput of an HTTPS download
through it against the same download directly on the host, and the connect latency it
adds (time to a finished TLS handshake).

    python3 bench/bench_egress.py                  # 64 MiB × 5, 30 connects (~1 min)
    python3 bench/bench_egress.py --size 256 --runs 3

It boots a system with tests/integration/harness.py and sets up what test_egress.py
does (a test HTTPS server in a network namespace of its own, sandboxd-egress from the
build tree). "direct" is curl on the host; "proxy" is curl inside a sandbox with
EgressAllow=, through the proxy. Both use the same curl, server and TLS; the sandbox's
curl runs under the sandbox's CPU quota (1 CPU by default), as sandboxed code would.
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'integration'))

import harness  # noqa: E402
import test_egress  # noqa: E402

FMT = '%{time_connect} %{time_appconnect} %{time_total} %{speed_download} %{size_download}'


def parse(out):
    connect, appconnect, total, speed, size = out.split()
    return {'connect': float(connect), 'tls': float(appconnect), 'total': float(total),
            'speed': float(speed), 'size': int(size)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--size', type=int, default=64, help='MiB per download (default 64)')
    ap.add_argument('--runs', type=int, default=5, help='downloads per way (default 5)')
    ap.add_argument('--connects', type=int, default=30, help='connect-latency samples per way (default 30)')
    args = ap.parse_args()

    system = harness.acquire(docker=False)
    test_egress.S = system
    E = test_egress.Egress
    results = {'size_mib': args.size}
    try:
        E.setUpClass()
        cp = system.sandboxctl('create', '--template', 'python', '--allow-host=allowed.test',
                               f'--allow-host={test_egress.NET}.0/24', '--memory=1G')
        assert cp.returncode == 0, cp.stderr
        sid = cp.stdout.strip()
        try:
            system.sandboxctl('exec', sid, '--', 'sh', '-c', 'cat > /work/ca.pem', input=E.ca_text, check=True)
            url = f'https://allowed.test/big?n={args.size * 1024 * 1024}'
            small = 'https://allowed.test/'
            host_curl = ['curl', '-sS', '--cacert', E.ca, '--resolve', f'allowed.test:443:{test_egress.SERVER_ADDR}',
                         '-o', '/dev/null', '-w', FMT]
            box_curl = [system.paths.sandboxctl, 'exec', sid, '--', 'curl', '-sS', '--cacert', '/work/ca.pem',
                        '-o', '/dev/null', '-w', FMT]

            def sample(way, target):
                cmd = (host_curl if way == 'direct' else box_curl) + [target]
                cp = system.run(cmd, timeout=600)
                assert cp.returncode == 0, cp.stderr
                return parse(cp.stdout)

            for way in ('direct', 'proxy'):
                sample(way, small)  # warm up: page cache, the proxy's first connection
            dl = {'direct': [], 'proxy': []}
            for _ in range(args.runs):
                for way in ('direct', 'proxy'):   # interleaved, against drift
                    s = sample(way, url)
                    assert s['size'] == args.size * 1024 * 1024, s
                    dl[way].append(s['speed'] / (1024 * 1024))
            lat = {'direct': [], 'proxy': []}
            tot = {'direct': [], 'proxy': []}
            for _ in range(args.connects):
                for way in ('direct', 'proxy'):
                    s = sample(way, small)
                    lat[way].append(s['tls'] * 1000)
                    tot[way].append(s['total'] * 1000)
            for way in ('direct', 'proxy'):
                results[way] = {'MiB_per_s_median': round(statistics.median(dl[way]), 1),
                                'MiB_per_s_all': [round(x, 1) for x in dl[way]],
                                'tls_ready_ms_median': round(statistics.median(lat[way]), 2),
                                'tls_ready_ms_p90': round(sorted(lat[way])[int(len(lat[way]) * 0.9) - 1], 2),
                                'small_request_ms_median': round(statistics.median(tot[way]), 2)}
            results['throughput_ratio'] = round(results['proxy']['MiB_per_s_median'] /
                                                results['direct']['MiB_per_s_median'], 3)
            results['added_connect_ms'] = round(results['proxy']['tls_ready_ms_median'] -
                                                results['direct']['tls_ready_ms_median'], 2)
            results['added_small_request_ms'] = round(results['proxy']['small_request_ms_median'] -
                                                      results['direct']['small_request_ms_median'], 2)
        finally:
            system.sandboxctl('destroy', sid, timeout=120)
    finally:
        E.tearDownClass()
        problems = harness.release()
        for p in problems:
            print('teardown:', p, file=sys.stderr)
    print(json.dumps(results, indent=2))


if __name__ == '__main__':
    main()
