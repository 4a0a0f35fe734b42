// What a governed Node tool call costs: the npm package `attest` (js/) on the same
// actions as benchmarks/python_tool.py (a HubSpot read, and an update that acts and is
// acknowledged: intent + outcome rows), beside the bare function, in one run.
//
//     node benchmarks/node_tool.mjs [--samples N] [--json FILE]
//
// Needs the package built (`npm ci` in js/, as .ci/run does). Statistics as in
// benchmarks/src/measure.rs: p50/p95 are sorted[round((n-1)*q)]. Each governed call is
// awaited before the next starts (the cost of one call, not a throughput). Ledgers go in a
// temporary directory on the repository's disk and are removed after.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

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

const bare = rows[0].p50_ns;
console.log(`${"row".padEnd(62)} ${"p50".padStart(10)} ${"p95".padStart(10)} ${"added p50".padStart(10)}`);
for (const r of rows) {
  const added = r.name.includes("governed") ? `${((r.p50_ns - bare) / 1000).toFixed(1)}µs` : "";
  console.log(`${r.name.padEnd(62)} ${(r.p50_ns / 1000).toFixed(1).padStart(8)}µs ${(r.p95_ns / 1000).toFixed(1).padStart(8)}µs ${added.padStart(10)}`);
}
if (values.json) {
  const machine = { node: process.version, machine: os.machine(), system: os.type() };
  fs.writeFileSync(values.json, `${JSON.stringify({ machine, rows }, null, 2)}\n`);
}
