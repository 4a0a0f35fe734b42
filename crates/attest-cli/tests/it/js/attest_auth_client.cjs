// Attest as the client of the conformance suite's OAuth-protected MCP servers: the suite
// starts this with the server's URL; it runs `attest mcp-proxy --url URL --oauth --login
// headless` (Attest does discovery, registration, PKCE, the token exchange, scopes,
// step-up and refresh) and drives it on stdio as an agent's client would: initialize,
// tools/list, tools/call. The stdio side is plain MCP; all of the OAuth is Attest's.
//
//   ATTEST_BIN=… ATTEST_DIR=… MCP_CONFORMANCE_SCENARIO=auth/… \
//     NODE_PATH=.ci/node/node_modules node attest_auth_client.cjs URL
//
// ATTEST_DIR gets the ledger and the token directory (one per scenario run: its name
// is made unique here). (CommonJS, so that NODE_PATH finds the pinned SDK.)

const fs = require("node:fs");
const path = require("node:path");
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StdioClientTransport } = require("@modelcontextprotocol/sdk/client/stdio.js");

// The suite's client ID metadata document (its authorization server accepts this URL).
const CIMD_CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json";

async function run(scenario, serverUrl) {
  const dir = fs.mkdtempSync(path.join(process.env.ATTEST_DIR, "run-"));
  const args = [
    "--ledger", path.join(dir, "ledger.sqlite"),
    "mcp-proxy", "--server", "conformance", "--mode", "auto",
    "--url", serverUrl, "--oauth", "--login", "headless",
    "--oauth-tokens", path.join(dir, "tokens"),
    "--oauth-client-metadata-url", CIMD_CLIENT_METADATA_URL,
  ];
  const env = { PATH: process.env.PATH || "", HOME: dir };
  const ctx = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}");
  // The machine-to-machine scenarios: Attest's own client ID and secret, no person.
  if (scenario.startsWith("auth/client-credentials")) args.push("--oauth-grant", "client-credentials");
  if (ctx.client_id) {
    args.push("--oauth-client-id", ctx.client_id);
    if (ctx.client_secret) {
      args.push("--oauth-client-secret-env", "CONFORMANCE_CLIENT_SECRET");
      env.CONFORMANCE_CLIENT_SECRET = ctx.client_secret;
    }
    // private_key_jwt: the suite's key, in a file only the owner reads.
    if (ctx.private_key_pem) {
      const key = path.join(dir, "client-key.pem");
      fs.writeFileSync(key, ctx.private_key_pem, { mode: 0o600 });
      args.push("--oauth-client-key", key, "--oauth-client-key-alg", ctx.signing_algorithm || "ES256");
    }
  }
  const transport = new StdioClientTransport({
    command: process.env.ATTEST_BIN, args, env, stderr: "inherit",
  });
  const client = new Client({ name: "attest-conformance", version: "1.0.0" }, { capabilities: {} });
  await client.connect(transport);
  const { tools } = await client.listTools();
  if (tools.some((tool) => tool.name === "test-tool")) {
    const result = await client.callTool({ name: "test-tool", arguments: {} });
    if (result.isError) throw new Error(`test-tool: ${JSON.stringify(result.content)}`);
  }
  await client.close();
}

run(process.env.MCP_CONFORMANCE_SCENARIO || "", process.argv[2]).then(
  () => process.exit(0),
  (error) => { console.error("Error:", error); process.exit(1); },
);
