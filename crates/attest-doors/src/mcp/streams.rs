//! `--listen`'s sessions: rmcp's [`LocalSessionManager`], with what the upstream said
//! during a request on that request's own response stream, and `subscriptions/listen`
//! relayed.
//!
//! The transport spec sends what a server says during a request (notifications, its own
//! requests) on that request's SSE stream, before the response. rmcp's session manager
//! routes progress (by its token), cancellation (by its request id) and the server's
//! requests there, and every other notification to the session's standalone (`GET`)
//! stream. So a notification the proxy knows to belong to a request — a [`Destination`]
//! the proxy set on it — goes into rmcp wrapped in a carrier rmcp itself routes to that
//! request's stream: a `notifications/cancelled` naming the request, the message under a
//! per-process random `_meta` key ([`carrier_key`]). rmcp stores the carrier with the
//! stream's other events, so a client that resumes the stream with `Last-Event-ID` gets
//! it again; every stream the session hands out (a request's, the standalone one, a
//! resumed one) unwraps it back into the message it carries. A look-alike the proxy did
//! not make cannot pass as one: an upstream's cancellations are never forwarded, and the
//! key is random per process and never leaves it.
//!
//! Where a notification belongs, as the proxy tells it ([`super::proxy`]):
//!
//! - a subscription's notification (`subscriptionId` in its `_meta`): the
//!   `subscriptions/listen` request it names;
//! - from a streamable-HTTP upstream: the request on whose `POST` stream the upstream
//!   sent it, else (its standalone stream) the standalone stream here
//!   ([`super::http_streams`]);
//! - from a stdio upstream, a log message (`notifications/message`) while exactly one
//!   `tools/call` of the session is open: that call. With several open at once it goes
//!   to the standalone stream, as the transport spec allows: over stdio a log message
//!   carries no request id, so which call it is about cannot be known.
//!
//! A stream resumed with `Last-Event-ID` replays the events after the one named (rmcp's
//! own replay starts at that one, which is left out here). rmcp keeps a request's stream
//! until its answer is sent and forgets it then (`LocalSessionWorker::
//! handle_server_message`, no event store configured): a client can resume a call's
//! stream while the call runs, not once it has been answered.
//!
//! rmcp's typed handler answers `subscriptions/listen` itself (a session of an earlier
//! protocol version: `-32601`), so the session's transport hands it to the handler as a
//! custom request of the same method, which [`super::listen`] turns back into the
//! typed request for the proxy's one relay — the same path a stdio client's reaches.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Mutex};

use futures_util::{Stream, StreamExt};
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification,
    ClientRequest, CustomRequest, GetExtensions, GetMeta, JsonRpcMessage, NotificationMetaObject,
    RequestId, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::{RoleServer, RxJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use rmcp::transport::{Transport, WorkerTransport};
use serde_json::Value;

/// Where the proxy says a notification it forwards belongs (an in-process mark on the
/// notification's extensions, never serialized).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Destination {
    /// The response stream of the client's request with this id.
    Request(RequestId),
    /// The session's standalone stream.
    Standalone,
}

/// The `_meta` key a carrier holds its message under: random per process.
fn carrier_key() -> &'static str {
    static KEY: LazyLock<String> =
        LazyLock::new(|| format!("dev.attest/carried-{}", uuid::Uuid::new_v4().simple()));
    &KEY
}

/// `message` wrapped so that rmcp routes (and stores) it on `request`'s stream.
fn carrier(request: RequestId, message: &ServerJsonRpcMessage) -> Option<ServerJsonRpcMessage> {
    let carried = serde_json::to_value(message).ok()?;
    let mut meta = NotificationMetaObject::new();
    meta.0 .0.insert(carrier_key().to_owned(), carried);
    let mut params = CancelledNotificationParam::new(Some(request), None);
    params.meta = Some(meta);
    Some(JsonRpcMessage::notification(
        ServerNotification::CancelledNotification(CancelledNotification::new(params)),
    ))
}

/// The message a carrier holds, or `message` itself.
fn unwrapped(mut message: ServerSseMessage) -> ServerSseMessage {
    if let Some(carried) = message.message.as_deref().and_then(carried) {
        message.message = Some(Arc::new(carried));
    }
    message
}

fn carried(message: &ServerJsonRpcMessage) -> Option<ServerJsonRpcMessage> {
    let JsonRpcMessage::Notification(note) = message else {
        return None;
    };
    let ServerNotification::CancelledNotification(cancelled) = &note.notification else {
        return None;
    };
    // Where this process put it; the extensions, should rmcp have parsed it afresh.
    let in_params = cancelled.params.meta.as_ref();
    let value: &Value = in_params
        .and_then(|meta| meta.0 .0.get(carrier_key()))
        .or_else(|| note.notification.get_meta().0 .0.get(carrier_key()))?;
    serde_json::from_value(value.clone()).ok()
}

/// A session's stream, with carriers unwrapped.
fn unwrapping<S>(stream: S) -> BoxedStream
where
    S: Stream<Item = ServerSseMessage> + Send + Sync + 'static,
{
    Box::pin(stream.map(unwrapped))
}

/// The open `tools/call` requests of one session.
#[derive(Default)]
struct OpenCalls(Mutex<HashSet<RequestId>>);

impl OpenCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The one open call, when exactly one is.
    fn only(&self) -> Option<RequestId> {
        let calls = self.lock();
        match calls.len() {
            1 => calls.iter().next().cloned(),
            _ => None,
        }
    }
}

/// rmcp's [`LocalSessionManager`], with each session's open tool calls known.
#[derive(Default)]
pub(super) struct CallStreams {
    inner: LocalSessionManager,
    sessions: Mutex<std::collections::HashMap<SessionId, Arc<OpenCalls>>>,
}

impl CallStreams {
    fn calls(&self, id: &SessionId) -> Option<Arc<OpenCalls>> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(id)
            .cloned()
    }
}

/// A session's transport: rmcp's, with each notification the proxy placed on a request
/// sent as a carrier to that request's stream.
pub(super) struct CallTransport {
    inner: WorkerTransport<LocalSessionWorker>,
    calls: Arc<OpenCalls>,
}

type InnerError = <WorkerTransport<LocalSessionWorker> as Transport<RoleServer>>::Error;

impl CallTransport {
    /// The request whose stream `note` goes on, when that is not rmcp's own choice.
    fn destination(&self, note: &ServerNotification) -> Option<RequestId> {
        // Progress and cancellation rmcp routes itself, by their token and request id.
        if matches!(
            note,
            ServerNotification::ProgressNotification(_)
                | ServerNotification::CancelledNotification(_)
        ) {
            return None;
        }
        match note.extensions().get::<Destination>() {
            Some(Destination::Request(id)) => Some(id.clone()),
            Some(Destination::Standalone) => None,
            None if matches!(note, ServerNotification::LoggingMessageNotification(_)) => {
                self.calls.only()
            }
            None => None,
        }
    }
}

impl Transport<RoleServer> for CallTransport {
    type Error = InnerError;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let destination = match &item {
            JsonRpcMessage::Notification(note) => self.destination(&note.notification),
            JsonRpcMessage::Response(response) => {
                self.calls.lock().remove(&response.id);
                None
            }
            JsonRpcMessage::Error(error) => {
                if let Some(id) = &error.id {
                    self.calls.lock().remove(id);
                }
                None
            }
            JsonRpcMessage::Request(_) => None,
        };
        // The proxy passes a notification on before the answer it preceded
        // (`super::order`), and this send is done once rmcp has stored it: the answer,
        // sent after, cannot overtake it.
        let item = match destination {
            Some(request) => carrier(request, &item).unwrap_or(item),
            None => item,
        };
        self.inner.send(item)
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        let calls = Arc::clone(&self.calls);
        let received = self.inner.receive();
        async move {
            let message = received.await?;
            Some(relayable(message, &calls))
        }
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// What the session's handler gets for `message`: `subscriptions/listen` as a custom
/// request of that method (rmcp's typed handler would answer it itself); a cancelled
/// call forgotten (rmcp sends no answer for it).
fn relayable(message: ClientJsonRpcMessage, calls: &OpenCalls) -> ClientJsonRpcMessage {
    match message {
        JsonRpcMessage::Request(mut request)
            if matches!(
                request.request,
                ClientRequest::SubscriptionsListenRequest(_)
            ) =>
        {
            if let Some(custom) = as_custom(&mut request.request) {
                request.request = ClientRequest::CustomRequest(custom);
            }
            JsonRpcMessage::Request(request)
        }
        JsonRpcMessage::Notification(note) => {
            if let ClientNotification::CancelledNotification(cancelled) = &note.notification {
                if let Some(id) = &cancelled.params.request_id {
                    calls.lock().remove(id);
                }
            }
            JsonRpcMessage::Notification(note)
        }
        other => other,
    }
}

/// `request` as a custom request of the same method and params, keeping its extensions
/// (its `_meta`, the HTTP request it came in).
fn as_custom(request: &mut ClientRequest) -> Option<CustomRequest> {
    let mut value = serde_json::to_value(&*request).ok()?;
    let method = value.get("method")?.as_str()?.to_owned();
    let mut params = value.get_mut("params").map(Value::take);
    // The `_meta` stays in the extensions, where rmcp reads it from.
    if let Some(Value::Object(map)) = &mut params {
        map.remove("_meta");
    }
    let mut custom = CustomRequest::new(method, params);
    custom.extensions = std::mem::take(request.extensions_mut());
    Some(custom)
}

type BoxedStream = Pin<Box<dyn Stream<Item = ServerSseMessage> + Send + Sync + 'static>>;

impl SessionManager for CallStreams {
    type Error = LocalSessionManagerError;
    type Transport = CallTransport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, inner) = self.inner.create_session().await?;
        let calls = Arc::new(OpenCalls::default());
        let mut sessions = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A session that ended without a `DELETE` (its client gone, its keep-alive run
        // out) has dropped its transport: only this map still holds its calls.
        sessions.retain(|_, calls| Arc::strong_count(calls) > 1);
        sessions.insert(id.clone(), Arc::clone(&calls));
        drop(sessions);
        Ok((id, CallTransport { inner, calls }))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(id);
        self.inner.close_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let call = match &message {
            JsonRpcMessage::Request(request)
                if matches!(request.request, ClientRequest::CallToolRequest(_)) =>
            {
                Some(request.id.clone())
            }
            _ => None,
        };
        // Known as open before the request reaches the proxy, so nothing said during it
        // is missed. It stays open until answered or cancelled, not while its client
        // reads: a client that went away may resume the stream.
        let calls = call.and_then(|call| Some((call, self.calls(id)?)));
        if let Some((call, calls)) = &calls {
            calls.lock().insert(call.clone());
        }
        match self.inner.create_stream(id, message).await {
            Ok(stream) => Ok(unwrapping(stream)),
            Err(err) => {
                if let Some((call, calls)) = &calls {
                    calls.lock().remove(call);
                }
                Err(err)
            }
        }
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(unwrapping(self.inner.create_standalone_stream(id).await?))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let resumed = self.inner.resume(id, last_event_id.clone()).await?;
        // rmcp's replay starts at the last event the client had (`CachedTx::sync` skips
        // the events before it, not it); the spec replays those after it.
        let after = resumed.filter(move |event| {
            std::future::ready(event.event_id.as_deref() != Some(last_event_id.as_str()))
        });
        Ok(unwrapping(after))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    fn event_store(
        &self,
    ) -> Option<Arc<dyn rmcp::transport::streamable_http_server::session::EventStore>> {
        self.inner.event_store()
    }
}

#[cfg(test)]
#[allow(deprecated)] // logging is what the proxy carries, deprecated or not
mod tests {
    use super::*;
    use rmcp::model::{LoggingLevel, LoggingMessageNotification, LoggingMessageNotificationParam};

    fn log_line(text: &str) -> ServerJsonRpcMessage {
        JsonRpcMessage::notification(ServerNotification::LoggingMessageNotification(
            LoggingMessageNotification::new(LoggingMessageNotificationParam::new(
                LoggingLevel::Info,
                Value::String(text.to_owned()),
            )),
        ))
    }

    #[test]
    fn a_carrier_unwraps_into_its_message_and_a_look_alike_stays_what_it_is() {
        let message = log_line("hello");
        let wrapped = carrier(RequestId::Number(4), &message).unwrap();
        let event = ServerSseMessage::new("3/0", wrapped);
        let out = unwrapped(event);
        assert_eq!(out.event_id.as_deref(), Some("3/0"));
        assert_eq!(
            serde_json::to_value(out.message.as_deref().unwrap()).unwrap(),
            serde_json::to_value(&message).unwrap()
        );
        // A cancellation with some other key is not a carrier.
        let mut meta = NotificationMetaObject::new();
        meta.0 .0.insert(
            "dev.attest/carried-guess".to_owned(),
            serde_json::to_value(&message).unwrap(),
        );
        let mut params = CancelledNotificationParam::new(Some(RequestId::Number(4)), None);
        params.meta = Some(meta);
        let forged: ServerJsonRpcMessage = JsonRpcMessage::notification(
            ServerNotification::CancelledNotification(CancelledNotification::new(params)),
        );
        let out = unwrapped(ServerSseMessage::from_message(forged.clone()));
        assert_eq!(
            serde_json::to_value(out.message.as_deref().unwrap()).unwrap(),
            serde_json::to_value(&forged).unwrap()
        );
    }

    #[test]
    fn subscriptions_listen_reaches_the_handler_as_a_custom_request_of_its_method() {
        let message: ClientJsonRpcMessage = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": true}, "_meta": {"k": 1}},
        }))
        .unwrap();
        let JsonRpcMessage::Request(request) = relayable(message, &OpenCalls::default()) else {
            panic!("a request")
        };
        let ClientRequest::CustomRequest(custom) = &request.request else {
            panic!("custom: {:?}", request.request)
        };
        assert_eq!(custom.method, "subscriptions/listen");
        assert_eq!(
            custom.params,
            Some(serde_json::json!({"notifications": {"toolsListChanged": true}}))
        );
        assert_eq!(
            request.request.get_meta().0 .0.get("k"),
            Some(&Value::from(1))
        );
    }
}
