// `npm pack` of this folder: the tarball must build the engine on its own, outside this
// repository, where js/Cargo.toml's workspace (the repository's Cargo.toml, the crates it
// inherits from, the policies core compiles in) is not there. So `prepack` copies what
// cargo needs into engine/, a workspace of its own laid out as the repository is:
//
//   engine/Cargo.toml    the repository's manifest, its members cut to the engine's crates
//   engine/Cargo.lock    the repository's lock file (the same dependency versions)
//   engine/crates/       attest-policy, attest-ledger, attest-core (manifests, src/, examples/)
//   engine/policies/     the default policy, registry and recipes core compiles in
//   engine/js/           this crate (Cargo.toml, build.rs, src/)
//
// and install.cjs builds engine/js when the package has no Cargo.toml of its own (a
// tarball). `postpack` removes engine/ again: in the repository js/ builds in place.
"use strict";

const fs = require("node:fs");
const path = require("node:path");

const here = __dirname;
const repo = path.resolve(here, "..");
const engine = path.join(here, "engine");

// The crates attest-node depends on, inside the workspace.
const CRATES = ["attest-policy", "attest-ledger", "attest-core"];

function copy(from, to) {
  fs.cpSync(path.join(repo, from), path.join(engine, to ?? from), { recursive: true });
}

/** The workspace manifest with `members` cut to the engine's crates and this one. */
function manifest() {
  const text = fs.readFileSync(path.join(repo, "Cargo.toml"), "utf8");
  const members = /^members = \[[^\]]*\]/m;
  if (!members.test(text)) throw new Error("Cargo.toml: no `members = [...]` to cut");
  const kept = [...CRATES.map((name) => `crates/${name}`), "js"].map((member) => `    "${member}",`).join("\n");
  return text.replace(members, `members = [\n${kept}\n]`);
}

function prepack() {
  fs.rmSync(engine, { recursive: true, force: true });
  fs.mkdirSync(engine);
  fs.writeFileSync(path.join(engine, "Cargo.toml"), manifest());
  copy("Cargo.lock");
  for (const name of CRATES) {
    for (const part of ["Cargo.toml", "src", "examples"]) {
      if (fs.existsSync(path.join(repo, "crates", name, part))) copy(path.join("crates", name, part));
    }
  }
  copy("policies");
  for (const part of ["Cargo.toml", "build.rs", "src"]) copy(path.join("js", part));
}

function postpack() {
  fs.rmSync(engine, { recursive: true, force: true });
}

const step = { prepack, postpack }[process.argv[2]];
if (!step) throw new Error("usage: node pack.cjs prepack|postpack");
step();
