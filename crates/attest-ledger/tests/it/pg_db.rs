//! A PostgreSQL database of its own for one test, on the test server. One file for the
//! three crates' integration tests (attest-core's and attest-cli's include it with
//! `#[path]`).

// Not every crate's tests use every helper.
#![allow(dead_code)]

/// The server tests run against: `ATTEST_TEST_PG`, else 127.0.0.1:5432 with trust auth.
pub(crate) fn pg_server() -> String {
    std::env::var("ATTEST_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned())
}

/// A database of its own for one test, dropped at the end.
pub(crate) struct PgDb {
    /// `postgres://…/NAME`.
    pub(crate) url: String,
    admin: String,
    name: String,
}

impl PgDb {
    /// The same database through another connection string (a second "host").
    pub(crate) fn other_url(&self) -> String {
        self.url.replacen("127.0.0.1", "localhost", 1)
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        let (admin, name) = (&self.admin, &self.name);
        off_runtime(|| {
            if let Ok(mut admin) = ::postgres::Client::connect(admin, ::postgres::NoTls) {
                let _ =
                    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
            }
        });
    }
}

/// A fresh database, or `None` (with a note) when no server answers and
/// `ATTEST_REQUIRE_PEERS` is unset; with it set, a missing server fails the test.
pub(crate) fn pg_db(test: &str) -> Option<PgDb> {
    pg_db_named(test, "attest_t")
}

/// [`pg_db`] with the database's name starting `prefix`.
pub(crate) fn pg_db_named(test: &str, prefix: &str) -> Option<PgDb> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let server = pg_server();
    let admin = format!("{server}/test");
    let connected = off_runtime(|| ::postgres::Client::connect(&admin, ::postgres::NoTls));
    let mut client = match connected {
        Ok(client) => client,
        Err(err) => {
            crate::peers::peer_missing_because(
                &format!("no PostgreSQL at {server}"),
                &format!("{test}: {err}"),
            );
            return None;
        }
    };
    let name = format!(
        "{prefix}_{}_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    off_runtime(move || {
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        Some(PgDb {
            url: format!("{server}/{name}"),
            admin,
            name,
        })
    })
}

/// Runs `work` on a thread of its own: the synchronous client may not block (or close a
/// connection on) an async test's runtime thread.
pub(crate) fn off_runtime<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| scope.spawn(work).join().unwrap())
}
