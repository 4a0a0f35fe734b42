"""An OpenAI Agents SDK app for the pause-and-resume tests: governed function tools, the
SDK's own ScriptedModel (no model calls, no network, tracing off). As a script,
``python agents_app.py LEDGER POLICY RUNS STATE_FILE`` loads a paused run's state,
answers its interruptions from Attest's approval store and runs it on, printing JSON."""

from __future__ import annotations

import asyncio
import json
import sys

from agents import Agent, RunState, Runner, function_tool, set_tracing_disabled
from agents.testing.model import ScriptedModel, assistant_message

import attest
import attest.openai_agents

set_tracing_disabled(True)


def agent(a: attest.Attest, model: ScriptedModel, runs: str) -> Agent:
    @function_tool
    def create_invoice(customer: str, amount: int) -> str:
        """Create an invoice."""
        with open(runs, "a", encoding="utf-8") as done:  # what ran, across processes
            done.write(f"{customer}:{amount}\n")
        return json.dumps({"id": "in_1", "customer": customer})

    @function_tool
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        return f"order {order_id}: shipped"

    return Agent(
        name="ops",
        instructions="help",
        model=model,
        tools=attest.openai_agents.wrap_tools([create_invoice, lookup_order], a),
    )


def tool_outputs(model: ScriptedModel) -> list[str]:
    """What the model was given as tool outputs in its last call."""
    return [
        str(item["output"])
        for item in model.last_call.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


async def resume(ledger: str, policy: str, runs: str, state_file: str) -> dict:
    a = attest.Attest(ledger=ledger, policy=policy, agent="py-agent")
    model = ScriptedModel([[assistant_message("done")]])
    app = agent(a, model, runs)
    with open(state_file, encoding="utf-8") as saved:
        state = await RunState.from_json(app, json.load(saved))
    waiting = attest.openai_agents.answer(state, a)
    result = await Runner.run(app, state)
    return {"waiting": len(waiting), "final": result.final_output, "outputs": tool_outputs(model)}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(resume(*sys.argv[1:]))))
