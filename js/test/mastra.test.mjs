// The Mastra adapter with the real `@mastra/core` (which needs Node 22: .ci/run runs this
// file with .ci/node's node 22) and a scripted model (no network; Mastra's telemetry off
// by its documented MASTRA_TELEMETRY_DISABLED, and every connection off this machine
// refused and failed): a Mastra agent calls a `createTool` tool, Mastra runs it through
// Attest, and the model reads the answer.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Agent } from "@mastra/core/agent";
import { createTool } from "@mastra/core/tools";
import { MockLanguageModelV3 } from "ai/test";
import { z } from "zod";

import { Attest } from "attest-agents";
import { wrapTool, wrapTools } from "attest-agents/mastra";
import helpers from "./helpers.cjs";
import { scriptedModel } from "./model.mjs";

const { Cli, project } = helpers;
process.env.MASTRA_TELEMETRY_DISABLED = "1";
helpers.noNetwork();

function setup(t) {
  const where = project(t);
  const attest = new Attest({ ledger: where.ledger, policy: where.policy, agent: "mastra-agent", durability: "normal" });
  t.after(() => attest.close());
  const ran = [];
  const tools = {
    get_note: createTool({
      id: "get_note",
      description: "Read a note",
      inputSchema: z.object({ noteId: z.string() }),
      execute: async ({ noteId }) => { ran.push(["get_note", noteId]); return { id: noteId, title: "groceries" }; },
    }),
    create_note: createTool({
      id: "create_note",
      description: "Create a note",
      inputSchema: z.object({ title: z.string() }),
      execute: async ({ title }) => { ran.push(["create_note", title]); return { id: "n2", title }; },
    }),
    refund_payment: createTool({
      id: "refund_payment",
      description: "Refund a charge",
      inputSchema: z.object({ charge: z.string() }),
      execute: async ({ charge }) => { ran.push(["refund_payment", charge]); return { id: "re_1" }; },
    }),
  };
  const wrapped = wrapTools(tools, attest, { get_note: { system: "notes", verb: "read" }, create_note: { system: "notes", verb: "create" } });
  return { where, attest, tools, wrapped, ran, cli: new Cli(where) };
}

/** A Mastra agent over `tools` whose model calls `toolName(input)` once, then answers with what the tool said. */
async function ask(tools, toolName, input) {
  const agent = new Agent({
    id: "notes",
    name: "notes",
    instructions: "help with notes",
    model: scriptedModel(MockLanguageModelV3, toolName, input),
    tools,
  });
  const result = await agent.generate("go", { maxSteps: 3 });
  const results = result.steps.flatMap((step) => step.toolResults ?? []);
  return { text: result.text, output: (results[0]?.payload ?? results[0])?.result ?? results[0]?.output };
}

test("a wrapped Mastra tool keeps its id and schema, runs through Attest and the model reads its result", async (t) => {
  const { tools, wrapped, ran, cli } = setup(t);
  assert.equal(wrapped.get_note.id, "get_note");
  assert.equal(wrapped.get_note.description, "Read a note");
  assert.equal(wrapped.get_note.inputSchema, tools.get_note.inputSchema, "the schema is the tool's own");
  assert.equal(Object.getPrototypeOf(wrapped.get_note), Object.getPrototypeOf(tools.get_note), "still a Mastra Tool");
  const { text, output } = await ask(wrapped, "get_note", { noteId: "n1" });
  assert.deepEqual(ran, [["get_note", "n1"]]);
  assert.deepEqual(output, { id: "n1", title: "groceries" });
  assert.match(text, /groceries/);
  const [row] = cli.entries();
  assert.deepEqual([row.system, row.verb, row.agent, row.decision, row.call.function], ["notes", "read", "mastra-agent", "act", "get_note"]);
});

test("a refused Mastra tool does not run and the model reads why", async (t) => {
  const { wrapped, ran, cli } = setup(t);
  const { text, output } = await ask(wrapped, "refund_payment", { charge: "ch_1" });
  assert.deepEqual(ran, []);
  assert.equal(output.ran, false);
  assert.equal(output.status, "Refused");
  assert.match(output.reason, /agents do not move money/);
  assert.match(text, /agents do not move money/);
  const [row] = cli.entries();
  assert.equal(row.decision, "refuse");
});

test("a held Mastra tool answers with the request, and runs once after approval when the model calls again", async (t) => {
  const { wrapped, ran, cli } = setup(t);
  const first = await ask(wrapped, "create_note", { title: "plan" });
  assert.equal(first.output.status, "Held");
  assert.ok(first.output.requestId);
  assert.equal(first.output.link, `http://127.0.0.1:8321/requests/${first.output.requestId}`);
  assert.ok(!JSON.stringify(first.output).includes("atr_"), "the resume token is not shown to the model");
  assert.match(first.text, /once a person approves/);
  assert.deepEqual(ran, []);

  cli.confirm(first.output.requestId);
  const second = await ask(wrapped, "create_note", { title: "plan" });
  assert.deepEqual(second.output, { id: "n2", title: "plan" });
  assert.deepEqual(ran, [["create_note", "plan"]]);
  const outcomes = cli.entries().filter((row) => row.execution.status !== "intent");
  assert.equal(outcomes.at(-1).execution.status, "ok");
  assert.equal(outcomes.filter((row) => row.execution.status === "ok").length, 1, "it ran once");
});

test("input the tool's schema refuses answers with Mastra's validation error, and nothing is decided or run", async (t) => {
  const { tools, attest, ran, cli } = setup(t);
  const governed = wrapTool(tools.get_note, attest, { system: "notes", verb: "read" });
  const answer = await governed.execute({ noteId: 7 }, undefined);
  assert.equal(answer.error, true, JSON.stringify(answer));
  assert.match(answer.message, /noteId/);
  assert.deepEqual(ran, []);
  assert.deepEqual(cli.entries(), []);
});
