//! Recent calls by digest beside the chain (retries and duplicate suppression), on both
//! stores.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use attest_ledger::{CallCheck, CallClaim, CallStep, HeldCall, LedgerError, LedgerOptions};

use crate::both::StoreTester;
use crate::{sample_record, ManualClock};

fn claim(action_id: &str, dedupe: Option<Duration>) -> CallClaim {
    CallClaim {
        digest: "digest-of-one-call".to_owned(),
        action_id: action_id.to_owned(),
        owner: format!("owner-of-{action_id}"),
        dedupe,
    }
}

#[test]
fn an_open_call_holds_its_digest_until_it_is_finished() {
    StoreTester::new("an_open_call_holds_its_digest", 0).run(|case| {
        let ledger = &case.ledger;
        assert_eq!(
            ledger.claim_call(&claim("a1", None), None).unwrap(),
            CallCheck::Claimed
        );
        // Another process's retry sees the open call, and claims nothing.
        let CallCheck::Held(HeldCall::Open {
            action_id, owner, ..
        }) = case.reopen().claim_call(&claim("a2", None), None).unwrap()
        else {
            panic!("an open call holds the digest ({})", case.name())
        };
        assert_eq!((action_id.as_str(), owner.as_str()), ("a1", "owner-of-a1"));
        // Another digest is free.
        let other = CallClaim {
            digest: "another call".to_owned(),
            ..claim("b1", None)
        };
        assert_eq!(ledger.claim_call(&other, None).unwrap(), CallCheck::Claimed);
        // A finish by an action that does not hold the digest changes nothing.
        ledger
            .finish_call("digest-of-one-call", "a2", None)
            .unwrap();
        assert!(matches!(
            ledger.held_call("digest-of-one-call", None).unwrap(),
            Some(HeldCall::Open { .. })
        ));
        // Finished without a window: the row goes, the next call is free.
        ledger
            .finish_call("digest-of-one-call", "a1", Some((7, Duration::ZERO)))
            .unwrap();
        assert_eq!(ledger.held_call("digest-of-one-call", None).unwrap(), None);
        assert_eq!(
            ledger.claim_call(&claim("a3", None), None).unwrap(),
            CallCheck::Claimed
        );
        // A resolved intent's row is forgotten by its action id.
        assert_eq!(ledger.forget_call("a3").unwrap(), 1);
        assert_eq!(ledger.forget_call("a3").unwrap(), 0);
        assert_eq!(ledger.held_call("digest-of-one-call", None).unwrap(), None);
    });
}

#[test]
fn a_call_that_ran_blocks_duplicates_for_its_window_only() {
    StoreTester::new("a_call_that_ran_blocks_duplicates", 0).run(|case| {
        let clock = Arc::new(ManualClock(AtomicU64::new(1_800_000_000)));
        let ledger = case.reopen_with(LedgerOptions {
            clock: clock.clone(),
            ..LedgerOptions::default()
        });
        let minute = Some(Duration::from_secs(60));
        assert_eq!(
            ledger.claim_call(&claim("a1", minute), None).unwrap(),
            CallCheck::Claimed
        );
        ledger
            .finish_call(
                "digest-of-one-call",
                "a1",
                Some((12, Duration::from_secs(60))),
            )
            .unwrap();
        clock.0.fetch_add(12, Ordering::SeqCst);
        let CallCheck::Held(HeldCall::Ran { action_id, seq, at }) =
            ledger.claim_call(&claim("a2", minute), None).unwrap()
        else {
            panic!("the same call ran 12 s ago ({})", case.name())
        };
        assert_eq!((action_id.as_str(), seq), ("a1", 12));
        assert_eq!(
            at,
            std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000)
        );
        // Without a dedupe window, a call that ran holds nothing.
        assert_eq!(ledger.held_call("digest-of-one-call", None).unwrap(), None);
        // A shorter window than the one it ran with: 12 s ago is outside 10 s.
        assert_eq!(
            ledger
                .held_call("digest-of-one-call", Some(Duration::from_secs(10)))
                .unwrap(),
            None
        );
        clock.0.fetch_add(60, Ordering::SeqCst);
        assert_eq!(
            ledger.claim_call(&claim("a3", minute), None).unwrap(),
            CallCheck::Claimed
        );
    });
}

#[test]
fn a_dead_calls_digest_is_taken_over_by_one_caller() {
    StoreTester::new("a_dead_calls_digest_is_taken_over", 0).run(|case| {
        let ledger = &case.ledger;
        ledger.claim_call(&claim("dead", None), None).unwrap();
        assert_eq!(
            ledger.claim_call(&claim("r1", None), Some("dead")).unwrap(),
            CallCheck::Claimed
        );
        // The second taker names the dead call too late: r1 holds it now.
        assert!(matches!(
            ledger.claim_call(&claim("r2", None), Some("dead")).unwrap(),
            CallCheck::Held(HeldCall::Open { action_id, .. }) if action_id == "r1"
        ));
        // A person's approval takes it whatever holds it.
        ledger.take_call(&claim("r3", None)).unwrap();
        assert!(matches!(
            ledger.held_call("digest-of-one-call", None).unwrap(),
            Some(HeldCall::Open { action_id, .. }) if action_id == "r3"
        ));
    });
}

#[test]
fn writers_racing_for_one_digest_claim_it_once() {
    StoreTester::new("writers_racing_for_one_digest", 0).run(|case| {
        let writers = 8;
        let barrier = Arc::new(Barrier::new(writers));
        let claimed: u64 = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..writers)
                .map(|w| {
                    let ledger = case.reopen();
                    let barrier = Arc::clone(&barrier);
                    scope.spawn(move || {
                        barrier.wait();
                        let mut claimed = 0;
                        for n in 0..5 {
                            let id = format!("w{w}-{n}");
                            if ledger.claim_call(&claim(&id, None), None).unwrap()
                                == CallCheck::Claimed
                            {
                                claimed += 1;
                            }
                        }
                        claimed
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(claimed, 1, "{}", case.name());
    });
}

#[test]
fn a_step_riding_with_a_row_commits_with_it_or_not_at_all() {
    StoreTester::new("a_step_riding_with_a_row", 0).run(|case| {
        let ledger = &case.ledger;
        let minute = Duration::from_secs(60);
        let claiming = |id: &str| {
            Some(CallStep::Claim {
                claim: claim(id, Some(minute)),
                replacing: None,
            })
        };
        // The intent's row and its claim: one commit.
        let intent = ledger.append_with(sample_record(1), claiming("a1")).unwrap();
        assert!(matches!(
            case.reopen().held_call("digest-of-one-call", None).unwrap(),
            Some(HeldCall::Open { action_id, .. }) if action_id == "a1"
        ));
        // A retry's intent finds the digest held: neither its row nor its claim is written.
        let err = ledger
            .append_with(sample_record(2), claiming("a2"))
            .unwrap_err();
        assert!(
            matches!(&err, LedgerError::CallHeld(held) if matches!(**held, HeldCall::Open { ref action_id, .. } if action_id == "a1")),
            "{err:?} ({})",
            case.name()
        );
        assert_eq!(ledger.tip().unwrap().map(|(seq, _)| seq), Some(intent.seq));
        // The outcome's row and the finish: the duplicate window names the outcome's seq.
        let finish = CallStep::Finish {
            digest: "digest-of-one-call".to_owned(),
            action_id: "a1".to_owned(),
            keep: Some(minute),
        };
        let outcome = ledger.append_with(sample_record(3), Some(finish)).unwrap();
        assert!(matches!(
            case.reopen().held_call("digest-of-one-call", Some(minute)).unwrap(),
            Some(HeldCall::Ran { seq, .. }) if seq == outcome.seq
        ));
        // Within the window a claim is held by the call that ran; a take is not.
        assert!(matches!(
            ledger.append_with(sample_record(4), claiming("a3")),
            Err(LedgerError::CallHeld(_))
        ));
        ledger
            .append_with(sample_record(4), Some(CallStep::Take(claim("a4", None))))
            .unwrap();
        // A finish of a call that did not run removes its row.
        let failed = CallStep::Finish {
            digest: "digest-of-one-call".to_owned(),
            action_id: "a4".to_owned(),
            keep: None,
        };
        ledger.append_with(sample_record(5), Some(failed)).unwrap();
        assert_eq!(ledger.held_call("digest-of-one-call", Some(minute)).unwrap(), None);
        let report = ledger.verify().unwrap();
        assert!(report.problems.is_empty(), "{:?} ({})", report.problems, case.name());
    });
}

#[test]
fn claims_riding_in_one_group_commit_each_get_their_own_answer() {
    StoreTester::new("claims_riding_in_one_group", 0).run(|case| {
        let ledger = case.reopen();
        let writers = 8;
        let barrier = Barrier::new(writers);
        // Every writer claims a digest of its own and the one digest they share, through
        // one ledger (its group commit): one shared claim holds, each own claim holds.
        let results: Vec<(bool, bool)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..writers)
                .map(|w| {
                    let (ledger, barrier) = (&ledger, &barrier);
                    scope.spawn(move || {
                        barrier.wait();
                        let own = CallClaim {
                            digest: format!("own digest {w}"),
                            ..claim(&format!("own-{w}"), None)
                        };
                        let own = ledger.append_with(
                            sample_record(w as u64),
                            Some(CallStep::Claim {
                                claim: own,
                                replacing: None,
                            }),
                        );
                        let shared = ledger.append_with(
                            sample_record(w as u64),
                            Some(CallStep::Claim {
                                claim: claim(&format!("shared-{w}"), None),
                                replacing: None,
                            }),
                        );
                        if let Err(err) = &shared {
                            assert!(matches!(err, LedgerError::CallHeld(_)), "{err:?}");
                        }
                        (own.is_ok(), shared.is_ok())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(results.iter().all(|(own, _)| *own), "{results:?}");
        let shared = results.iter().filter(|(_, shared)| *shared).count();
        assert_eq!(shared, 1, "{}", case.name());
        // Rows written: one per claim that held, nothing of the claims that did not.
        assert_eq!(
            ledger.tip().unwrap().map(|(seq, _)| seq),
            Some(writers as u64 + 1),
            "{}",
            case.name()
        );
        let report = ledger.verify().unwrap();
        assert!(
            report.problems.is_empty(),
            "{:?} ({})",
            report.problems,
            case.name()
        );
    });
}
