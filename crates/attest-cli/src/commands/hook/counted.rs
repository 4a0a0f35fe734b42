//! Calls counted in their budget and rate windows, or whose intent is recorded, before
//! the agent runs them: the action id their after-event records them under.
//!
//! A hook decides before the agent runs its tool and records after it ran, in another
//! process. Were a call counted only when its after-event is recorded, two agent
//! sessions racing at a cap could both be allowed. So a call that policy lets through
//! under a `limit:` rule is counted when it is allowed, in the check's own atomic step
//! ([`attest_core::Attest::verdict_counted`]), under a fresh action id; the id is kept
//! here, and the after-event records the call under it, which checks and counts nothing
//! again.
//!
//! The agent sends no id that ties its after-event to its before-event (not every agent
//! has one), so the ids are kept per call digest (the same digest the holds use): a
//! directory `hook-counted/<digest>/` beside the ledger (0700) with one empty file per
//! allowed call, named by its action id (time-ordered). The after-event takes the
//! oldest by removing it, so of two identical calls in flight each takes one id, and
//! closes the intent recorded under it ([`attest_core::Attest::close_intent`]). A call
//! allowed whose after-event never comes (the person at the agent's prompt declined it,
//! the agent was killed) stays counted: the window errs strict, and its intent stays
//! open for `attest intents`.

use std::path::PathBuf;

use anyhow::Context;

use super::event::ToolCall;
use super::govern::Settings;
use super::holds::{call_digest, create_private_dir, state_dir};

/// The counted-call ids of one call digest.
pub(crate) struct CountedCalls {
    dir: PathBuf,
}

impl CountedCalls {
    pub(crate) fn new(settings: &Settings, call: &ToolCall) -> anyhow::Result<CountedCalls> {
        let digest = call_digest(&settings.agent, call)?;
        Ok(CountedCalls {
            dir: state_dir(settings, "hook-counted").join(digest),
        })
    }

    /// Keeps `action_id`, counted before the call, for its after-event.
    pub(crate) fn keep(&self, action_id: &str) -> anyhow::Result<()> {
        anyhow::ensure!(
            is_action_id(action_id),
            "{action_id:?} is not an action id Attest made"
        );
        create_private_dir(&self.dir)?;
        let path = self.dir.join(action_id);
        std::fs::File::create(&path)
            .and_then(|file| file.sync_all())
            .with_context(|| format!("cannot keep a counted call in {}", path.display()))
    }

    /// The oldest counted id of this call, taken (so no other after-event takes it).
    pub(crate) fn take(&self) -> anyhow::Result<Option<String>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => {
                return Err(err).with_context(|| format!("cannot read {}", self.dir.display()))
            }
        };
        let mut ids: Vec<String> = entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| is_action_id(name))
            .collect();
        ids.sort_unstable();
        for id in ids {
            // Removing is the claim: of two after-events racing for one id, one wins.
            if std::fs::remove_file(self.dir.join(&id)).is_ok() {
                // Best effort: an empty directory is removed, a busy one stays.
                let _ = std::fs::remove_dir(&self.dir);
                return Ok(Some(id));
            }
        }
        Ok(None)
    }
}

/// An id as [`attest_core::Attest::verdict_counted`] makes them (a UUID): nothing else
/// found in the directory is taken for one.
fn is_action_id(name: &str) -> bool {
    uuid::Uuid::parse_str(name).is_ok_and(|id| id.hyphenated().to_string() == name)
}
