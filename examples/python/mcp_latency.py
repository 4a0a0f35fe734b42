"""The latency `attest mcp-proxy` adds to each `tools/call`, measured with the official
`mcp` Python client: the same calls against the same server, directly and through the
proxy, and the per-call percentiles of each.

    python3 mcp_latency.py --calls 500 \
        --server "node .ci/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio" \
        --tool echo --args '{"message": "hi"}' [--attest target/release/attest] [--durability full]

The `everything` server is not part of a checkout: `.ci/run` installs it under `.ci/node`
(`npm install --prefix .ci/node @modelcontextprotocol/server-everything@2026.8.31`), or
pass `--server "npx -y @modelcontextprotocol/server-everything stdio"`.

The proxy's number includes everything Attest does per call: detection, policy, the
ledger append (at the durability given; `full` syncs each row), verification, and the
extra stdio hop. The tool should be one policy lets act (a read), or the calls measure
refusals. Each run uses a fresh ledger in a temporary directory. Prints one JSON line.
"""

import argparse
import asyncio
import json
import os
import shlex
import statistics
import tempfile
import time

from mcp import ClientSession, StdioServerParameters, stdio_client


async def measure(command: list[str], tool: str, args: dict, calls: int, warmup: int) -> list[float]:
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    times = []
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for n in range(warmup + calls):
                start = time.perf_counter()
                result = await session.call_tool(tool, args)
                elapsed = time.perf_counter() - start
                if getattr(result, "is_error", False):
                    raise SystemExit(f"{tool} returned an error: {result.content}")
                if n >= warmup:
                    times.append(elapsed * 1000.0)
    return times


def summary(times: list[float]) -> dict:
    ordered = sorted(times)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return {"p50_ms": round(statistics.median(ordered), 3), "p90_ms": round(pick(0.9), 3),
            "p99_ms": round(pick(0.99), 3), "mean_ms": round(statistics.fmean(ordered), 3)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", required=True, help="the upstream MCP server's command line")
    parser.add_argument("--tool", default="echo")
    parser.add_argument("--args", default='{"message": "hi"}', help="the tool's arguments (JSON)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--attest", default="attest", help="the attest binary")
    parser.add_argument("--durability", default="full", choices=["full", "normal", "off"])
    opts = parser.parse_args()
    server = shlex.split(opts.server)
    args = json.loads(opts.args)
    direct = await measure(server, opts.tool, args, opts.calls, opts.warmup)
    with tempfile.TemporaryDirectory() as tmp:
        proxied_cmd = [opts.attest, "--ledger", os.path.join(tmp, "ledger.sqlite"),
                       "--durability", opts.durability, "mcp-proxy", "--", *server]
        proxied = await measure(proxied_cmd, opts.tool, args, opts.calls, opts.warmup)
    d, p = summary(direct), summary(proxied)
    print(json.dumps({
        "calls": opts.calls, "tool": opts.tool, "durability": opts.durability,
        "direct": d, "proxied": p,
        "added_p50_ms": round(p["p50_ms"] - d["p50_ms"], 3),
        "added_p90_ms": round(p["p90_ms"] - d["p90_ms"], 3),
    }))


if __name__ == "__main__":
    asyncio.run(main())
