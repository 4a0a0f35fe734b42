//! The upstream's notifications reach the client in the order they were sent, and before
//! the answer they precede.
//!
//! The SDK hands each notification it reads to its own task, while it hands an answer
//! straight to the request waiting for it; so the proxy could pass on a tool's result
//! before the progress notices or log messages the upstream sent ahead of it, or two
//! notifications in the other order. The upstream link is read through [`Ordered`],
//! which numbers each such notification as it is read — before any answer that follows
//! it on the link — with a [`Ticket`] in its extensions; the proxy's side of the link
//! forwards it in its turn, once every earlier one has been ([`InFlight::forwarding`]),
//! and a request that has its answer waits until nothing read before it is still on its
//! way ([`InFlight::settled`]).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{GetExtensions, GetMeta, ServerJsonRpcMessage, ServerNotification};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// How long an answer, or a notification's turn, waits for notifications read before it:
/// should one never reach the proxy's handler, the rest go on after this long rather than
/// never.
const SETTLE_LIMIT: Duration = Duration::from_secs(5);

/// The notifications read from the upstream and not yet forwarded to the client.
#[derive(Clone, Default)]
pub struct InFlight(Arc<Inner>);

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    changed: tokio::sync::Notify,
}

#[derive(Default)]
struct State {
    /// Numbered and not yet forwarded.
    outstanding: usize,
    /// The next number to give.
    issued: u64,
    /// The number whose turn it is.
    next: u64,
}

/// A counted notification's place in the order it was read (in its extensions).
#[derive(Clone, Copy, Debug)]
pub struct Ticket(u64);

/// Whether `notification` is counted: the kinds a request's answer must not overtake —
/// progress, log messages, and a subscription's notifications, which precede the
/// `subscriptions/listen` answer (the proxy sends that request as any other, so the SDK
/// hands them to the proxy, not to a subscription of its own).
pub(super) fn ordered(notification: &ServerNotification) -> bool {
    matches!(
        notification,
        ServerNotification::ProgressNotification(_)
            | ServerNotification::LoggingMessageNotification(_)
    ) || notification.get_meta().subscription_id().is_some()
}

impl InFlight {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn begin(&self) -> Ticket {
        let mut state = self.state();
        state.outstanding += 1;
        let ticket = Ticket(state.issued);
        state.issued += 1;
        ticket
    }

    /// Waits for `ticket`'s turn; the returned guard marks it done when it drops
    /// (forwarded, dropped, or failed alike).
    pub async fn forwarding(&self, ticket: Ticket) -> Forwarding {
        self.wait(|state| state.next >= ticket.0).await;
        Forwarding {
            in_flight: self.clone(),
            ticket,
        }
    }

    /// Returns once every counted notification read so far has been forwarded.
    pub async fn settled(&self) {
        self.wait(|state| state.outstanding == 0).await;
    }

    async fn wait(&self, done: impl Fn(&State) -> bool) {
        let wait = async {
            loop {
                let changed = self.0.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                if done(&self.state()) {
                    return;
                }
                changed.await;
            }
        };
        let _ = tokio::time::timeout(SETTLE_LIMIT, wait).await;
    }
}

/// One counted notification on its way to the client.
pub struct Forwarding {
    in_flight: InFlight,
    ticket: Ticket,
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        let mut state = self.in_flight.state();
        state.outstanding = state.outstanding.saturating_sub(1);
        state.next = state.next.max(self.ticket.0 + 1);
        drop(state);
        self.in_flight.0.changed.notify_waiters();
    }
}

/// The upstream link, counting the notifications it reads.
pub(super) struct Ordered<T> {
    inner: T,
    in_flight: InFlight,
}

impl<T> Ordered<T> {
    pub(super) fn new(inner: T, in_flight: InFlight) -> Self {
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
        let mut message = self.inner.receive().await?;
        if let ServerJsonRpcMessage::Notification(notification) = &mut message {
            if ordered(&notification.notification) {
                let ticket = self.in_flight.begin();
                notification.notification.extensions_mut().insert(ticket);
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
    async fn notifications_are_forwarded_in_turn_and_settled_waits_for_all() {
        let in_flight = InFlight::default();
        let first = in_flight.begin();
        let second = in_flight.begin();
        // The second waits for the first's turn to end.
        let later = tokio::spawn({
            let in_flight = in_flight.clone();
            async move {
                let _done = in_flight.forwarding(second).await;
            }
        });
        let settled = tokio::spawn({
            let in_flight = in_flight.clone();
            async move { in_flight.settled().await }
        });
        tokio::task::yield_now().await;
        assert!(!later.is_finished() && !settled.is_finished());
        drop(in_flight.forwarding(first).await);
        tokio::time::timeout(Duration::from_secs(1), later)
            .await
            .expect("its turn came once the first was forwarded")
            .unwrap();
        tokio::time::timeout(Duration::from_secs(1), settled)
            .await
            .expect("settled once both were forwarded")
            .unwrap();
    }
}
