#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The terminal over a WebSocket (docs/TERMINALS.md): keystroke round trip and output
throughput, against a bare pseudo-terminal on this host, measured in one run.

How to run (as root, after building):

    python3 bench/bench_terminal.py                  # 500 keystrokes, 20 MB of output
    python3 bench/bench_terminal.py --keys 200 --mb 10 --json out.json

It boots a system with tests/integration/harness.py, starts sandboxd-http (harness.Bridge)
and opens GET /api/v1/sessions/ID/terminal on a shell sandbox with Debian's
python3-websockets (tests/integration/wsclient.py). With the shell in `stty -icanon`, one
key is sent and its echo awaited, one at a time:
  pty        a shell on a pseudo-terminal of this host, written and read directly  <- floor
  websocket  the key through the bridge (WriteStdin), the agent's relay, the sandbox's
             pty, the shell's echo back (Follow), the WebSocket
Output: `head -c N /dev/zero` in the shell, read to the end, MB/s.
"""

import argparse
import base64
import json
import os
import pty
import select
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
INTEGRATION = os.path.join(HERE, '..', 'tests', 'integration')
sys.path.insert(0, INTEGRATION)
import harness  # noqa: E402


def pty_floor(keys, mb):
    """The same two measurements on a bare pty of this host."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execv('/bin/sh', ['/bin/sh'])

    def read_until(pred, timeout=30):
        buf = b''
        deadline = time.monotonic() + timeout
        while not pred(buf):
            r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not r:
                raise TimeoutError(buf[-200:])
            buf += os.read(fd, 65536)
        return buf

    os.write(fd, b'stty -icanon; echo ready\n')
    read_until(lambda b: b'ready\r\n' in b)
    time.sleep(0.5)                     # the prompt, read and dropped
    while select.select([fd], [], [], 0.2)[0]:
        os.read(fd, 65536)
    rtt = []
    for i in range(keys):
        key = b'qwxzjkvQWX'[i % 10:i % 10 + 1]
        t0 = time.perf_counter()
        os.write(fd, key)
        read_until(lambda b: key in b)
        rtt.append((time.perf_counter() - t0) * 1000)
    os.write(fd, b'\x15stty icanon -echo; echo go\n')
    read_until(lambda b: b'go\r\n' in b)
    time.sleep(0.5)
    while select.select([fd], [], [], 0.2)[0]:
        os.read(fd, 65536)
    n = mb * 1000 * 1000
    t0 = time.perf_counter()
    os.write(fd, f'head -c {n} /dev/zero; echo DONE\n'.encode())
    count = 0
    tail = b''
    while count < n:
        r, _, _ = select.select([fd], [], [], 30)
        if not r:
            raise TimeoutError('output')
        d = os.read(fd, 65536)
        count += d.count(0)
        tail = (tail + d)[-16:]
    seconds = time.perf_counter() - t0
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    os.close(fd)
    return rtt, n / seconds / 1e6, count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--keys', type=int, default=500)
    ap.add_argument('--mb', type=int, default=20)
    ap.add_argument('--json')
    args = ap.parse_args()

    results = {}
    rtt, mbs, _ = pty_floor(args.keys, args.mb)
    results['pty'] = {'rtt_median_ms': statistics.median(rtt), 'rtt_p99_ms': sorted(rtt)[int(len(rtt) * .99) - 1],
                      'output_mb_s': mbs}
    system = harness.acquire()
    bridge = None
    try:
        bridge = harness.Bridge(system, {'bench': 'bench'})
        token = bridge.tokens['bench']
        import urllib.request
        req = urllib.request.Request(bridge.url + '/api/v1/sessions', method='POST',
                                     data=json.dumps({'template': 'shell'}).encode(),
                                     headers={'Authorization': f'Bearer {token}', 'Content-Type': 'application/json'})
        with urllib.request.urlopen(req, timeout=120) as r:
            sid = json.loads(r.read())['id']
        n = args.mb * 1000 * 1000
        plan = {'url': bridge.url.replace('http:', 'ws:') + f'/api/v1/sessions/{sid}/terminal', 'token': token,
                'auth': 'protocol', 'steps': [
                    {'send': 'stty -icanon; echo ready\n'}, {'expect': 'ready\r\n'}, {'rtt': args.keys},
                    {'send': '\x15stty icanon -echo; echo go\n'}, {'expect': 'go\r\n', 'new': True},
                    {'send': f'head -c {n} /dev/zero; echo done\n'}, {'count_zeros': n, 'timeout': 600}]}
        cp = subprocess.run(['/usr/bin/python3', os.path.join(INTEGRATION, 'wsclient.py')], input=json.dumps(plan),
                            capture_output=True, text=True, timeout=1800)
        assert cp.returncode == 0, cp.stderr
        out = json.loads(cp.stdout)
        assert 'error' not in out, out.get('error')
        rtt = out['rtt_ms']
        results['websocket'] = {'rtt_median_ms': statistics.median(rtt),
                                'rtt_p99_ms': sorted(rtt)[int(len(rtt) * .99) - 1],
                                'output_mb_s': n / out['zeros_seconds'] / 1e6,
                                'zeros': base64.b64decode(out['output']).count(0)}
        results['added_rtt_ms'] = results['websocket']['rtt_median_ms'] - results['pty']['rtt_median_ms']
        print(json.dumps(results, indent=2))
        if args.json:
            with open(args.json, 'w') as f:
                json.dump(results, f, indent=2)
    finally:
        if bridge:
            bridge.stop()
        harness.release()


if __name__ == '__main__':
    main()
