# SPDX-License-Identifier: LGPL-2.1-or-later
"""varlink's framing, without I/O: shared by the blocking and the asyncio transport.

A message is one JSON object followed by a NUL byte (https://varlink.org). A call is
``{"method": ..., "parameters": {...}, "more": true?}``; each reply is
``{"parameters": {...}, "continues": true?}`` or ``{"error": NAME, "parameters": {...}}``.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from .errors import ProtocolError, error_from_reply

# sandboxd's own bound on a message (sandboxd-api(7), VARLINK): every reply fits.
MESSAGE_MAX = 32 * 1024 * 1024 + 64 * 1024


class Reply(NamedTuple):
    """One reply of a call: its parameters, and whether more replies follow."""

    parameters: dict[str, Any]
    continues: bool


def encode_call(method: str, parameters: dict[str, Any] | None = None, more: bool = False) -> bytes:
    """The bytes of a call of METHOD (a full name: interface.Method)."""
    msg: dict[str, Any] = {'method': method}
    if parameters:
        msg['parameters'] = {k: v for k, v in parameters.items() if v is not None}
    if more:
        msg['more'] = True
    return json.dumps(msg, separators=(',', ':'), ensure_ascii=False).encode() + b'\0'


class Decoder:
    """Splits a byte stream into messages: feed() what was read, get the complete ones."""

    def __init__(self, limit: int = MESSAGE_MAX) -> None:
        self._buf = bytearray()
        self._limit = limit

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buf += data
        out = []
        while True:
            end = self._buf.find(b'\0')
            if end < 0:
                break
            out.append(decode_message(bytes(self._buf[:end])))
            del self._buf[:end + 1]
        if len(self._buf) > self._limit:
            raise ProtocolError(f'a message longer than {self._limit} bytes')
        return out

    @property
    def pending(self) -> bool:
        """Whether part of a message was read."""
        return bool(self._buf)


def decode_message(data: bytes) -> dict[str, Any]:
    """One message's JSON (without its NUL) as a dict."""
    try:
        msg = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ProtocolError(f'a message that is not JSON: {e}') from None
    if not isinstance(msg, dict):
        raise ProtocolError('a message that is not a JSON object')
    return msg


def parse_reply(msg: dict[str, Any]) -> Reply:
    """A reply message as a Reply; an error reply raised as its SandboxError."""
    parameters = msg.get('parameters') or {}
    if not isinstance(parameters, dict):
        raise ProtocolError('a reply whose parameters are not an object')
    error = msg.get('error')
    if error is not None:
        raise error_from_reply(str(error), parameters)
    return Reply(parameters, bool(msg.get('continues')))
