# SPDX-License-Identifier: LGPL-2.1-or-later
"""A minimal D-Bus client that writes the bytes we choose and reads only when we say so:
for what no bus library lets a test do (invalid strings, a peer that never reads)."""

import os
import socket
import struct
import time


class Writer:
    """Marshals little-endian D-Bus values into .b, aligned as the specification says."""

    def __init__(self):
        self.b = bytearray()

    def align(self, n):
        self.b += b'\0' * (-len(self.b) % n)

    def byte(self, x):
        self.b.append(x)

    def u32(self, x):
        self.align(4)
        self.b += struct.pack('<I', x)

    def u64(self, x):
        self.align(8)
        self.b += struct.pack('<Q', x)

    def string(self, s):
        self.u32(len(s))
        self.b += s + b'\0'

    def sig(self, s):
        self.byte(len(s))
        self.b += s + b'\0'


def message(serial, dest, path, iface, member, sig=b'', body=b''):
    """A method call, as bytes."""
    w = Writer()
    w.b += b'l\x01\x00\x01'
    w.u32(len(body))
    w.u32(serial)
    w.u32(0)                                   # header fields array length, patched below
    start = len(w.b)
    for code, kind, value in ((1, b'o', path), (2, b's', iface), (3, b's', member), (6, b's', dest),
                              (8, b'g', sig)):
        if code == 8 and not sig:
            continue
        w.align(8)
        w.byte(code)
        w.sig(kind)
        if kind == b'g':
            w.sig(value)
        else:
            w.string(value)
    struct.pack_into('<I', w.b, 12, len(w.b) - start)
    w.align(8)
    return bytes(w.b) + body


def connect(bus_path, rcvbuf=None):
    """A socket authenticated on the bus at BUS_PATH (as our uid) and past Hello (serial
    1). RCVBUF: the socket's receive buffer, set before connecting."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if rcvbuf is not None:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.connect(bus_path)
        s.sendall(b'\0AUTH EXTERNAL ' + str(os.geteuid()).encode().hex().encode() + b'\r\n')
        line = s.recv(4096)
        if not line.startswith(b'OK'):
            raise AssertionError(f'bus refused our authentication: {line!r}')
        s.sendall(b'BEGIN\r\n')
        s.sendall(message(1, b'org.freedesktop.DBus', b'/org/freedesktop/DBus', b'org.freedesktop.DBus', b'Hello'))
        eof, msgs = recv_messages(s, 10, 1)
        if eof or not any(t == 2 and r == 1 for t, _n, r in msgs):
            raise AssertionError(f'no reply to Hello: {msgs}')
    except BaseException:
        s.close()
        raise
    return s


def recv_messages(sock, timeout, until_serial):
    """Reads until the reply to UNTIL_SERIAL (a serial, or a set of them: until all are
    answered), EOF or TIMEOUT; returns (eof, [(type, error name or None, reply serial)])."""
    wanted = set(until_serial) if isinstance(until_serial, (set, frozenset, range, list)) else {until_serial}
    sock.settimeout(0.1)
    data = b''
    eof = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            eof = True
            break
        if not chunk:
            eof = True
            break
        data += chunk
        if wanted <= {r for _t, _n, r in parse(data)}:
            break
    return eof, parse(data)


def parse(data):
    """The complete messages in DATA: [(type, error name or None, reply serial)]."""
    out = []
    while len(data) >= 16:
        body_len, _serial, fields_len = struct.unpack_from('<III', data, 4)
        mtype = data[1]
        end_fields = 16 + fields_len
        total = end_fields + (-end_fields % 8) + body_len
        if len(data) < total:
            break
        # Header fields: find ERROR_NAME (4) and REPLY_SERIAL (5).
        pos, name, reply = 16, None, None
        while pos < end_fields:
            pos += -pos % 8
            code = data[pos]
            slen = data[pos + 1]
            sig = data[pos + 2:pos + 2 + slen]
            pos += 3 + slen
            if sig in (b's', b'o'):
                pos += -pos % 4
                n = struct.unpack_from('<I', data, pos)[0]
                value = data[pos + 4:pos + 4 + n].decode(errors='replace')
                pos += 5 + n
            elif sig == b'g':
                n = data[pos]
                value = data[pos + 1:pos + 1 + n].decode()
                pos += 2 + n
            else:
                pos += -pos % 4
                value = struct.unpack_from('<I', data, pos)[0]
                pos += 4
            if code == 4:
                name = value
            elif code == 5:
                reply = value
        out.append((mtype, name, reply))
        data = data[total:]
    return out
