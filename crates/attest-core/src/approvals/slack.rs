//! Slack: a message with approve/reject buttons through the Web API
//! (`chat.postMessage`), and the checks for the interaction requests Slack sends back
//! when a button is pressed (signing secret, `v0` scheme).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use attest_ledger::{Clock, SystemClock};
use serde::Deserialize;
use serde_json::{json, Value};

use super::signature::check_fresh;
use super::signature::check_hmac;
use super::webhook::{http_client, http_error, links};
use super::Status;
use super::{
    ApprovalRequest, Choice, LinkSigner, Notice, Notifier, NotifyError, Secret, SignatureError,
};

/// Slack's Web API.
pub const SLACK_API: &str = "https://slack.com/api";
/// The `action_id` of the approve button.
pub const SLACK_APPROVE_ACTION: &str = "attest_approve";
/// The `action_id` of the reject button.
pub const SLACK_REJECT_ACTION: &str = "attest_reject";
/// How far Slack's request timestamp may be from now (Slack's own advice: five minutes).
pub const SLACK_TOLERANCE: Duration = Duration::from_secs(300);

/// Posts each new request to a Slack channel, with approve and reject buttons.
pub struct SlackNotifier {
    token: Secret,
    channel: String,
    base_url: String,
    client: reqwest::Client,
    clock: Arc<dyn Clock>,
    links: Option<LinkSigner>,
}

impl std::fmt::Debug for SlackNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackNotifier")
            .field("channel", &self.channel)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl SlackNotifier {
    /// Posts to `channel` with a bot `token` (`xoxb-…`).
    pub fn new(token: Secret, channel: impl Into<String>) -> SlackNotifier {
        SlackNotifier {
            token,
            channel: channel.into(),
            base_url: SLACK_API.to_owned(),
            client: http_client(),
            clock: Arc::new(SystemClock),
            links: None,
        }
    }

    /// Another Web API base URL (a proxy, or a local server in tests).
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// Adds one-click links to the message (for people outside the Slack app).
    pub fn with_links(mut self, links: LinkSigner) -> Self {
        self.links = Some(links);
        self
    }

    /// The clock for links.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The `chat.postMessage` body for `request`.
    pub fn message(&self, request: &ApprovalRequest) -> Result<Value, NotifyError> {
        let summary = request.summary();
        let action = request.action.label();
        let who = summary["approver_members"]
            .as_array()
            .map(|people| {
                people
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "anyone".to_owned());
        let mut text = format!(
            "{}: {action} ({} risk)\n{}\nMay approve: {who}",
            request.headline(),
            request.verdict.tier.as_str(),
            request.verdict.reasons.join("; ")
        );
        if request.verdict.quorum.is_some() {
            text.push_str(&format!("\n{}", request.progress().text()));
        }
        let preview = serde_json::to_string(&summary["params_preview"]).unwrap_or_default();
        let mut blocks = vec![
            json!({"type": "section", "text": {"type": "mrkdwn", "text": text}}),
            json!({"type": "context", "elements": [{"type": "mrkdwn", "text": format!("params: `{preview}`")}]}),
            json!({"type": "actions", "block_id": format!("attest:{}", request.id), "elements": [
                {"type": "button", "style": "primary", "action_id": SLACK_APPROVE_ACTION,
                 "text": {"type": "plain_text", "text": "Approve"}, "value": request.id},
                {"type": "button", "style": "danger", "action_id": SLACK_REJECT_ACTION,
                 "text": {"type": "plain_text", "text": "Reject"}, "value": request.id},
            ]}),
        ];
        if let Value::Array(pairs) = links(self.links.as_ref(), request, self.clock.now())? {
            for pair in pairs {
                blocks.push(
                    json!({"type": "context", "elements": [{"type": "mrkdwn", "text": format!(
                        "{}: <{}|approve> · <{}|reject>",
                        pair["approver"].as_str().unwrap_or_default(),
                        pair["approve"].as_str().unwrap_or_default(),
                        pair["reject"].as_str().unwrap_or_default(),
                    )}]}),
                );
            }
        }
        Ok(json!({"channel": self.channel, "text": text, "blocks": blocks}))
    }
}

impl SlackNotifier {
    /// The `chat.update` body that replaces the card for `request` (message `ts` in
    /// `channel`) once it is decided: the outcome and who decided, no more buttons.
    pub fn decided_message(&self, channel: &str, ts: &str, request: &ApprovalRequest) -> Value {
        let by = request.decided_by();
        let via = request.channel.as_deref().unwrap_or("-");
        let text = format!(
            "{}: {} ({} risk), {} by {by} via {via}",
            request.id,
            request.action.label(),
            request.verdict.tier.as_str(),
            request.status,
        );
        json!({
            "channel": channel,
            "ts": ts,
            "text": text,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
        })
    }

    /// Replaces the card (message `ts` in `channel`) with the request's outcome.
    pub async fn update(
        &self,
        channel: &str,
        ts: &str,
        request: &ApprovalRequest,
    ) -> Result<(), NotifyError> {
        // Still waiting (a quorum not met yet): the card again, with its progress.
        let body = if request.status == Status::Pending {
            let mut body = self.message(request)?;
            body["channel"] = json!(channel);
            body["ts"] = json!(ts);
            body
        } else {
            self.decided_message(channel, ts, request)
        };
        self.call("chat.update", &body).await
    }

    /// One Web API call with the bot token; `ok: false` is an error.
    async fn call(&self, method: &str, body: &Value) -> Result<(), NotifyError> {
        let url = format!("{}/{method}", self.base_url.trim_end_matches('/'));
        let token = String::from_utf8_lossy(self.token.expose()).into_owned();
        let response = self
            .client
            .post(url)
            .bearer_auth(token)
            .json(body)
            .send()
            .await
            .map_err(|err| http_error("slack", err))?;
        if !response.status().is_success() {
            return Err(NotifyError::Status {
                notifier: "slack",
                status: response.status().as_u16(),
            });
        }
        let answer: SlackAnswer = response
            .json()
            .await
            .map_err(|err| http_error("slack", err))?;
        if !answer.ok {
            return Err(NotifyError::Slack {
                error: answer.error.unwrap_or_else(|| "unknown".to_owned()),
            });
        }
        Ok(())
    }
}

#[async_trait]
impl Notifier for SlackNotifier {
    fn name(&self) -> &str {
        "slack"
    }

    async fn notify(&self, request: &ApprovalRequest) -> Result<(), NotifyError> {
        let body = self.message(request)?;
        self.call("chat.postMessage", &body).await
    }

    async fn announce(&self, notice: &Notice) -> Result<(), NotifyError> {
        let body = json!({
            "channel": self.channel,
            "text": format!("*{}*\n{}", notice.title, notice.text),
        });
        self.call("chat.postMessage", &body).await
    }
}

#[derive(Deserialize)]
struct SlackAnswer {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
}

/// Checks a request from Slack: `X-Slack-Request-Timestamp` within `tolerance` of
/// `now`, and `X-Slack-Signature` = `v0=` hex HMAC-SHA256(signing secret,
/// `"v0:" + timestamp + ":" + body`).
pub fn verify_slack_signature(
    signing_secret: &Secret,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: SystemTime,
    tolerance: Duration,
) -> Result<(), SignatureError> {
    let field = "X-Slack-Signature";
    let ts = check_fresh(timestamp, "X-Slack-Request-Timestamp", now, tolerance)?;
    let hex = signature
        .ok_or(SignatureError::Missing { field })?
        .strip_prefix("v0=")
        .ok_or(SignatureError::Malformed { field })?;
    let ts = ts.to_string();
    check_hmac(
        signing_secret,
        &[b"v0:", ts.as_bytes(), b":", body],
        hex,
        field,
    )
}

/// A button press, read from an interaction's `payload` JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlackPress {
    /// The approval request.
    pub id: String,
    /// Which button.
    pub choice: Choice,
    /// Who pressed it: the Slack user id (`U…`). Never the username or display name,
    /// which a Slack user can change to anyone's.
    pub user: String,
    /// The channel the card is in, when the payload says (for updating the card).
    pub channel: Option<String>,
    /// The card's message timestamp, when the payload says (for updating the card).
    pub message_ts: Option<String>,
}

impl SlackPress {
    /// Reads the first action of a `block_actions` payload; anything else is malformed.
    pub fn from_payload(payload: &str) -> Result<SlackPress, SignatureError> {
        let field = "payload";
        let bad = SignatureError::Malformed { field };
        let value: Value = serde_json::from_str(payload).map_err(|_| bad.clone())?;
        if value["type"] != "block_actions" {
            return Err(bad);
        }
        let action = &value["actions"][0];
        let choice = match action["action_id"].as_str() {
            Some(SLACK_APPROVE_ACTION) => Choice::Approve,
            Some(SLACK_REJECT_ACTION) => Choice::Reject,
            _ => return Err(bad),
        };
        let id = action["value"].as_str().ok_or(bad.clone())?.to_owned();
        let user = value["user"]["id"]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or(bad)?
            .to_owned();
        let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
        let channel =
            text(&value["container"]["channel_id"]).or_else(|| text(&value["channel"]["id"]));
        let message_ts =
            text(&value["container"]["message_ts"]).or_else(|| text(&value["message"]["ts"]));
        Ok(SlackPress {
            id,
            choice,
            user,
            channel,
            message_ts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approvals::signature::hmac_hex;

    #[test]
    fn slack_signatures_follow_the_v0_scheme() {
        let secret = Secret::new("8f742231b10e8888abcd99yyyzzz85a5");
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_531_420_618);
        let body = b"token=xyz&payload=%7B%7D";
        let sig = format!("v0={}", hmac_hex(&secret, &[b"v0:1531420618:", body]));
        let ok = verify_slack_signature(
            &secret,
            Some("1531420618"),
            Some(&sig),
            body,
            now,
            SLACK_TOLERANCE,
        );
        assert_eq!(ok, Ok(()));
        let tampered = verify_slack_signature(
            &secret,
            Some("1531420618"),
            Some(&sig),
            b"x",
            now,
            SLACK_TOLERANCE,
        );
        assert!(tampered.is_err());
        let later = now + Duration::from_secs(301);
        let stale = verify_slack_signature(
            &secret,
            Some("1531420618"),
            Some(&sig),
            body,
            later,
            SLACK_TOLERANCE,
        );
        assert!(matches!(stale, Err(SignatureError::Stale { .. })));
    }

    #[test]
    fn a_press_names_request_choice_and_user() {
        let payload = r#"{"type":"block_actions","user":{"id":"U1","username":"ann"},
            "container":{"channel_id":"C7","message_ts":"171.5"},
            "actions":[{"action_id":"attest_reject","value":"req-9"}]}"#;
        let press = SlackPress::from_payload(payload).unwrap();
        assert_eq!(
            press,
            SlackPress {
                id: "req-9".into(),
                choice: Choice::Reject,
                user: "U1".into(),
                channel: Some("C7".into()),
                message_ts: Some("171.5".into()),
            }
        );
        // A username alone is no identity: anyone can rename themselves.
        let renamed = r#"{"type":"block_actions","user":{"username":"ann"},
            "actions":[{"action_id":"attest_approve","value":"req-9"}]}"#;
        assert!(SlackPress::from_payload(renamed).is_err());
        assert!(SlackPress::from_payload(r#"{"type":"view_submission"}"#).is_err());
        assert!(SlackPress::from_payload("nope").is_err());
    }
}
