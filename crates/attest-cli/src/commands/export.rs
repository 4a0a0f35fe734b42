use std::io::{BufWriter, Write};
use std::process::ExitCode;

use anyhow::Context;
use attest_ledger::{entry_hash, to_hex, LedgerError, Revealer};
use serde_json::{json, Value};

use crate::cli::{ExportArgs, ExportFormat};
use crate::commands::entries;
use crate::config::Config;

pub(crate) fn run(config: &Config, args: &ExportArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.bundle {
        return crate::commands::bundle::export(config, args, path);
    }
    let ledger = config.open_ledger_read_only()?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    let count = match args.format {
        ExportFormat::Jsonl => ledger.export_jsonl(&mut out)?,
        ExportFormat::Json => {
            let mut count = 0u64;
            out.write_all(b"[")?;
            ledger.for_each_row(1, |row| {
                if count > 0 {
                    out.write_all(b",\n").map_err(LedgerError::Output)?;
                }
                out.write_all(row.body).map_err(LedgerError::Output)?;
                count += 1;
                Ok(true)
            })?;
            out.write_all(b"]\n")?;
            count
        }
        ExportFormat::Csv => export_csv(&ledger, &mut out)?,
        ExportFormat::Ietf => export_ietf(&ledger, &mut out)?,
        ExportFormat::Ocsf => crate::review::ocsf::export(&ledger, &mut out)?,
        ExportFormat::EuAiAct => crate::commands::eu_ai_act::export(&ledger, &mut out)?,
    };
    out.flush()?;
    eprintln!("attest: exported {}", entries(count));
    Ok(ExitCode::SUCCESS)
}

/// Parses a stored body for the derived formats, naming the seq when it cannot; its
/// sealed personal fields opened, or `"erased"` once their subject's key is gone.
fn parse(revealer: &Revealer, seq: u64, body: &[u8]) -> Result<Value, LedgerError> {
    let mut entry = serde_json::from_slice(body).map_err(|e| LedgerError::BadRow {
        seq,
        detail: format!("body is not JSON: {e}"),
    })?;
    revealer.reveal(&mut entry);
    Ok(entry)
}

/// True for a row `attest import` wrote: its decision, approval and level are the source's
/// claim.
pub(super) fn imported(entry: &Value) -> bool {
    entry.get("imported").is_some_and(Value::is_object)
}

pub(super) fn text(entry: &Value, pointer: &str) -> String {
    match entry.pointer(pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

const CSV_COLUMNS: [(&str, &str); 15] = [
    ("seq", "/seq"),
    ("ts", "/ts"),
    ("action_id", "/action_id"),
    ("run_id", "/run_id"),
    ("agent", "/agent"),
    ("actor", "/actor"),
    ("system", "/system"),
    ("verb", "/verb"),
    ("target", "/target"),
    ("target_class", "/target_class"),
    ("decision", "/decision"),
    ("tier", "/tier"),
    ("execution", "/execution/status"),
    ("level", "/verification/level"),
    ("prev", "/prev"),
];

fn export_csv(ledger: &attest_ledger::Ledger, out: &mut impl Write) -> anyhow::Result<u64> {
    let mut writer = csv::Writer::from_writer(out);
    let mut header: Vec<&str> = CSV_COLUMNS.iter().map(|(name, _)| *name).collect();
    header.push("hash");
    // Last, so readers of the earlier columns by position are unchanged.
    header.push("imported");
    writer.write_record(&header).context("writing CSV")?;
    let mut count = 0;
    let mut failure = None;
    let revealer = ledger.revealer()?;
    ledger.for_each_row(1, |row| {
        let entry = parse(&revealer, row.seq, row.body)?;
        let mut record: Vec<String> = CSV_COLUMNS
            .iter()
            .map(|(_, pointer)| text(&entry, pointer))
            .collect();
        record.push(to_hex(&entry_hash(row.body)));
        record.push(imported(&entry).to_string());
        if let Err(err) = writer.write_record(&record) {
            failure = Some(err);
            return Ok(false);
        }
        count += 1;
        Ok(true)
    })?;
    if let Some(err) = failure {
        return Err(err).context("writing CSV");
    }
    writer.flush().context("writing CSV")?;
    Ok(count)
}

/// Maps an entry to the mandatory fields of an Agent Audit Trail record
/// (draft-sharif-agent-audit-trail-00). The hashed bytes stay the canonical bodies:
/// these records are a view for tools that read that shape, and carry the entry's
/// own hash and `prev` so the chain can still be walked.
fn export_ietf(ledger: &attest_ledger::Ledger, out: &mut impl Write) -> anyhow::Result<u64> {
    export_records(ledger, out, |seq, body, entry| {
        let execution = text(entry, "/execution/status");
        let outcome = match (text(entry, "/decision").as_str(), execution.as_str()) {
            ("refuse", _) => "denied",
            (_, "not_run") => "denied",
            (_, "failed") => "failure",
            ("ask", _) => "escalated",
            _ => "success",
        };
        let trust_level = match text(entry, "/verification/level").as_str() {
            "verified" => "L4",
            "verified-custom" => "L3",
            "acknowledged" => "L2",
            "attested-only" => "L1",
            _ => "L0",
        };
        json!({
            "record_id": entry.get("action_id"),
            "timestamp": entry.get("ts"),
            "agent_id": entry.get("agent"),
            "agent_version": Value::Null,
            "session_id": entry.get("run_id"),
            "action_type": "tool_call",
            "action_detail": {
                "system": entry.get("system"),
                "verb": entry.get("verb"),
                "target": entry.get("target"),
                "decision": entry.get("decision"),
                "tier": entry.get("tier"),
                "reasons": entry.get("reasons"),
                "input_hash": entry.get("params_hash"),
                "output_hash": entry.pointer("/execution/result_hash"),
            },
            "outcome": outcome,
            // An imported row's level is its source's claim: no trust Attest can vouch for.
            "trust_level": if imported(entry) { "L0" } else { trust_level },
            "imported": imported(entry),
            "parent_record_id": Value::Null,
            "sequence": seq,
            "prev_hash": entry.get("prev"),
            "record_hash": to_hex(&entry_hash(body)),
        })
    })
}

/// Writes one JSON record per row, `record(seq, body, parsed entry)`, a line each: the
/// derived formats, whose hashed bytes stay the stored bodies.
pub(super) fn export_records(
    ledger: &attest_ledger::Ledger,
    out: &mut impl Write,
    mut record: impl FnMut(u64, &[u8], &Value) -> Value,
) -> anyhow::Result<u64> {
    let mut count = 0;
    let revealer = ledger.revealer()?;
    ledger.for_each_row(1, |row| {
        let entry = parse(&revealer, row.seq, row.body)?;
        let line = record(row.seq, row.body, &entry);
        serde_json::to_writer(&mut *out, &line).map_err(|e| LedgerError::Output(e.into()))?;
        out.write_all(b"\n").map_err(LedgerError::Output)?;
        count += 1;
        Ok(true)
    })?;
    Ok(count)
}
