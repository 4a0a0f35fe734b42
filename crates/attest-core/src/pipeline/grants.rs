//! Bounded grants at decision time, and their rows (see [`crate::approvals::Grant`]).
//!
//! A call policy asks about — the verdict of the rules that asked, not a crossed budget,
//! a duplicate or a placeholder hold — is looked up among the grants of its agent (as its
//! credential proved it), system and verb. A grant covers it when it was given on the
//! same rules, is recorded, not revoked or expired, its approver may approve the call
//! (listed by the rule, not the call's actor or owner), the call's params meet its
//! condition, and one of its uses is left: the use is checked and counted in one step in
//! the ledger's window counts, so racing callers in any process never take more than its
//! calls. The call then runs as approved by the grant's approver (`confirm` on channel
//! `grant`), and its rows name the grant and which use it was. A grant that exists and
//! does not cover the call is named in the verdict's reasons with why, and the call is
//! asked about as policy says. A refusal is never looked up: a grant never turns a
//! refusal into a run. Grants that cannot be read leave the call asked about.

use std::time::SystemTime;

use attest_ledger::{format_ts, Grant as GrantNote, Reservation};
use attest_policy::{Action, Bound, Decision, Verdict};

use super::{acknowledgement, confirm, Attest};
pub use crate::approvals::GRANT_RULE;
use crate::approvals::{may_decide, ApprovalRequest, Grant, Unusable};
use crate::record::{to_record, RowOutcome};
use crate::{error_chain, AttestError, Receipt};

/// The most grants that did not cover a call named in its reasons.
const MAX_NAMED: usize = 3;

/// A grant that covers a call: who gave it, and what the call's rows say of it.
pub(super) struct Granted {
    pub(super) approver: String,
    pub(super) note: GrantNote,
    pub(super) claim: attest_ledger::WindowClaim,
}

impl Attest {
    /// `verdict` (an ask, of the rules `rules`) under the grants of `action`'s agent:
    /// covered by one (its use counted), or not, with the reasons naming each grant that
    /// did not cover it.
    pub(super) async fn granted(
        &self,
        action: &Action,
        mut verdict: Verdict,
        rules: &[String],
    ) -> (Verdict, Option<Granted>) {
        let probe = action.clone();
        let found = self
            .in_store(move |store| Ok((store.grants_for(&probe)?, store.now())))
            .await;
        let (grants, now) = match found {
            Ok(found) => found,
            Err(err) => {
                note(
                    &mut verdict,
                    format!(
                        "grants could not be read ({}): asked as policy says",
                        error_chain(&err)
                    ),
                );
                return (verdict, None);
            }
        };
        let mut not_used = Vec::new();
        for grant in grants.iter().filter(|grant| grant.fits(action, rules)) {
            match self.cover(action, &verdict, grant, now).await {
                Ok(granted) => {
                    let number = granted.note.number.unwrap_or_default();
                    note(
                        &mut verdict,
                        format!(
                            "grant {} by {} covers it: call {number} of {}, until {}",
                            grant.id,
                            grant.approver,
                            grant.calls,
                            format_ts(grant.expires_at)
                        ),
                    );
                    return (verdict, Some(granted));
                }
                Err(why) => not_used.push(format!("grant {} not used: {why}", grant.id)),
            }
        }
        let named = not_used.len().min(MAX_NAMED);
        for why in not_used.into_iter().rev().take(named).rev() {
            note(&mut verdict, why);
        }
        (verdict, None)
    }

    /// Whether `grant` covers `action` now; `Err` says why not. Covering counts a use.
    async fn cover(
        &self,
        action: &Action,
        verdict: &Verdict,
        grant: &Grant,
        now: SystemTime,
    ) -> Result<Granted, String> {
        match grant.unusable(now) {
            Some(Unusable::Revoked(at)) => return Err(format!("revoked at {}", format_ts(at))),
            Some(Unusable::Expired(at)) => return Err(format!("expired at {}", format_ts(at))),
            Some(Unusable::Unrecorded) => return Err("its ledger row was never written".to_owned()),
            None => {}
        }
        let own = [&action.actor, &action.owner]
            .into_iter()
            .flatten()
            .any(|person| person.eq_ignore_ascii_case(&grant.approver));
        if own || !may_decide(verdict, &grant.approver) {
            return Err(format!(
                "{} may not approve this call (not a listed approver, or its own)",
                grant.approver
            ));
        }
        if let Some(when) = &grant.when {
            let bound = Bound::parse(when).map_err(|err| err.to_string())?;
            match bound.holds(action) {
                Ok(true) => {}
                Ok(false) => return Err(format!("the params are outside its condition {when}")),
                Err(err) => {
                    return Err(format!("its condition {when} could not be judged ({err})"))
                }
            }
        }
        let claim = grant.claim();
        let (id, asked) = (action.id.clone(), claim.clone());
        let reserved = self
            .on_ledger(move |ledger| ledger.reserve_windows(&id, &[asked]))
            .await
            .map_err(|err| format!("its uses could not be counted ({})", error_chain(&err)))?;
        match reserved {
            Reservation::Counted { figures } => {
                let used = figures.first().copied().unwrap_or_default();
                Ok(Granted {
                    approver: grant.approver.clone(),
                    note: GrantNote {
                        id: grant.id.clone(),
                        event: "used".to_owned(),
                        number: Some(used as u64 + 1),
                        ..GrantNote::default()
                    },
                    claim,
                })
            }
            Reservation::Crossed { figure, .. } => {
                Err(format!("used up ({figure} of {} calls)", grant.calls))
            }
        }
    }

    /// Records grant `grant`, given on `request`, in the ledger and makes it usable.
    pub(super) async fn record_grant(
        &self,
        request: &ApprovalRequest,
        grant: &Grant,
    ) -> Result<Receipt, AttestError> {
        let bound = grant
            .when
            .as_deref()
            .map_or_else(String::new, |when| format!(" where {when}"));
        let reason = format!(
            "{} granted {} {} calls of {}.{} until {}{bound}",
            grant.approver,
            grant.agent,
            grant.calls,
            grant.system,
            grant.verb,
            format_ts(grant.expires_at)
        );
        let note = GrantNote {
            id: grant.id.clone(),
            event: "issued".to_owned(),
            calls: Some(grant.calls),
            until: Some(format_ts(grant.expires_at)),
            when: grant.when.clone(),
            request: Some(request.action.id.clone()),
            number: None,
        };
        let confirm = confirm("approved", &grant.approver, grant.channel.clone(), None);
        let receipt = self
            .record_grant_row(&request.action, &grant.id, reason, note, Some(confirm))
            .await?;
        let (id, seq) = (grant.id.clone(), receipt.seq);
        self.in_store(move |store| store.set_grant_row(&id, seq))
            .await?;
        Ok(receipt)
    }

    /// Revokes grant `id` (from the next call on, in every process) and records it.
    pub async fn revoke_grant(&self, id: &str) -> Result<(Grant, Receipt), AttestError> {
        let key = id.to_owned();
        let grant = self.in_store(move |store| store.revoke_grant(&key)).await?;
        let verb = grant
            .verb
            .parse()
            .map_err(|_| AttestError::Internal("a grant whose verb is not a verb"))?;
        let mut action = Action::new(grant.system.clone(), verb);
        action.agent = Some(grant.agent.clone());
        action.extra.agent_auth = Some(grant.agent_auth.clone());
        let note = GrantNote {
            id: grant.id.clone(),
            event: "revoked".to_owned(),
            ..GrantNote::default()
        };
        let reason = format!("grant {} (request {}) revoked", grant.id, grant.request);
        let receipt = self
            .record_grant_row(&action, &grant.id, reason, note, None)
            .await?;
        Ok((grant, receipt))
    }

    /// Appends a grant's own row: the request's agent, system and verb, the grant's id as
    /// its action id, no params.
    async fn record_grant_row(
        &self,
        of: &Action,
        id: &str,
        reason: String,
        note: GrantNote,
        confirm: Option<attest_ledger::Confirm>,
    ) -> Result<Receipt, AttestError> {
        let mut action = Action::new(of.system.clone(), of.verb);
        action.id = id.to_owned();
        action.agent.clone_from(&of.agent);
        action.extra.agent_auth.clone_from(&of.extra.agent_auth);
        let prepared = self.prepare(action)?;
        let verdict = Verdict::new(
            Decision::Recorded,
            prepared.action.base_risk(),
            GRANT_RULE,
            reason,
        );
        let (_, verification) = acknowledgement(None);
        let mut record = to_record(
            &prepared.action,
            prepared.params_hash.clone(),
            &verdict,
            Decision::Recorded,
            confirm,
            RowOutcome::Recorded(None, verification),
        )?;
        record.grant = Some(note);
        let appended = self.append(record).await?;
        Ok(Receipt::new(
            id,
            appended,
            Decision::Recorded,
            verdict.reasons,
        ))
    }
}

/// Adds a grant's line to a verdict's reasons (under rule [`GRANT_RULE`]).
fn note(verdict: &mut Verdict, reason: String) {
    verdict.reasons.push(reason);
    verdict.rules_fired.push(GRANT_RULE.to_owned());
}
