"""The notes server as an OAuth-protected MCP server, with its own authorization server,
for the tests of Attest as an OAuth client (the official `mcp` SDK, uvicorn).

    python3 oauth_notes.py PORT                 serve (prints its /mcp URL once it listens)
    python3 oauth_notes.py expire TOKEN_FILE    mark the stored access token expired
    python3 oauth_notes.py revoke MCP_URL       revoke every token it has issued

On 127.0.0.1:PORT: /mcp answers only an unrevoked access token it issued (else 401 with a
`WWW-Authenticate` naming its protected resource metadata, RFC 9728); the authorization
server publishes RFC 8414 metadata, registers clients (RFC 7591), approves every
authorization request at once (a 302 back with the code: no person needed) and issues
opaque tokens for the code with PKCE S256 checked, and for a refresh token. Each grant
is appended to OAUTH_LOG as a JSON line ({"grant": …}), with no token in it. With
OAUTH_REFRESH_DELAY=SECS a refresh answers after that long (two clients refreshing at
once then overlap). With OAUTH_LEGACY_ISSUER=URL ({base} in it is the server's origin),
the 2025-03-26 revision's layout: no protected resource metadata (nor a pointer to it in
the challenge), the authorization server's metadata at the origin's root naming URL as
its issuer, and its endpoints under /oauth. With OAUTH_PKCE_METHODS the metadata's
code_challenge_methods_supported is that comma-separated list (empty: the field left
out). Each authorization request is appended to OAUTH_LOG as {"request": "authorize"}.
"""

import asyncio
import base64
import hashlib
import json
import os
import secrets
import sys
import time
from urllib.parse import parse_qs, urlencode

if sys.argv[1] == "expire":
    # The token's clock set back: received long ago, so its expires_in has passed.
    with open(sys.argv[2], encoding="utf-8") as f:
        stored = json.load(f)
    stored["credentials"]["token_received_at"] = 1
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(stored, f)
    sys.exit(0)

if sys.argv[1] == "revoke":
    import urllib.request
    base = sys.argv[2].rsplit("/mcp", 1)[0]
    urllib.request.urlopen(urllib.request.Request(f"{base}/test/revoke", method="POST"))
    sys.exit(0)

import uvicorn

from notes_server import server

PORT = int(sys.argv[1])
BASE = f"http://127.0.0.1:{PORT}"
RESOURCE = f"{BASE}/mcp"
METADATA = f"{BASE}/.well-known/oauth-protected-resource/mcp"
CHALLENGE = f'Bearer error="invalid_token", resource_metadata="{METADATA}"'.encode()
LEGACY_ISSUER = os.environ.get("OAUTH_LEGACY_ISSUER", "").replace("{base}", BASE)
PREFIX = "/oauth" if LEGACY_ISSUER else ""
if LEGACY_ISSUER:
    CHALLENGE = b'Bearer error="invalid_token"'
PKCE_METHODS = os.environ.get("OAUTH_PKCE_METHODS", "S256")

APP = server.streamable_http_app(host="127.0.0.1")

ACCESS = {}   # token -> {"revoked": bool}
REFRESH = {}  # token -> {"revoked": bool, "client_id": str}
CODES = {}    # code -> {"challenge": str, "client_id": str, "redirect_uri": str}


def log(entry):
    path = os.environ.get("OAUTH_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def issue(client_id):
    access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    ACCESS[access] = {"revoked": False}
    REFRESH[refresh] = {"revoked": False, "client_id": client_id}
    return {"access_token": access, "token_type": "Bearer", "expires_in": 3600,
            "refresh_token": refresh, "scope": "notes"}


async def body_of(receive):
    data = b""
    while True:
        message = await receive()
        data += message.get("body", b"")
        if not message.get("more_body"):
            return data


async def reply(send, status, body, headers=()):
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *headers]})
    await send({"type": "http.response.body", "body": data})
    return True


async def oauth(scope, receive, send):
    path, method = scope["path"], scope["method"]
    if PREFIX and path.startswith(PREFIX + "/"):
        path = path[len(PREFIX):]
    elif PREFIX and path in ("/authorize", "/token", "/register"):
        return None
    query = {k: v[0] for k, v in parse_qs(scope.get("query_string", b"").decode()).items()}
    if path == "/.well-known/oauth-protected-resource/mcp" and not LEGACY_ISSUER:
        return await reply(send, 200, {"resource": RESOURCE, "authorization_servers": [BASE],
                                       "scopes_supported": ["notes"]})
    if path == "/.well-known/oauth-authorization-server":
        at = BASE + PREFIX
        metadata = {
            "issuer": LEGACY_ISSUER or BASE, "authorization_endpoint": f"{at}/authorize",
            "token_endpoint": f"{at}/token", "registration_endpoint": f"{at}/register",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none"], "scopes_supported": ["notes"]}
        if PKCE_METHODS:
            metadata["code_challenge_methods_supported"] = PKCE_METHODS.split(",")
        return await reply(send, 200, metadata)
    if path == "/register" and method == "POST":
        registration = json.loads(await body_of(receive))
        client_id = "client-" + secrets.token_hex(4)
        log({"grant": "register"})
        return await reply(send, 201, {"client_id": client_id,
                                       "redirect_uris": registration["redirect_uris"],
                                       "token_endpoint_auth_method": "none"})
    if path == "/authorize":
        log({"request": "authorize"})
        if query.get("code_challenge_method") != "S256" or "code_challenge" not in query:
            return await reply(send, 400, {"error": "invalid_request"})
        code = secrets.token_urlsafe(16)
        CODES[code] = {"challenge": query["code_challenge"], "client_id": query["client_id"],
                       "redirect_uri": query["redirect_uri"]}
        location = f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"
        return await reply(send, 302, b"", [(b"location", location.encode())])
    if path == "/token" and method == "POST":
        form = {k: v[0] for k, v in parse_qs((await body_of(receive)).decode()).items()}
        grant = form.get("grant_type")
        log({"grant": grant})
        if grant == "authorization_code":
            code = CODES.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "")
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            if code is None or digest.rstrip(b"=").decode() != code["challenge"]:
                return await reply(send, 400, {"error": "invalid_grant"})
            return await reply(send, 200, issue(code["client_id"]))
        if grant == "refresh_token":
            await asyncio.sleep(float(os.environ.get("OAUTH_REFRESH_DELAY", "0")))
            held = REFRESH.get(form.get("refresh_token", ""))
            if held is None or held["revoked"]:
                return await reply(send, 400, {"error": "invalid_grant",
                                               "error_description": "refresh token revoked"})
            held["revoked"] = True  # rotated: each refresh token works once
            return await reply(send, 200, issue(held["client_id"]))
        return await reply(send, 400, {"error": "unsupported_grant_type"})
    if path == "/test/revoke" and method == "POST":
        for held in (*ACCESS.values(), *REFRESH.values()):
            held["revoked"] = True
        log({"grant": "revoked"})
        return await reply(send, 200, {"revoked": True})
    return None


async def app(scope, receive, send):
    if scope["type"] != "http":
        return await APP(scope, receive, send)
    if not scope["path"].startswith("/mcp"):
        if not await oauth(scope, receive, send):
            await reply(send, 404, {"error": "not found"})
        return
    header = dict(scope["headers"]).get(b"authorization", b"").decode()
    token = header[7:] if header.startswith("Bearer ") else ""
    if token not in ACCESS or ACCESS[token]["revoked"]:
        await reply(send, 401, b"missing, unknown or revoked token",
                    [(b"www-authenticate", CHALLENGE)])
        return
    await APP(scope, receive, send)


config = uvicorn.Config(app, host="127.0.0.1", port=PORT, log_level="warning")
uvicorn_server = uvicorn.Server(config)
print(RESOURCE, flush=True)
# The test reads only the first line and closes the pipe: nothing more goes to it.
os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
uvicorn_server.run()
