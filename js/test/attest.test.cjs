// The package itself, from CommonJS: governed tools, typed outcomes, receipts, held calls
// answered with the `attest` binary, `record`, one ledger shared with the binary.
"use strict";

const assert = require("node:assert/strict");
const path = require("node:path");
const { test } = require("node:test");

const { Attest, AttestError, Held, Refused, Rejected } = require("attest-agents");
const { Cli, project } = require("./helpers.cjs");
const execFile = require("node:util").promisify(require("node:child_process").execFile);

function open(t, where, options = {}) {
  const attest = new Attest({ ledger: where.ledger, policy: where.policy, agent: "js-agent", durability: "normal", ...options });
  t.after(() => attest.close());
  return attest;
}

test("an allowed call runs and resolves with the tool's own value", async (t) => {
  const where = project(t);
  const attest = open(t, where);
  const note = { id: "n1", title: "groceries", when: new Date(0) };
  const getNote = attest.tool({ system: "notes", verb: "read" }, async ({ noteId }) => ({ ...note, id: noteId }));
  const { value, receipt } = await getNote.withReceipt({ noteId: "n1" });
  assert.deepEqual(value, note);
  assert.ok(value.when instanceof Date, "the caller gets the object the tool made, not its JSON");
  assert.equal(receipt.decision, "act");
  assert.equal(receipt.level, "acknowledged");
  assert.equal(receipt.seq, 1);
  assert.match(receipt.entryHash, /^[0-9a-f]{64}$/);
  assert.deepEqual(receipt.reasons, ["low risk (notes.read): acts"]);
  assert.deepEqual(await getNote({ noteId: "n2" }), { ...note, id: "n2" });

  const rows = new Cli(where).entries();
  assert.deepEqual(rows[0], { ...rows[0], system: "notes", verb: "read", agent: "js-agent", decision: "act", seq: 1 });
  assert.equal(rows[0].action_id, receipt.actionId);
  assert.equal(rows[1].prev, receipt.entryHash, "the receipt's hash is the one the next row chains to");
  assert.ok(!JSON.stringify(rows).includes("groceries"), "results never enter the ledger");
});

test("system and verb are detected from the function's name", async (t) => {
  const where = project(t);
  const attest = open(t, where);
  const listIssues = attest.tool({}, async function list_issues() { return []; });
  assert.deepEqual(await listIssues({ repo: "acme/web" }), []);
  const [row] = new Cli(where).entries();
  assert.equal(row.verb, "list");
  assert.equal(row.decision, "act");
});

test("a refused call never runs and throws Refused with its row", async (t) => {
  const where = project(t);
  const attest = open(t, where);
  const ran = [];
  const refund = attest.tool({ system: "stripe", verb: "pay" }, async ({ charge }) => { ran.push(charge); return { id: "re_1" }; });
  const refused = await refund({ charge: "ch_1", amount: 5000 }).then(
    () => assert.fail("a refused call resolved"),
    (error) => error,
  );
  assert.ok(refused instanceof Refused);
  assert.ok(refused instanceof AttestError);
  assert.match(refused.message, /agents do not move money/);
  assert.equal(refused.receipt.decision, "refuse");
  assert.deepEqual(ran, []);
  const [row] = new Cli(where).entries();
  assert.equal(row.decision, "refuse");
});

test("a held call runs once after `attest confirm`, by retry and by resume token", async (t) => {
  const where = project(t);
  const attest = open(t, where);
  const cli = new Cli(where);
  const calls = [];
  const createNote = attest.tool({ system: "notes", verb: "create" }, async ({ title }) => {
    calls.push(title);
    return { id: "n2", title };
  });

  const held = await createNote({ title: "plan" }).catch((error) => error);
  assert.ok(held instanceof Held, String(held));
  assert.match(held.token, /^atr_/);
  assert.ok(held.requestId);
  assert.equal(held.link, `http://127.0.0.1:8321/requests/${held.requestId}`);
  assert.equal(held.receipt.decision, "ask");
  // Still waiting: the same call again is held again and still does not run.
  await assert.rejects(createNote({ title: "plan" }), Held);
  assert.deepEqual(calls, []);
  assert.equal((await attest.request(held.requestId)).status, "pending");

  cli.confirm(held.requestId);
  // The agent makes the same call again: now it runs, once.
  const { value, receipt } = await createNote.withReceipt({ title: "plan" });
  assert.deepEqual(value, { id: "n2", title: "plan" });
  assert.deepEqual(calls, ["plan"]);
  assert.equal(receipt.decision, "ask");
  assert.equal(receipt.approver, "ann@acme.com");
  // Its token is spent: resuming it again does not run the tool a second time.
  await assert.rejects(attest.resume(held.token, async () => calls.push("again")), AttestError);
  assert.deepEqual(calls, ["plan"]);

  // A second held call, resumed by its token (as another process would, with the token alone).
  const second = await createNote({ title: "draft" }).catch((error) => error);
  assert.ok(second instanceof Held);
  cli.confirm(second.requestId);
  const other = new Attest({ ledger: where.ledger, policy: where.policy, agent: "js-agent" });
  t.after(() => other.close());
  assert.deepEqual(await other.resume(second.token, async (params) => { calls.push(params.title); return { ok: true }; }), { ok: true });
  assert.deepEqual(calls, ["plan", "draft"]);
  const outcomes = cli.entries().filter((row) => row.execution.status !== "intent");
  assert.equal(outcomes.at(-1).execution.status, "ok");
  cli.run(["verify"]);
});

test("a rejected call throws Rejected naming the approver", async (t) => {
  const where = project(t);
  const attest = open(t, where);
  const cli = new Cli(where);
  const deleteNote = attest.tool({ system: "notes", verb: "delete" }, async () => assert.fail("must not run"));
  const held = await deleteNote({ noteId: "n1" }).catch((error) => error);
  assert.ok(held instanceof Held);
  cli.confirm(held.requestId, "reject", "raj@acme.com");
  const rejected = await deleteNote({ noteId: "n1" }).catch((error) => error);
  assert.ok(rejected instanceof Rejected, String(rejected));
  assert.equal(rejected.approver, "raj@acme.com");
});

test("a tool that throws is recorded as failed and its error reaches the caller unchanged", async (t) => {
  const where = project(t);
  const attest = open(t, where);
  class NotFound extends Error {}
  const thrown = new NotFound("no note n9");
  const getNote = attest.tool({ system: "notes", verb: "read" }, async () => { throw thrown; });
  await assert.rejects(getNote({ noteId: "n9" }), (error) => error === thrown);
  const [row] = new Cli(where).entries();
  assert.equal(row.execution.status, "failed");
  assert.ok(!JSON.stringify(row).includes("no note n9"), "only the failure's hash is recorded");
});

test("a result JSON cannot say (a cycle) still reaches the caller unchanged, with its row", async (t) => {
  const where = project(t);
  const attest = open(t, where);
  const node = { id: "n1" };
  node.self = node;
  const getNote = attest.tool({ system: "notes", verb: "read" }, async () => node);
  assert.equal(await getNote({ noteId: "n1" }), node);
  const [row] = new Cli(where).entries();
  assert.equal(row.execution.status, "ok");
});

test("record writes a recorded row and resolves with its receipt", async (t) => {
  const where = project(t);
  const attest = open(t, where);
  const receipt = await attest.record("deploy", { service: "web" }, { system: "k8s", verb: "update", result: { id: "d1" } });
  assert.equal(receipt.decision, "recorded");
  assert.equal(receipt.seq, 1);
  const [row] = new Cli(where).entries();
  assert.equal(row.decision, "recorded");
  assert.equal(row.system, "k8s");
});

test("a call after close() throws AttestError and never crashes the process", async (t) => {
  const where = project(t);
  const attest = open(t, where);
  const getNote = attest.tool({ system: "notes", verb: "read" }, async () => assert.fail("must not run"));
  await attest.close();
  await assert.rejects(getNote({ noteId: "n1" }), (error) => error instanceof AttestError && /closed/.test(error.message));
  await assert.rejects(attest.record("deploy", {}), AttestError);
});

test("the event loop runs while a call waits: a person answers it from a timer", async (t) => {
  // The ask waits up to two minutes for a person. The only person is a timer on this
  // event loop that lists the pending request with the binary (asynchronously) and
  // approves it: if a governed call blocked Node's main thread, the timer could not run
  // and the call would come back Held instead of running.
  const where = project(t);
  const attest = open(t, where, { wait: 120 });
  const cli = new Cli(where);
  cli.run(["approvers", "add", "ann@acme.com", "--json"]);
  const token = JSON.parse(cli.run(["approvers", "add", "bob@acme.com", "--json"]).stdout).token;
  const createNote = attest.tool({ system: "notes", verb: "create" }, async ({ title }) => ({ id: "n1", title }));
  const binaryArgs = ["--ledger", where.ledger, "--policy", where.policy];
  const answered = (async () => {
    for (let attempt = 0; attempt < 600; attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const { stdout } = await execFile(cli.binary, [...binaryArgs, "pending", "--json"], { cwd: where.directory });
      const [request] = JSON.parse(stdout);
      if (request) {
        await execFile(cli.binary, [...binaryArgs, "confirm", request.id, "approve"], {
          cwd: where.directory,
          env: { PATH: process.env.PATH, ATTEST_APPROVER_TOKEN: token },
        });
        return request.id;
      }
    }
    throw new Error("no request was filed");
  })();
  const { value, receipt } = await createNote.withReceipt({ title: "plan" });
  assert.ok(await answered);
  assert.deepEqual(value, { id: "n1", title: "plan" });
  assert.equal(receipt.approver, "bob@acme.com");
});

test("checkpoint signs the ledger's head with the key beside it, and the binary verifies it", async (t) => {
  const where = project(t);
  const cli = new Cli(where);
  const vkey = cli.run(["keygen"]).stdout.trim().split("\n").at(-1);
  const attest = open(t, where, { key: path.join(path.dirname(where.ledger), "signing.key") });
  await attest.record("deploy", { service: "web" }, { system: "k8s", verb: "update" });
  const note = await attest.checkpoint();
  assert.ok(note.startsWith("attest-ledger\n1\n"), note);
  assert.ok(note.includes("\n\u2014 attest-ledger "), note);
  assert.match(cli.run(["verify", "--vkey", vkey]).stdout.toLowerCase(), /intact/);
});

test("bad input never runs the tool and never crashes: an unknown verb, params JSON cannot say", async (t) => {
  const where = project(t);
  const attest = open(t, where);
  const ran = [];
  const badVerb = attest.tool({ system: "notes", verb: "frobnicate" }, async () => ran.push("verb"));
  await assert.rejects(badVerb({ noteId: "n1" }), (error) => error instanceof AttestError && /frobnicate/.test(error.message));
  const cyclic = {};
  cyclic.self = cyclic;
  const getNote = attest.tool({ system: "notes", verb: "read" }, async () => ran.push("cycle"));
  await assert.rejects(getNote(cyclic), (error) => error instanceof AttestError && /no JSON form/.test(error.message));
  await assert.rejects(attest.resume("atr_not-a-token", async () => ran.push("token")), AttestError);
  assert.deepEqual(ran, []);
  assert.deepEqual(new Cli(where).entries(), []);
});
