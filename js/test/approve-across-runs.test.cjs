// Approve, then run the program again: each run is a new Node process. The first is held;
// after `attest confirm ID approve` the next run makes the same call and it runs, once,
// under that approval (no new request); the run after that asks anew.
"use strict";

const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const { spawnSync } = require("node:child_process");
const { test } = require("node:test");
const { Cli, project } = require("./helpers.cjs");

const PROGRAM = `
const fs = require("node:fs");
const [ledger, policy, log, pkg] = process.argv.slice(2);
const { Attest, Held } = require(pkg);
const attest = new Attest({ ledger, policy, agent: "js-agent", durability: "normal" });
const createNote = attest.tool({ system: "notes", verb: "create", runId: "fixed-run-1" }, async ({ title }) => {
  fs.appendFileSync(log, title + "\\n");
  return { id: "n1" };
});
createNote({ title: "plan" }).then(
  () => console.log(JSON.stringify({ ran: true })),
  (error) => {
    if (!(error instanceof Held)) throw error;
    console.log(JSON.stringify({ held: error.requestId, link: error.link }));
  },
).finally(() => attest.close());
`;

/** One run of the program, in a process of its own; what it printed. */
function runProgram(where) {
  const script = path.join(where.directory, "agent.cjs");
  fs.writeFileSync(script, PROGRAM);
  const log = path.join(where.directory, "tool.log");
  // The package as the tests load it: this checkout's js/.
  const out = spawnSync(process.execPath, [script, where.ledger, where.policy, log, path.join(__dirname, "..")], {
    encoding: "utf8",
    timeout: 120_000,
  });
  assert.equal(out.status, 0, out.stderr);
  return JSON.parse(out.stdout.trim().split("\n").at(-1));
}

function toolRuns(where) {
  const log = path.join(where.directory, "tool.log");
  return fs.existsSync(log) ? fs.readFileSync(log, "utf8").split("\n").filter(Boolean).length : 0;
}

test("an approved call runs once when the program runs again in a new process", (t) => {
  const where = project(t);
  const cli = new Cli(where);
  const first = runProgram(where);
  assert.ok(first.held, JSON.stringify(first));
  // The link a person opens is the request's own page in the inbox.
  assert.equal(first.link, `http://127.0.0.1:8321/requests/${first.held}`);
  // Run again before anyone decided: held under the same request, none filed anew.
  assert.deepEqual(runProgram(where), first);
  assert.equal(toolRuns(where), 0);

  cli.confirm(first.held);
  assert.deepEqual(runProgram(where), { ran: true });
  assert.equal(toolRuns(where), 1);
  const outcome = cli.entries().filter((row) => row.execution.status !== "intent").at(-1);
  assert.equal(outcome.execution.status, "ok");
  assert.equal(outcome.confirm.approver, "ann@acme.com");

  // Used once: the next run asks again, under a new request, and does not run.
  const third = runProgram(where);
  assert.ok(third.held && third.held !== first.held, JSON.stringify(third));
  assert.equal(toolRuns(where), 1);
  const pending = JSON.parse(cli.run(["pending", "--json"]).stdout);
  assert.deepEqual(pending.map((p) => p.id), [third.held]);
});
