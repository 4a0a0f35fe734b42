"""A local OAuth / OpenID Connect provider for the tests (PyJWT, cryptography).

    python3 oauth_issuer.py PORT

Its issuer is http://127.0.0.1:PORT. It publishes RFC 8414 metadata and an OpenID
Connect discovery document naming its JWKS (one RSA key, kid "k1") and, for the tests
only, mints tokens on request:

    GET /mint?sub=alice&aud=RESOURCE[&iss=…][&exp_in=SECONDS][&key=other][&claim_NAME=VALUE]
              [&nbf_in=SECONDS][&nbf=JSON][&crit=JSON]

`key=other` signs with a second key that claims the same kid (a forged signature);
`claim_email=a@b` adds claim `email`; `nbf_in` sets `nbf` that far from now, `nbf` to a
JSON value as given; `crit` puts a JSON value in the header's `crit` (and each name it
lists in the header too, as RFC 7515 has a producer do).

The authorization code flow with PKCE, for one confidential client (CLIENT_ID with
CLIENT_SECRET, sent as HTTP Basic): `GET /authorize` signs in the user the test names
(`login_hint`) at once and redirects to the client's `redirect_uri` with a code and the
state; `POST /token` takes the code once, checks the client, the redirect URI and the
PKCE verifier (S256), and answers an ID token (`aud` the client, `nonce` the request's,
`email` and `sub` the user). The test spoils the ID token with `spoil` on the
authorization request: `issuer`, `audience`, `expired`, `nonce`, `signature`, `nbf` (an
hour ahead), `crit` (an unknown critical extension), `crit_empty` (`crit: []`),
`email_unverified` (`email_verified: false`) or `email_verified_absent`; otherwise the
ID token says `email_verified: true`. Every
token request is appended to $OAUTH_LOG (one JSON line) when set. Prints the issuer on its
first line once it listens.
"""

import base64
import hashlib
import json
import os
import secrets
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlparse

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

PORT = int(sys.argv[1])
ISSUER = f"http://127.0.0.1:{PORT}"
KEYS = {name: rsa.generate_private_key(public_exponent=65537, key_size=2048)
        for name in ("good", "other")}
JWK = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEYS["good"].public_key()))
JWK.update({"kid": "k1", "alg": "RS256", "use": "sig"})
CLIENT_ID = "attest-inbox"
CLIENT_SECRET = "inbox-client-secret"
CODES = {}


def metadata():
    return {"issuer": ISSUER, "jwks_uri": f"{ISSUER}/jwks",
            "authorization_endpoint": f"{ISSUER}/authorize",
            "token_endpoint": f"{ISSUER}/token",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"]}


def header(crit):
    """The JWS header: the key id, and `crit` (a JSON text) with the names it lists."""
    headers = {"kid": "k1"}
    if crit is not None:
        headers["crit"] = json.loads(crit)
        if isinstance(headers["crit"], list):
            headers.update({name: True for name in headers["crit"] if isinstance(name, str)})
    return headers


def log(entry):
    path = os.environ.get("OAUTH_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    def reply(self, status, body, content_type="application/json"):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlparse(self.path)
        if url.path in ("/.well-known/oauth-authorization-server",
                        "/.well-known/openid-configuration"):
            self.reply(200, metadata())
        elif url.path == "/authorize":
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            if (q.get("client_id") != CLIENT_ID or q.get("response_type") != "code"
                    or q.get("code_challenge_method") != "S256" or "code_challenge" not in q
                    or "openid" not in q.get("scope", "").split()):
                self.reply(400, {"error": "invalid_request", "got": q})
                return
            code = secrets.token_urlsafe(16)
            CODES[code] = q
            target = q["redirect_uri"] + "?" + urlencode({"code": code, "state": q.get("state", "")})
            self.send_response(302)
            self.send_header("location", target)
            self.send_header("content-length", "0")
            self.end_headers()
        elif url.path == "/jwks":
            self.reply(200, {"keys": [JWK]})
        elif url.path == "/mint":
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            now = int(time.time())
            claims = {"sub": q["sub"], "aud": q["aud"], "iss": q.get("iss", ISSUER),
                      "iat": now, "exp": now + int(q.get("exp_in", "300"))}
            if "nbf_in" in q:
                claims["nbf"] = now + int(q["nbf_in"])
            if "nbf" in q:
                claims["nbf"] = json.loads(q["nbf"])
            claims.update({k[len("claim_"):]: v for k, v in q.items() if k.startswith("claim_")})
            token = jwt.encode(claims, KEYS[q.get("key", "good")], algorithm="RS256",
                               headers=header(q.get("crit")))
            self.reply(200, token, "text/plain")
        else:
            self.reply(404, {"error": "not found"})

    def do_POST(self):
        if urlparse(self.path).path != "/token":
            self.reply(404, {"error": "not found"})
            return
        body = self.rfile.read(int(self.headers.get("content-length", "0"))).decode()
        form = {k: v[0] for k, v in parse_qs(body).items()}
        basic = self.headers.get("authorization", "")
        client = base64.b64decode(basic[6:]).decode() if basic.startswith("Basic ") else ""
        request = CODES.pop(form.get("code", ""), None)
        verifier = form.get("code_verifier", "")
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        checks = {
            "client": client == f"{CLIENT_ID}:{CLIENT_SECRET}",
            "code": request is not None,
            "grant": form.get("grant_type") == "authorization_code",
            "redirect_uri": request is not None and form.get("redirect_uri") == request["redirect_uri"],
            "pkce": request is not None and challenge == request["code_challenge"],
        }
        log({"grant": "authorization_code", "checks": checks})
        if not all(checks.values()):
            self.reply(400, {"error": "invalid_grant", "checks": checks})
            return
        spoil = request.get("spoil", "")
        user = request.get("login_hint", "nobody@example.com")
        now = int(time.time())
        claims = {"iss": "http://127.0.0.1:9" if spoil == "issuer" else ISSUER,
                  "aud": "someone-else" if spoil == "audience" else CLIENT_ID,
                  "sub": "user-" + hashlib.sha256(user.encode()).hexdigest()[:12],
                  "email": user, "iat": now - (600 if spoil == "expired" else 0),
                  "exp": now + (-300 if spoil == "expired" else 300),
                  "nonce": "not-the-nonce" if spoil == "nonce" else request.get("nonce", ""),
                  "email_verified": spoil != "email_unverified"}
        if spoil == "email_verified_absent":
            del claims["email_verified"]
        if spoil == "nbf":
            claims["nbf"] = now + 3600
        crit = {"crit": '["urn:example:unknown"]', "crit_empty": "[]"}.get(spoil)
        key = KEYS["other" if spoil == "signature" else "good"]
        id_token = jwt.encode(claims, key, algorithm="RS256", headers=header(crit))
        self.reply(200, {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer",
                         "expires_in": 300, "id_token": id_token})

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print(ISSUER, flush=True)
server.serve_forever()
