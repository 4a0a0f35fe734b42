// The ES module face of the package: the same classes as the CommonJS one (one engine);
// node reads their names from index.cjs's `module.exports = { ... }`.
export * from "./index.cjs";
export { default } from "./index.cjs";
