"""What a decorated Python tool call costs: the `attest` package (python/) on the same
action as the source system's "whole action" rows (a HubSpot update that acts and is
acknowledged), beside that figure from benchmarks/peer/results-quick.json.

    .ci/pyvenv/bin/python3 benchmarks/python_tool.py [--samples N] [--json FILE]

Needs the package installed (`maturin develop -m python/Cargo.toml` into a virtualenv, as
.ci/run does). A separate script, not a row of `benchmarks/src/main.rs`: the Rust program
does not start Python. benchmarks/README.md quotes its output. Statistics as in
benchmarks/src/measure.rs: p50/p95 are sorted[round((n-1)*q)]. Ledgers go in a temporary
directory on the repository's disk (the disk the other rows use) and are removed after.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import tempfile
import time

import attest

REPO = pathlib.Path(__file__).resolve().parents[1]
PEER = REPO / "benchmarks" / "peer" / "results-quick.json"


def quantile(times: list[int], q: float) -> float:
    ordered = sorted(times)
    return float(ordered[round((len(ordered) - 1) * q)])


def row(name: str, times: list[int]) -> dict:
    return {
        "name": name,
        "samples": len(times),
        "mean_ns": statistics.fmean(times),
        "p50_ns": quantile(times, 0.5),
        "p95_ns": quantile(times, 0.95),
    }


def measure(call, samples: int) -> list[int]:
    for _ in range(min(50, samples)):
        call()
    times = []
    for _ in range(samples):
        start = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--json", type=pathlib.Path)
    args = parser.parse_args()

    def update_deal(deal_id: str, stage: str) -> dict:
        return {"id": "8812"}

    def get_deal(deal_id: str) -> dict:
        return {"id": deal_id}

    rows = [row("python: the bare function", measure(lambda: update_deal("8812", "won"), args.samples))]
    with tempfile.TemporaryDirectory(prefix=".python-bench-", dir=REPO) as workdir:
        # The limit beside the rows: one commit of one row by Python's own sqlite3 (WAL,
        # synchronous=NORMAL), the least a durable append costs this process here.
        import sqlite3

        db = sqlite3.connect(pathlib.Path(workdir) / "limit.sqlite", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, body BLOB, hash BLOB)")
        body, digest = b"x" * 700, b"h" * 32

        def commit() -> None:
            db.execute("BEGIN")
            db.execute("INSERT INTO t (body, hash) VALUES (?, ?)", (body, digest))
            db.execute("COMMIT")

        rows.append(row("python: limit, one sqlite3 commit (normal)", measure(commit, args.samples)))
        a = attest.Attest(ledger=pathlib.Path(workdir) / "read.sqlite", agent="bench", durability="normal")
        governed_read = a.tool(system="hubspot", verb="get")(get_deal)
        rows.append(row("python: decorated read, act + ack, one row (normal)", measure(lambda: governed_read("8812"), args.samples)))
        for mode in ("normal", "full"):
            a = attest.Attest(ledger=pathlib.Path(workdir) / f"{mode}.sqlite", agent="bench", durability=mode)
            governed = a.tool(system="hubspot", verb="update")(update_deal)
            assert governed("8812", "won") == {"id": "8812"}
            receipt = attest.last_receipt()
            assert (receipt.decision, receipt.level) == ("act", "acknowledged"), receipt
            samples = args.samples if mode == "normal" else max(30, args.samples // 3)
            rows.append(row(f"python: decorated update, act + ack, intent + outcome ({mode})", measure(lambda: governed("8812", "won"), samples)))

    peer = json.loads(PEER.read_text()) if PEER.exists() else {"rows": []}
    peer_rows = {r["name"]: r for r in peer["rows"]}
    bare = rows[0]["p50_ns"]
    print(f"{'row':<62} {'p50':>10} {'p95':>10} {'added p50':>10} {'source system p50':>18}")
    for r in rows:
        decorated = "decorated" in r["name"]
        mode = ("normal" if "(normal)" in r["name"] else "full") if decorated else None
        # The source system's row is an update that acts (one row; it writes no intent).
        source = peer_rows.get(f"whole action: act + ack, file-backed ({mode})") if "update" in r["name"] else None
        added = r["p50_ns"] - bare if mode else None
        print(
            f"{r['name']:<62} {r['p50_ns'] / 1000:>8.1f}µs {r['p95_ns'] / 1000:>8.1f}µs "
            + (f"{added / 1000:>8.1f}µs " if added is not None else f"{'':>11}")
            + (f"{source['p50_ns'] / 1000:>10.1f}µs ({source['p50_ns'] / added:.1f}×)" if source and added else "")
        )
    if args.json:
        machine = {"python": platform.python_version(), "machine": platform.machine(), "system": platform.system()}
        args.json.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
