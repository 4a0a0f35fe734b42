// The official TypeScript SDK's own OAuth client, as the conformance suite's example
// client drives it (examples/clients/typescript/everything-client.ts and its helpers in
// @modelcontextprotocol/conformance v0.1.16, ported to CommonJS): the baseline Attest's
// client authorization results are measured against, in the same run.
//
//   MCP_CONFORMANCE_SCENARIO=auth/… NODE_PATH=.ci/node/node_modules node sdk_auth_client.cjs URL
//
// The suite's authorization server approves without a person: the redirect to the
// callback is read, not followed. (CommonJS, so that NODE_PATH finds the pinned SDK.)

const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");
const { auth, extractWWWAuthenticateParams, UnauthorizedError } = require("@modelcontextprotocol/sdk/client/auth.js");
const { ClientCredentialsProvider, PrivateKeyJwtProvider } = require("@modelcontextprotocol/sdk/client/auth-extensions.js");

const CIMD_CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json";
const CALLBACK = "http://localhost:3000/callback";

class ConformanceOAuthProvider {
  constructor(redirectUrl, clientMetadata, clientMetadataUrl) {
    this._redirectUrl = redirectUrl;
    this._clientMetadata = clientMetadata;
    this._clientMetadataUrl = clientMetadataUrl;
  }
  get redirectUrl() { return this._redirectUrl; }
  get clientMetadata() { return this._clientMetadata; }
  get clientMetadataUrl() { return this._clientMetadataUrl; }
  clientInformation() { return this._clientInformation; }
  saveClientInformation(info) { this._clientInformation = info; }
  tokens() { return this._tokens; }
  saveTokens(tokens) { this._tokens = tokens; }
  async redirectToAuthorization(authorizationUrl) {
    const response = await fetch(authorizationUrl.toString(), { redirect: "manual" });
    const location = response.headers.get("location");
    if (!location) throw new Error(`No redirect location received, from '${authorizationUrl}'`);
    const code = new URL(location).searchParams.get("code");
    if (!code) throw new Error("No auth code in redirect URL");
    this._authCode = code;
  }
  async getAuthCode() {
    if (this._authCode) return this._authCode;
    throw new Error("No authorization code");
  }
  saveCodeVerifier(verifier) { this._codeVerifier = verifier; }
  codeVerifier() {
    if (!this._codeVerifier) throw new Error("No code verifier saved");
    return this._codeVerifier;
  }
}

async function handle401(response, provider, next, serverUrl) {
  const { resourceMetadataUrl, scope } = extractWWWAuthenticateParams(response);
  let result = await auth(provider, { serverUrl, resourceMetadataUrl, scope, fetchFn: next });
  if (result === "REDIRECT") {
    const authorizationCode = await provider.getAuthCode();
    result = await auth(provider, { serverUrl, resourceMetadataUrl, scope, authorizationCode, fetchFn: next });
    if (result !== "AUTHORIZED") throw new UnauthorizedError(`Authentication failed with result: ${result}`);
  }
}

function withOAuthRetry(provider, baseUrl) {
  return (next) => async (input, init) => {
    const makeRequest = async () => {
      const headers = new Headers(init?.headers);
      const tokens = await provider.tokens();
      if (tokens) headers.set("Authorization", `Bearer ${tokens.access_token}`);
      return await next(input, { ...init, headers });
    };
    let response = await makeRequest();
    if (response.status === 401 || response.status === 403) {
      await handle401(response, provider, next, baseUrl);
      response = await makeRequest();
    }
    if (response.status === 401 || response.status === 403) {
      throw new UnauthorizedError(`Authentication failed for ${input}`);
    }
    return response;
  };
}

async function session(serverUrl, transportOptions, callTool) {
  const client = new Client({ name: "test-auth-client", version: "1.0.0" }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(new URL(serverUrl), transportOptions);
  await client.connect(transport);
  await client.listTools();
  if (callTool) await client.callTool({ name: "test-tool", arguments: {} });
  await transport.close();
}

function context() {
  return JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}");
}

async function run(scenario, serverUrl) {
  if (scenario === "auth/client-credentials-jwt") {
    const ctx = context();
    const authProvider = new PrivateKeyJwtProvider({
      clientId: ctx.client_id, privateKey: ctx.private_key_pem, algorithm: ctx.signing_algorithm || "ES256",
    });
    return session(serverUrl, { authProvider }, false);
  }
  if (scenario === "auth/client-credentials-basic") {
    const ctx = context();
    const authProvider = new ClientCredentialsProvider({ clientId: ctx.client_id, clientSecret: ctx.client_secret });
    return session(serverUrl, { authProvider }, false);
  }
  if (scenario === "auth/pre-registration") {
    const ctx = context();
    const provider = new ConformanceOAuthProvider(CALLBACK, { client_name: "conformance-pre-registration", redirect_uris: [CALLBACK] });
    provider.saveClientInformation({ client_id: ctx.client_id, client_secret: ctx.client_secret, redirect_uris: [CALLBACK] });
    return session(serverUrl, { fetch: withOAuthRetry(provider, new URL(serverUrl))(fetch) }, false);
  }
  // Every other authorization scenario: the well-behaved client.
  const provider = new ConformanceOAuthProvider(
    CALLBACK, { client_name: "test-auth-client", redirect_uris: [CALLBACK] }, CIMD_CLIENT_METADATA_URL);
  return session(serverUrl, { fetch: withOAuthRetry(provider, new URL(serverUrl))(fetch) }, true);
}

run(process.env.MCP_CONFORMANCE_SCENARIO || "", process.argv[2]).then(
  () => process.exit(0),
  (error) => { console.error("Error:", error); process.exit(1); },
);
