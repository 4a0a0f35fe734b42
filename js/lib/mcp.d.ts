// The types of attest-agents/mcp (lib/mcp.cjs).
import type { Attest } from "./index";

export interface WrapClientOptions {
  /** The server's name as the system (default: the name the server gives, a hint only). */
  server?: string;
}

export declare const FRAMEWORK: "mcp";
/** `client` with `callTool` governed by `attest`; every other method is the client's own. */
export declare function wrapClient<C extends { callTool: (...args: any[]) => Promise<unknown> }>(
  client: C,
  attest: Attest,
  options?: WrapClientOptions,
): C;
/** What a tool result says, as the MCP proxy hashes and checks it: structured content, else one JSON text block, else the result. */
export declare function payload(result: unknown): unknown;
