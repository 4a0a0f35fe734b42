//! The PostgreSQL schema: its versions and the migrations between them, applied on
//! open by any number of writers at once.

use std::time::{Duration, SystemTime};

use postgres::Client;

use super::PgStore;
use crate::clock::format_ts;
use crate::LedgerError;

/// The newest schema version this build writes and reads.
pub(crate) const PG_SCHEMA_VERSION: i32 = 6;

/// Migrations, in order: version `n` brings a database from `n - 1` to `n`.
const MIGRATIONS: &[(i32, &str)] = &[
    (
        1,
        "CREATE TABLE IF NOT EXISTS attest_meta (
        tenant TEXT NOT NULL,
        key    TEXT NOT NULL,
        value  TEXT NOT NULL,
        PRIMARY KEY (tenant, key)
    );
    CREATE TABLE IF NOT EXISTS entries (
        tenant    TEXT NOT NULL,
        seq       BIGINT NOT NULL,
        hash      BYTEA NOT NULL,
        ts        TEXT NOT NULL,
        system    TEXT NOT NULL,
        verb      TEXT NOT NULL,
        agent     TEXT,
        decision  TEXT NOT NULL,
        level     TEXT,
        run       TEXT,
        action_id TEXT,
        body      BYTEA NOT NULL,
        PRIMARY KEY (tenant, seq)
    );
    CREATE INDEX IF NOT EXISTS entries_action ON entries (tenant, action_id);
    CREATE INDEX IF NOT EXISTS entries_run ON entries (tenant, run, seq) WHERE run IS NOT NULL;
    CREATE TABLE IF NOT EXISTS tree_hashes (
        tenant TEXT NOT NULL,
        idx    BIGINT NOT NULL,
        hash   BYTEA NOT NULL,
        PRIMARY KEY (tenant, idx)
    );
    CREATE TABLE IF NOT EXISTS checkpoints (
        tenant TEXT NOT NULL,
        size   BIGINT NOT NULL,
        root   BYTEA NOT NULL,
        note   TEXT NOT NULL,
        ts     TEXT NOT NULL,
        PRIMARY KEY (tenant, size)
    );
    CREATE TABLE IF NOT EXISTS counters (
        tenant TEXT NOT NULL,
        dim    TEXT NOT NULL,
        key    TEXT NOT NULL,
        hour   TEXT NOT NULL,
        n      BIGINT NOT NULL,
        PRIMARY KEY (tenant, dim, key, hour)
    );",
    ),
    // 2: counters and run / action id lookups filed in bulk (see `append::FILING_ROWS`)
    // instead of five counter upserts and two index entries per append; every entry so
    // far was counted as it was appended, and is filed in `lookups` here.
    (
        2,
        "CREATE TABLE IF NOT EXISTS lookups (
            tenant TEXT NOT NULL,
            key    TEXT NOT NULL,
            seq    BIGINT NOT NULL,
            PRIMARY KEY (tenant, key, seq)
        );
        INSERT INTO lookups (tenant, key, seq)
            SELECT tenant, 'run:' || run, seq FROM entries WHERE run IS NOT NULL
            UNION ALL
            SELECT tenant, 'action_id:' || action_id, seq FROM entries WHERE action_id IS NOT NULL
            ON CONFLICT DO NOTHING;
        INSERT INTO attest_meta (tenant, key, value)
            SELECT tenant, 'filed_through', max(seq)::text FROM entries GROUP BY tenant
            ON CONFLICT (tenant, key) DO UPDATE SET value = EXCLUDED.value;
        DROP INDEX IF EXISTS entries_action;
        DROP INDEX IF EXISTS entries_run;",
    ),
    // 3: window counts for policy's budgets and rates, beside the chain (see
    // `crate::windows`): a row per key to lock, and the entries.
    (
        3,
        "CREATE TABLE IF NOT EXISTS window_keys (
            tenant TEXT NOT NULL,
            key    BYTEA NOT NULL,
            PRIMARY KEY (tenant, key)
        );
        CREATE TABLE IF NOT EXISTS window_entries (
            tenant    TEXT NOT NULL,
            key       BYTEA NOT NULL,
            action_id TEXT NOT NULL,
            at_ms     BIGINT NOT NULL,
            amount    DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (tenant, key, action_id)
        );",
    ),
    // 4: idempotency keys and the responses they replay, beside the chain (see
    // `crate::idempotency`).
    (
        4,
        "CREATE TABLE IF NOT EXISTS idempotency_keys (
            tenant     TEXT NOT NULL,
            key        BYTEA NOT NULL,
            digest     TEXT NOT NULL,
            action_id  TEXT NOT NULL,
            claimed_ms BIGINT NOT NULL,
            expires_ms BIGINT NOT NULL,
            intent_seq BIGINT,
            outcome    TEXT,
            replay     BYTEA,
            PRIMARY KEY (tenant, key)
        );",
    ),
    // 5: recent calls by digest, beside the chain (see `crate::calls`); nothing to
    // fill: an older release stored no digest.
    (
        5,
        "CREATE TABLE IF NOT EXISTS call_digests (
            tenant    TEXT NOT NULL,
            digest    BYTEA NOT NULL,
            action_id TEXT NOT NULL,
            owner     TEXT NOT NULL,
            seq       BIGINT,
            at_ms     BIGINT NOT NULL,
            until_ms  BIGINT NOT NULL,
            PRIMARY KEY (tenant, digest)
        );",
    ),
    // 6: subject keys for sealed personal fields, beside the chain (see
    // `crate::erasure`); nothing to fill: an older release sealed nothing.
    (
        6,
        "CREATE TABLE IF NOT EXISTS subject_keys (
            tenant  TEXT NOT NULL,
            subject BYTEA NOT NULL,
            key     BYTEA NOT NULL,
            PRIMARY KEY (tenant, subject)
        );",
    ),
];

impl PgStore {
    /// The schema version the database holds (0: none).
    fn version(&self, client: &mut Client) -> Result<i32, LedgerError> {
        let exists: bool = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM information_schema.tables
                 WHERE table_schema = current_schema() AND table_name = 'attest_schema')",
                &[],
            )
            .map_err(self.err("reading the schema version"))?
            .get(0);
        if !exists {
            return Ok(0);
        }
        let version: Option<i32> = client
            .query_one("SELECT max(version) FROM attest_schema", &[])
            .map_err(self.err("reading the schema version"))?
            .get(0);
        Ok(version.unwrap_or(0))
    }

    pub(crate) fn check_schema(&self) -> Result<(), LedgerError> {
        let mut client = self.client()?;
        match self.version(&mut client)? {
            PG_SCHEMA_VERSION => Ok(()),
            0 => Err(LedgerError::NotALedger {
                path: self.name.clone(),
                detail: "the database holds no attest schema".to_owned(),
            }),
            found => Err(LedgerError::SchemaVersion {
                path: self.name.clone(),
                found: found.to_string(),
                expected: crate::SCHEMA_VERSION,
            }),
        }
    }

    /// Brings the schema to [`PG_SCHEMA_VERSION`], each migration in a transaction that
    /// also records it. Writers opening a new database at once race on the version
    /// table's key: the loser's transaction fails, and it reads the version again.
    pub(crate) fn migrate(&self) -> Result<(), LedgerError> {
        let mut client = self.client()?;
        let mut last_error = None;
        for _ in 0..8 {
            if let Err(err) = client.batch_execute(
                "CREATE TABLE IF NOT EXISTS attest_schema (
                    version INTEGER PRIMARY KEY,
                    applied TEXT NOT NULL
                )",
            ) {
                last_error = Some(err);
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            let current = self.version(&mut client)?;
            if current > PG_SCHEMA_VERSION {
                return Err(LedgerError::SchemaVersion {
                    path: self.name.clone(),
                    found: current.to_string(),
                    expected: crate::SCHEMA_VERSION,
                });
            }
            if current == PG_SCHEMA_VERSION {
                return Ok(());
            }
            let result = (|| -> Result<(), postgres::Error> {
                let mut tx = client.transaction()?;
                for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
                    tx.batch_execute(sql)?;
                    tx.execute(
                        "INSERT INTO attest_schema (version, applied) VALUES ($1, $2)",
                        &[version, &format_ts(SystemTime::now())],
                    )?;
                }
                tx.commit()
            })();
            match result {
                Ok(()) => return Ok(()),
                Err(err) => {
                    last_error = Some(err);
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        match last_error {
            Some(source) => Err(LedgerError::Postgres {
                path: self.name.clone(),
                during: "upgrading the schema",
                source,
            }),
            None => Err(LedgerError::Internal("the schema upgrade did not finish")),
        }
    }
}
