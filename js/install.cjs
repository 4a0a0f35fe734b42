// The package's install step. From a tarball on a platform with a prebuilt engine
// (attest-agents-linux-x64-gnu, an optional dependency npm installed beside this one) it
// does nothing. Otherwise it builds the engine from source with napi (`napi build`, a
// debug build, and the .d.ts napi generates). In the repository (`npm install ./js`) it
// builds this crate in place, into the workspace's target directory; from a tarball
// (`npm pack`, which has no Cargo.toml of its own) it builds engine/, the workspace
// pack.cjs put in it, into engine/target, removed once the addon is copied out (unless
// CARGO_TARGET_DIR names a target directory of the caller's).
//
// `npm install ./js` from another project links this folder without installing its own
// dependencies (npm does so for a folder outside the installing project), so the build
// tool may be missing here: it is then installed first, from this package's lock file
// (production dependencies only, no scripts), and the build runs with it.
"use strict";

const { spawnSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const here = __dirname;
const packed = !fs.existsSync(path.join(here, "Cargo.toml"));
if (packed && require("./lib/platform.cjs").prebuiltInstalled()) process.exit(0);

function napiCli() {
  try {
    return require.resolve("@napi-rs/cli/package.json", { paths: [here] });
  } catch {
    return undefined;
  }
}

function run(command, args) {
  const out = spawnSync(command, args, { cwd: here, stdio: "inherit" });
  if (out.error) throw out.error;
  if (out.status !== 0) process.exit(out.status ?? 1);
}

if (!napiCli()) {
  // The version this package was tested with (a dependency in the repository, a dev
  // dependency in the published package, which needs it only here).
  const manifest = require("./package.json");
  const version = (manifest.dependencies ?? {})["@napi-rs/cli"] ?? (manifest.devDependencies ?? {})["@napi-rs/cli"];
  const npm = process.env.npm_execpath;
  const [command, args] = npm ? [process.execPath, [npm]] : ["npm", []];
  run(command, [...args, "install", `@napi-rs/cli@${version}`, "--omit=peer", "--ignore-scripts", "--no-audit", "--no-fund", "--no-save", "--no-package-lock"]);
}
const cli = napiCli();
if (!cli) throw new Error("@napi-rs/cli is not installed, and installing it failed");
const bin = require(cli).bin;
const napi = path.join(path.dirname(cli), typeof bin === "string" ? bin : bin.napi);
if (!packed) {
  run(process.execPath, [napi, "build", "--dts", "binding.d.ts"]);
} else {
  const manifest = path.join("engine", "js", "Cargo.toml");
  if (!fs.existsSync(path.join(here, manifest))) throw new Error(`the package has neither Cargo.toml nor ${manifest}`);
  run(process.execPath, [napi, "build", "--manifest-path", manifest, "--output-dir", ".", "--dts", "binding.d.ts"]);
  if (!process.env.CARGO_TARGET_DIR) fs.rmSync(path.join(here, "engine", "target"), { recursive: true, force: true });
}
