// The ES module face of attest-agents/langchain.
export * from "./langchain.cjs";
