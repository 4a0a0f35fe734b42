//! What is measured. Each scenario builds its own ledger in a temporary directory on
//! the same disk, so file-backed rows pay the real sync cost.

use std::io::Write;

use attest_core::Attest;
use attest_ledger::{
    canonical_bytes, Durability, Execution, Ledger, LedgerOptions, Record, SigningKey,
    Verification, VerifyOptions,
};
use attest_policy::{Action, Policy, RiskTierPolicy, Verb};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::measure::{bulk, once, per_call, Row};

/// How much work each scenario does.
pub(crate) struct Scale {
    samples: usize,
    sync_samples: usize,
    bulk_rows: usize,
    big_rows: usize,
}

impl Scale {
    pub(crate) fn full() -> Self {
        Scale {
            samples: 5_000,
            sync_samples: 300,
            bulk_rows: 20_000,
            big_rows: 1_000_000,
        }
    }

    pub(crate) fn quick() -> Self {
        Scale {
            samples: 300,
            sync_samples: 30,
            bulk_rows: 2_000,
            big_rows: 50_000,
        }
    }
}

fn record(n: u64) -> Record {
    Record {
        action_id: format!("0b6f3c1e-5d0a-4a57-9f39-{n:012}"),
        run_id: Some("run-bench".into()),
        agent: Some("bench-agent".into()),
        actor: Some("alice@acme.example".into()),
        owner: None,
        system: "hubspot".into(),
        verb: "update".into(),
        target: Some("deal/8812".into()),
        target_class: "none".into(),
        source: "manual".into(),
        decision: "act".into(),
        tier: "medium".into(),
        reasons: vec!["medium risk (hubspot.update): acts".into()],
        rules_fired: vec!["R4".into()],
        params_hash: "cd032eb5b66aff46fe6aaa19a6c4718edbe4556bc175bed952be8ef2c479621e".into(),
        params_preview: serde_json::Map::new(),
        confirm: None,
        execution: Execution {
            status: "ok".into(),
            result_hash: Some(
                "0c7b82f1e52d6f72a2a3909bd4d9b8e6f32eb5a793d04ca444a483c7c7f27356".into(),
            ),
            error_hash: None,
        },
        verification: Some(Verification {
            level: "acknowledged".into(),
            method: "ack".into(),
            matched: None,
            evidence: serde_json::Map::new(),
        }),
    }
}

fn open(dir: &tempfile::TempDir, name: &str, durability: Durability) -> anyhow::Result<Ledger> {
    Ok(Ledger::open(
        dir.path().join(name),
        LedgerOptions {
            durability,
            ..LedgerOptions::default()
        },
    )?)
}

pub(crate) fn all(scale: &Scale) -> anyhow::Result<Vec<Row>> {
    let dir = tempfile::tempdir_in(".")?;
    let mut rows = Vec::new();

    let action = Action::new("hubspot", Verb::Update)
        .with_target("deal/8812")
        .with_params(json!({"id": "8812", "properties": {"dealstage": "closedwon"}}));
    rows.push(per_call(
        "policy evaluate (risk tier, R4)",
        scale.samples,
        || {
            RiskTierPolicy.evaluate(&action)?;
            Ok(())
        },
    )?);

    for durability in [Durability::Full, Durability::Normal, Durability::Off] {
        let samples = if durability == Durability::Full {
            scale.sync_samples
        } else {
            scale.samples
        };
        let ledger = open(&dir, &format!("append-{durability}.sqlite"), durability)?;
        let mut n = 0;
        rows.push(per_call(
            &format!("ledger append, one row ({durability})"),
            samples,
            || {
                n += 1;
                ledger.append(&record(n))?;
                Ok(())
            },
        )?);
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    for durability in [Durability::Full, Durability::Normal, Durability::Off] {
        let samples = if durability == Durability::Full {
            scale.sync_samples
        } else {
            scale.samples
        };
        let ledger = open(&dir, &format!("action-{durability}.sqlite"), durability)?;
        let attest = Attest::builder().ledger(ledger).agent("bench").build()?;
        rows.push(per_call(
            &format!("whole action: act + ack, file-backed ({durability})"),
            samples,
            || {
                let action = action.clone();
                runtime.block_on(attest.run(action, |_| async { Ok(json!({"id": "8812"})) }))?;
                Ok(())
            },
        )?);
    }

    let bulk_ledger = open(&dir, "bulk.sqlite", Durability::Normal)?;
    let n_rows = scale.bulk_rows;
    rows.push(bulk(
        &format!("{n_rows} appends, one at a time (normal), per append"),
        n_rows,
        || {
            for n in 0..n_rows {
                bulk_ledger.append(&record(n as u64))?;
            }
            Ok(())
        },
    )?);
    rows.push(once(&format!("full verify of {n_rows} rows"), || {
        let report = bulk_ledger.verify()?;
        anyhow::ensure!(report.is_intact(), "benchmark ledger is broken");
        Ok(())
    })?);

    rows.extend(evidence(&dir, scale, &bulk_ledger)?);
    rows.extend(limits(&dir, scale)?);
    Ok(rows)
}

/// Checkpoints, verify since a checkpoint, proofs, and verification at scale.
fn evidence(
    dir: &tempfile::TempDir,
    scale: &Scale,
    bulk_ledger: &Ledger,
) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let (key, _) = SigningKey::generate("bench.attest/ledger")?;
    let trusted = [key.verifier().clone()];
    let n_rows = scale.bulk_rows;
    // Each sample appends one row first, so every checkpoint signs a new tree size.
    let mut n = n_rows as u64;
    rows.push(per_call(
        &format!("checkpoint: sign the tree of {n_rows}+ rows"),
        scale.sync_samples,
        || {
            n += 1;
            bulk_ledger.append(&record(n))?;
            bulk_ledger.checkpoint(&key)?;
            Ok(())
        },
    )?);
    bulk_ledger.checkpoint(&key)?;
    let records: Vec<Record> = (0..100).map(|i| record(n + 1 + i)).collect();
    bulk_ledger.append_batch(&records)?;
    rows.push(per_call(
        "verify since a checkpoint, 100 new rows (signature included)",
        scale.samples.min(1000),
        || {
            let report = bulk_ledger.verify_with(VerifyOptions {
                trusted: &trusted,
                since_checkpoint: true,
                ..VerifyOptions::default()
            })?;
            anyhow::ensure!(
                report.is_intact() && report.checked == 100,
                "since-checkpoint verify failed"
            );
            Ok(())
        },
    )?);

    let big = open(dir, "big.sqlite", Durability::Off)?;
    let big_rows = scale.big_rows;
    let batch = 10_000;
    let mut next = 0u64;
    rows.push(bulk(
        &format!("{big_rows} appends in batches of {batch} (off), per append"),
        big_rows,
        || {
            while next < big_rows as u64 {
                let records: Vec<Record> = (next..(next + batch as u64).min(big_rows as u64))
                    .map(record)
                    .collect();
                big.append_batch(&records)?;
                next += records.len() as u64;
            }
            Ok(())
        },
    )?);
    big.checkpoint(&key)?;
    rows.push(once(&format!("full verify of {big_rows} rows"), || {
        let report = big.verify_with(VerifyOptions {
            trusted: &trusted,
            ..VerifyOptions::default()
        })?;
        anyhow::ensure!(report.is_intact(), "big ledger does not verify");
        Ok(())
    })?);
    let mut seq = 0u64;
    rows.push(per_call(
        &format!("one inclusion proof at {big_rows} rows"),
        scale.samples,
        || {
            seq = seq % big_rows as u64 + 7919;
            let proof = big.prove_inclusion(seq.min(big_rows as u64), None)?;
            std::hint::black_box(proof);
            Ok(())
        },
    )?);
    Ok(rows)
}

/// What the machine allows: the floor under each Attest row.
fn limits(dir: &tempfile::TempDir, scale: &Scale) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let body = canonical_bytes(&record(1))?;
    rows.push(per_call(
        &format!("limit: raw SHA-256 of one {}-byte body", body.len()),
        scale.samples,
        || {
            std::hint::black_box(Sha256::digest(&body));
            Ok(())
        },
    )?);
    for (mode, samples) in [("FULL", scale.sync_samples), ("NORMAL", scale.samples)] {
        let conn = rusqlite::Connection::open(dir.path().join(format!("bare-{mode}.sqlite")))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", mode)?;
        conn.execute_batch("CREATE TABLE t (seq INTEGER PRIMARY KEY, hash BLOB, body TEXT)")?;
        let mut seq = 0u64;
        let text = String::from_utf8(body.clone())?;
        rows.push(per_call(
            &format!(
                "limit: bare INSERT of the same bytes, own transaction ({})",
                mode.to_lowercase()
            ),
            samples,
            || {
                seq += 1;
                conn.execute(
                    "INSERT INTO t (seq, hash, body) VALUES (?1, ?2, ?3)",
                    rusqlite::params![seq, &[0u8; 32][..], &text],
                )?;
                Ok(())
            },
        )?);
    }
    let mut file = std::fs::File::create(dir.path().join("fsync.bin"))?;
    rows.push(per_call(
        "limit: write 512 bytes + fsync",
        scale.sync_samples,
        || {
            file.write_all(&[0u8; 512])?;
            file.sync_data()?;
            Ok(())
        },
    )?);
    Ok(rows)
}
