"""An MCP server named `github` for the proxy's read-back tests, built with the official
`mcp` SDK. Its `create_issue` writes through GitHub's REST API at $GITHUB_API (a fake
on 127.0.0.1 in the tests) with the token in $GITHUB_TOKEN, and returns the issue the
API answered, as GitHub's own MCP server does.
"""

import json
import os
import urllib.request

from mcp.server import MCPServer

server = MCPServer("github")


@server.tool()
def create_issue(owner: str, repo: str, title: str, body: str = "") -> dict:
    """Create an issue in owner/repo."""
    request = urllib.request.Request(
        f"{os.environ['GITHUB_API']}/repos/{owner}/{repo}/issues",
        data=json.dumps({"title": title, "body": body}).encode(),
        headers={
            "Authorization": f"Bearer {os.environ['GITHUB_TOKEN']}",
            "Content-Type": "application/json",
            "Accept": "application/vnd.github+json",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        issue = json.load(response)
    return {"number": issue["number"], "id": issue["id"], "title": issue["title"]}


if __name__ == "__main__":
    server.run()
