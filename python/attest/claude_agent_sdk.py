"""Claude Agent SDK: ``PreToolUse`` / ``PostToolUse`` hooks that decide before a tool
runs and record after.

    options = ClaudeAgentOptions(hooks=attest.claude_agent_sdk.hooks(a))

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

__all__ = ["AttestHooks", "hooks"]

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
        params = input_data.get("tool_input") or {}
        if not isinstance(params, dict):
            params = {"input": params}
        use_id = tool_use_id or input_data.get("tool_use_id")
        try:
            running = await asyncio.to_thread(
                self.attest._start, None, params, name, None, None, None, FRAMEWORK
            )
        except AttestError as error:
            return _pre_answer("deny", _reason(error))
        if use_id is None:
            # Nothing to match the outcome by: record it as run now, unverified by output.
            await asyncio.to_thread(running.finish, "null")
        else:
            with self._lock:
                self._running[str(use_id)] = running
                while len(self._running) > MAX_OPEN_CALLS:
                    self._running.pop(next(iter(self._running)))
        return _pre_answer("allow", "cleared by Attest policy")

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


def hooks(attest: Attest) -> dict:
    """``ClaudeAgentOptions(hooks=attest.claude_agent_sdk.hooks(a))``."""
    return AttestHooks(attest).matchers()


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
