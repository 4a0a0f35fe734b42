//! The upstream's notifications reach the client before the answer they precede.
//!
//! The SDK hands each notification it reads to its own task, while it hands an answer
//! straight to the request waiting for it; so the proxy could pass on a tool's result
//! before the progress notices or log messages the upstream sent ahead of it. The
//! upstream link is read through [`Ordered`], which counts each such notification as it
//! is read — before any answer that follows it on the link — and the proxy's side of the
//! link marks it done once forwarded ([`InFlight::forwarding`]). A request that has its
//! answer waits until nothing read before it is still on its way ([`InFlight::settled`]).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{GetMeta, ServerJsonRpcMessage, ServerNotification};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// How long an answer waits for notifications read before it. Only a notification the
/// SDK routes elsewhere (a subscription's) could leave the count up; then the answer goes
/// on after this long rather than never.
const SETTLE_LIMIT: Duration = Duration::from_secs(5);

/// The notifications read from the upstream and not yet forwarded to the client.
#[derive(Clone, Default)]
pub(crate) struct InFlight(Arc<Inner>);

#[derive(Default)]
struct Inner {
    count: Mutex<usize>,
    idle: tokio::sync::Notify,
}

/// Whether `notification` is counted: the kinds a request's answer must not overtake,
/// and only those the SDK hands to the proxy (not a subscription's, which it routes to
/// the subscription itself).
pub(crate) fn ordered(notification: &ServerNotification) -> bool {
    matches!(
        notification,
        ServerNotification::ProgressNotification(_)
            | ServerNotification::LoggingMessageNotification(_)
    ) && notification.get_meta().subscription_id().is_none()
}

impl InFlight {
    fn count(&self) -> std::sync::MutexGuard<'_, usize> {
        self.0
            .count
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn begin(&self) {
        *self.count() += 1;
    }

    /// Marks one counted notification done when the returned guard drops (forwarded,
    /// dropped, or failed alike).
    pub(crate) fn forwarding(&self) -> Forwarding {
        Forwarding(self.clone())
    }

    /// Returns once every counted notification read so far has been forwarded.
    pub(crate) async fn settled(&self) {
        let wait = async {
            loop {
                let idle = self.0.idle.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if *self.count() == 0 {
                    return;
                }
                idle.await;
            }
        };
        let _ = tokio::time::timeout(SETTLE_LIMIT, wait).await;
    }
}

/// One counted notification on its way to the client.
pub(crate) struct Forwarding(InFlight);

impl Drop for Forwarding {
    fn drop(&mut self) {
        let mut count = self.0.count();
        *count = count.saturating_sub(1);
        if *count == 0 {
            self.0 .0.idle.notify_waiters();
        }
    }
}

/// The upstream link, counting the notifications it reads.
pub(crate) struct Ordered<T> {
    inner: T,
    in_flight: InFlight,
}

impl<T> Ordered<T> {
    pub(crate) fn new(inner: T, in_flight: InFlight) -> Self {
        Ordered { inner, in_flight }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Ordered<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if let ServerJsonRpcMessage::Notification(notification) = &message {
            if ordered(&notification.notification) {
                self.in_flight.begin();
            }
        }
        Some(message)
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn settled_waits_for_every_counted_notification() {
        let in_flight = InFlight::default();
        in_flight.begin();
        in_flight.begin();
        let first = in_flight.forwarding();
        let second = in_flight.forwarding();
        let waiting = tokio::spawn({
            let in_flight = in_flight.clone();
            async move { in_flight.settled().await }
        });
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(second);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("settled once both were forwarded")
            .unwrap();
    }
}
