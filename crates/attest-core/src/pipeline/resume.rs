//! Resuming, deciding and expiring stored approval requests.

use std::future::Future;
use std::sync::Arc;

use attest_ledger::{from_hex, Appended, Confirm};
use attest_policy::{Action, Decision};
use serde::Serialize;
use serde_json::Value;
use tracing::Instrument;

use super::{confirm, Attest, Ended, Prepared};
use crate::approvals::{action_digest, Answer, ApprovalError, ApprovalRequest, ApprovalStore};
use crate::approvals::{FollowUp, Grant, ResumeToken, Status};
use crate::record::{to_record, RowOutcome};
use crate::{AttestError, CustomCheck, Outcome, Receipt};

/// What [`Attest::decide`] did: the request as decided, and the ledger row written for it
/// (a rejection is recorded at once; an approval is recorded when the action runs).
#[derive(Debug, Clone)]
pub struct Decided {
    /// The request after the decision.
    pub request: ApprovalRequest,
    /// The outcome row, when the decision ended the request.
    pub receipt: Option<Receipt>,
    /// The grant given with the approval, and its row.
    pub granted: Option<(Grant, Receipt)>,
}

impl Attest {
    /// The approval store (the builder's, or one opened on the ledger's file).
    pub fn approvals(&self) -> Result<Arc<ApprovalStore>, AttestError> {
        if let Some(store) = self.approvals.get() {
            return Ok(Arc::clone(store));
        }
        let store = Arc::new(ApprovalStore::open(&self.ledger)?);
        // Another thread may have won; either store is equally good.
        let _ = self.approvals.set(store);
        self.approvals
            .get()
            .cloned()
            .ok_or(AttestError::Internal("the approval store was not kept"))
    }

    /// Takes the action a resume token stands for to its end, once a person has
    /// approved it: with their edits applied (and policy asked again), verified and
    /// recorded. Works in any process that opens the same ledger file, given the tool.
    /// What `attest.call(token).run(tool)` does.
    ///
    /// Still pending: held again. Rejected or expired: said so, with the row recorded
    /// then. Unknown token, already used, an altered request, or a `presented` action
    /// that is not the one asked about (same [`action_digest`], after this pipeline's
    /// defaults are filled in): [`AttestError::Approval`].
    pub(crate) async fn resume_call<F, Fut, T, E>(
        &self,
        token: &ResumeToken,
        presented: Option<Action>,
        tool: F,
        check: Option<&CustomCheck>,
    ) -> Result<Outcome<T, E>, AttestError>
    where
        F: FnOnce(Value) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: Serialize,
        E: std::fmt::Display,
    {
        let request = self.request_for(token).await?;
        let presented = match presented {
            Some(action) => Some(self.prepare(action)?.action),
            None => None,
        };
        let span = crate::telemetry::action_span(&request.action);
        self.finish(request, Some(token), presented.as_ref(), tool, check)
            .instrument(span)
            .await
    }

    /// Records a person's answer to a stored request (by id or resume token). The first
    /// answer wins; only a listed approver may answer when the rule names approvers.
    /// A rejection is recorded in the ledger at once; an approval when the action runs.
    /// Requests whose time ran out are expired (and recorded) first.
    pub async fn decide(&self, id_or_token: &str, answer: Answer) -> Result<Decided, AttestError> {
        self.expire_due().await?;
        let key = id_or_token.to_owned();
        let spec = answer.grant.clone();
        let channel = answer.channel.clone();
        let request = self
            .in_store(move |store| store.decide(&key, &answer))
            .await?;
        // A grant given with the approval: kept, then recorded, and usable only once its
        // row is in the ledger.
        let granted = match spec {
            Some(spec) if request.status == Status::Approved => {
                let asked = request.clone();
                let approver = request.approver.clone().unwrap_or_default();
                let grant = self
                    .in_store(move |store| store.issue_grant(&asked, &approver, &channel, &spec))
                    .await?;
                let receipt = self.record_grant(&request, &grant).await?;
                Some((grant, receipt))
            }
            _ => None,
        };
        let receipt = match request.status {
            Status::Rejected => {
                let receipt = self.record_outcome(&request).await?;
                self.in_store(ApprovalStore::purge).await?;
                Some(receipt)
            }
            _ => None,
        };
        Ok(Decided {
            request,
            receipt,
            granted,
        })
    }

    /// Marks every pending request whose time ran out as `expired` and records each in
    /// the ledger (a request is recorded once, whichever process expires it).
    pub async fn expire_due(&self) -> Result<Vec<Receipt>, AttestError> {
        let expired = self.in_store(|store| store.expire_due()).await?;
        let mut receipts = Vec::with_capacity(expired.len());
        for request in &expired {
            receipts.push(self.record_outcome(request).await?);
        }
        self.in_store(ApprovalStore::purge).await?;
        Ok(receipts)
    }

    /// Marks the reminders and escalations that are due (their rule's `remind_after`,
    /// `escalate_after`) and returns each request with its step, for the caller to tell
    /// people. Each step is returned once, to one caller, whichever process asks first:
    /// a long-running door (`attest serve`) calls this on a timer.
    pub async fn follow_ups_due(&self) -> Result<Vec<(ApprovalRequest, FollowUp)>, AttestError> {
        let escalated = self.in_store(ApprovalStore::escalate_due).await?;
        let reminded = self.in_store(ApprovalStore::remind_due).await?;
        Ok(escalated
            .into_iter()
            .map(|request| (request, FollowUp::Escalation))
            .chain(
                reminded
                    .into_iter()
                    .map(|request| (request, FollowUp::Reminder)),
            )
            .collect())
    }

    /// Runs a blocking store call off the async workers.
    pub(super) async fn in_store<T: Send + 'static>(
        &self,
        call: impl FnOnce(&ApprovalStore) -> Result<T, ApprovalError> + Send + 'static,
    ) -> Result<T, AttestError> {
        let store = self.approvals()?;
        tokio::task::spawn_blocking(move || call(&store))
            .await
            .map_err(AttestError::Writer)?
            .map_err(AttestError::Approval)
    }

    async fn request_for(&self, token: &ResumeToken) -> Result<ApprovalRequest, AttestError> {
        let token = token.clone();
        self.in_store(move |store| store.get_by_token(&token)).await
    }

    /// Takes a stored request to its end: runs it if approved (once), or reports why not.
    pub(super) async fn finish<F, Fut, T, E>(
        &self,
        request: ApprovalRequest,
        token: Option<&ResumeToken>,
        presented: Option<&Action>,
        tool: F,
        check: Option<&CustomCheck>,
    ) -> Result<Outcome<T, E>, AttestError>
    where
        F: FnOnce(Value) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        T: Serialize,
        E: std::fmt::Display,
    {
        let id = request.id.clone();
        if request.purged {
            // Used, or ended and recorded: its params are gone and it never runs again.
            return match request.status {
                Status::Approved | Status::Edited => Err(ApprovalError::AlreadyUsed { id }.into()),
                _ => self.ended(request).map(Ended::widen),
            };
        }
        if let Some(presented) = presented {
            if action_digest(presented)? != request.digest {
                return Err(ApprovalError::DigestMismatch { id }.into());
            }
        }
        if action_digest(&request.action)? != request.digest {
            return Err(ApprovalError::Tampered {
                id,
                field: "action",
            }
            .into());
        }
        let now = self.approvals()?.now();
        let due = match request.status {
            Status::Pending => now >= request.expires_at,
            Status::Approved | Status::Edited => request.use_by.is_some_and(|by| now >= by),
            _ => false,
        };
        if due {
            let key = id.clone();
            // Whoever marks it records it; if another process got there first, its row stands.
            let marked = self.in_store(move |store| store.expire_due()).await?;
            let mut mine = None;
            for expired in &marked {
                let receipt = self.record_outcome(expired).await?;
                if expired.id == key {
                    mine = Some(receipt);
                }
            }
            self.in_store(ApprovalStore::purge).await?;
            if let Some(receipt) = mine {
                return Ok(Outcome::Expired { id, receipt });
            }
            let request = self.in_store(move |store| store.get_by_id(&key)).await?;
            return self.ended(request).map(Ended::widen);
        }
        match request.status {
            Status::Pending => {
                let Some((seq, hash, ts)) = &request.ask_row else {
                    return Err(AttestError::Internal(
                        "a request without its ask row was reported pending",
                    ));
                };
                let receipt = stored_receipt(&request, (*seq, hash, ts), Decision::Ask)?;
                let token = match token {
                    Some(token) => token.clone(),
                    // A later attempt of the same call, held under this request: a token
                    // of its own, so the earlier attempt's still resumes it.
                    None => {
                        let key = id.clone();
                        self.in_store(move |store| store.add_token(&key))
                            .await?
                            .ok_or(AttestError::Internal(
                                "the request was decided while it was read",
                            ))?
                    }
                };
                Ok(Outcome::Held { id, token, receipt })
            }
            Status::Rejected | Status::Expired | Status::Cancelled => {
                self.ended(request).map(Ended::widen)
            }
            Status::Approved | Status::Edited => {
                let action = request.effective_action()?;
                if request.approved_digest.as_deref() != Some(action_digest(&action)?.as_str()) {
                    let field = if request.edits.is_some() {
                        "edits"
                    } else {
                        "approved digest"
                    };
                    return Err(ApprovalError::Tampered { id, field }.into());
                }
                let key = id.clone();
                // The approval is used here, before the action runs: it never runs twice.
                self.in_store(move |store| store.consume(&key)).await?;
                let approver = request.approver.clone().unwrap_or_default();
                let mut confirm = confirm(
                    request.status.as_str(),
                    &approver,
                    request.channel.clone().unwrap_or_default(),
                    request.note.clone(),
                );
                // A quorum's row names everyone whose approval it ran on.
                confirm.approvers = quorum_approvers(&request);
                // Policy is asked again: a rule changed to `refuse` since the ask wins.
                let prepared = self.prepare(action)?;
                let escalated_to = match request.escalated_at {
                    Some(_) => request.verdict.escalation().escalate_members.clone(),
                    None => Vec::new(),
                };
                match self
                    .recheck(prepared, confirm, approver, &escalated_to)
                    .await?
                {
                    Ok((prepared, cleared)) => {
                        self.execute(prepared, cleared, tool, check, None).await
                    }
                    Err(ended) => Ok(ended.widen()),
                }
            }
        }
    }

    /// How a request that ended without running ended, with the row recorded then.
    fn ended(&self, request: ApprovalRequest) -> Result<Ended, AttestError> {
        let id = request.id.clone();
        let Some((seq, hash, ts)) = &request.outcome_row else {
            return Err(ApprovalError::AlreadyDecided {
                id,
                status: request.status,
            }
            .into());
        };
        let mut receipt = stored_receipt(&request, (*seq, hash, ts), Decision::Ask)?;
        receipt.approver.clone_from(&request.approver);
        Ok(match request.status {
            Status::Expired => Ended::Expired { id, receipt },
            _ => Ended::Rejected {
                approver: request.approver.unwrap_or_default(),
                receipt,
            },
        })
    }

    /// Records the end of a request that did not run (rejected or expired), and links
    /// the row to it.
    async fn record_outcome(&self, request: &ApprovalRequest) -> Result<Receipt, AttestError> {
        let confirm = match request.status {
            Status::Expired if request.approver.is_some() => Confirm {
                outcome: "expired".to_owned(),
                approver: request.approver.clone(),
                channel: request.channel.clone(),
                note: Some("approved, but not used before its use-by time".to_owned()),
                approvers: quorum_approvers(request),
            },
            Status::Expired => Confirm {
                outcome: "expired".to_owned(),
                approver: None,
                channel: None,
                note: Some("nobody decided in time".to_owned()),
                approvers: Vec::new(),
            },
            status => Confirm {
                outcome: status.as_str().to_owned(),
                approver: request.approver.clone(),
                channel: request.channel.clone(),
                note: request.note.clone(),
                approvers: Vec::new(),
            },
        };
        let Prepared {
            action,
            params_hash,
        } = self.prepare(request.action.clone())?;
        let record = to_record(
            &action,
            params_hash,
            &request.verdict,
            Decision::Ask,
            Some(confirm),
            RowOutcome::NotRun,
        )?;
        let appended = self.append(record).await?;
        let mut receipt = Receipt::new(
            &action.id,
            appended,
            Decision::Ask,
            request.verdict.reasons.clone(),
        );
        receipt.approver.clone_from(&request.approver);
        let id = request.id.clone();
        let row = (receipt.seq, receipt.entry_hash.clone(), receipt.ts.clone());
        self.in_store(move |store| store.set_outcome_row(&id, (row.0, &row.1, &row.2)))
            .await?;
        Ok(receipt)
    }
}

/// Everyone a quorum's approval was given by (empty without a quorum).
fn quorum_approvers(request: &ApprovalRequest) -> Vec<String> {
    match request.verdict.quorum {
        Some(_) => request.approved_by.clone(),
        None => Vec::new(),
    }
}

/// A receipt for a row recorded earlier, from the seq, hash and ts the store kept.
fn stored_receipt(
    request: &ApprovalRequest,
    (seq, hash, ts): (u64, &str, &str),
    decision: Decision,
) -> Result<Receipt, AttestError> {
    let hash = from_hex(hash).ok_or_else(|| ApprovalError::Tampered {
        id: request.id.clone(),
        field: "ledger row hash",
    })?;
    let appended = Appended {
        seq,
        hash,
        ts: ts.to_owned(),
    };
    Ok(Receipt::new(
        &request.id,
        appended,
        decision,
        request.verdict.reasons.clone(),
    ))
}
