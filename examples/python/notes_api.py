"""A stand-in notes API for trying `attest gateway` without a vendor account.

    python3 examples/python/notes_api.py [--port 8400]

Standard library only. It serves, on 127.0.0.1, the small REST API that
`gateway_requests.py` talks to:

    POST   /v1/notes         {"title", "body"}  -> 201 {"id", "title", "body"}, Location
    GET    /v1/notes/ID                        -> 200 the note, or 404
    PATCH  /v1/notes/ID      {"title"?, "body"?} -> 200 the note
    DELETE /v1/notes/ID                        -> 204

Every request needs an `Authorization: Bearer ...` header (any token), like a real API.
It prints `notes API listening on http://127.0.0.1:PORT` once it accepts connections.
"""

import argparse
import itertools
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NOTES: dict[str, dict] = {}
IDS = itertools.count(1)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet: the gateway logs what matters
        pass

    def send(self, status: int, body=None, headers=None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self) -> dict:
        length = int(self.headers.get("Content-Length") or 0)
        if length == 0:
            return {}
        value = json.loads(self.rfile.read(length))
        return value if isinstance(value, dict) else {}

    def route(self, method: str) -> None:
        if not self.headers.get("Authorization", "").startswith("Bearer "):
            return self.send(401, {"error": "missing bearer token"})
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[:2] != ["v1", "notes"] or len(parts) > 3:
            return self.send(404, {"error": "no such path"})
        note_id = parts[2] if len(parts) == 3 else None
        try:
            body = self.body() if method in ("POST", "PATCH") else {}
        except ValueError:
            return self.send(400, {"error": "the body is not JSON"})
        if method == "POST" and note_id is None:
            note = {"id": f"n{next(IDS)}", "title": body.get("title", ""), "body": body.get("body", "")}
            NOTES[note["id"]] = note
            return self.send(201, note, {"Location": f"/v1/notes/{note['id']}"})
        if note_id is None or note_id not in NOTES:
            return self.send(404, {"error": "no such note"})
        if method == "GET":
            return self.send(200, NOTES[note_id])
        if method == "PATCH":
            NOTES[note_id].update({k: v for k, v in body.items() if k in ("title", "body")})
            return self.send(200, NOTES[note_id])
        if method == "DELETE":
            del NOTES[note_id]
            return self.send(204)
        return self.send(405, {"error": "method not allowed"})

    def do_GET(self) -> None:
        self.route("GET")

    def do_POST(self) -> None:
        self.route("POST")

    def do_PATCH(self) -> None:
        self.route("PATCH")

    def do_DELETE(self) -> None:
        self.route("DELETE")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8400)
    port = parser.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"notes API listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
