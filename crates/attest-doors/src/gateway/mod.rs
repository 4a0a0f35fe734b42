//! `attest gateway`: a forwarding HTTP proxy for agents that call REST APIs.
//!
//! The upstream URL comes from the path (`/https://api.example.com/v1/notes`), else the
//! `X-Attest-Upstream` header (a base URL the path is appended to), else `--upstream`.
//!
//! - Reads (a `GET` or `HEAD` detected as `read`/`search`/`get`/`list`, which policy lets
//!   act) are forwarded as they are; with `--record-reads` they go through the pipeline and are recorded. Any
//!   other method goes through the pipeline whatever its path says, and a request is
//!   judged by its riskiest reading: method-override headers (`X-HTTP-Method-Override`…),
//!   `_method`, every GraphQL operation and root field, `;` parameters and encoded
//!   separators all count.
//! - Writes are detected from method + URL + body (and `--openapi` operation ids), decided,
//!   and forwarded with the caller's headers (hop-by-hop and `X-Attest-*` dropped). The
//!   ledger gets hashes only: no header, and never `Authorization`, is recorded.
//! - A refusal or rejection is a 403 with a JSON body, and the upstream is never called.
//! - A write that ran is read back by attest-core: the system's recipe through the
//!   vendor's API with the recipe's credential variable (`read-back:recipe`), else
//!   [`caller_read_back`] with the caller's credentials (`read-back:gateway`).
//! - `X-Attest-Agent`, `X-Attest-Actor`, `X-Attest-Run` name the request's agent, actor and
//!   run in its row; like every `X-Attest-*` header they are never forwarded.
//! - `X-Attest-Tenant` names the tenant whose chain records the request (see
//!   [`crate::gateway::tenants`]); a resume names the tenant that holds its request.
//! - A read is forwarded unrecorded only when policy lets it act: a read an organisation
//!   rule blocks is refused (403, recorded) and never reaches the upstream.
//! - Responses carry `X-Attest-Decision`, `X-Attest-Level`, `X-Attest-Seq`.
//! - A write with an `Idempotency-Key` runs once per key and request: a retry gets the
//!   first response again, marked `Idempotent-Replayed: true` (see `crate::gateway::replay`);
//!   the same key with another request is a 422, and one whose first request has not
//!   ended a 409.
//! - Request and response bodies are capped (`--max-body`). A request body is read whole,
//!   because a write is detected and hashed from it; so is the answer to a recorded call,
//!   which is verified from it. The answer to an unrecorded read streams through.
//!
//! - It is not an open forwarder: with `--upstream` set (or any `--allow-upstream`), a path
//!   URL or `X-Attest-Upstream` may name only that upstream's origin or an allow-listed
//!   host (403 otherwise). With a token (`--token-file`, `ATTEST_GATEWAY_TOKEN`; required to
//!   listen beyond loopback) every request must carry it in `X-Attest-Token` (401 otherwise).
//!   Paths under `/_attest/` are the gateway's own and never forwarded (404).
//! - A request held for a person is a 202 with its id, resume token and resume URL;
//!   once approved, `POST /_attest/resume/{token}` with the caller's own headers sends the
//!   approved request upstream (the gateway never keeps credentials). The path
//!   `/_attest/` is the gateway's own and is never forwarded.

mod rejection;
pub(crate) mod replay;
pub mod tenants;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use attest_core::approvals::ResumeToken;
use attest_core::verification::caller_read_back;
use attest_core::{
    Attest, AttestError, HttpCall, HttpOptions, HttpReader, Outcome, ProtocolCall, Receipt,
};
use attest_policy::{Action, Decision};
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path as UrlPath, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use reqwest::Url;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use self::rejection::Rejection;
use self::tenants::{Picked, TenantRefusal, Tenants};
use crate::{chain, held_json, not_recorded_text};
use attest_core::agents::{AgentAuth, AgentIdentity, AgentRefusal};

/// The header that names the upstream base URL.
pub const UPSTREAM_HEADER: &str = "x-attest-upstream";

/// The header that carries the gateway's token, when it has one.
pub const TOKEN_HEADER: &str = "x-attest-token";

/// The gateway's own path prefix: never forwarded.
const OWN_PREFIX: &str = "/_attest";

/// Where the gateway serves its metrics (its own path: never forwarded).
const METRICS_PATH: &str = "/_attest/metrics";

/// What `attest gateway` was asked to do.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// The default upstream base URL.
    pub upstream: Option<Url>,
    /// Record reads too.
    pub record_reads: bool,
    /// Largest request or response body, in bytes.
    pub max_body: usize,
    /// How long one upstream request may take.
    pub upstream_timeout: Duration,
    /// Hosts (`host` or `host:port`) a path URL or `X-Attest-Upstream` may name besides
    /// the upstream's own origin.
    pub allow_upstream: Vec<String>,
    /// The token callers must send in `X-Attest-Token`, when set.
    pub token: Option<GatewayToken>,
    /// Authenticated agents: each caller's own token or JWT in `X-Attest-Token` names
    /// its agent (replacing the shared `token`).
    pub agents: Option<Arc<AgentAuth>>,
    /// Who may scrape `/_attest/metrics`.
    pub metrics: crate::scrape::ScrapeAccess,
}

/// The gateway's token, kept as its SHA-256 so that comparing it takes the same time
/// whatever the guess; never printed.
#[derive(Clone)]
pub struct GatewayToken([u8; 32]);

impl GatewayToken {
    /// The token `text` (surrounding whitespace trimmed); `None` when empty.
    pub fn new(text: &str) -> Option<Self> {
        let text = text.trim();
        (!text.is_empty()).then(|| GatewayToken(Sha256::digest(text.as_bytes()).into()))
    }

    fn accepts(&self, headers: &HeaderMap) -> bool {
        headers
            .get(TOKEN_HEADER)
            .is_some_and(|given| Sha256::digest(given.as_bytes()).as_slice() == self.0)
    }
}

impl std::fmt::Debug for GatewayToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GatewayToken(…)")
    }
}

/// The gateway's shared state: the pipeline, an HTTP client, the options.
#[derive(Clone)]
pub struct GatewayState(Arc<Inner>);

struct Inner {
    attest: Attest,
    tenants: Tenants,
    client: reqwest::Client,
    reader: HttpReader,
    options: GatewayOptions,
}

impl GatewayState {
    /// Builds the state; the HTTP client follows no redirects (the caller sees them).
    /// `attest` serves requests that name no tenant, `tenants` those that do.
    pub fn with_tenants(
        attest: Attest,
        tenants: Tenants,
        options: GatewayOptions,
    ) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(options.upstream_timeout)
            .build()
            .context("cannot build the HTTP client")?;
        let reader = HttpReader::new(HttpOptions::default())
            .context("cannot build the read-back HTTP client")?;
        Ok(GatewayState(Arc::new(Inner {
            attest,
            tenants,
            client,
            reader,
            options,
        })))
    }
}

/// The gateway's routes: every method and path goes to the forwarder.
pub fn router(state: GatewayState) -> Router {
    let limit = state.0.options.max_body;
    let metrics = crate::scrape::route(
        METRICS_PATH,
        state.0.options.metrics.clone(),
        Arc::clone(state.0.attest.ledger()),
    );
    Router::new()
        .route("/_attest/resume/{token}", post(resume))
        .fallback(forward)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
        .merge(metrics)
}

/// Serves `router(state)` on `listener` until the process is stopped.
pub async fn serve(listener: tokio::net::TcpListener, state: GatewayState) -> anyhow::Result<()> {
    let app = router(state).into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, app)
        .await
        .context("the gateway stopped")
}

pub(crate) fn add_receipt_headers(headers: &mut HeaderMap, receipt: &Receipt) {
    let level = receipt.level.map_or("none", |l| l.as_str());
    for (name, value) in [
        ("x-attest-decision", receipt.decision.as_str().to_owned()),
        ("x-attest-level", level.to_owned()),
        ("x-attest-seq", receipt.seq.to_string()),
    ]
    .into_iter()
    .chain(receipt.warning.as_ref().map(|_| {
        (
            "x-attest-warning",
            format!(
                "outcome not recorded: the request ran (intent seq {}); do not retry",
                receipt.seq
            ),
        )
    })) {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
}

/// Why a request has no upstream the gateway will call.
#[derive(Debug, PartialEq, Eq)]
enum TargetError {
    /// The request is malformed (400).
    Bad(String),
    /// It names an upstream that is not allowed (403).
    NotAllowed(String),
}

impl TargetError {
    fn into_response(self) -> Response {
        match self {
            TargetError::Bad(why) => Rejection::BadRequest(why).into_response(),
            TargetError::NotAllowed(why) => Rejection::Forbidden(why).into_response(),
        }
    }
}

/// The upstream URL of a request: from the path, the header or `--upstream`. A path or
/// header override must name the default upstream's origin or an allow-listed host
/// whenever either is configured.
fn target_url(
    uri: &Uri,
    headers: &HeaderMap,
    options: &GatewayOptions,
) -> Result<Url, TargetError> {
    let path_and_query = uri.path_and_query().map_or("/", |pq| pq.as_str());
    let embedded = path_and_query.strip_prefix('/').unwrap_or(path_and_query);
    let overridden = if embedded.starts_with("http://") || embedded.starts_with("https://") {
        Some(checked(Url::parse(embedded), "the URL in the path"))
    } else if let Some(base) = headers.get(UPSTREAM_HEADER) {
        let base = base
            .to_str()
            .map_err(|_| TargetError::Bad(format!("{UPSTREAM_HEADER} is not text")))?;
        let base = checked(Url::parse(base), UPSTREAM_HEADER)?;
        Some(checked(join(&base, path_and_query), UPSTREAM_HEADER))
    } else {
        None
    };
    if let Some(url) = overridden {
        let url = url?;
        if !upstream_allowed(&url, options) {
            return Err(TargetError::NotAllowed(format!(
                "the upstream {} is not allowed: this gateway forwards to its --upstream and the hosts given with --allow-upstream",
                url.origin().ascii_serialization()
            )));
        }
        return Ok(url);
    }
    let default = options.upstream.as_ref();
    match default {
        Some(base) => checked(join(base, path_and_query), "--upstream"),
        None => Err(TargetError::Bad(format!(
            "no upstream: put the full URL in the path (/https://host/...), send {UPSTREAM_HEADER}, or start the gateway with --upstream"
        ))),
    }
}

/// Whether a path or header override may name `url`: always when neither `--upstream`
/// nor `--allow-upstream` is set (a loopback-only forwarder), else only the upstream's
/// origin or an allow-listed `host` / `host:port`.
fn upstream_allowed(url: &Url, options: &GatewayOptions) -> bool {
    if options.upstream.is_none() && options.allow_upstream.is_empty() {
        return true;
    }
    if options
        .upstream
        .as_ref()
        .is_some_and(|up| up.origin() == url.origin())
    {
        return true;
    }
    let host = url.host_str().unwrap_or("").to_ascii_lowercase();
    let with_port = format!("{host}:{}", url.port_or_known_default().unwrap_or(0));
    options.allow_upstream.iter().any(|allowed| {
        let allowed = allowed.trim().to_ascii_lowercase();
        allowed == host || allowed == with_port
    })
}

/// True for the gateway's own paths (`/_attest`, `/_attest/…`), in any case, with `_`
/// and `/` percent-encoded or not.
fn is_own_path(path: &str) -> bool {
    let lower = path
        .to_ascii_lowercase()
        .replace("%5f", "_")
        .replace("%2f", "/");
    let trimmed = lower.trim_start_matches('/');
    trimmed == &OWN_PREFIX[1..] || trimmed.starts_with(&format!("{}/", &OWN_PREFIX[1..]))
}

fn join(base: &Url, path_and_query: &str) -> Result<Url, url_error::ParseError> {
    let mut text = base.as_str().trim_end_matches('/').to_owned();
    text.push_str(path_and_query);
    Url::parse(&text)
}

/// `reqwest` re-exports `Url` but not its error type's path; name it once here.
mod url_error {
    pub(super) type ParseError = <reqwest::Url as std::str::FromStr>::Err;
}

fn checked(url: Result<Url, url_error::ParseError>, from: &str) -> Result<Url, TargetError> {
    let url = url.map_err(|err| TargetError::Bad(format!("{from}: not a URL: {err}")))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(TargetError::Bad(format!(
            "{from}: scheme `{other}` is not http or https"
        ))),
    }
}

/// Hop-by-hop headers (RFC 9110 §7.6.1), and headers the client rebuilds.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

fn forwardable(name: &HeaderName, connection: &[String]) -> bool {
    let name = name.as_str();
    !HOP_BY_HOP.contains(&name)
        && !name.starts_with("x-attest-")
        && !connection.iter().any(|listed| listed == name)
}

/// The caller's headers as they go upstream (and the upstream's as they come back).
fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let connection: Vec<String> = headers
        .get_all("connection")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.trim().to_ascii_lowercase())
        .collect();
    headers
        .iter()
        .filter(|(name, _)| forwardable(name, &connection))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// What the upstream answered.
struct Upstreamed {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl serde::Serialize for Upstreamed {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.recorded().serialize(serializer)
    }
}

impl Upstreamed {
    fn into_response(self, receipt: Option<&Receipt>) -> Response {
        let mut response = Response::new(Body::from(self.body));
        *response.status_mut() = self.status;
        *response.headers_mut() = end_to_end(&self.headers);
        if let Some(receipt) = receipt {
            add_receipt_headers(response.headers_mut(), receipt);
        }
        response
    }

    /// The JSON the pipeline checks and hashes (see [`Upstreamed::value`]).
    fn recorded(&self) -> Value {
        self.value()
    }

    /// The JSON the pipeline checks and hashes: `{"status", "body"}`, and `"location"`
    /// when the upstream sent one (where a read-back may find the record).
    fn value(&self) -> Value {
        let body = serde_json::from_slice::<Value>(&self.body).unwrap_or(Value::Null);
        let mut value = json!({"status": self.status.as_u16(), "body": body});
        if let Some(location) = self.headers.get("location").and_then(|v| v.to_str().ok()) {
            value["location"] = Value::String(location.to_owned());
        }
        value
    }
}

/// Sends the request upstream and returns its answer before the body is read; an
/// answer that declares a body over the cap is an error.
async fn send_head(
    state: &Inner,
    method: &Method,
    url: &Url,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<reqwest::Response, String> {
    let response = state
        .client
        .request(method.clone(), url.clone())
        .headers(end_to_end(headers))
        .body(body)
        .send()
        .await
        .map_err(|err| format!("{} {url}: {}", method, chain(&err)))?;
    let cap = state.options.max_body;
    if response.content_length().is_some_and(|n| n > cap as u64) {
        return Err(format!(
            "{method} {url}: the response is larger than {cap} bytes"
        ));
    }
    Ok(response)
}

/// An unrecorded read: the upstream's answer streams to the caller as it arrives. A body
/// that runs past the cap without declaring its length is cut off there (the caller
/// sees the connection end early), since the status line has already gone out.
/// An `act` that policy gave (not shadow mode's stand-in for an ask or a refusal).
fn is_plain_act(verdict: &attest_policy::Verdict) -> bool {
    // A read under a rate limit counts against it: it is decided and recorded.
    verdict.decision == Decision::Act
        && !attest_core::is_unenforced(verdict)
        && verdict.windows.is_empty()
}

async fn pass_through(
    state: &Inner,
    method: &Method,
    url: &Url,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let response = match send_head(state, method, url, headers, body).await {
        Ok(response) => response,
        Err(why) => return Rejection::Unreachable(why).into_response(),
    };
    let status = response.status();
    let upstream_headers = end_to_end(response.headers());
    let cap = state.options.max_body;
    let chunks = futures_util::stream::try_unfold(
        (response, 0usize),
        move |(mut response, seen)| async move {
            let Some(chunk) = response.chunk().await? else {
                return Ok(None);
            };
            let seen = seen + chunk.len();
            if seen > cap {
                return Err(BoxError::from(format!(
                    "the response is larger than {cap} bytes"
                )));
            }
            Ok(Some((chunk, (response, seen))))
        },
    );
    let mut answer = Response::new(Body::from_stream(chunks));
    *answer.status_mut() = status;
    *answer.headers_mut() = upstream_headers;
    answer
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Sends the request upstream and reads the whole answer (up to the cap): what a
/// recorded call needs to verify and hash.
async fn send(
    state: &Inner,
    method: &Method,
    url: &Url,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Upstreamed, String> {
    let mut response = send_head(state, method, url, headers, body).await?;
    let cap = state.options.max_body;
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| format!("{method} {url}: reading the response: {}", chain(&err)))?
    {
        if body.len() + chunk.len() > cap {
            return Err(format!(
                "{method} {url}: the response is larger than {cap} bytes"
            ));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Upstreamed {
        status: response.status(),
        headers: response.headers().clone(),
        body: Bytes::from(body),
    })
}

/// The request as core's HTTP call: core detects it (method-override headers, OpenAPI
/// operation ids, the configured registry) and reads the identity headers.
fn action_for(
    attest: &Attest,
    method: &Method,
    url: &Url,
    headers: &HeaderMap,
    body: &Bytes,
) -> Action {
    attest.action(ProtocolCall::Http(HttpCall {
        method: method.as_str(),
        url: url.as_str(),
        headers: headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_bytes()))
            .collect(),
        body,
        ..HttpCall::default()
    }))
}

/// `GET` and `HEAD`: the only methods that may be passed through unrecorded.
fn is_read_method(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

/// The caller's credentials, for reading its own write back (never recorded).
fn credentials(headers: &HeaderMap) -> Vec<(String, String)> {
    ["authorization", "cookie", "x-api-key"]
        .into_iter()
        .filter_map(|name| {
            let value = headers.get(name)?.to_str().ok()?;
            Some((name.to_owned(), value.to_owned()))
        })
        .collect()
}

/// Why the upstream did not give a 2xx answer: its own answer (returned to the caller as
/// it is), or no answer at all.
enum Unanswered {
    Status(Upstreamed),
    Transport(String),
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unanswered::Status(up) => write!(f, "the upstream answered {}", up.status),
            Unanswered::Transport(why) => f.write_str(why),
        }
    }
}

/// Sends a request upstream: the tool of a governed call.
async fn execute(
    state: &Inner,
    method: &Method,
    url: &Url,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Upstreamed, Unanswered> {
    match send(state, method, url, headers, body).await {
        Ok(up) if up.status.is_success() => Ok(up),
        Ok(up) => Err(Unanswered::Status(up)),
        Err(why) => Err(Unanswered::Transport(why)),
    }
}

async fn forward(
    State(state): State<GatewayState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let state = state.0;
    let (attest, identity) = match tenant_and_agent(&state, &headers).await {
        Ok(picked) => picked,
        Err(refused) => return refused,
    };
    if is_own_path(uri.path()) {
        return Rejection::NotFound(
            "no such gateway endpoint; /_attest/ is never forwarded".to_owned(),
        )
        .into_response();
    }
    let url = match target_url(&uri, &headers, &state.options) {
        Ok(url) => url,
        Err(why) => return why.into_response(),
    };
    // A body in a content coding it cannot undo is refused before anything else.
    let coding = headers
        .get(axum::http::header::CONTENT_ENCODING)
        .map(|v| v.to_str().unwrap_or("?"));
    if let Err(why) = attest_core::http_body::decode_content(coding, &body) {
        let status = StatusCode::from_u16(why.status()).unwrap_or(StatusCode::BAD_REQUEST);
        return Rejection::Refused(status, why.to_string()).into_response();
    }
    let mut action = action_for(&attest, &method, &url, &headers, &body);
    if let Some(identity) = &identity {
        identity.apply(&mut action);
    }
    // Only a GET or HEAD detected as a read, which policy lets run, goes by unrecorded:
    // any other method may change state whatever its path says, and a read policy
    // refuses or asks about (an organisation's `blocked` rule) is decided and recorded,
    // in shadow mode too (its row carries the verdict that was not enforced).
    if action.verb.is_read()
        && is_read_method(&method)
        && !state.options.record_reads
        && is_plain_act(&attest.verdict(&action))
    {
        return pass_through(&state, &method, &url, &headers, body).await;
    }
    let key = match replay::key_of(&headers) {
        Ok(key) => key,
        Err(why) => return Rejection::BadRequest(why).into_response(),
    };
    let check = (!action.verb.is_read() && method != Method::DELETE)
        .then(|| caller_read_back(state.reader.clone(), credentials(&headers)));
    let mut call = attest.call(action);
    if let Some(check) = &check {
        call = call.check(check);
    }
    if let Some(key) = key {
        call = call
            .idempotency_key(key)
            .credential(replay::credential_of(&headers));
    }
    let outcome = call
        .run_keeping(
            |_params: Value| execute(&state, &method, &url, &headers, body),
            kept_response,
        )
        .await;
    respond(&attest, &method, &url, outcome)
}

/// What a retry with the same `Idempotency-Key` is answered with: the response this
/// outcome gives (see [`replay`]).
fn kept_response(outcome: &Outcome<Upstreamed, Unanswered>) -> Option<Vec<u8>> {
    match outcome {
        Outcome::Ran { output: up, .. }
        | Outcome::Failed {
            error: Unanswered::Status(up),
            ..
        } => replay::keep(up.status, &up.headers, &up.body),
        Outcome::Failed {
            error: Unanswered::Transport(why),
            receipt,
        } => replay::keep_json(
            StatusCode::BAD_GATEWAY,
            &Rejection::transport_failed_body(why, receipt),
        ),
        _ => None,
    }
}

/// A request whose tenant the gateway refuses; nothing was sent upstream.
fn refused_tenant(refusal: TenantRefusal) -> Response {
    Rejection::Refused(refusal.status, refusal.message).into_response()
}

/// The request's tenant's pipeline and who calls: with agents configured, the agent the
/// request's `X-Attest-Token` proves in that tenant (its own tokens; the JWT issuer only
/// in the gateway's own tenant), checked against its `X-Attest-Agent` label; else nobody
/// in particular, once the gateway's shared token (when it has one) is there. Refused:
/// the answer to send; nothing was recorded or sent upstream.
async fn tenant_and_agent(
    state: &Inner,
    headers: &HeaderMap,
) -> Result<(Attest, Option<AgentIdentity>), Response> {
    let picked = state
        .tenants
        .pick(&state.attest, headers)
        .await
        .map_err(refused_tenant)?;
    let identity = identify(state, headers, &picked).await?;
    Ok((picked.attest, identity))
}

async fn identify(
    state: &Inner,
    headers: &HeaderMap,
    picked: &Picked,
) -> Result<Option<AgentIdentity>, Response> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let refused = |refusal: AgentRefusal| {
        Rejection::Refused(crate::agents::status(&refusal), refusal.reason).into_response()
    };
    if let Some(agents) = &state.options.agents {
        let in_tenant;
        let agents = if picked.own {
            agents.as_ref()
        } else {
            in_tenant = agents.in_tenant(&picked.attest).map_err(refused)?;
            &in_tenant
        };
        return agents
            .identify(text(TOKEN_HEADER), text(attest_core::AGENT_HEADER))
            .await
            .map(Some)
            .map_err(refused);
    }
    match &state.options.token {
        Some(token) if !token.accepts(headers) => Err(Rejection::NeedsToken(format!(
            "this gateway needs its token in {TOKEN_HEADER}"
        ))
        .into_response()),
        _ => Ok(None),
    }
}

/// `POST /_attest/resume/{token}`: runs a held request once a person approved it, with
/// the caller's headers (the gateway keeps no credentials) and the approved body.
async fn resume(
    State(state): State<GatewayState>,
    UrlPath(token): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    let state = state.0;
    let (attest, identity) = match tenant_and_agent(&state, &headers).await {
        Ok(picked) => picked,
        Err(refused) => return refused,
    };
    let token = ResumeToken::new(token);
    let request = match attest.approvals() {
        Ok(store) => {
            let lookup = token.clone();
            tokio::task::spawn_blocking(move || store.get_by_token(&lookup)).await
        }
        Err(err) => {
            eprintln!("attest gateway: resume: {}", chain(&err));
            return Rejection::Internal("the approval store is not available").into_response();
        }
    };
    let request = match request {
        Ok(Ok(request)) => request,
        Ok(Err(err)) => return Rejection::NotFound(chain(&err)).into_response(),
        Err(_) => return Rejection::Internal("internal error").into_response(),
    };
    // Only the agent that asked resumes what it asked for.
    if let Some(identity) = &identity {
        let asked = request.action.agent.as_deref().unwrap_or_default();
        if !asked.eq_ignore_ascii_case(&identity.name) {
            return Rejection::Forbidden("this request was held for another agent".to_owned())
                .into_response();
        }
    }
    let extra = &request.action.extra;
    let (Some(method), Some(url)) = (extra.method.as_deref(), extra.url.as_deref()) else {
        return Rejection::BadRequest("the held request is not an HTTP call".to_owned())
            .into_response();
    };
    let (Ok(method), Ok(url)) = (method.parse::<Method>(), Url::parse(url)) else {
        return Rejection::BadRequest("the held request's method or URL does not parse".to_owned())
            .into_response();
    };
    // The body sent is the approved params (a person may have edited them): a held raw
    // body byte for byte, else JSON; whatever the resume request carried.
    let mut headers = headers;
    headers.remove(axum::http::header::CONTENT_TYPE);
    let (inner, target, sent) = (&state, (&method, &url), &headers);
    let run = move |params: Value| {
        let (body, content_type) = attest_core::http_body::params_body(&params);
        let mut headers = sent.clone();
        if let Some(value) = content_type.and_then(|ct| HeaderValue::from_str(&ct).ok()) {
            headers.insert(axum::http::header::CONTENT_TYPE, value);
        }
        async move {
            let (method, url) = target;
            execute(inner, method, url, &headers, Bytes::from(body)).await
        }
    };
    let check = (method != Method::DELETE)
        .then(|| caller_read_back(state.reader.clone(), credentials(&headers)));
    let mut call = attest.call(&token);
    if let Some(check) = &check {
        call = call.check(check);
    }
    respond(&attest, &method, &url, call.run(run).await)
}

/// The caller's answer for a governed request: the one mapping of a call's outcome to
/// HTTP.
fn respond(
    attest: &Attest,
    method: &Method,
    url: &Url,
    outcome: Result<Outcome<Upstreamed, Unanswered>, AttestError>,
) -> Response {
    let origin = url.origin().ascii_serialization();
    let not_run =
        |error: String, receipt: Receipt| Rejection::NotRun { error, receipt }.into_response();
    let warn = |receipt: &Receipt| {
        if let Some(warning) = &receipt.warning {
            eprintln!("attest gateway: {method} {origin}: {warning}");
        }
    };
    match outcome {
        Ok(Outcome::Ran { output, receipt }) => {
            warn(&receipt);
            output.into_response(Some(&receipt))
        }
        Ok(Outcome::Failed {
            error: Unanswered::Status(up),
            receipt,
        }) => {
            warn(&receipt);
            up.into_response(Some(&receipt))
        }
        Ok(Outcome::Failed {
            error: Unanswered::Transport(why),
            receipt,
        }) => Rejection::TransportFailed { why, receipt }.into_response(),
        Ok(Outcome::Replayed { receipt, response }) => {
            replay::replayed(&receipt, response.as_deref())
        }
        Err(AttestError::Idempotency(err)) => Rejection::Idempotency(err).into_response(),
        Ok(Outcome::Refused { receipt }) => not_run("refused by policy".to_owned(), receipt),
        Ok(Outcome::Rejected { approver, receipt }) => {
            not_run(format!("not allowed: rejected by {approver}"), receipt)
        }
        Ok(Outcome::Expired { receipt, .. }) => not_run(
            "not allowed: the approval request expired".to_owned(),
            receipt,
        ),
        Ok(Outcome::Held { id, token, receipt }) => {
            let mut body = held_json(attest, &id, &token, &receipt);
            body["resume"] = json!(format!("/_attest/resume/{}", token.expose()));
            Rejection::Held { body, receipt }.into_response()
        }
        // The intent row was not accepted: the upstream was never called. 507 (the
        // server cannot store what the request needs) is not a status clients retry.
        Err(err @ AttestError::NotRecorded(_)) => {
            let text = not_recorded_text("the request", &err);
            eprintln!("attest gateway: {method} {origin}: {text}");
            Rejection::NotRecorded(text).into_response()
        }
        Err(AttestError::Approval(err)) => Rejection::Approval(chain(&err)).into_response(),
        // Not recorded: the ledger (or something it needs) failed.
        Err(err) => {
            eprintln!("attest gateway: {method} {origin}: {}", chain(&err));
            Rejection::Internal(
                "attest could not decide or record this request; see the gateway's log",
            )
            .into_response()
        }
        Ok(_) => {
            eprintln!("attest gateway: {method} {origin}: an outcome this gateway does not know");
            Rejection::Internal("internal error; see the gateway's log").into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(upstream: Option<&str>, allow: &[&str]) -> GatewayOptions {
        GatewayOptions {
            upstream: upstream.map(|u| Url::parse(u).unwrap()),
            record_reads: false,
            max_body: 1024,
            upstream_timeout: Duration::from_secs(1),
            allow_upstream: allow.iter().map(|a| (*a).to_owned()).collect(),
            token: None,
            agents: None,
            metrics: crate::scrape::ScrapeAccess::default(),
        }
    }

    #[test]
    fn upstreams_from_path_header_or_flag() {
        let none = HeaderMap::new();
        let open = options(None, &[]);
        let uri: Uri = "/https://api.example.com/v1/notes?x=1".parse().unwrap();
        assert_eq!(
            target_url(&uri, &none, &open).unwrap().as_str(),
            "https://api.example.com/v1/notes?x=1"
        );
        let uri: Uri = "/v1/notes".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            UPSTREAM_HEADER,
            HeaderValue::from_static("http://127.0.0.1:9/base/"),
        );
        assert_eq!(
            target_url(&uri, &headers, &open).unwrap().as_str(),
            "http://127.0.0.1:9/base/v1/notes"
        );
        let vendor = options(Some("http://vendor.test"), &[]);
        assert_eq!(
            target_url(&uri, &none, &vendor).unwrap().as_str(),
            "http://vendor.test/v1/notes"
        );
        assert!(matches!(
            target_url(&uri, &none, &open),
            Err(TargetError::Bad(why)) if why.contains("no upstream")
        ));
        headers.insert(UPSTREAM_HEADER, HeaderValue::from_static("ftp://x"));
        assert!(matches!(
            target_url(&uri, &headers, &open),
            Err(TargetError::Bad(why)) if why.contains("scheme `ftp`")
        ));
    }

    #[test]
    fn with_an_upstream_overrides_must_be_allow_listed() {
        let none = HeaderMap::new();
        let vendor = options(
            Some("http://vendor.test"),
            &["api.example.com", "127.0.0.1:9"],
        );
        let to =
            |path: &str, headers: &HeaderMap| target_url(&path.parse().unwrap(), headers, &vendor);
        assert!(to("/http://vendor.test/v1/x", &none).is_ok());
        assert!(to("/https://api.example.com/v1/x", &none).is_ok());
        assert!(to("/http://127.0.0.1:9/x", &none).is_ok());
        for path in [
            "/https://evil.example/x",
            "/http://127.0.0.1:10/x",
            "/https://vendor.test/x",
        ] {
            assert!(
                matches!(to(path, &none), Err(TargetError::NotAllowed(_))),
                "{path}"
            );
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            UPSTREAM_HEADER,
            HeaderValue::from_static("https://evil.example"),
        );
        assert!(matches!(
            to("/v1/x", &headers),
            Err(TargetError::NotAllowed(_))
        ));
    }

    #[test]
    fn own_paths_in_any_spelling() {
        for path in [
            "/_attest",
            "/_attest/",
            "/_attest/resume/x",
            "/_ATTEST/x",
            "/%5Fattest/x",
            "//_attest/x",
        ] {
            assert!(is_own_path(path), "{path}");
        }
        for path in ["/", "/_attestx", "/v1/_attest"] {
            assert!(!is_own_path(path), "{path}");
        }
    }

    #[test]
    fn tokens_are_compared_whole() {
        let token = GatewayToken::new(" s3cret\n").unwrap();
        let mut headers = HeaderMap::new();
        assert!(!token.accepts(&headers));
        headers.insert(TOKEN_HEADER, HeaderValue::from_static("s3cre"));
        assert!(!token.accepts(&headers));
        headers.insert(TOKEN_HEADER, HeaderValue::from_static("s3cret"));
        assert!(token.accepts(&headers));
        assert!(GatewayToken::new("  ").is_none());
        assert_eq!(format!("{token:?}"), "GatewayToken(…)");
    }

    #[test]
    fn hop_by_hop_and_attest_headers_stay_behind() {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static("Bearer t"));
        headers.insert(
            "connection",
            HeaderValue::from_static("keep-alive, x-private"),
        );
        headers.insert("x-private", HeaderValue::from_static("1"));
        headers.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        headers.insert(UPSTREAM_HEADER, HeaderValue::from_static("http://x"));
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        let kept = end_to_end(&headers);
        let mut names: Vec<_> = kept.keys().map(|k| k.as_str().to_owned()).collect();
        names.sort();
        assert_eq!(names, ["authorization", "content-type"]);
    }
}
