// Mastra (`@mastra/core` tools, as `createTool({...})` makes them): govern the tools an
// agent or a workflow step calls.
//
//   const { wrapTools } = require("attest-agents/mastra");
//   const agent = new Agent({ id: "ops", name: "ops", model, tools: wrapTools({ getNote, sendEmail }, attest) });
//
// Each wrapped tool is a copy of the Mastra tool (same id, description, input and output
// schemas, same class: Mastra's checks still know it for one of its tools) whose
// `execute` goes through Attest: the input is validated by the tool's own schema first
// (invalid input answers with Mastra's validation error, as the tool would, and nothing is
// decided), then decided, then run by the tool's own `execute` with the (possibly edited)
// input and Mastra's execution context. The call's name is its key in `wrapTools` (the
// name the model calls it by), else the tool's id; system and verb are detected from it
// unless given. A call that may not run does not run: its result says why, as the `ai`
// adapter's does (Mastra hands it to the model as the tool's output), and, for a call
// waiting for a person, the request and its inbox link. Made again with the same input
// once the person approved, the call runs, once.
"use strict";

const { validateToolInput } = require("@mastra/core/tools");

const { AttestError } = require("./index.cjs");
const { notRun } = require("./ai.cjs");

const FRAMEWORK = "mastra";

/**
 * `tool` (a Mastra `Tool`) with its `execute` governed by `attest`. `spec`: `name`
 * (default: the tool's key in wrapTools, else its id), `system`, `verb`, `target` when
 * detection from the name is not enough.
 */
function wrapTool(tool, attest, spec = {}) {
  if (typeof tool?.execute !== "function") {
    // A tool without execute (the caller answers it) has nothing to govern.
    return tool;
  }
  const execute = tool.execute;
  const call = { ...spec, name: spec.name || tool.id || "tool", framework: FRAMEWORK };
  const governed = Object.assign(Object.create(Object.getPrototypeOf(tool)), tool);
  governed.execute = async (input, context) => {
    const { data, error: invalid } = validateToolInput(tool.inputSchema, input, tool.id);
    if (invalid) return invalid;
    try {
      const { value } = await attest.call(call, data, (use) => execute.call(tool, use, context));
      return value;
    } catch (error) {
      if (error instanceof AttestError) return notRun(error);
      throw error;
    }
  };
  return governed;
}

/** Every tool of a `tools` record governed; each key is its tool's name. */
function wrapTools(tools, attest, specs = {}) {
  return Object.fromEntries(
    Object.entries(tools).map(([name, tool]) => [name, wrapTool(tool, attest, { name, ...specs[name] })]),
  );
}

module.exports = { wrapTool, wrapTools, FRAMEWORK };
