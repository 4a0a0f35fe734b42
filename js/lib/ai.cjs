// The Vercel AI SDK (`ai`): govern the tools given to generateText / streamText / agents.
//
//   import { wrapTools } from "attest-agents/ai";
//   const result = await generateText({ model, tools: wrapTools({ getNote, sendEmail }, attest), ... });
//
// Each wrapped tool keeps its description and input schema, so the model sees the same
// tools; only `execute` goes through Attest (the tool's name, its key in `tools`, is the
// call's name: system and verb are detected from it unless given). A call that may not
// run does not run: its tool result says why, so the model reads the reason (and, for a
// call waiting for a person, the request and its inbox link) instead of the run failing.
// Made again with the same input once the person approved, the call runs, once.
"use strict";

const { AttestError, Held } = require("./index.cjs");

const FRAMEWORK = "ai";

/** What a call that did not run answers the model: why, and where a person decides. */
function notRun(error) {
  const answer = { ran: false, status: error.name, reason: `${error.message}: the tool did not run` };
  if (error instanceof Held) {
    answer.reason = `Not run yet: Attest is ${error.message}; once a person approves, call the tool again with the same input`;
    answer.requestId = error.requestId;
    answer.link = error.link;
  }
  return answer;
}

/**
 * `tool` (an `ai` `tool({...})` definition) with its `execute` governed by `attest`.
 * `spec`: `name` (default: the tool's key in wrapTools, else `tool`), `system`, `verb`,
 * `target` when detection from the name is not enough.
 */
function wrapTool(tool, attest, spec = {}) {
  if (typeof tool?.execute !== "function") {
    // A tool the SDK does not run (no execute: the caller answers it) has nothing to govern.
    return tool;
  }
  const execute = tool.execute;
  const call = { ...spec, name: spec.name || "tool", framework: FRAMEWORK };
  return {
    ...tool,
    execute: async (input, options) => {
      try {
        const { value } = await attest.call(call, input, (use) => execute(use, options));
        return value;
      } catch (error) {
        if (error instanceof AttestError) return notRun(error);
        throw error;
      }
    },
  };
}

/** Every tool of a `tools` record governed; each key is its tool's name. */
function wrapTools(tools, attest, specs = {}) {
  return Object.fromEntries(
    Object.entries(tools).map(([name, tool]) => [name, wrapTool(tool, attest, { name, ...specs[name] })]),
  );
}

module.exports = { wrapTool, wrapTools, notRun, FRAMEWORK };
