# SPDX-License-Identifier: LGPL-2.1-or-later
"""Many large file transfers at once through the Python client, and sandboxd's peak memory
while they run: shared by test_file_memory.py (which asserts the bound) and
bench/bench_files.py (which reports it). Issue 27: a 100 MB files.read raised sandboxd's
RSS by 75 MB; ten at once would have put a gigabyte in it.

The peak is the kernel's own: /proc/PID/status VmHWM of sandboxd, reset (clear_refs 5)
just before the load, over its VmRSS at that moment."""

import hashlib
import os
import threading
import time

MiB = 1 << 20


def daemon_pid(system):
    """sandboxd's pid as this host sees it."""
    for pid in system.unit_pids('sandboxd.service') or ():
        try:
            with open(f'/proc/{pid}/comm') as f:
                if f.read().strip() == 'sandboxd':
                    return pid
        except OSError:
            continue
    raise AssertionError('sandboxd.service has no sandboxd process')


def status_kib(pid, key):
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith(key + ':'):
                return int(line.split()[1])
    raise AssertionError(f'no {key} in /proc/{pid}/status')


def reset_peak(pid):
    """Starts VmHWM again from the current RSS (proc(5), clear_refs)."""
    with open(f'/proc/{pid}/clear_refs', 'w') as f:
        f.write('5')


class Load:
    """CLIENTS clients, each with its own connection, each moving SIZE bytes of its own
    file at once, spread over SANDBOXES sandboxes (a sandbox runs 4 file operations at a
    time: sandboxd(8))."""

    def __init__(self, sandboxd, transport, template, clients, size, sandboxes, memory):
        self.sandboxd, self.transport = sandboxd, transport
        self.clients, self.size = clients, size
        self.sandboxes = [sandboxd.Sandbox.create(template, memory=memory, disk=memory, transport=transport())
                          for _ in range(sandboxes)]
        self.data = os.urandom(size)
        self.digest = hashlib.sha256(self.data).hexdigest()

    def close(self):
        for s in self.sandboxes:
            s.kill()

    def sandbox_of(self, i, transport):
        return self.sandboxd.Sandbox.connect(self.sandboxes[i % len(self.sandboxes)].sandbox_id, transport=transport)

    def prepare_reads(self):
        """Each client's file, made inside its sandbox (not through sandboxd)."""
        for i in range(self.clients):
            sbx = self.sandboxes[i % len(self.sandboxes)]
            r = sbx.commands.run(f'head -c {self.size} /dev/urandom > /work/r{i} && sha256sum /work/r{i}')
            assert r.exit_code == 0, r.stderr

    def run(self, what, pid):
        """Runs the clients' reads or writes together; returns (seconds, VmRSS before in
        KiB, VmHWM after in KiB, problems)."""
        problems = []
        barrier = threading.Barrier(self.clients + 1)

        def client(i):
            t = self.transport()
            try:
                files = self.sandbox_of(i, t).files
                barrier.wait(120)
                if what == 'read':
                    got = files.read(f'r{i}', format='bytes')
                    if len(got) != self.size:
                        problems.append(f'client {i} read {len(got)} bytes of {self.size}')
                else:
                    info = files.write(f'w{i}', self.data)
                    if info.size != self.size:
                        problems.append(f'client {i} wrote {info.size} bytes of {self.size}')
            except Exception as e:  # noqa: BLE001 - reported with the others
                problems.append(f'client {i}: {e!r}')
                barrier.abort()
            finally:
                t.close()

        threads = [threading.Thread(target=client, args=(i,)) for i in range(self.clients)]
        for th in threads:
            th.start()
        reset_peak(pid)
        before = status_kib(pid, 'VmRSS')
        barrier.wait(120)
        t0 = time.monotonic()
        for th in threads:
            th.join(600)
        seconds = time.monotonic() - t0
        peak = status_kib(pid, 'VmHWM')
        if what == 'write':
            for i in range(self.clients):
                r = self.sandboxes[i % len(self.sandboxes)].commands.run(f'sha256sum /work/w{i}')
                if r.stdout.split()[:1] != [self.digest]:
                    problems.append(f'w{i} in the sandbox is not what was written: {r.stdout!r}')
        return seconds, before, peak, problems
