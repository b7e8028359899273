# SPDX-License-Identifier: LGPL-2.1-or-later
"""The client's operations, each written once as a generator that yields what it needs
(:class:`Call` a method, :data:`NEXT` reply of a streaming call, :class:`Emit` output to
a callback, :class:`Sleep` a pause) and returns its result; :func:`run_sync` and :func:`run_async` drive one over
a blocking or an asyncio transport. Errors of a call are thrown into the generator at the
yield that made it."""

from __future__ import annotations

import asyncio
import base64
import codecs
import contextlib
import inspect
import math
import re
import time
import warnings
from typing import Any, AsyncGenerator, Callable, Generator, Iterator, NamedTuple, TypeVar, Union

from ._varlink import Reply
from .errors import INTERFACE, SandboxError, SandboxSystemError, error_from_reply
from .models import (CommandResult, EntryInfo, PoolInfo, PortInfo, ProcessInfo, QuotaEntry, QuotaInfo, SandboxInfo,
                     SnapshotInfo, TemplateInfo)
from .transport import WRITE_CHUNK, AsyncTransport, Transport


class Call(NamedTuple):
    method: str
    parameters: dict[str, Any]
    more: bool = False


class Emit(NamedTuple):
    fn: Callable[[Any], Any]
    arg: Any


class Sleep(NamedTuple):
    """A pause of the operation: time.sleep() or asyncio.sleep(), as its runner has it."""
    seconds: float


NEXT = object()
Request = Union[Call, Emit, object]
R = TypeVar('R')
#: an operation: yields requests, is sent their answers, returns R
Op = Generator[Request, Any, R]

FILE_PART_MAX = 4 * 1024 * 1024    # ReadFile's and WriteFile's most per call (sandboxd-api(7))

EXEC_TIMEOUT_MAX = 3600

OutputCallback = Callable[[str], Any]


def _advance(op: Op[R], value: Any, exc: BaseException | None) -> tuple[bool, Any]:
    """Resumes OP with VALUE (or throws EXC into it): (False, its next request) or (True,
    its result)."""
    try:
        return False, (op.throw(exc) if exc is not None else op.send(value))
    except StopIteration as stop:
        return True, stop.value


def _close(replies: Iterator[Reply]) -> None:
    """Ends a call's iterator (a generator: its transport then releases the connection)."""
    close = getattr(replies, 'close', None)
    if close is not None:
        close()


def run_sync(transport: Transport, op: Op[R]) -> R:
    """Drives OP over TRANSPORT to its result."""
    stream: Iterator[Reply] | None = None
    value: Any = None
    exc: BaseException | None = None
    try:
        while True:
            done, req = _advance(op, value, exc)
            if done:
                return req  # type: ignore[no-any-return]
            value, exc = None, None
            try:
                if isinstance(req, Call):
                    if stream is not None:
                        _close(stream)
                    stream = iter(transport.call(req.method, req.parameters, req.more))
                    value = next(stream)
                elif req is NEXT:
                    assert stream is not None
                    value = next(stream)
                elif isinstance(req, Emit):
                    req.fn(req.arg)
                elif isinstance(req, Sleep):
                    time.sleep(req.seconds)
            except Exception as e:  # noqa: BLE001 - thrown into the operation, which decides
                exc = e
    finally:
        if stream is not None:
            _close(stream)
        op.close()


async def run_async(transport: AsyncTransport, op: Op[R]) -> R:
    """Drives OP over TRANSPORT to its result; a callback may be a coroutine function."""
    stream: AsyncGenerator[Reply, None] | None = None
    value: Any = None
    exc: BaseException | None = None
    try:
        while True:
            done, req = _advance(op, value, exc)
            if done:
                return req  # type: ignore[no-any-return]
            value, exc = None, None
            try:
                if isinstance(req, Call):
                    if stream is not None:
                        await stream.aclose()
                    stream = transport.call(req.method, req.parameters, req.more)
                    value = await stream.__anext__()
                elif req is NEXT:
                    assert stream is not None
                    value = await stream.__anext__()
                elif isinstance(req, Emit):
                    r = req.fn(req.arg)
                    if inspect.isawaitable(r):
                        await r
                elif isinstance(req, Sleep):
                    await asyncio.sleep(req.seconds)
            except Exception as e:  # noqa: BLE001
                exc = e
    finally:
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.aclose()
        op.close()


def b64(data: bytes | str) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode()


def unb64(s: str | None) -> bytes:
    return base64.b64decode(s) if s else b''


def is_errno(e: BaseException, *names: str) -> bool:
    return isinstance(e, SandboxSystemError) and e.errno_name in names


# ---- arguments ---------------------------------------------------------------------

_UNITS = {'': 1, 'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30, 'T': 1 << 40}


def parse_size(size: int | str) -> int:
    """Bytes from an int, or a string such as '256M', '1.5G', '512K' (powers of 1024)."""
    if isinstance(size, bool) or not isinstance(size, (int, str)):
        raise TypeError(f'a size is an int of bytes or a string such as "256M", not {size!r}')
    if isinstance(size, int):
        return size
    m = re.fullmatch(r'\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*', size, re.I)
    if not m:
        raise ValueError(f'not a size: {size!r} (an int of bytes, or e.g. "256M", "1G")')
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def create_options(timeout: int | None = None, memory: int | str | None = None,
                   cpu: float | None = None, name: str | None = None, reuse: bool = False,
                   idle_timeout: int | None = None, disk: int | str | None = None,
                   tasks: int | None = None, ephemeral: bool = False,
                   options: dict[str, Any] | None = None, from_snapshot: str | None = None,
                   idle_action: str | None = None, allow_hosts: list[str] | None = None,
                   deny_hosts: list[str] | None = None, secrets: list[str] | None = None,
                   labels: dict[str, str] | None = None) -> dict[str, Any]:
    """CreateSandbox's options from the client's keyword arguments (cpu: CPUs, 0.5 = half;
    allow_hosts, deny_hosts: EgressAllow=, EgressDeny=; secrets: Secrets=; labels: Labels)."""
    o: dict[str, Any] = {}
    if labels is not None:
        if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in labels.items()):
            raise ValueError('labels: a dict of strings to strings, e.g. {"team": "ml"}')
        o['Labels'] = dict(labels)
    for key, hosts in (('EgressAllow', allow_hosts), ('EgressDeny', deny_hosts), ('Secrets', secrets)):
        if hosts is not None:
            if isinstance(hosts, str) or not all(isinstance(h, str) for h in hosts):
                raise ValueError(f'{key}: a list of rules (strings), e.g. ["api.example.com"]')
            o[key] = list(hosts)
    if from_snapshot is not None:
        o['FromSnapshot'] = from_snapshot
    if idle_action is not None:
        o['IdleAction'] = idle_action
    if timeout is not None:
        o['Timeout'] = int(math.ceil(timeout))
    if memory is not None:
        o['MemoryMax'] = parse_size(memory)
    if cpu is not None:
        o['CPUQuotaPerSecUSec'] = int(round(cpu * 1_000_000))
    if name is not None:
        o['Name'] = name
    if reuse:
        o['ReuseExisting'] = True
    if idle_timeout is not None:
        o['IdleTimeout'] = int(math.ceil(idle_timeout))
    if disk is not None:
        o['DiskMax'] = parse_size(disk)
    if tasks is not None:
        o['TasksMax'] = tasks
    if ephemeral:
        o['Ephemeral'] = True
    o.update(options or {})
    return o


def command_argv(cmd: str | list[str] | tuple[str, ...]) -> list[str]:
    """A string is a shell command line (sh -c); a list is the argv itself."""
    if isinstance(cmd, str):
        return ['sh', '-c', cmd]
    argv = list(cmd)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError('cmd is a string (run by sh -c) or a non-empty list of strings')
    return argv


def exec_timeout(timeout: float | None) -> int | None:
    """Seconds as Exec's TimeoutUSec: None the default (300 s), 0 the most (3600 s).
    Neither rounded (0.5 s stays half a second) nor clamped: sandboxd refuses what is out
    of its range, naming the bound."""
    if timeout is None:
        return None
    if timeout <= 0:
        return EXEC_TIMEOUT_MAX * 1_000_000
    return int(round(timeout * 1_000_000))


def exec_options(env: dict[str, str] | None = None, cwd: str | None = None,
                 timeout: float | None = None, stdin: bytes | str | None = None) -> dict[str, Any]:
    o: dict[str, Any] = {}
    if env:
        o['Environment'] = [f'{k}={v}' for k, v in env.items()]
    if cwd:
        o['WorkingDirectory'] = cwd
    t = exec_timeout(timeout)
    if t is not None:
        o['TimeoutUSec'] = t
    if stdin is not None:
        o['Stdin'] = b64(stdin)
    return o


# ---- operations ----------------------------------------------------------------------

def call(method: str, **parameters: Any) -> Op[dict[str, Any]]:
    """One call; returns its reply's parameters."""
    reply: Reply = yield Call(method, parameters)
    return reply.parameters


def create(template: str | None, options: dict[str, Any]) -> Op[str]:
    reply: Reply = yield Call('CreateSandbox', {'template': template, 'options': options or None})
    return str(reply.parameters['id'])


def get_info(sandbox_id: str) -> Op[SandboxInfo]:
    reply: Reply = yield Call('GetSandbox', {'id': sandbox_id})
    return SandboxInfo.from_reply(reply.parameters['sandbox'])


def connect(sandbox_id: str) -> Op[str]:
    """The sandbox's id, resumed first if it was paused."""
    info = yield from get_info(sandbox_id)
    if info.state == 'paused':
        yield Call('Resume', {'id': info.sandbox_id})
    return info.sandbox_id


def env_alias(envs: dict[str, str] | None, env: dict[str, str] | None) -> dict[str, str] | None:
    """create()'s envs=, or its old name env= (deprecated: commands.run() says envs=)."""
    if env is not None:
        if envs is not None:
            raise TypeError('give envs= (env= is its deprecated name), not both')
        warnings.warn('Sandbox.create(env=) is deprecated: use envs=', DeprecationWarning, stacklevel=3)
    return envs if envs is not None else env


def labels_alias(labels: dict[str, str] | None, metadata: dict[str, str] | None) -> dict[str, str] | None:
    """create()'s labels=, or metadata= (E2B's name for them); not both."""
    if labels is not None and metadata is not None:
        raise TypeError('give labels= or metadata= (the same), not both')
    return labels if labels is not None else metadata


def label_selectors(labels: dict[str, str] | list[str] | None) -> list[str] | None:
    """ListSandboxes' Label filter: {"k": "v"} (each label with that value) or selectors
    ["k=v", "k"] ("k": has the label, any value)."""
    if labels is None:
        return None
    if isinstance(labels, dict):
        return [f'{k}={v}' for k, v in labels.items()]
    if isinstance(labels, str) or not all(isinstance(s, str) for s in labels):
        raise ValueError('labels: a dict, or a list of selectors "KEY=VALUE" or "KEY"')
    return list(labels)


def list_sandboxes(labels: dict[str, str] | list[str] | None = None) -> Op[list[SandboxInfo]]:
    selectors = label_selectors(labels)
    reply: Reply = yield Call('ListSandboxes', {'filter': {'Label': selectors}} if selectors else {})
    return [SandboxInfo.from_reply(s) for s in reply.parameters.get('sandboxes', [])]


def list_ports(sandbox_id: str) -> Op[list[PortInfo]]:
    reply: Reply = yield Call('ListPorts', {'id': sandbox_id})
    return [PortInfo(p.get('address', ''), p.get('port', 0)) for p in reply.parameters.get('ports', [])]


def list_templates() -> Op[list[TemplateInfo]]:
    reply: Reply = yield Call('ListTemplates', {})
    return [TemplateInfo(t['name'], t.get('payload', ''), t.get('description', ''))
            for t in reply.parameters.get('templates', [])]


def get_quota() -> Op[QuotaInfo]:
    reply: Reply = yield Call('GetQuota', {})
    return QuotaInfo(reply.parameters.get('scope', ''),
                     tuple(QuotaEntry(q['what'], q.get('limit', 0), q.get('use', 0))
                           for q in reply.parameters.get('quota', [])))


def set_secret(name: str, value: str) -> Op[None]:
    if not isinstance(value, str):
        raise ValueError('a secret\'s value is a string')
    yield Call('SetSecret', {'name': name, 'value': value})


def list_secrets() -> Op[list[str]]:
    reply: Reply = yield Call('ListSecrets', {})
    return list(reply.parameters.get('names', []))


def remove_secret(name: str) -> Op[None]:
    yield Call('RemoveSecret', {'name': name})


def list_pools() -> Op[list[PoolInfo]]:
    reply: Reply = yield Call('ListPools', {})
    return [PoolInfo(p['template'], p.get('size', 0), p.get('ready', 0), p.get('starting', 0),
                     p.get('inUse', 0), p.get('recycle', False), p.get('recycled', 0), p.get('resetting', 0),
                     p.get('waiting', 0))
            for p in reply.parameters.get('pools', [])]


def set_timeout(sandbox_id: str, timeout: float, idle_timeout: float | None) -> Op[None]:
    if idle_timeout is None:      # keep the sandbox's own
        info = yield from get_info(sandbox_id)
        idle_timeout = info.idle_timeout
    yield Call('SetTimeout', {'id': sandbox_id, 'lifetimeSec': int(math.ceil(timeout)),
                              'idleSec': int(math.ceil(idle_timeout))})


class _Output:
    """One stream's bytes, and its callback fed with text as it comes (UTF-8 decoded
    incrementally: a character split between chunks is passed whole)."""

    def __init__(self, callback: OutputCallback | None) -> None:
        self.data = bytearray()
        self.callback = callback
        self.decoder = codecs.getincrementaldecoder('utf-8')(errors='replace')

    def add(self, chunk: bytes, final: bool = False) -> Emit | None:
        self.data += chunk
        if self.callback is None:
            return None
        text = self.decoder.decode(chunk, final)
        return Emit(self.callback, text) if text else None


def _streamed(reply: Reply, out: _Output, err: _Output) -> Generator[Request, Any, dict[str, Any]]:
    """The replies of a streaming call (Exec, Follow) from REPLY on: stdout and stderr to
    OUT and ERR as they come; the last reply's parameters."""
    while True:
        p = reply.parameters
        for stream, key in ((out, 'stdout'), (err, 'stderr')):
            if p.get(key):
                emit = stream.add(unb64(p[key]))
                if emit:
                    yield emit
        if not reply.continues:
            break
        reply = yield NEXT
    for stream in (out, err):
        emit = stream.add(b'', final=True)
        if emit:
            yield emit
    return p


def run_command(sandbox_id: str, argv: list[str], options: dict[str, Any],
                on_stdout: OutputCallback | None, on_stderr: OutputCallback | None) -> Op[CommandResult]:
    """Exec with "more": each chunk to its callback as it comes, then the result."""
    out, err = _Output(on_stdout), _Output(on_stderr)
    reply: Reply = yield Call('Exec', {'id': sandbox_id, 'argv': argv, 'options': options or None}, more=True)
    p = yield from _streamed(reply, out, err)
    return CommandResult.from_reply(p.get('exitStatus', -1), p.get('info') or {}, bytes(out.data),
                                    bytes(err.data),
                                    options['TimeoutUSec'] / 1e6 if 'TimeoutUSec' in options else None)


# How long start() looks for the pid of a process it started (the agent reports it as
# soon as it forked: milliseconds).
_PID_WAIT = 2.0
_PID_POLL = 0.005


def start(sandbox_id: str, argv: list[str], options: dict[str, Any]) -> Op[tuple[int, int]]:
    """Start, then the process's pid inside the sandbox: (sandboxd's id, pid; 0 if not
    known within _PID_WAIT)."""
    reply: Reply = yield Call('Start', {'id': sandbox_id, 'argv': argv, 'options': options or None})
    process = int(reply.parameters['process'])
    for _ in range(int(_PID_WAIT / _PID_POLL)):
        for p in (yield from list_processes(sandbox_id)):
            if p.process_id == process and (p.pid or p.state != 'running'):
                return process, p.pid
        yield Sleep(_PID_POLL)
    return process, 0


def process_of(sandbox_id: str, pid: int) -> Op[int]:
    """sandboxd's id of the background process whose pid in the sandbox is PID (a running
    one first: pids are reused); NoSuchProcess if there is none."""
    found = [p for p in (yield from list_processes(sandbox_id)) if p.pid == pid]
    found.sort(key=lambda p: p.state != 'running')
    if not found:
        raise error_from_reply(f'{INTERFACE}.NoSuchProcess', {'message': f'No process with pid {pid}.'})
    return found[0].process_id


def follow(sandbox_id: str, process: int, on_stdout: OutputCallback | None,
           on_stderr: OutputCallback | None) -> Op[None]:
    """Follow: each piece of output to its callback as the process writes it, to its end."""
    reply: Reply = yield Call('Follow', {'id': sandbox_id, 'process': process}, more=True)
    yield from _streamed(reply, _Output(on_stdout), _Output(on_stderr))


def watch_dir(sandbox_id: str, path: str, recursive: bool, on_event: Callable[[dict[str, Any]], Any],
              count: int | None) -> Op[int]:
    """WatchDirectory: each event ({"event", "path", "dir"}) to ON_EVENT as it happens, until
    COUNT of them (None: until the watch ends); how many came."""
    reply: Reply = yield Call('WatchDirectory', {'id': sandbox_id, 'path': path, 'recursive': recursive}, more=True)
    n = 0
    while True:
        event = reply.parameters.get('event')
        if event:
            n += 1
            yield Emit(on_event, event)
            if count is not None and n >= count:
                break
        if not reply.continues:
            break
        reply = yield NEXT
    return n


def send_stdin(sandbox_id: str, process: int, data: bytes | str) -> Op[None]:
    yield Call('WriteStdin', {'id': sandbox_id, 'process': process, 'data': b64(data)})


def close_stdin(sandbox_id: str, process: int) -> Op[None]:
    yield Call('CloseStdin', {'id': sandbox_id, 'process': process})


def wait(sandbox_id: str, process: int, timeout: float | None,
         on_stdout: OutputCallback | None, on_stderr: OutputCallback | None) -> Op[CommandResult]:
    """Waits for a background process, then reads what it wrote (ReadOutput: the newest
    OutputMax bytes of each stream), passed to the callbacks at once."""
    # Wait takes whole seconds (a wait, not the process's timeout); sandboxd checks the bound.
    t = 0 if not timeout else max(1, int(math.ceil(timeout)))
    reply: Reply = yield Call('Wait', {'id': sandbox_id, 'process': process, 'timeoutSec': t})
    status, info = reply.parameters['exitStatus'], reply.parameters.get('info') or {}
    reply = yield Call('ReadOutput', {'id': sandbox_id, 'process': process})
    out, err = _Output(on_stdout), _Output(on_stderr)
    for stream, key in ((out, 'stdout'), (err, 'stderr')):
        emit = stream.add(unb64(reply.parameters.get(key)), final=True)
        if emit:
            yield emit
    return CommandResult.from_reply(status, info, bytes(out.data), bytes(err.data))


def list_processes(sandbox_id: str) -> Op[list[ProcessInfo]]:
    reply: Reply = yield Call('ListProcesses', {'id': sandbox_id})
    return [ProcessInfo.from_reply(p) for p in reply.parameters.get('processes', [])]


def kill_process(sandbox_id: str, process: int | None, signal: int, pid: int | None = None) -> Op[bool]:
    """True if the process (sandboxd's id PROCESS, or the one whose pid is PID) was there
    to signal."""
    try:
        if process is None:
            process = yield from process_of(sandbox_id, pid or 0)
        yield Call('Signal', {'id': sandbox_id, 'process': process, 'signal': signal})
    except SandboxError as e:
        if e.name.endswith('.NoSuchProcess'):
            return False
        raise
    return True


def read_file(sandbox_id: str, path: str) -> Op[bytes]:
    """The whole file: one ReadFile while it is at most ReadFile's most (FILE_PART_MAX);
    a larger one (FileTooLarge) streams with Download, whose parts sandboxd never holds
    more than a few of."""
    try:
        reply: Reply = yield Call('ReadFile', {'id': sandbox_id, 'path': path})
        return unb64(reply.parameters.get('data'))
    except SandboxError as e:
        if not e.name.endswith('.FileTooLarge'):
            raise
    data = bytearray()
    reply = yield Call('Download', {'id': sandbox_id, 'path': path}, more=True)
    while True:
        data += unb64(reply.parameters.get('data'))
        if not reply.continues:
            return bytes(data)
        reply = yield NEXT


def write_file(sandbox_id: str, path: str, data: bytes, mode: int | None,
               part: int | None = WRITE_CHUNK) -> Op[int]:
    """Replaces the file (its parents created), in parts of PART bytes (None: whole);
    returns its size."""
    offset = 0
    part = part or max(1, len(data))
    while True:
        chunk = data[offset:offset + part]
        options: dict[str, Any] = {'CreateParents': True}
        if offset:
            options['Append'] = True
        if mode is not None:
            options['Mode'] = mode
        yield Call('WriteFile', {'id': sandbox_id, 'path': path, 'data': b64(chunk), 'options': options})
        offset += len(chunk)
        if offset >= len(data):
            return offset


def list_files(sandbox_id: str, path: str, depth: int) -> Op[list[EntryInfo]]:
    reply: Reply = yield Call('ListFiles', {'id': sandbox_id, 'path': path, 'depth': depth})
    return [EntryInfo.from_reply(path, e) for e in reply.parameters.get('entries', [])]


def stat(sandbox_id: str, path: str) -> Op[EntryInfo]:
    reply: Reply = yield Call('Stat', {'id': sandbox_id, 'path': path})
    return EntryInfo.from_reply('', reply.parameters['entry'])


def exists(sandbox_id: str, path: str) -> Op[bool]:
    try:
        yield Call('Stat', {'id': sandbox_id, 'path': path})
    except SandboxError as e:
        if is_errno(e, 'ENOENT', 'ENOTDIR'):
            return False
        raise
    return True


def make_dir(sandbox_id: str, path: str) -> Op[bool]:
    """Creates the directory and its missing parents; False if it was there already."""
    try:
        yield Call('MakeDirectory', {'id': sandbox_id, 'path': path, 'parents': False})
    except SandboxError as e:
        if is_errno(e, 'EEXIST'):
            return False
        if not is_errno(e, 'ENOENT'):
            raise
        yield Call('MakeDirectory', {'id': sandbox_id, 'path': path, 'parents': True})
    return True


def remove(sandbox_id: str, path: str) -> Op[None]:
    yield Call('Remove', {'id': sandbox_id, 'path': path, 'recursive': True})


def rename(sandbox_id: str, old: str, new: str) -> Op[str]:
    yield Call('Move', {'id': sandbox_id, 'path': old, 'to': new})
    return new


def release(sandbox_id: str) -> Op[bool]:
    """ReleaseSandbox: reset and kept for the caller (a template whose pool recycles):
    True; destroyed, or gone already: False. Where the transport has no ReleaseSandbox
    (sandboxd-http), it is destroyed."""
    try:
        reply: Reply = yield Call('ReleaseSandbox', {'id': sandbox_id})
    except SandboxError as e:
        if e.name.endswith('.NoSuchSandbox'):
            return False
        if not e.name.endswith('.NotSupported'):
            raise
        yield from destroy(sandbox_id)
        return False
    return bool(reply.parameters.get('recycled', False))


def destroy(sandbox_id: str) -> Op[bool]:
    """Destroys the sandbox; False if it was gone already."""
    try:
        yield Call('Destroy', {'id': sandbox_id})
    except SandboxError as e:
        if e.name.endswith('.NoSuchSandbox'):
            return False
        raise
    return True


# ---- snapshots (sandboxd-api(7), SNAPSHOTS) ---------------------------------------------

def snapshot(method: str, sandbox_id: str, include_tmp: bool) -> Op[str]:
    """Snapshot or Hibernate; the snapshot's id."""
    options = {'IncludeTmp': True} if include_tmp else None
    reply: Reply = yield Call(method, {'id': sandbox_id, 'options': options})
    return str(reply.parameters['snapshot']['id'])


def fork(sandbox_id: str, options: dict[str, Any]) -> Op[str]:
    reply: Reply = yield Call('Fork', {'id': sandbox_id, 'options': options or None})
    return str(reply.parameters['id'])


def wake(sandbox_id: str) -> Op[str]:
    reply: Reply = yield Call('Wake', {'id': sandbox_id})
    return str(reply.parameters['id'])


def list_snapshots() -> Op[list[SnapshotInfo]]:
    reply: Reply = yield Call('ListSnapshots', {})
    return [SnapshotInfo.from_reply(s) for s in reply.parameters.get('snapshots', [])]


def remove_snapshot(snapshot_id: str) -> Op[None]:
    yield Call('RemoveSnapshot', {'snapshot': snapshot_id})
