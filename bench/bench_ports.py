#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The port proxy (docs/PORTS.md) against a direct loopback connection inside the
sandbox, measured in one run on this machine.

How to run (as root, after building):

    python3 bench/bench_ports.py                 # 400 requests each way, 3 × 256 MiB
    python3 bench/bench_ports.py --requests 200 --mib 128 --json out.json

It boots a system with tests/integration/harness.py, starts sandboxd-http (harness.Bridge)
and, in a sandbox of the python template (2 CPUs, so that the direct client and the
server do not share one), an HTTP/1.1 server: /ping answers 2 bytes, /blob streams N MiB.
The same client program (Python's http.client, a new connection per request, as the
bridge makes one per request) measures:
  direct     inside the sandbox, to 127.0.0.1:8000                               <- floor
  bridge     on the host, to sandboxd-http's /api/v1/sessions/ID/ports/8000/ (a token,
             OpenPort per request, the answer streamed back)
  forward    on the host, to `sandboxctl port-forward ID 8000` (OpenPort per connection)
latency: the median of sequential /ping round trips; throughput: /blob read in 1 MiB
reads, MiB/s, the best of the runs. Added latency = bridge (forward) - direct.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'integration'))
import harness  # noqa: E402

SERVER = r'''
import http.server
CHUNK = b'x' * (1 << 20)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    def do_GET(self):
        if self.path.startswith('/blob/'):
            mib = int(self.path.split('/')[2])
            self.send_response(200)
            self.send_header('Content-Length', str(mib << 20))
            self.end_headers()
            for _ in range(mib):
                self.wfile.write(CHUNK)
            return
        self.send_response(200)
        self.send_header('Content-Length', '2')
        self.end_headers()
        self.wfile.write(b'ok')
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(('127.0.0.1', 8000), H).serve_forever()
'''

# argv: host port prefix token requests mib runs -> one JSON line
CLIENT = r'''
import http.client, json, sys, time
host, port, prefix, token = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
requests, mib, runs = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
headers = {'Authorization': 'Bearer ' + token} if token != '-' else {}
def get(path):
    c = http.client.HTTPConnection(host, port, timeout=120)
    c.request('GET', prefix + path, headers=headers)
    r = c.getresponse()
    n = 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        n += len(b)
    assert r.status == 200, (r.status, path)
    c.close()
    return n
lat = []
for _ in range(10):
    get('/ping')
for _ in range(requests):
    t = time.perf_counter()
    get('/ping')
    lat.append(time.perf_counter() - t)
rates = []
for _ in range(runs):
    t = time.perf_counter()
    n = get('/blob/%d' % mib)
    rates.append(n / (1 << 20) / (time.perf_counter() - t))
lat.sort()
print(json.dumps({'latency_ms': lat[len(lat) // 2] * 1e3, 'p90_ms': lat[int(len(lat) * 0.9)] * 1e3,
                  'mib_s': max(rates)}))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--requests', type=int, default=400)
    ap.add_argument('--mib', type=int, default=256)
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--json')
    args = ap.parse_args()

    system = harness.acquire()
    bridge = None
    fwd = None
    try:
        bridge = harness.Bridge(system, {'bench': 'bench'})
        token = bridge.tokens['bench']
        import urllib.request
        req = urllib.request.Request(bridge.url + '/api/v1/sessions', method='POST',
                                     data=json.dumps({'template': 'python',
                                                      'limits': {'cpu_quota_per_sec_usec': 2000000}}).encode(),
                                     headers={'Authorization': f'Bearer {token}', 'Content-Type': 'application/json'})
        with urllib.request.urlopen(req, timeout=120) as r:
            sid = json.loads(r.read())['id']
        cp = system.sandboxctl('start', sid, '--', 'python3', '-c', SERVER, timeout=60)
        assert cp.returncode == 0, cp.stderr
        deadline = time.monotonic() + 30
        while '8000' not in system.sandboxctl('ports', sid, timeout=60).stdout:
            assert time.monotonic() < deadline, 'the server did not come up'
            time.sleep(0.2)
        fwd = subprocess.Popen(system.wrap([system.paths.sandboxctl, 'port-forward', sid, '8000', '127.0.0.1:0']),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        fwd_address = fwd.stdout.readline().decode().strip()
        common = [str(args.requests), str(args.mib), str(args.runs)]
        port = bridge.url.rsplit(':', 1)[1]
        results = {}
        cp = system.sandboxctl('exec', sid, '--', 'python3', '-c', CLIENT, '127.0.0.1', '8000', '', '-', *common,
                               timeout=1800)
        assert cp.returncode == 0, cp.stderr
        results['direct'] = json.loads(cp.stdout)
        cp = system.run(['/usr/bin/python3', '-c', CLIENT, '127.0.0.1', port, f'/api/v1/sessions/{sid}/ports/8000',
                         token, *common], timeout=1800)
        assert cp.returncode == 0, cp.stderr
        results['bridge'] = json.loads(cp.stdout)
        host, fport = fwd_address.rsplit(':', 1)
        cp = system.run(['/usr/bin/python3', '-c', CLIENT, host, fport, '', '-', *common], timeout=1800)
        assert cp.returncode == 0, cp.stderr
        results['forward'] = json.loads(cp.stdout)
        for via in ('bridge', 'forward'):
            results[via]['added_latency_ms'] = results[via]['latency_ms'] - results['direct']['latency_ms']
            results[via]['throughput_ratio'] = results[via]['mib_s'] / results['direct']['mib_s']
        print(json.dumps(results, indent=2))
        if args.json:
            with open(args.json, 'w') as f:
                json.dump(results, f, indent=2)
    finally:
        if fwd:
            os.killpg(fwd.pid, signal.SIGTERM)
            fwd.wait(timeout=30)
        if bridge:
            bridge.stop()
        harness.release()


if __name__ == '__main__':
    main()
