"""An MCP client (the official `mcp` Python SDK) using a server through `attest mcp-proxy`.

    pip install mcp
    python3 mcp_client.py [SANDBOX_DIR]

The client starts `attest mcp-proxy`, which starts the reference filesystem server
(`npx -y @modelcontextprotocol/server-filesystem SANDBOX_DIR`) and sits between the two.
To use your own server, set MCP_SERVER to its command line. The client code is what it
would be without Attest; only the command it launches changes. Every tool result carries
Attest's receipt in `_meta["_attest"]` (seq, decision, verification level); a call that
policy refuses comes back as an error result saying why, and never reaches the server.

Environment: ATTEST_BIN (default `attest`), ATTEST_LEDGER (default .attest/ledger.sqlite),
ATTEST_POLICY (a policy file), ATTEST_MODE (default `auto`), MCP_SERVER (the upstream command).

With ATTEST_MODE=block, `write_file` waits for a person: the proxy says on stderr (which
this client shows) which approval id waits and how to decide (`attest confirm ID approve`
in another terminal, or the inbox); unanswered after the proxy's `--timeout` (300 s), the
call comes back held, with `attest_resume` to call once approved.
"""

import asyncio
import os
import shlex
import sys
import tempfile

from mcp import ClientSession, StdioServerParameters, stdio_client


def receipt(result) -> str:
    meta = getattr(result, "meta", None) or {}
    attest = meta.get("_attest", {})
    return f"seq={attest.get('seq')} decision={attest.get('decision')} level={attest.get('level')}"


async def main() -> int:
    sandbox = os.path.realpath(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp())
    upstream = shlex.split(
        os.environ.get(
            "MCP_SERVER", f"npx -y @modelcontextprotocol/server-filesystem {shlex.quote(sandbox)}"
        )
    )
    attest = os.environ.get("ATTEST_BIN", "attest")
    params = StdioServerParameters(
        command=attest,
        # `--mode auto` approves what policy would ask a person about (the filesystem
        # server marks write_file destructive, so the default policy asks): for this demo
        # only. Leave it out (`block`) or write a policy (ATTEST_POLICY) for real use.
        args=["mcp-proxy", "--server", "filesystem", "--mode", os.environ.get("ATTEST_MODE", "auto"), "--", *upstream],
        env=dict(os.environ),
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            print("tools:", ", ".join(t.name for t in tools.tools))

            path = os.path.join(sandbox, "hello.txt")
            written = await session.call_tool(
                "write_file", {"path": path, "content": "written through attest"}
            )
            print("write_file:", "error" if written.is_error else "ok", receipt(written))
            for block in written.content:
                if written.is_error and getattr(block, "type", "") == "text":
                    print("  ", block.text)

            read_back = await session.call_tool("read_text_file", {"path": path})
            print("read_text_file:", "error" if read_back.is_error else "ok", receipt(read_back))
    print("now run: attest verify && attest ledger")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
