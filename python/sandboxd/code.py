# SPDX-License-Identifier: LGPL-2.1-or-later
"""Running code in sandboxes with the interfaces agent frameworks expect.

- :class:`SandboxProvider` (the Claude-compatible sandbox provider shape):
  ``await create_sandbox(image, **kwargs)``, ``await execute(code, timeout)``,
  ``await cleanup()``.
- :class:`SandboxConfig`, :class:`ExecutionResult`, :class:`CodeSandbox` and
  :class:`SandboxPool` (``initialize``/``acquire``/``release``/``status``), whose pool is
  sandboxd's own warm pool (a template's ``"pool": N``), not a pool kept in Python.

Code is run by the language's interpreter in the sandbox, read from its standard input:
``python3 -``, ``node -`` or ``sh -s``.

``allowed_imports`` (Python only) installs an import hook before the code runs: an
``import`` by the code itself (by ``__main__``, or by a module outside Python's own
directories) of a top-level module not in the list raises ImportError; the standard
library's own imports (and those the interpreter makes for it) are not restricted. It is a convenience to keep generated code to
the modules it should use, **not a security boundary**: code can reach other modules
through the ones it may import, and the sandbox is what confines it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import time
from dataclasses import dataclass
from typing import Any, Sequence, TypeVar

from . import _ops
from ._async import AsyncSandbox
from .errors import SandboxError
from .models import CommandResult, PoolInfo
from .sandbox import Sandbox
from .transport import AsyncTransport, Transport, default_transport

R = TypeVar('R')

__all__ = ['SandboxConfig', 'ExecutionResult', 'CodeSandbox', 'SandboxPool', 'SandboxProvider',
           'code_command', 'IMPORT_HOOK', 'TEMPLATE_DIRS']

# The import hook: run by python3 -c before the code (from stdin), the allowed top-level
# modules as JSON in argv[1].
IMPORT_HOOK = r'''
def _sandboxd_install(allowed):
    import builtins, sys, sysconfig
    real = builtins.__import__
    own = tuple({p for p in (sysconfig.get_paths().get(k) for k in ('stdlib', 'platstdlib', 'purelib', 'platlib')) if p}
                | {'/usr/lib/python3/dist-packages'})
    allowed = frozenset(allowed)
    def guarded(name, globals=None, locals=None, fromlist=(), level=0):
        # An import statement passes fromlist None or a tuple; the interpreter's own C code
        # (PyImport_Import: datetime's strptime, array's collections.abc) a list.
        if level == 0 and not isinstance(fromlist, list):
            g = globals if isinstance(globals, dict) else {}
            f = g.get('__file__') or ''
            if g.get('__name__') == '__main__' or not g or not (isinstance(f, str) and f.startswith(own)):
                top = name.partition('.')[0]
                if top not in allowed:
                    raise ImportError(f'import of {top!r} is not allowed here (allowed_imports: '
                                      f'{", ".join(sorted(allowed)) or "none"})', name=top)
        return real(name, globals, locals, fromlist, level)
    builtins.__import__ = guarded
    source = sys.stdin.buffer.read()
    sys.argv[:] = ['-']
    return compile(source, '<stdin>', 'exec')
import json as _sandboxd_json, sys as _sandboxd_sys
_sandboxd_code = _sandboxd_install(_sandboxd_json.loads(_sandboxd_sys.argv[1]))
del _sandboxd_install, _sandboxd_json, _sandboxd_sys
exec(_sandboxd_code)
'''

_INTERPRETERS = {'python': ['python3', '-'], 'node': ['node', '-'], 'javascript': ['node', '-'],
                 'sh': ['sh', '-s'], 'shell': ['sh', '-s'], 'bash': ['bash', '-s']}
# The template a language runs in when none is named (the shipped ones).
_TEMPLATES = {'python': 'python', 'node': 'node', 'javascript': 'node', 'sh': 'shell', 'shell': 'shell',
              'bash': 'shell'}
# Where a pooled template's base is read from (sandboxd(8): the writable directory wins).
TEMPLATE_DIRS = ('/etc/sandboxd/templates.d', '/usr/lib/sandboxd/templates.d')


def code_command(language: str, allowed_imports: Sequence[str] | None = None) -> list[str]:
    """The argv that runs code of LANGUAGE read from standard input."""
    lang = language.lower()
    if lang not in _INTERPRETERS:
        raise ValueError(f'unknown language {language!r} (known: {", ".join(sorted(_INTERPRETERS))})')
    if allowed_imports is None:
        return list(_INTERPRETERS[lang])
    if lang != 'python':
        raise ValueError('allowed_imports is for Python code only')
    return ['python3', '-c', IMPORT_HOOK, json.dumps(sorted(set(allowed_imports)))]


def language_of(template: str | None) -> str:
    """The language a template's name suggests (python, node, else the shell)."""
    name = (template or '').lower()
    for lang in ('python', 'node'):
        if lang in name:
            return lang
    return 'sh'


@dataclass
class SandboxConfig:
    """How code is run: its language, a time limit per run, the sandbox's memory
    (``max_memory_mb``; None: the template's, as sandboxd has it), and the modules Python
    code may import (None: any; see the module's documentation).
    ``template``: the sandbox template (default: the language's: python, node, shell)."""

    language: str = 'python'
    timeout_seconds: int = 30
    max_memory_mb: int | None = None
    allowed_imports: list[str] | None = None
    template: str | None = None

    def template_name(self) -> str:
        return self.template or _TEMPLATES.get(self.language.lower()) or self.language


@dataclass
class ExecutionResult:
    """What a run of code gave: its output, its exit code (128 + the signal when killed)
    and whether it was killed at its time limit; ``oom_killed`` when for memory."""

    stdout: str = ''
    stderr: str = ''
    exit_code: int = 0
    timed_out: bool = False
    oom_killed: bool = False
    duration: float = 0.0

    @classmethod
    def from_command(cls, r: CommandResult) -> 'ExecutionResult':
        return cls(stdout=r.stdout, stderr=r.stderr, exit_code=r.exit_code, timed_out=r.timed_out,
                   oom_killed=r.oom_killed, duration=r.duration)


def _run_options(code: str, timeout: float | None) -> dict[str, Any]:
    return _ops.exec_options(timeout=timeout, stdin=code.encode())


class CodeSandbox:
    """A sandbox that runs code per its :class:`SandboxConfig` (blocking): what
    :meth:`SandboxPool.acquire` hands out. ``work_dir`` is the sandbox's /work."""

    work_dir = '/work'

    def __init__(self, config: SandboxConfig, sandbox: Sandbox) -> None:
        self.config = config
        self.sandbox = sandbox

    def __repr__(self) -> str:
        return f'CodeSandbox({self.sandbox.sandbox_id!r}, language={self.config.language!r})'

    @property
    def sandbox_id(self) -> str:
        return self.sandbox.sandbox_id

    def execute(self, code: str) -> ExecutionResult:
        """Runs CODE, killed after ``config.timeout_seconds``."""
        argv = code_command(self.config.language, self.config.allowed_imports)
        op = _ops.run_command(self.sandbox_id, argv, _run_options(code, self.config.timeout_seconds), None, None)
        return ExecutionResult.from_command(self.sandbox._run(op))


class SandboxPool:
    """Up to ``pool_size`` sandboxes handed out from sandboxd's warm pool.

    :meth:`initialize` makes a template whose ``"pool"`` is ``pool_size``, with the
    config's memory (``CreateTemplate``, which needs ``io.sandboxd.Sandbox1.manage``:
    root), from the config's template file found in ``template_dirs`` (on this machine;
    default /etc/sandboxd/templates.d, then /usr/lib/sandboxd/templates.d), and waits
    until sandboxd has started them. Pass ``template=`` to use a template that has a pool
    already instead (its limits then apply). :meth:`acquire` creates a sandbox of that
    template, which sandboxd hands out from the pool at once; :meth:`release` destroys it
    and sandboxd starts a fresh one, so no state passes from one user to the next. With
    ``recycle=True`` the template's pool recycles (sandboxd(8), "Recycling pool"):
    :meth:`release` has sandboxd reset the sandbox - every process killed, /work, /tmp
    and /dev/shm empty, System V IPC gone - and keep it for this uid, and the next
    :meth:`acquire` takes it back: the seed's "cleanup between runs", without a new boot.
    :meth:`status` is sandboxd's count (``ListPools``). :meth:`close` destroys what is
    still acquired and removes the template this object made.
    """

    def __init__(self, pool_size: int = 3, *, template: str | None = None, recycle: bool = False,
                 transport: Transport | None = None, template_dirs: Sequence[str] | None = None) -> None:
        if pool_size < 1:
            raise ValueError('pool_size is at least 1')
        self.pool_size = pool_size
        self.recycle = recycle
        self.template = template
        self.transport = transport or default_transport()
        env_dirs = os.environ.get('SANDBOXD_TEMPLATE_DIRS')
        self.template_dirs = tuple(template_dirs or (env_dirs.split(':') if env_dirs else TEMPLATE_DIRS))
        self.config = SandboxConfig()
        self._made_template: str | None = None
        self._acquired: dict[str, CodeSandbox] = {}

    def _run(self, op: _ops.Op[R]) -> R:
        return _ops.run_sync(self.transport, op)

    def _base_template(self, name: str) -> dict[str, Any]:
        for d in self.template_dirs:
            path = os.path.join(d, f'{name}.json')
            if os.path.exists(path):
                with open(path, encoding='utf-8') as f:
                    text: dict[str, Any] = json.load(f)
                    return text
        raise SandboxError(f'template {name!r} not found in {", ".join(self.template_dirs)}: '
                           f'pass SandboxPool(template=...) naming a template that has a pool',
                           name='io.sandboxd.Sandbox.NoSuchTemplate')

    def initialize(self, config: SandboxConfig | None = None, wait: float = 60.0) -> None:
        """Sets the pool up for CONFIG and waits (at most WAIT seconds) until sandboxd has
        its sandboxes started."""
        self.config = config or SandboxConfig()
        if self.template is None:
            base = self.config.template_name()
            text = self._base_template(base)
            limits = dict(text.get('limits') or {})
            if self.config.max_memory_mb is not None:
                limits['MemoryMax'] = self.config.max_memory_mb * 1024 * 1024
            pool: Any = self.pool_size
            if self.recycle:
                pool = {'size': self.pool_size, 'recycle': True, 'recycle_max': self.pool_size}
            text.update(limits=limits, pool=pool,
                        description=f'{base} with a warm pool of {self.pool_size} (sandboxd Python client)')
            body = json.dumps(text, sort_keys=True)
            # A template of this pool's own: two pools of one config sharing one would
            # count each other's sandboxes as theirs, and the first close() would remove
            # the other's template. The hash says what it is, the token whose it is.
            name = f'{base}-pool-{hashlib.sha256(body.encode()).hexdigest()[:12]}-{secrets.token_hex(4)}'
            self._run(_ops.call('CreateTemplate', name=name, json=body))
            self.template, self._made_template = name, name
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            pool = self._pool()
            if pool is not None and pool.ready >= pool.size:
                return
            time.sleep(0.05)
        raise SandboxError(f'the pool of {self.template!r} was not ready within {wait} s',
                           name='io.sandboxd.client.PoolNotReady')

    def _pool(self) -> PoolInfo | None:
        for p in self._run(_ops.list_pools()):
            if p.template == self.template:
                return p
        return None

    def acquire(self) -> CodeSandbox | None:
        """A sandbox from the pool, or None when ``pool_size`` are in use."""
        if self.template is None:
            raise RuntimeError('SandboxPool.acquire() before initialize()')
        pool = self._pool()
        if len(self._acquired) >= self.pool_size or (pool is not None and pool.in_use >= self.pool_size):
            return None
        sandbox_id = self._run(_ops.create(self.template, {}))
        sbx = CodeSandbox(self.config, Sandbox(sandbox_id, transport=self.transport))
        self._acquired[sandbox_id] = sbx
        return sbx

    def release(self, sandbox: CodeSandbox) -> None:
        """Gives SANDBOX back: reset and kept (``recycle=True``), or destroyed, and
        sandboxd refills the pool."""
        self._acquired.pop(sandbox.sandbox_id, None)
        if self.recycle:
            sandbox.sandbox.release()
        else:
            sandbox.sandbox.kill()

    def status(self) -> dict[str, int]:
        """``total``, ``available``, ``in_use`` (the seed's keys), and sandboxd's
        ``ready`` and ``starting``."""
        pool = self._pool()
        size, ready, starting = (pool.size, pool.ready, pool.starting) if pool else (0, 0, 0)
        recycled = pool.recycled if pool else 0
        in_use = pool.in_use if pool else len(self._acquired)
        total = self.pool_size
        return {'total': total, 'available': max(0, total - in_use), 'in_use': in_use,
                'ready': ready, 'starting': starting, 'pool_size': size, 'recycled': recycled}

    def close(self) -> None:
        for sbx in list(self._acquired.values()):
            self.release(sbx)
        if self._made_template:
            self._run(_ops.call('RemoveTemplate', name=self._made_template))
            self._made_template = None

    def __enter__(self) -> 'SandboxPool':
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SandboxProvider:
    """The sandbox provider interface of agent SDKs, for asyncio code.

    ``create_sandbox(image, **kwargs)`` creates a sandbox from the template IMAGE (the
    keyword arguments are :meth:`AsyncSandbox.create`'s, plus ``language``); ``execute``
    runs code in the newest one (creating one from ``default_image`` first if there is
    none); ``cleanup`` destroys every sandbox this provider created.
    """

    def __init__(self, *, default_image: str = 'python', transport: AsyncTransport | None = None,
                 allowed_imports: Sequence[str] | None = None) -> None:
        self.default_image = default_image
        self.transport = transport
        self.allowed_imports = allowed_imports
        self.sandboxes: list[AsyncSandbox] = []
        self._languages: dict[str, str] = {}

    async def create_sandbox(self, image: str, **kwargs: Any) -> AsyncSandbox:
        language = kwargs.pop('language', None) or language_of(image)
        kwargs.setdefault('transport', self.transport)
        sbx = await AsyncSandbox.create(image, **kwargs)
        self.sandboxes.append(sbx)
        self._languages[sbx.sandbox_id] = language
        return sbx

    async def execute(self, code: str, timeout: int = 30) -> ExecutionResult:
        """Runs CODE in the current sandbox, killed after TIMEOUT seconds."""
        if not self.sandboxes:
            await self.create_sandbox(self.default_image)
        sbx = self.sandboxes[-1]
        argv = code_command(self._languages[sbx.sandbox_id], self.allowed_imports)
        r = await sbx._run(_ops.run_command(sbx.sandbox_id, argv, _run_options(code, timeout), None, None))
        return ExecutionResult.from_command(r)

    async def cleanup(self) -> None:
        sandboxes, self.sandboxes = self.sandboxes, []
        await asyncio.gather(*(s.kill() for s in sandboxes), return_exceptions=True)

    async def __aenter__(self) -> 'SandboxProvider':
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.cleanup()
