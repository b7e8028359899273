#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Drives headless Chromium (Debian's chromium) through the DevTools protocol, on Debian's
python3-websockets, to use sandboxd-http's console page as a person would: enter the
token, open a sandbox's terminal, type into it, read the screen back. Run by
/usr/bin/python3 (which has websockets); prints one JSON document.

    /usr/bin/python3 cdpconsole.py < plan.json
plan: {"url": the console's URL, "token": T, "sandbox": ID, "workdir": a directory}
"""

import asyncio
import glob
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

import websockets


class Page:
    def __init__(self, ws):
        self.ws, self.n, self.events = ws, 0, []

    async def call(self, method, **params):
        self.n += 1
        n = self.n
        await self.ws.send(json.dumps({'id': n, 'method': method, 'params': params}))
        while True:
            m = json.loads(await self.ws.recv())
            if m.get('id') == n:
                if 'error' in m:
                    raise RuntimeError(f'{method}: {m["error"]}')
                return m.get('result', {})
            self.events.append(m)

    async def js(self, expression):
        r = await self.call('Runtime.evaluate', expression=expression, returnByValue=True, awaitPromise=True)
        if 'exceptionDetails' in r:
            raise RuntimeError(f'{expression}: {r["exceptionDetails"]}')
        return r['result'].get('value')

    async def wait_for(self, expression, timeout=30, what=None):
        deadline = time.monotonic() + timeout
        while True:
            v = await self.js(expression)
            if v:
                return v
            if time.monotonic() > deadline:
                raise TimeoutError(f'{what or expression} within {timeout} s')
            await asyncio.sleep(0.1)

    async def type(self, text):
        await self.call('Input.insertText', text=text)

    async def enter(self):
        for kind in ('keyDown', 'keyUp'):
            await self.call('Input.dispatchKeyEvent', type=kind, key='Enter', code='Enter',
                            windowsVirtualKeyCode=13, nativeVirtualKeyCode=13,
                            **({'text': '\r'} if kind == 'keyDown' else {}))


SCREEN = "Array.from(document.querySelectorAll('.xterm-rows > div')).map(d => d.textContent).join('\\n')"


async def drive(plan, port):
    with urllib.request.urlopen(f'http://127.0.0.1:{port}/json/list', timeout=10) as r:
        targets = [t for t in json.load(r) if t['type'] == 'page']
    out = {}
    async with websockets.connect(targets[0]['webSocketDebuggerUrl'], max_size=None) as ws:
        p = Page(ws)
        await p.call('Page.enable')
        await p.call('Page.navigate', url=plan['url'])
        await p.wait_for("document.readyState === 'complete' && !!document.querySelector('#token')",
                         what='the page')
        # The token goes into the form, as a person pastes it; it is not in any URL.
        await p.js(f"document.querySelector('#token').value = {json.dumps(plan['token'])}")
        await p.js("document.querySelector('#login button').click()")
        sid = plan['sandbox']
        await p.wait_for(f"!!document.querySelector('tr[data-id=\"{sid}\"]')", what='the sandbox in the list')
        out['row'] = await p.js(f"document.querySelector('tr[data-id=\"{sid}\"]').innerText")
        out['url'] = await p.js('location.href')
        await p.js(f"document.querySelector('button[data-terminal=\"{sid}\"]').click()")
        await p.wait_for(f"/[$#] *$/m.test({SCREEN})", what='a prompt')
        await p.js("document.querySelector('.xterm-helper-textarea').focus()")
        await p.type('echo $((6*7))')
        await p.enter()
        await p.wait_for(f"{SCREEN}.split('\\n').some(l => l.trim() === '42')", what='42 on the screen')
        # A resize from the page, seen inside by stty.
        await p.js("document.querySelector('#rows').value = 33; document.querySelector('#cols').value = 91;"
                   "document.querySelector('#resize').click()")
        await p.js("document.querySelector('.xterm-helper-textarea').focus()")
        await p.type('stty size')
        await p.enter()
        await p.wait_for(f"{SCREEN}.split('\\n').some(l => l.trim() === '33 91')", what='33 91 from stty size')
        out['screen'] = await p.js(SCREEN)
        out['status'] = await p.js("document.querySelector('#status').textContent")
        out['storage_has_token'] = await p.js(f"sessionStorage.getItem('sandboxd-token') === {json.dumps(plan['token'])}")
    return out


def main(plan):
    profile = os.path.join(plan['workdir'], 'chromium-profile')
    shutil.rmtree(profile, ignore_errors=True)
    os.makedirs(profile)
    chromium = subprocess.Popen(
        ['chromium', '--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
         '--no-first-run', '--no-default-browser-check', '--remote-debugging-port=0',
         f'--user-data-dir={profile}', 'about:blank'],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(plan['workdir'], 'chromium.log'), 'w'))
    try:
        port_file = os.path.join(profile, 'DevToolsActivePort')
        deadline = time.monotonic() + 60
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if chromium.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError('chromium did not start: ' +
                                   open(os.path.join(plan['workdir'], 'chromium.log')).read()[-2000:])
            time.sleep(0.05)
        port = int(open(port_file).read().split()[0])
        return asyncio.run(asyncio.wait_for(drive(plan, port), 120))
    finally:
        chromium.terminate()
        try:
            chromium.wait(timeout=10)
        except subprocess.TimeoutExpired:
            chromium.kill()
            chromium.wait()
        shutil.rmtree(profile, ignore_errors=True)
        for core in glob.glob(os.path.join(plan['workdir'], 'core*')):
            os.unlink(core)


if __name__ == '__main__':
    try:
        print(json.dumps(main(json.load(sys.stdin))))
    except Exception as e:  # noqa: BLE001 - the test shows it
        print(json.dumps({'error': f'{type(e).__name__}: {e}'}))
