# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Python client's pure parts, without sandboxd: varlink framing, error mapping,
arguments, the operations driven over a scripted transport (blocking and asyncio), both
varlink transports against a small varlink peer on a socket of their own, and the
allowed_imports hook run by this Python."""

import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import sandboxd  # noqa: E402
from sandboxd import _ops, _varlink, code, errors  # noqa: E402
from sandboxd._varlink import Reply  # noqa: E402


def b64(b):
    return base64.b64encode(b).decode()


class Framing(unittest.TestCase):

    def test_encode_call(self):
        data = _varlink.encode_call('io.sandboxd.Sandbox.Exec', {'id': 'x', 'options': None}, more=True)
        self.assertTrue(data.endswith(b'\0'))
        self.assertEqual(json.loads(data[:-1]), {'method': 'io.sandboxd.Sandbox.Exec',
                                                 'parameters': {'id': 'x'}, 'more': True})
        self.assertEqual(json.loads(_varlink.encode_call('a.B')[:-1]), {'method': 'a.B'})

    def test_decoder_splits_and_joins(self):
        msgs = [{'parameters': {'n': i, 's': 'é' * i}, 'continues': i < 4} for i in range(5)]
        stream = b''.join(json.dumps(m).encode() + b'\0' for m in msgs)
        for step in (1, 2, 7, len(stream)):
            d = _varlink.Decoder()
            got = []
            for i in range(0, len(stream), step):
                got += d.feed(stream[i:i + step])
            self.assertEqual(got, msgs, f'step {step}')
            self.assertFalse(d.pending)

    def test_decoder_refuses_garbage_and_giants(self):
        with self.assertRaises(errors.ProtocolError):
            _varlink.Decoder().feed(b'{not json\0')
        with self.assertRaises(errors.ProtocolError):
            _varlink.Decoder().feed(b'[1]\0')
        with self.assertRaises(errors.ProtocolError):
            _varlink.Decoder(limit=10).feed(b'{"parameters": {"long": 1}')

    def test_parse_reply(self):
        self.assertEqual(_varlink.parse_reply({'parameters': {'id': 'a'}}), Reply({'id': 'a'}, False))
        self.assertEqual(_varlink.parse_reply({'continues': True}), Reply({}, True))


class ErrorMapping(unittest.TestCase):

    def raised(self, name, parameters):
        with self.assertRaises(sandboxd.SandboxError) as cm:
            _varlink.parse_reply({'error': name, 'parameters': parameters})
        return cm.exception

    def test_every_interface_error_has_its_class(self):
        idl = os.path.join(os.path.dirname(__file__), '..', '..', 'src', 'sandboxd', 'io.sandboxd.Sandbox.varlink')
        with open(idl) as f:
            names = [line.split()[1] for line in f if line.startswith('error ')]
        self.assertIn('NoSuchSandbox', names)
        for short in names:
            e = self.raised(f'io.sandboxd.Sandbox.{short}', {'message': 'm', 'errno': 5, 'errnoName': 'EIO'})
            self.assertEqual(e.name, f'io.sandboxd.Sandbox.{short}')
            self.assertEqual(e.message, 'm')
            expected = 'SandboxSystemError' if short == 'SystemError' else short
            self.assertIs(type(e), getattr(sandboxd, expected), short)
            self.assertEqual(str(e), f'{short}: m')

    def test_system_error_is_the_builtin_os_error(self):
        e = self.raised('io.sandboxd.Sandbox.SystemError', {'errno': 2, 'errnoName': 'ENOENT', 'message': 'x: gone'})
        self.assertIsInstance(e, FileNotFoundError)
        self.assertIsInstance(e, sandboxd.SandboxSystemError)
        self.assertEqual((e.errno, e.errno_name), (2, 'ENOENT'))
        e = self.raised('io.sandboxd.Sandbox.SystemError', {'errno': 17, 'errnoName': 'EEXIST', 'message': ''})
        self.assertIsInstance(e, FileExistsError)
        e = self.raised('io.sandboxd.Sandbox.SystemError', {'errno': 95, 'errnoName': 'EOPNOTSUPP', 'message': 'no'})
        self.assertIs(type(e), sandboxd.SandboxSystemError)

    def test_protocol_errors_keep_their_name(self):
        e = self.raised('org.varlink.service.InvalidParameter', {'parameter': 'id'})
        self.assertIs(type(e), sandboxd.SandboxError)
        self.assertEqual(e.name, 'org.varlink.service.InvalidParameter')
        self.assertEqual(e.parameters, {'parameter': 'id'})
        self.assertIn('parameter=id', str(e))


class Arguments(unittest.TestCase):

    def test_sizes(self):
        self.assertEqual(_ops.parse_size('256M'), 256 << 20)
        self.assertEqual(_ops.parse_size('1.5G'), 3 << 29)
        self.assertEqual(_ops.parse_size('64KiB'), 64 << 10)
        self.assertEqual(_ops.parse_size(4096), 4096)
        for bad in ('lots', '-1M', True, 1.5):
            with self.assertRaises((ValueError, TypeError)):
                _ops.parse_size(bad)

    def test_create_options(self):
        self.assertEqual(_ops.create_options(timeout=60, memory='128M', cpu=0.5, name='n', reuse=True),
                         {'Timeout': 60, 'MemoryMax': 128 << 20, 'CPUQuotaPerSecUSec': 500000, 'Name': 'n',
                          'ReuseExisting': True})
        self.assertEqual(_ops.create_options(), {})

    def test_exec_options(self):
        self.assertEqual(_ops.exec_options({'A': '1'}, '/tmp', 2.2, 'in'),
                         {'Environment': ['A=1'], 'WorkingDirectory': '/tmp', 'TimeoutUSec': 2200000,
                          'Stdin': b64(b'in')})
        self.assertEqual(_ops.exec_options(timeout=0), {'TimeoutUSec': 3600000000})
        # Neither clamped nor rounded to the second: sandboxd refuses 99999 s, naming its bound.
        self.assertEqual(_ops.exec_options(timeout=99999), {'TimeoutUSec': 99999000000})
        self.assertEqual(_ops.exec_options(timeout=0.5), {'TimeoutUSec': 500000})
        self.assertEqual(_ops.command_argv('echo hi'), ['sh', '-c', 'echo hi'])
        self.assertEqual(_ops.command_argv(['ls', '-l']), ['ls', '-l'])
        with self.assertRaises(ValueError):
            _ops.command_argv([])

    def test_code_command(self):
        self.assertEqual(code.code_command('python'), ['python3', '-'])
        self.assertEqual(code.code_command('node'), ['node', '-'])
        argv = code.code_command('python', ['math', 'json'])
        self.assertEqual(argv[:2], ['python3', '-c'])
        self.assertEqual(json.loads(argv[3]), ['json', 'math'])
        with self.assertRaises(ValueError):
            code.code_command('node', ['fs'])
        with self.assertRaises(ValueError):
            code.code_command('cobol')
        self.assertEqual(code.language_of('pooled-python'), 'python')
        self.assertEqual(code.language_of('docker-busybox'), 'sh')


class ScriptedTransport(sandboxd.Transport):
    """Answers each call from a script: a list of (method, replies or an error)."""

    def __init__(self, script):
        self.script = list(script)
        self.calls = []

    def call(self, method, parameters=None, more=False):
        self.calls.append((method, parameters, more))
        expected, answer = self.script.pop(0)
        assert method == expected, (method, expected)
        if isinstance(answer, Exception):
            raise answer
        for i, p in enumerate(answer):
            yield Reply(p, more and i < len(answer) - 1)


class AsyncScripted(sandboxd.AsyncTransport):
    def __init__(self, script):
        self.sync = ScriptedTransport(script)
        self.calls = self.sync.calls

    async def call(self, method, parameters=None, more=False):
        for r in self.sync.call(method, parameters, more):
            await asyncio.sleep(0)
            yield r


def enoent(path):
    return errors.error_from_reply('io.sandboxd.Sandbox.SystemError',
                                   {'errno': 2, 'errnoName': 'ENOENT', 'message': f'{path}: No such file'})


EXEC_SCRIPT = [('Exec', [{'stdout': b64(b'caf\xc3')}, {'stderr': b64(b'oops\n')}, {'stdout': b64(b'\xa9\n')},
                         {'exitStatus': 3, 'info': {'exitCode': 3, 'durationUSec': 1500000}}])]


class Operations(unittest.TestCase):

    def test_streamed_exec_sync(self):
        t = ScriptedTransport(EXEC_SCRIPT)
        out, err = [], []
        sbx = sandboxd.Sandbox('abc', transport=t, envs={'A': '1'})
        r = sbx.commands.run('echo', on_stdout=out.append, on_stderr=err.append, timeout=5, envs={'B': '2'})
        self.assertEqual((r.stdout, r.stderr, r.exit_code, r.duration), ('café\n', 'oops\n', 3, 1.5))
        self.assertEqual(''.join(out), 'café\n')
        self.assertEqual(out[0], 'caf', 'a character split between chunks is passed whole')
        self.assertEqual(err, ['oops\n'])
        method, params, more = t.calls[0]
        self.assertTrue(more)
        self.assertEqual(params['argv'], ['sh', '-c', 'echo'])
        self.assertEqual(params['options'], {'Environment': ['A=1', 'B=2'], 'TimeoutUSec': 5000000})

    def test_streamed_exec_async_with_coroutine_callback(self):
        t = AsyncScripted(EXEC_SCRIPT)
        out = []

        async def on_stdout(s):
            await asyncio.sleep(0)
            out.append(s)

        async def main():
            sbx = sandboxd.AsyncSandbox('abc', transport=t)
            return await sbx.commands.run(['x'], on_stdout=on_stdout)
        r = asyncio.run(main())
        self.assertEqual(r.exit_code, 3)
        self.assertEqual(''.join(out), 'café\n')

    def test_callback_error_propagates_and_ends_the_call(self):
        t = ScriptedTransport(EXEC_SCRIPT)

        def boom(s):
            raise KeyError('callback')
        with self.assertRaises(KeyError):
            sandboxd.Sandbox('abc', transport=t).commands.run('x', on_stdout=boom)

    def test_timeout_and_oom_results(self):
        t = ScriptedTransport([('Exec', [{'exitStatus': 137, 'info': {'timedOut': True, 'signal': 9, 'exitCode': -1}}]),
                               ('Exec', [{'exitStatus': 137, 'info': {'oomKilled': True, 'signal': 9}}])])
        sbx = sandboxd.Sandbox('abc', transport=t)
        r = sbx.commands.run('sleep 9', timeout=1)
        self.assertTrue(r.timed_out)
        self.assertEqual((r.exit_code, r.error), (137, 'timed out after 1 s'))
        r = sbx.commands.run('hog')
        self.assertTrue(r.oom_killed)
        self.assertIn('OOM', r.error)

    def test_files(self):
        big = bytes(range(256)) * (_ops.FILE_PART_MAX // 256)
        t = ScriptedTransport([
            ('ReadFile', [{'data': b64(b'small')}]),
            ('ReadFile', errors.error_from_reply('io.sandboxd.Sandbox.FileTooLarge', {'message': 'big: more'})),
            ('Download', [{'data': b64(big)}, {'data': b64(b'tail')}, {'bytes': len(big) + 4}]),
            ('MakeDirectory', enoent('a/b')), ('MakeDirectory', [{}]),
            ('MakeDirectory', errors.error_from_reply('io.sandboxd.Sandbox.SystemError',
                                                      {'errno': 17, 'errnoName': 'EEXIST', 'message': 'a'})),
            ('Stat', enoent('nope')),
            ('ListFiles', [{'entries': [{'path': 'x.txt', 'type': 'file', 'size': 3, 'mode': 0o644,
                                         'mtime': 1_700_000_000_000_000, 'target': ''}]}]),
            ('ReadFile', enoent('gone')),
        ])
        f = sandboxd.Sandbox('abc', transport=t).files
        # One ReadFile while it fits; past FILE_PART_MAX, Download streams it.
        self.assertEqual(f.read('small', format='bytes'), b'small')
        self.assertEqual(f.read('big', format='bytes'), big + b'tail')
        self.assertEqual([(c[0], c[2]) for c in t.calls], [('ReadFile', False), ('ReadFile', False),
                                                          ('Download', True)])
        self.assertNotIn('length', t.calls[1][1])
        self.assertTrue(f.make_dir('a/b'))
        self.assertEqual(t.calls[4][1]['parents'], True)
        self.assertFalse(f.make_dir('a'))
        self.assertFalse(f.exists('nope'))
        (e,) = f.list('dir')
        self.assertEqual((e.name, e.path, e.type, e.size, e.modified.year), ('x.txt', 'dir/x.txt', 'file', 3, 2023))
        with self.assertRaises(FileNotFoundError):
            f.read('gone')

    def test_write_in_parts(self):
        data = b"z" * (2 * sandboxd.transport.WRITE_CHUNK + 5)
        t = ScriptedTransport([('WriteFile', [{'bytes': 1}])] * 3 +
                              [('Stat', [{'entry': {'path': 'f', 'type': 'file', 'size': len(data)}}])])
        info = sandboxd.Sandbox('abc', transport=t).files.write('f', data)
        self.assertEqual(info.size, len(data))
        opts = [c[1]['options'] for c in t.calls[:3]]
        self.assertEqual(opts, [{'CreateParents': True}, {'CreateParents': True, 'Append': True},
                                {'CreateParents': True, 'Append': True}])
        self.assertEqual(b''.join(base64.b64decode(c[1]['data']) for c in t.calls[:3]), data)

    SNAP = {'id': 's1', 'source': 'abc', 'template': 'python', 'name': 'n', 'owner': 1000, 'tenant': '',
            'size': 10, 'contentSize': 30, 'created': 1_700_000_000_000_000, 'diskMax': 1 << 20,
            'includesTmp': True, 'hibernated': False}

    def test_snapshots(self):
        t = ScriptedTransport([
            ('CreateSandbox', [{'id': 'abc'}]), ('Snapshot', [{'snapshot': self.SNAP}]),
            ('Snapshot', [{'snapshot': self.SNAP}]), ('Fork', [{'id': 'def'}]),
            ('Hibernate', [{'snapshot': dict(self.SNAP, id='s2', hibernated=True)}]), ('Wake', [{'id': 'abc'}]),
            ('ListSnapshots', [{'snapshots': [self.SNAP]}]), ('RemoveSnapshot', [{}]),
            ('RemoveSnapshot', errors.error_from_reply('io.sandboxd.Sandbox.NoSuchSnapshot', {'message': 'no'})),
        ])
        sbx = sandboxd.Sandbox.create('python', from_snapshot='s0', idle_action='hibernate', idle_timeout=60,
                                      transport=t, env={'A': '1'})
        self.assertEqual(t.calls[0][1]['options'], {'FromSnapshot': 's0', 'IdleAction': 'hibernate',
                                                    'IdleTimeout': 60})
        self.assertEqual(sbx.snapshot(), 's1')
        self.assertEqual(t.calls[1][1], {'id': 'abc', 'options': None})
        self.assertEqual(sbx.snapshot(include_tmp=True), 's1')
        self.assertEqual(t.calls[2][1], {'id': 'abc', 'options': {'IncludeTmp': True}})
        fork = sbx.fork(name='f', memory='64M')
        self.assertEqual((type(fork), fork.sandbox_id, fork.envs, fork.transport),
                         (sandboxd.Sandbox, 'def', {'A': '1'}, t))
        self.assertEqual(t.calls[3][1], {'id': 'abc', 'options': {'Name': 'f', 'MemoryMax': 64 << 20}})
        self.assertEqual(sbx.hibernate(), 's2')
        woken = sandboxd.Sandbox.wake('n', transport=t)
        self.assertEqual((woken.sandbox_id, t.calls[5][1]), ('abc', {'id': 'n'}))
        (info,) = sandboxd.Sandbox.list_snapshots(transport=t)
        self.assertEqual((info.snapshot_id, info.source, info.content_size, info.includes_tmp, info.hibernated,
                          info.disk, info.created_at.year), ('s1', 'abc', 30, True, False, 1 << 20, 2023))
        self.assertIsNone(sandboxd.Sandbox.remove_snapshot('s1', transport=t))
        self.assertEqual(t.calls[7][1], {'snapshot': 's1'})
        with self.assertRaises(sandboxd.NoSuchSnapshot):
            sandboxd.Sandbox.remove_snapshot('s1', transport=t)

    def test_snapshots_async(self):
        t = AsyncScripted([('Fork', [{'id': 'def'}]), ('Snapshot', [{'snapshot': self.SNAP}]),
                           ('Hibernate', [{'snapshot': dict(self.SNAP, id='s2')}]), ('Wake', [{'id': 'abc'}]),
                           ('ListSnapshots', [{'snapshots': []}]), ('RemoveSnapshot', [{}])])

        async def main():
            sbx = sandboxd.AsyncSandbox('abc', transport=t)
            fork = await sbx.fork(idle_action='pause')
            return (await sbx.snapshot(include_tmp=True), type(fork), fork.sandbox_id, await sbx.hibernate(),
                    (await sandboxd.AsyncSandbox.wake('abc', transport=t)).sandbox_id,
                    await sandboxd.AsyncSandbox.list_snapshots(transport=t),
                    await sandboxd.AsyncSandbox.remove_snapshot('s1', transport=t))
        self.assertEqual(asyncio.run(main()), ('s1', sandboxd.AsyncSandbox, 'def', 's2', 'abc', [], None))
        self.assertEqual([c[0] for c in t.calls], ['Fork', 'Snapshot', 'Hibernate', 'Wake', 'ListSnapshots',
                                                   'RemoveSnapshot'])
        self.assertEqual(t.calls[0][1]['options'], {'IdleAction': 'pause'})

    def test_create_envs_egress_pause_connect_kill(self):
        # Issue 32: create(envs=, allow_hosts=) (env= still works, and warns), pause()
        # returns the id, connect() resumes a paused sandbox, Sandbox.kill(id) on the class.
        no = errors.error_from_reply('io.sandboxd.Sandbox.NoSuchSandbox', {'message': 'no'})
        t = ScriptedTransport([
            ('CreateSandbox', [{'id': 'abc'}]), ('CreateSandbox', [{'id': 'old'}]), ('Pause', [{}]),
            ('GetSandbox', [{'sandbox': {'id': 'abc', 'state': 'paused'}}]), ('Resume', [{}]),
            ('GetSandbox', [{'sandbox': {'id': 'abc', 'state': 'running'}}]),
            ('Destroy', [{}]), ('Destroy', no)])
        sbx = sandboxd.Sandbox.create('python', timeout=60, envs={'A': '1'}, allow_hosts=['api.example.com'],
                                      deny_hosts=['*.bad.example'], transport=t)
        self.assertEqual(t.calls[0][1], {'template': 'python', 'options': {
            'EgressAllow': ['api.example.com'], 'EgressDeny': ['*.bad.example'], 'Timeout': 60}})
        self.assertEqual(sbx.envs, {'A': '1'})
        with self.assertWarns(DeprecationWarning):
            old = sandboxd.Sandbox.create(env={'B': '2'}, transport=t)
        self.assertEqual(old.envs, {'B': '2'})
        with self.assertRaises(TypeError):
            sandboxd.Sandbox.create(env={'B': '2'}, envs={'B': '2'}, transport=t)
        with self.assertRaises(ValueError):
            sandboxd.Sandbox.create(allow_hosts='api.example.com', transport=t)
        self.assertEqual(sbx.pause(), 'abc')
        again = sandboxd.Sandbox.connect('abc', envs={'C': '3'}, transport=t)
        self.assertEqual((again.sandbox_id, again.envs), ('abc', {'C': '3'}))
        self.assertEqual([c[0] for c in t.calls[3:]], ['GetSandbox', 'Resume'])
        self.assertEqual(sandboxd.Sandbox.connect('abc', transport=t).sandbox_id, 'abc')   # running: no Resume
        self.assertTrue(sandboxd.Sandbox.kill('abc', transport=t))
        self.assertEqual(t.calls[-1][:2], ('Destroy', {'id': 'abc'}))
        self.assertFalse(sandboxd.Sandbox.kill('abc', transport=t))
        self.assertEqual(t.script, [])

    def test_async_pause_connect_kill(self):
        t = AsyncScripted([('CreateSandbox', [{'id': 'abc'}]), ('Pause', [{}]),
                           ('GetSandbox', [{'sandbox': {'id': 'abc', 'state': 'paused'}}]), ('Resume', [{}]),
                           ('Destroy', [{}]), ('Destroy', [{}])])

        async def main():
            sbx = await sandboxd.AsyncSandbox.create(allow_hosts=[], envs={'A': '1'}, transport=t)
            paused = await sbx.pause()
            again = await sandboxd.AsyncSandbox.connect(paused, transport=t)
            return paused, again.sandbox_id, await sandboxd.AsyncSandbox.kill('abc', transport=t), await again.kill()
        self.assertEqual(asyncio.run(main()), ('abc', 'abc', True, True))
        self.assertEqual(t.calls[0][1]['options'], {'EgressAllow': []})
        self.assertEqual([c[0] for c in t.calls], ['CreateSandbox', 'Pause', 'GetSandbox', 'Resume', 'Destroy',
                                                   'Destroy'])

    def test_kill_gone_sandbox_is_false(self):
        t = ScriptedTransport([('Destroy', errors.error_from_reply('io.sandboxd.Sandbox.NoSuchSandbox',
                                                                   {'message': 'no'}))])
        self.assertFalse(sandboxd.Sandbox('abc', transport=t).kill())

    def test_error_reaches_the_caller(self):
        t = ScriptedTransport([('CreateSandbox', errors.error_from_reply('io.sandboxd.Sandbox.NoSuchTemplate',
                                                                         {'message': 'nope'}))])
        with self.assertRaises(sandboxd.NoSuchTemplate) as cm:
            sandboxd.Sandbox.create('nope', transport=t)
        self.assertEqual(cm.exception.name, 'io.sandboxd.Sandbox.NoSuchTemplate')


class PoolTemplate(unittest.TestCase):

    def template_of(self, config, tmp):
        with open(os.path.join(tmp, 'python.json'), 'w') as f:
            json.dump({'payload': 'bwrap', 'limits': {'TasksMax': 64}}, f)
        t = ScriptedTransport([('CreateTemplate', [{}]),
                               ('ListPools', [{'pools': [{'template': 'x', 'size': 2, 'ready': 2,
                                                          'starting': 0, 'inUse': 0}]}])])
        pool = code.SandboxPool(2, transport=t, template_dirs=[tmp])
        try:
            pool.initialize(config, wait=0.01)
        except sandboxd.SandboxError:
            pass   # the scripted ListPools names another template: not ready, as expected here
        return json.loads(t.calls[0][1]['json'])

    def test_memory_is_the_templates_unless_asked(self):
        """The client holds no default of its own: without max_memory_mb the template's
        limits (and so sandboxd's defaults) stand."""
        with tempfile.TemporaryDirectory() as tmp:
            self.assertEqual(self.template_of(code.SandboxConfig(), tmp)['limits'], {'TasksMax': 64})
            self.assertEqual(self.template_of(code.SandboxConfig(max_memory_mb=128), tmp)['limits'],
                             {'TasksMax': 64, 'MemoryMax': 128 << 20})


class Peer:
    """A varlink peer on a unix socket: answers each call from HANDLER(msg) -> list of
    messages (None: close the connection without answering). Counts connections."""

    def __init__(self, handler):
        self.dir = tempfile.mkdtemp(prefix='sandboxd-py-test-')
        self.path = os.path.join(self.dir, 'sock')
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(self.path)
        self.sock.listen(16)
        self.handler = handler
        self.connections = 0
        self.conns = []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            self.conns.append(c)
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        d = _varlink.Decoder()
        with c:
            while True:
                try:
                    data = c.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                for msg in d.feed(data):
                    replies = self.handler(msg)
                    if replies is None:
                        return
                    try:
                        c.sendall(b''.join(json.dumps(r).encode() + b'\0' for r in replies))
                    except OSError:
                        return

    def close(self):
        self.sock.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        os.unlink(self.path)
        os.rmdir(self.dir)


def handler(msg):
    method = msg['method'].rsplit('.', 1)[-1]
    p = msg.get('parameters', {})
    if method == 'GetSandbox':
        if p['id'] == 'missing':
            return [{'error': 'io.sandboxd.Sandbox.NoSuchSandbox', 'parameters': {'message': 'no such sandbox'}}]
        return [{'parameters': {'sandbox': {'id': p['id'], 'template': 't', 'state': 'running'}}}]
    if method == 'Exec':
        assert msg.get('more')
        n = int(p['argv'][-1])
        return ([{'parameters': {'stdout': b64(b'%d\n' % i)}, 'continues': True} for i in range(n)] +
                [{'parameters': {'exitStatus': 0, 'info': {}}}])
    if method == 'Hangup':
        return None
    return [{'error': 'org.varlink.service.MethodNotFound', 'parameters': {'method': msg['method']}}]


class VarlinkTransports(unittest.TestCase):

    def setUp(self):
        self.peer = Peer(handler)
        self.addCleanup(self.peer.close)

    def test_sync(self):
        t = sandboxd.VarlinkTransport(f'unix:{self.peer.path}')
        self.addCleanup(t.close)
        sbx = sandboxd.Sandbox.connect('a1', transport=t)
        self.assertEqual(sbx.get_info().state, 'running')
        lines = []
        r = sbx.commands.run(['count', '500'], on_stdout=lines.append)
        self.assertEqual(r.stdout, ''.join(f'{i}\n' for i in range(500)))
        with self.assertRaises(sandboxd.NoSuchSandbox):
            sandboxd.Sandbox.connect('missing', transport=t)
        with self.assertRaises(sandboxd.SandboxError) as cm:
            t.call_one('Nope')
        self.assertEqual(cm.exception.name, 'org.varlink.service.MethodNotFound')
        self.assertEqual(self.peer.connections, 1, 'one connection, reused after replies and errors')
        # A stream left early closes its connection; the next call opens another.
        it = t.call('Exec', {'argv': ['5']}, more=True)
        next(it)
        it.close()
        sbx.get_info()
        self.assertEqual(self.peer.connections, 2)
        # A connection the peer closed is noticed and replaced.
        with self.assertRaises(sandboxd.SandboxConnectionError):
            t.call_one('Hangup')
        sbx.get_info()
        self.assertEqual(self.peer.connections, 3)

    def test_sync_threads(self):
        t = sandboxd.VarlinkTransport(self.peer.path)
        self.addCleanup(t.close)
        results = []

        def work():
            results.append(sandboxd.Sandbox('x', transport=t).commands.run(['c', '50']).stdout.count('\n'))
        threads = [threading.Thread(target=work) for _ in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        self.assertEqual(results, [50] * 8)

    def test_async(self):
        async def main():
            t = sandboxd.AsyncVarlinkTransport(self.peer.path)
            sbx = await sandboxd.AsyncSandbox.connect('a1', transport=t)
            rs = await asyncio.gather(*(sbx.commands.run(['c', str(n)]) for n in (10, 200, 3)))
            with self.assertRaises(sandboxd.NoSuchSandbox):
                await sandboxd.AsyncSandbox.connect('missing', transport=t)
            with self.assertRaises(sandboxd.SandboxConnectionError):
                await t.call_one('Hangup')
            await sbx.get_info()
            await t.aclose()
            return [r.stdout.count('\n') for r in rs]
        self.assertEqual(asyncio.run(main()), [10, 200, 3])
        self.assertLessEqual(self.peer.connections, 5)

    def test_unreachable(self):
        with self.assertRaises(sandboxd.SandboxConnectionError) as cm:
            sandboxd.Sandbox.list(transport=sandboxd.VarlinkTransport(self.peer.path + '-none'))
        self.assertIsInstance(cm.exception, ConnectionError)


class ImportHook(unittest.TestCase):
    """The allowed_imports prelude, run by this machine's python3 as the sandbox's would."""

    def run_code(self, source, allowed):
        argv = code.code_command('python', allowed)
        argv[0] = sys.executable
        return subprocess.run(argv, input=source, capture_output=True, text=True, timeout=60)

    def test_allowed_and_refused(self):
        cp = self.run_code('import json, math\nfrom re import sub\nprint(json.dumps({"a": math.pi > 3}), sub("a", "b", "a"))\n'
                           'import sys\nprint(__name__, sys.argv)', ['json', 'math', 're', 'sys'])
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(cp.stdout, '{"a": true} b\n__main__ [\'-\']\n')
        for stmt in ('import socket', 'import os.path', 'from subprocess import run', '__import__("socket")'):
            cp = self.run_code(f'import json\n{stmt}\n', ['json'])
            self.assertEqual(cp.returncode, 1, stmt)
            self.assertIn('ImportError: import of', cp.stderr, stmt)
            self.assertIn('is not allowed here (allowed_imports: json)', cp.stderr)

    def test_stdlib_imports_its_own(self):
        # email, http and decimal import many stdlib modules of their own.
        cp = self.run_code('import email.message, http.client, decimal, datetime\nprint(decimal.Decimal("1.5") * 2)\n'
                           'print(datetime.datetime.strptime("2020", "%Y").year)',
                           ['email', 'http', 'decimal', 'datetime'])
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(cp.stdout, '3.0\n2020\n')

    def test_empty_list_allows_nothing(self):
        cp = self.run_code('print(1 + 1)\nimport math', [])
        self.assertEqual(cp.stdout, '2\n')
        self.assertIn('allowed_imports: none', cp.stderr)


if __name__ == '__main__':
    unittest.main()
