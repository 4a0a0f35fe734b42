// `npm pack` of js/, then `npm install <tarball>` in a directory outside the repository:
// the tarball carries the engine's sources (engine/, a cargo workspace of its own that
// pack.cjs lays out), the install compiles them, and a governed call from the installed
// package lands in a ledger the binary verifies.
//
// The compile shares the workspace's target directory (CARGO_TARGET_DIR, else target/;
// ATTEST_PACK_TARGET_DIR overrides it) as a build cache, so CI does not build every
// registry crate twice. The tarball's engine crates are laid out as the repository's, so
// cargo gives them the same unit hashes, and npm extracts files with a fixed old mtime:
// cargo would take the in-repository build for theirs. So the test installs without
// scripts, marks the tarball's engine sources new (as a fresh checkout's are), then runs
// the install script (`npm rebuild attest`), and checks that cargo compiled the engine's
// crates from the tarball's copies.
"use strict";

const assert = require("node:assert/strict");
const { spawnSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { test } = require("node:test");

const { REPO, Cli } = require("./helpers.cjs");

const PACKAGE = path.join(REPO, "js");

function npm(args, options) {
  const npmCli = process.env.npm_execpath;
  const [command, prefix] = npmCli && npmCli.endsWith(".js") ? [process.execPath, [npmCli]] : ["npm", []];
  const out = spawnSync(command, [...prefix, ...args], { encoding: "utf8", timeout: 1_800_000, ...options });
  assert.equal(out.status, 0, `npm ${args.join(" ")}: ${out.status}\n${out.stdout}\n${out.stderr}`);
  return out;
}

test("npm pack's tarball installs outside the repository, compiles the engine and governs a call", async (t) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "attest-pack-"));
  t.after(() => fs.rmSync(directory, { recursive: true, force: true }));

  const [packed] = JSON.parse(npm(["pack", "--json", "--pack-destination", directory], { cwd: PACKAGE }).stdout);
  const files = new Set(packed.files.map((file) => file.path));
  for (const needed of [
    "engine/Cargo.toml",
    "engine/Cargo.lock",
    "engine/js/Cargo.toml",
    "engine/js/src/lib.rs",
    "engine/crates/attest-core/src/lib.rs",
    "engine/policies/default.yaml",
    "lib/index.cjs",
    "install.cjs",
  ]) {
    assert.ok(files.has(needed), `the tarball lacks ${needed}`);
  }
  assert.ok(!files.has("Cargo.toml"), "the tarball builds engine/, not a workspace member it cannot resolve");
  assert.ok(![...files].some((file) => file.startsWith("node_modules/") || file.includes("/target/")), "no build output packed");
  assert.ok(!fs.existsSync(path.join(PACKAGE, "engine")), "postpack removed engine/ from the repository");
  const members = fs.readFileSync(path.join(REPO, "Cargo.toml"), "utf8");
  assert.match(members, /"crates\/attest-cli"/, "the repository's own manifest is untouched");

  const consumer = path.join(directory, "consumer");
  fs.mkdirSync(consumer);
  fs.writeFileSync(path.join(consumer, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  const target = process.env.ATTEST_PACK_TARGET_DIR || process.env.CARGO_TARGET_DIR || path.join(REPO, "target");
  const env = { ...process.env, CARGO_TARGET_DIR: target };
  npm(["install", path.join(directory, packed.filename), "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline"], { cwd: consumer, env });
  const engine = path.join(consumer, "node_modules", "attest-agents", "engine");
  const now = new Date();
  for (const file of fs.readdirSync(engine, { recursive: true })) fs.utimesSync(path.join(engine, file), now, now);
  const built = npm(["rebuild", "attest-agents", "--foreground-scripts"], { cwd: consumer, env });
  const said = `${built.stdout}\n${built.stderr}`;
  for (const crate of ["attest-policy", "attest-ledger", "attest-core", "js"]) {
    const where = path.join("node_modules", "attest-agents", "engine", crate === "js" ? "js" : path.join("crates", crate));
    assert.ok(said.includes(`${where})`), `cargo did not compile ${where} from the tarball:\n${said}`);
  }
  const installed = path.join(consumer, "node_modules", "attest-agents");
  assert.ok(!fs.lstatSync(installed).isSymbolicLink(), "installed from the tarball, not linked to the repository");
  assert.ok(fs.existsSync(path.join(installed, "attest.node")), "the engine was compiled into the package");
  assert.ok(fs.existsSync(path.join(installed, "binding.d.ts")), "and its types generated");

  fs.writeFileSync(path.join(consumer, "policy.yaml"), "version: 1\npolicies:\n  - name: no-payments\n    match: {verb: pay}\n    decision: refuse\n    reason: agents do not move money\n");
  fs.writeFileSync(path.join(consumer, "example.mjs"), `import { Attest, Refused } from "attest-agents";
const attest = new Attest({ ledger: "ledger.sqlite", policy: "policy.yaml", agent: "packed" });
const getNote = attest.tool({ system: "notes", verb: "read" }, async ({ id }) => ({ id, title: "plan" }));
const { value, receipt } = await getNote.withReceipt({ id: "n1" });
console.log(JSON.stringify(value), receipt.decision);
try {
  await attest.tool({ system: "stripe", verb: "pay" }, async () => "paid")({ amount: 1 });
} catch (error) {
  console.log(error instanceof Refused ? "refused" : String(error));
}
await attest.close();
`);
  const ran = spawnSync(process.execPath, ["example.mjs"], { cwd: consumer, encoding: "utf8", env: { PATH: process.env.PATH } });
  assert.equal(ran.status, 0, ran.stderr);
  assert.equal(ran.stdout, '{"id":"n1","title":"plan"} act\nrefused\n');
  const cli = new Cli({ directory: consumer, ledger: path.join(consumer, "ledger.sqlite"), policy: path.join(consumer, "policy.yaml") });
  assert.deepEqual(cli.entries().map((row) => [row.agent, row.decision]), [["packed", "act"], ["packed", "refuse"]]);
  cli.run(["verify"]);
});
