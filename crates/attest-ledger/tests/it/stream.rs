//! Stream cursors beside the chain, on both stores: one lease holder per sink, a cursor
//! that moves only from where its holder read it, and a lease that ends.

use std::time::Duration;

use crate::both::StoreTester;

const LEASE: Duration = Duration::from_secs(60);

#[test]
fn one_streamer_holds_a_sinks_lease_and_moves_its_cursor_only_from_where_it_stood() {
    StoreTester::new(
        "one_streamer_holds_a_sinks_lease_and_moves_its_cursor_only_from_where_it_stood",
        3,
    )
    .run(|case| {
        let a = &case.ledger;
        let b = case.reopen();
        let fresh = a.stream_cursor("otlp").unwrap();
        assert_eq!((fresh.seq, fresh.holder), (0, None), "{}", case.name());
        let leased = a.stream_lease("otlp", "a", LEASE).unwrap().unwrap();
        assert_eq!(leased.holder.as_deref(), Some("a"));
        // The other process finds a live lease: it may not send.
        assert_eq!(b.stream_lease("otlp", "b", LEASE).unwrap(), None);
        assert!(!b.stream_advance("otlp", "b", 0, 3, LEASE).unwrap());
        // The holder moves it only from where it stands.
        assert!(!a.stream_advance("otlp", "a", 1, 3, LEASE).unwrap());
        assert!(a.stream_advance("otlp", "a", 0, 2, LEASE).unwrap());
        assert!(!a.stream_advance("otlp", "a", 0, 3, LEASE).unwrap());
        assert_eq!(b.stream_cursor("otlp").unwrap().seq, 2);
        // Another sink has a cursor of its own.
        assert_eq!(b.stream_cursor("ocsf").unwrap().seq, 0);
        assert!(b.stream_lease("ocsf", "b", LEASE).unwrap().is_some());
        // Released, the lease is the next streamer's at once, at the cursor.
        a.stream_release("otlp", "a").unwrap();
        let taken = b.stream_lease("otlp", "b", LEASE).unwrap().unwrap();
        assert_eq!(taken.seq, 2);
        assert!(!a.stream_advance("otlp", "a", 2, 3, LEASE).unwrap());
        assert!(b.stream_advance("otlp", "b", 2, 3, LEASE).unwrap());
        // Releasing a lease one does not hold changes nothing.
        a.stream_release("otlp", "a").unwrap();
        assert_eq!(
            b.stream_cursor("otlp").unwrap().holder.as_deref(),
            Some("b")
        );
    });
}

#[test]
fn an_expired_lease_passes_to_the_next_streamer_and_the_stalled_one_cannot_move_the_cursor() {
    StoreTester::new(
        "an_expired_lease_passes_to_the_next_streamer_and_the_stalled_one_cannot_move_the_cursor",
        2,
    )
    .run(|case| {
        let a = &case.ledger;
        let b = case.reopen();
        a.stream_lease("otlp", "a", Duration::from_millis(1))
            .unwrap()
            .unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let taken = b.stream_lease("otlp", "b", LEASE).unwrap();
        assert!(taken.is_some(), "{}", case.name());
        // The stalled holder's acknowledgement no longer moves the cursor.
        assert!(!a.stream_advance("otlp", "a", 0, 2, LEASE).unwrap());
        assert_eq!(a.stream_cursor("otlp").unwrap().seq, 0);
    });
}

#[test]
fn many_streamers_racing_for_a_lease_get_exactly_one() {
    StoreTester::new("many_streamers_racing_for_a_lease_get_exactly_one", 1).run(|case| {
        let ledgers: Vec<_> = (0..6).map(|_| case.reopen()).collect();
        let won = std::thread::scope(|scope| {
            let handles: Vec<_> = ledgers
                .iter()
                .enumerate()
                .map(|(i, ledger)| {
                    scope.spawn(move || {
                        ledger
                            .stream_lease("otlp", &format!("s{i}"), LEASE)
                            .unwrap()
                            .is_some()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap())
                .filter(|&won| won)
                .count()
        });
        assert_eq!(won, 1, "{}", case.name());
    });
}

#[test]
fn a_sink_name_that_is_not_one_is_refused() {
    let (_dir, ledger) = crate::ledger_with(0);
    for bad in ["", "a b", "x:y", &"s".repeat(65)] {
        let err = ledger.stream_cursor(bad).unwrap_err();
        assert!(err.to_string().contains("stream sink"), "{bad:?}: {err}");
    }
}
