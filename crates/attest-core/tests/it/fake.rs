//! A fake vendor API on 127.0.0.1: routes by method and raw path, scripted answers,
//! and a log of what it was asked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use serde_json::Value;

/// One scripted answer.
#[derive(Clone)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: String,
    pub(crate) delay: Duration,
    pub(crate) headers: Vec<(&'static str, String)>,
}

impl Answer {
    pub(crate) fn json(body: &Value) -> Self {
        Answer::raw(200, body.to_string())
    }

    pub(crate) fn raw(status: u16, body: impl Into<String>) -> Self {
        Answer {
            status,
            body: body.into(),
            delay: Duration::ZERO,
            headers: Vec::new(),
        }
    }

    pub(crate) fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    pub(crate) fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_owned()));
        self
    }
}

/// A request the fake received.
#[derive(Debug, Clone)]
pub(crate) struct Hit {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: String,
    pub(crate) headers: HashMap<String, String>,
    pub(crate) body: Option<Value>,
}

#[derive(Default)]
struct Inner {
    /// (method, path) → answers, used in order; the last repeats.
    routes: Mutex<HashMap<(String, String), Vec<Answer>>>,
    hits: Mutex<Vec<Hit>>,
}

pub(crate) struct Fake {
    pub(crate) base: String,
    inner: Arc<Inner>,
}

impl Fake {
    pub(crate) async fn start() -> Fake {
        let inner = Arc::new(Inner::default());
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&inner));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Fake {
            base: format!("http://{addr}"),
            inner,
        }
    }

    /// Answers `method path` with `answers` in turn (the last one repeats).
    pub(crate) fn route(&self, method: &str, path: &str, answers: Vec<Answer>) {
        self.inner
            .routes
            .lock()
            .unwrap()
            .insert((method.to_owned(), path.to_owned()), answers);
    }

    pub(crate) fn hits(&self) -> Vec<Hit> {
        self.inner.hits.lock().unwrap().clone()
    }
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    inner.hits.lock().unwrap().push(Hit {
        method: method.to_string(),
        path: path.clone(),
        query: uri.query().unwrap_or_default().to_owned(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_owned()))
            .collect(),
        body: serde_json::from_slice(&body).ok(),
    });
    let answer = {
        let mut routes = inner.routes.lock().unwrap();
        match routes.get_mut(&(method.to_string(), path)) {
            Some(answers) if answers.len() > 1 => Some(answers.remove(0)),
            Some(answers) => answers.first().cloned(),
            None => None,
        }
    };
    let answer = answer.unwrap_or_else(|| Answer::raw(404, r#"{"error":"not found"}"#));
    if !answer.delay.is_zero() {
        tokio::time::sleep(answer.delay).await;
    }
    let mut response = Response::builder()
        .status(StatusCode::from_u16(answer.status).unwrap())
        .header("content-type", "application/json");
    for (name, value) in &answer.headers {
        response = response.header(*name, value);
    }
    response.body(Body::from(answer.body)).unwrap()
}
