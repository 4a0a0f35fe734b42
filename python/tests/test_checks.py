"""A tool's own checks of its result: ``verify=`` (yes or no) and ``read_back=`` (fetches
the record from the vendor, Attest compares), against a real HTTP vendor on 127.0.0.1."""

from __future__ import annotations

import asyncio

import pytest

import attest
from vendor import Vendor

@pytest.fixture(params=[False, True], ids=["honest", "lying"])
def vendor(request):
    served = Vendor(lying=request.param)
    yield served
    served.close()


def last_outcome(cli) -> dict:
    return cli.outcomes()[-1]


def test_read_back_compares_the_record_the_vendor_kept(acting, vendor, cli):
    def get_contact(result):
        return vendor.get(f"/contacts/{result['id']}")

    @acting.tool(system="crm", verb="create", read_back=get_contact)
    def create_contact(id: str, name: str, stage: str) -> dict:
        return vendor.post("/contacts", {"id": id, "name": name, "stage": stage})

    assert create_contact("c1", name="Ada", stage="lead")["id"] == "c1"
    want = "unverified" if vendor.lying else "verified"
    assert attest.last_receipt().level == want
    verification = last_outcome(cli)["verification"]
    assert verification["method"] == "read-back:get_contact"
    assert verification["level"] == want
    fields = {f["field"]: f["ok"] for f in verification["evidence"]["fields"]}
    assert fields == {"id": True, "name": not vendor.lying, "stage": not vendor.lying}
    assert ("GET", "/contacts/c1") in vendor.requests
    cli.verify()


def test_a_read_back_that_finds_nothing_or_raises_degrades(acting, cli):
    vendor = Vendor()
    try:
        @acting.tool(system="crm", verb="update", read_back=lambda result: vendor.get("/contacts/nobody"))
        def update_contact(id: str, name: str) -> dict:
            return {"id": id, "ok": True}

        def broken(result):
            raise ConnectionError("vendor down")

        @acting.tool(system="crm", verb="update", read_back=broken)
        def rename_contact(id: str, name: str) -> dict:
            return {"id": id, "ok": True}

        update_contact("c9", name="Bob")
        assert attest.last_receipt().level == "acknowledged"
        nothing = last_outcome(cli)["verification"]
        assert nothing["method"] == "read-back:custom"
        assert "no record" in nothing["evidence"]["degraded"]

        rename_contact("c9", name="Bob")
        assert attest.last_receipt().level == "acknowledged", "a check that could not run is never unverified"
        raised = last_outcome(cli)["verification"]
        assert raised["method"] == "read-back:broken"
        assert "could not run" in raised["evidence"]["degraded"]
        assert "vendor down" not in str(raised), "a check's error text never reaches the ledger"
    finally:
        vendor.close()


def test_verify_says_yes_or_no_sync_and_async(acting, cli):
    @acting.tool(system="crm", verb="update", verify=lambda result: result["stage"] == "won")
    def set_stage(id: str, stage: str) -> dict:
        return {"id": id, "stage": stage if stage != "lost" else "won"}

    set_stage("c1", "won")
    assert attest.last_receipt().level == "verified-custom"
    row = last_outcome(cli)["verification"]
    assert (row["method"], row["matched"]) == ("custom", True)

    async def sent_as_asked(result, params):
        await asyncio.sleep(0)
        return result["stage"] == params["stage"]

    @acting.tool(system="crm", verb="update", verify=sent_as_asked)
    async def move_stage(id: str, stage: str) -> dict:
        return {"id": id, "stage": "won"}

    async def level(stage: str) -> str:
        await move_stage("c1", stage)
        return attest.last_receipt().level  # per asyncio task: read inside it

    assert asyncio.run(level("won")) == "verified-custom"
    assert asyncio.run(level("lost")) == "unverified"

    # A sync tool whose check is a coroutine function, and one that answers neither yes nor no.
    @acting.tool(system="crm", verb="update", verify=sent_as_asked)
    def tag_contact(id: str, stage: str) -> dict:
        return {"id": id, "stage": "lead"}

    tag_contact("c1", "won")
    assert attest.last_receipt().level == "unverified"

    @acting.tool(system="crm", verb="update", verify=lambda result: "yes")
    def touch_contact(id: str) -> dict:
        return {"id": id}

    touch_contact("c1")
    assert attest.last_receipt().level == "acknowledged"
    cli.verify()


def test_a_check_must_be_callable(acting):
    with pytest.raises(TypeError, match="verify= must be a callable"):

        @acting.tool(system="crm", verb="update", verify=True)
        def f(id: str) -> dict:
            return {}

        f("x")
