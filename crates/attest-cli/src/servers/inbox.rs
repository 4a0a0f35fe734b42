//! The approval inbox: one web page and a JSON API over the approval store.
//!
//! - `GET /` the page (plain HTML and JS; it polls the API, and holds a bearer token only
//!   when the person using it types one in);
//! - `GET /healthz`;
//! - `GET /api/pending`, `GET /api/requests/{id}`, `POST /api/requests/{id}/decision`
//!   (`{"decision": "approve"|"reject", "approver", "edits"?, "note"?}`), `GET /api/ledger`:
//!   bearer token when one is configured; 400 bad body, 401 bad token, 403 not an
//!   approver, 404 unknown, 409 already decided or expired;
//! - `POST /slack/interactions` (with a Slack signing secret): approve/reject buttons;
//! - `GET|POST /links/{id}/{approve|reject}` (with a link key): one-click links. `GET`
//!   only shows what the link would do; the page's button posts.
//!
//! No decision logic lives here: every answer goes through [`Attest::decide`].

use std::collections::HashMap;
use std::sync::Arc;

use attest_core::approvals::{
    verify_slack_signature, ApprovalError, Choice, LinkSigner, Secret, SignedLink, SlackPress,
    SLACK_TOLERANCE,
};
use attest_core::{Answer, ApprovalRequest, Attest, AttestError, ResumeToken};
use attest_ledger::Clock;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The page, served as is.
const PAGE: &str = include_str!("inbox.html");
/// The largest request body accepted.
const MAX_BODY: usize = 64 * 1024;
/// The most ledger rows one `GET /api/ledger` returns.
const MAX_LEDGER_ROWS: usize = 1000;

/// What the inbox serves from.
#[derive(Clone)]
pub(crate) struct InboxState {
    /// The pipeline decisions go through.
    pub(crate) attest: Attest,
    /// The bearer token the API requires, if any.
    pub(crate) token: Option<Secret>,
    /// Slack's signing secret, enabling `/slack/interactions`.
    pub(crate) slack_signing_secret: Option<Secret>,
    /// The link key, enabling `/links/…`.
    pub(crate) links: Option<LinkSigner>,
    /// The clock for signature freshness and link expiry.
    pub(crate) clock: Arc<dyn Clock>,
}

type Shared = Arc<InboxState>;

/// The inbox's routes.
pub(crate) fn router(state: InboxState) -> Router {
    Router::new()
        .route("/", get(page))
        .route("/healthz", get(healthz))
        .route("/api/pending", get(pending))
        .route("/api/requests/{id}", get(request))
        .route("/api/requests/{id}/decision", post(decision))
        .route("/api/ledger", get(ledger))
        .route("/slack/interactions", post(slack))
        .route("/links/{id}/{choice}", get(link_page).post(link_decide))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(Arc::new(state))
}

/// Serves `router(state)` on `listener` until Ctrl-C.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    state: InboxState,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(async {
            // If the signal cannot be watched, serve until killed.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
        .await
}

/// An error answer: a fixed status and a JSON body `{"error": …}`.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// Logs the whole chain, answers a generic 500.
    fn internal(err: &(dyn std::error::Error + 'static)) -> ApiError {
        let mut text = err.to_string();
        let mut source = err.source();
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        eprintln!("attest serve: internal error: {text}");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({"error": self.message}))).into_response()
    }
}

impl From<AttestError> for ApiError {
    fn from(err: AttestError) -> ApiError {
        let status = match &err {
            AttestError::Approval(approval) => match approval {
                ApprovalError::NotFound => StatusCode::NOT_FOUND,
                ApprovalError::AlreadyDecided { .. } | ApprovalError::Expired { .. } => {
                    StatusCode::CONFLICT
                }
                ApprovalError::NotAnApprover { .. } | ApprovalError::NoApprover { .. } => {
                    StatusCode::FORBIDDEN
                }
                ApprovalError::HoldNeedsEdits { .. } | ApprovalError::BadEdits { .. } => {
                    StatusCode::BAD_REQUEST
                }
                _ => return ApiError::internal(&err),
            },
            _ => return ApiError::internal(&err),
        };
        ApiError::new(status, err.to_string())
    }
}

/// Checks the bearer token, when one is configured.
fn authorize(state: &InboxState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(expected) = &state.token else {
        return Ok(());
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "a bearer token is required"))?;
    // Compare digests, so the time taken says nothing about the token.
    if Sha256::digest(given.as_bytes()) != Sha256::digest(expected.expose()) {
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, "bad bearer token"));
    }
    Ok(())
}

async fn page() -> impl IntoResponse {
    (
        [
            (header::CACHE_CONTROL, "no-store"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'",
            ),
        ],
        Html(PAGE),
    )
}

async fn healthz() -> Json<Value> {
    Json(json!({"ok": true}))
}

async fn pending(State(state): State<Shared>, headers: HeaderMap) -> Result<Json<Value>, ApiError> {
    authorize(&state, &headers)?;
    state.attest.expire_due().await?;
    let store = state.attest.approvals()?;
    let requests = tokio::task::spawn_blocking(move || store.pending())
        .await
        .map_err(|err| ApiError::internal(&err))?
        .map_err(AttestError::from)?;
    let list: Vec<Value> = requests.iter().map(ApprovalRequest::summary).collect();
    Ok(Json(json!({"requests": list})))
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
    authorize(&state, &headers)?;
    let request = load(&state, id).await?;
    let mut summary = request.summary();
    // The person deciding sees the whole action: this is what they approve.
    summary["params"] = request.action.params.clone();
    Ok(Json(summary))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionBody {
    decision: String,
    approver: String,
    #[serde(default)]
    edits: Option<Value>,
    #[serde(default)]
    note: Option<String>,
}

async fn decision(
    State(state): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    authorize(&state, &headers)?;
    let body: DecisionBody = serde_json::from_slice(&body)
        .map_err(|err| ApiError::new(StatusCode::BAD_REQUEST, format!("bad body: {err}")))?;
    let choice = Choice::parse(&body.decision).ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad body: `decision` must be \"approve\" or \"reject\"",
        )
    })?;
    let mut answer = match choice {
        Choice::Approve => Answer::approve(body.approver, "inbox"),
        Choice::Reject => Answer::reject(body.approver, "inbox"),
    };
    if let Some(edits) = body.edits.filter(|e| !e.is_null()) {
        answer = answer.with_edits(edits);
    }
    if let Some(note) = body.note.filter(|n| !n.is_empty()) {
        answer = answer.with_note(note);
    }
    if ResumeToken::looks_like_token(&id) {
        return Err(AttestError::from(ApprovalError::NotFound).into());
    }
    let decided = state.attest.decide(&id, answer).await?;
    Ok(Json(json!({
        "request": decided.request.summary(),
        "seq": decided.receipt.map(|r| r.seq),
    })))
}

async fn ledger(
    State(state): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    authorize(&state, &headers)?;
    let limit = match query.get("limit") {
        Some(text) => text.parse::<usize>().map_err(|_| {
            ApiError::new(StatusCode::BAD_REQUEST, "`limit` must be a whole number")
        })?,
        None => 50,
    }
    .min(MAX_LEDGER_ROWS);
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
    let answer = match press.choice {
        Choice::Approve => Answer::approve(press.user, "slack"),
        Choice::Reject => Answer::reject(press.user, "slack"),
    };
    // Slack shows a non-200 answer as a failure of the app; a "no" is told in the text.
    let text = match state.attest.decide(&press.id, answer).await {
        Ok(decided) => format!(
            "{} {} by {}",
            decided.request.id,
            decided.request.status,
            decided.request.approver.unwrap_or_default()
        ),
        Err(AttestError::Approval(err)) if !matches!(err, ApprovalError::Sqlite { .. }) => {
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
        "<p>{verb} <b>{}</b> as <b>{}</b>?</p><p>{}</p>\
         <form method=\"post\" action=\"?{}\"><button type=\"submit\">{verb}</button></form>",
        escape(&action),
        escape(approver),
        escape(&request.verdict.reasons.join("; ")),
        escape(&query_string),
    );
    Html(message_page("Attest approval", &body)).into_response()
}

async fn link_decide(
    State(state): State<Shared>,
    Path((id, choice)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let (choice, approver) = match check_link(&state, &id, &choice, &query) {
        Ok(checked) => checked,
        Err(refusal) => return refusal.into_response(),
    };
    let answer = match choice {
        Choice::Approve => Answer::approve(approver, "link"),
        Choice::Reject => Answer::reject(approver, "link"),
    };
    match state.attest.decide(&id, answer).await {
        Ok(decided) => Html(message_page(
            "Recorded",
            &escape(&format!(
                "{} {}",
                decided.request.id, decided.request.status
            )),
        ))
        .into_response(),
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
