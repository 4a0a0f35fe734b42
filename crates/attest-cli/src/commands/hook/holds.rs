//! Approvals that outlive the hook: an `ask` becomes a durable Attest approval request
//! (stored, announced by the notifiers), the hook waits for an approver up to a bound
//! below the agent's own hook timeout, and then answers.
//!
//! A hook is one process per event and an agent's retry carries no token, so the hook
//! ties a retry to its request by the call's digest (the agent, its tool name, the input
//! as sent and the working directory): a hold file `<digest>.json` in the per-user state
//! directory ([`attest_core::state`], outside every workspace; mode 0600, in a 0700
//! directory) keeps the request's id and resume token, sealed with an HMAC-SHA256 over
//! the digest, id and token under a key kept in that directory (never in the workspace).
//! A hold whose seal or digest does not match its call (copied to another call's name,
//! or edited) is refused and recorded as rejected by Attest's policy. When the
//! same call comes back approved, the file is claimed (renamed, so of two racing retries
//! only one wins) and the call is allowed once; the claim is used by the call's
//! after-event, which consumes the approval and records the outcome under the
//! approver's name. A rejection, an expiry or an edit ends the hold (the next try asks
//! anew); a changed call has another digest and never finds this one.
//!
//! Known limitation: a call allowed here whose after-event never comes (the agent was
//! killed) leaves its approval unused; it expires at its use-by time and is recorded
//! `expired`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use attest_core::approvals::{ApprovalRequest, ApprovalStore, Status};
use attest_core::{Outcome, RejectGate, ResumeToken, Start};
use attest_policy::Action;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::event::{Ruling, ToolCall};
use super::govern::{never_run, ModeGate, Settings};
use super::{pipeline, runtime};
use attest_core::setup::{is_url, AskMode};

/// How often a waiting hook reads the store.
const POLL: Duration = Duration::from_millis(200);

/// What a hold file keeps: the request, the call it is for, and the seal over both.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Hold {
    digest: String,
    id: String,
    token: String,
    mac: String,
}

/// A hold file that is not what the hook wrote for this call.
#[derive(Debug)]
struct Forged {
    path: String,
    why: &'static str,
}

impl std::fmt::Display for Forged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the hold file {} was copied or edited: {}",
            self.path, self.why
        )
    }
}

/// The key's file name in the state directory.
const KEY_FILE: &str = "hold.key";

/// Before a call policy asks about: find or make its request, wait, answer.
pub(crate) fn before(
    settings: &Settings,
    call: &ToolCall,
    action: Action,
    label: &str,
) -> anyhow::Result<Ruling> {
    let holds = Holds::new(settings, call)?;
    let ledger = settings.config.open_ledger(true)?;
    let store = Arc::new(ApprovalStore::open(&ledger)?);
    drop(ledger);
    let read = match holds.read() {
        Ok(read) => read,
        Err(forged) => return refuse_forged(settings, &holds, action, label, &forged),
    };
    let mut current = match read {
        Some(hold) => match store.get_by_token(&ResumeToken::new(hold.token.clone())) {
            Ok(request) if request.id == hold.id => Some((hold, request)),
            // A hold whose request is gone (another ledger, a purge): ask anew.
            _ => {
                holds.remove();
                None
            }
        },
        None => None,
    };
    if current.is_none() {
        let gate = AskMode::Pending.gate(
            Arc::clone(&store),
            Duration::ZERO,
            settings.config.use_by.value,
            settings.config.surface_notifiers()?,
            false,
        );
        let attest = pipeline(&settings.config, gate)?;
        let outcome = runtime()?.block_on(attest.call(action.clone()).run(never_run))?;
        match outcome {
            Outcome::Held { id, token, .. } => {
                let hold = holds.seal(id.clone(), token.expose().to_owned());
                holds.write(&hold)?;
                current = Some((hold, store.get_by_id(&id)?));
            }
            other => {
                let why = other
                    .why_not_run()
                    .unwrap_or_else(|| "it was not held".to_owned());
                return Ok(Ruling::Deny(format!("Attest: {label} did not run: {why}.")));
            }
        }
    }
    let Some((hold, request)) = current else {
        anyhow::bail!("no approval request was found or made");
    };
    let request = wait(&store, request, settings.wait)?;
    settle(settings, &holds, &store, hold, &request, action, label)
}

/// A hold that is not this call's own: refused, recorded as rejected by Attest's policy
/// (no approver), and removed.
fn refuse_forged(
    settings: &Settings,
    holds: &Holds,
    action: Action,
    label: &str,
    forged: &Forged,
) -> anyhow::Result<Ruling> {
    holds.remove();
    let note = format!("{forged}; an approval is bound to the call it was given for");
    let attest = pipeline(&settings.config, ModeGate::with_note(note.clone()))?;
    let seq = runtime()?
        .block_on(attest.call(action).run(never_run))?
        .receipt()
        .seq;
    Ok(Ruling::Deny(format!(
        "Attest refused {label}: {note} (ledger seq {seq}). It did not run."
    )))
}

/// The claimed approval of a call that was allowed once, taken for its after-event.
pub(crate) fn take_claimed(
    settings: &Settings,
    call: &ToolCall,
) -> anyhow::Result<Option<ResumeToken>> {
    // With no state directory no hold was ever claimed: the row names no approval.
    let Ok(holds) = Holds::new(settings, call) else {
        return Ok(None);
    };
    // A claimed hold that is not this call's own uses no approval: the row names none.
    let Some(hold) = holds.read_claimed().ok().flatten() else {
        return Ok(None);
    };
    holds.remove_claimed();
    Ok(Some(ResumeToken::new(hold.token)))
}

/// Waits while nobody has decided, up to `bound`.
fn wait(
    store: &ApprovalStore,
    mut request: ApprovalRequest,
    bound: Duration,
) -> anyhow::Result<ApprovalRequest> {
    let deadline = Instant::now() + bound;
    while request.status == Status::Pending
        && store.now() < request.expires_at
        && Instant::now() < deadline
    {
        std::thread::sleep(POLL.min(deadline.saturating_duration_since(Instant::now())));
        request = store.get_by_id(&request.id)?;
    }
    Ok(request)
}

/// The answer for a request as it stands.
fn settle(
    settings: &Settings,
    holds: &Holds,
    store: &ApprovalStore,
    hold: Hold,
    request: &ApprovalRequest,
    action: Action,
    label: &str,
) -> anyhow::Result<Ruling> {
    let now = store.now();
    let id = &request.id;
    let due = match request.status {
        Status::Pending => now >= request.expires_at,
        Status::Approved | Status::Edited => request.use_by.is_some_and(|by| now >= by),
        _ => true,
    };
    match request.status {
        Status::Pending if !due => {
            return Ok(Ruling::Deny(format!(
                "Attest: {label} is held for approval {id} at {inbox}; retry the same call after \
                 it is approved (an approver decides in the inbox, in Slack or with `attest \
                 confirm {id} approve`). It has not run.",
                inbox = settings.config.inbox_url(),
            )))
        }
        Status::Approved if !due && !request.consumed => {
            holds.claim()?;
            let approver = request.approver.as_deref().unwrap_or("an approver");
            return Ok(Ruling::Allow(format!(
                "Attest: {label} was approved by {approver} (approval {id}); it may run once."
            )));
        }
        Status::Edited if !due => {
            holds.remove();
            return Ok(Ruling::Deny(format!(
                "Attest: an approver changed {label} before approving it (approval {id}); \
                 a hook cannot change the call, so it did not run. Make the call as edited: {}",
                request
                    .edits
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            )));
        }
        _ => {}
    }
    // Ended (rejected, expired, cancelled, used): the pipeline records its end if nobody
    // has yet, and says how it ended.
    holds.remove();
    let attest = pipeline(&settings.config, RejectGate)?;
    let token = ResumeToken::new(hold.token);
    let why = match runtime()?.block_on(attest.call(Start::retry(&token, action)).run(never_run)) {
        Ok(outcome) => outcome
            .why_not_run()
            .unwrap_or_else(|| "it ended".to_owned()),
        Err(err) => format!("{err:#}"),
    };
    Ok(Ruling::Deny(format!(
        "Attest: {label} was not approved (approval {id}: {why}). It did not run; trying \
         again asks an approver anew."
    )))
}

/// The hold files of one call, and the key that seals them.
struct Holds {
    digest: String,
    key: Vec<u8>,
    pending: PathBuf,
    claimed: PathBuf,
}

impl Holds {
    /// The hold files of `call`, in the per-user state directory.
    fn new(settings: &Settings, call: &ToolCall) -> anyhow::Result<Holds> {
        let digest = call_digest(&settings.agent, call)?;
        let state = attest_core::state::state_dir(settings.config.env().as_ref()).context(
            "approvals need a per-user state directory outside the workspace: set HOME, \
             XDG_STATE_HOME or ATTEST_STATE_DIR",
        )?;
        let dir = state.join("hook-holds");
        create_private_dir(&dir)?;
        let key = attest_core::state::key(&state, KEY_FILE)
            .with_context(|| format!("cannot read or make the hold key in {}", state.display()))?;
        Ok(Holds {
            key,
            pending: dir.join(format!("{digest}.json")),
            claimed: dir.join(format!("{digest}.claimed.json")),
            digest,
        })
    }

    /// A hold for request `id`, sealed to this call.
    fn seal(&self, id: String, token: String) -> Hold {
        let mac = attest_core::state::seal(&self.key, &[&self.digest, &id, &token]);
        Hold {
            digest: self.digest.clone(),
            id,
            token,
            mac,
        }
    }

    fn read(&self) -> Result<Option<Hold>, Forged> {
        self.open(&self.pending)
    }

    fn read_claimed(&self) -> Result<Option<Hold>, Forged> {
        self.open(&self.claimed)
    }

    /// The hold at `path` if it is this call's own, sealed with this key.
    fn open(&self, path: &Path) -> Result<Option<Hold>, Forged> {
        let forged = |why| Forged {
            path: path.display().to_string(),
            why,
        };
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(_) => return Err(forged("it cannot be read")),
        };
        let hold: Hold =
            serde_json::from_slice(&bytes).map_err(|_| forged("it is not a hold file"))?;
        if hold.digest != self.digest {
            return Err(forged("it is another call's"));
        }
        let parts = [hold.digest.as_str(), hold.id.as_str(), hold.token.as_str()];
        if !attest_core::state::sealed(&self.key, &parts, &hold.mac) {
            return Err(forged("its seal does not match"));
        }
        Ok(Some(hold))
    }

    /// Writes the hold, readable by its owner only (the token resumes the request).
    fn write(&self, hold: &Hold) -> anyhow::Result<()> {
        let dir = self.pending.parent().unwrap_or_else(|| Path::new("."));
        create_private_dir(dir)?;
        let mut file = tempfile::NamedTempFile::new_in(dir)
            .with_context(|| format!("cannot write a hold in {}", dir.display()))?;
        file.write_all(&serde_json::to_vec(hold)?)?;
        file.as_file().sync_all()?;
        file.persist(&self.pending)
            .with_context(|| format!("cannot write {}", self.pending.display()))?;
        Ok(())
    }

    /// Claims the hold for the one run its approval allows; a second claimer finds no
    /// file and fails.
    fn claim(&self) -> anyhow::Result<()> {
        std::fs::rename(&self.pending, &self.claimed).with_context(|| {
            format!(
                "the approval was claimed by another try of the same call ({})",
                self.pending.display()
            )
        })
    }

    fn remove(&self) {
        // Best effort: a stale hold finds its request ended and is removed then.
        let _ = std::fs::remove_file(&self.pending);
    }

    fn remove_claimed(&self) {
        let _ = std::fs::remove_file(&self.claimed);
    }
}

/// A directory of the hooks' own state beside the ledger (`.attest/` for a database
/// ledger), one per kind of state.
pub(super) fn state_dir(settings: &Settings, name: &str) -> PathBuf {
    let ledger = &settings.config.ledger_path.value;
    let base = if is_url(ledger) {
        Path::new(".attest")
    } else {
        ledger.parent().unwrap_or_else(|| Path::new(""))
    };
    base.join(name)
}

pub(super) fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    attest_core::state::create_private_dir(dir)
        .with_context(|| format!("cannot create {}", dir.display()))
}

/// The call's digest: SHA-256 of the canonical (RFC 8785) `{agent, tool, input, cwd}`,
/// the tool and input as the agent sent them.
pub(super) fn call_digest(agent: &str, call: &ToolCall) -> anyhow::Result<String> {
    let hash = attest_ledger::value_hash(&json!({
        "agent": agent,
        "tool": call.agent_tool,
        "input": call.params,
        "cwd": call.cwd,
    }))?;
    Ok(attest_ledger::to_hex(&hash))
}
