//! Microsoft Teams: an Adaptive Card posted to an incoming webhook or a Workflows
//! ("Post to a channel when a webhook request is received") URL.
//!
//! The body is the message Teams documents for webhooks: `{"type": "message",
//! "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive",
//! "content": {"type": "AdaptiveCard", "version", "body", "actions"}}]}`. Webhook cards
//! can only open URLs, so the buttons are the signed one-click links (one pair per
//! approver) and the inbox. Incoming webhooks cannot edit a message they posted: "updated
//! after the decision" is a second card, the decided version.

use std::sync::Arc;

use async_trait::async_trait;
use attest_ledger::{Clock, SystemClock};
use serde_json::{json, Value};

use super::webhook::{http_client, http_error, links, request_page};
use super::{ApprovalRequest, LinkSigner, Notice, Notifier, NotifyError, Status};

/// The card content type Teams expects in `attachments`.
pub const TEAMS_CARD_TYPE: &str = "application/vnd.microsoft.card.adaptive";
/// The Adaptive Card version the cards declare (Teams renders up to 1.5).
pub const TEAMS_CARD_VERSION: &str = "1.4";

/// Posts each new request to a Teams channel as an Adaptive Card.
pub struct TeamsNotifier {
    url: String,
    client: reqwest::Client,
    clock: Arc<dyn Clock>,
    links: Option<LinkSigner>,
    inbox: Option<String>,
}

impl std::fmt::Debug for TeamsNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL carries its own signature: it is a secret and is not printed.
        f.debug_struct("TeamsNotifier").finish_non_exhaustive()
    }
}

impl TeamsNotifier {
    /// Posts to `url` (an incoming webhook or Workflows URL, itself a secret).
    pub fn new(url: impl Into<String>) -> TeamsNotifier {
        TeamsNotifier {
            url: url.into(),
            client: http_client(),
            clock: Arc::new(SystemClock),
            links: None,
            inbox: None,
        }
    }

    /// Adds the signed approve/reject links, and a button to the inbox at the links'
    /// base URL.
    pub fn with_links(mut self, links: LinkSigner) -> Self {
        self.inbox = Some(links.base_url().to_owned());
        self.links = Some(links);
        self
    }

    /// The clock for links.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The message for `request` as it stands: waiting (with its progress and the
    /// links), or decided (the outcome and who decided, no buttons).
    pub fn card(&self, request: &ApprovalRequest) -> Result<Value, NotifyError> {
        let summary = request.summary();
        let action = request.action.label();
        let tier = request.verdict.tier.as_str();
        let progress = request.progress();
        let mut body = Vec::new();
        let mut actions = Vec::new();
        if request.status == Status::Pending {
            body.push(text_block(
                &format!("{}: {action} ({tier} risk)", request.headline()),
                true,
            ));
            body.push(text_block(&request.verdict.reasons.join("; "), false));
            let preview = serde_json::to_string(&summary["params_preview"]).unwrap_or_default();
            body.push(json!({"type": "FactSet", "facts": [
                {"title": "Request", "value": request.id},
                {"title": "Approvals", "value": progress.text()},
                {"title": "Params", "value": preview},
            ]}));
            if let Value::Array(pairs) = links(self.links.as_ref(), request, self.clock.now())? {
                for pair in pairs {
                    let who = pair["approver"].as_str().unwrap_or_default();
                    for (choice, title) in [("approve", "Approve"), ("reject", "Reject")] {
                        actions.push(json!({
                            "type": "Action.OpenUrl",
                            "title": format!("{title} as {who}"),
                            "url": pair[choice],
                        }));
                    }
                }
            }
            if let Some(page) = request_page(self.links.as_ref(), request)? {
                actions.push(json!({
                    "type": "Action.OpenUrl",
                    "title": "Sign in to decide",
                    "url": page,
                }));
            }
        } else {
            let by = request.decided_by();
            body.push(text_block(
                &format!("{}: {action} ({tier} risk) {}", request.id, request.status),
                true,
            ));
            body.push(json!({"type": "FactSet", "facts": [
                {"title": "Decided by", "value": by},
                {"title": "Via", "value": request.channel.as_deref().unwrap_or("-")},
                {"title": "Approvals", "value": progress.text()},
            ]}));
        }
        if let Some(inbox) = &self.inbox {
            actions
                .push(json!({"type": "Action.OpenUrl", "title": "Open the inbox", "url": inbox}));
        }
        Ok(message(body, actions))
    }

    /// Posts the request's card as it stands now: after a decision, the decided (or,
    /// under a quorum, the updated) version. Incoming webhooks cannot edit the first.
    pub async fn update(&self, request: &ApprovalRequest) -> Result<(), NotifyError> {
        let card = self.card(request)?;
        self.post(&card).await
    }

    async fn post(&self, body: &Value) -> Result<(), NotifyError> {
        let response = self
            .client
            .post(&self.url)
            .json(body)
            .send()
            .await
            .map_err(|err| http_error("teams", err))?;
        if !response.status().is_success() {
            return Err(NotifyError::Status {
                notifier: "teams",
                status: response.status().as_u16(),
            });
        }
        Ok(())
    }
}

fn text_block(text: &str, heading: bool) -> Value {
    let mut block = json!({"type": "TextBlock", "text": text, "wrap": true});
    if heading {
        block["weight"] = json!("Bolder");
        block["size"] = json!("Medium");
    }
    block
}

/// The webhook message around one Adaptive Card.
fn message(body: Vec<Value>, actions: Vec<Value>) -> Value {
    json!({
        "type": "message",
        "attachments": [{
            "contentType": TEAMS_CARD_TYPE,
            "contentUrl": null,
            "content": {
                "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
                "type": "AdaptiveCard",
                "version": TEAMS_CARD_VERSION,
                "body": body,
                "actions": actions,
            },
        }],
    })
}

#[async_trait]
impl Notifier for TeamsNotifier {
    fn name(&self) -> &str {
        "teams"
    }

    async fn notify(&self, request: &ApprovalRequest) -> Result<(), NotifyError> {
        let card = self.card(request)?;
        self.post(&card).await
    }

    async fn announce(&self, notice: &Notice) -> Result<(), NotifyError> {
        let card = message(
            vec![
                text_block(&notice.title, true),
                text_block(&notice.text, false),
            ],
            Vec::new(),
        );
        self.post(&card).await
    }
}
