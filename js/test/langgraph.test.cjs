// LangGraph.js: inside a graph with a checkpointer, a held call pauses the graph with
// interrupt(); after the person's decision, `Command({ resume: request })` runs it once.
// A scripted agent node (no model, no network) asks for the tool call.
"use strict";

const assert = require("node:assert/strict");
const { test } = require("node:test");

const { Command, END, MemorySaver, MessagesAnnotation, START, StateGraph } = require("@langchain/langgraph");
const { ToolNode } = require("@langchain/langgraph/prebuilt");
const { AIMessage, ToolMessage } = require("@langchain/core/messages");
const { tool } = require("@langchain/core/tools");
const { z } = require("zod");

const { Attest } = require("attest-agents");
const { REQUEST_KIND, wrapTools } = require("attest-agents/langchain");
const { Cli, project } = require("./helpers.cjs");

function graphFor(tools, checkpointer) {
  // The scripted agent: asks for create_note once, then ends with what the tool said.
  const agent = async ({ messages }) => {
    const last = messages.at(-1);
    if (last instanceof ToolMessage) return { messages: [new AIMessage(`the tool said: ${last.content}`)] };
    return { messages: [new AIMessage({ content: "", tool_calls: [{ name: "create_note", args: { title: "plan" }, id: "call-1", type: "tool_call" }] })] };
  };
  const next = ({ messages }) => (messages.at(-1).tool_calls?.length ? "tools" : END);
  return new StateGraph(MessagesAnnotation)
    .addNode("agent", agent)
    .addNode("tools", new ToolNode(tools))
    .addEdge(START, "agent")
    .addConditionalEdges("agent", next, ["tools", END])
    .addEdge("tools", "agent")
    .compile({ checkpointer });
}

function setup(t) {
  const where = project(t);
  const attest = new Attest({ ledger: where.ledger, policy: where.policy, agent: "lg-agent", durability: "normal" });
  t.after(() => attest.close());
  const ran = [];
  const tools = wrapTools(
    [tool(async ({ title }) => { ran.push(title); return `created ${title}`; }, { name: "create_note", description: "Create a note", schema: z.object({ title: z.string() }) })],
    attest,
    { create_note: { system: "notes", verb: "create" } },
  );
  return { tools, ran, cli: new Cli(where) };
}

test("a held call pauses the graph with interrupt() and, resumed after approval, runs once", async (t) => {
  const { tools, ran, cli } = setup(t);
  const graph = graphFor(tools, new MemorySaver());
  const config = { configurable: { thread_id: "t1" } };
  const paused = await graph.invoke({ messages: [{ role: "user", content: "make a plan" }] }, config);
  const [interrupted] = paused.__interrupt__ ?? [];
  assert.ok(interrupted, `the graph did not pause: ${JSON.stringify(paused)}`);
  const request = interrupted.value;
  assert.equal(request.kind, REQUEST_KIND);
  assert.equal(request.tool, "create_note");
  assert.match(request.token, /^atr_/);
  assert.equal(request.inbox, `http://127.0.0.1:8321/requests/${request.id}`);
  assert.match(request.summary, /^create_note: notes create/);
  assert.deepEqual(ran, []);

  cli.confirm(request.id);
  const done = await graph.invoke(new Command({ resume: request }), config);
  assert.equal(done.messages.at(-1).content, "the tool said: created plan");
  assert.deepEqual(ran, ["plan"], "the approved call ran once");
  const outcomes = cli.entries().filter((row) => row.execution.status !== "intent");
  assert.equal(outcomes.filter((row) => row.execution.status === "ok").length, 1);
  assert.equal(cli.run(["pending", "--json"]).stdout.trim(), "[]", "no second request was filed on the re-run");
});

test("without a checkpointer a held call answers like a refused one", async (t) => {
  const { tools, ran } = setup(t);
  const graph = graphFor(tools, undefined);
  const done = await graph.invoke({ messages: [{ role: "user", content: "make a plan" }] });
  assert.match(done.messages.at(-1).content, /Not run yet: Attest is waiting for a person to approve request/);
  assert.deepEqual(ran, []);
});
