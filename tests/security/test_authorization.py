#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Authorization by the real polkitd on the real system bus, for a second real uid:
nobody (65534), which exists on every Debian system (no user is created).

polkit's configuration is the test's own: our action file (polkit/io.sandboxd.Sandbox1.policy)
and per-test rules files. In namespace mode they are bind-mounted over
/usr/share/polkit-1/actions and /etc/polkit-1/rules.d inside the test system's mount
namespace only; in host mode they are installed and removed again. polkitd is restarted
after each change so that it reads them before the next call."""

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import secutil  # noqa: E402
from secutil import DENIED, M, MGR, NOBODY, PROPS, SBX, Base, bus, call, harness, sandbox_path  # noqa: E402

ACTIONS_DIR = '/usr/share/polkit-1/actions'
RULES_DIR = '/etc/polkit-1/rules.d'
TEST_RULES = '10-sandboxd-test.rules'
SHIPPED_RULES = 'io.sandboxd.Sandbox1.rules'
POLICY = 'io.sandboxd.Sandbox1.policy'

POLKIT = None


def setup_polkit_module():
    """setUpModule of a module that sets polkit's rules (this one, test_varlink): the
    system, with our action file installed for its polkitd; returns the Polkit."""
    polkit = Polkit(secutil.setup_module())
    try:
        polkit.install()
    except BaseException:
        polkit.uninstall()
        raise
    return polkit


def teardown_polkit_module(polkit):
    try:
        if polkit:
            polkit.uninstall()
    finally:
        secutil.teardown_module()


def setUpModule():
    global POLKIT
    POLKIT = setup_polkit_module()


def tearDownModule():
    teardown_polkit_module(POLKIT)


def grant_to_nobody(*actions):
    cond = ' || '.join(f'action.id == "io.sandboxd.Sandbox1.{a}"' for a in actions)
    return ('// written by tests/security/test_authorization.py\n'
            'polkit.addRule(function(action, subject) {\n'
            f'        if (subject.user == "nobody" && ({cond}))\n'
            '                return polkit.Result.YES;\n'
            '});\n')


class Polkit:
    """Our action file and rules for the system's polkitd, and nothing else changed."""

    def __init__(self, system):
        self.S = system
        self.mounted = []          # namespace mode: mount points to unmount
        self.installed = []        # host mode: files to remove
        self.rules_dir = None      # where rules files go, as seen from here
        self.group_file = None

    def restart(self):
        # reset-failed also resets the start rate limit, which a few tests in a row reach.
        self.S.systemctl('reset-failed', 'polkit.service', timeout=60)
        cp = self.S.systemctl('restart', 'polkit.service', timeout=60)
        if cp.returncode != 0:
            raise AssertionError(f'cannot restart polkit.service: {cp.stderr}')

    def _bind(self, src, dest):
        self.S.run(['mount', '--bind', src, dest], check=True)
        self.mounted.append(dest)

    def install(self):
        policy_src = os.path.join(self.S.paths.source, 'polkit', POLICY)
        if self.S.mode == 'namespace':
            # Directories of this install's own: modules run on one system (run.py) each
            # install and uninstall theirs.
            actions = tempfile.mkdtemp(prefix='polkit-actions-', dir=self.S.workdir)
            rules = tempfile.mkdtemp(prefix='polkit-rules-', dir=self.S.workdir)
            os.chmod(actions, 0o755)
            os.chmod(rules, 0o755)
            host_actions = self.S.path(ACTIONS_DIR)
            if os.path.isdir(host_actions):
                for n in os.listdir(host_actions):
                    if n.endswith('.policy'):
                        shutil.copy(os.path.join(host_actions, n), actions)
            shutil.copy(policy_src, actions)
            self._bind(actions, ACTIONS_DIR)
            if not os.path.isdir(self.S.path(RULES_DIR)):
                raise unittest.SkipTest(f'{RULES_DIR} does not exist: is polkitd installed?')
            for n in os.listdir(self.S.path(RULES_DIR)):
                shutil.copy(os.path.join(self.S.path(RULES_DIR), n), rules)
            self._bind(rules, RULES_DIR)
            self.rules_dir = rules
        else:
            dest = os.path.join(ACTIONS_DIR, POLICY)
            if not os.path.exists(dest):
                shutil.copy(policy_src, dest)
                self.installed.append(dest)
            self.rules_dir = RULES_DIR
        self.restart()

    def set_rules(self, text, name=TEST_RULES):
        """Install TEXT as our rules file NAME (None: remove it) and restart polkitd."""
        path = os.path.join(self.rules_dir, name)
        if text is None:
            if os.path.exists(path):
                os.unlink(path)
        else:
            with open(path, 'w') as f:
                f.write(text)
            os.chmod(path, 0o644)
            if self.S.mode == 'host' and path not in self.installed:
                self.installed.append(path)
        self.restart()

    def set_group_file(self, text):
        """Namespace mode: TEXT bind-mounted over /etc/group of the test system (the host's
        /etc/group is not touched); None undoes it."""
        if self.S.mode != 'namespace':
            raise unittest.SkipTest('needs a group the test can make without touching /etc/group')
        if '/etc/group' in self.mounted:
            self.S.run(['umount', '/etc/group'], check=True)
            self.mounted.remove('/etc/group')
        if text is not None:
            self.group_file = os.path.join(self.S.workdir, 'group')
            with open(self.group_file, 'w') as f:
                f.write(text)
            os.chmod(self.group_file, 0o644)
            self._bind(self.group_file, '/etc/group')
        self.restart()

    def uninstall(self):
        for dest in reversed(self.mounted):
            self.S.run(['umount', dest])
        self.mounted = []
        for path in reversed(self.installed):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self.installed = []
        try:
            self.restart()
        except AssertionError:
            pass


class BusMonitor:
    """busctl monitor of what sandboxd sends and receives, as parsed messages."""

    def __init__(self, system):
        self.S = system
        self.proc = None
        self.messages = []

    def __enter__(self):
        self.proc = subprocess.Popen(self.S.wrap(['busctl', 'monitor', '--system', '--json=short',
                                                  harness.BUS_NAME]),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self._read_until(self.proc.stderr, b'Monitoring bus message stream.')
        return self

    def _read_until(self, f, needle, timeout=20):
        buf = b''
        deadline = time.monotonic() + timeout
        while needle not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([f], [], [], left)[0]:
                raise AssertionError(f'busctl monitor: no {needle!r} within {timeout}s: {buf[-2000:]!r}')
            chunk = os.read(f.fileno(), 65536)
            if not chunk:
                raise AssertionError(f'busctl monitor ended: {buf[-2000:]!r}')
            buf += chunk
        return buf

    def __exit__(self, *exc):
        try:
            # A last call of our own, seen by the monitor: all before it was seen too.
            self.S.busctl('call', harness.BUS_NAME, harness.MANAGER_PATH, 'org.freedesktop.DBus.Peer', 'GetMachineId')
            out = self._read_until(self.proc.stdout, b'"GetMachineId"')
            self.messages = [json.loads(line) for line in out.splitlines() if line.strip()]
        finally:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.communicate()


class Authorization(Base):
    """Root's sandbox R (with a file in it) is what nobody must not touch."""

    rules = None
    secret = 'root wrote this\n'

    @classmethod
    def setUpClass(cls):
        POLKIT.set_rules(cls.rules)
        cp = secutil.S.sandboxctl('create', '--template', 'python')
        if cp.returncode != 0:
            raise AssertionError(f'sandboxctl create failed: {cp.stderr}')
        cls.root_sid = cp.stdout.strip()
        cp = secutil.S.sandboxctl('exec', cls.root_sid, '--', 'sh', '-c', 'cat > /work/secret.txt',
                                  input=cls.secret)
        if cp.returncode != 0:
            raise AssertionError(f'writing the secret failed: {cp.stderr}')

    @classmethod
    def tearDownClass(cls):
        secutil.S.sandboxctl('destroy', cls.root_sid, timeout=120)
        POLKIT.set_rules(None)

    def nobody(self, *calls):
        return bus(list(calls), uid=NOBODY)

    def assert_denied(self, res, what):
        self.assertIn(res.get('error'), DENIED, f'{what} as nobody was not refused: {res}')

    def assert_root_sandbox_intact(self):
        sid = self.root_sid
        props = secutil.S.show(self.unit(sid), 'ActiveState')
        self.assertEqual(props['ActiveState'], 'active', f'{self.unit(sid)} is not active any more')
        cp = self.ok(self.exec(sid, 'sh', '-c', 'ls -A /work; cat /work/secret.txt'))
        self.assertEqual(cp.stdout, 'secret.txt\n' + self.secret)
        res = bus([call(M, MGR, 'GetSandbox', 's', sid)])[0]
        self.assertEqual(res.get('reply'), [sandbox_path(sid)], res)
        state = bus([call(sandbox_path(sid), PROPS, 'Get', 'ss', SBX, 'State')])[0]
        self.assertEqual(state.get('reply'), ['running'], state)

    def assert_others_untouchable(self):
        sid, path = self.root_sid, sandbox_path(self.root_sid)
        res = self.nobody(
            call(path, SBX, 'Exec', 'asa{sv}', ['sh', '-c', 'echo pwned > /work/pwned'], {}),
            call(M, MGR, 'GetSandbox', 's', sid),
            call(path, SBX, 'Destroy'),
            call(M, MGR, 'ListSandboxes'),
            call(path, SBX, 'Pause'),
            call(path, SBX, 'Resume'),
            call(path, SBX, 'SetTimeout', 'tt', 1, 1),
            call(path, SBX, 'Start', 'asa{sv}', ['sh', '-c', 'echo pwned > /work/pwned'], {}),
            call(path, SBX, 'ListProcesses'),
            call(path, SBX, 'Signal', 'ti', 1, 9),
            call(path, SBX, 'Wait', 'tt', 1, 1),
            call(path, SBX, 'ResizeTerminal', 'tuu', 1, 24, 80),
            call(path, SBX, 'ReadOutput', 't', 1),
            call(path, SBX, 'ReadFile', 'stt', '/work/secret.txt', 0, 0),
            call(path, SBX, 'WriteFile', 'saya{sv}', '/work/secret.txt', [112, 119, 110, 101, 100], {}),
            call(path, SBX, 'WriteFile', 'saya{sv}', '/work/pwned', [112], {}),
            call(path, SBX, 'Upload', 'sha{sv}', '/work/pwned', {'$fd': '/etc/hostname'}, {}),
            call(path, SBX, 'Download', 'sha{sv}', '/work/secret.txt', {'$fd': '/dev/null'}, {}),
            call(path, SBX, 'ListFiles', 'su', '/work', 1),
            call(path, SBX, 'Stat', 's', '/work/secret.txt'),
            call(path, SBX, 'MakeDirectory', 'sb', '/work/pwned', False),
            call(path, SBX, 'Remove', 'sb', '/work/secret.txt', False),
            call(path, SBX, 'Move', 'ss', '/work/secret.txt', '/work/pwned'))
        self.assert_denied(res[0], 'Exec in root\'s sandbox')
        self.assert_denied(res[1], 'GetSandbox of root\'s sandbox')
        self.assert_denied(res[2], 'Destroy of root\'s sandbox')
        self.assertIn('reply', res[3], res[3])
        self.assertNotIn(sid, [row[0] for row in res[3]['reply'][0]], 'nobody lists root\'s sandbox')
        self.assert_denied(res[4], 'Pause of root\'s sandbox')
        self.assert_denied(res[5], 'Resume of root\'s sandbox')
        self.assert_denied(res[6], 'SetTimeout of root\'s sandbox')
        for r, method in zip(res[7:], ('Start', 'ListProcesses', 'Signal', 'Wait', 'ResizeTerminal', 'ReadOutput',
                                       'ReadFile', 'WriteFile', 'WriteFile (new)', 'Upload', 'Download',
                                       'ListFiles', 'Stat', 'MakeDirectory', 'Remove', 'Move')):
            self.assert_denied(r, f'{method} in root\'s sandbox')
        timeout = bus([call(path, PROPS, 'Get', 'ss', SBX, 'Timeout')])[0]
        self.assertEqual(timeout.get('reply'), [0], f'the lifetime of root\'s sandbox changed: {timeout}')
        self.assert_root_sandbox_intact()

    def own_sandbox_cycle(self):
        """nobody creates a sandbox, runs in it, sees only it, destroys it."""
        before = set(secutil.S.sandbox_scopes())
        res = self.nobody(call(M, MGR, 'CreateSandbox', 'sa{sv}', 'python', {}))[0]
        self.assertIn('reply', res, f'nobody\'s CreateSandbox: {res}')
        sid, path = res['reply']
        self.addCleanup(secutil.S.sandboxctl, 'destroy', sid, timeout=120)
        owner = bus([call(path, PROPS, 'Get', 'ss', SBX, 'Owner')])[0]
        self.assertEqual(owner.get('reply'), [NOBODY], owner)
        res = self.nobody(
            call(path, SBX, 'Exec', 'asa{sv}', ['sh', '-c', 'id -u; echo mine > /work/f; cat /work/f'], {}),
            call(M, MGR, 'GetSandbox', 's', sid),
            call(M, MGR, 'ListSandboxes'),
            call(path, PROPS, 'Get', 'ss', SBX, 'Owner'))
        self.assertIn('reply', res[0], f'nobody\'s Exec in its own sandbox: {res[0]}')
        self.assertEqual(res[0]['reply'][0], 0, res[0])
        self.assertEqual(res[0]['reply'][1], {'len': len('1000\nmine\n')}, res[0])
        self.assertEqual(res[1].get('reply'), [path], res[1])
        self.assertEqual([row[0] for row in res[2]['reply'][0]], [sid], 'nobody\'s ListSandboxes')
        self.assertEqual(res[3].get('reply'), [NOBODY], f'nobody reading its own sandbox\'s Owner: {res[3]}')
        cp = self.ok(self.exec(sid, 'cat', '/work/f'))       # the bytes, checked by root
        self.assertEqual(cp.stdout, 'mine\n')
        res = self.nobody(call(path, SBX, 'Destroy'))[0]
        self.assertEqual(res, {'reply': []}, f'nobody\'s Destroy of its own sandbox: {res}')
        self.assertEqual(set(secutil.S.sandbox_scopes()), before)


class WithoutGrant(Authorization):
    """Only our action file: its defaults ask for authentication, which nobody (no
    session, no agent) cannot give."""

    def test_create_is_refused_and_nothing_created(self):
        before = set(secutil.S.sandbox_scopes())
        res = self.nobody(call(M, MGR, 'CreateSandbox', 'sa{sv}', 'shell', {}),
                          call(M, MGR, 'CreateSandbox', 'sa{sv}', 'python', {}))
        for r in res:
            self.assert_denied(r, 'CreateSandbox')
        self.assertEqual(set(secutil.S.sandbox_scopes()), before)
        rows = bus([call(M, MGR, 'ListSandboxes')])[0]['reply'][0]
        self.assertEqual([r for r in rows if r[2] == NOBODY], [], 'a sandbox of nobody exists')

    def test_others_sandbox_is_untouchable(self):
        self.assert_others_untouchable()

    def test_list_shows_none_of_roots(self):
        res = self.nobody(call(M, MGR, 'ListSandboxes'))[0]
        self.assertEqual(res, {'reply': [[]]})

    def test_properties_of_others_sandbox_are_not_readable(self):
        # "only that uid, or a caller granted manage, can ... read it" (issue 3).
        path = sandbox_path(self.root_sid)
        res = self.nobody(call(path, PROPS, 'GetAll', 's', SBX),
                          call(path, PROPS, 'Get', 'ss', SBX, 'Unit'))
        for r in res:
            self.assertNotIn('reply', r, f'nobody read the properties of root\'s sandbox: {r}')

    def test_introspection_does_not_list_others_sandboxes(self):
        res = self.nobody(call(f'{M}/sandbox', 'org.freedesktop.DBus.Introspectable', 'Introspect'),
                          call(M, 'org.freedesktop.DBus.Introspectable', 'Introspect'))
        for r in res:
            self.assertNotIn(self.root_sid, str(r.get('reply')),
                             'nobody enumerates root\'s sandbox ids by introspection')


class CreateOnlyGrant(Authorization):
    rules = grant_to_nobody('create')

    def test_own_exec_needs_exec_and_destroy_needs_create(self):
        res = self.nobody(call(M, MGR, 'CreateSandbox', 'sa{sv}', 'shell', {}))[0]
        self.assertIn('reply', res, res)
        sid, path = res['reply']
        self.addCleanup(secutil.S.sandboxctl, 'destroy', sid, timeout=120)
        res = self.nobody(call(path, SBX, 'Exec', 'asa{sv}', ['sh', '-c', 'echo ran > /work/ran'], {}))[0]
        self.assert_denied(res, 'Exec in its own sandbox without the exec action')
        cp = self.exec(sid, 'test', '-e', '/work/ran')
        self.assertEqual(cp.returncode, 1, 'the refused Exec ran anyway')
        res = self.nobody(call(path, SBX, 'Destroy'))[0]
        self.assertEqual(res, {'reply': []}, res)
        self.assertNotIn(self.unit(sid), secutil.S.sandbox_scopes())
        self.assert_others_untouchable()


class CreateExecGrant(Authorization):
    rules = grant_to_nobody('create', 'exec')

    def test_own_sandboxes_work(self):
        self.own_sandbox_cycle()

    def test_each_new_caller_is_answered_as_its_uid(self):
        """Each call below comes from a new connection, whose uid sandboxd does not know
        yet: it asks the bus daemon (GetConnectionUnixUser, once per caller; asynchronously,
        which tests/unit/test-bus-caller.c proves) and answers as for that uid, also the
        calls that sd-bus answers itself (Properties, Introspect), which are held meanwhile."""
        res = self.nobody(call(M, MGR, 'CreateSandbox', 'sa{sv}', 'shell', {}))[0]
        self.assertIn('reply', res, res)
        sid, path = res['reply']
        self.addCleanup(secutil.S.sandboxctl, 'destroy', sid, timeout=120)
        root_path = sandbox_path(self.root_sid)
        introspect = ('org.freedesktop.DBus.Introspectable', 'Introspect')

        with BusMonitor(secutil.S) as monitor:
            owner = self.nobody(call(path, PROPS, 'Get', 'ss', SBX, 'Owner'))[0]
            others = self.nobody(call(root_path, PROPS, 'GetAll', 's', SBX))[0]
            tree = self.nobody(call(f'{M}/sandbox', *introspect))[0]
            listed = self.nobody(call(M, MGR, 'ListSandboxes'))[0]
            ran = self.nobody(call(path, SBX, 'Exec', 'asa{sv}', ['id', '-u'], {}))[0]
            refused = self.nobody(call(root_path, SBX, 'Exec', 'asa{sv}', ['true'], {}))[0]
            root_sees = bus([call(root_path, PROPS, 'Get', 'ss', SBX, 'Owner')])[0]

        self.assertEqual(owner.get('reply'), [NOBODY], owner)
        self.assertNotIn('reply', others, f'nobody read the properties of root\'s sandbox: {others}')
        self.assertIn(sid, str(tree.get('reply')), tree)
        self.assertNotIn(self.root_sid, str(tree.get('reply')), tree)
        self.assertEqual([row[0] for row in listed['reply'][0]], [sid], listed)
        self.assertEqual(ran.get('reply', [None])[0], 0, ran)
        self.assert_denied(refused, 'Exec in root\'s sandbox')
        self.assertEqual(root_sees.get('reply'), [0], root_sees)

        calls = [m for m in monitor.messages if m.get('type') == 'method_call']
        monitor_own = {m['sender'] for m in calls if m.get('member') == 'GetMachineId'}
        callers = {m['sender'] for m in calls if m.get('destination') == harness.BUS_NAME} - monitor_own
        asked = [m['payload']['data'][0] for m in calls
                 if m.get('destination') == 'org.freedesktop.DBus' and m.get('member') == 'GetConnectionUnixUser'
                 and m['payload']['data'][0] not in monitor_own]
        self.assertGreaterEqual(len(callers), 7, monitor.messages)
        self.assertEqual(sorted(asked), sorted(callers), 'not asked once about each caller')

    def test_others_sandbox_still_untouchable(self):
        self.assert_others_untouchable()


class ManageGrant(Authorization):
    rules = grant_to_nobody('manage')

    def test_manage_reaches_others_sandbox(self):
        sid, path = self.root_sid, sandbox_path(self.root_sid)
        res = self.nobody(call(M, MGR, 'ListSandboxes'),
                          call(M, MGR, 'GetSandbox', 's', sid),
                          call(path, SBX, 'Exec', 'asa{sv}', ['cat', '/work/secret.txt'], {}),
                          call(path, SBX, 'SetTimeout', 'tt', 3600, 0))
        self.assertIn(sid, [row[0] for row in res[0]['reply'][0]], res[0])
        self.assertEqual(res[1].get('reply'), [path], res[1])
        self.assertIn('reply', res[2], res[2])
        self.assertEqual(res[2]['reply'][1], {'len': len(self.secret)}, res[2])
        self.assertEqual(res[3], {'reply': []}, res[3])
        timeout = bus([call(path, PROPS, 'Get', 'ss', SBX, 'Timeout')])[0]
        self.assertEqual(timeout.get('reply'), [3600], timeout)
        res = self.nobody(call(path, SBX, 'Destroy'))[0]
        self.assertEqual(res, {'reply': []}, res)
        self.assertNotIn(self.unit(sid), secutil.S.sandbox_scopes())


class ShippedGroupRule(Authorization):
    """polkit/io.sandboxd.Sandbox1.rules: members of "sandbox" create and exec without
    authenticating. The group's members are set in a copy of /etc/group bind-mounted in the
    test system's mount namespace (host mode: skipped, it would need the host's /etc/group).
    Where the system has a group "sandbox" already (an installed sandboxd's sysusers.d made
    it), the copy keeps its gid and replaces only its member list."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with open(os.path.join(secutil.S.paths.source, 'polkit', SHIPPED_RULES)) as f:
            cls.shipped = f.read()
        with open(secutil.S.path('/etc/group')) as f:
            lines = f.read().splitlines()
        existing = [line for line in lines if line.startswith('sandbox:')]
        cls.groups = '\n'.join(line for line in lines if not line.startswith('sandbox:'))
        if existing:
            cls.gid = int(existing[0].split(':')[2])
            print(f'\n# the system has a group "sandbox" already (gid {cls.gid}): its members are replaced '
                  'in the copy', file=sys.stderr, flush=True)
        else:
            used = {int(line.split(':')[2]) for line in lines if line.count(':') >= 3}
            cls.gid = next(g for g in range(60999, 60000, -1) if g not in used)

    @classmethod
    def tearDownClass(cls):
        try:
            if POLKIT.group_file:
                POLKIT.set_group_file(None)
            POLKIT.set_rules(None, name=SHIPPED_RULES)
        finally:
            super().tearDownClass()

    def with_group(self, members):
        POLKIT.set_rules(self.shipped, name=SHIPPED_RULES)
        POLKIT.set_group_file(self.groups + f'\nsandbox:x:{self.gid}:{members}\n')

    def test_member_of_sandbox_group_creates_and_execs(self):
        self.with_group('nobody')
        self.own_sandbox_cycle()
        self.assert_others_untouchable()

    def test_non_member_is_refused(self):
        self.with_group('')
        res = self.nobody(call(M, MGR, 'CreateSandbox', 'sa{sv}', 'shell', {}))[0]
        self.assert_denied(res, 'CreateSandbox by a non-member')


if __name__ == '__main__':
    unittest.main(verbosity=2)
