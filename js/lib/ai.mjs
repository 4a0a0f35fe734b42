// The ES module face of attest-agents/ai.
export * from "./ai.cjs";
