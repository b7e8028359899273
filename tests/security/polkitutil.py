# SPDX-License-Identifier: LGPL-2.1-or-later
"""polkit as the security tests set it up: our action file (polkit/io.sandboxd.Sandbox1.policy)
and per-test rules files for the real polkitd of the system under test. In namespace mode
they are bind-mounted over /usr/share/polkit-1/actions and /etc/polkit-1/rules.d inside the
test system's mount namespace only; in host mode they are installed and removed again.
polkitd is restarted after each change so that it reads them before the next call."""

import os
import shutil
import unittest

import secutil

ACTIONS_DIR = '/usr/share/polkit-1/actions'
RULES_DIR = '/etc/polkit-1/rules.d'
TEST_RULES = '10-sandboxd-test.rules'
SHIPPED_RULES = 'io.sandboxd.Sandbox1.rules'
POLICY = 'io.sandboxd.Sandbox1.policy'


def setup_module():
    """setUpModule of a module that sets polkit's rules: the system, and its Polkit installed."""
    polkit = Polkit(secutil.setup_module())
    try:
        polkit.install()
    except BaseException:
        polkit.uninstall()
        secutil.teardown_module()
        raise
    return polkit


def teardown_module(polkit):
    try:
        if polkit:
            polkit.uninstall()
    finally:
        secutil.teardown_module()


def grant_to_nobody(*actions):
    cond = ' || '.join(f'action.id == "io.sandboxd.Sandbox1.{a}"' for a in actions)
    return ('// written by the tests (tests/security/polkitutil.py)\n'
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
            actions = os.path.join(self.S.workdir, 'polkit-actions')
            rules = os.path.join(self.S.workdir, 'polkit-rules')
            # Ours, left by a module before this one in the same system (unmounted since).
            for d in (actions, rules):
                shutil.rmtree(d, ignore_errors=True)
                os.makedirs(d, mode=0o755)
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
