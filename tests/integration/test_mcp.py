#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd-mcp, and the same tools at /mcp on sandboxd-http, driven by the official MCP SDK (@modelcontextprotocol/sdk from the npm
registry, pinned by tests/mcp/package-lock.json, installed with `npm ci` into the build
directory): its Client + StdioClientTransport spawn sandboxd-mcp as an agent would, as
a normal user (nobody, whom the test's polkit rules let create and run), in the test
system, against the real daemon's varlink socket. The SDK checks every structuredContent
against the tool's outputSchema. Also raw JSON-RPC on its stdin: version negotiation for
older clients and the protocol errors. Over HTTP the SDK's StreamableHTTPClientTransport
against a sandboxd-http of the test's own (a bearer token for a tenant), and raw requests
for what the transport says: 202, 400, 401, 403, 405, SSE framing; and the server scenarios
of the MCP conformance suite (@modelcontextprotocol/conformance) that apply to a server
with tools only, through a proxy that adds the token (the suite sends none)."""

import base64
import glob
import http.client
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, '..', 'security'))
import harness  # noqa: E402
import polkitutil as authz  # noqa: E402
import secutil  # noqa: E402
from secutil import NOBODY  # noqa: E402

S = None
POLKIT = None
SDK_DIR = None
MCP_SOURCES = os.path.join(HERE, '..', 'mcp')
TOOLS = ['run_code', 'sandbox_create', 'sandbox_list', 'sandbox_info', 'sandbox_ports', 'sandbox_destroy', 'sandbox_pause',
         'sandbox_resume', 'sandbox_snapshot', 'sandbox_fork', 'sandbox_hibernate', 'sandbox_wake', 'snapshot_list',
         'snapshot_remove', 'run_command', 'file_read', 'file_write', 'file_list', 'file_delete', 'templates_list',
         'quota_info', 'process_start', 'process_list', 'process_read', 'process_signal', 'process_wait',
         'process_write_stdin']
SNAPDIR = '/run/sandboxd-test-state/snapshots-mcp'


def mcp_bin():
    return os.environ.get('SANDBOXD_MCP_BIN') or os.path.join(S.paths.build, 'src', 'sandboxd-mcp', 'sandboxd-mcp')


def install_sdk():
    """The SDK (tests/mcp's lockfile) in BUILD/tests/mcp-sdk, with the client script."""
    return harness.npm_ci(S.paths.build, MCP_SOURCES, 'mcp-sdk', ('mcp-client.mjs',))


def setUpModule():
    global S, POLKIT, SDK_DIR
    POLKIT = authz.setup_module()
    S = secutil.S
    try:
        SDK_DIR = install_sdk()
        S.configure_daemon(f'[Snapshots]\nDirectory={SNAPDIR}\n')
        POLKIT.set_rules(authz.grant_to_nobody('create', 'exec', 'delegate'))
    except BaseException:
        authz.teardown_module(POLKIT)
        raise


def tearDownModule():
    try:
        S.configure_daemon(None)
        S.run(['rm', '-rf', '--', SNAPDIR])
    finally:
        authz.teardown_module(POLKIT)


def sdk(steps, args=(), timeout=300):
    """STEPS (see tests/mcp/mcp-client.mjs) by the SDK's client against sandboxd-mcp ARGS,
    both run by nobody on the system."""
    cmd = secutil.as_uid(NOBODY, [shutil.which('node'), os.path.join(SDK_DIR, 'mcp-client.mjs'), mcp_bin(),
                                  *args])
    cp = S.run(cmd, input=json.dumps(steps), timeout=timeout)
    if cp.returncode != 0:
        raise AssertionError(f'the SDK client failed ({cp.returncode}):\n{cp.stdout[-3000:]}{cp.stderr[-3000:]}')
    # sandboxd-mcp's stderr is the client's: a sanitizer's report there (tools/test's ASan
    # build) fails the test, though the SDK does not look at how the server exited.
    if re.search(r'Sanitizer|runtime error:', cp.stderr):
        raise AssertionError(f'sandboxd-mcp under the sanitizers:\n{cp.stderr[-5000:]}')
    return json.loads(cp.stdout)


def call(tool, save_as=None, save_from=None, **arguments):
    """A call of TOOL; SAVE_AS names what its structuredContent has at SAVE_FROM ("a.b"),
    which later calls' arguments give as "$SAVE_AS"."""
    step = {'op': 'call', 'name': tool, 'arguments': arguments}
    if save_as:
        step.update(save=save_as, path=save_from)
    return step


def raw(lines, args=(), timeout=60):
    """LINES written to sandboxd-mcp's stdin as they are (as nobody); its replies, parsed."""
    cmd = secutil.as_uid(NOBODY, [mcp_bin(), *args])
    cp = S.run(cmd, input=''.join(line + '\n' for line in lines), timeout=timeout)
    if cp.returncode != 0:
        raise AssertionError(f'sandboxd-mcp failed ({cp.returncode}): {cp.stderr[-2000:]}')
    return [json.loads(line) for line in cp.stdout.splitlines()]


def initialize(version, id=1):
    return json.dumps({'jsonrpc': '2.0', 'id': id, 'method': 'initialize',
                       'params': {'protocolVersion': version, 'capabilities': {},
                                  'clientInfo': {'name': 'raw', 'version': '0'}}})


class Base(secutil.Base):

    def tearDown(self):
        super().tearDown()
        # Whatever a failed test left of nobody's.
        replies, error, _ = S.varlink_call('ListSandboxes')
        for s in (replies[0]['sandboxes'] if not error else []):
            if s['owner'] == NOBODY:
                S.sandboxctl('destroy', s['id'], timeout=120)

    def text(self, res):
        return '\n'.join(c['text'] for c in res['result']['content'] if c['type'] == 'text')

    def assert_ok(self, res):
        self.assertNotIn('error', res, res)
        self.assertFalse(res['result'].get('isError'), self.text(res))
        return res['result']['structuredContent']

    def assert_tool_error(self, res, pattern):
        self.assertNotIn('error', res, res)
        self.assertTrue(res['result'].get('isError'), res)
        self.assertRegex(self.text(res), pattern)

    def nobody_sandboxes(self):
        replies, error, params = S.varlink_call('ListSandboxes')
        self.assertIsNone(error, params)
        return [s for s in replies[0]['sandboxes'] if s['owner'] == NOBODY]


class Tools(Base):

    def test_initialize_and_tools_list(self):
        out = sdk([{'op': 'list'}])
        self.assertEqual(out['serverVersion']['name'], 'sandboxd-mcp')
        self.assertEqual(out['serverCapabilities'], {'tools': {'listChanged': False}})
        self.assertIn('run_code', out['instructions'])
        tools = {t['name']: t for t in out['steps'][0]['tools']}
        self.assertEqual(sorted(tools), sorted(TOOLS))
        for name, t in tools.items():
            schema = t['inputSchema']
            self.assertEqual(schema['type'], 'object', name)
            self.assertFalse(schema['additionalProperties'], name)
            self.assertTrue(set(schema['required']) <= set(schema['properties']), name)
            self.assertIn('outputSchema', t, name)
            self.assertEqual(t['outputSchema']['type'], 'object', name)
            for hint in ('readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'):
                self.assertIsInstance(t['annotations'][hint], bool, f'{name} {hint}')
            if name not in ('run_code', 'sandbox_create', 'sandbox_list', 'templates_list', 'snapshot_list',
                            'snapshot_remove', 'quota_info'):
                self.assertIn('sandbox_id', schema['required'], name)
        self.assertEqual(tools['run_code']['inputSchema']['properties']['language']['enum'], ['python', 'node', 'bash'])
        self.assertTrue(tools['sandbox_destroy']['annotations']['destructiveHint'])
        self.assertTrue(tools['file_delete']['annotations']['destructiveHint'])
        for name in ('sandbox_hibernate', 'snapshot_remove'):
            self.assertTrue(tools[name]['annotations']['destructiveHint'], name)
        for name in ('sandbox_list', 'sandbox_info', 'file_read', 'file_list', 'templates_list', 'snapshot_list'):
            self.assertTrue(tools[name]['annotations']['readOnlyHint'], name)
            self.assertFalse(tools[name]['annotations']['destructiveHint'], name)

    def test_run_code_python_node_bash(self):
        out = sdk([{'op': 'list'}, {'op': 'parallel', 'calls': [
            call('run_code', language='python', code='import sys\nprint(6 * 7)\nprint("oops", file=sys.stderr)'),
            call('run_code', language='node', code='console.log([1, 2, 3].map(x => x * 2).join(","))'),
            call('run_code', language='bash', code='echo "$((3 + 4))"; exit 3'),
            call('run_code', language='python', code='print("é" * 100000)'),
        ]}])
        py, node, bash, big = out['steps'][1]['parallel']
        print('\n# run_code, 4 at once: ' + ', '.join(f'{s["ms"]} ms' for s in out['steps'][1]['parallel']),
              file=sys.stderr)
        r = self.assert_ok(py)
        self.assertEqual((r['exit_code'], r['stdout'], r['stderr']), (0, '42\n', 'oops\n'))
        self.assertFalse(r['timed_out'] or r['oom_killed'] or r['truncated'])
        self.assertEqual(json.loads(py['result']['content'][0]['text']), r, 'the text is the structured content')
        self.assertEqual(self.assert_ok(node)['stdout'], '2,4,6\n')
        # A program that exits non-zero ran: that is its result, not a tool error.
        r = self.assert_ok(bash)
        self.assertEqual((r['exit_code'], r['stdout']), (3, '7\n'))
        # Output is bounded, and the model is told.
        r = self.assert_ok(big)
        self.assertTrue(r['truncated'])
        self.assertEqual(r['stdout_bytes'], 200001)
        self.assertLessEqual(len(r['stdout'].encode()), 65536)
        self.assertRegex(self.text(big), r'Output truncated: stdout 65536 of 200001 bytes shown')
        # Each in its ephemeral sandbox, gone now.
        self.assertEqual(self.nobody_sandboxes(), [])

    def test_timeout_and_oom_are_tool_errors(self):
        out = sdk([{'op': 'list'}, {'op': 'parallel', 'calls': [
            call('run_code', language='bash', code='echo started; sleep 60', timeout=2),
            call('run_code', language='python', memory_mb=64,
                 code='x = []\nwhile True:\n    x.append(bytearray(16 << 20))'),
        ]}])
        slow, hungry = out['steps'][1]['parallel']
        self.assert_tool_error(slow, r'Timed out')
        r = slow['result']['structuredContent']
        self.assertTrue(r['timed_out'])
        self.assertEqual(r['stdout'], 'started\n')
        self.assertLess(slow['ms'], 30000)
        self.assert_tool_error(hungry, r'Out of memory')
        self.assertTrue(hungry['result']['structuredContent']['oom_killed'])
        self.assertEqual(self.nobody_sandboxes(), [])

    def test_sandbox_files_and_commands(self):
        out = sdk([
            {'op': 'list'},
            call('sandbox_create', save_as='sid', save_from='sandbox.id', template='python', memory_mb=256, name='mcp-test'),
            call('file_write', sandbox_id='$sid', path='pkg/hello.py', content='print("hello from a file")\n'),
            call('file_write', sandbox_id='$sid', path='pkg/hello.py', content='print("again")\n', append=True),
            call('file_read', sandbox_id='$sid', path='pkg/hello.py'),
            call('run_command', sandbox_id='$sid', command='python3 pkg/hello.py; pwd; echo "$GREETING"',
                 env=['GREETING=hi']),
            call('run_command', sandbox_id='$sid', command='mkfifo fifo; ln -s pkg/hello.py link'),
            call('file_read', sandbox_id='$sid', path='fifo'),
            call('file_read', sandbox_id='$sid', path='link'),
            call('file_write', sandbox_id='$sid', path='bin.dat', content='AAEC/w==', encoding='base64'),
            call('file_read', sandbox_id='$sid', path='bin.dat'),
            call('file_list', sandbox_id='$sid', path='.', depth=2),
            call('file_read', sandbox_id='$sid', path='../../etc/shadow'),
            call('file_delete', sandbox_id='$sid', path='pkg', recursive=True),
            call('file_read', sandbox_id='$sid', path='pkg/hello.py'),
            call('sandbox_pause', sandbox_id='$sid'),
            call('sandbox_resume', sandbox_id='mcp-test'),
            call('sandbox_list'),
            call('sandbox_info', sandbox_id='$sid'),
            call('run_command', sandbox_id='$sid', command='sleep 30', timeout=1),
            call('templates_list'),
            call('sandbox_destroy', sandbox_id='$sid'),
            call('sandbox_info', sandbox_id='$sid'),
        ])
        # What each call took, client to client (for the report; asserted on elsewhere).
        print('\n# ' + ', '.join(f'{s["name"]} {s["ms"]} ms' for s in out['steps'][1:]), file=sys.stderr)
        (_, created, written, appended, read, ran, _made, fifo, link, bin_written, bin_read, listed, shadow, deleted, gone, paused,
         resumed, listed_sandboxes, info, timed_out, templates, destroyed, after) = out['steps']
        sandbox = self.assert_ok(created)['sandbox']
        sid = sandbox['id']
        self.assertEqual((sandbox['template'], sandbox['state'], sandbox['name'], sandbox['owner']),
                         ('python', 'running', 'mcp-test', NOBODY))
        self.assertEqual(sandbox['memoryMax'], 256 << 20)
        self.assertEqual(self.assert_ok(written), {'path': 'pkg/hello.py', 'bytes': 27})
        self.assert_ok(appended)
        self.assertEqual(self.assert_ok(read), {'path': 'pkg/hello.py', 'content': 'print("hello from a file")\n'
                                                'print("again")\n', 'encoding': 'utf-8', 'bytes': 42,
                                                'truncated': False})
        r = self.assert_ok(ran)
        self.assertEqual((r['exit_code'], r['stdout']), (0, 'hello from a file\nagain\n/work\nhi\n'))
        # Issue 27: what is not a regular file is named; a final symlink is followed.
        self.assert_tool_error(fifo, r'^NotRegularFile: fifo: not a regular file: FIFO')
        self.assertEqual(self.assert_ok(link)['content'], 'print("hello from a file")\nprint("again")\n')
        self.assert_ok(bin_written)
        self.assertEqual(self.assert_ok(bin_read)['encoding'], 'base64')
        self.assertEqual(self.assert_ok(bin_read)['content'], 'AAEC/w==')
        entries = {e['path']: e for e in self.assert_ok(listed)['entries']}
        self.assertEqual(entries['pkg']['type'], 'dir')
        self.assertEqual(entries['pkg/hello.py']['size'], 42)
        self.assertEqual(entries['bin.dat']['size'], 4)
        # A path out of the sandbox's /work reaches the sandbox's own tree, never the host's.
        self.assert_tool_error(shadow, r'^(ENOENT|EACCES|EPERM|EINVAL|EXDEV): ')
        self.assertNotIn('root:', json.dumps(shadow))
        self.assertEqual(self.assert_ok(deleted), {'path': 'pkg', 'deleted': True})
        self.assert_tool_error(gone, r'^ENOENT: ')
        self.assertEqual(self.assert_ok(paused)['sandbox']['state'], 'paused')
        self.assertEqual(self.assert_ok(resumed)['sandbox']['state'], 'running')
        self.assertEqual([s['id'] for s in self.assert_ok(listed_sandboxes)['sandboxes']], [sid])
        self.assertEqual(self.assert_ok(info)['sandbox']['id'], sid)
        self.assert_tool_error(timed_out, 'Timed out')
        self.assertTrue(timed_out['result']['structuredContent']['timed_out'])
        self.assertLessEqual({'shell', 'python', 'node'}, {t['name'] for t in self.assert_ok(templates)['templates']})
        self.assertEqual(self.assert_ok(destroyed), {'sandbox_id': sid, 'destroyed': True})
        self.assert_tool_error(after, r'^NoSuchSandbox: ')
        self.assertNotIn(self.unit(sid), S.sandbox_scopes())

    def test_snapshots(self):
        out = sdk([
            {'op': 'list'},
            call('sandbox_create', save_as='sid', save_from='sandbox.id', template='shell', name='mcp-snap'),
            call('file_write', sandbox_id='$sid', path='a.txt', content='one'),
            call('sandbox_snapshot', save_as='snap', save_from='snapshot.id', sandbox_id='$sid'),
            call('sandbox_create', save_as='rid', save_from='sandbox.id', template='shell', from_snapshot='$snap'),
            call('file_read', sandbox_id='$rid', path='a.txt'),
            call('sandbox_fork', save_as='fid', save_from='sandbox.id', sandbox_id='$sid', name='mcp-fork'),
            call('file_write', sandbox_id='$fid', path='a.txt', content='fork'),
            call('file_read', sandbox_id='$sid', path='a.txt'),
            call('sandbox_hibernate', sandbox_id='$sid'),
            call('sandbox_info', sandbox_id='$sid'),
            call('snapshot_list'),
            call('sandbox_wake', sandbox_id='mcp-snap'),
            call('file_read', sandbox_id='$sid', path='a.txt'),
            call('snapshot_remove', snapshot_id='$snap'),
            call('snapshot_remove', snapshot_id='$snap'),
            call('sandbox_destroy', sandbox_id='$rid'),
            call('sandbox_destroy', sandbox_id='$fid'),
            call('sandbox_destroy', sandbox_id='$sid'),
        ])
        (_, created, _, snapped, restored, read_restored, forked, _, read_source, hibernated, asleep, listed, woke,
         read_woken, removed, removed_again, *destroyed) = out['steps']
        sid = self.assert_ok(created)['sandbox']['id']
        snap = self.assert_ok(snapped)['snapshot']
        self.assertEqual((snap['source'], snap['hibernated'], snap['owner']), (sid, False, NOBODY))
        self.assertEqual(self.assert_ok(read_restored)['content'], 'one')
        self.assertNotEqual(self.assert_ok(restored)['sandbox']['id'], sid)
        fork = self.assert_ok(forked)['sandbox']
        self.assertEqual((fork['name'], fork['template']), ('mcp-fork', 'shell'))
        self.assertEqual(self.assert_ok(read_source)['content'], 'one')
        sleeping = self.assert_ok(hibernated)['snapshot']
        # On disk: stopped, its files kept, no snapshot archive (an empty id).
        self.assertEqual((sleeping['source'], sleeping['hibernated'], sleeping['name'], sleeping['id']),
                         (sid, True, 'mcp-snap', ''))
        self.assertEqual(self.assert_ok(asleep)['sandbox']['state'], 'stopped')
        self.assertEqual({x['id'] for x in self.assert_ok(listed)['snapshots']}, {snap['id']})
        self.assertEqual((self.assert_ok(woke)['sandbox']['id'], self.assert_ok(woke)['sandbox']['name']),
                         (sid, 'mcp-snap'))
        self.assertEqual(self.assert_ok(read_woken)['content'], 'one')
        self.assertEqual(self.assert_ok(removed), {'snapshot_id': snap['id'], 'removed': True})
        self.assert_tool_error(removed_again, r'^NoSuchSnapshot: ')
        for res in destroyed:
            self.assert_ok(res)
        self.assertEqual(self.nobody_sandboxes(), [])

    def test_create_options_and_default_lifetime(self):
        # Issue 32: limits, egress rules and a lifetime at sandbox_create; without one, the
        # server's default (one hour, or --default-lifetime), so a forgotten sandbox ends.
        out = sdk([
            call('sandbox_create', save_as='a', save_from='sandbox.id', template='shell'),
            call('sandbox_create', save_as='b', save_from='sandbox.id', template='shell', lifetime=0, cpu_percent=50,
                 tasks_max=64, disk_mb=32, egress_allow=['example.org', '*.example.net'], egress_deny=['bad.example.org']),
            call('sandbox_create', template='shell', egress_allow=['not a host!']),
            call('sandbox_destroy', sandbox_id='$a'),
        ])
        a, b = (self.assert_ok(r)['sandbox'] for r in out['steps'][:2])
        self.assertEqual(a['timeout'], 3600)
        self.assertGreater(a['deadline'], 0)
        self.assertEqual((b['timeout'], b['deadline']), (0, 0))
        self.assert_tool_error(out['steps'][2], r'^InvalidOption: ')
        self.assert_ok(out['steps'][3])
        # What sandboxd made of b's options (sandbox_info does not show them; varlink does).
        replies, error, params = S.varlink_call('GetSandbox', {'id': b['id']})
        self.assertIsNone(error, params)
        got = replies[0]['sandbox']
        self.assertEqual((got['cpuQuotaPerSecUSec'], got['tasksMax'], got['diskMax']), (500000, 64, 32 << 20))
        self.assertEqual((got['egressAllow'], got['egressDeny']), (['example.org', '*.example.net'], ['bad.example.org']))
        out = sdk([call('sandbox_create', save_as='c', save_from='sandbox.id', template='shell'),
                   call('run_command', sandbox_id='$c', command='true'),
                   call('sandbox_create', save_as='d', save_from='sandbox.id', template='shell', lifetime=50)],
                  args=('--default-lifetime', '90'))
        c, _, d = (self.assert_ok(r)['sandbox'] if i != 1 else r for i, r in enumerate(out['steps']))
        self.assertEqual((c['timeout'], d['timeout']), (90, 50))
        # (tearDown destroys b, c and d.)

    def test_progress_extends_the_timeout(self):
        # Issue 32: a call longer than the client's timeout survives when the client asked
        # for progress (resetTimeoutOnProgress); without it, the SDK gives up at 2 s.
        out = sdk([
            call('sandbox_create', save_as='sid', save_from='sandbox.id', template='shell'),
            dict(call('run_command', sandbox_id='$sid', command='sleep 4; echo done'), timeout=2000, progress=True),
            dict(call('run_command', sandbox_id='$sid', command='sleep 4; echo done'), timeout=2000),
            call('sandbox_destroy', sandbox_id='$sid'),
        ])
        _, long, short, _ = out['steps']
        self.assertEqual(self.assert_ok(long)['stdout'], 'done\n')
        self.assertGreaterEqual(long['progress'], 3, long)
        self.assertGreater(long['ms'], 4000)
        self.assertEqual(short['error'], -32001, short)   # the SDK's RequestTimeout
        self.assertEqual(short['progress'], 0)

    def test_cancel_destroys_run_codes_sandbox(self):
        # Issue 32: notifications/cancelled (the SDK's abort) of a run_code kills its command
        # by destroying its one-off sandbox: gone within a second of the cancellation.
        # Acting for a tenant too: the Destroy's connection acts for it as well.
        for args in ((), ('--tenant', 'cancel-test')):
            out = sdk([
                dict(call('run_code', language='bash', code='echo started; sleep 60'), cancelAfter=2500),
                {'op': 'sleep', 'ms': 1000},
                call('sandbox_list'),
            ], args=args)
            cancelled, _, listed = out['steps']
            self.assertIn('cancelled by the test', cancelled['message'], cancelled)
            self.assertEqual(self.assert_ok(listed)['sandboxes'], [], args)
            self.assertEqual(self.nobody_sandboxes(), [], args)
            # No sleep of it left on the host either.
            ps = S.run(['ps', '-eo', 'args'])
            self.assertNotIn('sleep 60', ps.stdout, args)

    def test_cancel_kills_run_commands_command(self):
        # Issue 32: notifications/cancelled of a run_command kills its command (SIGKILL to the
        # process Start made), in its sandbox, which lives on: gone within a second.
        out = sdk([
            call('sandbox_create', save_as='sid', save_from='sandbox.id', template='shell'),
            dict(call('run_command', sandbox_id='$sid', command='echo started; exec sleep 61'), cancelAfter=2500),
            {'op': 'sleep', 'ms': 1000},
            call('process_list', sandbox_id='$sid'),
            call('sandbox_destroy', sandbox_id='$sid'),
        ])
        _, cancelled, _, listed, _ = out['steps']
        self.assertIn('cancelled by the test', cancelled['message'], cancelled)
        [p] = self.assert_ok(listed)['processes']
        self.assertEqual((p['argv'][-1], p['running'], p['exit_code']),
                         ('echo started; exec sleep 61', False, 128 + 9), p)

    def test_background_process_tools(self):
        out = sdk([
            call('sandbox_create', save_as='sid', save_from='sandbox.id', template='shell'),
            call('process_start', save_as='p', save_from='process_id', sandbox_id='$sid',
                 command='read l; echo "got $l"; sleep 0.2; echo done', stdin_pipe=True),
            call('process_write_stdin', sandbox_id='$sid', process_id='$p', data='x\n', close=True),
            call('process_wait', sandbox_id='$sid', process_id='$p', timeout=20),
            call('process_read', sandbox_id='$sid', process_id='$p'),
            call('process_read', sandbox_id='$sid', process_id='$p', stdout_offset=6),
            call('process_start', save_as='q', save_from='process_id', sandbox_id='$sid', command='exec sleep 100'),
            call('process_wait', sandbox_id='$sid', process_id='$q', timeout=1),
            call('process_signal', sandbox_id='$sid', process_id='$q', signal='TERM'),
            call('process_wait', sandbox_id='$sid', process_id='$q', timeout=20),
            call('process_list', sandbox_id='$sid'),
            call('process_signal', sandbox_id='$sid', process_id='$q'),
            call('sandbox_destroy', sandbox_id='$sid'),
        ])
        (_, started, written, waited, read, read_on, _, still, signalled, ended, listed, again,
         _) = out['steps']
        p = self.assert_ok(started)['process_id']
        self.assertEqual(self.assert_ok(written), {'process_id': p, 'bytes': 2, 'closed': True})
        w = self.assert_ok(waited)
        self.assertEqual((w['running'], w['exit_code']), (False, 0), w)
        r = self.assert_ok(read)
        self.assertEqual((r['stdout'], r['stdout_offset'], r['running'], r['dropped']), ('got x\ndone\n', 11, False, 0))
        self.assertEqual(self.assert_ok(read_on)['stdout'], 'done\n')
        self.assertTrue(self.assert_ok(still)['running'])
        self.assertTrue(self.assert_ok(signalled)['sent'])
        self.assertEqual(self.assert_ok(ended)['exit_code'], 128 + 15)
        procs = {x['process_id']: x for x in self.assert_ok(listed)['processes']}
        self.assertEqual(procs[p]['exit_code'], 0)
        self.assertGreater(procs[p]['pid'], 1)
        self.assert_tool_error(again, r'^NoSuchProcess: ')

    def test_tool_errors_and_protocol_errors(self):
        out = sdk([
            {'op': 'list'},
            call('run_code', language='cobol', code='x'),
            call('run_code', language='python'),
            call('run_command', sandbox_id='0123456789abcdef', command='true', colour='blue'),
            call('file_read', sandbox_id='0123456789abcdef', path='x'),
            call('sandbox_create', template='no-such-template'),
            call('no_such_tool'),
        ])
        _, language, missing, unknown, no_sandbox, no_template, no_tool = out['steps']
        self.assert_tool_error(language, r'^Invalid arguments for run_code: language must be one of')
        self.assert_tool_error(missing, r'^Invalid arguments for run_code: code is required')
        self.assert_tool_error(unknown, r'^Invalid arguments for run_command: unknown argument colour')
        self.assert_tool_error(no_sandbox, r'^NoSuchSandbox: ')
        self.assert_tool_error(no_template, r'^NoSuchTemplate: ')
        self.assertEqual(no_tool['error'], -32602, no_tool)
        self.assertIn('Unknown tool: no_such_tool', no_tool['message'])

    def test_tenant_sees_only_its_sandboxes(self):
        plain = sdk([call('sandbox_create', save_as='sid', save_from='sandbox.id', template='shell')])
        other = self.assert_ok(plain['steps'][0])['sandbox']['id']
        out = sdk([
            {'op': 'list'},
            call('sandbox_create', save_as='sid', save_from='sandbox.id', template='shell'),
            call('run_command', sandbox_id='$sid', command='echo tenant'),
            call('sandbox_list'),
            call('sandbox_info', sandbox_id=other),
            call('run_command', sandbox_id=other, command='echo pwned'),
            call('sandbox_destroy', sandbox_id=other),
            call('sandbox_destroy', sandbox_id='$sid'),
        ], args=['--tenant', 'acme'])
        _, created, ran, listed, info, cmd, destroy_other, destroyed = out['steps']
        mine = self.assert_ok(created)['sandbox']
        self.assertEqual(mine['tenant'], 'acme')
        self.assertEqual(self.assert_ok(ran)['stdout'], 'tenant\n')
        self.assertEqual([s['id'] for s in self.assert_ok(listed)['sandboxes']], [mine['id']])
        for res in (info, cmd, destroy_other):
            self.assert_tool_error(res, r'^NoSuchSandbox: ')
        self.assert_ok(destroyed)
        self.assertEqual([s['id'] for s in self.nobody_sandboxes()], [other])


class Protocol(Base):

    def test_version_negotiation(self):
        for asked, answered in (('2025-11-25', '2025-11-25'), ('2025-06-18', '2025-06-18'),
                                ('2025-03-26', '2025-03-26'), ('2024-11-05', '2025-11-25'),
                                ('1999-01-01', '2025-11-25')):
            replies = raw([initialize(asked), '{"jsonrpc":"2.0","method":"notifications/initialized"}',
                           '{"jsonrpc":"2.0","id":"p","method":"ping"}'])
            self.assertEqual(len(replies), 2, replies)
            self.assertEqual(replies[0]['result']['protocolVersion'], answered, asked)
            self.assertEqual(replies[1], {'jsonrpc': '2.0', 'id': 'p', 'result': {}})

    def test_jsonrpc_errors(self):
        replies = raw([
            initialize('2025-03-26'),
            '{"jsonrpc":"2.0","id":2,"method":"tools/li',
            '[{"jsonrpc":"2.0","id":3,"method":"ping"}]',
            '{"jsonrpc":"1.0","id":4,"method":"ping"}',
            '{"jsonrpc":"2.0","id":5,"method":"resources/list"}',
            '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{}}}',
            '{"jsonrpc":"2.0","id":null,"method":"ping"}',
            '{"jsonrpc":"2.0","method":"no/such/notification"}',
            '{"jsonrpc":"2.0","id":7,"result":{}}',
            '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"sandbox_list"}}',
        ])
        codes = [(r.get('id'), r['error']['code']) for r in replies if 'error' in r]
        self.assertEqual(codes, [(None, -32700), (None, -32600), (4, -32600), (5, -32601), (6, -32602),
                                 (None, -32600)])
        # Notifications and responses get nothing; the tool call after them its result.
        self.assertEqual(len(replies), 8, replies)
        self.assertEqual(replies[-1]['id'], 8)
        self.assertFalse(replies[-1]['result']['isError'], replies[-1])

    def test_sandboxd_unreachable_is_a_tool_error(self):
        replies = raw([initialize('2025-11-25'),
                       '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sandbox_list"}}'],
                      args=['--address', '/run/no-such-sandboxd.socket'])
        self.assertTrue(replies[1]['result']['isError'])
        self.assertRegex(replies[1]['result']['content'][0]['text'],
                         r'^Cannot reach sandboxd at /run/no-such-sandboxd.socket: No such file')

    def test_docs_claude_line(self):
        with open(os.path.join(S.paths.source, 'README.md')) as f:
            self.assertTrue('\nclaude mcp add sandboxd -- sandboxd-mcp\n' in f.read(), 'README.md has no claude line')
        man = os.path.join(S.paths.source, 'man', 'sandboxd-mcp.1.scd')
        with open(man) as f:
            page = f.read()
        for name in TOOLS:
            self.assertIn(f'*{name}*', page, f'{name} is not in sandboxd-mcp(1)')
        self.assertTrue(re.search(r'2025-11-25', page))


def tools_call(id, name, **arguments):
    return json.dumps({'jsonrpc': '2.0', 'id': id, 'method': 'tools/call',
                       'params': {'name': name, 'arguments': arguments}})


class Strict(Base):
    """What sandboxd-mcp(1) refuses rather than alters: loose JSON, ids beyond 64 bits,
    NUL bytes, null, timeouts out of sandboxd's range; and output kept byte for byte."""

    def test_loose_json_and_ids_beyond_64_bits(self):
        replies = raw([initialize('2025-11-25'),
                       '{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}',
                       '{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}',
                       '{"jsonrpc":"2.0","id":2,"id":3,"method":"ping"}',
                       '{"jsonrpc":"2.0","id":4,"method":"ping","params":{"x":NaN}}',
                       '{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":-Infinity}}',
                       '{"jsonrpc":"2.0","id":6,"method":"pi\x01ng"}',
                       '{"jsonrpc":"2.0","id":7,"method":"ping"}'])
        self.assertEqual(len(replies), 8, replies)
        for r in replies[1:2] + replies[3:7]:
            self.assertEqual((r['id'], r['error']['code']), (None, -32700), r)
        self.assertRegex(replies[1]['error']['message'], 'out of range')
        self.assertRegex(replies[3]['error']['message'], 'duplicate key')
        # The largest id that fits comes back as it was sent.
        self.assertEqual(replies[2], {'jsonrpc': '2.0', 'id': 18446744073709551615, 'result': {}})
        self.assertEqual(replies[7], {'jsonrpc': '2.0', 'id': 7, 'result': {}})

    def test_arguments_nul_null_and_timeouts(self):
        replies = raw([initialize('2025-11-25'),
                       tools_call(2, 'run_code', language='python', code='print(1)\u0000print(2)'),
                       tools_call(3, 'run_code', language='python', code='print(1)', timeout=None),
                       tools_call(4, 'run_code', language='python', code='print(1)', timeout=4000),
                       tools_call(5, 'run_code', language='bash', code='echo ok', timeout=2.0),
                       tools_call(6, 'run_code', language='bash', code='sleep 5', timeout=0.5),
                       tools_call(7, 'run_code', language='bash', code="printf 'a\\0\\377b'")],
                      timeout=300)
        # Calls run concurrently: replies come as they finish.
        replies.sort(key=lambda r: r['id'])
        self.assertEqual([r['id'] for r in replies], [1, 2, 3, 4, 5, 6, 7], replies)
        self.assert_tool_error(replies[1], r'code must not hold a NUL byte')
        self.assert_tool_error(replies[2], r'timeout must not be null')
        self.assert_tool_error(replies[3], r'Timeout=4000 is out of range, must be between 1 and 3600')
        self.assertEqual(self.assert_ok(replies[4])['stdout'], 'ok\n')
        self.assert_tool_error(replies[5], r'Timed out')
        r = replies[5]['result']['structuredContent']
        self.assertTrue(r['timed_out'])
        self.assertLess(r['duration_ms'], 900, r)
        r = self.assert_ok(replies[6])
        self.assertEqual((r['stdout_encoding'], base64.b64decode(r['stdout'])), ('base64', b'a\0\xffb'), r)
        self.assertEqual((r['stderr_encoding'], r['stderr']), ('utf-8', ''))
        self.assertEqual(self.nobody_sandboxes(), [])


class Http(Base):
    """/mcp on sandboxd-http as the harness installs it (socket-activated, its own dynamic
    user, allowed to act for tenants by the shipped polkit rule), with a token for the
    tenant "acme"."""

    RULES = 'io.sandboxd.Sandbox1-http.rules'

    @classmethod
    def setUpClass(cls):
        with open(os.path.join(S.paths.source, 'polkit', cls.RULES)) as f:
            POLKIT.set_rules(f.read(), name=cls.RULES)
        tokens = S.path(harness.HTTP_TOKENS_DIR)
        shutil.rmtree(tokens, ignore_errors=True)
        cp = S.run([S.paths.sandboxd_http, 'token', 'add', 'mcp-test', '--tenant=acme',
                    f'--tokens-dir={harness.HTTP_TOKENS_DIR}'], check=True)
        cls.token = cp.stdout.strip()
        S.systemctl('start', 'sandboxd-http.socket', check=True)
        cls.port = S.http_port
        cls.url = f'http://127.0.0.1:{cls.port}/mcp'

    @staticmethod
    def bridge_log():
        cp = S.run(['journalctl', '--no-pager', '-o', 'cat', '-n', '60', '-u', 'sandboxd-http.service'])
        return f'\n----- sandboxd-http.service -----\n{cp.stdout}'

    @classmethod
    def tearDownClass(cls):
        try:
            S.systemctl('stop', 'sandboxd-http.socket', 'sandboxd-http.service', timeout=60)
        finally:
            POLKIT.set_rules(None, name=cls.RULES)

    @classmethod
    def request(cls, method, path, body=None, token='default', headers=None):
        c = http.client.HTTPConnection('127.0.0.1', cls.port, timeout=120)
        h = {'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream'}
        if token:
            h['Authorization'] = 'Bearer ' + (cls.token if token == 'default' else token)
        h.update(headers or {})
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            out = (r.status, dict(r.getheaders()), r.read().decode())
        except (OSError, http.client.HTTPException) as e:
            raise AssertionError(f'{method} {path}: {e!r}' + cls.bridge_log()) from e
        finally:
            c.close()
        return out

    def post(self, message, **kw):
        return self.request('POST', '/mcp', json.dumps(message) if not isinstance(message, str) else message, **kw)

    def tearDown(self):
        super().tearDown()
        replies, error, _ = S.varlink_call('ListSandboxes')
        for s in (replies[0]['sandboxes'] if not error else []):
            if s['tenant'] == 'acme':
                S.sandboxctl('destroy', s['id'], timeout=120)

    def test_sdk_over_streamable_http(self):
        out = self.sdk_http([
            {'op': 'list'},
            call('run_code', language='python', code='print(6 * 7)'),
            call('sandbox_create', save_as='sid', save_from='sandbox.id', template='shell'),
            call('file_write', sandbox_id='$sid', path='notes.txt', content='over http\n'),
            call('run_command', sandbox_id='$sid', command='cat notes.txt'),
            call('sandbox_list'),
            call('sandbox_destroy', sandbox_id='$sid'),
        ])
        self.assertEqual(out['protocolVersion'], '2025-11-25')
        tools, ran, created, written, cat, listed, destroyed = out['steps']
        self.assertEqual(sorted(t['name'] for t in tools['tools']), sorted(TOOLS))
        self.assertEqual(self.assert_ok(ran)['stdout'], '42\n')
        sandbox = self.assert_ok(created)['sandbox']
        self.assertEqual(sandbox['tenant'], 'acme')
        self.assertEqual(sandbox['timeout'], 3600, "the bridge's default lifetime (MCPDefaultLifetimeSec=)")
        self.assert_ok(written)
        self.assertEqual(self.assert_ok(cat)['stdout'], 'over http\n')
        self.assertEqual([s['id'] for s in self.assert_ok(listed)['sandboxes']], [sandbox['id']])
        self.assert_ok(destroyed)

    def test_dropped_connection_kills_the_command(self):
        # Issue 32: an HTTP client that goes away during a tools/call takes its command with it.
        status, _, body = self.post(tools_call(1, 'sandbox_create', template='shell'))
        sid = json.loads(body)['result']['structuredContent']['sandbox']['id']
        c = http.client.HTTPConnection('127.0.0.1', self.port, timeout=60)
        c.request('POST', '/mcp', body=tools_call(2, 'run_command', sandbox_id=sid, command='exec sleep 62'),
                  headers={'Content-Type': 'application/json', 'Accept': 'application/json, text/event-stream',
                           'Authorization': f'Bearer {self.token}'})
        deadline = time.monotonic() + 20
        while not S.varlink_call('ListProcesses', {'id': sid})[0][0]['processes']:
            self.assertLess(time.monotonic(), deadline, 'the command did not start' + self.bridge_log())
            time.sleep(0.1)
        c.close()
        gone = time.monotonic()
        while True:
            [p] = S.varlink_call('ListProcesses', {'id': sid})[0][0]['processes']
            if p['state'] == 'exited':
                break
            self.assertLess(time.monotonic() - gone, 1, f'still running a second after the client left: {p}')
            time.sleep(0.05)
        self.assertEqual(p['exitStatus'], 128 + 9)

    def sdk_http(self, steps):
        cmd = [shutil.which('node'), os.path.join(SDK_DIR, 'mcp-client.mjs'), self.url]
        cp = subprocess.run(cmd, input=json.dumps(steps), capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, MCP_TOKEN=self.token))
        if cp.returncode != 0:
            raise AssertionError(f'the SDK client failed ({cp.returncode}):\n{cp.stdout[-3000:]}{cp.stderr[-3000:]}'
                                 + self.bridge_log())
        return json.loads(cp.stdout)

    def test_transport_rules(self):
        ping = {'jsonrpc': '2.0', 'id': 1, 'method': 'ping'}
        status, headers, body = self.post(ping)
        self.assertEqual((status, json.loads(body)), (200, {'jsonrpc': '2.0', 'id': 1, 'result': {}}))
        self.assertTrue(headers['Content-Type'].startswith('application/json'), headers)
        # A notification: 202, no body.
        status, _, body = self.post({'jsonrpc': '2.0', 'method': 'notifications/initialized'})
        self.assertEqual((status, body), (202, ''))
        # A client that takes only server-sent events gets the response as one.
        status, headers, body = self.post(ping, headers={'Accept': 'text/event-stream'})
        self.assertEqual(status, 200)
        self.assertTrue(headers['Content-Type'].startswith('text/event-stream'), headers)
        self.assertEqual(body, 'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n')
        # Versions: a known one, an unknown one (400), none (2025-03-26).
        self.assertEqual(self.post(ping, headers={'MCP-Protocol-Version': '2025-06-18'})[0], 200)
        status, _, body = self.post(ping, headers={'MCP-Protocol-Version': '2023-01-01'})
        self.assertEqual(status, 400)
        self.assertEqual(json.loads(body)['error']['code'], -32600)
        # Origin: none, the loopback and the Host itself pass; another site is refused.
        for origin in ('http://localhost:3000', 'http://127.0.0.1', f'http://127.0.0.1:{self.port}', 'https://[::1]:8'):
            self.assertEqual(self.post(ping, headers={'Origin': origin})[0], 200, origin)
        for origin in ('http://evil.example', 'http://localhost.evil.example', 'null', 'http://127.0.0.1:80x'):
            self.assertEqual(self.post(ping, headers={'Origin': origin})[0], 403, origin)
        # The token.
        self.assertEqual(self.post(ping, token=None)[0], 401)
        self.assertEqual(self.post(ping, token='not-a-token')[0], 401)
        # JSON-RPC's own errors, in a 200.
        status, _, body = self.post('{"jsonrpc":')
        self.assertEqual((status, json.loads(body)['error']['code']), (200, -32700))
        # The same strict reader as over stdio: a key twice is not JSON.
        status, _, body = self.post('{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}')
        self.assertEqual((status, json.loads(body)['error']['code']), (200, -32700), body)
        # No stream to GET, no session to DELETE.
        self.assertEqual(self.request('GET', '/mcp', headers={'Accept': 'text/event-stream'})[0], 405)
        self.assertEqual(self.request('DELETE', '/mcp')[0], 405)
        # A tool call over plain HTTP, for the token's tenant.
        status, _, body = self.post({'jsonrpc': '2.0', 'id': 'l', 'method': 'tools/call',
                                     'params': {'name': 'sandbox_list', 'arguments': {}}})
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)['result']['structuredContent'], {'sandboxes': []})

    # The suite's server scenarios that a server offering tools (and no prompts, resources,
    # logging, completion, sampling or elicitation, nor the suite's own test_* tools) can
    # pass; `conformance list --server` has the others.
    CONFORMANCE = ('server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection')

    def test_conformance_server_scenarios(self):
        port = self.port
        token = self.token

        class Proxy(http.server.BaseHTTPRequestHandler):
            """Adds the bearer token; passes all else (Origin too) as it came."""
            protocol_version = 'HTTP/1.1'

            def relay(self):
                n = int(self.headers.get('Content-Length') or 0)
                body = self.rfile.read(n) if n else None
                h = {k: v for k, v in self.headers.items()
                     if k.lower() not in ('host', 'authorization', 'content-length', 'connection')}
                h['Authorization'] = 'Bearer ' + token
                c = http.client.HTTPConnection('127.0.0.1', port, timeout=120)
                c.request(self.command, self.path, body=body, headers=h)
                r = c.getresponse()
                data = r.read()
                c.close()
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ('transfer-encoding', 'connection', 'content-length', 'date', 'server'):
                        self.send_header(k, v)
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = relay

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                if not isinstance(sys.exc_info()[1], ConnectionError):   # a client that left early
                    super().handle_error(request, client_address)

        proxy = Server(('127.0.0.1', 0), Proxy)
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        self.addCleanup(proxy.server_close)
        self.addCleanup(proxy.shutdown)
        suite = os.path.join(SDK_DIR, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js')
        for scenario in self.CONFORMANCE:
            out = os.path.join(S.workdir, 'conformance', scenario)
            shutil.rmtree(out, ignore_errors=True)
            cp = subprocess.run([shutil.which('node'), suite, 'server', '--url',
                                 f'http://127.0.0.1:{proxy.server_address[1]}/mcp', '--scenario', scenario, '-o', out],
                                capture_output=True, text=True, timeout=120)
            results = glob.glob(os.path.join(out, '*', 'checks.json'))
            self.assertEqual(len(results), 1, f'{scenario}: {cp.stdout[-2000:]}{cp.stderr[-2000:]}' + self.bridge_log())
            with open(results[0]) as f:
                checks = json.load(f)
            self.assertTrue(checks, scenario)
            failed = [c for c in checks if c['status'] not in ('SUCCESS', 'INFO')]
            self.assertEqual(failed, [], scenario + (self.bridge_log() if failed else ''))
            self.assertEqual(cp.returncode, 0, f'{scenario}: {cp.stdout[-2000:]}')


if __name__ == '__main__':
    unittest.main()
