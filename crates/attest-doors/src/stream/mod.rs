//! The audit stream: every row appended to the ledger also sent to a SIEM, as an
//! OpenTelemetry log record over OTLP/HTTP ([`otlp`]) and, when configured, as an OCSF
//! event POSTed as signed JSON ([`ocsf`]).
//!
//! Delivery runs from a cursor kept in the ledger, one per sink
//! ([`attest_ledger::StreamCursor`]): a streamer reads the rows after the cursor (at most
//! `batch`), sends them, and moves the cursor only once the receiver acknowledged them
//! (a 2xx answer). A sink that is down delays rows (retried with backoff up to
//! `max_backoff`); none is dropped, and a restarted streamer resumes after the cursor.
//! The guarantee is at-least-once: a crash between the acknowledgement and the cursor's
//! write sends that batch again (each record carries `attest.seq` and `attest.hash`, so
//! a receiver can drop a repeat); past the cursor nothing is sent twice.
//!
//! Several streamers may share a ledger: the cursor carries a lease, so one sends per
//! sink at a time; a streamer that finds another's live lease waits.
//!
//! The long-lived doors (gateway, MCP proxy, `attest serve`) run a [`spawn`]ed
//! streamer on a thread of their own when the configuration has `stream:`; processes
//! that live for one call (Python, TypeScript, hooks) leave it to `attest stream run`.

pub mod ocsf;
pub mod otlp;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use attest_core::approvals::{sign_webhook, Secret, WEBHOOK_SIGNATURE_HEADER};
use attest_core::config::{vars, ConfigError, StreamSettings};
use attest_core::verification::Env;
use attest_ledger::{entry_hash, to_hex, Ledger, LedgerError};
use serde::Serialize;
use thiserror::Error;

/// Rows per request unless configured.
pub const DEFAULT_BATCH: usize = 100;
const DEFAULT_POLL: Duration = Duration::from_secs(1);
const DEFAULT_LEASE: Duration = Duration::from_secs(30);
const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(30);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The first wait after a failed send; it doubles up to `max_backoff`.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The most bytes of a receiver's answer read.
const MAX_ANSWER: usize = 64 * 1024;

/// Which form a sink takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SinkKind {
    /// OpenTelemetry log records, OTLP/HTTP protobuf.
    Otlp,
    /// OCSF events, signed JSON.
    Ocsf,
}

impl SinkKind {
    /// The sink's name, which is also its cursor's.
    pub fn name(self) -> &'static str {
        match self {
            SinkKind::Otlp => "otlp",
            SinkKind::Ocsf => "ocsf",
        }
    }
}

/// One sink: where its rows go. `Debug` shows neither the URL (it may be a secret)
/// nor the headers.
#[derive(Clone)]
pub struct Sink {
    kind: SinkKind,
    url: String,
    headers: Vec<(String, String)>,
    secret: Option<Secret>,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Sink {
    /// An OTLP/HTTP collector at `endpoint` (records go to `{endpoint}/v1/logs`), with
    /// extra request `headers`.
    pub fn otlp(endpoint: &str, headers: Vec<(String, String)>) -> Sink {
        Sink {
            kind: SinkKind::Otlp,
            url: format!("{}/v1/logs", endpoint.trim_end_matches('/')),
            headers,
            secret: None,
        }
    }

    /// An HTTP endpoint taking OCSF events, signed with `secret`.
    pub fn ocsf(url: &str, secret: Secret) -> Sink {
        Sink {
            kind: SinkKind::Ocsf,
            url: url.to_owned(),
            headers: Vec::new(),
            secret: Some(secret),
        }
    }

    /// Its form.
    pub fn kind(&self) -> SinkKind {
        self.kind
    }
}

/// What a streamer does: its sinks and how it paces them.
#[derive(Debug, Clone)]
pub struct StreamOptions {
    /// Where rows go, each from its own cursor.
    pub sinks: Vec<Sink>,
    /// Rows per request.
    pub batch: usize,
    /// How often a streamer that caught up looks for new rows.
    pub poll: Duration,
    /// How long a lease lasts unless renewed.
    pub lease: Duration,
    /// The longest wait between retries.
    pub max_backoff: Duration,
    /// How long one request may take.
    pub timeout: Duration,
}

impl StreamOptions {
    /// The options `stream:` in the configuration `origin` gives, secrets read from `env`:
    /// an error naming the field or variable when one is missing or unusable (never a
    /// streamer that silently sends nothing).
    pub fn from_settings(
        settings: &StreamSettings,
        env: &dyn Env,
        origin: &str,
    ) -> Result<StreamOptions, ConfigError> {
        let invalid = |field: &str, message: String| ConfigError::Invalid {
            origin: origin.to_owned(),
            field: field.to_owned(),
            message,
        };
        let from_env = |field: &str, var: &str| {
            env.var(var)
                .ok_or_else(|| invalid(field, format!("the variable {var} is not set")))
        };
        let mut sinks = Vec::new();
        if let Some(otlp) = &settings.otlp {
            let endpoint = match (&otlp.endpoint, &otlp.endpoint_env) {
                (Some(url), _) => url.clone(),
                (None, Some(var)) => from_env("stream.otlp.endpoint_env", var)?,
                (None, None) => return Err(invalid("stream.otlp", "no endpoint".to_owned())),
            };
            let headers = match &otlp.headers_env {
                Some(var) => parse_headers(&from_env("stream.otlp.headers_env", var)?)
                    .map_err(|message| invalid("stream.otlp.headers_env", message))?,
                None => Vec::new(),
            };
            sinks.push(Sink::otlp(&endpoint, headers));
        }
        if let Some(ocsf) = &settings.ocsf {
            let url = match (&ocsf.url, &ocsf.url_env) {
                (Some(url), _) => url.clone(),
                (None, Some(var)) => from_env("stream.ocsf.url_env", var)?,
                (None, None) => return Err(invalid("stream.ocsf", "no url".to_owned())),
            };
            let var = ocsf.secret_env.as_deref().unwrap_or(vars::STREAM_SECRET);
            let secret = Secret::new(from_env("stream.ocsf.secret_env", var)?);
            sinks.push(Sink::ocsf(&url, secret));
        }
        let options = StreamOptions {
            sinks,
            batch: settings.batch.unwrap_or(DEFAULT_BATCH),
            poll: settings.poll.unwrap_or(DEFAULT_POLL),
            lease: settings.lease.unwrap_or(DEFAULT_LEASE),
            max_backoff: settings.max_backoff.unwrap_or(DEFAULT_MAX_BACKOFF),
            timeout: settings.timeout.unwrap_or(DEFAULT_TIMEOUT),
        };
        // A request must end well inside the lease, or another streamer could take the
        // lease while this one's batch is still on its way (and send it again).
        if options.lease < options.timeout * 2 {
            return Err(invalid(
                "stream.lease",
                format!(
                    "at least twice stream.timeout ({}s)",
                    options.timeout.as_secs_f64()
                ),
            ));
        }
        Ok(options)
    }
}

/// `Name=value,Other=value` (the form of `OTEL_EXPORTER_OTLP_HEADERS`); the error never
/// repeats a value.
fn parse_headers(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for (i, pair) in text.split(',').enumerate() {
        if pair.trim().is_empty() {
            continue;
        }
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("header {}: expected Name=value", i + 1))?;
        let name = name.trim();
        let value = value.trim();
        if http::HeaderName::from_bytes(name.as_bytes()).is_err()
            || http::HeaderValue::from_str(value).is_err()
        {
            return Err(format!(
                "header {}: not a valid header name or value",
                i + 1
            ));
        }
        out.push((name.to_owned(), value.to_owned()));
    }
    Ok(out)
}

/// Why a pass did not deliver its rows.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The ledger could not be read or the cursor not written.
    #[error("ledger")]
    Ledger(#[from] LedgerError),
    /// The request did not reach the receiver, or its answer did not come back.
    #[error("{sink}: cannot reach the receiver")]
    Send {
        /// The sink.
        sink: &'static str,
        /// Why (without the URL).
        #[source]
        source: reqwest::Error,
    },
    /// The receiver answered with a status that is not success.
    #[error("{sink}: the receiver answered {status}")]
    Status {
        /// The sink.
        sink: &'static str,
        /// The HTTP status.
        status: u16,
    },
    /// A stored body does not read as an entry (`attest verify` says more).
    #[error("seq {seq} cannot be streamed: {detail}")]
    BadRow {
        /// The row.
        seq: u64,
        /// What is wrong.
        detail: String,
    },
    /// Rows after the cursor are gone (pruned before they were streamed): the stream
    /// stops rather than skip them.
    #[error("{sink}: rows {from}..{first} were pruned before they were streamed (the prune archive holds them); the stream stops here")]
    Pruned {
        /// The sink.
        sink: &'static str,
        /// The first row the sink still needs.
        from: u64,
        /// The first row the ledger still holds.
        first: u64,
    },
}

impl StreamError {
    /// Whether trying again may help (a receiver down, a ledger busy); otherwise the
    /// stream for that sink stops until a person acts.
    pub fn is_transient(&self) -> bool {
        match self {
            StreamError::Send { .. } | StreamError::Status { .. } => true,
            StreamError::Ledger(err) => !err.is_damaged(),
            StreamError::BadRow { .. } | StreamError::Pruned { .. } => false,
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pass {
    /// Rows `from..=to` were acknowledged and the cursor moved to `to`.
    Sent {
        /// The first row sent.
        from: u64,
        /// The last.
        to: u64,
    },
    /// The sink is caught up with the ledger.
    Idle,
    /// Another streamer holds the sink's lease.
    Busy,
    /// The receiver acknowledged rows `from..=to`, but the lease was lost before the
    /// cursor moved (this streamer stalled past it): the holder now sends them again.
    Lost {
        /// The first row sent.
        from: u64,
        /// The last.
        to: u64,
    },
}

/// One row to send: its seq, entry hash (hex) and stored body.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) seq: u64,
    pub(crate) hash: String,
    pub(crate) body: Vec<u8>,
}

/// Sends a ledger's rows to its sinks.
pub struct Streamer {
    ledger: Arc<Ledger>,
    options: StreamOptions,
    holder: String,
    client: reqwest::Client,
}

impl std::fmt::Debug for Streamer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streamer")
            .field("holder", &self.holder)
            .field("sinks", &self.options.sinks)
            .finish_non_exhaustive()
    }
}

impl Streamer {
    /// A streamer of `ledger` with `options`, holding leases under a name of its own.
    pub fn new(ledger: Arc<Ledger>, options: StreamOptions) -> Streamer {
        let holder = format!(
            "pid-{}-{}",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let client = reqwest::Client::builder()
            .timeout(options.timeout)
            .build()
            .unwrap_or_default();
        Streamer {
            ledger,
            options,
            holder,
            client,
        }
    }

    /// The name its leases are held under.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Its sinks.
    pub fn sinks(&self) -> &[Sink] {
        &self.options.sinks
    }

    /// One batch to `sink`: the rows after its cursor, sent and acknowledged, the cursor
    /// moved.
    pub async fn pass(&self, sink: &Sink) -> Result<Pass, StreamError> {
        let name = sink.kind.name();
        // Idle streamers only read: the lease (a write) is taken when there is work.
        let seen = self.ledger.stream_cursor(name)?;
        let head = self.ledger.tip()?.map_or(0, |(seq, _)| seq);
        if head <= seen.seq {
            return Ok(Pass::Idle);
        }
        let Some(cursor) = self
            .ledger
            .stream_lease(name, &self.holder, self.options.lease)?
        else {
            return Ok(Pass::Busy);
        };
        let rows = self.rows_after(cursor.seq)?;
        let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
            return Ok(Pass::Idle);
        };
        let (from, to) = (first.seq, last.seq);
        if from != cursor.seq + 1 {
            return Err(StreamError::Pruned {
                sink: name,
                from: cursor.seq + 1,
                first: from,
            });
        }
        self.send(sink, &rows).await?;
        // The commit point: the receiver has the rows; the cursor says so once this
        // write lands. A crash before it sends the batch again on restart.
        if self
            .ledger
            .stream_advance(name, &self.holder, cursor.seq, to, self.options.lease)?
        {
            Ok(Pass::Sent { from, to })
        } else {
            Ok(Pass::Lost { from, to })
        }
    }

    /// The rows after `seq`, at most a batch.
    fn rows_after(&self, seq: u64) -> Result<Vec<Row>, LedgerError> {
        let mut rows = Vec::new();
        let batch = self.options.batch.max(1);
        self.ledger.for_each_row(seq + 1, |row| {
            rows.push(Row {
                seq: row.seq,
                hash: to_hex(&entry_hash(row.body)),
                body: row.body.to_vec(),
            });
            Ok(rows.len() < batch)
        })?;
        Ok(rows)
    }

    async fn send(&self, sink: &Sink, rows: &[Row]) -> Result<(), StreamError> {
        let name = sink.kind.name();
        let mut request = self.client.post(&sink.url);
        let body = match sink.kind {
            SinkKind::Otlp => {
                request = request.header("content-type", "application/x-protobuf");
                otlp::encode(rows, unix_nanos(SystemTime::now()))?
            }
            SinkKind::Ocsf => {
                let body = ocsf::encode(rows)?;
                let ts = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let secret = sink
                    .secret
                    .as_ref()
                    .ok_or(LedgerError::Internal("an OCSF sink without its secret"))?;
                request = request
                    .header("content-type", "application/json")
                    .header(
                        attest_core::approvals::WEBHOOK_TIMESTAMP_HEADER,
                        ts.to_string(),
                    )
                    .header(WEBHOOK_SIGNATURE_HEADER, sign_webhook(secret, ts, &body));
                body
            }
        };
        for (header, value) in &sink.headers {
            request = request.header(header, value);
        }
        let send = |source: reqwest::Error| StreamError::Send {
            sink: name,
            source: source.without_url(),
        };
        let mut response = request.body(body).send().await.map_err(send)?;
        let status = response.status();
        if !status.is_success() {
            return Err(StreamError::Status {
                sink: name,
                status: status.as_u16(),
            });
        }
        let mut answer = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(send)? {
            if answer.len() + chunk.len() > MAX_ANSWER {
                break;
            }
            answer.extend_from_slice(&chunk);
        }
        if sink.kind == SinkKind::Otlp {
            // A partial success is final (the OTLP spec: the client must not retry it): the
            // receiver took the rows it could; say what it refused.
            if let Some((count, message)) = otlp::rejected(&answer) {
                eprintln!(
                    "attest: stream otlp: the receiver rejected {count} of rows {}..{}: {}",
                    rows.first().map_or(0, |r| r.seq),
                    rows.last().map_or(0, |r| r.seq),
                    crate::terminal::escape(&message)
                );
            }
        }
        Ok(())
    }

    /// Streams every sink until `stop` resolves (or, with `once`, until each is caught
    /// up): batches back to back while rows wait, a look every `poll` once caught up,
    /// retries with backoff while a sink is down. Returns the first error that retrying
    /// cannot mend (and, with `once`, any error).
    pub async fn run(
        &self,
        stop: impl std::future::Future<Output = ()>,
        once: bool,
    ) -> Result<Totals, StreamError> {
        let sinks = self
            .options
            .sinks
            .iter()
            .map(|sink| self.follow(sink, once));
        let all = futures_util::future::join_all(sinks);
        tokio::select! {
            results = all => {
                let mut totals = Totals::default();
                for result in results {
                    totals.rows += result?.rows;
                }
                Ok(totals)
            }
            () = stop => Ok(Totals::default()),
        }
    }

    async fn follow(&self, sink: &Sink, once: bool) -> Result<Totals, StreamError> {
        let name = sink.kind.name();
        let mut totals = Totals::default();
        let mut backoff = FIRST_BACKOFF;
        loop {
            match self.pass(sink).await {
                Ok(Pass::Sent { from, to }) => {
                    totals.rows += to - from + 1;
                    backoff = FIRST_BACKOFF;
                }
                Ok(Pass::Lost { from, to }) => {
                    eprintln!(
                        "attest: stream {name}: the lease was lost after rows {from}..{to} were acknowledged; its holder sends them again"
                    );
                }
                Ok(Pass::Idle) if once => return Ok(totals),
                Ok(Pass::Busy) if once => {
                    eprintln!("attest: stream {name}: another streamer holds the lease; it sends these rows");
                    return Ok(totals);
                }
                Ok(Pass::Idle | Pass::Busy) => tokio::time::sleep(self.options.poll).await,
                Err(err) if once || !err.is_transient() => return Err(err),
                Err(err) => {
                    eprintln!(
                        "attest: stream: {}; retrying in {:.1}s",
                        crate::chain(&err),
                        backoff.as_secs_f64()
                    );
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(self.options.max_backoff);
                }
            }
        }
    }

    /// Gives this streamer's leases up, so the next streamer starts at once.
    pub fn release(&self) {
        for sink in &self.options.sinks {
            if let Err(err) = self.ledger.stream_release(sink.kind.name(), &self.holder) {
                eprintln!(
                    "attest: stream {}: cannot release the lease: {}",
                    sink.kind.name(),
                    crate::chain(&err)
                );
            }
        }
    }
}

/// What a run sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Rows acknowledged.
    pub rows: u64,
}

fn unix_nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Where one sink stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SinkStatus {
    /// The sink.
    pub sink: &'static str,
    /// The newest row it acknowledged (0: none).
    pub cursor: u64,
    /// The ledger's newest row.
    pub head: u64,
    /// Rows appended and not yet acknowledged.
    pub lag: u64,
    /// The streamer holding its lease, while one does.
    pub holder: Option<String>,
}

/// Where each of `sinks` stands on `ledger`.
pub fn status(ledger: &Ledger, sinks: &[SinkKind]) -> Result<Vec<SinkStatus>, LedgerError> {
    let head = ledger.tip()?.map_or(0, |(seq, _)| seq);
    let now = unix_nanos(SystemTime::now()) / 1_000_000;
    sinks
        .iter()
        .map(|kind| {
            let cursor = ledger.stream_cursor(kind.name())?;
            let live = i64::try_from(now).unwrap_or(i64::MAX) < cursor.until_ms;
            Ok(SinkStatus {
                sink: kind.name(),
                cursor: cursor.seq,
                head,
                lag: head.saturating_sub(cursor.seq),
                holder: cursor.holder.filter(|_| live),
            })
        })
        .collect()
}

/// A streamer running on a thread of its own; dropping it stops the streamer and gives
/// its leases up.
pub struct StreamHandle {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for StreamHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamHandle").finish_non_exhaustive()
    }
}

/// Starts streaming `ledger` to `options`' sinks on a thread of its own (its own small
/// runtime, so a door's requests never wait behind the stream's ledger reads). An error
/// that retrying cannot mend is printed and ends the stream, never the door.
pub fn spawn(ledger: Arc<Ledger>, options: StreamOptions) -> std::io::Result<StreamHandle> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let thread = std::thread::Builder::new()
        .name("attest-stream".to_owned())
        .spawn(move || {
            let streamer = Streamer::new(ledger, options);
            let outcome = runtime.block_on(streamer.run(
                async {
                    // A dropped sender stops the stream as a sent stop does.
                    let _ = stopped.await;
                },
                false,
            ));
            if let Err(err) = outcome {
                eprintln!("attest: the audit stream stopped: {}", crate::chain(&err));
                streamer.release();
                return;
            }
            // A door that stops (an MCP client closing the proxy's stdin) sends what its
            // last calls appended before it goes, for at most one request's time per
            // batch; what does not make it waits in the ledger for the next streamer.
            let drain = runtime.block_on(async {
                let deadline = tokio::time::sleep(streamer.options.timeout);
                streamer.run(deadline, true).await
            });
            if let Err(err) = drain {
                eprintln!(
                    "attest: the audit stream stopped with rows unsent (they wait in the ledger): {}",
                    crate::chain(&err)
                );
            }
            streamer.release();
        })?;
    Ok(StreamHandle {
        stop: Some(stop),
        thread: Some(thread),
    })
}

impl Drop for StreamHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::parse_headers;

    #[test]
    fn headers_parse_and_a_bad_one_is_named_without_its_value() {
        assert_eq!(
            parse_headers("Authorization=Bearer abc, X-Scope = t1").unwrap(),
            vec![
                ("Authorization".to_owned(), "Bearer abc".to_owned()),
                ("X-Scope".to_owned(), "t1".to_owned())
            ]
        );
        let err = parse_headers("A=1,secretvalue").unwrap_err();
        assert!(
            err.contains("header 2") && !err.contains("secretvalue"),
            "{err}"
        );
    }
}
