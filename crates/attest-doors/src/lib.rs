//! Attest's doors: the servers that put Attest where agents already call tools (the MCP
//! proxy and server in [`mcp`], the HTTP [`gateway`]), the approval [`inbox`] with its
//! sign-in and dashboard, the [`review`] model they report from, and the audit
//! [`stream`] that sends each appended row to a SIEM. Routers over
//! `attest-core` types, apart from the code that serves them; none decides anything
//! itself, and nothing here reads flags or configuration files: the `attest` binary maps
//! those into the option structs each door takes.
//!
//! What they share lives here: how `ask` is answered ([`Mode`], core's
//! [`AskMode`]), the notice a waiting call prints, and the receipt they hand back
//! ([`receipt_json`]).
//!
//! # Modes and the approval store
//!
//! `ask` goes to the durable approval store (`attest pending`, `attest confirm`, the
//! inbox). In `block` mode the call waits up to `--timeout` for a person's answer; in
//! `pending` mode it returns at once. Either way a call still unanswered comes back as
//! held, with its resume token: the MCP proxy offers an `attest_resume` tool, the gateway
//! a resume URL. `auto` approves every `ask` (demos only).

pub mod agents;
pub mod count;
mod frames;
pub mod gateway;
pub mod inbox;
pub mod mcp;
pub mod notices;
pub mod review;
pub mod scrape;
pub mod stream;
pub mod terminal;

use std::time::Duration;

use async_trait::async_trait;
use attest_core::approvals::{ApprovalRequest, Notice, Notifier, NotifyError, ResumeToken};
use attest_core::setup::AskMode;
use attest_core::{Attest, AttestError, Receipt};
use serde_json::{json, Value};

/// How a server answers when policy says `ask`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Mode {
    /// A person is asked through the approval store; the call waits up to `--timeout`.
    Block,
    /// The call is held at once and the agent gets a token to resume it.
    Pending,
    /// Every `ask` is approved as `auto`: for demos only.
    Auto,
}

impl From<Mode> for AskMode {
    fn from(mode: Mode) -> AskMode {
        match mode {
            Mode::Block => AskMode::Block,
            Mode::Pending => AskMode::Pending,
            Mode::Auto => AskMode::Auto,
        }
    }
}

/// Says on stderr that a call waits for a person, and how to decide it: an agent's call
/// that blocks must not look like a hang to whoever runs the server.
pub struct WaitNotice {
    /// How long the call waits before it comes back held (zero: at once).
    pub wait: Duration,
}

#[async_trait]
impl Notifier for WaitNotice {
    fn name(&self) -> &str {
        "stderr"
    }

    async fn notify(&self, request: &ApprovalRequest) -> Result<(), NotifyError> {
        eprintln!("{}", wait_notice(request, self.wait));
        Ok(())
    }

    async fn announce(&self, notice: &Notice) -> Result<(), NotifyError> {
        eprintln!("attest: {}", crate::terminal::escape(&notice.title));
        Ok(())
    }
}

/// `attest: gmail.send waits up to 300 s for a person (approval ID): …`.
fn wait_notice(request: &ApprovalRequest, wait: Duration) -> String {
    // The system may come from a host name an agent chose.
    let action = format!(
        "{}.{}",
        crate::terminal::escape(&request.action.system),
        request.action.verb.as_str()
    );
    let waits = if wait.is_zero() {
        "is held for a person".to_owned()
    } else {
        format!("waits up to {} s for a person", wait.as_secs())
    };
    format!(
        "attest: {action} {waits} (approval {id}): decide in the inbox (`attest serve`) \
         or with `attest confirm {id} approve|reject`",
        id = request.id
    )
}

/// What a held call's answer says: that a person must decide, and how to resume once
/// they have. It tells the agent nothing it could approve with.
/// `link` is the request's page in the inbox, where a person signs in and decides
/// ([`attest_core::Attest::request_link`]).
pub fn held_json(attest: &Attest, id: &str, token: &ResumeToken, receipt: &Receipt) -> Value {
    let mut held = json!({
        "status": "pending",
        "id": id,
        "token": token.expose(),
        "waiting_for": "a registered approver (attest pending lists the request)",
        "receipt": receipt_json(receipt),
    });
    if let Some(link) = attest.request_link(id) {
        held["link"] = json!(link);
    }
    held
}

/// The receipt as the servers show it: `{"seq","action_id","decision","level",…}`.
pub fn receipt_json(receipt: &Receipt) -> Value {
    let mut json = json!({
        "seq": receipt.seq,
        "action_id": receipt.action_id,
        "entry_hash": receipt.entry_hash,
        "decision": receipt.decision.as_str(),
        "level": receipt.level.map(|l| l.as_str()),
        "approver": receipt.approver,
        "reasons": receipt.reasons,
    });
    if let Some(warning) = &receipt.warning {
        json["warning"] = json!(warning);
    }
    json
}

/// What a caller is told when the ledger did not accept a write's intent row: nothing
/// ran, and a retry fails the same way until the ledger accepts rows again.
pub fn not_recorded_text(what: &str, err: &AttestError) -> String {
    format!(
        "{what} was not run: Attest could not record it first ({}). Nothing reached the \
         upstream; retrying fails the same way until the ledger accepts rows again",
        chain(err)
    )
}

/// An error and its causes, one line: `a: b: c` (core's formatter, shared by the servers).
pub(crate) use attest_core::error_chain as chain;

#[cfg(test)]
mod tests {
    use attest_core::approvals::ApprovalStore;
    use attest_policy::{Action, Decision, Risk, Verb, Verdict};

    use super::*;

    /// An approval store in a fresh ledger file (the directory lives as long as it).
    fn store() -> (tempfile::TempDir, ApprovalStore) {
        let dir = tempfile::tempdir().unwrap();
        let ledger = attest_ledger::Ledger::open(
            dir.path().join("l.sqlite"),
            attest_ledger::LedgerOptions::default(),
        )
        .unwrap();
        let store = ApprovalStore::open(&ledger).unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn a_waiting_call_says_how_to_decide() {
        let (_dir, store) = store();
        let mut action = Action::new("gm\u{1b}[2Jail", Verb::Send);
        action.id = "act-1".to_owned();
        let verdict = Verdict::new(Decision::Ask, Risk::High, "R4", "high");
        let (request, _) = store
            .create(
                &action,
                &verdict,
                Duration::from_secs(60),
                Duration::from_secs(3600),
            )
            .unwrap();
        let notice = wait_notice(&request, Duration::from_secs(300));
        assert_eq!(
            notice,
            format!(
                "attest: gm\\u{{1b}}[2Jail.send waits up to 300 s for a person (approval {id}): decide in \
                 the inbox (`attest serve`) or with `attest confirm {id} approve|reject`",
                id = request.id
            )
        );
        assert!(wait_notice(&request, Duration::ZERO).contains("is held for a person"));
    }
}
