//! Idempotency keys: a retried call that carries the key of a call that already ran
//! does not run again; it gets that call's outcome.
//!
//! Before a write is decided, its key is claimed in the ledger's side table
//! ([`attest_ledger::Ledger::claim_key`]) together with the digest of the whole call
//! ([`crate::approvals::action_digest`]; the key is not part of it). Then:
//! - the key was free: the call goes on as usual; its intent row records the key, and
//!   once it ran (returned or failed) its receipt, and what its door replays, are kept
//!   for the key's lifetime. A call that did not run (refused, rejected, held, expired,
//!   its intent not recorded) frees the key again: a retry is decided afresh;
//! - the key ended a call with the same digest: the retry is decided again under
//!   today's policy, and a row naming the first call ([`attest_ledger::ReplayOf`]) is
//!   written either way: refused ([`Outcome::Refused`]) when policy now refuses it, else
//!   [`Outcome::Replayed`] with the first call's receipt; nothing runs;
//! - the key belongs to another call: [`IdempotencyError::Mismatch`];
//! - the key's call has no outcome yet: the retry waits (bounded, [`IdempotencyOptions::wait`])
//!   for it, then replays it, or is refused with [`IdempotencyError::InUse`] naming its
//!   intent row. A call whose process died leaves its key in use: its outcome is
//!   unknown, and it is never run again blindly. A retry (keyed or not) that finds the
//!   first call's process gone reads its outcome back where a recipe can look the
//!   record up, as for any retry of an open intent; once the intent is resolved — so,
//!   or answered by a person (`attest intents resolve`) — the key follows the answer
//!   ([`Attest::key_follows`]): it ran, and a retry with the key gets that outcome
//!   (with no response to replay: the first process did not live to keep one); it did
//!   not, and the key is free.
//!
//! A key is the principal's that sent it, on its method and route ([`KeyScope`]): the
//! authenticated agent, else a keyed fingerprint of the credential the call carried
//! ([`crate::Call::credential`]). Another principal sending the same key (and body)
//! finds no row: its call is its own, decided and run as any call, and never shown
//! the first call's response.
//!
//! Keys apply to writes; a read with a key runs as any read.

use std::sync::atomic::{AtomicBool, Ordering};
#[cfg(test)]
use std::sync::Arc;
use std::time::Duration;

use attest_ledger::{KeyClaim, KeyId, KeyScope, KeyState, Principal, ReplayOf};
use attest_policy::{Action, Decision};
use serde::{Deserialize, Serialize};

use super::Attest;
use crate::{AttestError, Level, Outcome, Receipt};

/// The longest idempotency key accepted, in bytes (the IETF draft's keys are UUIDs).
pub const MAX_KEY_BYTES: usize = 255;

/// How idempotency keys behave: the configuration's `idempotency:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct IdempotencyOptions {
    /// How long a key ties retries to its first call, from the first call's start
    /// [default: 24 h]. After it the key is free again and what was kept is removed.
    pub lifetime: Duration,
    /// How long a retry waits for the first call with its key to end before it is
    /// refused as in use [default: 30 s].
    pub wait: Duration,
}

impl Default for IdempotencyOptions {
    fn default() -> Self {
        IdempotencyOptions {
            lifetime: DEFAULT_LIFETIME,
            wait: DEFAULT_WAIT,
        }
    }
}

impl IdempotencyOptions {
    /// Options with this lifetime and wait.
    pub fn new(lifetime: Duration, wait: Duration) -> Self {
        IdempotencyOptions { lifetime, wait }
    }
}

/// The default key lifetime: 24 h.
pub(crate) const DEFAULT_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// The default wait for a running first call: 30 s.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// Why a call with an idempotency key was not run (and nothing was recorded).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdempotencyError {
    /// The key is not 1 to 255 visible ASCII characters.
    #[error("the idempotency key is not 1 to {MAX_KEY_BYTES} visible ASCII characters")]
    BadKey,
    /// The key was used for another call (another digest) within its lifetime.
    #[error(
        "the idempotency key was already used for a different call; use a new key for a new call"
    )]
    Mismatch,
    /// The first call with the key has not ended.
    #[error("{}", in_use(.intent_seq, .age))]
    InUse {
        /// The first call's intent row, once written.
        intent_seq: Option<u64>,
        /// How long ago the first call started.
        age: Duration,
    },
    /// The key was claimed before keys were bound to a principal (an older release):
    /// whose it is cannot be told, so it is not used until it expires.
    #[error(
        "the idempotency key was claimed by an older release that did not record whose it \
         is{}; it is neither replayed nor run again until it expires: use a new key",
        .intent_seq.map(|seq| format!(" (intent seq {seq})")).unwrap_or_default()
    )]
    Unbound {
        /// The first call's intent row, once written.
        intent_seq: Option<u64>,
    },
}

fn in_use(intent_seq: &Option<u64>, age: &Duration) -> String {
    let row = intent_seq.map_or_else(
        || "its intent is not recorded yet".to_owned(),
        |seq| format!("intent seq {seq}"),
    );
    format!(
        "a call with this idempotency key started {}s ago ({row}) and has no outcome yet: \
         it may still be running, or its process stopped and its outcome is unknown; \
         it is not run again",
        age.as_secs()
    )
}

/// Checks a key as a caller sent it.
pub fn check_key(key: &str) -> Result<(), IdempotencyError> {
    let fine = !key.is_empty()
        && key.len() <= MAX_KEY_BYTES
        && key.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
    if fine && key.trim() == key {
        Ok(())
    } else {
        Err(IdempotencyError::BadKey)
    }
}

/// A key as a call carries it: its text, and the credential the call carried.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Keyed<'a> {
    pub(crate) key: &'a str,
    pub(crate) credential: Option<&'a [u8]>,
}

/// A key this call holds.
pub(super) struct HeldKey {
    pub(super) key: String,
    id: KeyId,
    action_id: String,
}

/// What claiming a key found.
pub(super) enum Claimed {
    /// Go on: the key is this call's (or there is none).
    Go(Option<HeldKey>),
    /// The first call ran: decide the replay ([`Attest::replay`]).
    Replay(Box<First>),
}

/// The first call with a key, as a retry finds it.
pub(super) struct First {
    receipt: Receipt,
    response: Option<Vec<u8>>,
}

/// Whose `key` is on `action`: the authenticated agent, else the credential, else nobody;
/// on the action's method and route.
fn scope_of(action: &Action, credential: Option<&[u8]>) -> KeyScope {
    let extra = &action.extra;
    let authenticated = extra
        .agent_auth
        .as_deref()
        .is_some_and(|how| how != crate::agents::UNAUTHENTICATED);
    let principal = match (&action.agent, credential) {
        (Some(agent), _) if authenticated => Principal::Agent(agent.clone()),
        (_, Some(credential)) => Principal::Credential(credential.to_vec()),
        _ => Principal::Nobody,
    };
    // An array: fields that may hold any character stay apart.
    let route = serde_json::json!([action.system, extra.url, extra.server, extra.tool_name]);
    KeyScope {
        principal,
        method: extra.method.as_deref().unwrap_or("").to_ascii_uppercase(),
        route: route.to_string(),
    }
}

/// A receipt as kept with its key (the ledger stores it as text).
#[derive(Debug, Serialize, Deserialize)]
struct Kept {
    seq: u64,
    entry_hash: String,
    ts: String,
    decision: Decision,
    reasons: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    approver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    level: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    warning: Option<String>,
}

impl Kept {
    fn of(receipt: &Receipt) -> Kept {
        Kept {
            seq: receipt.seq,
            entry_hash: receipt.entry_hash.clone(),
            ts: receipt.ts.clone(),
            decision: receipt.decision,
            reasons: receipt.reasons.clone(),
            approver: receipt.approver.clone(),
            level: receipt.level.map(|l| l.as_str().to_owned()),
            warning: receipt.warning.clone(),
        }
    }

    fn receipt(self, action_id: &str) -> Receipt {
        Receipt {
            action_id: action_id.to_owned(),
            seq: self.seq,
            entry_hash: self.entry_hash,
            ts: self.ts,
            decision: self.decision,
            reasons: self.reasons,
            approver: self.approver,
            level: self.level.as_deref().and_then(Level::parse),
            warning: self.warning,
        }
    }
}

/// Notes whether the tool was called, for a key to be freed only when it was not.
#[derive(Debug, Default)]
pub(super) struct Called(AtomicBool);

impl Called {
    pub(super) fn mark(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    fn was(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

impl Attest {
    /// Claims `key` for the prepared `action` (see the module docs).
    pub(super) async fn claim_key(
        &self,
        keyed: Option<Keyed<'_>>,
        action: &Action,
    ) -> Result<Claimed, AttestError> {
        let Some(Keyed { key, credential }) = keyed.filter(|_| !action.verb.is_read()) else {
            return Ok(Claimed::Go(None));
        };
        check_key(key)?;
        let claim = KeyClaim {
            key: key.to_owned(),
            scope: scope_of(action, credential),
            digest: crate::approvals::action_digest(action)?,
            action_id: action.id.clone(),
            lifetime: self.idempotency.lifetime,
        };
        let asked = claim.clone();
        let id = self.on_ledger(move |ledger| ledger.key_id(&asked)).await?;
        let mut pause = Duration::from_millis(20);
        let mut waited = Duration::ZERO;
        let mut reconciled = false;
        loop {
            let asked = claim.clone();
            match self
                .on_ledger(move |ledger| ledger.claim_key(&asked))
                .await?
            {
                KeyState::Claimed => {
                    return Ok(Claimed::Go(Some(HeldKey {
                        key: claim.key,
                        id,
                        action_id: claim.action_id,
                    })))
                }
                KeyState::Mismatch => return Err(IdempotencyError::Mismatch.into()),
                KeyState::Unbound { intent_seq } => {
                    return Err(IdempotencyError::Unbound { intent_seq }.into())
                }
                KeyState::Done(done) => {
                    let kept: Kept = serde_json::from_str(&done.outcome).map_err(|_| {
                        AttestError::Internal("an idempotency key's kept receipt does not parse")
                    })?;
                    return Ok(Claimed::Replay(Box::new(First {
                        receipt: kept.receipt(&done.action_id),
                        response: done.replay,
                    })));
                }
                KeyState::Running {
                    action_id: first,
                    intent_seq,
                    age,
                } => {
                    // The first call's process gone: read its outcome back, once, and
                    // claim again (the key follows what was found).
                    if !reconciled && intent_seq.is_some() {
                        reconciled = true;
                        if self.reconcile_keyed(action, &claim.digest, &first).await? {
                            continue;
                        }
                    }
                    if waited >= self.idempotency.wait {
                        return Err(IdempotencyError::InUse { intent_seq, age }.into());
                    }
                    tokio::time::sleep(pause).await;
                    waited += pause;
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
            }
        }
    }

    /// Settles the idempotency key of an open intent whose outcome was found after its
    /// process went away (`intent`: its row; `ran`: the receipt of the outcome row
    /// recorded for it, or `None` when it did not run). Best effort: the outcome row is
    /// written already, and a key left in use only refuses retries until it expires.
    pub(super) async fn key_follows(&self, intent: &attest_ledger::Record, ran: Option<&Receipt>) {
        // The row is found by its action: the intent names its key, not whose it was.
        if intent.idempotency_key.is_none() {
            return;
        }
        let action_id = intent.action_id.clone();
        let settled = match ran {
            Some(receipt) => match serde_json::to_string(&Kept::of(receipt)) {
                Ok(text) => {
                    self.on_ledger(move |ledger| ledger.finish_key(None, &action_id, &text, None))
                        .await
                }
                Err(_) => return,
            },
            None => {
                self.on_ledger(move |ledger| ledger.release_key(None, &action_id))
                    .await
            }
        };
        if let Err(err) = settled {
            tracing::warn!(error = %crate::error_chain(&err), "a resolved intent's idempotency key was not settled");
        }
    }

    /// Notes the intent row of the call holding `held`; best effort (a retry then names
    /// no intent row).
    pub(super) async fn note_intent(&self, held: Option<&HeldKey>, seq: u64) {
        let Some(held) = held else { return };
        let (key, id) = (held.id, held.action_id.clone());
        if let Err(err) = self
            .on_ledger(move |ledger| ledger.key_intent(&key, &id, seq))
            .await
        {
            tracing::warn!(error = %crate::error_chain(&err), "an idempotency key's intent row was not noted");
        }
    }

    /// A retry of a call that ran under its key, decided again under today's policy: a
    /// row naming the first call is written either way (not run); refused when policy
    /// now refuses, else the first call's receipt and response. A row that cannot be
    /// written replays nothing.
    pub(super) async fn replay(
        &self,
        prepared: &super::Prepared,
        first: First,
    ) -> Result<super::call::Ended, AttestError> {
        let (mut verdict, _) = self.enforced(&prepared.action);
        let refused = matches!(verdict.decision, Decision::Refuse | Decision::Recorded);
        if refused {
            verdict.decision = Decision::Refuse;
            verdict.reasons.push(format!(
                "a retry of seq {} with its idempotency key: policy now refuses the call, so \
                 its response is not replayed",
                first.receipt.seq
            ));
        }
        let mut record = crate::record::to_record(
            &prepared.action,
            prepared.params_hash.clone(),
            &verdict,
            verdict.decision,
            None,
            crate::record::RowOutcome::NotRun,
        )?;
        record.replay_of = Some(ReplayOf {
            action_id: first.receipt.action_id.clone(),
            seq: first.receipt.seq,
        });
        let appended = self.append(record).await?;
        if refused {
            let receipt = Receipt::new(
                &prepared.action.id,
                appended,
                verdict.decision,
                verdict.reasons,
            );
            return Ok(Outcome::Refused { receipt });
        }
        Ok(Outcome::Replayed {
            receipt: first.receipt,
            response: first.response,
        })
    }

    /// Ends the key this call held: keeps the outcome of a call that ran (and `replay`,
    /// what its door replays), frees the key of one that did not. A call whose tool was
    /// called but whose outcome is an error keeps its key in use until it expires.
    pub(super) async fn settle_key<T, E>(
        &self,
        held: Option<HeldKey>,
        called: &Called,
        result: &mut Result<Outcome<T, E>, AttestError>,
        replay: impl FnOnce(&Outcome<T, E>) -> Option<Vec<u8>>,
    ) {
        let Some(held) = held else { return };
        let kept = match &*result {
            Ok(outcome) if outcome.ran() => Some((Kept::of(outcome.receipt()), replay(outcome))),
            Err(AttestError::OutputNotJson { receipt, .. }) => Some((Kept::of(receipt), None)),
            Ok(_) => None,
            Err(_) if called.was() => return,
            Err(_) => None,
        };
        let HeldKey { id, action_id, .. } = held;
        let done = match kept {
            Some((kept, replay)) => match serde_json::to_string(&kept) {
                Ok(text) => {
                    self.on_ledger(move |ledger| {
                        ledger.finish_key(Some(&id), &action_id, &text, replay.as_deref())
                    })
                    .await
                }
                // A receipt always has a JSON form; if not, the key stays in use.
                Err(_) => Ok(()),
            },
            None => {
                self.on_ledger(move |ledger| ledger.release_key(Some(&id), &action_id))
                    .await
            }
        };
        if let Err(err) = done {
            // The key stays in use (retries are refused, never run) until it expires.
            let warning = format!(
                "the idempotency key's outcome could not be kept ({}): a retry with it is refused until it expires",
                crate::error_chain(&err)
            );
            tracing::warn!("{warning}");
            if let Ok(outcome) = result {
                if let Some(receipt) = outcome.receipt_mut() {
                    receipt.warning.get_or_insert(warning);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use attest_ledger::{Ledger, LedgerOptions};
    use attest_policy::{PolicyEngine, Verb};
    use serde_json::json;

    use super::*;
    use crate::AutoGate;

    const POLICY: &str = "policies:
  - name: payments
    match: {system: stripe, verb: pay}
    decision: act
  - name: no-deletes
    match: {verb: delete}
    decision: refuse
";

    fn attest(dir: &tempfile::TempDir) -> Attest {
        let ledger = Ledger::open(dir.path().join("l.sqlite"), LedgerOptions::default()).unwrap();
        Attest::builder()
            .ledger(ledger)
            .policy(PolicyEngine::from_yaml(POLICY, "p.yaml").unwrap())
            .gate(AutoGate::reject("ops"))
            .build()
            .unwrap()
    }

    /// Pays `amount` with idempotency key `key`; the tool counts how often it ran and
    /// takes `slow` to answer.
    async fn pay(
        attest: &Attest,
        key: &str,
        amount: u64,
        ran: &AtomicUsize,
        slow: Duration,
    ) -> Result<Outcome<serde_json::Value>, AttestError> {
        let action = Action::new("stripe", Verb::Pay).with_params(json!({"amount": amount}));
        attest
            .call(action)
            .idempotency_key(key)
            .run(|_| async move {
                ran.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(slow).await;
                Ok::<_, crate::ToolError>(json!({"id": "ch_1"}))
            })
            .await
    }

    #[tokio::test]
    async fn a_retry_with_the_same_key_gets_the_first_receipt_and_does_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let attest = attest(&dir);
        let ran = AtomicUsize::new(0);
        let Outcome::Ran { receipt: first, .. } =
            pay(&attest, "k1", 5, &ran, Duration::ZERO).await.unwrap()
        else {
            panic!("the first call runs");
        };
        for _ in 0..3 {
            match pay(&attest, "k1", 5, &ran, Duration::ZERO).await.unwrap() {
                Outcome::Replayed { receipt, response } => {
                    assert_eq!(receipt, first);
                    assert_eq!(response, None, "an in-process call keeps no output");
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        // The same key with another call is refused; another key runs.
        let err = pay(&attest, "k1", 6, &ran, Duration::ZERO)
            .await
            .unwrap_err();
        assert!(
            matches!(err, AttestError::Idempotency(IdempotencyError::Mismatch)),
            "{err}"
        );
        assert!(pay(&attest, "k2", 6, &ran, Duration::ZERO)
            .await
            .unwrap()
            .ran());
        assert_eq!(ran.load(Ordering::SeqCst), 2);
        // The intent row carries the key; the outcome row does not; each of the three
        // replays left a row naming the first call's outcome row (seq 2), not run.
        let mut rows = Vec::new();
        attest
            .ledger()
            .for_each_row(1, |row| {
                let body: serde_json::Value = serde_json::from_slice(row.body).unwrap();
                let key = body["idempotency_key"].as_str().map(str::to_owned);
                rows.push((key, body["replay_of"]["seq"].as_u64()));
                Ok(true)
            })
            .unwrap();
        let k = |key: &str| Some(key.to_owned());
        assert_eq!(
            rows,
            [
                (k("k1"), None),
                (None, None),
                (None, Some(2)),
                (None, Some(2)),
                (None, Some(2)),
                (k("k2"), None),
                (None, None)
            ]
        );
    }

    #[tokio::test]
    async fn a_refused_call_frees_its_key_and_a_racer_waits_then_replays() {
        let dir = tempfile::tempdir().unwrap();
        let attest = attest(&dir);
        let refused = Action::new("crm", Verb::Delete).with_params(json!({"id": 1}));
        let outcome = attest
            .call(refused.clone())
            .idempotency_key("k3")
            .run(|_| async { Ok::<_, crate::ToolError>(json!({})) })
            .await
            .unwrap();
        assert!(matches!(outcome, Outcome::Refused { .. }), "{outcome:?}");
        // Not kept: the next call with the key is decided afresh (refused again).
        let again = attest
            .call(refused)
            .idempotency_key("k3")
            .run(|_| async { Ok::<_, crate::ToolError>(json!({})) })
            .await
            .unwrap();
        assert!(matches!(again, Outcome::Refused { .. }), "{again:?}");
        // Two racers with one key: one runs, the other waits for it and replays it.
        let ran = AtomicUsize::new(0);
        let slow = Duration::from_millis(300);
        let (a, b) = tokio::join!(
            pay(&attest, "k4", 9, &ran, slow),
            pay(&attest, "k4", 9, &ran, slow)
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert_eq!(u8::from(a.ran()) + u8::from(b.ran()), 1, "{a:?} {b:?}");
        assert_eq!(a.receipt(), b.receipt());
        // A racer that may not wait is refused, naming the first call's intent row.
        let impatient = Attest::builder()
            .ledger(Arc::clone(attest.ledger()))
            .policy(PolicyEngine::from_yaml(POLICY, "p.yaml").unwrap())
            .idempotency(IdempotencyOptions::new(DEFAULT_LIFETIME, Duration::ZERO))
            .build()
            .unwrap();
        let ran = AtomicUsize::new(0);
        let (a, b) = tokio::join!(pay(&attest, "k5", 9, &ran, Duration::from_secs(3)), async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            pay(&impatient, "k5", 9, &ran, slow).await
        });
        assert!(a.unwrap().ran());
        let err = b.unwrap_err();
        assert!(
            matches!(
                err,
                AttestError::Idempotency(IdempotencyError::InUse { .. })
            ),
            "{err}"
        );
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn keys_are_short_visible_ascii() {
        for good in [
            "a",
            "8e03978e-40d5-43e8-bc93-6894a57f9324",
            &"k".repeat(255),
            "a b",
        ] {
            assert_eq!(check_key(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            " a",
            "a\n",
            "é",
            &"k".repeat(256),
            "a\u{0}b",
            "tab\there",
        ] {
            assert_eq!(check_key(bad), Err(IdempotencyError::BadKey), "{bad:?}");
        }
    }

    #[test]
    fn in_use_names_the_intent_row() {
        let err = IdempotencyError::InUse {
            intent_seq: Some(12),
            age: Duration::from_secs(3),
        };
        assert!(err.to_string().contains("intent seq 12"), "{err}");
        assert!(err.to_string().contains("outcome is unknown"), "{err}");
    }
}
