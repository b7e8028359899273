#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A WebSocket client of sandboxd-http's terminal route for the tests, on Debian's
python3-websockets (10.x: its asyncio client), run by /usr/bin/python3 (which has it).

    /usr/bin/python3 wsclient.py < plan.json     # prints one JSON document

plan: {"url": ws://…, "token": T, "auth": "protocol" | "header" | "none",
       "steps": [{"send": text} | {"send_b64": bytes} | {"control": {...}} |
                 {"expect": regex (on the output decoded latin-1), "timeout": s} |
                 {"sleep": s} | {"rtt": n} | {"count_zeros": n, "timeout": s} |
                 {"wait_close": s} | {"drop": true}]}
result: {"status": HTTP status of a refused handshake, or 101; "output": base64 of all
         binary messages; "texts": the text messages; "close": [code, reason] or null;
         "rtt_ms": [...]; "error": text}
"""

import asyncio
import base64
import json
import re
import sys
import time

import websockets


async def main(plan):
    out = {'status': None, 'output': b'', 'texts': [], 'close': None, 'rtt_ms': [], 'protocol': None}
    headers, protocols = {}, None
    if plan.get('auth') == 'header':
        headers['Authorization'] = f'Bearer {plan["token"]}'
    elif plan.get('auth', 'protocol') == 'protocol':
        protocols = ['sandboxd.terminal.v1', f'bearer.{plan["token"]}']
    try:
        ws = await websockets.connect(plan['url'], subprotocols=protocols, extra_headers=headers,
                                      max_size=None, max_queue=plan.get('max_queue', 32), open_timeout=30,
                                      ping_interval=None)
    except websockets.exceptions.InvalidStatusCode as e:
        out['status'] = e.status_code
        out['output'] = ''
        return out
    out['status'] = 101
    out['protocol'] = ws.subprotocol
    buf = bytearray()

    async def recv_one(timeout):
        m = await asyncio.wait_for(ws.recv(), timeout)
        if isinstance(m, bytes):
            buf.extend(m)
        else:
            out['texts'].append(m)

    try:
        for step in plan['steps']:
            if 'send' in step:
                await ws.send(step['send'].encode())
            elif 'send_b64' in step:
                await ws.send(base64.b64decode(step['send_b64']))
            elif 'control' in step:
                await ws.send(json.dumps(step['control']))
            elif 'sleep' in step:
                await asyncio.sleep(step['sleep'])
            elif 'expect' in step:
                deadline = time.monotonic() + step.get('timeout', 20)
                start = len(buf) if step.get('new') else 0
                while not re.search(step['expect'].encode('latin-1'), bytes(buf[start:])):
                    await recv_one(max(0.01, deadline - time.monotonic()))
            elif 'count_zeros' in step:
                deadline = time.monotonic() + step.get('timeout', 120)
                zeros, counted = 0, len(buf)
                zeros = buf.count(0)
                while zeros < step['count_zeros']:
                    await recv_one(max(0.01, deadline - time.monotonic()))
                    zeros += buf.count(0, counted)
                    counted = len(buf)
                out['zeros_seconds'] = time.monotonic() - deadline + step.get('timeout', 120)
            elif 'rtt' in step:
                # One keystroke at a time: its echo back from the terminal.
                await asyncio.sleep(0.5)        # what the shell prints before comes first
                while True:
                    try:
                        await recv_one(0.2)
                    except asyncio.TimeoutError:
                        break
                for i in range(step['rtt']):
                    key = b'qwxzjkvQWX'[i % 10:i % 10 + 1]
                    before = len(buf)
                    t0 = time.perf_counter()
                    await ws.send(key)
                    while key not in bytes(buf[before:]):
                        await recv_one(10)
                    out['rtt_ms'].append((time.perf_counter() - t0) * 1000)
            elif 'wait_close' in step:
                deadline = time.monotonic() + step['wait_close']
                try:
                    while True:
                        await recv_one(max(0.01, deadline - time.monotonic()))
                except websockets.exceptions.ConnectionClosed as e:
                    out['close'] = [e.code, e.reason]
            elif 'drop' in step:
                # Gone without a close frame, as a browser tab that is killed.
                ws.transport.abort()
                break
    except Exception as e:  # noqa: BLE001 - reported, with what came
        out['error'] = f'{type(e).__name__}: {e}'
    finally:
        if out['close'] is None and not ws.closed:
            await ws.close()
    out['output'] = base64.b64encode(bytes(buf)).decode()
    return out


if __name__ == '__main__':
    print(json.dumps(asyncio.run(main(json.load(sys.stdin)))))
