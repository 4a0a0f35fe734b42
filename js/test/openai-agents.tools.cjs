// The note tools of openai-agents.test.cjs, for the process that resumes its run.
"use strict";
const { tool } = require("@openai/agents-core");
const { z } = require("zod");
module.exports = (ran) => [
  tool({ name: "get_note", description: "Read a note", parameters: z.object({ noteId: z.string() }),
    execute: async ({ noteId }) => { ran.push(["get_note", noteId]); return "note " + noteId + ": groceries"; } }),
  tool({ name: "create_note", description: "Create a note", parameters: z.object({ title: z.string() }),
    execute: async ({ title }) => { ran.push(["create_note", title]); return "created " + title; } }),
  tool({ name: "refund_payment", description: "Refund a charge", parameters: z.object({ charge: z.string() }),
    execute: async ({ charge }) => { ran.push(["refund_payment", charge]); return "refunded"; } }),
];
