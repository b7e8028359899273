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
import http.client
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

SOURCE = os.environ.get('SANDBOXD_SOURCE_DIR', os.path.join(HERE, '..', '..'))
BUILD = os.environ.get('SANDBOXD_BUILD_DIR', os.path.join(SOURCE, 'build'))
sys.path.insert(0, os.path.join(SOURCE, 'python'))
import sandboxd  # noqa: E402

S = None           # the harness.System
_owned = False     # True when this module booted it (not run.py)
SHARED = {}        # the shared sandbox ('sid') and context ('cid')
BRIDGE = {}        # sandboxd-http of this module's: 'url', 'token', 'proc'

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


# Where Hibernate in memory (Storage=tmpfs) keeps its archive.
CONFIG = '[Snapshots]\nDirectory=/run/sandboxd-test-state/snapshots-contexts\n'


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()
    S.configure_daemon(CONFIG)


def tearDownModule():
    sid = SHARED.get('sid')
    if sid and S:
        S.sandboxctl('destroy', sid, timeout=120)
    if BRIDGE.get('proc'):
        os.killpg(BRIDGE['proc'].pid, signal.SIGTERM)
        BRIDGE['proc'].wait(timeout=30)
    if S:
        S.configure_daemon(None)
    harness.module_teardown(_owned)


def bridge():
    """sandboxd-http from the build directory, in the system beside sandboxd, calling its
    varlink socket as root, on a loopback port, with one token: (url, token)."""
    if 'url' not in BRIDGE:
        binary = os.path.join(BUILD, 'src', 'sandboxd-http', 'sandboxd-http')
        tokens = tempfile.mkdtemp(prefix='http-tokens-', dir=S.workdir)
        token = subprocess.run([binary, 'token', 'add', 'contexts', f'--tokens-dir={tokens}'], capture_output=True,
                               text=True, check=True, timeout=30).stdout.strip()
        with socket.socket() as so:
            so.bind(('127.0.0.1', 0))
            port = so.getsockname()[1]
        BRIDGE['proc'] = subprocess.Popen(S.wrap([binary, f'--listen=127.0.0.1:{port}', f'--tokens-dir={tokens}',
                                                  f'--varlink={harness.VARLINK_SOCKET}']),
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True)
        url = f'http://127.0.0.1:{port}'
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + '/healthz', timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        BRIDGE.update(url=url, token=token, port=port)
    return BRIDGE['url'], BRIDGE['token']


def http_request(method, path, body=None, sse=False, timeout=180):
    """(status, parsed JSON body, or [(event, data)] of an event stream)."""
    bridge()
    c = http.client.HTTPConnection('127.0.0.1', BRIDGE['port'], timeout=timeout)
    headers = {'Authorization': f'Bearer {BRIDGE["token"]}', 'Content-Type': 'application/json',
               'Accept': 'text/event-stream' if sse else 'application/json'}
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        r = c.getresponse()
        data = r.read()
    finally:
        c.close()
    if sse and r.status == 200:
        events = []
        for block in data.decode().split('\n\n'):
            lines = dict(line.split(': ', 1) for line in block.splitlines() if ': ' in line)
            if 'event' in lines:
                events.append((lines['event'], json.loads(lines['data'])))
        return r.status, events
    return r.status, json.loads(data) if data else None


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
            # What the template started with the sandbox, before anyone asked.
            SHARED['prestarted'] = self.ok_call('ListContexts', {'id': SHARED['sid']})[-1]['contexts']
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
        self.assertEqual(result['status'], 'ok', result)
        images = [e for e in events if e['type'] == 'result' and 'image/png' in e['data']]
        self.assertEqual(len(images), 1, events)
        self.assertEqual(png_size(base64.b64decode(images[0]['data']['image/png'])), (200, 150))

    def test_cell_after_error_runs(self):
        """A cell runs whatever the cell before it raised. Jupyter's stop_on_error made
        ipykernel abort ("aborted", no output at all) a request that reached it before its
        next loop turn after an error: under load, test_figure_png (right after
        test_exception) once came back with no events. This kernel's abort window is 60 s
        (stop_on_error_timeout), so a cell after an error is always in it."""
        sid, cid = self.shared()
        ipy = '/tmp/ipython-abort-window'
        config = f'{ipy}/profile_default/ipython_kernel_config.py'
        self.assertIsNone(self.run_code(sid, f'import os\nos.makedirs("{ipy}/profile_default", exist_ok=True)\n'
                                             f'open("{config}", "w").write("c.Kernel.stop_on_error_timeout = 60.0")',
                                        cid)[2])
        ctx = self.ok_call('CreateContext', {'id': sid, 'language': 'python',
                                             'options': {'Environment': [f'IPYTHONDIR={ipy}']}})[-1]['context']
        self.addCleanup(self.call, 'RemoveContext', {'id': sid, 'context': ctx['id']})
        # The window is there (else this test could not fail).
        events, result, err = self.run_code(sid, 'print(get_ipython().kernel.stop_on_error_timeout)', ctx['id'])
        self.assertEqual(self.text_of(events), '60.0\n', (events, result, err))
        events, result, err = self.run_code(sid, 'raise ValueError("first")', ctx['id'])
        self.assertEqual(result['status'], 'error', result)
        events, result, err = self.run_code(sid, FIGURE, ctx['id'])
        self.assertIsNone(err)
        self.assertEqual(result['status'], 'ok', result)
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

    def test_pause_resume_keeps_state(self):
        """Pause freezes the kernel with the sandbox; after Resume its variables are there."""
        sid, cid = self.shared()
        self.assertIsNone(self.run_code(sid, 'frozen = [1, 2, 3]', cid)[2])
        self.ok(self.ctl('pause', sid))
        self.ok(self.ctl('resume', sid))
        contexts = {c['id']: c for c in self.ok_call('ListContexts', {'id': sid})[-1]['contexts']}
        self.assertEqual(contexts[cid]['state'], 'idle')
        events, result, err = self.run_code(sid, 'sum(frozen)', cid)
        self.assertEqual([e for e in events if e['type'] == 'result'][0]['data']['text/plain'], '6')

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

    def test_prestarted(self):
        """python-data's "contexts": its default Python context starts with the sandbox."""
        sid, cid = self.shared()
        self.assertEqual([(c['language'], c['default']) for c in SHARED['prestarted']], [('python', True)])
        self.assertIn(SHARED['prestarted'][0]['state'], ('starting', 'idle'))

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


def image_of(data):
    """The PNG in a result's representations (base64, as Jupyter gives it), decoded."""
    return base64.b64decode(data['image/png'])


class Faces(Base):
    """The same cells through every face but varlink's own (above)."""

    def test_dbus(self):
        sid, cid = self.shared()
        path = f'/io/sandboxd/Sandbox1/sandbox/{sid}'
        cp, data, err = S.bus_call('io.sandboxd.Sandbox1', path, 'io.sandboxd.Sandbox1.Sandbox', 'RunCode',
                                   'ssa{sv}', cid, FIGURE + 'z = 5\nz * 2', '1', 'Timeout', 't', '60', timeout=120)
        self.assertIsNone(err, cp.stderr[-2000:])
        events, result = data
        images = [e for e in events if e['Type']['data'] == 'result' and 'image/png' in e['Data']['data']]
        self.assertEqual(png_size(image_of(images[0]['Data']['data'])), (200, 150))
        main = [e for e in events if e.get('IsMainResult', {}).get('data')]
        self.assertEqual(main[0]['Data']['data']['text/plain'], '10')
        self.assertEqual(result['Context']['data'], cid)
        self.assertEqual(result['Status']['data'], 'ok')
        # The contexts, and one that is not there.
        cp, data, err = S.bus_call('io.sandboxd.Sandbox1', path, 'io.sandboxd.Sandbox1.Sandbox', 'ListContexts')
        self.assertIn(cid, [c['Id']['data'] for c in data[0]])
        cp, data, err = S.bus_call('io.sandboxd.Sandbox1', path, 'io.sandboxd.Sandbox1.Sandbox', 'InterruptContext',
                                   's', 'feedfeedfeed')
        self.assertEqual(err, 'io.sandboxd.Sandbox1.NoSuchContext')

    def test_sandboxctl(self):
        sid, cid = self.shared()
        cp = self.ok(self.ctl('run-code', '--json', '--context', cid, sid, FIGURE))
        out = json.loads(cp.stdout)
        images = [e for e in out['events'] if e['type'] == 'result' and 'image/png' in e['data']]
        self.assertEqual(png_size(image_of(images[0]['data'])), (200, 150))
        self.assertEqual(out['context'], cid)
        # As text: what it printed, its value, the traceback of what it raised (exit 1).
        cp = self.ok(self.ctl('run-code', '--context', cid, sid, 'print("hello")\n6 * 7'))
        self.assertEqual(cp.stdout, 'hello\n42\n')
        cp = self.ctl('run-code', '--context', cid, sid, 'raise KeyError("nope")')
        self.assertEqual(cp.returncode, 1, cp.stderr)
        self.assertIn("KeyError: 'nope'", cp.stderr)
        cp = self.ok(self.ctl('run-code', sid, '-', input='import sys\nprint(sys.version_info[0])'))
        self.assertEqual(cp.stdout, '3\n')

    def test_http(self):
        status, session = http_request('POST', '/api/v1/sessions', {'template': TEMPLATE})
        self.assertEqual(status, 201, session)
        sid = session['id']
        self.addCleanup(http_request, 'DELETE', f'/api/v1/sessions/{sid}')
        status, ctx = http_request('POST', f'/api/v1/sessions/{sid}/contexts', {'language': 'python'})
        self.assertEqual(status, 201, ctx)
        self.assertEqual(ctx['state'], 'idle')
        base = f'/api/v1/sessions/{sid}/contexts/{ctx["id"]}'
        status, events = http_request('POST', base + '/run', {'code': FIGURE + 'print("drawn")'}, sse=True)
        self.assertEqual(status, 200)
        names = [e[0] for e in events]
        self.assertEqual(names[-1], 'end', names)
        cells = [e[1] for e in events if e[0] == 'cell']
        png = [c for c in cells if c['type'] == 'result' and 'image/png' in c['data']]
        self.assertEqual(png_size(image_of(png[0]['data'])), (200, 150))
        self.assertIn({'type': 'stdout', 'text': 'drawn\n'}, cells)
        status, body = http_request('POST', base + '/run', {'code': FRAME})
        self.assertEqual(status, 200, body)
        data = [e for e in body['events'] if e['type'] == 'result'][0]['data']
        self.assertIn('<table', data['text/html'])
        self.assertEqual(body['result']['status'], 'ok')
        # Errors: a context that is not there, as the stream's error event; as a status
        # without the stream.
        status, events = http_request('POST', f'/api/v1/sessions/{sid}/contexts/feedfeedfeed/run', {'code': '1'},
                                      sse=True)
        self.assertEqual(events, [('error', {'code': 'NoSuchContext',
                                             'message': f'No context feedfeedfeed in sandbox {sid}.'})])
        status, body = http_request('POST', f'/api/v1/sessions/{sid}/contexts/feedfeedfeed/run', {'code': '1'})
        self.assertEqual(status, 404)
        self.assertEqual(body['error']['code'], 'NoSuchContext')
        status, listed = http_request('GET', f'/api/v1/sessions/{sid}/contexts')
        # Oldest first: the default one python-data starts with the session, then ours.
        self.assertEqual([(c['default'], c['language']) for c in listed], [(True, 'python'), (False, 'python')])
        self.assertEqual(listed[1]['id'], ctx['id'])
        self.assertEqual(http_request('DELETE', base)[0], 204)

    def test_python_client(self):
        sid, cid = self.shared()
        t = sandboxd.VarlinkTransport(S.path(harness.VARLINK_SOCKET))
        self.addCleanup(t.close)
        sbx = sandboxd.Sandbox.connect(sid, transport=t)
        seen = []
        ex = sbx.run_code(FIGURE + 'print("x")', context=cid, on_stdout=seen.append)
        self.assertIsNone(ex.error)
        self.assertEqual(png_size(base64.b64decode(ex.results[0].png)), (200, 150))
        self.assertIn('png', ex.results[0].formats())
        self.assertEqual(ex.logs.stdout, ['x\n'])
        self.assertEqual([str(m) for m in seen], ['x\n'])
        ex = sbx.run_code(FRAME, context=cid)
        self.assertIn('<table', ex.results[0].html)
        self.assertIn('Oslo', ex.results[0].text)
        self.assertTrue(ex.results[0].is_main_result)
        ex = sbx.run_code('1 / 0', context=cid)
        self.assertEqual((ex.error.name, ex.error.value), ('ZeroDivisionError', 'division by zero'))
        self.assertIn('1 / 0', ex.error.traceback)
        # The default context (started with the sandbox, or again after test_list_and_default
        # removed it), then a JavaScript one, as E2B's create_code_context.
        self.assertEqual(sbx.run_code('a = 3').text, None)
        self.assertEqual(sbx.run_code('a * 2').text, '6')
        js = sbx.create_code_context('javascript')
        self.addCleanup(sbx.remove_code_context, js)
        self.assertEqual(sbx.run_code('[1, 2].map(x => x * 2)', context=js).results[0].json, [2, 4])
        self.assertIn(js.id, [c.id for c in sbx.list_code_contexts()])

    def test_python_client_over_http(self):
        url, token = bridge()
        t = sandboxd.HttpTransport(url, token)
        sbx = sandboxd.Sandbox.create(TEMPLATE, transport=t)
        self.addCleanup(sbx.kill)
        streamed = []
        ex = sbx.run_code(FIGURE + 'k = 1', on_result=streamed.append)
        self.assertEqual(png_size(base64.b64decode(ex.results[0].png)), (200, 150))
        self.assertEqual(len(streamed), 1)
        self.assertEqual(sbx.run_code('k + 1').text, '2')
        ctx = sbx.create_code_context()
        with self.assertRaises(sandboxd.NoSuchContext):
            sbx.run_code('1', context='feedfeedfeed')
        self.assertEqual(sbx.run_code('k', context=ctx).error.name, 'NameError')

    def test_mcp_image_content(self):
        sid, cid = self.shared()
        sdk = harness.npm_ci(S.paths.build, os.path.join(HERE, '..', 'mcp'), 'mcp-sdk', ('mcp-client.mjs',))
        mcp = os.environ.get('SANDBOXD_MCP_BIN') or os.path.join(BUILD, 'src', 'sandboxd-mcp', 'sandboxd-mcp')
        steps = [{'op': 'call', 'name': 'run_code',
                  'arguments': {'language': 'python', 'sandbox_id': sid, 'context_id': cid,
                                'code': FIGURE + 'print("plotted")\n21 * 2'}},
                 {'op': 'call', 'name': 'run_code',
                  'arguments': {'language': 'python', 'sandbox_id': sid, 'code': 'undefined_name'}}]
        cp = S.run([shutil.which('node'), os.path.join(sdk, 'mcp-client.mjs'), mcp], input=json.dumps(steps),
                   timeout=300)
        self.assertEqual(cp.returncode, 0, cp.stdout[-3000:] + cp.stderr[-3000:])
        out = json.loads(cp.stdout)
        calls = out['steps']
        first = calls[0]['result']
        self.assertFalse(first.get('isError'), first)
        images = [c for c in first['content'] if c['type'] == 'image']
        self.assertEqual(len(images), 1, first['content'])
        self.assertEqual(images[0]['mimeType'], 'image/png')
        self.assertEqual(png_size(base64.b64decode(images[0]['data'])), (200, 150))
        structured = first['structuredContent']
        self.assertEqual(structured['context_id'], cid)
        self.assertEqual(structured['stdout'], 'plotted\n')
        self.assertIn({'text/plain': '42', 'is_main_result': True}, structured['results'])
        second = calls[1]['result']['structuredContent']
        self.assertEqual(second['error']['name'], 'NameError')
        self.assertNotEqual(second['context_id'], cid)


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

    def assert_lost_then_fresh(self, sid, cid, reason, variable):
        """cid is listed lost for reason, RunCode on it answers ContextLost saying so, and
        RestartContext gives a fresh kernel under the same id (variable gone)."""
        contexts = {c['id']: c for c in self.ok_call('ListContexts', {'id': sid})[-1]['contexts']}
        self.assertIn(cid, contexts)
        self.assertEqual(contexts[cid]['state'], 'lost')
        self.assertIn(reason, contexts[cid]['lostReason'])
        self.assertEqual(contexts[cid]['workingDirectory'], '/tmp')
        events, result, err = self.run_code(sid, '1', cid)
        self.assertIsNotNone(err, result)
        self.assertEqual(err[0], 'io.sandboxd.Sandbox.ContextLost')
        self.assertIn(reason, err[1])
        self.assertIn('RestartContext', err[1])
        ctx = self.ok_call('RestartContext', {'id': sid, 'context': cid})[-1]['context']
        self.assertEqual((ctx['id'], ctx['state']), (cid, 'idle'))
        events, result, err = self.run_code(sid, f"'{variable}' in globals()", cid)
        self.assertEqual([e for e in events if e['type'] == 'result'][0]['data']['text/plain'], 'False')

    def test_hibernate_wake_then_sandboxd_restart(self):
        """A context's kernel does not outlive a hibernation (in memory: an archive; on
        disk: the processes stop) nor a restart of sandboxd (its driver's pipes were the
        old sandboxd's): afterwards the id is listed lost, with why, never NoSuchContext
        nor a hang, and RestartContext starts it afresh."""
        for storage in ('tmpfs', 'disk'):
            with self.subTest(storage=storage):
                sid = self.create(f'--storage={storage}')
                cid = self.ok_call('CreateContext', {'id': sid, 'options': {'WorkingDirectory': '/tmp'}})[-1][
                    'context']['id']
                self.assertIsNone(self.run_code(sid, 'h = 1', cid)[2])
                cp = self.ok(self.ctl('hibernate', sid))
                self.assertEqual(bool(cp.stdout.strip()), storage == 'tmpfs')  # an archive in memory only
                self.assertEqual(self.ok(self.ctl('wake', sid)).stdout.strip(), sid)
                self.assert_lost_then_fresh(sid, cid, 'hibernated', 'h')

        self.assertIsNone(self.run_code(sid, 'r = 1', cid)[2])
        process = {c['id']: c for c in self.ok_call('ListContexts', {'id': sid})[-1]['contexts']}[cid]['process']
        self.ok(S.systemctl('restart', 'sandboxd.service', timeout=90))
        # The old driver read the end of its stdin (the old sandboxd's pipe): it ended, its
        # kernel with it; nothing is left running for the lost context.
        deadline = time.monotonic() + 30
        while any(p['process'] == process and p['state'] == 'running'
                  for p in self.ok_call('ListProcesses', {'id': sid})[-1]['processes']):
            self.assertLess(time.monotonic(), deadline, 'the old context driver still runs')
            time.sleep(0.2)
        self.assert_lost_then_fresh(sid, cid, 'sandboxd restarted', 'r')
        # The module's shared context was lost too: fresh again for the tests after this.
        if 'cid' in SHARED:
            self.ok_call('RestartContext', {'id': SHARED['sid'], 'context': SHARED['cid']})


if __name__ == '__main__':
    unittest.main()
