#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A small varlink client (https://varlink.org: JSON objects, each ended by a NUL byte, on
a unix stream socket), for the tests: the harness uses Connection; run as a program it
makes a batch of calls and prints what came back, as JSON, so that a process of another
uid can call on the system under test (secutil.as_uid(), like busprobe.py):

    echo '[{"method": "io.sandboxd.Sandbox.ListTemplates"}]' | python3 varlinkprobe.py SOCKET

Each call: method, parameters (default {}), more (default false). Each result:
{"replies": [parameters, ...]} (one, or all of a "more" stream) or, for an error reply,
{"error": NAME, "parameters": {...}, "replies": [what came before it]}; {"closed": true}
if the connection ended first. Base64 strings longer than 200 characters are summarised
as {"len": N} (the decoded size) so that the output stays small.
"""

import base64
import json
import socket
import sys


class Closed(Exception):
    """The server closed the connection (or reset it) before the reply was complete."""


class Connection:
    def __init__(self, path, timeout=120):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b''

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, message):
        """MESSAGE: a dict (a call) or bytes (sent as they are, for bad input)."""
        data = message if isinstance(message, bytes) else json.dumps(message).encode() + b'\0'
        self.sock.sendall(data)

    def receive(self):
        """The next message, parsed; raises Closed at the end of the connection."""
        while b'\0' not in self.buf:
            try:
                chunk = self.sock.recv(1 << 20)
            except ConnectionResetError:
                chunk = b''
            if not chunk:
                raise Closed(f'connection closed ({len(self.buf)} bytes of a message pending)')
            self.buf += chunk
        message, self.buf = self.buf.split(b'\0', 1)
        return json.loads(message)

    def call(self, method, parameters=None, more=False, oneway=False, on_reply=None):
        """Calls METHOD; returns (replies, error, error_parameters): the parameters of every
        reply (one; with MORE every "continues" one and the last), and the error's name and
        parameters if the last was an error. ON_REPLY(parameters) sees each as it comes."""
        call = {'method': method}
        if parameters is not None:
            call['parameters'] = parameters
        if more:
            call['more'] = True
        if oneway:
            call['oneway'] = True
        self.send(call)
        if oneway:
            return [], None, None
        replies = []
        while True:
            m = self.receive()
            if 'error' in m:
                return replies, m['error'], m.get('parameters') or {}
            if on_reply:
                on_reply(m.get('parameters') or {})
            replies.append(m.get('parameters') or {})
            if not m.get('continues'):
                return replies, None, None


def summarise(v):
    if isinstance(v, dict):
        return {k: summarise(x) for k, x in v.items()}
    if isinstance(v, list):
        return [summarise(x) for x in v]
    if isinstance(v, str) and len(v) > 200:
        try:
            return {'len': len(base64.b64decode(v, validate=True))}
        except ValueError:
            return {'len': len(v)}
    return v


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    calls = json.load(sys.stdin)
    out = []
    conn = Connection(argv[0])
    for c in calls:
        try:
            replies, error, params = conn.call(c['method'], c.get('parameters', {}), more=c.get('more', False))
        except Closed:
            out.append({'closed': True})
            conn = Connection(argv[0])
            continue
        res = {'replies': summarise(replies)}
        if error:
            res.update(error=error, parameters=summarise(params))
        out.append(res)
    conn.close()
    json.dump(out, sys.stdout)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
