#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Fails when docs/ARCHITECTURE.md names something that is not in the tree.

Every `code span` of the document, and every file or folder name in its code blocks
(the code map), is read as one of:
  - a path (src/core/sandbox.c, tests/unit/fake-peer.h, payload-bwrap.c, bench/*.py):
    it must exist, as written from the top of the tree, below src/, or, for a bare file
    name, somewhere in the tree;
  - a function (sandbox_exec(), manager_create_sandbox(...)): it must be defined or
    declared in src/, tests/ or python/ (C or Python), unless it is a function of a
    library or the kernel listed in EXTERNAL below;
  - a D-Bus or varlink method (CreateSandbox, io.sandboxd.Sandbox.Exec,
    Manager.ListPools()): it must be a method of the varlink interface or of a D-Bus
    vtable in src/sandboxd, or a method of systemd, polkit or the bus daemon that the
    core calls (EXTERNAL_METHODS);
  - a bare CamelCase name (a method, property, option, type or error: ListPools,
    SandboxError, MemoryMax): it must appear somewhere in the code;
  - anything else (a shell line, a value) is not checked.

Usage: check-architecture.py SOURCE_ROOT [DOCUMENT]
       check-architecture.py --self-test SOURCE_ROOT
"""

import os
import re
import subprocess
import sys

# Functions of libc, the kernel, systemd's libraries, json-c, libcurl, libmicrohttpd,
# libseccomp and the like that the document names; ours are looked up in the tree.
EXTERNAL = {
    'clone', 'clone3', 'fork', 'vfork', 'execve', 'exec', 'waitid', 'waitpid', 'kcmp', 'pivot_root', 'umount2',
    'mount', 'unshare', 'setns', 'write', 'read', 'fdatasync', 'fsync', 'close', 'open', 'openat', 'openat2',
    'socketpair', 'sendmsg', 'recvmsg', 'accept', 'accept4', 'poll', 'epoll_wait', 'pidfd_open',
    'pidfd_send_signal', 'prctl', 'setrlimit', 'sched_yield', 'kill', 'malloc', 'free', 'strcmp', 'memfd_create',
    'getpeername', 'getsockopt', 'connect', 'bind', 'listen', 'splice', 'sendfile', 'copy_file_range',
    'ioctl', 'mkdirat', 'unlinkat', 'renameat2', 'fstatat', 'statx', 'readlinkat', 'linkat', 'symlinkat',
    'fchownat', 'fchmodat', 'utimensat', 'mknodat', 'getdents64', 'abort', 'assert', 'exit', '_exit',
    'pthread_create', 'tg_set_bandwidth', 'sd_event_add_time', 'sd_event_add_io', 'sd_event_add_child',
    'sd_event_add_defer', 'sd_event_add_post', 'sd_event_run', 'sd_event_loop', 'sd_bus_call_async',
    'sd_bus_reply_method_return', 'sd_bus_message_ref', 'sd_bus_send', 'sd_bus_process', 'sd_bus_add_match',
    'sd_bus_add_match_async', 'sd_bus_emit_properties_changed', 'sd_bus_get_fd', 'sd_bus_message_new_method_call',
    'sd_bus_query_sender_creds', 'sd_bus_creds_get_euid', 'sd_bus_set_method_call_timeout', 'sd_notify',
    'sd_pid_notify_with_fds', 'sd_journal_open', 'sd_journal_wait', 'sd_journal_send', 'sd_listen_fds',
    'sd_listen_fds_with_names', 'sd_event_source_set_priority', 'sd_bus_add_object_vtable',
    'sd_bus_add_fallback_vtable', 'sd_bus_add_node_enumerator', 'sd_bus_track_new',
    'curl_multi_socket_action', 'curl_multi_setopt', 'seccomp_export_bpf', 'seccomp_rule_add',
    'json_tokener_parse_ex', 'json_object_to_json_string_ext', 'MHD_start_daemon', 'MHD_run',
    'MHD_get_fdset2', 'MHD_suspend_connection', 'MHD_resume_connection', 'MHD_get_timeout',
    'CheckAuthorization', 'archive_read_open', 'ZSTD_compressStream2', 'mysql_stmt_execute', 'mysql_real_connect',
    'TAKE_PTR', 'handler', 'print', 'open_memstream', 'getpwnam', 'mkdtemp', 'socket', 'shutdown',
    'setsockopt', 'fcntl', 'dup', 'dup2', 'dup3', 'pipe2', 'eventfd', 'signalfd', 'timerfd_create',
    'inotify_add_watch', 'syncfs', 'chdir', 'chroot', 'setgroups', 'setresuid', 'setresgid', 'capset',
    'sd_bus_call_method_async', 'sd_bus_message_read', 'sd_bus_message_append', 'sd_event_now',
    'seccomp_load', 'seccomp_init', 'json_object_put', 'json_object_get', 'mysql_stmt_prepare',
    'sd_bus_get_n_queued_write', 'compile', 'unit_add_family_to_cgroup_realize_queue',
}

# Files of other projects (crun's, systemd's, the varlink standard's) the document cites.
EXTERNAL_FILES = {'cgroup-systemd.c', 'cgroup-cgroupfs.c', 'org.varlink.service', 'system.conf'}

# Methods and signals of systemd, polkit and the bus daemon the document talks about.
EXTERNAL_METHODS = {
    'StartTransientUnit', 'StopUnit', 'KillUnit', 'FreezeUnit', 'ThawUnit', 'AttachProcessesToUnit',
    'ResetFailedUnit', 'GetUnit', 'JobRemoved', 'UnitRemoved', 'Subscribe', 'GetUnitProcesses',
    'CheckAuthorization', 'GetConnectionCredentials', 'GetConnectionUnixUser', 'NameOwnerChanged',
    'PropertiesChanged', 'GetAll', 'Get', 'Ping', 'GetInfo', 'GetInterfaceDescription', 'ReloadConfig',
    'RequestName', 'Hello', 'AddMatch', 'ListUnits', 'SetUnitProperties', 'GetMachineId',
    'LoadUnit', 'StartUnit', 'RestartUnit', 'Reload', 'Introspect',
}

EXTENSIONS = ('c', 'h', 'py', 'json', 'varlink', 'md', 'scd', 'in', 'build', 'sh', 'rules',
              'conf', 'service', 'socket', 'slice', 'js', 'mjs', 'txt', 'spec', 'policy', 'xml',
              'sysusers', 'tmpfiles', 'toml', 'cfg', 'lock', 'options')
TOP_DIRS = ('src/', 'tests/', 'tools/', 'bench/', 'man/', 'units/', 'docs/', 'python/',
            'packaging/', 'polkit/', 'dbus/', 'templates/', '.ci/', 'LICENSES/')


def tree_files(root):
    try:
        out = subprocess.run(['git', '-C', root, 'ls-files', '--cached', '--others', '--exclude-standard'],
                             capture_output=True, text=True, check=True).stdout
        files = [f for f in out.splitlines() if f]
        if files:
            return files
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith('.') and not x.startswith('build')]
        files += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return files


def code_spans(text):
    """The inline code spans of a Markdown text, with their line numbers, fenced blocks left out."""
    spans = []
    fenced = False
    for no, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith('```'):
            fenced = not fenced
            continue
        if fenced:
            # In a code block (the code map), the file and folder names.
            for m in re.finditer(r'(?<![\w/.*-])((?:src|tests|python|bench|docs|tools)/[\w./-]*|[\w*-]+\.(?:c|h|py|varlink|md))(?![\w/-])', line):
                spans.append((no, m.group(1)))
            continue
        for m in re.finditer(r'(`+)(.+?)\1', line):
            spans.append((no, m.group(2).strip()))
    return spans


class Tree:
    def __init__(self, root):
        self.root = root
        self.files = tree_files(root)
        self.fileset = set(self.files)
        self.dirs = {os.path.dirname(f) for f in self.files}
        for f in list(self.dirs):
            while f:
                f = os.path.dirname(f)
                self.dirs.add(f)
        self.basenames = {os.path.basename(f) for f in self.files}
        self.functions = set()
        self.methods = set()
        self.words = set()
        code = [f for f in self.files if f.startswith(('src/', 'tests/', 'python/', 'bench/', 'tools/'))
                and not f.endswith('check-architecture.py')]
        for f in code:
            path = os.path.join(root, f)
            if not os.path.isfile(path):
                continue
            try:
                with open(path, encoding='utf-8', errors='replace') as fh:
                    text = fh.read()
            except OSError:
                continue
            if f.startswith(('src/', 'python/')):
                self.words.update(re.findall(r'\b[A-Z]\w+', text))
            if f.endswith(('.c', '.h')):
                # Definitions, declarations, macros, and names used as function pointers in tables.
                self.functions.update(re.findall(r'\b([A-Za-z_]\w*)\s*\(', text))
                self.functions.update(re.findall(r'#\s*define\s+([A-Za-z_]\w*)', text))
                self.functions.update(re.findall(r'=\s*&?([a-z_]\w*)\s*[,;}]', text))
                self.methods.update(re.findall(r'SD_BUS_(?:METHOD|SIGNAL)\w*\(\s*"(\w+)"', text))
            elif f.endswith('.py') or '.' not in os.path.basename(f):
                self.functions.update(re.findall(r'\bdef\s+(\w+)', text))
                self.functions.update(re.findall(r'\bclass\s+(\w+)', text))
            if f.endswith('.varlink'):
                self.methods.update(re.findall(r'^\s*method\s+(\w+)', text, re.M))
                self.methods.update(re.findall(r'^\s*error\s+(\w+)', text, re.M))

    def path_exists(self, p):
        p = p.rstrip('/').removeprefix('./')
        if p in EXTERNAL_FILES:
            return True
        # Placeholders in capitals (payload-NAME.c, ID.json) stand for any name.
        p = re.sub(r'\b(?:NAME|ID|PID|N|X)\b', '*', p)
        if any(c in p for c in '*?['):
            rx = re.compile('^' + re.escape(p).replace(r'\*', '[^/]*').replace(r'\?', '.') + '$')
            cands = self.files if '/' in p else self.basenames
            return any(rx.match(f) for f in cands)
        for base in ('', 'src/', 'src/core/', 'src/shared/', 'src/sandboxd/'):
            if base + p in self.fileset or base + p in self.dirs:
                return True
        return '/' not in p and p in self.basenames


def looks_like_path(s):
    if ' ' in s or s.startswith(('-', '/', '$', 'http')) or '=' in s or '(' in s:
        return False
    if s.startswith(TOP_DIRS):
        return True
    if re.fullmatch(r'[\w.*-]+(/[\w.*{},-]+)*\.(' + '|'.join(EXTENSIONS) + ')', s):
        return True
    return False


def check(root, doc):
    tree = Tree(root)
    with open(doc, encoding='utf-8') as f:
        text = f.read()
    problems = []
    for no, span in code_spans(text):
        # A list of names in one span ("sandbox.c, exec.c"): each on its own.
        for item in re.split(r',\s+|\s+/\s+', span) if ',' in span or ' / ' in span else [span]:
            item = item.strip().rstrip('.,;:')
            if not item:
                continue
            if looks_like_path(item):
                if '{' in item:
                    continue
                if not tree.path_exists(item):
                    problems.append(f'{doc}:{no}: no such file: {item}')
                continue
            # A method named with its interface or object: io.sandboxd.Sandbox.Exec, Manager.ListPools()
            m = re.fullmatch(r'(?:io\.sandboxd\.Sandbox1?(?:\.Manager|\.Sandbox)?|Manager|Sandbox)\.([A-Z]\w*)(?:\(.*\))?', item)
            if m:
                if m.group(1) not in tree.methods:
                    problems.append(f'{doc}:{no}: no such D-Bus or varlink method: {m.group(1)}')
                continue
            # A function: name() or name(arguments); name(2) is a manual page.
            m = re.fullmatch(r'([A-Za-z_]\w*)\((.*)\)', item)
            if m and not re.fullmatch(r'\d\w*', m.group(2)):
                name = m.group(1)
                if re.fullmatch(r'[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+', name):
                    if name not in tree.methods and name not in EXTERNAL_METHODS:
                        problems.append(f'{doc}:{no}: no such D-Bus or varlink method: {name}')
                elif name not in tree.functions and name not in EXTERNAL:
                    problems.append(f'{doc}:{no}: no such function: {name}()')
                continue
            # A bare CamelCase name (a method, a property, an option, a type, an error):
            # it must be somewhere in the code.
            if re.fullmatch(r'[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+', item):
                if item not in tree.words and item not in EXTERNAL_METHODS:
                    problems.append(f'{doc}:{no}: named nowhere in the code: {item}')
    return problems


SELF_TEST = '''
Good: `src/core/sandbox.c`, `exec.c`, `sandbox_exec()`, `CreateSandbox`, `Manager.ListPools()`,
`StartTransientUnit()`, `write(2)`, `payload-NAME.c`.
```
src/core/            the core: manager.c, *-dbus.c
  nothing.c            a file that is not there
```
Bad: `src/core/no-such-file.c`, `sandbox_frobnicate()`, `io.sandboxd.Sandbox.FrobnicateSandbox`,
`FrobnicateSandbox()`, `NoSuchThingAnywhere`.
'''


def self_test(root):
    """The checker itself: it must flag the six bad names and none of the good ones."""
    import tempfile
    with tempfile.NamedTemporaryFile('w', suffix='.md', delete=False) as f:
        f.write(SELF_TEST)
    try:
        problems = check(root, f.name)
    finally:
        os.unlink(f.name)
    flagged = sorted(p.rsplit(': ', 1)[1] for p in problems)
    want = sorted(['nothing.c', 'src/core/no-such-file.c', 'sandbox_frobnicate()', 'FrobnicateSandbox',
                   'FrobnicateSandbox', 'NoSuchThingAnywhere'])
    if flagged != want:
        print(f'self-test: flagged {flagged}, expected {want}', file=sys.stderr)
        return 1
    print('self-test: the checker flags every bad name and no good one')
    return 0


def main(argv):
    if len(argv) > 1 and argv[1] == '--self-test':
        return self_test(argv[2])
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    doc = argv[2] if len(argv) > 2 else os.path.join(root, 'docs', 'ARCHITECTURE.md')
    problems = check(root, doc)
    for p in problems:
        print(p)
    if problems:
        print(f'{len(problems)} name(s) in {os.path.relpath(doc, root)} are not in the tree', file=sys.stderr)
        return 1
    print(f'{os.path.relpath(doc, root)}: every file, function and method it names exists')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
