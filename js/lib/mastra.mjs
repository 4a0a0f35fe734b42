// The ES module face of attest/mastra.
export * from "./mastra.cjs";
