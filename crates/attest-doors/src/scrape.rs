//! Who may scrape metrics, and the scrape route of the processes that run actions
//! (`gateway` at `/_attest/metrics`, `mcp-proxy --listen` at `/metrics`; `serve` answers
//! its own `/metrics` through [`respond`] too).
//!
//! The credential is the scrape's own (`--metrics-token-file`, sent as
//! `Authorization: Bearer …`), never an approver's or the gateway's token: a scraper
//! reads counts and latencies and must not be able to decide anything. Without one, only
//! loopback peers are answered (403 otherwise).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use attest_ledger::Ledger;
use axum::extract::{ConnectInfo, Request};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use crate::review::metrics;

/// Who may scrape: the holder of the metrics token, or with none any loopback peer.
#[derive(Clone, Default)]
pub struct ScrapeAccess {
    /// The token's SHA-256, so that comparing takes the same time whatever the guess.
    token: Option<[u8; 32]>,
}

impl std::fmt::Debug for ScrapeAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.token.is_some() {
            "token"
        } else {
            "loopback"
        };
        f.debug_tuple("ScrapeAccess").field(&kind).finish()
    }
}

impl ScrapeAccess {
    /// The holder of `token` may scrape (read from `--metrics-token-file` by the binary,
    /// which refuses an empty or shared file).
    pub fn token(token: &str) -> ScrapeAccess {
        ScrapeAccess {
            token: Some(Sha256::digest(token.as_bytes()).into()),
        }
    }

    /// `None` when `peer` with `headers` may scrape, else the refusal.
    fn refusal(&self, peer: Option<SocketAddr>, headers: &HeaderMap) -> Option<Response> {
        match &self.token {
            Some(token) => {
                let given = headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .map(|given| Sha256::digest(given.trim().as_bytes()));
                let ok = given.is_some_and(|given| bool::from(given.as_slice().ct_eq(token)));
                (!ok).then(|| {
                    (
                        StatusCode::UNAUTHORIZED,
                        [(header::WWW_AUTHENTICATE, "Bearer")],
                        "metrics need the metrics token (Authorization: Bearer …)\n",
                    )
                        .into_response()
                })
            }
            None => {
                // A loopback name in `Host` too: a page elsewhere that rebinds its DNS
                // name to 127.0.0.1 reaches a loopback peer's port under its own name.
                let loopback = peer.is_some_and(|peer| peer.ip().is_loopback())
                    && headers
                        .get(header::HOST)
                        .and_then(|v| v.to_str().ok())
                        .is_some_and(loopback_host);
                (!loopback).then(|| {
                    (
                        StatusCode::FORBIDDEN,
                        "metrics answer loopback peers only (or start with --metrics-token-file)\n",
                    )
                        .into_response()
                })
            }
        }
    }
}

/// Whether `host` (a `Host` header: `name[:port]`) names this machine's loopback.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The peer a connection came from, when the server recorded it.
pub fn peer(request: &Request) -> Option<SocketAddr> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| *peer)
}

/// Answers a scrape: refused unless `access` allows it, else `render` (run off the
/// async threads: it reads the ledger) as OpenMetrics text.
pub async fn respond(
    access: &ScrapeAccess,
    request: Request,
    render: impl FnOnce() -> anyhow::Result<String> + Send + 'static,
) -> Response {
    if let Some(refusal) = access.refusal(peer(&request), request.headers()) {
        return refusal;
    }
    match tokio::task::spawn_blocking(render).await {
        Ok(Ok(text)) => ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response(),
        Ok(Err(err)) => {
            eprintln!("attest: metrics: {err:#}");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "metrics could not be read\n",
            )
                .into_response()
        }
        Err(err) => {
            eprintln!("attest: metrics: {err}");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "metrics could not be read\n",
            )
                .into_response()
        }
    }
}

/// The scrape route at `path` for a process whose actions go to `ledger`: counts from
/// the ledger's counters, histograms of this process.
pub fn route(path: &str, access: ScrapeAccess, ledger: Arc<Ledger>) -> axum::Router {
    let access = Arc::new(access);
    axum::Router::new().route(
        path,
        axum::routing::get(move |request: Request| async move {
            respond(&access, request, move || {
                let counts = ledger.counts().context("reading the ledger's counters")?;
                Ok(metrics::global().render(&counts, None)?)
            })
            .await
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_needed_when_set_and_loopback_otherwise() {
        let loopback: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let remote: SocketAddr = "192.0.2.7:5000".parse().unwrap();
        let host = |h: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, h.parse().unwrap());
            headers
        };
        let open = ScrapeAccess::default();
        for name in ["127.0.0.1:9", "localhost:9", "[::1]:9", "LOCALHOST"] {
            assert!(
                open.refusal(Some(loopback), &host(name)).is_none(),
                "{name}"
            );
        }
        let refused = open.refusal(Some(remote), &host("127.0.0.1:9")).unwrap();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        assert!(open.refusal(None, &host("127.0.0.1:9")).is_some());
        // A rebound name reaching a loopback port is not a loopback scrape.
        assert!(open
            .refusal(Some(loopback), &host("evil.example:9"))
            .is_some());
        assert!(open.refusal(Some(loopback), &HeaderMap::new()).is_some());
        let tokened = ScrapeAccess {
            token: Some(Sha256::digest(b"s3cret").into()),
        };
        let bearer = |t: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                header::AUTHORIZATION,
                format!("Bearer {t}").parse().unwrap(),
            );
            h
        };
        assert!(tokened.refusal(Some(remote), &bearer("s3cret")).is_none());
        let wrong = tokened.refusal(Some(loopback), &bearer("s3cre")).unwrap();
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
        assert!(tokened.refusal(Some(loopback), &HeaderMap::new()).is_some());
    }
}
