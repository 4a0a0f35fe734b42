"""LangChain and LangGraph: govern a list of tools, or a LangGraph ``ToolNode``.

    tools = attest.langchain.wrap_tools([search, send_email], a)
    node = attest.langchain.wrap_tool_node(ToolNode([search, send_email]), a)

Each wrapped tool keeps its name, description and argument schema, so the model sees the
same tools. A call policy refuses, a person rejects, or that waits for a person does not
run: the tool answers with a ``ToolException`` whose text says why (``handle_tool_error``
is on), so the model reads the reason in an error ``ToolMessage`` instead of the graph
stopping. Calling again with the same arguments after a person approved runs the call.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from . import Attest, AttestError, Held

__all__ = ["wrap_tool", "wrap_tools", "wrap_tool_node"]

FRAMEWORK = "langchain"


def _reason(error: AttestError) -> str:
    if isinstance(error, Held):
        return (
            f"Not run yet: Attest is {error}; once a person approves, "
            "call the tool again with the same arguments"
        )
    return f"{error}: the tool did not run"


def wrap_tool(
    tool: Any,
    attest: Attest,
    *,
    system: Optional[str] = None,
    verb: Optional[str] = None,
    target: Optional[str] = None,
) -> Any:
    """A governed copy of one LangChain tool (any ``BaseTool``). Without ``system`` and
    ``verb`` they are detected from the tool's name."""
    from langchain_core.tools import StructuredTool, ToolException

    keywords = dict(name=tool.name, system=system, verb=verb, target=target, framework=FRAMEWORK)

    def run(**params: Any) -> Any:
        try:
            return attest.call(tool.invoke, params, run=lambda use: tool.invoke(dict(use)), **keywords)
        except AttestError as error:
            raise ToolException(_reason(error)) from error

    async def arun(**params: Any) -> Any:
        async def invoke(use: Any) -> Any:
            return await tool.ainvoke(dict(use))

        try:
            return await attest.acall(tool.ainvoke, params, run=invoke, **keywords)
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


def wrap_tools(tools: Sequence[Any], attest: Attest) -> list[Any]:
    """Governed copies of a list of LangChain tools (or plain functions, which LangChain's
    ``tool`` turns into tools first); names, descriptions and schemas unchanged."""
    from langchain_core.tools import BaseTool
    from langchain_core.tools import tool as as_tool

    return [wrap_tool(t if isinstance(t, BaseTool) else as_tool(t), attest) for t in tools]


def wrap_tool_node(node: Any, attest: Attest, **kwargs: Any) -> Any:
    """A LangGraph ``ToolNode`` over governed copies of ``node``'s tools (``kwargs`` go
    to the new ``ToolNode``, such as ``name`` or ``handle_tool_errors``)."""
    from langgraph.prebuilt import ToolNode

    return ToolNode(wrap_tools(list(node.tools_by_name.values()), attest), **kwargs)
