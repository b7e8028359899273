# SPDX-License-Identifier: LGPL-2.1-or-later
"""Code contexts (docs/CONTEXTS.md): what :meth:`Sandbox.run_code` returns, shaped as E2B's
code interpreter has it: an :class:`Execution` with its ``results`` (each a
:class:`Result` with its MIME representations: ``text``, ``html``, ``png`` ...), its
``logs`` (stdout and stderr) and its ``error``; and :class:`Context`, a stateful Python or
JavaScript session in a sandbox."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from . import _ops
from ._ops import NEXT, Call, Emit, Op

__all__ = ['Context', 'Execution', 'ExecutionError', 'Logs', 'Result', 'OutputMessage']

# MIME type -> Result attribute, as E2B names them.
_FORMATS = {
    'text/plain': 'text', 'text/html': 'html', 'text/markdown': 'markdown', 'image/svg+xml': 'svg',
    'image/png': 'png', 'image/jpeg': 'jpeg', 'application/pdf': 'pdf', 'text/latex': 'latex',
    'application/json': 'json', 'application/javascript': 'javascript',
}


@dataclass
class Result:
    """One result of a cell: its value (``is_main_result``: the cell's last expression) or
    something it displayed (a figure), in each representation the kernel gave; ``png``,
    ``jpeg`` and ``pdf`` are base64 text, as in Jupyter."""

    text: str | None = None
    html: str | None = None
    markdown: str | None = None
    svg: str | None = None
    png: str | None = None
    jpeg: str | None = None
    pdf: str | None = None
    latex: str | None = None
    json: Any = None
    javascript: str | None = None
    is_main_result: bool = False
    #: representations of other MIME types
    extra: dict[str, Any] = field(default_factory=dict)
    #: every representation, by MIME type
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> 'Result':
        data = dict(event.get('data') or {})
        r = cls(is_main_result=bool(event.get('isMainResult')), data=data)
        for mime, value in data.items():
            attr = _FORMATS.get(mime)
            if attr:
                setattr(r, attr, value)
            else:
                r.extra[mime] = value
        return r

    def formats(self) -> list[str]:
        """The names of the representations it has (``['text', 'png']``)."""
        return [a for m, a in _FORMATS.items() if m in self.data] + list(self.extra)

    def __str__(self) -> str:
        return self.text or ''

    # Jupyter's own display, when an Execution is shown in a notebook.
    def _repr_html_(self) -> str | None:
        return self.html

    def _repr_png_(self) -> str | None:
        return self.png

    def _repr_svg_(self) -> str | None:
        return self.svg


@dataclass
class Logs:
    """What the cell printed, chunk by chunk as it came."""

    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)


@dataclass
class ExecutionError:
    """The exception the cell raised: its class name, its message and the traceback."""

    name: str
    value: str
    traceback: str
    traceback_lines: list[str] = field(default_factory=list)

    @classmethod
    def from_event(cls, event: dict[str, Any]) -> 'ExecutionError':
        lines = [str(x) for x in event.get('traceback') or []]
        return cls(str(event.get('name', '')), str(event.get('value', '')), '\n'.join(lines), lines)


@dataclass
class OutputMessage:
    """A chunk of stdout or stderr, as the on_stdout and on_stderr callbacks get it."""

    line: str
    error: bool = False

    def __str__(self) -> str:
        return self.line


@dataclass
class Execution:
    """A cell's run: ``results``, ``logs``, ``error`` (None if it raised nothing) and its
    ``execution_count``; ``truncated`` if its output went beyond the cell's output_max
    and the rest was dropped; ``interrupted``, ``timed_out``; ``context_id``: where it ran."""

    results: list[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    error: ExecutionError | None = None
    execution_count: int | None = None
    context_id: str = ''
    status: str = ''
    truncated: bool = False
    interrupted: bool = False
    timed_out: bool = False
    duration: float = 0.0

    @property
    def text(self) -> str | None:
        """The text of the cell's value (its main result), if it had one."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None


@dataclass(frozen=True)
class Context:
    """A code context of a sandbox: ``id``, ``language`` (python, javascript), ``cwd``,
    ``state`` (starting, idle, busy, lost; ``lost_reason`` says why), its ``execution_count``
    so far, whether it is the sandbox's ``default`` one of its language."""

    id: str
    language: str
    cwd: str = '/work'
    state: str = ''
    execution_count: int = 0
    version: str = ''
    default: bool = False
    lost_reason: str = ''
    created_at: _dt.datetime | None = None

    @classmethod
    def from_reply(cls, c: dict[str, Any]) -> 'Context':
        usec = c.get('createdAt')
        return cls(id=str(c['id']), language=str(c.get('language', '')), cwd=str(c.get('workingDirectory', '/work')),
                   state=str(c.get('state', '')), execution_count=int(c.get('executionCount') or 0),
                   version=str(c.get('version', '')), default=bool(c.get('default')),
                   lost_reason=str(c.get('lostReason') or ''),
                   created_at=_dt.datetime.fromtimestamp(usec / 1e6, tz=_dt.timezone.utc)
                   if isinstance(usec, int) and usec > 0 else None)


def context_id(context: 'Context | str | None') -> str | None:
    if context is None or isinstance(context, str):
        return context
    return context.id


# ---- the operations (run by Sandbox and AsyncSandbox) ----

Callback = Callable[[Any], Any]


def run_code(sandbox_id: str, code: str, context: str | None, language: str | None, timeout: float | None,
             output_max: int | None, on_stdout: Callback | None, on_stderr: Callback | None,
             on_result: Callback | None, on_error: Callback | None) -> Op[Execution]:
    """RunCode with "more": each event to its callback as it comes, then the Execution."""
    params: dict[str, Any] = {'id': sandbox_id, 'code': code}
    if context:
        params['context'] = context
    if language:
        params['language'] = language
    options: dict[str, Any] = {}
    t = _ops.exec_timeout(timeout)
    if t is not None:
        options['TimeoutUSec'] = t
    if output_max is not None:
        options['OutputMax'] = int(output_max)
    if options:
        params['options'] = options
    ex = Execution()
    reply = yield Call('RunCode', params, more=True)
    while True:
        p = reply.parameters
        e = p.get('event')
        events: Iterator[dict[str, Any]] = iter([e] if e else p.get('events') or [])
        for e in events:
            kind = e.get('type')
            if kind in ('stdout', 'stderr'):
                (ex.logs.stdout if kind == 'stdout' else ex.logs.stderr).append(str(e.get('text', '')))
                cb = on_stdout if kind == 'stdout' else on_stderr
                if cb:
                    yield Emit(cb, OutputMessage(str(e.get('text', '')), kind == 'stderr'))
            elif kind == 'result':
                r = Result.from_event(e)
                ex.results.append(r)
                if on_result:
                    yield Emit(on_result, r)
            elif kind == 'error':
                ex.error = ExecutionError.from_event(e)
                if on_error:
                    yield Emit(on_error, ex.error)
        if not reply.continues:
            break
        reply = yield NEXT
    res = p.get('result') or {}
    ex.execution_count = res.get('executionCount')
    ex.context_id = str(res.get('context', ''))
    ex.status = str(res.get('status', ''))
    ex.truncated = bool(res.get('truncated'))
    ex.interrupted = bool(res.get('interrupted'))
    ex.timed_out = bool(res.get('timedOut'))
    ex.duration = (res.get('durationUSec') or 0) / 1e6
    if res.get('error') and ex.error is None:
        ex.error = ExecutionError.from_event(res['error'])
    return ex


def create_context(sandbox_id: str, language: str | None, cwd: str | None,
                   envs: dict[str, str] | None) -> Op[Context]:
    options: dict[str, Any] = {}
    if cwd:
        options['WorkingDirectory'] = cwd
    if envs:
        options['Environment'] = [f'{k}={v}' for k, v in envs.items()]
    params: dict[str, Any] = {'id': sandbox_id, 'language': language or 'python'}
    if options:
        params['options'] = options
    reply = yield Call('CreateContext', params)
    return Context.from_reply(reply.parameters['context'])


def list_contexts(sandbox_id: str) -> Op[list[Context]]:
    reply = yield Call('ListContexts', {'id': sandbox_id})
    return [Context.from_reply(c) for c in reply.parameters.get('contexts') or []]


def restart_context(sandbox_id: str, context: str) -> Op[Context]:
    reply = yield Call('RestartContext', {'id': sandbox_id, 'context': context})
    return Context.from_reply(reply.parameters['context'])


def context_call(method: str, sandbox_id: str, context: str) -> Op[None]:
    yield Call(method, {'id': sandbox_id, 'context': context})
    return None
