# SPDX-License-Identifier: LGPL-2.1-or-later
"""sandboxd: a Python client of sandboxd, the systemd-native sandbox service.

Isolated Linux sandboxes for running untrusted, model-generated code, from Python:

    from sandboxd import Sandbox
    with Sandbox.create("python") as sbx:
        print(sbx.commands.run("python3 -c 'print(6*7)'").stdout)

The API has the shape of E2B's: :class:`Sandbox` (blocking) and :class:`AsyncSandbox`
(asyncio) with ``create(template, timeout=, memory=, cpu=, env=, name=)``, ``connect(id)``,
``list()``, ``sbx.commands.run(cmd, timeout=, on_stdout=, on_stderr=, background=)``,
``sbx.files.read/write/list/exists/remove/rename/make_dir``, ``pause()``, ``resume()``,
``set_timeout()``, ``kill()``, and use as a context manager; snapshots of a sandbox's
files: ``sbx.snapshot()``, ``sbx.fork()``, ``sbx.hibernate()``, ``Sandbox.wake(id)``,
``Sandbox.list_snapshots()``, ``Sandbox.remove_snapshot(id)``, ``create(from_snapshot=)``. For agent frameworks,
:mod:`sandboxd.code` has :class:`SandboxProvider` (``create_sandbox``/``execute``/
``cleanup``) and :class:`SandboxConfig`, :class:`ExecutionResult`, :class:`SandboxPool`.

It is only a client: every call is a call of sandboxd's interface io.sandboxd.Sandbox
(sandboxd-api(7)), by default over the varlink socket /run/sandboxd/io.sandboxd.Sandbox
(``$SANDBOXD_VARLINK`` names another), or over the HTTP bridge sandboxd-http
(:class:`HttpTransport`; ``$SANDBOXD_URL`` and ``$SANDBOXD_TOKEN`` make it the default);
sandboxd decides (with polkit) who may do what.
Errors sandboxd answers with are raised as :class:`SandboxError` subclasses named as
the errors are (:class:`NoSuchSandbox`, ...; see :mod:`sandboxd.errors`). Standard
library only; Python 3.11.
"""

from ._async import AsyncCommandHandle, AsyncCommands, AsyncFiles, AsyncSandbox
from .code import CodeSandbox, ExecutionResult, SandboxConfig, SandboxPool, SandboxProvider
from .contexts import Context, Execution, ExecutionError, Logs, OutputMessage, Result
from .errors import (AccessDenied, Busy, FileTooLarge, InteractiveAuthorizationRequired, InvalidOption,
                     ContextLost, NodeUnavailable, NoReply, NoSuchContext, NoSuchProcess, NoSuchSandbox, NoSuchSnapshot,
                     NoSuchTemplate, NotRunning,
                     NotRegularFile, NotSupported, ProtocolError, QuotaExceeded, SandboxConnectionError, SandboxError,
                     SandboxExists, SandboxFailed, SandboxSystemError, SnapshotTooLarge, StillRunning,
                     SystemdFailed, TemplateReadOnly, TooManySandboxes)
from .models import (CommandResult, EntryInfo, PoolInfo, PortInfo, ProcessInfo, QuotaEntry, QuotaInfo, SandboxInfo,
                     SnapshotInfo, TemplateInfo)
from .sandbox import CommandHandle, Commands, Files, Sandbox
from .http import AsyncHttpTransport, HttpTransport
from .transport import AsyncTransport, AsyncVarlinkTransport, Transport, VarlinkTransport

__version__ = '0.1'

__all__ = [
    'Sandbox', 'AsyncSandbox', 'Commands', 'AsyncCommands', 'Files', 'AsyncFiles',
    'CommandHandle', 'AsyncCommandHandle',
    'CommandResult', 'EntryInfo', 'ProcessInfo', 'SandboxInfo', 'TemplateInfo', 'PoolInfo', 'SnapshotInfo',
    'QuotaInfo', 'QuotaEntry', 'PortInfo',
    'SandboxProvider', 'SandboxConfig', 'ExecutionResult', 'CodeSandbox', 'SandboxPool',
    'Context', 'Execution', 'ExecutionError', 'Logs', 'OutputMessage', 'Result',
    'Transport', 'AsyncTransport', 'VarlinkTransport', 'AsyncVarlinkTransport', 'HttpTransport',
    'AsyncHttpTransport',
    'SandboxError', 'SandboxConnectionError', 'SandboxSystemError', 'ProtocolError',
    'NoSuchTemplate', 'NoSuchSandbox', 'InvalidOption', 'NotRunning', 'Busy', 'TooManySandboxes',
    'SandboxFailed', 'SystemdFailed', 'NoSuchProcess', 'StillRunning', 'FileTooLarge',
    'SandboxExists', 'TemplateReadOnly', 'NoSuchSnapshot', 'QuotaExceeded', 'SnapshotTooLarge',
    'NotRegularFile', 'NodeUnavailable', 'NoSuchContext', 'ContextLost', 'AccessDenied',
    'InteractiveAuthorizationRequired',
    'NotSupported', 'NoReply',
]
