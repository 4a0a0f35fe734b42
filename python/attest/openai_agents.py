"""OpenAI Agents SDK: govern ``function_tool``s.

    agent = Agent(name="ops", tools=attest.openai_agents.wrap_tools([lookup, refund], a))

Each wrapped tool is a copy of the ``FunctionTool`` (same name, description and JSON
schema) whose ``on_invoke_tool`` goes through Attest. A call that policy refuses, a
person rejects, or that waits for a person does not run; the tool's output is a sentence
saying so, which the model reads like any tool output. Calling again with the same
arguments after a person approved runs the call.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Optional, Sequence

from . import Attest, AttestError, Held

__all__ = ["wrap_tool", "wrap_tools"]

FRAMEWORK = "openai-agents"


def refusal_text(error: AttestError) -> str:
    """What the model reads when a call did not run."""
    if isinstance(error, Held):
        return (
            f"Not run yet: Attest is {error}; once a person approves, "
            "call the tool again with the same arguments."
        )
    return f"Not run: {error}."


def wrap_tool(
    tool: Any,
    attest: Attest,
    *,
    system: Optional[str] = None,
    verb: Optional[str] = None,
    target: Optional[str] = None,
) -> Any:
    """A governed copy of one ``FunctionTool``. Without ``system`` and ``verb`` they are
    detected from the tool's name."""
    invoke = tool.on_invoke_tool
    keywords = dict(name=tool.name, system=system, verb=verb, target=target, framework=FRAMEWORK)

    async def governed(ctx: Any, input: str) -> Any:
        try:
            params = json.loads(input) if input else {}
        except ValueError:
            params = {"input": input}
        if not isinstance(params, dict):
            params = {"input": params}

        async def run(use: Any) -> Any:
            return await invoke(ctx, input if use is params else json.dumps(dict(use)))

        try:
            return await attest.acall(invoke, params, run=run, **keywords)
        except AttestError as error:
            return refusal_text(error)

    wrapped = copy.copy(tool)
    wrapped.on_invoke_tool = governed
    return wrapped


def wrap_tools(tools: Sequence[Any], attest: Attest) -> list[Any]:
    """Governed copies of a list of ``FunctionTool``s; other tools (hosted tools such as
    web search) are returned unchanged, since their calls never reach this process."""
    from agents import FunctionTool

    return [wrap_tool(t, attest) if isinstance(t, FunctionTool) else t for t in tools]
