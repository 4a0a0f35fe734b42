"""A fake vendor on 127.0.0.1: a CRM whose contacts a tool writes and a read-back reads.

An honest vendor keeps what it was sent; a lying one answers the write as if it kept it,
and keeps something else. Every request is counted, so a test can say that a refused
call never reached the vendor."""

from __future__ import annotations

import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional


class Vendor:
    """``POST /contacts`` stores a contact (``{"id", ...}``); ``GET /contacts/<id>``
    reads one back (404 when unknown). ``requests`` lists ``(method, path)`` seen."""

    def __init__(self, lying: bool = False) -> None:
        self.lying = lying
        self.contacts: dict[str, dict] = {}
        self.requests: list[tuple[str, str]] = []
        self.notices: list[dict] = []
        vendor = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _answer(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                vendor.requests.append(("GET", self.path))
                parts = self.path.split("?")[0].strip("/").split("/")
                if len(parts) == 2 and parts[0] == "contacts" and parts[1] in vendor.contacts:
                    self._answer(200, vendor.contacts[parts[1]])
                elif self.path.startswith("/contacts"):
                    if len(parts) == 1:
                        self._answer(200, {"contacts": list(vendor.contacts.values())})
                    else:
                        self._answer(404, {"error": "no such contact"})
                else:
                    self._answer(404, {"error": "not found"})

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                vendor.requests.append(("POST", self.path))
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.startswith("/notify"):
                    vendor.notices.append(body)
                    self._answer(200, {"ok": True})
                    return
                contact_id = str(body.get("id") or f"c{len(vendor.contacts) + 1}")
                kept = dict(body, id=contact_id)
                if vendor.lying:
                    kept = {key: (f"not {value}" if key != "id" else value) for key, value in kept.items()}
                vendor.contacts[contact_id] = kept
                # The answer says what was asked for, honest or not.
                self._answer(200, dict(body, id=contact_id))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return json.loads(answer.read())

    def get(self, path: str) -> Optional[dict]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
