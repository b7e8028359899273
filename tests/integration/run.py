#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs the integration tests on one booted system (see harness.py).

Exit status: 0 all passed, 1 something failed, 77 skipped (meson's skip code).
With CI=true in the environment a missing component (bwrap, systemd, a built binary, a
system that does not boot) is a failure, never a skip.

    meson test -C build --suite integration --print-errorlogs    # every module, each its own test
    meson test -C build test_files                                # one module
    python3 tests/integration/run.py [test_core.Limits.test_exec_timeout …]
    python3 tests/integration/run.py --list                       # the modules (meson reads this)

Modules are tests/integration/test_*.py and tests/security/test_*.py (test_core first).
Without arguments, all of them run on one booted system. Docker (dockerd and its image)
is started only when a module that needs it (DOCKER_MODULES) is among those run.
"""

import glob
import os
import sys
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SECURITY = os.path.join(HERE, '..', 'security')
sys.path.insert(0, HERE)
sys.path.insert(1, SECURITY)
import harness  # noqa: E402

FIRST = 'test_core'
MODULES = [FIRST] + sorted(
    {os.path.basename(p)[:-3] for d in (HERE, SECURITY) for p in glob.glob(os.path.join(d, 'test_*.py'))} - {FIRST})
# Modules that need dockerd in the system: test_exposure looks for Docker's sockets and
# state from inside sandboxes, which is only telling while a dockerd is there; test_egress
# checks a Docker sandbox's proxy too; test_snapshots snapshots Docker sandboxes too.
DOCKER_MODULES = {'test_docker', 'test_exposure', 'test_egress', 'test_snapshots'}
# Heavy modules (a browser, npm SDKs, several nodes) run in the plain build only: the
# sanitizer build runs the same C code through the other modules, and CI's time is bounded
# (docs/TESTING.md). `--list --plain-only` prints them for tests/meson.build.
# test_cpython runs CPython's own test suite in sandboxes: 200 s under ASan, 83 s without;
# test_fleet boots two more systems and HAProxy (41 s); test_console runs Chromium.
PLAIN_ONLY = {'test_cpython', 'test_fleet', 'test_claude_code', 'test_console'}
SKIP = 77


def main(argv):
    if argv == ['--list']:
        print('\n'.join(MODULES))
        return 0
    if argv == ['--list', '--plain-only']:
        print('\n'.join(sorted(PLAIN_ONLY & set(MODULES))))
        return 0
    ci = harness.ci()
    names = argv or MODULES
    try:
        system = harness.acquire(docker=any(n.split('.')[0] in DOCKER_MODULES for n in names))
    except harness.Unavailable as e:
        if ci:
            print(f'FAIL: CI=true and a component is unavailable: {e}', file=sys.stderr)
            return 1
        print(f'SKIP: {e}', file=sys.stderr)
        return SKIP
    except KeyboardInterrupt:
        print('interrupted while booting', file=sys.stderr)
        return 1
    except Exception:
        traceback.print_exc()
        print('FAIL: could not bring the system up', file=sys.stderr)
        return 1

    print(f'system: {system.mode} mode, systemd pid {system.pid or 1}, work dir {system.workdir}',
          file=sys.stderr, flush=True)
    result = None
    try:
        suite = unittest.defaultTestLoader.loadTestsFromNames(names)
        result = unittest.TextTestRunner(verbosity=2, stream=sys.stderr).run(suite)
    except KeyboardInterrupt as e:
        print(f'interrupted: {e}', file=sys.stderr)
    finally:
        problems = harness.release()
    for p in problems:
        print(f'FAIL (teardown): {p}', file=sys.stderr)
    if result is None or problems or not result.wasSuccessful():
        return 1
    if result.testsRun == 0 or len(result.skipped) == result.testsRun:
        print('FAIL: no test ran' if ci else 'SKIP: no test ran', file=sys.stderr)
        return 1 if ci else SKIP
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
