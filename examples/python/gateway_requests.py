"""REST calls through `attest gateway` with `requests`.

Start the gateway in front of your API, then point your HTTP client at the gateway
instead of the API. Nothing else changes: same paths, same headers, same bodies.

    attest gateway --upstream https://api.example.com        # listens on 127.0.0.1:8322
    ATTEST_GATEWAY=http://127.0.0.1:8322 VENDOR_TOKEN=... python3 gateway_requests.py

This script talks to a small notes API (`POST /v1/notes`, `PATCH`/`DELETE /v1/notes/ID`),
like the fake vendor the test suite starts. Each answer carries Attest's verdict in
`X-Attest-Decision`, `X-Attest-Level` and `X-Attest-Seq`; a refused call is a 403 whose
JSON body says why, and the API never saw it. A call held for a person (`--mode pending`,
or unanswered in `block` mode) is a 202 with a token; after `attest confirm ID approve`,
POST to the `resume` URL it gave (with your own headers) to send it. The upstream can also be named per
request: `X-Attest-Upstream: https://api.example.com`, or the full URL in the path
(`http://127.0.0.1:8322/https://api.example.com/v1/notes`).
"""

import os
import sys

import requests

GATEWAY = os.environ.get("ATTEST_GATEWAY", "http://127.0.0.1:8322")
HEADERS = {"Authorization": f"Bearer {os.environ.get('VENDOR_TOKEN', 'demo-token')}"}


def show(what: str, response: requests.Response) -> None:
    print(
        f"{what}: {response.status_code} "
        f"decision={response.headers.get('X-Attest-Decision', '-')} "
        f"level={response.headers.get('X-Attest-Level', '-')} "
        f"seq={response.headers.get('X-Attest-Seq', '-')}"
    )


def main() -> int:
    created = requests.post(
        f"{GATEWAY}/v1/notes",
        json={"title": "quarterly plan", "body": "ship it"},
        headers=HEADERS,
        timeout=30,
    )
    show("create", created)
    created.raise_for_status()
    note_id = created.json()["id"]

    updated = requests.patch(
        f"{GATEWAY}/v1/notes/{note_id}", json={"title": "plan b"}, headers=HEADERS, timeout=30
    )
    show("update", updated)

    deleted = requests.delete(f"{GATEWAY}/v1/notes/{note_id}", headers=HEADERS, timeout=30)
    show("delete", deleted)
    if deleted.status_code == 403:
        print("  refused:", "; ".join(deleted.json().get("reasons", [])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
