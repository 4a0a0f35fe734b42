// The ES module face of attest/ai.
export * from "./ai.cjs";
