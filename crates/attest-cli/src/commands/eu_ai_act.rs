//! `attest export --format eu-ai-act`: each row as a record of the fields Article 12 of
//! the EU AI Act (Regulation (EU) 2024/1689, record-keeping) asks logs to enable. Every
//! field's source in the entry is documented in docs/audit-bundle.md; the hashed bytes
//! stay the canonical bodies, and each record carries the entry's hash and `prev`.

use std::io::Write;

use attest_ledger::{entry_hash, to_hex, Ledger};
use serde_json::{json, Value};

use crate::commands::export::{export_records, imported};

pub(crate) fn export(ledger: &Ledger, out: &mut impl Write) -> anyhow::Result<u64> {
    export_records(ledger, out, |seq, body, entry| {
        let field = |pointer: &str| entry.pointer(pointer).cloned().unwrap_or(Value::Null);
        json!({
            "record_id": field("/action_id"),
            // Art. 12(1): the automatic recording of events over the system's lifetime.
            "event_time": field("/ts"),
            // Art. 12(3)(a): the period of each use — the run the event belongs to.
            "period_of_use": { "session_id": field("/run_id"), "recorded_at": field("/ts") },
            // Art. 12(2)(a): situations that may present a risk (Art. 79(1)).
            "risk_situation": {
                "risk_tier": field("/tier"),
                "decision": field("/decision"),
                "reasons": field("/reasons"),
                "rules_fired": field("/rules_fired"),
                "target_class": field("/target_class"),
            },
            // Art. 12(2)(b): post-market monitoring (Art. 72) — what happened and whether it was checked.
            "post_market_monitoring": {
                "execution": field("/execution/status"),
                "verification_level": field("/verification/level"),
                "verification_method": field("/verification/method"),
            },
            // Art. 12(2)(c): monitoring of operation by the deployer (Art. 26(5)).
            "operation_monitoring": {
                "agent": field("/agent"),
                "agent_auth": field("/agent_auth"),
                "actor": field("/actor"),
                "system": field("/system"),
                "action": field("/verb"),
                "target": field("/target"),
                "owner": field("/owner"),
            },
            // Art. 12(3)(b): the reference the input was checked against — the system and call.
            "reference_database": { "system": field("/system"), "call": field("/call") },
            // Art. 12(3)(c): the input data — by fingerprint only (raw params never enter the ledger).
            "input_data": { "params_sha256": field("/params_hash"), "result_ids": field("/result_ids") },
            // Art. 12(3)(d) and Art. 14(5): the natural persons who verified the result.
            "human_oversight": {
                "outcome": field("/confirm/outcome"),
                "approver": field("/confirm/approver"),
                "approvers": field("/confirm/approvers"),
                "channel": field("/confirm/channel"),
            },
            "integrity": {
                "seq": seq,
                "prev_hash": field("/prev"),
                "record_hash": to_hex(&entry_hash(body)),
                "imported": imported(entry),
            },
        })
    })
}
