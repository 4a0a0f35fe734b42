"""Decorated Python tools: a read acts, a payment is refused, a write waits for a person.

    pip install ./python && python examples/python/attest_tools.py

Offline: the tools are stand-ins, the ledger rows are real (in a temporary directory, or
$ATTEST_LEDGER). `attest verify --ledger FILE` checks what it wrote.
"""

import os
import pathlib
import tempfile

import attest

ledger = os.environ.get("ATTEST_LEDGER") or str(pathlib.Path(tempfile.mkdtemp()) / "ledger.sqlite")
policy = pathlib.Path(tempfile.mkdtemp()) / "policy.yaml"
policy.write_text(
    "version: 1\n"
    "policies:\n"
    "  - name: no-payments\n"
    "    match: {verb: pay}\n"
    "    decision: refuse\n"
    "    reason: agents do not move money\n"
)
a = attest.Attest(ledger=ledger, policy=policy, agent="example-agent")


@a.tool  # system and verb detected from the name: crm / get
def get_contact(contact_id: str) -> dict:
    return {"id": contact_id, "name": "Ada"}


@a.tool(system="stripe", verb="pay")
def refund_charge(charge: str, amount: int) -> dict:
    raise AssertionError("never runs: policy refuses payments")


@a.tool(system="notes", verb="create")
def create_note(title: str) -> dict:
    return {"id": "n1", "title": title}


with a.run("example-run-1"):
    print("get_contact:", get_contact("c42"), attest.last_receipt())
    try:
        refund_charge("ch_1", 5000)
    except attest.Refused as refused:
        print("refund_charge: refused:", refused, "seq", refused.receipt.seq)
    try:
        create_note("quarterly plan")
    except attest.Held as held:
        print("create_note: held; approve with `attest confirm", held.request_id, "approve`")
    a.record("sent_email", {"to": "bob@example.com"}, system="gmail", verb="send", result={"id": "m1"})
print("ledger:", ledger)
