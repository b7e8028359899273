#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Code contexts (docs/CONTEXTS.md) against the same IPython kernel driven with jupyter_client
directly on the host, measured in one run on this machine.

How to run (as root, after building; python3-ipykernel and python3-jupyter-client installed):

    python3 bench/bench_contexts.py                # 8 cold starts, 200 warm cells of each
    python3 bench/bench_contexts.py --cold 5 --warm 100 --json out.json

It boots a system with tests/integration/harness.py and measures, alternating the two sides
in batches (so that load that comes and goes shifts them alike):
  cold_sandboxd  RunCode "1+1" over varlink in a fresh sandbox of the python template (made
                 before the clock starts; it starts no context by itself): the default
                 context's driver and kernel start, then the cell
  create_first   python-data (whose template starts its default Python context with the
                 sandbox): CreateSandbox then RunCode "1+1", from the create's call on
  prestarted_first  python-data, its context ready (ListContexts says idle): the first
                 RunCode "1+1"
  cold_host      the same on the host, with /usr/bin/python3: jupyter_client's KernelManager
                 starts the kernel (ipc transport), kernel_info until it answers, then
                 execute "1+1" until its reply and idle                          <- floor
  warm_sandboxd  RunCode "1+1" in a context that has run a cell, one varlink connection
  warm_host      execute "1+1" on the host's kernel, until its reply and idle, through
                 jupyter_client's Session on blocking sockets                    <- floor
  warm_host_client  the same through jupyter_client's BlockingKernelClient.execute_interactive
                 (what a notebook-style client does)
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

HOST_PYTHON = '/usr/bin/python3'   # Debian's, with jupyter_client (not a virtualenv's)

# The host side, run by HOST_PYTHON: prints one JSON line per measurement asked on stdin.
HOST = r'''
import json, os, sys, tempfile, time
import zmq
from jupyter_client.manager import KernelManager

def start():
    d = tempfile.mkdtemp(prefix='bench-kernel-')
    km = KernelManager(kernel_name='python3', transport='ipc', ip=os.path.join(d, 'kernel'),
                       connection_file=os.path.join(d, 'kernel.json'))
    km.kernel_cmd = [sys.executable, '-m', 'ipykernel_launcher', '-f', '{connection_file}']
    # As the driver starts it (context-driver.py): no colours, history in memory.
    km.start_kernel(env=dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION='1'),
                    extra_arguments=['--InteractiveShell.colors=NoColor', '--HistoryManager.hist_file=:memory:'])
    shell, iopub = km.connect_shell(), km.connect_iopub()
    while True:
        km.session.send(shell, 'kernel_info_request', {})
        if shell.poll(500):
            km.session.recv(shell)
            break
    while True:   # until iopub is subscribed, as the driver does (jupyter_client's nudge)
        km.session.send(shell, 'kernel_info_request', {})
        if iopub.poll(200):
            break
    while shell.poll(100):
        km.session.recv(shell)
    while iopub.poll(100):
        km.session.recv(iopub)
    return km, shell, iopub

def cell(km, shell, iopub, code='1+1'):
    msg_id = km.session.send(shell, 'execute_request', {'code': code, 'silent': False, 'store_history': True,
                                                          'user_expressions': {}, 'allow_stdin': False})['header']['msg_id']
    reply = idle = False
    poller = zmq.Poller()
    poller.register(shell, zmq.POLLIN)
    poller.register(iopub, zmq.POLLIN)
    while not (reply and idle):
        for sock, _ in poller.poll(10000):
            _, m = km.session.recv(sock, mode=zmq.NOBLOCK)
            if not m or m['parent_header'].get('msg_id') != msg_id:
                continue
            if sock is shell:
                reply = True
            elif m['msg_type'] == 'status' and m['content']['execution_state'] == 'idle':
                idle = True

warm = None
for line in sys.stdin:
    what, n = line.split()
    n = int(n)
    out = []
    if what == 'cold':
        for _ in range(n):
            t = time.monotonic()
            km, shell, iopub = start()
            cell(km, shell, iopub)
            out.append(time.monotonic() - t)
            km.shutdown_kernel(now=True)
    elif what == 'warm':
        if warm is None:
            warm = start()
            cell(*warm)
        for _ in range(n):
            t = time.monotonic()
            cell(*warm)
            out.append(time.monotonic() - t)
    elif what == 'client':
        kc = warm[0].client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        for _ in range(n):
            t = time.monotonic()
            kc.execute_interactive('1+1', output_hook=lambda m: None, timeout=60)
            out.append(time.monotonic() - t)
        kc.stop_channels()
    print(json.dumps(out), flush=True)
if warm:
    warm[0].shutdown_kernel(now=True)
'''

ROWS = [
    ('cold_sandboxd', 'first RunCode "1+1" in a fresh sandbox (kernel start)'),
    ('create_first', 'python-data: create + first RunCode (prestarted)'),
    ('prestarted_first', 'python-data: first RunCode, kernel prestarted'),
    ('cold_host', 'jupyter_client on the host: start the kernel + "1+1"'),
    ('warm_sandboxd', 'RunCode "1+1" in a warm context (varlink)'),
    ('warm_host', 'jupyter_client on the host: "1+1" on a warm kernel'),
    ('warm_host_client', 'BlockingKernelClient.execute_interactive("1+1")'),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--cold', type=int, default=8, help='cold starts of each (default 8)')
    ap.add_argument('--warm', type=int, default=200, help='warm cells of each (default 200)')
    ap.add_argument('--json', help='also write the samples (seconds) to this file')
    args = ap.parse_args()

    import harness
    system = harness.acquire(docker=False)
    host = subprocess.Popen([HOST_PYTHON, '-c', HOST], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            stderr=subprocess.DEVNULL)
    samples = {k: [] for k, _ in ROWS}
    problems = []

    def host_ask(what, n):
        host.stdin.write(f'{what} {n}\n')
        host.stdin.flush()
        return json.loads(host.stdout.readline())

    def varlink(conn, method, params):
        replies, err, eparams = conn.call(f'io.sandboxd.Sandbox.{method}', params)
        if err:
            raise RuntimeError(f'{method}: {err} {eparams}')
        return replies[-1]

    try:
        # Cold, alternating one by one.
        for _ in range(args.cold):
            cp = system.sandboxctl('create', '--template', 'python', timeout=120)
            sid = cp.stdout.strip()
            try:
                with system.varlink(timeout=300) as c:
                    t = time.monotonic()
                    varlink(c, 'RunCode', {'id': sid, 'code': '1+1'})
                    samples['cold_sandboxd'].append(time.monotonic() - t)
            finally:
                system.sandboxctl('destroy', sid, timeout=120)
            samples['cold_host'] += host_ask('cold', 1)
            with system.varlink(timeout=300) as c:
                t = time.monotonic()
                sid = varlink(c, 'CreateSandbox', {'template': 'python-data'})['id']
                try:
                    varlink(c, 'RunCode', {'id': sid, 'code': '1+1'})
                    samples['create_first'].append(time.monotonic() - t)
                finally:
                    varlink(c, 'Destroy', {'id': sid})
                sid = varlink(c, 'CreateSandbox', {'template': 'python-data'})['id']
                try:
                    while varlink(c, 'ListContexts', {'id': sid})['contexts'][0]['state'] != 'idle':
                        time.sleep(0.05)
                    t = time.monotonic()
                    varlink(c, 'RunCode', {'id': sid, 'code': '1+1'})
                    samples['prestarted_first'].append(time.monotonic() - t)
                finally:
                    varlink(c, 'Destroy', {'id': sid})

        # Warm, in batches of 20.
        cp = system.sandboxctl('create', '--template', 'python', timeout=120)
        sid = cp.stdout.strip()
        try:
            with system.varlink(timeout=300) as c:
                ctx = varlink(c, 'CreateContext', {'id': sid})['context']['id']
                varlink(c, 'RunCode', {'id': sid, 'context': ctx, 'code': '1+1'})
                done = 0
                while done < args.warm:
                    n = min(20, args.warm - done)
                    for _ in range(n):
                        t = time.monotonic()
                        varlink(c, 'RunCode', {'id': sid, 'context': ctx, 'code': '1+1'})
                        samples['warm_sandboxd'].append(time.monotonic() - t)
                    samples['warm_host'] += host_ask('warm', n)
                    done += n
            samples['warm_host_client'] += host_ask('client', min(args.warm, 50))
        finally:
            system.sandboxctl('destroy', sid, timeout=120)
    except Exception:
        # What sandboxd said meanwhile, before the system goes.
        print(system.journal()[-8000:], file=sys.stderr)
        raise
    finally:
        host.stdin.close()
        host.wait(timeout=60)
        problems = harness.release()

    print(f'{"":52} {"median":>9} {"p90":>9}   (ms)')
    for key, label in ROWS:
        s = sorted(samples[key])
        if not s:
            continue
        print(f'{label:52} {statistics.median(s) * 1000:9.2f} {s[int(len(s) * 0.9) - 1 if len(s) > 1 else 0] * 1000:9.2f}')
    med = {k: statistics.median(v) for k, v in samples.items() if v}
    print(f'cold: sandboxd / host = {med["cold_sandboxd"] / med["cold_host"]:.2f}')
    print(f'warm: sandboxd / host = {med["warm_sandboxd"] / med["warm_host"]:.2f}'
          f' (sandboxd - host = {(med["warm_sandboxd"] - med["warm_host"]) * 1000:.2f} ms)')
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'samples': samples, 'load': os.getloadavg()}, f)
    if problems:
        print('teardown problems:', problems, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
