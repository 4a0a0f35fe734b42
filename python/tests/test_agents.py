"""Authenticated agents (issue 34): with `agents:` configured, an `Attest` names its calls
by the agent its credential proves (`agent_token=`, else `$ATTEST_AGENT_TOKEN`): an
`attest agents add` token, or a JWT from the identity provider (the CLI tests' local
OpenID Connect provider, on 127.0.0.1). A credential that proves nobody, or another agent
than `agent=`, raises `Refused` and the tool does not run; revoking a token stops the
next call of a running process."""

from __future__ import annotations

import json
import pathlib
import socket
import subprocess
import sys
import urllib.request

import pytest

import attest

from conftest import REPO

ISSUER = REPO / "crates" / "attest-cli" / "tests" / "it" / "py" / "oauth_issuer.py"
PARAMS = {"note_id": "n1", "title": "plan"}
NOTE = {"system": "notes", "verb": "update"}


def configured(tmp_path: pathlib.Path, yaml: str) -> pathlib.Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml)
    return path


def add_agent(cli, name: str) -> str:
    token = json.loads(cli.run("agents", "add", name, "--json").stdout)["token"]
    assert token.startswith("atg_")
    return token


class Notes:
    """A tool that counts its runs."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def update_note(self, note_id: str, title: str) -> dict:
        self.ran.append(title)
        return {"id": note_id}


def open_attest(config, ledger_file, policy_file, **kw) -> attest.Attest:
    return attest.Attest(config=config, ledger=ledger_file, policy=policy_file, durability="normal", **kw)


def who(cli) -> list[tuple]:
    return [(row["agent"], row.get("agent_auth"), row["verb"]) for row in cli.outcomes()]


@pytest.fixture(autouse=True)
def no_ambient_token(monkeypatch):
    monkeypatch.delenv("ATTEST_AGENT_TOKEN", raising=False)


def test_a_token_names_the_agent_and_a_revoked_or_unknown_token_never_runs_the_tool(
    tmp_path, cli, ledger_file, policy_file
):
    config = configured(tmp_path, "agents: {}\n")
    token = add_agent(cli, "notes-bot")
    notes = Notes()
    a = open_attest(config, ledger_file, policy_file, agent_token=token)
    assert a.call(notes.update_note, PARAMS, **NOTE) == {"id": "n1"}
    a.record("send_email", {"to": "x@example.com"}, system="email", verb="send")
    assert who(cli) == [("notes-bot", "token", "update"), ("notes-bot", "token", "send")]

    stranger = open_attest(config, ledger_file, policy_file, agent_token="atg_" + "0" * 64)
    with pytest.raises(attest.Refused) as unknown:
        stranger.call(notes.update_note, PARAMS, **NOTE)
    assert "unknown or revoked" in str(unknown.value)
    assert unknown.value.receipt is None, "an unproven caller writes no row"

    # Revoked while this process runs: its next call (and record) is refused.
    cli.run("agents", "revoke", "notes-bot")
    with pytest.raises(attest.Refused):
        a.call(notes.update_note, PARAMS, **NOTE)
    with pytest.raises(attest.Refused):
        a.record("send_email", {"to": "x@example.com"}, system="email", verb="send")
    assert notes.ran == ["plan"], "the tool ran only for the valid token"
    assert len(cli.outcomes()) == 2
    assert token not in json.dumps(cli.entries())


def test_the_token_comes_from_the_environment_and_a_label_that_disagrees_is_refused(
    tmp_path, cli, ledger_file, policy_file, monkeypatch
):
    config = configured(tmp_path, "agents: {}\n")
    token = add_agent(cli, "notes-bot")
    monkeypatch.setenv("ATTEST_AGENT_TOKEN", token)
    notes = Notes()
    same = open_attest(config, ledger_file, policy_file, agent="Notes-Bot")
    same.call(notes.update_note, PARAMS, **NOTE)
    posing = open_attest(config, ledger_file, policy_file, agent="ops-bot")
    with pytest.raises(attest.Refused) as mismatch:
        posing.call(notes.update_note, PARAMS, **NOTE)
    assert "ops-bot" in str(mismatch.value) and "notes-bot" in str(mismatch.value)
    assert notes.ran == ["plan"]
    assert who(cli) == [("notes-bot", "token", "update")]


def test_without_a_credential_a_call_is_refused_or_recorded_as_unauthenticated(
    tmp_path, cli, ledger_file, policy_file
):
    notes = Notes()
    refuse = open_attest(configured(tmp_path, "agents: {unauthenticated: refuse}\n"), ledger_file, policy_file)
    with pytest.raises(attest.Refused) as refused:
        refuse.call(notes.update_note, PARAMS, **NOTE)
    assert "token or JWT" in str(refused.value)
    assert notes.ran == [] and cli.outcomes() == []

    record = open_attest(configured(tmp_path, "agents: {unauthenticated: record}\n"), ledger_file, policy_file)
    record.call(notes.update_note, PARAMS, **NOTE)
    assert notes.ran == ["plan"]
    assert who(cli) == [("unauthenticated", "unauthenticated", "update")]


def test_without_agents_configured_the_label_names_the_call_as_before(cli, ledger_file, policy_file):
    notes = Notes()
    a = attest.Attest(ledger=ledger_file, policy=policy_file, agent="py-agent", agent_token="atg_ignored")
    a.call(notes.update_note, PARAMS, **NOTE)
    assert who(cli) == [("py-agent", None, "update")]


@pytest.fixture
def issuer(tmp_path):
    """The local OpenID Connect provider the CLI's tests use (discovery, JWKS, `/mint`)."""
    process = subprocess.Popen(
        [sys.executable, str(ISSUER), str(free_port())], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = process.stdout.readline().strip()
        assert line.startswith("http://127.0.0.1:"), process.stderr.read()
        yield line
    finally:
        process.kill()
        process.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mint(issuer: str, query: str) -> str:
    with urllib.request.urlopen(f"{issuer}/mint?{query}") as answer:
        return answer.read().decode()


def test_a_jwt_from_the_provider_names_the_agent_and_a_spoiled_one_never_runs_the_tool(
    tmp_path, cli, ledger_file, policy_file, issuer
):
    config = configured(tmp_path, f"agents:\n  jwt:\n    issuer: {issuer}\n    audience: attest-py\n")
    notes = Notes()
    good = mint(issuer, "sub=claims-bot&aud=attest-py")
    a = open_attest(config, ledger_file, policy_file, agent_token=good, agent="claims-bot")
    a.call(notes.update_note, PARAMS, **NOTE)
    assert who(cli) == [("claims-bot", "jwt", "update")]
    spoiled = {
        "expired": mint(issuer, "sub=claims-bot&aud=attest-py&exp_in=-300"),
        "another audience": mint(issuer, "sub=claims-bot&aud=someone-else"),
        "forged": mint(issuer, "sub=claims-bot&aud=attest-py&key=other"),
        "another issuer": mint(issuer, "sub=claims-bot&aud=attest-py&iss=http://127.0.0.1:9"),
    }
    for why, token in spoiled.items():
        b = open_attest(config, ledger_file, policy_file, agent_token=token)
        with pytest.raises(attest.Refused) as refused:
            b.call(notes.update_note, {"note_id": "n2", "title": why}, **NOTE)
        assert "agent JWT refused" in str(refused.value), why
    posing = open_attest(config, ledger_file, policy_file, agent_token=good, agent="ops-bot")
    with pytest.raises(attest.Refused):
        posing.call(notes.update_note, PARAMS, **NOTE)
    assert notes.ran == ["plan"], "no spoiled JWT ran the tool"
    assert len(cli.outcomes()) == 1
    assert good not in json.dumps(cli.entries())


def test_an_identity_provider_that_cannot_be_reached_is_a_config_error(tmp_path, ledger_file, policy_file):
    config = configured(
        tmp_path,
        f"agents:\n  jwt:\n    issuer: http://127.0.0.1:{free_port()}\n    audience: attest-py\n",
    )
    with pytest.raises(attest.ConfigError) as failed:
        open_attest(config, ledger_file, policy_file)
    assert "agents.jwt" in str(failed.value)
