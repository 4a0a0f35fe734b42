//! Who may use a `--listen` session, and an upstream's challenge passed on as HTTP.
//!
//! A session's requests reach the upstream with the bearer token of the request that
//! opened it. So a session is bound to that credential: the SHA-256 of the `Authorization`
//! header (or of its absence) is kept per `Mcp-Session-Id`, and a request naming the
//! session with another credential, or none, is refused with `403` before the SDK sees
//! it — knowing a session id is not enough to act with its owner's token. (The digest is
//! what is kept, never the token.)
//!
//! When the upstream answers the proxy's `initialize` with `401` or `403` and a
//! `WWW-Authenticate` challenge ([`upstream_challenge`]), the client gets that status and
//! that header unchanged, so a client that does OAuth itself can discover the upstream's
//! authorization server and try again with a token.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, Method, StatusCode};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::resource::Authenticated;

/// The `Mcp-Session-Id` header.
const SESSION_HEADER: &str = "mcp-session-id";

/// The largest `initialize` answer read to look for a challenge.
const MAX_INITIALIZE_ANSWER: usize = 1024 * 1024;

/// The key of an `initialize` error's `data` under which the proxy puts the upstream's
/// challenge (set only by [`upstream_challenge`]).
const CHALLENGE_KEY: &str = "attest/upstream_challenge";

/// The credential each open session was opened with, by session id.
#[derive(Clone, Default)]
pub(super) struct SessionGuard {
    bound: Arc<Mutex<HashMap<String, [u8; 32]>>>,
}

impl SessionGuard {
    pub(super) fn new() -> Self {
        SessionGuard::default()
    }

    fn bound(&self) -> std::sync::MutexGuard<'_, HashMap<String, [u8; 32]>> {
        self.bound
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The JSON-RPC error data that carries an upstream's `status` (401 or 403) and its
/// `WWW-Authenticate` challenge from the proxy's `initialize` to [`guard`].
pub(super) fn upstream_challenge(status: u16, www_authenticate: &str) -> Value {
    json!({CHALLENGE_KEY: {"status": status, "www_authenticate": www_authenticate}})
}

/// The middleware: checks the session's credential, binds new sessions, forgets ended
/// ones, and turns an `initialize` refused upstream into the upstream's own status.
pub(super) async fn guard(
    State(guard): State<SessionGuard>,
    request: Request,
    next: Next,
) -> Response {
    let credential = credential(&request);
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let method = request.method().clone();
    if let Some(id) = &session {
        if guard
            .bound()
            .get(id)
            .is_some_and(|bound| *bound != credential)
        {
            return refused();
        }
    }
    let response = next.run(request).await;
    match session {
        None => {
            if let Some(id) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|value| value.to_str().ok())
            {
                guard.bound().insert(id.to_owned(), credential);
            }
            if method == Method::POST {
                return challenged(response).await;
            }
            response
        }
        Some(id) => {
            // Ended by the client, or unknown to the SDK (expired): forgotten.
            let ended = method == Method::DELETE && response.status().is_success();
            if ended || response.status() == StatusCode::NOT_FOUND {
                guard.bound().remove(&id);
            }
            response
        }
    }
}

/// What a session is bound to: the identity a protected resource authenticated (so a
/// refreshed token keeps its session), else SHA-256 of the `Authorization` header, or of
/// nothing when there is none.
fn credential(request: &Request) -> [u8; 32] {
    let mut hash = Sha256::new();
    if let Some(who) = request.extensions().get::<Authenticated>() {
        hash.update([2]);
        for part in [&who.issuer, &who.subject] {
            hash.update((part.len() as u64).to_be_bytes());
            hash.update(part.as_bytes());
        }
    } else if let Some(value) = request.headers().get(header::AUTHORIZATION) {
        hash.update([1]);
        hash.update(value.as_bytes());
    } else {
        hash.update([0]);
    }
    hash.finalize().into()
}

fn refused() -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {
            "code": -32600,
            "message": "this session was opened with another credential; open a session of your own",
        },
    });
    (StatusCode::FORBIDDEN, axum::Json(body)).into_response()
}

/// The `initialize` answer as it is, or — when it is the proxy's error carrying an
/// upstream challenge — that status with the challenge in `WWW-Authenticate`.
async fn challenged(response: Response) -> Response {
    if response.status() != StatusCode::OK {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_INITIALIZE_ANSWER).await else {
        // Longer than any initialize answer, or broken: not one to rewrite.
        return (
            StatusCode::BAD_GATEWAY,
            "the initialize answer could not be read",
        )
            .into_response();
    };
    if let Some((status, challenge, message)) = find_challenge(&bytes) {
        if let (Ok(status), Ok(value)) = (
            StatusCode::from_u16(status),
            HeaderValue::from_str(&challenge),
        ) {
            let mut answer = (status, axum::Json(message)).into_response();
            answer.headers_mut().insert(header::WWW_AUTHENTICATE, value);
            return answer;
        }
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// The upstream challenge in an answer (a JSON body, or SSE `data:` lines): its status,
/// its header, and the JSON-RPC error to send with them.
fn find_challenge(body: &[u8]) -> Option<(u16, String, Value)> {
    let text = std::str::from_utf8(body).ok()?;
    let candidates = std::iter::once(text).chain(
        text.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim),
    );
    candidates
        .filter_map(|candidate| serde_json::from_str::<Value>(candidate).ok())
        .find_map(|message| {
            let found = message.pointer("/error/data")?.get(CHALLENGE_KEY)?;
            let status = u16::try_from(found.get("status")?.as_u64()?).ok()?;
            let challenge = found.get("www_authenticate")?.as_str()?.to_owned();
            matches!(status, 401 | 403).then_some((status, challenge, message))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_is_found_in_json_and_in_sse_and_only_for_401_or_403() {
        let error = json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -32603, "message": "m",
            "data": upstream_challenge(401, r#"Bearer resource_metadata="https://x/.well-known/oauth-protected-resource""#)}});
        let (status, challenge, _) = find_challenge(error.to_string().as_bytes()).unwrap();
        assert_eq!(status, 401);
        assert!(challenge.starts_with("Bearer resource_metadata="));
        let sse = format!("id: 1\nretry: 300\ndata: \n\nevent: message\ndata: {error}\n\n");
        assert_eq!(find_challenge(sse.as_bytes()).unwrap().0, 401);
        let other = json!({"error": {"data": upstream_challenge(500, "x")}});
        assert!(find_challenge(other.to_string().as_bytes()).is_none());
        assert!(find_challenge(b"{\"result\":{}}").is_none());
    }

    fn request(authorization: Option<&'static str>, who: Option<&str>) -> Request {
        let mut request = Request::new(Body::empty());
        if let Some(value) = authorization {
            request
                .headers_mut()
                .insert(header::AUTHORIZATION, HeaderValue::from_static(value));
        }
        if let Some(subject) = who {
            request.extensions_mut().insert(Authenticated {
                issuer: "https://as".to_owned(),
                subject: subject.to_owned(),
                how: "jwt",
                owner: None,
            });
        }
        request
    }

    #[test]
    fn credentials_differ_with_and_without_a_header_and_follow_an_identity() {
        let with = credential(&request(Some("Bearer a"), None));
        assert_ne!(with, credential(&request(Some("Bearer b"), None)));
        assert_ne!(with, credential(&request(None, None)));
        assert_eq!(with, credential(&request(Some("Bearer a"), None)));
        // One identity with a refreshed token is one credential; two identities are two.
        let alice = credential(&request(Some("Bearer t1"), Some("alice")));
        assert_eq!(
            alice,
            credential(&request(Some("Bearer t2"), Some("alice")))
        );
        assert_ne!(alice, credential(&request(Some("Bearer t1"), Some("bob"))));
    }
}
