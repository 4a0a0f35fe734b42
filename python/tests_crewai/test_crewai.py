"""CrewAI: ``attest.crewai.wrap_tools`` over ``BaseTool``s, run by a real Crew whose LLM
is scripted (a ``BaseLLM`` answering in CrewAI's ReAct text: no model, no network).

CrewAI pins other versions of openai and mcp than the other frameworks, so it runs in a
virtualenv of its own (`.ci/crewvenv`, see `.ci/run`), outside `python/tests`."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any

import pytest

# CrewAI's telemetry stays off: the tests reach nothing but 127.0.0.1.
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

from crewai import Agent, Crew, Task  # noqa: E402 - after the telemetry switches
from crewai.llms.base_llm import BaseLLM  # noqa: E402
from crewai.tools import BaseTool  # noqa: E402

import attest  # noqa: E402
import attest.crewai  # noqa: E402

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

RAN: list[str] = []


class LookupOrder(BaseTool):
    name: str = "lookup_order"
    description: str = "Look an order up."

    def _run(self, order_id: str) -> str:
        RAN.append(f"lookup_order:{order_id}")
        return f"order {order_id}: shipped"


class CreateInvoice(BaseTool):
    name: str = "create_invoice"
    description: str = "Create an invoice."

    def _run(self, customer: str, amount: int) -> str:
        RAN.append(f"create_invoice:{customer}")
        return json.dumps({"id": "in_1", "customer": customer})


class RefundPayment(BaseTool):
    name: str = "refund_payment"
    description: str = "Refund a charge."

    def _run(self, charge: str, amount: int) -> str:
        RAN.append(f"refund_payment:{charge}")
        return "refunded"


class ScriptedLLM(BaseLLM):
    """Answers each call with the next line of its script; keeps what it was shown."""

    script: list[str]
    shown: list[Any] = []

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None) -> str:
        self.shown.append(messages)
        return self.script.pop(0)

    def supports_function_calling(self) -> bool:
        return False


def react(tool: str, arguments: dict) -> list[str]:
    return [
        f"Thought: I use {tool}\nAction: {tool}\nAction Input: {json.dumps(arguments)}",
        "Thought: I now know the final answer\nFinal Answer: done",
    ]


def attest_binary() -> str:
    path = os.environ.get("ATTEST_BIN") or str(REPO / "target" / "debug" / "attest")
    assert os.path.exists(path), f"no attest binary at {path}"
    return path


@pytest.fixture
def world(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    ledger = tmp_path / ".attest" / "ledger.sqlite"
    a = attest.Attest(ledger=ledger, policy=policy, agent="crew-agent", durability="normal")

    def cli(*args: str, env: dict | None = None) -> str:
        out = subprocess.run(
            [attest_binary(), "--ledger", str(ledger), "--policy", str(policy), *args],
            capture_output=True, text=True, cwd=tmp_path, timeout=120,
            env={"PATH": os.environ.get("PATH", ""), **(env or {})},
        )
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    return a, cli


def run_crew(a: attest.Attest, tool: str, arguments: dict) -> str:
    """One task: the scripted LLM uses `tool`, then answers; returns the observation the
    LLM was shown after the tool."""
    llm = ScriptedLLM(model="scripted", script=react(tool, arguments), shown=[])
    tools = attest.crewai.wrap_tools([LookupOrder(), CreateInvoice(), RefundPayment()], a)
    agent = Agent(role="ops", goal="help", backstory="ops", llm=llm, tools=tools, max_iter=3, verbose=False)
    task = Task(description="do it", expected_output="done", agent=agent)
    result = Crew(agents=[agent], tasks=[task], verbose=False).kickoff()
    assert str(result) == "done"
    return json.dumps(llm.shown[-1], default=str)


def test_wrapped_tools_keep_their_names_and_schemas(world):
    a, _ = world
    original = CreateInvoice()
    [wrapped] = attest.crewai.wrap_tools([original], a)
    assert isinstance(wrapped, BaseTool)
    assert (wrapped.name, wrapped.description) == (original.name, original.description)
    assert wrapped.args_schema.model_json_schema() == original.args_schema.model_json_schema()


def test_a_crew_reads_acts_refusals_are_observed_and_a_write_waits_for_approval(world):
    a, cli = world
    RAN.clear()
    assert "order 42: shipped" in run_crew(a, "lookup_order", {"order_id": "42"})
    assert RAN == ["lookup_order:42"]

    assert "agents do not move money" in run_crew(a, "refund_payment", {"charge": "ch_1", "amount": 5})
    assert RAN == ["lookup_order:42"]

    assert "Not run yet" in run_crew(a, "create_invoice", {"customer": "acme", "amount": 10})
    assert RAN == ["lookup_order:42"]
    [waiting] = json.loads(cli("pending", "--json"))
    added = json.loads(cli("approvers", "add", "ann@acme.com", "--json"))
    cli("confirm", waiting["id"], "approve", env={"ATTEST_APPROVER_TOKEN": added["token"]})
    assert "in_1" in run_crew(a, "create_invoice", {"customer": "acme", "amount": 10})
    assert RAN == ["lookup_order:42", "create_invoice:acme"], "the approved call ran once"

    rows = [json.loads(line) for line in cli("export").splitlines() if line.strip()]
    outcomes = [r for r in rows if r["execution"]["status"] != "intent"]
    assert [(r["decision"], r["execution"]["status"]) for r in outcomes] == [
        ("act", "ok"), ("refuse", outcomes[1]["execution"]["status"]), ("ask", "pending"), ("ask", "ok"),
    ]
    assert {r["extra"]["framework"] for r in outcomes if r.get("extra")} <= {"crewai"}
    cli("verify")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


# --- the doors scenario's CrewAI row (python/tests/test_doors.py holds the others) ---

sys.path.insert(0, str(REPO / "python" / "tests"))
from test_doors import CALLS, Crm, check, functions, write_configuration  # noqa: E402


@pytest.fixture(params=[False, True], ids=["honest", "lying"])
def scenario(request, tmp_path, monkeypatch):
    crm = Crm(lying=request.param)
    write_configuration(tmp_path, crm)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ACME_TOKEN", "acme-test-token")
    monkeypatch.setenv("HOOK_SECRET", "whsec-doors")
    for name in ("ATTEST_LEDGER", "ATTEST_POLICY", "ATTEST_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    yield crm
    crm.close()


def test_the_doors_scenario_through_a_crewai_tool(scenario, tmp_path):
    from crewai.tools import tool as crew_tool

    a = attest.Attest()
    tools = {name: attest.crewai.wrap_tool(crew_tool(name)(fn), a, system="acmecrm") for name, fn in functions(scenario).items()}
    for name, arguments in CALLS:
        llm = ScriptedLLM(model="scripted", script=react(name, arguments), shown=[])
        agent = Agent(role="sales", goal="deals", backstory="sales", llm=llm, tools=list(tools.values()), max_iter=3)
        Crew(agents=[agent], tasks=[Task(description="do it", expected_output="done", agent=agent)]).kickoff()
    check(scenario, "CrewAI tool", tmp_path)
