"""The notes server over streamable HTTP (the official `mcp` SDK), for the remote-MCP tests.

    python3 remote_notes.py PORT TOKEN

Serves /mcp on 127.0.0.1:PORT. Every HTTP request must carry `Authorization: Bearer
TOKEN`, else it is answered 401 with a `WWW-Authenticate` challenge naming its protected
resource metadata (as the MCP authorization spec has it): the proxy must pass its
client's token through, and the challenge back.
"""

import sys

import uvicorn

from notes_server import server

PORT = int(sys.argv[1])
EXPECTED = f"Bearer {sys.argv[2]}".encode()
CHALLENGE = (
    f'Bearer error="invalid_token", resource_metadata='
    f'"http://127.0.0.1:{PORT}/.well-known/oauth-protected-resource/mcp"'
).encode()
APP = server.streamable_http_app(host="127.0.0.1")


async def require_bearer(scope, receive, send):
    if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != EXPECTED:
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"text/plain"),
                                (b"www-authenticate", CHALLENGE)]})
        await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
        return
    await APP(scope, receive, send)


uvicorn.run(require_bearer, host="127.0.0.1", port=PORT, log_level="warning")
