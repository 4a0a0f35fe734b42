// The engine: the addon `napi build` compiled into this package at install (a build from
// source), else the prebuilt one of this platform's package (napi-rs's layout: npm
// installs the one optional dependency whose os, cpu and libc match).
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const { platformName, prebuilt } = require("./platform.cjs");

function load() {
  const built = path.join(__dirname, "..", "attest.node");
  if (fs.existsSync(built)) return require(built);
  const name = prebuilt();
  if (!name) {
    throw new Error(`attest-agents: no prebuilt engine for ${platformName()}, and none was built at install (that needs a Rust toolchain: see docs/install.md)`);
  }
  return require(name);
}

module.exports = load();
