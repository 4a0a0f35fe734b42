// Shared by the tests: a ledger in a temporary directory, the `attest` binary beside it,
// and a policy that refuses payments. Nothing here skips: a missing binary fails.
"use strict";

const assert = require("node:assert/strict");
const { execFileSync, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");

const REPO = path.resolve(__dirname, "..", "..");

const POLICY = `version: 1
policies:
  - name: no-payments
    match:
      verb: pay
    decision: refuse
    reason: agents do not move money
`;

/** The `attest` binary: $ATTEST_BIN, else the workspace's debug build. */
function attestBinary() {
  const binary = process.env.ATTEST_BIN || path.join(REPO, "target", "debug", "attest");
  assert.ok(fs.existsSync(binary), `no attest binary at ${binary}: run \`cargo build -p attest-cli\` (or set ATTEST_BIN)`);
  return binary;
}

/** A fresh directory with a policy file; `ledger` is where the ledger goes. */
function project(t) {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "attest-js-"));
  t.after(() => fs.rmSync(directory, { recursive: true, force: true }));
  const policy = path.join(directory, "policy.yaml");
  fs.writeFileSync(policy, POLICY);
  return { directory, policy, ledger: path.join(directory, ".attest", "ledger.sqlite") };
}

/** Runs the `attest` binary on one ledger, with a scrubbed environment. */
class Cli {
  constructor({ directory, ledger, policy }) {
    Object.assign(this, { directory, ledger, policy, binary: attestBinary() });
  }

  run(args, { env = {}, check = true } = {}) {
    const out = spawnSync(this.binary, ["--ledger", this.ledger, "--policy", this.policy, ...args], {
      cwd: this.directory,
      encoding: "utf8",
      env: { PATH: process.env.PATH, ...env },
      timeout: 120_000,
    });
    if (check) assert.equal(out.status, 0, `attest ${args.join(" ")}: ${out.status}\n${out.stdout}\n${out.stderr}`);
    return out;
  }

  /** Every ledger entry, in order (`attest export`). */
  entries() {
    return this.run(["export"]).stdout.split("\n").filter((line) => line.trim()).map((line) => JSON.parse(line));
  }

  /** Registers `approver` (once) and answers `requestId` as them, as a person would. */
  confirm(requestId, answer = "approve", approver = "ann@acme.com") {
    const added = this.run(["approvers", "add", approver, "--json"], { check: false });
    if (added.status === 0) this.token = JSON.parse(added.stdout).token;
    this.run(["confirm", requestId, answer], { env: { ATTEST_APPROVER_TOKEN: this.token } });
  }
}

// Hosts a test may connect to: this machine's loopback (the fake vendors, PostgreSQL).
const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);

/**
 * Refuses, for the rest of this test file, every connection to a host other than this
 * machine's loopback (a framework's telemetry, a model provider), and fails the file's
 * tests at its end if anything tried one: a framework that phones home fails the test
 * instead of reaching the network.
 */
function noNetwork() {
  const net = require("node:net");
  const tried = [];
  const connect = net.Socket.prototype.connect;
  net.Socket.prototype.connect = function guarded(...args) {
    // net.connect passes its normalized arguments as one array.
    const given = Array.isArray(args[0]) ? args[0][0] : args[0];
    const options = given !== null && typeof given === "object" ? given : { port: given, host: args[1] };
    const host = options.path === undefined ? String(options.host ?? "localhost") : undefined;
    if (host !== undefined && !LOOPBACK.has(host)) {
      tried.push(`${host}:${options.port}`);
      process.nextTick(() => this.destroy(new Error(`the tests make no network calls (tried ${host})`)));
      return this;
    }
    return connect.apply(this, args);
  };
  require("node:test").after(() => {
    net.Socket.prototype.connect = connect;
    assert.deepEqual(tried, [], "connections left this machine");
  });
}

module.exports = { REPO, POLICY, Cli, project, attestBinary, execFileSync, noNetwork };
