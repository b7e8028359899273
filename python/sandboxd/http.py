# SPDX-License-Identifier: LGPL-2.1-or-later
"""The transport over sandboxd's HTTP bridge (``sandboxd-http``, REST at ``/api/v1``,
a bearer token): :class:`HttpTransport` and :class:`AsyncHttpTransport`.

Each method of io.sandboxd.Sandbox the client calls is translated to its route, and
the route's answer back to the method's reply, so that :class:`~sandboxd.Sandbox`,
:class:`~sandboxd.AsyncSandbox` and the seeds' classes work unchanged over it:

    from sandboxd import Sandbox
    from sandboxd.http import HttpTransport
    t = HttpTransport("https://sandboxes.example.com", token="sbx_...")
    with Sandbox.create("python", transport=t) as sbx:
        print(sbx.commands.run("echo hi", on_stdout=print).stdout)

``$SANDBOXD_URL`` and ``$SANDBOXD_TOKEN`` make it the default transport. What the bridge
has no route for is :class:`~sandboxd.NotSupported`: signals to background processes
(``commands.kill``), the warm pools and templates (``Sandbox.pools()``, and so
:class:`~sandboxd.code.SandboxPool`: use the varlink socket for those), file modes
(a file is written whole, in one request). ``Wait`` is done by polling the processes' status, and
``Stat`` by listing the parent directory. Errors come back by the names sandboxd gives
them; a file error's errno is inferred from the HTTP status where the bridge does not
send it (404 ENOENT, 409 EEXIST, 403 EACCES).
"""

from __future__ import annotations

import asyncio
import base64
import errno as _errno
import http.client
import json
import os
import posixpath
import re
import time
import urllib.parse
from typing import Any, AsyncGenerator, Callable, Iterator

from ._varlink import Reply
from .errors import INTERFACE, SandboxConnectionError, SandboxError, error_from_reply
from .transport import AsyncTransport, Transport

__all__ = ['HttpTransport', 'AsyncHttpTransport', 'http_error']

API = '/api/v1'
# A Wait without a limit over HTTP: asked for in turns of this many seconds.
_WAIT_TURN = 60
# Output followed over HTTP (commands.run(background=True, on_stdout=...)): polled this often.
_FOLLOW_POLL = 0.05

# An HTTP status to the errno a file error most likely had (the bridge's own mapping, reversed).
_STATUS_ERRNO = {404: _errno.ENOENT, 409: _errno.EEXIST, 403: _errno.EACCES, 400: _errno.EINVAL,
                 413: _errno.EFBIG}

# CreateSandbox's options: (key in the request body, in "limits")
_SESSION_OPTIONS = {'Timeout': ('timeout', False), 'IdleTimeout': ('idle_timeout', False),
                    'Name': ('name', False), 'ReuseExisting': ('reuse', False),
                    'FromSnapshot': ('from_snapshot', False), 'IdleAction': ('idle_action', False),
                    'MemoryMax': ('memory_max', True), 'CPUQuotaPerSecUSec': ('cpu_quota_per_sec_usec', True),
                    'TasksMax': ('tasks_max', True), 'DiskMax': ('disk_max', True),
                    'EgressAllow': ('egress_allow', False), 'EgressDeny': ('egress_deny', False),
                    'Secrets': ('secrets', False), 'Labels': ('labels', False)}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _not_supported(what: str) -> SandboxError:
    return error_from_reply(f'{INTERFACE}.NotSupported', {'message': f'{what}: sandboxd-http has no route for it'})


def http_error(status: int, body: bytes) -> SandboxError:
    """The exception for an HTTP error answer: ``{"error": {"code", "message"}}``, the
    code being sandboxd's error name without its interface (else a name of its own)."""
    try:
        e = json.loads(body).get('error') or {}
    except (ValueError, AttributeError):
        e = {}
    code = str(e.get('code') or f'HTTP{status}')
    parameters = {k: v for k, v in e.items() if k != 'code'}
    parameters.setdefault('message', body.decode(errors='replace')[:500] if not e else '')
    if '.' in code:
        name = code
    elif code in ('Unauthorized', 'NotFound', 'MethodNotAllowed', 'NotAFile') or code.startswith('HTTP'):
        name = f'io.sandboxd.http.{code}'
    else:
        name = f'{INTERFACE}.{code}'
    if code == 'SystemError' and 'errno' not in parameters and status in _STATUS_ERRNO:
        n = _STATUS_ERRNO[status]
        parameters.update(errno=n, errnoName=_errno.errorcode[n])
    return error_from_reply(name, parameters)


class _Response:
    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self.conn, self.resp, self.status = conn, resp, resp.status

    def json(self) -> Any:
        try:
            data = self.resp.read()
        finally:
            self.conn.close()
        return json.loads(data) if data else {}

    def body(self) -> bytes:
        try:
            return self.resp.read()
        finally:
            self.conn.close()


def _sse(r: _Response) -> Iterator[tuple[str, bytes]]:
    """The server-sent events of R as (event, data), read as the WHATWG event-stream parser
    reads them (lines end at CR, LF or CRLF); the connection is closed at the end."""
    try:
        event, data, rest = 'message', [], b''
        while True:
            chunk = r.resp.read1(65536) if hasattr(r.resp, 'read1') else r.resp.readline()
            if not chunk:
                return
            rest += chunk
            while True:
                m = re.search(b'\r\n|\r|\n', rest)
                if not m or (m.group() == b'\r' and m.end() == len(rest)):
                    break
                line, rest = rest[:m.start()], rest[m.end():]
                if line.startswith(b'event:'):
                    event = line[6:].strip().decode()
                elif line.startswith(b'data:'):
                    data.append(line[6:] if line.startswith(b'data: ') else line[5:])
                elif not line and data:
                    payload = b'\n'.join(data)
                    name, event, data = event, 'message', []
                    yield name, payload
    finally:
        r.conn.close()


class HttpTransport(Transport):
    """sandboxd-http at URL (``http://host:port`` or ``https://…``; default
    ``$SANDBOXD_URL``), authenticated with TOKEN (default ``$SANDBOXD_TOKEN``). Safe to
    share between threads: each call has a connection of its own."""

    write_chunk = None      # files are sent whole: the bridge writes them in parts itself

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 3700.0) -> None:
        url = url or os.environ.get('SANDBOXD_URL')
        if not url:
            raise ValueError('HttpTransport needs a URL (or $SANDBOXD_URL)')
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ('http', 'https') or not u.hostname:
            raise ValueError(f'not an http(s) URL: {url!r}')
        self.url = url
        self._https = u.scheme == 'https'
        self._netloc = u.netloc.rsplit('@', 1)[-1]
        self._prefix = u.path.rstrip('/')
        self.token = token if token is not None else os.environ.get('SANDBOXD_TOKEN')
        self.timeout = timeout
        self._routes: dict[str, Callable[..., Iterator[Reply]]] = {
            'CreateSandbox': self._create, 'GetSandbox': self._get, 'ListSandboxes': self._list,
            'ListTemplates': self._templates, 'GetQuota': self._quota, 'ListPorts': self._ports,
            'WatchDirectory': self._watch, 'Destroy': self._destroy, 'Pause': self._pause,
            'Resume': self._resume, 'SetTimeout': self._set_timeout, 'Exec': self._exec,
            'Start': self._start, 'ListProcesses': self._processes, 'ReadOutput': self._read_output,
            'Wait': self._wait, 'Signal': self._signal, 'WriteStdin': self._write_stdin,
            'CloseStdin': self._close_stdin, 'Follow': self._follow, 'ReadFile': self._read_file, 'WriteFile': self._write_file,
            'ListFiles': self._list_files, 'Stat': self._stat, 'MakeDirectory': self._mkdir,
            'Remove': self._remove, 'Move': self._move,
            'Snapshot': self._snapshot, 'Hibernate': self._hibernate, 'Fork': self._fork, 'Wake': self._wake,
            'ListSnapshots': self._snapshots, 'RemoveSnapshot': self._remove_snapshot,
            'SetSecret': self._set_secret, 'ListSecrets': self._secrets, 'RemoveSecret': self._remove_secret,
            'CreateContext': self._create_context, 'ListContexts': self._contexts, 'RunCode': self._run_code,
            'InterruptContext': self._interrupt_context, 'RestartContext': self._restart_context,
            'RemoveContext': self._remove_context,
        }

    def __repr__(self) -> str:
        return f'HttpTransport({self.url!r})'

    # ---- HTTP ----------------------------------------------------------------------

    def _request(self, verb: str, path: str, body: Any = None,
                 query: dict[str, Any] | list[tuple[str, str]] | None = None,
                 accept: str = 'application/json') -> _Response:
        target = self._prefix + API + path
        if query:
            target += '?' + urllib.parse.urlencode(query)
        headers = {'Accept': accept}
        if self.token:
            headers['Authorization'] = f'Bearer {self.token}'
        data: bytes | None = None
        if isinstance(body, bytes):
            data = body
            headers['Content-Type'] = 'application/octet-stream'
        elif body is not None:
            data = json.dumps(body).encode()
            headers['Content-Type'] = 'application/json'
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = cls(self._netloc, timeout=self.timeout)
        try:
            conn.request(verb, target, body=data, headers=headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise SandboxConnectionError(f'{verb} {self.url}{API}{path}: {e}') from e
        if resp.status >= 400:
            try:
                raise http_error(resp.status, resp.read())
            finally:
                conn.close()
        return _Response(conn, resp)

    @staticmethod
    def _session(p: dict[str, Any], rest: str = '') -> str:
        return '/sessions/' + urllib.parse.quote(p['id'], safe='') + rest

    def call(self, method: str, parameters: dict[str, Any] | None = None,
             more: bool = False) -> Iterator[Reply]:
        short = method.rsplit('.', 1)[-1] if method.startswith(INTERFACE + '.') or '.' not in method else method
        route = self._routes.get(short)
        if route is None:
            raise _not_supported(method)
        return route(parameters or {}, more)

    def _one(self, parameters: dict[str, Any]) -> Iterator[Reply]:
        yield Reply(parameters, False)

    # ---- sessions ----------------------------------------------------------------------

    @staticmethod
    def _session_body(p: dict[str, Any], method: str) -> dict[str, Any]:
        """CreateSandbox's (Fork's) options as the body of POST /sessions (.../fork)."""
        body: dict[str, Any] = {}
        for option, value in (p.get('options') or {}).items():
            if option == 'Ephemeral':
                body['mode'] = 'ephemeral' if value else 'persistent'
            elif option in _SESSION_OPTIONS:
                key, in_limits = _SESSION_OPTIONS[option]
                (body.setdefault('limits', {}) if in_limits else body)[key] = value
            else:
                raise _not_supported(f'{method} option {option}')
        return body

    def _create(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        body = self._session_body(p, 'CreateSandbox')
        if p.get('template'):
            body['template'] = p['template']
        sandbox = self._request('POST', '/sessions', body).json()
        return self._one({'id': sandbox['id']})

    def _get(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._one({'sandbox': self._request('GET', self._session(p)).json()})

    def _list(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        f = p.get('filter') or {}
        if set(f) - {'Label'}:
            raise _not_supported(f'ListSandboxes filter {", ".join(sorted(set(f) - {"Label"}))}')
        query = [('label', s) for s in f.get('Label') or []]
        return self._one({'sandboxes': self._request('GET', '/sessions', query=query).json()})

    def _templates(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._one({'templates': self._request('GET', '/templates').json()})

    def _ports(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._one({'ports': self._request('GET', self._session(p, '/ports')).json()})

    def _watch(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        """WatchDirectory: GET .../watch's server-sent events "change", each a reply."""
        query = {'path': p['path'], 'recursive': 'true' if p.get('recursive') else 'false'}
        r = self._request('GET', self._session(p, '/watch'), query=query, accept='text/event-stream')
        # _sse() closes the connection when the stream ends, or when this stops reading.
        for event, data in _sse(r):
            if event == 'change':
                yield Reply({'event': json.loads(data)}, True)
            elif event == 'error':
                raise http_error(500, json.dumps({'error': json.loads(data)}).encode())

    def _quota(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._one(self._request('GET', '/quota').json())

    def _secret_path(self, p: dict[str, Any]) -> str:
        return '/secrets/' + urllib.parse.quote(str(p.get('name', '')), safe='')

    def _set_secret(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._simple('PUT', self._secret_path(p), {'value': p.get('value')})

    def _secrets(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._one({'names': self._request('GET', '/secrets').json()})

    def _remove_secret(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._simple('DELETE', self._secret_path(p))

    def _simple(self, verb: str, path: str, body: Any = None, query: dict[str, Any] | None = None) -> Iterator[Reply]:
        self._request(verb, path, body, query).body()
        return self._one({})

    def _destroy(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._simple('DELETE', self._session(p))

    def _pause(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._simple('POST', self._session(p, '/pause'), {})

    def _resume(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._simple('POST', self._session(p, '/resume'), {})

    def _set_timeout(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._simple('POST', self._session(p, '/timeout'),
                            {'timeout': p['lifetimeSec'], 'idle_timeout': p['idleSec']})

    # ---- snapshots ---------------------------------------------------------------------

    @staticmethod
    def _snapshot_body(p: dict[str, Any]) -> dict[str, Any]:
        return {'include_tmp': True} if (p.get('options') or {}).get('IncludeTmp') else {}

    def _snapshot(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._one({'snapshot': self._request('POST', self._session(p, '/snapshot'),
                                                    self._snapshot_body(p)).json()})

    def _hibernate(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._one({'snapshot': self._request('POST', self._session(p, '/hibernate'),
                                                    self._snapshot_body(p)).json()})

    def _fork(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        sandbox = self._request('POST', self._session(p, '/fork'), self._session_body(p, 'Fork')).json()
        return self._one({'id': sandbox['id']})

    def _wake(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._one({'id': self._request('POST', self._session(p, '/wake'), {}).json()['id']})

    def _snapshots(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._one({'snapshots': self._request('GET', '/snapshots').json()})

    def _remove_snapshot(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._simple('DELETE', '/snapshots/' + urllib.parse.quote(p['snapshot'], safe=''))

    # ---- commands ------------------------------------------------------------------------

    @staticmethod
    def _exec_body(p: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {'argv': p['argv']}
        for option, value in (p.get('options') or {}).items():
            if option == 'Environment':
                body['env'] = dict(e.split('=', 1) for e in value)
            elif option == 'WorkingDirectory':
                body['cwd'] = value
            elif option == 'TimeoutUSec':
                body['timeout'] = value / 1e6     # seconds, 0.5 too
            elif option == 'StdinPipe':
                body['stdin_pipe'] = bool(value)
            elif option == 'TTY':
                body['tty'] = bool(value)
            elif option == 'Stdin':
                try:
                    body['stdin'] = base64.b64decode(value).decode()
                except UnicodeDecodeError:
                    raise _not_supported('standard input that is not UTF-8') from None
            else:
                raise _not_supported(f'Exec option {option}')
        return body

    @staticmethod
    def _output(o: dict[str, Any], key: str) -> str:
        """An output field as base64: the bridge sends text, or base64 under KEY_base64."""
        if o.get(f'{key}_base64'):
            return str(o[f'{key}_base64'])
        return _b64((o.get(key) or '').encode())

    def _exec(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        body = self._exec_body(p)
        if not more:
            o = self._request('POST', self._session(p, '/execute'), body).json()
            return self._one({'exitStatus': o.get('exit_code'), 'stdout': self._output(o, 'stdout'),
                              'stderr': self._output(o, 'stderr'), 'info': o.get('info') or {}})
        return self._events(self._request('POST', self._session(p, '/execute'), body, accept='text/event-stream'))

    def _events(self, r: _Response) -> Iterator[Reply]:
        """Exec's server-sent events (sandboxd-http(8), EVENTS): stdout and stderr (each a
        chunk, {"data", "encoding"}: utf-8 text or base64), then result (JSON) or error.
        Lines end at CR, LF or CRLF, as the WHATWG event-stream parser reads them."""
        try:
            event, data, rest = 'message', [], b''
            while True:
                chunk = r.resp.read1(65536) if hasattr(r.resp, 'read1') else r.resp.readline()
                if not chunk:
                    raise SandboxConnectionError('sandboxd-http ended the stream before the result')
                rest += chunk
                while True:
                    m = re.search(b'\r\n|\r|\n', rest)
                    if not m or (m.group() == b'\r' and m.end() == len(rest)):
                        break       # a CR at the end may be the first half of a CRLF
                    line, rest = rest[:m.start()], rest[m.end():]
                    if line.startswith(b'event:'):
                        event = line[6:].strip().decode()
                    elif line.startswith(b'data:'):
                        data.append(line[6:] if line.startswith(b'data: ') else line[5:])
                    elif not line and data:
                        payload = b'\n'.join(data)
                        event, data, name = 'message', [], event
                        if name in ('stdout', 'stderr'):
                            o = json.loads(payload)
                            out = base64.b64decode(o['data']) if o.get('encoding') == 'base64' else o['data'].encode()
                            yield Reply({name: _b64(out)}, True)
                        elif name == 'result':
                            o = json.loads(payload)
                            yield Reply({'exitStatus': o.get('exit_code'), 'info': o.get('info') or {}}, False)
                            return
                        elif name == 'error':
                            e = json.loads(payload)
                            raise http_error(500, json.dumps({'error': e}).encode())
        finally:
            r.conn.close()

    # ---- code contexts ----------------------------------------------------------------

    def _context(self, p: dict[str, Any], rest: str = '') -> str:
        return self._session(p, '/contexts/' + urllib.parse.quote(p.get('context') or 'default', safe='') + rest)

    def _create_context(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        body: dict[str, Any] = {}
        if p.get('language'):
            body['language'] = p['language']
        for option, value in (p.get('options') or {}).items():
            if option == 'WorkingDirectory':
                body['cwd'] = value
            elif option == 'Environment':
                body['env'] = dict(e.split('=', 1) for e in value)
            else:
                raise _not_supported(f'CreateContext option {option}')
        return self._one({'context': self._request('POST', self._session(p, '/contexts'), body).json()})

    def _contexts(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._one({'contexts': self._request('GET', self._session(p, '/contexts')).json()})

    def _interrupt_context(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        self._request('POST', self._context(p, '/interrupt'), {}).body()
        return self._one({})

    def _restart_context(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._one({'context': self._request('POST', self._context(p, '/restart'), {}).json()})

    def _remove_context(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        self._request('DELETE', self._context(p)).body()
        return self._one({})

    def _run_code(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        body: dict[str, Any] = {'code': p['code']}
        if p.get('language') and not p.get('context'):
            body['language'] = p['language']
        for option, value in (p.get('options') or {}).items():
            if option == 'TimeoutUSec':
                body['timeout'] = value / 1e6
            elif option == 'Timeout':
                body['timeout'] = value
            elif option == 'OutputMax':
                body['output_max'] = value
            else:
                raise _not_supported(f'RunCode option {option}')
        if not more:
            return self._one(self._request('POST', self._context(p, '/run'), body).json())
        return self._cells(self._request('POST', self._context(p, '/run'), body, accept='text/event-stream'))

    def _cells(self, r: _Response) -> Iterator[Reply]:
        """RunCode's server-sent events: "cell" (an event), then "end" (the result), or
        "error" {code, message}."""
        for name, payload in _sse(r):
            if name == 'cell':
                yield Reply({'event': json.loads(payload)}, True)
            elif name == 'end':
                yield Reply({'result': json.loads(payload)}, False)
                return
            elif name == 'error':
                raise http_error(500, json.dumps({'error': json.loads(payload)}).encode())
        raise SandboxConnectionError('sandboxd-http ended the stream before the result')

    def _start(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        body = dict(self._exec_body(p), background=True)
        o = self._request('POST', self._session(p, '/execute'), body).json()
        return self._one({'process': o['execution_id']})

    def _processes(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._one({'processes': self._request('GET', self._session(p, '/status')).json()})

    def _read_output(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        o = self._request('GET', self._session(p, f'/executions/{int(p["process"])}')).json()
        return self._one({'stdout': self._output(o, 'stdout'), 'stderr': self._output(o, 'stderr'),
                          'running': bool(o.get('running'))})

    def _wait(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        """Wait: .../result with the bridge's wait (sandboxd's Wait; 409 StillRunning after
        it), in turns of at most _WAIT_TURN seconds when there is no limit."""
        limit = p.get('timeoutSec') or 0
        while True:
            try:
                o = self._request('GET', self._session(p, '/result'),
                                  query={'execution': int(p['process']), 'wait': limit or _WAIT_TURN}).json()
                return self._one({'exitStatus': o.get('exit_code'), 'info': o.get('info') or {}})
            except SandboxError as e:
                if limit or not e.name.endswith('.StillRunning'):
                    raise

    def _execution(self, p: dict[str, Any], rest: str = '') -> str:
        return self._session(p, f'/executions/{int(p["process"])}{rest}')

    def _signal(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._simple('POST', self._execution(p, '/signal'), {'signal': int(p['signal'])})

    def _write_stdin(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._simple('POST', self._execution(p, '/stdin'), {'data_base64': p['data']})

    def _close_stdin(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._simple('POST', self._execution(p, '/stdin/close'), {})

    def _follow(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        """Follow, by polling .../logs with its cursor (every byte once) until the process
        ended, then its exit from .../result."""
        cursor = None
        while True:
            o = self._request('GET', self._execution(p, '/logs'), query={'cursor': cursor} if cursor else None).json()
            cursor = o['cursor']
            for key in ('stdout', 'stderr'):
                data = base64.b64decode(self._output(o, key))
                if data:
                    yield Reply({key: _b64(data)}, True)
            if not o.get('running'):
                break
            time.sleep(_FOLLOW_POLL)
        r = self._request('GET', self._session(p, '/result'), query={'execution': int(p['process']), 'wait': 1}).json()
        yield Reply({'exitStatus': r.get('exit_code'), 'info': r.get('info') or {}}, False)

    # ---- files ---------------------------------------------------------------------------

    def _file_query(self, p: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return dict({'path': p['path']}, **{k: v for k, v in extra.items() if v is not None})

    def _read_file(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        data = self._request('GET', self._session(p, '/files'), query=self._file_query(p),
                             accept='application/octet-stream').body()
        offset, length = p.get('offset') or 0, p.get('length') or 0
        return self._one({'data': _b64(data[offset:offset + length] if length else data[offset:])})

    def _write_file(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        options = p.get('options') or {}
        for option in options:
            if option not in ('CreateParents',) and not (option == 'Append' and not options[option]):
                raise _not_supported(f'WriteFile option {option}')
        o = self._request('PUT', self._session(p, '/files'), base64.b64decode(p['data']),
                          query=self._file_query(p)).json()
        return self._one({'bytes': o.get('bytes', 0)})

    def _list_files(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        entries = self._request('GET', self._session(p, '/files/list'),
                                query=self._file_query(p, depth=p.get('depth'))).json()
        return self._one({'entries': entries})

    def _stat(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        # The bridge has no Stat route: the entry from its parent's listing, a symlink
        # followed (as sandboxd's Stat does) the way the kernel would, 40 links at most.
        path = p['path'].rstrip('/') or '/'
        for _ in range(40):
            parent, name = posixpath.split(path)
            entries = self._request('GET', self._session(p, '/files/list'),
                                    query={'path': parent or '.', 'depth': 1}).json()
            e = next((e for e in entries if e.get('path') == name), None)
            if e is None:
                break
            if e.get('type') != 'link':
                return self._one({'entry': dict(e, path=p['path'])})
            path = posixpath.normpath(posixpath.join(parent or '.', e.get('target') or ''))
        raise error_from_reply(f'{INTERFACE}.SystemError', {'errno': _errno.ENOENT, 'errnoName': 'ENOENT',
                                                            'message': f'{p["path"]}: No such file or directory'})

    def _mkdir(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._simple('POST', self._session(p, '/files/mkdir'),
                            {'path': p['path'], 'parents': bool(p.get('parents'))})

    def _remove(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._simple('DELETE', self._session(p, '/files'),
                            query=self._file_query(p, recursive='true' if p.get('recursive') else None))

    def _move(self, p: dict[str, Any], more: bool) -> Iterator[Reply]:
        return self._simple('POST', self._session(p, '/files/move'), {'from': p['path'], 'to': p['to']})


def _next(replies: Iterator[Reply]) -> Reply | None:
    return next(replies, None)


class AsyncHttpTransport(AsyncTransport):
    """:class:`HttpTransport` for asyncio code: each request runs in a worker thread
    (the standard library has no asyncio HTTP client), replies come back as they arrive."""

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 3700.0) -> None:
        self.sync = HttpTransport(url, token, timeout)
        self.write_chunk = self.sync.write_chunk

    def __repr__(self) -> str:
        return f'AsyncHttpTransport({self.sync.url!r})'

    async def call(self, method: str, parameters: dict[str, Any] | None = None,
                   more: bool = False) -> AsyncGenerator[Reply, None]:
        replies = await asyncio.to_thread(self.sync.call, method, parameters, more)
        try:
            while True:
                reply = await asyncio.to_thread(_next, replies)
                if reply is None:
                    return
                yield reply
        finally:
            close = getattr(replies, 'close', None)
            if close is not None:
                await asyncio.to_thread(close)
