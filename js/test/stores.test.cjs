// The other ledgers the binary opens: a tenant's own chain, and a PostgreSQL database
// (the test server at 127.0.0.1:5432, a database of this test's own).
"use strict";

const assert = require("node:assert/strict");
const { spawnSync } = require("node:child_process");
const crypto = require("node:crypto");
const { test } = require("node:test");

const { Attest } = require("attest-agents");
const { Cli, project } = require("./helpers.cjs");

const SERVER = process.env.ATTEST_TEST_PG || "postgres://postgres@127.0.0.1:5432";

test("a tenant's calls go to the tenant's own chain, numbered from 1", async (t) => {
  const where = project(t);
  const cli = new Cli(where);
  for (const tenant of ["acme", undefined]) {
    const attest = new Attest({ ledger: where.ledger, policy: where.policy, agent: "js-agent", tenant });
    await attest.record("deploy", { service: tenant ?? "default" }, { system: "k8s", verb: "update" });
    await attest.record("deploy", { service: tenant ?? "default" }, { system: "k8s", verb: "update" });
    await attest.close();
  }
  const acme = cli.run(["--tenant", "acme", "export"]).stdout.trim().split("\n").map((line) => JSON.parse(line));
  assert.deepEqual(acme.map((row) => row.seq), [1, 2]);
  assert.deepEqual(cli.entries().map((row) => row.seq), [1, 2]);
  cli.run(["--tenant", "acme", "verify"]);
});

/** A database of this test's own on the test server, or why there is none. */
function database(t) {
  const name = `attest_js_${crypto.randomBytes(6).toString("hex")}`;
  const psql = (sql) => spawnSync("psql", [`${SERVER}/test`, "-Atqc", sql], { encoding: "utf8" });
  const created = psql(`CREATE DATABASE ${name}`);
  if (created.error || created.status !== 0) {
    const why = `no PostgreSQL at ${SERVER} (${created.error?.message ?? created.stderr.trim()})`;
    // A peer that is missing skips visibly, except where every peer must be there (CI).
    if (process.env.ATTEST_REQUIRE_PEERS === "1") assert.fail(`${why}, and ATTEST_REQUIRE_PEERS=1`);
    return { why };
  }
  t.after(() => psql(`DROP DATABASE ${name} WITH (FORCE)`));
  return { url: `${SERVER}/${name}` };
}

test("a postgres:// ledger: Node and the binary append to one chain that verifies", async (t) => {
  const { url, why } = database(t);
  if (why) return t.skip(why);
  const where = project(t);
  const cli = new Cli({ ...where, ledger: url });
  const attest = new Attest({ ledger: url, policy: where.policy, agent: "js-agent" });
  t.after(() => attest.close());
  const getNote = attest.tool({ system: "notes", verb: "read" }, async ({ noteId }) => ({ id: noteId }));
  await getNote({ noteId: "n1" });
  const { receipt } = await getNote.withReceipt({ noteId: "n2" });
  assert.equal(receipt.seq, 2);
  const rows = cli.entries();
  assert.deepEqual(rows.map((row) => [row.seq, row.agent]), [[1, "js-agent"], [2, "js-agent"]]);
  assert.equal(rows[1].action_id, receipt.actionId);
  cli.run(["verify"]);
});
