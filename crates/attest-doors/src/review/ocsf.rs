//! `attest export --format ocsf`: each entry as an OCSF API Activity event (class 6003,
//! OCSF 1.3), one JSON object per line, for the SIEMs security teams already run.
//!
//! The events are a view: the hashed bytes stay the canonical bodies. Each event
//! carries the entry's seq (`metadata.sequence`) and hash (`metadata.uid`), and both
//! again with `prev` under `unmapped.attest`, so a SIEM's copy can be checked against
//! the ledger (`attest prove SEQ`, or recompute the chain from `attest export`).
//!
//! Mapping: the verb gives `activity_id` (reads 2 Read, `create`/`send`/`upload`/… 1
//! Create, `update`/`write` 3 Update, `delete` 4 Delete, else 99 Other); the system is
//! `api.service.name` and the verb `api.operation`; the agent is `actor.app_name`, the
//! person it acts for `actor.user.name`, the run `actor.session.uid`; the target is a
//! resource; the decision gives `disposition_id` (act 1 Allowed, refuse or a rejected
//! ask 2 Blocked, an approved ask 8 Approved); the execution status gives `status_id`
//! (1 Success, 2 Failure, 0 Unknown); the risk tier gives `severity_id`.

use std::io::Write;

use attest_ledger::{entry_hash, to_hex, Ledger, LedgerError};
use serde_json::{json, Value};

use super::rows::{parse_ts, RowView};

/// The OCSF schema version the events follow.
pub const OCSF_VERSION: &str = "1.3.0";
/// API Activity.
const CLASS_UID: u64 = 6003;
/// Application Activity.
const CATEGORY_UID: u64 = 6;

/// Writes every entry as one OCSF event per line; returns how many.
pub fn export(ledger: &Ledger, out: &mut impl Write) -> Result<u64, LedgerError> {
    let mut count = 0;
    let revealer = ledger.revealer()?;
    ledger.for_each_row(1, |row| {
        // Sealed personal fields opened, or `erased`; the hash stays the stored bytes'.
        let event = shown_event(row.seq, row.body, &revealer.shown(row.body))?;
        serde_json::to_writer(&mut *out, &event).map_err(|e| LedgerError::Output(e.into()))?;
        out.write_all(b"\n").map_err(LedgerError::Output)?;
        count += 1;
        Ok(true)
    })?;
    Ok(count)
}

/// The row at `seq` with stored body `body` as an API Activity event (its `uid` the
/// hash of those bytes).
pub fn row_event(seq: u64, body: &[u8]) -> Result<Value, LedgerError> {
    shown_event(seq, body, body)
}

/// [`row_event`] for a view that shows the row otherwise than it is stored (`shown`: its
/// sealed personal fields opened, or `erased`); the hash and `prev` stay the stored
/// bytes'.
pub fn shown_event(seq: u64, stored: &[u8], shown: &[u8]) -> Result<Value, LedgerError> {
    let view = RowView::parse(shown).ok_or_else(|| LedgerError::BadRow {
        seq,
        detail: "body is not an entry".to_owned(),
    })?;
    let prev = serde_json::from_slice::<Value>(stored)
        .ok()
        .and_then(|v| v.get("prev").cloned())
        .unwrap_or(Value::Null);
    Ok(event(seq, &to_hex(&entry_hash(stored)), &prev, &view))
}

/// One entry as an API Activity event.
pub fn event(seq: u64, hash: &str, prev: &Value, row: &RowView<'_>) -> Value {
    let (activity_id, activity_name) = activity(&row.verb);
    let (status_id, status) = match row.status() {
        "ok" | "recorded" => (1, "Success"),
        "failed" | "not_run" => (2, "Failure"),
        _ => (0, "Unknown"),
    };
    let (disposition_id, disposition) = match (row.decision.as_ref(), row.confirm_outcome()) {
        ("refuse", _) | (_, "rejected" | "expired") => (2, "Blocked"),
        // An imported approval is its source's claim, not one Attest saw: OCSF's "Other".
        (_, "approved" | "edited") if row.is_imported() => (99, "Other"),
        (_, "approved" | "edited") => (8, "Approved"),
        ("act", _) => (1, "Allowed"),
        _ => (0, "Unknown"),
    };
    let severity_id = match row.tier.as_ref() {
        "low" => 1,
        "medium" => 2,
        "high" => 3,
        "very_high" => 4,
        _ => 0,
    };
    let time = row
        .happened()
        .or_else(|| parse_ts(&row.ts))
        .and_then(|t| t.duration_since(std::time::SystemTime::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let mut actor = json!({ "app_name": row.agent });
    if let Some(person) = &row.actor {
        actor["user"] = json!({ "name": person });
    }
    if let Some(run) = &row.run_id {
        actor["session"] = json!({ "uid": run });
    }
    let mut event = json!({
        "class_uid": CLASS_UID,
        "class_name": "API Activity",
        "category_uid": CATEGORY_UID,
        "category_name": "Application Activity",
        "activity_id": activity_id,
        "activity_name": activity_name,
        "type_uid": CLASS_UID * 100 + activity_id,
        "type_name": format!("API Activity: {activity_name}"),
        "time": time,
        "severity_id": severity_id,
        "status_id": status_id,
        "status": status,
        "disposition_id": disposition_id,
        "disposition": disposition,
        "message": format!("{} {} {}: {}", row.agent_name(), row.verb, row.system, row.decision),
        "metadata": {
            "version": OCSF_VERSION,
            "product": { "name": "Attest", "vendor_name": "Attest", "version": env!("CARGO_PKG_VERSION") },
            "log_name": "attest-ledger",
            "uid": hash,
            "sequence": seq,
            "original_time": row.ts,
            "correlation_uid": row.action_id,
        },
        "actor": actor,
        "api": {
            "operation": row.verb,
            "service": { "name": row.system },
            "request": { "uid": row.action_id },
        },
        "src_endpoint": { "svc_name": row.agent_name() },
        "unmapped": {
            "attest": {
                "seq": seq,
                "hash": hash,
                "prev": prev,
                "decision": row.decision,
                "tier": row.tier,
                "execution": row.status(),
                "level": row.shown_level(),
                "confirm": row.shown_confirm(),
                "imported": row.is_imported(),
                "target_class": row.target_class,
                "rules_fired": row.rules_fired,
            }
        },
    });
    if let Some(target) = &row.target {
        event["resources"] = json!([{ "name": target, "type": row.target_class }]);
    }
    event
}

/// The activity a verb is.
fn activity(verb: &str) -> (u64, &'static str) {
    match verb {
        "read" | "get" | "list" | "search" => (2, "Read"),
        "create" | "send" | "reply" | "share" | "upload" | "pay" | "approve" | "execute" => {
            (1, "Create")
        }
        "update" | "write" => (3, "Update"),
        "delete" => (4, "Delete"),
        _ => (99, "Other"),
    }
}
