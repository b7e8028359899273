# SPDX-License-Identifier: LGPL-2.1-or-later
"""The exceptions of the sandboxd client.

Every error sandboxd answers with is raised as a :class:`SandboxError`; its ``name`` is
the error's full varlink name (``io.sandboxd.Sandbox.NoSuchSandbox``), ``message`` its
message and ``parameters`` all its parameters. Each error of the interface has a class
of its own (:class:`NoSuchSandbox`, :class:`InvalidOption`, ...), named as the error is.
A file operation's error inside the sandbox (``io.sandboxd.Sandbox.SystemError``) is a
:class:`SandboxSystemError` carrying ``errno`` and ``errno_name``; for the common errno
values it is also the matching built-in exception, so ``except FileNotFoundError`` works.
"""

from __future__ import annotations

import errno as _errno
from typing import Any

INTERFACE = 'io.sandboxd.Sandbox'

__all__ = [
    'SandboxError', 'SandboxConnectionError', 'SandboxSystemError',
    'NoSuchTemplate', 'NoSuchSandbox', 'InvalidOption', 'NotRunning', 'Busy',
    'TooManySandboxes', 'SandboxFailed', 'SystemdFailed', 'NoSuchProcess', 'StillRunning',
    'FileTooLarge', 'SandboxExists', 'TemplateReadOnly', 'NoSuchSnapshot', 'QuotaExceeded',
    'SnapshotTooLarge', 'NotRegularFile', 'NodeUnavailable', 'NoSuchContext', 'ContextLost', 'AccessDenied',
    'InteractiveAuthorizationRequired', 'NotSupported',
    'NoReply', 'ProtocolError',
    'error_from_reply',
]


class SandboxError(Exception):
    """An error sandboxd answered with, or a failure to reach it.

    ``name``: the error's full name (``io.sandboxd.Sandbox.NoSuchSandbox``, or
    ``org.varlink.service.InvalidParameter`` for the protocol's own errors);
    ``message``: what it says; ``parameters``: all its parameters as sent.
    """

    name: str = INTERFACE + '.Error'

    def __init__(self, message: str = '', *, name: str | None = None,
                 parameters: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        if name is not None:
            self.name = name
        self.message = message
        self.parameters = dict(parameters or {})

    def __str__(self) -> str:
        short = self.name.rsplit('.', 1)[-1]
        return f'{short}: {self.message}' if self.message else short


class SandboxConnectionError(SandboxError, ConnectionError):
    """sandboxd could not be reached, or the connection ended before the answer."""

    name = 'io.sandboxd.client.ConnectionFailed'


class ProtocolError(SandboxError):
    """The peer sent something that is not a reply of the protocol."""

    name = 'io.sandboxd.client.ProtocolError'


class NoSuchTemplate(SandboxError):
    """The template does not exist."""

    name = f'{INTERFACE}.NoSuchTemplate'


class NoSuchSandbox(SandboxError):
    """No sandbox has that id (or, for the caller, that name)."""

    name = f'{INTERFACE}.NoSuchSandbox'


class InvalidOption(SandboxError):
    """An option is unknown, of the wrong type or out of range."""

    name = f'{INTERFACE}.InvalidOption'


class NotRunning(SandboxError):
    """The sandbox is not running (starting, paused for some calls, stopping or gone)."""

    name = f'{INTERFACE}.NotRunning'


class Busy(SandboxError):
    """The sandbox or the caller has too many operations under way."""

    name = f'{INTERFACE}.Busy'


class TooManySandboxes(SandboxError):
    """The configured maximum of sandboxes is reached."""

    name = f'{INTERFACE}.TooManySandboxes'


class SandboxFailed(SandboxError):
    """The payload could not be started or died."""

    name = f'{INTERFACE}.SandboxFailed'


class SystemdFailed(SandboxError):
    """systemd refused or failed the unit's job."""

    name = f'{INTERFACE}.SystemdFailed'


class NoSuchProcess(SandboxError):
    """No background process with that id."""

    name = f'{INTERFACE}.NoSuchProcess'


class StillRunning(SandboxError):
    """Wait timed out: the process still runs."""

    name = f'{INTERFACE}.StillRunning'


class FileTooLarge(SandboxError):
    """The file is larger than allowed."""

    name = f'{INTERFACE}.FileTooLarge'


class SandboxExists(SandboxError):
    """The caller already has a live sandbox of that name."""

    name = f'{INTERFACE}.SandboxExists'


class TemplateReadOnly(SandboxError):
    """A shipped template cannot be removed, only overridden."""

    name = f'{INTERFACE}.TemplateReadOnly'


class NoSuchSnapshot(SandboxError):
    """No snapshot of that id, or not the caller's."""

    name = f'{INTERFACE}.NoSuchSnapshot'


class QuotaExceeded(SandboxError):
    """A quota would be exceeded (sandboxd.conf(5)): the owner's or tenant's sandboxes, their
    memory, tasks, disk or CPU, creates per second, or snapshots. ``what``, ``limit`` and
    ``use`` say which, where sandboxd says so."""

    @property
    def what(self) -> str | None:
        return self.parameters.get('what')

    @property
    def limit(self) -> int | None:
        return self.parameters.get('limit')

    @property
    def use(self) -> int | None:
        return self.parameters.get('use')

    name = f'{INTERFACE}.QuotaExceeded'


class SnapshotTooLarge(SandboxError):
    """The snapshot does not fit (its files exceed the sandbox's DiskMax)."""

    name = f'{INTERFACE}.SnapshotTooLarge'


class NotRegularFile(SandboxError):
    """Files read or written must be regular files: the path is a FIFO, a device, a socket
    or a directory (the message says which)."""

    name = f'{INTERFACE}.NotRegularFile'


class NodeUnavailable(SandboxError):
    """The fleet node that holds the sandbox is not answering (the HTTP bridge's or the
    front's 503); the call may succeed once it is back or the sandbox restored elsewhere."""

    name = f'{INTERFACE}.NodeUnavailable'


class NoSuchContext(SandboxError):
    """No code context of that id in the sandbox (removed, or never made)."""

    name = f'{INTERFACE}.NoSuchContext'


class ContextLost(SandboxError):
    """The code context's kernel ended (killed for memory, killed after an interrupt that did
    not stop the cell, the sandbox hibernated): its variables are gone. ``restart()`` the
    context (or ``Sandbox.restart_code_context()``) for a fresh one."""

    name = f'{INTERFACE}.ContextLost'


class AccessDenied(SandboxError):
    """polkit said no."""

    name = f'{INTERFACE}.AccessDenied'


class InteractiveAuthorizationRequired(SandboxError):
    """polkit would allow it after authentication, which varlink cannot ask for."""

    name = f'{INTERFACE}.InteractiveAuthorizationRequired'


class NotSupported(SandboxError):
    """Not supported by this sandbox or this system."""

    name = f'{INTERFACE}.NotSupported'


class NoReply(SandboxError):
    """sandboxd stopped before the call was answered."""

    name = f'{INTERFACE}.NoReply'


class SandboxSystemError(SandboxError):
    """A file operation's error inside the sandbox, or a failure of the daemon's, by errno.

    ``errno``: the number; ``errno_name``: its name (``ENOENT``).
    """

    name = f'{INTERFACE}.SystemError'

    def __init__(self, message: str = '', *, name: str | None = None,
                 parameters: dict[str, Any] | None = None) -> None:
        super().__init__(message, name=name, parameters=parameters)
        p = self.parameters
        self.errno: int | None = p.get('errno') if isinstance(p.get('errno'), int) else None
        self.errno_name: str = str(p.get('errnoName') or '')
        self.strerror = message


# errno -> the built-in OSError subclass Python itself raises for it.
_OS_CLASSES: dict[int, type[OSError]] = {
    _errno.ENOENT: FileNotFoundError, _errno.EEXIST: FileExistsError,
    _errno.EISDIR: IsADirectoryError, _errno.ENOTDIR: NotADirectoryError,
    _errno.EACCES: PermissionError, _errno.EPERM: PermissionError,
}
_SYSTEM_CLASSES: dict[int, type[SandboxSystemError]] = {
    n: type(f'Sandbox{cls.__name__}', (SandboxSystemError, cls),
            {'__module__': __name__, '__doc__': f'{(SandboxSystemError.__doc__ or "").splitlines()[0]} ({cls.__name__})'})
    for n, cls in _OS_CLASSES.items()
}

_BY_NAME: dict[str, type[SandboxError]] = {
    cls.name: cls for cls in (
        NoSuchTemplate, NoSuchSandbox, InvalidOption, NotRunning, Busy, TooManySandboxes,
        SandboxFailed, SystemdFailed, NoSuchProcess, StillRunning, FileTooLarge, SandboxExists,
        TemplateReadOnly, NoSuchSnapshot, QuotaExceeded, SnapshotTooLarge, NotRegularFile,
        NodeUnavailable, NoSuchContext, ContextLost, AccessDenied, InteractiveAuthorizationRequired, NotSupported,
        NoReply,
        SandboxSystemError)
}


def error_class(name: str, parameters: dict[str, Any] | None = None) -> type[SandboxError]:
    """The exception class for the error NAME (with its PARAMETERS, for SystemError's errno)."""
    cls = _BY_NAME.get(name, SandboxError)
    if cls is SandboxSystemError and parameters:
        return _SYSTEM_CLASSES.get(parameters.get('errno'), SandboxSystemError)  # type: ignore[arg-type]
    return cls


def error_from_reply(name: str, parameters: dict[str, Any] | None) -> SandboxError:
    """The exception for an error reply: its class by NAME, its message from PARAMETERS
    (the protocol's own errors, such as InvalidParameter, have none: their parameters are
    the message then)."""
    parameters = parameters if isinstance(parameters, dict) else {}
    message = parameters.get('message')
    if not isinstance(message, str):
        message = ', '.join(f'{k}={v}' for k, v in parameters.items())
    return error_class(name, parameters)(message, name=name, parameters=parameters)
