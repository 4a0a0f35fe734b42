//! `attest serve` as the one that tells people (configuration `notify.by: inbox`): it
//! posts each pending request it has not posted yet to the configured notifiers, so the
//! surfaces that store requests need no notifier secrets.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use attest_core::approvals::{ApprovalRequest, ApprovalStore, Notifier, TeamsNotifier};
use attest_core::Attest;

/// How often the store is looked at for new requests.
const POLL: Duration = Duration::from_secs(1);

/// Posts every pending request once (per run of the inbox) to each notifier, for as long
/// as the inbox runs. A notifier that fails is noted on the request, which stays pending.
pub async fn post_pending(store: Arc<ApprovalStore>, notifiers: Vec<Arc<dyn Notifier>>) {
    let mut posted: HashSet<String> = HashSet::new();
    loop {
        let reader = Arc::clone(&store);
        let pending = match tokio::task::spawn_blocking(move || reader.pending()).await {
            Ok(Ok(pending)) => pending,
            Ok(Err(err)) => {
                eprintln!(
                    "attest serve: cannot list pending requests: {}",
                    crate::chain(&err)
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
                    let note = format!("{}: {}", notifier.name(), crate::chain(&err));
                    eprintln!("attest serve: could not notify {}: {note}", request.id);
                    let _ = store.set_notify_error(&request.id, &note);
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// For as long as the inbox runs: expires requests whose time ran out (recording each,
/// so a waiting agent is told), and sends the reminders and escalations that are due to
/// `notifiers`. With several servers on one store, each step is sent by one of them,
/// once (the store marks it in one conditional update).
pub async fn follow_up(attest: Arc<Attest>, notifiers: Vec<Arc<dyn Notifier>>) {
    loop {
        match attest.expire_due().await {
            Ok(receipts) => {
                for receipt in receipts {
                    eprintln!(
                        "attest serve: {} expired: nobody decided in time (seq {})",
                        receipt.action_id, receipt.seq
                    );
                }
            }
            Err(err) => eprintln!(
                "attest serve: cannot expire requests: {}",
                crate::chain(&err)
            ),
        }
        let due = match attest.follow_ups_due().await {
            Ok(due) => due,
            Err(err) => {
                eprintln!(
                    "attest serve: cannot read reminders and escalations: {}",
                    crate::chain(&err)
                );
                Vec::new()
            }
        };
        for (request, step) in due {
            eprintln!("attest serve: {} {}", request.id, step.as_str());
            for notifier in &notifiers {
                if let Err(err) = notifier.follow_up(&request, step).await {
                    let note = format!("{}: {}", notifier.name(), crate::chain(&err));
                    eprintln!(
                        "attest serve: could not send {} of {}: {note}",
                        step.as_str(),
                        request.id
                    );
                    let _ = attest
                        .approvals()
                        .map(|store| store.set_notify_error(&request.id, &note));
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Posts a request's card again to Teams after a decision, from whichever door decided
/// (the inbox, a signed link, Slack, `attest confirm`): the decided card, or under a
/// quorum its progress. Incoming webhooks cannot edit the first card. A failure is
/// logged; the decision stands.
pub async fn tell_teams_decided(teams: Option<&TeamsNotifier>, request: &ApprovalRequest) {
    if let Some(teams) = teams {
        if let Err(err) = teams.update(request).await {
            eprintln!(
                "attest: could not post the decided Teams card of {}: {}",
                request.id,
                crate::chain(&err)
            );
        }
    }
}
