// The ES module face of attest/langchain.
export * from "./langchain.cjs";
