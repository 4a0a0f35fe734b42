//! Reaching a PostgreSQL server: the connection pool's connector (rustls, or in the
//! clear only), the session's durability, the URL as messages show it, and the
//! database handle kept beside a ledger (the approval store's tables).

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use postgres::Client;
use r2d2_postgres::PostgresConnectionManager;
#[cfg(feature = "tls")]
use tokio_postgres_rustls::MakeRustlsConnect;

use super::blocking::{off_runtime, Held};
use crate::{Durability, LedgerError};

/// How a connection is made: through rustls (feature `tls`), or in the clear only.
#[cfg(feature = "tls")]
pub(crate) type Connector = MakeRustlsConnect;
#[cfg(not(feature = "tls"))]
pub(crate) type Connector = postgres::NoTls;
pub(crate) type Pool = r2d2::Pool<Sessions>;
pub(crate) type Conn = r2d2::PooledConnection<Sessions>;

/// The pool's connections: the `r2d2_postgres` manager's, each with the append statement
/// it prepared (see [`Session::append`]).
pub(crate) struct Sessions(PostgresConnectionManager<Connector>);

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

/// A pooled connection and what it prepared.
pub(crate) struct Session {
    client: Client,
    /// The write path's statements, each prepared on this connection on first use: a
    /// named statement is parsed once and planned once (after five custom plans, a
    /// generic one), where an unnamed one is parsed and planned on every call, and
    /// planning the append's CTE (about 1 ms) cost more than running it.
    prepared: Vec<(&'static str, postgres::Statement)>,
}

impl Session {
    /// The append statement of `shape` on this connection, prepared on first use.
    pub(crate) fn append(
        &mut self,
        shape: super::append::AppendShape,
    ) -> Result<postgres::Statement, postgres::Error> {
        self.prepared(shape.sql(), shape.types())
    }

    /// `sql` (one of the write path's constants) with parameters of `types`, prepared
    /// on this connection on first use.
    pub(crate) fn prepared(
        &mut self,
        sql: &'static str,
        types: &[postgres::types::Type],
    ) -> Result<postgres::Statement, postgres::Error> {
        // The same constant is (nearly always) the same address: no compare of its text.
        let same = |known: &&str| std::ptr::eq(*known, sql) || *known == sql;
        if let Some((_, statement)) = self.prepared.iter().find(|(known, _)| same(known)) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare_typed(sql, types)?;
        self.prepared.push((sql, statement.clone()));
        Ok(statement)
    }
}

impl std::ops::Deref for Session {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl std::ops::DerefMut for Session {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.client
    }
}

impl r2d2::ManageConnection for Sessions {
    type Connection = Session;
    type Error = postgres::Error;

    fn connect(&self) -> Result<Session, postgres::Error> {
        Ok(Session {
            client: self.0.connect()?,
            prepared: Vec::new(),
        })
    }

    fn is_valid(&self, session: &mut Session) -> Result<(), postgres::Error> {
        self.0.is_valid(&mut session.client)
    }

    fn has_broken(&self, session: &mut Session) -> bool {
        self.0.has_broken(&mut session.client)
    }
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
    pub(crate) pool: Held<Pool>,
    pub(crate) name: PathBuf,
    pub(crate) tenant: String,
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
        off_runtime(|| self.pool.get())
            .map(|conn| PgConnection(Held::new(conn)))
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
pub struct PgConnection(Held<Conn>);

impl std::ops::Deref for PgConnection {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.0
    }
}

impl std::ops::DerefMut for PgConnection {
    fn deref_mut(&mut self) -> &mut Client {
        self.0.value()
    }
}

/// Sets durability on every new connection.
#[derive(Debug)]
struct Durable {
    synchronous_commit: &'static str,
}

impl r2d2::CustomizeConnection<Session, postgres::Error> for Durable {
    fn on_acquire(&self, conn: &mut Session) -> Result<(), postgres::Error> {
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

/// How long one connection attempt may take unless the URL says (`connect_timeout=`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One connection made at once, before the pool: a closed port, a database or a role
/// that does not exist fails here with the server's own words, instead of the pool
/// retrying for its 30 s and keeping only "db error" (the client's text for any
/// server error, without its cause). On a thread of its own: the synchronous client
/// cannot start inside a caller's async runtime.
// `Connector` is rustls's connector with TLS and the `Copy` `NoTls` without it.
#[allow(clippy::clone_on_copy)]
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

/// A pool of connections to the server `url` names, each set to `durability`; the
/// display name (no password) beside it.
pub(crate) fn pool(url: &str, durability: Durability) -> Result<(Pool, PathBuf), LedgerError> {
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
        .connection_customizer(Box::new(Durable { synchronous_commit }))
        .build(Sessions(manager))
        .map_err(|source| LedgerError::Pool {
            path: name.clone(),
            detail: source.to_string(),
        })?;
    Ok((pool, name))
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
