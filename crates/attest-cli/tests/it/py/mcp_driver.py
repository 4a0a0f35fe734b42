"""Drives `attest mcp-proxy` with the official `mcp` Python client, for the tests.

    python3 mcp_driver.py PLAN.json -- ATTEST_ARGS...

PLAN.json: {"calls": [{"tool": NAME, "args": {...}}, ...], "list": ["resources", "prompts"]}.
A call with "progress": true asks for progress and reports what arrived as "progress"; one
with "timeout": SECS gives up after that long, which makes the client send
`notifications/cancelled`; one with "meta": {...} sends it as the request's `_meta`.
A step {"run": [argv...]} runs a command instead ({id} and {token} are the last held
call's). Lists the tools (and resources and prompts when asked), makes each
call in order, and prints one JSON object: the tool names, and per call
{"is_error", "text", "meta"} or {"error"} for a protocol error.
"""

import asyncio
import json
import os
import subprocess
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
            held = {}
            for call in plan["calls"]:
                if "run" in call:
                    # A command between calls (e.g. `attest confirm {id} approve`), with the
                    # last held call's {id} and {token} filled in.
                    argv = [a.format(**held) for a in call["run"]]
                    done = subprocess.run(argv, capture_output=True, text=True)
                    out["calls"].append({"run": done.returncode, "stderr": done.stderr})
                    continue
                args = {k: v.format(**held) if isinstance(v, str) else v
                        for k, v in call.get("args", {}).items()}
                progress = []

                async def on_progress(done, total, message, progress=progress):
                    progress.append([done, total])

                try:
                    extra = {"meta": call["meta"]} if "meta" in call else {}
                    result = await session.call_tool(
                        call["tool"], args, read_timeout_seconds=call.get("timeout", 60),
                        progress_callback=on_progress if call.get("progress") else None,
                        **extra,
                    )
                    text = " ".join(
                        c.text for c in result.content if getattr(c, "type", "") == "text"
                    )
                    is_error = getattr(result, "is_error", getattr(result, "isError", None))
                    meta = getattr(result, "meta", None)
                    structured = getattr(result, "structured_content", None)
                    if isinstance(structured, dict) and "token" in structured:
                        held = {"id": structured["id"], "token": structured["token"]}
                    out["calls"].append({"is_error": bool(is_error), "text": text, "meta": meta,
                                         "progress": progress})
                except Exception as err:  # a protocol error is a result here
                    out["calls"].append({"error": str(err)})
    print(json.dumps(out))


asyncio.run(main())
