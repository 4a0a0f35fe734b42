"""Drives `attest mcp-proxy` with the official `mcp` Python client, for the tests.

    python3 mcp_driver.py PLAN.json -- ATTEST_ARGS...

PLAN.json: {"calls": [{"tool": NAME, "args": {...}}, ...], "list": ["resources", "prompts"]}.
Lists the tools (and resources and prompts when asked), makes each
call in order, and prints one JSON object: the tool names, and per call
{"is_error", "text", "meta"} or {"error"} for a protocol error.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client


async def main() -> None:
    plan_path = sys.argv[1]
    command = sys.argv[sys.argv.index("--") + 1 :]
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    out = {"tools": [], "calls": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            out["tools"] = [t.name for t in listed.tools]
            if "resources" in plan.get("list", []):
                out["resources"] = len((await session.list_resources()).resources)
            if "prompts" in plan.get("list", []):
                out["prompts"] = len((await session.list_prompts()).prompts)
            for call in plan["calls"]:
                try:
                    result = await session.call_tool(
                        call["tool"], call.get("args", {}), read_timeout_seconds=60
                    )
                    text = " ".join(
                        c.text for c in result.content if getattr(c, "type", "") == "text"
                    )
                    is_error = getattr(result, "is_error", getattr(result, "isError", None))
                    meta = getattr(result, "meta", None)
                    out["calls"].append({"is_error": bool(is_error), "text": text, "meta": meta})
                except Exception as err:  # a protocol error is a result here
                    out["calls"].append({"error": str(err)})
    print(json.dumps(out))


asyncio.run(main())
