"""REST calls through `attest gateway` with `requests`.

Start the gateway in front of your API, then point your HTTP client at the gateway
instead of the API. Nothing else changes: same paths, same headers, same bodies.

    python3 examples/python/notes_api.py --port 8400 &             # a stand-in notes API
    attest gateway --upstream http://127.0.0.1:8400 --mode pending &  # listens on 127.0.0.1:8322
    python3 examples/python/gateway_requests.py

The script talks to a small notes API (`POST /v1/notes`, `PATCH`/`DELETE /v1/notes/ID`):
`notes_api.py` above, or your own API with the same shape. Each answer carries Attest's
verdict in `X-Attest-Decision`, `X-Attest-Level` and `X-Attest-Seq`; a refused call is a
403 whose JSON body says why, and the API never saw it.

Under the default policy creating a note asks a person. With `--mode pending` the gateway
answers at once with a 202 naming the approval id; the script prints it and waits (up to
ATTEST_WAIT seconds, default 300) while you decide in the inbox (`attest serve`) or with
`attest confirm ID approve`, retrying the `resume` URL the 202 gave (with its own headers)
until the decision is made. In the default `block` mode the gateway itself waits up to
`--timeout` (300 s) and says so on its stderr; the script's HTTP timeout (ATTEST_TIMEOUT,
default 330 s) is longer, so it does not give up first. With `--mode auto` every ask is
approved as `auto`: for trying the flow only.

The upstream can also be named per request: `X-Attest-Upstream: https://api.example.com`,
or the full URL in the path (`http://127.0.0.1:8322/https://api.example.com/v1/notes`).

Environment: ATTEST_GATEWAY (default http://127.0.0.1:8322), VENDOR_TOKEN (the API's
token, sent as a bearer token), ATTEST_WAIT, ATTEST_TIMEOUT.
"""

import os
import sys
import time

import requests

GATEWAY = os.environ.get("ATTEST_GATEWAY", "http://127.0.0.1:8322")
HEADERS = {"Authorization": f"Bearer {os.environ.get('VENDOR_TOKEN', 'demo-token')}"}
WAIT = float(os.environ.get("ATTEST_WAIT", "300"))
TIMEOUT = float(os.environ.get("ATTEST_TIMEOUT", "330"))


def show(what: str, response: requests.Response) -> None:
    print(
        f"{what}: {response.status_code} "
        f"decision={response.headers.get('X-Attest-Decision', '-')} "
        f"level={response.headers.get('X-Attest-Level', '-')} "
        f"seq={response.headers.get('X-Attest-Seq', '-')}",
        flush=True,
    )


def settled(what: str, response: requests.Response) -> requests.Response:
    """The final answer to a call: a held call (202) is resumed once a person decided."""
    if response.status_code != 202:
        return response
    held = response.json()
    print(
        f"  {what} waits for a person: approval {held['id']}; decide in the inbox "
        f"(attest serve) or with `attest confirm {held['id']} approve`",
        flush=True,
    )
    deadline = time.monotonic() + WAIT
    while True:
        resumed = requests.post(f"{GATEWAY}{held['resume']}", headers=HEADERS, timeout=TIMEOUT)
        # Still 202 while nobody has decided.
        if resumed.status_code != 202 or time.monotonic() > deadline:
            show(f"{what} (resumed)", resumed)
            return resumed
        time.sleep(1)


def main() -> int:
    created = requests.post(
        f"{GATEWAY}/v1/notes",
        json={"title": "quarterly plan", "body": "ship it"},
        headers=HEADERS,
        timeout=TIMEOUT,
    )
    show("create", created)
    created = settled("create", created)
    if created.status_code != 201:
        print("  not created:", created.json().get("error", created.text))
        return 1
    note_id = created.json()["id"]

    updated = requests.patch(
        f"{GATEWAY}/v1/notes/{note_id}", json={"title": "plan b"}, headers=HEADERS, timeout=TIMEOUT
    )
    show("update", updated)
    updated = settled("update", updated)

    deleted = requests.delete(f"{GATEWAY}/v1/notes/{note_id}", headers=HEADERS, timeout=TIMEOUT)
    show("delete", deleted)
    deleted = settled("delete", deleted)
    if deleted.status_code == 403:
        print("  not deleted:", "; ".join(deleted.json().get("reasons", [])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
