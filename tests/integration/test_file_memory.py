#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 27: sandboxd held whole files in memory (a 100 MB files.read through the Python
client raised its RSS from 62 to 137 MB). Ten Python clients reading, then writing, a
large file each at once: sandboxd's peak RSS (VmHWM) grows by a bounded number of parts
(FILE_PART_MAX, 4 MiB), whatever the files' size, and every byte arrives. The whole-buffer
calls refuse more than a part, naming the streamed ones (test_varlink.py); the client
switches by size (python/tests). bench/bench_files.py measures the same with 100 MB files.

Run through run.py, or directly: python3 -m unittest -v test_file_memory
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fileload  # noqa: E402
import harness  # noqa: E402

SOURCE = os.environ.get('SANDBOXD_SOURCE_DIR', os.path.join(HERE, '..', '..'))
sys.path.insert(0, os.path.join(SOURCE, 'python'))
import sandboxd  # noqa: E402

S = None
_owned = False
MiB = fileload.MiB
PART = 4 * MiB              # FILE_PART_MAX (src/shared/sandbox-api.h)
CLIENTS = 10
SIZE = 8 * MiB              # each client's file: two parts; 80 MiB in all, each way
# sandboxd's peak over its RSS before: at most this many parts, for all ten clients
# together (measured: 5-7 MiB reading, 17-20 writing). Holding their files (or ReadFile's
# former 16 MiB parts, encoded) measured 149 and 140 MiB. Under AddressSanitizer (tools/test
# sets ASAN_OPTIONS for that pass) freed memory waits in its 16 MiB quarantine first.
GROWTH_PARTS_MAX = 14 if os.environ.get('ASAN_OPTIONS') else 8


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()


def tearDownModule():
    harness.module_teardown(_owned)


class Memory(harness.SystemTestCase):

    def setUp(self):
        self.pid = fileload.daemon_pid(S)
        self.load = fileload.Load(sandboxd, lambda: sandboxd.VarlinkTransport(S.path(harness.VARLINK_SOCKET)),
                                  'shell', CLIENTS, SIZE, sandboxes=5, memory=256 * MiB)
        self.addCleanup(self.load.close)

    def assert_bounded(self, what):
        seconds, before, peak, problems = self.load.run(what, self.pid)
        self.assertEqual(problems, [])
        growth = (peak - before) * 1024
        print(f'\n# {CLIENTS} concurrent {SIZE // MiB} MiB {what}s: {seconds:.1f} s, sandboxd VmRSS {before // 1024} '
              f'MiB before, VmHWM {peak // 1024} MiB, growth {growth / MiB:.1f} MiB', file=sys.stderr)
        self.assertLess(growth, GROWTH_PARTS_MAX * PART,
                        f'{CLIENTS} concurrent {what}s of {SIZE // MiB} MiB grew sandboxd by {growth / MiB:.0f} MiB')

    def test_concurrent_reads_are_bounded(self):
        self.load.prepare_reads()
        self.assert_bounded('read')

    def test_concurrent_writes_are_bounded(self):
        self.assert_bounded('write')


if __name__ == '__main__':
    unittest.main(verbosity=2)
