//! Every answer the gateway gives itself instead of the upstream's: one enum of reasons,
//! each with its status and its JSON body (`{"error": …}` and what that reason adds),
//! turned into a response in one place ([`IntoResponse`]), with the `x-attest-*` headers
//! whenever a receipt exists.

use attest_core::{IdempotencyError, Receipt};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::receipt_json;

/// Why the gateway answers a request itself.
#[derive(Debug)]
pub(crate) enum Rejection {
    /// The request is malformed: no upstream, a bad header, a held request that cannot
    /// be replayed as HTTP (400).
    BadRequest(String),
    /// The gateway's shared token is missing or wrong (401).
    NeedsToken(String),
    /// The request names an upstream that is not allowed, or resumes another agent's
    /// held request (403).
    Forbidden(String),
    /// A path under `/_attest/` the gateway does not serve, or a resume token it does not
    /// know (404).
    NotFound(String),
    /// A refusal whose status the part that refused chose: a tenant, an agent's
    /// credential, a body in a content coding the gateway cannot undo.
    Refused(StatusCode, String),
    /// The upstream could not be reached for a call nobody records (502).
    Unreachable(String),
    /// The approval store refused the resume (409).
    Approval(String),
    /// The intent row was not accepted, so the upstream was never called (507: the
    /// server cannot store what the request needs, which clients do not retry).
    NotRecorded(String),
    /// Attest failed inside; the gateway's log says why, the caller only this (500).
    Internal(&'static str),
    /// An `Idempotency-Key` the pipeline refused: 400 malformed, 422 used for another
    /// request, 409 its first request has no outcome yet. Nothing was sent upstream.
    Idempotency(IdempotencyError),
    /// A key whose first request ran but whose response was not kept (409).
    NotReplayable { error: String, receipt: Receipt },
    /// Policy, a person or an expiry said no; the upstream was not called (403).
    NotRun { error: String, receipt: Receipt },
    /// The call is held for a person (202): the held answer with its resume URL.
    Held { body: Value, receipt: Receipt },
    /// The recorded call's upstream could not be reached or did not answer (502).
    TransportFailed { why: String, receipt: Receipt },
}

impl Rejection {
    /// The body of a 502 for a recorded call, as kept for an idempotent retry too.
    pub(crate) fn transport_failed_body(why: &str, receipt: &Receipt) -> Value {
        json!({"error": why, "receipt": receipt_json(receipt)})
    }

    fn parts(self) -> (StatusCode, Value, Option<Receipt>) {
        let error = |status, why: String| (status, json!({"error": why}), None);
        match self {
            Rejection::BadRequest(why) => error(StatusCode::BAD_REQUEST, why),
            Rejection::NeedsToken(why) => error(StatusCode::UNAUTHORIZED, why),
            Rejection::Forbidden(why) => error(StatusCode::FORBIDDEN, why),
            Rejection::NotFound(why) => error(StatusCode::NOT_FOUND, why),
            Rejection::Refused(status, why) => error(status, why),
            Rejection::Unreachable(why) => error(StatusCode::BAD_GATEWAY, why),
            Rejection::Approval(why) => error(StatusCode::CONFLICT, why),
            Rejection::Internal(why) => error(StatusCode::INTERNAL_SERVER_ERROR, why.to_owned()),
            Rejection::NotRecorded(why) => (
                StatusCode::INSUFFICIENT_STORAGE,
                json!({"error": why, "upstream_called": false}),
                None,
            ),
            Rejection::Idempotency(err) => {
                let status = match err {
                    IdempotencyError::Mismatch => StatusCode::UNPROCESSABLE_ENTITY,
                    IdempotencyError::InUse { .. } | IdempotencyError::Unbound { .. } => {
                        StatusCode::CONFLICT
                    }
                    _ => StatusCode::BAD_REQUEST,
                };
                let mut body = json!({"error": err.to_string(), "upstream_called": false});
                if let IdempotencyError::InUse {
                    intent_seq: Some(seq),
                    ..
                }
                | IdempotencyError::Unbound {
                    intent_seq: Some(seq),
                } = err
                {
                    body["intent_seq"] = json!(seq);
                }
                (status, body, None)
            }
            Rejection::NotReplayable { error, receipt } => (
                StatusCode::CONFLICT,
                json!({"error": error, "receipt": receipt_json(&receipt)}),
                Some(receipt),
            ),
            Rejection::NotRun { error, receipt } => (
                StatusCode::FORBIDDEN,
                json!({"error": format!("{error}; the upstream was not called"),
                       "reasons": receipt.reasons, "receipt": receipt_json(&receipt)}),
                Some(receipt),
            ),
            Rejection::Held { body, receipt } => (StatusCode::ACCEPTED, body, Some(receipt)),
            Rejection::TransportFailed { why, receipt } => (
                StatusCode::BAD_GATEWAY,
                Rejection::transport_failed_body(&why, &receipt),
                Some(receipt),
            ),
        }
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        let (status, body, receipt) = self.parts();
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(receipt) = &receipt {
            crate::gateway::add_receipt_headers(response.headers_mut(), receipt);
        }
        response
    }
}
