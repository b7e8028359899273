#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Templates through the API (issue 14, item 2), on the real daemon: CreateTemplate writes
the administrator's template directory (here the harness's, the last --template-dir),
validated as a file is, atomically, and ListTemplates and CreateSandbox have it at once;
RemoveTemplate; shipped templates overridden, never removed; sandboxes of a changed or
removed template run on; its warm pool starts anew; "manage" is asked for (uid 65534,
real polkit)."""

import json
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'security'))
import harness  # noqa: E402
import polkitutil  # noqa: E402
import secutil  # noqa: E402
from polkitutil import grant_to_nobody  # noqa: E402
from secutil import DENIED, M, MGR, NOBODY, bus, call  # noqa: E402

E = 'io.sandboxd.Sandbox1.'
S = None


def setUpModule():
    global S
    S = secutil.setup_module()


def tearDownModule():
    secutil.teardown_module()


def shipped(name):
    with open(os.path.join(S.paths.templates, f'{name}.json')) as f:
        return json.load(f)


class Base(harness.SandboxTestCase):
    def admin_dir(self):
        return S.path(S.extra_templates)

    def templates(self):
        return {t['name']: t for t in json.loads(self.ok(self.ctl('templates', '--json')).stdout)}

    def create_template(self, name, text, uid=None):
        """CreateTemplate as UID (root: None); the result dict of busprobe."""
        if not isinstance(text, str):
            text = json.dumps(text)
        res = bus([call(M, MGR, 'CreateTemplate', 'ss', name, text)], uid=uid)[0]
        if 'reply' in res:
            self.addCleanup(self.remove_quietly, name)
        return res

    def remove_template(self, name, uid=None):
        return bus([call(M, MGR, 'RemoveTemplate', 's', name)], uid=uid)[0]

    @staticmethod
    def remove_quietly(name):
        bus([call(M, MGR, 'RemoveTemplate', 's', name)])

    def pooled_of(self, template):
        """Units of the warm pool's sandboxes of TEMPLATE (the description names it): those
        that nobody sees."""
        listed = {f'sandbox-{s["id"]}.scope' for s in json.loads(self.ok(self.ctl('list', '--json')).stdout)}
        cp = S.systemctl('list-units', '--plain', '--no-legend', 'sandbox-*.scope')
        return {line.split()[0] for line in cp.stdout.splitlines()
                if line.rstrip().endswith(f'({template})') and line.split()[0] not in listed}

    def wait_for(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        while not pred():
            self.assertLess(time.monotonic(), deadline, f'timed out waiting for {what}')
            time.sleep(0.1)


class Templates(Base):
    def test_create_list_use_replace_remove(self):
        t = shipped('shell')
        t['description'] = 'made through the API'
        t['etc'] = {'motd': 'from the API\n'}
        text = json.dumps(t, indent=2)
        cp = self.ok(self.ctl('template-create', 'api-shell', '-', input=text))
        self.addCleanup(self.remove_quietly, 'api-shell')
        self.assertEqual(cp.stdout, '')
        self.assertEqual(self.templates()['api-shell'],
                         {'name': 'api-shell', 'payload': 'bwrap', 'description': 'made through the API'})
        # The file, as given, and nothing half-written beside it.
        with open(os.path.join(self.admin_dir(), 'api-shell.json')) as f:
            self.assertEqual(f.read(), text)
        self.assertEqual([n for n in os.listdir(self.admin_dir()) if n.startswith('.')], [])

        # Sandboxes come from it at once, with its /etc written.
        sid = self.create(template='api-shell')
        self.assertEqual(self.ok(self.exec(sid, 'cat', '/etc/motd')).stdout, 'from the API\n')
        self.assertEqual(self.status(sid)['template'], 'api-shell')

        # Replaced: the new one from now on; the running sandbox runs on as it was.
        t['description'] = 'second version'
        t['etc'] = {'motd': 'second\n'}
        res = self.create_template('api-shell', t)
        self.assertEqual(res, {'reply': []})
        self.assertEqual(self.templates()['api-shell']['description'], 'second version')
        newer = self.create(template='api-shell')
        self.assertEqual(self.ok(self.exec(newer, 'cat', '/etc/motd')).stdout, 'second\n')
        self.assertEqual(self.ok(self.exec(sid, 'cat', '/etc/motd')).stdout, 'from the API\n')

        # Removed: gone from the list and for new sandboxes; the running ones run on.
        self.ok(self.ctl('template-remove', 'api-shell'))
        self.assertNotIn('api-shell', self.templates())
        self.assertFalse(os.path.exists(os.path.join(self.admin_dir(), 'api-shell.json')))
        cp = self.ctl('create', '--template', 'api-shell')
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn("No template 'api-shell'", cp.stderr)
        self.assert_exec_works(sid, 'after its template was removed')
        self.assert_exec_works(newer, 'after its template was removed')
        res = self.remove_template('api-shell')
        self.assertEqual(res.get('error'), E + 'NoSuchTemplate', res)

    def test_invalid_template_is_refused_with_the_loaders_message(self):
        before = set(os.listdir(self.admin_dir()))
        cases = [
            ('no-binds', {'payload': 'bwrap'}, '"ro_binds" must name at least one host directory'),
            ('not-json', 'this is not JSON', 'not a JSON object'),
            # Read by the faces' strict reader: a key twice is not silently the last.
            ('twice', '{"payload": "bwrap", "payload": "docker"}', 'not a JSON object (a duplicate key)'),
            ('bad-limit', dict(shipped('shell'), limits={'MemoryMax': -1}), '"MemoryMax" must be a positive integer'),
            ('etc-escape', dict(shipped('shell'), etc={'../passwd': 'x'}), 'not a relative path inside /etc'),
            ('big', dict(shipped('shell'), description='x' * 70000), '65536 bytes or more'),
        ]
        for name, text, message in cases:
            res = self.create_template(name, text)
            self.assertEqual(res.get('error'), E + 'InvalidOption', f'{name}: {res}')
            self.assertIn(message, res.get('message', ''), name)
        for bad in ('../escape', '.hidden', 'a/b', '', 'x' * 65):
            res = self.create_template(bad, shipped('shell'))
            self.assertEqual(res.get('error'), E + 'InvalidOption', f'{bad!r}: {res}')
        self.assertEqual(set(os.listdir(self.admin_dir())), before, 'a refused template left a file')
        self.assertNotIn('no-binds', self.templates())

        # The message is the loader's own: a file of the same text, read when the templates
        # are loaded again, is ignored with the same words in the journal.
        with open(os.path.join(self.admin_dir(), 'broken-file.json'), 'w') as f:
            json.dump({'payload': 'bwrap'}, f)
        self.addCleanup(os.unlink, os.path.join(self.admin_dir(), 'broken-file.json'))
        start = time.time()
        self.assertEqual(self.create_template('api-trigger', shipped('shell')), {'reply': []})
        journal = S.journal(units=('sandboxd.service',), since=start)
        self.assertIn('broken-file.json: "ro_binds" must name at least one host directory', journal)
        self.assertNotIn('broken-file', self.templates())

    def test_shipped_template_is_overridden_not_removed(self):
        vendor = self.templates()['shell']['description']
        res = self.remove_template('shell')
        self.assertEqual(res.get('error'), E + 'TemplateReadOnly', res)
        self.assertIn('shell', self.templates())
        cp = self.ctl('template-remove', 'shell')
        self.assertNotEqual(cp.returncode, 0)
        self.assertIn('cannot be removed', cp.stderr)

        override = dict(shipped('shell'), description='the administrator\'s shell')
        self.assertEqual(self.create_template('shell', override), {'reply': []})
        self.assertEqual(self.templates()['shell']['description'], 'the administrator\'s shell')
        self.assert_exec_works(self.create(template='shell'), 'of the overridden shell')
        # Removing the override shows the shipped one again; then it cannot be removed.
        self.assertEqual(self.remove_template('shell'), {'reply': []})
        self.assertEqual(self.templates()['shell']['description'], vendor)
        self.assertEqual(self.remove_template('shell').get('error'), E + 'TemplateReadOnly')

    def test_pool_of_a_changed_template_starts_anew(self):
        pooled = dict(shipped('shell'), pool=1, description='api pool v1')
        self.assertEqual(self.create_template('api-pooled', pooled), {'reply': []})
        self.wait_for(lambda: len(self.pooled_of('api-pooled')) == 1, 30, 'the new template\'s pool')
        (first,) = self.pooled_of('api-pooled')
        pooled['description'] = 'api pool v2'
        self.assertEqual(self.create_template('api-pooled', pooled), {'reply': []})
        self.wait_for(lambda: first not in S.sandbox_scopes(include_pool=True), 30,
                      'the pooled sandbox of the old template to go')
        self.wait_for(lambda: len(self.pooled_of('api-pooled')) == 1, 30, 'the pool refilled')
        self.assertEqual(self.remove_template('api-pooled'), {'reply': []})
        self.wait_for(lambda: not self.pooled_of('api-pooled'), 30, 'the pool of a removed template to go')


class TemplatesAuthorization(Base):
    """Creating and removing templates needs "manage" (root has it)."""

    @classmethod
    def setUpClass(cls):
        cls.polkit = polkitutil.Polkit(S)
        cls.polkit.install()

    @classmethod
    def tearDownClass(cls):
        cls.polkit.uninstall()

    def test_without_manage_nothing_changes(self):
        self.polkit.set_rules(grant_to_nobody('create', 'exec', 'delegate'))
        before = set(os.listdir(self.admin_dir()))
        res = [self.create_template('nobodys', shipped('shell'), uid=NOBODY),
               self.create_template('shell', dict(shipped('shell'), description='pwned'), uid=NOBODY),
               self.remove_template(harness.POOLED_TEMPLATE, uid=NOBODY)]
        for r in res:
            self.assertIn(r.get('error'), DENIED, r)
        self.assertEqual(set(os.listdir(self.admin_dir())), before)
        self.assertNotIn('nobodys', self.templates())
        self.assertIn(harness.POOLED_TEMPLATE, self.templates())

    def test_with_manage(self):
        self.polkit.set_rules(grant_to_nobody('manage'))
        self.assertEqual(self.create_template('nobodys', shipped('shell'), uid=NOBODY), {'reply': []})
        self.assertIn('nobodys', self.templates())
        self.assertEqual(self.remove_template('nobodys', uid=NOBODY), {'reply': []})
        self.assertNotIn('nobodys', self.templates())


if __name__ == '__main__':
    unittest.main(verbosity=2)
