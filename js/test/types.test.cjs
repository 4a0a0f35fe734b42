// The package's types as a TypeScript user meets them: test/types/usage.mts compiles
// under `tsc --strict` (the .d.ts napi generates from the Rust source, and lib's own).
"use strict";

const assert = require("node:assert/strict");
const { spawnSync } = require("node:child_process");
const path = require("node:path");
const { test } = require("node:test");

test("the package's types compile in strict TypeScript, and reject an unknown option", () => {
  const tsc = require.resolve("typescript/bin/tsc");
  const out = spawnSync(
    process.execPath,
    [tsc, "--noEmit", "--strict", "--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022", "types/usage.mts"],
    { cwd: __dirname, encoding: "utf8" },
  );
  assert.equal(out.status, 0, `tsc:\n${out.stdout}\n${out.stderr}`);
});
