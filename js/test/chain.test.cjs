// One chain, many writers: this Node process, two more Node processes, a Python process
// (the Python package, when $ATTEST_PYTHON names an interpreter that has it) and the
// binary append to one ledger at the same time, and `attest verify` passes.
"use strict";

const assert = require("node:assert/strict");
const { execFile } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");
const { test } = require("node:test");
const { promisify } = require("node:util");

const { Attest } = require("attest-agents");
const { Cli, project } = require("./helpers.cjs");

const run = promisify(execFile);
const PACKAGE = path.resolve(__dirname, "..");

const NODE_WRITER = `
const { Attest } = require(process.argv[1]);
(async () => {
  const attest = new Attest({ ledger: process.argv[2], policy: process.argv[3], agent: process.argv[4], durability: "normal" });
  const getNote = attest.tool({ system: "notes", verb: "read" }, async ({ noteId }) => ({ id: noteId }));
  for (let i = 0; i < 10; i += 1) await getNote({ noteId: "c" + i });
  await attest.close();
})().catch((error) => { console.error(error); process.exit(1); });
`;

const PYTHON_WRITER = `
import sys, attest
a = attest.Attest(ledger=sys.argv[1], policy=sys.argv[2], agent="py-agent", durability="normal")

@a.tool(system="notes", verb="read")
def get_note(note_id: str) -> dict:
    return {"id": note_id}

for i in range(10):
    get_note(f"p{i}")
`;

/** The Python interpreter with the `attest` package, or why there is none. */
function python() {
  const interpreter = process.env.ATTEST_PYTHON;
  if (interpreter && fs.existsSync(interpreter)) return { interpreter };
  const why = "no Python with the attest package ($ATTEST_PYTHON, e.g. .ci/pyvenv/bin/python3)";
  // A peer that is missing skips visibly, except where every peer must be there (CI).
  if (process.env.ATTEST_REQUIRE_PEERS === "1") assert.fail(`${why}, and ATTEST_REQUIRE_PEERS=1`);
  return { why };
}

test("Node processes, a Python process and the binary append to one chain that verifies", async (t) => {
  const where = project(t);
  const cli = new Cli(where);
  const attest = new Attest({ ledger: where.ledger, policy: where.policy, agent: "js-agent", durability: "normal" });
  t.after(() => attest.close());
  const getNote = attest.tool({ system: "notes", verb: "read" }, async ({ noteId }) => ({ id: noteId }));
  await getNote({ noteId: "first" });

  const lines = path.join(where.directory, "done.jsonl");
  fs.writeFileSync(lines, `${JSON.stringify({ system: "crm", verb: "update", agent: "cli-agent", params: { id: "1" } })}\n`);
  const binaryArgs = ["--ledger", where.ledger, "--policy", where.policy];
  const { interpreter, why } = python();
  if (why) t.diagnostic(`skipped the Python writer: ${why}`);

  const writers = [
    ...["node-a", "node-b"].map((agent) =>
      run(process.execPath, ["-e", NODE_WRITER, PACKAGE, where.ledger, where.policy, agent])),
    ...(interpreter ? [run(interpreter, ["-c", PYTHON_WRITER, where.ledger, where.policy])] : []),
    (async () => {
      for (let i = 0; i < 3; i += 1) await run(cli.binary, [...binaryArgs, "import", lines], { cwd: where.directory });
    })(),
    (async () => {
      for (let i = 0; i < 10; i += 1) await getNote({ noteId: `n${i}` });
    })(),
  ];
  await Promise.all(writers);

  const rows = cli.entries();
  const count = (agent) => rows.filter((row) => row.agent === agent).length;
  assert.equal(count("js-agent"), 11);
  assert.equal(count("node-a"), 10);
  assert.equal(count("node-b"), 10);
  assert.equal(count("cli-agent"), 3);
  if (interpreter) assert.equal(count("py-agent"), 10);
  assert.deepEqual(rows.map((row) => row.seq), rows.map((_, i) => i + 1));
  const verified = cli.run(["verify"]);
  assert.match(verified.stdout.toLowerCase(), /intact/);
});
