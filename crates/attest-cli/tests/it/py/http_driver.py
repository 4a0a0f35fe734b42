"""Drives `attest mcp-proxy --listen` as a remote client would: the official `mcp` Python
client over streamable HTTP, with a bearer token.

    python3 http_driver.py URL TOKEN TOOL ARGS_JSON

Lists the tools, calls TOOL once, and prints {"tools", "is_error", "text", "meta"}.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


async def main() -> None:
    url, token, tool, args = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = [t.name for t in (await session.list_tools()).tools]
                result = await session.call_tool(tool, args)
                text = " ".join(c.text for c in result.content if getattr(c, "type", "") == "text")
                is_error = getattr(result, "is_error", getattr(result, "isError", None))
                meta = getattr(result, "meta", None)
                print(json.dumps({"tools": tools, "is_error": bool(is_error), "text": text,
                                  "meta": meta}))


asyncio.run(main())
