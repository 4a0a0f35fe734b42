// The package's install step: builds the engine from source with napi (`napi build`, a
// debug build into the workspace's target directory, and the .d.ts napi generates).
//
// `npm install ./js` from another project links this folder without installing its own
// dependencies (npm does so for a folder outside the installing project), so the build
// tool may be missing here: it is then installed first, from this package's lock file
// (production dependencies only, no scripts), and the build runs with it.
"use strict";

const { spawnSync } = require("node:child_process");
const path = require("node:path");

const here = __dirname;

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
  const npm = process.env.npm_execpath;
  const [command, args] = npm ? [process.execPath, [npm]] : ["npm", []];
  run(command, [...args, "install", "--omit=dev", "--omit=peer", "--ignore-scripts", "--no-audit", "--no-fund", "--no-save"]);
}
const cli = napiCli();
if (!cli) throw new Error("@napi-rs/cli is not installed, and installing it failed");
const bin = require(cli).bin;
run(process.execPath, [path.join(path.dirname(cli), typeof bin === "string" ? bin : bin.napi), "build", "--dts", "binding.d.ts"]);
