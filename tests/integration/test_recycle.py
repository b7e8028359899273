# SPDX-License-Identifier: LGPL-2.1-or-later
"""The recycling pool (a template's "pool": {"recycle": true}): a sandbox its user is done
with is reset and kept for the same owner, tenant and limits - never anyone else's - and
the next user of it finds nothing of the last one's: no process (daemonized, ignoring
SIGTERM, holding an abstract socket or a huge mapping), no file in /work, /tmp or
/dev/shm, no System V IPC object or POSIX message queue, no profile, no cwd, no change
to what PID 1 passes on to every exec (limits, nice value, affinity, I/O priority), no
chmod of the mounts, no sysctl of its namespaces. A
reset that cannot finish, or cannot put PID 1 back, destroys the sandbox."""

import base64
import json
import os
import signal
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(HERE, '..', 'security'))
import harness  # noqa: E402
import polkitutil  # noqa: E402
import secutil  # noqa: E402
from secutil import NOBODY, vcall  # noqa: E402

S = None
POLKIT = None
TEMPLATE = 'recycle-shell-test'
TEMPLATE_JSON = None
MiB = 1024 * 1024

# What a hostile user leaves behind. Every process is a daemon of its own session that
# ignores SIGTERM; it reports its pid so that the test knows it ran.
HOSTILE = r'''
set -e
cd /work
echo leftover > /work/leftover
mkdir -p /work/.config && echo 'export LEAKED=from-the-last-user' > /work/.profile
cp /work/.profile /work/.bashrc
echo leftover > /tmp/leftover
echo leftover > /dev/shm/posix-shm-leftover
ipcmk -M 1048576 >/dev/null
ipcmk -Q >/dev/null
ipcmk -S 1 >/dev/null
python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
assert libc.mq_open(b"/sandboxd-test-leftover", os.O_CREAT | os.O_RDWR, 0o600, None) >= 0, ctypes.get_errno()
'

setsid sh -c 'trap "" TERM HUP INT; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &
setsid python3 -c '
import os, signal, socket, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0sandboxd-test-leftover")
s.listen()
m = bytearray(160 << 20)
for i in range(0, len(m), 4096):
    m[i] = 1
while True:
    time.sleep(1)
' </dev/null >/dev/null 2>&1 &
# Wait until the mapping is touched and the socket listens.
for i in $(seq 100); do
    grep -q '@sandboxd-test-leftover' /proc/net/unix && break
    sleep 0.1
done
sleep 1
cd /tmp
ls /proc | grep -c '^[0-9]'
'''

# What the next user looks at: every process, the writable places, IPC, sockets, the
# environment a login shell gets, the cwd.
INSPECT = r'''
echo "procs=$(ls /proc | grep '^[0-9]' | tr '\n' ' ')"
echo "work=$(ls -A /work | tr '\n' ' ')"
echo "tmp=$(ls -A /tmp | tr '\n' ' ')"
echo "shm=$(ls -A /dev/shm | tr '\n' ' ')"
echo "sysv=$(tail -n +2 /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem | grep -c '[0-9]')"
echo "unix=$(grep -c '@sandboxd-test-leftover' /proc/net/unix)"
echo "mq=$(python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print(1 if libc.mq_open(b"/sandboxd-test-leftover", os.O_RDWR) >= 0 else 0)
')"
echo "leaked=$(HOME=/work sh -lc 'echo "${LEAKED:-}"')"
echo "pwd=$(pwd)"
'''

# What every exec inherits from PID 1 (the agent), and the modes of the writable mounts.
TRAITS = r"""
import json, os, resource
SYSCTLS = ('kernel/shmmni', 'kernel/shmmax', 'kernel/msgmnb', 'kernel/sem', 'kernel/pid_max',
           'fs/mqueue/queues_max')
print(json.dumps({
    'rlimits': [resource.getrlimit(i) for i in range(16)],  # RLIMIT_CPU .. RLIMIT_RTTIME
    'nice': os.getpriority(os.PRIO_PROCESS, 0),
    'policy': os.sched_getscheduler(0),
    'affinity': sorted(os.sched_getaffinity(0)),
    'modes': {p: oct(os.stat(p).st_mode & 0o7777) for p in ('/work', '/tmp', '/dev/shm')},
    'sysctls': {p: open('/proc/sys/' + p).read() for p in SYSCTLS},
}))
"""

# A previous user changes what PID 1 passes on to every later exec - from outside it, as
# its own uid may (prlimit(2), sched_setaffinity(2), ioprio_set(2): no privilege needed,
# dumpable or not) - in ways the agent can put back, chmods the writable mounts and sets
# the sysctls of the sandbox's namespaces.
TAMPER_RESTORABLE = r"""
import ctypes, os, resource
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.prlimit(1, resource.RLIMIT_NOFILE, (64, hard))
resource.prlimit(1, resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
if len(os.sched_getaffinity(0)) > 1:
    os.sched_setaffinity(1, {min(os.sched_getaffinity(0))})
libc = ctypes.CDLL(None, use_errno=True)
assert libc.syscall(251, 1, 1, 3 << 13) == 0, ctypes.get_errno()  # ioprio_set(PROCESS, 1, IDLE), x86_64
os.chmod('/work', 0o777)
os.chmod('/tmp', 0o1777)
os.chmod('/dev/shm', 0o700)
# The sysctls of the sandbox's IPC and PID namespaces its uid may write (Linux 6.x).
for name, value in (('kernel/shmmni', '1'), ('kernel/shmmax', '1'), ('kernel/msgmnb', '1'),
                    ('kernel/sem', '1 1 1 1'), ('kernel/pid_max', '1000'), ('fs/mqueue/queues_max', '1')):
    try:
        with open('/proc/sys/' + name, 'w') as f:
            f.write(value)
    except PermissionError:
        pass  # an older kernel: root's only
print('ok')
"""

# ... and in ways it cannot: a lowered hard limit, a higher nice value.
TAMPER_FOR_GOOD = r"""
import os, resource
resource.prlimit(1, resource.RLIMIT_NOFILE, (64, 64))
os.setpriority(os.PRIO_PROCESS, 1, 15)
print('ok')
"""


def setUpModule():
    global S, POLKIT, TEMPLATE_JSON
    POLKIT = polkitutil.setup_module()
    S = secutil.S
    with open(os.path.join(S.paths.templates, 'shell.json')) as f:
        t = json.load(f)
    t.update(description='test: shell, recycled', pool={'recycle': True, 'recycle_max': 2, 'recycle_idle_sec': 120})
    TEMPLATE_JSON = json.dumps(t)
    vl_ok('CreateTemplate', {'name': TEMPLATE, 'json': TEMPLATE_JSON})


def tearDownModule():
    try:
        if S is not None:
            # Its kept sandboxes go with it.
            vl_ok('RemoveTemplate', {'name': TEMPLATE})
            assert wait_for(lambda: not template_units()), template_units()
    finally:
        polkitutil.teardown_module(POLKIT)


def vl(method, params=None):
    replies, error, eparams = S.varlink_call(method, params)
    return (replies[-1] if replies else None), error, eparams


def vl_ok(method, params=None):
    reply, error, eparams = vl(method, params)
    assert error is None, (method, error, eparams)
    return reply


def short(error):
    return error.rsplit('.', 1)[-1] if error else error


def wait_for(pred, timeout=30, interval=0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(interval)
    return False


def template_units():
    cp = S.systemctl('list-units', '--all', '--plain', '--no-legend', 'sandbox-*.scope')
    return [line.split()[0] for line in cp.stdout.splitlines() if line.rstrip().endswith(f'({TEMPLATE})')]


def run(sid, argv):
    """Exec over varlink, with stdout and stderr decoded."""
    reply = vl_ok('Exec', {'id': sid, 'argv': argv})
    for k in ('stdout', 'stderr'):
        reply[k] = base64.b64decode(reply.get(k) or '').decode(errors='replace')
    return reply


def sh(sid, script, check=True):
    reply = run(sid, ['sh', '-c', script])
    if check:
        assert reply['exitStatus'] == 0, reply
    return reply


def inspect(sid):
    out = sh(sid, INSPECT)['stdout']
    return dict(line.split('=', 1) for line in out.splitlines())


def unit_of(sid):
    return vl_ok('GetSandbox', {'id': sid})['sandbox']['unit']


def pool():
    return vl_ok('GetPool', {'template': TEMPLATE})['pool']


def traits(sid):
    return json.loads(run_py(sid, TRAITS))


def renew_server():
    """Host pid of sandboxd's mount renewal server (sandbox-init --renew-server), or None."""
    for pid in S.unit_pids('sandboxd.service') or ():
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                if b'--renew-server' in f.read().split(b'\0'):
                    return pid
        except OSError:
            pass
    return None


def run_py(sid, script):
    reply = run(sid, ['python3', '-c', script])
    assert reply['exitStatus'] == 0, reply
    return reply['stdout']


class Recycle(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        # Each test starts with none kept: the template written again drops them.
        vl_ok('CreateTemplate', {'name': TEMPLATE, 'json': TEMPLATE_JSON})
        self.assertTrue(wait_for(lambda: pool()['recycled'] == 0), pool())

    def acquire(self, options=None, **kw):
        reply = vl_ok('AcquireSandbox', {'template': TEMPLATE, 'options': options or {}})
        self.addCleanup(self.destroy_quietly, reply['id'])
        return reply['id'], reply['source']

    @staticmethod
    def destroy_quietly(sid):
        vl('Destroy', {'id': sid})

    def test_reset_after_a_hostile_user(self):
        sid, source = self.acquire()
        self.assertEqual(source, 'new')
        unit = unit_of(sid)
        limits_before = S.show(unit, 'MemoryMax', 'TasksMax', 'CPUQuotaPerSecUSec')
        out = sh(sid, HOSTILE)['stdout']
        self.assertGreaterEqual(int(out.split()[-1]), 4, 'the leftovers should be running')
        metrics = vl_ok('GetMetrics', {'id': sid})['metrics']
        self.assertGreater(metrics['memoryCurrent'], 100 * MiB, metrics)
        before = inspect(sid)
        self.assertIn('leftover', before['work'])
        self.assertEqual(before['unix'], '1')
        self.assertEqual(before['mq'], '1')
        self.assertNotEqual(before['sysv'], '0')

        reply = vl_ok('ReleaseSandbox', {'id': sid})
        self.assertEqual(reply, {'recycled': True})
        # Gone for everyone meanwhile, as a destroyed one is.
        _, error, _ = vl('GetSandbox', {'id': sid})
        self.assertEqual(short(error), 'NoSuchSandbox')
        self.assertEqual(pool()['recycled'], 1)
        # Only the agent is left in the unit (bwrap's monitor went as it became ready).
        pids = S.unit_pids(unit)
        self.assertEqual(len(pids), 1, pids)

        # The same owner gets its own sandbox back - the same unit, under an id of its own,
        # so that what held the last user's id finds nothing.
        again, source = self.acquire()
        self.assertEqual(source, 'recycled')
        self.assertNotEqual(again, sid)
        self.assertEqual(unit_of(again), unit)
        _, error, _ = vl('Exec', {'id': sid, 'argv': ['true']})
        self.assertEqual(short(error), 'NoSuchSandbox', 'the last user\'s id reaches nothing')
        first, sid = sid, again
        # Its journal (GetLogs) is this user's: none of the unit's lines from before, such
        # as systemd's "Started Sandbox <first id>" when the unit came up for the last user.
        before_logs = [e.get('message') or '' for e in vl_ok('GetLogs', {'id': sid, 'lines': 1000})['entries']]
        self.assertFalse([m for m in before_logs if first in m], before_logs)
        after = inspect(sid)
        # PID 1 (the agent), the inspecting shell and what it runs: nothing older.
        procs = [int(p) for p in after['procs'].split()]
        self.assertEqual(min(procs), 1)
        self.assertLessEqual(len(procs), 6, after)
        for p in procs:
            self.assertFalse(2 <= p < min(q for q in procs if q > 1), after)
        self.assertEqual(after['work'], '', after)
        self.assertEqual(after['tmp'], '', after)
        self.assertEqual(after['shm'], '', after)
        self.assertEqual(after['sysv'], '0', after)
        self.assertEqual(after['unix'], '0', after)
        self.assertEqual(after['mq'], '0', after)
        self.assertEqual(after['leaked'], '', after)
        self.assertEqual(after['pwd'], '/work', after)
        metrics = vl_ok('GetMetrics', {'id': sid})['metrics']
        self.assertLess(metrics['memoryCurrent'], 64 * MiB, 'the mapping and the old tmpfs must be freed')
        # The same unit, with the same limits; the work directory writable again.
        self.assertEqual(S.show(unit, 'MemoryMax', 'TasksMax', 'CPUQuotaPerSecUSec'), limits_before)
        sh(sid, 'echo new > /work/f && test "$(stat -c %a /work)" = 700 && test -w /tmp && test -w /dev/shm')
        self.assertEqual(vl_ok('GetSandbox', {'id': sid})['sandbox']['state'], 'running')

        # Each use's executions are recorded as its own, under its own id.
        def history(i):
            cp = S.sandboxctl('history', i, '--json')
            self.assertEqual(cp.returncode, 0, cp.stderr)
            return sorted(json.loads(cp.stdout), key=lambda e: e['started_usec'])
        mine, theirs = history(sid), history(first)
        self.assertEqual(len(theirs), 2, theirs)
        self.assertEqual(len(mine), 2, mine)
        hostile, last = theirs[0], mine[-1]
        self.assertGreaterEqual(hostile['memory_peak_bytes'], 100 * MiB, hostile)
        # The unit's memory peak starts afresh with the reset only where sandboxd may write
        # the unit's cgroup files (the shipped unit's ProtectControlGroups=yes forbids it)
        # and the kernel can (cgroup v1; v2 from Linux 6.12). Either the next use's peak is
        # its own, or it is the unit's since it started: never less than that. Say which.
        rebased = last['memory_peak_bytes'] < 100 * MiB
        print(f'\n# kernel {os.uname().release}: memory peak {"re-based" if rebased else "not re-based"} by the '
              f'reset; last exec {last["memory_peak_bytes"] / MiB:.1f} MiB', file=sys.stderr)
        if not rebased:
            self.assertGreaterEqual(last['memory_peak_bytes'], hostile['memory_peak_bytes'], last)

    def test_ephemeral_is_recycled_for_its_owner_only(self):
        # An ephemeral sandbox of the template: its exec's answer comes once it is reset.
        sid = vl_ok('CreateSandbox', {'template': TEMPLATE, 'options': {'Ephemeral': True}})['id']
        self.addCleanup(self.destroy_quietly, sid)
        unit = unit_of(sid)
        reply = run(sid, ['sh', '-c', 'echo x > /work/mine; sleep 300 & echo ran'])
        self.assertEqual(reply['stdout'], 'ran\n')
        # The answer comes at once; the reset goes on meanwhile, and the sandbox is gone
        # for its user from then on.
        self.assertGreaterEqual(pool()['recycled'], 1)
        _, error, _ = vl('GetSandbox', {'id': sid})
        self.assertEqual(short(error), 'NoSuchSandbox')
        self.assertTrue(wait_for(lambda: pool()['resetting'] == 0), pool())

        # Another tenant of the same uid: never this one.
        res = secutil.varlink([vcall('ActForTenant', tenant='recycle-a'),
                               vcall('AcquireSandbox', template=TEMPLATE, options={'Ephemeral': True}),
                               vcall('GetPool', template=TEMPLATE)])
        other = res[1]['replies'][0]
        self.assertNotEqual(other['id'], sid)
        self.assertEqual(other['source'], 'new')
        self.addCleanup(self.destroy_quietly, other['id'])
        # Nor does it see the other tenant's kept ones, as it sees none of its sandboxes.
        theirs = res[2]['replies'][0]['pool']
        self.assertEqual((theirs['recycled'], theirs['inUse']), (0, 1), theirs)
        # Other limits: never this one either.
        limited, source = self.acquire({'MemoryMax': 200 * MiB})
        self.assertNotEqual(limited, sid)
        self.assertEqual(source, 'new')
        # Another uid (nobody, allowed to create): a sandbox of its own.
        POLKIT.set_rules(polkitutil.grant_to_nobody('create', 'exec'))
        self.addCleanup(POLKIT.set_rules, None)
        res = secutil.varlink([vcall('AcquireSandbox', template=TEMPLATE),
                               vcall('GetPool', template=TEMPLATE)], uid=NOBODY)
        theirs = res[0]['replies'][0]
        self.assertNotEqual(theirs['id'], sid)
        self.assertEqual(theirs['source'], 'new')
        self.assertEqual(res[1]['replies'][0]['pool']['recycled'], 0, 'nobody sees only its own kept ones')
        vl_ok('Destroy', {'id': theirs['id']})

        # The owner, with the template's limits, gets it back - with nothing of the last run.
        again = vl_ok('AcquireSandbox', {'template': TEMPLATE, 'options': {'Ephemeral': True}})
        self.assertEqual(again['source'], 'recycled')
        self.assertEqual(unit_of(again['id']), unit)
        reply = run(again['id'], ['sh', '-c', 'ls -A /work; echo end'])
        self.assertEqual(reply['stdout'], 'end\n')

    def test_failed_reset_destroys(self):
        sid, _ = self.acquire()
        unit = unit_of(sid)
        # A process the agent cannot reach (it is not in the sandbox's PID namespace) put
        # into the sandbox's unit from outside: the reset cannot end it.
        cg = S.show(unit, 'ControlGroup')['ControlGroup']
        targets = ' '.join(f'/sys/fs/cgroup/{h}{cg}/cgroup.procs'.replace('//', '/')
                           for h in ('', 'systemd', 'unified', 'pids'))
        S.run(['sh', '-c', 'sleep 600 </dev/null >/dev/null 2>&1 & p=$!; '
               f'for f in {targets}; do [ -e "$f" ] && echo $p > "$f"; done; true'], check=True)
        # The agent and the process put in (bwrap's monitor is killed as the sandbox became
        # ready; it may take a moment to go).
        self.assertTrue(wait_for(lambda: len(S.unit_pids(unit)) == 2), S.unit_pids(unit))
        reply = vl_ok('ReleaseSandbox', {'id': sid})
        self.assertEqual(reply, {'recycled': False})
        self.assertTrue(wait_for(lambda: not S.unit_pids(unit)), 'the sandbox (and the process) must be gone')
        _, error, _ = vl('GetSandbox', {'id': sid})
        self.assertEqual(short(error), 'NoSuchSandbox')
        stats = vl_ok('GetStatistics')['statistics']
        self.assertGreaterEqual(stats['recycleFailures'], 1)

    def test_pid1_put_back_for_the_next_user(self):
        sid, _ = self.acquire()
        unit = unit_of(sid)
        fresh = traits(sid)
        self.assertEqual(run_py(sid, TAMPER_RESTORABLE), 'ok\n')
        self.assertNotEqual(traits(sid), fresh, 'the tampering should show in a later exec')
        self.assertEqual(vl_ok('ReleaseSandbox', {'id': sid}), {'recycled': True})
        again, source = self.acquire()
        self.assertEqual((unit_of(again), source), (unit, 'recycled'))
        self.assertEqual(traits(again), fresh, 'the next user inherits nothing of the last one\'s')

    def assert_agent_said(self, sid, text):
        """The agent's stderr reaches the journal through sandboxd, under the sandbox's
        unit and id (payload-bwrap.c: a pipe, not a journald stream)."""
        def said():
            return S.run(['journalctl', '--no-pager', '-o', 'cat', f'SANDBOX_ID={sid}',
                          f'SYSLOG_IDENTIFIER=sandbox-{sid}.scope', '_UID=0']).stdout
        self.assertTrue(wait_for(lambda: text in said()), f'the agent\'s {text!r} is not in the journal: {said()!r}')

    def test_pid1_changed_for_good_destroys(self):
        sid, _ = self.acquire()
        fresh = traits(sid)
        self.assertEqual(run_py(sid, TAMPER_FOR_GOOD), 'ok\n')
        self.assertEqual(vl_ok('ReleaseSandbox', {'id': sid}), {'recycled': False})
        self.assertTrue(wait_for(lambda: not S.unit_pids(f'sandbox-{sid}.scope')), 'the sandbox must be gone')
        self.assert_agent_said(sid, 'sandbox-init: reset: ')
        other, _ = self.acquire()
        self.assertNotEqual(other, sid)
        self.assertEqual(traits(other), fresh)

    def test_replaced_template_is_not_recycled(self):
        # One in use while its template is replaced was made from what it was: released, it
        # goes, and the next user gets the template as it is now.
        sid, _ = self.acquire()
        t = json.loads(TEMPLATE_JSON)
        t['environment'] = t.get('environment', []) + ['MARK=replaced']
        self.addCleanup(vl_ok, 'CreateTemplate', {'name': TEMPLATE, 'json': TEMPLATE_JSON})
        vl_ok('CreateTemplate', {'name': TEMPLATE, 'json': json.dumps(t)})
        self.assertEqual(vl_ok('ReleaseSandbox', {'id': sid}), {'recycled': False})
        other, source = self.acquire()
        self.assertNotEqual(other, sid)
        self.assertEqual(source, 'new')
        self.assertEqual(sh(other, 'echo $MARK')['stdout'], 'replaced\n')

    def test_sandboxctl_release_and_pool(self):
        cp = S.sandboxctl('create', '--template', TEMPLATE)
        self.assertEqual(cp.returncode, 0, cp.stderr)
        sid = cp.stdout.strip()
        self.addCleanup(self.destroy_quietly, sid)
        cp = S.sandboxctl('release', sid)
        self.assertEqual((cp.returncode, cp.stdout), (0, f'{sid} recycled\n'), cp.stderr)
        cp = S.sandboxctl('pool', '--json')
        mine = [p for p in json.loads(cp.stdout) if p['template'] == TEMPLATE]
        self.assertEqual(len(mine), 1, cp.stdout)
        self.assertTrue(mine[0]['recycle'])
        self.assertGreaterEqual(mine[0]['recycled'], 1)
        cp = S.sandboxctl('pool')
        self.assertIn('RECYCLED', cp.stdout)
        cp = S.sandboxctl('release', sid)
        self.assertNotEqual(cp.returncode, 0, 'released: no longer the caller\'s')
        # A template that does not recycle: release destroys.
        cp = S.sandboxctl('create', '--template', 'shell')
        other = cp.stdout.strip()
        cp = S.sandboxctl('release', other)
        self.assertEqual((cp.returncode, cp.stdout), (0, f'{other} destroyed\n'), cp.stderr)
        self.assertTrue(wait_for(lambda: not S.unit_pids(f'sandbox-{other}.scope')))

    def test_restart_stops_released_and_adopts_the_rest(self):
        kept, _ = self.acquire()
        released, _ = self.acquire()
        self.assertEqual(vl_ok('ReleaseSandbox', {'id': released}), {'recycled': True})
        S.daemon_restart_on_failure(True)
        self.addCleanup(S.daemon_restart_on_failure, False)
        since = time.time()
        S.kill9_daemon()
        # A sandbox in use is adopted; a released one is not kept across a restart.
        self.assertEqual(sh(kept, 'echo adopted')['stdout'], 'adopted\n')
        self.assertTrue(wait_for(lambda: not S.unit_pids(f'sandbox-{released}.scope')),
                        'the released sandbox outlived the restart')
        self.assertIn(f'Sandbox {released}', S.journal(units=('sandboxd.service',), since=since))
        self.assertEqual(pool()['recycled'], 0)
        # The adopted one's agent speaks over its control socket, which the new sandboxd
        # got back from systemd's fd store: what it says at a reset it cannot do still
        # reaches the journal.
        self.assertEqual(run_py(kept, TAMPER_FOR_GOOD), 'ok\n')
        self.assertEqual(vl_ok('ReleaseSandbox', {'id': kept}), {'recycled': False})
        self.assert_agent_said(kept, 'sandbox-init: reset: ')

    def test_kept_make_room_at_the_maximum(self):
        # With as many sandboxes as allowed, some of them only kept for reuse, a create
        # (of anyone) destroys the one kept longest rather than fail.
        existing = len(S.sandbox_scopes(include_pool=True))
        S.configure_daemon(args=[f'--max-sandboxes={existing + 2}'])
        self.addCleanup(S.configure_daemon, None)
        a, _ = self.acquire()
        b, _ = self.acquire()
        unit_a, unit_b = unit_of(a), unit_of(b)
        self.assertEqual(vl_ok('ReleaseSandbox', {'id': a}), {'recycled': True})
        self.assertEqual(vl_ok('ReleaseSandbox', {'id': b}), {'recycled': True})
        self.assertEqual(pool()['recycled'], 2)
        # Full: a create of another template takes the room of the oldest kept one (a).
        reply = vl_ok('CreateSandbox', {'template': 'shell'})
        self.addCleanup(self.destroy_quietly, reply['id'])
        self.assertTrue(wait_for(lambda: not S.unit_pids(unit_a)), 'the oldest kept one must go')
        self.assertEqual(pool()['recycled'], 1)
        again, source = self.acquire()
        self.assertEqual((unit_of(again), source), (unit_b, 'recycled'))
        # Nothing kept any more: the maximum holds.
        _, error, _ = vl('CreateSandbox', {'template': 'shell'})
        self.assertEqual(short(error), 'TooManySandboxes')

    def test_dbus_release_and_pool(self):
        cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                     'AcquireSandbox', 'sa{sv}', TEMPLATE, '0')
        self.assertIsNone(error, cp.stderr)
        sid, path, source = data
        self.addCleanup(self.destroy_quietly, sid)
        self.assertIn(source, ('new', 'recycled'))
        cp, data, error = S.bus_call(harness.BUS_NAME, path, harness.SANDBOX_IFACE, 'Release')
        self.assertIsNone(error, cp.stderr)
        self.assertEqual(data, [True])
        cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                     'GetPool', 's', TEMPLATE)
        self.assertIsNone(error, cp.stderr)
        p = {k: v['data'] for k, v in data[0].items()}
        self.assertTrue(p['Recycle'])
        self.assertGreaterEqual(p['Recycled'], 1)
        cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                     'ReleaseSandbox', 's', sid)
        self.assertEqual(short(error), 'NoSuchSandbox', 'a released sandbox is gone for its user')
        cp, data, error = S.bus_call(harness.BUS_NAME, harness.MANAGER_PATH, harness.MANAGER_IFACE,
                                     'GetPool', 's', 'no-such-template')
        self.assertEqual(short(error), 'NoSuchTemplate')

    def release_recycled(self):
        """A sandbox of ours released, and taken again: recycled (its reset worked)."""
        sid, _ = self.acquire()
        self.assertEqual(vl_ok('ReleaseSandbox', {'id': sid}), {'recycled': True})
        sid, source = self.acquire()
        self.assertEqual(source, 'recycled')
        return sid

    def release_stalled(self, *sids):
        """SIDS released while the renewal server is stopped: their resets wait in its last
        step. Returns (the server's pid, the threads the releases are answered in, their
        replies): SIGCONT the server, then join."""
        server = renew_server()
        os.kill(server, signal.SIGSTOP)
        replies = {}
        threads = [threading.Thread(target=lambda sid=sid: replies.update({sid: vl('ReleaseSandbox', {'id': sid})}))
                   for sid in sids]
        for t in threads:
            t.start()
        self.assertTrue(wait_for(lambda: pool()['resetting'] == len(sids), timeout=5), pool())
        return server, threads, replies

    def resume(self, server, threads, replies):
        os.kill(server, signal.SIGCONT)
        for t in threads:
            t.join(30)
        for sid, reply in replies.items():
            self.assertEqual(reply, ({'recycled': True}, None, None), sid)

    def test_create_waits_for_a_reset(self):
        # A create that finds none of the caller's kept, but two or more of them being
        # reset, waits for one (a reset takes a millisecond or two, a new sandbox tens of
        # them and a unit of its own).
        first = self.release_recycled()
        second, _ = self.acquire()
        units = {unit_of(first), unit_of(second)}
        self.assertEqual(len(units), 2)
        server, threads, replies = self.release_stalled(first, second)
        acquired = {}
        try:
            threads.append(threading.Thread(target=lambda: acquired.update(reply=vl(
                'AcquireSandbox', {'template': TEMPLATE, 'options': {}}))))
            threads[-1].start()
            # It waits 100 ms at most: looked for without a pause (a GetPool is about 1 ms).
            self.assertTrue(wait_for(lambda: pool()['waiting'] == 1, timeout=5, interval=0), pool())
        finally:
            self.resume(server, threads, replies)
        reply, error, _ = acquired['reply']
        self.assertIsNone(error, acquired)
        self.addCleanup(self.destroy_quietly, reply['id'])
        self.assertEqual(reply['source'], 'recycled')
        self.assertIn(unit_of(reply['id']), units, 'the waiting create got one whose reset it waited for')
        self.assertEqual((pool()['waiting'], pool()['resetting'], pool()['recycled']), (0, 0, 1))

    def test_create_waits_a_little_only(self):
        # The resets take longer than a create waits (100 ms): it goes on with a new
        # sandbox, and the resets, once done, keep theirs for the next ones.
        first = self.release_recycled()
        second, _ = self.acquire()
        units = {unit_of(first), unit_of(second)}
        server, threads, replies = self.release_stalled(first, second)
        try:
            started = time.monotonic()
            other, source = self.acquire()
            self.assertGreaterEqual(time.monotonic() - started, 0.1)
            self.assertEqual(source, 'new')
            self.assertNotIn(unit_of(other), units)
        finally:
            self.resume(server, threads, replies)
        self.assertEqual(pool()['recycled'], 2)
        again, source = self.acquire()
        self.assertEqual(source, 'recycled')
        self.assertIn(unit_of(again), units)

    def test_waited_for_sandbox_destroyed(self):
        # The sandboxes being reset go (their template is replaced) while a create waits for
        # one: the create goes on with a new one, and sandboxd lives on.
        first = self.release_recycled()
        second, _ = self.acquire()
        units = {unit_of(first), unit_of(second)}
        server = renew_server()
        os.kill(server, signal.SIGSTOP)
        replies, acquired = {}, {}
        threads = [threading.Thread(target=lambda sid=sid: replies.update({sid: vl('ReleaseSandbox', {'id': sid})}))
                   for sid in (first, second)]
        threads.append(threading.Thread(target=lambda: acquired.update(reply=vl(
            'AcquireSandbox', {'template': TEMPLATE, 'options': {}}))))
        try:
            for t in threads[:2]:
                t.start()
            self.assertTrue(wait_for(lambda: pool()['resetting'] == 2, timeout=5), pool())
            threads[2].start()
            self.assertTrue(wait_for(lambda: pool()['waiting'] == 1, timeout=5, interval=0), pool())
            vl_ok('CreateTemplate', {'name': TEMPLATE, 'json': TEMPLATE_JSON})
            threads[2].join(30)
        finally:
            try:
                os.kill(server, signal.SIGCONT)
            except ProcessLookupError:
                pass  # killed by sandboxd: it answered nothing since the renewals it dropped
            for t in threads:
                t.join(30)
        reply, error, _ = acquired['reply']
        self.assertIsNone(error, acquired)
        self.addCleanup(self.destroy_quietly, reply['id'])
        self.assertEqual(reply['source'], 'new')
        self.assertNotIn(unit_of(reply['id']), units)
        for sid in (first, second):
            self.assertEqual(replies[sid], ({'recycled': False}, None, None), sid)
        for unit in units:
            self.assertTrue(wait_for(lambda unit=unit: not S.unit_pids(unit)), f'{unit} must be gone')
        self.assertEqual((pool()['waiting'], pool()['resetting'], pool()['recycled']), (0, 0, 0))

    def test_lone_user_gets_a_second(self):
        # One working a sandbox at a time (its only one being reset) does not wait: it gets
        # a second, and its creates then alternate between the two.
        sid = self.release_recycled()
        unit = unit_of(sid)
        server, threads, replies = self.release_stalled(sid)
        try:
            other, source = self.acquire()
            self.assertEqual((source, pool()['waiting']), ('new', 0))
            other_unit = unit_of(other)
            self.assertNotEqual(other_unit, unit)
        finally:
            self.resume(server, threads, replies)
        self.assertEqual(vl_ok('ReleaseSandbox', {'id': other}), {'recycled': True})
        units = set()
        for _ in range(4):
            again, source = self.acquire()
            self.assertEqual(source, 'recycled')
            units.add(unit_of(again))
            self.assertEqual(vl_ok('ReleaseSandbox', {'id': again}), {'recycled': True})
        self.assertLessEqual(units, {unit, other_unit})

    def test_renew_server_death(self):
        # Started at the first reset, one for every sandbox; restarted after it died.
        sid = self.release_recycled()
        first = renew_server()
        self.assertIsNotNone(first, 'no renewal server after a reset')
        os.kill(first, signal.SIGKILL)
        self.assertTrue(wait_for(lambda: renew_server() != first))
        self.assertEqual(vl_ok('ReleaseSandbox', {'id': sid}), {'recycled': True})
        second = renew_server()
        self.assertNotIn(second, (None, first))

        # It dies while a reset waits for it (stopped, so that the request waits in its
        # socket): that sandbox is destroyed, never handed out half reset.
        failures = vl_ok('GetStatistics')['statistics']['recycleFailures']
        sid, source = self.acquire()
        self.assertEqual(source, 'recycled')
        unit = unit_of(sid)
        os.kill(second, signal.SIGSTOP)
        result = {}
        t = threading.Thread(target=lambda: result.update(reply=vl('ReleaseSandbox', {'id': sid})))
        t.start()
        try:
            self.assertTrue(wait_for(lambda: pool()['resetting'] == 1, timeout=5), pool())
            time.sleep(1)  # the agent's part is done in milliseconds: the request is sent
            killed = time.monotonic()
            os.kill(second, signal.SIGKILL)
        finally:
            t.join(30)
        # At once, not at the reset's deadline (5 s after the release).
        self.assertLess(time.monotonic() - killed, 2.5)
        self.assertEqual(result['reply'], ({'recycled': False}, None, None))
        self.assertTrue(wait_for(lambda: not S.unit_pids(unit)), 'the half reset sandbox must be gone')
        self.assertEqual(vl_ok('GetStatistics')['statistics']['recycleFailures'], failures + 1)
        self.assertIn('mount renewal server', S.journal(units=('sandboxd.service',)))
        # The next reset starts another one.
        sid = self.release_recycled()
        third = renew_server()
        self.assertNotIn(third, (None, second))

        # It hangs (stopped): the reset waiting for it ends at its deadline, that sandbox
        # is destroyed, and sandboxd kills the server, which answered nothing since.
        os.kill(third, signal.SIGSTOP)
        unit = unit_of(sid)
        self.assertEqual(vl_ok('ReleaseSandbox', {'id': sid}), {'recycled': False})
        self.assertTrue(wait_for(lambda: not S.unit_pids(unit)), 'the half reset sandbox must be gone')
        self.assertTrue(wait_for(lambda: renew_server() != third), 'the stuck server was not killed')
        self.assertIn('does not answer', S.journal(units=('sandboxd.service',)))
        self.release_recycled()
        self.assertNotIn(renew_server(), (None, third))


if __name__ == '__main__':
    unittest.main()
