"""A LangGraph app for the pause-and-resume tests: a scripted model node (no model, no
network), a governed ToolNode, and a SQLite checkpointer, so a run paused in one process
can be resumed in another: ``python graph_app.py LEDGER POLICY CHECKPOINTS RUNS THREAD
RESUME_JSON`` resumes ``THREAD`` with ``Command(resume=RESUME_JSON)`` and prints what the
graph answered as JSON."""

from __future__ import annotations

import json
import sqlite3
import sys

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command

import attest
import attest.langchain


def governed_tools(a: attest.Attest, runs: str) -> ToolNode:
    @tool
    def create_ticket(title: str) -> dict:
        """Open a support ticket."""
        with open(runs, "a", encoding="utf-8") as done:  # what ran, across processes
            done.write(title + "\n")
        return {"id": "T-1", "title": title}

    return attest.langchain.wrap_tool_node(ToolNode([create_ticket]), a)


def scripted_model(state: MessagesState) -> dict:
    """Asks for a ticket titled after the user's message, then reports the tool's answer."""
    last = state["messages"][-1]
    if isinstance(last, HumanMessage):
        call = {"name": "create_ticket", "args": {"title": last.content}, "id": "call-1"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}
    return {"messages": [AIMessage(content=f"done: {last.content}")]}


def build(a: attest.Attest, checkpoints: str, runs: str):
    graph = StateGraph(MessagesState)
    graph.add_node("model", scripted_model)
    graph.add_node("tools", governed_tools(a, runs))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    saver = SqliteSaver(sqlite3.connect(checkpoints, check_same_thread=False))
    return graph.compile(checkpointer=saver)


def answer(out: dict) -> dict:
    """What a graph invocation ended with: the last message and any interrupts' values."""
    return {
        "last": out["messages"][-1].content,
        "status": getattr(out["messages"][-1], "status", None),
        "interrupts": [i.value for i in out.get("__interrupt__", [])],
    }


if __name__ == "__main__":
    ledger, policy, checkpoints, runs, thread, resume = sys.argv[1:]
    app = build(attest.Attest(ledger=ledger, policy=policy, agent="py-agent"), checkpoints, runs)
    out = app.invoke(Command(resume=json.loads(resume)), {"configurable": {"thread_id": thread}})
    print(json.dumps(answer(out)))
