//! What is measured. Each scenario builds its own ledger in a temporary directory on
//! the same disk as the checkout, so file-backed rows pay the real sync cost.

use std::collections::HashMap;
use std::io::Write;
use std::time::Instant;

use attest_core::{acknowledges, detect, Attest, AutoGate, DetectInput, ReadBack};
use attest_ledger::{
    canonical_bytes, Durability, Execution, Ledger, LedgerOptions, Record, SigningKey,
    Verification, VerifyOptions,
};
use attest_policy::{Action, Policy, PolicyEngine, Verb};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::measure::{
    against, bulk, bulk_paired, by_turns, flat, once, per_call, per_call_batched, timing, Row,
    PAIR_CHUNK,
};
use crate::targets::names;
use crate::{mcp_proxy, processes};

/// How much work each scenario does.
pub(crate) struct Scale {
    pub(crate) samples: usize,
    pub(crate) sync_samples: usize,
    pub(crate) bulk_rows: usize,
    pub(crate) big_rows: usize,
    pub(crate) per_task: usize,
    pub(crate) process_actions: u64,
    /// Runs of each slow command-line process (`attest import`, `attest verify`).
    pub(crate) process_samples: usize,
}

impl Scale {
    pub(crate) fn full() -> Self {
        Scale {
            samples: 1_000,
            sync_samples: 300,
            bulk_rows: 20_000,
            big_rows: 1_000_000,
            per_task: 200,
            process_actions: 500,
            process_samples: 20,
        }
    }

    pub(crate) fn quick() -> Self {
        Scale {
            samples: 100,
            sync_samples: 30,
            bulk_rows: 2_000,
            big_rows: 20_000,
            per_task: 20,
            process_actions: 50,
            process_samples: 5,
        }
    }
}

/// What the run measured: timed rows, and facts that are not times.
pub(crate) struct Report {
    pub(crate) rows: Vec<Row>,
    pub(crate) facts: Vec<(String, String)>,
    /// Figures that are not times but that targets are scored on (peak memory, bytes).
    pub(crate) measures: Vec<(String, f64)>,
}

pub(crate) fn record(n: u64) -> Record {
    Record {
        action_id: format!("0b6f3c1e-5d0a-4a57-9f39-{n:012}"),
        run_id: Some("run-bench".into()),
        agent: Some("bench-agent".into()),
        agent_auth: None,
        actor: Some("alice@acme.example".into()),
        call: None,
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
        result_ids: Vec::new(),
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
        idempotency_key: None,
        replay_of: None,
        imported: None,
        shadow: None,
        grant: None,
        sealed: None,
        erasure: None,
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

fn update_action() -> Action {
    Action::new("hubspot", Verb::Update)
        .with_target("deal/8812")
        .with_params(
            json!({"object_type": "deals", "id": "8812", "properties": {"dealstage": "closedwon"}}),
        )
}

/// [`update_action`], one of its own per task and call: identical calls in flight at
/// once would be held as retries of each other.
fn task_update(task: usize, n: usize) -> Action {
    let mut action = update_action();
    action.params["properties"]["note"] = json!(format!("{task}-{n}"));
    action
}

fn external_send() -> Action {
    Action::new("gmail", Verb::Send)
        .with_target("buyer@customer.example")
        .with_actor("alice@acme.example")
        .with_params(
            json!({"to": "buyer@customer.example", "subject": "Your order", "body": "Shipped."}),
        )
}

fn samples_for(durability: Durability, scale: &Scale) -> usize {
    if durability == Durability::Full {
        scale.sync_samples
    } else {
        scale.samples
    }
}

/// The runtime the pipeline rows run on: two workers, one per core.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Only the dashboard rows (`--only dashboard`).
pub(crate) fn dashboard_only(scale: &Scale) -> anyhow::Result<Report> {
    let dir = tempfile::tempdir_in(".")?;
    let mut facts = Vec::new();
    let rows = crate::dashboard::rows(dir.path(), scale.big_rows, scale.samples, &mut facts)?;
    Ok(Report {
        rows,
        facts,
        measures: Vec::new(),
    })
}

pub(crate) fn all(scale: &Scale) -> anyhow::Result<Report> {
    let dir = tempfile::tempdir_in(".")?;
    let mut rows = Vec::new();
    let mut facts = Vec::new();
    let mut measures = Vec::new();
    let runtime = runtime()?;

    rows.push(per_call_batched(
        "detect: tool name",
        scale.samples,
        100,
        || {
            let found = detect(&DetectInput::Tool {
                name: "slack_post_message",
                server: None,
            });
            std::hint::black_box(found);
            Ok(())
        },
    )?);
    rows.push(per_call_batched(
        "detect: method + URL",
        scale.samples,
        100,
        || {
            let found = detect(&DetectInput::Http {
                method: "POST",
                url: "https://gmail.googleapis.com/gmail/v1/users/me/messages/send",
                body: None,
            });
            std::hint::black_box(found);
            Ok(())
        },
    )?);
    let policy = PolicyEngine::default_policy()?;
    let send = external_send();
    rows.push(per_call_batched(
        "policy evaluate: default policy",
        scale.samples,
        100,
        || {
            std::hint::black_box(policy.evaluate(&send)?);
            Ok(())
        },
    )?);
    let big_policy = PolicyEngine::from_yaml(&two_hundred_rules(), "bench:200-rules")?;
    rows.push(per_call_batched(
        "policy evaluate: 200-rule policy",
        scale.samples,
        20,
        || {
            std::hint::black_box(big_policy.evaluate(&send)?);
            Ok(())
        },
    )?);
    rows.extend(when_rows(scale)?);
    let result = json!({"id": "8812", "properties": {"dealstage": "closedwon"}});
    rows.push(per_call_batched("verify-ack", scale.samples, 100, || {
        std::hint::black_box(acknowledges(&result));
        Ok(())
    })?);

    for durability in [Durability::Full, Durability::Normal, Durability::Off] {
        rows.push(append_row(&dir, durability, scale)?);
    }
    for durability in [Durability::Full, Durability::Normal, Durability::Off] {
        rows.push(action_row(&dir, &runtime, &policy, durability, scale)?);
    }
    // Beside the plain decision: the same decision through a window condition.
    rows.extend(
        window_rows(&dir, &runtime, &policy, scale)?
            .into_iter()
            .filter(|row| !row.name.starts_with("whole action: act + ack, file-backed")),
    );

    let ask_ledger = open(&dir, "ask.sqlite", Durability::Normal)?;
    let attest = Attest::builder()
        .ledger(ask_ledger)
        .policy(policy.clone())
        .gate(AutoGate::approve("bench-approver"))
        .build()?;
    rows.push(per_call(
        "whole action: ask auto-approved, file-backed (normal)",
        scale.samples,
        || {
            let action = external_send();
            runtime.block_on(
                attest
                    .call(action)
                    .run(|_| async { Ok::<_, std::convert::Infallible>(json!({"id": "18c31"})) }),
            )?;
            Ok(())
        },
    )?);

    rows.push(readback_row(&dir, &runtime, &policy, scale)?);
    rows.extend(concurrency_rows(&dir, &runtime, &policy, scale, &[1, 8])?);
    rows.extend(sqlite_group_commit(&dir, &runtime, &policy, scale)?);
    rows.push(processes::several_processes(
        dir.path(),
        4,
        scale.process_actions,
    )?);

    let bulk_ledger = open(&dir, "bulk.sqlite", Durability::Normal)?;
    rows.push(bulk_row(&bulk_ledger, scale)?);
    let n_rows = scale.bulk_rows;
    rows.push(once(&format!("full verify of {n_rows} rows"), || {
        let report = bulk_ledger.verify()?;
        anyhow::ensure!(report.is_intact(), "benchmark ledger is broken");
        Ok(())
    })?);

    rows.extend(crate::postgres::rows(
        scale,
        Breadth::Everything,
        &mut facts,
    )?);
    rows.extend(processes::cli_rows(dir.path(), scale)?);
    rows.extend(mcp_proxy::rows(
        dir.path(),
        &runtime,
        scale.samples,
        &mut facts,
    )?);
    rows.extend(evidence(
        &dir,
        scale,
        &bulk_ledger,
        &mut facts,
        &mut measures,
        Breadth::Everything,
    )?);
    rows.extend(crate::dashboard::rows(
        dir.path(),
        scale.big_rows,
        scale.samples,
        &mut facts,
    )?);
    rows.extend(limits(&dir, scale, false)?);
    compare_with_limits(&mut rows, scale);
    Ok(Report {
        rows,
        facts,
        measures,
    })
}

/// How many of a group's rows to run: all of them, or only what issue 27's targets are
/// scored on (`--only targets`).
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Breadth {
    Everything,
    Targets,
}

/// Only the rows issue 27's targets are scored on, and their limit rows (`--only
/// targets`): SQLite's append and whole action at `normal`, 64 concurrent tasks at
/// `full`, full and since-checkpoint verify, PostgreSQL's, and the command line's.
pub(crate) fn targets_only(scale: &Scale) -> anyhow::Result<Report> {
    let dir = tempfile::tempdir_in(".")?;
    let mut rows = Vec::new();
    let mut facts = Vec::new();
    let mut measures = Vec::new();
    let runtime = runtime()?;
    let policy = PolicyEngine::default_policy()?;
    rows.extend(paired_rows(&dir, &runtime, &policy, scale)?);
    rows.extend(sqlite_group_commit(&dir, &runtime, &policy, scale)?);
    let bulk_ledger = open(&dir, "bulk.sqlite", Durability::Normal)?;
    rows.extend(evidence(
        &dir,
        scale,
        &bulk_ledger,
        &mut facts,
        &mut measures,
        Breadth::Targets,
    )?);
    rows.extend(crate::postgres::rows(scale, Breadth::Targets, &mut facts)?);
    rows.extend(processes::cli_rows(dir.path(), scale)?);
    rows.extend(limits(&dir, scale, true)?);
    compare_with_limits(&mut rows, scale);
    Ok(Report {
        rows,
        facts,
        measures,
    })
}

/// The append and the whole action at `normal`, each measured by turns with its limit
/// ([`crate::measure::paired`]): the rows issue 27's first two targets are scored on.
fn paired_rows(
    dir: &tempfile::TempDir,
    runtime: &tokio::runtime::Runtime,
    policy: &PolicyEngine,
    scale: &Scale,
) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let ledger = open(dir, "append-normal.sqlite", Durability::Normal)?;
    let mut append = timing(appending(&ledger));
    let mut counted = BareTable::create(dir, "NORMAL-counted", "NORMAL", Extras::Counted)?;
    let mut filed = timing(|| counted.insert(1));
    let mut counted_too = BareTable::create(dir, "NORMAL-floor", "NORMAL", Extras::Counted)?;
    let mut n = 0;
    let mut floor = timing(|| {
        n += 1;
        counted_too.insert(1)?;
        entry_bytes_and_hashes(&record(n))
    });
    rows.extend(by_turns(
        scale.samples,
        PAIR_CHUNK,
        vec![
            ("ledger append, one row (normal)", &mut append),
            (names::FILED_LIMIT, &mut filed),
            (names::APPEND_FLOOR, &mut floor),
        ],
    )?);
    let attest = action_attest(dir, policy, Durability::Normal, "action-normal.sqlite")?;
    let mut action = timing(whole_action_op(&attest, runtime));
    let mut bare = BareTable::create(dir, "normal-twice", "NORMAL", Extras::None)?;
    let mut twice = timing(|| {
        bare.insert(1)?;
        bare.insert(1)
    });
    let mut stored = BareTable::create(dir, "normal-action", "NORMAL", Extras::Action)?;
    let mut action_storage = timing(|| {
        stored.insert(1)?;
        stored.insert(1)
    });
    rows.extend(by_turns(
        scale.samples,
        PAIR_CHUNK,
        vec![
            ("whole action: act + ack, file-backed (normal)", &mut action),
            (names::TWO_COMMITS, &mut twice),
            (names::ACTION_FLOOR, &mut action_storage),
        ],
    )?);
    Ok(rows)
}

/// The least CPU work an append's row needs beyond its limit's INSERTs: the record
/// written as JSON (serde_json, the bytes a canonical writer must also produce), their
/// SHA-256 (the entry hash), the leaf hash, and one tree node hash (a leaf completes
/// one stored node on average). No chain link, timestamp or edge check. Its caller
/// builds the record in the sample, as the append row's sample builds the one it appends.
fn entry_bytes_and_hashes(record: &Record) -> anyhow::Result<()> {
    let body = serde_json::to_vec(record)?;
    let leaf = tlog_tiles::record_hash(&attest_ledger::entry_hash(&body));
    std::hint::black_box(tlog_tiles::node_hash(leaf, leaf));
    Ok(())
}

/// Adds the rows derived from others (the full-verify floor), then sets each Attest row
/// (and each floor) beside the limit row it is read against.
fn compare_with_limits(rows: &mut Vec<Row>, scale: &Scale) {
    full_verify_floor(rows, scale);
    let bare =
        |mode: &str| format!("limit: bare INSERT of the same row + tree rows, prepared ({mode})");
    let big_rows = scale.big_rows;
    let n_rows = scale.bulk_rows;
    let pairs = [
        ("ledger append, one row (normal)".to_owned(), bare("normal")),
        ("ledger append, one row (full)".to_owned(), bare("full")),
        (
            "whole action: act + ack, file-backed (normal)".to_owned(),
            names::TWO_COMMITS.to_owned(),
        ),
        (
            "whole action: act + ack, file-backed (full)".to_owned(),
            "limit: write 512 bytes + fsync".to_owned(),
        ),
        (
            format!("{n_rows} appends, one at a time (normal), per append"),
            bare("normal"),
        ),
        (
            format!("{big_rows} appends in batches of 10000 (off), per append"),
            "limit: bare INSERTs of the same rows in batches of 10000 (off), per row".to_owned(),
        ),
        (
            format!("full verify of {big_rows} rows (signatures checked)"),
            format!("limit: raw SHA-256 of {big_rows} bodies on one core, whole run"),
        ),
        (
            "MCP tools/call through attest mcp-proxy (normal)".to_owned(),
            "MCP tools/call, direct to the server".to_owned(),
        ),
        // What a window condition adds to the same decision and action.
        (
            WINDOW_ACTION.to_owned(),
            "whole action: act + ack, file-backed (normal)".to_owned(),
        ),
        (
            "policy evaluate: the update, a rule with a window condition".to_owned(),
            "policy evaluate: the update, default policy".to_owned(),
        ),
        // Issue 27's limit rows (its targets are scored in `targets`).
        (names::TASKS_64.to_owned(), names::GROUP_COMMIT.to_owned()),
        (
            names::PG_TASKS_64.to_owned(),
            names::PG_GROUP_COMMIT.to_owned(),
        ),
        (
            names::PG_APPEND.to_owned(),
            names::PG_BARE_INSERT.to_owned(),
        ),
        (
            names::pg_batched(big_rows),
            names::pg_bare_batched(big_rows),
        ),
        (
            names::since_checkpoint(big_rows),
            names::since_checkpoint_limit(big_rows),
        ),
        (names::cli_import(n_rows), names::cli_executemany(n_rows)),
        (names::cli_verify(n_rows), names::cli_openssl(n_rows)),
        (
            names::cli_since_checkpoint(n_rows),
            names::CLI_VERSION.to_owned(),
        ),
        // The floors: what the format and the design make a row do beyond its limit.
        (
            names::ACTION_FLOOR.to_owned(),
            names::TWO_COMMITS.to_owned(),
        ),
        (
            names::since_checkpoint_floor(big_rows),
            names::since_checkpoint_limit(big_rows),
        ),
        (
            names::full_verify_floor(big_rows),
            names::one_core_sha(big_rows),
        ),
        (
            names::pg_batched_floor(big_rows),
            names::pg_bare_batched(big_rows),
        ),
    ];
    for (row, limit) in pairs {
        against(rows, &row, &limit);
    }
}

/// The floor under a full verify on this machine's cores, from two rows of the run: the
/// reads of the snapshot ([`full_verify_reads`]) and the bodies' SHA-256 on one core,
/// shared by all cores without loss (`(reads + SHA-256) / cores`): generous, since it
/// splits the reads too, which one connection cannot, and charges nothing for checking
/// the columns, the chain, the leaves or the tree.
fn full_verify_floor(rows: &mut Vec<Row>, scale: &Scale) {
    let big_rows = scale.big_rows;
    let p50 = |name: &str| {
        rows.iter()
            .find(|row| row.name == name)
            .map(|row| row.p50_ns)
    };
    if let (Some(reads), Some(sha)) = (
        p50(&names::full_verify_reads(big_rows)),
        p50(&names::one_core_sha(big_rows)),
    ) {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let floor = (reads + sha) / cores;
        rows.push(flat(&names::full_verify_floor(big_rows), 1, floor));
    }
}

/// The store rows alone: SQLite's one-row appends and a full verify, then PostgreSQL's.
pub(crate) fn stores(scale: &Scale) -> anyhow::Result<Report> {
    let dir = tempfile::tempdir_in(".")?;
    let mut rows = Vec::new();
    let mut facts = Vec::new();
    for durability in [Durability::Full, Durability::Normal] {
        let ledger = open(&dir, &format!("append-{durability}.sqlite"), durability)?;
        let mut n = 0;
        rows.push(per_call(
            &format!("ledger append, one row ({durability})"),
            samples_for(durability, scale),
            || {
                n += 1;
                ledger.append(&record(n))?;
                Ok(())
            },
        )?);
    }
    let bulk_ledger = open(&dir, "bulk.sqlite", Durability::Normal)?;
    let n_rows = scale.bulk_rows;
    let records: Vec<_> = (0..n_rows as u64).map(record).collect();
    for chunk in records.chunks(1000) {
        bulk_ledger.append_batch(chunk)?;
    }
    rows.push(once(&format!("full verify of {n_rows} rows"), || {
        let report = bulk_ledger.verify()?;
        anyhow::ensure!(report.is_intact(), "benchmark ledger is broken");
        Ok(())
    })?);
    rows.extend(crate::postgres::rows(
        scale,
        Breadth::Everything,
        &mut facts,
    )?);
    Ok(Report {
        rows,
        facts,
        measures: Vec::new(),
    })
}

/// Only the SQLite ledger's rows and their limits (`--only ledger`): one-row appends,
/// the whole action, one-at-a-time and batched appends, full and since-checkpoint
/// verify; what issue 15's targets are read from, in a few minutes.
pub(crate) fn ledger_only(scale: &Scale) -> anyhow::Result<Report> {
    let dir = tempfile::tempdir_in(".")?;
    let mut rows = Vec::new();
    let mut facts = Vec::new();
    let runtime = runtime()?;
    let policy = PolicyEngine::default_policy()?;
    for durability in [Durability::Full, Durability::Normal] {
        rows.push(append_row(&dir, durability, scale)?);
        rows.push(action_row(&dir, &runtime, &policy, durability, scale)?);
    }
    let bulk_ledger = open(&dir, "bulk.sqlite", Durability::Normal)?;
    rows.push(bulk_row(&bulk_ledger, scale)?);
    let mut measures = Vec::new();
    rows.extend(evidence(
        &dir,
        scale,
        &bulk_ledger,
        &mut facts,
        &mut measures,
        Breadth::Everything,
    )?);
    rows.extend(limits(&dir, scale, false)?);
    compare_with_limits(&mut rows, scale);
    Ok(Report {
        rows,
        facts,
        measures,
    })
}

/// `ledger append, one row (…)`: one-at-a-time appends to a fresh file.
fn append_row(
    dir: &tempfile::TempDir,
    durability: Durability,
    scale: &Scale,
) -> anyhow::Result<Row> {
    let ledger = open(dir, &format!("append-{durability}.sqlite"), durability)?;
    per_call(
        &format!("ledger append, one row ({durability})"),
        samples_for(durability, scale),
        appending(&ledger),
    )
}

/// One append to `ledger` per call, each of the next [`record`].
pub(crate) fn appending(ledger: &Ledger) -> impl FnMut() -> anyhow::Result<()> + '_ {
    let mut n = 0;
    move || {
        n += 1;
        ledger.append(&record(n))?;
        Ok(())
    }
}

/// `whole action: act + ack`: a medium-risk update through the whole pipeline.
fn action_row(
    dir: &tempfile::TempDir,
    runtime: &tokio::runtime::Runtime,
    policy: &PolicyEngine,
    durability: Durability,
    scale: &Scale,
) -> anyhow::Result<Row> {
    let name = format!("whole action: act + ack, file-backed ({durability})");
    let file = format!("action-{durability}.sqlite");
    whole_action(
        dir,
        runtime,
        policy,
        durability,
        samples_for(durability, scale),
        &name,
        &file,
    )
}

/// A policy that decides the update as the default policy does (`act`), but through a
/// rule with a window condition that is never crossed: the cost a window adds.
const WINDOW_POLICY: &str = "policies:
  - name: update-rate
    match: {system: hubspot, verb: update}
    limit: {count: 1000000000, per: 24h, by: [agent, system]}
  - name: updates
    match: {system: hubspot, verb: update}
    decision: act
";

/// The row of the whole action under [`WINDOW_POLICY`].
const WINDOW_ACTION: &str = "whole action: act + ack with a window condition, file-backed (normal)";

/// The decision rows with a window condition beside the plain ones: the pure policy
/// evaluation (what window to check), and the whole action, which also reads and counts
/// the window in the ledger before the call runs.
fn window_rows(
    dir: &tempfile::TempDir,
    runtime: &tokio::runtime::Runtime,
    policy: &PolicyEngine,
    scale: &Scale,
) -> anyhow::Result<Vec<Row>> {
    let windowed = PolicyEngine::from_yaml(WINDOW_POLICY, "bench:window")?;
    let update = update_action().with_agent("bench");
    let mut rows = Vec::new();
    rows.push(per_call_batched(
        "policy evaluate: the update, default policy",
        scale.samples,
        100,
        || {
            std::hint::black_box(policy.evaluate(&update)?);
            Ok(())
        },
    )?);
    rows.push(per_call_batched(
        "policy evaluate: the update, a rule with a window condition",
        scale.samples,
        100,
        || {
            std::hint::black_box(windowed.evaluate(&update)?);
            Ok(())
        },
    )?);
    let durability = Durability::Normal;
    rows.push(action_row(dir, runtime, policy, durability, scale)?);
    rows.push(whole_action(
        dir,
        runtime,
        &windowed,
        durability,
        scale.samples,
        WINDOW_ACTION,
        "action-window.sqlite",
    )?);
    Ok(rows)
}

/// The update through the whole pipeline under `policy`, on a ledger file of its own.
fn whole_action(
    dir: &tempfile::TempDir,
    runtime: &tokio::runtime::Runtime,
    policy: &PolicyEngine,
    durability: Durability,
    samples: usize,
    name: &str,
    file: &str,
) -> anyhow::Result<Row> {
    let attest = action_attest(dir, policy, durability, file)?;
    per_call(name, samples, whole_action_op(&attest, runtime))
}

/// An `Attest` over a new ledger `file` in `dir`, deciding by `policy`, as agent `bench`.
fn action_attest(
    dir: &tempfile::TempDir,
    policy: &PolicyEngine,
    durability: Durability,
    file: &str,
) -> anyhow::Result<Attest> {
    Ok(Attest::builder()
        .ledger(open(dir, file, durability)?)
        .policy(policy.clone())
        .agent("bench")
        .build()?)
}

/// One whole action through `attest`: the update, decided, run, acknowledged, recorded.
fn whole_action_op<'a>(
    attest: &'a Attest,
    runtime: &'a tokio::runtime::Runtime,
) -> impl FnMut() -> anyhow::Result<()> + 'a {
    move || {
        runtime.block_on(
            attest
                .call(update_action())
                .run(|_| async { Ok::<_, std::convert::Infallible>(json!({"id": "8812"})) }),
        )?;
        Ok(())
    }
}

/// Only the decision rows with and without a window condition (`--only windows`).
pub(crate) fn windows_only(scale: &Scale) -> anyhow::Result<Report> {
    let dir = tempfile::tempdir_in(".")?;
    let runtime = runtime()?;
    let policy = PolicyEngine::default_policy()?;
    let mut rows = window_rows(&dir, &runtime, &policy, scale)?;
    rows.extend(when_rows(scale)?);
    compare_with_limits(&mut rows, scale);
    Ok(Report {
        rows,
        facts: Vec::new(),
        measures: Vec::new(),
    })
}

/// `N appends, one at a time (normal)`, into `ledger`.
fn bulk_row(ledger: &Ledger, scale: &Scale) -> anyhow::Result<Row> {
    let n_rows = scale.bulk_rows;
    bulk(
        &format!("{n_rows} appends, one at a time (normal), per append"),
        n_rows,
        || {
            for n in 0..n_rows {
                ledger.append(&record(n as u64))?;
            }
            Ok(())
        },
    )
}

/// 200 rules, none of which match the external send, so every rule is tried.
/// Issue 51's rows: a payment judged by 200 rules that each test its amount, written
/// with `params:` conditions and again with `when:` expressions (the same test), so
/// that every rule's condition is evaluated and none holds.
fn when_rows(scale: &Scale) -> anyhow::Result<Vec<Row>> {
    use crate::targets::names::{POLICY_200_PARAMS, POLICY_200_WHEN};
    let rules = |condition: &dyn Fn(usize) -> String| {
        let mut yaml = String::from("policies:\n");
        for i in 0..200 {
            yaml.push_str(&format!(
                "  - name: rule-{i}\n    {}\n    decision: ask\n",
                condition(i)
            ));
        }
        yaml
    };
    let with_params = PolicyEngine::from_yaml(
        &rules(&|i| {
            format!(
                "match: {{verb: pay, params: {{/amount: {{gt: {}}}}}}}",
                1000 + i
            )
        }),
        "bench:200-params",
    )?;
    let with_when = PolicyEngine::from_yaml(
        &rules(&|i| {
            format!(
                "match: {{verb: pay}}\n    when: params.amount > {}",
                1000 + i
            )
        }),
        "bench:200-when",
    )?;
    let pay = Action::new("stripe", Verb::Pay).with_params(json!({"amount": 5}));
    let mut rows = Vec::new();
    for (name, policy) in [
        (POLICY_200_PARAMS, &with_params),
        (POLICY_200_WHEN, &with_when),
    ] {
        rows.push(per_call_batched(name, scale.samples, 10, || {
            std::hint::black_box(policy.evaluate(&pay)?);
            Ok(())
        })?);
    }
    Ok(rows)
}

fn two_hundred_rules() -> String {
    let mut yaml = String::from("policies:\n");
    for i in 0..200 {
        yaml.push_str(&format!(
            "  - name: rule-{i}\n    match: {{system: system{i}, verb: [send, update], params: {{/amount: {{gt: {i}}}}}}}\n    decision: ask\n"
        ));
    }
    yaml
}

/// A write read back from a local fake vendor (HubSpot's shape) over real HTTP.
fn readback_row(
    dir: &tempfile::TempDir,
    runtime: &tokio::runtime::Runtime,
    policy: &PolicyEngine,
    scale: &Scale,
) -> anyhow::Result<Row> {
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let address = listener.local_addr()?;
    let app = axum::Router::new().route(
        "/crm/v3/objects/deals/{id}",
        axum::routing::get(
            |axum::extract::Path(id): axum::extract::Path<String>| async move {
                axum::Json(
                    json!({"id": id, "archived": false, "properties": {"dealstage": "closedwon"}}),
                )
            },
        ),
    );
    runtime.spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let env: HashMap<String, String> =
        [("HUBSPOT_TOKEN".to_owned(), "bench-token".to_owned())].into();
    let readback = ReadBack::builtin()?
        .env(env)
        .base_url("hubspot", format!("http://{address}"));
    let ledger = open(dir, "readback.sqlite", Durability::Normal)?;
    let attest = Attest::builder()
        .ledger(ledger)
        .policy(policy.clone())
        .readback(readback)
        .build()?;
    let mut row = per_call(
        "whole action: act + read-back, local fake vendor (normal)",
        scale.samples,
        || {
            let action = update_action();
            let receipt =
                runtime
                    .block_on(attest.call(action).run(|_| async {
                        Ok::<_, std::convert::Infallible>(json!({"id": "8812"}))
                    }))?
                    .into_receipt();
            anyhow::ensure!(
                receipt.level == Some(attest_core::Level::Verified),
                "read-back did not verify"
            );
            Ok(())
        },
    )?;
    // The same GET with a bare client: what the HTTP round trip alone costs.
    let mut client = reqwest_free_get(runtime, address)?;
    let round_trip = per_call(
        "limit: the same GET on a bare TCP connection",
        scale.samples,
        &mut client,
    )?;
    row.versus = Some((
        format!(
            "the GET alone ({} p50): Attest's own cost {}",
            crate::measure::human(round_trip.p50_ns),
            crate::measure::human((row.p50_ns - round_trip.p50_ns).max(0.0))
        ),
        row.p50_ns / round_trip.p50_ns.max(1.0),
    ));
    Ok(row)
}

/// A minimal HTTP/1.1 GET over a fresh TCP connection, to time the round trip alone.
fn reqwest_free_get(
    runtime: &tokio::runtime::Runtime,
    address: std::net::SocketAddr,
) -> anyhow::Result<impl FnMut() -> anyhow::Result<()> + '_> {
    use std::io::Read;
    let _ = runtime;
    Ok(move || {
        let mut stream = std::net::TcpStream::connect(address)?;
        stream.write_all(
            b"GET /crm/v3/objects/deals/8812 HTTP/1.1\r\nhost: bench\r\nconnection: close\r\n\r\n",
        )?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response)?;
        anyhow::ensure!(
            response.starts_with(b"HTTP/1.1 200"),
            "fake vendor did not answer 200"
        );
        Ok(())
    })
}

/// Throughput with `counts` concurrent tasks at `full`: group commit at work.
fn concurrency_rows(
    dir: &tempfile::TempDir,
    runtime: &tokio::runtime::Runtime,
    policy: &PolicyEngine,
    scale: &Scale,
    counts: &[usize],
) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for &tasks in counts {
        let file = format!("tasks-{tasks}.sqlite");
        let attest = action_attest(dir, policy, Durability::Full, &file)?;
        let per_task = if tasks == 1 {
            scale.sync_samples
        } else {
            scale.per_task
        };
        let total = tasks * per_task;
        rows.push(bulk(
            &format!("throughput: {tasks} concurrent tasks (full), per action"),
            total,
            || concurrent_actions(runtime, &attest, tasks, per_task),
        )?);
    }
    Ok(rows)
}

/// `tasks` tasks on `runtime`, each running `per_task` whole actions (act + ack) of
/// its own through `attest`.
pub(crate) fn concurrent_actions(
    runtime: &tokio::runtime::Runtime,
    attest: &Attest,
    tasks: usize,
    per_task: usize,
) -> anyhow::Result<()> {
    concurrent_actions_from(runtime, attest, tasks, 0..per_task)
}

/// [`concurrent_actions`], each task's calls numbered `calls` (each call has params of
/// its own, so a later round's calls are not repeats of an earlier round's).
pub(crate) fn concurrent_actions_from(
    runtime: &tokio::runtime::Runtime,
    attest: &Attest,
    tasks: usize,
    calls: std::ops::Range<usize>,
) -> anyhow::Result<()> {
    runtime.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|task| {
                let attest = attest.clone();
                let calls = calls.clone();
                tokio::spawn(async move {
                    for n in calls {
                        attest
                            .call(task_update(task, n))
                            .run(|_| async {
                                Ok::<_, std::convert::Infallible>(json!({"id": "8812"}))
                            })
                            .await?;
                    }
                    Ok::<_, attest_core::AttestError>(())
                })
            })
            .collect();
        for handle in handles {
            handle.await??;
        }
        Ok::<_, anyhow::Error>(())
    })
}

/// Writers in the group-commit limits, and the most rows one commit takes.
pub(crate) const GROUP_WRITERS: usize = 64;

/// The floor under [`GROUP_WRITERS`] concurrent tasks at `full`: as many threads each hand
/// a bare row to one committer and wait until it is committed, twice per action (the
/// intent row, then the outcome row); the committer writes whatever is queued, up to 64
/// rows, with `commit` (one synced transaction) and then releases their writers.
pub(crate) fn group_commit(
    actions_per_writer: usize,
    mut commit: impl FnMut(usize) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    use std::sync::mpsc;
    let (queue, inbox) = mpsc::channel::<mpsc::SyncSender<()>>();
    std::thread::scope(|scope| {
        let writers: Vec<_> = (0..GROUP_WRITERS)
            .map(|_| {
                let queue = queue.clone();
                scope.spawn(move || -> anyhow::Result<()> {
                    for _ in 0..2 * actions_per_writer {
                        let (committed, wait) = mpsc::sync_channel(1);
                        queue.send(committed)?;
                        wait.recv()?;
                    }
                    Ok(())
                })
            })
            .collect();
        drop(queue);
        // The committer, on this thread. On an error the queued writers' channels drop
        // with the batch, so every writer stops instead of waiting for ever.
        let committed = (|| -> anyhow::Result<()> {
            while let Ok(first) = inbox.recv() {
                let mut batch = vec![first];
                while batch.len() < GROUP_WRITERS {
                    match inbox.try_recv() {
                        Ok(next) => batch.push(next),
                        Err(_) => break,
                    }
                }
                commit(batch.len())?;
                for writer in batch {
                    let _ = writer.send(());
                }
            }
            Ok(())
        })();
        drop(inbox);
        let joined: Vec<_> = writers.into_iter().map(|writer| writer.join()).collect();
        // The committer's error first: the writers' would only say their channel closed.
        committed?;
        for writer in joined {
            writer.map_err(|_| anyhow::anyhow!("a group-commit writer panicked"))??;
        }
        Ok(())
    })
}

/// Rounds a paired group-commit measurement takes: each a run of the tasks and one of
/// the limit's writers, a quarter of the actions each.
const GROUP_ROUNDS: usize = 4;

/// [`GROUP_WRITERS`] tasks of whole actions through `attest` and the group-commit limit
/// committing with `commit`, `per_task` actions per task (and per limit writer) in all,
/// by turns ([`crate::measure::bulk_paired`]): the two rows `names` for a 64-task target.
pub(crate) fn paired_group_commit(
    runtime: &tokio::runtime::Runtime,
    attest: &Attest,
    per_task: usize,
    (tasks_name, limit_name): (&str, &str),
    commit: &mut dyn FnMut(usize) -> anyhow::Result<()>,
) -> anyhow::Result<[Row; 2]> {
    let per_round = (per_task / GROUP_ROUNDS).max(1);
    let ops = GROUP_WRITERS * per_round;
    let mut tasks = |round: usize| {
        let first = round * per_round;
        concurrent_actions_from(runtime, attest, GROUP_WRITERS, first..first + per_round)
    };
    let mut limit = |_round: usize| group_commit(per_round, &mut *commit);
    bulk_paired(
        GROUP_ROUNDS,
        (tasks_name, ops, &mut tasks),
        (limit_name, ops, &mut limit),
    )
}

/// 64 concurrent tasks of whole actions on a SQLite ledger at `full`, by turns with
/// [`group_commit`] into a bare table at `synchronous = FULL` ([`paired_group_commit`]).
fn sqlite_group_commit(
    dir: &tempfile::TempDir,
    runtime: &tokio::runtime::Runtime,
    policy: &PolicyEngine,
    scale: &Scale,
) -> anyhow::Result<[Row; 2]> {
    let attest = action_attest(dir, policy, Durability::Full, "tasks-64.sqlite")?;
    let mut bare = BareTable::create(dir, "group-commit", "FULL", Extras::None)?;
    paired_group_commit(
        runtime,
        &attest,
        scale.per_task,
        (names::TASKS_64, names::GROUP_COMMIT),
        &mut |rows| bare.insert(rows),
    )
}

/// Checkpoints, verify since a checkpoint, proofs, and verification at scale.
/// With [`Breadth::Targets`], only the batched ledger, its full verify and peak memory,
/// and the growth rows.
fn evidence(
    dir: &tempfile::TempDir,
    scale: &Scale,
    bulk_ledger: &Ledger,
    facts: &mut Vec<(String, String)>,
    measures: &mut Vec<(String, f64)>,
    breadth: Breadth,
) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let (key, _) = SigningKey::generate("bench.attest/ledger")?;
    let trusted = [key.verifier().clone()];
    if breadth == Breadth::Everything {
        let mut n = scale.bulk_rows as u64;
        rows.push(per_call(
            "checkpoint: sign the current tree (one row appended before each)",
            scale.sync_samples,
            || {
                n += 1;
                bulk_ledger.append(&record(n))?;
                bulk_ledger.checkpoint(&key)?;
                Ok(())
            },
        )?);
        let records: Vec<Record> = (0..100).map(|i| record(n + 1 + i)).collect();
        bulk_ledger.append_batch(&records)?;
        rows.push(since_checkpoint(
            "verify since a checkpoint, 100 new rows (signature included)",
            bulk_ledger,
            &trusted,
            scale.samples,
        )?);
    }

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
    rows.push(once(&crate::targets::names::full_verify(big_rows), || {
        let report = big.verify_with(VerifyOptions {
            trusted: &trusted,
            ..VerifyOptions::default()
        })?;
        anyhow::ensure!(report.is_intact(), "big ledger does not verify");
        Ok(())
    })?);
    rows.push(full_verify_reads(big.path(), big_rows)?);
    peak_memory(big.path(), big_rows, facts, measures)?;
    if breadth == Breadth::Targets {
        rows.extend(growth(dir, scale, &key, &big, facts, measures)?);
        return Ok(rows);
    }
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
    rows.extend(growth(dir, scale, &key, &big, facts, measures)?);
    rows.extend(crate::tiles::rows(
        dir,
        &big,
        &key,
        record,
        scale.sync_samples.min(20),
    )?);
    Ok(rows)
}

/// Only the tlog-tiles rows (`--only tiles`): a batched ledger of `scale.big_rows`, then
/// [`crate::tiles::rows`].
pub(crate) fn tiles_only(scale: &Scale) -> anyhow::Result<Report> {
    let dir = tempfile::tempdir_in(".")?;
    let (key, _) = SigningKey::generate("bench.attest/ledger")?;
    let big = open(&dir, "big.sqlite", Durability::Off)?;
    let mut next = 0u64;
    while next < scale.big_rows as u64 {
        let records: Vec<Record> = (next..(next + 10_000).min(scale.big_rows as u64))
            .map(record)
            .collect();
        big.append_batch(&records)?;
        next += records.len() as u64;
    }
    let rows = crate::tiles::rows(&dir, &big, &key, record, scale.sync_samples.min(20))?;
    Ok(Report {
        rows,
        facts: Vec::new(),
        measures: Vec::new(),
    })
}

/// How an append and `verify --since-checkpoint` cost as the ledger grows: the same
/// rows at three sizes (the largest is the batched ledger above), which should be flat.
fn growth(
    dir: &tempfile::TempDir,
    scale: &Scale,
    key: &SigningKey,
    big: &Ledger,
    facts: &mut Vec<(String, String)>,
    measures: &mut Vec<(String, f64)>,
) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let trusted = [key.verifier().clone()];
    let sizes = crate::targets::growth_sizes(scale);
    for size in sizes {
        let path = if size == scale.big_rows {
            big.path().to_path_buf()
        } else {
            let ledger = open(dir, &format!("growth-{size}.sqlite"), Durability::Off)?;
            for start in (0..size).step_by(10_000) {
                let records: Vec<Record> = (start..(start + 10_000).min(size))
                    .map(|n| record(n as u64))
                    .collect();
                ledger.append_batch(&records)?;
            }
            ledger.path().to_path_buf()
        };
        let ledger = Ledger::open(
            &path,
            LedgerOptions {
                durability: Durability::Normal,
                ..LedgerOptions::default()
            },
        )?;
        let mut n = 0;
        rows.push(per_call(
            &format!("growth: append one row to {size} rows (normal)"),
            scale.samples,
            || {
                n += 1;
                ledger.append(&record(n))?;
                Ok(())
            },
        )?);
        ledger.checkpoint(key)?;
        let records: Vec<Record> = (0..100).map(|i| record(n + 1 + i)).collect();
        ledger.append_batch(&records)?;
        // Without SQLite's per-connection mutex, as the ledger opens its own: a limit
        // that locked around every column read would read slower than the machine.
        let conn = rusqlite::Connection::open_with_flags(
            ledger.path(),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        let mut verify = timing(since_checkpoint_op(&ledger, &trusted));
        let mut limit = timing(|| since_checkpoint_limit(&conn, &trusted, SinceReads::Bodies));
        let mut floor = timing(|| since_checkpoint_limit(&conn, &trusted, SinceReads::Checked));
        rows.extend(by_turns(
            scale.samples,
            PAIR_CHUNK,
            vec![
                (&names::since_checkpoint(size), &mut verify),
                (&names::since_checkpoint_limit(size), &mut limit),
                (&names::since_checkpoint_floor(size), &mut floor),
            ],
        )?);
        if size == sizes[0] {
            // Beside the largest ledger's: whether verifying needs more memory as it grows.
            peak_memory(ledger.path(), size, facts, measures)?;
        }
        if size != scale.big_rows {
            rows.push(once(
                &format!("growth: full verify of {size} rows"),
                || {
                    anyhow::ensure!(ledger.verify()?.is_intact(), "growth ledger is broken");
                    Ok(())
                },
            )?);
        }
    }
    Ok(rows)
}

/// What a full verify of the `rows`-row ledger at `path` cannot do without, timed once:
/// one read-only connection (one snapshot) reading every column verify checks, in seq
/// order, and every stored tree hash; no hashing, no checks. SQLite answers one
/// statement on one thread, so this is the least time a reader of that snapshot takes.
fn full_verify_reads(path: &std::path::Path, rows: usize) -> anyhow::Result<Row> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    once(&names::full_verify_reads(rows), || {
        let tx = conn.unchecked_transaction()?;
        let mut read = [0usize; 2];
        for (sql, count) in [
            format!("SELECT {CHECKED_COLUMNS} FROM entries ORDER BY seq"),
            "SELECT idx, hash FROM tree_hashes ORDER BY idx".to_owned(),
        ]
        .iter()
        .zip(&mut read)
        {
            let mut statement = tx.prepare(sql)?;
            let mut found = statement.query([])?;
            while let Some(row) = found.next()? {
                read_columns(row)?;
                *count += 1;
            }
        }
        let [entries, hashes] = read;
        anyhow::ensure!(
            entries == rows && hashes >= rows,
            "read {entries} entries and {hashes} tree hashes of a {rows}-row ledger"
        );
        Ok(())
    })
}

/// Reads every column of `row` (SQLite decodes a column when it is read), keeping the
/// reads from being optimized away.
fn read_columns(row: &rusqlite::Row<'_>) -> rusqlite::Result<()> {
    for column in 0..row.as_ref().column_count() {
        std::hint::black_box(row.get_ref(column)?);
    }
    Ok(())
}

/// The peak resident memory of a process verifying the ledger at `path` of `rows` rows.
fn peak_memory(
    path: &std::path::Path,
    rows: usize,
    facts: &mut Vec<(String, String)>,
    measures: &mut Vec<(String, f64)>,
) -> anyhow::Result<()> {
    let peak = processes::verify_peak_memory(path)? as f64;
    let name = crate::targets::names::verify_peak_rss(rows);
    facts.push((name.clone(), format!("{:.1} MiB", peak / (1024.0 * 1024.0))));
    measures.push((name, peak));
    Ok(())
}

/// The `entries` columns verify reads and checks against the body, body first.
const CHECKED_COLUMNS: &str =
    "body, seq, hash, ts, system, verb, agent, decision, level, run, action_id";

/// What a since-checkpoint limit or floor row reads of the rows after the checkpoint.
#[derive(Clone, Copy, PartialEq)]
enum SinceReads {
    /// The bodies only: the limit issue 27 names.
    Bodies,
    /// Every column verify checks against the body (the eleven `entries` columns), and
    /// the stored tree hashes those leaves completed (verify compares them with the
    /// hashes the entries give, or proofs served from them could fail unnoticed): the
    /// reads since-checkpoint verify cannot do without, before any of its checks.
    Checked,
}

/// The limit (or, with [`SinceReads::Checked`], the floor) under `verify
/// --since-checkpoint`, once, on `conn` (the ledger's own file through a connection of
/// its own): the newest checkpoint's note opened under `trusted` (one Ed25519
/// signature, as the ledger opens it), the 100 rows after it read and their bodies
/// hashed (SHA-256), and the tree's root at the checkpoint computed from stored tree
/// hashes. No chain links, columns compared, leaves or inclusion proof.
fn since_checkpoint_limit(
    conn: &rusqlite::Connection,
    trusted: &[attest_ledger::VerifierKey],
    reads: SinceReads,
) -> anyhow::Result<()> {
    let tx = conn.unchecked_transaction()?;
    let note: String = tx
        .prepare_cached("SELECT note FROM checkpoints ORDER BY size DESC LIMIT 1")?
        .query_row([], |row| row.get(0))?;
    let checkpoint = attest_ledger::open_checkpoint(note.as_bytes(), trusted)?;
    let columns = match reads {
        SinceReads::Bodies => "body",
        SinceReads::Checked => CHECKED_COLUMNS,
    };
    let mut read = tx.prepare_cached(&format!(
        "SELECT {columns} FROM entries WHERE seq > ?1 ORDER BY seq LIMIT 100"
    ))?;
    let mut rows = read.query([checkpoint.size])?;
    let mut hashed = 0;
    while let Some(row) = rows.next()? {
        read_columns(row)?;
        std::hint::black_box(Sha256::digest(row.get_ref(0)?.as_bytes()?));
        hashed += 1;
    }
    anyhow::ensure!(hashed == 100, "{hashed} rows after the checkpoint, not 100");
    if reads == SinceReads::Checked {
        let mut stored =
            tx.prepare_cached("SELECT idx, hash FROM tree_hashes WHERE idx >= ?1 ORDER BY idx")?;
        let mut hashes = stored.query([tlog_tiles::stored_hash_index(0, checkpoint.size)])?;
        while let Some(hash) = hashes.next()? {
            std::hint::black_box((hash.get_ref(0)?, hash.get_ref(1)?));
        }
    }
    // The ledger writes tree hashes 64 leaves at a time: the root of the largest
    // tree of whole flushes at or below the checkpoint reads as many stored hashes.
    let filed = checkpoint.size - checkpoint.size % TREE_FLUSH_LEAVES;
    std::hint::black_box(tlog_tiles::tree_hash(filed, &StoredHashes(&tx))?);
    Ok(())
}

/// `tree_hashes` read by stored index, one prepared lookup per hash, as the ledger reads it.
struct StoredHashes<'c>(&'c rusqlite::Connection);

impl tlog_tiles::HashReader for StoredHashes<'_> {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<tlog_tiles::Hash>, tlog_tiles::Error> {
        let mut read = self
            .0
            .prepare_cached("SELECT hash FROM tree_hashes WHERE idx = ?1")
            .map_err(|_| tlog_tiles::Error::IndexesNotInTree)?;
        indexes
            .iter()
            .map(|&index| {
                let hash: Vec<u8> = read
                    .query_row([index], |row| row.get(0))
                    .map_err(|_| tlog_tiles::Error::IndexesNotInTree)?;
                hash.try_into()
                    .map(tlog_tiles::Hash)
                    .map_err(|_| tlog_tiles::Error::IndexesNotInTree)
            })
            .collect()
    }
}

/// `verify --since-checkpoint` over the 100 rows appended after the newest checkpoint.
fn since_checkpoint(
    name: &str,
    ledger: &Ledger,
    trusted: &[attest_ledger::VerifierKey],
    samples: usize,
) -> anyhow::Result<Row> {
    per_call(name, samples, since_checkpoint_op(ledger, trusted))
}

/// One since-checkpoint verify of `ledger` (100 rows after its newest checkpoint).
fn since_checkpoint_op<'a>(
    ledger: &'a Ledger,
    trusted: &'a [attest_ledger::VerifierKey],
) -> impl FnMut() -> anyhow::Result<()> + 'a {
    move || {
        let report = ledger.verify_with(VerifyOptions {
            trusted,
            since_checkpoint: true,
            ..VerifyOptions::default()
        })?;
        anyhow::ensure!(
            report.is_intact() && report.checked == 100,
            "since-checkpoint verify of {} failed",
            ledger.path().display()
        );
        Ok(())
    }
}

/// What the machine allows: the floor under each Attest row.
/// With `paired`, the limits [`paired_rows`] measures by turns with their rows are left
/// out.
fn limits(dir: &tempfile::TempDir, scale: &Scale, paired: bool) -> anyhow::Result<Vec<Row>> {
    let mut rows = Vec::new();
    let body = canonical_bytes(&record(1))?;
    rows.push(per_call_batched(
        &format!("limit: raw SHA-256 of one {}-byte body", body.len()),
        scale.samples,
        100,
        || {
            std::hint::black_box(Sha256::digest(&body));
            Ok(())
        },
    )?);
    for (mode, samples) in [("FULL", scale.sync_samples), ("NORMAL", scale.samples)] {
        let mut bare = BareTable::create(dir, mode, mode, Extras::None)?;
        rows.push(per_call(
            &format!(
                "limit: bare INSERT of the same row + tree rows, prepared ({})",
                mode.to_lowercase()
            ),
            samples,
            || bare.insert(1),
        )?);
    }
    if !paired {
        // What the dashboard's counters and the run / action id lookups add to that floor.
        let mut counted = BareTable::create(dir, "NORMAL-counted", "NORMAL", Extras::Counted)?;
        rows.push(per_call(names::FILED_LIMIT, scale.samples, || {
            counted.insert(1)
        })?);
        let mut bare = BareTable::create(dir, "normal-twice", "NORMAL", Extras::None)?;
        rows.push(per_call(names::TWO_COMMITS, scale.samples, || {
            bare.insert(1)?;
            bare.insert(1)
        })?);
    }
    let mut bare = BareTable::create(dir, "OFF", "OFF", Extras::None)?;
    let batch = 10_000;
    rows.push(bulk(
        &format!("limit: bare INSERTs of the same rows in batches of {batch} (off), per row"),
        scale.big_rows,
        || {
            for _ in 0..scale.big_rows / batch {
                bare.insert(batch)?;
            }
            Ok(())
        },
    )?);
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
    // Raw SHA-256 over a whole ledger's worth of bodies: the floor under full verify.
    let bodies = vec![body; scale.bulk_rows];
    let start = Instant::now();
    for b in &bodies {
        std::hint::black_box(Sha256::digest(b));
    }
    let per_row = start.elapsed().as_nanos() as f64 / bodies.len() as f64;
    rows.push(flat(
        &format!("limit: raw SHA-256 over {} bodies, per body", bodies.len()),
        bodies.len(),
        per_row,
    ));
    rows.push(flat(
        &format!(
            "limit: raw SHA-256 of {} bodies on one core, whole run",
            scale.big_rows
        ),
        1,
        per_row * scale.big_rows as f64,
    ));
    Ok(rows)
}

/// The floor under an append: the same row into a table shaped like `entries`, and
/// the same number of `tree_hashes` rows, with statements prepared once, one
/// transaction per call; no hashing, no JSON, no chain.
struct BareTable {
    conn: rusqlite::Connection,
    seq: u64,
    idx: u64,
    /// Tree rows completed but not yet written.
    pending: u64,
    row: Record,
    body: String,
    extras: Extras,
}

/// What a bare table writes beside the entry and tree rows.
#[derive(Clone, Copy, PartialEq)]
enum Extras {
    None,
    /// The `run` and `action_id` columns, and every 64 rows what the ledger files for
    /// them: the counters (totals by decision, level, system, agent, and decisions by
    /// hour) in one grouped upsert, and a `lookups` row per run and action id.
    Counted,
    /// `Counted`, and in every commit the call-digest row of the action the commit
    /// belongs to (two commits an action) read by its digest and written, as a whole
    /// action's claim (with the intent) and finish (with the outcome) are: the storage a
    /// whole action needs for a retried call to run once (issue 33), without its CPU work.
    Action,
}

/// Leaves between the ledger's bulk writes of tree rows (attest-ledger's `TREE_FLUSH_LEAVES`).
const TREE_FLUSH_LEAVES: u64 = 64;

/// Rows between the ledger's filings of counters and lookups (attest-ledger's `FILING_ROWS`).
const FILING_ROWS: u64 = 64;

impl BareTable {
    /// A table in `dir`'s file `bare-{name}.sqlite`, synced as `mode`.
    fn create(
        dir: &tempfile::TempDir,
        name: &str,
        mode: &str,
        extras: Extras,
    ) -> anyhow::Result<BareTable> {
        let conn = rusqlite::Connection::open(dir.path().join(format!("bare-{name}.sqlite")))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", mode)?;
        conn.execute_batch(
            "CREATE TABLE entries (seq INTEGER PRIMARY KEY, hash BLOB NOT NULL, ts TEXT NOT NULL,
                system TEXT NOT NULL, verb TEXT NOT NULL, agent TEXT, decision TEXT NOT NULL,
                level TEXT, body TEXT NOT NULL);
             CREATE TABLE tree_hashes (idx INTEGER PRIMARY KEY, hash BLOB NOT NULL);",
        )?;
        if extras != Extras::None {
            conn.execute_batch(
                "ALTER TABLE entries ADD COLUMN run TEXT;
                 ALTER TABLE entries ADD COLUMN action_id TEXT;
                 CREATE TABLE lookups (key TEXT NOT NULL, seq INTEGER NOT NULL,
                     PRIMARY KEY (key, seq)) WITHOUT ROWID;
                 CREATE TABLE counters (dim TEXT NOT NULL, key TEXT NOT NULL, hour TEXT NOT NULL,
                     n INTEGER NOT NULL, PRIMARY KEY (dim, key, hour)) WITHOUT ROWID;",
            )?;
        }
        if extras == Extras::Action {
            // The ledger's own table (attest-ledger's `CALLS_SCHEMA`).
            conn.execute_batch(
                "CREATE TABLE call_digests (digest BLOB NOT NULL PRIMARY KEY, action_id TEXT NOT NULL,
                     owner TEXT NOT NULL, seq INTEGER, at_ms INTEGER NOT NULL,
                     until_ms INTEGER NOT NULL) WITHOUT ROWID;",
            )?;
        }
        let body = String::from_utf8(canonical_bytes(&record(1))?)?;
        Ok(BareTable {
            conn,
            seq: 0,
            idx: 0,
            pending: 0,
            row: record(1),
            body,
            extras,
        })
    }

    /// Inserts `rows` rows and their tree rows (and extras) in one transaction.
    fn insert(&mut self, rows: usize) -> anyhow::Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut entry = tx.prepare_cached(
                "INSERT INTO entries (seq, hash, ts, system, verb, agent, decision, level, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?;
            // With extras: the wider INSERT and the grouped counter upsert.
            let mut counted = match self.extras {
                Extras::None => None,
                Extras::Counted | Extras::Action => Some((
                    tx.prepare_cached(
                        "INSERT INTO entries (seq, hash, ts, system, verb, agent, decision, level, body, run, action_id)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                    )?,
                    tx.prepare_cached(
                        "INSERT INTO counters (dim, key, hour, n) SELECT * FROM (
                             SELECT 'decision', decision, '', count(*) FROM entries WHERE seq > ?1 GROUP BY decision
                             UNION ALL SELECT 'level', coalesce(level, ''), '', count(*) FROM entries
                                 WHERE seq > ?1 GROUP BY coalesce(level, '')
                             UNION ALL SELECT 'system', system, '', count(*) FROM entries WHERE seq > ?1 GROUP BY system
                             UNION ALL SELECT 'agent', coalesce(agent, ''), '', count(*) FROM entries
                                 WHERE seq > ?1 GROUP BY coalesce(agent, '')
                             UNION ALL SELECT 'decision', decision, substr(ts, 1, 13), count(*) FROM entries
                                 WHERE seq > ?1 GROUP BY decision, substr(ts, 1, 13))
                         WHERE true ON CONFLICT (dim, key, hour) DO UPDATE SET n = n + excluded.n",
                    )?,
                    tx.prepare_cached(
                        "INSERT INTO lookups (key, seq)
                             SELECT 'run:' || run, seq FROM entries WHERE seq > ?1 AND run IS NOT NULL
                             UNION ALL
                             SELECT 'action_id:' || action_id, seq FROM entries WHERE seq > ?1",
                    )?,
                )),
            };
            let mut tree =
                tx.prepare_cached("INSERT INTO tree_hashes (idx, hash) VALUES (?1, ?2)")?;
            let r = &self.row;
            let ts = "2026-12-01T06:00:00.000000Z";
            let level = r.verification.as_ref().map(|v| v.level.as_str());
            for _ in 0..rows {
                self.seq += 1;
                let columns = rusqlite::params![
                    self.seq,
                    &[7u8; 32][..],
                    ts,
                    &r.system,
                    &r.verb,
                    &r.agent,
                    &r.decision,
                    level,
                    &self.body,
                ];
                match counted.as_mut() {
                    None => {
                        entry.execute(columns)?;
                    }
                    Some((counted_entry, counter, lookups)) => {
                        let action_id = format!("{:012}", self.seq);
                        let mut all = columns.to_vec();
                        all.extend([&r.run_id as &dyn rusqlite::ToSql, &action_id]);
                        counted_entry.execute(&all[..])?;
                        if self.seq.is_multiple_of(FILING_ROWS) {
                            counter.execute([self.seq - FILING_ROWS])?;
                            lookups.execute([self.seq - FILING_ROWS])?;
                        }
                    }
                }
                if self.extras == Extras::Action {
                    BareTable::call_digest(&tx, self.seq)?;
                }
                // A leaf completes 1 + (trailing zeros of its 1-based number) stored hashes;
                // like the ledger, they are written 64 leaves at a time.
                self.pending += 1 + u64::from(self.seq.trailing_zeros());
                if self.seq.is_multiple_of(TREE_FLUSH_LEAVES) {
                    for _ in 0..self.pending {
                        tree.execute(rusqlite::params![self.idx, &[9u8; 32][..]])?;
                        self.idx += 1;
                    }
                    self.pending = 0;
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Reads and writes the call-digest row of the action row `seq` belongs to: rows
    /// 2n − 1 and 2n are one action's claim and finish.
    fn call_digest(tx: &rusqlite::Transaction<'_>, seq: u64) -> anyhow::Result<()> {
        use rusqlite::OptionalExtension;
        let action = seq.div_ceil(2);
        let mut digest = [0u8; 32];
        digest[..8].copy_from_slice(&action.to_le_bytes());
        let found: Option<String> = tx
            .prepare_cached("SELECT action_id FROM call_digests WHERE digest = ?1")?
            .query_row([&digest[..]], |row| row.get(0))
            .optional()?;
        std::hint::black_box(found);
        tx.prepare_cached(
            "INSERT OR REPLACE INTO call_digests (digest, action_id, owner, seq, at_ms, until_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?
        .execute(rusqlite::params![
            &digest[..],
            format!("{action:012}"),
            "bench-owner",
            seq,
            1_764_568_800_000_i64,
            1_764_655_200_000_i64
        ])?;
        Ok(())
    }
}
