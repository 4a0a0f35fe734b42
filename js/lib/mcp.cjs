// The official MCP TypeScript SDK's client: govern every `tools/call` a `Client` makes.
//
//   const { wrapClient } = require("attest/mcp");
//   const client = wrapClient(connectedClient, attest, { server: "notes" });
//   await client.callTool({ name: "delete_note", arguments: { id: "n1" } });
//
// The wrapped client is the same client (every other method is its own); `callTool` is
// described as the MCP proxy describes a call (the server, the tool, its arguments and
// its annotations, which may make a call stricter, never a write a read) and runs only
// when Attest clears it. A call that may not run answers as MCP answers a failed tool,
// a result with `isError: true` whose text says why (and, for a call waiting for a person,
// the request and its inbox link, also in `_meta.attest`), so the model reads the reason.
"use strict";

const { AttestError, Held } = require("./index.cjs");

const FRAMEWORK = "mcp";

/** The MCP result of a call that did not run. */
function notRun(error) {
  const text =
    error instanceof Held
      ? `Not run yet: Attest is ${error.message} (${error.link}); once a person approves, call the tool again with the same arguments`
      : `${error.message}: the tool did not run`;
  const attest = { status: error.name };
  if (error instanceof Held) Object.assign(attest, { requestId: error.requestId, link: error.link });
  return { content: [{ type: "text", text }], isError: true, _meta: { attest } };
}

/**
 * `client` (a connected `Client` from `@modelcontextprotocol/sdk`) with `callTool`
 * governed by `attest`. `options.server`: the server's name as the system (default: the
 * name the server gives in its `initialize` answer, taken as a hint only).
 */
function wrapClient(client, attest, options = {}) {
  let hints;
  // The tools' annotations, listed once (a server that lists none gives no hints).
  const annotations = async (name) => {
    hints ??= client.listTools().then(
      ({ tools }) => new Map(tools.map((tool) => [tool.name, tool.annotations ?? {}])),
      () => new Map(),
    );
    return (await hints).get(name) ?? {};
  };
  const callTool = async (params, resultSchema, requestOptions) => {
    const given = options.server;
    const server = given ?? client.getServerVersion()?.name ?? "mcp";
    const hinted = await annotations(params.name);
    const call = {
      name: params.name,
      framework: FRAMEWORK,
      mcpServer: server,
      mcpServerNamed: given !== undefined,
      readOnlyHint: hinted.readOnlyHint,
      destructiveHint: hinted.destructiveHint,
      idempotentHint: hinted.idempotentHint,
    };
    try {
      const { value } = await attest.call(call, params.arguments ?? {}, (use) =>
        client.callTool({ ...params, arguments: use }, resultSchema, requestOptions));
      return value;
    } catch (error) {
      if (error instanceof AttestError) return notRun(error);
      throw error;
    }
  };
  return new Proxy(client, {
    get(target, property, receiver) {
      if (property === "callTool") return callTool;
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

module.exports = { wrapClient, FRAMEWORK };
