#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Makes a batch of D-Bus calls on the system bus and prints what came back, as JSON.

Run on the system under test with Debian's /usr/bin/python3 (python3-dbus), as root or
as another uid (setpriv), so that sandboxd sees a real caller with a real uid:

    echo '[{"path": "/io/sandboxd/Sandbox1", "iface": "io.sandboxd.Sandbox1.Manager",
            "method": "ListTemplates"}]' | /usr/bin/python3 busprobe.py

Each call: path, iface, method, sig (default ""), args (default []), dest (default
io.sandboxd.Sandbox1), timeout (s, default 60). Values are JSON, with these forms for what
JSON cannot say: {"$v": [SIG, VALUE]} a variant, {"$rep": [STRING, N]} STRING repeated N
times, {"$list": [VALUE, N]} a list of N copies of VALUE; {"$bytes": [BYTE, N]} N bytes;
{"$fd": PATH} a descriptor of PATH opened read-only by this process (for 'h').
Each result: {"reply": [...]} or {"error": NAME, "message": first 500 characters}; byte
arrays and long strings are summarised as {"len": N} so that the output stays small, unless
the call has "bytes": true: then each byte array is {"base64": its bytes in base64}.
"""

import base64
import json
import os
import sys

import dbus


def build(v):
    if isinstance(v, dict):
        if '$rep' in v:
            s, n = v['$rep']
            return s * n
        if '$list' in v:
            item, n = v['$list']
            return [build(item)] * n
        if '$bytes' in v:
            b, n = v['$bytes']
            return dbus.ByteArray(bytes([b]) * n)
        if '$v' in v:
            sig, value = v['$v']
            return variant(sig, build(value))
        if '$fd' in v:
            # A descriptor of this process, opened read-only (directories too).
            return os.open(v['$fd'], os.O_RDONLY | os.O_CLOEXEC)
        return {k: build(x) for k, x in v.items()}
    if isinstance(v, list):
        return [build(x) for x in v]
    return v


def variant(sig, value):
    """A variant of signature SIG holding VALUE (python-dbus would guess the type)."""
    simple = {'t': dbus.UInt64, 'x': dbus.Int64, 'u': dbus.UInt32, 'i': dbus.Int32,
              'b': dbus.Boolean, 's': dbus.String, 'o': dbus.ObjectPath, 'd': dbus.Double,
              'y': dbus.Byte, 'q': dbus.UInt16, 'n': dbus.Int16, 'g': dbus.Signature}
    if sig in simple:
        return simple[sig](value, variant_level=1)
    if sig == 'h':
        return dbus.types.UnixFd(value, variant_level=1)
    if sig == 'ay':
        return dbus.ByteArray(bytes(value), variant_level=1)
    if sig.startswith('a{'):
        return dbus.Dictionary(value, signature=sig[2:-1], variant_level=1)
    if sig.startswith('a'):
        return dbus.Array(value, signature=sig[1:], variant_level=1)
    if sig == 'v':
        # A variant holding a variant: one more variant level around an already typed value.
        return type(value)(value, variant_level=value.variant_level + 1)
    raise ValueError(f'variant signature {sig} not supported here')


def summarise(v, full_bytes=False):
    if isinstance(v, dbus.ByteArray) or (isinstance(v, dbus.Array) and v.signature == 'y') or isinstance(v, bytes):
        return {'base64': base64.b64encode(bytes(v)).decode()} if full_bytes else {'len': len(v)}
    if isinstance(v, (dbus.Dictionary, dict)):
        return {str(k): summarise(x, full_bytes) for k, x in v.items()}
    if isinstance(v, (dbus.Array, dbus.Struct, list, tuple)):
        return [summarise(x, full_bytes) for x in v]
    if isinstance(v, dbus.Boolean):
        return bool(v)
    if isinstance(v, (dbus.String, dbus.ObjectPath, dbus.Signature, str)):
        return str(v) if len(v) <= 4096 else {'strlen': len(v)}
    if isinstance(v, (int, float)):
        return int(v) if isinstance(v, int) else float(v)
    return repr(v)


def main():
    calls = json.load(sys.stdin)
    bus = dbus.SystemBus()
    out = []
    for c in calls:
        try:
            reply = bus.call_blocking(c.get('dest', 'io.sandboxd.Sandbox1'), c['path'], c['iface'],
                                      c['method'], c.get('sig', ''), build(c.get('args', [])),
                                      timeout=c.get('timeout', 60), byte_arrays=True)
            if reply is None:
                reply = []
            elif not isinstance(reply, tuple):
                reply = [reply]
            out.append({'reply': summarise(list(reply), c.get('bytes', False))})
        except dbus.exceptions.DBusException as e:
            out.append({'error': e.get_dbus_name(), 'message': (e.get_dbus_message() or '')[:500]})
    json.dump(out, sys.stdout)


if __name__ == '__main__':
    main()
