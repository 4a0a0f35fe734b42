//! `attest digest --json`: each anomaly flag on a ledger built to raise it, and none on
//! a quiet one. Ledgers are written through the ledger's API with a pinned clock, so
//! every row's `ts` is chosen.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use attest_ledger::{Clock, Durability, Execution, Ledger, LedgerOptions, Record, Verification};
use serde_json::Value;

use crate::{attest, expect_ok};

/// The digest's window ends here (a midnight, UTC).
pub(crate) const UNTIL: &str = "2026-11-30T00:00:00Z";
const DAY: u64 = 86_400;
const HOUR: u64 = 3_600;

/// A clock the test sets before each append.
#[derive(Clone)]
pub(crate) struct PinnedClock(pub(crate) Arc<Mutex<SystemTime>>);

impl Clock for PinnedClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap()
    }
}

/// One action of the shape these tests need.
pub(crate) struct Act<'a> {
    pub(crate) agent: &'a str,
    pub(crate) system: &'a str,
    pub(crate) verb: &'a str,
    pub(crate) target_class: &'a str,
    pub(crate) level: &'a str,
    pub(crate) status: &'a str,
}

impl Act<'_> {
    pub(crate) fn normal(agent: &str) -> Act<'_> {
        Act {
            agent,
            system: "gmail",
            verb: "send",
            target_class: "internal",
            level: "verified",
            status: "ok",
        }
    }

    pub(crate) fn record(&self, id: String) -> Record {
        Record {
            action_id: id,
            run_id: None,
            call: None,
            result_ids: Vec::new(),
            agent: Some(self.agent.into()),
            agent_auth: None,
            actor: None,
            owner: None,
            system: self.system.into(),
            verb: self.verb.into(),
            target: Some(format!("{}-target", self.target_class)),
            target_class: self.target_class.into(),
            source: "manual".into(),
            decision: "act".into(),
            tier: "high".into(),
            reasons: vec![],
            rules_fired: vec![],
            params_hash: "00".repeat(32),
            params_preview: Default::default(),
            confirm: None,
            execution: Execution {
                status: self.status.into(),
                result_hash: None,
                error_hash: None,
            },
            verification: (self.status == "ok").then(|| Verification {
                level: self.level.into(),
                method: "ack".into(),
                matched: None,
                evidence: Default::default(),
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
}

/// Appends `(seconds before UNTIL, action)` pairs, oldest first.
pub(crate) fn write_ledger(path: &Path, mut actions: Vec<(u64, Act<'_>)>) {
    let until = humantime::parse_rfc3339(UNTIL).unwrap();
    let now = Arc::new(Mutex::new(until));
    let ledger = Ledger::open(
        path,
        LedgerOptions {
            durability: Durability::Off,
            clock: Arc::new(PinnedClock(Arc::clone(&now))),
            create: true,
            ..LedgerOptions::default()
        },
    )
    .unwrap();
    actions.sort_by_key(|(ago, _)| std::cmp::Reverse(*ago));
    for (i, (ago, act)) in actions.iter().enumerate() {
        *now.lock().unwrap() = until - Duration::from_secs(*ago);
        ledger.append(&act.record(format!("a{i}"))).unwrap();
    }
}

/// 28 days of office hours for `agent`: ten internal gmail sends a day between 09:00
/// and 17:59 UTC, one of them external.
pub(crate) fn history(agent: &str) -> Vec<(u64, Act<'_>)> {
    let mut out = Vec::new();
    for day in 2..=29u64 {
        for i in 0..10u64 {
            let at = day * DAY - (9 + i % 9) * HOUR - i * 60;
            let mut act = Act::normal(agent);
            if i == 0 {
                act.target_class = "external";
            }
            out.push((at, act));
        }
    }
    out
}

/// The last day: `count` normal actions in office hours.
pub(crate) fn office_day(agent: &str, count: u64) -> Vec<(u64, Act<'_>)> {
    (0..count)
        .map(|i| (DAY - (9 + i % 9) * HOUR - (i % 50) * 60, Act::normal(agent)))
        .collect()
}

fn digest(dir: &Path) -> Value {
    let out = expect_ok(&attest(
        dir,
        &[
            "--ledger",
            "ledger.sqlite",
            "digest",
            "--json",
            "--since",
            "24h",
            "--until",
            UNTIL,
        ],
    ));
    serde_json::from_str(&out).unwrap()
}

fn flags(digest: &Value) -> Vec<(String, String)> {
    digest["agents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|a| a["flags"].as_array().unwrap().iter())
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_owned(),
                f["why"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_quiet_ledger_raises_no_flag() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows = history("bot");
    rows.extend(office_day("bot", 10));
    write_ledger(Path::new(&crate::test_ledger_at(dir.path())), rows);
    let digest = digest(dir.path());
    assert_eq!(digest["actions"], 10, "{digest:#}");
    assert_eq!(flags(&digest), Vec::new(), "{digest:#}");
    assert_eq!(digest["agents"][0]["baseline_actions"], 280);
    assert_eq!(digest["agents"][0]["systems"][0]["levels"]["verified"], 10);
}

#[test]
fn a_spike_a_new_system_night_work_failures_and_an_external_burst_are_each_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows = history("spiky");
    rows.extend(history("night"));
    rows.extend(history("mailer"));
    rows.extend(history("shaky"));
    rows.extend(history("explorer"));
    // A volume spike: 60 actions against ten a day.
    rows.extend(office_day("spiky", 60));
    // Night work: the usual ten, three of them at 03:00.
    rows.extend(office_day("night", 7));
    for i in 0..3 {
        rows.push((DAY - 3 * HOUR - i * 60, Act::normal("night")));
    }
    // An external burst: eight external sends among the usual ten.
    for (i, mut act) in office_day("mailer", 10).into_iter().enumerate() {
        if i < 8 {
            act.1.target_class = "external";
        }
        rows.push(act);
    }
    // Failures: four unverified and two failed among ten.
    for (i, mut act) in office_day("shaky", 10).into_iter().enumerate() {
        if i < 4 {
            act.1.level = "unverified";
        } else if i < 6 {
            act.1.status = "failed";
        }
        rows.push(act);
    }
    // A system never used before, and a verb never used on a known one.
    rows.extend(office_day("explorer", 8));
    rows.push((
        DAY - 10 * HOUR,
        Act {
            system: "stripe",
            verb: "pay",
            ..Act::normal("explorer")
        },
    ));
    rows.push((
        DAY - 11 * HOUR,
        Act {
            verb: "delete",
            ..Act::normal("explorer")
        },
    ));
    write_ledger(Path::new(&crate::test_ledger_at(dir.path())), rows);
    let digest = digest(dir.path());
    let found = flags(&digest);
    let by_agent = |agent: &str| -> Vec<Value> {
        digest["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["agent"] == agent)
            .unwrap()["flags"]
            .as_array()
            .unwrap()
            .clone()
    };
    let kinds = |agent: &str| -> Vec<String> {
        by_agent(agent)
            .iter()
            .map(|f| f["kind"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(kinds("spiky"), ["volume_spike"], "{found:#?}");
    assert_eq!(kinds("night"), ["off_hours"], "{found:#?}");
    assert_eq!(kinds("mailer"), ["external_burst"], "{found:#?}");
    assert_eq!(kinds("shaky"), ["failure_spike"], "{found:#?}");
    // Systems in name order: gmail's new verb, then stripe.
    assert_eq!(kinds("explorer"), ["new_verb", "new_system"], "{found:#?}");
    // Each flag says why, with the window's number and the baseline's.
    let spike = &by_agent("spiky")[0];
    assert_eq!(spike["value"], 60.0);
    assert_eq!(spike["baseline"], 10.0);
    assert!(
        spike["why"].as_str().unwrap().contains("60 actions"),
        "{spike}"
    );
    assert!(
        spike["why"].as_str().unwrap().contains("mean of 10.0"),
        "{spike}"
    );
    let night = &by_agent("night")[0];
    assert!(
        night["why"]
            .as_str()
            .unwrap()
            .contains("3 actions at 03:00 UTC"),
        "{night}"
    );
    let burst = &by_agent("mailer")[0];
    assert_eq!(burst["value"], 8.0);
    assert_eq!(burst["baseline"], 1.0);
    let shaky = &by_agent("shaky")[0];
    assert!(
        shaky["why"]
            .as_str()
            .unwrap()
            .contains("4 unverified, 2 failed"),
        "{shaky}"
    );
    let new = &by_agent("explorer");
    assert_eq!(new[0]["verb"], "delete");
    assert_eq!(new[1]["system"], "stripe");
    assert!(
        new[1]["why"]
            .as_str()
            .unwrap()
            .contains("280 earlier actions on gmail"),
        "{}",
        new[1]
    );
    assert_eq!(digest["flag_count"], 6);
}

#[test]
fn imported_rows_count_at_the_time_their_source_gives() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows = history("bot");
    rows.extend(office_day("bot", 10));
    write_ledger(Path::new(&crate::test_ledger_at(dir.path())), rows);
    // Appended now, but they happened in the window (two) and long before it (one).
    let lines = [
        r#"{"system":"gmail","verb":"send","agent":"bot","ts":"2026-11-29T10:00:00Z"}"#,
        r#"{"system":"gmail","verb":"send","agent":"bot","ts":"2026-11-29T11:00:00Z"}"#,
        r#"{"system":"gmail","verb":"send","agent":"bot","ts":"2025-01-01T10:00:00Z"}"#,
    ];
    std::fs::write(dir.path().join("old.jsonl"), lines.join("\n")).unwrap();
    expect_ok(&attest(
        dir.path(),
        &["--ledger", "ledger.sqlite", "import", "old.jsonl"],
    ));
    let digest = digest(dir.path());
    assert_eq!(digest["actions"], 12, "{digest:#}");
    assert_eq!(flags(&digest), Vec::new(), "{digest:#}");
}

#[test]
fn a_ledger_with_no_baseline_raises_no_flag_and_says_why() {
    let dir = crate::demo_ledger();
    for _ in 0..3 {
        expect_ok(&attest(dir.path(), &["demo"]));
    }
    let text = expect_ok(&attest(dir.path(), &["digest"]));
    assert!(text.contains("0 flags"), "{text}");
    assert!(text.contains("no baseline"), "{text}");
    for nonsense in ["-0.0", "1day", "! "] {
        assert!(!text.contains(nonsense), "{nonsense:?} in {text}");
    }
    let json: Value =
        serde_json::from_str(&expect_ok(&attest(dir.path(), &["digest", "--json"]))).unwrap();
    assert_eq!(json["flag_count"], 0, "{json:#}");
    assert_eq!(json["baseline"]["actions"], 0, "{json:#}");
}

#[test]
fn one_action_is_counted_in_the_singular() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows = history("bot");
    rows.extend(office_day("bot", 1));
    write_ledger(Path::new(&crate::test_ledger_at(dir.path())), rows);
    let text = expect_ok(&attest(
        dir.path(),
        &[
            "--ledger",
            "ledger.sqlite",
            "digest",
            "--since",
            "24h",
            "--until",
            UNTIL,
        ],
    ));
    assert!(text.contains("): 1 action, 0 flags"), "{text}");
    assert!(
        text.contains("agent bot: 1 action (baseline 280)"),
        "{text}"
    );
    assert!(!text.contains("1 actions"), "{text}");
}
