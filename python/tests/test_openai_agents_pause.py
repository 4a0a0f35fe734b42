"""OpenAI Agents SDK: a call Attest asks about is a ``needs_approval`` call, so the run
stops with an interruption while the request waits in Attest's approval store; after a
person decides (``attest confirm`` with an approver token), the interruptions are
answered from the store (``RunState.approve`` / ``reject``) and the run — saved with
``RunState.to_json`` and resumed in a new process — runs the call exactly once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from agents import Runner
from agents.testing.model import ScriptedModel, assistant_message, function_call

import attest.openai_agents
from agents_app import agent
from conftest import REPO

APP = REPO / "python" / "tests" / "agents_app.py"


def pause(a, runs, call: str, arguments: dict) -> dict:
    """One run that calls `call` and stops for approval; returns its state as JSON."""
    model = ScriptedModel([[function_call(call, arguments, call_id="call_1")]])
    result = asyncio.run(Runner.run(agent(a, model, str(runs)), "go"))
    [item] = result.interruptions
    assert item.tool_name == call
    return result.to_state().to_json()


def resume_elsewhere(cli, runs, state_file) -> dict:
    out = subprocess.run(
        [sys.executable, str(APP), str(cli.ledger), str(cli.policy), str(runs), str(state_file)],
        capture_output=True, text=True, cwd=cli.directory, timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def ran(runs) -> list[str]:
    return runs.read_text().splitlines() if runs.exists() else []


def test_a_held_call_interrupts_and_runs_once_when_resumed_in_a_new_process(a, cli, tmp_path):
    runs, state_file = tmp_path / "runs.txt", tmp_path / "state.json"
    saved = pause(a, runs, "create_invoice", {"customer": "acme", "amount": 10})
    assert ran(runs) == []
    [waiting] = json.loads(cli.run("pending", "--json").stdout)
    held = saved["context"]["context"][attest.openai_agents.CONTEXT_KEY]["call_1"]
    assert held["id"] == waiting["id"] and held["token"].startswith("atr_")
    state_file.write_text(json.dumps(saved))

    # Nobody decided yet: the interruption stays, and nothing runs.
    model = ScriptedModel([])
    still = resume_elsewhere_in_process(a, model, runs, saved)
    assert still == 1
    assert ran(runs) == []

    cli.approve(waiting["id"])
    done = resume_elsewhere(cli, runs, state_file)
    assert done["waiting"] == 0
    assert done["final"] == "done"
    assert json.loads(done["outputs"][-1])["id"] == "in_1"
    assert ran(runs) == ["acme:10"], "the approved call ran exactly once"

    rows = cli.outcomes()
    assert [(r["decision"], r["execution"]["status"]) for r in rows] == [("ask", "pending"), ("ask", "ok")]
    assert rows[-1]["confirm"]["approver"] == "ann@acme.com"
    cli.verify()


def resume_elsewhere_in_process(a, model, runs, saved) -> int:
    """Answers a saved run's interruptions without running it: how many still wait."""
    from agents import RunState

    async def main() -> int:
        state = await RunState.from_json(agent(a, model, str(runs)), saved)
        return len(attest.openai_agents.answer(state, a))

    return asyncio.run(main())


def test_a_rejected_call_is_rejected_in_the_run_and_never_runs(a, cli, tmp_path):
    runs, state_file = tmp_path / "runs.txt", tmp_path / "state.json"
    saved = pause(a, runs, "create_invoice", {"customer": "globex", "amount": 99})
    state_file.write_text(json.dumps(saved))
    [waiting] = json.loads(cli.run("pending", "--json").stdout)
    added = json.loads(cli.run("approvers", "add", "raj@acme.com", "--json").stdout)
    cli.run("confirm", waiting["id"], "reject", env={"ATTEST_APPROVER_TOKEN": added["token"]})

    done = resume_elsewhere(cli, runs, state_file)
    assert done["final"] == "done"
    assert "rejected by raj@acme.com" in done["outputs"][-1]
    assert ran(runs) == []


def test_a_read_runs_without_an_interruption(a, cli, tmp_path):
    model = ScriptedModel([
        [function_call("lookup_order", {"order_id": "42"}, call_id="call_1")],
        [assistant_message("done")],
    ])
    result = asyncio.run(Runner.run(agent(a, model, str(tmp_path / "runs.txt")), "go"))
    assert result.interruptions == []
    assert result.final_output == "done"
    [row] = cli.outcomes()
    assert (row["decision"], row["execution"]["status"]) == ("act", "ok")
