// LangChain.js (`@langchain/core` tools): govern the tools an agent or a LangGraph graph calls.
//
//   const { wrapTools } = require("attest-agents/langchain");
//   const tools = wrapTools([getNote, sendEmail], attest);
//
// Each wrapped tool keeps its name, description and input schema, so the model sees the
// same tools. A call that may not run does not run: invoked with a tool call, the tool
// answers with an error ToolMessage whose text says why (and, for a call waiting for a
// person, the request and its inbox link), so the model reads the reason instead of the
// run failing; invoked with plain input, it answers with that text. Made again with the
// same arguments once the person approved, the call runs, once.
//
// Inside a LangGraph.js graph compiled with a checkpointer, a call that waits for a person
// pauses the graph the LangGraph way: the tool calls `interrupt()` with the request
// (`kind`, `id`, `summary`, `inbox`, `token`, `tool`), which the caller finds in the
// result's `__interrupt__` and in the checkpointer. Once the person has decided, resume
// with `graph.invoke(new Command({ resume: request }), config)`: the call runs, once (or
// answers with why not). Without a checkpointer a held call answers like a refused one.
"use strict";

const { DynamicStructuredTool } = require("@langchain/core/tools");
const { ToolMessage } = require("@langchain/core/messages");

const { AttestError, Held } = require("./index.cjs");

const FRAMEWORK = "langchain";

// The marker of an Attest request in an interrupt's value.
const REQUEST_KIND = "attest.approval";

// LangGraph's own, when it is installed (an optional peer: without it nothing pauses).
function langgraph() {
  try {
    return require("@langchain/langgraph");
  } catch {
    return undefined;
  }
}

/**
 * What a held call pauses a graph with: the request's `id`, a one-line `summary`, the
 * `inbox` link, the `token` that resumes it and the `tool`. Plain JSON, so a checkpointer
 * keeps it.
 */
async function heldRequest(attest, held, tool) {
  const seen = await attest.request(held.requestId);
  const target = seen.target ? ` ${seen.target}` : "";
  const reasons = (seen.reasons ?? []).join("; ");
  const summary = `${tool}: ${seen.system} ${seen.verb}${target} (${seen.tier} risk)`;
  return {
    kind: REQUEST_KIND,
    id: held.requestId,
    summary: reasons ? `${summary}: ${reasons}` : summary,
    inbox: held.link,
    token: held.token,
    tool,
  };
}

/** The resume token a resume value carries: the interrupt's value (a request), or the token itself. */
function tokenIn(value) {
  if (value?.kind === REQUEST_KIND && typeof value.token === "string") return value.token;
  if (typeof value === "string" && value.startsWith("atr_")) return value;
  return undefined;
}

const NOT_RESUMED = Symbol("not resumed");

/**
 * Inside a LangGraph task of a graph with a checkpointer: the value the task was resumed
 * with, else NOT_RESUMED (a first run); undefined outside such a graph.
 *
 * LangGraph gives a resumed task its resume values in the order of its `interrupt()`
 * calls, re-running the task from its start; asking Attest again on that re-run would file
 * a second request. So a governed call's first `interrupt()` asks for the resume value
 * before Attest is asked: on a first run it throws, and that GraphInterrupt is dropped here
 * (nothing is recorded by a throw that does not leave the task).
 */
function graphResume(graph, config) {
  const configurable = config?.configurable ?? {};
  if (!graph || !configurable.__pregel_scratchpad) return undefined; // not a LangGraph task
  if (!configurable.__pregel_checkpointer) return undefined; // cannot be resumed: answer, do not pause
  try {
    return graph.interrupt({ kind: REQUEST_KIND, probe: true });
  } catch (error) {
    if (graph.isGraphInterrupt(error)) return NOT_RESUMED;
    throw error;
  }
}

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
        const run = (token) => attest.call({ ...call, token }, input, (use) => tool.invoke(use, own));
        const graph = langgraph();
        const resumed = graphResume(graph, config);
        if (resumed === undefined) return (await run(undefined)).value;
        let token = resumed === NOT_RESUMED ? undefined : tokenIn(resumed);
        for (;;) {
          try {
            return (await run(token)).value;
          } catch (error) {
            if (!(error instanceof Held)) throw error;
            // Pauses the graph (throws GraphInterrupt) until a resume brings the decision.
            const answer = graph.interrupt(await heldRequest(attest, error, tool.name));
            token = tokenIn(answer) ?? error.token;
          }
        }
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

module.exports = { wrapTool, wrapTools, heldRequest, FRAMEWORK, REQUEST_KIND };
