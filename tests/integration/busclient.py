# SPDX-License-Identifier: LGPL-2.1-or-later
"""A D-Bus client of sandboxd for the tests, run *inside* the system under test.

The tests (test_files.py, test_processes.py) need what busctl cannot do: pass file
descriptors (Upload, Download, StandardInput/Output of Start) and read them while the call
runs. They run a short Python script on the system (harness System.run) with
/usr/bin/python3 and python3-dbus; the script starts with `from busclient import *` and
prints one JSON document with emit(). Use through run_script() on the test's side.

dbus-python serializes blocking calls on one connection: a call that must run while
another waits (Wait, then Destroy) comes from a second process.

Results of calls are kept as plain data: call() returns {"ok": value} or {"error": name,
"message": text, "seconds": time}; byte arrays become {"bytes": hex}.
"""

import hashlib
import json
import os
import subprocess
import threading
import time

BUS_NAME = 'io.sandboxd.Sandbox1'
MANAGER_PATH = '/io/sandboxd/Sandbox1'
MANAGER_IFACE = 'io.sandboxd.Sandbox1.Manager'
SANDBOX_IFACE = 'io.sandboxd.Sandbox1.Sandbox'

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- test side: run a script on the system ------------------------------------------


def run_script(system, body, timeout=120, args=()):
    """Run BODY (Python, after `from busclient import *`) with /usr/bin/python3 on SYSTEM;
    returns what it emit()ted, parsed. Raises AssertionError with its stderr when it fails."""
    code = f'import sys\nsys.path.insert(0, {HERE!r})\nfrom busclient import *\n{body}\n'
    cp = system.run(['/usr/bin/python3', '-c', code, *args], timeout=timeout)
    last = [l for l in cp.stdout.splitlines() if l.startswith('{')]
    if cp.returncode != 0 or not last:
        raise AssertionError(f'bus client script failed ({cp.returncode}):\n{cp.stderr[-4000:]}\n'
                             f'stdout: {cp.stdout[-2000:]}')
    return json.loads(last[-1])


# ---- system side ---------------------------------------------------------------------

try:
    import dbus
except ImportError:  # imported on the test's side only for run_script()
    dbus = None

_bus = None


def bus():
    global _bus
    if _bus is None:
        _bus = dbus.SystemBus()
    return _bus


def plain(v):
    """D-Bus values as JSON-able data."""
    if dbus is not None and isinstance(v, dbus.ByteArray):
        return {'bytes': bytes(v).hex()}
    if isinstance(v, bytes):
        return {'bytes': v.hex()}
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if dbus is not None and isinstance(v, dbus.Boolean):
        return bool(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    if isinstance(v, str):
        return str(v)
    return v


def manager():
    return dbus.Interface(bus().get_object(BUS_NAME, MANAGER_PATH), MANAGER_IFACE)


def sandbox(sid):
    path = manager().GetSandbox(sid)
    return dbus.Interface(bus().get_object(BUS_NAME, path), SANDBOX_IFACE)


def destroy(sid):
    """Destroy SID if it is still there (a cleanup after the test destroyed it itself)."""
    try:
        s = sandbox(sid)
    except dbus.DBusException as e:
        return {'gone': e.get_dbus_name()}
    return call(s, 'Destroy')


def call(obj, method, *args, timeout=60):
    """obj.method(*args) with a reply timeout in seconds; never raises for a D-Bus error."""
    t0 = time.monotonic()
    try:
        ret = getattr(obj, method)(*args, timeout=timeout, byte_arrays=True)
        return {'ok': plain(ret), 'seconds': time.monotonic() - t0}
    except dbus.DBusException as e:
        return {'error': e.get_dbus_name(), 'message': e.get_dbus_message(),
                'seconds': time.monotonic() - t0}


def opts(**kw):
    """a{sv} with the variant types sandboxd wants: bools b, ints t (u for Mode), bytes ay."""
    out = dbus.Dictionary({}, signature='sv')
    for k, v in kw.items():
        if isinstance(v, bool):
            out[k] = dbus.Boolean(v)
        elif k == 'Mode':
            out[k] = dbus.UInt32(v)
        elif isinstance(v, int):
            out[k] = dbus.UInt64(v)
        elif isinstance(v, bytes):
            out[k] = dbus.ByteArray(v)
        elif isinstance(v, list):
            out[k] = dbus.Array(v, signature='s')
        elif dbus is not None and isinstance(v, dbus.types.UnixFd):
            out[k] = v
        else:
            out[k] = v
    return out


def fd(n):
    return dbus.types.UnixFd(n)


def data_of(result):
    """The bytes of a call() result whose value is (or starts with) a byte array."""
    v = result['ok']
    if isinstance(v, list):
        v = v[0]
    return bytes.fromhex(v['bytes'])


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
            h.update(chunk)
    return h.hexdigest()


class PipeReader(threading.Thread):
    """Reads a pipe to its end (or LIMIT bytes, then closes it), hashing and counting; keeps
    the first KEEP bytes."""

    def __init__(self, rfd, limit=None, keep=4096):
        super().__init__(daemon=True)
        self.rfd, self.limit, self.keep = rfd, limit, keep
        self.h = hashlib.sha256()
        self.n = 0
        self.head = b''
        self.start()

    def run(self):
        try:
            while self.limit is None or self.n < self.limit:
                b = os.read(self.rfd, 1 << 20)
                if not b:
                    break
                self.h.update(b)
                if len(self.head) < self.keep:
                    self.head += b[:self.keep - len(self.head)]
                self.n += len(b)
        finally:
            os.close(self.rfd)

    def result(self, timeout=60):
        self.join(timeout)
        return {'sha256': self.h.hexdigest(), 'bytes': self.n, 'head': self.head.hex(),
                'ended': not self.is_alive()}


def daemon_rss_kib():
    pid = subprocess.run(['systemctl', 'show', '-P', 'MainPID', 'sandboxd.service'],
                         capture_output=True, text=True).stdout.strip()
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return None


def emit(obj):
    print(json.dumps(obj), flush=True)
