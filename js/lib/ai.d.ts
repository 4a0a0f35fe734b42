// The types of attest-agents/ai (lib/ai.cjs).
import type { Attest, AttestError } from "./index";

export interface WrapSpec {
  name?: string;
  system?: string;
  verb?: string;
  target?: string;
}

/** What a call that did not run answers the model. */
export interface NotRun {
  ran: false;
  status: "Refused" | "Rejected" | "Expired" | "Held" | "AttestError" | string;
  reason: string;
  requestId?: string;
  link?: string;
}

export declare const FRAMEWORK: "ai";
/** What a call that did not run answers the model (the Mastra adapter answers the same). */
export declare function notRun(error: AttestError): NotRun;
/** `tool` with its `execute` governed by `attest` (same description and input schema). */
export declare function wrapTool<T>(tool: T, attest: Attest, spec?: WrapSpec): T;
/** Every tool of a `tools` record governed; each key is its tool's name. */
export declare function wrapTools<T extends Record<string, unknown>>(
  tools: T,
  attest: Attest,
  specs?: Partial<Record<keyof T, Omit<WrapSpec, "name">>>,
): T;
