// The ES module face of attest-agents/mcp.
export * from "./mcp.cjs";
