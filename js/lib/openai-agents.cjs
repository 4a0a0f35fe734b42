// The OpenAI Agents SDK for JavaScript (`@openai/agents`): govern function tools, and
// pause a run the SDK's way.
//
//   const { wrapTools, resolveInterruptions } = require("attest-agents/openai-agents");
//   const agent = new Agent({ name: "ops", tools: wrapTools([lookup, refund], attest) });
//   let result = await run(agent, "…", { context: {} });
//   // a call Attest asks a person about stops the run with an interruption; once decided:
//   await resolveInterruptions(result.state, attest);  // approve / reject from Attest's store
//   result = await run(agent, result.state);            // the approved call runs, once
//
// Each wrapped tool is a copy of the function tool (same name, description and schema)
// whose `needsApproval` is Attest's decision: a call policy lets run runs; one that may
// not run (refused, rejected) does not, and its output is a sentence saying so, which the
// model reads like any tool output; one Attest asks a person about makes the SDK stop the
// run with an interruption, the request already in Attest's approval store (and its
// notifiers told). The held call's request id and resume token are kept in the run's
// context (an object) under `attest_held`, so `state.toString()` carries them to a run
// resumed in another process (`RunState.fromString`).
"use strict";

const { AttestError, Held } = require("./index.cjs");

const FRAMEWORK = "openai-agents";

/** Where a held call's request id and token are kept in a run's context (by call id). */
const CONTEXT_KEY = "attest_held";

// Decided calls whose tool the SDK has not invoked yet, per wrapped tool; past this many
// the oldest is given up (a write's intent row then stands without an outcome, which
// `attest ledger` reports).
const MAX_OPEN_CALLS = 256;

// Request statuses that let the call run, and those that end it.
const RUNS = new Set(["approved", "edited"]);
const ENDS = new Set(["rejected", "expired", "cancelled"]);

/** What the model reads when a call did not run. */
function refusalText(error) {
  if (error instanceof Held) {
    return `Not run yet: Attest is ${error.message}; once a person approves, call the tool again with the same arguments.`;
  }
  return `Not run: ${error.message}.`;
}

function heldCalls(runContext) {
  const context = runContext?.context;
  if (context === null || typeof context !== "object") return undefined;
  context[CONTEXT_KEY] ??= {};
  return context[CONTEXT_KEY];
}

function parse(input) {
  try {
    return typeof input === "string" ? JSON.parse(input || "{}") : input ?? {};
  } catch {
    return { input };
  }
}

/**
 * `tool` (a function tool, as `tool({...})` makes) governed by `attest`. `spec`:
 * `system`, `verb`, `target` when detection from the tool's name is not enough.
 */
function wrapTool(tool, attest, spec = {}) {
  if (tool?.type !== "function" || typeof tool.invoke !== "function") {
    throw new TypeError(`attest-agents/openai-agents: ${tool?.name ?? "this tool"} is not a function tool`);
  }
  const call = { ...spec, name: tool.name, framework: FRAMEWORK };
  // Call id -> the decided call (cleared, with its params) or why it may not run.
  const open = new Map();
  const remember = (callId, decided) => {
    open.set(callId, decided);
    while (open.size > MAX_OPEN_CALLS) open.delete(open.keys().next().value);
  };
  const runWith = (runContext, details) => (use) => tool.invoke(runContext, JSON.stringify(use), details);

  const needsApproval = async (runContext, input, callId) => {
    try {
      const decided = await attest._start(call, parse(input));
      remember(callId, decided);
      return false;
    } catch (error) {
      if (!(error instanceof AttestError)) throw error;
      const held = error instanceof Held ? heldCalls(runContext) : undefined;
      if (held) {
        held[callId] = { requestId: error.requestId, token: error.token };
        return true;
      }
      remember(callId, { error });
      return false;
    }
  };

  const invoke = async (runContext, input, details) => {
    const callId = details?.toolCall?.callId;
    const decided = open.get(callId);
    open.delete(callId);
    try {
      if (decided?.error) return refusalText(decided.error);
      if (decided) {
        const { value } = await attest._finish(decided.started, decided.use, runWith(runContext, details));
        return value;
      }
      // Approved after an interruption (resolveInterruptions), in this process or another:
      // the held call presented again with its token runs once.
      const held = heldCalls(runContext)?.[callId];
      const { value } = await attest.call({ ...call, token: held?.token }, parse(input), runWith(runContext, details));
      if (held) delete heldCalls(runContext)[callId];
      return value;
    } catch (error) {
      if (error instanceof AttestError) return refusalText(error);
      throw error;
    }
  };

  return { ...tool, needsApproval, invoke };
}

/** Every function tool of `tools` governed. */
function wrapTools(tools, attest, specs = {}) {
  return tools.map((tool) => wrapTool(tool, attest, specs[tool.name]));
}

/**
 * Answers a run's interruptions from Attest's approval store: approves those a person
 * approved, rejects those they rejected (or that expired); leaves the rest pending.
 * Resolves with `{ approved, rejected, pending }` (call ids).
 */
async function resolveInterruptions(runState, attest) {
  const answered = { approved: [], rejected: [], pending: [] };
  const held = heldCalls(runState._context) ?? {};
  for (const item of runState.getInterruptions()) {
    const callId = item.rawItem?.callId;
    const request = held[callId];
    if (!request) continue; // not Attest's: another approval the caller answers itself
    const { status } = await attest.request(request.requestId);
    if (RUNS.has(status)) {
      runState.approve(item);
      answered.approved.push(callId);
    } else if (ENDS.has(status)) {
      runState.reject(item);
      answered.rejected.push(callId);
    } else {
      answered.pending.push(callId);
    }
  }
  return answered;
}

module.exports = { wrapTool, wrapTools, resolveInterruptions, refusalText, CONTEXT_KEY, FRAMEWORK };
