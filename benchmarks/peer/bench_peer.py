"""Peer benchmark: the same scenarios as the Rust benchmark, measured with attestlayer 0.1.0.

    python bench_peer.py [--quick] [--json FILE]      (run.sh sets up the venv)

Each row is per-sample times from time.perf_counter_ns, summarised exactly as the Rust
benchmark does (mean, p50/p95 = sorted[round((n-1)*q)], ops/s = 1e9 / mean). Only
attestlayer's public API is used, except one PRAGMA on its ledger connection for the
"(normal)" rows: attestlayer has no durability setting (see the notes it prints).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import attest
from attest import ActionDescriptor, Attest, AutoGate, LedgerEntry, PolicyEngine, SqliteLedger, detect
from attest.ledger import ExecutionRecord, VerificationRecord
from attest.verify import Level, verify

PEER = f"attestlayer {attest.__version__}"
SYNC_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
ACTOR = "alice@acme.example"
HUBSPOT_PARAMS = {"id": "8812", "properties": {"dealstage": "closedwon"}}
EXTERNAL = "bob@partner.example"
GMAIL_URL = "https://gmail.googleapis.com/gmail/v1/users/me/messages/send"


# ── timing (mirrors benchmarks/src/measure.rs) ────────────────────────────
def summarize(name: str, times: list[int], ops_per_sample: int = 1) -> dict:
    times = sorted(times)
    n, per_op = len(times), ops_per_sample
    mean = sum(times) / n / per_op

    def pick(q: float) -> float:
        return times[round((n - 1) * q)] / per_op

    return {"name": name, "samples": n * per_op, "mean_ns": mean, "p50_ns": pick(0.5),
            "p95_ns": pick(0.95), "ops_per_sec": 1e9 / mean if mean > 0 else 0.0}


def per_call(name: str, samples: int, op: Callable[[], object]) -> dict:
    times = []
    for _ in range(samples):
        t0 = time.perf_counter_ns()
        op()
        times.append(time.perf_counter_ns() - t0)
    return summarize(name, times)


def bulk(name: str, ops: int, op: Callable[[], object]) -> dict:
    t0 = time.perf_counter_ns()
    op()
    return summarize(name, [time.perf_counter_ns() - t0], ops)


def human(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


# ── fixtures ──────────────────────────────────────────────────────────────
def open_ledger(path: Path, mode: str) -> SqliteLedger:
    """attestlayer opens WAL and never sets `synchronous`, so its default is SQLite's (FULL).
    For "normal" we set the PRAGMA on its own connection: there is no public knob for it."""
    ledger = SqliteLedger(path)
    if mode == "normal":
        ledger._cx.execute("PRAGMA synchronous=NORMAL")
    return ledger


def sync_mode(ledger: SqliteLedger) -> str:
    return SYNC_NAMES.get(ledger._cx.execute("PRAGMA synchronous").fetchone()[0], "?")


def hubspot_update() -> ActionDescriptor:
    return ActionDescriptor(system="hubspot", verb="update", target="deal/8812", params=HUBSPOT_PARAMS,
                            actor=ACTOR, agent="bench", run_id="run-bench")


def gmail_send() -> ActionDescriptor:
    return ActionDescriptor(system="gmail", verb="send", target=EXTERNAL, actor=ACTOR, agent="bench",
                            params={"to": EXTERNAL, "subject": "Q3 numbers", "body": "Hi Bob, attached."})


def record(n: int) -> LedgerEntry:
    """The same row the Rust benchmark appends: a hubspot update that acted and was acknowledged."""
    d = hubspot_update()
    e = LedgerEntry.from_descriptor(d, decision="act", risk_tier="medium", rules_fired=["R4"],
                                    reasons=["Medium risk — no confirmation needed"])
    e.action_id = f"act_bench{n:012d}"
    e.execution = ExecutionRecord(status="done", result_hash="0c7b82f1e52d6f72", result_preview={"id": "8812"})
    e.verification = VerificationRecord(level="acknowledged", method="ack", evidence={"id": "8812"})
    return e


def client(ledger: SqliteLedger) -> Attest:
    return Attest(ledger=ledger, policy=PolicyEngine(), gate=AutoGate(), agent="bench", actor=ACTOR)


def stub(params: dict) -> dict:
    return {"id": "8812"}


# ── scenarios ─────────────────────────────────────────────────────────────
def run(quick: bool, workdir: Path) -> tuple[list[dict], list[dict], list[str]]:
    samples, sync_samples, bulk_rows = (100, 30, 2_000) if quick else (1_000, 300, 20_000)
    rows: list[dict] = []
    notes: list[str] = []

    # Sanity: each scenario does what its name says before it is timed.
    tool, url = detect(tool_name="slack_post_message"), detect(method="POST", url=GMAIL_URL)
    assert (tool.system, tool.verb) == ("slack", "send"), tool
    assert (url.system, url.verb) == ("gmail", "send"), url
    engine = PolicyEngine()
    assert engine.evaluate(gmail_send()).decision == "ask"
    ack_d = hubspot_update()
    assert verify(ack_d, {"id": "8812"}).level == Level.ACKNOWLEDGED

    rows.append(per_call("detect: tool name", samples, lambda: detect(tool_name="slack_post_message")))
    rows.append(per_call("detect: method + URL", samples, lambda: detect(method="POST", url=GMAIL_URL)))
    rows.append(per_call("policy evaluate: default policy", samples, lambda: engine.evaluate(gmail_send())))
    rows.append(per_call("verify-ack", samples, lambda: verify(ack_d, {"id": "8812"})))

    for mode in ("full", "normal"):
        n_samples = sync_samples if mode == "full" else samples
        ledger = open_ledger(workdir / f"append-{mode}.sqlite", mode)
        counter = iter(range(1, 10**9))
        rows.append(per_call(f"ledger append, one row ({mode})", n_samples,
                             lambda: ledger.append(record(next(counter)))))
        notes.append(f"ledger ({mode}): journal_mode=WAL, synchronous={sync_mode(ledger)}")

    for mode in ("full", "normal"):
        n_samples = sync_samples if mode == "full" else samples
        at = client(open_ledger(workdir / f"action-{mode}.sqlite", mode))
        r = at.run_action(hubspot_update(), stub)
        assert (r.decision, r.level) == ("act", "acknowledged"), r
        rows.append(per_call(f"whole action: act + ack, file-backed ({mode})", n_samples,
                             lambda: at.run_action(hubspot_update(), stub)))

    at = client(open_ledger(workdir / "ask-normal.sqlite", "normal"))
    r = at.run_action(gmail_send(), stub)
    assert (r.decision, r.confirm.status, r.level) == ("ask", "approved", "acknowledged"), r
    rows.append(per_call("whole action: ask auto-approved, file-backed (normal)", samples,
                         lambda: at.run_action(gmail_send(), stub)))

    big = open_ledger(workdir / "bulk.sqlite", "normal")

    def fill() -> None:
        for n in range(bulk_rows):
            big.append(record(n))

    rows.append(bulk(f"{bulk_rows} appends, one at a time (normal), per append", bulk_rows, fill))
    report: list = []
    rows.append(bulk(f"full verify of {bulk_rows} rows", 1, lambda: report.append(big.verify_chain())))
    assert report[0].ok and report[0].checked == bulk_rows, report[0]

    notes += [
        "attestlayer exposes no durability setting: SqliteLedger sets journal_mode=WAL and leaves synchronous "
        "at SQLite's default (FULL). '(full)' rows are its default; '(normal)' rows set PRAGMA synchronous=NORMAL "
        "on its ledger connection (ledger._cx), the only change made to it.",
        "whole action rows call Attest.run_action(descriptor, tool) with a fresh ActionDescriptor per call "
        "(the decorator's argument binding and detect() are not included, matching Rust's attest.run).",
        "ask row: default policy rule 'external-send' -> ask, AutoGate approves, result acknowledged.",
        "ledger rows build a fresh LedgerEntry (pydantic) inside the timed call, as Rust builds its Record.",
        f"machine: {platform.system()} {platform.release()} {platform.machine()}, cpus={os.cpu_count()}, "
        f"python {platform.python_version()}, sqlite {__import__('sqlite3').sqlite_version}",
        f"temp ledgers in {workdir.parent.resolve()} (same disk as the Rust benchmark's)",
    ]
    return rows, [], notes


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer samples and a smaller ledger")
    p.add_argument("--json", metavar="FILE", help="also write the rows as JSON here")
    args = p.parse_args()

    with tempfile.TemporaryDirectory(prefix=".peer-bench-", dir=".") as tmp:
        rows, skipped, notes = run(args.quick, Path(tmp))

    print(f"| {'what (' + PEER + ')':<58} | {'mean':>10} | {'p50':>10} | {'p95':>10} | {'ops/s':>12} |")
    print(f"|{'-' * 60}|{'-' * 12}|{'-' * 12}|{'-' * 12}|{'-' * 14}|")
    for r in rows:
        print(f"| {r['name']:<58} | {human(r['mean_ns']):>10} | {human(r['p50_ns']):>10} | "
              f"{human(r['p95_ns']):>10} | {r['ops_per_sec']:>12.0f} |")
    for s in skipped:
        print(f"skipped: {s['name']}: {s['reason']}")
    for n in notes:
        print(f"note: {n}")

    if args.json:
        out = {"peer": PEER, "python": platform.python_version(), "quick": args.quick,
               "machine": {"os": platform.system().lower(), "arch": platform.machine(), "cpus": os.cpu_count()},
               "rows": rows, "skipped": skipped, "notes": notes}
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
