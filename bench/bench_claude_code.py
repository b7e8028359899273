#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the claude-code template and header injection cost (issue 32):

  - create + first exec of a claude-code sandbox (`claude --version`), through sandboxctl;
  - `claude --version` in a running sandbox against the same binary run on the host;
  - a Messages API round trip (a POST through curl, a new connection each) to the stand-in
    of tests/integration/test_claude_code.py through the egress proxy: relayed as it is
    (the sandbox trusts the stand-in's CA itself) against the same with the key added by
    the proxy (TLS ended and started again there).

    python3 bench/bench_claude_code.py               # 10 runs each (~1 min after the install)
    python3 bench/bench_claude_code.py --runs 30

It boots a system with tests/integration/harness.py and sets up what test_claude_code.py
does (the CLI from npm, the test network, the proxy, the stand-in).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'integration'))

import harness  # noqa: E402
import test_claude_code  # noqa: E402
import test_egress  # noqa: E402

FMT = '%{time_appconnect} %{time_total}'


def ms(values):
    return f'median {statistics.median(values) * 1000:.1f} ms (min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f})'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--runs', type=int, default=10)
    args = ap.parse_args()

    system = harness.acquire(docker=False)
    test_egress.S = test_claude_code.S = system
    C = test_claude_code.ClaudeCode
    port = test_claude_code.PORT
    rules = [f'--allow-host=api.anthropic.com:{port}', f'--allow-host={test_egress.NET}.0/24:{port}']
    ctl = system.sandboxctl
    made = []
    try:
        C.setUpClass()
        cp = ctl('secret', 'set', 'ANTHROPIC_API_KEY', input='sk-ant-bench')
        assert cp.returncode == 0, cp.stderr

        # create + first exec
        first = []
        for _ in range(args.runs):
            t0 = time.monotonic()
            cp = ctl('create', '--template', 'claude-code', *rules)
            assert cp.returncode == 0, cp.stderr
            sid = cp.stdout.strip()
            made.append(sid)
            cp = ctl('exec', sid, '--', 'claude', '--version')
            first.append(time.monotonic() - t0)
            assert cp.returncode == 0, cp.stderr
        print(f'create + first exec (claude --version): {ms(first)}')

        # --version inside (a running sandbox) against the host
        sid = made[-1]
        inside, host = [], []
        for _ in range(args.runs):
            t0 = time.monotonic()
            cp = ctl('exec', sid, '--', 'claude', '--version')
            inside.append(time.monotonic() - t0)
            t0 = time.monotonic()
            subprocess.run([C.host_cli, '--version'], capture_output=True, check=True,
                           env={'HOME': C.dir, 'PATH': '/usr/bin:/bin', 'DISABLE_AUTOUPDATER': '1'})
            host.append(time.monotonic() - t0)
        print(f'claude --version in a sandbox (sandboxctl exec): {ms(inside)}')
        print(f'claude --version on the host:                    {ms(host)}')

        # Round trips: relayed (the sandbox trusts the test CA; no secret) and injected.
        cp = ctl('create', '--template', 'python', *rules)
        assert cp.returncode == 0, cp.stderr
        plain = cp.stdout.strip()
        made.append(plain)
        ctl('exec', plain, '--', 'sh', '-c', 'cat > /work/ca.pem', input=C.ca_text)
        body = '{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}'
        url = f'https://api.anthropic.com:{port}/v1/messages'
        ways = {}
        for name, target, extra in (('relayed', plain, ['--cacert', '/work/ca.pem']), ('injected', sid, [])):
            script = (f'for i in $(seq {args.runs}); do curl -sS -o /dev/null -w "{FMT}\\n" '
                      f'-H "content-type: application/json" -d \'{body}\' {" ".join(extra)} {url}; done')
            cp = ctl('exec', target, '--', 'sh', '-c', script)
            assert cp.returncode == 0, cp.stderr
            rows = [tuple(float(x) for x in line.split()) for line in cp.stdout.split('\n') if line]
            ways[name] = rows
            print(f'round trip {name:8s}: total {ms([r[1] for r in rows])}; '
                  f'TLS up after {ms([r[0] for r in rows])}')
    finally:
        for sid in made:
            ctl('destroy', sid)
        ctl('secret', 'remove', 'ANTHROPIC_API_KEY')
        C.tearDownClass()
        harness.release()


if __name__ == '__main__':
    main()
