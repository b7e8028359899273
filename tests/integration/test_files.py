#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Issue 4's file API on a real systemd, bus and bwrap: what a caller of ReadFile,
WriteFile, Upload, Download, ListFiles, Stat, MakeDirectory, Remove and Move sees, and that
nothing the sandboxed code plants (symlinks, "..", hard links, a symlink swapped in a loop,
FIFOs, devices, sparse terabyte files) makes sandboxd read or write a host file, or hang.

The calls are made by a D-Bus client inside the booted system (busclient.py: descriptors
are passed as a real client passes them). Host files are checked by their sha256 before and
after. Run through run.py, or directly: python3 -m unittest -v test_files
"""

import hashlib
import os
import secrets
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import busclient  # noqa: E402
import harness  # noqa: E402

S = None           # the harness.System
_owned = False     # True when this module booted it (not run.py)

MiB = 1024 * 1024
TiB = 1024 ** 4
PART_MAX = 4 * MiB           # ReadFile's and WriteFile's bound (sandboxd-api(7))
# Host files; the sandbox has its own /etc/passwd and /etc/hostname (sandboxd(8)), not
# /etc/debian_version.
HOST_FILES = ('/etc/shadow', '/etc/passwd', '/etc/hostname', '/etc/debian_version', '/root/.bashrc')
HOST_ONLY = '/etc/debian_version'
NOT_REGULAR = 'io.sandboxd.Sandbox1.NotRegularFile'
# Every error a refused escape may answer with: the path is not in the sandbox, it is
# read-only or not ours, or not a regular file.
REFUSALS = ('org.freedesktop.DBus.Error.FileNotFound', 'System.Error.ENOENT', NOT_REGULAR,
            'System.Error.EROFS', 'org.freedesktop.DBus.Error.AccessDenied', 'System.Error.EACCES',
            'System.Error.EPERM', 'org.freedesktop.DBus.Error.InvalidArgs', 'System.Error.ENOTDIR',
            'System.Error.EISDIR', 'System.Error.EXDEV', 'org.freedesktop.DBus.Error.FileExists')
NOT_FOUND = ('org.freedesktop.DBus.Error.FileNotFound', 'System.Error.ENOENT')


def setUpModule():
    global S, _owned
    S, _owned = harness.module_setup()


def tearDownModule():
    harness.module_teardown(_owned)


def sha256(path):
    """sha256 of a host file, or a marker when it is absent or unreadable."""
    try:
        h = hashlib.sha256()
        with open(path, 'rb') as f:
            for chunk in iter(lambda: f.read(MiB), b''):
                h.update(chunk)
        return h.hexdigest()
    except FileNotFoundError:
        return 'absent'
    except OSError as e:
        return f'error {e.errno}'


class Base(harness.SandboxTestCase):
    """Sandboxes made here are destroyed after each test. A host directory of the test's own
    (under the harness's work directory, which the booted system sees at the same path)
    holds a file of known content: the target of the escapes."""

    def setUp(self):
        self.hostdir = tempfile.mkdtemp(prefix='files-', dir=S.workdir)
        self.addCleanup(shutil.rmtree, self.hostdir, ignore_errors=True)
        self.hostfile = os.path.join(self.hostdir, 'known.txt')
        self.host_secret = b'HOST-SECRET-' + secrets.token_hex(16).encode() + b'\n'
        with open(self.hostfile, 'wb') as f:
            f.write(self.host_secret)
        self.watched = list(HOST_FILES) + [self.hostfile]
        self.before = {p: sha256(p) for p in self.watched}
        self.host_contents = {self.host_secret}
        for p in ('/etc/passwd', '/etc/shadow', '/etc/hostname', HOST_ONLY):
            try:
                with open(p, 'rb') as f:
                    self.host_contents.add(f.read())
            except OSError:
                pass

    def assert_host_unchanged(self, also_absent=()):
        """The watched host files have their old checksums; ALSO_ABSENT do not exist, neither
        on the host nor in the booted system's own /tmp and /run."""
        after = {p: sha256(p) for p in self.watched}
        self.assertEqual(after, self.before, 'a host file changed')
        self.assertEqual(sorted(os.listdir(self.hostdir)), ['known.txt'],
                         'something appeared in the test\'s host directory')
        for p in also_absent:
            self.assertFalse(os.path.lexists(p), f'{p} appeared on the host')
            self.assertFalse(os.path.lexists(S.path(p)), f'{p} appeared in the system sandboxd runs in')

    def assert_not_host_content(self, data, what):
        for c in self.host_contents:
            self.assertNotEqual(data, c, f'{what} returned a host file\'s content')
            if len(c) > 16:
                self.assertNotIn(c[:64], data, f'{what} returned part of a host file')

    def script(self, body, timeout=120):
        return busclient.run_script(S, body, timeout=timeout)

    def create(self, template='shell', **options):
        opts = ', '.join(f'{k}={v!r}' for k, v in options.items())
        res = self.script(f'emit(call(manager(), "CreateSandbox", {template!r}, opts({opts})))')
        self.assertIn('ok', res, f'CreateSandbox failed: {res}')
        sid = res['ok'][0]
        self.addCleanup(busclient.run_script, S, f'emit(destroy({sid!r}))')
        return sid

    def sh(self, sid, command, check=True):
        """sh -c COMMAND in the sandbox as its own code; returns (status, stdout, stderr)."""
        res = self.script(f's = sandbox({sid!r})\n'
                          f'emit(call(s, "Exec", ["sh", "-c", {command!r}], opts()))')
        self.assertIn('ok', res, f'Exec {command!r}: {res}')
        status, out, err, _info = res['ok']
        out, err = bytes.fromhex(out['bytes']), bytes.fromhex(err['bytes'])
        if check:
            self.assertEqual(status, 0, f'{command!r} in the sandbox: {out!r} {err!r}')
        return status, out, err

    def calls(self, sid, body, timeout=120):
        """Runs BODY with `s` the sandbox's interface; returns what it emits."""
        return self.script(f's = sandbox({sid!r})\n{HELPERS}\n{body}', timeout=timeout)

    def assert_refused(self, res, what, names=REFUSALS):
        self.assertIn('error', res, f'{what} succeeded: {res}')
        self.assertIn(res['error'], names, f'{what}: unexpected error {res}')


# Helpers of the scripts that calls() runs: s is the sandbox's interface.
HELPERS = '''
def read(path, offset=0, length=0, timeout=30):
    return call(s, "ReadFile", path, dbus.UInt64(offset), dbus.UInt64(length), timeout=timeout)

def download(path, timeout=60, limit=None, **o):
    r, w = os.pipe()
    reader = PipeReader(r, limit=limit)
    res = call(s, "Download", path, fd(w), opts(**o), timeout=timeout)
    os.close(w)
    res["pipe"] = reader.result(timeout=30)
    return res

def upload_bytes(path, data, timeout=60, **o):
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    res = call(s, "Upload", path, fd(r), opts(**o), timeout=timeout)
    os.close(r)
    return res

def write(path, data, timeout=30, **o):
    return call(s, "WriteFile", path, dbus.ByteArray(data), opts(**o), timeout=timeout)
'''


def hex_bytes(res):
    return bytes.fromhex(res['ok']['bytes'])


class RoundTrip(Base):

    def test_upload_download_100mib(self):
        sid = self.create()
        bigdir = tempfile.mkdtemp(prefix='files-big-', dir=S.workdir)
        self.addCleanup(shutil.rmtree, bigdir, ignore_errors=True)
        big = os.path.join(bigdir, 'big.bin')
        h = hashlib.sha256()
        with open(big, 'wb') as f:
            for _ in range(100):
                chunk = os.urandom(MiB)
                h.update(chunk)
                f.write(chunk)
        want = h.hexdigest()
        # Upload from a descriptor of a host file; Download into a pipe that the client
        # reads while the call runs (a 100 MiB file does not fit a pipe's buffer).
        res = self.calls(sid, f'''
src = os.open({big!r}, os.O_RDONLY)
up = call(s, "Upload", "in/big.bin", fd(src), opts(CreateParents=True), timeout=120)
os.close(src)
st = call(s, "Stat", "in/big.bin")
down = download("/work/in/big.bin", timeout=120)
emit({{"up": up, "stat": st, "down": down}})''', timeout=300)
        self.assertEqual(res['up'].get('ok'), 100 * MiB, res['up'])
        self.assertEqual(res['stat']['ok'][1:3], ['file', 100 * MiB], res['stat'])
        self.assertEqual(res['down'].get('ok'), 100 * MiB, res['down'])
        self.assertTrue(res['down']['pipe']['ended'], res['down'])
        self.assertEqual(res['down']['pipe']['bytes'], 100 * MiB)
        self.assertEqual(res['down']['pipe']['sha256'], want, 'Download returned other bytes than uploaded')
        # The sandboxed code sees the same file.
        _st, out, _err = self.sh(sid, 'sha256sum /work/in/big.bin')
        self.assertEqual(out.split()[0].decode(), want, 'the file inside differs from the one uploaded')
        self.assert_host_unchanged()

    def test_write_read_append_mode(self):
        sid = self.create()
        res = self.calls(sid, '''
out = {}
out["no_parents"] = call(s, "WriteFile", "notes/a.txt", dbus.ByteArray(b"hello"), opts())
out["parents"] = call(s, "WriteFile", "notes/a.txt", dbus.ByteArray(b"hello"), opts(CreateParents=True))
out["append"] = call(s, "WriteFile", "notes/a.txt", dbus.ByteArray(b", world\\n"), opts(Append=True))
out["read"] = read("notes/a.txt")
out["slice"] = read("/work/notes/a.txt", 7, 5)
out["past_end"] = read("notes/a.txt", 100, 5)
out["private"] = call(s, "WriteFile", "/work/notes/private", dbus.ByteArray(b"k"), opts(Mode=0o600))
out["stat_private"] = call(s, "Stat", "notes/private")
out["stat_default"] = call(s, "Stat", "notes/a.txt")
out["script"] = call(s, "WriteFile", "run.sh", dbus.ByteArray(b"#!/bin/sh\\necho ran\\n"), opts(Mode=0o755))
out["overwrite"] = call(s, "WriteFile", "notes/a.txt", dbus.ByteArray(b"short"), opts())
out["reread"] = read("notes/a.txt")
out["bad_mode"] = call(s, "WriteFile", "x", dbus.ByteArray(b"k"), opts(Mode=0o170000))
out["dir"] = call(s, "WriteFile", "notes", dbus.ByteArray(b"k"), opts())
emit(out)''')
        self.assert_refused(res['no_parents'], 'WriteFile into a missing directory', NOT_FOUND)
        self.assertEqual(res['parents'].get('ok'), 5, res['parents'])
        self.assertEqual(res['append'].get('ok'), 8, res['append'])
        self.assertEqual(hex_bytes(res['read']), b'hello, world\n')
        self.assertEqual(hex_bytes(res['slice']), b'world')
        self.assertEqual(hex_bytes(res['past_end']), b'')
        self.assertEqual(res['stat_private']['ok'][1:4], ['file', 1, 0o600], res['stat_private'])
        self.assertEqual(res['stat_default']['ok'][1:4], ['file', 13, 0o644], res['stat_default'])
        self.assertEqual(hex_bytes(res['reread']), b'short', 'WriteFile without Append did not replace')
        self.assert_refused(res['bad_mode'], 'WriteFile with Mode 0170000',
                            ('io.sandboxd.Sandbox1.InvalidOption', 'org.freedesktop.DBus.Error.InvalidArgs'))
        self.assert_refused(res['dir'], 'WriteFile onto a directory')
        # What the sandboxed code sees: the content, the modes, an executable script.
        _st, out, _err = self.sh(sid, 'cat notes/a.txt; echo; stat -c "%a %s %u" notes/private notes/a.txt; '
                                      './run.sh')
        self.assertEqual(out.decode().split('\n'), ['short', '600 1 1000', '644 5 1000', 'ran', ''])

    def test_directories_list_move_remove(self):
        sid = self.create()
        self.sh(sid, 'mkdir -p /work/keepdir && echo keep > /work/keepdir/f && echo keep2 > /work/keepfile')
        res = self.calls(sid, '''
out = {}
out["no_parents"] = call(s, "MakeDirectory", "d1/d2/d3", False)
out["parents"] = call(s, "MakeDirectory", "d1/d2/d3", True)
out["again"] = call(s, "MakeDirectory", "/work/d1/d2/d3", True)
out["exists"] = call(s, "MakeDirectory", "d1", False)
call(s, "WriteFile", "d1/f", dbus.ByteArray(b"12345"), opts())
call(s, "WriteFile", "d1/d2/g", dbus.ByteArray(b"1234567"), opts())
call(s, "WriteFile", "d1/d2/d3/h", dbus.ByteArray(b"deep"), opts())
emit(out)''')
        self.assert_refused(res['no_parents'], 'MakeDirectory without parents', NOT_FOUND)
        self.assertIn('ok', res['parents'], res)
        self.assertIn('ok', res['again'], 'MakeDirectory parents=true of an existing directory (mkdir -p)')
        self.assert_refused(res['exists'], 'MakeDirectory of an existing directory without parents',
                            ('org.freedesktop.DBus.Error.FileExists', 'System.Error.EEXIST'))
        # Links the sandboxed code made: listed as links, never entered.
        self.sh(sid, 'ln -s f /work/d1/l && ln -s /work/keepdir /work/d1/d2/linkdir && '
                     'ln -s /work/keepfile /work/d1/kl')

        res = self.calls(sid, '''
out = {}
out["depth1"] = call(s, "ListFiles", "d1", dbus.UInt32(1))
out["depth2"] = call(s, "ListFiles", "/work/d1", dbus.UInt32(2))
out["depth0"] = call(s, "ListFiles", "d1", dbus.UInt32(0))
out["file"] = call(s, "ListFiles", "d1/f", dbus.UInt32(1))
out["stat_dir"] = call(s, "Stat", "d1/d2")
out["stat_link"] = call(s, "Stat", "d1/l")
emit(out)''')
        d1 = {e[0]: e for e in res['depth1']['ok']}
        self.assertEqual(sorted(d1), ['d2', 'f', 'kl', 'l'], res['depth1'])
        self.assertEqual(d1['f'][1:3], ['file', 5])
        self.assertEqual(d1['d2'][1], 'dir')
        self.assertEqual((d1['l'][1], d1['l'][5]), ('link', 'f'))
        self.assertEqual((d1['kl'][1], d1['kl'][5]), ('link', '/work/keepfile'))
        for e in d1.values():
            self.assertGreater(e[4], 1e15, f'mtime is not in µs since the epoch: {e}')
        d2 = {e[0]: e for e in res['depth2']['ok']}
        self.assertEqual(sorted(d2), ['d2', 'd2/d3', 'd2/g', 'd2/linkdir', 'f', 'kl', 'l'], res['depth2'])
        self.assertEqual(d2['d2/g'][1:3], ['file', 7])
        self.assertEqual(d2['d2/d3'][1], 'dir')
        self.assertEqual((d2['d2/linkdir'][1], d2['d2/linkdir'][5]), ('link', '/work/keepdir'))
        self.assert_refused(res['depth0'], 'ListFiles depth 0',
                            ('io.sandboxd.Sandbox1.InvalidOption', 'org.freedesktop.DBus.Error.InvalidArgs'))
        self.assert_refused(res['file'], 'ListFiles of a file',
                            ('System.Error.ENOTDIR', 'org.freedesktop.DBus.Error.InvalidArgs'))
        self.assertEqual(res['stat_dir']['ok'][1], 'dir', res['stat_dir'])
        # Stat follows a final symlink, as stat -L does; ListFiles shows the link.
        self.assertEqual(res['stat_link']['ok'][1:3], ['file', 5], res['stat_link'])
        self.assertEqual(res['stat_link']['ok'][0], 'd1/l', 'Stat reports the path as given')

        res = self.calls(sid, '''
out = {}
out["move"] = call(s, "Move", "d1/f", "/work/d1/d2/f2")
out["old"] = call(s, "Stat", "d1/f")
out["new"] = read("d1/d2/f2")
out["move_missing"] = call(s, "Move", "d1/nothing", "d1/other")
out["rm_link"] = call(s, "Remove", "d1/kl", False)
out["rm_nonempty"] = call(s, "Remove", "d1", False)
out["rm_recursive"] = call(s, "Remove", "/work/d1", True)
out["gone"] = call(s, "Stat", "d1")
out["rm_missing"] = call(s, "Remove", "d1", True)
emit(out)''')
        self.assertIn('ok', res['move'], res['move'])
        self.assert_refused(res['old'], 'Stat of the moved file', NOT_FOUND)
        self.assertEqual(hex_bytes(res['new']), b'12345')
        self.assert_refused(res['move_missing'], 'Move of a missing file', NOT_FOUND)
        self.assertIn('ok', res['rm_link'], res['rm_link'])
        self.assertIn('error', res['rm_nonempty'], 'Remove of a non-empty directory without recursive')
        self.assertIn('ok', res['rm_recursive'], res['rm_recursive'])
        self.assert_refused(res['gone'], 'Stat after Remove', NOT_FOUND)
        self.assert_refused(res['rm_missing'], 'Remove of a missing path', NOT_FOUND)
        # The links' targets are untouched: Remove removed the links, never followed them.
        _st, out, _err = self.sh(sid, 'ls /work; cat /work/keepdir/f /work/keepfile')
        self.assertEqual(out.decode().split('\n'), ['keepdir', 'keepfile', 'keep', 'keep2', ''])


class Escapes(Base):
    """Each escape planted by the sandboxed code fails, and the host's files are unchanged."""

    def test_symlinks_lead_only_to_sandbox_files(self):
        sid = self.create()
        self.sh(sid, f'ln -s /etc/shadow /work/shadow && ln -s {HOST_ONLY} /work/passwd && '
                     f'ln -s {self.hostfile} /work/hostfile && ln -s /etc /work/etcdir && '
                     f'ln -s {self.hostdir} /work/hostdir && echo inside > /work/target && '
                     f'ln -s /work/target /work/inlink')
        host_only = 'etcdir/' + os.path.basename(HOST_ONLY)
        paths = ['/work/shadow', 'shadow', 'passwd', 'hostfile', '/work/hostfile', 'etcdir/shadow',
                 host_only, 'hostdir/known.txt', '/work/hostdir/known.txt', 'inlink']
        res = self.calls(sid, f'''
out = {{}}
for p in {paths!r}:
    out[p] = {{"read": read(p), "download": download(p), "stat": call(s, "Stat", p)}}
emit(out)''')
        # Links, last or on the way, resolve in the sandbox's own root (as its code's would):
        # to its own /etc, which has no shadow and no debian_version, or to a directory it
        # does not have.
        for p, r in res.items():
            if p == 'inlink':
                continue
            for how in ('read', 'download', 'stat'):
                self.assert_refused(r[how], f'{how} {p}', NOT_FOUND)
            self.assertEqual(r['download']['pipe']['bytes'], 0, f'Download {p} wrote to the caller: {r}')
        # A link to a file of the sandbox's is followed, as cat and stat -L would.
        self.assertEqual(hex_bytes(res['inlink']['read']), b'inside\n')
        self.assertEqual(res['inlink']['download'].get('ok'), 7, res['inlink'])
        self.assertEqual(bytes.fromhex(res['inlink']['download']['pipe']['head']), b'inside\n')
        self.assertEqual(res['inlink']['stat']['ok'][1:3], ['file', 7], res['inlink'])
        self.assert_host_unchanged()

    def test_write_through_symlinks(self):
        sid = self.create()
        tag = 'sandboxd-escape-' + secrets.token_hex(6)
        self.sh(sid, f'ln -s /etc /work/etcdir && ln -s {self.hostdir} /work/hostdir && '
                     f'ln -s /tmp /work/tmpdir && ln -s {self.hostfile} /work/hostfile && '
                     f'ln -s /etc/passwd /work/passwd && echo target > /work/target && '
                     f'ln -s /work/target /work/inlink')
        cases = [f'/work/etcdir/{tag}', f'etcdir/{tag}', f'hostdir/{tag}', 'hostdir/known.txt',
                 '/work/hostdir/known.txt', 'hostfile', 'passwd', f'etcdir/{tag}/sub/x']
        res = self.calls(sid, f'''
out = {{}}
for p in {cases!r}:
    out[p] = {{
        "write": call(s, "WriteFile", p, dbus.ByteArray(b"ESCAPED\\n"), opts()),
        "write_parents": call(s, "WriteFile", p, dbus.ByteArray(b"ESCAPED\\n"), opts(CreateParents=True)),
        "append": call(s, "WriteFile", p, dbus.ByteArray(b"ESCAPED\\n"), opts(Append=True)),
        "upload": upload_bytes(p, b"ESCAPED\\n"),
        "upload_parents": upload_bytes(p, b"ESCAPED\\n", CreateParents=True),
        "mkdir": call(s, "MakeDirectory", p, True),
    }}
out["inlink"] = call(s, "WriteFile", "inlink", dbus.ByteArray(b"THROUGH\\n"), opts())
out["inlink_append"] = upload_bytes("inlink", b"MORE\\n", Append=True)
out["via_tmp"] = call(s, "WriteFile", "tmpdir/{tag}", dbus.ByteArray(b"INSIDE\\n"), opts())
out["via_tmp_upload"] = upload_bytes("/work/tmpdir/{tag}.up", b"INSIDE-UP\\n")
emit(out)''')
        for p in cases:
            for how, r in res[p].items():
                self.assert_refused(r, f'{how} {p}')
        # A link to a host path is a link to a path the sandbox does not have; one to its own
        # /etc/passwd, to a file it may not write.
        self.assert_refused(res['hostfile']['write'], 'WriteFile hostfile', NOT_FOUND)
        # A link to the sandbox's own file is written through, as tee(1) would; the link stays.
        self.assertEqual(res['inlink'].get('ok'), 8, res['inlink'])
        self.assertEqual(res['inlink_append'].get('ok'), 5, res['inlink_append'])
        _st, out, _err = self.sh(sid, 'readlink /work/inlink')
        self.assertEqual(out, b'/work/target\n')
        # A symlinked directory that leads somewhere the sandbox may write: the file lands in
        # the sandbox's own /tmp.
        self.assertEqual(res['via_tmp'].get('ok'), 7, res['via_tmp'])
        self.assertEqual(res['via_tmp_upload'].get('ok'), 10, res['via_tmp_upload'])
        _st, out, _err = self.sh(sid, f'cat /tmp/{tag} /tmp/{tag}.up /work/target')
        self.assertEqual(out, b'INSIDE\nINSIDE-UP\nTHROUGH\nMORE\n')
        self.assert_host_unchanged(also_absent=[f'/etc/{tag}', f'/tmp/{tag}',
                                                f'/tmp/{tag}.up', os.path.join(self.hostdir, tag)])

    def test_dotdot_and_absolute_paths_stay_inside(self):
        sid = self.create()
        tag = 'sandboxd-escape-' + secrets.token_hex(6)
        self.sh(sid, 'echo inside > /work/inside.txt && mkdir -p /work/a/b')
        # (The sandbox's own /etc/passwd is its own: a host-only file of /etc stands in.)
        h = HOST_ONLY.lstrip('/')
        reads = [HOST_ONLY, '/etc/shadow', f'../../{h}', '../../../../../../etc/shadow',
                 f'/work/../{h}', f'a/b/../../../{h}', '/root/.bashrc',
                 self.hostfile, '../../' + self.hostfile.lstrip('/'), f'/proc/1/root/{h}',
                 f'/proc/self/root/{h}']
        res = self.calls(sid, f'''
out = {{"read": {{}}, "download": {{}}}}
for p in {reads!r}:
    out["read"][p] = call(s, "ReadFile", p, dbus.UInt64(0), dbus.UInt64(0))
    out["download"][p] = download(p)
out["clamped"] = call(s, "ReadFile", "../../../../work/inside.txt", dbus.UInt64(0), dbus.UInt64(0))
out["clamped_dl"] = download("a/b/../../../../../work/./inside.txt")
out["list_root"] = call(s, "ListFiles", "/", dbus.UInt32(1))
out["list_up"] = call(s, "ListFiles", "../../..", dbus.UInt32(1))
out["list_etc"] = call(s, "ListFiles", "../etc", dbus.UInt32(1))
out["list_root_home"] = call(s, "ListFiles", "/root", dbus.UInt32(1))
out["list_hostdir"] = call(s, "ListFiles", {self.hostdir!r}, dbus.UInt32(1))
w = {{}}
for p in ["/etc/{tag}", "../../etc/{tag}", "/root/{tag}", "../../root/{tag}", {self.hostfile!r},
          "../../" + {self.hostfile!r}.lstrip("/"), {os.path.join(self.hostdir, tag)!r}]:
    w[p] = {{"write": call(s, "WriteFile", p, dbus.ByteArray(b"ESCAPED\\n"), opts(CreateParents=True)),
            "upload": upload_bytes(p, b"ESCAPED\\n", CreateParents=True),
            "mkdir": call(s, "MakeDirectory", p + ".d", True),
            "remove": call(s, "Remove", p, True),
            "move_from": call(s, "Move", p, "/work/stolen"),
            "move_to": call(s, "Move", "/work/inside.txt", p)}}
out["write"] = w
out["remove_host"] = call(s, "Remove", {self.hostdir!r}, True)
out["move_hostdir"] = call(s, "Move", {self.hostdir!r}, "/work/stolen-dir")
emit(out)''')
        for p in reads:
            # Exactly what the sandboxed code sees at that path: nothing.
            st, out, _err = self.sh(sid, f'cat {p}', check=False)
            self.assertNotEqual(st, 0, f'cat {p} inside the sandbox worked: {out!r}')
            self.assert_refused(res['read'][p], f'ReadFile {p}')
            self.assert_refused(res['download'][p], f'Download {p}')
            self.assertEqual(res['download'][p]['pipe']['bytes'], 0, f'Download {p} wrote data')
        self.assertEqual(hex_bytes(res['clamped']), b'inside\n', '".." above / did not stay at the sandbox\'s /')
        self.assertEqual(res['clamped_dl'].get('ok'), 7, res['clamped_dl'])
        self.assertEqual(bytes.fromhex(res['clamped_dl']['pipe']['head']), b'inside\n')
        # Listing "/" shows the sandbox's root, the same as `ls -A /` inside.
        _st, out, _err = self.sh(sid, 'ls -A /')
        inside_root = sorted(out.decode().split())
        self.assertEqual(sorted(e[0] for e in res['list_root']['ok']), inside_root)
        self.assertEqual(sorted(e[0] for e in res['list_up']['ok']), inside_root)
        self.assertNotIn('root', inside_root)
        _st, out, _err = self.sh(sid, 'ls -A /etc')
        self.assertEqual(sorted(e[0] for e in res['list_etc']['ok']), sorted(out.decode().split()))
        self.assertNotIn(os.path.basename(HOST_ONLY), out.decode().split())
        self.assertNotIn('shadow', out.decode().split())
        self.assert_refused(res['list_root_home'], 'ListFiles /root', NOT_FOUND)
        self.assert_refused(res['list_hostdir'], 'ListFiles of the host directory', NOT_FOUND)
        for p, r in res['write'].items():
            for how, x in r.items():
                self.assert_refused(x, f'{how} {p}')
        self.assert_refused(res['remove_host'], 'Remove of the host directory', NOT_FOUND)
        self.assert_refused(res['move_hostdir'], 'Move of the host directory', NOT_FOUND)
        _st, out, _err = self.sh(sid, 'cat /work/inside.txt; ls /work')
        self.assertEqual(out, b'inside\na\ninside.txt\n', 'the sandbox\'s own files changed')
        self.assert_host_unchanged(also_absent=[f'/etc/{tag}', f'/etc/{tag}.d', f'/root/{tag}',
                                                f'/root/{tag}.d'])

    def test_hard_links_are_sandbox_files(self):
        sid = self.create()
        # The sandbox reaches no host file to link: the bound host directories are other
        # mounts (EXDEV), the host's /etc and the test's directory are not there at all.
        for src in ('/usr/bin/env', '/etc/ld.so.cache', '/etc/passwd', self.hostfile):
            st, out, err = self.sh(sid, f'ln {src} /work/hl-try', check=False)
            self.assertNotEqual(st, 0, f'the sandbox hard-linked {src}: {out!r} {err!r}')
            self.assertRegex(err.decode(), r'(?i)cross-device|no such file|not permitted', err)
        self.sh(sid, 'echo original > /work/orig && ln /work/orig /work/hl && mkdir /work/d && ln /work/orig /work/d/hl2')
        res = self.calls(sid, '''
out = {}
out["stat"] = call(s, "Stat", "hl")
out["read"] = read("hl")
out["read2"] = read("d/hl2")
out["write"] = call(s, "WriteFile", "hl", dbus.ByteArray(b"changed\\n"), opts())
out["reread"] = read("orig")
out["remove"] = call(s, "Remove", "hl", False)
emit(out)''')
        self.assertEqual(res['stat']['ok'][1:3], ['file', 9], res['stat'])
        self.assertEqual(hex_bytes(res['read']), b'original\n')
        self.assertEqual(hex_bytes(res['read2']), b'original\n')
        # Writing through a hard link is writing the sandbox's own file (or refused).
        if 'ok' in res['write']:
            self.assertEqual(hex_bytes(res['reread']), b'changed\n')
        else:
            self.assert_refused(res['write'], 'WriteFile through a hard link')
        self.assertIn('ok', res['remove'])
        _st, out, _err = self.sh(sid, 'stat -c "%h %u" /work/orig; ls /work')
        self.assertEqual(out.decode().split('\n')[0], '2 1000')
        self.assert_host_unchanged()

    def test_symlink_swapped_in_a_loop(self):
        """A background process swaps /work/race between a regular file and symlinks (to
        /etc/passwd, to a host file, to a decoy inside) as fast as it can; 200 ReadFiles and
        200 Downloads see the regular file's content, a sandbox file a link leads to (the
        decoy, the sandbox's own passwd) or an error, never a host file's content."""
        sid = self.create()
        _st, own_passwd, _err = self.sh(sid, 'cat /etc/passwd')
        loop = ('echo DECOY > /work/decoy; '
                'while :; do '
                'echo REGULAR > /work/race.f; mv -f /work/race.f /work/race; '
                'ln -sfn /etc/passwd /work/race.l; mv -Tf /work/race.l /work/race; '
                'echo REGULAR > /work/race.f; mv -f /work/race.f /work/race; '
                f'ln -sfn {self.hostfile} /work/race.l; mv -Tf /work/race.l /work/race; '
                'echo REGULAR > /work/race.f; mv -f /work/race.f /work/race; '
                'ln -sfn /work/decoy /work/race.l; mv -Tf /work/race.l /work/race; '
                'rm -f /work/race; echo REGULAR > /work/race; '
                'done')
        res = self.calls(sid, f'''
pid = call(s, "Start", ["sh", "-c", {loop!r}], opts())
time.sleep(0.3)
reads, downloads = [], []
for i in range(200):
    r = call(s, "ReadFile", "/work/race", dbus.UInt64(0), dbus.UInt64(0), timeout=10)
    reads.append({{"error": r["error"], "message": r["message"]}} if "error" in r else {{"data": r["ok"]["bytes"]}})
    d = download("race", timeout=10)
    downloads.append({{"error": d["error"]}} if "error" in d else {{"data": d["pipe"]["head"]}})
running = call(s, "ReadOutput", pid["ok"])
call(s, "Signal", pid["ok"], 9)
emit({{"pid": pid, "reads": reads, "downloads": downloads, "running": running}})''', timeout=300)
        self.assertIn('ok', res['pid'], res['pid'])
        self.assertTrue(res['running']['ok'][2], f'the swapping loop was not running: {res["running"]}')
        for how in ('reads', 'downloads'):
            kinds = {}
            for r in res[how]:
                if 'error' in r:
                    kinds['link'] = kinds.get('link', 0) + 1   # the host file's path: not in the sandbox
                    self.assertIn(r['error'], NOT_FOUND, r)
                    continue
                data = bytes.fromhex(r['data'])
                if data in (b'DECOY\n', own_passwd[:len(data)]) and data:
                    kinds['link'] = kinds.get('link', 0) + 1
                    continue
                self.assertIn(data, (b'', b'REGULAR\n'), f'{how}: a race returned other content: {data!r}')
                self.assert_not_host_content(data, how)
                kinds['regular'] = kinds.get('regular', 0) + 1
            # The loop really raced: both a regular file and a link were met.
            self.assertIn('regular', kinds, f'{how}: {kinds}')
            self.assertIn('link', kinds, f'{how} never met the symlink: {kinds}')
        self.assert_host_unchanged()


class Descriptors(Base):
    """Upload and Download take the caller's descriptor: a pipe, socket or regular file
    works; one that could lead out of the sandbox (a directory, O_PATH) or is the wrong way
    round is refused, and nothing on the host changes."""

    def test_descriptor_kinds(self):
        sid = self.create()
        target = os.path.join(self.hostdir, 'download-target')
        res = self.calls(sid, f'''
import socket
out = {{}}
out["write"] = write("src.txt", b"payload\\n")
a, b = socket.socketpair()
reader = PipeReader(os.dup(b.fileno()))
b.close()
out["download_socket"] = call(s, "Download", "src.txt", fd(a.fileno()), opts())
a.close()
out["socket_data"] = reader.result()
a, b = socket.socketpair()
b.sendall(b"from a socket\\n")
b.close()
out["upload_socket"] = call(s, "Upload", "sock.txt", fd(a.fileno()), opts())
a.close()
out["sock_read"] = read("sock.txt")
f = os.open({target!r}, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
out["download_file"] = call(s, "Download", "src.txt", fd(f), opts())
os.close(f)
for name, flags in (("dir", os.O_RDONLY | os.O_DIRECTORY), ("path", os.O_PATH | os.O_DIRECTORY),
                    ("path_file", os.O_PATH)):
    f = os.open("/" if name != "path_file" else {self.hostfile!r}, flags)
    out["upload_" + name] = call(s, "Upload", "from-" + name, fd(f), opts())
    out["download_" + name] = call(s, "Download", "src.txt", fd(f), opts())
    os.close(f)
f = os.open({self.hostfile!r}, os.O_RDONLY)
out["download_readonly"] = call(s, "Download", "src.txt", fd(f), opts())
os.close(f)
out["listing"] = call(s, "ListFiles", "/work", dbus.UInt32(1))
emit(out)''')
        self.assertEqual(res['download_socket'].get('ok'), 8, res)
        self.assertEqual(bytes.fromhex(res['socket_data']['head']), b'payload\n')
        self.assertEqual(res['upload_socket'].get('ok'), 14, res)
        self.assertEqual(hex_bytes(res['sock_read']), b'from a socket\n')
        self.assertEqual(res['download_file'].get('ok'), 8, res)
        with open(target, 'rb') as f:
            self.assertEqual(f.read(), b'payload\n')
        os.unlink(target)
        for what in ('upload_dir', 'download_dir', 'upload_path', 'download_path', 'upload_path_file',
                     'download_path_file', 'download_readonly'):
            self.assertIn('error', res[what], f'{what} accepted: {res[what]}')
        names = sorted(e[0] for e in res['listing']['ok'])
        self.assertEqual(names, ['sock.txt', 'src.txt'], 'a refused Upload left a file')
        self.assert_host_unchanged()


class SpecialFiles(Base):
    """FIFOs, devices and sparse terabyte files: refused or bounded, fast; the daemon's
    memory stays flat."""

    def test_fifo_is_refused_at_once(self):
        sid = self.create()
        self.sh(sid, 'mkfifo /work/fifo && ln -s /work/fifo /work/fifolink && echo ok > /work/regular')
        res = self.calls(sid, '''
out = {}
out["read"] = read("fifo", timeout=10)
out["download"] = download("/work/fifo", timeout=10)
out["download_max"] = download("fifo", timeout=10, Max=1024)
out["write"] = call(s, "WriteFile", "fifo", dbus.ByteArray(b"x"), opts(), timeout=10)
out["append"] = call(s, "WriteFile", "fifo", dbus.ByteArray(b"x"), opts(Append=True), timeout=10)
out["upload"] = upload_bytes("fifo", b"x", timeout=10)
out["link"] = read("fifolink", timeout=10)
out["after"] = read("regular")
emit(out)''', timeout=120)
        for what in ('read', 'download', 'download_max', 'write', 'append', 'upload', 'link'):
            self.assert_refused(res[what], f'{what} of a FIFO', (NOT_REGULAR,))
            self.assertIn(': not a regular file: FIFO', res[what]['message'], res[what])
            self.assertLess(res[what]['seconds'], 5, f'{what} of a FIFO took {res[what]["seconds"]:.1f}s')
        self.assertEqual(hex_bytes(res['after']), b'ok\n', 'the sandbox serves files after the FIFO')
        self.assert_host_unchanged()

    def test_devices_are_refused(self):
        sid = self.create()
        self.sh(sid, 'ln -s /dev/zero /work/zero')
        res = self.calls(sid, '''
out = {}
for p in ["/dev/zero", "/dev/urandom", "/dev/null", "/dev/full", "/dev/tty", "/dev/pts/ptmx"]:
    out["read " + p] = call(s, "ReadFile", p, dbus.UInt64(0), dbus.UInt64(0), timeout=10)
    out["download " + p] = download(p, timeout=10, Max=1024 * 1024)
    out["download-unbounded " + p] = download(p, timeout=10)
out["write /dev/null"] = call(s, "WriteFile", "/dev/null", dbus.ByteArray(b"x"), opts(), timeout=10)
out["link"] = read("zero", timeout=10)
emit(out)''', timeout=120)
        for what, r in res.items():
            if what == 'link':
                continue
            self.assert_refused(r, what, REFUSALS + ('System.Error.ENXIO',))
            self.assertLess(r['seconds'], 5, f'{what} took {r["seconds"]:.1f}s')
            if 'pipe' in r:
                self.assertEqual(r['pipe']['bytes'], 0, f'{what} wrote {r["pipe"]["bytes"]} bytes')
        for p in ('/dev/zero', '/dev/urandom', '/dev/null', 'link'):
            r = res[f'read {p}'] if p != 'link' else res['link']
            self.assertEqual(r['error'], NOT_REGULAR, res)
            self.assertIn(': not a regular file: character device', r['message'], r)

    def test_sparse_terabyte_is_bounded(self):
        sid = self.create()
        self.sh(sid, 'truncate -s 1T /work/sparse && printf END >> /work/sparse')
        size = TiB + 3
        res = self.calls(sid, f'''
out = {{"rss": [daemon_rss_kib()]}}
out["stat"] = call(s, "Stat", "sparse")
out["download_max"] = download("sparse", timeout=30, Max=1024 * 1024)
reads = []
for length in (0, {TiB}, 2 ** 64 - 1, {PART_MAX}):
    r = call(s, "ReadFile", "sparse", dbus.UInt64(0), dbus.UInt64(length), timeout=60)
    reads.append({{"error": r["error"], "message": r["message"]}} if "error" in r else
                 {{"length": len(data_of(r)), "zero": data_of(r).count(0) == len(data_of(r)), "seconds": r["seconds"]}})
    out["rss"].append(daemon_rss_kib())
out["reads"] = reads
out["tail"] = call(s, "ReadFile", "sparse", dbus.UInt64({size - 8}), dbus.UInt64(0))
# Without Max, the sandbox's DiskMax (1 GiB) bounds a Download: refused at once.
out["download_default"] = download("sparse", timeout=30)
# With a Max that lets it through, Download streams: the caller takes 64 MiB and hangs up.
r, w = os.pipe()
reader = PipeReader(r, limit=64 * 1024 * 1024)
import threading
done = {{}}
t = threading.Thread(target=lambda: done.update(call(s, "Download", "sparse", fd(w), opts(Max=2 ** 62), timeout=60)))
t.start()
reader.join(60)
out["rss"].append(daemon_rss_kib())
os.close(w)
t.join(60)
out["stream"] = {{"pipe": reader.result(1), "call": done, "ended": not t.is_alive()}}
out["rss"].append(daemon_rss_kib())
out["after"] = call(s, "Stat", "sparse")
emit(out)''', timeout=300)
        self.assertEqual(res['stat']['ok'][1:3], ['file', size], res['stat'])
        dm = res['download_max']
        self.assert_refused(dm, 'Download of a sparse terabyte with Max=1 MiB',
                            ('io.sandboxd.Sandbox1.FileTooLarge',))
        self.assertLess(dm['seconds'], 5, f'Download with Max took {dm["seconds"]:.1f}s')
        self.assertLessEqual(dm['pipe']['bytes'], MiB, 'Download wrote more than Max')
        dd = res['download_default']
        self.assertEqual(dd.get('error'), 'io.sandboxd.Sandbox1.FileTooLarge', dd)
        self.assertIn('more than 1073741824 bytes', dd['message'])
        self.assertLess(dd['seconds'], 5)
        self.assertEqual(dd['pipe']['bytes'], 0)
        # Past ReadFile's bound: refused, naming the call that streams; at it: read.
        for r in res['reads'][:3]:
            self.assertEqual(r.get('error'), 'io.sandboxd.Sandbox1.FileTooLarge', r)
            self.assertIn('Download', r['message'])
        r = res['reads'][3]
        self.assertEqual(r.get('length'), PART_MAX, r)
        self.assertTrue(r['zero'])
        self.assertLess(r['seconds'], 30)
        self.assertEqual(hex_bytes(res['tail']), b'\0\0\0\0\0END', 'ReadFile at an offset near 1 TiB')
        st = res['stream']
        self.assertTrue(st['ended'], 'Download of a sparse terabyte went on after the caller hung up')
        self.assertEqual(st['pipe']['bytes'], 64 * MiB, st)
        self.assertIn('error', st['call'], f'Download to a closed pipe succeeded: {st}')
        # 4 MiB replies pass through the daemon; a leak of them, or a stream buffered in
        # it, would show as hundreds of MiB here.
        rss = res['rss']
        self.assertLess(max(rss) - rss[0], 64 * 1024, f'sandboxd grew by {(max(rss) - rss[0]) // 1024} MiB: {rss}')
        self.assertLess(rss[-1] - rss[0], 32 * 1024, f'sandboxd kept {(rss[-1] - rss[0]) // 1024} MiB: {rss}')
        self.assertIn('ok', res['after'], 'the sandbox serves files after the terabyte')
        self.assert_host_unchanged()



class HostileNames(Base):
    """Issue 13: names planted by the sandboxed code that are not UTF-8 (D-Bus strings must
    be) still get their reply: an escaped form in the string, the exact bytes as ay."""

    def test_non_utf8_names_are_answered_losslessly(self):
        sid = self.create()
        self.sh(sid, "mkdir /work/d && cd /work/d && : > \"$(printf 'bad\\377\\300name')\" && "
                     "ln -s \"$(printf 'to\\200x')\" lnk && : > ok")
        res = self.calls(sid, '''
out = {}
out["list"] = call(s, "ListFiles", "d", dbus.UInt32(1), timeout=20)
out["stat"] = call(s, "Stat", "d/lnk", timeout=20)
out["after"] = call(s, "Stat", "d/ok", timeout=20)
emit(out)''', timeout=120)
        self.assertIn('ok', res['list'], f'ListFiles of a non-UTF-8 name: {res["list"]}')
        entries = {e[0]: e for e in res['list']['ok']}
        self.assertEqual(sorted(entries), ['bad\\xff\\xc0name', 'lnk', 'ok'], entries)
        bad = entries['bad\\xff\\xc0name']
        self.assertEqual(bytes.fromhex(bad[6]['bytes']), b'bad\xff\xc0name')
        self.assertEqual(bytes.fromhex(bad[7]['bytes']), b'')
        lnk = entries['lnk']
        self.assertEqual((lnk[1], lnk[5]), ('link', 'to\\x80x'))
        self.assertEqual(bytes.fromhex(lnk[6]['bytes']), b'')
        self.assertEqual(bytes.fromhex(lnk[7]['bytes']), b'to\x80x')
        self.assertEqual(bytes.fromhex(entries['ok'][6]['bytes']), b'', 'a UTF-8 name has no bytes')
        self.assertIn('ok', res['after'])
        # Stat follows the link: to nothing (its target was never made), then to a file.
        self.assert_refused(res['stat'], 'Stat of a dangling link', NOT_FOUND)
        self.sh(sid, "cd /work/d && echo 12 > \"$(printf 'to\\200x')\"")
        res = self.calls(sid, 'emit(call(s, "Stat", "d/lnk", timeout=20))')
        self.assertEqual(res['ok'][:3], ['d/lnk', 'file', 3], res)



class Load(Base):
    """Issue 13: file operations in parallel are bounded per sandbox (sandboxd(8)): the
    agent never holds more than a few reads' data at once, so load cannot kill it."""

    def test_parallel_reads_do_not_kill_the_sandbox(self):
        sid = self.create('shell', MemoryMax=64 * MiB)  # 32 reads of 4 MiB held at once would be 128 MiB
        self.sh(sid, f'head -c {PART_MAX} /dev/urandom > /work/big && sha256sum /work/big')
        _st, out, _err = self.sh(sid, 'sha256sum /work/big')
        want = out.split()[0].decode()
        res = self.calls(sid, f'''
import multiprocessing
def one(i):
    import busclient, dbus, hashlib
    busclient._bus = dbus.SystemBus(private=True)
    try:
        s = busclient.sandbox({sid!r})
    except dbus.DBusException as e:
        return {{"error": e.get_dbus_name(), "message": e.get_dbus_message()}}
    barrier.wait(120)  # all 32 calls in flight together
    r = call(s, "ReadFile", "big", dbus.UInt64(0), dbus.UInt64(0), timeout=240)
    if "ok" in r:
        return {{"sha256": hashlib.sha256(data_of(r)).hexdigest()}}
    return {{"error": r["error"], "message": r["message"]}}
ctx = multiprocessing.get_context("fork")
barrier = ctx.Barrier(32)
with ctx.Pool(32) as pool:
    results = pool.map(one, range(32))
emit({{"results": results, "after": call(s, "Exec", ["true"], opts())}})''', timeout=600)
        results = res['results']
        failed = [r for r in results if 'error' in r]
        self.assertEqual(failed, [], f'{len(failed)} of 32 parallel reads failed: {failed[:3]}')
        self.assertEqual({r['sha256'] for r in results}, {want})
        self.assertIn('ok', res['after'], f'the sandbox after 32 parallel reads: {res["after"]}')
        # And the daemon did not lose the sandbox either.
        self.assertIn('ok', self.calls(sid, 'emit(call(s, "Stat", "big"))'))


if __name__ == '__main__':
    unittest.main(verbosity=2)
