# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the security tests share: the booted system (tests/integration/harness.py, one boot
for the integration and the security suites when run.py runs both), D-Bus calls made by
a real process of a chosen uid on the system's bus, and the daemon's identity."""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
import harness  # noqa: E402

BUSPROBE = os.path.join(HERE, 'busprobe.py')
VARLINKPROBE = os.path.join(HERE, '..', 'integration', 'varlinkprobe.py')
# Debian's interpreter, which has python3-dbus; `python3` on PATH may be a root-only shim.
SYSTEM_PYTHON = '/usr/bin/python3'
NOBODY = 65534
MiB = 1024 * 1024

M = harness.MANAGER_PATH
MGR = harness.MANAGER_IFACE
SBX = harness.SANDBOX_IFACE
PROPS = 'org.freedesktop.DBus.Properties'
E = 'io.sandboxd.Sandbox1.'
DENIED = ('org.freedesktop.DBus.Error.AccessDenied',
          'org.freedesktop.DBus.Error.InteractiveAuthorizationRequired')

S = None
_owned = False


def setup_module():
    """setUpModule of every security module: the system run.py booted, or our own."""
    global S, _owned
    S, _owned = harness.module_setup()
    return S


def teardown_module():
    global _owned
    owned, _owned = _owned, False
    harness.module_teardown(owned)


def as_uid(uid, cmd):
    """CMD run by UID (and its primary gid, no supplementary groups) on the system."""
    if uid in (None, 0):
        return list(cmd)
    return ['setpriv', f'--reuid={uid}', f'--regid={uid}', '--clear-groups', '--'] + list(cmd)


def bus(calls, uid=None, timeout=120):
    """CALLS (see busprobe.py) made in order by one process of UID on the system bus;
    returns one result dict per call."""
    cp = S.run(as_uid(uid, [SYSTEM_PYTHON, BUSPROBE]), input=json.dumps(calls), timeout=timeout)
    if cp.returncode != 0:
        raise AssertionError(f'busprobe as uid {uid} failed ({cp.returncode}):\n{cp.stderr[-3000:]}')
    return json.loads(cp.stdout)


def varlink(calls, uid=None, timeout=300):
    """CALLS ({method, parameters, more}; a method without a dot is io.sandboxd.Sandbox's)
    made in order on one varlink connection by one process of UID (varlinkprobe.py);
    returns one result dict per call."""
    batch = [dict(c, method=c['method'] if '.' in c['method'] else f'{harness.VARLINK_IFACE}.{c["method"]}')
             for c in calls]
    cp = S.run(as_uid(uid, [SYSTEM_PYTHON, VARLINKPROBE, harness.VARLINK_SOCKET]), input=json.dumps(batch),
               timeout=timeout)
    if cp.returncode != 0:
        raise AssertionError(f'varlinkprobe as uid {uid} failed ({cp.returncode}):\n{cp.stderr[-3000:]}')
    return json.loads(cp.stdout)


def vcall(method, more=False, **parameters):
    """One call as a dict for varlink()."""
    return {'method': method, 'parameters': parameters, 'more': more}


def call(path, iface, method, sig='', *args, **kw):
    """One call as a dict for bus()."""
    d = {'path': path, 'iface': iface, 'method': method, 'sig': sig, 'args': list(args)}
    d.update(kw)
    return d


def v(sig, value):
    """A variant for bus()."""
    return {'$v': [sig, value]}


def rep(s, n):
    return {'$rep': [s, n]}


def sandbox_path(sid):
    return f'{M}/sandbox/{sid}'


def daemon_identity():
    """(MainPID, NRestarts, start time of MainPID): what must not change when bad input or
    a hostile sandbox fails to take the daemon down."""
    info = S.show('sandboxd.service', 'MainPID', 'NRestarts', 'ActiveState')
    pid = int(info['MainPID'])
    try:
        with open(S.path(f'/proc/{pid}/stat')) as f:
            start = f.read().rsplit(')', 1)[1].split()[19]
    except OSError:
        start = None
    return pid, info.get('NRestarts'), start, info.get('ActiveState')


def daemon_rss_kib(pid):
    with open(S.path(f'/proc/{pid}/status')) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    raise AssertionError(f'no VmRSS for pid {pid}')


def scope_pids(unit):
    """Host PIDs of every process in UNIT's cgroup (none when it has no cgroup)."""
    return S.unit_pids(unit) or set()


def proc_uids(pid):
    """(real, effective, saved, fs) uid of a host PID, or None when it is gone."""
    try:
        with open(f'/proc/{pid}/status') as f:
            for line in f:
                if line.startswith('Uid:'):
                    return tuple(int(x) for x in line.split()[1:5])
    except OSError:
        return None
    return None


def processes_of_uid(uid):
    """Host PIDs (and names) of every live process any of whose uids is UID."""
    found = []
    for d in os.listdir('/proc'):
        if not d.isdigit():
            continue
        uids = proc_uids(int(d))
        if uids and uid in uids:
            try:
                with open(f'/proc/{d}/stat') as f:
                    stat = f.read()
                if stat.rsplit(')', 1)[1].split()[0] == 'Z':
                    found.append((int(d), 'zombie ' + stat))
                    continue
                with open(f'/proc/{d}/cmdline', 'rb') as f:
                    found.append((int(d), f.read().replace(b'\0', b' ').decode(errors='replace')))
            except OSError:
                pass
    return found


def cgroup_file(unit, controller, name):
    """Path of NAME in UNIT's cgroup of CONTROLLER (v1 hierarchy, or the v2 one)."""
    cg = S.show(unit, 'ControlGroup')['ControlGroup'].lstrip('/')
    for p in (os.path.join(harness.CGROUP_FS, controller, cg, name),
              os.path.join(harness.CGROUP_FS, cg, name),
              os.path.join(harness.CGROUP_FS, 'unified', cg, name)):
        if os.path.exists(p):
            return p
    return None


class Base(harness.SandboxTestCase):
    """Every sandbox created through these helpers is destroyed afterwards."""

    def create_bus(self, template='shell', uid=None, **options):
        """CreateSandbox over the bus with typed options ('t', 'b' for Ephemeral, 's' for strings)."""
        opts = {k: v('b' if k == 'Ephemeral' else 's' if isinstance(x, str) else 't', x)
                for k, x in options.items()}
        res = bus([call(M, MGR, 'CreateSandbox', 'sa{sv}', template, opts)], uid=uid)[0]
        self.assertIn('reply', res, f'CreateSandbox {template} {options} as uid {uid}: {res}')
        sid = res['reply'][0]
        self.addCleanup(S.sandboxctl, 'destroy', sid, timeout=120)
        return sid

    def assert_serving(self, identity=None):
        """The daemon still does its job and, given the IDENTITY it had before, is the same
        process: same MainPID and start time, no restart since (NRestarts did not grow; the
        integration suite restarts it on purpose, so it need not be 0 to begin with)."""
        super().assert_serving()
        now = daemon_identity()
        self.assertEqual(now[3], 'active', f'sandboxd.service is {now[3]}')
        if identity is not None:
            self.assertEqual(now, identity, 'sandboxd is not the process it was (MainPID, NRestarts, '
                                            'start time, state)')

    def wait_until(self, fn, timeout, what):
        deadline = time.monotonic() + timeout
        while True:
            r = fn()
            if r:
                return r
            if time.monotonic() > deadline:
                self.fail(f'timed out after {timeout}s waiting for {what}')
            time.sleep(0.05)
