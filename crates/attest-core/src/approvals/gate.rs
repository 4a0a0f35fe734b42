//! `StoreGate`: persist the request, notify, then wait for an answer or return pending.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use attest_policy::{Action, Verdict};

use super::{action_digest, ApprovalStore, Notifier, Status};
use crate::{Gate, GateDecision};

/// How long a request waits for a person by default before it expires.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// How long an approval may be used by default, from the moment it is given: long
/// enough for an agent polling or waiting to resume, short enough that a stale "yes"
/// does not run tomorrow.
pub const DEFAULT_USE_BY: Duration = Duration::from_secs(60 * 60);

/// Asks through the approval store: stores the request (durably, before anyone is told),
/// runs the notifiers, then either waits up to [`StoreGate::wait`] for an answer or
/// returns [`GateDecision::Pending`] at once with a resume token.
///
/// A notifier that fails never loses the request: it stays pending, listed by
/// `attest pending` and the inbox, with the failure noted on it.
pub struct StoreGate {
    store: Arc<ApprovalStore>,
    notifiers: Vec<Arc<dyn Notifier>>,
    ttl: Duration,
    use_by: Duration,
    wait: Duration,
    poll: Duration,
    same_call: bool,
}

impl std::fmt::Debug for StoreGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreGate")
            .field("store", &self.store)
            .field("notifiers", &self.notifiers.len())
            .field("ttl", &self.ttl)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl StoreGate {
    /// A gate over `store` that returns pending at once; requests expire after a day.
    pub fn new(store: Arc<ApprovalStore>) -> StoreGate {
        StoreGate {
            store,
            notifiers: Vec::new(),
            ttl: DEFAULT_TTL,
            use_by: DEFAULT_USE_BY,
            wait: Duration::ZERO,
            poll: Duration::from_millis(200),
            same_call: false,
        }
    }

    /// An ask about a call for which an earlier attempt filed a request (same
    /// [`super::action_digest`]: agent, actor, system, verb, target, where it goes and its
    /// params), in this process or another, finds that request instead of filing a new
    /// one: approved and not yet used, the call runs under it once (using it is one
    /// conditional update, so of two racing attempts one runs); still pending, the call
    /// is held again under it. What the Python and TypeScript packages do, so that a
    /// program run again after `attest confirm ID approve` runs its call.
    pub fn same_call(mut self, reuse: bool) -> Self {
        self.same_call = reuse;
        self
    }

    /// Adds a notifier; each runs in turn after the request is stored.
    pub fn notifier(mut self, notifier: impl Notifier + 'static) -> Self {
        self.notifiers.push(Arc::new(notifier));
        self
    }

    /// How long a request may wait before it expires (counted as a rejection).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// How long an approval may be used once given (default [`DEFAULT_USE_BY`]); a resume
    /// after that is refused and recorded as `expired`.
    pub fn use_by(mut self, use_by: Duration) -> Self {
        self.use_by = use_by;
        self
    }

    /// How long the call waits for an answer before returning pending (default: not at all).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// How often the store is read while waiting.
    pub fn poll_interval(mut self, poll: Duration) -> Self {
        self.poll = poll.max(Duration::from_millis(10));
        self
    }

    /// The store requests go to.
    pub fn store(&self) -> &Arc<ApprovalStore> {
        &self.store
    }
}

#[async_trait]
impl Gate for StoreGate {
    async fn decide(&self, action: &Action, verdict: &Verdict) -> GateDecision {
        if self.same_call {
            match self.earlier(action).await {
                Ok(Some(decision)) => return decision,
                Ok(None) => {}
                Err(why) => return cannot_store(&why),
            }
        }
        let store = Arc::clone(&self.store);
        let (action_c, verdict_c, ttl, use_by) =
            (action.clone(), verdict.clone(), self.ttl, self.use_by);
        let created =
            tokio::task::spawn_blocking(move || store.create(&action_c, &verdict_c, ttl, use_by))
                .await;
        let (request, token) = match created {
            Ok(Ok(created)) => created,
            // Fail closed: a request that cannot be stored is a rejection.
            Ok(Err(err)) => return cannot_store(&err.to_string()),
            Err(_) => return cannot_store("the store task stopped"),
        };
        for notifier in &self.notifiers {
            if let Err(err) = notifier.notify(&request).await {
                let note = format!("{}: {err}", notifier.name());
                // Best effort: the request is stored whatever happens to this note.
                let _ = self.store.set_notify_error(&request.id, &note);
            }
        }
        // If the caller goes away while the call waits (the future is dropped), nobody
        // needs the answer: the request is marked cancelled rather than left pending.
        let mut waiting = CancelOnDrop {
            store: Some(Arc::clone(&self.store)),
            id: request.id.clone(),
        };
        let deadline = tokio::time::Instant::now() + self.wait;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(self.poll.min(deadline - tokio::time::Instant::now())).await;
            let store = Arc::clone(&self.store);
            let id = request.id.clone();
            match tokio::task::spawn_blocking(move || store.get_by_id(&id)).await {
                Ok(Ok(now)) if now.status != Status::Pending => {
                    waiting.store = None;
                    return GateDecision::Stored { id: request.id };
                }
                Ok(Ok(_)) => {}
                // A read error while waiting: stop waiting; the request stays pending.
                Ok(Err(_)) | Err(_) => break,
            }
        }
        waiting.store = None;
        GateDecision::Pending {
            id: request.id,
            token,
        }
    }
}

impl StoreGate {
    /// The request an earlier attempt of this call filed, as the gate's answer in the
    /// store: approved and unused, the pipeline uses it once; pending, the call is held
    /// under it with a token of its own. `None` when there is none.
    async fn earlier(&self, action: &Action) -> Result<Option<GateDecision>, String> {
        let digest = action_digest(action).map_err(|err| err.to_string())?;
        let store = Arc::clone(&self.store);
        let found = tokio::task::spawn_blocking(move || store.open_for_call(&digest))
            .await
            .map_err(|_| "the store task stopped".to_owned())?
            .map_err(|err| err.to_string())?;
        Ok(found.map(|request| GateDecision::Stored { id: request.id }))
    }
}

/// Cancels a waiting request when dropped while still armed (`store` set).
struct CancelOnDrop {
    store: Option<Arc<ApprovalStore>>,
    id: String,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(store) = self.store.take() {
            // Best effort: a request that cannot be marked stays pending and expires.
            let _ = store.cancel(&self.id);
        }
    }
}

fn cannot_store(why: &str) -> GateDecision {
    GateDecision::Reject {
        approver: "nobody".to_owned(),
        channel: "store".to_owned(),
        note: Some(format!("the approval request could not be stored: {why}")),
    }
}
