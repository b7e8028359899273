# SPDX-License-Identifier: LGPL-2.1-or-later
"""How the client reaches sandboxd: a transport carries calls of the interface
``io.sandboxd.Sandbox`` (its methods by their short names, ``CreateSandbox``, with the
parameters the interface description gives them) and returns their replies.

Two kinds, one interface each for blocking and for asyncio code:

- :class:`Transport` / :class:`AsyncTransport`: ``call(method, parameters, more=False)``
  returns an iterator (an async iterator) of :class:`Reply`; without ``more`` there is
  exactly one, with ``more`` the method's replies up to the one that does not continue.
  An error reply is raised as its :class:`~sandboxd.errors.SandboxError`.
- :class:`VarlinkTransport` / :class:`AsyncVarlinkTransport`: the local varlink socket
  ``/run/sandboxd/io.sandboxd.Sandbox`` (or ``$SANDBOXD_VARLINK``), a few connections
  kept open and reused.
- :class:`~sandboxd.http.HttpTransport` / :class:`~sandboxd.http.AsyncHttpTransport`:
  the HTTP bridge (``sandboxd-http``), each method mapped to its REST route; the
  default when ``$SANDBOXD_URL`` is set.

Everything above the transport is the same over either.
"""

from __future__ import annotations

import abc
import asyncio
import collections
import contextlib
import os
import socket
import threading
from typing import Any, AsyncGenerator, Iterator

from ._varlink import Decoder, Reply, encode_call, parse_reply
from .errors import INTERFACE, SandboxConnectionError, SandboxError, ProtocolError

__all__ = ['Reply', 'Transport', 'AsyncTransport', 'VarlinkTransport', 'AsyncVarlinkTransport',
           'DEFAULT_ADDRESS', 'varlink_address', 'default_transport', 'default_async_transport']

DEFAULT_ADDRESS = '/run/sandboxd/io.sandboxd.Sandbox'
_IDLE_KEPT = 4          # idle connections kept per transport
_READ_SIZE = 256 * 1024


def varlink_address(address: str | None = None) -> str:
    """The socket path: ADDRESS, else $SANDBOXD_VARLINK, else the system's socket.
    A varlink address (``unix:/path``) is taken as well."""
    address = address or os.environ.get('SANDBOXD_VARLINK') or DEFAULT_ADDRESS
    if address.startswith('unix:'):
        address = address[len('unix:'):].split(';', 1)[0]
    return address


def _full(method: str) -> str:
    return method if '.' in method else f'{INTERFACE}.{method}'


#: bytes per WriteFile: at most sandboxd's 4 MiB (FILE_PART_MAX); smaller, so that many
#: writers at once hold little of sandboxd's memory (each part waits there, decoded, until
#: the sandbox took it)
WRITE_CHUNK = 1024 * 1024


class Transport(abc.ABC):
    """Carries calls of io.sandboxd.Sandbox for blocking code."""

    #: bytes of a file per WriteFile call (later ones Append); None: the whole file in one
    write_chunk: int | None = WRITE_CHUNK

    @abc.abstractmethod
    def call(self, method: str, parameters: dict[str, Any] | None = None,
             more: bool = False) -> Iterator[Reply]:
        """Calls METHOD; yields its replies (one without MORE). Closing the iterator
        before the last reply abandons the call."""

    def call_one(self, method: str, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
        """Calls METHOD and returns its one reply's parameters."""
        for reply in self.call(method, parameters):
            return reply.parameters
        raise ProtocolError(f'{method}: no reply')

    def close(self) -> None:
        """Releases what the transport holds (open connections)."""

    def __enter__(self) -> 'Transport':
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncTransport(abc.ABC):
    """Carries calls of io.sandboxd.Sandbox for asyncio code."""

    #: as Transport.write_chunk
    write_chunk: int | None = WRITE_CHUNK

    @abc.abstractmethod
    def call(self, method: str, parameters: dict[str, Any] | None = None,
             more: bool = False) -> AsyncGenerator[Reply, None]:
        """Calls METHOD; yields its replies (one without MORE). Closing the iterator
        (``aclose()``) before the last reply abandons the call."""

    async def call_one(self, method: str, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
        """Calls METHOD and returns its one reply's parameters."""
        async with contextlib.aclosing(self.call(method, parameters)) as replies:
            async for reply in replies:
                return reply.parameters
        raise ProtocolError(f'{method}: no reply')

    async def aclose(self) -> None:
        """Releases what the transport holds (open connections)."""

    async def __aenter__(self) -> 'AsyncTransport':
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Frames:
    """The replies of one connection: bytes read go through the Decoder, complete
    messages wait here."""

    def __init__(self) -> None:
        self.decoder = Decoder()
        self.messages: collections.deque[dict[str, Any]] = collections.deque()
        self.over = True     # no call under way

    def feed(self, data: bytes) -> None:
        if not data:
            raise SandboxConnectionError('sandboxd closed the connection before it answered')
        self.messages.extend(self.decoder.feed(data))

    def reply(self, more: bool) -> Reply:
        """The next reply; sets ``over`` when the call is over with it, or with the error
        reply it raises (the connection is good for another call then)."""
        msg = self.messages.popleft()
        try:
            reply = parse_reply(msg)
        except ProtocolError:
            raise
        except SandboxError:
            self.over = True
            raise
        self.over = not (more and reply.continues)
        return reply

    def begin(self, method: str, parameters: dict[str, Any] | None, more: bool) -> bytes:
        """The bytes of a call that starts now on this connection."""
        self.over = False
        return encode_call(_full(method), parameters, more)

    @property
    def idle(self) -> bool:
        return not self.messages and not self.decoder.pending


class _SyncConnection(_Frames):
    def __init__(self, path: str, timeout: float | None) -> None:
        super().__init__()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            self.sock.settimeout(timeout)
            self.sock.connect(path)
            self.sock.settimeout(None)
        except OSError as e:
            self.sock.close()
            raise SandboxConnectionError(f'cannot connect to {path}: {e.strerror or e}') from e

    def alive(self) -> bool:
        """Whether the peer has not closed the connection (an idle one is closed by
        sandboxd after a while)."""
        try:
            return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b''  # data: a bug; b'': closed
        except BlockingIOError:
            return True
        except OSError:
            return False

    def next_reply(self, more: bool) -> Reply:
        while not self.messages:
            try:
                data = self.sock.recv(_READ_SIZE)
            except OSError as e:
                raise SandboxConnectionError(f'reading from sandboxd: {e}') from e
            self.feed(data)
        return self.reply(more)


class VarlinkTransport(Transport):
    """The varlink socket, for blocking code; safe to share between threads.

    ``address``: the socket's path (default ``$SANDBOXD_VARLINK``, else
    ``/run/sandboxd/io.sandboxd.Sandbox``); ``connect_timeout``: seconds to connect.
    """

    def __init__(self, address: str | None = None, connect_timeout: float = 30.0) -> None:
        self.address = varlink_address(address)
        self.connect_timeout = connect_timeout
        self._idle: list[_SyncConnection] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def __repr__(self) -> str:
        return f'VarlinkTransport({self.address!r})'

    def _acquire(self) -> _SyncConnection:
        with self._lock:
            if self._pid != os.getpid():    # forked: the parent's connections are not ours
                self._idle, self._pid = [], os.getpid()
            while self._idle:
                conn = self._idle.pop()
                if conn.alive():
                    return conn
                conn.sock.close()
        return _SyncConnection(self.address, self.connect_timeout)

    def _release(self, conn: _SyncConnection) -> None:
        with self._lock:
            if conn.idle and len(self._idle) < _IDLE_KEPT and self._pid == os.getpid():
                self._idle.append(conn)
                return
        conn.sock.close()

    def call(self, method: str, parameters: dict[str, Any] | None = None,
             more: bool = False) -> Iterator[Reply]:
        conn = self._acquire()
        try:
            try:
                conn.sock.sendall(conn.begin(method, parameters, more))
            except OSError as e:
                raise SandboxConnectionError(f'writing to sandboxd: {e}') from e
            while not conn.over:
                yield conn.next_reply(more)
        finally:
            if conn.over:
                self._release(conn)
            else:
                conn.sock.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.sock.close()


class _AsyncConnection(_Frames):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self.reader, self.writer = reader, writer
        self.loop = asyncio.get_running_loop()

    def alive(self) -> bool:
        return (self.loop is asyncio.get_running_loop() and not self.reader.at_eof()
                and not self.writer.is_closing())

    async def next_reply(self, more: bool) -> Reply:
        while not self.messages:
            try:
                data = await self.reader.read(_READ_SIZE)
            except OSError as e:
                raise SandboxConnectionError(f'reading from sandboxd: {e}') from e
            self.feed(data)
        return self.reply(more)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):   # its loop may be closed already
            self.writer.close()


class AsyncVarlinkTransport(AsyncTransport):
    """The varlink socket, for asyncio code (connections belong to the loop that made
    them; one transport may serve loops one after the other).

    ``address``: as :class:`VarlinkTransport`'s; ``connect_timeout``: seconds to connect.
    """

    def __init__(self, address: str | None = None, connect_timeout: float = 30.0) -> None:
        self.address = varlink_address(address)
        self.connect_timeout = connect_timeout
        self._idle: list[_AsyncConnection] = []

    def __repr__(self) -> str:
        return f'AsyncVarlinkTransport({self.address!r})'

    async def _acquire(self) -> _AsyncConnection:
        while self._idle:
            conn = self._idle.pop()
            if conn.alive():
                return conn
            conn.close()
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(self.address),
                                                    self.connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise SandboxConnectionError(f'cannot connect to {self.address}: {e}') from e
        return _AsyncConnection(reader, writer)

    async def call(self, method: str, parameters: dict[str, Any] | None = None,
                   more: bool = False) -> AsyncGenerator[Reply, None]:
        conn = await self._acquire()
        try:
            try:
                conn.writer.write(conn.begin(method, parameters, more))
                await conn.writer.drain()
            except OSError as e:
                raise SandboxConnectionError(f'writing to sandboxd: {e}') from e
            while not conn.over:
                yield await conn.next_reply(more)
        finally:
            if conn.over and conn.idle and len(self._idle) < _IDLE_KEPT:
                self._idle.append(conn)
            else:
                conn.close()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def default_transport() -> Transport:
    """The transport used when none is given: sandboxd-http at $SANDBOXD_URL (with
    $SANDBOXD_TOKEN) if that is set, else the local varlink socket."""
    if os.environ.get('SANDBOXD_URL'):
        from .http import HttpTransport
        return HttpTransport()
    return VarlinkTransport()


def default_async_transport() -> AsyncTransport:
    """The asyncio transport used when none is given, as default_transport() chooses."""
    if os.environ.get('SANDBOXD_URL'):
        from .http import AsyncHttpTransport
        return AsyncHttpTransport()
    return AsyncVarlinkTransport()
