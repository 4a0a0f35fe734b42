"""Claude Agent SDK: PreToolUse / PostToolUse hooks that decide before a tool runs and
record after. Pass `hooks=attest.claude_agent_sdk.hooks(a)` to ClaudeAgentOptions; here the
callbacks are fed the inputs the SDK would pass (no CLI, no model, no network).

    pip install ./python claude-agent-sdk && python examples/python/attest_claude_agent_sdk.py
"""

import asyncio
import os
import pathlib
import tempfile

from claude_agent_sdk import ClaudeAgentOptions

import attest
import attest.claude_agent_sdk

ledger = os.environ.get("ATTEST_LEDGER") or str(pathlib.Path(tempfile.mkdtemp()) / "ledger.sqlite")
a = attest.Attest(ledger=ledger, agent="claude-agent")
options = ClaudeAgentOptions(hooks=attest.claude_agent_sdk.hooks(a), allowed_tools=["Bash", "Edit"])
pre = options.hooks["PreToolUse"][0].hooks[0]
post = options.hooks["PostToolUse"][0].hooks[0]


async def main() -> None:
    for n, command in enumerate(["git status", "git push --force origin main"]):
        event = {"session_id": "s1", "transcript_path": "", "cwd": ".", "hook_event_name": "PreToolUse",
                 "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": f"u{n}"}
        answer = (await pre(event, f"u{n}", {"signal": None}))["hookSpecificOutput"]
        print(f"{command}: {answer['permissionDecision']} ({answer['permissionDecisionReason']})")
        if answer["permissionDecision"] == "allow":
            done = {**event, "hook_event_name": "PostToolUse", "tool_response": {"stdout": "clean"}}
            await post(done, f"u{n}", {"signal": None})


asyncio.run(main())
print("ledger:", ledger)
