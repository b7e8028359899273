#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd's peak memory while many large files move at once (issue 27).

How to run (as root, after building):

    python3 bench/bench_files.py                    # 10 clients, 100 MiB each, both ways
    python3 bench/bench_files.py --clients 4 --mib 32 --write-part-mib 4 --json out.json

It boots a system with tests/integration/harness.py and, for each face, starts CLIENTS
clients at once, each moving a file of its own of MIB MiB, first out of the sandbox
(reads), then into it (writes); the files are spread over CLIENTS / 2 sandboxes (each runs
4 file operations at a time). Reported per run: wall time, throughput, and sandboxd's
VmRSS before and VmHWM after (the kernel's peak RSS, reset with clear_refs just before),
whose difference is what the run made sandboxd hold at its worst.
  python      the Python client over varlink (files.read: ReadFile up to 4 MiB, larger
              ones Download, streamed in 64 KiB replies; files.write: WriteFile in parts
              of --write-part-mib, the client's default 1 MiB)
  sandboxctl  sandboxctl cp over D-Bus (Upload and Download: the client's descriptor goes
              to the sandbox's agent; the data never passes through sandboxd)
  http        sandboxd-http (started by its socket unit, a token of tenant "bench"):
              GET and PUT /api/v1/sessions/ID/files, which the bridge moves in ReadFile
              and WriteFile parts of 4 MiB; sessions of its own (CLIENTS / 2)
Target: the growth is bounded by a small multiple of the part size (FILE_PART_MAX, 4 MiB),
not by the files' size or count: the issue saw 75 MB for one 100 MB read.
"""

import argparse
import http.client
import json
import threading
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (also puts tests/integration on sys.path)

sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'security'))

MiB = 1 << 20


def sandboxctl_run(system, load, what, pid, source):
    """CLIENTS sandboxctl cp at once; as fileload.Load.run."""
    procs = []
    fileload = sys.modules['fileload']
    fileload.reset_peak(pid)
    before = fileload.status_kib(pid, 'VmRSS')
    t0 = time.monotonic()
    for i in range(load.clients):
        sid = load.sandboxes[i % len(load.sandboxes)].sandbox_id
        if what == 'read':
            argv = [system.paths.sandboxctl, 'cp', f'{sid}:/work/r{i}', '-']
            stdin, stdout = subprocess.DEVNULL, subprocess.DEVNULL
        else:
            argv = [system.paths.sandboxctl, 'cp', '-', f'{sid}:/work/c{i}']
            stdin, stdout = open(source, 'rb'), subprocess.DEVNULL
        procs.append(subprocess.Popen(system.wrap(argv), stdin=stdin, stdout=stdout, stderr=subprocess.PIPE))
    problems = []
    for i, p in enumerate(procs):
        _out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            problems.append(f'sandboxctl {i}: {err.decode(errors="replace")[-300:]}')
    seconds = time.monotonic() - t0
    return seconds, before, fileload.status_kib(pid, 'VmHWM'), problems


class HttpFaces:
    """The bridge, its sessions and their files; run() as fileload.Load.run."""

    def __init__(self, system, load):
        import harness
        import polkitutil
        self.system, self.load = system, load
        self.polkit = polkitutil.Polkit(system)
        self.polkit.install()
        with open(os.path.join(system.paths.source, 'polkit', 'io.sandboxd.Sandbox1-http.rules')) as f:
            self.polkit.set_rules(f.read(), name='io.sandboxd.Sandbox1-http.rules')
        token = system.run([system.paths.sandboxd_http, 'token', 'add', 'bench', '--tenant=bench',
                            f'--tokens-dir={harness.HTTP_TOKENS_DIR}'], check=True).stdout.strip()
        system.systemctl('start', 'sandboxd-http.socket', check=True)
        self.auth = {'Authorization': f'Bearer {token}'}
        limit = max(512, 5 * (load.size // MiB)) * MiB
        self.sessions = [self.request('POST', '/api/v1/sessions', json.dumps(
            {'template': 'shell', 'limits': {'memory_max': limit, 'disk_max': limit}}))['id']
            for _ in range(len(load.sandboxes))]
        for i in range(load.clients):
            self.request('POST', f'/api/v1/sessions/{self.session(i)}/execute', json.dumps(
                {'argv': ['sh', '-c', f'head -c {load.size} /dev/urandom > /work/r{i}']}))

    def session(self, i):
        return self.sessions[i % len(self.sessions)]

    def request(self, method, path, body=None):
        c = http.client.HTTPConnection('127.0.0.1', self.system.http_port, timeout=600)
        c.request(method, path, body=body, headers=self.auth)
        r = c.getresponse()
        data = r.read()
        c.close()
        if r.status >= 300:
            raise RuntimeError(f'{method} {path}: {r.status} {data[:300]!r}')
        return json.loads(data) if data else None

    def close(self):
        try:
            for sid in self.sessions:
                self.request('DELETE', f'/api/v1/sessions/{sid}')
        finally:
            self.system.systemctl('stop', 'sandboxd-http.socket', 'sandboxd-http.service', timeout=60)
            self.polkit.uninstall()

    def run(self, what, pid, source):
        fileload = sys.modules['fileload']
        problems = []

        def client(i):
            c = http.client.HTTPConnection('127.0.0.1', self.system.http_port, timeout=600)
            try:
                name = f'r{i}' if what == 'read' else f'h{i}'
                path = f'/api/v1/sessions/{self.session(i)}/files?path=/work/{name}'
                if what == 'read':
                    c.request('GET', path, headers=self.auth)
                    r = c.getresponse()
                    n = 0
                    while chunk := r.read(MiB):
                        n += len(chunk)
                    if r.status != 200 or n != self.load.size:
                        problems.append(f'GET {i}: {r.status}, {n} bytes')
                else:
                    with open(source, 'rb') as f:
                        c.request('PUT', path, body=f, headers=dict(self.auth, **{
                            'Content-Length': str(self.load.size), 'Content-Type': 'application/octet-stream'}))
                    r = c.getresponse()
                    body = r.read()
                    if r.status != 201:
                        problems.append(f'PUT {i}: {r.status} {body[:200]!r}')
            except Exception as e:  # noqa: BLE001
                problems.append(f'http client {i}: {e!r}')
            finally:
                c.close()

        threads = [threading.Thread(target=client, args=(i,)) for i in range(self.load.clients)]
        fileload.reset_peak(pid)
        before = fileload.status_kib(pid, 'VmRSS')
        t0 = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join(900)
        seconds = time.monotonic() - t0
        peak = fileload.status_kib(pid, 'VmHWM')
        if what == 'write':
            for sid in self.sessions:
                self.request('POST', f'/api/v1/sessions/{sid}/execute', json.dumps({'argv': ['sh', '-c', 'rm -f /work/h*']}))
        return seconds, before, peak, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--clients', type=int, default=10, help='transfers at once (default 10)')
    ap.add_argument('--mib', type=int, default=100, help='MiB per file (default 100)')
    ap.add_argument('--write-part-mib', type=int, default=None,
                    help="the Python client's WriteFile part (default: the client's own, 1 MiB)")
    ap.add_argument('--faces', default='python,sandboxctl,http', help='comma-separated: python, sandboxctl, http')
    ap.add_argument('--json', help='also write the results and machine to this file')
    args = ap.parse_args()

    import harness
    import fileload
    sys.path.insert(0, os.path.join(HERE, '..', 'python'))
    import sandboxd

    system = harness.acquire(docker=False)
    results, problems = [], []
    try:
        info = bench.machine_info(system)
        pid = fileload.daemon_pid(system)
        size = args.mib * MiB

        def transport():
            t = sandboxd.VarlinkTransport(system.path(harness.VARLINK_SOCKET))
            if args.write_part_mib:
                t.write_chunk = args.write_part_mib * MiB
            return t

        httpf = None
        load = fileload.Load(sandboxd, transport, 'shell', args.clients, size,
                             sandboxes=max(1, args.clients // 2), memory=max(512, 5 * args.mib) * MiB)
        try:
            load.prepare_reads()
            faces = args.faces.split(',')
            httpf = HttpFaces(system, load) if 'http' in faces else None
            with tempfile.NamedTemporaryFile(dir=system.workdir, prefix='bench-files-') as src:
                src.write(load.data)
                src.flush()
                for face in faces:
                    for what in ('read', 'write'):
                        if face == 'python':
                            seconds, before, peak, bad = load.run(what, pid)
                        elif face == 'sandboxctl':
                            seconds, before, peak, bad = sandboxctl_run(system, load, what, pid, src.name)
                        elif face == 'http':
                            seconds, before, peak, bad = httpf.run(what, pid, src.name)
                        else:
                            raise SystemExit(f'unknown face {face}')
                        problems += bad
                        if what == 'write':   # room for the next face's files
                            for sbx in load.sandboxes:
                                sbx.commands.run('rm -f /work/w* /work/c*')
                        results.append({'face': face, 'what': what, 'seconds': round(seconds, 2),
                                        'mib_per_s': round(args.clients * args.mib / seconds, 1),
                                        'rss_before_mib': round(before / 1024, 1), 'hwm_mib': round(peak / 1024, 1),
                                        'growth_mib': round((peak - before) / 1024, 1)})
                        print(f'{face} {what}: {results[-1]}', file=sys.stderr)
        finally:
            try:
                if httpf:
                    httpf.close()
            finally:
                load.close()
    finally:
        problems += harness.release()

    print('\nmachine: ' + ', '.join(f'{k}={info[k]}' for k in ('nproc', 'cpu', 'kernel')))
    print(f'date: {info["date"]}; {info["mode"]} mode; sandboxd {info["sandboxd"]}, source {info["commit"]}')
    print(f'{args.clients} clients at once, {args.mib} MiB each'
          + (f', Python WriteFile parts of {args.write_part_mib} MiB' if args.write_part_mib else '') + '\n')
    print(f'{"face":<11} {"way":<6} {"seconds":>8} {"MiB/s":>7} {"RSS before":>11} {"peak":>7} {"growth":>8}')
    for r in results:
        print(f'{r["face"]:<11} {r["what"]:<6} {r["seconds"]:>8.1f} {r["mib_per_s"]:>7.1f} '
              f'{r["rss_before_mib"]:>8.1f} MiB {r["hwm_mib"]:>7.1f} {r["growth_mib"]:>4.1f} MiB')
    if problems:
        print('\nPROBLEMS:\n  ' + '\n  '.join(problems))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'machine': info, 'clients': args.clients, 'mib': args.mib, 'results': results,
                       'problems': problems}, f, indent=2)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
