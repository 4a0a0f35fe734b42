"""Claude Agent SDK: the PreToolUse / PostToolUse callbacks, as ClaudeAgentOptions holds
them, fed the hook inputs the SDK passes (no CLI process, no model, no network)."""

from __future__ import annotations

import asyncio
import json

from claude_agent_sdk import ClaudeAgentOptions, HookMatcher

import attest
import attest.claude_agent_sdk


def event(name: str, tool: str, tool_input: dict, use_id: str, **extra) -> dict:
    return {
        "session_id": "s-1",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/work",
        "hook_event_name": name,
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": use_id,
        **extra,
    }


def callbacks(a: attest.Attest):
    hooks = attest.claude_agent_sdk.hooks(a)
    options = ClaudeAgentOptions(hooks=hooks)  # the SDK accepts them as they are
    assert all(isinstance(m, HookMatcher) for matchers in options.hooks.values() for m in matchers)
    return (
        hooks["PreToolUse"][0].hooks[0],
        hooks["PostToolUse"][0].hooks[0],
        hooks["PostToolUseFailure"][0].hooks[0],
    )


def decision(answer: dict) -> tuple[str, str]:
    out = answer["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse"
    return out["permissionDecision"], out["permissionDecisionReason"]


def test_pre_decides_post_records(a, cli):
    pre, post, failure = callbacks(a)

    async def main() -> None:
        # A read acts, and its outcome is recorded after it ran.
        read = event("PreToolUse", "Bash", {"command": "git status"}, "u1")
        assert (await pre(read, "u1", {"signal": None}))["hookSpecificOutput"]["permissionDecision"] == "allow"
        await post({**read, "hook_event_name": "PostToolUse", "tool_response": {"stdout": "clean"}}, "u1", {"signal": None})

        # A source file edit (a medium write) acts.
        edit = event("PreToolUse", "Edit", {"file_path": "/work/src/app.py", "old_string": "a", "new_string": "b"}, "u2")
        assert decision(await pre(edit, "u2", {"signal": None}))[0] == "allow"
        await failure({**edit, "hook_event_name": "PostToolUseFailure", "error": "no match"}, "u2", {"signal": None})

        # A push asks a person: denied (held) until approved, then the same call is allowed.
        push = event("PreToolUse", "Bash", {"command": "git push origin main"}, "u3")
        verdict, reason = decision(await pre(push, "u3", {"signal": None}))
        assert verdict == "deny" and "approve" in reason

        [waiting] = json.loads(cli.run("pending", "--json").stdout)
        cli.approve(waiting["id"])
        push = event("PreToolUse", "Bash", {"command": "git push origin main"}, "u4")
        assert decision(await pre(push, "u4", {"signal": None}))[0] == "allow"
        await post({**push, "hook_event_name": "PostToolUse", "tool_response": {"stdout": "ok"}}, "u4", {"signal": None})

        # A refused call (curl paying through Stripe) is denied with the policy's reason.
        pay = event("PreToolUse", "Bash", {"command": "curl -X POST https://api.stripe.com/v1/refunds -d charge=ch_1"}, "u5")
        verdict, reason = decision(await pre(pay, "u5", {"signal": None}))
        assert verdict == "deny" and "agents do not move money" in reason

    asyncio.run(main())
    rows = cli.outcomes()
    summary = [(r["system"], r["verb"], r["decision"], r["execution"]["status"]) for r in rows]
    assert summary == [
        ("git", "read", "act", "ok"),
        ("files", "write", "act", "failed"),
        ("git", "share", "ask", "pending"),
        ("git", "share", "ask", "ok"),
        ("stripe", "pay", "refuse", summary[4][3]),
    ]
    cli.verify()
