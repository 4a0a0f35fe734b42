//! Window counts beside the chain (policy's budgets and rates), on both stores.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use attest_ledger::{LedgerOptions, Reservation, WindowClaim};

use crate::both::StoreTester;
use crate::ManualClock;

fn budget(adds: f64) -> WindowClaim {
    WindowClaim {
        key: r#"["budget","agent","bot"]"#.to_owned(),
        per: Duration::from_secs(24 * 3600),
        max: 500.0,
        adds,
    }
}

#[test]
fn a_window_counts_up_to_its_cap_and_reports_the_crossing_figure() {
    StoreTester::new("a_window_counts_up_to_its_cap", 0).run(|case| {
        let ledger = &case.ledger;
        assert_eq!(
            ledger.reserve_windows("a1", &[budget(455.0)]).unwrap(),
            Reservation::Counted { figures: vec![0.0] }
        );
        // Reaching the cap exactly is allowed.
        assert_eq!(
            ledger.reserve_windows("a2", &[budget(45.0)]).unwrap(),
            Reservation::Counted {
                figures: vec![455.0]
            }
        );
        assert_eq!(
            ledger.reserve_windows("a3", &[budget(0.5)]).unwrap(),
            Reservation::Crossed {
                index: 0,
                figure: 500.0
            },
            "{}",
            case.name()
        );
        // A crossing counts nothing; an approved call is counted over the cap, once.
        assert_eq!(ledger.window_figures(&[budget(0.0)]).unwrap(), [500.0]);
        ledger.count_windows("a3", &[budget(0.5)]).unwrap();
        ledger.count_windows("a3", &[budget(0.5)]).unwrap();
        assert_eq!(ledger.window_figures(&[budget(0.0)]).unwrap(), [500.5]);
        // Another key is another window; a released call is taken back.
        let other = WindowClaim {
            key: r#"["budget","agent","other"]"#.to_owned(),
            ..budget(10.0)
        };
        assert_eq!(
            ledger
                .reserve_windows("a4", &[other.clone(), budget(1.0)])
                .unwrap(),
            Reservation::Crossed {
                index: 1,
                figure: 500.5
            }
        );
        assert_eq!(
            ledger.window_figures(std::slice::from_ref(&other)).unwrap(),
            [0.0]
        );
        assert!(matches!(
            ledger
                .reserve_windows("a5", std::slice::from_ref(&other))
                .unwrap(),
            Reservation::Counted { .. }
        ));
        ledger
            .release_windows("a5", std::slice::from_ref(&other))
            .unwrap();
        assert_eq!(ledger.window_figures(&[other]).unwrap(), [0.0]);
        // Another process sees the same figure.
        assert_eq!(
            case.reopen().window_figures(&[budget(0.0)]).unwrap(),
            [500.5]
        );
    });
}

#[test]
fn an_action_counted_already_is_not_checked_again_nor_counted_twice() {
    StoreTester::new("an_action_counted_already", 0).run(|case| {
        let ledger = &case.ledger;
        // A hook counts the call before the agent runs it ...
        assert!(matches!(
            ledger.reserve_windows("hooked", &[budget(450.0)]).unwrap(),
            Reservation::Counted { .. }
        ));
        // ... another call fills the window to its cap meanwhile ...
        ledger.count_windows("approved", &[budget(60.0)]).unwrap();
        // ... and the row made after the call ran reserves under the same id: it passed
        // when it was counted, so it is not checked against the window again (the figure
        // is what the others add up to), and nothing is counted twice.
        assert_eq!(
            ledger.reserve_windows("hooked", &[budget(450.0)]).unwrap(),
            Reservation::Counted {
                figures: vec![60.0]
            },
            "{}",
            case.name()
        );
        assert_eq!(ledger.window_figures(&[budget(0.0)]).unwrap(), [510.0]);
        // A new action is checked against all of it.
        assert_eq!(
            ledger.reserve_windows("fresh", &[budget(1.0)]).unwrap(),
            Reservation::Crossed {
                index: 0,
                figure: 510.0
            }
        );
    });
}

#[test]
fn what_ran_before_the_window_no_longer_counts() {
    StoreTester::new("what_ran_before_the_window", 0).run(|case| {
        let clock = Arc::new(ManualClock(AtomicU64::new(1_800_000_000)));
        let ledger = case.reopen_with(LedgerOptions {
            clock: clock.clone(),
            ..LedgerOptions::default()
        });
        let hourly = |adds| WindowClaim {
            per: Duration::from_secs(3600),
            ..budget(adds)
        };
        ledger.reserve_windows("early", &[hourly(400.0)]).unwrap();
        clock.0.fetch_add(1800, Ordering::SeqCst);
        ledger.reserve_windows("later", &[hourly(100.0)]).unwrap();
        assert!(matches!(
            ledger.reserve_windows("x", &[hourly(1.0)]).unwrap(),
            Reservation::Crossed { figure, .. } if figure == 500.0
        ));
        clock.0.fetch_add(1800, Ordering::SeqCst);
        assert_eq!(ledger.window_figures(&[hourly(0.0)]).unwrap(), [100.0]);
    });
}

#[test]
fn writers_racing_at_the_cap_never_pass_it_together() {
    StoreTester::new("writers_racing_at_the_cap", 0).run(|case| {
        let writers = 8;
        let barrier = Arc::new(Barrier::new(writers));
        let passed: u64 = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..writers)
                .map(|w| {
                    let ledger = case.reopen();
                    let barrier = Arc::clone(&barrier);
                    scope.spawn(move || {
                        barrier.wait();
                        let mut passed = 0;
                        for n in 0..10 {
                            let id = format!("w{w}-{n}");
                            if let Reservation::Counted { .. } =
                                ledger.reserve_windows(&id, &[budget(45.0)]).unwrap()
                            {
                                passed += 1;
                            }
                        }
                        passed
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        // 11 × 45 = 495 fits under 500; a 12th would be 540.
        assert_eq!(passed, 11, "{}", case.name());
        assert_eq!(case.ledger.window_figures(&[budget(0.0)]).unwrap(), [495.0]);
    });
}
