// Authenticated agents (issue 34): with `agents:` configured, an `Attest` names its calls
// by the agent its credential proves (`agentToken`, else $ATTEST_AGENT_TOKEN): an
// `attest agents add` token, or a JWT signed by a local identity provider (a JWKS served
// on 127.0.0.1 by node:http in a child process, tokens signed with node:crypto). A credential that proves
// nobody, or another agent than `agent`, throws `Refused` and the tool does not run;
// revoking a token stops the next call of a running process.
"use strict";

const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const crypto = require("node:crypto");
const { once } = require("node:events");
const fs = require("node:fs");
const http = require("node:http");
const path = require("node:path");
const readline = require("node:readline");
const { test } = require("node:test");

const { Attest, ConfigError, Refused } = require("attest-agents");
const { Cli, project } = require("./helpers.cjs");

const PARAMS = { noteId: "n1", title: "plan" };
const NOTE = { name: "update_note", system: "notes", verb: "update" };

// No ambient credential: each test names its own.
delete process.env.ATTEST_AGENT_TOKEN;

function configured(where, yaml) {
  const file = path.join(where.directory, "config.yaml");
  fs.writeFileSync(file, yaml);
  return file;
}

function open(t, where, config, options = {}) {
  const attest = new Attest({ config, ledger: where.ledger, policy: where.policy, durability: "normal", ...options });
  t.after(() => attest.close());
  return attest;
}

function addAgent(cli, name) {
  const { token } = JSON.parse(cli.run(["agents", "add", name, "--json"]).stdout);
  assert.match(token, /^atg_/);
  return token;
}

/** A tool that counts its runs. */
function notes() {
  const ran = [];
  return { ran, run: async ({ title }) => (ran.push(title), { id: "n1" }) };
}

function outcomes(cli) {
  return cli.entries().filter((row) => row.execution.status !== "intent");
}

function who(cli) {
  return outcomes(cli).map((row) => [row.agent, row.agent_auth ?? null, row.verb]);
}

test("a token names the agent; an unknown or revoked one never runs the tool", async (t) => {
  const where = project(t);
  const cli = new Cli(where);
  const config = configured(where, "agents: {}\n");
  const token = addAgent(cli, "notes-bot");
  const tool = notes();
  const attest = open(t, where, config, { agentToken: token });
  assert.deepEqual((await attest.call(NOTE, PARAMS, tool.run)).value, { id: "n1" });
  await attest.record("send_email", { to: "x@example.com" }, { system: "email", verb: "send" });
  assert.deepEqual(who(cli), [["notes-bot", "token", "update"], ["notes-bot", "token", "send"]]);

  const stranger = open(t, where, config, { agentToken: `atg_${"0".repeat(64)}` });
  await assert.rejects(stranger.call(NOTE, PARAMS, tool.run), (error) => {
    assert.ok(error instanceof Refused, String(error));
    assert.match(error.message, /unknown or revoked/);
    assert.equal(error.receipt, null, "an unproven caller writes no row");
    return true;
  });

  // Revoked while this process runs: its next call (and record) is refused.
  cli.run(["agents", "revoke", "notes-bot"]);
  await assert.rejects(attest.call(NOTE, PARAMS, tool.run), Refused);
  await assert.rejects(attest.record("send_email", { to: "x@example.com" }, { system: "email", verb: "send" }), Refused);
  assert.deepEqual(tool.ran, ["plan"], "the tool ran only for the valid token");
  assert.equal(outcomes(cli).length, 2);
  assert.ok(!JSON.stringify(cli.entries()).includes(token));
});

test("the token comes from the environment, and a label that disagrees is refused", async (t) => {
  const where = project(t);
  const cli = new Cli(where);
  const config = configured(where, "agents: {}\n");
  process.env.ATTEST_AGENT_TOKEN = addAgent(cli, "notes-bot");
  t.after(() => delete process.env.ATTEST_AGENT_TOKEN);
  const tool = notes();
  await open(t, where, config, { agent: "Notes-Bot" }).call(NOTE, PARAMS, tool.run);
  const posing = open(t, where, config, { agent: "ops-bot" });
  await assert.rejects(posing.call(NOTE, PARAMS, tool.run), (error) => {
    assert.ok(error instanceof Refused, String(error));
    assert.match(error.message, /ops-bot/);
    assert.match(error.message, /notes-bot/);
    return true;
  });
  assert.deepEqual(tool.ran, ["plan"]);
  assert.deepEqual(who(cli), [["notes-bot", "token", "update"]]);
});

test("without a credential a call is refused, or recorded as unauthenticated", async (t) => {
  const where = project(t);
  const cli = new Cli(where);
  const tool = notes();
  const refuse = open(t, where, configured(where, "agents: {unauthenticated: refuse}\n"));
  await assert.rejects(refuse.call(NOTE, PARAMS, tool.run), (error) => {
    assert.ok(error instanceof Refused, String(error));
    assert.match(error.message, /token or JWT/);
    return true;
  });
  assert.deepEqual(tool.ran, []);
  assert.deepEqual(outcomes(cli), []);

  const record = open(t, where, configured(where, "agents: {unauthenticated: record}\n"));
  await record.call(NOTE, PARAMS, tool.run);
  assert.deepEqual(tool.ran, ["plan"]);
  assert.deepEqual(who(cli), [["unauthenticated", "unauthenticated", "update"]]);
});

test("without agents configured the label names the call, as before", async (t) => {
  const where = project(t);
  const tool = notes();
  const attest = new Attest({ ledger: where.ledger, policy: where.policy, agent: "js-agent", agentToken: "atg_ignored" });
  t.after(() => attest.close());
  await attest.call(NOTE, PARAMS, tool.run);
  assert.deepEqual(who(new Cli(where)), [["js-agent", null, "update"]]);
});

// The identity provider's JWKS server, in a process of its own: `new Attest` fetches the
// keys before it returns (blocking this thread, so a server on this event loop could not answer).
const JWKS_SERVER = `
const http = require("node:http");
const server = http.createServer((request, response) => {
  const found = request.url === "/jwks";
  response.writeHead(found ? 200 : 404, { "content-type": "application/json" });
  response.end(found ? process.env.JWKS : "{}");
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
`;

/** A local identity provider: its JWKS on 127.0.0.1 (one RSA key, kid "k1"), and RS256 tokens. */
async function identityProvider(t) {
  const key = () => crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
  const good = key();
  const other = key();
  const jwk = { ...good.publicKey.export({ format: "jwk" }), kid: "k1", alg: "RS256", use: "sig" };
  const server = spawn(process.execPath, ["-e", JWKS_SERVER], {
    env: { JWKS: JSON.stringify({ keys: [jwk] }) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  t.after(() => server.kill());
  const [port] = await once(readline.createInterface({ input: server.stdout }), "line");
  const issuer = `http://127.0.0.1:${port.trim()}`;
  const b64 = (value) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const mint = (claims, { signer = good, expiresIn = 300 } = {}) => {
    const now = Math.floor(Date.now() / 1000);
    const payload = { iss: issuer, aud: "attest-js", iat: now, exp: now + expiresIn, ...claims };
    const signed = `${b64({ alg: "RS256", typ: "JWT", kid: "k1" })}.${b64(payload)}`;
    const signature = crypto.sign("sha256", Buffer.from(signed), signer.privateKey).toString("base64url");
    return `${signed}.${signature}`;
  };
  return { issuer, jwks: `${issuer}/jwks`, mint, other };
}

test("a JWT from the identity provider names the agent; a spoiled one never runs the tool", async (t) => {
  const where = project(t);
  const cli = new Cli(where);
  const idp = await identityProvider(t);
  const config = configured(
    where,
    `agents:\n  jwt:\n    issuer: ${idp.issuer}\n    audience: attest-js\n    jwks_url: ${idp.jwks}\n    claim: email\n`,
  );
  const tool = notes();
  // An e-mail claim names the agent only when the provider verified the address.
  const email = { email: "claims-bot", email_verified: true };
  const good = idp.mint({ sub: "u-1", ...email });
  await open(t, where, config, { agentToken: good, agent: "claims-bot" }).call(NOTE, PARAMS, tool.run);
  assert.deepEqual(who(cli), [["claims-bot", "jwt", "update"]]);
  const spoiled = {
    expired: idp.mint(email, { expiresIn: -300 }),
    "another audience": idp.mint({ ...email, aud: "someone-else" }),
    forged: idp.mint(email, { signer: idp.other }),
    "another issuer": idp.mint({ ...email, iss: "http://127.0.0.1:9" }),
    "no claim": idp.mint({ sub: "u-1" }),
    "an unverified e-mail": idp.mint({ ...email, email_verified: false }),
    "an e-mail not said to be verified": idp.mint({ email: "claims-bot" }),
    "not valid yet": idp.mint({ ...email, nbf: Math.floor(Date.now() / 1000) + 3600 }),
  };
  for (const [why, token] of Object.entries(spoiled)) {
    const attest = open(t, where, config, { agentToken: token });
    await assert.rejects(attest.call(NOTE, { ...PARAMS, title: why }, tool.run), (error) => {
      assert.ok(error instanceof Refused, `${why}: ${error}`);
      assert.match(error.message, /agent JWT refused/, why);
      return true;
    });
  }
  const posing = open(t, where, config, { agentToken: good, agent: "ops-bot" });
  await assert.rejects(posing.call(NOTE, PARAMS, tool.run), Refused);
  assert.deepEqual(tool.ran, ["plan"], "no spoiled JWT ran the tool");
  assert.equal(outcomes(cli).length, 1);
  assert.ok(!JSON.stringify(cli.entries()).includes(good));
});

test("an identity provider that cannot be reached is a ConfigError", async (t) => {
  const where = project(t);
  const closed = http.createServer();
  await new Promise((resolve) => closed.listen(0, "127.0.0.1", resolve));
  const { port } = closed.address();
  await new Promise((resolve) => closed.close(resolve));
  const config = configured(where, `agents:\n  jwt:\n    issuer: http://127.0.0.1:${port}\n    audience: attest-js\n`);
  assert.throws(
    () => new Attest({ config, ledger: where.ledger, policy: where.policy }),
    (error) => error instanceof ConfigError && /agents\.jwt/.test(error.message),
  );
});
