// The LangChain.js adapter with the real `@langchain/core` and a scripted chat model (no
// network): the model asks for a tool call, the loop invokes the wrapped tool with it, as
// an agent does, and the model reads the ToolMessage.
"use strict";

const assert = require("node:assert/strict");
const { test } = require("node:test");

const { AIMessageChunk, HumanMessage, ToolMessage } = require("@langchain/core/messages");
const { tool } = require("@langchain/core/tools");
const { FakeStreamingChatModel } = require("@langchain/core/utils/testing");
const { z } = require("zod");

const { Attest } = require("attest-agents");
const { wrapTools } = require("attest-agents/langchain");
const { Cli, project } = require("./helpers.cjs");

function setup(t) {
  const where = project(t);
  const attest = new Attest({ ledger: where.ledger, policy: where.policy, agent: "lc-agent", durability: "normal" });
  t.after(() => attest.close());
  const ran = [];
  const tools = wrapTools(
    [
      tool(async ({ noteId }) => { ran.push(["get_note", noteId]); return `note ${noteId}: groceries`; }, {
        name: "get_note",
        description: "Read a note",
        schema: z.object({ noteId: z.string() }),
      }),
      tool(async ({ title }) => { ran.push(["create_note", title]); return `created ${title}`; }, {
        name: "create_note",
        description: "Create a note",
        schema: z.object({ title: z.string() }),
      }),
      tool(async ({ charge }) => { ran.push(["refund_payment", charge]); return "refunded"; }, {
        name: "refund_payment",
        description: "Refund a charge",
        schema: z.object({ charge: z.string() }),
      }),
    ],
    attest,
    { get_note: { system: "notes", verb: "read" }, create_note: { system: "notes", verb: "create" } },
  );
  return { tools, ran, cli: new Cli(where) };
}

/** One agent step: the scripted model asks for `name(args)`; the tool answers it. */
async function step(tools, name, args) {
  const model = new FakeStreamingChatModel({
    sleep: 0,
    chunks: [new AIMessageChunk({ content: "", tool_calls: [{ name, args, id: "call-1", type: "tool_call" }] })],
  }).bindTools(tools);
  const asked = await model.invoke([new HumanMessage("go")]);
  const [call] = asked.tool_calls;
  assert.equal(call.name, name);
  const answer = await tools.find((candidate) => candidate.name === call.name).invoke(call);
  assert.ok(answer instanceof ToolMessage, `a tool call is answered with a ToolMessage, not ${answer}`);
  assert.equal(answer.tool_call_id, "call-1");
  return answer;
}

test("a wrapped LangChain tool keeps its schema and runs through Attest", async (t) => {
  const { tools, ran, cli } = setup(t);
  const [getNote] = tools;
  assert.equal(getNote.name, "get_note");
  assert.equal(getNote.description, "Read a note");
  await assert.rejects(getNote.invoke({ noteId: 7 }), "the schema is the tool's own");
  const answer = await step(tools, "get_note", { noteId: "n1" });
  assert.equal(answer.content, "note n1: groceries");
  assert.notEqual(answer.status, "error");
  assert.deepEqual(ran, [["get_note", "n1"]]);
  const [row] = cli.entries();
  assert.deepEqual([row.system, row.verb, row.agent, row.decision, row.call.function], ["notes", "read", "lc-agent", "act", "get_note"]);
});

test("a refused LangChain tool does not run and the model reads why in an error ToolMessage", async (t) => {
  const { tools, ran, cli } = setup(t);
  const answer = await step(tools, "refund_payment", { charge: "ch_1" });
  assert.equal(answer.status, "error");
  assert.match(answer.content, /agents do not move money: the tool did not run/);
  assert.deepEqual(ran, []);
  assert.equal(cli.entries()[0].decision, "refuse");
});

test("a held LangChain tool answers with the request and runs once after approval", async (t) => {
  const { tools, ran, cli } = setup(t);
  const held = await step(tools, "create_note", { title: "plan" });
  assert.equal(held.status, "error");
  const [, requestId] = /approve request (\S+) \(/.exec(held.content) ?? [];
  assert.ok(requestId, held.content);
  assert.match(held.content, new RegExp(`http://127\\.0\\.0\\.1:8321/requests/${requestId}`));
  assert.deepEqual(ran, []);

  cli.confirm(requestId);
  const answer = await step(tools, "create_note", { title: "plan" });
  assert.equal(answer.content, "created plan");
  assert.deepEqual(ran, [["create_note", "plan"]]);
  assert.equal(cli.entries().at(-1).execution.status, "ok");
});
