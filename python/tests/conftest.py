"""Shared fixtures: a ledger in a temporary directory, the `attest` binary beside it, and
a policy that refuses payments. Nothing here skips: a missing binary or framework fails."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

import attest

REPO = pathlib.Path(__file__).resolve().parents[2]

POLICY = """\
version: 1
policies:
  - name: no-payments
    match:
      verb: pay
    decision: refuse
    reason: agents do not move money
"""


def attest_binary() -> str:
    """The `attest` binary: $ATTEST_BIN, else the workspace's debug build."""
    path = os.environ.get("ATTEST_BIN") or str(REPO / "target" / "debug" / "attest")
    assert os.path.exists(path), f"no attest binary at {path}: run `cargo build -p attest-cli` (or set ATTEST_BIN)"
    return path


class Cli:
    """Runs the `attest` binary on one ledger, with a scrubbed environment."""

    def __init__(self, directory: pathlib.Path, ledger: pathlib.Path, policy: pathlib.Path) -> None:
        self.directory = directory
        self.ledger = ledger
        self.policy = policy
        self.binary = attest_binary()

    def run(self, *args: str, input: str | None = None, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
        environment = {"PATH": os.environ.get("PATH", "")}
        environment.update(env or {})
        out = subprocess.run(
            [self.binary, "--ledger", str(self.ledger), "--policy", str(self.policy), *args],
            cwd=self.directory,
            input=input,
            capture_output=True,
            text=True,
            env=environment,
            timeout=120,
        )
        if check:
            assert out.returncode == 0, f"attest {' '.join(args)}: {out.returncode}\n{out.stdout}\n{out.stderr}"
        return out

    def entries(self) -> list[dict]:
        """Every ledger entry, in order (`attest export`)."""
        return [json.loads(line) for line in self.run("export").stdout.splitlines() if line.strip()]

    def outcomes(self) -> list[dict]:
        """The entries that say how an action ended (not the intents before writes)."""
        return [e for e in self.entries() if e["execution"]["status"] != "intent"]

    def approve(self, request_id: str, approver: str = "ann@acme.com") -> None:
        """Registers `approver` (once) and approves `request_id` as them, as a person would."""
        added = self.run("approvers", "add", approver, "--json", check=False)
        if added.returncode == 0:
            self.token = json.loads(added.stdout)["token"]
        self.run("confirm", request_id, "approve", env={"ATTEST_APPROVER_TOKEN": self.token})

    def verify(self) -> str:
        return self.run("verify").stdout


@pytest.fixture
def policy_file(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


@pytest.fixture
def ledger_file(tmp_path: pathlib.Path) -> pathlib.Path:
    return tmp_path / ".attest" / "ledger.sqlite"


@pytest.fixture
def a(ledger_file: pathlib.Path, policy_file: pathlib.Path) -> attest.Attest:
    return attest.Attest(ledger=ledger_file, policy=policy_file, agent="py-agent", durability="normal")


@pytest.fixture
def cli(tmp_path: pathlib.Path, ledger_file: pathlib.Path, policy_file: pathlib.Path) -> Cli:
    return Cli(tmp_path, ledger_file, policy_file)


# Contacts are written without asking, so a test of them is about verification and
# recording alone (each write still leaves an intent row, then its outcome).
CRM_POLICY = """\
version: 1
policies:
  - name: crm-writes-run
    match: {system: crm}
    decision: act
"""


@pytest.fixture
def acting(tmp_path: pathlib.Path, ledger_file: pathlib.Path) -> attest.Attest:
    """An engine whose policy lets every `crm` call act."""
    policy = tmp_path / "crm.yaml"
    policy.write_text(CRM_POLICY)
    return attest.Attest(ledger=ledger_file, policy=policy, agent="py-agent", durability="normal")
