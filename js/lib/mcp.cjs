// The official MCP TypeScript SDK's client: govern every `tools/call` a `Client` makes.
//
//   const { wrapClient } = require("attest-agents/mcp");
//   const client = wrapClient(connectedClient, attest, { server: "notes" });
//   await client.callTool({ name: "delete_note", arguments: { id: "n1" } });
//
// The wrapped client is the same client (every other method is its own); `callTool` is
// described as the MCP proxy describes a call (the server, the tool, its arguments and
// its annotations, which may make a call stricter, never a write a read) and runs only
// when Attest clears it. What is recorded and checked of its result is what the proxy
// records: its structured content, else its one text block when that is a JSON object,
// else the whole result (so a read-back recipe reads `result:/id` alike through both); a
// result with `isError: true` is recorded as a failed execution and still handed back as
// the server gave it. A call that may not run answers as MCP answers a failed tool,
// a result with `isError: true` whose text says why (and, for a call waiting for a person,
// the request and its inbox link, also in `_meta.attest`), so the model reads the reason.
"use strict";

const { AttestError, Held } = require("./index.cjs");

const FRAMEWORK = "mcp";

/** What a tool result says, as the MCP proxy hashes and checks it (its `payload`). */
function payload(result) {
  if (result?.structuredContent != null) return result.structuredContent;
  const [only, ...more] = Array.isArray(result?.content) ? result.content : [];
  if (only?.type === "text" && more.length === 0) {
    try {
      const value = JSON.parse(only.text);
      if (value !== null && typeof value === "object" && !Array.isArray(value)) return value;
    } catch {
      // not JSON: the whole result
    }
  }
  return result;
}

/** An `isError` result, thrown through the pipeline so it is recorded as a failed execution. */
class ErrorResult extends Error {
  constructor(result) {
    super("the MCP server answered isError");
    this.name = "ErrorResult";
    this.result = result;
  }
}

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
    let result;
    try {
      await attest.call(call, params.arguments ?? {}, async (use) => {
        result = await client.callTool({ ...params, arguments: use }, resultSchema, requestOptions);
        if (result?.isError === true) throw new ErrorResult(result);
        return payload(result);
      });
      return result;
    } catch (error) {
      if (error instanceof AttestError) return notRun(error);
      if (error instanceof ErrorResult) return error.result;
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

module.exports = { wrapClient, payload, FRAMEWORK };
