// The ES module face of attest-agents/openai-agents.
export * from "./openai-agents.cjs";
