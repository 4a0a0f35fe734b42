// A scripted language model (no network) for the tests of the adapters built on the AI
// SDK's model interface (`ai` itself, Mastra): the SDK's own mock model class, given by the
// caller (`MockLanguageModelV3` from `ai/test`, of whichever `ai` the test runs), answering
// both generate and stream calls.

export const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** The text of a tool result part of the prompt, as the model reads it. */
function outputText(part) {
  const value = part.output?.value ?? part.output;
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** What the model says next: call `toolName` with `input` once, then answer with the text of the tool's result. */
function turn(prompt, toolName, input) {
  const last = prompt.at(-1);
  if (last.role === "tool") {
    const part = last.content.find((item) => item.type === "tool-result");
    return { text: `the tool said: ${outputText(part)}` };
  }
  return { call: { toolCallId: `call-${prompt.length}`, toolName, input: JSON.stringify(input) } };
}

/** A model of class `Mock` (`MockLanguageModelV3`) that calls `toolName` with `input` once, then reads its result. */
export function scriptedModel(Mock, toolName, input) {
  return new Mock({
    doGenerate: async ({ prompt }) => {
      const { text, call } = turn(prompt, toolName, input);
      return {
        content: text === undefined ? [{ type: "tool-call", ...call }] : [{ type: "text", text }],
        finishReason: text === undefined ? { unified: "tool-calls", raw: "tool_calls" } : { unified: "stop", raw: "stop" },
        usage,
        warnings: [],
      };
    },
    doStream: async ({ prompt }) => {
      const { text, call } = turn(prompt, toolName, input);
      const parts = [{ type: "stream-start", warnings: [] }];
      if (text === undefined) parts.push({ type: "tool-call", ...call });
      else parts.push({ type: "text-start", id: "t1" }, { type: "text-delta", id: "t1", delta: text }, { type: "text-end", id: "t1" });
      parts.push({
        type: "finish",
        finishReason: text === undefined ? { unified: "tool-calls", raw: "tool_calls" } : { unified: "stop", raw: "stop" },
        usage,
      });
      return { stream: new ReadableStream({ start(controller) { for (const part of parts) controller.enqueue(part); controller.close(); } }) };
    },
  });
}
