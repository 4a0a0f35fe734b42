//! The dashboard's routes, served by `attest serve` beside the approval inbox, with the
//! inbox's authentication (an approver's bearer token, or the trusted identity header)
//! and its browser checks (Host, Origin, framing):
//!
//! - `GET /dashboard`: the page (inline SVG charts, no external script or style);
//! - `GET /api/review/summary?hours=N`: per hour and in total, rows (`totals`,
//!   `hours[].counts`) and actions (`actions`, `hours[].actions`: an intent and its
//!   outcome are one) by decision, level, system and agent; actions by agent
//!   (`agents`), list sizes, pending approvals;
//! - `GET /api/review/lists/{refused|asked|rejected|unverified|failed|held|intents|shadow}?before=SEQ&limit=N`:
//!   a list, newest first, a keyset page with its total, each row with its reasons;
//! - `GET /api/review/runs` and `GET /api/review/runs/{run_id}`: recent runs (agent,
//!   first and last time, actions by decision), and one run's rows in order with their
//!   receipts;
//! - `GET /api/review/agents/{agent}`: the agent's newest rows, in order (the by-agent
//!   view's timeline);
//! - `GET /api/review/rows/{seq}`: one entry, its hash and its inclusion proof;
//! - `GET /api/review/chain`: the background verifier's status;
//! - `GET /metrics`: Prometheus text (`crate::review::metrics`).
//!
//! Every answer but the chain status and metrics is cached per write generation (the
//! tip's seq): a poll with nothing new costs one primary-key lookup and a map lookup.
//! An answer that needs the fold of rows' bodies (`crate::review::model`) is cached once the
//! fold has reached the generation; until then each poll folds a bounded share.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

use attest_core::approvals::Status;
use attest_core::ApprovalStore;

use crate::inbox::{approver, ApiError, InboxState};
use crate::review::model::{ListKind, ReadModel, FOLD_PER_POLL, HOURS_KEPT};
use crate::review::Review;

/// The page, served as is.
const PAGE: &str = include_str!("dashboard.html");
/// The most rows one list page returns.
const MAX_PAGE: usize = 200;

type Shared = Arc<InboxState>;

/// The dashboard's routes, to merge into the inbox's router.
pub fn routes() -> Router<Shared> {
    Router::new()
        .route("/dashboard", get(page))
        .route("/api/review/summary", get(summary))
        .route("/api/review/chain", get(chain))
        .route("/api/review/lists/{kind}", get(list))
        .route("/api/review/runs", get(runs))
        .route("/api/review/runs/{run}", get(run))
        .route("/api/review/agents/{agent}", get(agent))
        .route("/api/review/rows/{seq}", get(row))
        .route("/metrics", get(metrics))
}

async fn page() -> impl IntoResponse {
    (
        [(
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; connect-src 'self'; script-src 'unsafe-inline'; \
             style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        )],
        Html(PAGE),
    )
}

/// The review state, after checking the caller is an approver.
async fn authorized(state: &Shared, headers: &HeaderMap) -> Result<Arc<Review>, ApiError> {
    approver(state, headers).await?;
    state
        .review
        .clone()
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "the dashboard is not enabled"))
}

/// Whether an answer reads the fold of rows' bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reads {
    /// The counters and indexed columns only.
    Columns,
    /// The fold too: fold in a bounded share of new rows first.
    Fold,
}

/// Answers `key` from the cache of the current generation, else computes it and caches
/// it (an answer that reads the fold: once the fold has reached the generation).
async fn cached(
    review: Arc<Review>,
    key: String,
    reads: Reads,
    compute: impl FnOnce(&Review) -> Result<Value, ApiError> + Send + 'static,
) -> Result<Response, ApiError> {
    let answer = cached_bytes(review, key, reads, compute).await?;
    Ok(json_answer(answer))
}

/// [`cached`], for an answer whose `rows` may hold a held call's ask row: each such row
/// says how its request stands now ([`decided_since`]), which the store knows and the
/// ledger does not until the call runs, so it is read on every answer, after the cache.
async fn cached_rows(
    state: &Shared,
    review: Arc<Review>,
    key: String,
    reads: Reads,
    compute: impl FnOnce(&Review) -> Result<Value, ApiError> + Send + 'static,
) -> Result<Response, ApiError> {
    let (generation, bytes) = cached_bytes(review, key, reads, compute).await?;
    if !bytes.windows(PENDING.len()).any(|w| w == PENDING) {
        return Ok(json_answer((generation, bytes)));
    }
    let Ok(store) = state.attest.approvals() else {
        return Ok(json_answer((generation, bytes)));
    };
    let bytes = tokio::task::spawn_blocking(move || -> Result<Bytes, ApiError> {
        let mut value: Value =
            serde_json::from_slice(&bytes).map_err(|e| ApiError::internal(&e))?;
        if let Some(rows) = value.get_mut("rows").and_then(Value::as_array_mut) {
            for row in rows {
                decided_since(&store, row);
            }
        }
        Ok(Bytes::from(
            serde_json::to_vec(&value).map_err(|e| ApiError::internal(&e))?,
        ))
    })
    .await
    .map_err(|e| ApiError::internal(&e))??;
    Ok(json_answer((generation, bytes)))
}

/// How a row that waits for a person shows in the JSON of a cached answer.
const PENDING: &[u8] = b"\"status\":\"pending\"";

/// A held call's ask row (`status` `pending` in the ledger) as its request stands in the
/// store: decided and not yet used, `approved` (waiting for the agent to run it) with
/// who approved; ended otherwise (`decided`, with the request's status). A request the
/// store does not know keeps the ledger's word.
fn decided_since(store: &ApprovalStore, row: &mut Value) {
    if row["status"] != "pending" {
        return;
    }
    let Some(id) = row["action_id"].as_str() else {
        return;
    };
    let Ok(request) = store.get_by_id(id) else {
        return;
    };
    let status = match request.status {
        Status::Pending => return,
        Status::Approved | Status::Edited if !request.consumed => "approved",
        _ => "decided",
    };
    row["status"] = json!(status);
    row["request_status"] = json!(request.status.as_str());
    if row["approver"].is_null() {
        row["approver"] = json!(request.approver);
    }
}

/// The JSON answer of [`cached_bytes`], with its generation.
fn json_answer((generation, bytes): (u64, Bytes)) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (
                header::HeaderName::from_static("x-attest-generation"),
                generation.to_string(),
            ),
        ],
        bytes,
    )
        .into_response()
}

/// The answer for `key` and its generation, from the cache or computed ([`cached`]).
async fn cached_bytes(
    review: Arc<Review>,
    key: String,
    reads: Reads,
    compute: impl FnOnce(&Review) -> Result<Value, ApiError> + Send + 'static,
) -> Result<(u64, Bytes), ApiError> {
    tokio::task::spawn_blocking(move || -> Result<(u64, Bytes), ApiError> {
        let generation = review
            .model
            .generation()
            .map_err(|e| ApiError::internal(&e))?;
        if let Some(hit) = review.cache.get(generation, &key) {
            return Ok((generation, hit));
        }
        let complete = match reads {
            Reads::Columns => true,
            Reads::Fold => {
                review
                    .model
                    .catch_up_at_most(generation, FOLD_PER_POLL)
                    .map_err(|e| ApiError::internal(&e))?;
                review.model.folded() >= generation
            }
        };
        let mut value = compute(&review)?;
        value["generation"] = json!(generation);
        let bytes = Bytes::from(serde_json::to_vec(&value).map_err(|e| ApiError::internal(&e))?);
        if complete {
            review.cache.put(generation, key, bytes.clone());
        }
        Ok((generation, bytes))
    })
    .await
    .map_err(|e| ApiError::internal(&e))?
}

fn number<T: std::str::FromStr>(
    query: &HashMap<String, String>,
    name: &str,
) -> Result<Option<T>, ApiError> {
    query
        .get(name)
        .map(|text| {
            text.parse::<T>().map_err(|_| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("`{name}` must be a whole number"),
                )
            })
        })
        .transpose()
}

async fn summary(
    State(state): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let review = authorized(&state, &headers).await?;
    let hours = number::<usize>(&query, "hours")?
        .unwrap_or(48)
        .clamp(1, HOURS_KEPT);
    let now = SystemTime::now();
    let hour = crate::review::rows::unix_secs(now) / 3_600;
    let store = state.attest.approvals().ok();
    let key = format!("summary:{hours}:{hour}");
    cached(review, key, Reads::Fold, move |review| {
        let mut value = review
            .model
            .summary(hours, now)
            .map_err(|e| ApiError::internal(&e))?;
        let pending = store.and_then(|s| s.pending().ok()).map(|p| p.len());
        value["pending_approvals"] = json!(pending);
        Ok(value)
    })
    .await
}

async fn chain(State(state): State<Shared>, headers: HeaderMap) -> Result<Response, ApiError> {
    let review = authorized(&state, &headers).await?;
    Ok(axum::Json(review.verifier.status()).into_response())
}

async fn list(
    State(state): State<Shared>,
    headers: HeaderMap,
    Path(kind): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let review = authorized(&state, &headers).await?;
    let kind = ListKind::parse(&kind)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no such list"))?;
    let before = number::<u64>(&query, "before")?;
    let limit = number::<usize>(&query, "limit")?
        .unwrap_or(50)
        .clamp(1, MAX_PAGE);
    let key = format!("list:{}:{before:?}:{limit}", kind.as_str());
    let reads = if ReadModel::indexed(kind) {
        Reads::Columns
    } else {
        Reads::Fold
    };
    cached_rows(&state, review, key, reads, move |review| {
        let (rows, total) = review
            .model
            .list_page(kind, before, limit)
            .map_err(|e| ApiError::internal(&e))?;
        let next = (rows.len() == limit)
            .then(|| rows.last().map(|r| r.seq))
            .flatten();
        let mut page =
            json!({"list": kind.as_str(), "total": total, "rows": rows, "next_before": next});
        if reads == Reads::Fold {
            page["folded_through"] = json!(review.model.folded());
        }
        Ok(page)
    })
    .await
}

async fn runs(
    State(state): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    let review = authorized(&state, &headers).await?;
    let limit = number::<usize>(&query, "limit")?
        .unwrap_or(20)
        .clamp(1, MAX_PAGE);
    cached(
        review,
        format!("runs:{limit}"),
        Reads::Fold,
        move |review| Ok(json!({"runs": review.model.recent_runs(limit)})),
    )
    .await
}

async fn run(
    State(state): State<Shared>,
    headers: HeaderMap,
    Path(run): Path<String>,
) -> Result<Response, ApiError> {
    let review = authorized(&state, &headers).await?;
    cached_rows(
        &state,
        review,
        format!("run:{run}"),
        Reads::Columns,
        move |review| {
            let rows = review.model.run(&run).map_err(|e| ApiError::internal(&e))?;
            if rows.is_empty() {
                return Err(ApiError::new(StatusCode::NOT_FOUND, "no such run"));
            }
            let truncated = rows.len() >= crate::review::model::RUN_ROWS_SHOWN;
            Ok(json!({"run_id": run, "rows": rows, "truncated": truncated}))
        },
    )
    .await
}

async fn agent(
    State(state): State<Shared>,
    headers: HeaderMap,
    Path(agent): Path<String>,
) -> Result<Response, ApiError> {
    let review = authorized(&state, &headers).await?;
    cached_rows(
        &state,
        review,
        format!("agent:{agent}"),
        Reads::Fold,
        move |review| {
            let rows = review
                .model
                .agent(&agent)
                .map_err(|e| ApiError::internal(&e))?
                .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no such agent"))?;
            Ok(json!({"agent": agent, "rows": rows}))
        },
    )
    .await
}

async fn row(
    State(state): State<Shared>,
    headers: HeaderMap,
    Path(seq): Path<String>,
) -> Result<Response, ApiError> {
    let review = authorized(&state, &headers).await?;
    let seq: u64 = seq
        .parse()
        .map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, "seq must be a whole number"))?;
    cached(review, format!("row:{seq}"), Reads::Columns, move |review| {
        let ledger = review.model.ledger();
        let mut found = None;
        let revealer = ledger.revealer().map_err(|e| ApiError::internal(&e))?;
        ledger
            .for_each_row_at(&[seq], |row| {
                let mut entry = serde_json::from_slice::<Value>(row.body).unwrap_or(Value::Null);
                // Sealed personal fields opened, or `erased`; the hash is the stored bytes'.
                revealer.reveal(&mut entry);
                found = Some((
                    entry,
                    attest_ledger::to_hex(&attest_ledger::entry_hash(row.body)),
                ));
                Ok(())
            })
            .map_err(|e| ApiError::internal(&e))?;
        let (entry, hash) =
            found.ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no such seq"))?;
        // Against the newest signed checkpoint when it covers the row, else against the
        // tree as it stands (no signature then).
        let proof = match ledger.prove_inclusion(seq, None) {
            Ok(proof) => Ok(proof),
            Err(_) => {
                let size = ledger.tip().ok().flatten().map(|(s, _)| s);
                ledger.prove_inclusion(seq, size)
            }
        };
        let (proof, proof_error) = match proof {
            Ok(proof) => (serde_json::to_value(&proof).unwrap_or(Value::Null), None),
            Err(err) => (Value::Null, Some(err.to_string())),
        };
        Ok(json!({"seq": seq, "hash": hash, "entry": entry, "proof": proof, "proof_error": proof_error}))
    })
    .await
}

/// `/metrics`: the one renderer's text with the dashboard's figures, for the scrape
/// credential (never an approver's token).
async fn metrics(State(state): State<Shared>, request: Request) -> Response {
    let Some(review) = state.review.clone() else {
        return ApiError::new(StatusCode::NOT_FOUND, "the dashboard is not enabled")
            .into_response();
    };
    let store = state.attest.approvals().ok();
    let ledger = Arc::clone(state.attest.ledger());
    crate::scrape::respond(&state.metrics, request, move || {
        let generation = review.model.generation()?;
        let counts = ledger.counts()?;
        let status = review.verifier.status();
        let secs = |ts: &Option<String>| {
            ts.as_deref()
                .and_then(crate::review::rows::parse_ts)
                .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map(|d| d.as_secs_f64())
        };
        let scrape = crate::review::metrics::Scrape {
            actions: review.model.actions_by_decision()?,
            pending: store.and_then(|s| s.pending().ok()).map(|p| p.len() as u64),
            seq: generation,
            last_verify: secs(&status.last_incremental_check),
            last_full_verify: secs(&status.last_full_pass),
            broken_seq: status.first_broken_seq,
        };
        Ok(crate::review::metrics::global().render(&counts, Some(&scrape))?)
    })
    .await
}
