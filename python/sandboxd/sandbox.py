# SPDX-License-Identifier: LGPL-2.1-or-later
"""Sandboxes for blocking code: :class:`Sandbox`, its :class:`Commands` and :class:`Files`.

    from sandboxd import Sandbox
    with Sandbox.create("python", memory="256M", timeout=600) as sbx:
        print(sbx.commands.run("python3 -c 'print(6*7)'").stdout)   # 42
        sbx.files.write("data.txt", "hello")
        print(sbx.files.read("data.txt"))

Each call is a call of sandboxd's interface (``io.sandboxd.Sandbox``, sandboxd-api(7))
over a :class:`~sandboxd.transport.Transport`, by default the local varlink socket.
"""

from __future__ import annotations

import signal as _signal
import threading
from typing import Any, Callable, List, Literal, TypeVar, overload

from . import _ops
from . import contexts as _contexts
from .contexts import Context, Execution, ExecutionError, OutputMessage, Result
from ._base import CommandLine, CommandsBase, FilesBase, HandleBase, SandboxBase, instance_or_class
from .errors import SandboxError
from .models import (CommandResult, EntryInfo, PoolInfo, PortInfo, ProcessInfo, QuotaInfo, SandboxInfo, SnapshotInfo,
                     TemplateInfo)
from .transport import Transport, default_transport

R = TypeVar('R')

__all__ = ['Sandbox', 'Commands', 'Files', 'CommandHandle']


class CommandHandle(HandleBase['Sandbox']):
    """A command running in the background (``commands.run(..., background=True)``):
    ``pid`` is its pid inside the sandbox, ``process_id`` sandboxd's id of it."""

    _follower: threading.Thread | None = None

    def wait(self, timeout: float | None = None, on_stdout: _ops.OutputCallback | None = None,
             on_stderr: _ops.OutputCallback | None = None) -> CommandResult:
        """Waits until it ends (at most TIMEOUT seconds, else :class:`~sandboxd.StillRunning`)
        and returns its result, with the newest output it wrote (up to OutputMax, 1 MiB of
        each stream); the callbacks given here get that output once it ended (those given
        to ``run()`` had it live, all of it by the time this returns)."""
        r = self.sandbox._run(_ops.wait(self.sandbox.sandbox_id, self.process_id, timeout, on_stdout, on_stderr))
        if self._follower is not None:
            self._follower.join(_FOLLOW_JOIN)
        return r

    def kill(self, signal: int = _signal.SIGKILL) -> bool:
        """Sends SIGNAL (default SIGKILL) to it and what it started; False if it was gone."""
        return self.sandbox._run(_ops.kill_process(self.sandbox.sandbox_id, self.process_id, signal))

    def send_stdin(self, data: bytes | str) -> None:
        """Writes DATA to its input (started with ``stdin=True``)."""
        self.sandbox._run(_ops.send_stdin(self.sandbox.sandbox_id, self.process_id, data))

    def close_stdin(self) -> None:
        """Ends its input: it reads end of file."""
        self.sandbox._run(_ops.close_stdin(self.sandbox.sandbox_id, self.process_id))


# How long wait() lets the live callbacks catch up with the end of the process.
_FOLLOW_JOIN = 30.0


class Commands(CommandsBase['Sandbox']):
    """Running commands in a sandbox: ``sbx.commands``."""

    @overload
    def run(self, cmd: CommandLine, *, background: Literal[False] = False, timeout: float | None = None,
            on_stdout: _ops.OutputCallback | None = None, on_stderr: _ops.OutputCallback | None = None,
            envs: dict[str, str] | None = None, cwd: str | None = None,
            stdin: bytes | str | None = None) -> CommandResult: ...

    @overload
    def run(self, cmd: CommandLine, *, background: Literal[True], timeout: float | None = None,
            on_stdout: _ops.OutputCallback | None = None, on_stderr: _ops.OutputCallback | None = None,
            envs: dict[str, str] | None = None, cwd: str | None = None,
            stdin: bytes | str | bool | None = None) -> CommandHandle: ...

    def run(self, cmd: CommandLine, *, background: bool = False, timeout: float | None = None,
            on_stdout: _ops.OutputCallback | None = None, on_stderr: _ops.OutputCallback | None = None,
            envs: dict[str, str] | None = None, cwd: str | None = None,
            stdin: bytes | str | bool | None = None) -> CommandResult | CommandHandle:
        """Runs CMD (a string: a shell command line, run by ``sh -c``; a list: the argv)
        and returns its :class:`CommandResult` once it ended. A non-zero exit is not an
        exception: see ``exit_code``, ``timed_out``, ``oom_killed`` and ``error``.

        ``timeout``: seconds, fractions too (default 300; 0: the most, 3600); the command is
        killed then (``timed_out``, exit code 137). Beyond sandboxd's range: InvalidOption
        naming the bound, never clamped. ``on_stdout``/``on_stderr``: called
        with each piece of output (str) as the command writes it. ``envs``: variables over
        the sandbox's (and over those given to ``Sandbox.create``); ``cwd``: working
        directory (default /work); ``stdin``: its standard input.

        ``background=True`` starts it and returns a :class:`CommandHandle` at once
        (``timeout`` then: none unless given, the command is bounded by the sandbox's
        lifetime; the callbacks are called live, from a thread of their own, as it writes;
        ``stdin=True`` keeps its input open for ``send_stdin``).
        """
        sbx = self._sbx
        argv, options = self._prepare(cmd, background, timeout, envs, cwd, stdin)
        if not background:
            return sbx._run(_ops.run_command(sbx.sandbox_id, argv, options, on_stdout, on_stderr))
        handle = CommandHandle(sbx, *sbx._run(_ops.start(sbx.sandbox_id, argv, options)))
        if on_stdout or on_stderr:
            handle._follower = threading.Thread(
                target=sbx._run, args=(_ops.follow(sbx.sandbox_id, handle.process_id, on_stdout, on_stderr),),
                name=f'sandboxd-follow-{handle.process_id}', daemon=True)
            handle._follower.start()
        return handle

    def list(self) -> list[ProcessInfo]:
        """The background processes of the sandbox, running and exited."""
        return self._sbx._run(_ops.list_processes(self._sbx.sandbox_id))

    def kill(self, pid: int, signal: int = _signal.SIGKILL) -> bool:
        """Sends SIGNAL to the background process whose pid (in the sandbox) is PID; False
        if there is none."""
        return self._sbx._run(_ops.kill_process(self._sbx.sandbox_id, None, signal, pid=pid))

    def send_stdin(self, pid: int, data: bytes | str) -> None:
        """Writes DATA to the input of the background process PID (started with
        ``stdin=True``)."""
        sbx = self._sbx
        sbx._run(_ops.send_stdin(sbx.sandbox_id, sbx._run(_ops.process_of(sbx.sandbox_id, pid)), data))

    def close_stdin(self, pid: int) -> None:
        """Ends the input of the background process PID."""
        sbx = self._sbx
        sbx._run(_ops.close_stdin(sbx.sandbox_id, sbx._run(_ops.process_of(sbx.sandbox_id, pid))))

    def connect(self, pid: int) -> CommandHandle:
        """A handle of the background process PID (its pid in the sandbox)."""
        return CommandHandle(self._sbx, self._sbx._run(_ops.process_of(self._sbx.sandbox_id, pid)), pid)


class Files(FilesBase['Sandbox']):
    """The sandbox's files: ``sbx.files``. A relative path is from /work; every path is
    resolved inside the sandbox, by its own agent."""

    @overload
    def read(self, path: str, format: Literal['text'] = 'text') -> str: ...

    @overload
    def read(self, path: str, format: Literal['bytes']) -> bytes: ...

    def read(self, path: str, format: Literal['text', 'bytes'] = 'text') -> str | bytes:
        """The file's content: text (UTF-8) or, with ``format="bytes"``, bytes.
        A missing file raises FileNotFoundError (a :class:`~sandboxd.SandboxSystemError`)."""
        data = self._sbx._run(_ops.read_file(self._sbx.sandbox_id, path))
        return data if format == 'bytes' else data.decode(errors='replace')

    def write(self, path: str, data: str | bytes, mode: int | None = None) -> EntryInfo:
        """Writes the file (replacing it; missing parent directories are created)."""
        blob = self._blob(data)
        self._sbx._run(_ops.write_file(self._sbx.sandbox_id, path, blob, mode, self._sbx.transport.write_chunk))
        return self._sbx._run(_ops.stat(self._sbx.sandbox_id, path))

    def list(self, path: str = '.', depth: int = 1) -> list[EntryInfo]:
        """The entries under PATH, DEPTH levels down (1 to 16)."""
        return self._sbx._run(_ops.list_files(self._sbx.sandbox_id, path, depth))

    def watch_dir(self, path: str, on_event: Callable[[dict[str, Any]], Any], *, recursive: bool = False,
                  count: int | None = None) -> int:
        """Calls ON_EVENT with each change under PATH ({"event": "create"|"modify"|"delete"|
        "move_from"|"move_to"|"overflow", "path", "dir"}) as it happens (WatchDirectory,
        inotify in the sandbox), until COUNT events came (None: until the watch ends).
        Returns how many came."""
        return self._sbx._run(_ops.watch_dir(self._sbx.sandbox_id, path, recursive, on_event, count))

    def exists(self, path: str) -> bool:
        return self._sbx._run(_ops.exists(self._sbx.sandbox_id, path))

    def get_info(self, path: str) -> EntryInfo:
        """What PATH is (Stat): a symlink is followed, as by ``stat -L``; :meth:`list` shows
        the link itself."""
        return self._sbx._run(_ops.stat(self._sbx.sandbox_id, path))

    def remove(self, path: str) -> None:
        """Removes a file, or a directory with all it holds."""
        self._sbx._run(_ops.remove(self._sbx.sandbox_id, path))

    def rename(self, old_path: str, new_path: str) -> str:
        return self._sbx._run(_ops.rename(self._sbx.sandbox_id, old_path, new_path))

    def make_dir(self, path: str) -> bool:
        """Creates the directory and missing parents; False if it existed already."""
        return self._sbx._run(_ops.make_dir(self._sbx.sandbox_id, path))


class Sandbox(SandboxBase[Transport]):
    """A sandbox of sandboxd, for blocking code. Get one with :meth:`create` or
    :meth:`connect`; as a context manager it is killed when the block ends.

    ``sandbox_id``: its id; ``commands``: :class:`Commands`; ``files``: :class:`Files`;
    ``envs``: variables given to every command run through this object.
    """

    def __init__(self, sandbox_id: str, *, transport: Transport | None = None,
                 envs: dict[str, str] | None = None) -> None:
        super().__init__(sandbox_id, transport, envs, default_transport)
        self.commands = Commands(self)
        self.files = Files(self)

    def _run(self, op: _ops.Op[R]) -> R:
        return _ops.run_sync(self.transport, op)

    @classmethod
    def create(cls, template: str | None = None, *, timeout: int | None = None,
               memory: int | str | None = None, cpu: float | None = None,
               envs: dict[str, str] | None = None, name: str | None = None, reuse: bool = False,
               idle_timeout: int | None = None, disk: int | str | None = None,
               tasks: int | None = None, options: dict[str, object] | None = None,
               from_snapshot: str | None = None, idle_action: str | None = None,
               allow_hosts: list[str] | None = None, deny_hosts: list[str] | None = None,
               secrets: list[str] | None = None,
               transport: Transport | None = None, env: dict[str, str] | None = None,
               labels: dict[str, str] | None = None, metadata: dict[str, str] | None = None) -> 'Sandbox':
        """Creates a sandbox from TEMPLATE (default: sandboxd's, ``shell``) and returns
        once it runs.

        ``timeout``: its lifetime in seconds (default none: until killed); ``memory``:
        bytes, or a string such as ``"256M"``; ``cpu``: CPUs (``0.5``: half of one);
        ``envs``: variables for every command run through this object (``env=``, its
        old name, still works and warns: DeprecationWarning); ``name``: a name
        (unique among your live sandboxes; ``reuse=True`` returns the running one of
        that name instead of failing); ``idle_timeout``: seconds without a running
        command after which it is destroyed; ``disk``: size of /work and of /tmp;
        ``tasks``: most processes; ``options``: any other CreateSandbox option by its
        sandboxd name. A sandbox with the template's own limits comes from the
        template's warm pool if it has one. ``from_snapshot``: a snapshot id
        (:meth:`snapshot`, :meth:`list_snapshots`): it starts with the snapshot's files
        (:class:`~sandboxd.SnapshotTooLarge` if they exceed ``disk``);
        ``idle_action``: what ``idle_timeout`` does: ``"destroy"`` (the default),
        ``"pause"`` or ``"hibernate"`` (:meth:`wake` brings it back). ``allow_hosts``:
        the hosts it may reach through sandboxd's egress proxy (``"api.example.com"``,
        ``"*.example.org"``, ``"host:8443"``, an address or CIDR; sandboxd's EgressAllow=,
        replacing the template's; ``[]``: no network); ``deny_hosts``: refused even so
        (EgressDeny=). ``secrets``: secrets of yours (:meth:`set_secret`) bound into it,
        each ``"NAME"`` (the environment variable NAME), ``"NAME:file"``
        (/run/secrets/NAME) or ``"NAME@HOST:HEADER"`` (added by the egress proxy to each
        request for https://HOST: the sandbox never holds it; docs/SECRETS.md).
        ``labels`` (or ``metadata``, E2B's name): key/value labels to find it by
        (:meth:`list` with ``labels=``), keys as Kubernetes' label keys, values text.
        """
        transport = transport or default_transport()
        envs = _ops.env_alias(envs, env)
        o = _ops.create_options(timeout, memory, cpu, name, reuse, idle_timeout, disk, tasks, options=options,
                                from_snapshot=from_snapshot, idle_action=idle_action, allow_hosts=allow_hosts,
                                deny_hosts=deny_hosts, secrets=secrets, labels=_ops.labels_alias(labels, metadata))
        sandbox_id = _ops.run_sync(transport, _ops.create(template, o))
        return cls(sandbox_id, transport=transport, envs=envs)

    @classmethod
    def connect(cls, sandbox_id: str, *, envs: dict[str, str] | None = None,
                transport: Transport | None = None, env: dict[str, str] | None = None) -> 'Sandbox':
        """The sandbox SANDBOX_ID (an id, or the name of one of yours), resumed if it was
        paused (:meth:`pause`); :class:`~sandboxd.NoSuchSandbox` if there is none."""
        transport = transport or default_transport()
        envs = _ops.env_alias(envs, env)
        return cls(_ops.run_sync(transport, _ops.connect(sandbox_id)), transport=transport, envs=envs)

    @staticmethod
    def list(*, transport: Transport | None = None,
             labels: dict[str, str] | list[str] | None = None) -> list[SandboxInfo]:
        """The sandboxes you may see: your own (all of them, for root); with ``labels``
        only those that have them (``{"team": "ml"}``, or selectors ``["team=ml", "env"]``,
        "env" for any value)."""
        return _ops.run_sync(transport or default_transport(), _ops.list_sandboxes(labels))

    @staticmethod
    def templates(*, transport: Transport | None = None) -> List[TemplateInfo]:
        """The templates sandboxes can be created from."""
        return _ops.run_sync(transport or default_transport(), _ops.list_templates())

    @staticmethod
    def quota(*, transport: Transport | None = None) -> QuotaInfo:
        """Your quota on the node and what you use of it (GetQuota); beyond it, creates raise
        :class:`~sandboxd.QuotaExceeded`."""
        return _ops.run_sync(transport or default_transport(), _ops.get_quota())

    @staticmethod
    def set_secret(name: str, value: str, *, transport: Transport | None = None) -> None:
        """Stores a secret of yours (of your tenant, over HTTP), replacing one of that name;
        sandboxes bind it by name (``secrets=``). Its value is never returned."""
        _ops.run_sync(transport or default_transport(), _ops.set_secret(name, value))

    @staticmethod
    def list_secrets(*, transport: Transport | None = None) -> List[str]:
        """The names of your secrets."""
        return _ops.run_sync(transport or default_transport(), _ops.list_secrets())

    @staticmethod
    def remove_secret(name: str, *, transport: Transport | None = None) -> None:
        """Removes a secret of yours."""
        _ops.run_sync(transport or default_transport(), _ops.remove_secret(name))

    @staticmethod
    def pools(*, transport: Transport | None = None) -> List[PoolInfo]:
        """The templates' warm pools: size, ready, starting and in use (ListPools)."""
        return _ops.run_sync(transport or default_transport(), _ops.list_pools())

    def get_info(self) -> SandboxInfo:
        return self._run(_ops.get_info(self.sandbox_id))

    def ports(self) -> List[PortInfo]:
        """What listens on TCP inside the sandbox (ListPorts); reach one through
        sandboxd-http's /api/v1/sessions/ID/ports/PORT/ or ``sandboxctl port-forward``."""
        return self._run(_ops.list_ports(self.sandbox_id))

    def is_running(self) -> bool:
        """Whether it exists and is running (not paused, stopping or gone)."""
        try:
            return self.get_info().state == 'running'
        except SandboxError as e:
            if e.name.endswith('.NoSuchSandbox'):
                return False
            raise

    def pause(self) -> str:
        """Freezes every process of the sandbox (commands are refused until resume, or
        :meth:`connect` with the id this returns). Its lifetime stands still meanwhile."""
        self._run(_ops.call('Pause', id=self.sandbox_id))
        return self.sandbox_id

    def resume(self) -> None:
        self._run(_ops.call('Resume', id=self.sandbox_id))

    def set_timeout(self, timeout: float, idle_timeout: float | None = None) -> None:
        """Destroys the sandbox TIMEOUT seconds from now (0: never), and after
        IDLE_TIMEOUT seconds without a running command (default: as it was; 0: never)."""
        self._run(_ops.set_timeout(self.sandbox_id, timeout, idle_timeout))

    # ---- code contexts (docs/CONTEXTS.md) ----

    def run_code(self, code: str, *, context: 'Context | str | None' = None, language: str | None = None,
                 timeout: float | None = None, output_max: int | None = None,
                 on_stdout: Callable[[OutputMessage], Any] | None = None,
                 on_stderr: Callable[[OutputMessage], Any] | None = None,
                 on_result: Callable[[Result], Any] | None = None,
                 on_error: Callable[[ExecutionError], Any] | None = None) -> Execution:
        """Runs CODE as a cell of a stateful code context (CONTEXT, or the sandbox's default
        one of LANGUAGE: python, javascript): variables last from cell to cell. Returns its
        :class:`Execution`; the callbacks see its output and results as they come. A
        TIMEOUT interrupts the cell (KeyboardInterrupt; the context keeps its state).
        Raises ContextLost if the kernel ended meanwhile (killed for memory)."""
        return self._run(_contexts.run_code(self.sandbox_id, code, _contexts.context_id(context), language, timeout,
                                            output_max, on_stdout, on_stderr, on_result, on_error))

    def create_code_context(self, language: str = 'python', *, cwd: str | None = None,
                            envs: dict[str, str] | None = None) -> Context:
        """A new code context (its own kernel, its own variables), once it is ready."""
        return self._run(_contexts.create_context(self.sandbox_id, language, cwd, envs))

    def list_code_contexts(self) -> List[Context]:
        return self._run(_contexts.list_contexts(self.sandbox_id))

    def restart_code_context(self, context: 'Context | str') -> Context:
        """A fresh kernel for CONTEXT (its state gone), once it is ready."""
        return self._run(_contexts.restart_context(self.sandbox_id, str(_contexts.context_id(context))))

    def interrupt_code_context(self, context: 'Context | str') -> None:
        """Interrupts CONTEXT's running cell (it ends with KeyboardInterrupt)."""
        self._run(_contexts.context_call('InterruptContext', self.sandbox_id, str(_contexts.context_id(context))))

    def remove_code_context(self, context: 'Context | str') -> None:
        self._run(_contexts.context_call('RemoveContext', self.sandbox_id, str(_contexts.context_id(context))))

    # ---- snapshots (sandboxd-api(7), SNAPSHOTS) ----

    def snapshot(self, include_tmp: bool = False) -> str:
        """Saves the files of /work (and /tmp with INCLUDE_TMP) as a snapshot and returns
        its id; the sandbox runs on (its processes stand still meanwhile). Memory and
        processes are not kept. :class:`~sandboxd.SnapshotTooLarge` when the files exceed
        the sandbox's disk size, :class:`~sandboxd.QuotaExceeded` beyond your quota."""
        return self._run(_ops.snapshot('Snapshot', self.sandbox_id, include_tmp))

    def fork(self, *, name: str | None = None, timeout: int | None = None, memory: int | str | None = None,
             cpu: float | None = None, idle_timeout: int | None = None, idle_action: str | None = None,
             disk: int | str | None = None, tasks: int | None = None, env: dict[str, str] | None = None,
             options: dict[str, object] | None = None) -> 'Sandbox':
        """A new sandbox with a copy of this one's files (which runs on, unchanged); each
        then goes its own way. The arguments are :meth:`create`'s; those not given are
        this sandbox's (``name``: none unless given; ``env``: this object's)."""
        o = _ops.create_options(timeout, memory, cpu, name, False, idle_timeout, disk, tasks, options=options,
                                idle_action=idle_action)
        sandbox_id = self._run(_ops.fork(self.sandbox_id, o))
        return type(self)(sandbox_id, transport=self.transport, envs=self.envs if env is None else env)

    def hibernate(self, include_tmp: bool = False) -> str:
        """A snapshot (as :meth:`snapshot`), then the sandbox destroyed; returns the
        snapshot's id. :meth:`wake` with its id or name brings it back."""
        return self._run(_ops.snapshot('Hibernate', self.sandbox_id, include_tmp))

    @classmethod
    def wake(cls, sandbox_id: str, *, env: dict[str, str] | None = None,
             transport: Transport | None = None) -> 'Sandbox':
        """A hibernated sandbox (its id or name) started again, with the same id, name and
        files; :class:`~sandboxd.NoSuchSandbox` if none of yours is hibernated so."""
        transport = transport or default_transport()
        woken = _ops.run_sync(transport, _ops.wake(sandbox_id))
        return cls(woken, transport=transport, envs=env)

    @staticmethod
    def list_snapshots(*, transport: Transport | None = None) -> List[SnapshotInfo]:
        """Your snapshots (all of them, for root), hibernated sandboxes' included, oldest first."""
        return _ops.run_sync(transport or default_transport(), _ops.list_snapshots())

    @staticmethod
    def remove_snapshot(snapshot_id: str, *, transport: Transport | None = None) -> None:
        """Deletes a snapshot (a hibernated sandbox's too: it cannot be woken after);
        :class:`~sandboxd.NoSuchSnapshot` if there is none of yours."""
        _ops.run_sync(transport or default_transport(), _ops.remove_snapshot(snapshot_id))

    def _kill(self) -> bool:
        """Destroys the sandbox and returns once it is gone; False if it was gone already.
        ``Sandbox.kill(sandbox_id, transport=None)`` destroys one by its id or name."""
        return self._run(_ops.destroy(self.sandbox_id))

    @classmethod
    def _kill_by_id(cls, sandbox_id: str, *, transport: Transport | None = None) -> bool:
        return _ops.run_sync(transport or default_transport(), _ops.destroy(sandbox_id))

    kill = instance_or_class(_kill, _kill_by_id)

    def release(self) -> bool:
        """Done with the sandbox: of a template whose pool recycles it is reset (every
        process killed, /work, /tmp and /dev/shm empty) and kept for you - the next
        create of the template takes it - and this returns True; otherwise it is
        destroyed (False). Either way it is no longer yours."""
        return self._run(_ops.release(self.sandbox_id))

    def __enter__(self) -> 'Sandbox':
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
