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
import hashlib
import inspect
import json
import math
import os
import threading
from typing import Any, Awaitable, Callable, Iterator, Mapping, Optional, TypeVar, Union

from ._attest import (
    AttestError,
    ConfigError,
    Engine as _Engine,
    Expired,
    Held,
    Receipt,
    Refused,
    Rejected,
    Replayed,
    Running as _Running,
)

__all__ = [
    "Attest",
    "AttestError",
    "ConfigError",
    "Expired",
    "Held",
    "Receipt",
    "Refused",
    "Rejected",
    "Replayed",
    "Tool",
    "last_receipt",
    "to_json",
]

F = TypeVar("F", bound=Callable[..., Any])

# The framework adapters, imported on first use: a framework that is not installed is an
# error only when its adapter is used (each adapter imports its framework inside).
_ADAPTERS = ("langchain", "openai_agents", "claude_agent_sdk", "crewai")


def __getattr__(name: str) -> Any:
    if name in _ADAPTERS:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

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


def _strict_json(value: Any) -> Optional[str]:
    """:func:`to_json`'s text when it is JSON the engine reads (no NaN or infinity, keys
    that sort, no lone surrogate), else ``None``."""
    try:
        text = json.dumps(value, default=_plain, sort_keys=True, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except Exception:  # noqa: BLE001 - any failure to encode (an object's own hook too) is no JSON
        return None
    return text


def _result_json(result: Any) -> str:
    """The result as the engine hashes and checks it. The tool ran, so its row must be
    written whatever it returned: a value JSON cannot carry (NaN or infinity, a key that
    is not a string, a lone surrogate) is replaced by what stands in for it (see
    :func:`_carried`), never by its raw form; the rest is read as usual."""
    text = _strict_json(result)
    if text is not None:
        return text
    try:
        return json.dumps(_carried(result), sort_keys=True, ensure_ascii=False)
    except Exception:  # noqa: BLE001 - too deep to walk, or an object's own hook raised
        # The whole result stands in for itself: its type, nothing of its value.
        return json.dumps({"unrepresentable": type(result).__name__})


def _fingerprint(data: str) -> str:
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def _carried(value: Any) -> Any:
    """``value`` with what JSON cannot carry replaced: a NaN or infinite float by
    ``{"unrepresentable": "float", "sha256": <of its repr>}``, a string with a lone
    surrogate by ``{"unrepresentable": "string", "sha256": <of its UTF-8 with the
    surrogate kept>}``, a key that is not a string, a number, a bool or ``None`` by
    ``"unrepresentable key sha256:<of its repr>"`` (numbers, bools and ``None`` as keys
    become the strings JSON gives them). The fingerprints let someone holding the value
    match it; the ledger never holds the value."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"unrepresentable": "float", "sha256": _fingerprint(repr(value))}
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return {"unrepresentable": "string", "sha256": _fingerprint(value)}
        return value
    if isinstance(value, dict):
        return {_carried_key(key): _carried(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_carried(item) for item in value]
    return _carried(_plain(value))


def _carried_key(key: Any) -> str:
    if isinstance(key, str):
        carried = _carried(key)
        if isinstance(carried, str):
            return carried
    elif key is None or isinstance(key, (bool, int)) or (isinstance(key, float) and math.isfinite(key)):
        return json.dumps(key)
    return "unrepresentable key sha256:" + _fingerprint(repr(key))


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
    """One configuration, as the ``attest`` binary reads it: the ledger, policy, detection
    registry, read-back recipes and OpenAPI specs, notifiers, approval store and tenant
    every decorated tool and adapter calls.

    ``config``: the configuration file; default ``$ATTEST_CONFIG``, else
    ``.attest/config.yaml`` when it exists (a file that is named but does not load raises
    :class:`ConfigError`, with the binary's message: file, line and key). Each keyword
    argument beats its environment variable (``$ATTEST_LEDGER``, ``$ATTEST_POLICY``,
    ``$ATTEST_TENANT``, ``$ATTEST_AGENT``, …), which beats the file, which beats the
    default, exactly as for the binary's flags. ``ledger``: a SQLite file (created when
    missing; the binary may append to it at the same time) or a ``postgres://`` URL
    [default ``.attest/ledger.sqlite``]. ``tenant``: the tenant whose chain to use.
    ``policy``: a policy YAML file [default ``./attest.yaml`` when it exists, else the
    built-in policy]. ``agent``/``actor``: recorded for calls that name none. ``key``: the
    signing key :meth:`checkpoint` signs with [default: beside the ledger]. ``wait``:
    seconds an ask waits for a person before the call comes back :class:`Held` [file:
    ``approvals.wait``; default 0: at once]. ``durability``: ``full`` (default),
    ``normal`` or ``off``. ``shadow``:
    decide every call as usual but run it as if policy said act, recording the verdict in
    the row's ``shadow`` field (see what a policy would break before enforcing it).
    ``agent_token``: with ``agents:`` configured, this agent's credential (an ``attest
    agents add`` token or a JWT from the configured identity provider) [default
    ``$ATTEST_AGENT_TOKEN``]; every call is then recorded under the agent it proves (the
    row's ``agent_auth`` says how), checked as each call is made: an unknown, revoked,
    expired or wrong-audience credential, none (unless ``unauthenticated: record``), or an
    ``agent`` that names another agent raises :class:`Refused` and the tool does not run.
    Ignored when ``agents:`` is not configured.
    """

    def __init__(
        self,
        ledger: Optional[Union[str, "os.PathLike[str]"]] = None,
        policy: Optional[Union[str, "os.PathLike[str]"]] = None,
        agent: Optional[str] = None,
        *,
        config: Optional[Union[str, "os.PathLike[str]"]] = None,
        tenant: Optional[str] = None,
        actor: Optional[str] = None,
        key: Optional[Union[str, "os.PathLike[str]"]] = None,
        wait: Optional[float] = None,
        durability: Optional[str] = None,
        shadow: bool = False,
        agent_token: Optional[str] = None,
    ) -> None:
        def path(value: Any) -> Optional[str]:
            return None if value is None else os.fspath(value)

        self._engine = _Engine(
            config=path(config),
            ledger=path(ledger),
            tenant=tenant,
            policy=path(policy),
            agent=agent,
            actor=actor,
            key=path(key),
            durability=durability,
            wait=None if wait is None else float(wait),
            shadow=bool(shadow),
            agent_token=agent_token,
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
        verify: Optional[Check] = None,
        read_back: Optional[Check] = None,
    ) -> Any:
        """Governs a function (sync or ``async``). Without ``system``/``verb`` they are
        detected from the function's name (``send_email`` is ``email``/``send``), as the
        Rust ``wrap_fn`` does. Use as ``@a.tool`` or ``@a.tool(system=..., verb=...)``.

        ``verify``: a callable (sync or ``async``) given the result (and the params, when
        it takes two arguments) that returns whether the action landed: ``True`` is
        ``verified-custom``, ``False`` ``unverified``, any other answer degrades the row. ``read_back``: a callable, given the same, that fetches the
        record the call wrote (``None`` when there is none); Attest compares it with the
        params and records ``verified`` or ``unverified`` as ``read-back:<its name>``, with
        the fields compared. Either one raising degrades the row, never to ``unverified``.
        Without them, the configured recipes, OpenAPI specs and conventions read back."""

        def wrap(fn: F) -> F:
            return Tool(
                self, fn, name=name or fn.__name__, system=system, verb=verb, target=target,
                verify=verify, read_back=read_back,
            ).function()

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
        verify: Optional[Check] = None,
        read_back: Optional[Check] = None,
        token: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> Any:
        """Governs one synchronous call of ``fn`` with keyword ``params``; returns its
        result. ``run``, when given, is called with the params to run with instead of
        ``fn(**params)``. ``verify`` / ``read_back``: as for :meth:`tool`. ``token``: the
        resume token of this call when it was held before (``Held.token``), possibly in
        another process; the call must be the one that was asked about.
        ``idempotency_key``: a write made again with the same key and params, within the
        key's lifetime (``idempotency.lifetime``, 24 h), does not run: it raises
        :class:`Replayed` with the first call's ``receipt`` (the output is not kept);
        the same key with other params raises :class:`AttestError`."""
        checks = _Checks(verify, read_back)
        running = self._start(
            fn, params, name, system, verb, target, framework, checks, token, idempotency_key
        )
        return _finish_sync(running, params, fn, run, checks)

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
        verify: Optional[Check] = None,
        read_back: Optional[Check] = None,
        token: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> Any:
        """Like :meth:`call`, for a coroutine function; the engine's waits run in a
        worker thread so the event loop keeps going."""
        checks = _Checks(verify, read_back)
        context = contextvars.copy_context()
        running = await asyncio.to_thread(
            context.run,
            self._start,
            fn,
            params,
            name,
            system,
            verb,
            target,
            framework,
            checks,
            token,
            idempotency_key,
        )
        return await _finish_async(running, params, fn, run, checks)

    def resume(
        self,
        token: str,
        fn: Callable[..., Any],
        *,
        verify: Optional[Check] = None,
        read_back: Optional[Check] = None,
    ) -> Any:
        """Runs the approved call ``token`` stands for (see :class:`Held`) with the
        approved params; raises :class:`Held` again while nobody has answered."""
        checks = _Checks(verify, read_back)
        running = self._engine.resume(token, **checks.engine_args())
        return _finish_sync(running, None, fn, None, checks)

    async def aresume(
        self,
        token: str,
        fn: Callable[..., Awaitable[Any]],
        *,
        verify: Optional[Check] = None,
        read_back: Optional[Check] = None,
    ) -> Any:
        """Like :meth:`resume`, for a coroutine function."""
        checks = _Checks(verify, read_back)
        running = await asyncio.to_thread(self._engine.resume, token, **checks.engine_args())
        return await _finish_async(running, None, fn, None, checks)

    def inbox_link(self, request_id: str) -> str:
        """Where a person decides request ``request_id``: its page in the inbox (they sign
        in there), under the configured inbox address (``inbox.public_url``, else
        ``inbox.listen``, else the binary's default ``127.0.0.1:8321``)."""
        return self._engine.request_link(request_id)

    def request(self, request_id: str) -> dict:
        """What a person sees of approval request ``request_id``: its ``status``
        (``pending``, ``approved``, ``edited``, ``rejected``, ``expired``, ``cancelled``),
        ``approver``, and the call's ``system``, ``verb``, ``target``, ``tier``,
        ``reasons`` and ``params_preview``."""
        return json.loads(self._engine.request(request_id))

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
        checks: Optional["_Checks"] = None,
        token: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> _Running:
        name = name or getattr(fn, "__name__", "tool")
        params_json = to_json(dict(params))
        # A call that came back Held and is made again (the agent retrying) presents its
        # resume token: once a person has approved, the retry runs.
        key = (name, system, verb, target, params_json)
        if token is None:
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
                idempotency_key=idempotency_key,
                **(checks or _Checks(None, None)).engine_args(),
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


def _finish_sync(
    running: _Running, params: Optional[Mapping[str, Any]], fn: Callable[..., Any], run: Any, checks: "_Checks"
) -> Any:
    edited = _approved(running, params)
    use = params if edited is None else edited
    try:
        result = run(use) if run is not None else fn(**use)
    except BaseException as error:
        _LAST.set(running.fail(type(error).__name__))
        raise
    judged, escaping = checks.judge_sync(result, use)
    try:
        _LAST.set(running.finish(_result_json(result), **judged))
    finally:
        # What stops the program (an exit, an interrupt) reaches the caller even when
        # the row could not be written (that error is then its context).
        if escaping is not None:
            raise escaping
    return result


async def _finish_async(
    running: _Running, params: Optional[Mapping[str, Any]], fn: Callable[..., Any], run: Any, checks: "_Checks"
) -> Any:
    edited = _approved(running, params)
    use = params if edited is None else edited
    try:
        result = await (run(use) if run is not None else fn(**use))
    except BaseException as error:
        _LAST.set(await asyncio.to_thread(running.fail, type(error).__name__))
        raise
    judged, escaping = await checks.judge_async(result, use)
    if escaping is None:
        _LAST.set(await asyncio.to_thread(running.finish, _result_json(result), **judged))
        return result
    try:
        # Written on this thread, without awaiting: a cancelled task may be cancelled
        # again at its next await, and the row must be in the ledger before the
        # cancellation (or the exit) reaches the caller.
        _LAST.set(running.finish(_result_json(result), **judged))
    finally:
        raise escaping


Check = Callable[..., Any]
"""A ``verify=`` or ``read_back=`` callable: given the result, and the params when it
takes two arguments; sync, ``async``, or returning an awaitable."""


class _Checks:
    """A call's own checks of its result: ``verify`` (yes/no) and ``read_back`` (fetches
    the record for Attest to compare). A read-back beats a yes/no check, as in core."""

    def __init__(self, verify: Optional[Check], read_back: Optional[Check]) -> None:
        for what, check in (("verify", verify), ("read_back", read_back)):
            if check is not None and not callable(check):
                raise TypeError(f"{what}= must be a callable, not {type(check).__name__}")
        self.verify = verify
        self.read_back = read_back

    def engine_args(self) -> dict:
        """What the engine needs to know before the call: which check will answer."""
        if self.read_back is not None:
            return {"read_back": _check_name(self.read_back)}
        return {"verify": self.verify is not None}

    def _chosen(self) -> Optional[Check]:
        return self.read_back if self.read_back is not None else self.verify

    def _judged(self, answer: Any) -> dict:
        if self.read_back is not None:
            record = _strict_json(answer)
            # A record JSON cannot carry cannot be compared: the read-back did not answer.
            return {"check_failed": True} if record is None else {"record": record}
        if not isinstance(answer, bool):
            # Neither yes nor no: the check did not answer, so the row degrades.
            return {"check_failed": True}
        return {"verified": answer}

    def judge_sync(self, result: Any, params: Mapping[str, Any]) -> tuple[dict, Optional[BaseException]]:
        """What the check said of ``result``, and what it raised that must still reach
        the caller once the outcome row is written (see :func:`_unanswered`)."""
        check = self._chosen()
        if check is None:
            return {}, None
        try:
            answer = check(*_check_args(check, result, params))
            if inspect.isawaitable(answer):
                answer = _run_awaitable(answer)
        except BaseException as error:  # noqa: BLE001 - the row is written first, see _unanswered
            return _unanswered(error)
        return self._judged(answer), None

    async def judge_async(self, result: Any, params: Mapping[str, Any]) -> tuple[dict, Optional[BaseException]]:
        """Like :meth:`judge_sync`, awaiting the check in the caller's event loop."""
        check = self._chosen()
        if check is None:
            return {}, None
        try:
            answer = check(*_check_args(check, result, params))
            if inspect.isawaitable(answer):
                answer = await answer
        except BaseException as error:  # noqa: BLE001 - the row is written first, see _unanswered
            return _unanswered(error)
        return self._judged(answer), None


def _unanswered(error: BaseException) -> tuple[dict, Optional[BaseException]]:
    """A check that raised did not answer; the tool ran, so its row is written either
    way. An ``Exception`` is the check's own failure: the row degrades and the caller
    gets its result. Anything else (``SystemExit``, ``KeyboardInterrupt``, a cancelled
    task's ``CancelledError``, ``GeneratorExit``) is the program stopping the call: the
    row is written, then it is raised again. A cancellation or an interrupt is recorded
    as such (the tool ran, its check was cancelled)."""
    if isinstance(error, Exception) and not isinstance(error, asyncio.CancelledError):
        return {"check_failed": True}, None
    if isinstance(error, (asyncio.CancelledError, KeyboardInterrupt)):
        return {"check_cancelled": True}, error
    return {"check_failed": True}, error


def _check_name(check: Check) -> str:
    """The read-back's name in the ledger (``read-back:<name>``)."""
    name = getattr(check, "__name__", None) or type(check).__name__
    return "custom" if name == "<lambda>" else name


def _check_args(check: Check, result: Any, params: Mapping[str, Any]) -> tuple:
    """``(result, params)`` for a check that takes two arguments, else ``(result,)``."""
    try:
        parameters = inspect.signature(check).parameters.values()
    except (TypeError, ValueError):
        return (result,)
    positional = [
        p for p in parameters if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    if len(positional) >= 2 or any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return (result, dict(params))
    return (result,)


def _run_awaitable(awaitable: Any) -> Any:
    """Runs a coroutine a sync tool's check returned: in a fresh event loop, or in a
    worker thread's when this thread already runs one."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(awaitable))
    result: list = []
    errors: list = []

    def runner() -> None:
        try:
            result.append(asyncio.run(_awaited(awaitable)))
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(error)

    thread = threading.Thread(target=runner)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


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
        verify: Optional[Check] = None,
        read_back: Optional[Check] = None,
    ) -> None:
        self.attest = attest
        self.fn = fn
        self.name = name
        self.system = system
        self.verb = verb
        self.target = target
        _Checks(verify, read_back)  # a check that is not callable fails here, not at the first call
        self.verify = verify
        self.read_back = read_back
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
        keywords = dict(
            name=self.name, system=self.system, verb=self.verb, target=self.target,
            verify=self.verify, read_back=self.read_back,
        )
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
        checks = dict(verify=self.verify, read_back=self.read_back)
        if self.is_async:
            return self.attest.aresume(token, self.fn, **checks)
        return self.attest.resume(token, self.fn, **checks)

    def __repr__(self) -> str:
        return f"<attest.Tool {self.name}>"
