"""An MCP server for an in-house CRM (`acmecrm`), built with the official `mcp` SDK, for
the tests that run one scenario through every door. Its tools call the CRM's REST API
at $ACME_API (a fake on 127.0.0.1 in the tests) with the token in $ACME_TOKEN.
`frobnicate_widget` is the in-house name the configuration's registry maps to
`acmecrm.list`.
"""

import json
import os
import urllib.request

from mcp.server import MCPServer

server = MCPServer("acmecrm")


def call(method: str, path: str, body=None):
    request = urllib.request.Request(
        f"{os.environ['ACME_API']}{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {os.environ['ACME_TOKEN']}",
            "Content-Type": "application/json",
        },
        method=method,
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        text = response.read()
    return json.loads(text) if text else {}


@server.tool()
def frobnicate_widget(kind: str = "all") -> dict:
    """List the widgets."""
    return {"widgets": call("GET", "/v1/widgets")}


@server.tool()
def search_widgets(q: str) -> dict:
    """Search the widgets."""
    return {"widgets": call("GET", f"/v1/widgets/search?q={q}")}


@server.tool()
def create_deal(name: str, stage: str) -> dict:
    """Create a deal."""
    return call("POST", "/v1/deals", {"name": name, "stage": stage})


@server.tool()
def delete_deal(id: str) -> dict:
    """Delete a deal."""
    return call("DELETE", f"/v1/deals/{id}")


if __name__ == "__main__":
    server.run()
