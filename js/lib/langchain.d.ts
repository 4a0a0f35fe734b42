// The types of attest-agents/langchain (lib/langchain.cjs).
import type { StructuredToolInterface } from "@langchain/core/tools";
import type { Attest } from "./index";

export interface WrapSpec {
  system?: string;
  verb?: string;
  target?: string;
}

export declare const FRAMEWORK: "langchain";
/** `tool` governed by `attest`: the same name, description and schema. */
export declare function wrapTool<T extends StructuredToolInterface>(tool: T, attest: Attest, spec?: WrapSpec): StructuredToolInterface;
/** Every tool of `tools` governed. */
export declare function wrapTools(
  tools: StructuredToolInterface[],
  attest: Attest,
  specs?: Record<string, WrapSpec>,
): StructuredToolInterface[];
