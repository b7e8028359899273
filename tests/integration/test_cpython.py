#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 11's proof that real programs run unchanged in a sandbox: CPython's own
regression suite (Debian's libpython3.11-testsuite) in a `python` sandbox, with the host
(an unprivileged user, uid 65534, through setpriv) as the reference. A module that passes
on the host must pass in the sandbox, unless it is listed in BY_DESIGN with what the
sandbox forbids on purpose. The host runs only the modules that did not pass in the
sandbox (running all of them there as well doubled the test's time, about 150 s of each
CI run, for modules that passed anyway): each must fail on the host too, or be by design.

Run through run.py, or directly: python3 -m unittest -v test_cpython
"""

import glob
import os
import re
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

S = None
_owned = False

# Processes, signals, sockets on localhost, asyncio, TLS, subprocesses, multiprocessing,
# files, archives, paths, users and groups, logging, HTTP/SMTP/FTP/POP servers, threads,
# time, locales, terminals. Chosen to take about a minute with -j2 on 2 cores; the
# slowest (test_concurrent_futures, the full multiprocessing suites, test_io, test_imaplib)
# are left out for time, test_sqlite3 because Debian's package lacks it.
MODULES = [
    'test_subprocess', 'test_signal', 'test_socket', 'test_selectors', 'test_select',
    'test_asyncio.test_events', 'test_asyncio.test_subprocess', 'test_asyncio.test_sock_lowlevel',
    'test_asyncio.test_server', 'test_asyncio.test_unix_events', 'test_asyncio.test_streams',
    'test_ssl', 'test_multiprocessing_main_handling', 'test_os', 'test_posix', 'test_pwd', 'test_grp',
    'test_getpass', 'test_pathlib', 'test_shutil', 'test_tempfile', 'test_glob', 'test_fileio',
    'test_tarfile', 'test_zipfile', 'test_gzip', 'test_zlib', 'test_bz2', 'test_lzma', 'test_logging',
    'test_httpservers', 'test_httplib', 'test_urllib2_localnet', 'test_wsgiref', 'test_smtplib',
    'test_ftplib', 'test_poplib', 'test_threading', 'test_thread', 'test_time', 'test_locale',
    'test_platform', 'test_mmap', 'test_fcntl', 'test_pty', 'test_resource', 'test_uuid',
    'test_hashlib', 'test_posixpath', 'test_site', 'test_sysconfig', 'test_venv', 'test_sys',
    'test_faulthandler', 'test_cmd_line', 'test_popen', 'test_mailbox', 'test_datetime',
    'test_compileall', 'test_importlib',
]

# Under the sanitizers (tools/test's second pass sets ASAN_OPTIONS) the suite runs inside
# a sandbox as in the first pass, through a daemon that only starts it: a subset keeps the
# CI run within its time (the by-design modules, and what touches the sandbox's users,
# signals, terminals and files); the first pass runs them all.
SANITIZED_SUBSET = ['test_subprocess', 'test_os', 'test_importlib', 'test_signal', 'test_socket',
                    'test_select', 'test_pwd', 'test_grp', 'test_tempfile', 'test_shutil', 'test_pty',
                    'test_site']
if os.environ.get('ASAN_OPTIONS'):
    MODULES = SANITIZED_SUBSET

# Modules that pass on the host but cannot in a sandbox, by design (sandboxd(8), "What a
# sandbox cannot do"), with the reason; each must still fail in the sandbox for the reason
# given (the pattern is searched in its output), so that the list cannot go stale.
BY_DESIGN = {
    'test_subprocess': (r'test_(user|group)',
                        'switches to uid/gid 65534, which do not exist in the sandbox\'s user namespace '
                        '(only 1000 is mapped): EINVAL'),
    'test_os': (r'test_chown_without_permission', 'chown to another uid: unmapped, so EINVAL rather than EPERM'),
    'test_importlib': (r'test_(circular|side_effect)_import',
                       'removes .pyc files beside the standard library, which is read-only: EROFS rather '
                       'than ENOENT'),
}

# -W: a failing module's output, to tell by-design failures from others.
REGRTEST = ['python3', '-m', 'test', '-j2', '-W', '--timeout', '300']
# "0:00:05 load avg: 1.2 [ 3/60/1] test_x passed (31.2 sec) -- running: …"
RESULT_RE = re.compile(r'\[\s*\d+/\d+(?:/\d+)?\] (test[\w.]+) (.+?)(?: -- running:.*)?$')


def results(output):
    """{module: 'passed' | 'failed' | 'skipped' | …} from regrtest's progress lines."""
    out = {}
    for line in output.splitlines():
        m = RESULT_RE.search(line)
        if m:
            status = m.group(2)
            # "env changed" is about the test's own hygiene (threads, files left), not a failure.
            if status.startswith('passed') or status.startswith('failed (env changed)'):
                out[m.group(1)] = 'passed'
            elif status.startswith('skipped') or status.startswith('run no tests'):
                out[m.group(1)] = 'skipped'
            else:
                out[m.group(1)] = status
    return out


def module_output(output, module):
    """What regrtest printed about MODULE (its failure report), for the test's message."""
    lines = output.splitlines()
    keep, out = False, []
    for line in lines:
        if RESULT_RE.search(line):
            keep = RESULT_RE.search(line).group(1) == module
        if keep:
            out.append(line)
    return '\n'.join(out[-80:])


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()


def tearDownModule():
    harness.module_teardown(_owned)


class CPythonSuite(harness.SystemTestCase):
    def setUp(self):
        if not glob.glob(S.path('/usr/lib/python3*/test/libregrtest')):
            msg = "CPython's test suite is not installed (libpython3.11-testsuite)"
            if harness.ci():
                self.fail(msg)
            self.skipTest(msg)

    def run_host(self, modules):
        # In the booted system's own /var/tmp, reached from here through S.path().
        outside = tempfile.mkdtemp(prefix='sandboxd-cpython-', dir=S.path('/var/tmp'))
        self.addCleanup(shutil.rmtree, outside, ignore_errors=True)
        os.chown(outside, 65534, 65534)
        os.chmod(outside, 0o700)
        d = '/var/tmp/' + os.path.basename(outside)
        env = ['env', '-i', '-C', d, 'PATH=/usr/local/bin:/usr/bin:/bin', f'HOME={d}', f'TMPDIR={d}',
               'LANG=C.UTF-8', 'TERM=dumb']
        start = time.monotonic()
        cp = S.run(['setpriv', '--reuid', '65534', '--regid', '65534', '--clear-groups'] + env + REGRTEST
                   + modules, timeout=900)
        return time.monotonic() - start, cp.stdout + cp.stderr

    def run_sandbox(self):
        # The host side has both cores and memory enough: so has the sandbox.
        cp = S.sandboxctl('create', '--template', 'python', '--memory', '3G', '--cpu', '200%', '--tasks', '2048',
                          '--disk', '2G')
        self.assertEqual(cp.returncode, 0, cp.stderr)
        sid = cp.stdout.strip()
        self.addCleanup(S.sandboxctl, 'destroy', sid, timeout=120)
        start = time.monotonic()
        # The template's PYTHONDONTWRITEBYTECODE and PYTHONUNBUFFERED off (empty), as on the host.
        cp = S.sandboxctl('exec', '--timeout', '900', '--env', 'PYTHONDONTWRITEBYTECODE=', '--env',
                          'PYTHONUNBUFFERED=', sid, '--', *REGRTEST, *MODULES, timeout=960)
        return time.monotonic() - start, cp.stdout + cp.stderr

    def test_same_modules_pass_inside_as_outside(self):
        sandbox_time, sandbox_out = self.run_sandbox()
        inside = results(sandbox_out)
        self.assertEqual(set(inside), set(MODULES), f'sandbox run incomplete:\n{sandbox_out[-3000:]}')
        passed_inside = sorted(m for m, r in inside.items() if r == 'passed')
        # The reference for what did not pass inside: the same modules on the host.
        again = sorted(set(MODULES) - set(passed_inside))
        host_time, host_out = self.run_host(again) if again else (0.0, '')
        host = results(host_out)
        passed_host = sorted(m for m, r in host.items() if r == 'passed')
        print(f'\nCPython regression suite, {len(MODULES)} modules, -j2: sandbox {len(passed_inside)} passed in '
              f'{sandbox_time:.1f} s; the {len(again)} others on the host (uid 65534): {len(passed_host)} passed '
              f'in {host_time:.1f} s', file=sys.stderr, flush=True)
        self.assertEqual(set(host), set(again), f'host run incomplete:\n{host_out[-3000:]}')
        # Nearly all pass: the machine is a fair place to run the suite at all.
        self.assertGreaterEqual(len(passed_inside) + len(set(BY_DESIGN) & set(MODULES)), len(MODULES) * 0.9,
                                f'most modules fail: {inside}')

        lost = [m for m in passed_host if m not in BY_DESIGN]
        self.assertEqual(lost, [], 'passed on the host, not in the sandbox:\n' +
                         '\n\n'.join(module_output(sandbox_out, m) for m in lost))
        # A module failing by design fails only in the tests that need what is forbidden.
        for m, (pattern, _reason) in BY_DESIGN.items():
            if m not in MODULES:
                continue
            self.assertNotEqual(inside.get(m), 'passed', f'{m} passes in the sandbox now: drop it from BY_DESIGN')
            failed = re.findall(r'^(?:ERROR|FAIL): (\w+) ', module_output(sandbox_out, m), re.M)
            self.assertTrue(failed, f'{m}: no failing test named:\n{module_output(sandbox_out, m)}')
            for t in failed:
                self.assertRegex(t, pattern, f'{m}.{t} fails in the sandbox, not by design:\n'
                                 f'{module_output(sandbox_out, m)}')


if __name__ == '__main__':
    unittest.main()
