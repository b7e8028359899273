#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 34's code contexts (docs/CONTEXTS.md) on a real systemd, bus and bwrap: stateful
Python (an IPython kernel through jupyter_client) and JavaScript (Node's vm) sessions with
rich results, as each face gives them: varlink, D-Bus, sandboxctl run-code, HTTP (SSE),
MCP and the Python client.

One sandbox of the python-data template and one Python context are shared by the tests
that only read and add state (a kernel takes seconds to start); the tests that lose or
restart a kernel make their own. Run through run.py, or directly:
python3 -m unittest -v test_contexts
"""

import base64
import json
import os
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

S = None           # the harness.System
_owned = False     # True when this module booted it (not run.py)
SHARED = {}        # the shared sandbox ('sid') and context ('cid')

TEMPLATE = 'python-data'
# The whole figure (not cropped to its drawing, the inline backend's default): 4 x 3
# inches at 50 dpi are 200 x 150 pixels.
FIGURE = ("%config InlineBackend.print_figure_kwargs = {'bbox_inches': None}\n"
          'import matplotlib.pyplot as plt\n'
          'fig = plt.figure(figsize=(4, 3), dpi=50)\n'
          'plt.plot([1, 3, 2])\n'
          'plt.show()\n')
FRAME = ('import pandas as pd\n'
         'pd.DataFrame({"city": ["Oslo", "Lima"], "temp": [4, 19]})\n')


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()


def tearDownModule():
    sid = SHARED.get('sid')
    if sid and S:
        S.sandboxctl('destroy', sid, timeout=120)
    harness.module_teardown(_owned)


def png_size(data):
    """(width, height) of a PNG, from its IHDR; fails on anything else."""
    assert data[:8] == b'\x89PNG\r\n\x1a\n', data[:16]
    return struct.unpack('>II', data[16:24])


class Base(harness.SandboxTestCase):
    TEMPLATE = TEMPLATE

    def call(self, method, params, more=False, timeout=180):
        return S.varlink_call(method, params, more=more, timeout=timeout)

    def ok_call(self, method, params, more=False, timeout=180):
        replies, err, eparams = self.call(method, params, more=more, timeout=timeout)
        self.assertIsNone(err, f'{method}: {err} {eparams}')
        return replies

    def shared(self):
        """The module's sandbox and Python context, made once."""
        if 'sid' not in SHARED:
            cp = self.ok(self.ctl('create', '--template', TEMPLATE))
            SHARED['sid'] = cp.stdout.strip()
            ctx = self.ok_call('CreateContext', {'id': SHARED['sid'], 'language': 'python'})[-1]['context']
            SHARED['cid'] = ctx['id']
        return SHARED['sid'], SHARED['cid']

    def run_code(self, sid, code, context=None, options=None, more=True, language=None):
        """RunCode over varlink: (events, result) or (events, error name, message)."""
        params = {'id': sid, 'code': code}
        if context:
            params['context'] = context
        if language:
            params['language'] = language
        if options:
            params['options'] = options
        replies, err, eparams = self.call('RunCode', params, more=more)
        if more:
            events = [r['event'] for r in replies if 'event' in r]
        else:
            events = replies[-1].get('events', []) if replies else []
        if err:
            return events, None, (err, eparams.get('message'))
        return events, replies[-1]['result'], None

    def text_of(self, events, kind='stdout'):
        return ''.join(e['text'] for e in events if e['type'] == kind)


class VarlinkContexts(Base):
    def test_state_across_cells(self):
        sid, cid = self.shared()
        events, result, err = self.run_code(sid, 'x = 41\nprint("set")', cid)
        self.assertIsNone(err)
        self.assertEqual(self.text_of(events), 'set\n')
        events, result, err = self.run_code(sid, 'x + 1', cid)
        self.assertIsNone(err)
        main = [e for e in events if e['type'] == 'result' and e['isMainResult']]
        self.assertEqual(main[0]['data']['text/plain'], '42', events)
        self.assertGreaterEqual(result['executionCount'], 2)
        self.assertEqual(result['status'], 'ok')
        self.assertEqual(result['context'], cid)

    def test_figure_png(self):
        sid, cid = self.shared()
        events, result, err = self.run_code(sid, FIGURE, cid)
        self.assertIsNone(err)
        images = [e for e in events if e['type'] == 'result' and 'image/png' in e['data']]
        self.assertEqual(len(images), 1, events)
        self.assertEqual(png_size(base64.b64decode(images[0]['data']['image/png'])), (200, 150))

    def test_dataframe(self):
        sid, cid = self.shared()
        events, result, err = self.run_code(sid, FRAME, cid, more=False)
        self.assertIsNone(err)
        data = [e for e in events if e['type'] == 'result'][0]['data']
        self.assertIn('<table', data['text/html'])
        self.assertIn('Oslo', data['text/html'])
        self.assertRegex(data['text/plain'], r'city\s+temp')

    def test_exception(self):
        sid, cid = self.shared()
        events, result, err = self.run_code(sid, 'def f():\n    raise ValueError("no good")\nf()', cid)
        self.assertIsNone(err)
        self.assertEqual(result['status'], 'error')
        self.assertEqual(result['error']['name'], 'ValueError')
        self.assertEqual(result['error']['value'], 'no good')
        self.assertTrue(any('raise ValueError' in line for line in result['error']['traceback']),
                        result['error']['traceback'])
        self.assertFalse(any('\x1b[' in line for line in result['error']['traceback']))

    def test_interrupt_keeps_state(self):
        sid, cid = self.shared()
        self.assertIsNone(self.run_code(sid, 'kept = "still here"', cid)[2])
        c = S.varlink(timeout=60)
        c.send({'method': 'io.sandboxd.Sandbox.RunCode',
                'parameters': {'id': sid, 'context': cid, 'code': 'while True: pass'}})
        time.sleep(1.5)
        self.ok_call('InterruptContext', {'id': sid, 'context': cid})
        m = c.receive()
        c.close()
        self.assertNotIn('error', m, m)
        result = m['parameters']['result']
        self.assertEqual(result['error']['name'], 'KeyboardInterrupt')
        self.assertTrue(result['interrupted'])
        events, result, err = self.run_code(sid, 'print(kept)', cid)
        self.assertEqual(self.text_of(events), 'still here\n')

    def test_timeout_interrupts(self):
        sid, cid = self.shared()
        t0 = time.monotonic()
        events, result, err = self.run_code(sid, 'import time\nwhile True: time.sleep(0.01)', cid,
                                            options={'Timeout': 1})
        self.assertIsNone(err)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertTrue(result['timedOut'])
        self.assertEqual(result['error']['name'], 'KeyboardInterrupt')

    def test_output_bounded(self):
        sid, cid = self.shared()
        events, result, err = self.run_code(sid, 'for i in range(2000): print("x" * 100)', cid,
                                            options={'OutputMax': 20000})
        self.assertIsNone(err)
        self.assertTrue(result['truncated'])
        self.assertLessEqual(sum(len(e['text']) for e in events), 20000)
        self.assertGreater(result['outputBytes'], 200000)

    def test_list_and_default(self):
        sid, cid = self.shared()
        # No context named: the sandbox's default Python one, made now, apart from cid.
        events, result, err = self.run_code(sid, 'x = "default"')
        self.assertIsNone(err)
        default = result['context']
        self.assertNotEqual(default, cid)
        contexts = self.ok_call('ListContexts', {'id': sid})[-1]['contexts']
        byid = {c['id']: c for c in contexts}
        self.assertTrue(byid[default]['default'])
        self.assertEqual(byid[cid]['language'], 'python')
        # Independent: cid's x is still its own.
        events, result, err = self.run_code(sid, 'print(x)', cid)
        self.assertNotEqual(self.text_of(events), 'default\n')
        self.ok_call('RemoveContext', {'id': sid, 'context': default})
        events, result, err = self.run_code(sid, '1', default)
        self.assertEqual(err[0], 'io.sandboxd.Sandbox.NoSuchContext')

    def test_javascript(self):
        sid, cid = self.shared()
        ctx = self.ok_call('CreateContext', {'id': sid, 'language': 'javascript'})[-1]['context']
        self.addCleanup(self.call, 'RemoveContext', {'id': sid, 'context': ctx['id']})
        self.assertEqual(ctx['state'], 'idle')
        events, result, err = self.run_code(sid, 'let n = 20; console.log("hi")', ctx['id'])
        self.assertEqual(self.text_of(events), 'hi\n')
        events, result, err = self.run_code(sid, '({n: n + 1})', ctx['id'])
        main = [e for e in events if e['type'] == 'result'][0]['data']
        self.assertEqual(main['application/json'], {'n': 21})
        events, result, err = self.run_code(sid, 'null.x', ctx['id'])
        self.assertEqual(result['error']['name'], 'TypeError')
        c = S.varlink(timeout=60)
        c.send({'method': 'io.sandboxd.Sandbox.RunCode',
                'parameters': {'id': sid, 'context': ctx['id'], 'code': 'while (true) {}'}})
        time.sleep(1)
        self.ok_call('InterruptContext', {'id': sid, 'context': ctx['id']})
        m = c.receive()
        c.close()
        self.assertTrue(m['parameters']['result']['interrupted'], m)
        events, result, err = self.run_code(sid, 'n', ctx['id'])
        self.assertEqual([e for e in events if e['type'] == 'result'][0]['data']['text/plain'], '20')


class LostContexts(Base):
    def test_oom_lost_then_restart(self):
        sid = self.create('--memory', '300M')
        ctx = self.ok_call('CreateContext', {'id': sid})[-1]['context']
        cid = ctx['id']
        self.assertIsNone(self.run_code(sid, 'y = 7', cid)[2])
        events, result, err = self.run_code(sid, 'b = bytearray(1024 ** 3)\nb[::4096] = b"x" * (1024 ** 3 // 4096)',
                                            cid)
        self.assertIsNotNone(err, result)
        self.assertEqual(err[0], 'io.sandboxd.Sandbox.ContextLost')
        self.assertIn('memory', err[1])
        contexts = {c['id']: c for c in self.ok_call('ListContexts', {'id': sid})[-1]['contexts']}
        self.assertEqual(contexts[cid]['state'], 'lost')
        self.assertIn('memory', contexts[cid]['lostReason'])
        events, result, err = self.run_code(sid, '1', cid)
        self.assertEqual(err[0], 'io.sandboxd.Sandbox.ContextLost')
        ctx = self.ok_call('RestartContext', {'id': sid, 'context': cid})[-1]['context']
        self.assertEqual(ctx['state'], 'idle')
        events, result, err = self.run_code(sid, "'y' in globals()", cid)
        self.assertEqual([e for e in events if e['type'] == 'result'][0]['data']['text/plain'], 'False')


if __name__ == '__main__':
    unittest.main()
