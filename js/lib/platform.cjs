// The name of the prebuilt engine's package for this machine, as napi-rs names them;
// packages exist for the platforms `cargo xtask dist` builds (linux-x64-gnu).
"use strict";

const PREBUILT = { "linux-x64-gnu": true };

/** napi-rs's platform name: linux-x64-gnu, linux-x64-musl, darwin-arm64, … */
function platformName() {
  const { platform, arch } = process;
  if (platform !== "linux") return `${platform}-${arch}`;
  const glibc = process.report?.getReport?.().header?.glibcVersionRuntime;
  return `${platform}-${arch}-${glibc ? "gnu" : "musl"}`;
}

/** The prebuilt package's name, or undefined when none is made for this machine. */
function prebuilt() {
  const name = platformName();
  return PREBUILT[name] ? `attest-agents-${name}` : undefined;
}

/** Whether the prebuilt package for this machine is installed. */
function prebuiltInstalled() {
  const name = prebuilt();
  if (!name) return false;
  try {
    require.resolve(name);
    return true;
  } catch {
    return false;
  }
}

module.exports = { platformName, prebuilt, prebuiltInstalled };
