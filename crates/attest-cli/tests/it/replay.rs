//! `attest policy replay`: 100,000 mixed recorded actions (reads, writes with their
//! intents, approved and rejected asks, payments with and without their whole params,
//! imported, shadow-mode and after-the-fact rows, held asks nobody answered) replayed
//! under a stricter and a looser candidate give exactly the transitions this test works
//! out on its own from `attest export`; the payment rule that needs params the rows do
//! not keep is reported undecidable with its count.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use attest_ledger::{
    to_hex, value_hash, Confirm, Durability, Execution, Imported, Ledger, LedgerOptions, Record,
    Shadow,
};
use serde_json::{json, Map, Value};

use crate::{attest, expect_ok, exported_entries};

const ACTIONS: u64 = 100_000;

const STRICTER: &str = "version: 1
policies:
  - name: no-deletes
    match: {verb: delete}
    decision: refuse
    reason: agents never delete
  - name: big-payments
    match: {system: stripe, params: {/amount: {gt: 100}}}
    decision: ask
    reason: payments over 100 ask
  - name: no-mail
    match: {system: gmail}
    decision: refuse
    reason: agents send no mail
";

const LOOSER: &str = "version: 1
policies:
  - name: everything-acts
    match: {}
    decision: act
    reason: trust the agents
";

/// The record of action `i` of kind `i % 10`, as `stage` (its intent or pending row)
/// or its outcome.
fn record(i: u64, stage: bool) -> Record {
    let agent = if i.is_multiple_of(3) {
        "bot-a"
    } else {
        "bot-b"
    };
    let (system, verb, tier) = match i % 10 {
        0 | 9 => ("crm", "read", "low"),
        1 | 6 | 8 => ("crm", "update", "medium"),
        2 => ("crm", "delete", "very_high"),
        3 | 7 => ("gmail", "send", "high"),
        _ => ("stripe", "pay", "very_high"),
    };
    let mut preview = Map::new();
    let mut params_hash = "00".repeat(32);
    if i % 10 == 4 || i % 10 == 5 {
        preview.insert("amount".into(), json!((i * 37) % 200));
    }
    if i % 10 == 5 || i % 10 == 6 {
        // The preview is the whole params: its hash is the recorded one.
        params_hash = to_hex(&value_hash(&Value::Object(preview.clone())).unwrap());
    }
    let (decision, rules, status, confirm) = match i % 10 {
        1 => ("act", vec!["R4"], if stage { "intent" } else { "ok" }, None),
        2 => ("ask", vec!["R4"], "ok", Some("approved")),
        3 => ("ask", vec!["R2", "R4"], "not_run", Some("rejected")),
        4 | 5 => ("ask", vec!["R4"], "not_run", Some("rejected")),
        7 => ("act", vec!["shadow"], "ok", None),
        8 => ("ask", vec!["R3"], "pending", None),
        9 => ("recorded", vec!["recorded"], "recorded", None),
        _ => ("act", vec!["R4"], "ok", None),
    };
    Record {
        action_id: format!("a{i}"),
        run_id: Some(format!("run-{}", i / 1_000)),
        agent: Some(agent.into()),
        agent_auth: None,
        actor: None,
        call: None,
        owner: None,
        system: system.into(),
        verb: verb.into(),
        target: Some(format!("t{}", i % 97)),
        target_class: if i % 10 == 3 { "external" } else { "none" }.into(),
        source: "manual".into(),
        decision: decision.into(),
        tier: tier.into(),
        reasons: rules.iter().map(|r| format!("{r} spoke")).collect(),
        rules_fired: rules.iter().map(|&r| r.to_owned()).collect(),
        params_hash,
        params_preview: preview,
        result_ids: Vec::new(),
        confirm: confirm.map(|outcome| Confirm {
            outcome: outcome.into(),
            approver: Some("ann@acme.com".into()),
            channel: Some("inbox".into()),
            note: None,
            approvers: Vec::new(),
        }),
        execution: Execution {
            status: status.into(),
            result_hash: None,
            error_hash: None,
        },
        verification: None,
        idempotency_key: None,
        replay_of: None,
        imported: (i % 10 == 6).then(|| Imported {
            ts: Some("2026-11-01T00:00:00Z".into()),
        }),
        shadow: (i % 10 == 7).then(|| Shadow {
            decision: "refuse".into(),
            reasons: vec!["an old rule".into()],
            rules_fired: vec!["old-rule".into()],
        }),
        grant: None,
        sealed: None,
        erasure: None,
    }
}

/// Appends the actions in batches (a write's intent just before its outcome) to the
/// test's ledger in `dir` (a SQLite file, or its PostgreSQL database).
fn write_ledger(dir: &Path) {
    let options = LedgerOptions {
        durability: Durability::Off,
        create: true,
        ..LedgerOptions::default()
    };
    let ledger = Ledger::open(crate::test_ledger_at(dir), options).unwrap();
    let mut batch = Vec::with_capacity(10_000);
    for i in 0..ACTIONS {
        if i % 10 == 1 {
            batch.push(record(i, true));
        }
        batch.push(record(i, false));
        if batch.len() >= 10_000 {
            ledger.append_batch(&batch).unwrap();
            batch.clear();
        }
    }
    ledger.append_batch(&batch).unwrap();
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

/// What the test expects a candidate to decide for an exported row: `(decision, rules)`,
/// or the rule that needs params the row lacks. Works from the row's own fields, by the
/// documented order: R2 (recorded class unless the params are complete), R3 (the
/// record's own answer), the first YAML rule, else R4 by the verb's tier.
fn expected(row: &Value, stricter: bool) -> Result<(String, Vec<String>), String> {
    let preview = row["params_preview"].clone();
    let complete = to_hex(&value_hash(&preview).unwrap()) == row["params_hash"].as_str().unwrap();
    let verb = row["verb"].as_str().unwrap();
    let system = row["system"].as_str().unwrap();
    let write = verb != "read";
    let recorded_rules = match row.get("shadow") {
        Some(shadow) => strings(&shadow["rules_fired"]),
        None => strings(&row["rules_fired"]),
    };
    let decided = row.get("imported").is_none() && row["decision"] != "recorded";
    let mut rules = Vec::new();
    let class = if complete {
        "none"
    } else {
        row["target_class"].as_str().unwrap()
    };
    if write && class != "none" {
        rules.push("R2".to_owned());
    }
    let mut floor = 0;
    if write && !complete {
        if !decided {
            return Err("R3".into());
        }
        if recorded_rules.iter().any(|r| r == "R3") {
            rules.push("R3".to_owned());
            floor = 1;
        }
    }
    let rank = |d: &str| match d {
        "refuse" => 2,
        "ask" => 1,
        _ => 0,
    };
    let rule: Option<(&str, &str)> = if stricter {
        if verb == "delete" {
            Some(("no-deletes", "refuse"))
        } else if system == "stripe" && !complete {
            return Err("big-payments".into());
        } else if system == "stripe" && preview["amount"].as_u64().unwrap() > 100 {
            Some(("big-payments", "ask"))
        } else if system == "gmail" {
            Some(("no-mail", "refuse"))
        } else {
            None
        }
    } else {
        Some(("everything-acts", "act"))
    };
    let decision = match rule {
        Some((name, decision)) => {
            rules.push(name.to_owned());
            decision
        }
        None => {
            let r4 = match verb {
                "read" | "update" => "act",
                _ => "ask",
            };
            if rank(r4) >= floor {
                rules.push("R4".to_owned());
            }
            r4
        }
    };
    let decision = if rank(decision) >= floor {
        decision
    } else {
        "ask"
    };
    Ok((decision.to_owned(), rules))
}

/// Transitions and undecidable counts worked out from the exported rows: each action
/// judged at the last row with its id.
fn independent(rows: &[Value], stricter: bool, agent: Option<&str>) -> (u64, Value, Value) {
    let mut last: HashMap<&str, &Value> = HashMap::new();
    for row in rows {
        if agent.is_some_and(|a| row["agent"] != a) {
            continue;
        }
        last.insert(row["action_id"].as_str().unwrap(), row);
    }
    let mut transitions: BTreeMap<(String, String, Vec<String>), u64> = BTreeMap::new();
    let mut undecidable: BTreeMap<String, u64> = BTreeMap::new();
    for row in last.values() {
        let from = match row.get("shadow") {
            Some(shadow) => shadow["decision"].as_str().unwrap().to_owned(),
            None => row["decision"].as_str().unwrap().to_owned(),
        };
        match expected(row, stricter) {
            Err(rule) => *undecidable.entry(rule).or_default() += 1,
            Ok((to, _)) if to == from => {}
            Ok((to, rules)) => *transitions.entry((from, to, rules)).or_default() += 1,
        }
    }
    let transitions = transitions
        .into_iter()
        .map(|((from, to, rules), count)| json!({"from": from, "to": to, "rules": rules, "count": count}))
        .collect();
    let undecidable = undecidable
        .into_iter()
        .map(|(rule, count)| json!({"rule": rule, "count": count}))
        .collect();
    (
        last.len() as u64,
        Value::Array(transitions),
        Value::Array(undecidable),
    )
}

fn replay(dir: &Path, policy: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "--ledger",
        "ledger.sqlite",
        "--policy",
        policy,
        "policy",
        "replay",
        "--json",
    ];
    args.extend(extra);
    serde_json::from_str(&expect_ok(&attest(dir, &args))).unwrap()
}

/// The report's transitions without their examples, sorted as the test's are, after
/// checking each names at most five example rows that it counts.
fn comparable(report: &Value, rows: &[Value]) -> (Value, Value) {
    let by_seq: HashMap<u64, &Value> = rows
        .iter()
        .map(|r| (r["seq"].as_u64().unwrap(), r))
        .collect();
    let mut transitions: Vec<Value> = report["transitions"].as_array().unwrap().clone();
    for t in &mut transitions {
        let examples = t["examples"].as_array().unwrap();
        let count = t["count"].as_u64().unwrap();
        assert_eq!(examples.len() as u64, count.min(5), "{t}");
        for seq in examples {
            let row = by_seq[&seq.as_u64().unwrap()];
            assert_ne!(
                row["execution"]["status"], "intent",
                "an intent stands in for its outcome: {row}"
            );
        }
        t.as_object_mut().unwrap().remove("examples");
    }
    transitions.sort_by_key(|t| {
        (
            t["from"].to_string(),
            t["to"].to_string(),
            t["rules"].to_string(),
        )
    });
    let mut undecidable = report["undecidable"].as_array().unwrap().clone();
    undecidable.sort_by_key(|u| u["rule"].to_string());
    (Value::Array(transitions), Value::Array(undecidable))
}

#[test]
fn a_stricter_and_a_looser_candidate_give_the_transitions_worked_out_from_the_export() {
    let dir = tempfile::tempdir().unwrap();
    write_ledger(dir.path());
    std::fs::write(dir.path().join("stricter.yaml"), STRICTER).unwrap();
    std::fs::write(dir.path().join("looser.yaml"), LOOSER).unwrap();
    let rows = exported_entries(dir.path());
    assert_eq!(
        rows.len() as u64,
        ACTIONS + ACTIONS / 10,
        "every write of kind 1 has an intent"
    );
    for (policy, stricter) in [("stricter.yaml", true), ("looser.yaml", false)] {
        let report = replay(dir.path(), policy, &[]);
        let (actions, transitions, undecidable) = independent(&rows, stricter, None);
        assert_eq!(report["actions"], actions, "{policy}");
        assert_eq!(actions, ACTIONS);
        let (got, got_undecidable) = comparable(&report, &rows);
        assert_eq!(got, transitions, "{policy}: {report:#}");
        assert_eq!(got_undecidable, undecidable, "{policy}");
        let changed: u64 = got
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["count"].as_u64().unwrap())
            .sum();
        let undecided: u64 = undecidable
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["count"].as_u64().unwrap())
            .sum();
        assert_eq!(
            report["unchanged"].as_u64().unwrap() + changed + undecided,
            ACTIONS
        );
    }
    // The stricter policy's payment rule needs /amount, which the payments of kind 4 keep
    // only in a preview that is not their whole params: one tenth of the actions.
    let report = replay(dir.path(), "stricter.yaml", &[]);
    assert_eq!(
        report["undecidable"],
        json!([{"rule": "big-payments", "count": ACTIONS / 10}])
    );
    // A scope narrows the rows replayed.
    let report = replay(dir.path(), "stricter.yaml", &["--agent", "bot-a"]);
    let (actions, transitions, _) = independent(&rows, true, Some("bot-a"));
    assert_eq!(report["actions"], actions);
    assert_eq!(comparable(&report, &rows).0, transitions);
    // The table for a person names the transitions and an example row.
    let out = expect_ok(&attest(
        dir.path(),
        &[
            "--ledger",
            "ledger.sqlite",
            "--policy",
            "stricter.yaml",
            "policy",
            "replay",
        ],
    ));
    assert!(out.contains("100000 actions replayed"), "{out}");
    assert!(out.contains("no-deletes"), "{out}");
    assert!(out.contains("crm.delete t"), "{out}");
    assert!(out.contains("undecidable: rule big-payments"), "{out}");
}
