// The types of attest-agents/openai-agents (lib/openai-agents.cjs).
import type { Attest, AttestError } from "./index";

export interface WrapSpec {
  system?: string;
  verb?: string;
  target?: string;
}

export declare const FRAMEWORK: "openai-agents";
/** Where a held call's request id and token are kept in a run's context. */
export declare const CONTEXT_KEY: "attest_held";
/** `tool` (a function tool) governed by `attest`: the same name, description and schema. */
export declare function wrapTool<T extends { type: "function"; name: string }>(tool: T, attest: Attest, spec?: WrapSpec): T;
/** Every function tool of `tools` governed. */
export declare function wrapTools<T extends { type: "function"; name: string }>(tools: T[], attest: Attest, specs?: Record<string, WrapSpec>): T[];
/** Answers a run's interruptions from Attest's approval store. */
export declare function resolveInterruptions(
  runState: { getInterruptions(): unknown[]; approve(item: unknown): void; reject(item: unknown): void },
  attest: Attest,
): Promise<{ approved: string[]; rejected: string[]; pending: string[] }>;
/** What the model reads when a call did not run. */
export declare function refusalText(error: AttestError): string;
