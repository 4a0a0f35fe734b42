// The MCP client adapter with the official TypeScript SDK: a real McpServer and Client
// joined by the SDK's in-memory transport (no network); the model's `callTool` goes
// through Attest, described as the MCP proxy describes a call.
"use strict";

const assert = require("node:assert/strict");
const { test } = require("node:test");

const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { InMemoryTransport } = require("@modelcontextprotocol/sdk/inMemory.js");
const { McpServer } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { z } = require("zod");

const { Attest } = require("attest-agents");
const { wrapClient } = require("attest-agents/mcp");
const { Cli, project } = require("./helpers.cjs");

async function setup(t, options) {
  const where = project(t);
  const attest = new Attest({ ledger: where.ledger, policy: where.policy, agent: "mcp-agent", durability: "normal" });
  t.after(() => attest.close());
  const ran = [];
  const server = new McpServer({ name: "notes", version: "1.0.0" });
  const text = (value) => ({ content: [{ type: "text", text: value }] });
  server.registerTool("get_note", { inputSchema: { id: z.string() }, annotations: { readOnlyHint: true } }, async ({ id }) => {
    ran.push(["get_note", id]);
    return text(`note ${id}: groceries`);
  });
  server.registerTool("delete_note", { inputSchema: { id: z.string() }, annotations: { destructiveHint: true } }, async ({ id }) => {
    ran.push(["delete_note", id]);
    return text(`deleted ${id}`);
  });
  server.registerTool("find_note", { inputSchema: { title: z.string() }, annotations: { readOnlyHint: true } }, async ({ title }) => {
    ran.push(["find_note", title]);
    return { content: [{ type: "text", text: JSON.stringify({ id: "n2", title }) }] };
  });
  server.registerTool("search_notes", { inputSchema: { q: z.string() }, annotations: { readOnlyHint: true } }, async ({ q }) => {
    ran.push(["search_notes", q]);
    return { content: [{ type: "text", text: `the index is rebuilding (${q})` }], isError: true };
  });
  server.registerTool("refund_payment", { inputSchema: { charge: z.string() } }, async ({ charge }) => {
    ran.push(["refund_payment", charge]);
    return text("refunded");
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: "agent", version: "1.0.0" });
  await client.connect(clientSide);
  t.after(() => client.close());
  return { client: wrapClient(client, attest, options), ran, cli: new Cli(where) };
}

test("a wrapped MCP client's read runs through Attest; every other method is the client's own", async (t) => {
  const { client, ran, cli } = await setup(t, { server: "notes" });
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((tool) => tool.name).sort(), ["delete_note", "find_note", "get_note", "refund_payment", "search_notes"]);
  const result = await client.callTool({ name: "get_note", arguments: { id: "n1" } });
  assert.deepEqual(result.content, [{ type: "text", text: "note n1: groceries" }]);
  assert.ok(!result.isError);
  assert.deepEqual(ran, [["get_note", "n1"]]);
  const [row] = cli.entries();
  assert.deepEqual([row.system, row.verb, row.agent, row.decision], ["notes", "get", "mcp-agent", "act"]);
  assert.equal(row.source, "mcp");
});

test("a refused MCP call does not reach the server and answers isError with the reason", async (t) => {
  const { client, ran, cli } = await setup(t, {});
  const result = await client.callTool({ name: "refund_payment", arguments: { charge: "ch_1" } });
  assert.equal(result.isError, true);
  assert.match(result.content[0].text, /agents do not move money: the tool did not run/);
  assert.equal(result._meta.attest.status, "Refused");
  assert.deepEqual(ran, []);
  assert.equal(cli.entries()[0].decision, "refuse");
});

test("a destructive MCP tool is held for a person and runs once after approval", async (t) => {
  const { client, ran, cli } = await setup(t, { server: "notes" });
  const held = await client.callTool({ name: "delete_note", arguments: { id: "n1" } });
  assert.equal(held.isError, true);
  const { requestId, link, status } = held._meta.attest;
  assert.equal(status, "Held");
  assert.equal(link, `http://127.0.0.1:8321/requests/${requestId}`);
  assert.match(held.content[0].text, /once a person approves/);
  assert.deepEqual(ran, []);
  assert.equal(cli.entries()[0].tier, "very_high", "the tool's destructiveHint made it a delete-level risk");

  cli.confirm(requestId);
  const result = await client.callTool({ name: "delete_note", arguments: { id: "n1" } });
  assert.deepEqual(result.content, [{ type: "text", text: "deleted n1" }]);
  assert.deepEqual(ran, [["delete_note", "n1"]]);
  assert.equal(cli.entries().at(-1).execution.status, "ok");
});

test("an MCP result is recorded as the proxy records it: one JSON text block is the result, an isError result a failed execution", async (t) => {
  const { client, ran, cli } = await setup(t, { server: "notes" });
  const created = await client.callTool({ name: "find_note", arguments: { title: "plan" } });
  assert.deepEqual(created.content, [{ type: "text", text: '{"id":"n2","title":"plan"}' }], "the caller gets the server's result");
  const failed = await client.callTool({ name: "search_notes", arguments: { q: "plan" } });
  assert.deepEqual(failed, { content: [{ type: "text", text: "the index is rebuilding (plan)" }], isError: true }, "handed back as the server gave it");
  assert.deepEqual(ran, [["find_note", "plan"], ["search_notes", "plan"]]);
  const outcomes = cli.entries().filter((row) => row.execution.status !== "intent");
  const [createdRow, failedRow] = outcomes;
  assert.equal(createdRow.execution.status, "ok");
  // The hash is of the payload's canonical JSON (JCS: keys sorted, no spaces), as the proxy's rows are.
  const sha256 = (text) => require("node:crypto").createHash("sha256").update(text).digest("hex");
  assert.equal(createdRow.execution.result_hash, sha256('{"id":"n2","title":"plan"}'), JSON.stringify(createdRow));
  assert.equal(failedRow.execution.status, "failed");
});
