"""LangGraph: a held call pauses the graph with ``interrupt()`` carrying the request; a
person decides with ``attest confirm`` and an approver token; ``Command(resume=request)``
— here in a new process, from the SQLite checkpointer — runs the call exactly once."""

from __future__ import annotations

import json
import subprocess
import sys

from langchain_core.messages import HumanMessage
from langgraph.types import Command

import attest
from conftest import REPO
from graph_app import answer, build

APP = REPO / "python" / "tests" / "graph_app.py"


def resume_elsewhere(cli, checkpoints, runs, thread: str, resume: object) -> dict:
    """Resumes `thread` in a new Python process, as a worker that picked the run up would."""
    out = subprocess.run(
        [sys.executable, str(APP), str(cli.ledger), str(cli.policy), str(checkpoints), str(runs), thread, json.dumps(resume)],
        capture_output=True, text=True, cwd=cli.directory, timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def ran(runs) -> list[str]:
    return runs.read_text().splitlines() if runs.exists() else []


def test_a_held_call_interrupts_and_resumes_once_in_another_process(a, cli, tmp_path):
    checkpoints, runs = tmp_path / "checkpoints.sqlite", tmp_path / "runs.txt"
    app = build(a, str(checkpoints), str(runs))
    config = {"configurable": {"thread_id": "t-approve"}}

    paused = answer(app.invoke({"messages": [HumanMessage("printer jam")]}, config))
    [request] = paused["interrupts"]
    assert request["kind"] == "attest.approval"
    assert request["id"] == request["id"].strip() != ""
    assert request["token"].startswith("atr_")
    assert request["tool"] == "create_ticket"
    assert "create_ticket" in request["summary"] and "create" in request["summary"]
    assert "inbox" in request
    assert ran(runs) == [], "a held call does not run"
    [waiting] = json.loads(cli.run("pending", "--json").stdout)
    assert waiting["id"] == request["id"]

    # Resumed before anyone decided: paused again on the same request, nothing new asked.
    again = answer(app.invoke(Command(resume=request), config))
    assert [r["id"] for r in again["interrupts"]] == [request["id"]]
    assert ran(runs) == []
    assert len(json.loads(cli.run("pending", "--json").stdout)) == 1

    cli.approve(request["id"])
    done = resume_elsewhere(cli, checkpoints, runs, "t-approve", request)
    assert done["interrupts"] == []
    assert "T-1" in done["last"] and done["last"].startswith("done:")
    assert ran(runs) == ["printer jam"], "the approved call ran exactly once"

    rows = cli.outcomes()
    assert [(r["decision"], r["execution"]["status"]) for r in rows] == [("ask", "pending"), ("ask", "ok")]
    assert rows[-1]["confirm"]["approver"] == "ann@acme.com"
    cli.verify()


def test_a_rejected_call_resumes_as_an_error_the_model_reads(a, cli, tmp_path):
    checkpoints, runs = tmp_path / "checkpoints.sqlite", tmp_path / "runs.txt"
    app = build(a, str(checkpoints), str(runs))
    config = {"configurable": {"thread_id": "t-reject"}}

    [request] = answer(app.invoke({"messages": [HumanMessage("new laptop")]}, config))["interrupts"]
    added = json.loads(cli.run("approvers", "add", "raj@acme.com", "--json").stdout)
    cli.run("confirm", request["id"], "reject", env={"ATTEST_APPROVER_TOKEN": added["token"]})

    done = answer(app.invoke(Command(resume=request), config))
    assert done["interrupts"] == []
    assert "rejected by raj@acme.com" in done["last"]
    assert ran(runs) == []
    last = cli.outcomes()[-1]
    assert (last["execution"]["status"], last["confirm"]["approver"]) == ("not_run", "raj@acme.com")


def test_outside_a_graph_a_held_call_answers_with_the_reason(a):
    # No graph, no interrupt: the tool message says why, as before.
    import attest.langchain
    from langchain_core.tools import tool

    @tool
    def create_ticket(title: str) -> dict:
        """Open a support ticket."""
        raise AssertionError("must not run")

    [wrapped] = attest.langchain.wrap_tools([create_ticket], a)
    assert "Not run yet" in wrapped.invoke({"title": "x"})
