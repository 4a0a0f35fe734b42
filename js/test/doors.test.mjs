// The doors scenario (crates/attest-cli/tests/it/doors.rs, python/tests/test_doors.py),
// through the TypeScript doors: the decorator, an `ai` tool, a LangChain tool, an OpenAI
// Agents run (`@openai/agents`), a Mastra agent and an MCP client (the official SDK's, to
// a server of the CRM's tools), each with the same `.attest/config.yaml` and nothing else
// (Mastra and `ai` 7 need Node 22: .ci/run runs this file with .ci/node's node 22):
//
// - the registry maps the in-house tool `frobnicate_widget` to `acmecrm.list`: it acts;
// - `create_deal` is read back by the configuration's recipe from the fake CRM on
//   127.0.0.1 (its base URL and credential variable from the file): `verified` when the
//   CRM keeps what it was sent, `unverified` when it lies;
// - `search_widgets` is blocked organisation-wide: refused, and the CRM never sees it;
// - `delete_deal` asks: the configuration's webhook is told.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";

import { tool as aiTool } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { tool as lcTool } from "@langchain/core/tools";
import { Agent as MastraAgent } from "@mastra/core/agent";
import { createTool } from "@mastra/core/tools";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { Agent as OpenAIAgent, run, setTracingDisabled, tool as oaTool } from "@openai/agents";
import { z } from "zod";

import { Attest, Held, Refused } from "attest-agents";
import { wrapTools as aiWrap } from "attest-agents/ai";
import { wrapTools as lcWrap } from "attest-agents/langchain";
import { wrapTools as mastraWrap } from "attest-agents/mastra";
import { wrapClient } from "attest-agents/mcp";
import { wrapTools as oaWrap } from "attest-agents/openai-agents";
import helpers from "./helpers.cjs";
import { scriptedModel } from "./model.mjs";
import oaTools from "./openai-agents.tools.cjs";

// Telemetry and tracing off by the frameworks' documented settings; nothing leaves the machine.
process.env.MASTRA_TELEMETRY_DISABLED = "1";
process.env.OPENAI_AGENTS_DISABLE_TRACING = "1";
setTracingDisabled(true);
helpers.noNetwork();

const ACME_TOKEN = "acme-test-token";
const HOOK_SECRET = "whsec-doors";

/** The fake CRM of the Rust scenario; a lying one stores stage `lost` while answering with the stage sent. */
async function crm(t, lying) {
  const state = { deals: [], seen: [], hooks: [] };
  const server = http.createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => { body += chunk; });
    request.on("end", () => {
      const send = (status, value) => {
        const data = value === undefined ? "" : JSON.stringify(value);
        response.writeHead(status, { "content-type": "application/json" }).end(data);
      };
      const route = request.url.split("?")[0];
      if (request.method === "POST" && route === "/hook") {
        state.hooks.push(JSON.parse(body || "{}"));
        return send(200, { ok: true });
      }
      state.seen.push(`${request.method} ${route}`);
      if (request.method === "GET" && route === "/v1/widgets") return send(200, [{ id: "w1", kind: "sprocket" }]);
      if (request.method === "GET" && route === "/v1/widgets/search") return send(200, []);
      if (request.method === "GET" && route.startsWith("/v1/deals/")) {
        if (request.headers.authorization !== `Bearer ${ACME_TOKEN}`) return send(401, { error: "no" });
        const deal = state.deals.find((d) => d.id === route.split("/").pop());
        return deal ? send(200, deal) : send(404, { error: "not found" });
      }
      if (request.method === "POST") {
        const sent = JSON.parse(body || "{}");
        const answered = { id: `d${state.deals.length + 1}`, name: sent.name, stage: sent.stage };
        state.deals.push(lying ? { ...answered, stage: "lost" } : answered);
        return send(201, answered);
      }
      if (request.method === "DELETE") return send(204);
      return send(404, { error: "not found" });
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => server.close());
  const url = `http://127.0.0.1:${server.address().port}`;
  const call = async (method, route, body) => {
    const answer = await fetch(`${url}${route}`, {
      method,
      headers: { authorization: `Bearer ${ACME_TOKEN}`, "content-type": "application/json" },
      body: body && JSON.stringify(body),
    });
    const text = await answer.text();
    return text ? JSON.parse(text) : {};
  };
  return { ...state, state, url, lying, call };
}

/** The Rust scenario's `.attest/config.yaml`, registry, policy and recipe, in a fresh directory made the working one. */
function scenarioDirectory(t, vendor) {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "attest-doors-"));
  const folder = path.join(directory, ".attest");
  fs.mkdirSync(path.join(folder, "recipes"), { recursive: true });
  fs.writeFileSync(path.join(folder, "config.yaml"), `ledger: ledger.sqlite
policy: policy.yaml
registry: [in-house.yaml]
recipes: [recipes]
systems:
  acmecrm: {base_url: '${vendor.url}', credential: ACME_TOKEN}
notify:
  webhook: {url: '${vendor.url}/hook', secret_env: HOOK_SECRET}
`);
  fs.writeFileSync(path.join(folder, "in-house.yaml"), `overrides:
  - {tool: frobnicate_widget, system: acmecrm, verb: list}
  - {tool: search_widgets, system: acmecrm, verb: search}
`);
  fs.writeFileSync(path.join(folder, "policy.yaml"), `version: 1
org:
  blocked: [acmecrm.search]
policies:
  - name: deals
    match: {system: acmecrm, verb: create}
    decision: act
    reason: deals are made by the sales agent
`);
  fs.writeFileSync(path.join(folder, "recipes", "acmecrm.yaml"), `recipes:
  - name: acmecrm.deal
    system: acmecrm
    verbs: [create]
    when: {params: [/stage], result: [/id]}
    base_url: http://127.0.0.1:9
    auth: {env: ACME_DEFAULT_TOKEN}
    read:
      url: "{base}/v1/deals/{id}"
      id: [result:/id]
    compare:
      fields:
        - {name: stage, want: params:/stage, got: /stage}
`);
  // The only environment a door gets: the CRM's token and the webhook's secret.
  const saved = { ...process.env };
  const cwd = process.cwd();
  for (const name of ["ATTEST_LEDGER", "ATTEST_POLICY", "ATTEST_CONFIG"]) delete process.env[name];
  process.env.ACME_TOKEN = ACME_TOKEN;
  process.env.HOOK_SECRET = HOOK_SECRET;
  process.chdir(directory);
  t.after(() => {
    process.chdir(cwd);
    for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
    Object.assign(process.env, saved);
    fs.rmSync(directory, { recursive: true, force: true });
  });
  return directory;
}

function rows(directory) {
  const out = spawnSync(helpers.attestBinary(), ["export"], { cwd: directory, encoding: "utf8", env: { PATH: process.env.PATH } });
  assert.equal(out.status, 0, out.stderr);
  return out.stdout.split("\n").filter((line) => line.trim()).map((line) => JSON.parse(line));
}

const outcome = (directory, verb) =>
  rows(directory).filter((row) => row.verb === verb && row.execution.status !== "intent").at(-1);

/** The promises every door keeps (the Rust scenario's `check`). */
async function check(vendor, door, directory) {
  const listed = outcome(directory, "list");
  assert.deepEqual([`${listed.system}.${listed.verb}`, listed.decision], ["acmecrm.list", "act"], door);
  const created = outcome(directory, "create");
  const want = vendor.lying ? "unverified" : "verified";
  assert.equal(created.verification.level, want, `${door}: ${JSON.stringify(created)}`);
  assert.equal(created.verification.method, "read-back:recipe", door);
  assert.ok(!JSON.stringify(created).includes(ACME_TOKEN), door);
  assert.equal(outcome(directory, "search").decision, "refuse", door);
  assert.ok(!vendor.state.seen.includes("GET /v1/widgets/search"), `${door}: the blocked read reached the CRM`);
  assert.ok(!vendor.state.seen.includes("DELETE /v1/deals/d1"), `${door}: the asked delete ran`);
  // The webhook is told on the engine's own threads: wait for it, a bounded number of turns.
  const told = () => vendor.state.hooks.some((hook) => hook.type === "approval.requested" && hook.request?.system === "acmecrm");
  for (let turn = 0; turn < 200 && !told(); turn += 1) await new Promise((resolve) => setTimeout(resolve, 50));
  assert.ok(told(), `${door}: the webhook was not told of the ask: ${JSON.stringify(vendor.state.hooks)}`);
}

// The in-house tools, as each framework holds them (each takes one input object).
function functions(vendor) {
  return {
    frobnicate_widget: async () => ({ widgets: await vendor.call("GET", "/v1/widgets") }),
    search_widgets: async ({ q }) => ({ widgets: await vendor.call("GET", `/v1/widgets/search?q=${q}`) }),
    create_deal: async ({ name, stage }) => vendor.call("POST", "/v1/deals", { name, stage }),
    delete_deal: async ({ id }) => vendor.call("DELETE", `/v1/deals/${id}`),
  };
}

const SCHEMAS = {
  frobnicate_widget: z.object({ kind: z.string().optional() }),
  search_widgets: z.object({ q: z.string() }),
  create_deal: z.object({ name: z.string(), stage: z.string() }),
  delete_deal: z.object({ id: z.string() }),
};

// Every in-house tool is named to its system, as in the Python scenario.
const ACMECRM = Object.fromEntries(Object.keys(SCHEMAS).map((name) => [name, { system: "acmecrm" }]));

const CALLS = [
  ["frobnicate_widget", {}],
  ["create_deal", { name: "Globex", stage: "won" }],
  ["search_widgets", { q: "x" }],
  ["delete_deal", { id: "d1" }],
];

/** A fake CRM, the scenario's directory (the working one) and an Attest opened with nothing but its file. */
async function scenario(t, lying) {
  const vendor = await crm(t, lying);
  const directory = scenarioDirectory(t, vendor);
  const attest = new Attest();
  t.after(() => attest.close());
  return { vendor, directory, attest };
}

for (const lying of [false, true]) {
  const which = lying ? "lying" : "honest";

  test(`the decorator (${which} CRM)`, async (t) => {
    const { vendor, directory, attest } = await scenario(t, lying);
    const tools = Object.fromEntries(
      Object.entries(functions(vendor)).map(([name, fn]) => [name, attest.tool({ name, system: "acmecrm" }, fn)]),
    );
    await tools.frobnicate_widget({});
    assert.equal((await tools.create_deal({ name: "Globex", stage: "won" })).id, "d1");
    await assert.rejects(tools.search_widgets({ q: "x" }), Refused);
    await assert.rejects(tools.delete_deal({ id: "d1" }), Held);
    await check(vendor, "decorator", directory);
  });

  test(`an ai tool (${which} CRM)`, async (t) => {
    const { vendor, directory, attest } = await scenario(t, lying);
    const fns = functions(vendor);
    const tools = aiWrap(
      Object.fromEntries(Object.entries(fns).map(([name, execute]) => [name, aiTool({ description: name, inputSchema: SCHEMAS[name], execute })])),
      attest,
      ACMECRM,
    );
    for (const [name, input] of CALLS) await tools[name].execute(input, { toolCallId: `call-${name}`, messages: [] });
    await check(vendor, "ai", directory);
  });

  test(`a LangChain tool (${which} CRM)`, async (t) => {
    const { vendor, directory, attest } = await scenario(t, lying);
    const fns = functions(vendor);
    const tools = lcWrap(Object.entries(fns).map(([name, fn]) => lcTool(fn, { name, description: name, schema: SCHEMAS[name] })), attest, ACMECRM);
    for (const [name, args] of CALLS) {
      await tools.find((candidate) => candidate.name === name).invoke({ name, args, id: `call-${name}`, type: "tool_call" });
    }
    await check(vendor, "langchain", directory);
  });

  test(`an OpenAI Agents run (${which} CRM)`, async (t) => {
    const { vendor, directory, attest } = await scenario(t, lying);
    const fns = functions(vendor);
    // Non-strict tools (the scenario's frobnicate_widget takes an optional field, which the
    // SDK's strict mode has no room for) take a plain JSON schema (zod's, without zod's marker).
    const schema = (name) => JSON.parse(JSON.stringify(z.toJSONSchema(SCHEMAS[name])));
    const tools = oaWrap(
      Object.entries(fns).map(([name, execute]) => oaTool({ name, description: name, parameters: schema(name), strict: false, execute })),
      attest,
      ACMECRM,
    );
    const outputs = {};
    for (const [name, args] of CALLS) {
      const agent = new OpenAIAgent({ name: "crm", instructions: "crm", model: new oaTools.ScriptedModel(name, args), tools });
      outputs[name] = await run(agent, "go", { context: {} });
    }
    assert.match(outputs.search_widgets.finalOutput, /Not run: refused/);
    assert.equal(outputs.delete_deal.interruptions.length, 1, "the asked delete stops the run for a person");
    await check(vendor, "openai-agents", directory);
  });

  test(`a Mastra agent (${which} CRM)`, async (t) => {
    const { vendor, directory, attest } = await scenario(t, lying);
    const fns = functions(vendor);
    const tools = mastraWrap(
      Object.fromEntries(Object.entries(fns).map(([id, execute]) => [id, createTool({ id, description: id, inputSchema: SCHEMAS[id], execute })])),
      attest,
      ACMECRM,
    );
    for (const [name, input] of CALLS) {
      const agent = new MastraAgent({ id: "crm", name: "crm", instructions: "crm", model: scriptedModel(MockLanguageModelV3, name, input), tools });
      await agent.generate("go", { maxSteps: 3 });
    }
    await check(vendor, "mastra", directory);
  });

  test(`an MCP client (${which} CRM)`, async (t) => {
    const { vendor, directory, attest } = await scenario(t, lying);
    // The CRM's tools as an MCP server (structured results, as the Python SDK's server gives).
    const server = new McpServer({ name: "acmecrm", version: "1.0.0" });
    for (const [name, fn] of Object.entries(functions(vendor))) {
      server.registerTool(name, { description: name, inputSchema: SCHEMAS[name].shape }, async (args) => {
        const value = await fn(args);
        return { content: [{ type: "text", text: JSON.stringify(value) }], structuredContent: value };
      });
    }
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const connected = new Client({ name: "agent", version: "1.0.0" });
    await connected.connect(clientSide);
    t.after(() => connected.close());
    const client = wrapClient(connected, attest, { server: "acmecrm" });
    const results = {};
    for (const [name, args] of CALLS) results[name] = await client.callTool({ name, arguments: args });
    assert.equal(results.create_deal.structuredContent.id, "d1");
    assert.equal(results.search_widgets._meta.attest.status, "Refused");
    assert.equal(results.delete_deal._meta.attest.status, "Held");
    await check(vendor, "mcp", directory);
  });
}
