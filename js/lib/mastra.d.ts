// The types of attest-agents/mastra (lib/mastra.cjs).
import type { Attest } from "./index";
import type { NotRun, WrapSpec } from "./ai";

export type { NotRun, WrapSpec };

export declare const FRAMEWORK: "mastra";
/** `tool` (a Mastra tool, as `createTool` makes) with its `execute` governed by `attest` (same id, description and schemas). */
export declare function wrapTool<T extends { id: string }>(tool: T, attest: Attest, spec?: WrapSpec): T;
/** Every tool of a `tools` record governed; each key is its tool's name. */
export declare function wrapTools<T extends Record<string, { id: string }>>(
  tools: T,
  attest: Attest,
  specs?: Partial<Record<keyof T, Omit<WrapSpec, "name">>>,
): T;
