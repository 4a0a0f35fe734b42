// LangChain.js (`@langchain/core` tools): govern the tools an agent or a LangGraph graph calls.
//
//   const { wrapTools } = require("attest/langchain");
//   const tools = wrapTools([getNote, sendEmail], attest);
//
// Each wrapped tool keeps its name, description and input schema, so the model sees the
// same tools. A call that may not run does not run: invoked with a tool call, the tool
// answers with an error ToolMessage whose text says why (and, for a call waiting for a
// person, the request and its inbox link), so the model reads the reason instead of the
// run failing; invoked with plain input, it answers with that text. Made again with the
// same arguments once the person approved, the call runs, once.
"use strict";

const { DynamicStructuredTool } = require("@langchain/core/tools");
const { ToolMessage } = require("@langchain/core/messages");

const { AttestError, Held } = require("./index.cjs");

const FRAMEWORK = "langchain";

/** Why a call did not run, in the words the model reads. */
function reason(error) {
  if (error instanceof Held) {
    return `Not run yet: Attest is ${error.message} (${error.link}); once a person approves, call the tool again with the same arguments`;
  }
  return `${error.message}: the tool did not run`;
}

/**
 * `tool` (a LangChain `StructuredTool`, as `tool(...)` makes) governed by `attest`.
 * `spec`: `system`, `verb`, `target` when detection from the tool's name is not enough.
 */
function wrapTool(tool, attest, spec = {}) {
  const call = { ...spec, name: tool.name, framework: FRAMEWORK };
  return new DynamicStructuredTool({
    name: tool.name,
    description: tool.description,
    schema: tool.schema,
    responseFormat: tool.responseFormat,
    returnDirect: tool.returnDirect,
    metadata: tool.metadata,
    tags: tool.tags,
    func: async (input, _runManager, config) => {
      try {
        // The original tool, invoked with the (possibly edited) arguments: its own
        // validation and callbacks run as they would have. Without the tool call in its
        // config, it answers with its own value (not a ToolMessage): that value is what
        // Attest checks and records, and the wrapper makes the ToolMessage.
        const { toolCall: _toolCall, ...own } = config ?? {};
        const { value } = await attest.call(call, input, (use) => tool.invoke(use, own));
        return value;
      } catch (error) {
        if (!(error instanceof AttestError)) throw error;
        const text = reason(error);
        const toolCallId = config?.toolCall?.id;
        if (!toolCallId) return text;
        return new ToolMessage({ content: text, tool_call_id: toolCallId, name: tool.name, status: "error" });
      }
    },
  });
}

/** Every tool of `tools` (an array) governed. */
function wrapTools(tools, attest, specs = {}) {
  return tools.map((tool) => wrapTool(tool, attest, specs[tool.name]));
}

module.exports = { wrapTool, wrapTools, FRAMEWORK };
