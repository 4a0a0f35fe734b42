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
pub use binding::{
    open_binding, Binding, BindingCall, BindingError, BindingRun, BindingStart, CheckpointRefused,
    McpServerCall,
};

#[cfg(feature = "http")]
mod binding;

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
