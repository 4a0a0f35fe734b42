"""Approve, then run the program again: each run is a new Python process. The first is
held; after `attest confirm ID approve` the next run makes the same call and it runs,
once, under that approval (no new request); the run after that asks anew."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

PROGRAM = """\
import json, sys
import attest

ledger, policy, log = sys.argv[1:4]
a = attest.Attest(ledger=ledger, policy=policy, agent="py-agent", durability="normal")

@a.tool(system="notes", verb="create")
def create_note(title: str) -> dict:
    with open(log, "a") as f:
        f.write(title + "\\n")
    return {"id": "n1"}

try:
    with a.run("fixed-run-1"):
        create_note("plan")
    print(json.dumps({"ran": True}))
except attest.Held as held:
    print(json.dumps({"held": held.request_id, "link": a.inbox_link(held.request_id)}))
"""


def run_program(tmp_path: pathlib.Path, ledger: pathlib.Path, policy: pathlib.Path) -> dict:
    """One run of the program, in a process of its own; what it printed."""
    script = tmp_path / "agent.py"
    script.write_text(PROGRAM)
    out = subprocess.run(
        [sys.executable, str(script), str(ledger), str(policy), str(tmp_path / "tool.log")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def tool_runs(tmp_path: pathlib.Path) -> int:
    log = tmp_path / "tool.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_an_approved_call_runs_once_when_the_program_runs_again(tmp_path, ledger_file, policy_file, cli):
    first = run_program(tmp_path, ledger_file, policy_file)
    request = first["held"]
    # The link a person opens is the request's own page in the inbox.
    assert first["link"] == f"http://127.0.0.1:8321/requests/{request}"
    # Run again before anyone decided: held under the same request, none filed anew.
    assert run_program(tmp_path, ledger_file, policy_file) == first
    assert tool_runs(tmp_path) == 0

    cli.approve(request)
    assert run_program(tmp_path, ledger_file, policy_file) == {"ran": True}
    assert tool_runs(tmp_path) == 1
    outcome = cli.outcomes()[-1]
    assert outcome["execution"]["status"] == "ok"
    assert outcome["confirm"]["approver"] == "ann@acme.com"

    # Used once: the next run asks again, under a new request, and does not run.
    third = run_program(tmp_path, ledger_file, policy_file)
    assert "held" in third and third["held"] != request
    assert tool_runs(tmp_path) == 1
    pending = json.loads(cli.run("pending", "--json").stdout)
    assert [p["id"] for p in pending] == [third["held"]]
