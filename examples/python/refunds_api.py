"""A stand-in refunds API for trying bounded grants through `attest gateway`.

    python3 examples/python/refunds_api.py [--port 8401]

Standard library only. It serves, on 127.0.0.1:

    POST /v1/refunds  {"charge", "amount", "currency"}  -> 201 {"id", "amount", "currency"}

It prints `refunds API listening on http://127.0.0.1:PORT` once it accepts connections.
"""

import argparse
import itertools
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

IDS = itertools.count(1)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet: the gateway logs what matters
        pass

    def send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.send(200, {"ok": True})

    def do_POST(self) -> None:
        if self.path.split("?")[0].rstrip("/") != "/v1/refunds":
            return self.send(404, {"error": "no such path"})
        length = int(self.headers.get("Content-Length") or 0)
        asked = json.loads(self.rfile.read(length) or b"{}")
        refund = {"id": f"re_{next(IDS)}", "amount": asked.get("amount"), "currency": asked.get("currency")}
        self.send(201, refund)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8401)
    port = parser.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"refunds API listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
