"""Attest for Python: every tool call an agent makes is decided by policy, put to a
person when policy asks, run, verified and recorded in a hash-chained ledger.

The engine is Rust (the same one as the ``attest`` binary, on the same ledger file and
policy); this package adds the decorator, the ``run`` context and framework adapters
(``attest.langchain``, ``attest.openai_agents``, ``attest.claude_agent_sdk``).

    import attest
    a = attest.Attest(ledger=".attest/ledger.sqlite", policy="policy.yaml", agent="my-agent")

    @a.tool(system="notes", verb="create")
    def create_note(title: str) -> dict: ...

A refused call raises :class:`Refused`, a rejected one :class:`Rejected`, one waiting for
a person :class:`Held` (with ``.token``); in each case the function never ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import json
import os
import threading
from typing import Any, Awaitable, Callable, Iterator, Mapping, Optional, TypeVar, Union

from ._attest import (
    AttestError,
    Engine as _Engine,
    Expired,
    Held,
    Receipt,
    Refused,
    Rejected,
    Running as _Running,
)

__all__ = [
    "Attest",
    "AttestError",
    "Expired",
    "Held",
    "Receipt",
    "Refused",
    "Rejected",
    "Tool",
    "last_receipt",
    "to_json",
]

F = TypeVar("F", bound=Callable[..., Any])

# How many held calls a process remembers the resume tokens of (oldest forgotten first).
_MAX_HELD = 1024

_RUN_ID: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("attest_run_id", default=None)
_LAST: contextvars.ContextVar[Optional[Receipt]] = contextvars.ContextVar("attest_last_receipt", default=None)


def last_receipt() -> Optional[Receipt]:
    """The receipt of the last governed call that ran in this thread or asyncio task (a
    call that did not run carries its receipt on the exception it raised)."""
    return _LAST.get()


def to_json(value: Any) -> str:
    """JSON text for params and results: what the engine hashes, previews and checks for
    an acknowledgement. Objects JSON does not know are described by ``str``; pydantic
    models and dataclasses by their fields."""
    return json.dumps(value, default=_plain, sort_keys=True, ensure_ascii=False)


def _plain(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json")
        except TypeError:
            return dump()
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return {"bytes": len(value)}
    return str(value)


class Attest:
    """One ledger, one policy, one approval store: the engine every decorated tool and
    adapter calls.

    ``ledger``: the SQLite ledger file (created when missing; the ``attest`` binary may
    append to it at the same time); default ``$ATTEST_LEDGER``, else
    ``.attest/ledger.sqlite``. ``policy``: a policy YAML file; default ``$ATTEST_POLICY``,
    else ``./attest.yaml`` when it exists, else the built-in default policy, as the binary. ``agent``/``actor``: recorded for calls that name none. ``key``: the
    signing key :meth:`checkpoint` signs with. ``wait``: seconds an ask waits for a person
    before the call comes back :class:`Held` (default 0: at once). ``durability``:
    ``full`` (default), ``normal`` or ``off``. ``shadow``: decide every call as usual but
    run it as if policy said act, recording the verdict in the row's ``shadow`` field (see
    what a policy would break before enforcing it).
    """

    def __init__(
        self,
        ledger: Optional[Union[str, "os.PathLike[str]"]] = None,
        policy: Optional[Union[str, "os.PathLike[str]"]] = None,
        agent: Optional[str] = None,
        *,
        actor: Optional[str] = None,
        key: Optional[Union[str, "os.PathLike[str]"]] = None,
        wait: float = 0.0,
        durability: Optional[str] = None,
        shadow: bool = False,
    ) -> None:
        # The binary's defaults: $ATTEST_LEDGER / $ATTEST_POLICY, else .attest/ledger.sqlite
        # and ./attest.yaml (if present; else the built-in default policy).
        ledger = ledger if ledger is not None else os.environ.get("ATTEST_LEDGER") or ".attest/ledger.sqlite"
        policy = policy if policy is not None else os.environ.get("ATTEST_POLICY") or None
        self._engine = _Engine(
            os.fspath(ledger),
            policy=None if policy is None else os.fspath(policy),
            agent=agent,
            actor=actor,
            key=None if key is None else os.fspath(key),
            durability=durability,
            wait=float(wait),
            shadow=bool(shadow),
        )
        self.agent = agent
        self._held: dict[tuple, str] = {}
        self._lock = threading.Lock()

    # -- decorating -------------------------------------------------------------------

    def tool(
        self,
        func: Optional[F] = None,
        *,
        system: Optional[str] = None,
        verb: Optional[str] = None,
        target: Optional[str] = None,
        name: Optional[str] = None,
    ) -> Any:
        """Governs a function (sync or ``async``). Without ``system``/``verb`` they are
        detected from the function's name (``send_email`` is ``email``/``send``), as the
        Rust ``wrap_fn`` does. Use as ``@a.tool`` or ``@a.tool(system=..., verb=...)``."""

        def wrap(fn: F) -> F:
            return Tool(self, fn, name=name or fn.__name__, system=system, verb=verb, target=target).function()

        if func is not None:
            return wrap(func)
        return wrap

    # -- calling ----------------------------------------------------------------------

    def call(
        self,
        fn: Callable[..., Any],
        params: Mapping[str, Any],
        *,
        name: Optional[str] = None,
        system: Optional[str] = None,
        verb: Optional[str] = None,
        target: Optional[str] = None,
        framework: Optional[str] = None,
        run: Optional[Callable[[Mapping[str, Any]], Any]] = None,
    ) -> Any:
        """Governs one synchronous call of ``fn`` with keyword ``params``; returns its
        result. ``run``, when given, is called with the params to run with instead of
        ``fn(**params)``."""
        running = self._start(fn, params, name, system, verb, target, framework)
        return _finish_sync(running, params, fn, run)

    async def acall(
        self,
        fn: Callable[..., Awaitable[Any]],
        params: Mapping[str, Any],
        *,
        name: Optional[str] = None,
        system: Optional[str] = None,
        verb: Optional[str] = None,
        target: Optional[str] = None,
        framework: Optional[str] = None,
        run: Optional[Callable[[Mapping[str, Any]], Awaitable[Any]]] = None,
    ) -> Any:
        """Like :meth:`call`, for a coroutine function; the engine's waits run in a
        worker thread so the event loop keeps going."""
        context = contextvars.copy_context()
        running = await asyncio.to_thread(
            context.run, self._start, fn, params, name, system, verb, target, framework
        )
        return await _finish_async(running, params, fn, run)

    def resume(self, token: str, fn: Callable[..., Any]) -> Any:
        """Runs the approved call ``token`` stands for (see :class:`Held`) with the
        approved params; raises :class:`Held` again while nobody has answered."""
        running = self._engine.resume(token)
        return _finish_sync(running, None, fn, None)

    async def aresume(self, token: str, fn: Callable[..., Awaitable[Any]]) -> Any:
        """Like :meth:`resume`, for a coroutine function."""
        running = await asyncio.to_thread(self._engine.resume, token)
        return await _finish_async(running, None, fn, None)

    def record(
        self,
        name: str,
        params: Optional[Mapping[str, Any]] = None,
        *,
        system: Optional[str] = None,
        verb: Optional[str] = None,
        target: Optional[str] = None,
        result: Any = None,
        framework: Optional[str] = None,
    ) -> Receipt:
        """Records an action that already happened, outside Attest (decision
        ``recorded``). ``result``, when given, is hashed, never stored."""
        return self._engine.record(
            name,
            to_json(dict(params or {})),
            system=system,
            verb=verb,
            target=target,
            result=None if result is None else to_json(result),
            framework=framework,
            run_id=_RUN_ID.get(),
        )

    @contextlib.contextmanager
    def run(self, run_id: str) -> Iterator[str]:
        """Every call inside ``with a.run("run-42"):`` is recorded with that run id
        (context-local: threads and asyncio tasks each keep their own)."""
        token = _RUN_ID.set(run_id)
        try:
            yield run_id
        finally:
            _RUN_ID.reset(token)

    def checkpoint(self) -> str:
        """Signs a checkpoint of the ledger's head with ``key``; returns the signed note."""
        return self._engine.checkpoint()

    def _start(
        self,
        fn: Callable[..., Any],
        params: Mapping[str, Any],
        name: Optional[str],
        system: Optional[str],
        verb: Optional[str],
        target: Optional[str],
        framework: Optional[str],
    ) -> _Running:
        name = name or getattr(fn, "__name__", "tool")
        params_json = to_json(dict(params))
        # A call that came back Held and is made again (the agent retrying) presents its
        # resume token: once a person has approved, the retry runs.
        key = (name, system, verb, target, params_json)
        with self._lock:
            token = self._held.get(key)
        try:
            running = self._engine.start(
                name,
                params_json,
                system=system,
                verb=verb,
                target=target,
                framework=framework,
                run_id=_RUN_ID.get(),
                token=token,
            )
        except Held as held:
            with self._lock:
                self._held[key] = held.token
                while len(self._held) > _MAX_HELD:
                    self._held.pop(next(iter(self._held)))
            raise
        except AttestError:
            if token is not None:
                with self._lock:
                    self._held.pop(key, None)
            raise
        if token is not None:
            with self._lock:
                self._held.pop(key, None)
        return running


def _approved(running: _Running, params: Optional[Mapping[str, Any]]) -> Optional[dict]:
    """The params a person approved when they differ from the call's (edits on
    approval, or a resume); ``None`` when the call runs as made."""
    if params is not None and not running.edited:
        return None
    approved = json.loads(running.params)
    return approved if isinstance(approved, dict) else {"input": approved}


def _finish_sync(running: _Running, params: Optional[Mapping[str, Any]], fn: Callable[..., Any], run: Any) -> Any:
    edited = _approved(running, params)
    use = params if edited is None else edited
    try:
        result = run(use) if run is not None else fn(**use)
    except BaseException as error:
        _LAST.set(running.fail(type(error).__name__))
        raise
    _LAST.set(running.finish(to_json(result)))
    return result


async def _finish_async(running: _Running, params: Optional[Mapping[str, Any]], fn: Callable[..., Any], run: Any) -> Any:
    edited = _approved(running, params)
    use = params if edited is None else edited
    try:
        result = await (run(use) if run is not None else fn(**use))
    except BaseException as error:
        _LAST.set(await asyncio.to_thread(running.fail, type(error).__name__))
        raise
    _LAST.set(await asyncio.to_thread(running.finish, to_json(result)))
    return result


class Tool:
    """A governed function. :meth:`Attest.tool` returns :meth:`function`: a plain
    function (``async`` when the original is) with the original's name, signature and
    docstring, plus ``.resume(token)`` and ``.attest_tool`` (this object)."""

    def __init__(
        self,
        attest: Attest,
        fn: Callable[..., Any],
        *,
        name: str,
        system: Optional[str],
        verb: Optional[str],
        target: Optional[str],
    ) -> None:
        self.attest = attest
        self.fn = fn
        self.name = name
        self.system = system
        self.verb = verb
        self.target = target
        self.is_async = inspect.iscoroutinefunction(fn)
        self._signature = inspect.signature(fn)

    def function(self) -> Any:
        """The governed function, as frameworks expect one (they inspect its signature
        and whether it is a coroutine function)."""
        if self.is_async:

            async def governed_async(*args: Any, **kwargs: Any) -> Any:
                return await self(*args, **kwargs)

            wrapper: Any = governed_async
        else:

            def governed(*args: Any, **kwargs: Any) -> Any:
                return self(*args, **kwargs)

            wrapper = governed
        functools.update_wrapper(wrapper, self.fn)
        wrapper.resume = self.resume
        wrapper.attest_tool = self
        return wrapper

    def _params(self, args: tuple, kwargs: dict) -> dict:
        bound = self._signature.bind(*args, **kwargs)
        params: dict = {}
        for key, value in bound.arguments.items():
            kind = self._signature.parameters[key].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                params.update(value)
            else:
                params[key] = value
        return params

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        params = self._params(args, kwargs)
        keywords = dict(name=self.name, system=self.system, verb=self.verb, target=self.target)
        if self.is_async:
            return self.attest.acall(self.fn, params, run=self._runner(args, kwargs, params), **keywords)
        return self.attest.call(self.fn, params, run=self._runner(args, kwargs, params), **keywords)

    def _runner(self, args: tuple, kwargs: dict, params: dict) -> Callable[[Mapping[str, Any]], Any]:
        # The call as made (positional arguments kept) unless a person edited the params.
        def run(use: Mapping[str, Any]) -> Any:
            if use is params:
                return self.fn(*args, **kwargs)
            return self.fn(**use)

        return run

    def resume(self, token: str) -> Any:
        """Runs the approved call ``token`` stands for (see :class:`Held`)."""
        if self.is_async:
            return self.attest.aresume(token, self.fn)
        return self.attest.resume(token, self.fn)

    def __repr__(self) -> str:
        return f"<attest.Tool {self.name}>"
