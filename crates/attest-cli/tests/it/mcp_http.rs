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

    /// Sends one request and returns its answer's SSE stream to read event by event.
    pub(crate) async fn stream(&mut self, method: &str, params: Value) -> Events {
        self.next += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        let response = self.post(&body).await;
        assert!(response.status().is_success(), "{}", response.status());
        Events::new(response)
    }

    /// Resumes a stream after `last_event_id` (a `GET` with `Last-Event-ID`).
    pub(crate) async fn resume(&self, last_event_id: &str) -> Events {
        let mut request = self
            .http
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .header("last-event-id", last_event_id);
        if let Some(id) = &self.id {
            request = request.header("mcp-session-id", id);
        }
        let response = request.send().await.unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        Events::new(response)
    }
}

/// One SSE event: its id, and the JSON-RPC message it carried (none for a priming event).
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) id: Option<String>,
    pub(crate) message: Option<Value>,
}

/// An SSE answer read as it arrives.
pub(crate) struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    fn new(response: reqwest::Response) -> Events {
        Events {
            response,
            buffer: String::new(),
        }
    }

    /// The next event; none once the stream ended.
    pub(crate) async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let field = |name: &str| {
                    block
                        .lines()
                        .find_map(|line| line.strip_prefix(name))
                        .map(|value| value.trim().to_owned())
                };
                if block.lines().all(|line| line.starts_with(':')) {
                    continue; // a keep-alive comment
                }
                return Some(Event {
                    id: field("id:"),
                    message: field("data:").and_then(|data| serde_json::from_str(&data).ok()),
                });
            }
            let chunk = self.response.chunk().await.ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The events up to and including the first whose message `until` accepts (all of
    /// them, if none does before the stream ends).
    pub(crate) async fn read_until(&mut self, until: impl Fn(&Value) -> bool) -> Vec<Event> {
        let mut read = Vec::new();
        while let Some(event) = self.next().await {
            let done = event.message.as_ref().is_some_and(&until);
            read.push(event);
            if done {
                break;
            }
        }
        read
    }
}

/// What the `notifications/message` among `events` said (their `data`), in order.
pub(crate) fn log_lines(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| event.message.as_ref())
        .filter(|message| message["method"] == "notifications/message")
        .map(|message| message["params"]["data"].as_str().unwrap_or("").to_owned())
        .collect()
}
