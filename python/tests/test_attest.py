"""The package itself: decorated sync and async tools, typed outcomes, receipts, the run
context, `record`, and one ledger shared with the `attest` binary."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

import attest


def test_a_read_acts_and_returns_the_functions_own_result(a, cli):
    @a.tool(system="notes", verb="read")
    def get_note(note_id: str) -> dict:
        return {"id": note_id, "title": "groceries"}

    result = get_note("n1")
    assert result == {"id": "n1", "title": "groceries"}
    receipt = attest.last_receipt()
    assert isinstance(receipt, attest.Receipt)
    assert (receipt.decision, receipt.level, receipt.seq) == ("act", "acknowledged", 1)
    assert len(receipt.entry_hash) == 64
    [row] = cli.entries()
    assert (row["system"], row["verb"], row["agent"], row["decision"]) == ("notes", "read", "py-agent", "act")
    assert "groceries" not in json.dumps(row), "results never enter the ledger"


def test_system_and_verb_are_detected_from_the_name(a, cli):
    @a.tool
    def list_issues(repo: str) -> list:
        return []

    list_issues(repo="acme/web")
    [row] = cli.entries()
    assert row["verb"] == "list"
    assert row["decision"] == "act"


def test_a_write_asks_and_runs_once_a_person_approves(a, cli):
    calls = []

    @a.tool(system="notes", verb="create")
    def create_note(title: str) -> dict:
        calls.append(title)
        return {"id": "n2", "ok": True}

    with pytest.raises(attest.Held) as held:
        create_note("plan")
    assert calls == [], "a held call does not run"
    assert held.value.token.startswith("atr_")
    assert held.value.receipt.decision == "ask"

    # Still waiting: the same call again is held again and still does not run.
    with pytest.raises(attest.Held):
        create_note("plan")
    assert calls == []

    cli.approve(held.value.request_id)
    # The agent makes the same call again: now it runs, once.
    assert create_note("plan") == {"id": "n2", "ok": True}
    assert calls == ["plan"]
    receipt = attest.last_receipt()
    assert (receipt.decision, receipt.approver) == ("ask", "ann@acme.com")
    outcomes = cli.outcomes()
    assert [o["execution"]["status"] for o in outcomes][-1] == "ok"
    assert "Verified" not in cli.verify()


def test_a_held_call_resumes_by_token(a, cli):
    @a.tool(system="notes", verb="create")
    def create_note(title: str) -> dict:
        return {"id": "n3", "title": title}

    with pytest.raises(attest.Held) as held:
        create_note(title="draft")
    cli.approve(held.value.request_id)
    assert create_note.resume(held.value.token) == {"id": "n3", "title": "draft"}


def test_a_refused_tool_never_runs(a, cli):
    ran = []

    @a.tool(system="stripe", verb="pay")
    def refund(charge: str, amount: int) -> dict:
        ran.append(charge)
        return {"id": "re_1"}

    with pytest.raises(attest.Refused) as refused:
        refund("ch_1", 5000)
    assert ran == []
    assert "agents do not move money" in str(refused.value)
    assert refused.value.receipt.decision == "refuse"
    assert isinstance(refused.value, attest.AttestError)
    [row] = cli.entries()
    assert row["decision"] == "refuse"


def test_in_shadow_mode_a_refused_tool_runs_and_its_row_says_what_policy_decided(policy_file, ledger_file, cli):
    shadowed = attest.Attest(ledger=ledger_file, policy=policy_file, agent="py-agent", shadow=True)
    ran = []

    @shadowed.tool(system="stripe", verb="pay")
    def refund(charge: str, amount: int) -> dict:
        ran.append(charge)
        return {"id": "re_1"}

    assert refund("ch_1", 5000) == {"id": "re_1"}
    assert ran == ["ch_1"]
    intent, outcome = cli.entries()
    for row in (intent, outcome):
        assert row["decision"] == "act"
        assert row["shadow"]["decision"] == "refuse"
        assert row["shadow"]["rules_fired"] == ["no-payments"]
        assert row["shadow"]["reasons"] == ["agents do not move money"]
    assert outcome["execution"]["status"] == "ok"
    assert "confirm" not in outcome
    cli.verify()


def test_a_rejected_call_raises_rejected(a, cli):
    @a.tool(system="notes", verb="delete")
    def delete_note(note_id: str) -> None:
        raise AssertionError("must not run")

    with pytest.raises(attest.Held) as held:
        delete_note("n1")
    added = cli.run("approvers", "add", "raj@acme.com", "--json")
    token = json.loads(added.stdout)["token"]
    cli.run("confirm", held.value.request_id, "reject", env={"ATTEST_APPROVER_TOKEN": token})
    with pytest.raises(attest.Rejected) as rejected:
        delete_note("n1")
    assert rejected.value.approver == "raj@acme.com"


def test_a_failing_tool_raises_its_own_error_and_is_recorded(a, cli):
    @a.tool(system="notes", verb="read")
    def get_note(note_id: str) -> dict:
        raise KeyError(note_id)

    with pytest.raises(KeyError):
        get_note("missing")
    [row] = cli.entries()
    assert row["execution"]["status"] == "failed"


def test_async_tools(a, cli):
    @a.tool(system="notes", verb="read")
    async def get_note(note_id: str) -> dict:
        await asyncio.sleep(0)
        return {"id": note_id}

    assert asyncio.iscoroutinefunction(get_note)

    async def main() -> list:
        return await asyncio.gather(*(get_note(f"n{i}") for i in range(5)))

    assert asyncio.run(main()) == [{"id": f"n{i}"} for i in range(5)]
    assert len(cli.entries()) == 5


def test_the_run_context_sets_the_run_id(a, cli):
    @a.tool(system="notes", verb="read")
    def get_note(note_id: str) -> dict:
        return {"id": note_id}

    with a.run("run-42"):
        get_note("n1")
        a.record("sent_email", {"to": "bob@acme.com"}, system="gmail", verb="send", result={"id": "m1"})
    get_note("n2")
    rows = cli.entries()
    assert [r.get("run_id") for r in rows] == ["run-42", "run-42", None]
    assert rows[1]["decision"] == "recorded"


def test_record_returns_a_receipt(a):
    receipt = a.record("deploy", {"service": "web"}, system="k8s", verb="update")
    assert receipt.decision == "recorded"
    assert receipt.to_dict()["seq"] == receipt.seq == 1


def test_python_and_the_binary_append_to_one_chain(a, cli, tmp_path):
    @a.tool(system="notes", verb="read")
    def get_note(note_id: str) -> dict:
        return {"id": note_id}

    lines = tmp_path / "done.jsonl"
    lines.write_text(json.dumps({"system": "crm", "verb": "update", "agent": "cli-agent", "params": {"id": "1"}}) + "\n")
    get_note("n1")
    cli.run("import", str(lines))
    get_note("n2")
    cli.run("import", str(lines))
    get_note("n3")

    # And at the same time: Python threads and binary processes appending together.
    errors = []

    def python_writer() -> None:
        try:
            for i in range(10):
                get_note(f"t{i}")
        except Exception as error:  # noqa: BLE001
            errors.append(error)

    threads = [threading.Thread(target=python_writer) for _ in range(3)]
    for thread in threads:
        thread.start()
    for _ in range(3):
        cli.run("import", str(lines))
    for thread in threads:
        thread.join()
    assert errors == []

    rows = cli.entries()
    agents = [r.get("agent") for r in rows]
    assert agents[:5] == ["py-agent", "cli-agent", "py-agent", "cli-agent", "py-agent"]
    assert (agents.count("cli-agent"), agents.count("py-agent")) == (5, 33)
    assert [r["seq"] for r in rows] == list(range(1, len(rows) + 1))
    cli.verify()


def test_the_ledger_written_from_python_verifies_and_checkpoints(tmp_path, policy_file, cli):
    vkey = cli.run("keygen").stdout.strip().splitlines()[-1]
    key = cli.ledger.parent / "signing.key"  # where keygen puts it: beside the ledger
    a = attest.Attest(ledger=cli.ledger, policy=policy_file, agent="py-agent", key=key)

    @a.tool(system="notes", verb="update")
    def update_note(note_id: str, title: str) -> dict:
        return {"id": note_id, "ok": True}

    update_note("n1", title="x")
    note = a.checkpoint()
    assert note.startswith("attest-ledger\n2\n") and "\n\u2014 attest-ledger " in note, note
    out = cli.run("verify", "--vkey", vkey)
    assert "intact" in out.stdout.lower(), out.stdout


def test_bad_settings_raise_attest_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\npolicies: [{name: x, decision: sometimes}]\n")
    with pytest.raises(attest.AttestError):
        attest.Attest(ledger=tmp_path / "l.sqlite", policy=bad)
    with pytest.raises(attest.AttestError):
        attest.Attest(ledger=tmp_path / "l.sqlite", policy=tmp_path / "missing.yaml")
    with pytest.raises(ValueError):
        a = attest.Attest(ledger=tmp_path / "l.sqlite")
        a.record("x", {}, system="s", verb="frobnicate")


def test_the_binarys_defaults_apply(tmp_path, monkeypatch, cli):
    # ./attest.yaml is the policy when none is given, and $ATTEST_LEDGER the ledger.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "attest.yaml").write_text(
        "version: 1\npolicies:\n  - name: no-reads\n    match: {verb: read}\n    decision: refuse\n    reason: not today\n"
    )
    monkeypatch.setenv("ATTEST_LEDGER", str(cli.ledger))
    a = attest.Attest()

    @a.tool(system="notes", verb="read")
    def get_note(note_id: str) -> dict:
        raise AssertionError("must not run")

    with pytest.raises(attest.Refused, match="not today"):
        get_note("n1")
    assert [r["decision"] for r in cli.entries()] == ["refuse"]


def test_a_persons_edits_reach_the_function(a, cli):
    seen = []

    @a.tool(system="notes", verb="create")
    def create_note(title: str, body: str = "") -> dict:
        seen.append((title, body))
        return {"id": "n9"}

    with pytest.raises(attest.Held) as held:
        create_note("draft", body="hello [NAME]")
    cli.run("approvers", "add", "ann@acme.com", "--json")
    added = json.loads(cli.run("approvers", "add", "bob@acme.com", "--json").stdout)
    cli.run(
        "confirm", held.value.request_id, "approve", "--edits", '{"body": "hello Ada"}',
        env={"ATTEST_APPROVER_TOKEN": added["token"]},
    )
    assert create_note("draft", body="hello [NAME]") == {"id": "n9"}
    assert seen == [("draft", "hello Ada")]


def test_the_adapters_are_reachable_from_import_attest_and_load_their_framework_on_use(a):
    import subprocess
    import sys

    # A fresh interpreter: `import attest` alone reaches each adapter, importing none of
    # the frameworks until an adapter is used.
    script = (
        "import sys, attest\n"
        "names = ['langchain', 'openai_agents', 'claude_agent_sdk', 'crewai']\n"
        "mods = [getattr(attest, n).__name__ for n in names]\n"
        "loaded = [m for m in ('langchain_core', 'agents', 'claude_agent_sdk', 'crewai') if m in sys.modules]\n"
        "print(mods, loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        "['attest.langchain', 'attest.openai_agents', 'attest.claude_agent_sdk', 'attest.crewai'] []"
    )
    # CrewAI is not installed beside the other frameworks: its adapter fails only when used.
    with pytest.raises(ModuleNotFoundError, match="crewai"):
        attest.crewai.wrap_tool(object(), a)
    with pytest.raises(AttributeError):
        attest.no_such_adapter
