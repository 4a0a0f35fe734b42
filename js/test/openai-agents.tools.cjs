// The note tools and the scripted model of openai-agents.test.cjs, for the process that
// resumes its run too; the doors scenario's OpenAI Agents door uses the model.
"use strict";
const { Usage, tool } = require("@openai/agents");
const { z } = require("zod");

const noteTools = (ran) => [
  tool({ name: "get_note", description: "Read a note", parameters: z.object({ noteId: z.string() }),
    execute: async ({ noteId }) => { ran.push(["get_note", noteId]); return "note " + noteId + ": groceries"; } }),
  tool({ name: "create_note", description: "Create a note", parameters: z.object({ title: z.string() }),
    execute: async ({ title }) => { ran.push(["create_note", title]); return "created " + title; } }),
  tool({ name: "refund_payment", description: "Refund a charge", parameters: z.object({ charge: z.string() }),
    execute: async ({ charge }) => { ran.push(["refund_payment", charge]); return "refunded"; } }),
];

/** A model that calls `name(args)` once (`call-1`), then answers with the text of the tool's output. */
class ScriptedModel {
  constructor(name, args) {
    Object.assign(this, { name, args });
  }

  async getResponse(request) {
    const items = Array.isArray(request.input) ? request.input : [];
    const output = items.find((item) => item.type === "function_call_result");
    if (output) {
      const text = typeof output.output === "string" ? output.output : output.output?.text ?? JSON.stringify(output.output);
      return {
        usage: new Usage(),
        responseId: "r2",
        output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: `the tool said: ${text}` }] }],
      };
    }
    return {
      usage: new Usage(),
      responseId: "r1",
      output: [{ type: "function_call", callId: "call-1", name: this.name, arguments: JSON.stringify(this.args), status: "completed" }],
    };
  }

  async *getStreamedResponse() {
    throw new Error("the scripted model does not stream");
  }
}

module.exports = { ScriptedModel, noteTools };
