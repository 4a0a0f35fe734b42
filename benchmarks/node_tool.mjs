// What a governed tool call costs from Node, Python and Rust in one run: the npm package
// `attest` (js/), then benchmarks/python_tool.py (the Python package) and attest-core's
// example `tool_cost` (the Rust API), each on the same actions (a HubSpot read, and an
// update that acts and is acknowledged: intent + outcome rows) beside its own bare
// function. "added p50" is each governed row's p50 over its own language's bare function.
//
//     node benchmarks/node_tool.mjs [--samples N] [--json FILE]
//
// Needs the package built (`npm ci` in js/, as .ci/run does), Python with the `attest`
// package (`$ATTEST_PYTHON`, else .ci/pyvenv/bin/python3: `maturin develop`, as .ci/run
// does; without one the Python rows are left out, and the table says so) and cargo. Statistics as in
// benchmarks/src/measure.rs: p50/p95 are sorted[round((n-1)*q)]. Each governed call is
// awaited before the next starts (the cost of one call, not a throughput). Ledgers go in a
// temporary directory on the repository's disk and are removed after.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { execFileSync } from "node:child_process";

import { Attest } from "../js/lib/index.mjs";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

const { values } = parseArgs({ options: { samples: { type: "string", default: "1000" }, json: { type: "string" } } });
const samples = Number(values.samples);

function quantile(times, q) {
  const ordered = [...times].sort((a, b) => a - b);
  return ordered[Math.round((ordered.length - 1) * q)];
}

function row(name, times) {
  return {
    name,
    samples: times.length,
    mean_ns: times.reduce((sum, t) => sum + t, 0) / times.length,
    p50_ns: quantile(times, 0.5),
    p95_ns: quantile(times, 0.95),
  };
}

async function measure(call, count) {
  for (let i = 0; i < Math.min(50, count); i += 1) await call();
  const times = [];
  for (let i = 0; i < count; i += 1) {
    const start = process.hrtime.bigint();
    await call();
    times.push(Number(process.hrtime.bigint() - start));
  }
  return times;
}

const updateDeal = async ({ dealId }) => ({ id: dealId });
const getDeal = async ({ dealId }) => ({ id: dealId });

const rows = [row("node: the bare async function", await measure(() => updateDeal({ dealId: "8812", stage: "won" }), samples))];
const workdir = fs.mkdtempSync(path.join(REPO, ".node-bench-"));
try {
  const reader = new Attest({ ledger: path.join(workdir, "read.sqlite"), agent: "bench", durability: "normal" });
  const governedRead = reader.tool({ system: "hubspot", verb: "get" }, getDeal);
  rows.push(row("node: governed read, act + ack, one row (normal)", await measure(() => governedRead({ dealId: "8812" }), samples)));
  await reader.close();
  for (const mode of ["normal", "full"]) {
    const attest = new Attest({ ledger: path.join(workdir, `${mode}.sqlite`), agent: "bench", durability: mode });
    const governed = attest.tool({ system: "hubspot", verb: "update" }, updateDeal);
    const { value, receipt } = await governed.withReceipt({ dealId: "8812", stage: "won" });
    if (value.id !== "8812" || receipt.decision !== "act" || receipt.level !== "acknowledged") {
      throw new Error(`the update did not act and acknowledge: ${JSON.stringify(receipt)}`);
    }
    const count = mode === "normal" ? samples : Math.max(30, Math.floor(samples / 3));
    rows.push(row(`node: governed update, act + ack, intent + outcome (${mode})`, await measure(() => governed({ dealId: "8812", stage: "won" }), count)));
    await attest.close();
  }
} finally {
  fs.rmSync(workdir, { recursive: true, force: true });
}

// Python and Rust in the same run, each a process of its own (their output is JSON rows).
const python = process.env.ATTEST_PYTHON ?? path.join(REPO, ".ci", "pyvenv", "bin", "python3");
if (fs.existsSync(python)) {
  const out = path.join(os.tmpdir(), `attest-python-tool-${process.pid}.json`);
  execFileSync(python, [path.join(REPO, "benchmarks", "python_tool.py"), "--samples", String(samples), "--json", out], { stdio: ["ignore", "ignore", "inherit"] });
  rows.push(...JSON.parse(fs.readFileSync(out, "utf8")).rows);
  fs.rmSync(out, { force: true });
} else {
  console.log(`(no Python with the attest package at ${python}: set ATTEST_PYTHON; the Python rows are left out)`);
}
const rust = execFileSync("cargo", ["run", "-q", "-p", "attest-core", "--example", "tool_cost", "--", String(samples)], { cwd: REPO, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
rows.push(...JSON.parse(rust).rows);

// Each language's own bare function ("node: the bare async function", "python: the bare function", …).
const bareOf = (r) => rows.find((b) => b.name.split(":")[0] === r.name.split(":")[0] && b.name.includes("the bare"));
console.log(`${"row".padEnd(70)} ${"p50".padStart(10)} ${"p95".padStart(10)} ${"added p50".padStart(10)}`);
for (const r of rows) {
  const bare = bareOf(r);
  const added = /governed|decorated/.test(r.name) && bare ? `${((r.p50_ns - bare.p50_ns) / 1000).toFixed(1)}µs` : "";
  console.log(`${r.name.padEnd(70)} ${(r.p50_ns / 1000).toFixed(1).padStart(8)}µs ${(r.p95_ns / 1000).toFixed(1).padStart(8)}µs ${added.padStart(10)}`);
}
if (values.json) {
  const machine = { node: process.version, machine: os.machine(), system: os.type() };
  fs.writeFileSync(values.json, `${JSON.stringify({ machine, rows }, null, 2)}\n`);
}
