//! Recent calls by digest beside the chain (retries and duplicate suppression), on both
//! stores.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use attest_ledger::{CallCheck, CallClaim, HeldCall, LedgerOptions};

use crate::both::StoreTester;
use crate::ManualClock;

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
