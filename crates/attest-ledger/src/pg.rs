//! The PostgreSQL store: one database holds any number of tenants' ledgers, each its
//! own chain from seq 1, tree and checkpoints, and any number of writers in any
//! process on any host append to them.
//!
//! The append is a compare-and-swap on the tip: the primary key on `(tenant, seq)`
//! refuses a second row at a seq, so of two writers that read the same tip, one
//! commits and the other gets a unique violation, drops its cached tip, re-reads it,
//! rebuilds and re-hashes its bodies, and tries again. No lock is taken beyond the
//! key's own, so no advisory locks, and the SQL runs on PostgreSQL-compatible
//! databases that have none.
//!
//! A group of rows is one statement: the entries, the tree hashes they complete and
//! the counters they move, in one round trip and one transaction.
//!
//! A statement whose acknowledgement was lost (the connection cut after the commit)
//! is found on retry: the row at the first seq it wrote is read back, and if its hash
//! is the hash of the body this writer built, the rows are there and are not written
//! again.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use postgres::error::SqlState;
use postgres::types::{ToSql, Type};
use postgres::{Client, IsolationLevel, Row, Transaction};
use r2d2_postgres::PostgresConnectionManager;
use tlog_tiles::stored_hash_index;
#[cfg(feature = "tls")]
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::canonical::{entry_hash, from_hex, to_hex, Hash, GENESIS};
use crate::clock::format_ts;
use crate::entry::{Entry, FORMAT_VERSION};
use crate::jcs::write_entry;
use crate::merkle::{leaf_hash, CompactRange, TreeHash};
use crate::query::{Counts, Filter};
use crate::source::{root, Hashes, Source, TreeSlot, Visit, VisitTree};
use crate::{
    sign_checkpoint, Appended, Clock, Durability, LedgerError, PruneReport, Record, RowSummary,
    SigningKey, StoredCheckpoint, StoredRow,
};

/// How a connection is made: through rustls (feature `tls`), or in the clear only.
#[cfg(feature = "tls")]
type Connector = MakeRustlsConnect;
#[cfg(not(feature = "tls"))]
type Connector = postgres::NoTls;
type Pool = r2d2::Pool<PostgresConnectionManager<Connector>>;
type Conn = r2d2::PooledConnection<PostgresConnectionManager<Connector>>;

/// The newest schema version this build writes and reads.
pub(crate) const PG_SCHEMA_VERSION: i32 = 1;

/// Migrations, in order: version `n` brings a database from `n - 1` to `n`.
const MIGRATIONS: &[(i32, &str)] = &[(
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
)];

/// One statement per group: the entries; then (each reading the entries' output, so
/// they run after every entry is in) the tree hashes and the counters. A conflict on
/// `(tenant, seq)` fails the whole statement: nothing of the group is written.
const APPEND: &str = "WITH e AS (
    INSERT INTO entries (tenant, seq, hash, ts, system, verb, agent, decision, level, run, action_id, body)
    SELECT $1, * FROM UNNEST($2::int8[], $3::bytea[], $4::text[], $5::text[], $6::text[],
                             $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::bytea[])
    RETURNING ts, system, agent, decision, level
), t AS (
    INSERT INTO tree_hashes (tenant, idx, hash)
    SELECT $1, u.idx, u.hash FROM UNNEST($13::int8[], $14::bytea[]) AS u(idx, hash)
    WHERE (SELECT count(*) FROM e) > 0
    RETURNING 1
), c AS (
    INSERT INTO counters (tenant, dim, key, hour, n)
    SELECT $1, d.dim, d.key, d.hour, count(*)
    FROM e CROSS JOIN LATERAL (VALUES
        ('decision', e.decision, ''),
        ('level', coalesce(e.level, ''), ''),
        ('system', e.system, ''),
        ('agent', coalesce(e.agent, ''), ''),
        ('decision', e.decision, left(e.ts, 13))
    ) AS d(dim, key, hour)
    GROUP BY d.dim, d.key, d.hour
    ORDER BY d.dim, d.key, d.hour
    ON CONFLICT (tenant, dim, key, hour) DO UPDATE SET n = counters.n + EXCLUDED.n
    RETURNING 1
)
SELECT (SELECT count(*) FROM e), (SELECT count(*) FROM t), (SELECT count(*) FROM c)";

const APPEND_TYPES: [Type; 14] = [
    Type::TEXT,
    Type::INT8_ARRAY,
    Type::BYTEA_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::BYTEA_ARRAY,
    Type::INT8_ARRAY,
    Type::BYTEA_ARRAY,
];

/// Rows read per page by listings, verification and copies.
const PAGE: i64 = 2048;
/// How often a group is tried before the append fails: conflicts with other writers
/// and lost connections both retry (with a randomized back-off, up to about a minute
/// under contention, as SQLite's busy timeout).
const MAX_ATTEMPTS: u32 = 4096;

/// Whether `location` names a PostgreSQL ledger rather than a file.
pub(crate) fn is_url(location: &Path) -> bool {
    location
        .to_str()
        .is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

/// A tenant name: lower-case letters, digits, `-` and `_`, 1 to 63 characters, so it
/// is also a safe file-name part (the SQLite store keeps one file per tenant).
pub fn check_tenant(name: &str) -> Result<(), LedgerError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(LedgerError::BadTenant {
            name: name.to_owned(),
        })
    }
}

/// The PostgreSQL database a ledger lives in, for tables kept beside its chain (the
/// approval store): the ledger's own connection pool, its display name and its tenant.
#[derive(Clone)]
pub struct PgDatabase {
    pool: Pool,
    name: PathBuf,
    tenant: String,
}

impl std::fmt::Debug for PgDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgDatabase")
            .field("name", &self.name)
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

impl PgDatabase {
    /// A connection from the ledger's pool (its durability settings included).
    pub fn connect(&self) -> Result<PgConnection, LedgerError> {
        self.pool
            .get()
            .map(PgConnection)
            .map_err(|source| LedgerError::Pool {
                path: self.name.clone(),
                detail: source.to_string(),
            })
    }

    /// `postgres://user@host:port/db`: no password, no query.
    pub fn name(&self) -> &Path {
        &self.name
    }

    /// The ledger's tenant (`""`: the default chain).
    pub fn tenant(&self) -> &str {
        &self.tenant
    }
}

/// A pooled connection to a ledger's PostgreSQL database; back to the pool on drop.
pub struct PgConnection(Conn);

impl std::ops::Deref for PgConnection {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.0
    }
}

impl std::ops::DerefMut for PgConnection {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.0
    }
}

/// The chain's end as this process last saw it commit.
struct PgEdge {
    seq: u64,
    hash: Hash,
    range: CompactRange,
}

/// One tenant of one PostgreSQL database.
pub(crate) struct PgStore {
    pool: Pool,
    /// `postgres://user@host:port/db`: no password, no query.
    name: PathBuf,
    tenant: String,
    edge: Mutex<Option<PgEdge>>,
    read_only: bool,
}

/// Sets durability on every new connection.
#[derive(Debug)]
struct Session {
    synchronous_commit: &'static str,
}

impl r2d2::CustomizeConnection<Client, postgres::Error> for Session {
    fn on_acquire(&self, conn: &mut Client) -> Result<(), postgres::Error> {
        conn.batch_execute(&format!(
            "SET synchronous_commit = {}",
            self.synchronous_commit
        ))
    }
}

/// The URL for messages: user, hosts, ports and database, never a password or options.
pub(crate) fn display_name(config: &postgres::Config) -> PathBuf {
    let user = config.get_user().unwrap_or("");
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
        .map(|(host, port)| match host {
            postgres::config::Host::Tcp(h) => format!("{h}:{port}"),
            postgres::config::Host::Unix(p) => format!("{}:{port}", p.display()),
        })
        .collect();
    let at = if user.is_empty() { "" } else { "@" };
    PathBuf::from(format!(
        "postgres://{user}{at}{}/{}",
        hosts.join(","),
        config.get_dbname().unwrap_or("")
    ))
}

/// Whether every host is this machine (loopback or a Unix socket).
fn is_local(config: &postgres::Config) -> bool {
    config.get_hosts().iter().all(|host| match host {
        postgres::config::Host::Tcp(name) => {
            name == "localhost"
                || name
                    .trim_matches(['[', ']'])
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        postgres::config::Host::Unix(_) => true,
    })
}

/// How long one connection attempt may take unless the URL says (`connect_timeout=`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One connection made at once, before the pool: a closed port, a database or a role
/// that does not exist fails here with the server's own words, instead of the pool
/// retrying for its 30 s and keeping only "db error" (the client's text for any
/// server error, without its cause). On a thread of its own: the synchronous client
/// cannot start inside a caller's async runtime.
fn probe(config: &postgres::Config, connector: &Connector, name: &Path) -> Result<(), LedgerError> {
    let attempt = std::thread::scope(|scope| {
        scope
            .spawn(|| config.connect(connector.clone()).map(drop))
            .join()
    });
    match attempt {
        Ok(Ok(())) => Ok(()),
        Ok(Err(err)) => Err(LedgerError::Pool {
            path: name.to_path_buf(),
            detail: connect_failure(&err),
        }),
        Err(_) => Err(LedgerError::Internal("the connection attempt panicked")),
    }
}

/// Why a connection failed, in the server's or the system's words: the client's own
/// text for a server error is only "db error".
fn connect_failure(err: &postgres::Error) -> String {
    if let Some(db) = err.as_db_error() {
        return format!("the server says: {} ({})", db.message(), db.code().code());
    }
    let mut text = err.to_string();
    let mut cause = std::error::Error::source(err);
    while let Some(next) = cause {
        text.push_str(": ");
        text.push_str(&next.to_string());
        cause = next.source();
    }
    text
}

#[cfg(feature = "tls")]
fn connector(_config: &postgres::Config) -> Result<Connector, LedgerError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|_| LedgerError::Internal("rustls refused its default protocol versions"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// Built without TLS: only a connection the URL itself says is in the clear
/// (`sslmode=disable`, or a server on this machine), so a password never crosses a
/// network unencrypted by default.
#[cfg(not(feature = "tls"))]
fn connector(config: &postgres::Config) -> Result<Connector, LedgerError> {
    match config.get_ssl_mode() {
        postgres::config::SslMode::Disable => Ok(postgres::NoTls),
        _ => Err(LedgerError::BadUrl {
            detail: "this build has no TLS (attest-ledger without its `tls` feature): \
                     add sslmode=disable only for a server reached over a trusted network"
                .to_owned(),
        }),
    }
}

impl PgStore {
    /// Connects (a pool), creates or upgrades the schema unless `read_only`.
    pub(crate) fn open(
        url: &str,
        tenant: Option<&str>,
        durability: Durability,
        read_only: bool,
    ) -> Result<PgStore, LedgerError> {
        if let Some(tenant) = tenant {
            check_tenant(tenant)?;
        }
        let mut config = postgres::Config::from_str(url).map_err(|_| LedgerError::BadUrl {
            // Never the URL itself: it may hold a password.
            detail: "not a valid postgres:// URL".to_owned(),
        })?;
        // A server on this machine is reached in the clear unless the URL asks for TLS
        // (its certificate is usually self-signed); any other server through rustls,
        // with the certificate checked against the webpki roots.
        if !url.contains("sslmode=") && is_local(&config) {
            config.ssl_mode(postgres::config::SslMode::Disable);
        }
        let name = display_name(&config);
        let connector = connector(&config)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        probe(&config, &connector, &name)?;
        let manager = PostgresConnectionManager::new(config, connector);
        let synchronous_commit = match durability {
            Durability::Full => "on",
            Durability::Normal | Durability::Off => "off",
        };
        let pool = r2d2::Pool::builder()
            .max_size(8)
            .min_idle(Some(0))
            .test_on_check_out(false)
            .connection_timeout(Duration::from_secs(30))
            .connection_customizer(Box::new(Session { synchronous_commit }))
            .build(manager)
            .map_err(|source| LedgerError::Pool {
                path: name.clone(),
                detail: source.to_string(),
            })?;
        let store = PgStore {
            pool,
            name,
            tenant: tenant.unwrap_or("").to_owned(),
            edge: Mutex::new(None),
            read_only,
        };
        if read_only {
            store.check_schema()?;
        } else {
            store.migrate()?;
        }
        Ok(store)
    }

    /// The display name (`postgres://user@host:port/db`).
    pub(crate) fn name(&self) -> &Path {
        &self.name
    }

    /// The database, for tables kept beside this tenant's chain.
    pub(crate) fn database(&self) -> PgDatabase {
        PgDatabase {
            pool: self.pool.clone(),
            name: self.name.clone(),
            tenant: self.tenant.clone(),
        }
    }

    fn err(&self, during: &'static str) -> impl Fn(postgres::Error) -> LedgerError + '_ {
        move |source| LedgerError::Postgres {
            path: self.name.clone(),
            during,
            source,
        }
    }

    fn client(&self) -> Result<Conn, LedgerError> {
        self.pool.get().map_err(|source| LedgerError::Pool {
            path: self.name.clone(),
            detail: source.to_string(),
        })
    }

    fn edge_slot(&self) -> MutexGuard<'_, Option<PgEdge>> {
        // Only whole values are stored; a poisoned lock holds no torn state.
        self.edge.lock().unwrap_or_else(PoisonError::into_inner)
    }

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

    fn check_schema(&self) -> Result<(), LedgerError> {
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
    fn migrate(&self) -> Result<(), LedgerError> {
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

    /// Runs `f` on one `REPEATABLE READ` snapshot of this tenant.
    pub(crate) fn read<T>(
        &self,
        f: impl FnOnce(&dyn Source) -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        self.snapshot(|source| f(source))
    }

    fn snapshot<T>(
        &self,
        f: impl FnOnce(&PgSource<'_, '_>) -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        let mut client = self.client()?;
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(self.err("starting a read"))?;
        let source = PgSource {
            store: self,
            tx: RefCell::new(tx),
        };
        f(&source)
    }

    /// Reads the chain's end from the database: the tip, and the compact range from
    /// the stored tree hashes (every leaf's hashes are written with it).
    fn load_edge(&self, client: &mut Client) -> Result<PgEdge, LedgerError> {
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .map_err(self.err("reading the tip"))?;
        let source = PgSource {
            store: self,
            tx: RefCell::new(tx),
        };
        let (seq, hash) = source.tip()?.unwrap_or((0, GENESIS));
        let range = CompactRange::from_stored(seq, &Hashes(&source))
            .map_err(|source| LedgerError::Tree { seq, source })?;
        Ok(PgEdge { seq, hash, range })
    }

    /// Appends records in order, in one statement; retries on another writer's
    /// conflict and on a lost connection.
    pub(crate) fn append_batch(
        &self,
        records: &[Record],
        clock: &dyn Clock,
    ) -> Result<Vec<Appended>, LedgerError> {
        if self.read_only {
            return Err(LedgerError::ReadOnly {
                path: self.name.clone(),
            });
        }
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let mut client = self.client()?;
        let mut last_error = None;
        // Groups whose statement failed with the connection: each may have committed
        // with its acknowledgement lost, or may yet commit (a backend finishing its
        // work). They are resolved against the tip before anything is written again.
        let mut pending: Vec<Group<'_>> = Vec::new();
        // With a group pending, any failure is "unknown": the caller must not write the
        // records again.
        let unknown = |pending: &Vec<Group<'_>>, err: LedgerError| {
            if pending.is_empty() {
                err
            } else {
                LedgerError::OutcomeUnknown {
                    path: self.name.clone(),
                }
            }
        };
        for attempt in 0..MAX_ATTEMPTS {
            let cached = if pending.is_empty() {
                self.edge_slot().take()
            } else {
                None
            };
            let edge = match cached {
                Some(edge) => edge,
                None => match self.load_edge(&mut client) {
                    Ok(edge) => edge,
                    Err(err) if attempt + 1 < MAX_ATTEMPTS && is_connection(&err) => {
                        last_error = Some(err);
                        client = self.reconnect(attempt).map_err(|e| unknown(&pending, e))?;
                        continue;
                    }
                    Err(err) => return Err(unknown(&pending, err)),
                },
            };
            if !pending.is_empty() {
                match self.resolve(&mut client, &mut pending, edge.seq) {
                    Ok(Some(appended)) => return Ok(appended),
                    Ok(None) => {}
                    Err(err) => {
                        last_error = Some(err);
                        client = self.reconnect(attempt).map_err(|e| unknown(&pending, e))?;
                        continue;
                    }
                }
            }
            // Built on the tip just read: if a pending group is still in flight, it
            // wants the same seq, and the key lets only one of them commit.
            let group = Group::build(records, edge, clock).map_err(|e| unknown(&pending, e))?;
            match self.write_group(&mut client, &group) {
                Ok(()) => {
                    let appended = group.appended.clone();
                    *self.edge_slot() = Some(group.edge);
                    return Ok(appended);
                }
                // Another writer took the seq: read the new tip, rebuild, re-hash.
                Err(err) if is_conflict(&err) => {
                    last_error = Some(self.err("appending")(err));
                    // Many writers on one tip: step aside for a random while that grows
                    // with the losses (up to 16 ms), so every writer gets its turn.
                    let cap = 100u64 << attempt.min(7);
                    std::thread::sleep(Duration::from_micros(jitter() % cap));
                }
                Err(err) if !is_ambiguous(&err) => {
                    // A constraint or type error: the same statement fails again.
                    return Err(unknown(&pending, self.err("appending")(err)));
                }
                Err(err) => {
                    // The connection broke: the statement may have committed.
                    last_error = Some(self.err("appending")(err));
                    pending.push(group);
                    client = self.reconnect(attempt).map_err(|e| unknown(&pending, e))?;
                }
            }
        }
        if !pending.is_empty() {
            return Err(LedgerError::OutcomeUnknown {
                path: self.name.clone(),
            });
        }
        Err(last_error.unwrap_or(LedgerError::Internal("the append did not finish")))
    }

    /// Settles pending groups against a tip read after they failed: a group whose
    /// first seq is at or below the tip either is there (its hash at that seq: it
    /// committed, and its rows are the result) or never will be (another row holds
    /// the seq). A group just past the tip stays pending: the next attempt competes
    /// with it for the same seq.
    fn resolve(
        &self,
        client: &mut Client,
        pending: &mut Vec<Group<'_>>,
        tip: u64,
    ) -> Result<Option<Vec<Appended>>, LedgerError> {
        // Nothing is dropped until it is known: an error leaves every group pending.
        let mut settled = Vec::new();
        for (i, group) in pending.iter().enumerate() {
            let Some(first) = group.rows.first() else {
                settled.push(i);
                continue;
            };
            if first.seq > tip {
                continue;
            }
            if self.committed(client, group)? {
                // The edge after it is not known here; the next append reads it.
                *self.edge_slot() = None;
                return Ok(Some(group.appended.clone()));
            }
            settled.push(i);
        }
        let mut i = 0;
        pending.retain(|_| {
            let keep = !settled.contains(&i);
            i += 1;
            keep
        });
        Ok(None)
    }

    /// A fresh connection after a failure, waiting a little longer each time (a
    /// restarting server).
    fn reconnect(&self, attempt: u32) -> Result<Conn, LedgerError> {
        let mut last = None;
        for wait in 0..20u64 {
            std::thread::sleep(Duration::from_millis(
                20 * wait.min(10) + u64::from(attempt),
            ));
            match self.client() {
                Ok(mut client) => {
                    if client.is_valid(Duration::from_secs(5)).is_ok() {
                        return Ok(client);
                    }
                }
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or(LedgerError::Pool {
            path: self.name.clone(),
            detail: "no working connection".to_owned(),
        }))
    }

    fn write_group(&self, client: &mut Client, group: &Group) -> Result<(), postgres::Error> {
        let seqs: Vec<i64> = group.rows.iter().map(|r| r.seq as i64).collect();
        let hashes: Vec<&[u8]> = group.rows.iter().map(|r| &r.hash[..]).collect();
        let ts: Vec<&str> = group.rows.iter().map(|r| r.ts.as_str()).collect();
        let system: Vec<&str> = group.records().map(|r| r.system.as_str()).collect();
        let verb: Vec<&str> = group.records().map(|r| r.verb.as_str()).collect();
        let agent: Vec<Option<&str>> = group.records().map(|r| r.agent.as_deref()).collect();
        let decision: Vec<&str> = group.records().map(|r| r.decision.as_str()).collect();
        let level: Vec<Option<&str>> = group
            .records()
            .map(|r| r.verification.as_ref().map(|v| v.level.as_str()))
            .collect();
        let run: Vec<Option<&str>> = group.records().map(|r| r.run_id.as_deref()).collect();
        let action: Vec<&str> = group.records().map(|r| r.action_id.as_str()).collect();
        let bodies: Vec<&[u8]> = group.rows.iter().map(|r| r.body.as_slice()).collect();
        let tree_idx: Vec<i64> = (group.first_tree_index..)
            .take(group.tree.len())
            .map(|i| i as i64)
            .collect();
        let tree: Vec<&[u8]> = group.tree.iter().map(|h| &h[..]).collect();
        let params: [&(dyn ToSql + Sync); 14] = [
            &self.tenant,
            &seqs,
            &hashes,
            &ts,
            &system,
            &verb,
            &agent,
            &decision,
            &level,
            &run,
            &action,
            &bodies,
            &tree_idx,
            &tree,
        ];
        let typed: Vec<(&(dyn ToSql + Sync), Type)> = params
            .iter()
            .copied()
            .zip(APPEND_TYPES.iter().cloned())
            .collect();
        client.query_typed(APPEND, &typed)?;
        Ok(())
    }

    /// Whether `group` is in the database already (its first row's hash is there).
    fn committed(&self, client: &mut Client, group: &Group) -> Result<bool, LedgerError> {
        let Some(first) = group.rows.first() else {
            return Ok(false);
        };
        let row = client
            .query_opt(
                "SELECT hash FROM entries WHERE tenant = $1 AND seq = $2",
                &[&self.tenant, &(first.seq as i64)],
            )
            .map_err(self.err("checking a group whose commit was not acknowledged"))?;
        Ok(row.is_some_and(|row| row.get::<_, &[u8]>(0) == first.hash))
    }

    /// Signs the current tree and stores the note (the SQLite store's semantics).
    pub(crate) fn checkpoint(
        &self,
        key: &SigningKey,
        now: SystemTime,
    ) -> Result<(StoredCheckpoint, bool), LedgerError> {
        let mut client = self.client()?;
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .start()
            .map_err(self.err("starting a checkpoint"))?;
        let source = PgSource {
            store: self,
            tx: RefCell::new(tx),
        };
        let Some((size, _)) = source.tip()? else {
            return Err(LedgerError::Empty {
                path: self.name.clone(),
            });
        };
        if let Some(existing) = source.checkpoint_at(size)? {
            return Ok((existing, false));
        }
        let root = root(&source, size)?;
        let note = sign_checkpoint(key, size, &root)?;
        let ts = format_ts(now);
        let mut tx = source.tx.into_inner();
        let inserted = tx
            .execute(
                "INSERT INTO checkpoints (tenant, size, root, note, ts) VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (tenant, size) DO NOTHING",
                &[&self.tenant, &(size as i64), &&root[..], &note, &ts],
            )
            .map_err(self.err("storing a checkpoint"))?;
        tx.commit().map_err(self.err("storing a checkpoint"))?;
        Ok((
            StoredCheckpoint {
                size,
                root,
                note,
                ts,
            },
            inserted == 1,
        ))
    }

    /// Removes entries older than `cutoff` behind a fresh checkpoint; the removed rows
    /// are handed to `archive` first (inside the transaction that removes them).
    pub(crate) fn prune(
        &self,
        cutoff: SystemTime,
        key: &SigningKey,
        now: SystemTime,
        archive: &mut crate::archive::ArchiveWriter<'_>,
    ) -> Result<PruneReport, LedgerError> {
        let (checkpoint, _) = self.checkpoint(key, now)?;
        let mut client = self.client()?;
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .start()
            .map_err(self.err("starting a prune"))?;
        let source = PgSource {
            store: self,
            tx: RefCell::new(tx),
        };
        let already = source.pruned()?.map_or(0, |(seq, _)| seq);
        let Some(through) = source.prune_through(cutoff, checkpoint.size)? else {
            return Ok(PruneReport {
                removed: 0,
                pruned_through: already,
                checkpoint,
            });
        };
        let prev = source.pruned()?.map_or(GENESIS, |(_, hash)| hash);
        archive.header(already + 1, through, &prev, &checkpoint.note)?;
        let mut last = None;
        source.rows(already + 1, &mut |row| {
            if row.seq > through {
                return Ok(false);
            }
            archive.row(row)?;
            if row.seq == through {
                last = Some((row.hash.to_vec(), entry_hash(row.body)));
            }
            Ok(true)
        })?;
        let hash = match last {
            Some((stored, hash)) if stored == hash => hash,
            _ => {
                return Err(LedgerError::BadRow {
                    seq: through,
                    detail: "its body does not match its hash; run `attest verify` before pruning"
                        .to_owned(),
                })
            }
        };
        let mut tx = source.tx.into_inner();
        let removed = tx
            .execute(
                "DELETE FROM entries WHERE tenant = $1 AND seq <= $2",
                &[&self.tenant, &(through as i64)],
            )
            .map_err(self.err("removing entries"))?;
        for (key, value) in [
            ("pruned_through", through.to_string()),
            ("pruned_hash", to_hex(&hash)),
        ] {
            tx.execute(
                "INSERT INTO attest_meta (tenant, key, value) VALUES ($1, $2, $3)
                 ON CONFLICT (tenant, key) DO UPDATE SET value = EXCLUDED.value",
                &[&self.tenant, &key, &value],
            )
            .map_err(self.err("recording the prune"))?;
        }
        // The archive is complete and flushed before the rows go.
        archive.finish()?;
        tx.commit().map_err(self.err("committing a prune"))?;
        Ok(PruneReport {
            removed,
            pruned_through: through,
            checkpoint,
        })
    }

    /// How many entries a prune with `cutoff` would remove now.
    pub(crate) fn prune_count(&self, cutoff: SystemTime) -> Result<u64, LedgerError> {
        self.snapshot(|source| {
            let size = source.tip()?.map_or(0, |(seq, _)| seq);
            let already = source.pruned()?.map_or(0, |(seq, _)| seq);
            Ok(source
                .prune_through(cutoff, size)?
                .map_or(0, |through| through - already))
        })
    }

    /// Listing with filters, newest first, from the indexed columns.
    pub(crate) fn list(
        &self,
        filter: &Filter,
        limit: usize,
    ) -> Result<Vec<RowSummary>, LedgerError> {
        let mut sql = String::from(
            "SELECT seq, ts, system, verb, agent, decision, level, hash FROM entries WHERE tenant = $1",
        );
        let mut params: Vec<Box<dyn ToSql + Sync>> = vec![Box::new(self.tenant.clone())];
        for (column, value) in filter.columns() {
            params.push(Box::new(value.to_owned()));
            let op = if column == "ts" { ">=" } else { "=" };
            sql.push_str(&format!(" AND {column} {op} ${}", params.len()));
        }
        if let Some(before) = filter.before {
            params.push(Box::new(i64::try_from(before).unwrap_or(i64::MAX)));
            sql.push_str(&format!(" AND seq < ${}", params.len()));
        }
        params.push(Box::new(i64::try_from(limit).unwrap_or(i64::MAX)));
        sql.push_str(&format!(" ORDER BY seq DESC LIMIT ${}", params.len()));
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
        let rows = self
            .client()?
            .query(sql.as_str(), &refs)
            .map_err(self.err("listing entries"))?;
        rows.iter()
            .map(|row| {
                let seq = row.get::<_, i64>(0) as u64;
                Ok(RowSummary {
                    seq,
                    ts: row.get(1),
                    system: row.get(2),
                    verb: row.get(3),
                    agent: row.get(4),
                    decision: row.get(5),
                    level: row.get(6),
                    hash: row
                        .get::<_, &[u8]>(7)
                        .try_into()
                        .map_err(|_| LedgerError::BadRow {
                            seq,
                            detail: "hash column is not 32 bytes".to_owned(),
                        })?,
                })
            })
            .collect()
    }

    /// The rows at `seqs`, in the order given (one query).
    pub(crate) fn rows_at(
        &self,
        seqs: &[u64],
        visit: &mut dyn FnMut(&StoredRow<'_>) -> Result<(), LedgerError>,
    ) -> Result<(), LedgerError> {
        let wanted: Vec<i64> = seqs
            .iter()
            .map(|&seq| i64::try_from(seq).unwrap_or(i64::MAX))
            .collect();
        let rows = self
            .client()?
            .query(
                &format!(
                    "SELECT {STORED_ROW_COLUMNS} FROM entries WHERE tenant = $1 AND seq = ANY($2)"
                ),
                &[&self.tenant, &wanted],
            )
            .map_err(self.err("reading entries"))?;
        let by_seq: std::collections::HashMap<u64, &Row> =
            rows.iter().map(|row| (stored_row(row).seq, row)).collect();
        for seq in seqs {
            if let Some(row) = by_seq.get(seq) {
                visit(&stored_row(row))?;
            }
        }
        Ok(())
    }

    /// The counters kept with the entries.
    pub(crate) fn counts(&self) -> Result<Counts, LedgerError> {
        let rows = self
            .client()?
            .query(
                "SELECT dim, key, hour, n FROM counters WHERE tenant = $1",
                &[&self.tenant],
            )
            .map_err(self.err("reading counters"))?;
        let mut counts = Counts::default();
        for row in rows {
            counts.add(
                row.get(0),
                row.get(1),
                row.get(2),
                row.get::<_, i64>(3) as u64,
            );
        }
        Ok(counts)
    }

    /// Whether this tenant holds nothing (the target of a copy must not).
    pub(crate) fn is_empty(&self) -> Result<bool, LedgerError> {
        let mut client = self.client()?;
        for table in ["entries", "tree_hashes", "checkpoints", "attest_meta"] {
            let found = client
                .query_opt(
                    &format!("SELECT 1 FROM {table} WHERE tenant = $1 LIMIT 1"),
                    &[&self.tenant],
                )
                .map_err(self.err("checking the ledger is empty"))?;
            if found.is_some() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Writes a copy in one transaction: rows (with counters recomputed), every tree
    /// hash, checkpoints and the prune boundary, exactly as read from `source`.
    pub(crate) fn copy_from(
        &self,
        source: &dyn Source,
        copied_row: &mut dyn FnMut(u64),
    ) -> Result<u64, LedgerError> {
        let mut client = self.client()?;
        let mut tx = client.transaction().map_err(self.err("starting a copy"))?;
        let tenant = self.tenant.as_str();
        let mut copied = 0u64;
        let mut batch: Vec<OwnedRow> = Vec::new();
        let flush =
            |tx: &mut Transaction<'_>, batch: &mut Vec<OwnedRow>| -> Result<(), LedgerError> {
                if batch.is_empty() {
                    return Ok(());
                }
                insert_rows(tx, tenant, batch).map_err(self.err("copying entries"))?;
                batch.clear();
                Ok(())
            };
        let from = source.pruned()?.map_or(0, |(seq, _)| seq) + 1;
        source.rows(from, &mut |row| {
            batch.push(OwnedRow::from(row));
            copied += 1;
            copied_row(copied);
            if batch.len() as i64 >= PAGE {
                flush(&mut tx, &mut batch)?;
            }
            Ok(true)
        })?;
        flush(&mut tx, &mut batch)?;
        let tip = source.tip()?.map_or(0, |(seq, _)| seq);
        let count = tlog_tiles::stored_hash_count(tip);
        let mut start = 0u64;
        while start < count {
            let end = (start + PAGE as u64).min(count);
            let indexes: Vec<u64> = (start..end).collect();
            let hashes = source
                .read_hashes(&indexes)
                .map_err(|source| LedgerError::Tree { seq: tip, source })?;
            let idx: Vec<i64> = indexes.iter().map(|&i| i as i64).collect();
            let bytes: Vec<&[u8]> = hashes.iter().map(|h| &h.0[..]).collect();
            tx.execute(
                "INSERT INTO tree_hashes (tenant, idx, hash) SELECT $1, * FROM UNNEST($2::int8[], $3::bytea[])",
                &[&tenant, &idx, &bytes],
            )
            .map_err(self.err("copying tree hashes"))?;
            start = end;
        }
        for cp in source.checkpoints()? {
            tx.execute(
                "INSERT INTO checkpoints (tenant, size, root, note, ts) VALUES ($1, $2, $3, $4, $5)",
                &[&tenant, &(cp.size as i64), &&cp.root[..], &cp.note, &cp.ts],
            )
            .map_err(self.err("copying checkpoints"))?;
        }
        if let Some((seq, hash)) = source.pruned()? {
            for (key, value) in [
                ("pruned_through", seq.to_string()),
                ("pruned_hash", to_hex(&hash)),
            ] {
                tx.execute(
                    "INSERT INTO attest_meta (tenant, key, value) VALUES ($1, $2, $3)",
                    &[&tenant, &key, &value],
                )
                .map_err(self.err("copying the prune boundary"))?;
            }
        }
        tx.commit().map_err(self.err("committing a copy"))?;
        *self.edge_slot() = None;
        Ok(copied)
    }
}

/// A row copied out of a source, for a copy into PostgreSQL.
pub(crate) struct OwnedRow {
    pub(crate) seq: u64,
    pub(crate) hash: Vec<u8>,
    pub(crate) ts: String,
    pub(crate) system: String,
    pub(crate) verb: String,
    pub(crate) agent: Option<String>,
    pub(crate) decision: String,
    pub(crate) level: Option<String>,
    pub(crate) run: Option<String>,
    pub(crate) action_id: Option<String>,
    pub(crate) body: Vec<u8>,
}

impl From<&StoredRow<'_>> for OwnedRow {
    fn from(row: &StoredRow<'_>) -> OwnedRow {
        let (run, action_id) = crate::query::run_and_action(row.body);
        OwnedRow {
            seq: row.seq,
            hash: row.hash.to_vec(),
            ts: row.ts.to_owned(),
            system: row.system.to_owned(),
            verb: row.verb.to_owned(),
            agent: row.agent.map(str::to_owned),
            decision: row.decision.to_owned(),
            level: row.level.map(str::to_owned),
            run,
            action_id,
            body: row.body.to_vec(),
        }
    }
}

/// Inserts copied rows and moves the counters for them.
fn insert_rows(
    tx: &mut Transaction<'_>,
    tenant: &str,
    rows: &[OwnedRow],
) -> Result<(), postgres::Error> {
    let seqs: Vec<i64> = rows.iter().map(|r| r.seq as i64).collect();
    let hashes: Vec<&[u8]> = rows.iter().map(|r| r.hash.as_slice()).collect();
    let ts: Vec<&str> = rows.iter().map(|r| r.ts.as_str()).collect();
    let system: Vec<&str> = rows.iter().map(|r| r.system.as_str()).collect();
    let verb: Vec<&str> = rows.iter().map(|r| r.verb.as_str()).collect();
    let agent: Vec<Option<&str>> = rows.iter().map(|r| r.agent.as_deref()).collect();
    let decision: Vec<&str> = rows.iter().map(|r| r.decision.as_str()).collect();
    let level: Vec<Option<&str>> = rows.iter().map(|r| r.level.as_deref()).collect();
    let run: Vec<Option<&str>> = rows.iter().map(|r| r.run.as_deref()).collect();
    let action: Vec<Option<&str>> = rows.iter().map(|r| r.action_id.as_deref()).collect();
    let bodies: Vec<&[u8]> = rows.iter().map(|r| r.body.as_slice()).collect();
    let no_idx: Vec<i64> = Vec::new();
    let no_hash: Vec<&[u8]> = Vec::new();
    tx.query(
        APPEND,
        &[
            &tenant, &seqs, &hashes, &ts, &system, &verb, &agent, &decision, &level, &run, &action,
            &bodies, &no_idx, &no_hash,
        ],
    )?;
    Ok(())
}

/// A random-enough number so writers that lost the same race (in this process or
/// another) do not retry in lockstep.
fn jitter() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u128(
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

fn is_conflict(err: &postgres::Error) -> bool {
    matches!(
        err.code(),
        Some(code) if *code == SqlState::UNIQUE_VIOLATION
            || *code == SqlState::T_R_SERIALIZATION_FAILURE
            || *code == SqlState::T_R_DEADLOCK_DETECTED
    )
}

/// Whether a statement's failure leaves its outcome unknown: the connection broke or
/// the server stopped the session (classes 08, 57, 58, 53), not a refusal.
fn is_ambiguous(err: &postgres::Error) -> bool {
    match err.code() {
        None => true,
        Some(code) => ["08", "57", "58", "53"]
            .iter()
            .any(|class| code.code().starts_with(class)),
    }
}

/// Whether reading the edge failed for the connection's sake, not the statement's (a
/// tree read cut short reads as a missing hash: retried too, a few dozen times).
fn is_connection(err: &LedgerError) -> bool {
    match err {
        LedgerError::Tree { .. } => true,
        LedgerError::Postgres { source, .. } => is_ambiguous(source) || source.is_closed(),
        LedgerError::Pool { .. } => true,
        _ => false,
    }
}

/// A group's rows, built on an edge: bodies, hashes, and the tree hashes they add.
struct Group<'r> {
    records: &'r [Record],
    rows: Vec<BuiltRow>,
    appended: Vec<Appended>,
    first_tree_index: u64,
    tree: Vec<Hash>,
    edge: PgEdge,
}

struct BuiltRow {
    seq: u64,
    hash: Hash,
    ts: String,
    body: Vec<u8>,
}

impl<'r> Group<'r> {
    fn build(
        records: &'r [Record],
        mut edge: PgEdge,
        clock: &dyn Clock,
    ) -> Result<Group<'r>, LedgerError> {
        let first_tree_index = stored_hash_index(0, edge.seq);
        let mut rows = Vec::with_capacity(records.len());
        let mut appended = Vec::with_capacity(records.len());
        let mut tree = Vec::with_capacity(records.len() * 2);
        for record in records {
            let seq = edge.seq + 1;
            let ts = format_ts(clock.now());
            let prev_hex = to_hex(&edge.hash);
            let entry = Entry {
                v: FORMAT_VERSION,
                seq,
                prev: &prev_hex,
                ts: &ts,
                record,
            };
            let mut body = Vec::with_capacity(1024);
            write_entry(&mut body, &entry)?;
            let hash = entry_hash(&body);
            edge.range
                .push_with(leaf_hash(&hash), |node| tree.push(*node));
            edge.seq = seq;
            edge.hash = hash;
            appended.push(Appended {
                seq,
                hash,
                ts: ts.clone(),
            });
            rows.push(BuiltRow {
                seq,
                hash,
                ts,
                body,
            });
        }
        Ok(Group {
            records,
            rows,
            appended,
            first_tree_index,
            tree,
            edge,
        })
    }

    fn records(&self) -> impl Iterator<Item = &'r Record> + 'r {
        self.records.iter()
    }
}

/// One PostgreSQL snapshot of one tenant.
pub(crate) struct PgSource<'s, 'c> {
    store: &'s PgStore,
    tx: RefCell<Transaction<'c>>,
}

impl PgSource<'_, '_> {
    fn query(
        &self,
        during: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, LedgerError> {
        self.tx
            .borrow_mut()
            .query(sql, params)
            .map_err(self.store.err(during))
    }

    fn tenant(&self) -> &str {
        &self.store.tenant
    }

    fn meta(&self, key: &str) -> Result<Option<String>, LedgerError> {
        Ok(self
            .query(
                "reading the prune boundary",
                "SELECT value FROM attest_meta WHERE tenant = $1 AND key = $2",
                &[&self.tenant(), &key],
            )?
            .first()
            .map(|row| row.get(0)))
    }

    fn checkpoint_at(&self, size: u64) -> Result<Option<StoredCheckpoint>, LedgerError> {
        self.query(
            "reading a checkpoint",
            "SELECT size, root, note, ts FROM checkpoints WHERE tenant = $1 AND size = $2",
            &[&self.tenant(), &(size as i64)],
        )?
        .first()
        .map(read_checkpoint)
        .transpose()
    }

    fn prune_through(&self, cutoff: SystemTime, size: u64) -> Result<Option<u64>, LedgerError> {
        let already = self.pruned()?.map_or(0, |(seq, _)| seq);
        let tip = self.tip()?.map_or(0, |(seq, _)| seq);
        let last: Option<i64> = self
            .query(
                "choosing entries to prune",
                "SELECT max(seq) FROM entries WHERE tenant = $1 AND ts < $2 AND seq <= $3 AND seq < $4",
                &[&self.tenant(), &format_ts(cutoff), &(size as i64), &(tip as i64)],
            )?
            .first()
            .and_then(|row| row.get(0));
        Ok(last.map(|s| s as u64).filter(|&seq| seq > already))
    }

    /// Rows `seq > after`, at most one page, in seq order.
    fn page(&self, after: u64) -> Result<Vec<Row>, LedgerError> {
        self.query(
            "reading entries",
            &format!(
                "SELECT {STORED_ROW_COLUMNS} FROM entries
                 WHERE tenant = $1 AND seq > $2 ORDER BY seq LIMIT $3"
            ),
            &[&self.tenant(), &(after as i64), &PAGE],
        )
    }
}

/// The columns [`stored_row`] reads, in its order.
const STORED_ROW_COLUMNS: &str =
    "seq, hash, ts, system, verb, agent, decision, level, body, run, action_id";

fn stored_row(row: &Row) -> StoredRow<'_> {
    StoredRow {
        seq: row.get::<_, i64>(0) as u64,
        hash: row.get(1),
        ts: row.get(2),
        system: row.get(3),
        verb: row.get(4),
        agent: row.get(5),
        decision: row.get(6),
        level: row.get(7),
        body: row.get(8),
        run: row.get(9),
        action_id: row.get(10),
    }
}

fn read_checkpoint(row: &Row) -> Result<StoredCheckpoint, LedgerError> {
    let size = row.get::<_, i64>(0) as u64;
    let root: &[u8] = row.get(1);
    Ok(StoredCheckpoint {
        size,
        root: root.try_into().map_err(|_| LedgerError::BadRow {
            seq: size,
            detail: "checkpoint root is not 32 bytes".to_owned(),
        })?,
        note: row.get(2),
        ts: row.get(3),
    })
}

impl Source for PgSource<'_, '_> {
    fn tip(&self) -> Result<Option<(u64, Hash)>, LedgerError> {
        let rows = self.query(
            "reading the tip",
            "SELECT seq, hash FROM entries WHERE tenant = $1 ORDER BY seq DESC LIMIT 1",
            &[&self.tenant()],
        )?;
        let Some(row) = rows.first() else {
            return Ok(None);
        };
        let seq = row.get::<_, i64>(0) as u64;
        let hash: Hash = row
            .get::<_, &[u8]>(1)
            .try_into()
            .map_err(|_| LedgerError::BadRow {
                seq,
                detail: "hash column is not 32 bytes; run `attest verify`".to_owned(),
            })?;
        Ok(Some((seq, hash)))
    }

    fn pruned(&self) -> Result<Option<(u64, Hash)>, LedgerError> {
        let (Some(seq), Some(hash)) = (self.meta("pruned_through")?, self.meta("pruned_hash")?)
        else {
            return Ok(None);
        };
        let bad = |detail: &str| LedgerError::BadRow {
            seq: 0,
            detail: format!("prune boundary in attest_meta: {detail}"),
        };
        let seq: u64 = seq
            .parse()
            .map_err(|_| bad("pruned_through is not a number"))?;
        let hash = from_hex(&hash).ok_or_else(|| bad("pruned_hash is not 64 hex digits"))?;
        Ok(Some((seq, hash)))
    }

    fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>, LedgerError> {
        self.query(
            "reading checkpoints",
            "SELECT size, root, note, ts FROM checkpoints WHERE tenant = $1 ORDER BY size",
            &[&self.tenant()],
        )?
        .iter()
        .map(read_checkpoint)
        .collect()
    }

    fn latest_checkpoint(&self) -> Result<Option<StoredCheckpoint>, LedgerError> {
        self.query(
            "reading the newest checkpoint",
            "SELECT size, root, note, ts FROM checkpoints WHERE tenant = $1 ORDER BY size DESC LIMIT 1",
            &[&self.tenant()],
        )?
        .first()
        .map(read_checkpoint)
        .transpose()
    }

    fn rows(&self, from: u64, visit: &mut Visit<'_>) -> Result<(), LedgerError> {
        let mut after = from.saturating_sub(1);
        loop {
            let rows = self.page(after)?;
            for row in &rows {
                let stored = stored_row(row);
                after = stored.seq;
                if !visit(&stored)? {
                    return Ok(());
                }
            }
            if (rows.len() as i64) < PAGE {
                return Ok(());
            }
        }
    }

    fn rows_with_tree(&self, start: u64, visit: &mut VisitTree<'_>) -> Result<(), LedgerError> {
        let mut after = start;
        let mut leaf = start;
        let mut unwritten = false;
        let mut hashes = Vec::with_capacity(32 * 8);
        loop {
            let rows = self.page(after)?;
            if rows.is_empty() {
                return Ok(());
            }
            let first = stored_hash_index(0, leaf);
            let end = stored_hash_index(0, leaf + rows.len() as u64);
            let tree = self.query(
                "reading tree hashes",
                "SELECT idx, hash FROM tree_hashes WHERE tenant = $1 AND idx >= $2 AND idx < $3 ORDER BY idx",
                &[&self.tenant(), &(first as i64), &(end as i64)],
            )?;
            let mut tree = tree.iter();
            for row in &rows {
                let stored = stored_row(row);
                after = stored.seq;
                let count = 1 + (leaf + 1).trailing_zeros() as u64;
                let first = stored_hash_index(0, leaf);
                let mut in_order = true;
                hashes.clear();
                for k in 0..count {
                    if unwritten {
                        break;
                    }
                    match tree.next() {
                        None if k == 0 => unwritten = true,
                        Some(t) => {
                            let idx = t.get::<_, i64>(0) as u64;
                            let bytes: &[u8] = t.get(1);
                            if idx == first + k && bytes.len() == 32 {
                                hashes.extend_from_slice(bytes);
                            } else {
                                in_order = false;
                            }
                        }
                        None => in_order = false,
                    }
                }
                leaf += 1;
                let slot = if unwritten {
                    TreeSlot::Unwritten
                } else if in_order {
                    TreeSlot::Stored(&hashes)
                } else {
                    TreeSlot::Bad
                };
                if !visit(&stored, slot)? {
                    return Ok(());
                }
            }
            if (rows.len() as i64) < PAGE {
                return Ok(());
            }
        }
    }

    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<TreeHash>, tlog_tiles::Error> {
        let wanted: Vec<i64> = indexes.iter().map(|&i| i as i64).collect();
        let rows = self
            .tx
            .borrow_mut()
            .query(
                "SELECT idx, hash FROM tree_hashes WHERE tenant = $1 AND idx = ANY($2)",
                &[&self.tenant(), &wanted],
            )
            .map_err(|_| tlog_tiles::Error::IndexesNotInTree)?;
        let mut found = std::collections::HashMap::with_capacity(rows.len());
        for row in &rows {
            let bytes: &[u8] = row.get(1);
            let hash: Hash = bytes
                .try_into()
                .map_err(|_| tlog_tiles::Error::MalformedHash)?;
            found.insert(row.get::<_, i64>(0) as u64, hash);
        }
        indexes
            .iter()
            .map(|i| {
                found
                    .get(i)
                    .map(|h| TreeHash(*h))
                    .ok_or(tlog_tiles::Error::IndexesNotInTree)
            })
            .collect()
    }

    fn tree_end(&self) -> Result<u64, LedgerError> {
        let max: Option<i64> = self
            .query(
                "reading the tree's size",
                "SELECT max(idx) FROM tree_hashes WHERE tenant = $1",
                &[&self.tenant()],
            )?
            .first()
            .and_then(|row| row.get(0));
        Ok(max.map_or(0, |idx| idx as u64 + 1))
    }

    fn path(&self) -> &Path {
        &self.store.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> postgres::Config {
        postgres::Config::from_str(url).unwrap()
    }

    #[cfg(feature = "tls")]
    #[test]
    fn with_tls_a_remote_server_gets_a_tls_connector() {
        assert!(connector(&config("postgres://u:secret@db.example.com/attest")).is_ok());
    }

    /// `.ci/run` runs this with `--no-default-features`.
    #[cfg(not(feature = "tls"))]
    #[test]
    fn without_tls_only_a_url_in_the_clear_connects() {
        let refused = connector(&config("postgres://u:secret@db.example.com/attest"));
        match refused {
            Err(LedgerError::BadUrl { detail }) => {
                assert!(detail.contains("no TLS"), "{detail}");
                assert!(!detail.contains("secret"), "{detail}");
            }
            other => panic!("a remote URL connected without TLS: {other:?}"),
        }
        let clear = config("postgres://u@db.example.com/attest?sslmode=disable");
        assert!(connector(&clear).is_ok());
    }
}
