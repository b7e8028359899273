#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd latency against its floors, measured in one run on this machine.

How to run (as root, after building; the default build dir is build/):

    python3 bench/bench.py                  # 200 runs of each, medians, p90 and ratios
    python3 bench/bench.py -n 50 --repeat 3 # three rounds in one boot
    python3 bench/bench.py --profile DIR    # also strace sandboxd and systemd during creates
    SANDBOXD_BUILD_DIR=build-release python3 bench/bench.py

It boots a system with tests/integration/harness.py (the host's systemd when it is PID 1,
else one in a PID + mount namespace), starts sandboxd from the build dir, and runs the C
client bench/sandbox-bench inside that system. The client keeps one system-bus connection
and times with CLOCK_MONOTONIC, so no client process start is in the figures:
  create_exec             CreateSandbox(Ephemeral) + Exec /bin/true (returns once the
                          sandbox is gone: the whole create → result → nothing left cycle)
  create_exec_persistent  CreateSandbox + Exec /bin/true; Destroy not timed
  create, create_first_exec   its two halves; destroy: the Destroy after it
  exec                    Exec /bin/true in one running sandbox (output captured in the reply)
  exec_fds                … with StandardOutput/StandardError passed as the client's own
                          descriptors (/dev/null): no output through sandboxd
  exec_output, exec_output_fds   the same two for `head -c 1M /dev/zero`
  ping                    Peer.Ping to sandboxd: one bus round trip
  varlink_*               the same over sandboxd's varlink socket, one connection: ping
                          (GetInfo), create_exec, create_exec_persistent (create,
                          create_first_exec; destroy), exec, exec_output (1 MiB in the reply,
                          base64) and exec_output_more (streamed with "more")
and, in the same process and run, interleaved with the above (each round runs each once),
the floors:
  fork_exec               posix_spawn /bin/true + waitpid
  bwrap                   fork, drop to a sandbox uid (as sandboxd does), exec bwrap with
                          the arguments sandboxd gave the bwrap of a sandbox of the same
                          template (read off its /proc/PID/cmdline: the same mounts), running
                          /bin/true instead of the agent
  systemd_run_scope_bwrap systemd-run --scope --uid=… bwrap … /bin/true
  systemd_run_scope_bwrap_props   … with the unit properties sandboxd sets (informational)
Targets (SPEC.md): create_exec ≤ 2 × bwrap, create_exec < systemd_run_scope_bwrap,
exec ≤ 3 × fork_exec; varlink at least as fast as D-Bus (exec, create + exec ≤ 1.0 ×).
Then, each round, file upload throughput (sandbox-bench --upload): Upload of a random
--upload-mib file (256 MiB) from a descriptor of the client into a running sandbox's /work
(a tmpfs), against cp(1) of the same file on the host into a tmpfs directory; both read the
file from a directory the bench makes under /dev/shm and removes afterwards.
The client is <build>/bench/sandbox-bench (meson: subdir('bench')), else
build-bench/sandbox-bench, else it is compiled into the harness's work directory.
Do not run it on an ASan build: the figures would measure the sanitizer.
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', 'tests', 'integration'))

SANDBOX_UID = 0x70000000  # SANDBOX_UID_BASE_DEFAULT in src/core/manager.h
# Arguments of the daemon's bwrap that name descriptors only it holds: FD-taking options
# and how many arguments each takes after the option itself.
BWRAP_FD_OPTIONS = {'--block-fd': 1, '--info-fd': 1, '--seccomp': 1, '--ro-bind-data': 2}


# A --bwrap= for sandboxd that says its arguments on its stderr (which sandboxd logs under
# the sandbox's id: docs/ARCHITECTURE.md) and execs the real bwrap. bwrap's own process
# outside the sandbox is killed once the sandbox is ready, so its /proc/PID/cmdline is not
# there to read. In chunks: sandboxd logs lines of 2,000 characters at most.
BWRAP_SAYING_ARGV = """#!/usr/bin/python3
import json, os, sys
args = sys.argv[1:]
for i in range(0, len(args), 20):
    sys.stderr.write('bench-bwrap-argv ' + json.dumps(args[i:i + 20]) + '\\n')
sys.stderr.flush()
os.execv(%r, [%r] + args)
"""


def daemon_bwrap_argv(system, template):
    """The argv sandboxd gives the bwrap of a sandbox of TEMPLATE (with Storage=tmpfs): read
    from a sandbox started with --bwrap= a script that logs it (BWRAP_SAYING_ARGV), through
    a drop-in after every other one (its ExecStart the last one's, plus --bwrap=); sandboxd
    is restarted with it and again without it."""
    import harness
    real = shutil.which('bwrap') or '/usr/bin/bwrap'
    script = f'/run/{system.name}-bench-bwrap'
    with open(system.path(script), 'w') as f:
        f.write(BWRAP_SAYING_ARGV % (real, real))
    os.chmod(system.path(script), 0o755)
    dropins = system.path('/run/systemd/system/sandboxd.service.d')
    exec_start = ' '.join(harness._systemd_quote(a) for a in system.exec_start)
    for name in sorted(os.listdir(dropins)):
        with open(os.path.join(dropins, name)) as f:
            for line in f:
                if line.startswith('ExecStart=') and line.strip() != 'ExecStart=':
                    exec_start = line.strip()[len('ExecStart='):]
    dropin = os.path.join(dropins, '99-bench-bwrap-argv.conf')

    def restart():
        system.systemctl('daemon-reload', check=True)
        cp = system.systemctl('stop', 'sandboxd.service', timeout=90)
        if cp.returncode != 0:
            raise RuntimeError(f'systemctl stop sandboxd failed: {cp.stderr}')
        system.start_daemon()

    with open(dropin, 'w') as f:
        f.write(f'{harness.MARKER}\n[Service]\nExecStart=\nExecStart={exec_start} '
                f'{harness._systemd_quote("--bwrap=" + script)}\n')
    sid = None
    try:
        restart()
        cp = system.sandboxctl('create', '--template', template, '--storage=tmpfs')
        if cp.returncode != 0:
            raise RuntimeError(f'sandboxctl create --template {template} failed: {cp.stderr}')
        sid = cp.stdout.strip()
        lines = system.run(['journalctl', '--no-pager', '-o', 'cat', f'SANDBOX_ID={sid}',
                            f'SYSLOG_IDENTIFIER=sandbox-{sid}.scope'], timeout=30).stdout.splitlines()
        argv = [real]
        for line in lines:
            if line.startswith('bench-bwrap-argv '):
                argv += json.loads(line[len('bench-bwrap-argv '):])
        if '--' not in argv:
            raise RuntimeError(f'sandbox {sid}: its bwrap\'s arguments are not in the journal: {lines}')
        return argv
    finally:
        if sid:
            system.sandboxctl('destroy', sid)
        os.unlink(dropin)
        os.unlink(system.path(script))
        restart()


def bwrap_floor_argv(system, template):
    """The bare-bwrap floor: the very argv sandboxd gave the bwrap of a sandbox of TEMPLATE
    (daemon_bwrap_argv(), so that the floor makes the same mounts: the template's binds, its
    /etc tree, the /proc masks, /dev/shm, /work and /tmp), running /bin/true instead of the
    agent. What only the daemon can pass is left out or replaced: --block-fd and --info-fd
    (they only hold bwrap until its scope exists) and --seccomp (one BPF load) go;
    --ro-bind-data FD /etc/machine-id becomes a bind of a file (one bind mount either way).
    The sandbox is made with Storage=tmpfs, as the ephemeral ones measured are: a workspace
    on disk is removed with its sandbox, and the floor could not bind it."""
    daemon = daemon_bwrap_argv(system, template)
    sep = daemon.index('--')
    floor, i = [], 0
    while i < sep:
        a = daemon[i]
        if a in BWRAP_FD_OPTIONS:
            n = BWRAP_FD_OPTIONS[a]
            if a == '--ro-bind-data':
                floor += ['--ro-bind', daemon[i + 2], daemon[i + 2]]
            i += 1 + n
            continue
        floor.append(a)
        i += 1
    return floor + ['--', '/bin/true']


def find_client(system, explicit):
    if explicit:
        return os.path.abspath(explicit)
    for p in (os.path.join(system.paths.build, 'bench', 'sandbox-bench'),
              os.path.join(system.paths.source, 'build-bench', 'sandbox-bench')):
        if os.access(p, os.X_OK):
            return p
    out = os.path.join(system.workdir, 'sandbox-bench')
    flags = subprocess.run(['pkg-config', '--cflags', '--libs', 'libsystemd'], check=True,
                           capture_output=True, text=True).stdout.split()
    subprocess.run(['cc', '-std=gnu11', '-O2', '-Wall', '-Wextra', '-Werror', '-Wno-unused-parameter',
                    '-Wno-missing-field-initializers', '-D_GNU_SOURCE',
                    os.path.join(HERE, 'sandbox-bench.c'), '-o', out] + flags, check=True)
    return out


def machine_info(system):
    def cmd(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return '?'

    try:
        with open('/proc/cpuinfo') as f:
            cpu = next((l.split(':', 1)[1].strip() for l in f if l.startswith('model name')), '?')
    except OSError:
        cpu = '?'
    src = system.paths.source
    if os.path.realpath(cmd(['git', '-C', src, 'rev-parse', '--show-toplevel']) or '/') == os.path.realpath(src):
        head = cmd(['git', '-C', src, 'rev-parse', '--short', 'HEAD'])
        dirty = cmd(['git', '-C', src, 'status', '--porcelain', '--untracked-files=no', '--', 'src'])
    else:
        head, dirty = f'{src} (not a git checkout)', ''
    daemon_mtime = datetime.datetime.fromtimestamp(os.stat(system.paths.sandboxd).st_mtime)
    return {
        'date': datetime.datetime.now().astimezone().isoformat(timespec='seconds'),
        'nproc': os.cpu_count(),
        'cpu': cpu,
        'kernel': platform.release(),
        'systemd': cmd(['systemctl', '--version']).split('\n')[0],
        'bwrap': cmd([system.paths.bwrap, '--version']),
        'mode': system.mode,
        'loadavg': ' '.join(open('/proc/loadavg').read().split()[:3]),
        'commit': head + (' + uncommitted changes in src/' if dirty else ''),
        'sandboxd': f'{system.paths.sandboxd} (built {daemon_mtime:%Y-%m-%d %H:%M:%S})',
    }


def run_client(system, client, args, bw, timeout):
    cp = system.run([client] + args + ['--'] + bw, timeout=timeout)
    if cp.returncode != 0:
        raise RuntimeError(f'sandbox-bench failed ({cp.returncode}):\n{cp.stderr}\n{system.journal()}')
    return json.loads(cp.stdout)['results']


def make_upload_file(mib):
    """A directory of our own under /dev/shm (a tmpfs, so that no disk is measured) with a
    random file of MIB MiB in it: the source of both Upload and cp."""
    shm = tempfile.mkdtemp(prefix='sandboxd-bench-', dir='/dev/shm')
    with open(os.path.join(shm, 'upload.bin'), 'wb') as f:
        for _ in range(mib):
            f.write(os.urandom(1024 * 1024))
    return shm


def run_upload(system, client, shm, args):
    """sandbox-bench --upload: Upload of the file against cp into shm/cp (removed by it)."""
    dest = os.path.join(shm, 'cp')
    os.makedirs(dest, exist_ok=True)
    cp = system.run([client, '--upload', os.path.join(shm, 'upload.bin'), '--cp-dir', dest,
                     '--runs', str(args.upload_runs), '--warmup', '1', '--template', args.template],
                    timeout=120 + args.upload_runs * 60)
    if cp.returncode != 0:
        raise RuntimeError(f'sandbox-bench --upload failed ({cp.returncode}):\n{cp.stderr}\n{system.journal()}')
    out = json.loads(cp.stdout)
    return dict(out['results'], upload_bytes=out['upload_bytes'])


def profile(system, client, bw, outdir, runs):
    """strace -f of sandboxd and of systemd (PID 1 of the system) while the client runs
    RUNS ephemeral creates; the traces go to OUTDIR."""
    os.makedirs(outdir, exist_ok=True)
    pid = system.show('sandboxd.service', 'MainPID')['MainPID']
    tracers = []
    for name, target in (('sandboxd', pid), ('systemd', '1')):
        out = os.path.join(outdir, f'{name}.strace')
        tracers.append(subprocess.Popen(system.wrap(['strace', '-f', '-tt', '-T', '-s', '200', '-o', out,
                                                     '-p', str(target)]),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True))
    time.sleep(1.0)  # strace attaches
    try:
        res = run_client(system, client, ['--runs', str(runs), '--warmup', '0', '--only', 'create_exec'],
                         bw, timeout=120 + runs * 5)
    finally:
        for t in tracers:
            # Our nsenter and the strace it forked share the new process group; nsenter
            # forwards no signal, so the group gets it: strace detaches on SIGINT.
            os.killpg(t.pid, signal.SIGINT)
        for t in tracers:
            try:
                t.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(t.pid, signal.SIGKILL)
                t.wait()
    print(f'\nprofile: {runs} ephemeral create+exec under strace (median '
          f'{res["create_exec"]["median_us"] / 1000:.2f} ms, slowed by strace); traces in {outdir}')


ROWS = [
    ('fork_exec', 'fork+exec /bin/true (posix_spawn + waitpid)'),
    ('bwrap', 'bwrap … /bin/true, as a sandbox uid'),
    ('systemd_run_scope_bwrap', 'systemd-run --scope bwrap … /bin/true'),
    ('systemd_run_scope_bwrap_props', '  … with sandboxd\'s unit properties'),
    ('ping', 'D-Bus Peer.Ping to sandboxd'),
    ('create_exec', 'create(ephemeral) + exec /bin/true'),
    ('create_exec_persistent', 'create + first exec (destroy not timed)'),
    ('create', '  of which CreateSandbox'),
    ('create_first_exec', '  of which the first Exec'),
    ('destroy', 'then Destroy (not in the line above)'),
    ('exec', 'exec /bin/true in a running sandbox'),
    ('exec_fds', '  … with stdout/stderr fds passed (/dev/null)'),
    ('exec_output', 'exec 1 MiB of output, captured'),
    ('exec_output_fds', '  … with stdout/stderr fds passed (/dev/null)'),
    ('varlink_ping', 'varlink GetInfo to sandboxd'),
    ('varlink_create_exec', 'varlink: create(ephemeral) + exec /bin/true'),
    ('varlink_create_exec_persistent', 'varlink: create + first exec'),
    ('varlink_create', '  of which CreateSandbox'),
    ('varlink_create_first_exec', '  of which the first Exec'),
    ('varlink_destroy', 'varlink: then Destroy'),
    ('varlink_exec', 'varlink: exec /bin/true in a running sandbox'),
    ('varlink_exec_output', 'varlink: exec 1 MiB of output, in the reply'),
    ('varlink_exec_output_more', '  … streamed ("more")'),
    ('upload', 'Upload of the file from a host fd'),
    ('cp', 'cp of the same file on the host (tmpfs)'),
]

RATIOS = [
    ('create+first exec / bare bwrap', 'create_exec', 'bwrap', '≤ 2.0', lambda r: r <= 2.0),
    ('create+first exec / systemd-run --scope bwrap', 'create_exec', 'systemd_run_scope_bwrap', '< 1.0',
     lambda r: r < 1.0),
    ('exec / fork+exec', 'exec', 'fork_exec', '≤ 3.0', lambda r: r <= 3.0),
    ('(persistent create+first exec / bare bwrap)', 'create_exec_persistent', 'bwrap', '', None),
    ('(persistent create+first exec / systemd-run)', 'create_exec_persistent', 'systemd_run_scope_bwrap', '',
     None),
    ('(exec /bin/true: fds passed / captured)', 'exec_fds', 'exec', '', None),
    ('(exec 1 MiB output: fds passed / captured)', 'exec_output_fds', 'exec_output', '', None),
    ('varlink / D-Bus: exec /bin/true', 'varlink_exec', 'exec', '≤ 1.0', lambda r: r <= 1.0),
    ('varlink / D-Bus: create(ephemeral) + exec', 'varlink_create_exec', 'create_exec', '≤ 1.0',
     lambda r: r <= 1.0),
    ('varlink / D-Bus: create + first exec', 'varlink_create_exec_persistent', 'create_exec_persistent', '≤ 1.0',
     lambda r: r <= 1.0),
    ('(varlink / D-Bus: ping)', 'varlink_ping', 'ping', '', None),
    ('(varlink / D-Bus: exec 1 MiB, in the reply)', 'varlink_exec_output', 'exec_output', '', None),
    ('(varlink streamed / D-Bus fds: exec 1 MiB)', 'varlink_exec_output_more', 'exec_output_fds', '', None),
    ('(upload time / cp time)', 'upload', 'cp', '', None),
]


def report(rounds, info):
    print('\nmachine: ' + ', '.join(f'{k}={info[k]}' for k in ('nproc', 'cpu', 'kernel')))
    print(f'date: {info["date"]}; {info["systemd"]}; {info["bwrap"]}; {info["mode"]} mode; '
          f'load average before: {info["loadavg"]}, after: {" ".join(open("/proc/loadavg").read().split()[:3])}')
    print(f'sandboxd: {info["sandboxd"]}, source {info["commit"]}')
    runs = rounds[0][next(iter(rounds[0]))]['runs']
    head = ''.join(f'   median    p90  ' if len(rounds) == 1 else f'  r{i + 1} med    p90  '
                   for i in range(len(rounds)))
    print(f'\n{runs} runs of each per round, in ms (one client process, one bus connection, one varlink '
          f'connection):\n')
    print(f'  {"":<46}{head}')
    for key, what in ROWS:
        if key not in rounds[0]:
            continue
        cells = ''.join(f'{r[key]["median_us"] / 1000:9.2f}{r[key]["p90_us"] / 1000:9.2f}' for r in rounds)
        print(f'  {what:<46}{cells}')
    print('\nratios of medians:\n')
    ok_all = True
    for name, num, den, target, ok in RATIOS:
        if num not in rounds[0] or den not in rounds[0]:
            continue
        vals = [r[num]['median_us'] / r[den]['median_us'] for r in rounds]
        cells = ''.join(f'{v:7.2f}' for v in vals)
        verdict = ''
        if ok:
            met = all(ok(v) for v in vals)
            ok_all &= met
            verdict = f'target {target:<6} {"MET" if met else "MISSED"}'
        print(f'  {name:<48}{cells}   {verdict}')
    if 'upload' in rounds[0] and 'cp' in rounds[0]:
        size = rounds[0]['upload_bytes']
        print(f'\nfile upload throughput ({size / 1024 ** 2:.0f} MiB, {rounds[0]["upload"]["runs"]} runs per round, '
              f'medians, MB/s = 10^6 bytes/s):\n')
        for key, what in (('upload', 'Upload from a host fd into /work'), ('cp', 'cp on the host (tmpfs → tmpfs)')):
            cells = ''.join(f'{size / r[key]["median_us"]:9.0f}' for r in rounds)
            print(f'  {what:<48}{cells}')
        cells = ''.join(f'{r["cp"]["median_us"] / r["upload"]["median_us"]:9.2f}' for r in rounds)
        print(f'  {"ratio upload / cp throughput":<48}{cells}')
    return ok_all


PHASE_WHAT = {
    'SandboxNew': 'D-Bus in, checks, sandbox object',
    'JobNew': 'fork held payload, StartTransientUnit queued',
    'JobRemoved:done': 'systemd makes the scope, moves the pid',
    'State=running': 'release → bwrap sets up → agent "ready"',
    'CreateSandbox reply': 'reply reaches the client',
    'Exec sent': 'client turnaround',
    'State=stopping': 'Exec → agent runs /bin/true → result',
    'JobNew(stop)': 'StopUnit queued',
    'JobRemoved:done(stop)': 'systemd kills and removes the scope',
    'SandboxRemoved': 'daemon finalizes',
    'Exec reply': 'reply reaches the client',
}


def report_trace(trace):
    total = sum(p['median_us'] for p in trace['phases'])
    print(f'\nwhere an ephemeral create + exec goes ({trace["trace_cycles"]} cycles, by the bus signals the '
          f'client sees; each phase ends at the event named):\n')
    print(f'  {"until":<24}{"what":<44}{"median":>8}{"p90":>8}')
    for p in trace['phases']:
        print(f'  {p["until"]:<24}{PHASE_WHAT.get(p["until"], ""):<44}'
              f'{p["median_us"] / 1000:8.2f}{p["p90_us"] / 1000:8.2f}')
    print(f'  {"sum of medians":<68}{total / 1000:8.2f}')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('-n', '--runs', type=int, default=200, help='runs of each measurement (default 200)')
    ap.add_argument('--warmup', type=int, default=5, help='untimed runs before each (default 5)')
    ap.add_argument('--repeat', type=int, default=1, help='rounds in the same boot (default 1)')
    ap.add_argument('--template', default='shell')
    ap.add_argument('--client', help='the sandbox-bench binary (default: see above)')
    ap.add_argument('--json', help='also write the results (µs) and machine to this file')
    ap.add_argument('--profile', metavar='DIR',
                    help='afterwards, strace sandboxd and systemd during --profile-runs creates into DIR')
    ap.add_argument('--profile-runs', type=int, default=10)
    ap.add_argument('--upload-mib', type=int, default=256, help='size of the uploaded file (default 256)')
    ap.add_argument('--upload-runs', type=int, default=5,
                    help='uploads and cps per round (default 5; 0: skip the upload throughput)')
    ap.add_argument('--trace', type=int, default=50, metavar='N',
                    help='afterwards, split N ephemeral create+execs into phases by the bus signals '
                         'the client sees (default 50; 0: skip)')
    args = ap.parse_args()

    import harness
    system = harness.acquire()
    shm = None
    try:
        bw = bwrap_floor_argv(system, args.template)
        client = find_client(system, args.client)
        info = machine_info(system)
        print(f'client: {client}', file=sys.stderr)
        print(f'bwrap floor: {shlex.join(bw)}', file=sys.stderr)
        cargs = ['--runs', str(args.runs), '--warmup', str(args.warmup), '--template', args.template,
                 '--uid', str(SANDBOX_UID)]
        rounds = []
        if args.upload_runs > 0:
            shm = make_upload_file(args.upload_mib)
        for i in range(args.repeat):
            rounds.append(run_client(system, client, cargs, bw, timeout=120 + args.runs * 10))
            if shm:
                rounds[-1].update(run_upload(system, client, shm, args))
            print(f'round {i + 1}/{args.repeat} done', file=sys.stderr)
        trace = None
        if args.trace > 0:
            cp = system.run([client, '--trace', str(args.trace), '--template', args.template],
                            timeout=120 + args.trace * 10)
            if cp.returncode != 0:
                raise RuntimeError(f'sandbox-bench --trace failed:\n{cp.stderr}')
            trace = json.loads(cp.stdout)
        if args.profile:
            if shutil.which('strace'):
                profile(system, client, bw, os.path.abspath(args.profile), args.profile_runs)
            else:
                print('profile: strace is not installed (package strace)', file=sys.stderr)
    finally:
        problems = harness.release()
        if shm:
            shutil.rmtree(shm, ignore_errors=True)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'machine': info, 'rounds': rounds, 'trace': trace}, f, indent=1)
    met = report(rounds, info)
    if trace:
        report_trace(trace)
    return 1 if problems else (0 if met else 2)


if __name__ == '__main__':
    sys.exit(main())
