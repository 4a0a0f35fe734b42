"""A local OAuth authorization server for the protected-resource tests (PyJWT, cryptography).

    python3 oauth_issuer.py PORT

Its issuer is http://127.0.0.1:PORT. It publishes RFC 8414 metadata naming its JWKS (one
RSA key, kid "k1") and, for the tests only, mints access tokens on request:

    GET /mint?sub=alice&aud=RESOURCE[&iss=…][&exp_in=SECONDS][&key=other]

`key=other` signs with a second key that claims the same kid (a forged signature). Prints
the issuer on its first line once it listens.
"""

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

PORT = int(sys.argv[1])
ISSUER = f"http://127.0.0.1:{PORT}"
KEYS = {name: rsa.generate_private_key(public_exponent=65537, key_size=2048)
        for name in ("good", "other")}
JWK = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(KEYS["good"].public_key()))
JWK.update({"kid": "k1", "alg": "RS256", "use": "sig"})


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
        if url.path == "/.well-known/oauth-authorization-server":
            self.reply(200, {"issuer": ISSUER, "jwks_uri": f"{ISSUER}/jwks",
                             "authorization_endpoint": f"{ISSUER}/authorize",
                             "token_endpoint": f"{ISSUER}/token",
                             "response_types_supported": ["code"]})
        elif url.path == "/jwks":
            self.reply(200, {"keys": [JWK]})
        elif url.path == "/mint":
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            now = int(time.time())
            claims = {"sub": q["sub"], "aud": q["aud"], "iss": q.get("iss", ISSUER),
                      "iat": now, "exp": now + int(q.get("exp_in", "300"))}
            token = jwt.encode(claims, KEYS[q.get("key", "good")], algorithm="RS256",
                               headers={"kid": "k1"})
            self.reply(200, token, "text/plain")
        else:
            self.reply(404, {"error": "not found"})

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
print(ISSUER, flush=True)
server.serve_forever()
