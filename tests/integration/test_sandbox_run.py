#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandbox-run (issue 16, seed 003) against the real daemon over its varlink socket: Python
and Node.js handlers that return values, raise, do not parse, are missing; a missing file,
timeouts from the event's __timeout and from --timeout, --profile (from Exec's info, the
execution's record and FromPool: cold from a template without a pool, warm from the
harness's pooled template), an unreachable daemon and a missing template (5), a signal
(the sandbox destroyed first); and stdout carrying the return value's JSON only, the
handler's own output on stderr.

Every test runs the built sandbox-run on the booted system (see harness.py) and asserts on
what its user sees: stdout, stderr, exit status. Handler files live in a directory of the
module's own under the harness's work directory, which the system sees at the same path.
Run through run.py, or directly: python3 -m unittest -v test_sandbox_run
"""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import POOLED_TEMPLATE  # noqa: E402

S = None
_owned = False
DIR = None          # the handler files

UUID = re.compile(r'^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$')

FILES = {
    'echo.py': '''
import os
import sys
print("to stdout from the handler's module")

def handler(event, context):
    print("to stdout from the handler")
    print("to stderr from the handler", file=sys.stderr)
    os.system("echo from a child process")
    return {"event": event, "big": 123456789012345678901234567890, "f": 0.1, "text": "caf\\u00e9",
            "function_name": context.function_name, "request_id": context.aws_request_id,
            "memory": context.memory_limit_in_mb, "remaining": context.get_remaining_time_in_millis(),
            "env": os.environ.get("AWS_LAMBDA_FUNCTION_NAME"), "cwd": os.getcwd()}

def nothing(event, context):
    pass
''',
    # Issue 27: another extension, run with --template python (the bootstrap crashed).
    'h.txt': '''
def handler(event, context):
    return {"got": event, "name": context.function_name}
''',
    'raises.py': '''
def handler(event, context):
    inner(event)

def inner(event):
    raise ValueError("boom: " + event["why"])
''',
    'syntax.py': 'def handler(event, context):\n    return (\n',
    'nohandler.py': 'def other(event, context):\n    return 1\n',
    'sleeps.py': '''
import sys
import time

def handler(event, context):
    print("ready", context.get_remaining_time_in_millis(), file=sys.stderr, flush=True)
    time.sleep(60)
    return "too late"
''',
    'echo.js': '''
console.log("to stdout from the module");
exports.handler = async (event, context) => {
    console.log("to stdout from the handler");
    console.error("to stderr from the handler");
    await new Promise((resolve) => setTimeout(resolve, 10));
    return { event, functionName: context.functionName, awsRequestId: context.awsRequestId,
             memoryLimitInMB: context.memoryLimitInMB, remaining: context.getRemainingTimeInMillis() };
};
exports.sync = (event) => ({ sync: event.n * 2 });
exports.callback = (event, context, callback) => { setTimeout(() => callback(null, { callback: true }), 5); };
exports.raises = async () => { throw new TypeError("bad type"); };
exports.notAFunction = 42;
''',
    'esm.mjs': 'export const handler = async (event) => ({ esm: true, event });\n',
    'syntax.mjs': 'export const handler = async (event) => { return (; };\n',
    # Errors while the module loads: raised (1), not syntax errors of the file (3).
    'imports.py': 'import no_such_module_anywhere\n\ndef handler(event, context):\n    return 1\n',
    'loadtime.py': 'compile("(", "generated", "exec")\n\ndef handler(event, context):\n    return 1\n',
    'loadtime.js': 'JSON.parse("{");\nexports.handler = async () => 1;\n',
    'requires.js': 'require("no-such-package-anywhere");\nexports.handler = async () => 1;\n',
    'syntax.js': 'exports.handler = async (event) => { return (; };\n',
    'sleeps.js': '''
exports.handler = async () => { console.error("ready"); await new Promise((r) => setTimeout(r, 60000)); };
''',
}


def setUpModule():
    global S, _owned, DIR
    S, _owned = harness.module_setup()
    if not os.access(S.paths.sandbox_run, os.X_OK):
        raise AssertionError(f'{S.paths.sandbox_run} is not built')
    DIR = tempfile.mkdtemp(prefix='sandbox-run-', dir=S.workdir)
    os.chmod(DIR, 0o755)
    for name, text in FILES.items():
        with open(os.path.join(DIR, name), 'w') as f:
            f.write(text.lstrip('\n'))


def tearDownModule():
    harness.module_teardown(_owned)


def path(name):
    return os.path.join(DIR, name)


def sandbox_ids():
    replies, error, params = S.varlink_call('ListSandboxes')
    assert error is None, (error, params)
    return {s['id'] for s in replies[0]['sandboxes']}


class SandboxRun(harness.SystemTestCase):
    def setUp(self):
        self.before = sandbox_ids()

    def tearDown(self):
        # Ephemeral: whatever happened, no sandbox of the run is left.
        self.assertEqual(sandbox_ids() - self.before, set(), 'sandbox-run left a sandbox behind')

    def run_handler(self, *args, env=None, timeout=60, input=None):
        return S.run([S.paths.sandbox_run] + list(args), env=env, timeout=timeout, input=input)

    def assert_exit(self, cp, code):
        self.assertEqual(cp.returncode, code, f'stdout: {cp.stdout!r}\nstderr: {cp.stderr!r}')

    def lambda_error(self, cp):
        """The error object printed (as AWS Lambda prints one) as the last line of stderr."""
        self.assertEqual(cp.stdout, '', 'stdout is for the return value only')
        return json.loads(cp.stderr.strip().splitlines()[-1])

    # ---- return values ------------------------------------------------------------------

    def test_python_returns_value_on_stdout_and_logs_on_stderr(self):
        cp = self.run_handler(path('echo.py'), '--event', '{"name": "x", "__timeout": 30, "timeout": 5}')
        self.assert_exit(cp, 0)
        # stdout: exactly one JSON document, the return value, its numbers as Python wrote them.
        self.assertEqual(len(cp.stdout.splitlines()), 1, cp.stdout)
        self.assertIn('"big": 123456789012345678901234567890', cp.stdout)
        self.assertIn('"f": 0.1,', cp.stdout)
        out = json.loads(cp.stdout)
        self.assertEqual(out['event'], {'name': 'x', 'timeout': 5}, '__timeout is removed, "timeout" is theirs')
        self.assertEqual(out['text'], 'café')
        self.assertEqual(out['function_name'], 'echo')
        self.assertRegex(out['request_id'], UUID)
        self.assertEqual(out['memory'], '512')          # the python template's MemoryMax, in MB
        self.assertTrue(25000 < out['remaining'] <= 30000, out['remaining'])
        self.assertEqual(out['env'], 'echo')
        self.assertEqual(out['cwd'], '/work')
        # The handler's own output (its module's, its child's too) went to stderr.
        for line in ("to stdout from the handler's module", 'to stdout from the handler',
                     'to stderr from the handler', 'from a child process'):
            self.assertIn(line, cp.stderr)
            self.assertNotIn(line, cp.stdout)

        # A fresh request id each time; --context overrides; None is null.
        again = self.run_handler(path('echo.py'), '--context', '{"function_name": "billing"}')
        self.assert_exit(again, 0)
        self.assertNotEqual(json.loads(again.stdout)['request_id'], out['request_id'])
        self.assertEqual(json.loads(again.stdout)['function_name'], 'billing')
        self.assertEqual(json.loads(again.stdout)['event'], {})
        cp = self.run_handler(path('echo.py'), '--handler', 'nothing')
        self.assert_exit(cp, 0)
        self.assertEqual(cp.stdout, 'null\n')

    def test_handler_file_of_another_extension(self):
        cp = self.run_handler(path('h.txt'), '--template', 'python', '--event', '{"a": 1}')
        self.assert_exit(cp, 0)
        self.assertEqual(json.loads(cp.stdout), {'got': {'a': 1}, 'name': 'h'})

    def test_event_from_file_and_stdin(self):
        with open(path('event.json'), 'w') as f:
            f.write('{"from": "file", "__timeout": 10}')
        cp = self.run_handler(path('echo.py'), '--event-file', path('event.json'))
        self.assert_exit(cp, 0)
        out = json.loads(cp.stdout)
        self.assertEqual(out['event'], {'from': 'file'})
        self.assertLessEqual(out['remaining'], 10000)
        cp = self.run_handler(path('echo.py'), '--event-file', '-', input='[1, 2, 3]')
        self.assert_exit(cp, 0)
        self.assertEqual(json.loads(cp.stdout)['event'], [1, 2, 3])

    def test_node_handlers(self):
        cp = self.run_handler(path('echo.js'), '--event', '{"n": 1}', '--memory', '256M')
        self.assert_exit(cp, 0)
        out = json.loads(cp.stdout)
        self.assertEqual(out['event'], {'n': 1})
        self.assertEqual(out['functionName'], 'echo')
        self.assertRegex(out['awsRequestId'], UUID)
        self.assertEqual(out['memoryLimitInMB'], '256')   # --memory, as AWS Lambda gives it: a string
        self.assertTrue(290000 < out['remaining'] <= 300000, out['remaining'])   # the default 300 s
        for line in ('to stdout from the module', 'to stdout from the handler', 'to stderr from the handler'):
            self.assertIn(line, cp.stderr)
        self.assertEqual(len(cp.stdout.splitlines()), 1)

        cp = self.run_handler(path('echo.js'), '--handler', 'sync', '--event', '{"n": 21}')
        self.assert_exit(cp, 0)
        self.assertEqual(json.loads(cp.stdout), {'sync': 42})
        cp = self.run_handler(path('echo.js'), '--handler', 'callback')
        self.assert_exit(cp, 0)
        self.assertEqual(json.loads(cp.stdout), {'callback': True})
        cp = self.run_handler(path('esm.mjs'), '--event', '"hi"')
        self.assert_exit(cp, 0)
        self.assertEqual(json.loads(cp.stdout), {'esm': True, 'event': 'hi'})

    # ---- errors of the handler --------------------------------------------------------------

    def test_raised_error(self):
        cp = self.run_handler(path('raises.py'), '--event', '{"why": "no reason"}')
        self.assert_exit(cp, 1)
        e = self.lambda_error(cp)
        self.assertEqual(e['errorType'], 'ValueError')
        self.assertEqual(e['errorMessage'], 'boom: no reason')
        self.assertEqual(len(e['stackTrace']), 2, e['stackTrace'])   # handler, inner: none of the runtime's
        self.assertIn('line 5, in inner', e['stackTrace'][1])
        # --json: one object on stdout, the error in it.
        cp = self.run_handler(path('raises.py'), '--event', '{"why": "json"}', '--json')
        self.assert_exit(cp, 1)
        out = json.loads(cp.stdout)
        self.assertEqual(out['exitCode'], 1)
        self.assertEqual(out['error']['errorMessage'], 'boom: json')
        self.assertNotIn('result', out)

        cp = self.run_handler(path('echo.js'), '--handler', 'raises')
        self.assert_exit(cp, 1)
        e = self.lambda_error(cp)
        self.assertEqual((e['errorType'], e['errorMessage']), ('TypeError', 'bad type'))
        self.assertTrue(any('echo.js' in line for line in e['stackTrace']), e['stackTrace'])

    def test_syntax_error_and_missing_handler(self):
        for args, error_type in (((path('syntax.py'),), 'Runtime.UserCodeSyntaxError'),
                                 ((path('syntax.js'),), 'Runtime.UserCodeSyntaxError'),
                                 ((path('syntax.mjs'),), 'Runtime.UserCodeSyntaxError'),
                                 ((path('nohandler.py'),), 'Runtime.HandlerNotFound'),
                                 ((path('echo.py'), '--handler', 'absent'), 'Runtime.HandlerNotFound'),
                                 ((path('echo.js'), '--handler', 'absent'), 'Runtime.HandlerNotFound'),
                                 ((path('echo.js'), '--handler', 'notAFunction'), 'Runtime.HandlerNotFound')):
            with self.subTest(args=args):
                cp = self.run_handler(*args)
                self.assert_exit(cp, 3)
                self.assertEqual(self.lambda_error(cp)['errorType'], error_type)
        cp = self.run_handler(path('syntax.py'), '--json')
        self.assertIn("Syntax error in module 'syntax'", json.loads(cp.stdout)['error']['errorMessage'])

    def test_errors_while_loading_are_raised_errors(self):
        for name, error_type in (('imports.py', 'Runtime.ImportModuleError'), ('loadtime.py', 'SyntaxError'),
                                 ('loadtime.js', 'SyntaxError'), ('requires.js', 'Runtime.ImportModuleError')):
            with self.subTest(name=name):
                cp = self.run_handler(path(name))
                self.assert_exit(cp, 1)
                self.assertEqual(self.lambda_error(cp)['errorType'], error_type)

    # ---- before the sandbox: files ------------------------------------------------------------

    def test_missing_or_unreadable_file(self):
        for args in ((path('absent.py'),), (DIR + '/',), (path('echo.py'), '--event-file', path('absent.json'))):
            with self.subTest(args=args):
                cp = self.run_handler(*args)
                self.assert_exit(cp, 2)
                self.assertEqual(cp.stdout, '')
                self.assertRegex(cp.stderr, r'^sandbox-run: .*(No such file|Is a directory)')
        cp = self.run_handler(path('absent.py'), '--json')
        self.assert_exit(cp, 2)
        self.assertEqual(json.loads(cp.stdout)['exitCode'], 2)
        # Bad arguments are general errors (1), found before any sandbox is made.
        # JSON is read strictly, as on every face: NaN, a key twice, a number beyond 64 bits.
        for args in (('--timeout', '0'), ('--event', '{not json'), ('--event', '{"__timeout": 7200}'),
                     ('--context', '[1]'), ('--event', '{"x": NaN}'), ('--event', '{"a": 1, "a": 2}'),
                     ('--event', '{"n": 18446744073709551616}')):
            with self.subTest(args=args):
                self.assert_exit(self.run_handler(path('echo.py'), *args), 1)

    # ---- timeouts ---------------------------------------------------------------------------

    def test_timeout_from_the_event(self):
        start = time.monotonic()
        cp = self.run_handler(path('sleeps.py'), '--event', '{"__timeout": 2}')
        took = time.monotonic() - start
        self.assert_exit(cp, 4)
        self.assertIn('ready', cp.stderr)
        e = self.lambda_error(cp)
        self.assertEqual(e['errorType'], 'Sandbox.Timedout')
        self.assertEqual(e['errorMessage'], 'Task timed out after 2.00 seconds')
        self.assertLess(took, 15, 'the daemon ends the handler at its timeout')
        m = re.search(r'ready (\d+)', cp.stderr)
        self.assertTrue(1000 < int(m.group(1)) <= 2000, cp.stderr)

    def test_timeout_option_wins(self):
        cp = self.run_handler(path('sleeps.js'), '--timeout', '1', '--event', '{"__timeout": 100}', '--json')
        self.assert_exit(cp, 4)
        out = json.loads(cp.stdout)
        self.assertEqual(out['exitCode'], 4)
        self.assertEqual(out['error']['errorMessage'], 'Task timed out after 1.00 seconds')

    # ---- --profile ------------------------------------------------------------------------------

    def test_profile_cold(self):
        cp = self.run_handler(path('echo.py'), '--profile')
        self.assert_exit(cp, 0)
        json.loads(cp.stdout)   # stdout stays the return value
        report = [line for line in cp.stderr.splitlines() if line.startswith('REPORT ')]
        self.assertEqual(len(report), 1, cp.stderr)
        self.assertRegex(report[0], r'Duration: \d+\.\d\d ms\tCPU Time: \d+\.\d\d ms\tMax Memory Used: \d+ MB\t'
                                    r'Max RSS: \d+ MB\tMemory Size: 512 MB\tStart: cold\t')

        cp = self.run_handler(path('echo.py'), '--profile', '--json')
        self.assert_exit(cp, 0)
        out = json.loads(cp.stdout)
        p = out['profile']
        self.assertEqual(out['result']['request_id'], out['requestId'])
        self.assertEqual((p['start'], p['template'], p['memoryLimitBytes']), ('cold', 'python', 512 << 20))
        for key in ('durationUSec', 'cpuUSec', 'maxRSSBytes', 'peakMemoryBytes', 'sandboxCPUUSec'):
            self.assertGreater(p[key], 0, key)
        # The numbers are the daemon's: the execution's record says the same.
        replies, error, params = S.varlink_call('ListExecutions', {'filter': {'SandboxId': p['sandboxId']}})
        self.assertIsNone(error, params)
        (record,) = replies[0]['executions']
        # Peak memory: the sandbox's cgroup's (where the kernel keeps one), else the process's.
        self.assertEqual(p['peakMemoryBytes'], record['memoryPeak'] or p['maxRSSBytes'])
        self.assertEqual(record['cpuUSec'], p['cpuUSec'])
        self.assertEqual(record['cgroupCPUNSec'] // 1000, p['sandboxCPUUSec'])
        self.assertEqual(record['argv'][:2], ['sh', '-c'])

    def test_profile_warm_from_the_pool(self):
        def pooled_ready():
            # The harness's pooled template keeps one sandbox started (test_pool.py).
            return any(u for u in S.sandbox_scopes(include_pool=True)
                       if u[len('sandbox-'):-len('.scope')] not in sandbox_ids())
        deadline = time.monotonic() + 30
        while not pooled_ready() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertTrue(pooled_ready(), 'the pool did not fill')
        cp = self.run_handler(path('echo.py'), '--template', POOLED_TEMPLATE, '--profile', '--json')
        self.assert_exit(cp, 0)
        p = json.loads(cp.stdout)['profile']
        self.assertEqual((p['start'], p['template']), ('warm', POOLED_TEMPLATE))
        # Limits of its own are never a pooled sandbox's: cold.
        cp = self.run_handler(path('echo.py'), '--template', POOLED_TEMPLATE, '--memory', '100M', '--profile')
        self.assert_exit(cp, 0)
        self.assertIn('\tStart: cold\t', cp.stderr)
        self.assertIn('\tMemory Size: 100 MB\t', cp.stderr)

    # ---- no sandbox (5) ----------------------------------------------------------------------------

    def test_unreachable_daemon(self):
        cp = self.run_handler(path('echo.py'), env={'SANDBOXD_VARLINK_ADDRESS': f'unix:{DIR}/no-such-socket'})
        self.assert_exit(cp, 5)
        self.assertEqual(cp.stdout, '')
        self.assertIn('Cannot reach sandboxd', cp.stderr)
        cp = self.run_handler(path('echo.py'), '--json', env={'SANDBOXD_VARLINK_ADDRESS': f'unix:{DIR}/no-such-socket'})
        self.assert_exit(cp, 5)
        self.assertEqual(json.loads(cp.stdout)['error']['errorType'], 'Sandbox.InitError')

    def test_missing_template(self):
        cp = self.run_handler(path('echo.py'), '--template', 'no-such-template')
        self.assert_exit(cp, 5)
        self.assertIn('NoSuchTemplate', cp.stderr)
        self.assertEqual(cp.stdout, '')

    def test_refused_create(self):
        # Below the daemon's 16 MiB minimum: CreateSandbox refuses (InvalidOption).
        cp = self.run_handler(path('echo.py'), '--memory', '1M')
        self.assert_exit(cp, 5)
        self.assertIn('InvalidOption', cp.stderr)

    # ---- signals -------------------------------------------------------------------------------------

    def test_signal_destroys_the_sandbox(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            with self.subTest(signal=sig.name):
                p = subprocess.Popen(S.wrap([S.paths.sandbox_run, path('sleeps.py')]), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True, text=True)
                try:
                    self.assertIn('ready', p.stderr.readline())
                    self.assertEqual(len(sandbox_ids() - self.before), 1)
                    # nsenter -p forks: the signal goes to sandbox-run itself.
                    target = p.pid
                    if S.mode == 'namespace':
                        with open(f'/proc/{p.pid}/task/{p.pid}/children') as f:
                            target = int(f.read().split()[0])
                    os.kill(target, sig)
                    out, err = p.communicate(timeout=30)
                finally:
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)
                        p.wait()
                self.assertEqual(p.returncode, 128 + sig, err)
                self.assertEqual(out, '')
                self.assertIn('destroyed', err)
                self.assertEqual(sandbox_ids() - self.before, set())


if __name__ == '__main__':
    unittest.main()
