// From an ES module: the configuration file decides as it does for the binary, and a bad
// one throws the typed error with the binary's own message (file, line, key).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";

import { Attest, AttestError, ConfigError, PolicyError } from "attest-agents";
import helpers from "./helpers.cjs";

const { Cli, project, attestBinary } = helpers;

function binary(directory, ...args) {
  return spawnSync(attestBinary(), args, { cwd: directory, encoding: "utf8", env: { PATH: process.env.PATH } });
}

test("the configuration file names the ledger, and an option beats it", async (t) => {
  const where = project(t);
  fs.mkdirSync(path.join(where.directory, ".attest"), { recursive: true });
  const config = path.join(where.directory, ".attest", "config.yaml");
  fs.writeFileSync(config, "ledger: audit.sqlite\nagent: file-agent\n");
  const fromFile = new Attest({ config });
  t.after(() => fromFile.close());
  await fromFile.record("deploy", { service: "web" }, { system: "k8s", verb: "update" });
  const [row] = new Cli({ ...where, ledger: path.join(where.directory, ".attest", "audit.sqlite") }).entries();
  assert.equal(row.agent, "file-agent");

  const overridden = new Attest({ config, ledger: where.ledger, agent: "option-agent" });
  t.after(() => overridden.close());
  await overridden.record("deploy", { service: "web" }, { system: "k8s", verb: "update" });
  const [own] = new Cli(where).entries();
  assert.equal(own.agent, "option-agent");
});

for (const [what, text, where] of [
  ["an unknown key", "ledger: audit.sqlite\nledgr: typo.sqlite\n", "config.yaml:2:1: unknown field `ledgr`"],
  ["a wrong type", "recipes: 3\n", "config.yaml:1:"],
  ["a bad value", "durability: sometimes\n", "durability"],
]) {
  test(`${what} in the configuration file throws ConfigError with the binary's message`, (t) => {
    const { directory } = project(t);
    fs.mkdirSync(path.join(directory, ".attest"), { recursive: true });
    const config = path.join(directory, ".attest", "config.yaml");
    fs.writeFileSync(config, text);
    // Found as the binary finds it: `.attest/config.yaml` in the working directory.
    const cwd = process.cwd();
    process.chdir(directory);
    t.after(() => process.chdir(cwd));
    const raised = (() => {
      try {
        new Attest();
      } catch (error) {
        return error;
      }
      return assert.fail("a bad configuration opened");
    })();
    assert.ok(raised instanceof ConfigError, String(raised));
    assert.ok(raised instanceof AttestError);
    assert.ok(raised.message.includes(where), raised.message);
    const out = binary(directory, "pending");
    assert.notEqual(out.status, 0);
    assert.ok(out.stderr.includes(raised.message), `node: ${raised.message}\nbinary: ${out.stderr}`);
  });
}

test("a named file that is missing is an error, not a fallback", (t) => {
  const { directory } = project(t);
  assert.throws(() => new Attest({ config: path.join(directory, "missing.yaml") }), (error) =>
    error instanceof ConfigError && error.message.includes("missing.yaml"));
});

test("a policy that does not load throws PolicyError naming its file and line", (t) => {
  const { directory, ledger } = project(t);
  const policy = path.join(directory, "broken.yaml");
  fs.writeFileSync(policy, "version: 1\npolicies:\n  - name: x\n    decison: refuse\n");
  assert.throws(() => new Attest({ ledger, policy }), (error) => {
    assert.ok(error instanceof PolicyError, String(error));
    assert.ok(error instanceof ConfigError);
    assert.ok(error.message.includes("broken.yaml:4"), error.message);
    return true;
  });
});
