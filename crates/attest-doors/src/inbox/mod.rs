//! The approval inbox: one web page and a JSON API over the approval store.
//!
//! - `GET /` the page (plain HTML and JS; it asks for the approver's token once per tab
//!   and keeps it in `sessionStorage`);
//! - `GET /healthz`;
//! - `GET /api/me` (`{"approver"}`), `GET /api/pending`, `GET /api/decided?limit=N` (the
//!   newest decisions, newest first), `GET /api/requests/{id}`, `POST /api/requests/{id}/decision`
//!   (`{"decision": "approve"|"reject", "edits"?, "note"?, "grant"?}`, `grant` an approval's
//!   bounded grant as `attest confirm --grant` takes it), `GET /api/ledger`: each
//!   needs `Authorization: Bearer <approver token>` (or the configured trusted identity
//!   header); the decision is recorded under that token's approver. 400 bad body, 401 no
//!   valid credential, 403 not an approver of this request or a cross-site request, 404
//!   unknown, 409 already decided or expired, 415 not JSON;
//! - `POST /slack/interactions` (with a Slack signing secret): approve/reject buttons,
//!   decided as the approver registered with the presser's Slack user id;
//! - `GET|POST /links/{id}/{approve|reject}` (with a link key): one-click links, signed
//!   for one request, one choice and one approver. `GET` only shows what the link would
//!   do; the page's button posts. Under a quorum, or for a request with a requester, the
//!   `POST` counts only with that approver's own credential as well (401/403 otherwise):
//!   a link is not proof of who decided when one reader may hold several.
//!
//! Because it is a browser app, every request's `Host` must be the address the inbox
//! listens on (or `--public-url`'s), else 421 (DNS rebinding); a state-changing request
//! must come from the inbox's own origin (`Origin`, else 403) unless it is an API call
//! with a bearer token and no `Origin` (a script), and an API one must be
//! `application/json` (CSRF); every answer forbids framing. Connections are
//! limited in number and must send their headers in time.
//!
//! No decision logic lives here: every answer goes through [`Attest::decide`].

pub mod dashboard;
pub mod oidc;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use attest_core::approvals::{
    verify_slack_signature, ApprovalError, Choice, LinkSigner, Secret, SignedLink, SlackNotifier,
    SlackPress, Status, TeamsNotifier, SLACK_TOLERANCE,
};
use attest_core::{Answer, ApprovalRequest, ApprovalStore, Attest, AttestError, ResumeToken};
use attest_ledger::Clock;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use serde::Deserialize;
use serde_json::{json, Value};

/// The page, served as is.
const PAGE: &str = include_str!("inbox.html");
/// The largest request body accepted.
const MAX_BODY: usize = 64 * 1024;
/// The most ledger rows one `GET /api/ledger` returns.
const MAX_LEDGER_ROWS: usize = 1000;
/// The most connections served at once; more wait in the listen queue.
const MAX_CONNECTIONS: usize = 256;
/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one connection may stay open, idle keep-alive included.
const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);

/// What the inbox serves from.
#[derive(Clone)]
pub struct InboxState {
    /// The pipeline decisions go through.
    pub attest: Arc<Attest>,
    /// The `Host` values and origins the inbox answers to.
    pub origins: Origins,
    /// A header an authenticating reverse proxy sets to the approver's name.
    pub trusted_identity_header: Option<String>,
    /// Slack's signing secret, enabling `/slack/interactions`.
    pub slack_signing_secret: Option<Secret>,
    /// The link key, enabling `/links/…`.
    pub links: Option<LinkSigner>,
    /// The configured Slack notifier: a card whose button decided is updated with the
    /// outcome.
    pub slack_updates: Option<Arc<SlackNotifier>>,
    /// The Teams notifier, when configured: the card is posted again once decided.
    pub teams_updates: Option<Arc<TeamsNotifier>>,
    /// The clock for signature freshness and link expiry.
    pub clock: Arc<dyn Clock>,
    /// The dashboard, metrics and background verifier (issue 17).
    pub review: Option<Arc<crate::review::Review>>,
    /// Who may scrape `/metrics`.
    pub metrics: crate::scrape::ScrapeAccess,
    /// Sign-in with the organisation's OpenID Connect provider (`/login`).
    pub oidc: Option<Arc<crate::inbox::oidc::Oidc>>,
}

/// The `Host` header values (`host:port`) and the origins (`http://host:port`) of the
/// inbox: its bound address (and `localhost` when that is loopback) and its public URL.
#[derive(Debug, Clone)]
pub struct Origins {
    hosts: Vec<String>,
    origins: Vec<String>,
}

/// The hosts and origins an inbox listening on `addr` (and reached at `public_url`, when
/// given) answers to. Listening on an unspecified address (`0.0.0.0`) needs
/// `public_url`: the inbox must know the name browsers use for it.
pub fn allowed_origins(addr: SocketAddr, public_url: Option<&str>) -> anyhow::Result<Origins> {
    let mut origins = Origins {
        hosts: Vec::new(),
        origins: Vec::new(),
    };
    let mut allow = |scheme: &str, host: String| {
        origins.origins.push(format!("{scheme}://{host}"));
        origins.hosts.push(host);
    };
    if addr.ip().is_unspecified() {
        if public_url.is_none() {
            anyhow::bail!(
                "--host {} listens on every address: give --public-url (the URL browsers use), \
                 which the inbox checks every request's Host and Origin against",
                addr.ip()
            );
        }
    } else {
        allow("http", addr.to_string());
        if addr.ip().is_loopback() {
            allow("http", format!("localhost:{}", addr.port()));
        }
    }
    if let Some(public) = public_url {
        let url =
            reqwest::Url::parse(public).with_context(|| format!("--public-url {public:?}"))?;
        let host = url
            .host_str()
            .with_context(|| format!("--public-url {public:?} has no host"))?;
        let host = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        allow(url.scheme(), host);
    }
    Ok(origins)
}

pub(crate) type Shared = Arc<InboxState>;

/// The inbox's routes.
pub fn router(state: InboxState) -> Router {
    let state = Arc::new(state);
    Router::new()
        .route("/", get(page))
        .route("/requests/{id}", get(page))
        .route("/healthz", get(healthz))
        .route("/api/me", get(me))
        .route("/api/pending", get(pending))
        .route("/api/decided", get(decided))
        .route("/api/requests/{id}", get(request))
        .route("/api/requests/{id}/decision", post(decision))
        .route("/api/ledger", get(ledger))
        .route("/slack/interactions", post(slack))
        .route("/login", get(login))
        .route("/login/callback", get(login_callback))
        .route("/logout", post(logout))
        .route("/links/{id}/{choice}", get(link_page).post(link_decide))
        .merge(crate::inbox::dashboard::routes())
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            browser_guard,
        ))
        .with_state(state)
}

/// Serves `router(state)` on `listener` until Ctrl-C: at most `MAX_CONNECTIONS` at a
/// time, each sending its headers within `HEADER_READ_TIMEOUT` and closed after
/// `CONNECTION_LIFETIME`.
pub async fn serve(listener: tokio::net::TcpListener, state: InboxState) -> std::io::Result<()> {
    let app = router(state);
    let permits = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let shutdown = async {
        // If the signal cannot be watched, serve until killed.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(shutdown);
    loop {
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return Ok(());
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors or a connection reset before accept: go on.
                    eprintln!("attest serve: accept: {err}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let (stream, peer) = stream;
        // The peer, for the checks that depend on it (metrics answer loopback peers).
        let service = TowerToHyperService::new(
            app.clone()
                .layer(axum::Extension(axum::extract::ConnectInfo(peer))),
        );
        tokio::spawn(async move {
            let _permit = permit;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            // A connection that errors or outlives its time is simply closed.
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, connection).await;
        });
    }
}

/// The checks a browser app needs, before any route: `Host` is the inbox's own (421),
/// a state-changing request from a browser comes from the inbox's origin (403) and an
/// API one is JSON (415); every answer forbids framing, sniffing and referrers.
async fn browser_guard(State(state): State<Shared>, request: Request, next: Next) -> Response {
    let refusal = check_browser_request(&state.origins, &request);
    let mut response = match refusal {
        Some(err) => err.into_response(),
        None => next.run(request).await,
    };
    let headers = response.headers_mut();
    for (name, value) in [
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(
            "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        ));
    response
}

fn check_browser_request(origins: &Origins, request: &Request) -> Option<ApiError> {
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    if !host.is_some_and(|host| origins.hosts.iter().any(|h| h.eq_ignore_ascii_case(host))) {
        return Some(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "this inbox does not answer to that Host",
        ));
    }
    let path = request.uri().path();
    if request.method() != Method::POST || path == "/slack/interactions" {
        // Slack's requests are server to server, checked by their signature.
        return None;
    }
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    // A bearer token is not something a browser attaches by itself (the page keeps it in
    // sessionStorage, never a cookie), so a call carrying one and no Origin is a script
    // (curl, a ChatOps bot), not a forged cross-site request; browsers send Origin on
    // every cross-site POST, and a wrong one is still refused. A session the browser does
    // add by itself (the proxy's trusted identity header) keeps the origin check.
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("Bearer "));
    let same_origin = match origin {
        Some(origin) => origins
            .origins
            .iter()
            .any(|o| o.eq_ignore_ascii_case(origin)),
        None => bearer && path.starts_with("/api/"),
    };
    if !same_origin {
        return Some(ApiError::new(
            StatusCode::FORBIDDEN,
            "a state-changing request must come from the inbox's own origin (Origin header)",
        ));
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if path.starts_with("/api/") && !json {
        return Some(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the API takes Content-Type: application/json",
        ));
    }
    None
}

/// An error answer: a fixed status and a JSON body `{"error": …}` (and `"login"`, where
/// an approver may sign in, on a 401 from an inbox with sign-in configured).
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    login: Option<&'static str>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            login: None,
        }
    }

    /// A 401 that says where to sign in, when the inbox has a sign-in page.
    fn unauthenticated(state: &InboxState, message: &str) -> ApiError {
        ApiError {
            login: state.oidc.is_some().then_some("/login"),
            ..ApiError::new(StatusCode::UNAUTHORIZED, message)
        }
    }

    /// Logs the whole chain, answers a generic 500.
    pub fn internal(err: &(dyn std::error::Error + 'static)) -> ApiError {
        eprintln!("attest serve: internal error: {}", crate::chain(err));
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": self.message});
        if let Some(login) = self.login {
            body["login"] = json!(login);
        }
        (self.status, Json(body)).into_response()
    }
}

impl From<AttestError> for ApiError {
    fn from(err: AttestError) -> ApiError {
        let status = match &err {
            AttestError::Approval(approval) => match approval {
                ApprovalError::NotFound => StatusCode::NOT_FOUND,
                ApprovalError::AlreadyDecided { .. }
                | ApprovalError::AlreadyVoted { .. }
                | ApprovalError::Expired { .. } => StatusCode::CONFLICT,
                ApprovalError::NotAnApprover { .. }
                | ApprovalError::OwnRequest { .. }
                | ApprovalError::NoApprover { .. }
                | ApprovalError::UnknownApprover { .. } => StatusCode::FORBIDDEN,
                ApprovalError::BadCredential => StatusCode::UNAUTHORIZED,
                ApprovalError::HoldNeedsEdits { .. }
                | ApprovalError::BadEdits { .. }
                | ApprovalError::BadGrant { .. } => StatusCode::BAD_REQUEST,
                _ => return ApiError::internal(&err),
            },
            _ => return ApiError::internal(&err),
        };
        ApiError::new(status, err.to_string())
    }
}

/// The approver making this API call: the owner of the bearer token, the name in the
/// configured trusted identity header, or the approver signed in with the organisation's
/// provider (the session cookie). None: 401. A name from a header or a session must
/// still be a registered, active approver (a revoked one is signed out).
pub async fn approver(state: &InboxState, headers: &HeaderMap) -> Result<String, ApiError> {
    let header_text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let bearer =
        header_text(header::AUTHORIZATION.as_str()).and_then(|v| v.strip_prefix("Bearer "));
    let trusted = state
        .trusted_identity_header
        .as_deref()
        .and_then(header_text)
        .filter(|name| !name.trim().is_empty())
        .map(str::to_owned);
    let signed_in = || {
        state
            .oidc
            .as_ref()
            .and_then(|oidc| oidc.session(header_text(header::COOKIE.as_str())))
    };
    let store = state.attest.approvals()?;
    let found = match (bearer, trusted.or_else(signed_in)) {
        (Some(token), _) => {
            let token = token.to_owned();
            tokio::task::spawn_blocking(move || store.authenticate(&token)).await
        }
        (None, Some(name)) => {
            tokio::task::spawn_blocking(move || store.active_approver(&name)).await
        }
        (None, None) => {
            return Err(ApiError::unauthenticated(
                state,
                "an approver token is required (Authorization: Bearer …)",
            ))
        }
    };
    match found.map_err(|err| ApiError::internal(&err))? {
        Ok(approver) => Ok(approver.name),
        Err(ApprovalError::BadCredential | ApprovalError::UnknownApprover { .. }) => Err(
            ApiError::unauthenticated(state, "not a valid approver credential"),
        ),
        Err(err) => Err(AttestError::from(err).into()),
    }
}

/// `GET /login[?next=/requests/ID]`: to the provider's sign-in (302), this flow bound to
/// the browser; once signed in, on to `next` when it is a request's page, else the inbox.
async fn login(
    State(state): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let Some(oidc) = &state.oidc else {
        return ApiError::new(StatusCode::NOT_FOUND, "sign-in is not configured").into_response();
    };
    let next = query
        .get("next")
        .filter(|next| is_request_page(next))
        .cloned();
    let (url, cookie) = oidc.begin(next);
    let mut response = StatusCode::FOUND.into_response();
    for (name, value) in [(header::LOCATION, url), (header::SET_COOKIE, cookie)] {
        match HeaderValue::from_str(&value) {
            Ok(value) => {
                response.headers_mut().append(name, value);
            }
            Err(_) => {
                return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
                    .into_response()
            }
        }
    }
    response
}

/// `GET /login/callback?code&state`: the provider's answer. Signed in: the session
/// cookie, and a page that goes on to the inbox (a new navigation from this origin, so
/// the `SameSite=Strict` cookie goes with it). Else 400/403 with the reason.
async fn login_callback(
    State(state): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let Some(oidc) = &state.oidc else {
        return ApiError::new(StatusCode::NOT_FOUND, "sign-in is not configured").into_response();
    };
    let refused = |status: StatusCode, why: &str| {
        (
            status,
            Html(message_page(
                "Not signed in",
                &format!(
                    "<p>{}</p><p><a href=\"/login\">Try again</a></p>",
                    escape(why)
                ),
            )),
        )
            .into_response()
    };
    if let Some(error) = query.get("error") {
        return refused(
            StatusCode::FORBIDDEN,
            &format!("the provider said: {error}"),
        );
    }
    let (Some(code), Some(flow)) = (query.get("code"), query.get("state")) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "the provider sent no code or state",
        );
    };
    let cookies = headers.get(header::COOKIE).and_then(|v| v.to_str().ok());
    let (name, next) = match oidc.finish(cookies, flow, code).await {
        Ok(signed_in) => signed_in,
        Err(why) => return refused(StatusCode::FORBIDDEN, &why),
    };
    let store = match state.attest.approvals() {
        Ok(store) => store,
        Err(err) => return ApiError::from(err).into_response(),
    };
    let lookup = name.clone();
    let approver = match tokio::task::spawn_blocking(move || store.active_approver(&lookup)).await
    {
        Ok(Ok(approver)) => approver,
        Ok(Err(ApprovalError::UnknownApprover { .. })) => {
            return refused(
                StatusCode::FORBIDDEN,
                &format!(
                    "{name} signed in, but is not a registered approver (`attest approvers add {name}`)"
                ),
            )
        }
        Ok(Err(err)) => return ApiError::from(AttestError::from(err)).into_response(),
        Err(err) => return ApiError::internal(&err).into_response(),
    };
    let cookies = match oidc.start_session(approver.name.clone()) {
        Ok(cookies) => cookies,
        Err(err) => {
            eprintln!("attest serve: starting a session: {err:#}");
            return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
                .into_response();
        }
    };
    // A request's page checked when the sign-in began: a path of this inbox only.
    let next = next
        .filter(|next| is_request_page(next))
        .unwrap_or_else(|| "/".to_owned());
    let body = format!(
        "<meta http-equiv=\"refresh\" content=\"0;url={next}\"><p>Signed in as <b>{}</b>. \
         <a href=\"{next}\">Go on</a></p>",
        escape(&approver.name),
        next = escape(&next),
    );
    let mut response = Html(message_page("Signed in", &body)).into_response();
    for cookie in cookies {
        if let Ok(value) = HeaderValue::from_str(&cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// `POST /logout`: ends the session (from this origin only, as every POST).
async fn logout(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let mut response = Json(json!({"signed_out": true})).into_response();
    if let Some(oidc) = &state.oidc {
        let cookies = headers.get(header::COOKIE).and_then(|v| v.to_str().ok());
        if let Ok(value) = HeaderValue::from_str(&oidc.end_session(cookies)) {
            response.headers_mut().insert(header::SET_COOKIE, value);
        }
    }
    response
}

async fn page() -> impl IntoResponse {
    (
        [(
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; connect-src 'self'; script-src 'unsafe-inline'; \
             style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        )],
        Html(PAGE),
    )
}

/// Whether `path` is a request's own page (`/requests/ID`, the link every door hands
/// out): the only place a sign-in goes on to besides the inbox.
fn is_request_page(path: &str) -> bool {
    path.strip_prefix("/requests/").is_some_and(|id| {
        !id.is_empty()
            && id.len() <= 128
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
            && id != "."
            && id != ".."
    })
}

/// Healthy unless the background verifier found the chain broken (503 then).
async fn healthz(State(state): State<Shared>) -> Response {
    match &state.review {
        Some(review) => {
            let (ok, body) = review.health();
            let status = if ok {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            (status, Json(body)).into_response()
        }
        None => Json(json!({"ok": true})).into_response(),
    }
}

async fn me(State(state): State<Shared>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({"approver": approver(&state, &headers).await?})))
}

async fn pending(State(state): State<Shared>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    approver(&state, &headers).await?;
    state.attest.expire_due().await?;
    summaries(&state, ApprovalStore::pending).await
}

/// `{"requests": [...]}`: the summaries of the requests `read` finds in the store.
async fn summaries(
    state: &InboxState,
    read: impl FnOnce(&ApprovalStore) -> Result<Vec<ApprovalRequest>, ApprovalError> + Send + 'static,
) -> Result<Json<Value>, ApiError> {
    let store = state.attest.approvals()?;
    let requests = tokio::task::spawn_blocking(move || read(&store))
        .await
        .map_err(|err| ApiError::internal(&err))?
        .map_err(AttestError::from)?;
    let list: Vec<Value> = requests.iter().map(ApprovalRequest::summary).collect();
    Ok(Json(json!({"requests": list})))
}

/// The query's `limit`, else `default`; 400 when it is not a whole number.
fn limit(query: &HashMap<String, String>, default: usize) -> Result<usize, ApiError> {
    query.get("limit").map_or(Ok(default), |text| {
        text.parse::<usize>()
            .map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, "`limit` must be a whole number"))
    })
}

/// The most a decision history page holds.
const MAX_DECIDED: usize = 100;

/// `GET /api/decided?limit=N`: the newest decisions (who, when, how), newest first.
async fn decided(
    State(state): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    approver(&state, &headers).await?;
    let limit = limit(&query, 20)?.clamp(1, MAX_DECIDED);
    summaries(&state, move |store| store.decided(limit)).await
}

/// Loads a request by id (never by token: tokens are not accepted in URLs).
async fn load(state: &InboxState, id: String) -> Result<ApprovalRequest, ApiError> {
    if ResumeToken::looks_like_token(&id) {
        return Err(AttestError::from(ApprovalError::NotFound).into());
    }
    let store = state.attest.approvals()?;
    Ok(tokio::task::spawn_blocking(move || store.get_by_id(&id))
        .await
        .map_err(|err| ApiError::internal(&err))?
        .map_err(AttestError::from)?)
}

async fn request(
    State(state): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    approver(&state, &headers).await?;
    let request = load(&state, id).await?;
    Ok(Json(request.approver_view()))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionBody {
    decision: String,
    #[serde(default)]
    edits: Option<Value>,
    #[serde(default)]
    note: Option<String>,
    /// A bounded grant with the approval: `calls=N,for=LENGTH[,when=EXPR]`.
    #[serde(default)]
    grant: Option<String>,
}

async fn decision(
    State(state): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let approver = approver(&state, &headers).await?;
    let body: DecisionBody = serde_json::from_slice(&body)
        .map_err(|err| ApiError::new(StatusCode::BAD_REQUEST, format!("bad body: {err}")))?;
    let choice = Choice::parse(&body.decision).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad body: `decision` must be \"approve\" or \"reject\"",
        )
    })?;
    let mut answer = match choice {
        Choice::Approve => Answer::approve(approver, "inbox"),
        Choice::Reject => Answer::reject(approver, "inbox"),
    };
    if let Some(edits) = body.edits.filter(|e| !e.is_null()) {
        answer = answer.with_edits(edits);
    }
    if let Some(note) = body.note.filter(|n| !n.is_empty()) {
        answer = answer.with_note(note);
    }
    if let Some(grant) = body.grant.filter(|g| !g.is_empty()) {
        let spec = grant.parse().map_err(|err| {
            ApiError::new(StatusCode::BAD_REQUEST, format!("bad body: grant: {err}"))
        })?;
        answer = answer.with_grant(spec);
    }
    if ResumeToken::looks_like_token(&id) {
        return Err(AttestError::from(ApprovalError::NotFound).into());
    }
    let decided = state.attest.decide(&id, answer).await?;
    tell_teams(&state, &decided.request).await;
    Ok(Json(json!({
        "request": decided.request.summary(),
        "seq": decided.receipt.map(|r| r.seq),
        "grant": decided.granted.map(|(grant, receipt)| json!({"id": grant.id, "seq": receipt.seq})),
    })))
}

async fn ledger(
    State(state): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    approver(&state, &headers).await?;
    let limit = limit(&query, 50)?.min(MAX_LEDGER_ROWS);
    let ledger = Arc::clone(state.attest.ledger());
    let rows = tokio::task::spawn_blocking(move || ledger.list(limit))
        .await
        .map_err(|err| ApiError::internal(&err))?
        .map_err(|err| ApiError::internal(&err))?;
    Ok(Json(json!({"rows": rows})))
}

async fn slack(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let Some(secret) = &state.slack_signing_secret else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "slack is not configured",
        ));
    };
    let header_text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    verify_slack_signature(
        secret,
        header_text("x-slack-request-timestamp"),
        header_text("x-slack-signature"),
        &body,
        state.clock.now(),
        SLACK_TOLERANCE,
    )
    .map_err(|err| ApiError::new(StatusCode::UNAUTHORIZED, err.to_string()))?;
    let payload = form_urlencoded::parse(&body)
        .find(|(key, _)| key == "payload")
        .map(|(_, value)| value.into_owned())
        .ok_or_else(|| ApiError::new(StatusCode::BAD_REQUEST, "bad body: no payload"))?;
    let press = SlackPress::from_payload(&payload)
        .map_err(|err| ApiError::new(StatusCode::BAD_REQUEST, format!("bad body: {err}")))?;
    let store = state.attest.approvals()?;
    let user = press.user.clone();
    let found = tokio::task::spawn_blocking(move || store.approver_for_slack_user(&user))
        .await
        .map_err(|err| ApiError::internal(&err))?;
    // Slack shows a non-200 answer as a failure of the app; a "no" is told in the text.
    let decided = match found {
        Ok(approver) => {
            let answer = match press.choice {
                Choice::Approve => Answer::approve(approver.name, "slack"),
                Choice::Reject => Answer::reject(approver.name, "slack"),
            };
            state.attest.decide(&press.id, answer).await
        }
        Err(err) => Err(AttestError::from(err)),
    };
    if let Ok(decided) = &decided {
        tell_teams(&state, &decided.request).await;
    }
    if let (Ok(decided), Some(slack), Some(channel), Some(ts)) = (
        &decided,
        &state.slack_updates,
        &press.channel,
        &press.message_ts,
    ) {
        if let Err(err) = slack.update(channel, ts, &decided.request).await {
            eprintln!(
                "attest: could not update the Slack card of {}: {}",
                decided.request.id,
                crate::chain(&err)
            );
        }
    }
    let text = match decided {
        Ok(decided) if decided.request.status == Status::Pending => format!(
            "{}: your decision is recorded; {}",
            decided.request.id,
            decided.request.progress().text()
        ),
        Ok(decided) => format!(
            "{} {} by {}",
            decided.request.id,
            decided.request.status,
            decided.request.approver.unwrap_or_default()
        ),
        Err(AttestError::Approval(err)) if !err.is_store_failure() => {
            format!("not recorded: {err}")
        }
        Err(err) => return Err(err.into()),
    };
    Ok(Json(json!({
        "response_type": "ephemeral",
        "replace_original": false,
        "text": text,
    })))
}

/// Posts the request's card again to Teams after a decision (see
/// [`crate::notices::tell_teams_decided`]).
async fn tell_teams(state: &InboxState, request: &ApprovalRequest) {
    crate::notices::tell_teams_decided(state.teams_updates.as_deref(), request).await;
}

/// The link's fields from the path and query, checked against the link key.
fn check_link<'a>(
    state: &InboxState,
    id: &'a str,
    choice: &str,
    query: &'a HashMap<String, String>,
) -> Result<(Choice, &'a str), LinkRefused> {
    let refuse = |status, text: &str| LinkRefused {
        status,
        text: text.to_owned(),
    };
    let Some(signer) = &state.links else {
        return Err(refuse(StatusCode::NOT_FOUND, "links are not configured"));
    };
    let choice =
        Choice::parse(choice).ok_or_else(|| refuse(StatusCode::NOT_FOUND, "no such link"))?;
    let approver = query
        .get("approver")
        .map(String::as_str)
        .unwrap_or_default();
    let link = SignedLink {
        id,
        choice,
        approver,
        expires: query.get("exp").map(String::as_str),
        signature: query.get("sig").map(String::as_str),
    };
    signer
        .verify(&link, state.clock.now())
        .map_err(|err| refuse(StatusCode::FORBIDDEN, &err.to_string()))?;
    Ok((choice, approver))
}

async fn link_page(
    State(state): State<Shared>,
    Path((id, choice)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let (choice, approver) = match check_link(&state, &id, &choice, &query) {
        Ok(checked) => checked,
        Err(refusal) => return refusal.into_response(),
    };
    let request = match load(&state, id.clone()).await {
        Ok(request) => request,
        Err(err) => return err.into_response(),
    };
    let action = request.action.label();
    let query_string: String = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(query.iter())
        .finish();
    let verb = choice.as_str();
    let body = format!(
        "<p>{verb} <b>{}</b> as <b>{}</b>?</p><p>{}</p><p>{}</p>\
         <form method=\"post\" action=\"?{}\"><button type=\"submit\">{verb}</button></form>",
        escape(&action),
        escape(approver),
        escape(&request.verdict.reasons.join("; ")),
        escape(&request.progress().text()),
        escape(&query_string),
    );
    Html(message_page("Attest approval", &body)).into_response()
}

async fn link_decide(
    State(state): State<Shared>,
    Path((id, choice)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let (choice, approver) = match check_link(&state, &id, &choice, &query) {
        Ok(checked) => checked,
        Err(refusal) => return refusal.into_response(),
    };
    let request = match load(&state, id.clone()).await {
        Ok(request) => request,
        Err(err) => return err.into_response(),
    };
    if request.needs_signed_in_approvers() {
        if let Err(refusal) = signed_in_as(&state, &headers, approver).await {
            return refusal.into_response();
        }
    }
    let answer = match choice {
        Choice::Approve => Answer::approve(approver, "link"),
        Choice::Reject => Answer::reject(approver, "link"),
    };
    match state.attest.decide(&id, answer).await {
        Ok(decided) => {
            tell_teams(&state, &decided.request).await;
            let text = match decided.request.status {
                Status::Pending => format!(
                    "{} is still waiting: {}",
                    decided.request.id,
                    decided.request.progress().text()
                ),
                status => format!("{} {status}", decided.request.id),
            };
            Html(message_page("Recorded", &escape(&text))).into_response()
        }
        Err(err) => {
            let err = ApiError::from(err);
            (
                err.status,
                Html(message_page("Not recorded", &escape(&err.message))),
            )
                .into_response()
        }
    }
}

/// Under a quorum, or with a requester to keep out, a link is not proof of who decided
/// (whoever read the notice may hold every approver's link): it counts only when the
/// request also carries that approver's own credential (a token, a sign-in session, the
/// trusted identity header).
async fn signed_in_as(
    state: &InboxState,
    headers: &HeaderMap,
    link_approver: &str,
) -> Result<(), LinkRefused> {
    let refuse = |status, text: String| LinkRefused { status, text };
    match approver(state, headers).await {
        Ok(name) if name.trim().eq_ignore_ascii_case(link_approver.trim()) => Ok(()),
        Ok(name) => Err(refuse(
            StatusCode::FORBIDDEN,
            format!("this link is {link_approver}'s, but {name} is signed in"),
        )),
        Err(_) => Err(refuse(
            StatusCode::UNAUTHORIZED,
            format!(
                "this request needs {link_approver} signed in (a link alone does not count under a \
                 quorum or when its requester is known): sign in to the inbox, then decide there"
            ),
        )),
    }
}

/// A link that is not accepted: a small page with the reason.
struct LinkRefused {
    status: StatusCode,
    text: String,
}

impl IntoResponse for LinkRefused {
    fn into_response(self) -> Response {
        let page = message_page("Link refused", &escape(&self.text));
        (self.status, Html(page)).into_response()
    }
}

fn message_page(title: &str, body_html: &str) -> String {
    format!(
        "<!doctype html><meta charset=\"utf-8\"><title>{t}</title>\
         <body style=\"font-family:sans-serif;max-width:40em;margin:2em auto\"><h1>{t}</h1>{body_html}</body>",
        t = escape(title)
    )
}

/// Escapes text for HTML element content and quoted attributes.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
