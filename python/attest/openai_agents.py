"""OpenAI Agents SDK: govern ``function_tool``s, and pause a run the SDK's way.

    agent = Agent(name="ops", tools=attest.openai_agents.wrap_tools([lookup, refund], a))

Each wrapped tool is a copy of the ``FunctionTool`` (same name, description and JSON
schema) whose ``on_invoke_tool`` goes through Attest, and whose ``needs_approval`` is
Attest's decision: a call policy lets run runs; one policy refuses does not run, and its
output is a sentence saying so, which the model reads like any tool output; one Attest
asks a person about makes the SDK stop the run with an interruption, the request already
in Attest's approval store (and its notifiers told).

Once the person has decided (``attest confirm``, the inbox, Slack), answer the run's
interruptions from the store and run on, in this process or another::

    state = result.to_state()                      # or RunState.from_json(agent, saved)
    attest.openai_agents.answer(state, a)          # RunState.approve / reject per decision
    result = await Runner.run(agent, state)        # the approved call runs, once

The held call's request id and resume token travel in the run's context (a mapping, or
none, which becomes one), so ``RunState.to_json`` keeps them for a run resumed elsewhere.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import threading
from collections.abc import MutableMapping
from typing import Any, Optional, Sequence

from . import Attest, AttestError, Check, Held, _Checks, _finish_async, to_json

__all__ = ["answer", "wrap_tool", "wrap_tools", "refusal_text", "CONTEXT_KEY"]

FRAMEWORK = "openai-agents"

# Where a held call's request id and token are kept in a run's context (by call id).
CONTEXT_KEY = "attest_held"

# Decided calls whose tool has not been invoked yet, per wrapped tool; past this many the
# oldest is given up (a write's intent row then stands without an outcome, which
# `attest ledger` reports).
MAX_OPEN_CALLS = 256

# Request statuses that let the call run, and those that end it.
_RUNS = ("approved", "edited")
_ENDS = ("rejected", "expired", "cancelled")


def refusal_text(error: AttestError) -> str:
    """What the model reads when a call did not run."""
    if isinstance(error, Held):
        return (
            f"Not run yet: Attest is {error}; once a person approves, "
            "call the tool again with the same arguments."
        )
    return f"Not run: {error}."


def _params(arguments: Any) -> dict:
    if isinstance(arguments, dict):
        return arguments
    try:
        params = json.loads(arguments) if arguments else {}
    except ValueError:
        params = {"input": arguments}
    return params if isinstance(params, dict) else {"input": params}


def _held_in(context: Any) -> Optional[MutableMapping]:
    """The run context's map of held calls (``None`` when the context cannot keep one)."""
    if isinstance(context, MutableMapping):
        held = context.setdefault(CONTEXT_KEY, {})
        return held if isinstance(held, MutableMapping) else None
    return None


class _Bounded:
    """A small map, oldest entry forgotten first."""

    def __init__(self) -> None:
        self._items: dict = {}
        self._lock = threading.Lock()

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > MAX_OPEN_CALLS:
                self._items.pop(next(iter(self._items)))

    def take(self, key: Any) -> Any:
        with self._lock:
            return self._items.pop(key, None)

    def get(self, key: Any) -> Any:
        with self._lock:
            return self._items.get(key)


# Held calls of this process, for contexts that cannot keep them.
_HELD = _Bounded()


def _call_key(name: str, params: dict) -> str:
    """What a kept request is for: the tool and its arguments (a call id alone may be
    reused by another run)."""
    return hashlib.sha256(to_json([name, params]).encode()).hexdigest()


def _remember_held(run_context: Any, call_id: str, name: str, params: dict, held: Held) -> None:
    entry = {"id": held.request_id, "token": held.token, "call": _call_key(name, params)}
    _HELD.put((call_id, entry["call"]), entry)
    if getattr(run_context, "context", None) is None:
        try:
            run_context.context = {}
        except AttributeError:
            return
    kept = _held_in(run_context.context)
    if kept is not None:
        kept[call_id] = entry


def _held_entry(run_context: Any, call_id: str, name: str, params: dict) -> Optional[dict]:
    """The request kept for this call (by its id, tool and arguments), if any."""
    call = _call_key(name, params)
    kept = _held_in(getattr(run_context, "context", None))
    entry = kept.get(call_id) if kept is not None else None
    if isinstance(entry, dict) and entry.get("call") == call:
        return entry
    return _HELD.get((call_id, call))


def _forget_held(run_context: Any, call_id: str, name: str, params: dict) -> None:
    """A held call that ended (ran, or was rejected): its token is spent."""
    _HELD.take((call_id, _call_key(name, params)))
    kept = _held_in(getattr(run_context, "context", None))
    if kept is not None:
        kept.pop(call_id, None)


def wrap_tool(
    tool: Any,
    attest: Attest,
    *,
    system: Optional[str] = None,
    verb: Optional[str] = None,
    target: Optional[str] = None,
    verify: Optional[Check] = None,
    read_back: Optional[Check] = None,
) -> Any:
    """A governed copy of one ``FunctionTool``. Without ``system`` and ``verb`` they are
    detected from the tool's name (and the configuration's registry). ``verify`` /
    ``read_back``: the tool's own checks of its result, as for :meth:`attest.Attest.tool`."""
    invoke = tool.on_invoke_tool
    keywords = dict(name=tool.name, system=system, verb=verb, target=target, framework=FRAMEWORK)
    decided = _Bounded()  # call id -> a cleared call, or why it may not run

    async def needs_approval(run_context: Any, params: dict, call_id: str) -> bool:
        checks = _Checks(verify, read_back)
        try:
            running = await asyncio.to_thread(
                attest._start, None, dict(params), keywords["name"], system, verb, target, FRAMEWORK, checks
            )
        except Held as held:
            _remember_held(run_context, call_id, keywords["name"], dict(params), held)
            return True
        except AttestError as error:
            decided.put(call_id, error)
            return False
        decided.put(call_id, (running, dict(params), checks))
        return False

    async def governed(ctx: Any, input: str) -> Any:
        params = _params(input)
        call_id = getattr(ctx, "tool_call_id", None)

        async def run(use: Any) -> Any:
            return await invoke(ctx, input if use is params else json.dumps(dict(use)))

        early = decided.take(call_id) if call_id is not None else None
        if isinstance(early, AttestError):
            return refusal_text(early)
        if early is not None:
            running, asked, checks = early
            if asked == params:
                return await _finish_async(running, params, invoke, run, checks)
            # Not the call that was decided: its cleared pipeline is dropped (an intent
            # without an outcome, reported), and this call is decided on its own.
        held = _held_entry(ctx, call_id, tool.name, params) if call_id is not None else None
        token = held.get("token") if held else None
        try:
            output = await attest.acall(
                invoke, params, run=run, verify=verify, read_back=read_back, token=token, **keywords
            )
        except Held as error:
            return refusal_text(error)
        except AttestError as error:
            if held:
                _forget_held(ctx, call_id, tool.name, params)
            return refusal_text(error)
        if held:
            _forget_held(ctx, call_id, tool.name, params)
        return output

    wrapped = copy.copy(tool)
    wrapped.on_invoke_tool = governed
    wrapped.needs_approval = needs_approval
    return wrapped


def wrap_tools(
    tools: Sequence[Any],
    attest: Attest,
    *,
    verify: Optional[Check] = None,
    read_back: Optional[Check] = None,
) -> list[Any]:
    """Governed copies of a list of ``FunctionTool``s; other tools (hosted tools such as
    web search) are returned unchanged, since their calls never reach this process."""
    from agents import FunctionTool

    return [
        wrap_tool(t, attest, verify=verify, read_back=read_back) if isinstance(t, FunctionTool) else t
        for t in tools
    ]


def answer(state: Any, attest: Attest) -> list:
    """Answers a paused run's interruptions from Attest's approval store: each held call a
    person approved is ``state.approve``d, each they rejected (or that expired) is
    ``state.reject``ed with the reason. ``state`` is a ``RunState`` (or a result, whose
    ``to_state()`` is taken). Returns the interruptions still waiting for a person; run
    on with ``Runner.run(agent, state)`` once it is empty (or to let the model see the
    rest still waiting)."""
    if not hasattr(state, "get_interruptions") and hasattr(state, "to_state"):
        state = state.to_state()
    context = getattr(state, "_context", None)  # the run's context (no public accessor)
    waiting = []
    for item in state.get_interruptions():
        raw = item.raw_item
        fields = raw if isinstance(raw, dict) else {k: getattr(raw, k, None) for k in ("call_id", "arguments")}
        call_id = fields.get("call_id")
        params = _params(fields.get("arguments"))
        held = _held_entry(context, call_id, item.tool_name or "", params) if call_id is not None else None
        if held is None:
            waiting.append(item)  # not a call Attest holds: the caller's to answer
            continue
        seen = attest.request(held["id"])
        status = seen.get("status")
        if status in _RUNS:
            state.approve(item)
        elif status in _ENDS:
            who = seen.get("approver") or "nobody"
            state.reject(item, rejection_message=f"Not run: {status} by {who} (Attest request {held['id']}).")
        else:
            waiting.append(item)
    return waiting
