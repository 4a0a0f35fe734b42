//! Idempotency keys beside the chain, on both stores.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use attest_ledger::{
    KeyClaim, KeyId, KeyOutcome, KeyScope, KeyState, KeysPurged, Ledger, LedgerOptions, Principal,
};

use crate::both::StoreTester;
use crate::ManualClock;

fn claim(key: &str, digest: &str, action_id: &str) -> KeyClaim {
    KeyClaim {
        key: key.to_owned(),
        scope: KeyScope::default(),
        digest: digest.to_owned(),
        action_id: action_id.to_owned(),
        lifetime: Duration::from_secs(60),
    }
}

/// The row of `key` claimed by nobody in particular.
fn id(ledger: &Ledger, key: &str) -> KeyId {
    ledger.key_id(&claim(key, "", "")).unwrap()
}

#[test]
fn a_key_is_its_principals_on_its_route() {
    StoreTester::new("a_key_is_its_principals_on_its_route", 0).run(|case| {
        let ledger = case.reopen();
        let scoped = |principal: Principal, route: &str, action: &str| KeyClaim {
            scope: KeyScope {
                principal,
                method: "POST".to_owned(),
                route: route.to_owned(),
            },
            ..claim("k", "d", action)
        };
        let alice = || Principal::Credential(b"Bearer alice".to_vec());
        let first = scoped(alice(), "/v1/refunds", "a1");
        assert_eq!(ledger.claim_key(&first).unwrap(), KeyState::Claimed);
        let first_id = ledger.key_id(&first).unwrap();
        ledger.finish_key(Some(&first_id), "a1", "{}", Some(b"A's body")).unwrap();
        // Another credential, an agent, nobody, another route: each its own key.
        for (i, other) in [
            scoped(Principal::Credential(b"Bearer bob".to_vec()), "/v1/refunds", "b1"),
            scoped(Principal::Agent("Bearer alice".to_owned()), "/v1/refunds", "b2"),
            scoped(Principal::Nobody, "/v1/refunds", "b3"),
            scoped(alice(), "/v1/charges", "b4"),
        ]
        .iter()
        .enumerate()
        {
            assert_eq!(ledger.claim_key(other).unwrap(), KeyState::Claimed, "{i}");
        }
        // The same credential on the same route, from another process: the first's.
        let again = case.reopen().claim_key(&scoped(alice(), "/v1/refunds", "a2")).unwrap();
        assert!(matches!(again, KeyState::Done(done) if done.replay.as_deref() == Some(&b"A's body"[..])));
    });
}

#[test]
fn a_key_is_claimed_once_ends_once_and_expires() {
    StoreTester::new("a_key_is_claimed_once_ends_once_and_expires", 0).run(|case| {
        let clock = Arc::new(ManualClock(AtomicU64::new(1_800_000_000)));
        let ledger = case.reopen_with(LedgerOptions {
            clock: clock.clone(),
            ..LedgerOptions::default()
        });
        let name = case.name();
        assert_eq!(
            ledger.claim_key(&claim("k1", "d1", "a1")).unwrap(),
            KeyState::Claimed
        );
        // A second claim of a running key names the first call, then its intent.
        match ledger.claim_key(&claim("k1", "d1", "a2")).unwrap() {
            KeyState::Running {
                action_id,
                intent_seq,
                ..
            } => {
                assert_eq!((action_id.as_str(), intent_seq), ("a1", None), "{name}");
            }
            other => panic!("{name}: {other:?}"),
        }
        ledger.key_intent(&id(&ledger, "k1"), "a1", 7).unwrap();
        clock.0.fetch_add(5, Ordering::SeqCst);
        match ledger.claim_key(&claim("k1", "d1", "a2")).unwrap() {
            KeyState::Running {
                intent_seq, age, ..
            } => {
                assert_eq!(
                    (intent_seq, age),
                    (Some(7), Duration::from_secs(5)),
                    "{name}"
                );
            }
            other => panic!("{name}: {other:?}"),
        }
        // Another call with the same key is refused, running or done.
        assert_eq!(
            ledger.claim_key(&claim("k1", "d2", "a3")).unwrap(),
            KeyState::Mismatch
        );
        // Only the holder ends it.
        ledger
            .finish_key(Some(&id(&ledger, "k1")), "a2", "{}", None)
            .unwrap();
        assert!(matches!(
            ledger.claim_key(&claim("k1", "d1", "a2")).unwrap(),
            KeyState::Running { .. }
        ));
        ledger
            .finish_key(
                Some(&id(&ledger, "k1")),
                "a1",
                r#"{"seq":8}"#,
                Some(b"body"),
            )
            .unwrap();
        let done = KeyState::Done(KeyOutcome {
            action_id: "a1".to_owned(),
            outcome: r#"{"seq":8}"#.to_owned(),
            replay: Some(b"body".to_vec()),
        });
        assert_eq!(
            ledger.claim_key(&claim("k1", "d1", "a4")).unwrap(),
            done,
            "{name}"
        );
        // Another process reads the same.
        assert_eq!(
            case.reopen().claim_key(&claim("k1", "d1", "a4")).unwrap(),
            done
        );
        assert_eq!(
            ledger.claim_key(&claim("k1", "d2", "a5")).unwrap(),
            KeyState::Mismatch
        );
        // A finished key is not released; a running one is.
        ledger.release_key(Some(&id(&ledger, "k1")), "a1").unwrap();
        assert_eq!(ledger.claim_key(&claim("k1", "d1", "a6")).unwrap(), done);
        assert_eq!(
            ledger.claim_key(&claim("k2", "d1", "b1")).unwrap(),
            KeyState::Claimed
        );
        ledger.release_key(Some(&id(&ledger, "k2")), "b1").unwrap();
        assert_eq!(
            ledger.claim_key(&claim("k2", "d9", "b2")).unwrap(),
            KeyState::Claimed
        );
        assert_eq!(
            ledger.purge_keys().unwrap(),
            KeysPurged {
                removed: 0,
                held: 2
            }
        );
        // After the lifetime the key is free and its row, replay included, gone.
        clock.0.fetch_add(61, Ordering::SeqCst);
        assert_eq!(
            ledger.purge_keys().unwrap(),
            KeysPurged {
                removed: 2,
                held: 0
            },
            "{name}"
        );
        assert_eq!(
            ledger.claim_key(&claim("k1", "d2", "c1")).unwrap(),
            KeyState::Claimed
        );
        clock.0.fetch_add(61, Ordering::SeqCst);
        // A claim removes what expired, of any key.
        assert_eq!(
            ledger.claim_key(&claim("k3", "d1", "c2")).unwrap(),
            KeyState::Claimed
        );
        assert_eq!(
            ledger.purge_keys().unwrap(),
            KeysPurged {
                removed: 0,
                held: 1
            }
        );
        // Nothing of it is in the chain.
        assert_eq!(ledger.counts().unwrap().total, 0, "{name}");
    });
}

#[test]
fn racers_with_one_key_claim_it_once() {
    StoreTester::new("racers_with_one_key_claim_it_once", 0).run(|case| {
        let racers = 8;
        let barrier = Barrier::new(racers);
        let claimed: Vec<bool> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..racers)
                .map(|i| {
                    let ledger = case.reopen();
                    let barrier = &barrier;
                    scope.spawn(move || {
                        barrier.wait();
                        ledger
                            .claim_key(&claim("k", "d", &format!("a{i}")))
                            .unwrap()
                            == KeyState::Claimed
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(claimed.iter().filter(|c| **c).count(), 1, "{}", case.name());
    });
}
