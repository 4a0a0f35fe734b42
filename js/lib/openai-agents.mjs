// The ES module face of attest/openai-agents.
export * from "./openai-agents.cjs";
