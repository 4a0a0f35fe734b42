//! `attest serve` as the one that tells people (configuration `notify.by: inbox`): it
//! posts each pending request it has not posted yet to the configured notifiers, so the
//! surfaces that store requests need no notifier secrets.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use attest_core::approvals::{ApprovalStore, Notifier};

/// How often the store is looked at for new requests.
const POLL: Duration = Duration::from_secs(1);

/// Posts every pending request once (per run of the inbox) to each notifier, for as long
/// as the inbox runs. A notifier that fails is noted on the request, which stays pending.
pub(crate) async fn post_pending(store: Arc<ApprovalStore>, notifiers: Vec<Arc<dyn Notifier>>) {
    let mut posted: HashSet<String> = HashSet::new();
    loop {
        let reader = Arc::clone(&store);
        let pending = match tokio::task::spawn_blocking(move || reader.pending()).await {
            Ok(Ok(pending)) => pending,
            Ok(Err(err)) => {
                eprintln!(
                    "attest serve: cannot list pending requests: {}",
                    super::chain(&err)
                );
                Vec::new()
            }
            Err(_) => return,
        };
        // Forget what is no longer pending, so the set stays the size of the queue.
        posted.retain(|id| pending.iter().any(|request| &request.id == id));
        for request in pending {
            if !posted.insert(request.id.clone()) {
                continue;
            }
            for notifier in &notifiers {
                if let Err(err) = notifier.notify(&request).await {
                    let note = format!("{}: {}", notifier.name(), super::chain(&err));
                    eprintln!("attest serve: could not notify {}: {note}", request.id);
                    let _ = store.set_notify_error(&request.id, &note);
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
}
