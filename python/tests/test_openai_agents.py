"""OpenAI Agents SDK: wrapped function_tools run by the SDK's Runner with its own
ScriptedModel (no model calls, no network, tracing off)."""

from __future__ import annotations

import asyncio
import json

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing.model import ScriptedModel, assistant_message, function_call

import attest
import attest.openai_agents

set_tracing_disabled(True)

RAN: list[str] = []


@function_tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    RAN.append("lookup_order")
    return f"order {order_id}: shipped"


@function_tool
def create_invoice(customer: str, amount: int) -> str:
    """Create an invoice."""
    RAN.append("create_invoice")
    return json.dumps({"id": "in_1", "customer": customer})


@function_tool
def refund_payment(charge: str, amount: int) -> str:
    """Refund a charge."""
    RAN.append("refund_payment")
    return "refunded"


def run_agent(a: attest.Attest, name: str, arguments: dict) -> str:
    """One agent turn: the scripted model calls `name`, then answers; returns what the
    model was given as the tool's output."""
    model = ScriptedModel([
        [function_call(name, arguments, call_id="call_1")],
        [assistant_message("done")],
    ])
    agent = Agent(
        name="ops",
        instructions="help",
        model=model,
        tools=attest.openai_agents.wrap_tools([lookup_order, create_invoice, refund_payment], a),
    )
    result = asyncio.run(Runner.run(agent, "go"))
    assert result.final_output == "done"
    outputs = [
        item for item in model.last_call.input if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    return str(outputs[-1]["output"])


def test_wrapped_tools_keep_their_schema(a):
    [wrapped] = attest.openai_agents.wrap_tools([lookup_order], a)
    assert wrapped.name == "lookup_order"
    assert wrapped.params_json_schema == lookup_order.params_json_schema
    assert wrapped.on_invoke_tool is not lookup_order.on_invoke_tool


def test_read_acts_and_a_refusal_is_read_by_the_model(a, cli):
    # (A call Attest asks about pauses the run: test_openai_agents_pause.py.)
    RAN.clear()
    assert run_agent(a, "lookup_order", {"order_id": "42"}) == "order 42: shipped"
    assert RAN == ["lookup_order"]

    output = run_agent(a, "refund_payment", {"charge": "ch_1", "amount": 500})
    assert "agents do not move money" in output
    assert RAN == ["lookup_order"]

    rows = cli.outcomes()
    assert [r["decision"] for r in rows] == ["act", "refuse"]
    assert {r.get("agent") for r in rows} == {"py-agent"}
    cli.verify()
