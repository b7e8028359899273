#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Bad input on every D-Bus method: wrong types, huge strings, invalid UTF-8, NUL bytes,
absurd numbers, huge argv and environment, unknown objects. Each call gets a named error
(never a disconnect or NoReply), creates nothing, and the daemon serves on as the same
process (MainPID and its start time unchanged, NRestarts 0)."""

import os
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rawbus  # noqa: E402
import secutil  # noqa: E402
from secutil import E, M, MGR, PROPS, SBX, Base, MiB, bus, call, rep, sandbox_path, v  # noqa: E402

INVALID_ARGS = 'org.freedesktop.DBus.Error.InvalidArgs'
UNKNOWN_OBJECT = 'org.freedesktop.DBus.Error.UnknownObject'
UNKNOWN_METHOD = 'org.freedesktop.DBus.Error.UnknownMethod'
UNKNOWN_PROPERTY = 'org.freedesktop.DBus.Error.UnknownProperty'
READ_ONLY = 'org.freedesktop.DBus.Error.PropertyReadOnly'
U64_MAX = 2 ** 64 - 1


def setUpModule():
    secutil.setup_module()


def tearDownModule():
    secutil.teardown_module()


def create(template='shell', **opts):
    return call(M, MGR, 'CreateSandbox', 'sa{sv}', template, opts)


class BadInput(Base):
    sid = None

    @classmethod
    def setUpClass(cls):
        cp = secutil.S.sandboxctl('create')
        if cp.returncode != 0:
            raise AssertionError(f'sandboxctl create failed: {cp.stderr}')
        cls.sid = cp.stdout.strip()
        cls.path = sandbox_path(cls.sid)

    @classmethod
    def tearDownClass(cls):
        if cls.sid:
            secutil.S.sandboxctl('destroy', cls.sid, timeout=120)

    def check_cases(self, cases, uid=None):
        """CASES: [(what, call, expected error name)], made in one process of UID."""
        identity = secutil.daemon_identity()
        before = set(secutil.S.sandbox_scopes())
        results = bus([c for _what, c, _want in cases], uid=uid, timeout=600)
        for (what, c, want), res in zip(cases, results):
            with self.subTest(what):
                self.assertEqual(res.get('error'), want, f'{what}: {str(res)[:600]}')
        self.assertEqual(set(secutil.S.sandbox_scopes()), before, 'bad input left or removed a unit')
        self.assert_serving(identity)
        cp = self.ok(self.exec(self.sid, 'echo', 'alive'))
        self.assertEqual(cp.stdout, 'alive\n')

    def exec_call(self, argv, path=None, sig='asa{sv}', **opts):
        return call(path or self.path, SBX, 'Exec', sig, argv, opts)

    # ---- Manager ---------------------------------------------------------------------

    def test_create_sandbox(self):
        cases = [
            ('wrong signature ia{sv}', call(M, MGR, 'CreateSandbox', 'ia{sv}', 1, {}), INVALID_ARGS),
            ('missing options', call(M, MGR, 'CreateSandbox', 's', 'shell'), INVALID_ARGS),
            ('no arguments', call(M, MGR, 'CreateSandbox'), INVALID_ARGS),
            ('extra argument', call(M, MGR, 'CreateSandbox', 'sa{sv}s', 'shell', {}, 'x'), INVALID_ARGS),
            ('options a{ss}', call(M, MGR, 'CreateSandbox', 'sa{ss}', 'shell', {'MemoryMax': '1G'}), INVALID_ARGS),
            ('options as', call(M, MGR, 'CreateSandbox', 'sas', 'shell', ['MemoryMax']), INVALID_ARGS),
            ('1 MB template name', create(rep('x', MiB)), E + 'NoSuchTemplate'),
            ('template ../shell', create('../shell'), E + 'NoSuchTemplate'),
            ('template /etc/passwd', create('/etc/passwd'), E + 'NoSuchTemplate'),
            ('template with newline', create('shell\n'), E + 'NoSuchTemplate'),
            ('template shell.json', create('shell.json'), E + 'NoSuchTemplate'),
            ('1 MB option name', create(**{'X' * MiB: v('t', 1)}), E + 'InvalidOption'),
            ('empty option name', create(**{'': v('t', 1)}), E + 'InvalidOption'),
            ('MemoryMax 2^64-1', create(MemoryMax=v('t', U64_MAX)), E + 'InvalidOption'),
            ('MemoryMax 2^63', create(MemoryMax=v('t', 2 ** 63)), E + 'InvalidOption'),
            ('MemoryMax 0', create(MemoryMax=v('t', 0)), E + 'InvalidOption'),
            ('MemoryMax 15 MiB', create(MemoryMax=v('t', 15 * MiB)), E + 'InvalidOption'),
            ('MemoryMax -1 as x', create(MemoryMax=v('x', -1)), E + 'InvalidOption'),
            ('MemoryMax as d', create(MemoryMax=v('d', 1e9)), E + 'InvalidOption'),
            ('MemoryMax as u', create(MemoryMax=v('u', 1 << 30)), E + 'InvalidOption'),
            ('MemoryMax variant in variant', create(MemoryMax=v('v', v('t', 1 << 30))), E + 'InvalidOption'),
            ('MemoryMax as as', create(MemoryMax=v('as', ['1G'])), E + 'InvalidOption'),
            ('MemoryMax as a{sv}', create(MemoryMax=v('a{sv}', {'x': v('t', 1)})), E + 'InvalidOption'),
            ('TasksMax 2^63', create(TasksMax=v('t', 2 ** 63)), E + 'InvalidOption'),
            ('TasksMax 2^64-1', create(TasksMax=v('t', U64_MAX)), E + 'InvalidOption'),
            ('TasksMax 3', create(TasksMax=v('t', 3)), E + 'InvalidOption'),
            ('TasksMax 65537', create(TasksMax=v('t', 65537)), E + 'InvalidOption'),
            ('Timeout 2^64-1', create(Timeout=v('t', U64_MAX)), E + 'InvalidOption'),
            ('Timeout 30 days + 1 s', create(Timeout=v('t', 30 * 86400 + 1)), E + 'InvalidOption'),
            ('CPUQuotaPerSecUSec 2^64-1', create(CPUQuotaPerSecUSec=v('t', U64_MAX)), E + 'InvalidOption'),
            ('CPUQuotaPerSecUSec 9999', create(CPUQuotaPerSecUSec=v('t', 9999)), E + 'InvalidOption'),
            ('CPUQuotaPerSecUSec 1000 CPUs', create(CPUQuotaPerSecUSec=v('t', 10 ** 9)), E + 'InvalidOption'),
            ('DiskMax 0', create(DiskMax=v('t', 0)), E + 'InvalidOption'),
            ('DiskMax 2^64-1', create(DiskMax=v('t', U64_MAX)), E + 'InvalidOption'),
            ('DiskMax 1 TiB + 1', create(DiskMax=v('t', 2 ** 40 + 1)), E + 'InvalidOption'),
            ('DiskMax 1 MiB - 1', create(DiskMax=v('t', MiB - 1)), E + 'InvalidOption'),
            ('Ephemeral as s', create(Ephemeral=v('s', 'true')), E + 'InvalidOption'),
            ('Ephemeral as t', create(Ephemeral=v('t', 1)), E + 'InvalidOption'),
            ('10000 unknown options', create(**{f'Opt{i}': v('t', i) for i in range(10000)}), E + 'InvalidOption'),
        ]
        self.check_cases(cases)

    def test_get_list_templates(self):
        cases = [
            ('GetSandbox u', call(M, MGR, 'GetSandbox', 'u', 5), INVALID_ARGS),
            ('GetSandbox no argument', call(M, MGR, 'GetSandbox'), INVALID_ARGS),
            ('GetSandbox ss', call(M, MGR, 'GetSandbox', 'ss', self.sid, self.sid), INVALID_ARGS),
            ('GetSandbox empty id', call(M, MGR, 'GetSandbox', 's', ''), E + 'NoSuchSandbox'),
            ('GetSandbox 1 MB id', call(M, MGR, 'GetSandbox', 's', rep('a', MiB)), E + 'NoSuchSandbox'),
            ('GetSandbox ../', call(M, MGR, 'GetSandbox', 's', '../' + self.sid), E + 'NoSuchSandbox'),
            ('GetSandbox id + suffix', call(M, MGR, 'GetSandbox', 's', self.sid + 'x'), E + 'NoSuchSandbox'),
            ('GetSandbox id prefix', call(M, MGR, 'GetSandbox', 's', self.sid[:-1]), E + 'NoSuchSandbox'),
            ('GetSandbox upper case', call(M, MGR, 'GetSandbox', 's', self.sid.upper()), E + 'NoSuchSandbox'),
            ('ListSandboxes s', call(M, MGR, 'ListSandboxes', 's', 'x'), INVALID_ARGS),
            ('ListTemplates i', call(M, MGR, 'ListTemplates', 'i', 1), INVALID_ARGS),
            ('ListPools s', call(M, MGR, 'ListPools', 's', 'x'), INVALID_ARGS),
            ('unknown manager method', call(M, MGR, 'Frobnicate'), UNKNOWN_METHOD),
            ('Exec on the manager', self.exec_call(['true'], path=M), UNKNOWN_METHOD),
            ('manager property Set', call(M, PROPS, 'Set', 'ssv', MGR, 'X', v('s', 'y')), UNKNOWN_PROPERTY),
        ]
        self.check_cases(cases)

    # ---- Sandbox ---------------------------------------------------------------------

    def test_exec(self):
        cases = [
            ('Exec sa{sv}', self.exec_call('true', sig='sa{sv}'), INVALID_ARGS),
            ('Exec as', call(self.path, SBX, 'Exec', 'as', ['true']), INVALID_ARGS),
            ('Exec a{sv}as', call(self.path, SBX, 'Exec', 'a{sv}as', {}, ['true']), INVALID_ARGS),
            ('Exec aay', call(self.path, SBX, 'Exec', 'aaya{sv}', [[116, 114, 117, 101]], {}), INVALID_ARGS),
            ('empty argv', self.exec_call([]), E + 'InvalidOption'),
            ('empty argv[0]', self.exec_call(['']), E + 'InvalidOption'),
            ('Timeout 0', self.exec_call(['true'], Timeout=v('t', 0)), E + 'InvalidOption'),
            ('Timeout 3601', self.exec_call(['true'], Timeout=v('t', 3601)), E + 'InvalidOption'),
            ('Timeout 2^64-1', self.exec_call(['true'], Timeout=v('t', U64_MAX)), E + 'InvalidOption'),
            ('Timeout as i', self.exec_call(['true'], Timeout=v('i', 5)), E + 'InvalidOption'),
            ('TimeoutUSec 999', self.exec_call(['true'], TimeoutUSec=v('t', 999)), E + 'InvalidOption'),
            ('TimeoutUSec 3600 s + 1 µs', self.exec_call(['true'], TimeoutUSec=v('t', 3600 * 10 ** 6 + 1)),
             E + 'InvalidOption'),
            ('TimeoutUSec 2^64-1', self.exec_call(['true'], TimeoutUSec=v('t', U64_MAX)), E + 'InvalidOption'),
            ('OutputMax 2^40', self.exec_call(['true'], OutputMax=v('t', 2 ** 40)), E + 'InvalidOption'),
            ('OutputMax 2^64-1', self.exec_call(['true'], OutputMax=v('t', U64_MAX)), E + 'InvalidOption'),
            ('OutputMax 16 MiB + 1', self.exec_call(['true'], OutputMax=v('t', 16 * MiB + 1)), E + 'InvalidOption'),
            ('100k arguments', self.exec_call({'$list': ['x', 100000]}), E + 'InvalidOption'),
            ('one 1 MB argument', self.exec_call(['echo', rep('x', MiB)]), E + 'InvalidOption'),
            ('10 MB of environment, 4000 entries',
             self.exec_call(['true'], Environment=v('as', {'$list': ['A' * 2600 + '=x', 4000]})),
             E + 'InvalidOption'),
            ('10 MB of environment, one entry',
             self.exec_call(['true'], Environment=v('as', [{'$rep': ['A', 10 * MiB]}])), E + 'InvalidOption'),
            ('5000 environment entries',
             self.exec_call(['true'], Environment=v('as', [f'V{i}=1' for i in range(5000)])), E + 'InvalidOption'),
            ('environment =x', self.exec_call(['true'], Environment=v('as', ['=x'])), E + 'InvalidOption'),
            ('environment without =', self.exec_call(['true'], Environment=v('as', ['NOVALUE'])),
             E + 'InvalidOption'),
            ('environment as s', self.exec_call(['true'], Environment=v('s', 'A=b')), E + 'InvalidOption'),
            ('relative WorkingDirectory', self.exec_call(['true'], WorkingDirectory=v('s', 'work')),
             E + 'InvalidOption'),
            ('1 MB WorkingDirectory', self.exec_call(['true'], WorkingDirectory=v('s', '/' + 'x' * MiB)),
             E + 'InvalidOption'),
            ('WorkingDirectory with newline', self.exec_call(['true'], WorkingDirectory=v('s', '/tmp\n')),
             E + 'InvalidOption'),
            ('Stdin 17 MiB', self.exec_call(['true'], Stdin=v('ay', {'$bytes': [0, 17 * MiB]})),
             E + 'InvalidOption'),
            ('Stdin as s', self.exec_call(['true'], Stdin=v('s', 'x')), E + 'InvalidOption'),
            ('1 MB option name', self.exec_call(['true'], **{'X' * MiB: v('t', 1)}), E + 'InvalidOption'),
            ('unknown option', self.exec_call(['true'], Frobnicate=v('b', True)), E + 'InvalidOption'),
            ('sandbox option in Exec', self.exec_call(['true'], MemoryMax=v('t', 1 << 30)), E + 'InvalidOption'),
            ('StandardOutput as s', self.exec_call(['true'], StandardOutput=v('s', '/dev/null')),
             E + 'InvalidOption'),
            ('StandardInput as u', self.exec_call(['true'], StandardInput=v('u', 0)), E + 'InvalidOption'),
            ('StandardInput and Stdin', self.exec_call(['true'], StandardInput=v('h', {'$fd': '/dev/null'}),
                                                       Stdin=v('ay', [1])), E + 'InvalidOption'),
        ]
        self.check_cases(cases)

    def test_destroy_properties_and_unknown_objects(self):
        root = f'{M}/sandbox'
        cases = [
            ('Destroy s', call(self.path, SBX, 'Destroy', 's', 'now'), INVALID_ARGS),
            ('Pause s', call(self.path, SBX, 'Pause', 's', 'now'), INVALID_ARGS),
            ('Resume u', call(self.path, SBX, 'Resume', 'u', 1), INVALID_ARGS),
            ('SetTimeout t', call(self.path, SBX, 'SetTimeout', 't', 60), INVALID_ARGS),
            ('SetTimeout ss', call(self.path, SBX, 'SetTimeout', 'ss', '60', '0'), INVALID_ARGS),
            ('SetTimeout 2^64-1', call(self.path, SBX, 'SetTimeout', 'tt', U64_MAX, 0), E + 'InvalidOption'),
            ('SetTimeout idle 2^64-1', call(self.path, SBX, 'SetTimeout', 'tt', 0, U64_MAX), E + 'InvalidOption'),
            ('SetTimeout 30 days + 1 s', call(self.path, SBX, 'SetTimeout', 'tt', 30 * 86400 + 1, 0),
             E + 'InvalidOption'),
            ('Pause on an unknown id', call(f'{root}/0123456789abcdef', SBX, 'Pause'), UNKNOWN_OBJECT),
            ('SetTimeout on an unknown id', call(f'{root}/0123456789abcdef', SBX, 'SetTimeout', 'tt', 1, 1),
             UNKNOWN_OBJECT),
            ('GetLogs u', call(self.path, SBX, 'GetLogs', 'u', 10), INVALID_ARGS),
            ('GetLogs sb', call(self.path, SBX, 'GetLogs', 'sb', '10', False), INVALID_ARGS),
            ('GetLogs 2^32-1 lines', call(self.path, SBX, 'GetLogs', 'ub', 2**32 - 1, False), E + 'InvalidOption'),
            ('GetMetrics u', call(self.path, SBX, 'GetMetrics', 'u', 1), INVALID_ARGS),
            ('GetLogs on an unknown id', call(f'{root}/0123456789abcdef', SBX, 'GetLogs', 'ub', 0, False),
             UNKNOWN_OBJECT),
            ('unknown sandbox method', call(self.path, SBX, 'Frobnicate'), UNKNOWN_METHOD),
            ('Get unknown property', call(self.path, PROPS, 'Get', 'ss', SBX, 'Secret'), UNKNOWN_PROPERTY),
            ('Set read-only State', call(self.path, PROPS, 'Set', 'ssv', SBX, 'State', v('s', 'dead')), READ_ONLY),
            ('Set read-only Owner', call(self.path, PROPS, 'Set', 'ssv', SBX, 'Owner', v('u', 65534)), READ_ONLY),
            ('Set MemoryMax', call(self.path, PROPS, 'Set', 'ssv', SBX, 'MemoryMax', v('t', U64_MAX)), READ_ONLY),
            ('Get with wrong types', call(self.path, PROPS, 'Get', 'su', SBX, 1), INVALID_ARGS),
            ('Exec on an unknown hex id', self.exec_call(['true'], path=f'{root}/0123456789abcdef'), UNKNOWN_OBJECT),
            ('Exec on a non-hex id', self.exec_call(['true'], path=f'{root}/not_hex_zz'), UNKNOWN_OBJECT),
            ('Exec on an escaped ..', self.exec_call(['true'], path=f'{root}/_2e_2e'), UNKNOWN_OBJECT),
            # The parent of the sandboxes is a node (it has children), without the interface.
            ('Exec on the sandbox root', self.exec_call(['true'], path=root), UNKNOWN_METHOD),
            ('Exec below a sandbox', self.exec_call(['true'], path=f'{self.path}/child'), UNKNOWN_OBJECT),
            ('Exec on a 60 kB path', self.exec_call(['true'], path=f'{root}/' + 'a' * 60000), UNKNOWN_OBJECT),
            # Past sd-bus's 64 KiB limit for object paths (the bus itself allows them):
            # sd-bus drops such a message while parsing it, before any callback or filter
            # of sandboxd's could answer, so the caller gets no reply. What matters is
            # checked by check_cases all the same: the daemon is unharmed and serves on.
            ('Exec on a 100 kB path', dict(self.exec_call(['true'], path=f'{root}/' + 'a' * 100000), timeout=3),
             'org.freedesktop.DBus.Error.NoReply'),
            ('Destroy on an unknown id', call(f'{root}/ffffffffffffffff', SBX, 'Destroy'), UNKNOWN_OBJECT),
            ('Destroy on /', call('/', SBX, 'Destroy'), UNKNOWN_OBJECT),
        ]
        self.check_cases(cases)
        # Destroy with bad input destroyed nothing: the sandbox was checked by check_cases.

    def test_processes(self):
        started = bus([self.exec_call(['sleep', '300']) | {'method': 'Start'}])[0]
        self.assertIn('reply', started, started)
        proc = started['reply'][0]
        self.addCleanup(bus, [call(self.path, SBX, 'Signal', 'ti', proc, 9)])
        p = self.path
        cases = [
            ('Start sa{sv}', call(p, SBX, 'Start', 'sa{sv}', 'sleep', {}), INVALID_ARGS),
            ('Start empty argv', call(p, SBX, 'Start', 'asa{sv}', [], {}), E + 'InvalidOption'),
            ('Start 100k arguments', call(p, SBX, 'Start', 'asa{sv}', {'$list': ['x', 100000]}, {}),
             E + 'InvalidOption'),
            ('Start Timeout 2^64-1', call(p, SBX, 'Start', 'asa{sv}', ['true'], {'Timeout': v('t', U64_MAX)}),
             E + 'InvalidOption'),
            ('Start TerminalRows 2^64-1',
             call(p, SBX, 'Start', 'asa{sv}', ['true'], {'TerminalRows': v('t', U64_MAX)}), E + 'InvalidOption'),
            ('Start StandardInput a directory',
             call(p, SBX, 'Start', 'asa{sv}', ['true'], {'StandardInput': v('h', {'$fd': '/'})}),
             E + 'InvalidOption'),
            ('ListProcesses s', call(p, SBX, 'ListProcesses', 's', 'x'), INVALID_ARGS),
            ('Signal unknown process', call(p, SBX, 'Signal', 'ti', 2 ** 63, 9), E + 'NoSuchProcess'),
            ('Signal 0', call(p, SBX, 'Signal', 'ti', proc, 0), E + 'InvalidOption'),
            ('Signal 65', call(p, SBX, 'Signal', 'ti', proc, 65), E + 'InvalidOption'),
            ('Signal -9', call(p, SBX, 'Signal', 'ti', proc, -9), E + 'InvalidOption'),
            ('Signal 2^31-1', call(p, SBX, 'Signal', 'ti', proc, 2 ** 31 - 1), E + 'InvalidOption'),
            ('Signal ii', call(p, SBX, 'Signal', 'ii', 1, 9), INVALID_ARGS),
            ('Wait unknown process', call(p, SBX, 'Wait', 'tt', U64_MAX, 1), E + 'NoSuchProcess'),
            ('Wait 2^64-1 s', call(p, SBX, 'Wait', 'tt', proc, U64_MAX), E + 'InvalidOption'),
            ('Wait 3601 s', call(p, SBX, 'Wait', 'tt', proc, 3601), E + 'InvalidOption'),
            ('ResizeTerminal 2^32-1', call(p, SBX, 'ResizeTerminal', 'tuu', proc, 2 ** 32 - 1, 2 ** 32 - 1),
             E + 'InvalidOption'),
            ('ResizeTerminal unknown process', call(p, SBX, 'ResizeTerminal', 'tuu', 0, 24, 80),
             E + 'NoSuchProcess'),
            ('ReadOutput unknown process', call(p, SBX, 'ReadOutput', 't', U64_MAX), E + 'NoSuchProcess'),
            ('ReadOutput s', call(p, SBX, 'ReadOutput', 's', 'x'), INVALID_ARGS),
        ]
        self.check_cases(cases)
        # The process itself is untouched by all that.
        res = bus([call(p, SBX, 'ReadOutput', 't', proc)])[0]
        self.assertEqual(res.get('reply', [None])[-1], True, f'the started process is not running: {res}')

    def test_files(self):
        p = self.path
        self.ok(self.exec(self.sid, 'sh', '-c', 'echo kept > /work/kept; mkfifo /work/fifo 2>/dev/null; true'))
        cases = [
            ('ReadFile s', call(p, SBX, 'ReadFile', 's', '/work/kept'), INVALID_ARGS),
            ('ReadFile empty path', call(p, SBX, 'ReadFile', 'stt', '', 0, 0), E + 'InvalidOption'),
            ('ReadFile 1 MB path', call(p, SBX, 'ReadFile', 'stt', rep('a', MiB), 0, 0), E + 'InvalidOption'),
            ('ReadFile path with newline', call(p, SBX, 'ReadFile', 'stt', '/work/kept\n', 0, 0),
             E + 'InvalidOption'),
            ('ReadFile offset 2^64-1', call(p, SBX, 'ReadFile', 'stt', '/work/kept', U64_MAX, U64_MAX),
             E + 'InvalidOption'),
            ('ReadFile a FIFO', call(p, SBX, 'ReadFile', 'stt', '/work/fifo', 0, 0), E + 'NotRegularFile'),
            ('ReadFile /dev/zero', call(p, SBX, 'ReadFile', 'stt', '/dev/zero', 0, 0), E + 'NotRegularFile'),
            ('ReadFile a directory', call(p, SBX, 'ReadFile', 'stt', '/work', 0, 0), E + 'NotRegularFile'),
            ('WriteFile Mode as s', call(p, SBX, 'WriteFile', 'saya{sv}', '/work/m', [65], {'Mode': v('s', '777')}),
             E + 'InvalidOption'),
            ('WriteFile unknown option', call(p, SBX, 'WriteFile', 'saya{sv}', '/work/m', [65],
                                              {'Frobnicate': v('b', True)}), E + 'InvalidOption'),
            ('WriteFile into /usr', call(p, SBX, 'WriteFile', 'saya{sv}', '/usr/sbxsec-probe', [65], {}),
             'System.Error.EROFS'),
            ('Upload a directory', call(p, SBX, 'Upload', 'sha{sv}', '/work/up', {'$fd': '/'}, {}),
             E + 'InvalidOption'),
            ('Download to a directory', call(p, SBX, 'Download', 'sha{sv}', '/work/kept', {'$fd': '/'}, {}),
             E + 'InvalidOption'),
            ('Upload without a descriptor', call(p, SBX, 'Upload', 'ssa{sv}', '/work/up', '/etc/passwd', {}),
             INVALID_ARGS),
            ('ListFiles depth 2^32-1', call(p, SBX, 'ListFiles', 'su', '/work', 2 ** 32 - 1), E + 'InvalidOption'),
            ('ListFiles depth 0', call(p, SBX, 'ListFiles', 'su', '/work', 0), E + 'InvalidOption'),
            ('Stat empty path', call(p, SBX, 'Stat', 's', ''), E + 'InvalidOption'),
            ('Stat 5000-byte path', call(p, SBX, 'Stat', 's', '/' + 'a' * 5000), E + 'InvalidOption'),
            ('MakeDirectory without parents', call(p, SBX, 'MakeDirectory', 'sb', '/work/a/b/c', False),
             'org.freedesktop.DBus.Error.FileNotFound'),
            ('Remove /', call(p, SBX, 'Remove', 'sb', '/', True), INVALID_ARGS),
            ('Remove a missing file', call(p, SBX, 'Remove', 'sb', '/work/missing', False),
             'org.freedesktop.DBus.Error.FileNotFound'),
            ('Move sb', call(p, SBX, 'Move', 'sb', '/work/kept', True), INVALID_ARGS),
            ('Move into /usr', call(p, SBX, 'Move', 'ss', '/work/kept', '/usr/kept'), 'System.Error.EXDEV'),
        ]
        self.check_cases(cases)
        cp = self.ok(self.exec(self.sid, 'sh', '-c', 'cat /work/kept; ls /work'))
        self.assertEqual(cp.stdout.split('\n')[0], 'kept')
        self.assertNotIn('up', cp.stdout.split(), 'a refused Upload created its file')

    def test_stdin_with_nul_bytes_is_passed_exactly(self):
        data = bytes(range(256)) * 4
        res = bus([self.exec_call(['sh', '-c', 'od -An -v -tx1 | tr -d " \\n"'],
                                  Stdin=v('ay', list(data)))])[0]
        self.assertIn('reply', res, res)
        self.assertEqual(res['reply'][0], 0, res)
        self.assertEqual(res['reply'][1], {'len': len(data) * 2}, res)
        cp = self.ok(self.exec(self.sid, 'sh', '-c', 'od -An -v -tx1 | tr -d " \\n"', input=data))
        self.assertEqual(cp.stdout, data.hex())

    def test_timeout_usec_keeps_a_fraction_of_a_second(self):
        res = bus([self.exec_call(['sleep', '5'], TimeoutUSec=v('t', 300000))])[0]
        self.assertIn('reply', res, res)
        self.assertEqual(res['reply'][0], 137, res)
        info = res['reply'][3]
        self.assertTrue(info['TimedOut'], res)
        self.assertLess(info['DurationUSec'], 900000, res)

    def test_unprivileged_caller_gets_the_same_named_errors(self):
        # A create is parsed before polkit is asked: a caller without any grant cannot do more
        # harm. An Exec's options are refused only after the caller is authorized (a refused
        # first Exec ends an ephemeral sandbox, which only its owner may cause): a stranger
        # gets AccessDenied for root's sandbox, whatever it sent.
        cases = [
            ('wrong signature', call(M, MGR, 'CreateSandbox', 'ia{sv}', 1, {}), INVALID_ARGS),
            ('MemoryMax 2^64-1', create(MemoryMax=v('t', U64_MAX)), E + 'InvalidOption'),
            ('100k arguments', self.exec_call({'$list': ['x', 100000]}), 'org.freedesktop.DBus.Error.AccessDenied'),
            ('unknown object', self.exec_call(['true'], path=f'{M}/sandbox/nothex'), UNKNOWN_OBJECT),
            ('GetSandbox 1 MB', call(M, MGR, 'GetSandbox', 's', rep('a', MiB)), E + 'NoSuchSandbox'),
        ]
        self.check_cases(cases, uid=secutil.NOBODY)

    # ---- below the bus library: what only a raw client can send ---------------------

    def test_invalid_utf8_and_nul_in_strings_are_stopped_by_the_bus(self):
        """A string of invalid UTF-8 or with a NUL inside: the bus daemon drops the sender;
        sandboxd never sees the message and serves on."""
        identity = secutil.daemon_identity()
        before = set(secutil.S.sandbox_scopes())
        for what, template, option in (('invalid UTF-8', b'sh\xffell', None),
                                       ('overlong UTF-8', b'\xc0\xafetc', None),
                                       ('surrogate', b'\xed\xa0\x80', None),
                                       ('NUL inside', b'she\x00ll', None),
                                       ('NUL in an option name', b'shell', b'Memory\x00Max'),
                                       ('invalid UTF-8 option name', b'shell', b'Memory\xffMax')):
            with self.subTest(what):
                outcome = raw_create_sandbox(secutil.S.path('/run/dbus/system_bus_socket'), template, option)
                self.assertIn(outcome[0], ('disconnected', 'error'), f'{what}: {outcome}')
                if outcome[0] == 'error':
                    self.assertNotEqual(outcome[1], 'org.freedesktop.DBus.Error.NoReply')
        # The same hand-made message with a valid name reaches sandboxd and is answered:
        # the client above is a D-Bus client, not a source of garbage.
        bus_path = secutil.S.path('/run/dbus/system_bus_socket')
        self.assertEqual(raw_create_sandbox(bus_path, b'no-such-template'), ('error', E + 'NoSuchTemplate'))
        self.assertEqual(raw_create_sandbox(bus_path, b'shell', b'MemoryMaxx'), ('error', E + 'InvalidOption'))
        self.assertEqual(set(secutil.S.sandbox_scopes()), before)
        self.assert_serving(identity)


def raw_create_sandbox(bus_path, template, option=None):
    """CreateSandbox(TEMPLATE, {OPTION: <uint64 1 GiB>}) from a hand-made message (no
    option when OPTION is None). Returns ('disconnected',), ('error', NAME) or ('reply',)
    for what became of it."""
    s = rawbus.connect(bus_path)
    try:
        body = rawbus.Writer()
        if option is not None:
            body.string(template)
            body.u32(0)                        # array length, patched below
            len_pos = len(body.b) - 4
            body.align(8)
            start = len(body.b)
            body.string(option)
            body.sig(b't')
            body.align(8)
            body.b += struct.pack('<Q', 1 << 30)
            struct.pack_into('<I', body.b, len_pos, len(body.b) - start)
        else:
            body.string(template)
            body.u32(0)
            body.align(8)
        s.sendall(rawbus.message(2, b"io.sandboxd.Sandbox1", b"/io/sandboxd/Sandbox1", b"io.sandboxd.Sandbox1.Manager",
                                 b"CreateSandbox", b"sa{sv}", bytes(body.b)))
        eof, msgs = rawbus.recv_messages(s, 10, 2)
        for t, name, reply in msgs:
            if reply == 2:
                return ('error', name) if t == 3 else ('reply',)
        return ('disconnected',) if eof else ('no answer',)
    finally:
        s.close()


if __name__ == '__main__':
    unittest.main(verbosity=2)
