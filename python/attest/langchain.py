"""LangChain and LangGraph: govern a list of tools, or a LangGraph ``ToolNode``.

    tools = attest.langchain.wrap_tools([search, send_email], a)
    node = attest.langchain.wrap_tool_node(ToolNode([search, send_email]), a)

Each wrapped tool keeps its name, description and argument schema, so the model sees the
same tools. A call policy refuses or a person rejects does not run: the tool answers with
a ``ToolException`` whose text says why (``handle_tool_error`` is on), so the model reads
the reason in an error ``ToolMessage`` instead of the graph stopping.

A call that waits for a person, inside a LangGraph graph, pauses the graph the LangGraph
way (a graph compiled with a checkpointer; without one a held call answers like a refused
one): the tool raises ``interrupt()`` with the request (``id``, ``summary``, ``inbox``,
``token``, ``tool``), which the caller finds in ``result["__interrupt__"]`` and in the
checkpointer. Once the person has decided (``attest confirm``, the inbox, Slack), resume
with ``graph.invoke(Command(resume=request), config)`` — the interrupt's value, so a run
resumed in another process still carries the request's token — and the call runs, once
(or answers with why not, if it was rejected). Outside a graph, a held call answers like
a refused one; calling again with the same arguments after the approval runs it.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from . import Attest, AttestError, Check, Held

__all__ = ["wrap_tool", "wrap_tools", "wrap_tool_node", "held_request"]

FRAMEWORK = "langchain"

# The marker of an Attest request in an interrupt's value.
REQUEST_KIND = "attest.approval"


def _reason(error: AttestError) -> str:
    if isinstance(error, Held):
        return (
            f"Not run yet: Attest is {error}; once a person approves, "
            "call the tool again with the same arguments"
        )
    return f"{error}: the tool did not run"


def held_request(attest: Attest, held: Held, tool: str) -> dict:
    """What a held call pauses a graph with: the request's ``id``, a one-line
    ``summary``, the ``inbox`` link (the configured inbox, else its default address), the
    ``token`` that resumes it, and the ``tool``. Plain JSON, so a checkpointer keeps it."""
    seen = attest.request(held.request_id)
    target = f" {seen['target']}" if seen.get("target") else ""
    reasons = "; ".join(seen.get("reasons") or [])
    summary = f"{tool}: {seen['system']} {seen['verb']}{target} ({seen['tier']} risk)"
    return {
        "kind": REQUEST_KIND,
        "id": held.request_id,
        "summary": f"{summary}: {reasons}" if reasons else summary,
        "inbox": attest.inbox_link(held.request_id),
        "token": held.token,
        "tool": tool,
    }


def _token_in(value: Any) -> Optional[str]:
    """The resume token a resume value carries: the interrupt's value (a request), or
    the token itself."""
    if isinstance(value, dict) and value.get("kind") == REQUEST_KIND and isinstance(value.get("token"), str):
        return value["token"]
    if isinstance(value, str) and value.startswith("atr_"):
        return value
    return None


_NOT_RESUMED = object()


def _graph_resume() -> Any:
    """Inside a LangGraph task of a graph with a checkpointer: the value the task was
    resumed with, else ``_NOT_RESUMED`` (a first run); ``None`` outside such a graph.

    LangGraph gives a resumed task its resume values in the order of the task's
    ``interrupt()`` calls, re-running the task from its start; asking Attest again on
    that re-run would file a second request. So a governed call's first ``interrupt()``
    asks for the resume value before Attest is asked: on a first run it raises, and that
    ``GraphInterrupt`` is dropped here (nothing is recorded by a raise)."""
    try:
        from langgraph._internal._constants import CONFIG_KEY_CHECKPOINTER, CONFIG_KEY_SCRATCHPAD
        from langgraph.config import get_config
        from langgraph.errors import GraphInterrupt
        from langgraph.types import interrupt
    except ImportError:
        return None  # no LangGraph (or one that moved these): a held call answers as refused
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:
        return None
    if CONFIG_KEY_SCRATCHPAD not in configurable:
        return None  # a LangChain runnable, not a LangGraph task: nothing to resume
    if configurable.get(CONFIG_KEY_CHECKPOINTER) is None:
        return None  # a graph without a checkpointer cannot be resumed: answer, do not pause
    try:
        return interrupt({"kind": REQUEST_KIND, "probe": True})
    except GraphInterrupt:
        return _NOT_RESUMED


def _interrupt(request: dict) -> Any:
    """LangGraph's ``interrupt(request)``: reached only inside a LangGraph task, so only
    there is LangGraph imported."""
    from langgraph.types import interrupt

    return interrupt(request)


def _paused(attest: Attest, name: str, call: Callable[[Optional[str]], Any]) -> Any:
    """Runs ``call(token)`` (a governed call, presenting ``token`` when given); inside a
    LangGraph task a held call pauses the graph with ``interrupt()`` until a resume
    brings the decision. LangGraph is imported only once inside one (a LangChain user
    may have ``langchain-core`` alone)."""
    resumed = _graph_resume()
    if resumed is None:
        return call(None)
    token = None if resumed is _NOT_RESUMED else _token_in(resumed)
    while True:
        try:
            return call(token)
        except Held as held:
            answer = _interrupt(held_request(attest, held, name))
            token = _token_in(answer) or held.token


async def _apaused(attest: Attest, name: str, call: Callable[[Optional[str]], Any]) -> Any:
    """:func:`_paused` for a coroutine ``call``."""
    resumed = _graph_resume()
    if resumed is None:
        return await call(None)
    token = None if resumed is _NOT_RESUMED else _token_in(resumed)
    while True:
        try:
            return await call(token)
        except Held as held:
            answer = _interrupt(held_request(attest, held, name))
            token = _token_in(answer) or held.token


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
    """A governed copy of one LangChain tool (any ``BaseTool``). Without ``system`` and
    ``verb`` they are detected from the tool's name (and the configuration's registry).
    ``verify`` / ``read_back``: the tool's own checks of its result, as for
    :meth:`attest.Attest.tool`."""
    from langchain_core.tools import StructuredTool, ToolException

    keywords = dict(
        name=tool.name, system=system, verb=verb, target=target, framework=FRAMEWORK,
        verify=verify, read_back=read_back,
    )

    def run(**params: Any) -> Any:
        def call(token: Optional[str]) -> Any:
            return attest.call(tool.invoke, params, run=lambda use: tool.invoke(dict(use)), token=token, **keywords)

        try:
            return _paused(attest, tool.name, call)
        except AttestError as error:
            raise ToolException(_reason(error)) from error

    async def arun(**params: Any) -> Any:
        async def invoke(use: Any) -> Any:
            return await tool.ainvoke(dict(use))

        async def call(token: Optional[str]) -> Any:
            return await attest.acall(tool.ainvoke, params, run=invoke, token=token, **keywords)

        try:
            return await _apaused(attest, tool.name, call)
        except AttestError as error:
            raise ToolException(_reason(error)) from error

    return StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,
        infer_schema=False,
        return_direct=getattr(tool, "return_direct", False),
        handle_tool_error=True,
    )


def wrap_tools(
    tools: Sequence[Any],
    attest: Attest,
    *,
    verify: Optional[Check] = None,
    read_back: Optional[Check] = None,
) -> list[Any]:
    """Governed copies of a list of LangChain tools (or plain functions, which LangChain's
    ``tool`` turns into tools first); names, descriptions and schemas unchanged.
    ``verify`` / ``read_back`` apply to every tool in the list."""
    from langchain_core.tools import BaseTool
    from langchain_core.tools import tool as as_tool

    return [
        wrap_tool(t if isinstance(t, BaseTool) else as_tool(t), attest, verify=verify, read_back=read_back)
        for t in tools
    ]


def wrap_tool_node(node: Any, attest: Attest, **kwargs: Any) -> Any:
    """A LangGraph ``ToolNode`` over governed copies of ``node``'s tools (``kwargs`` go
    to the new ``ToolNode``, such as ``name`` or ``handle_tool_errors``)."""
    from langgraph.prebuilt import ToolNode

    return ToolNode(wrap_tools(list(node.tools_by_name.values()), attest), **kwargs)
