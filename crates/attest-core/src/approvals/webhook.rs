//! The signed webhook: a JSON POST with `X-Attest-Timestamp` and
//! `X-Attest-Signature: v1=<hex HMAC-SHA256(secret, timestamp + "." + body)>`.
//!
//! Receivers check it with [`verify_webhook`], which also refuses stale timestamps so a
//! captured notice cannot be replayed later.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use attest_ledger::{Clock, SystemClock};
use serde_json::{json, Value};

use super::signature::{check_fresh, check_hmac, hmac_hex, unix_secs};
use super::{
    ApprovalRequest, Choice, FollowUp, LinkSigner, Notice, Notifier, NotifyError, Secret,
    SignatureError,
};

/// The timestamp header (Unix seconds).
pub const WEBHOOK_TIMESTAMP_HEADER: &str = "X-Attest-Timestamp";
/// The signature header (`v1=<hex>`).
pub const WEBHOOK_SIGNATURE_HEADER: &str = "X-Attest-Signature";
/// How far a webhook's timestamp may be from the receiver's clock by default.
pub const WEBHOOK_TOLERANCE: Duration = Duration::from_secs(300);

/// The `X-Attest-Signature` value for `body` sent at `timestamp` (Unix seconds).
pub fn sign_webhook(secret: &Secret, timestamp: u64, body: &[u8]) -> String {
    let ts = timestamp.to_string();
    format!("v1={}", hmac_hex(secret, &[ts.as_bytes(), b".", body]))
}

/// Checks a received webhook: both headers present, the timestamp within `tolerance` of
/// `now`, and the signature matching. Any `v1=` entry in a comma-separated header may
/// match (so a sender can rotate secrets).
pub fn verify_webhook(
    secret: &Secret,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: SystemTime,
    tolerance: Duration,
) -> Result<(), SignatureError> {
    let field = "X-Attest-Signature";
    let ts = check_fresh(timestamp, "X-Attest-Timestamp", now, tolerance)?;
    let signature = signature.ok_or(SignatureError::Missing { field })?;
    let ts = ts.to_string();
    let mut outcome = Err(SignatureError::Malformed { field });
    for candidate in signature.split(',').map(str::trim) {
        if let Some(hex) = candidate.strip_prefix("v1=") {
            outcome = check_hmac(secret, &[ts.as_bytes(), b".", body], hex, field);
            if outcome.is_ok() {
                break;
            }
        }
    }
    outcome
}

/// Posts each new request, signed, to one URL.
pub struct WebhookNotifier {
    url: String,
    secret: Secret,
    client: reqwest::Client,
    clock: Arc<dyn Clock>,
    links: Option<LinkSigner>,
}

impl std::fmt::Debug for WebhookNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may itself carry a secret: it is not printed.
        f.debug_struct("WebhookNotifier").finish_non_exhaustive()
    }
}

impl WebhookNotifier {
    /// Posts to `url`, signing with `secret`; gives up on a request after 10 s.
    pub fn new(url: impl Into<String>, secret: Secret) -> WebhookNotifier {
        WebhookNotifier {
            url: url.into(),
            secret,
            client: http_client(),
            clock: Arc::new(SystemClock),
            links: None,
        }
    }

    /// Adds one-click approve/reject links to each notice.
    pub fn with_links(mut self, links: LinkSigner) -> Self {
        self.links = Some(links);
        self
    }

    /// The clock for the timestamp header and links.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

#[async_trait]
impl Notifier for WebhookNotifier {
    fn name(&self) -> &str {
        "webhook"
    }

    async fn notify(&self, request: &ApprovalRequest) -> Result<(), NotifyError> {
        self.post_request("approval.requested", request).await
    }

    async fn follow_up(
        &self,
        request: &ApprovalRequest,
        step: FollowUp,
    ) -> Result<(), NotifyError> {
        self.post_request(step.as_str(), request).await
    }

    async fn announce(&self, notice: &Notice) -> Result<(), NotifyError> {
        let body = serde_json::to_value(notice).map_err(|err| NotifyError::Build {
            notifier: "webhook",
            detail: err.to_string(),
        })?;
        self.post(&body).await
    }
}

impl WebhookNotifier {
    /// Posts a request's notice of type `kind`, with its links.
    async fn post_request(&self, kind: &str, request: &ApprovalRequest) -> Result<(), NotifyError> {
        let now = self.clock.now();
        let mut body = json!({
            "type": kind,
            "request": request.summary(),
            "links": links(self.links.as_ref(), request, now)?,
        });
        if let Some(page) = request_page(self.links.as_ref(), request)? {
            body["request_url"] = Value::String(page);
        }
        self.post(&body).await
    }

    /// Posts `body`, signed with the current time.
    async fn post(&self, body: &Value) -> Result<(), NotifyError> {
        let body = serde_json::to_vec(body).map_err(|err| NotifyError::Build {
            notifier: "webhook",
            detail: err.to_string(),
        })?;
        let ts = unix_secs(self.clock.now());
        let response = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header(WEBHOOK_TIMESTAMP_HEADER, ts.to_string())
            .header(
                WEBHOOK_SIGNATURE_HEADER,
                sign_webhook(&self.secret, ts, &body),
            )
            .body(body)
            .send()
            .await
            .map_err(|err| http_error("webhook", err))?;
        if !response.status().is_success() {
            return Err(NotifyError::Status {
                notifier: "webhook",
                status: response.status().as_u16(),
            });
        }
        Ok(())
    }
}

/// One approve and one reject link per person the rule names. A link decides as the
/// person it was made for, so a rule that names nobody gets none: a link in nobody's
/// name would be a credential for anyone who sees the message. (Its approvers decide in
/// the inbox, in Slack or with `attest confirm`.)
///
/// Every notifier posts to a channel others read (a webhook, a Slack channel, a Teams
/// channel, a mailing list), so a request a link alone may not decide (a quorum, a
/// requester to keep out) gets none either: one reader would hold every approver's link.
/// Its notice carries [`request_page`] instead, where each approver signs in.
pub(crate) fn links(
    signer: Option<&LinkSigner>,
    request: &ApprovalRequest,
    now: SystemTime,
) -> Result<Value, NotifyError> {
    let Some(signer) = signer.filter(|_| !request.needs_signed_in_approvers()) else {
        return Ok(Value::Array(Vec::new()));
    };
    let mut out = Vec::new();
    for person in deciders(request) {
        let link = |choice| {
            signer
                .link(&request.id, choice, person, now)
                .map_err(|err| NotifyError::Build {
                    notifier: "links",
                    detail: err.to_string(),
                })
        };
        out.push(json!({
            "approver": person,
            "approve": link(Choice::Approve)?,
            "reject": link(Choice::Reject)?,
        }));
    }
    Ok(Value::Array(out))
}

/// The inbox's page for `request`, when its notice carries no decision links because a
/// link alone may not decide it (and links are configured, so the inbox's address is
/// known).
pub(crate) fn request_page(
    signer: Option<&LinkSigner>,
    request: &ApprovalRequest,
) -> Result<Option<String>, NotifyError> {
    match signer {
        Some(signer) if request.needs_signed_in_approvers() => signer
            .request_page(&request.id)
            .map(Some)
            .map_err(|err| NotifyError::Build {
                notifier: "links",
                detail: err.to_string(),
            }),
        _ => Ok(None),
    }
}

/// The people a notice about `request` gives links to: the rule's approvers (its groups'
/// members), and once escalated the people it was escalated to; never who asked for
/// it or owns its connection, under a quorum (their approval does not count).
pub(crate) fn deciders(request: &ApprovalRequest) -> Vec<&str> {
    let verdict = &request.verdict;
    let listed = if verdict.approver_members.is_empty() {
        &verdict.approvers
    } else {
        &verdict.approver_members
    };
    let escalated: &[String] = if request.escalated_at.is_some() {
        &verdict.escalation().escalate_members
    } else {
        &[]
    };
    let own = |person: &str| verdict.quorum.is_some() && request.is_own(person);
    let mut people: Vec<&str> = Vec::new();
    for person in listed.iter().chain(escalated) {
        if !own(person) && !people.iter().any(|p| p.eq_ignore_ascii_case(person)) {
            people.push(person);
        }
    }
    people
}

pub(crate) fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap_or_default()
}

pub(crate) fn http_error(notifier: &'static str, err: reqwest::Error) -> NotifyError {
    NotifyError::Http {
        notifier,
        source: err.without_url(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_body_verifies_and_anything_else_does_not() {
        let secret = Secret::new("s3cret");
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let ts = unix_secs(now);
        let sig = sign_webhook(&secret, ts, b"{}");
        let ts_text = ts.to_string();
        let check = |ts: Option<&str>, sig: Option<&str>, body: &[u8], secret: &Secret| {
            verify_webhook(secret, ts, sig, body, now, WEBHOOK_TOLERANCE)
        };
        assert_eq!(check(Some(&ts_text), Some(&sig), b"{}", &secret), Ok(()));
        assert!(check(Some(&ts_text), Some(&sig), b"{ }", &secret).is_err());
        assert!(check(Some(&ts_text), Some(&sig), b"{}", &Secret::new("other")).is_err());
        assert!(check(None, Some(&sig), b"{}", &secret).is_err());
        assert!(check(Some(&ts_text), None, b"{}", &secret).is_err());
        assert!(check(Some("12x"), Some(&sig), b"{}", &secret).is_err());
        let rotated = format!("v1=00, {sig}");
        assert_eq!(
            check(Some(&ts_text), Some(&rotated), b"{}", &secret),
            Ok(())
        );
        let old = (ts - 301).to_string();
        let old_sig = sign_webhook(&secret, ts - 301, b"{}");
        assert!(matches!(
            check(Some(&old), Some(&old_sig), b"{}", &secret),
            Err(SignatureError::Stale { .. })
        ));
    }
}
