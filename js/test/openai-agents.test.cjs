// The OpenAI Agents SDK adapter with the real umbrella package `@openai/agents` (which
// also sets OpenAI's model provider and trace exporter: tracing is off by its documented
// OPENAI_AGENTS_DISABLE_TRACING, and every connection off this machine is refused and
// fails the file) and a scripted model (no network): needsApproval is Attest's decision;
// a held call interrupts the run, which is answered from Attest's approval store and
// resumed, also in a new process, running the call once.
"use strict";

process.env.OPENAI_AGENTS_DISABLE_TRACING = "1";

const assert = require("node:assert/strict");
const { execFile } = require("node:child_process");
const path = require("node:path");
const { test } = require("node:test");
const { promisify } = require("node:util");

const { Agent, run, setTracingDisabled } = require("@openai/agents");

const { Attest } = require("attest-agents");
const { CONTEXT_KEY, resolveInterruptions, wrapTools } = require("attest-agents/openai-agents");
const { Cli, noNetwork, project } = require("./helpers.cjs");

setTracingDisabled(true);
noNetwork();

// The tools and the model, as this process and the resuming one both make them.
const { ScriptedModel, noteTools } = require("./openai-agents.tools.cjs");
const SPECS = { get_note: { system: "notes", verb: "read" }, create_note: { system: "notes", verb: "create" } };

function setup(t, name, args) {
  const where = project(t);
  const attest = new Attest({ ledger: where.ledger, policy: where.policy, agent: "oa-agent", durability: "normal" });
  t.after(() => attest.close());
  const ran = [];
  const agent = new Agent({ name: "notes", instructions: "help", model: new ScriptedModel(name, args), tools: wrapTools(noteTools(ran), attest, SPECS) });
  return { where, attest, agent, ran, cli: new Cli(where) };
}

test("an allowed call runs once, through Attest, and the model reads its output", async (t) => {
  const { agent, ran, cli } = setup(t, "get_note", { noteId: "n1" });
  const result = await run(agent, "read n1", { context: {} });
  assert.equal(result.finalOutput, "the tool said: note n1: groceries");
  assert.deepEqual(ran, [["get_note", "n1"]]);
  const [row] = cli.entries();
  assert.deepEqual([row.system, row.verb, row.agent, row.decision], ["notes", "read", "oa-agent", "act"]);
});

test("a refused call does not run and its output says why", async (t) => {
  const { agent, ran, cli } = setup(t, "refund_payment", { charge: "ch_1" });
  const result = await run(agent, "refund", { context: {} });
  assert.match(result.finalOutput, /Not run: refused by policy: agents do not move money/);
  assert.deepEqual(ran, []);
  assert.equal(cli.entries()[0].decision, "refuse");
});

test("a held call interrupts the run; answered from the store, it resumes in a new process and runs once", async (t) => {
  const { where, attest, agent, ran, cli } = setup(t, "create_note", { title: "plan" });
  const context = {};
  const first = await run(agent, "create plan", { context });
  assert.equal(first.interruptions.length, 1);
  assert.deepEqual(ran, []);
  const { requestId, token } = context[CONTEXT_KEY]["call-1"];
  assert.match(token, /^atr_/);
  // Still pending: nothing is answered, the run stays interrupted.
  assert.deepEqual(await resolveInterruptions(first.state, attest), { approved: [], rejected: [], pending: ["call-1"] });

  cli.confirm(requestId);
  const saved = first.state.toString();
  const resumed = `
    process.env.OPENAI_AGENTS_DISABLE_TRACING = "1";
    const { Agent, RunState, run, setTracingDisabled } = require("@openai/agents");
    const { Attest } = require("attest-agents");
    const { resolveInterruptions, wrapTools } = require("attest-agents/openai-agents");
    setTracingDisabled(true);
    const [ledger, policy, saved] = process.argv.slice(1);
    (async () => {
      const ran = [];
      const attest = new Attest({ ledger, policy, agent: "oa-agent", durability: "normal" });
      const { ScriptedModel, noteTools } = require(${JSON.stringify(path.join(__dirname, "openai-agents.tools.cjs"))});
      const agent = new Agent({ name: "notes", instructions: "help", model: new ScriptedModel(),
        tools: wrapTools(noteTools(ran), attest, ${JSON.stringify(SPECS)}) });
      const state = await RunState.fromString(agent, saved);
      const answered = await resolveInterruptions(state, attest);
      const result = await run(agent, state);
      console.log(JSON.stringify({ answered, ran, finalOutput: result.finalOutput }));
      await attest.close();
    })().catch((error) => { console.error(error); process.exit(1); });`;
  const { stdout } = await promisify(execFile)(process.execPath, ["-e", resumed, where.ledger, where.policy, saved], { cwd: __dirname });
  const child = JSON.parse(stdout.trim().split("\n").at(-1));
  assert.deepEqual(child.answered, { approved: ["call-1"], rejected: [], pending: [] });
  assert.deepEqual(child.ran, [["create_note", "plan"]], "the approved call ran once, in the new process");
  assert.equal(child.finalOutput, "the tool said: created plan", "the model read the approved call's output");
  assert.deepEqual(ran, [], "and not in this one");
  const outcomes = cli.entries().filter((row) => row.execution.status !== "intent");
  assert.equal(outcomes.at(-1).execution.status, "ok");
  assert.equal(outcomes.filter((row) => row.execution.status === "ok").length, 1);
  cli.run(["verify"]);
});
