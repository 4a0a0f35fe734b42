"""`idempotency_key=`: a write made again with the same key and params does not run; it
raises `Replayed` with the first call's receipt."""

from __future__ import annotations

import asyncio

import pytest

import attest


def test_a_keyed_write_runs_once_and_a_retry_gets_the_first_receipt(a, cli, ledger_file, policy_file):
    calls = []

    def update_note(note_id: str, title: str) -> dict:
        calls.append(title)
        return {"id": note_id, "ok": True}

    params = {"note_id": "n1", "title": "plan"}
    kw = {"system": "notes", "verb": "update", "idempotency_key": "py-key-1"}
    assert a.call(update_note, params, **kw) == {"id": "n1", "ok": True}
    first = attest.last_receipt()
    # The same call again, from this Attest and from another one on the ledger.
    other = attest.Attest(ledger=ledger_file, policy=policy_file, agent="py-agent", durability="normal")
    for again in (a, other):
        with pytest.raises(attest.Replayed) as replayed:
            again.call(update_note, params, **kw)
        assert replayed.value.receipt.seq == first.seq
        assert replayed.value.receipt.level == first.level
    with pytest.raises(attest.Replayed):
        asyncio.run(a.acall(_async(update_note), params, **kw))
    assert calls == ["plan"], "the tool ran once"
    # The same key with other params is refused, and does not run.
    with pytest.raises(attest.AttestError) as refused:
        a.call(update_note, {"note_id": "n1", "title": "other"}, **kw)
    assert not isinstance(refused.value, attest.Replayed)
    assert "different call" in str(refused.value)
    assert calls == ["plan"]
    # The key is on the intent row.
    intents = [e for e in cli.entries() if e["execution"]["status"] == "intent"]
    assert [e.get("idempotency_key") for e in intents] == ["py-key-1"]


def _async(fn):
    async def run(**kwargs):
        return fn(**kwargs)

    run.__name__ = fn.__name__
    return run
