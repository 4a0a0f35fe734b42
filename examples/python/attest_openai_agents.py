"""OpenAI Agents SDK: function_tools wrapped by Attest, run by the SDK's Runner with its
ScriptedModel (no API key, no network). The read runs; the e-mail, which Attest asks a
person about, pauses the run as an SDK interruption (`attest.openai_agents.answer` answers
it from the approval store once someone decided, and `Runner.run(agent, state)` goes on).

    pip install ./python openai-agents && python examples/python/attest_openai_agents.py
"""

import asyncio
import os
import pathlib
import tempfile

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.testing.model import ScriptedModel, assistant_message, function_call

import attest
import attest.openai_agents

set_tracing_disabled(True)
ledger = os.environ.get("ATTEST_LEDGER") or str(pathlib.Path(tempfile.mkdtemp()) / "ledger.sqlite")
a = attest.Attest(ledger=ledger, agent="openai-agent")


@function_tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: shipped"


@function_tool
def send_email(to: str, body: str) -> str:
    """Send an email."""
    return "sent"


model = ScriptedModel([
    [function_call("lookup_order", {"order_id": "42"}, call_id="c1"),
     function_call("send_email", {"to": "x@example.com", "body": "hi"}, call_id="c2")],
    [assistant_message("done")],
])
agent = Agent(name="ops", model=model, tools=attest.openai_agents.wrap_tools([lookup_order, send_email], a))
result = asyncio.run(Runner.run(agent, "check order 42 and tell the customer"))
for item in result.new_items:
    if item.type == "tool_call_output_item":
        print(f"{item.raw_item['call_id']}: {item.output}")
for item in result.interruptions:
    held = attest.openai_agents.answer(result.to_state(), a)
    print(f"{item.raw_item.call_id}: paused for approval ({len(held)} waiting) | ledger:", ledger)
