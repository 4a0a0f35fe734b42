"""LangChain / LangGraph: a ToolNode whose tools go through Attest; a refusal comes back
as a ToolMessage the model reads. Driven with the model's tool-call message (no model).

    pip install ./python langchain-core langgraph && python examples/python/attest_langchain.py
"""

import os
import pathlib
import tempfile

from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

import attest
import attest.langchain

ledger = os.environ.get("ATTEST_LEDGER") or str(pathlib.Path(tempfile.mkdtemp()) / "ledger.sqlite")
a = attest.Attest(ledger=ledger, agent="langgraph-agent")


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def delete_repository(name: str) -> str:
    """Delete a repository."""
    return "deleted"


graph = StateGraph(MessagesState)
graph.add_node("tools", attest.langchain.wrap_tool_node(ToolNode([get_weather, delete_repository]), a))
graph.add_edge(START, "tools")
graph.add_edge("tools", END)
calls = [
    {"name": "get_weather", "args": {"city": "Oslo"}, "id": "call_1"},
    {"name": "delete_repository", "args": {"name": "web"}, "id": "call_2"},
]
# What a model's turn would hand the graph: one message asking for two tool calls.
for message in graph.compile().invoke({"messages": [AIMessage(content="", tool_calls=calls)]})["messages"][1:]:
    print(f"{message.name}: [{message.status}] {message.content}")
print("ledger:", ledger)
