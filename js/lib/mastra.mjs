// The ES module face of attest-agents/mastra.
export * from "./mastra.cjs";
