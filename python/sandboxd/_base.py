# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the blocking and the asyncio API share: everything but the calls themselves
(those differ only in being awaited)."""

from __future__ import annotations

import functools
from typing import Any, Callable, Generic, TypeVar

from . import _ops

CommandLine = str | list[str] | tuple[str, ...]
S = TypeVar('S', bound='SandboxBase[Any]')
T = TypeVar('T')


class instance_or_class:
    """A method that is one thing on an instance and another on the class: ``sbx.kill()``
    and ``Sandbox.kill(sandbox_id)``. ON_CLASS is a classmethod."""

    def __init__(self, on_instance: Callable[..., Any], on_class: Any) -> None:
        self.on_instance, self.on_class = on_instance, on_class
        self.__doc__ = on_instance.__doc__

    def __get__(self, obj: Any, objtype: Any = None) -> Callable[..., Any]:
        if obj is None:
            return self.on_class.__get__(None, objtype)  # type: ignore[no-any-return]
        return functools.partial(self.on_instance, obj)


class HandleBase(Generic[S]):
    """A command running in the background (``commands.run(..., background=True)``)."""

    def __init__(self, sandbox: S, process_id: int, pid: int) -> None:
        self.sandbox = sandbox
        #: sandboxd's id of the process (the HTTP bridge's execution id)
        self.process_id = process_id
        #: its pid inside the sandbox (0 if it was not known yet)
        self.pid = pid

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(sandbox={self.sandbox.sandbox_id!r}, process_id={self.process_id}, '
                f'pid={self.pid})')


class CommandsBase(Generic[S]):
    """Running commands in a sandbox: ``sbx.commands``."""

    def __init__(self, sandbox: S) -> None:
        self._sbx = sandbox

    def _prepare(self, cmd: CommandLine, background: bool, timeout: float | None, envs: dict[str, str] | None,
                 cwd: str | None, stdin: bytes | str | bool | None) -> tuple[list[str], dict[str, Any]]:
        """The argv and Exec's (Start's) options of commands.run()."""
        argv = _ops.command_argv(cmd)
        pipe = stdin is True
        if pipe and not background:
            raise ValueError('stdin=True (input sent later with send_stdin) is for background commands')
        options = _ops.exec_options({**self._sbx.envs, **(envs or {})}, cwd, timeout,
                                    None if isinstance(stdin, bool) else stdin)
        if pipe:
            options['StdinPipe'] = True
        if background and timeout is None:
            options.pop('TimeoutUSec', None)
        return argv, options


class FilesBase(Generic[S]):
    """The sandbox's files: ``sbx.files``. A relative path is from /work; every path is
    resolved inside the sandbox, by its own agent."""

    def __init__(self, sandbox: S) -> None:
        self._sbx = sandbox

    def _blob(self, data: str | bytes) -> bytes:
        return data.encode() if isinstance(data, str) else bytes(data)


class SandboxBase(Generic[T]):
    """A sandbox: its id, the transport its calls go over, the variables its commands get."""

    def __init__(self, sandbox_id: str, transport: T | None, envs: dict[str, str] | None,
                 default: Callable[[], T]) -> None:
        self.sandbox_id = sandbox_id
        self.transport: T = transport or default()
        self.envs: dict[str, str] = dict(envs or {})

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self.sandbox_id!r})'
