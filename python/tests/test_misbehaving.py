"""A function that ran always gets its outcome row, whatever its result holds and
whatever its ``verify=`` check raised: values JSON cannot carry are recorded as
fingerprints, never raw, and an exception that must reach the caller (``SystemExit``, a
cancellation) reaches it after the row is written. Each test reads the real ledger back
with the ``attest`` binary: no intent is left open."""

from __future__ import annotations

import asyncio
import hashlib
import json

import pytest

import attest


def closed(cli) -> dict:
    """The one call's outcome row, once `attest intents` says no intent is left open."""
    assert json.loads(cli.run("intents", "--json").stdout) == []
    outcomes = cli.outcomes()
    assert len(outcomes) == 1, outcomes
    assert outcomes[0]["execution"]["status"] == "ok"
    return outcomes[0]


def stand_in(kind: str, data: bytes) -> dict:
    """What the ledger hashes in place of a value JSON cannot carry."""
    return {"sha256": hashlib.sha256(data).hexdigest(), "unrepresentable": kind}


def result_hash(value: dict) -> str:
    """The SHA-256 of `value`'s canonical JSON (strings and integers only here, where
    sorted keys and no spaces are RFC 8785)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_nan_in_the_result_is_recorded_as_a_fingerprint(acting, cli):
    @acting.tool(system="crm", verb="update")
    def score_contact(id: str) -> dict:
        return {"id": id, "score": float("nan")}

    result = score_contact("c1")
    assert result["id"] == "c1" and result["score"] != result["score"]
    row = closed(cli)
    # The rest of the result is read as usual (its id acknowledges the write).
    assert row["verification"]["level"] == "acknowledged"
    assert row["result_ids"] == ["c1"]
    assert row["execution"]["result_hash"] == result_hash({"id": "c1", "score": stand_in("float", b"nan")})
    assert attest.last_receipt().level == "acknowledged"
    cli.verify()


def test_non_string_keys_in_the_result_are_recorded(acting, cli):
    @acting.tool(system="crm", verb="update")
    def count_contacts(id: str) -> dict:
        # Keys of mixed types cannot be sorted, and a tuple key has no JSON form.
        return {"id": id, "by_year": {2025: 3, "total": 3, ("eu", 2025): 1}}

    assert count_contacts("c2")["by_year"][("eu", 2025)] == 1
    row = closed(cli)
    assert row["verification"]["level"] == "acknowledged"
    key = "unrepresentable key sha256:" + hashlib.sha256(repr(("eu", 2025)).encode()).hexdigest()
    carried = {"id": "c2", "by_year": {"2025": 3, "total": 3, key: 1}}
    assert row["execution"]["result_hash"] == result_hash(carried)
    cli.verify()


def test_a_lone_surrogate_in_the_result_is_recorded_as_a_fingerprint(acting, cli):
    @acting.tool(system="crm", verb="update")
    def rename_contact(id: str) -> dict:
        return {"id": id, "name": "Quill\ud800"}

    assert rename_contact("c3")["name"] == "Quill\ud800"
    row = closed(cli)
    assert row["verification"]["level"] == "acknowledged"
    fingerprint = stand_in("string", "Quill\ud800".encode("utf-8", "surrogatepass"))
    assert row["execution"]["result_hash"] == result_hash({"id": "c3", "name": fingerprint})
    # Never the raw value: the ledger's bytes hold no trace of the name.
    assert "Quill" not in cli.run("export").stdout
    cli.verify()


def test_a_verify_raising_system_exit_records_the_outcome_then_exits(acting, cli):
    def check(result):
        raise SystemExit(3)

    @acting.tool(system="crm", verb="update", verify=check)
    def update_contact(id: str) -> dict:
        return {"id": id, "ok": True}

    with pytest.raises(SystemExit) as exited:
        update_contact("c4")
    assert exited.value.code == 3
    verification = closed(cli)["verification"]
    # A check that could not run degrades the row, never to unverified.
    assert verification["method"] == "custom"
    assert verification["level"] == "acknowledged"
    assert verification["evidence"]["degraded"] == "custom check could not run"
    cli.verify()


def test_a_cancelled_verify_records_ran_check_cancelled(acting, cli):
    async def main() -> None:
        checking = asyncio.Event()

        async def check(result):
            checking.set()
            await asyncio.sleep(60)
            return True

        @acting.tool(system="crm", verb="update", verify=check)
        async def update_contact(id: str) -> dict:
            return {"id": id, "ok": True}

        task = asyncio.ensure_future(update_contact("c5"))
        await checking.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    verification = closed(cli)["verification"]
    assert verification["method"] == "custom"
    assert verification["level"] == "acknowledged"
    assert verification["evidence"]["degraded"] == "custom check cancelled"
    cli.verify()
