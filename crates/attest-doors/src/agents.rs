//! Authenticated agents at the binary's doors: core's [`AgentAuth`] (shared with the
//! Python and TypeScript packages) behind HTTP statuses, and the guard in front of
//! `mcp-proxy --listen`.

use std::sync::Arc;

use attest_core::agents::{AgentAuth, AgentRefusal, RefusalKind};
use http::StatusCode;

use crate::mcp::resource::Authenticated;

/// The HTTP status a door answers `refusal` with (its store's error, when it has one,
/// goes to stderr, not to the caller).
pub fn status(refusal: &AgentRefusal) -> StatusCode {
    if let Some(detail) = &refusal.detail {
        eprintln!("attest: checking an agent token: {detail}");
    }
    match refusal.kind {
        RefusalKind::Unauthenticated => StatusCode::UNAUTHORIZED,
        RefusalKind::Forbidden => StatusCode::FORBIDDEN,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The middleware in front of `mcp-proxy --listen`'s `/mcp` when agents are configured:
/// the agent the `Authorization: Bearer` credential proves goes on in the request's
/// extensions (as the `Authenticated` caller the proxy records); a refusal is answered
/// here, and nothing reaches the upstream.
pub async fn listen_guard(
    axum::extract::State(agents): axum::extract::State<Arc<AgentAuth>>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let bearer = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim().to_owned());
    match agents.identify(bearer.as_deref(), None).await {
        Ok(identity) => {
            request
                .extensions_mut()
                .insert(Authenticated::from(identity));
            next.run(request).await
        }
        Err(refusal) => {
            let status = status(&refusal);
            let body = serde_json::json!({
                "jsonrpc": "2.0",
                "id": null,
                "error": {"code": -32001, "message": refusal.reason},
            });
            let mut response = (status, axum::Json(body)).into_response();
            if status == StatusCode::UNAUTHORIZED {
                response.headers_mut().insert(
                    http::header::WWW_AUTHENTICATE,
                    http::HeaderValue::from_static(r#"Bearer error="invalid_token""#),
                );
            }
            response
        }
    }
}
