"""Claude Agent SDK: a ``can_use_tool`` permission callback, or ``PreToolUse`` hooks,
that decide before a tool runs, and ``PostToolUse`` hooks that record after.

    options = ClaudeAgentOptions(**attest.claude_agent_sdk.permissions(a))  # can_use_tool
    options = ClaudeAgentOptions(hooks=attest.claude_agent_sdk.hooks(a))    # hooks only

With ``can_use_tool``, a call Attest asks a person about pauses the agent the SDK's own
way: the permission callback waits (up to the ``Attest(wait=...)`` seconds, or the
configuration's ``approvals.wait``) while the person decides in the inbox, Slack or with
``attest confirm``, and the tool runs once they approve; a rejection is a ``deny`` with
who rejected it. If nobody answers in time the call is denied naming the request, and the
same call made again once it is approved is allowed.

The agent's own tools (Bash, Write, Edit, MultiEdit, MCP tools ``mcp__server__tool``…)
are described the way ``attest hook claude-code`` describes them: a Bash command by what
it does (``git push`` is a write to git, ``rm -rf`` a delete), a file write by its path.

- ``PreToolUse``: Attest decides. Cleared: ``allow`` (a write's intent row is already in
  the ledger). Refused or rejected: ``deny`` with the reason, which Claude reads. Waiting
  for a person: ``deny`` naming the request; once approved (``attest confirm``, the
  inbox), the same call made again is allowed.
- ``PostToolUse`` / ``PostToolUseFailure``: the outcome is verified by its shape and
  recorded against the decision (tool output is hashed, never stored).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Optional

from . import Attest, AttestError, Held, to_json
from ._attest import Running

__all__ = ["AttestHooks", "hooks", "permissions"]

FRAMEWORK = "claude-agent-sdk"

# Calls allowed whose outcome has not come back yet (Claude Code may still deny a call a
# hook allowed, and then no PostToolUse follows). Past this many, the oldest is given
# up: its pipeline is dropped, and a write's intent row stands without an outcome, which
# `attest ledger` reports.
MAX_OPEN_CALLS = 256


class AttestHooks:
    """The hook callbacks over one :class:`attest.Attest`; calls cleared by ``pre`` wait
    (by ``tool_use_id``) for ``post`` or ``failure`` to record their outcome."""

    def __init__(self, attest: Attest) -> None:
        self.attest = attest
        self._running: dict[str, Running] = {}
        self._lock = threading.Lock()

    async def pre(self, input_data: dict, tool_use_id: Optional[str], context: Any) -> dict:
        """The ``PreToolUse`` callback."""
        name = str(input_data.get("tool_name", ""))
        refusal = await self._decide(name, input_data.get("tool_input"), tool_use_id or input_data.get("tool_use_id"))
        if refusal is not None:
            return _pre_answer("deny", refusal)
        return _pre_answer("allow", "cleared by Attest policy")

    async def can_use_tool(self, tool_name: str, tool_input: dict, context: Any) -> Any:
        """The ``can_use_tool`` permission callback: allow, or deny with the reason."""
        from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

        refusal = await self._decide(tool_name, tool_input, getattr(context, "tool_use_id", None))
        if refusal is not None:
            return PermissionResultDeny(message=refusal)
        return PermissionResultAllow()

    async def _decide(self, name: str, params: Any, use_id: Any) -> Optional[str]:
        """Decides one call (waiting for a person as the engine's ``wait`` says); keeps it
        by ``use_id`` for its outcome. Returns why it may not run, or ``None``."""
        params = params or {}
        if not isinstance(params, dict):
            params = {"input": params}
        try:
            running = await asyncio.to_thread(
                self.attest._start, None, params, name, None, None, None, FRAMEWORK
            )
        except AttestError as error:
            return _reason(error)
        if use_id is None:
            # Nothing to match the outcome by: record it as run now, unverified by output.
            await asyncio.to_thread(running.finish, "null")
        else:
            with self._lock:
                self._running[str(use_id)] = running
                while len(self._running) > MAX_OPEN_CALLS:
                    self._running.pop(next(iter(self._running)))
        return None

    async def post(self, input_data: dict, tool_use_id: Optional[str], context: Any) -> dict:
        """The ``PostToolUse`` callback: records the outcome."""
        running = self._take(tool_use_id or input_data.get("tool_use_id"))
        if running is not None:
            receipt = await asyncio.to_thread(running.finish, to_json(input_data.get("tool_response")))
            return {"hookSpecificOutput": {
                "hookEventName": "PostToolUse",
                "additionalContext": f"recorded in the Attest ledger as seq {receipt.seq} ({receipt.level})",
            }}
        return {}

    async def failure(self, input_data: dict, tool_use_id: Optional[str], context: Any) -> dict:
        """The ``PostToolUseFailure`` callback: records the failure."""
        running = self._take(tool_use_id or input_data.get("tool_use_id"))
        if running is not None:
            await asyncio.to_thread(running.fail, "tool failed")
        return {}

    def _take(self, use_id: Any) -> Optional[Running]:
        if use_id is None:
            return None
        with self._lock:
            return self._running.pop(str(use_id), None)

    def matchers(self) -> dict:
        """The ``hooks`` mapping for ``ClaudeAgentOptions``."""
        from claude_agent_sdk import HookMatcher

        return {
            "PreToolUse": [HookMatcher(hooks=[self.pre])],
            "PostToolUse": [HookMatcher(hooks=[self.post])],
            "PostToolUseFailure": [HookMatcher(hooks=[self.failure])],
        }


    def permissions(self) -> dict:
        """``ClaudeAgentOptions`` keyword arguments: ``can_use_tool`` decides, and the
        ``PostToolUse`` / ``PostToolUseFailure`` hooks record the outcome."""
        from claude_agent_sdk import HookMatcher

        return {
            "can_use_tool": self.can_use_tool,
            "hooks": {
                "PostToolUse": [HookMatcher(hooks=[self.post])],
                "PostToolUseFailure": [HookMatcher(hooks=[self.failure])],
            },
        }


def hooks(attest: Attest) -> dict:
    """``ClaudeAgentOptions(hooks=attest.claude_agent_sdk.hooks(a))``."""
    return AttestHooks(attest).matchers()


def permissions(attest: Attest) -> dict:
    """``ClaudeAgentOptions(**attest.claude_agent_sdk.permissions(a))``: the
    ``can_use_tool`` callback and the hooks that record outcomes."""
    return AttestHooks(attest).permissions()


def _reason(error: AttestError) -> str:
    if isinstance(error, Held):
        return (
            f"Not run yet: Attest is {error} (attest confirm {error.request_id} approve, "
            "or the inbox); once approved, make the same call again."
        )
    return f"{error}. Not run."


def _pre_answer(decision: str, reason: str) -> dict:
    return {"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": decision,
        "permissionDecisionReason": reason,
    }}
