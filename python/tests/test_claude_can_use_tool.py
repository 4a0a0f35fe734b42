"""Claude Agent SDK: ``can_use_tool`` through the SDK's real control protocol. A scripted
CLI (a ``Transport`` playing Claude Code's side: no CLI process, no model, no network)
asks permission for a tool call, then reports its outcome to the ``PostToolUse`` hook.

A call Attest asks about pauses the agent in the permission callback while a person
decides with ``attest confirm``; approved, the tool runs once (the scripted CLI runs it
only on ``allow``); rejected, it is denied with who rejected it."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any, AsyncIterator

from claude_agent_sdk import ClaudeAgentOptions, query
from claude_agent_sdk._internal.transport import Transport

import attest
import attest.claude_agent_sdk


class ScriptedCli(Transport):
    """Claude Code's side of the control protocol for one tool call: answers
    ``initialize``, asks ``can_use_tool`` once the prompt arrives, runs the tool (appends
    to ``ran``) on ``allow`` and calls the ``PostToolUse`` hook, then ends the turn."""

    def __init__(self, tool: str, tool_input: dict, ran: list) -> None:
        self.tool, self.tool_input, self.ran = tool, tool_input, ran
        self.outbox: asyncio.Queue = asyncio.Queue()
        self.answers: dict[str, asyncio.Future] = {}
        self.post_hook: str | None = None
        self.decisions: list[dict] = []
        self.ready = False

    async def connect(self) -> None:
        self.ready = True

    def is_ready(self) -> bool:
        return self.ready

    async def close(self) -> None:
        self.ready = False

    async def end_input(self) -> None:
        pass

    async def write(self, data: str) -> None:
        for line in data.splitlines():
            message = json.loads(line)
            kind = message.get("type")
            if kind == "control_request" and message["request"]["subtype"] == "initialize":
                hooks = message["request"].get("hooks") or {}
                for matcher in hooks.get("PostToolUse", []):
                    self.post_hook = matcher["hookCallbackIds"][0]
                await self._respond(message["request_id"], {"commands": []})
            elif kind == "control_response":
                answer = message["response"]
                self.answers[answer["request_id"]].set_result(answer)
            elif kind == "user":
                asyncio.get_running_loop().create_task(self._turn())

    async def _respond(self, request_id: str, body: dict) -> None:
        await self.outbox.put({
            "type": "control_response",
            "response": {"subtype": "success", "request_id": request_id, "response": body},
        })

    async def _ask(self, request_id: str, request: dict) -> dict:
        self.answers[request_id] = asyncio.get_running_loop().create_future()
        await self.outbox.put({"type": "control_request", "request_id": request_id, "request": request})
        return await self.answers[request_id]

    async def _turn(self) -> None:
        permission = await self._ask("perm-1", {
            "subtype": "can_use_tool",
            "tool_name": self.tool,
            "input": self.tool_input,
            "tool_use_id": "toolu_1",
            "permission_suggestions": [],
        })
        decision = permission["response"]
        self.decisions.append(decision)
        if decision.get("behavior") == "allow":
            self.ran.append(decision["updatedInput"])
            await self._ask("hook-1", {
                "subtype": "hook_callback",
                "callback_id": self.post_hook,
                "tool_use_id": "toolu_1",
                "input": {
                    "session_id": "s-1", "transcript_path": "/tmp/t.jsonl", "cwd": "/work",
                    "hook_event_name": "PostToolUse", "tool_name": self.tool,
                    "tool_input": self.tool_input, "tool_use_id": "toolu_1",
                    "tool_response": {"stdout": "pushed"},
                },
            })
        await self.outbox.put({
            "type": "assistant",
            "message": {"role": "assistant", "model": "scripted", "content": [{"type": "text", "text": "done"}]},
            "parent_tool_use_id": None,
            "session_id": "s-1",
        })
        await self.outbox.put({
            "type": "result", "subtype": "success", "duration_ms": 1, "duration_api_ms": 0,
            "is_error": False, "num_turns": 1, "session_id": "s-1", "result": "done",
        })
        await self.outbox.put(None)

    async def read_messages(self) -> AsyncIterator[dict[str, Any]]:
        while (message := await self.outbox.get()) is not None:
            yield message


def run_agent(a: attest.Attest, tool: str, tool_input: dict, ran: list) -> ScriptedCli:
    cli = ScriptedCli(tool, tool_input, ran)
    options = ClaudeAgentOptions(**attest.claude_agent_sdk.permissions(a))

    async def prompt():
        yield {"type": "user", "session_id": "", "message": {"role": "user", "content": "ship it"}, "parent_tool_use_id": None}

    async def main() -> None:
        async for _ in query(prompt=prompt(), options=options, transport=cli):
            pass

    asyncio.run(main())
    return cli


def decide_when_asked(cli, choice: str, approver: str) -> threading.Thread:
    """A person who sees the request in `attest pending` and decides it, as it waits."""

    def person() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            waiting = json.loads(cli.run("pending", "--json").stdout)
            if waiting:
                added = json.loads(cli.run("approvers", "add", approver, "--json").stdout)
                cli.run("confirm", waiting[0]["id"], choice, env={"ATTEST_APPROVER_TOKEN": added["token"]})
                return
            time.sleep(0.2)

    thread = threading.Thread(target=person)
    thread.start()
    return thread


def test_can_use_tool_waits_for_the_person_and_the_tool_runs_once(ledger_file, policy_file, cli):
    a = attest.Attest(ledger=ledger_file, policy=policy_file, agent="py-agent", wait=60)
    person = decide_when_asked(cli, "approve", "ann@acme.com")
    ran: list = []
    scripted = run_agent(a, "Bash", {"command": "git push origin main"}, ran)
    person.join()
    assert [d["behavior"] for d in scripted.decisions] == ["allow"]
    assert ran == [{"command": "git push origin main"}]
    rows = cli.outcomes()
    assert [(r["system"], r["decision"], r["execution"]["status"]) for r in rows] == [("git", "ask", "ok")]
    assert rows[-1]["confirm"]["approver"] == "ann@acme.com"
    cli.verify()


def test_can_use_tool_denies_a_rejected_or_refused_call(ledger_file, policy_file, cli):
    a = attest.Attest(ledger=ledger_file, policy=policy_file, agent="py-agent", wait=60)
    person = decide_when_asked(cli, "reject", "raj@acme.com")
    ran: list = []
    scripted = run_agent(a, "Bash", {"command": "git push --force origin main"}, ran)
    person.join()
    [decision] = scripted.decisions
    assert decision["behavior"] == "deny" and "rejected by raj@acme.com" in decision["message"]

    refused = run_agent(a, "Bash", {"command": "curl -X POST https://api.stripe.com/v1/refunds -d charge=ch_1"}, ran)
    [decision] = refused.decisions
    assert decision["behavior"] == "deny" and "agents do not move money" in decision["message"]
    assert ran == []
