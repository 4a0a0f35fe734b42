//! Each way of editing a store directly, and the finding verify must report: every
//! case on a SQLite file and on a PostgreSQL database ([`crate::both`]).

use attest_ledger::{ProblemKind, VerifyReport};

use crate::both::{Case, Kind, StoreTester};

/// Runs `edit` (SQLite's SQL, PostgreSQL's SQL) on a ledger of `rows` rows on each
/// store, and `check` on what verify reports.
fn tampered(
    test: &'static str,
    rows: u64,
    sqlite: &str,
    postgres: &str,
    check: impl Fn(&VerifyReport, &Case),
) {
    StoreTester::new(test, rows).run(|case| {
        case.edit(sqlite, postgres);
        let report = case.ledger.verify().unwrap();
        check(&report, case);
    });
}

/// The common case: one edit in SQL both stores take, caught first at `at`, with
/// `detail` in the finding's message.
fn caught_first(test: &'static str, rows: u64, edit: &str, at: (u64, ProblemKind), detail: &str) {
    tampered(test, rows, edit, edit, |report, case| {
        assert_eq!(first(report, case), at, "{}", case.name());
        assert!(
            report.problems[0].detail.contains(detail),
            "{}: {:?}",
            case.name(),
            report.problems[0]
        );
    });
}

fn first(report: &VerifyReport, case: &Case) -> (u64, ProblemKind) {
    let problem = report
        .problems
        .first()
        .unwrap_or_else(|| panic!("{}: verify found nothing", case.name()));
    (problem.seq, problem.kind)
}

#[test]
fn an_edited_body_is_a_hash_mismatch_at_its_seq() {
    tampered(
        "an_edited_body_is_a_hash_mismatch_at_its_seq",
        10,
        "UPDATE entries SET body = replace(body, 'target-4', 'target-X') WHERE seq = 4",
        "UPDATE entries SET body = convert_to(replace(convert_from(body, 'UTF8'), 'target-4', 'target-X'), 'UTF8') WHERE seq = 4",
        |report, case| {
            assert_eq!(first(report, case), (4, ProblemKind::HashMismatch), "{}", case.name());
            assert_eq!(report.broken_at(), Some(4), "{}", case.name());
        },
    );
}

#[test]
fn an_edited_body_with_a_recomputed_hash_breaks_the_tree_and_the_next_prev() {
    // 64 rows: SQLite writes tree hashes 64 leaves at a time (until then they are
    // computed from the entries, and only a checkpoint pins them).
    StoreTester::new(
        "an_edited_body_with_a_recomputed_hash_breaks_the_tree_and_the_next_prev",
        64,
    )
    .run(|case| {
        let mut body = Vec::new();
        case.ledger
            .for_each_row(4, |row| {
                body = row.body.to_vec();
                Ok(false)
            })
            .unwrap();
        let forged = String::from_utf8(body).unwrap().replace("target-4", "target-X");
        let hash = attest_ledger::to_hex(&attest_ledger::entry_hash(forged.as_bytes()));
        let quoted = forged.replace('\'', "''");
        case.edit(
            &format!("UPDATE entries SET body = '{quoted}', hash = x'{hash}' WHERE seq = 4"),
            &format!(
                "UPDATE entries SET body = convert_to('{quoted}', 'UTF8'), hash = '\\x{hash}'::bytea WHERE seq = 4"
            ),
        );
        let report = case.ledger.verify().unwrap();
        // The stored tree still holds the old leaf, and the next row links to the old hash.
        assert_eq!(first(&report, case), (4, ProblemKind::TreeMismatch), "{}", case.name());
        assert!(
            report
                .problems
                .iter()
                .any(|p| (p.seq, p.kind) == (5, ProblemKind::PrevMismatch)),
            "{}",
            case.name()
        );
    });
}

#[test]
fn an_edited_column_disagrees_with_the_body() {
    caught_first(
        "an_edited_column_disagrees_with_the_body",
        10,
        "UPDATE entries SET decision = 'refuse' WHERE seq = 6",
        (6, ProblemKind::ColumnMismatch),
        "decision",
    );
}

#[test]
fn an_edited_level_column_disagrees_with_the_body() {
    caught_first(
        "an_edited_level_column_disagrees_with_the_body",
        10,
        "UPDATE entries SET level = 'verified' WHERE seq = 2",
        (2, ProblemKind::ColumnMismatch),
        "level",
    );
}

#[test]
fn a_deleted_middle_row_is_a_gap_at_the_missing_seq() {
    let edit = "DELETE FROM entries WHERE seq = 5";
    tampered(
        "a_deleted_middle_row_is_a_gap_at_the_missing_seq",
        10,
        edit,
        edit,
        |report, case| {
            assert_eq!(
                first(report, case),
                (5, ProblemKind::SeqGap),
                "{}",
                case.name()
            );
            // The row after the gap no longer links to its predecessor either.
            assert!(report
                .problems
                .iter()
                .any(|p| p.seq == 6 && p.kind == ProblemKind::PrevMismatch));
        },
    );
}

#[test]
fn swapped_bodies_are_caught_at_the_first_swapped_seq() {
    caught_first(
        "swapped_bodies_are_caught_at_the_first_swapped_seq",
        10,
        "UPDATE entries SET body = (SELECT body FROM entries WHERE seq = 7), \
         hash = (SELECT hash FROM entries WHERE seq = 7) WHERE seq = 3;",
        (3, ProblemKind::BodyAltered),
        "",
    );
}

#[test]
fn a_changed_hash_is_caught() {
    tampered(
        "a_changed_hash_is_caught",
        10,
        "UPDATE entries SET hash = zeroblob(32) WHERE seq = 8",
        "UPDATE entries SET hash = decode(repeat('00', 32), 'hex') WHERE seq = 8",
        |report, case| {
            assert_eq!(
                first(report, case),
                (8, ProblemKind::HashMismatch),
                "{}",
                case.name()
            );
        },
    );
}

#[test]
fn a_short_hash_is_caught() {
    tampered(
        "a_short_hash_is_caught",
        10,
        "UPDATE entries SET hash = x'00' WHERE seq = 1",
        "UPDATE entries SET hash = '\\x00'::bytea WHERE seq = 1",
        |report, case| {
            assert_eq!(
                first(report, case),
                (1, ProblemKind::HashMismatch),
                "{}",
                case.name()
            );
        },
    );
}

#[test]
fn a_body_that_is_not_json_is_caught() {
    tampered(
        "a_body_that_is_not_json_is_caught",
        3,
        "UPDATE entries SET body = 'garbage' WHERE seq = 2",
        "UPDATE entries SET body = convert_to('garbage', 'UTF8') WHERE seq = 2",
        |report, case| {
            assert!(
                report
                    .problems
                    .iter()
                    .any(|p| p.seq == 2 && p.kind == ProblemKind::BodyAltered),
                "{}",
                case.name()
            );
        },
    );
}

#[test]
fn an_inserted_row_is_caught() {
    // Make room at seq 3, then insert a copy of seq 2 there.
    tampered(
        "an_inserted_row_is_caught",
        5,
        "UPDATE entries SET seq = seq + 100 WHERE seq >= 3;
         UPDATE entries SET seq = seq - 99 WHERE seq >= 103;
         INSERT INTO entries (seq, hash, ts, system, verb, agent, decision, level, body)
             SELECT 3, hash, ts, system, verb, agent, decision, level, body FROM entries WHERE seq = 2;",
        "UPDATE entries SET seq = seq + 100 WHERE seq >= 3;
         UPDATE entries SET seq = seq - 99 WHERE seq >= 103;
         INSERT INTO entries (tenant, seq, hash, ts, system, verb, agent, decision, level, run, action_id, body)
             SELECT tenant, 3, hash, ts, system, verb, agent, decision, level, run, action_id, body
             FROM entries WHERE seq = 2;",
        |report, case| {
            assert_eq!(first(report, case), (3, ProblemKind::BodyAltered), "{}", case.name());
            // The real seq 3, now at 4, still names its own seq and its link is broken.
            assert!(report.problems.iter().any(|p| p.seq == 4), "{}", case.name());
        },
    );
}

#[test]
fn an_edited_run_column_disagrees_with_the_body() {
    caught_first(
        "an_edited_run_column_disagrees_with_the_body",
        10,
        "UPDATE entries SET run = 'run-2' WHERE seq = 5",
        (5, ProblemKind::ColumnMismatch),
        "column run",
    );
}

#[test]
fn a_cleared_run_column_disagrees_with_the_body() {
    caught_first(
        "a_cleared_run_column_disagrees_with_the_body",
        10,
        "UPDATE entries SET run = NULL WHERE seq = 7",
        (7, ProblemKind::ColumnMismatch),
        "column run",
    );
}

#[test]
fn an_edited_action_id_column_disagrees_with_the_body() {
    caught_first(
        "an_edited_action_id_column_disagrees_with_the_body",
        10,
        "UPDATE entries SET action_id = 'action-9' WHERE seq = 3",
        (3, ProblemKind::ColumnMismatch),
        "column action_id",
    );
}

#[test]
fn an_edited_action_id_column_deep_in_a_long_ledger_is_reported_at_its_seq() {
    // Long enough for the two-thread walk, whose batches are reused.
    let edit = "UPDATE entries SET action_id = 'action-1' WHERE seq = 2500";
    tampered(
        "an_edited_action_id_column_deep_in_a_long_ledger_is_reported_at_its_seq",
        3000,
        edit,
        edit,
        |report, case| {
            assert_eq!(report.checked, 3000, "{}", case.name());
            assert_eq!(
                first(report, case),
                (2500, ProblemKind::ColumnMismatch),
                "{}",
                case.name()
            );
            assert_eq!(
                report.problems.len(),
                1,
                "{}: {:?}",
                case.name(),
                report.problems
            );
        },
    );
}

/// Both stores are exercised: the harness's PostgreSQL half is not silently empty.
#[test]
fn the_harness_runs_each_store_it_can_reach() {
    let kinds = std::cell::RefCell::new(Vec::new());
    StoreTester::new("the_harness_runs_each_store_it_can_reach", 2)
        .run(|case| kinds.borrow_mut().push(case.kind));
    let kinds = kinds.into_inner();
    assert_eq!(kinds.first(), Some(&Kind::Sqlite));
    if std::env::var_os("ATTEST_REQUIRE_PEERS").is_some() {
        assert_eq!(kinds, [Kind::Sqlite, Kind::Postgres]);
    }
}

#[test]
fn a_verified_checkpoint_is_signed_on_an_intact_ledger_and_refused_on_an_edited_one() {
    use attest_ledger::{SigningKey, VerifiedCheckpoint};
    let (key, _) = SigningKey::generate("attest.test/verified").unwrap();
    StoreTester::new("a_verified_checkpoint_is_signed_on_an_intact_ledger", 6).run(
        |case| match case.ledger.checkpoint_verified(&key, &[]).unwrap() {
            VerifiedCheckpoint::Signed { checkpoint, new } => {
                assert!(new, "{}", case.name());
                assert_eq!(checkpoint.size, 6, "{}", case.name());
            }
            VerifiedCheckpoint::Refused(report) => {
                panic!("{}: an intact ledger was refused: {report:?}", case.name())
            }
        },
    );
    StoreTester::new("a_verified_checkpoint_is_refused_on_an_edited_ledger", 6).run(|case| {
        case.edit(
            "UPDATE entries SET body = replace(body, 'target-4', 'target-X') WHERE seq = 4",
            "UPDATE entries SET body = convert_to(replace(convert_from(body, 'UTF8'), 'target-4', 'target-X'), 'UTF8') WHERE seq = 4",
        );
        match case.ledger.checkpoint_verified(&key, &[]).unwrap() {
            VerifiedCheckpoint::Refused(report) => {
                assert_eq!(first(&report, case), (4, ProblemKind::HashMismatch), "{}", case.name());
            }
            VerifiedCheckpoint::Signed { .. } => {
                panic!("{}: an edited ledger was signed", case.name())
            }
        }
        assert!(case.ledger.latest_checkpoint().unwrap().is_none(), "{}", case.name());
    });
}
