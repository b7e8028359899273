#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 4's background processes and terminals on a real systemd, bus and bwrap: Start,
ListProcesses, Signal, Wait, ReadOutput, ResizeTerminal, as a D-Bus client sees them, and
that a sandbox's processes end with it.

The calls are made by a D-Bus client inside the booted system (busclient.py), each script
a new bus connection: a started process outlives the connection that started it. Run
through run.py, or directly: python3 -m unittest -v test_processes
"""

import base64
import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import busclient  # noqa: E402
import harness  # noqa: E402

S = None           # the harness.System
_owned = False     # True when this module booted it (not run.py)

STILL_RUNNING = 'io.sandboxd.Sandbox1.StillRunning'
SERVER = ['python3', '-m', 'http.server', '8000', '--bind', '127.0.0.1']
# A client in the sandbox: the status of GET /, or the error's class name.
FETCH = ('import urllib.request, sys\n'
         'try:\n'
         '    r = urllib.request.urlopen("http://127.0.0.1:8000/", timeout=5)\n'
         '    print(r.status, r.read().decode()[:200].replace("\\n", " "))\n'
         'except Exception as e:\n'
         '    print(type(e).__name__, e)\n')


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()


def tearDownModule():
    harness.module_teardown(_owned)


def proc_uids(pid):
    """(real, effective) uid of a host pid, or None when it is gone."""
    try:
        with open(f'/proc/{pid}/status') as f:
            for line in f:
                if line.startswith('Uid:'):
                    real, eff = line.split()[1:3]
                    return int(real), int(eff)
    except OSError:
        return None
    return None


def pids_of_uid(uid):
    out = []
    for d in os.listdir('/proc'):
        if d.isdigit() and (proc_uids(d) or (None,))[0] == uid:
            out.append(int(d))
    return out


def comm(pid):
    try:
        with open(f'/proc/{pid}/comm') as f:
            return f.read().strip()
    except OSError:
        return None


class Base(harness.SandboxTestCase):
    """Over the bus, through busclient scripts; sandboxes made here are destroyed afterwards."""

    def script(self, body, timeout=120):
        return busclient.run_script(S, body, timeout=timeout)

    def create(self, template='shell'):
        res = self.script(f'emit(call(manager(), "CreateSandbox", {template!r}, opts()))')
        self.assertIn('ok', res, f'CreateSandbox failed: {res}')
        sid = res['ok'][0]
        self.addCleanup(busclient.run_script, S, f'emit(destroy({sid!r}))')
        return sid

    def calls(self, sid, body, timeout=120):
        return self.script(f's = sandbox({sid!r})\n{body}', timeout=timeout)

    def call(self, sid, method, *args, timeout=60):
        """One call; ARGS are Python expressions for the script."""
        return self.calls(sid, f'emit(call(s, {method!r}, {"".join(a + ", " for a in args)}timeout={timeout}))',
                          timeout=timeout + 60)

    def start(self, sid, argv, **options):
        opts = ', '.join(f'{k}={v!r}' for k, v in options.items())
        res = self.call(sid, 'Start', repr(argv), f'opts({opts})')
        self.assertIn('ok', res, f'Start {argv}: {res}')
        self.assertIsInstance(res['ok'], int)
        return res['ok']

    def exec_out(self, sid, argv, timeout=60):
        res = self.call(sid, 'Exec', repr(argv), f'opts(Timeout={timeout})', timeout=timeout + 10)
        self.assertIn('ok', res, f'Exec {argv}: {res}')
        status, out, err, _info = res['ok']
        return status, bytes.fromhex(out['bytes']).decode(), bytes.fromhex(err['bytes']).decode()

    def processes(self, sid):
        res = self.call(sid, 'ListProcesses')
        self.assertIn('ok', res, res)
        return {p[0]: p for p in res['ok']}



class Background(Base):

    def test_http_server_serves_is_listed_signalled_and_gone(self):
        sid = self.create('python')
        proc = self.start(sid, SERVER)

        # A second exec in the same sandbox reaches it (it may need a moment to listen).
        deadline = time.monotonic() + 20
        while True:
            _st, out, err = self.exec_out(sid, ['python3', '-c', FETCH])
            if out.startswith('200') or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertTrue(out.startswith('200 '), f'GET / from a second exec: {out!r} {err!r}')
        self.assertIn('Directory listing', out)

        procs = self.processes(sid)
        self.assertIn(proc, procs, procs)
        pid_inside, argv, state, status = procs[proc][1:]
        self.assertEqual((argv, state, status), (SERVER, 'running', 0), procs[proc])
        self.assertGreater(pid_inside, 1, 'a process of the sandbox has its own pid, not the agent\'s')

        res = self.call(sid, 'ReadOutput', str(proc))
        out, err, running = res['ok']
        log = (bytes.fromhex(out['bytes']) + bytes.fromhex(err['bytes'])).decode()
        self.assertTrue(running)
        self.assertRegex(log, r'"GET / HTTP/1\.1" 200', f'no request log line in its output: {log!r}')
        self.assertIn('Serving HTTP on 127.0.0.1 port 8000', log)

        res = self.call(sid, 'Signal', str(proc), '15')
        self.assertIn('ok', res, res)
        res = self.call(sid, 'Wait', str(proc), 'dbus.UInt64(10)', timeout=20)
        self.assertIn('ok', res, res)
        status, info = res['ok']
        self.assertEqual(status, 143, res)
        self.assertEqual((info['Signal'], info['ExitCode']), (15, -1), info)
        self.assertLess(res['seconds'], 10)

        procs = self.processes(sid)
        self.assertEqual(procs[proc][3:], ['exited', 143], procs[proc])
        _st, out, err = self.exec_out(sid, ['python3', '-c', FETCH])
        self.assertRegex(out, r'^(URLError|ConnectionRefusedError)', f'the server still answers: {out!r}')
        # Wait on an ended process answers at once, again.
        res = self.call(sid, 'Wait', str(proc), 'dbus.UInt64(0)', timeout=10)
        self.assertEqual(res['ok'][0], 143, res)

    def test_wait_times_out_with_still_running(self):
        sid = self.create()
        proc = self.start(sid, ['sleep', '100'])
        res = self.call(sid, 'Wait', str(proc), 'dbus.UInt64(1)', timeout=30)
        self.assertEqual(res.get('error'), STILL_RUNNING, res)
        self.assertGreaterEqual(res['seconds'], 0.9, res)
        self.assertLess(res['seconds'], 3, res)
        procs = self.processes(sid)
        self.assertEqual(procs[proc][2:4], [['sleep', '100'], 'running'])
        res = self.call(sid, 'Signal', str(proc), '9')
        self.assertIn('ok', res, res)
        res = self.call(sid, 'Wait', str(proc), 'dbus.UInt64(10)', timeout=20)
        self.assertEqual(res['ok'][0], 137, res)
        self.assertEqual(res['ok'][1]['Signal'], 9, res)

    def test_wait_in_flight_when_the_sandbox_ends(self):
        """A Wait without a limit on a process that never ends is answered when the
        sandbox is destroyed under it, not left hanging."""
        sid = self.create()
        proc = self.start(sid, ['sleep', '1000'])
        # The Wait comes from a second client (dbus-python serializes blocking calls on one
        # connection), started in the background inside the system.
        res = self.calls(sid, f'''
import subprocess
waiter = subprocess.Popen(["/usr/bin/python3", "-c", "import sys; sys.path.insert(0, %r)\\n"
                           "from busclient import *\\n"
                           "emit(call(sandbox(%r), 'Wait', dbus.UInt64({proc}), dbus.UInt64(0), timeout=30))"
                           % (HERE, {sid!r})], stdout=subprocess.PIPE, text=True)
time.sleep(1)
destroy = call(s, "Destroy")
try:
    waited = json.loads(waiter.communicate(timeout=40)[0])
    answered = True
except subprocess.TimeoutExpired:
    waiter.kill()
    waited, answered = {{}}, False
emit({{"destroy": destroy, "wait": waited, "answered": answered}})''', timeout=90)
        self.assertIn('ok', res['destroy'], res)
        self.assertTrue(res['answered'], res)
        self.assertNotEqual(res['wait'].get('error'), 'org.freedesktop.DBus.Error.NoReply',
                            f'Wait was never answered: {res["wait"]}')
        self.assertLess(res['wait']['seconds'], 10, res['wait'])
        if 'ok' in res['wait']:
            self.assertEqual(res['wait']['ok'][0], 137, res['wait'])
        else:
            self.assertIn(res['wait']['error'], ('io.sandboxd.Sandbox1.SandboxFailed',
                                                 'io.sandboxd.Sandbox1.NoSuchProcess'), res['wait'])

    def test_output_so_far_and_ended_processes_kept(self):
        sid = self.create()
        proc = self.start(sid, ['sh', '-c', 'i=0; while [ $i -lt 100 ]; do echo line$i; i=$((i+1)); done; '
                                            'echo err >&2; sleep 1000'], OutputMax=64)
        deadline = time.monotonic() + 10
        while True:
            res = self.call(sid, 'ReadOutput', str(proc))
            out, err, running = res['ok']
            out = bytes.fromhex(out['bytes']).decode()
            if 'line99' in out or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertTrue(running)
        self.assertTrue(out.endswith('line98\nline99\n'), f'not the newest output: {out!r}')
        self.assertLessEqual(len(out), 64, f'more than OutputMax kept: {out!r}')
        self.assertEqual(bytes.fromhex(err['bytes']), b'err\n')
        self.assertIn('ok', self.call(sid, 'Signal', str(proc), '9'))
        self.assertEqual(self.call(sid, 'Wait', str(proc), 'dbus.UInt64(10)')['ok'][0], 137)

        # 70 processes that end one after the other: the newest 64 are listed with their
        # status, the first ones (and the one above) are forgotten.
        res = self.calls(sid, '''
ids = []
for i in range(70):
    ids.append(call(s, "Start", ["sh", "-c", "exit %d" % i], opts())["ok"])
    call(s, "Wait", dbus.UInt64(ids[-1]), dbus.UInt64(10), timeout=20)
emit({"ids": ids, "list": call(s, "ListProcesses")})''')
        listed = {p[0]: p for p in res['list']['ok']}
        ids = res['ids']
        for n, i in enumerate(ids[-64:], start=6):
            self.assertIn(i, listed, f'ended process {i} not listed')
            self.assertEqual(listed[i][3:], ['exited', n], listed[i])
        for i in ids[:6] + [proc]:
            self.assertNotIn(i, listed, 'more than 64 ended processes are kept')
        self.assertLessEqual(sum(1 for p in listed.values() if p[3] == 'exited'), 64)

    def test_errors(self):
        sid = self.create()
        for method, args, want in (('Wait', ('dbus.UInt64(12345)', 'dbus.UInt64(1)'), 'io.sandboxd.Sandbox1.NoSuchProcess'),
                                   ('Signal', ('dbus.UInt64(12345)', '15'), 'io.sandboxd.Sandbox1.NoSuchProcess'),
                                   ('ReadOutput', ('dbus.UInt64(12345)',), 'io.sandboxd.Sandbox1.NoSuchProcess'),
                                   ('Start', ('dbus.Array([], signature="s")', 'opts()'),
                                    'io.sandboxd.Sandbox1.InvalidOption')):
            res = self.call(sid, method, *args)
            self.assertEqual(res.get('error'), want, f'{method}: {res}')
        proc = self.start(sid, ['sleep', '100'])
        for sig in ('0', '65', '-1'):
            res = self.call(sid, 'Signal', str(proc), sig)
            self.assertIn('error', res, f'Signal {sig} accepted: {res}')
        res = self.call(sid, 'Wait', str(proc), 'dbus.UInt64(3601)')
        self.assertEqual(res.get('error'), 'io.sandboxd.Sandbox1.InvalidOption', res)
        self.assertEqual(self.processes(sid)[proc][3], 'running', 'a refused signal reached the process')

    def test_processes_end_with_the_sandbox(self):
        sid = self.create()
        procs = [self.start(sid, ['sleep', '1000']),
                 self.start(sid, ['sh', '-c', 'sleep 1000 & sleep 1000 & wait'])]
        # A process that left its process group and session, too.
        self.start(sid, ['sh', '-c', 'setsid sleep 1000 & wait'])
        deadline = time.monotonic() + 10     # the shells fork their sleeps when they get to it
        while True:
            pids = self.unit_pids(sid)
            sleeps = [p for p in pids if comm(p) == 'sleep']
            if len(sleeps) >= 4 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertGreaterEqual(len(sleeps), 4, f'scope processes: {[(p, comm(p)) for p in pids]}')
        uids = {proc_uids(p)[0] for p in sleeps}
        self.assertEqual(len(uids), 1, uids)
        uid = uids.pop()
        self.assertNotEqual(uid, 0, 'sandboxed code runs as root on the host')
        self.assertGreaterEqual(len(pids_of_uid(uid)), 4)
        listed = self.processes(sid)
        self.assertTrue(all(listed[p][3] == 'running' for p in procs), listed)

        res = self.calls(sid, 'emit(call(s, "Destroy"))')
        self.assertIn('ok', res, res)
        deadline = time.monotonic() + 10
        while pids_of_uid(uid) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = pids_of_uid(uid)
        self.assertEqual(left, [], f'processes of the sandbox uid {uid} left: {[(p, comm(p)) for p in left]}')
        self.assertEqual([p for p in sleeps if proc_uids(p)], [])
        res = self.script(f'emit(call(manager(), "GetSandbox", {sid!r}))')
        self.assertEqual(res.get('error'), 'io.sandboxd.Sandbox1.NoSuchSandbox', res)


# Start with TTY: StandardInput and StandardOutput are pipes of the client's; the output is
# read while the process runs.
TTY_SCRIPT = '''
import threading
in_r, in_w = os.pipe()
out_r, out_w = os.pipe()
reader = PipeReader(out_r, keep=65536)
res = {}
res["start"] = call(s, "Start", ARGV, opts(TTY=True, TerminalRows=ROWS, TerminalColumns=COLS,
                                           StandardInput=fd(in_r), StandardOutput=fd(out_w)))
os.close(in_r)
os.close(out_w)
proc = res["start"].get("ok")
BODY
os.close(in_w)
res["output"] = reader.result(timeout=10)
emit(res)
'''


class Stdin(Base):
    """WriteStdin and CloseStdin of a process started with StdinPipe, over D-Bus."""

    def test_write_and_close_stdin(self):
        sid = self.create()
        proc = self.start(sid, ['sh', '-c', 'while read l; do echo "got $l"; done; echo eof'], StdinPipe=True)
        res = self.calls(sid, f"""
res = {{}}
res["w1"] = call(s, "WriteStdin", dbus.UInt64({proc}), dbus.ByteArray(b"one\\n"))
res["w2"] = call(s, "WriteStdin", dbus.UInt64({proc}), dbus.ByteArray(b"two\\n"))
res["close"] = call(s, "CloseStdin", dbus.UInt64({proc}))
res["wait"] = call(s, "Wait", dbus.UInt64({proc}), dbus.UInt64(10), timeout=20)
res["out"] = call(s, "ReadOutput", dbus.UInt64({proc}))
res["after"] = call(s, "WriteStdin", dbus.UInt64({proc}), dbus.ByteArray(b"late"))
emit(res)""")
        for k in ('w1', 'w2', 'close'):
            self.assertIn('ok', res[k], res)
        self.assertEqual(res['wait']['ok'][0], 0, res)
        self.assertEqual(bytes.fromhex(res['out']['ok'][0]['bytes']).decode(), 'got one\ngot two\neof\n')
        self.assertEqual(res['after'].get('error'), 'io.sandboxd.Sandbox1.NoSuchProcess', res)

    def test_stdin_refused_without_a_pipe(self):
        sid = self.create()
        proc = self.start(sid, ['sleep', '100'])
        res = self.call(sid, 'WriteStdin', str(proc), 'dbus.ByteArray(b"x")')
        self.assertEqual(res.get('error'), 'io.sandboxd.Sandbox1.InvalidOption', res)
        res = self.call(sid, 'Exec', "['cat']", 'opts(StdinPipe=True)')
        self.assertEqual(res.get('error'), 'io.sandboxd.Sandbox1.InvalidOption', res)


class Restart(Base):
    """Issue 27: background processes vanished from the API after a restart of sandboxd
    (ps listed none, Signal answered NoSuchProcess) while they ran on."""

    def vl(self, method, **params):
        replies, error, eparams = S.varlink_call(method, params)
        self.assertIsNone(error, (method, eparams))
        return replies[-1]

    def output(self, sid, proc, offset=0):
        r = self.vl('ReadOutput', id=sid, process=proc, stdoutOffset=offset)
        return base64.b64decode(r['stdout']).decode(), r

    def wait_output(self, sid, proc, want, offset=0):
        deadline = time.monotonic() + 20
        while self.output(sid, proc, offset)[0] != want:
            self.assertLess(time.monotonic(), deadline, f'process {proc} never wrote {want!r}')
            time.sleep(0.1)

    def test_background_processes_survive_a_restart(self):
        sid = self.create()
        term = self.vl('Start', id=sid, argv=['sh', '-c', 'echo before; trap "echo got-term; exit 7" TERM; '
                                                       'while :; do sleep 0.1; done'])['process']
        sleeper = self.vl('Start', id=sid, argv=['sleep', '1000'])['process']
        early = self.vl('Start', id=sid, argv=['sh', '-c', 'echo early; exit 3'])['process']
        self.assertEqual(self.vl('Wait', id=sid, process=early, timeoutSec=10)['exitStatus'], 3)
        self.wait_output(sid, term, 'before\n')
        pids = {p['process']: p['pid'] for p in self.vl('ListProcesses', id=sid)['processes']}

        self.ok(S.systemctl('restart', 'sandboxd.service', timeout=90))
        procs = {p['process']: p for p in self.vl('ListProcesses', id=sid)['processes']}
        self.assertEqual({k: (v['state'], v['pid']) for k, v in procs.items()},
                         {term: ('running', pids[term]), sleeper: ('running', pids[sleeper]),
                          early: ('exited', pids[early])}, procs)
        self.assertEqual(procs[early]['exitStatus'], 3)
        # The output read before the restart, kept; what comes after, read on.
        out, r = self.output(sid, term)
        self.assertEqual((out, r['stdoutTotal'], r['running']), ('before\n', 7, True))
        self.assertEqual(self.output(sid, early)[0], 'early\n')
        self.vl('Signal', id=sid, process=term, signal=15)
        self.assertEqual(self.vl('Wait', id=sid, process=term, timeoutSec=20)['exitStatus'], 7)
        self.assertEqual(self.output(sid, term)[0], 'before\ngot-term\n')
        self.vl('Signal', id=sid, process=sleeper, signal=9)
        self.assertEqual(self.vl('Wait', id=sid, process=sleeper, timeoutSec=20)['exitStatus'], 137)

        # A crash: the processes, their pipes and results are taken up again, but what
        # sandboxd had read is gone, and ReadOutput says so.
        S.daemon_restart_on_failure(True)
        self.addCleanup(S.daemon_restart_on_failure, False)
        proc = self.vl('Start', id=sid, argv=['sh', '-c', 'echo a; while [ ! -e /tmp/go ]; do sleep 0.1; done; '
                                                       'echo b; exec sleep 1000'])['process']
        self.wait_output(sid, proc, 'a\n')
        S.kill9_daemon()
        self.assertEqual(self.vl('Exec', id=sid, argv=['touch', '/tmp/go'])['exitStatus'], 0)
        states = {p['process']: p['state'] for p in self.vl('ListProcesses', id=sid)['processes']}
        self.assertEqual(states[proc], 'running', states)
        self.wait_output(sid, proc, 'b\n')
        replies, error, params = S.varlink_call('ReadOutput', {'id': sid, 'process': proc, 'stdoutOffset': 4})
        self.assertEqual(error, 'io.sandboxd.Sandbox.InvalidOption', replies)
        self.assertIn('restart', params['message'])
        self.vl('Signal', id=sid, process=proc, signal=9)
        self.assertEqual(self.vl('Wait', id=sid, process=proc, timeoutSec=20)['exitStatus'], 137)
        self.assertEqual(self.vl('Wait', id=sid, process=term, timeoutSec=5)['exitStatus'], 7,
                         'a result from before the crash')


class Terminal(Base):

    def tty(self, sid, argv, rows, cols, body):
        script = (TTY_SCRIPT.replace('ARGV', repr(argv)).replace('ROWS', str(rows))
                  .replace('COLS', str(cols)).replace('BODY', body))
        res = self.calls(sid, script, timeout=60)
        self.assertIn('ok', res['start'], res['start'])
        out = bytes.fromhex(res['output']['head']).decode(errors='replace')
        return res, out

    def test_tty_has_a_terminal_of_the_given_size(self):
        sid = self.create()
        res, out = self.tty(sid, ['sh', '-c', 'tty; stty size; test -t 0 && echo stdin-is-tty'], 37, 123,
                            'res["wait"] = call(s, "Wait", proc, dbus.UInt64(10), timeout=20)')
        self.assertEqual(res['wait']['ok'][0], 0, res)
        self.assertRegex(out, r'/dev/pts/\d+\r?\n', f'tty printed no terminal: {out!r}')
        self.assertRegex(out, r'(?m)^37 123\r?$', f'stty size: {out!r}')
        self.assertIn('stdin-is-tty', out)
        self.assertTrue(res['output']['ended'], 'the terminal output did not end with the process')

    def test_resize_terminal(self):
        sid = self.create()
        # The shell prints its size, blocks in read, and prints it again once a line comes.
        body = '''
time.sleep(0.5)
res["before"] = call(s, "ListProcesses")
res["resize"] = call(s, "ResizeTerminal", proc, dbus.UInt32(50), dbus.UInt32(132))
time.sleep(0.2)
os.write(in_w, b"go\\n")
res["wait"] = call(s, "Wait", proc, dbus.UInt64(10), timeout=20)
res["bad"] = call(s, "ResizeTerminal", proc, dbus.UInt32(0), dbus.UInt32(80))
'''
        res, out = self.tty(sid, ['sh', '-c', 'stty size; read x; echo "got $x"; stty size'], 24, 80, body)
        running = {p[0]: p[3] for p in res['before']['ok']}
        self.assertEqual(running[res['start']['ok']], 'running', 'the shell was not blocked in read')
        self.assertIn('ok', res['resize'], res['resize'])
        self.assertEqual(res['wait']['ok'][0], 0, res)
        lines = [l for l in re.split(r'\r?\n', out) if l]
        self.assertEqual(lines[0], '24 80', out)
        self.assertIn('got go', lines, out)
        self.assertEqual(lines[-1], '50 132', f'the size after ResizeTerminal: {out!r}')
        self.assertIn('error', res['bad'], 'ResizeTerminal to 0 rows was accepted (or the process is gone)')

    def test_resize_without_tty_is_refused(self):
        sid = self.create()
        proc = self.start(sid, ['sleep', '100'])
        res = self.call(sid, 'ResizeTerminal', str(proc), 'dbus.UInt32(30)', 'dbus.UInt32(90)')
        self.assertIn('error', res, f'ResizeTerminal of a process without a terminal: {res}')


if __name__ == '__main__':
    unittest.main(verbosity=2)
