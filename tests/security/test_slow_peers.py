#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 13: a bus peer that asks for large replies and does not read them. It may lose
its own answers (refused with Busy), but sandboxd keeps answering everyone else at once,
large replies too, and its memory stays bounded (sandboxd(8), Bounds; bus-flow.h).

The slow peer is a raw D-Bus connection (rawbus.py) with a small receive buffer: it
sends its calls and never reads again, as a stuck or hostile client would: 32 ReadFile
of 4 MiB (ReadFile's most; the issue's report had 16 MiB), or tens of thousands of small calls."""

import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rawbus  # noqa: E402
import secutil  # noqa: E402
from secutil import E, M, MGR, SBX, Base, MiB, bus, call, sandbox_path  # noqa: E402

FILE_SIZE = 4 * MiB        # FILE_PART_MAX: the largest reply ReadFile gives
CALLS = 32                 # as the report: 32 reads of the largest, none read
SMALL_CALLS = 40000        # introspections of a sandbox: some 300 MiB of replies
WATCH_SEC = 10             # how long the other client is watched
LATENCY_MAX_SEC = 2.0      # the other client's calls, each
RSS_GROWTH_MAX_MIB = 80    # sandboxd's RSS, over what it had before (sandboxd(8), Bounds)


def setUpModule():
    secutil.setup_module()


def tearDownModule():
    secutil.teardown_module()


BUS = secutil.harness.BUS_NAME.encode()


def read_file_call(serial, sid, path):
    body = rawbus.Writer()
    body.string(path.encode())
    body.u64(0)
    body.u64(0)                                # 0: all of it (at most FILE_PART_MAX)
    return rawbus.message(serial, BUS, sandbox_path(sid).encode(), SBX.encode(), b'ReadFile', b'stt', bytes(body.b))


def introspect_call(serial, sid):
    return rawbus.message(serial, BUS, sandbox_path(sid).encode(), b'org.freedesktop.DBus.Introspectable',
                          b'Introspect')


def send_quietly(sock, data):
    """Sends data (the bus may stop reading it: then until the socket is closed)."""
    try:
        sock.sendall(data)
    except OSError:
        pass


class SlowPeer(Base):

    def watch(self, pid, rss_before):
        """Another client's calls, timed, for WATCH_SEC, and sandboxd's RSS meanwhile:
        asserts both are within their bounds."""
        S = secutil.S
        latencies, failed, rss_peak = [], [], rss_before
        deadline = time.monotonic() + WATCH_SEC
        while time.monotonic() < deadline:
            start = time.monotonic()
            cp = S.busctl('call', secutil.harness.BUS_NAME, M, MGR, 'ListSandboxes', timeout=60)
            latencies.append(time.monotonic() - start)
            if cp.returncode != 0:
                failed.append(cp.stderr.strip())
            rss_peak = max(rss_peak, secutil.daemon_rss_kib(pid))
            time.sleep(0.2)
        growth_mib = (rss_peak - rss_before) / 1024
        print('latencies (ms):', [round(x * 1000) for x in latencies], file=sys.stderr)
        print(f'\nother client: {len(latencies)} calls, {len(failed)} failed, slowest {max(latencies) * 1000:.0f} ms, '
              f'median {sorted(latencies)[len(latencies) // 2] * 1000:.0f} ms; sandboxd RSS '
              f'{rss_before / 1024:.0f} MiB before, {rss_peak / 1024:.0f} MiB at most (+{growth_mib:.0f} MiB)',
              file=sys.stderr)
        self.assertEqual(failed, [], 'ListSandboxes failed while a peer did not read')
        self.assertLess(max(latencies), LATENCY_MAX_SEC,
                        f'another client waited {max(latencies):.1f} s while a peer did not read')
        self.assertLess(growth_mib, RSS_GROWTH_MAX_MIB, 'sandboxd grew by what a peer did not read')

    def test_a_peer_that_does_not_read_stalls_nobody(self):
        S = secutil.S
        sid = self.create()
        self.ok(self.exec(sid, 'sh', '-c', f'head -c {FILE_SIZE} /dev/urandom > /work/big'))
        identity = secutil.daemon_identity()
        pid = identity[0]
        rss_before = secutil.daemon_rss_kib(pid)

        slow = rawbus.connect(S.path('/run/dbus/system_bus_socket'), rcvbuf=4096)
        self.addCleanup(slow.close)
        for i in range(CALLS):
            slow.sendall(read_file_call(2 + i, sid, '/work/big'))
        self.watch(pid, rss_before)

        # Large replies to others still go out, while it still does not read.
        start = time.monotonic()
        res = bus([call(sandbox_path(sid), SBX, 'ReadFile', 'stt', '/work/big', 0, 0)])[0]
        self.assertEqual(res.get('reply'), [{'len': FILE_SIZE}], res)
        self.assertLess(time.monotonic() - start, 10)

        # Now it reads: what it asked for came as replies or as Busy, each call answered.
        eof, msgs = rawbus.recv_messages(slow, 120, range(2, 2 + CALLS))
        answers = {serial: (kind, name) for kind, name, serial in msgs if serial and serial > 1}
        busy = [s for s, (kind, name) in answers.items() if kind == 3 and name == E + 'Busy']
        replies = [s for s, (kind, _name) in answers.items() if kind == 2]
        print(f'slow peer: {len(replies)} replies, {len(busy)} Busy, eof {eof}', file=sys.stderr)
        if not eof:
            self.assertEqual(len(answers), CALLS, f'calls of the slow peer left unanswered: {answers}')
            self.assertEqual(len(busy) + len(replies), CALLS, answers)
        slow.close()
        self.assert_serving(identity)


    def test_a_peer_that_calls_without_reading_stalls_nobody(self):
        # Small replies add up as well: introspection of a sandbox, some KiB each, asked
        # for again and again and never read.
        S = secutil.S
        sid = self.create()
        identity = secutil.daemon_identity()
        pid = identity[0]
        rss_before = secutil.daemon_rss_kib(pid)

        slow = rawbus.connect(S.path('/run/dbus/system_bus_socket'), rcvbuf=4096)
        self.addCleanup(slow.close)
        calls = b''.join(introspect_call(2 + i, sid) for i in range(SMALL_CALLS))
        sender = threading.Thread(target=send_quietly, args=(slow, calls), daemon=True)
        sender.start()
        self.watch(pid, rss_before)
        slow.close()
        sender.join(30)
        self.assert_serving(identity)


if __name__ == '__main__':
    unittest.main(verbosity=2)
