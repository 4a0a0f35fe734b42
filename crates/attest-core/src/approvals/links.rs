//! One-click approve/reject links: signed, expiring, bound to one request, one choice
//! and one approver.
//!
//! A link is `{base}/links/{id}/{approve|reject}?approver=…&exp=…&sig=…`, where `sig` is
//! HMAC-SHA256 (hex) under the link key over the RFC 8785 canonical JSON array
//! `["attest-link.v1", id, choice, approver, exp]`. Opening it shows a confirmation page
//! (link scanners that fetch URLs must not approve anything); its button posts back.

use std::time::{Duration, SystemTime};

use attest_ledger::canonical_bytes;
use serde_json::json;
use url::Url;

use super::signature::{check_hmac, hmac_hex, unix_secs};
use super::{Secret, SignatureError};

/// Approve or reject, as a link carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Approve.
    Approve,
    /// Reject.
    Reject,
}

impl Choice {
    /// `approve` or `reject`.
    pub fn as_str(self) -> &'static str {
        match self {
            Choice::Approve => "approve",
            Choice::Reject => "reject",
        }
    }

    /// Parses `approve` or `reject`.
    pub fn parse(word: &str) -> Option<Choice> {
        match word {
            "approve" => Some(Choice::Approve),
            "reject" => Some(Choice::Reject),
            _ => None,
        }
    }
}

/// Makes and checks one-click links.
#[derive(Debug, Clone)]
pub struct LinkSigner {
    key: Secret,
    base_url: String,
    ttl: Duration,
}

/// The fields a link carries, as the server reads them back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedLink<'a> {
    /// The request id.
    pub id: &'a str,
    /// Approve or reject.
    pub choice: Choice,
    /// Who the link was made for.
    pub approver: &'a str,
    /// `exp`: Unix seconds after which the link is dead.
    pub expires: Option<&'a str>,
    /// `sig`: the hex HMAC.
    pub signature: Option<&'a str>,
}

impl LinkSigner {
    /// Links under `base_url` (the inbox's public address), signed with `key`, valid for
    /// `ttl`.
    pub fn new(key: Secret, base_url: impl Into<String>, ttl: Duration) -> LinkSigner {
        LinkSigner {
            key,
            base_url: base_url.into(),
            ttl,
        }
    }

    /// The inbox's public address the links are under.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The inbox's page for request `id`: what a notice carries instead of decision links
    /// when a link alone may not decide ([`super::ApprovalRequest::needs_signed_in_approvers`]).
    /// It decides nothing; the approver signs in there.
    pub fn request_page(&self, id: &str) -> Result<String, SignatureError> {
        let mut url = Url::parse(&self.base_url).map_err(|_| SignatureError::Malformed {
            field: "link base url",
        })?;
        url.query_pairs_mut().append_pair("request", id);
        Ok(url.into())
    }

    /// A link that decides request `id` as `choice`, in `approver`'s name.
    pub fn link(
        &self,
        id: &str,
        choice: Choice,
        approver: &str,
        now: SystemTime,
    ) -> Result<String, SignatureError> {
        let exp = unix_secs(now).saturating_add(self.ttl.as_secs());
        let sig = self.sign(id, choice, approver, exp)?;
        let mut url = Url::parse(&self.base_url).map_err(|_| SignatureError::Malformed {
            field: "link base url",
        })?;
        url.path_segments_mut()
            .map_err(|()| SignatureError::Malformed {
                field: "link base url",
            })?
            .pop_if_empty()
            .extend(["links", id, choice.as_str()]);
        url.query_pairs_mut()
            .append_pair("approver", approver)
            .append_pair("exp", &exp.to_string())
            .append_pair("sig", &sig);
        Ok(url.into())
    }

    /// Checks a link's signature and expiry.
    pub fn verify(&self, link: &SignedLink<'_>, now: SystemTime) -> Result<(), SignatureError> {
        let field = "exp";
        let exp_text = link.expires.ok_or(SignatureError::Missing { field })?;
        let exp: u64 = exp_text
            .parse()
            .map_err(|_| SignatureError::Malformed { field })?;
        let signature = link
            .signature
            .ok_or(SignatureError::Missing { field: "sig" })?;
        let message = message(link.id, link.choice, link.approver, exp)?;
        check_hmac(&self.key, &[&message], signature, "sig")?;
        let now = unix_secs(now);
        if now >= exp {
            return Err(SignatureError::Stale {
                field,
                age_secs: now - exp,
                limit_secs: 0,
            });
        }
        Ok(())
    }

    fn sign(
        &self,
        id: &str,
        choice: Choice,
        approver: &str,
        exp: u64,
    ) -> Result<String, SignatureError> {
        Ok(hmac_hex(&self.key, &[&message(id, choice, approver, exp)?]))
    }
}

/// The signed bytes: a canonical JSON array, so no field can run into the next.
fn message(id: &str, choice: Choice, approver: &str, exp: u64) -> Result<Vec<u8>, SignatureError> {
    canonical_bytes(&json!([
        "attest-link.v1",
        id,
        choice.as_str(),
        approver,
        exp
    ]))
    .map_err(|_| SignatureError::Malformed { field: "link" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(url: &str) -> (String, Choice, String, String, String) {
        let url = Url::parse(url).unwrap();
        let segs: Vec<_> = url.path_segments().unwrap().map(str::to_owned).collect();
        let q = |k: &str| {
            url.query_pairs()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.into_owned())
                .unwrap()
        };
        let n = segs.len();
        (
            segs[n - 2].clone(),
            Choice::parse(&segs[n - 1]).unwrap(),
            q("approver"),
            q("exp"),
            q("sig"),
        )
    }

    #[test]
    fn a_link_verifies_until_it_expires_and_binds_every_field() {
        let signer = LinkSigner::new(
            Secret::new("k"),
            "http://127.0.0.1:8321/",
            Duration::from_secs(60),
        );
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let url = signer
            .link("req-1", Choice::Approve, "ann@acme.com", now)
            .unwrap();
        assert!(
            url.starts_with("http://127.0.0.1:8321/links/req-1/approve?"),
            "{url}"
        );
        let (id, choice, approver, exp, sig) = parts(&url);
        let link = SignedLink {
            id: &id,
            choice,
            approver: &approver,
            expires: Some(&exp),
            signature: Some(&sig),
        };
        signer.verify(&link, now).unwrap();
        let late = now + Duration::from_secs(61);
        assert!(matches!(
            signer.verify(&link, late),
            Err(SignatureError::Stale { .. })
        ));
        let other = SignedLink {
            choice: Choice::Reject,
            ..link.clone()
        };
        assert!(matches!(
            signer.verify(&other, now),
            Err(SignatureError::Mismatch { .. })
        ));
        let other = SignedLink {
            approver: "bob@acme.com",
            ..link.clone()
        };
        assert!(signer.verify(&other, now).is_err());
        let other = SignedLink {
            id: "req-2",
            ..link.clone()
        };
        assert!(signer.verify(&other, now).is_err());
        let bumped = (exp.parse::<u64>().unwrap() + 1000).to_string();
        let other = SignedLink {
            expires: Some(&bumped),
            ..link
        };
        assert!(signer.verify(&other, now).is_err());
    }
}
