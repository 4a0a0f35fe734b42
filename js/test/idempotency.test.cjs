// `idempotencyKey` (issue 33): a write made again with the same key and params does not
// run; it throws `Replayed` with the first call's receipt (as python/tests/test_idempotency.py).
"use strict";

const assert = require("node:assert/strict");
const { test } = require("node:test");

const { Attest, AttestError, Replayed } = require("attest-agents");
const { Cli, project } = require("./helpers.cjs");

test("a keyed write runs once, and a retry gets the first receipt", async (t) => {
  const where = project(t);
  const open = () => {
    const attest = new Attest({ ledger: where.ledger, policy: where.policy, agent: "js-agent", durability: "normal" });
    t.after(() => attest.close());
    return attest;
  };
  const attest = open();
  const calls = [];
  const updateNote = async ({ noteId, title }) => (calls.push(title), { id: noteId, ok: true });
  const spec = { name: "update_note", system: "notes", verb: "update", idempotencyKey: "js-key-1" };
  const params = { noteId: "n1", title: "plan" };
  const first = await attest.call(spec, params, updateNote);
  assert.deepEqual(first.value, { id: "n1", ok: true });
  // The same call again, from this Attest and from another one on the ledger.
  for (const again of [attest, open()]) {
    await assert.rejects(again.call(spec, params, updateNote), (error) => {
      assert.ok(error instanceof Replayed, String(error));
      assert.equal(error.receipt.seq, first.receipt.seq);
      assert.equal(error.receipt.level, first.receipt.level);
      return true;
    });
  }
  assert.deepEqual(calls, ["plan"], "the tool ran once");
  // The same key with other params is refused, and does not run.
  await assert.rejects(attest.call(spec, { noteId: "n1", title: "other" }, updateNote), (error) => {
    assert.ok(error instanceof AttestError && !(error instanceof Replayed), String(error));
    assert.match(error.message, /different call/);
    return true;
  });
  assert.deepEqual(calls, ["plan"]);
  // The key is on the intent row, and the ledger verifies.
  const cli = new Cli(where);
  const intents = cli.entries().filter((row) => row.execution.status === "intent");
  assert.deepEqual(
    intents.map((row) => row.idempotency_key),
    ["js-key-1"],
  );
  assert.match(cli.run(["verify"]).stdout.toLowerCase(), /intact/);
});
