// The Vercel AI SDK adapter with the real `ai` package, its current major (7) and the
// previous one (6, installed as `ai-v6`), and a scripted model (no network): the model calls
// a tool, the SDK runs it through Attest, and the model reads the answer.
import assert from "node:assert/strict";
import { test } from "node:test";

import * as ai7 from "ai";
import { MockLanguageModelV3 as Mock7 } from "ai/test";
import * as ai6 from "ai-v6";
import { MockLanguageModelV3 as Mock6 } from "ai-v6/test";
import { z } from "zod";

import { Attest } from "attest-agents";
import { wrapTools } from "attest-agents/ai";
import helpers from "./helpers.cjs";
import { scriptedModel } from "./model.mjs";

const { Cli, project } = helpers;
helpers.noNetwork();

const SDKS = [
  ["ai 7", ai7, Mock7],
  ["ai 6", ai6, Mock6],
];

for (const [which, { generateText, stepCountIs, tool }, Mock] of SDKS) {
  function setup(t) {
    const where = project(t);
    const attest = new Attest({ ledger: where.ledger, policy: where.policy, agent: "ai-agent", durability: "normal" });
    t.after(() => attest.close());
    const ran = [];
    const tools = wrapTools(
      {
        get_note: tool({
          description: "Read a note",
          inputSchema: z.object({ noteId: z.string() }),
          execute: async ({ noteId }) => { ran.push(["get_note", noteId]); return { id: noteId, title: "groceries" }; },
        }),
        create_note: tool({
          description: "Create a note",
          inputSchema: z.object({ title: z.string() }),
          execute: async ({ title }) => { ran.push(["create_note", title]); return { id: "n2", title }; },
        }),
        refund_payment: tool({
          description: "Refund a charge",
          inputSchema: z.object({ charge: z.string() }),
          execute: async ({ charge }) => { ran.push(["refund_payment", charge]); return { id: "re_1" }; },
        }),
      },
      attest,
      { get_note: { system: "notes", verb: "read" }, create_note: { system: "notes", verb: "create" } },
    );
    return { where, attest, tools, ran, cli: new Cli(where) };
  }

  async function ask(tools, toolName, input) {
    return generateText({ model: scriptedModel(Mock, toolName, input), tools, prompt: "go", stopWhen: stepCountIs(3) });
  }

  test(`${which}: a wrapped ai tool keeps its schema, runs through Attest and the model reads its result`, async (t) => {
    const { tools, ran, cli } = setup(t);
    assert.equal(tools.get_note.description, "Read a note");
    assert.equal(tools.get_note.inputSchema.safeParse({ noteId: 1 }).success, false, "the schema is the tool's own");
    const result = await ask(tools, "get_note", { noteId: "n1" });
    assert.deepEqual(ran, [["get_note", "n1"]]);
    assert.deepEqual(result.steps[0].toolResults[0].output, { id: "n1", title: "groceries" });
    assert.match(result.text, /groceries/);
    const [row] = cli.entries();
    assert.deepEqual([row.system, row.verb, row.agent, row.decision, row.call.function], ["notes", "read", "ai-agent", "act", "get_note"]);
  });

  test(`${which}: a refused ai tool does not run and the model reads why`, async (t) => {
    const { tools, ran, cli } = setup(t);
    const result = await ask(tools, "refund_payment", { charge: "ch_1" });
    assert.deepEqual(ran, []);
    const output = result.steps[0].toolResults[0].output;
    assert.equal(output.ran, false);
    assert.equal(output.status, "Refused");
    assert.match(output.reason, /agents do not move money/);
    assert.match(result.text, /agents do not move money/);
    const [row] = cli.entries();
    assert.equal(row.decision, "refuse");
  });

  test(`${which}: a held ai tool answers with the request, and runs once after approval when the model calls again`, async (t) => {
    const { tools, ran, cli } = setup(t);
    const first = await ask(tools, "create_note", { title: "plan" });
    const held = first.steps[0].toolResults[0].output;
    assert.equal(held.status, "Held");
    assert.ok(held.requestId);
    assert.equal(held.link, `http://127.0.0.1:8321/requests/${held.requestId}`);
    assert.ok(!JSON.stringify(held).includes("atr_"), "the resume token is not shown to the model");
    assert.match(first.text, /once a person approves/);
    assert.deepEqual(ran, []);

    cli.confirm(held.requestId);
    const second = await ask(tools, "create_note", { title: "plan" });
    assert.deepEqual(second.steps[0].toolResults[0].output, { id: "n2", title: "plan" });
    assert.deepEqual(ran, [["create_note", "plan"]]);
    const outcome = cli.entries().at(-1);
    assert.equal(outcome.execution.status, "ok");
    assert.equal(outcome.confirm?.approver ?? outcome.confirm?.by, "ann@acme.com");
  });
}
