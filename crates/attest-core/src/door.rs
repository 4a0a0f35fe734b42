//! The door kit's binding half: what the Python and TypeScript packages share, so that
//! neither writes it. [`open_binding`] opens an [`Attest`](crate::Attest) for a binding from its
//! keyword arguments, the environment and the configuration file, as every door does
//! (`setup`), with what a binding adds: an ask comes back held at once unless a wait is
//! configured, and an ask finds the request an earlier attempt of the same call filed —
//! in this process or another run of the program — instead of filing a new one
//! ([`crate::approvals::StoreGate::same_call`]). So approving a held call and running
//! the program again runs the call, once, under that approval. The binding half needs
//! the `http` feature (agents' credentials are checked against an identity provider);
//! [`request_link`] does not.

#[cfg(feature = "http")]
pub use binding::{open_binding, Binding, BindingError};

#[cfg(feature = "http")]
mod binding {
    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::Duration;

    use crate::agents::{AgentSetupError, CallerAgent};
    use crate::config::ConfigError;
    use crate::setup::{DoorParts, Overrides, Settings, Source, Sourced};
    use crate::verification::ProcessEnv;
    use crate::Attest;

    /// An [`Attest`] opened for a binding, with what its calls' links and checkpoints need.
    pub struct Binding {
        /// The pipeline.
        pub attest: Attest,
        /// The signing key checkpoints are signed with (named, or the binary's default
        /// beside the ledger).
        pub key: PathBuf,
        /// The approval inbox's base URL, for the links held calls carry.
        pub inbox: String,
        /// With `agents:` configured, this instance's credential: every call is named by the
        /// agent it proves, checked as the call is made.
        pub agent: Option<Arc<CallerAgent>>,
    }

    impl std::fmt::Debug for Binding {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Binding")
                .field("key", &self.key)
                .field("inbox", &self.inbox)
                .field("agent", &self.agent.is_some())
                .finish_non_exhaustive()
        }
    }

    /// Why a binding's [`Attest`] did not open.
    #[derive(Debug, thiserror::Error)]
    #[non_exhaustive]
    pub enum BindingError {
        /// The configuration (a file, a keyword argument, the environment, the policy, the
        /// ledger) does not load; the error names the file, line and key.
        #[error(transparent)]
        Config(#[from] ConfigError),
        /// Agents are configured, and their authentication could not be set up (the
        /// approval store, the identity provider's keys).
        #[error(transparent)]
        Agents(#[from] AgentSetupError),
    }

    /// Opens the pipeline for a binding: `overrides` (its keyword arguments) beat the
    /// environment, which beats `.attest/config.yaml` (or `$ATTEST_CONFIG`), which beats the
    /// defaults. Below the file, an ask comes back held at once (with its resume token)
    /// rather than blocking the agent for minutes; an ask about a call an earlier attempt
    /// asked about finds that request (held again while pending, run once when approved).
    /// With `agents:` configured, calls are named by the agent `agent_token` (else
    /// `ATTEST_AGENT_TOKEN`) proves; the identity provider's keys are fetched now.
    pub async fn open_binding(
        overrides: &Overrides,
        agent_token: Option<String>,
    ) -> Result<Binding, BindingError> {
        let mut settings = Settings::resolve(overrides, Arc::new(ProcessEnv))?;
        if settings.wait.source == Source::Default {
            settings.wait = Sourced {
                value: Duration::ZERO,
                source: Source::Default,
            };
        }
        let attest = settings.build(DoorParts {
            same_call: true,
            ..DoorParts::default()
        })?;
        let agent = CallerAgent::open(&settings, &attest, agent_token)
            .await?
            .map(Arc::new);
        Ok(Binding {
            attest,
            key: settings.key_path(),
            inbox: settings.inbox_url(),
            agent,
        })
    }
}

/// The page where a person decides approval request `id`, under the inbox at `base`:
/// `{base}/requests/{id}`, which asks them to sign in first. The one link every door
/// hands out for a held call (the gateway's and MCP's held answers, Python's
/// `inbox_link`, TypeScript's `error.link`).
pub fn request_link(base: &str, id: &str) -> String {
    // One path segment, whatever the id holds: unreserved bytes as they are (RFC 3986
    // section 2.3), every other byte percent-encoded.
    let mut link = format!("{}/requests/", base.trim_end_matches('/'));
    for byte in id.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            link.push(char::from(byte));
        } else {
            link.push_str(&format!("%{byte:02X}"));
        }
    }
    link
}

impl crate::Attest {
    /// The page where a person decides approval request `id` ([`request_link`]), when
    /// this pipeline was given its inbox ([`crate::AttestBuilder::inbox`]; every door
    /// built from the configuration is).
    pub fn request_link(&self, id: &str) -> Option<String> {
        self.inbox.as_deref().map(|base| request_link(base, id))
    }
}

#[cfg(test)]
mod tests {
    use super::request_link;

    #[test]
    fn a_request_link_is_the_request_s_page_under_the_inbox() {
        assert_eq!(
            request_link("http://127.0.0.1:8321/", "a1-b2"),
            "http://127.0.0.1:8321/requests/a1-b2"
        );
        // An id is one path segment, whatever it holds.
        assert_eq!(
            request_link("https://inbox.example", "../x y"),
            "https://inbox.example/requests/..%2Fx%20y"
        );
    }
}
