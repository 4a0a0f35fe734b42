//! `--listen`'s sessions: rmcp's [`LocalSessionManager`], with a tool call's log messages
//! on that call's own response stream.
//!
//! The transport spec sends what a server says during a request (notifications, its own
//! requests) on that request's SSE stream, before the response. rmcp's session manager
//! routes progress (by its token), cancellation and the server's requests there, and
//! every other notification to the session's standalone (`GET`) stream, so an upstream's
//! `notifications/message` sent while a tool ran reached the client apart from the call
//! (or not at all, with no standalone stream open). Here the session's transport takes
//! such a message, while exactly one `tools/call` of the session is open, onto that
//! call's stream, ahead of its response (the proxy passes an upstream's notifications on
//! before the response they preceded, [`super::mcp_order`]). With several calls open at
//! once the message cannot be placed (a stdio upstream says nothing of which call a log
//! line is about, and rmcp's HTTP client does not say which stream it came on), so it
//! goes to the standalone stream as before.
//!
//! A message moved so is not in rmcp's event store: a stream resumed with
//! `Last-Event-ID` replays the response, not the log lines before it.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures_util::future::Either;
use futures_util::Stream;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
    ServerNotification,
};
use rmcp::service::{RoleServer, RxJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, LocalSessionWorker,
};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use rmcp::transport::{Transport, WorkerTransport};
use tokio::sync::mpsc;

/// The open `tools/call` requests of one session, each with its stream's side channel.
#[derive(Default)]
struct OpenCalls(Mutex<HashMap<RequestId, mpsc::UnboundedSender<ServerJsonRpcMessage>>>);

impl OpenCalls {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<RequestId, mpsc::UnboundedSender<ServerJsonRpcMessage>>>
    {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// rmcp's [`LocalSessionManager`], with each session's open tool calls known.
#[derive(Default)]
pub(crate) struct CallStreams {
    inner: LocalSessionManager,
    sessions: Mutex<HashMap<SessionId, Arc<OpenCalls>>>,
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

/// A session's transport: rmcp's, with a log message sent while one tool call is open
/// put on that call's stream.
pub(crate) struct CallTransport {
    inner: WorkerTransport<LocalSessionWorker>,
    calls: Arc<OpenCalls>,
}

type InnerError = <WorkerTransport<LocalSessionWorker> as Transport<RoleServer>>::Error;

impl Transport<RoleServer> for CallTransport {
    type Error = InnerError;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        match &item {
            JsonRpcMessage::Notification(note)
                if matches!(
                    note.notification,
                    ServerNotification::LoggingMessageNotification(_)
                ) =>
            {
                // Handed over here, before this returns: the call's response, sent after,
                // cannot overtake it.
                let calls = self.calls.lock();
                if let (1, Some(stream)) = (calls.len(), calls.values().next()) {
                    if stream.send(item.clone()).is_ok() {
                        return Either::Left(std::future::ready(Ok(())));
                    }
                }
            }
            JsonRpcMessage::Response(response) => {
                self.calls.lock().remove(&response.id);
            }
            JsonRpcMessage::Error(error) => {
                if let Some(id) = &error.id {
                    self.calls.lock().remove(id);
                }
            }
            _ => {}
        }
        Either::Right(self.inner.send(item))
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

/// A tool call's response stream: the messages moved onto it first, then rmcp's; it ends
/// when rmcp's does (after the response), and forgets the call when dropped (the client
/// went away).
struct CallStream<S> {
    moved: mpsc::UnboundedReceiver<ServerJsonRpcMessage>,
    inner: Pin<Box<S>>,
    calls: Arc<OpenCalls>,
    id: RequestId,
}

impl<S: Stream<Item = ServerSseMessage>> Stream for CallStream<S> {
    type Item = ServerSseMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Poll::Ready(Some(message)) = self.moved.poll_recv(cx) {
            return Poll::Ready(Some(ServerSseMessage::from_message(message)));
        }
        self.inner.as_mut().poll_next(cx)
    }
}

impl<S> Drop for CallStream<S> {
    fn drop(&mut self) {
        self.calls.lock().remove(&self.id);
    }
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
        let (Some(call), Some(calls)) = (call, self.calls(id)) else {
            let stream: BoxedStream = Box::pin(self.inner.create_stream(id, message).await?);
            return Ok(stream);
        };
        // Known as open before the request reaches the proxy, so nothing said during it
        // is missed.
        let (sender, moved) = mpsc::unbounded_channel();
        calls.lock().insert(call.clone(), sender);
        let inner = match self.inner.create_stream(id, message).await {
            Ok(inner) => inner,
            Err(err) => {
                calls.lock().remove(&call);
                return Err(err);
            }
        };
        let stream: BoxedStream = Box::pin(CallStream {
            moved,
            inner: Box::pin(inner),
            calls,
            id: call,
        });
        Ok(stream)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(Box::pin(self.inner.create_standalone_stream(id).await?))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(Box::pin(self.inner.resume(id, last_event_id).await?))
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
