// README's "Use from TypeScript" example, run as written in a fresh directory (the
// docs test runs the README's shell blocks; this runs its JavaScript one).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

const PACKAGE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const README = path.join(PACKAGE, "..", "README.md");

/** The first ```js block of README's "Use from TypeScript" section. */
function example() {
  const text = fs.readFileSync(README, "utf8");
  const section = text.slice(text.indexOf("## Use from TypeScript"));
  assert.ok(section.length > 0, "README has no 'Use from TypeScript' section");
  const found = /```js\n([\s\S]*?)```/.exec(section);
  assert.ok(found, "the section has no ```js block");
  return found[1];
}

test("README's TypeScript example runs as written", async (t) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), "attest-readme-"));
  t.after(() => fs.rmSync(directory, { recursive: true, force: true }));
  // The package as `npm install ./js` leaves it: node_modules/attest is the package folder.
  fs.mkdirSync(path.join(directory, "node_modules"));
  fs.symlinkSync(PACKAGE, path.join(directory, "node_modules", "attest-agents"), "dir");
  fs.writeFileSync(path.join(directory, "example.mjs"), example());
  const { stdout } = await promisify(execFile)(process.execPath, ["example.mjs"], {
    cwd: directory,
    env: { PATH: process.env.PATH },
  });
  assert.match(stdout, /\{ id: 'n1', title: 'plan' \}/);
  assert.match(stdout, /^2 act acknowledged$/m);
  assert.match(stdout, /^waiting: \S+ http:\/\/127\.0\.0\.1:8321\/requests\/\S+$/m);
  assert.ok(fs.existsSync(path.join(directory, ".attest", "ledger.sqlite")));
});
