// The ES module face of attest/mcp.
export * from "./mcp.cjs";
