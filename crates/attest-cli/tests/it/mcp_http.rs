//! A minimal streamable-HTTP MCP client for the tests that need to see the HTTP itself
//! (status codes, headers, which stream a message came on): one session, each request
//! answered as JSON or as an SSE stream.

use serde_json::{json, Value};

/// One MCP session over streamable HTTP.
pub(crate) struct Session {
    url: String,
    /// The `Mcp-Session-Id` the server gave (sent on every later request).
    pub(crate) id: Option<String>,
    /// Extra headers sent on every request (`Authorization`, `Origin`).
    pub(crate) headers: Vec<(String, String)>,
    next: u64,
    http: reqwest::Client,
}

/// An HTTP answer: its status, headers, and the JSON-RPC messages it carried in order.
pub(crate) struct Answer {
    pub(crate) status: reqwest::StatusCode,
    pub(crate) headers: reqwest::header::HeaderMap,
    pub(crate) messages: Vec<Value>,
}

impl Answer {
    /// The response (the message with an `id`), with the notifications that came before
    /// it on the same stream under `"notifications"`.
    pub(crate) fn response(&self) -> Value {
        let (answer, notes): (Vec<&Value>, Vec<&Value>) =
            self.messages.iter().partition(|m| m.get("id").is_some());
        let mut answer = answer.first().map_or(Value::Null, |m| (*m).clone());
        if !notes.is_empty() {
            answer["notifications"] = Value::Array(notes.into_iter().cloned().collect());
        }
        answer
    }
}

impl Session {
    /// A session not yet initialized, sending `headers` on every request.
    pub(crate) fn new(url: &str, headers: &[(&str, &str)]) -> Session {
        Session {
            url: url.to_owned(),
            id: None,
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            next: 0,
            http: reqwest::Client::new(),
        }
    }

    /// Sends `initialize` (keeping the session id it is given) and returns its answer.
    pub(crate) async fn initialize(&mut self) -> Answer {
        let answer = self
            .send(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "attest-tests", "version": "1"}}),
            )
            .await;
        if let Some(id) = answer.headers.get("mcp-session-id") {
            self.id = Some(id.to_str().unwrap().to_owned());
        }
        answer
    }

    /// A session opened with `initialize` and `notifications/initialized`.
    pub(crate) async fn open(url: &str, headers: &[(&str, &str)]) -> Session {
        let mut session = Session::new(url, headers);
        let init = session.initialize().await;
        assert!(
            init.response().get("result").is_some(),
            "{}",
            init.response()
        );
        session.notify("notifications/initialized").await;
        session
    }

    async fn post(&self, body: &Value) -> reqwest::Response {
        let mut request = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-06-18")
            .json(body);
        if let Some(id) = &self.id {
            request = request.header("mcp-session-id", id);
        }
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        request.send().await.unwrap()
    }

    /// Sends a notification; returns the HTTP status.
    pub(crate) async fn notify(&self, method: &str) -> reqwest::StatusCode {
        self.post(&json!({"jsonrpc": "2.0", "method": method}))
            .await
            .status()
    }

    /// Sends one request and reads its whole answer.
    pub(crate) async fn send(&mut self, method: &str, params: Value) -> Answer {
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        let response = self.post(&body).await;
        let status = response.status();
        let headers = response.headers().clone();
        let sse = headers
            .get("content-type")
            .is_some_and(|t| t.to_str().unwrap_or("").starts_with("text/event-stream"));
        let text = response.text().await.unwrap();
        let messages = if sse {
            text.lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str(data.trim()).ok())
                .collect()
        } else {
            serde_json::from_str(&text).into_iter().collect()
        };
        Answer {
            status,
            headers,
            messages,
        }
    }

    /// [`Session::send`]'s response, with the notifications that preceded it.
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params).await.response()
    }
}
