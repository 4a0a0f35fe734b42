//! One harness for running a ledger test on both stores (the shape of ripgrep's
//! `SearcherTester`): a test says what to build and what to check once, and
//! [`StoreTester::run`] runs it on a SQLite file and on a PostgreSQL database of its
//! own. Without a server the PostgreSQL half says `SKIPPED` (and fails with
//! `ATTEST_REQUIRE_PEERS=1`).

use attest_ledger::{Ledger, LedgerOptions, Record};

use crate::pg_db::PgDb;
use crate::sample_record;

/// Which store a case runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Sqlite,
    Postgres,
}

/// One ledger on one store, with `rows` sample records appended.
pub(crate) struct Case {
    pub(crate) kind: Kind,
    pub(crate) ledger: Ledger,
    location: String,
    _dir: Option<tempfile::TempDir>,
    _db: Option<PgDb>,
}

impl Case {
    /// Edits the store behind the ledger's back: `sqlite` on the file, `postgres` on
    /// the database (the same edit in each one's SQL).
    pub(crate) fn edit(&self, sqlite: &str, postgres: &str) {
        match self.kind {
            Kind::Sqlite => {
                let conn = rusqlite::Connection::open(&self.location).unwrap();
                conn.execute_batch(sqlite).unwrap();
            }
            Kind::Postgres => {
                let mut client =
                    ::postgres::Client::connect(&self.location, ::postgres::NoTls).unwrap();
                client.batch_execute(postgres).unwrap();
            }
        }
    }

    /// A second ledger on the same store (another process's view).
    pub(crate) fn reopen(&self) -> Ledger {
        Ledger::open(&self.location, LedgerOptions::default()).unwrap()
    }

    /// A second ledger on the same store, opened with `options`.
    pub(crate) fn reopen_with(&self, options: LedgerOptions) -> Ledger {
        Ledger::open(&self.location, options).unwrap()
    }

    /// Where the ledger lives, for messages.
    pub(crate) fn name(&self) -> String {
        format!("{:?}", self.kind)
    }
}

/// A test to run on both stores.
pub(crate) struct StoreTester {
    test: &'static str,
    records: Vec<Record>,
}

impl StoreTester {
    /// A test named `test` (for the `SKIPPED` line), on a ledger of `rows` sample rows.
    pub(crate) fn new(test: &'static str, rows: u64) -> StoreTester {
        StoreTester {
            test,
            records: (1..=rows).map(sample_record).collect(),
        }
    }

    /// Runs `check` on a SQLite ledger, then on a PostgreSQL one when a server answers.
    pub(crate) fn run(&self, check: impl Fn(&Case)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        let case = Case {
            kind: Kind::Sqlite,
            ledger: Ledger::open(&path, LedgerOptions::default()).unwrap(),
            location: path.display().to_string(),
            _dir: Some(dir),
            _db: None,
        };
        self.fill(&case);
        check(&case);
        drop(case);
        let Some(db) = crate::pg_db(self.test) else {
            return;
        };
        let case = Case {
            kind: Kind::Postgres,
            ledger: Ledger::open(&db.url, LedgerOptions::default()).unwrap(),
            location: db.url.clone(),
            _dir: None,
            _db: Some(db),
        };
        self.fill(&case);
        check(&case);
    }

    fn fill(&self, case: &Case) {
        if !self.records.is_empty() {
            case.ledger.append_batch(&self.records).unwrap();
        }
    }
}
