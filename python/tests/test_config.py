"""`attest.Attest()` reads the configuration as the binary does: `.attest/config.yaml` by
default, `$ATTEST_CONFIG`, or `config=`; keyword arguments beat the environment, which
beats the file; a bad file raises `attest.ConfigError` with the binary's message."""

from __future__ import annotations

import os
import subprocess

import pytest

import attest
from conftest import attest_binary


def binary(directory, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The `attest` binary in `directory` with a scrubbed environment (no --ledger: the
    configuration file decides, as it does for Python)."""
    return subprocess.run(
        [attest_binary(), *args], cwd=directory, capture_output=True, text=True, timeout=120,
        env={"PATH": os.environ.get("PATH", ""), **(env or {})},
    )


def exported(directory, *args: str) -> list[dict]:
    import json

    out = binary(directory, *args, "export")
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


@pytest.fixture
def project(tmp_path, monkeypatch):
    for name in ("ATTEST_CONFIG", "ATTEST_LEDGER", "ATTEST_POLICY", "ATTEST_AGENT", "ATTEST_TENANT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".attest").mkdir()
    (tmp_path / ".attest" / "config.yaml").write_text(
        "ledger: audit.sqlite\nagent: claims-bot\npolicy: policy.yaml\n"
    )
    (tmp_path / ".attest" / "policy.yaml").write_text(
        "version: 1\npolicies:\n  - name: no-reads\n    match: {verb: read}\n    decision: refuse\n    reason: not from the file\n"
    )
    return tmp_path


def test_the_configuration_file_is_read_by_default(project):
    a = attest.Attest()

    @a.tool(system="notes", verb="read")
    def get_note(note_id: str) -> dict:
        raise AssertionError("the file's policy refuses reads")

    with pytest.raises(attest.Refused, match="not from the file"):
        get_note("n1")
    assert (project / ".attest" / "audit.sqlite").exists(), "the file's ledger, beside the file"
    [row] = exported(project)
    assert (row["agent"], row["decision"]) == ("claims-bot", "refuse")


def test_keyword_arguments_beat_the_environment_which_beats_the_file(project, monkeypatch):
    attest.Attest().record("deploy", {"service": "web"}, system="k8s", verb="update")
    monkeypatch.setenv("ATTEST_AGENT", "env-bot")
    attest.Attest().record("deploy", {"service": "web"}, system="k8s", verb="update")
    attest.Attest(agent="kw-bot").record("deploy", {"service": "web"}, system="k8s", verb="update")
    assert [r["agent"] for r in exported(project)] == ["claims-bot", "env-bot", "kw-bot"]


def test_config_names_another_file_and_a_tenant_gets_its_own_chain(project):
    other = project / "elsewhere.yaml"
    other.write_text("ledger: other.sqlite\nagent: other-bot\n")
    attest.Attest(config=other).record("x", {}, system="crm", verb="update")
    assert (project / "other.sqlite").exists()

    attest.Attest(tenant="acme").record("x", {}, system="crm", verb="update")
    attest.Attest().record("x", {}, system="crm", verb="update")
    [tenant_row] = exported(project, "--tenant", "acme")
    assert (tenant_row["seq"], tenant_row["agent"]) == (1, "claims-bot")
    [default_row] = exported(project)
    assert default_row["seq"] == 1


@pytest.mark.parametrize(
    "text, where",
    [
        ("ledger: audit.sqlite\nledgr: typo.sqlite\n", "config.yaml:2:1: unknown field `ledgr`"),
        ("recipes: 3\n", "config.yaml:1:"),
        ("durability: sometimes\n", "durability"),
    ],
    ids=["unknown key", "wrong type", "bad value"],
)
def test_a_bad_file_raises_config_error_with_the_binarys_message(project, text, where):
    (project / ".attest" / "config.yaml").write_text(text)
    with pytest.raises(attest.ConfigError) as raised:
        attest.Attest()
    message = str(raised.value)
    assert where in message, message
    assert isinstance(raised.value, attest.AttestError)
    out = binary(project, "pending")
    assert out.returncode != 0
    assert message in out.stderr, f"python: {message}\nbinary: {out.stderr}"


def test_a_named_file_that_is_missing_is_an_error_not_a_fallback(project):
    with pytest.raises(attest.ConfigError, match="missing.yaml"):
        attest.Attest(config=project / "missing.yaml")
