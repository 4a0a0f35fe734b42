//! Which `POST` a streamable-HTTP upstream's notification came on.
//!
//! A server sends what it says during a request on that request's SSE stream; rmcp's
//! HTTP client reads every stream into one sequence of messages and does not say which
//! stream a notification came on — so with several `tools/call`s of one session in
//! flight, the proxy could not tell whose log line it was. [`Posted`] wraps the client
//! rmcp's transport is generic over ([`StreamableHttpClient`]): each notification on a
//! `POST`'s stream (and on that stream resumed with `Last-Event-ID`) gets that request's
//! id in its `_meta` under a per-connection random key ([`StreamKey`]), which is first
//! removed from everything the upstream sends, so the upstream cannot forge it. The
//! proxy takes the key out again before relaying and marks the notification for the
//! client's request that one was sent for ([`super::streams::Destination`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage, RequestId};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde_json::Value;
use sse_stream::Sse;

type SseStream = BoxStream<'static, Result<Sse, SseError>>;

/// The `_meta` key one upstream connection marks notifications with: random.
#[derive(Clone, Debug)]
pub struct StreamKey(Arc<str>);

impl StreamKey {
    pub fn random() -> StreamKey {
        StreamKey(format!("dev.attest/posted-{}", uuid::Uuid::new_v4().simple()).into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// rmcp's HTTP client `C`, marking each notification with the request whose stream it
/// came on.
#[derive(Clone)]
pub(super) struct Posted<C> {
    inner: C,
    key: StreamKey,
    /// A `POST` stream's latest event id → its request, so that the stream resumed with
    /// `Last-Event-ID` (a `GET`) is known as that request's.
    resumable: Arc<Mutex<HashMap<String, RequestId>>>,
}

impl<C> Posted<C> {
    pub(super) fn new(inner: C, key: StreamKey) -> Posted<C> {
        Posted {
            inner,
            key,
            resumable: Arc::default(),
        }
    }

    /// `stream` with the key removed from every message and, when it is `request`'s,
    /// each notification marked with it; `resumed_after` is the event it resumes after.
    fn marking(
        &self,
        stream: SseStream,
        request: Option<RequestId>,
        resumed_after: Option<String>,
    ) -> SseStream {
        let key = self.key.clone();
        let resumable = Arc::clone(&self.resumable);
        let mut last = resumed_after.filter(|_| request.is_some());
        stream
            .map(move |event| {
                let mut event = event?;
                let Some(data) = event.data.as_deref() else {
                    return Ok(event);
                };
                let Ok(mut message) = serde_json::from_str::<Value>(data) else {
                    return Ok(event);
                };
                let stripped = strip(&mut message, &key);
                let Some(request) = &request else {
                    if stripped {
                        event.data = Some(message.to_string());
                    }
                    return Ok(event);
                };
                let streams = || {
                    resumable
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                };
                if let Some(id) = &event.id {
                    let mut streams = streams();
                    if let Some(previous) = last.replace(id.clone()) {
                        streams.remove(&previous);
                    }
                    streams.insert(id.clone(), request.clone());
                }
                // Answered: the stream is not resumed any more.
                if is_answer_to(&message, request) {
                    if let Some(previous) = last.take() {
                        streams().remove(&previous);
                    }
                }
                if mark(&mut message, &key, request) || stripped {
                    event.data = Some(message.to_string());
                }
                Ok(event)
            })
            .boxed()
    }

    fn posted(
        &self,
        message: &ClientJsonRpcMessage,
        response: StreamableHttpPostResponse,
    ) -> StreamableHttpPostResponse {
        let request = match message {
            JsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        match response {
            StreamableHttpPostResponse::Sse(stream, session) => {
                StreamableHttpPostResponse::Sse(self.marking(stream, request, None), session)
            }
            other => other,
        }
    }

    fn resumed(&self, last_event_id: Option<&str>) -> Option<RequestId> {
        let map = self
            .resumable
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(last_event_id?).cloned()
    }
}

/// Removes `key` from `message`'s `_meta`; whether it was there.
fn strip(message: &mut Value, key: &StreamKey) -> bool {
    message
        .pointer_mut("/params/_meta")
        .and_then(Value::as_object_mut)
        .is_some_and(|meta| meta.remove(key.as_str()).is_some())
}

/// Marks a notification with `request`; whether `message` is one.
fn mark(message: &mut Value, key: &StreamKey, request: &RequestId) -> bool {
    let is_notification = message.get("method").is_some() && message.get("id").is_none();
    let Some(Value::Object(params)) = message.get_mut("params").filter(|_| is_notification) else {
        return false;
    };
    let Ok(id) = serde_json::to_value(request) else {
        return false;
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    match meta.as_object_mut() {
        Some(meta) => {
            meta.insert(key.as_str().to_owned(), id);
            true
        }
        None => false,
    }
}

fn is_answer_to(message: &Value, request: &RequestId) -> bool {
    message.get("method").is_none()
        && serde_json::to_value(request).is_ok_and(|id| message.get("id") == Some(&id))
}

/// The request id a notification was marked with, taken out of its `_meta`.
pub(super) fn take_mark(
    meta: &mut serde_json::Map<String, Value>,
    key: &StreamKey,
) -> Option<RequestId> {
    serde_json::from_value(meta.remove(key.as_str())?).ok()
}

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for Posted<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let response = self
            .inner
            .post_message(
                uri,
                message.clone(),
                session_id,
                auth_header,
                custom_headers,
            )
            .await?;
        Ok(self.posted(&message, response))
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let response = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message.clone(),
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.posted(&message, response))
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let response = self
            .inner
            .post_message_with_response_limits(
                uri,
                message.clone(),
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await?;
        Ok(self.posted(&message, response))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<SseStream, StreamableHttpError<Self::Error>> {
        let request = self.resumed(last_event_id.as_deref());
        let stream = self
            .inner
            .get_stream(
                uri,
                session_id,
                last_event_id.clone(),
                auth_header,
                custom_headers,
            )
            .await?;
        Ok(self.marking(stream, request, last_event_id))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<SseStream, StreamableHttpError<Self::Error>> {
        let request = self.resumed(last_event_id.as_deref());
        let stream = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id.clone(),
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.marking(stream, request, last_event_id))
    }
}

/// The HTTP client rmcp's transport builds for itself (`from_config`), built here so it
/// can be wrapped: no idle connection pool, and only same-origin `307`/`308` redirects
/// followed (they keep the method and body), at most ten.
pub(super) fn default_client() -> Result<reqwest_rmcp::Client, reqwest_rmcp::Error> {
    const MAX_REDIRECTS: usize = 10;
    let policy = reqwest_rmcp::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest_rmcp::StatusCode::TEMPORARY_REDIRECT
                | reqwest_rmcp::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    });
    reqwest_rmcp::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(policy)
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notifications_are_marked_with_their_request_and_a_forged_mark_is_removed() {
        let key = StreamKey::random();
        let mut forged = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "x", "_meta": {key.as_str(): 99}}});
        assert!(strip(&mut forged, &key));
        assert_eq!(forged["params"]["_meta"], serde_json::json!({}));
        assert!(mark(&mut forged, &key, &RequestId::Number(3)));
        let meta = forged["params"]["_meta"].as_object_mut().unwrap();
        assert_eq!(take_mark(meta, &key), Some(RequestId::Number(3)));
        // A response is not marked.
        let mut answer = serde_json::json!({"jsonrpc": "2.0", "id": 3, "result": {}});
        assert!(!mark(&mut answer, &key, &RequestId::Number(3)));
        assert!(is_answer_to(&answer, &RequestId::Number(3)));
    }
}
