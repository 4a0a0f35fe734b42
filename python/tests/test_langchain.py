"""LangChain tools and a LangGraph ToolNode, driven with the model's tool-call messages
(no model, no network)."""

from __future__ import annotations

import asyncio
import json

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

import attest
import attest.langchain

RAN: list[str] = []


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    RAN.append("get_weather")
    return f"sunny in {city}"


@tool
def create_ticket(title: str) -> dict:
    """Open a support ticket."""
    RAN.append("create_ticket")
    return {"id": "T-1", "title": title}


@tool
def refund_payment(charge: str, amount: int) -> str:
    """Refund a charge."""
    RAN.append("refund_payment")
    return "refunded"


def call(name: str, args: dict, call_id: str) -> dict:
    return {"messages": [AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])]}


class Graph:
    """A one-node LangGraph graph around a ToolNode: its answer is the new tool messages."""

    def __init__(self, node: ToolNode) -> None:
        graph = StateGraph(MessagesState)
        graph.add_node("tools", node)
        graph.add_edge(START, "tools")
        graph.add_edge("tools", END)
        self.graph = graph.compile()

    def invoke(self, state: dict) -> dict:
        messages = self.graph.invoke(state)["messages"]
        return {"messages": [m for m in messages if isinstance(m, ToolMessage)]}


def test_wrapped_tools_keep_their_names_and_schemas(a):
    wrapped = attest.langchain.wrap_tools([get_weather, create_ticket], a)
    assert [t.name for t in wrapped] == ["get_weather", "create_ticket"]
    assert wrapped[0].description == get_weather.description
    assert wrapped[1].args == create_ticket.args


def test_tool_node_read_acts_write_asks_refusal_is_a_message(a, cli):
    RAN.clear()
    node = Graph(attest.langchain.wrap_tool_node(ToolNode([get_weather, create_ticket, refund_payment]), a))

    # A read acts: the model gets the tool's own answer.
    [message] = node.invoke(call("get_weather", {"city": "Oslo"}, "c1"))["messages"]
    assert isinstance(message, ToolMessage)
    assert message.content == "sunny in Oslo"
    assert RAN == ["get_weather"]

    # A refused tool never runs; the model reads why in the tool message.
    [message] = node.invoke(call("refund_payment", {"charge": "ch_1", "amount": 900}, "c2"))["messages"]
    assert message.status == "error"
    assert "agents do not move money" in message.content
    assert message.tool_call_id == "c2"
    assert RAN == ["get_weather"]

    # A write asks: held until a person approves, then the same call runs.
    [message] = node.invoke(call("create_ticket", {"title": "printer"}, "c3"))["messages"]
    assert message.status == "error"
    assert "approve" in message.content
    assert "create_ticket" not in RAN
    request = [e for e in cli.entries() if e["decision"] == "ask"][-1]
    [waiting] = json.loads(cli.run("pending", "--json").stdout)
    cli.approve(waiting["id"])
    [message] = node.invoke(call("create_ticket", {"title": "printer"}, "c4"))["messages"]
    assert message.status != "error", message.content
    assert "T-1" in message.content
    assert RAN == ["get_weather", "create_ticket"]
    assert request["verb"] == "create"
    cli.verify()


def test_async_tool_calls(a, cli):
    RAN.clear()
    [weather] = attest.langchain.wrap_tools([get_weather], a)

    async def main() -> str:
        return await weather.ainvoke({"city": "Rome"})

    assert asyncio.run(main()) == "sunny in Rome"
    [row] = cli.entries()
    assert row["decision"] == "act"


def test_wrapped_tools_take_verify_and_read_back(a, cli):
    RAN.clear()
    [checked] = attest.langchain.wrap_tools([get_weather], a, verify=lambda result: "sunny" in result)
    assert checked.invoke({"city": "Oslo"}) == "sunny in Oslo"
    [read] = attest.langchain.wrap_tools([get_weather], a, read_back=lambda result, params: {"city": "Bergen"})
    read.invoke({"city": "Oslo"})
    first, second = cli.outcomes()
    assert (first["verification"]["method"], first["verification"]["level"]) == ("custom", "verified-custom")
    assert (second["verification"]["method"], second["verification"]["level"]) == ("read-back:custom", "unverified")


WITHOUT_LANGGRAPH = """
import json, sys
sys.modules["langgraph"] = None  # LangChain alone: every `import langgraph...` fails
from langchain_core.tools import tool
import attest, attest.langchain

@tool
def get_weather(city: str) -> str:
    \"\"\"The weather in a city.\"\"\"
    return f"sunny in {city}"

@tool
def create_ticket(title: str) -> dict:
    \"\"\"Open a support ticket.\"\"\"
    raise AssertionError("a held call ran")

a = attest.Attest(ledger=sys.argv[1], policy=sys.argv[2], agent="py-agent", durability="normal")
weather, ticket = attest.langchain.wrap_tools([get_weather, create_ticket], a)
print(json.dumps({"read": weather.invoke({"city": "Oslo"}), "write": ticket.invoke({"title": "printer"})}))
"""


def test_wrap_tools_works_with_langchain_core_alone(ledger_file, policy_file, cli):
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", WITHOUT_LANGGRAPH, str(ledger_file), str(policy_file)],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    answers = json.loads(out.stdout)
    assert answers["read"] == "sunny in Oslo"
    # Held, as outside a graph: the model reads that a person must approve first.
    assert answers["write"].startswith("Not run yet: Attest is"), answers
    [waiting] = json.loads(cli.run("pending", "--json").stdout)
    assert waiting["verb"] == "create"
