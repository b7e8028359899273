# SPDX-License-Identifier: LGPL-2.1-or-later
"""Sandboxes for asyncio code: :class:`AsyncSandbox`, the same API as
:class:`~sandboxd.Sandbox` with each call a coroutine.

    from sandboxd import AsyncSandbox
    async with await AsyncSandbox.create("python") as sbx:
        r = await sbx.commands.run("python3 -c 'print(6*7)'", on_stdout=print)
        await sbx.files.write("data.txt", "hello")

Each call is a call of sandboxd's interface (``io.sandboxd.Sandbox``, sandboxd-api(7))
over an :class:`~sandboxd.transport.AsyncTransport`, by default the local varlink socket.
"""

from __future__ import annotations

import asyncio

import signal as _signal
from typing import Any, Callable, List, Literal, TypeVar, overload

from . import _ops
from . import contexts as _contexts
from .contexts import Context, Execution, ExecutionError, OutputMessage, Result
from ._base import CommandLine, CommandsBase, FilesBase, HandleBase, SandboxBase, instance_or_class
from .errors import SandboxError
from .models import (CommandResult, EntryInfo, PoolInfo, PortInfo, ProcessInfo, QuotaInfo, SandboxInfo, SnapshotInfo,
                     TemplateInfo)
from .transport import AsyncTransport, default_async_transport

R = TypeVar('R')

__all__ = ['AsyncSandbox', 'AsyncCommands', 'AsyncFiles', 'AsyncCommandHandle']


class AsyncCommandHandle(HandleBase['AsyncSandbox']):
    """A command running in the background (``commands.run(..., background=True)``):
    ``pid`` is its pid inside the sandbox, ``process_id`` sandboxd's id of it."""

    _follower: asyncio.Task[None] | None = None

    async def wait(self, timeout: float | None = None, on_stdout: _ops.OutputCallback | None = None,
             on_stderr: _ops.OutputCallback | None = None) -> CommandResult:
        """Waits until it ends (at most TIMEOUT seconds, else :class:`~sandboxd.StillRunning`)
        and returns its result, with the newest output it wrote (up to OutputMax, 1 MiB of
        each stream); the callbacks get that output once it ended."""
        r = await self.sandbox._run(_ops.wait(self.sandbox.sandbox_id, self.process_id, timeout, on_stdout,
                                              on_stderr))
        if self._follower is not None:
            await asyncio.wait_for(asyncio.shield(self._follower), 30.0)
        return r

    async def kill(self, signal: int = _signal.SIGKILL) -> bool:
        """Sends SIGNAL (default SIGKILL) to it and what it started; False if it was gone."""
        return await self.sandbox._run(_ops.kill_process(self.sandbox.sandbox_id, self.process_id, signal))

    async def send_stdin(self, data: bytes | str) -> None:
        """Writes DATA to its input (started with ``stdin=True``)."""
        await self.sandbox._run(_ops.send_stdin(self.sandbox.sandbox_id, self.process_id, data))

    async def close_stdin(self) -> None:
        """Ends its input: it reads end of file."""
        await self.sandbox._run(_ops.close_stdin(self.sandbox.sandbox_id, self.process_id))


class AsyncCommands(CommandsBase['AsyncSandbox']):
    """Running commands in a sandbox: ``sbx.commands``."""

    @overload
    async def run(self, cmd: CommandLine, *, background: Literal[False] = False, timeout: float | None = None,
            on_stdout: _ops.OutputCallback | None = None, on_stderr: _ops.OutputCallback | None = None,
            envs: dict[str, str] | None = None, cwd: str | None = None,
            stdin: bytes | str | None = None) -> CommandResult: ...

    @overload
    async def run(self, cmd: CommandLine, *, background: Literal[True], timeout: float | None = None,
            on_stdout: _ops.OutputCallback | None = None, on_stderr: _ops.OutputCallback | None = None,
            envs: dict[str, str] | None = None, cwd: str | None = None,
            stdin: bytes | str | None = None) -> AsyncCommandHandle: ...

    async def run(self, cmd: CommandLine, *, background: bool = False, timeout: float | None = None,
            on_stdout: _ops.OutputCallback | None = None, on_stderr: _ops.OutputCallback | None = None,
            envs: dict[str, str] | None = None, cwd: str | None = None,
            stdin: bytes | str | bool | None = None) -> CommandResult | AsyncCommandHandle:
        """Runs CMD, as :meth:`sandboxd.Commands.run` does (the same arguments); the
        callbacks may also be coroutine functions. ``background=True`` returns an
        :class:`AsyncCommandHandle`."""
        sbx = self._sbx
        argv, options = self._prepare(cmd, background, timeout, envs, cwd, stdin)
        if background:
            handle = AsyncCommandHandle(sbx, *await sbx._run(_ops.start(sbx.sandbox_id, argv, options)))
            if on_stdout or on_stderr:
                handle._follower = asyncio.create_task(
                    sbx._run(_ops.follow(sbx.sandbox_id, handle.process_id, on_stdout, on_stderr)))
            return handle
        return await sbx._run(_ops.run_command(sbx.sandbox_id, argv, options, on_stdout, on_stderr))

    async def list(self) -> list[ProcessInfo]:
        """The background processes of the sandbox, running and exited."""
        return await self._sbx._run(_ops.list_processes(self._sbx.sandbox_id))

    async def kill(self, pid: int, signal: int = _signal.SIGKILL) -> bool:
        """Sends SIGNAL to the background process whose pid (in the sandbox) is PID; False
        if there is none."""
        return await self._sbx._run(_ops.kill_process(self._sbx.sandbox_id, None, signal, pid=pid))

    async def send_stdin(self, pid: int, data: bytes | str) -> None:
        """Writes DATA to the input of the background process PID (``stdin=True``)."""
        sbx = self._sbx
        await sbx._run(_ops.send_stdin(sbx.sandbox_id, await sbx._run(_ops.process_of(sbx.sandbox_id, pid)), data))

    async def close_stdin(self, pid: int) -> None:
        """Ends the input of the background process PID."""
        sbx = self._sbx
        await sbx._run(_ops.close_stdin(sbx.sandbox_id, await sbx._run(_ops.process_of(sbx.sandbox_id, pid))))

    async def connect(self, pid: int) -> AsyncCommandHandle:
        """A handle of the background process PID (its pid in the sandbox)."""
        return AsyncCommandHandle(self._sbx, await self._sbx._run(_ops.process_of(self._sbx.sandbox_id, pid)), pid)


class AsyncFiles(FilesBase['AsyncSandbox']):
    """The sandbox's files: ``sbx.files``. A relative path is from /work; every path is
    resolved inside the sandbox, by its own agent."""

    @overload
    async def read(self, path: str, format: Literal['text'] = 'text') -> str: ...

    @overload
    async def read(self, path: str, format: Literal['bytes']) -> bytes: ...

    async def read(self, path: str, format: Literal['text', 'bytes'] = 'text') -> str | bytes:
        """The file's content: text (UTF-8) or, with ``format="bytes"``, bytes.
        A missing file raises FileNotFoundError (a :class:`~sandboxd.SandboxSystemError`)."""
        data = await self._sbx._run(_ops.read_file(self._sbx.sandbox_id, path))
        return data if format == 'bytes' else data.decode(errors='replace')

    async def write(self, path: str, data: str | bytes, mode: int | None = None) -> EntryInfo:
        """Writes the file (replacing it; missing parent directories are created)."""
        blob = self._blob(data)
        await self._sbx._run(_ops.write_file(self._sbx.sandbox_id, path, blob, mode, self._sbx.transport.write_chunk))
        return await self._sbx._run(_ops.stat(self._sbx.sandbox_id, path))

    async def list(self, path: str = '.', depth: int = 1) -> list[EntryInfo]:
        """The entries under PATH, DEPTH levels down (1 to 16)."""
        return await self._sbx._run(_ops.list_files(self._sbx.sandbox_id, path, depth))

    async def exists(self, path: str) -> bool:
        return await self._sbx._run(_ops.exists(self._sbx.sandbox_id, path))

    async def get_info(self, path: str) -> EntryInfo:
        """What PATH is (Stat): a symlink is followed, as by ``stat -L``; :meth:`list` shows
        the link itself."""
        return await self._sbx._run(_ops.stat(self._sbx.sandbox_id, path))

    async def remove(self, path: str) -> None:
        """Removes a file, or a directory with all it holds."""
        await self._sbx._run(_ops.remove(self._sbx.sandbox_id, path))

    async def rename(self, old_path: str, new_path: str) -> str:
        return await self._sbx._run(_ops.rename(self._sbx.sandbox_id, old_path, new_path))

    async def make_dir(self, path: str) -> bool:
        """Creates the directory and missing parents; False if it existed already."""
        return await self._sbx._run(_ops.make_dir(self._sbx.sandbox_id, path))


class AsyncSandbox(SandboxBase[AsyncTransport]):
    """A sandbox of sandboxd, for asyncio code. Get one with :meth:`create` or
    :meth:`connect`; as a context manager it is killed when the block ends.

    ``sandbox_id``: its id; ``commands``: :class:`AsyncCommands`; ``files``: :class:`AsyncFiles`;
    ``envs``: variables given to every command run through this object.
    """

    def __init__(self, sandbox_id: str, *, transport: AsyncTransport | None = None,
                 envs: dict[str, str] | None = None) -> None:
        super().__init__(sandbox_id, transport, envs, default_async_transport)
        self.commands = AsyncCommands(self)
        self.files = AsyncFiles(self)

    async def _run(self, op: _ops.Op[R]) -> R:
        return await _ops.run_async(self.transport, op)

    @classmethod
    async def create(cls, template: str | None = None, *, timeout: int | None = None,
               memory: int | str | None = None, cpu: float | None = None,
               envs: dict[str, str] | None = None, name: str | None = None, reuse: bool = False,
               idle_timeout: int | None = None, disk: int | str | None = None,
               tasks: int | None = None, options: dict[str, object] | None = None,
               from_snapshot: str | None = None, idle_action: str | None = None,
               allow_hosts: list[str] | None = None, deny_hosts: list[str] | None = None,
               secrets: list[str] | None = None,
               transport: AsyncTransport | None = None, env: dict[str, str] | None = None,
               labels: dict[str, str] | None = None, metadata: dict[str, str] | None = None) -> 'AsyncSandbox':
        """Creates a sandbox, as :meth:`sandboxd.Sandbox.create` does (the same arguments),
        and returns an :class:`AsyncSandbox` once it runs."""
        transport = transport or default_async_transport()
        envs = _ops.env_alias(envs, env)
        o = _ops.create_options(timeout, memory, cpu, name, reuse, idle_timeout, disk, tasks, options=options,
                                from_snapshot=from_snapshot, idle_action=idle_action, allow_hosts=allow_hosts,
                                deny_hosts=deny_hosts, secrets=secrets, labels=_ops.labels_alias(labels, metadata))
        sandbox_id = await _ops.run_async(transport, _ops.create(template, o))
        return cls(sandbox_id, transport=transport, envs=envs)

    @classmethod
    async def connect(cls, sandbox_id: str, *, envs: dict[str, str] | None = None,
                transport: AsyncTransport | None = None, env: dict[str, str] | None = None) -> 'AsyncSandbox':
        """The sandbox SANDBOX_ID (an id, or the name of one of yours), resumed if it was
        paused; :class:`~sandboxd.NoSuchSandbox` if there is none."""
        transport = transport or default_async_transport()
        envs = _ops.env_alias(envs, env)
        return cls(await _ops.run_async(transport, _ops.connect(sandbox_id)), transport=transport, envs=envs)

    @staticmethod
    async def list(*, transport: AsyncTransport | None = None,
                   labels: dict[str, str] | list[str] | None = None) -> list[SandboxInfo]:
        """The sandboxes you may see, as :meth:`sandboxd.Sandbox.list` (``labels`` too)."""
        return await _ops.run_async(transport or default_async_transport(), _ops.list_sandboxes(labels))

    @staticmethod
    async def templates(*, transport: AsyncTransport | None = None) -> List[TemplateInfo]:
        """The templates sandboxes can be created from."""
        return await _ops.run_async(transport or default_async_transport(), _ops.list_templates())

    @staticmethod
    async def quota(*, transport: AsyncTransport | None = None) -> QuotaInfo:
        """Your quota on the node and what you use of it (GetQuota)."""
        return await _ops.run_async(transport or default_async_transport(), _ops.get_quota())

    @staticmethod
    async def set_secret(name: str, value: str, *, transport: AsyncTransport | None = None) -> None:
        """Stores a secret of yours, as :meth:`sandboxd.Sandbox.set_secret` does."""
        await _ops.run_async(transport or default_async_transport(), _ops.set_secret(name, value))

    @staticmethod
    async def list_secrets(*, transport: AsyncTransport | None = None) -> List[str]:
        """The names of your secrets."""
        return await _ops.run_async(transport or default_async_transport(), _ops.list_secrets())

    @staticmethod
    async def remove_secret(name: str, *, transport: AsyncTransport | None = None) -> None:
        """Removes a secret of yours."""
        await _ops.run_async(transport or default_async_transport(), _ops.remove_secret(name))

    @staticmethod
    async def pools(*, transport: AsyncTransport | None = None) -> List[PoolInfo]:
        """The templates' warm pools: size, ready, starting and in use (ListPools)."""
        return await _ops.run_async(transport or default_async_transport(), _ops.list_pools())

    async def ports(self) -> List[PortInfo]:
        """What listens on TCP inside the sandbox (ListPorts)."""
        return await self._run(_ops.list_ports(self.sandbox_id))

    async def get_info(self) -> SandboxInfo:
        return await self._run(_ops.get_info(self.sandbox_id))

    async def is_running(self) -> bool:
        """Whether it exists and is running (not paused, stopping or gone)."""
        try:
            return (await self.get_info()).state == 'running'
        except SandboxError as e:
            if e.name.endswith('.NoSuchSandbox'):
                return False
            raise

    async def pause(self) -> str:
        """Freezes every process of the sandbox; returns its id (for :meth:`connect`)."""
        await self._run(_ops.call('Pause', id=self.sandbox_id))
        return self.sandbox_id

    async def resume(self) -> None:
        await self._run(_ops.call('Resume', id=self.sandbox_id))

    async def set_timeout(self, timeout: float, idle_timeout: float | None = None) -> None:
        """Destroys the sandbox TIMEOUT seconds from now (0: never), and after
        IDLE_TIMEOUT seconds without a running command (default: as it was; 0: never)."""
        await self._run(_ops.set_timeout(self.sandbox_id, timeout, idle_timeout))

    # ---- code contexts (docs/CONTEXTS.md): as Sandbox's; a callback may be a coroutine ----

    async def run_code(self, code: str, *, context: 'Context | str | None' = None, language: str | None = None,
                       timeout: float | None = None, output_max: int | None = None,
                       on_stdout: Callable[[OutputMessage], Any] | None = None,
                       on_stderr: Callable[[OutputMessage], Any] | None = None,
                       on_result: Callable[[Result], Any] | None = None,
                       on_error: Callable[[ExecutionError], Any] | None = None) -> Execution:
        return await self._run(_contexts.run_code(self.sandbox_id, code, _contexts.context_id(context), language,
                                                  timeout, output_max, on_stdout, on_stderr, on_result, on_error))

    async def create_code_context(self, language: str = 'python', *, cwd: str | None = None,
                                  envs: dict[str, str] | None = None) -> Context:
        return await self._run(_contexts.create_context(self.sandbox_id, language, cwd, envs))

    async def list_code_contexts(self) -> List[Context]:
        return await self._run(_contexts.list_contexts(self.sandbox_id))

    async def restart_code_context(self, context: 'Context | str') -> Context:
        return await self._run(_contexts.restart_context(self.sandbox_id, str(_contexts.context_id(context))))

    async def interrupt_code_context(self, context: 'Context | str') -> None:
        await self._run(_contexts.context_call('InterruptContext', self.sandbox_id,
                                               str(_contexts.context_id(context))))

    async def remove_code_context(self, context: 'Context | str') -> None:
        await self._run(_contexts.context_call('RemoveContext', self.sandbox_id, str(_contexts.context_id(context))))

    # ---- snapshots (sandboxd-api(7), SNAPSHOTS) ----

    async def snapshot(self, include_tmp: bool = False) -> str:
        """Saves the files of /work (and /tmp with INCLUDE_TMP) as a snapshot and returns
        its id; the sandbox runs on (its processes stand still meanwhile). Memory and
        processes are not kept. :class:`~sandboxd.SnapshotTooLarge` when the files exceed
        the sandbox's disk size, :class:`~sandboxd.QuotaExceeded` beyond your quota."""
        return await self._run(_ops.snapshot('Snapshot', self.sandbox_id, include_tmp))

    async def fork(self, *, name: str | None = None, timeout: int | None = None, memory: int | str | None = None,
             cpu: float | None = None, idle_timeout: int | None = None, idle_action: str | None = None,
             disk: int | str | None = None, tasks: int | None = None, env: dict[str, str] | None = None,
             options: dict[str, object] | None = None) -> 'AsyncSandbox':
        """A new sandbox with a copy of this one's files (which runs on, unchanged); each
        then goes its own way. The arguments are :meth:`create`'s; those not given are
        this sandbox's (``name``: none unless given; ``env``: this object's)."""
        o = _ops.create_options(timeout, memory, cpu, name, False, idle_timeout, disk, tasks, options=options,
                                idle_action=idle_action)
        sandbox_id = await self._run(_ops.fork(self.sandbox_id, o))
        return type(self)(sandbox_id, transport=self.transport, envs=self.envs if env is None else env)

    async def hibernate(self, include_tmp: bool = False) -> str:
        """A snapshot (as :meth:`snapshot`), then the sandbox destroyed; returns the
        snapshot's id. :meth:`wake` with its id or name brings it back."""
        return await self._run(_ops.snapshot('Hibernate', self.sandbox_id, include_tmp))

    @classmethod
    async def wake(cls, sandbox_id: str, *, env: dict[str, str] | None = None,
             transport: AsyncTransport | None = None) -> 'AsyncSandbox':
        """A hibernated sandbox (its id or name) started again, with the same id, name and
        files; :class:`~sandboxd.NoSuchSandbox` if none of yours is hibernated so."""
        transport = transport or default_async_transport()
        woken = await _ops.run_async(transport, _ops.wake(sandbox_id))
        return cls(woken, transport=transport, envs=env)

    @staticmethod
    async def list_snapshots(*, transport: AsyncTransport | None = None) -> List[SnapshotInfo]:
        """Your snapshots (all of them, for root), hibernated sandboxes' included, oldest first."""
        return await _ops.run_async(transport or default_async_transport(), _ops.list_snapshots())

    @staticmethod
    async def remove_snapshot(snapshot_id: str, *, transport: AsyncTransport | None = None) -> None:
        """Deletes a snapshot (a hibernated sandbox's too: it cannot be woken after);
        :class:`~sandboxd.NoSuchSnapshot` if there is none of yours."""
        await _ops.run_async(transport or default_async_transport(), _ops.remove_snapshot(snapshot_id))

    async def _kill(self) -> bool:
        """Destroys the sandbox and returns once it is gone; False if it was gone already.
        ``AsyncSandbox.kill(sandbox_id, transport=None)`` destroys one by its id or name."""
        return await self._run(_ops.destroy(self.sandbox_id))

    @classmethod
    async def _kill_by_id(cls, sandbox_id: str, *, transport: AsyncTransport | None = None) -> bool:
        return await _ops.run_async(transport or default_async_transport(), _ops.destroy(sandbox_id))

    kill = instance_or_class(_kill, _kill_by_id)

    async def release(self) -> bool:
        """As :meth:`Sandbox.release`: reset and kept (True) or destroyed (False)."""
        return await self._run(_ops.release(self.sandbox_id))

    async def __aenter__(self) -> 'AsyncSandbox':
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.kill()
