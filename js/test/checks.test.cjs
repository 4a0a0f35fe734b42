// A tool's own checks of its result: `verify` (yes or no) and `readBack` (fetches the
// record from the vendor; Attest compares), against a real HTTP vendor on 127.0.0.1 that
// is honest or lies about what it stored.
"use strict";

const assert = require("node:assert/strict");
const fs = require("node:fs");
const http = require("node:http");
const path = require("node:path");
const { test } = require("node:test");

const { Attest } = require("attest-agents");
const { Cli, project } = require("./helpers.cjs");

// Contacts are written without asking, so each test is about verification alone.
const POLICY = `version: 1
policies:
  - name: crm-writes-run
    match: {system: crm}
    decision: act
`;

/** A CRM on 127.0.0.1: POST /contacts stores a contact, GET /contacts/ID returns it; a lying one stores another name. */
async function vendor(t, { lying }) {
  const contacts = new Map();
  const requests = [];
  const server = http.createServer((request, response) => {
    let body = "";
    request.on("data", (chunk) => { body += chunk; });
    request.on("end", () => {
      requests.push(`${request.method} ${request.url}`);
      if (request.method === "POST") {
        const contact = JSON.parse(body);
        contacts.set(contact.id, lying ? { ...contact, name: "Mallory" } : contact);
        response.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify({ id: contact.id }));
        return;
      }
      const found = contacts.get(request.url.split("/").pop());
      response.writeHead(found ? 200 : 404, { "content-type": "application/json" }).end(JSON.stringify(found ?? null));
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => server.close());
  const base = `http://127.0.0.1:${server.address().port}`;
  const call = async (method, route, body) => {
    const response = await fetch(`${base}${route}`, {
      method,
      headers: { "content-type": "application/json" },
      body: body && JSON.stringify(body),
    });
    return response.status === 404 ? null : response.json();
  };
  return { requests, post: (route, body) => call("POST", route, body), get: (route) => call("GET", route) };
}

function acting(t) {
  const where = project(t);
  fs.writeFileSync(path.join(where.directory, "crm.yaml"), POLICY);
  where.policy = path.join(where.directory, "crm.yaml");
  const attest = new Attest({ ledger: where.ledger, policy: where.policy, agent: "js-agent", durability: "normal" });
  t.after(() => attest.close());
  return { attest, cli: new Cli(where) };
}

for (const lying of [false, true]) {
  test(`readBack compares the record the ${lying ? "lying" : "honest"} vendor kept`, async (t) => {
    const { attest, cli } = acting(t);
    const crm = await vendor(t, { lying });
    const createContact = attest.tool(
      { system: "crm", verb: "create", readBack: async function getContact(result) { return crm.get(`/contacts/${result.id}`); } },
      async (contact) => crm.post("/contacts", contact),
    );
    const { value, receipt } = await createContact.withReceipt({ id: "c1", name: "Ada", stage: "lead" });
    assert.deepEqual(value, { id: "c1" });
    const want = lying ? "unverified" : "verified";
    assert.equal(receipt.level, want);
    const { verification } = cli.entries().at(-1);
    assert.equal(verification.method, "read-back:getContact");
    assert.equal(verification.level, want);
    const fields = Object.fromEntries(verification.evidence.fields.map((field) => [field.field, field.ok]));
    assert.deepEqual(fields, { id: true, name: !lying, stage: true });
    assert.ok(crm.requests.includes("GET /contacts/c1"));
    cli.run(["verify"]);
  });

  test(`verify says whether the ${lying ? "lying" : "honest"} vendor's write landed`, async (t) => {
    const { attest, cli } = acting(t);
    const crm = await vendor(t, { lying });
    const seen = [];
    const createContact = attest.tool(
      {
        system: "crm",
        verb: "create",
        verify: async (result, params) => {
          seen.push(params.name);
          return (await crm.get(`/contacts/${result.id}`)).name === params.name;
        },
      },
      async (contact) => crm.post("/contacts", contact),
    );
    const { receipt } = await createContact.withReceipt({ id: "c2", name: "Ada" });
    assert.deepEqual(seen, ["Ada"]);
    assert.equal(receipt.level, lying ? "unverified" : "verified-custom");
    assert.equal(cli.entries().at(-1).verification.method, "custom");
  });
}

test("a check that finds nothing or throws degrades the row, never to unverified", async (t) => {
  const { attest, cli } = acting(t);
  const updateContact = attest.tool(
    { system: "crm", verb: "update", readBack: async () => null },
    async ({ id }) => ({ id, ok: true }),
  );
  const renameContact = attest.tool(
    { system: "crm", verb: "update", readBack: async () => { throw new Error("vendor down"); } },
    async ({ id }) => ({ id, ok: true }),
  );
  const checkContact = attest.tool(
    { system: "crm", verb: "update", verify: () => { throw new Error("vendor down"); } },
    async ({ id }) => ({ id, ok: true }),
  );
  for (const [tool, degraded] of [[updateContact, /no record/], [renameContact, /could not run/], [checkContact, /./]]) {
    const { receipt } = await tool.withReceipt({ id: "c9", name: "Bob" });
    assert.notEqual(receipt.level, "unverified");
    assert.notEqual(receipt.level, "verified");
    const { verification } = cli.entries().at(-1);
    assert.match(JSON.stringify(verification.evidence ?? verification), degraded);
  }
});

// Only `true` confirms and only `false` contradicts, as in Python: any other answer is no
// answer, and the row degrades (never verified-custom, never unverified).
for (const [name, answer] of [
  ["{ok: false}", { ok: false }],
  ['"false"', "false"],
  ["[]", []],
]) {
  test(`a verify answering ${name} is not a yes: the row degrades`, async (t) => {
    const { attest, cli } = acting(t);
    const updateContact = attest.tool(
      { system: "crm", verb: "update", verify: async () => answer },
      async ({ id }) => ({ id, ok: true }),
    );
    const { receipt } = await updateContact.withReceipt({ id: "c7", name: "Ada" });
    assert.equal(receipt.level, "acknowledged");
    const { verification } = cli.entries().at(-1);
    assert.equal(verification.method, "custom");
    assert.equal(verification.level, "acknowledged");
    assert.equal(verification.evidence.degraded, "custom check could not run");
  });
}
