# SPDX-License-Identifier: LGPL-2.1-or-later
"""The warm pool: a template's "pool": N sandboxes are kept started, invisible on the bus,
and CreateSandbox with the template's defaults hands one out - an acquire, not a boot."""

import json
import time
import unittest

import harness
from harness import POOLED_TEMPLATE

S = None


def setUpModule():
    global S
    S = harness.acquire()


def units():
    return set(S.sandbox_scopes(include_pool=True))


def listed():
    cp = S.sandboxctl('list', '--json')
    assert cp.returncode == 0, cp.stderr
    return {s['id'] for s in json.loads(cp.stdout)}


def from_pool(sid):
    """The sandbox's FromPool property (a warm start), over D-Bus and over varlink."""
    cp = S.busctl('get-property', harness.BUS_NAME, f'{harness.MANAGER_PATH}/sandbox/{sid}', harness.SANDBOX_IFACE,
                  'FromPool')
    assert cp.returncode == 0, cp.stderr
    replies, error, params = S.varlink_call('GetSandbox', {'id': sid})
    assert error is None, (error, params)
    assert cp.stdout.strip() == f'b {str(replies[0]["sandbox"]["fromPool"]).lower()}', (cp.stdout, replies)
    return replies[0]['sandbox']['fromPool']


def wait_for(pred, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


class Pool(unittest.TestCase):
    def pooled_units(self):
        """Units of sandboxes nobody sees: started for the pool."""
        return {u for u in units() if u[len('sandbox-'):-len('.scope')] not in listed()}

    def test_pool_is_kept_hidden_and_handed_out(self):
        # The daemon keeps one pooled sandbox of the template, not listed and not on the bus.
        self.assertTrue(wait_for(lambda: len(self.pooled_units()) == 1), f'pool not filled: {units()}')
        (pooled,) = self.pooled_units()
        pooled_id = pooled[len('sandbox-'):-len('.scope')]
        cp = S.sandboxctl('status', pooled_id)
        self.assertNotEqual(cp.returncode, 0, 'a pooled sandbox must not be visible on the bus')

        # CreateSandbox with the template's defaults gets exactly that one...
        start = time.monotonic()
        cp = S.sandboxctl('create', '--template', POOLED_TEMPLATE)
        took = time.monotonic() - start
        self.assertEqual(cp.returncode, 0, cp.stderr)
        sid = cp.stdout.strip()
        self.assertEqual(sid, pooled_id, 'the sandbox should come from the pool')
        self.assertIn(sid, listed())
        # ...now owned by the caller, serving execs...
        cp = S.sandboxctl('status', '--json', sid)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        self.assertEqual(json.loads(cp.stdout)['owner'], 0)
        self.assertTrue(from_pool(sid), 'a sandbox the pool handed out is a warm start')
        cp = S.sandboxctl('exec', sid, '--', 'sh', '-c', 'echo from-the-pool')
        self.assertEqual(cp.stdout, 'from-the-pool\n')
        # ...and the pool is filled again behind it.
        self.assertTrue(wait_for(lambda: len(self.pooled_units()) == 1), 'pool not refilled')
        self.assertNotIn(f'sandbox-{sid}.scope', self.pooled_units())
        self.assertLess(took, 5.0)
        S.sandboxctl('destroy', sid)

    def test_explicit_limits_boot_a_new_sandbox(self):
        self.assertTrue(wait_for(lambda: len(self.pooled_units()) == 1))
        (pooled,) = self.pooled_units()
        cp = S.sandboxctl('create', '--template', POOLED_TEMPLATE, '--memory', '96M')
        self.assertEqual(cp.returncode, 0, cp.stderr)
        sid = cp.stdout.strip()
        self.assertNotEqual(f'sandbox-{sid}.scope', pooled, 'limits of its own: not from the pool')
        self.assertEqual(S.show(f'sandbox-{sid}.scope', 'MemoryMax')['MemoryMax'], str(96 << 20))
        self.assertFalse(from_pool(sid), 'a sandbox started for its CreateSandbox is a cold start')
        self.assertIn(pooled, self.pooled_units(), 'the pooled one stays in the pool')
        S.sandboxctl('destroy', sid)

    def test_ephemeral_run_from_the_pool(self):
        self.assertTrue(wait_for(lambda: len(self.pooled_units()) == 1))
        before = units()
        cp = S.sandboxctl('run', '--template', POOLED_TEMPLATE, '--', 'sh', '-c', 'exit 3')
        self.assertEqual(cp.returncode, 3, cp.stderr)
        self.assertTrue(wait_for(lambda: len(self.pooled_units()) == 1))
        self.assertTrue(wait_for(lambda: not (set(listed()) & {u[8:-6] for u in before - self.pooled_units()})))


if __name__ == '__main__':
    unittest.main()
