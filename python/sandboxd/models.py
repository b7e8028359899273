# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the client's calls return: plain dataclasses built from sandboxd's replies."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Tuple

__all__ = ['SandboxInfo', 'CommandResult', 'EntryInfo', 'ProcessInfo', 'TemplateInfo', 'PoolInfo', 'SnapshotInfo']


def _time(usec: Any) -> _dt.datetime | None:
    """µs since the epoch (0: none) as an aware datetime."""
    if not isinstance(usec, int) or usec <= 0:
        return None
    return _dt.datetime.fromtimestamp(usec / 1e6, tz=_dt.timezone.utc)


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox as sandboxd describes it (GetSandbox, ListSandboxes)."""

    sandbox_id: str
    template: str
    #: starting, running, paused, stopping or dead
    state: str
    #: uid of its owner
    owner: int = 0
    name: str = ''
    tenant: str = ''
    unit: str = ''
    created_at: _dt.datetime | None = None
    #: bytes
    memory: int = 0
    #: CPUs (0.5: half of one)
    cpu: float = 0.0
    tasks_max: int = 0
    #: bytes of each of /work and /tmp
    disk: int = 0
    #: lifetime in seconds (0: none), and when it ends (None: never)
    timeout: int = 0
    end_at: _dt.datetime | None = None
    #: seconds without a running command after which it is destroyed (0: never)
    idle_timeout: int = 0
    ephemeral: bool = False
    #: its labels (Labels), key to value
    labels: dict[str, str] = field(default_factory=dict, hash=False)

    @property
    def metadata(self) -> dict[str, str]:
        """Its labels, by E2B's name for them."""
        return self.labels

    @classmethod
    def from_reply(cls, s: dict[str, Any]) -> 'SandboxInfo':
        return cls(sandbox_id=s['id'], template=s.get('template', ''), state=s.get('state', ''),
                   owner=s.get('owner', 0), name=s.get('name') or '', tenant=s.get('tenant') or '',
                   unit=s.get('unit', ''), created_at=_time(s.get('createdAt')),
                   memory=s.get('memoryMax', 0), cpu=s.get('cpuQuotaPerSecUSec', 0) / 1e6,
                   tasks_max=s.get('tasksMax', 0), disk=s.get('diskMax', 0),
                   timeout=s.get('timeout', 0), end_at=_time(s.get('deadline')),
                   idle_timeout=s.get('idleTimeout', 0), ephemeral=bool(s.get('ephemeral')),
                   labels=dict(s.get('labels') or {}))


@dataclass
class CommandResult:
    """How a command ended, and what it wrote.

    ``exit_code`` is the exit status as a shell gives it: the process's exit code, or 128
    plus the signal that killed it (137 after a timeout or the OOM killer). ``error`` says
    in words why it did not exit by itself, else is None.
    """

    stdout: str = ''
    stderr: str = ''
    exit_code: int = 0
    error: str | None = None
    timed_out: bool = False
    oom_killed: bool = False
    #: the signal that ended it, 0 when it exited
    signal: int = 0
    #: wall time and CPU time in seconds, peak resident memory in bytes
    duration: float = 0.0
    cpu_time: float = 0.0
    max_rss: int = 0
    #: some output was dropped (more than the OutputMax sandboxd keeps)
    truncated: bool = False
    stdout_bytes: bytes = field(default=b'', repr=False)
    stderr_bytes: bytes = field(default=b'', repr=False)

    @classmethod
    def from_reply(cls, exit_status: int, info: dict[str, Any], stdout: bytes, stderr: bytes,
                   timeout: float | None = None) -> 'CommandResult':
        sig = info.get('signal', 0)
        error = None
        if info.get('timedOut'):
            error = f'timed out after {timeout:g} s' if timeout else 'timed out'
        elif info.get('oomKilled'):
            error = 'killed for using more memory than the sandbox has (OOM)'
        elif sig:
            error = f'killed by signal {sig}'
        return cls(stdout=stdout.decode(errors='replace'), stderr=stderr.decode(errors='replace'),
                   exit_code=exit_status, error=error, timed_out=bool(info.get('timedOut')),
                   oom_killed=bool(info.get('oomKilled')), signal=sig,
                   duration=info.get('durationUSec', 0) / 1e6, cpu_time=info.get('cpuUSec', 0) / 1e6,
                   max_rss=info.get('maxRSSBytes', 0), truncated=bool(info.get('truncated')),
                   stdout_bytes=stdout, stderr_bytes=stderr)


@dataclass(frozen=True)
class EntryInfo:
    """A file or directory in a sandbox (files.list)."""

    #: the last component of path
    name: str
    #: the path as given to files.list joined with the entry's path under it
    path: str
    #: file, dir, link, fifo, socket, char or block
    type: str
    size: int = 0
    #: permission bits
    mode: int = 0
    modified: _dt.datetime | None = None
    #: what a symlink points to ('' for others)
    symlink_target: str = ''

    @classmethod
    def from_reply(cls, base: str, e: dict[str, Any]) -> 'EntryInfo':
        rel = e.get('path', '')
        path = rel if rel.startswith('/') or base in ('', '.') else f'{base.rstrip("/")}/{rel}'
        return cls(name=rel.rstrip('/').rsplit('/', 1)[-1], path=path, type=e.get('type', ''),
                   size=e.get('size', 0), mode=e.get('mode', 0), modified=_time(e.get('mtime')),
                   symlink_target=e.get('target') or '')


@dataclass(frozen=True)
class ProcessInfo:
    """A background process (commands.list)."""

    #: its pid inside the sandbox (what commands.kill, send_stdin and connect take; 0 if not
    #: known yet)
    pid: int
    #: sandboxd's id of it (the execution id of the HTTP bridge)
    process_id: int
    cmd: list[str]
    #: running or exited
    state: str
    exit_status: int = 0

    @classmethod
    def from_reply(cls, p: dict[str, Any]) -> 'ProcessInfo':
        return cls(pid=p.get('pid', 0), process_id=p['process'], cmd=list(p.get('argv', [])),
                   state=p.get('state', ''), exit_status=p.get('exitStatus', 0))


@dataclass(frozen=True)
class PortInfo:
    """A TCP port something listens on inside a sandbox (ListPorts)."""

    #: as bound: "127.0.0.1", "0.0.0.0", "::", ...
    address: str
    port: int


@dataclass(frozen=True)
class QuotaEntry:
    """One item of a quota (sandboxd.conf(5), [OwnerQuota] and [TenantQuota])."""

    #: Sandboxes, MemoryMax, TasksMax, DiskMax, CPUQuotaPerSecUSec, Snapshots,
    #: SnapshotBytes or CreatesPerSecond
    what: str
    #: 0: no limit
    limit: int
    use: int


@dataclass(frozen=True)
class QuotaInfo:
    """Your quota on the node (GetQuota): whose it is and each item's limit and use."""

    #: "owner 1000" or "tenant acme"
    scope: str
    entries: Tuple[QuotaEntry, ...]

    def __getitem__(self, what: str) -> QuotaEntry:
        for e in self.entries:
            if e.what == what:
                return e
        raise KeyError(what)


@dataclass(frozen=True)
class TemplateInfo:
    """A template sandboxes are created from."""

    name: str
    #: bwrap or docker
    payload: str
    description: str = ''


@dataclass(frozen=True)
class PoolInfo:
    """A template's warm pool as sandboxd keeps it (ListPools)."""

    template: str
    #: sandboxes the pool keeps started
    size: int
    #: started and waiting to be handed out
    ready: int
    #: being started to refill it
    starting: int
    #: the template's sandboxes callers hold (the caller's own, unless it may manage all)
    in_use: int
    #: the pool recycles: released sandboxes are reset and kept for their owner
    recycle: bool = False
    #: released sandboxes kept now (counted as ``in_use`` is), and of those being reset
    recycled: int = 0
    resetting: int = 0
    #: creates waiting for one being reset
    waiting: int = 0


@dataclass(frozen=True)
class SnapshotInfo:
    """A filesystem snapshot as sandboxd keeps it (ListSnapshots; sandboxd-api(7),
    SNAPSHOTS): the files of a sandbox's /work (and /tmp with ``includes_tmp``)."""

    snapshot_id: str
    #: the sandbox it was taken of, its template and name
    source: str
    template: str = ''
    name: str = ''
    #: uid of its owner, and the tenant it belongs to
    owner: int = 0
    tenant: str = ''
    #: bytes stored (compressed), and the files' sizes added up (what a restore needs of disk)
    size: int = 0
    content_size: int = 0
    created_at: _dt.datetime | None = None
    #: the source's bytes of each of /work and /tmp
    disk: int = 0
    includes_tmp: bool = False
    #: taken by hibernate(): Sandbox.wake() brings the sandbox back from it
    hibernated: bool = False

    @classmethod
    def from_reply(cls, s: dict[str, Any]) -> 'SnapshotInfo':
        return cls(snapshot_id=s['id'], source=s.get('source', ''), template=s.get('template', ''),
                   name=s.get('name') or '', owner=s.get('owner', 0), tenant=s.get('tenant') or '',
                   size=s.get('size', 0), content_size=s.get('contentSize', 0),
                   created_at=_time(s.get('created')), disk=s.get('diskMax', 0),
                   includes_tmp=bool(s.get('includesTmp')), hibernated=bool(s.get('hibernated')))
