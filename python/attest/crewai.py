"""CrewAI: govern ``BaseTool``s.

    agent = Agent(role="ops", goal="...", backstory="...", tools=attest.crewai.wrap_tools([lookup, refund], a))

Each wrapped tool is a ``BaseTool`` with the original's name, description and argument
schema, whose runs go through Attest. A call policy refuses, a person rejects, or that
waits for a person does not run: the tool's output is a sentence saying why, which the
agent reads like any tool output. Calling again with the same arguments after a person
approved (``attest confirm``, the inbox, Slack) runs the call, once.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from . import Attest, AttestError, Check, Held

__all__ = ["wrap_tool", "wrap_tools", "refusal_text"]

FRAMEWORK = "crewai"


def refusal_text(error: AttestError) -> str:
    """What the agent reads when a call did not run."""
    if isinstance(error, Held):
        return (
            f"Not run yet: Attest is {error}; once a person approves, "
            "use the tool again with the same arguments."
        )
    return f"Not run: {error}."


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
    """A governed copy of one CrewAI ``BaseTool``. Without ``system`` and ``verb`` they
    are detected from the tool's name (and the configuration's registry). ``verify`` /
    ``read_back``: the tool's own checks of its result, as for :meth:`attest.Attest.tool`."""
    from crewai.tools import BaseTool

    keywords = dict(
        name=tool.name, system=system, verb=verb, target=target, framework=FRAMEWORK,
        verify=verify, read_back=read_back,
    )

    class GovernedTool(BaseTool):
        """The original tool, run through Attest."""

        def _run(self, **params: Any) -> Any:
            try:
                return attest.call(tool.run, params, run=lambda use: tool.run(**dict(use)), **keywords)
            except AttestError as error:
                return refusal_text(error)

        async def _arun(self, **params: Any) -> Any:
            async def run(use: Any) -> Any:
                return await tool.arun(**dict(use))

            try:
                return await attest.acall(tool.arun, params, run=run, **keywords)
            except AttestError as error:
                return refusal_text(error)

    GovernedTool.__name__ = f"Governed{type(tool).__name__}"
    return GovernedTool(
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,
        result_as_answer=getattr(tool, "result_as_answer", False),
    )


def wrap_tools(
    tools: Sequence[Any],
    attest: Attest,
    *,
    verify: Optional[Check] = None,
    read_back: Optional[Check] = None,
) -> list[Any]:
    """Governed copies of a list of CrewAI tools; names, descriptions and argument
    schemas unchanged. ``verify`` / ``read_back`` apply to every tool in the list."""
    return [wrap_tool(t, attest, verify=verify, read_back=read_back) for t in tools]
