//! One approval request: the action a person is asked about, and how it was decided.

use std::fmt;
use std::time::SystemTime;

use attest_ledger::{format_ts, to_hex, CanonicalObject};
use attest_policy::{params_preview, redact_url_credentials, Action, Verdict};
use serde::{Serialize, Serializer};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::ApprovalError;
use crate::http_body::{is_form, RAW_BODY_KEY};

/// Where a request stands. `approved` and `edited` may run (once); the others never run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Status {
    /// Nobody has decided yet.
    Pending,
    /// A person approved the action as asked.
    Approved,
    /// A person approved the action with edits to its params.
    Edited,
    /// A person rejected it.
    Rejected,
    /// Nobody decided in time; counted as a rejection, recorded as `expired`.
    Expired,
    /// The caller went away while it waited (a closed connection, an MCP
    /// `notifications/cancelled`): nobody needs the answer any more.
    Cancelled,
}

impl Status {
    /// The word stored and recorded (`pending`, `approved`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Approved => "approved",
            Status::Edited => "edited",
            Status::Rejected => "rejected",
            Status::Expired => "expired",
            Status::Cancelled => "cancelled",
        }
    }

    pub(crate) fn parse(word: &str) -> Option<Status> {
        Some(match word {
            "pending" => Status::Pending,
            "approved" => Status::Approved,
            "edited" => Status::Edited,
            "rejected" => Status::Rejected,
            "expired" => Status::Expired,
            "cancelled" => Status::Cancelled,
            _ => return None,
        })
    }

    /// True for `approved` and `edited`: the action may run.
    pub fn allows_running(self) -> bool {
        matches!(self, Status::Approved | Status::Edited)
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stored approval request.
///
/// It holds the action's raw params (resume needs them to run the action), so it lives
/// only in the approval store, never in the ledger.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApprovalRequest {
    /// The request's id (the action's id).
    pub id: String,
    /// The action as it was asked about, params included.
    pub action: Action,
    /// Lower-case hex SHA-256 of the canonical action; see [`action_digest`].
    pub digest: String,
    /// What policy said: reasons, tier, approvers, hold.
    pub verdict: Verdict,
    /// When it was asked.
    #[serde(serialize_with = "rfc3339")]
    pub requested_at: SystemTime,
    /// When it stops waiting and counts as rejected.
    #[serde(serialize_with = "rfc3339")]
    pub expires_at: SystemTime,
    /// When it was decided.
    #[serde(serialize_with = "rfc3339_opt")]
    pub decided_at: Option<SystemTime>,
    /// Where it stands.
    pub status: Status,
    /// Who decided.
    pub approver: Option<String>,
    /// Where they decided (`cli`, `inbox`, `slack`, `link`, …).
    pub channel: Option<String>,
    /// The approver's edits: a JSON merge patch (RFC 7396) on the params.
    pub edits: Option<Value>,
    /// The approver's note.
    pub note: Option<String>,
    /// True once the approved action has run (an approval is used once).
    pub consumed: bool,
    /// When an approval stops being usable (set once approved): a resume after it is
    /// refused and recorded as `expired`.
    #[serde(serialize_with = "rfc3339_opt")]
    pub use_by: Option<SystemTime>,
    /// True once the params were deleted from the store (used, rejected or expired).
    pub purged: bool,
    /// The last notifier failure, if any (the request itself is never lost to one).
    pub notify_error: Option<String>,
    /// Every decision made on it, oldest first (a quorum needs several).
    pub votes: Vec<Vote>,
    /// When the approvers were reminded (the rule's `remind_after`).
    #[serde(serialize_with = "rfc3339_opt")]
    pub reminded_at: Option<SystemTime>,
    /// When it was escalated to the rule's `escalate_to`, who may decide it since.
    #[serde(serialize_with = "rfc3339_opt")]
    pub escalated_at: Option<SystemTime>,
    /// Everyone whose approval it ran on, once approved (all of a quorum).
    pub approved_by: Vec<String>,
    /// Digest of the action as approved (edits applied), set with the decision.
    #[serde(skip)]
    pub(crate) approved_digest: Option<String>,
    /// The ledger row of the ask, when the request went pending: seq, hash, ts.
    #[serde(skip)]
    pub(crate) ask_row: Option<(u64, String, String)>,
    /// The ledger row of the outcome, when a rejection or expiry was recorded.
    #[serde(skip)]
    pub(crate) outcome_row: Option<(u64, String, String)>,
}

impl ApprovalRequest {
    /// Whether `approver` may decide this request: anyone when the rule names nobody,
    /// else only a listed person or a member of a listed group; once escalated, the
    /// people it was escalated to as well.
    pub fn may_decide(&self, approver: &str) -> bool {
        may_decide(&self.verdict, approver) || self.escalated_to(approver)
    }

    fn escalated_to(&self, approver: &str) -> bool {
        self.escalated_at.is_some()
            && self
                .verdict
                .escalation()
                .escalate_members
                .iter()
                .any(|person| person.eq_ignore_ascii_case(approver.trim()))
    }

    /// Whether a one-click link alone may not decide it: under a quorum, or when it has
    /// a requester whom separation of duties excludes. Whoever reads a notice could
    /// otherwise open every approver's link (meet a quorum alone, or approve their own
    /// call in another's name), so such a request's notices carry a link to the request
    /// only, and a link counts only when its approver is signed in.
    pub fn needs_signed_in_approvers(&self) -> bool {
        self.verdict.quorum.is_some() || self.own_people().next().is_some()
    }

    /// The people whose own call it is: its actor, the owner of the connection it uses,
    /// and the person its proven agent acts for.
    fn own_people(&self) -> impl Iterator<Item = &str> {
        [
            &self.action.actor,
            &self.action.owner,
            &self.action.extra.agent_owner,
        ]
        .into_iter()
        .flatten()
        .map(|person| person.trim())
        .filter(|person| !person.is_empty())
    }

    /// The first words of a message about it: "Approval needed", or that it is a
    /// reminder or an escalation.
    pub fn headline(&self) -> &'static str {
        if self.escalated_at.is_some() {
            super::FollowUp::Escalation.headline()
        } else if self.reminded_at.is_some() {
            super::FollowUp::Reminder.headline()
        } else {
            "Approval needed"
        }
    }

    /// Whether `person` asked for the action (its actor, or the person its proven agent
    /// acts for) or owns the connection it uses: they never approve it (under a quorum,
    /// never count at all). The agent's owner comes from its credential, so a caller
    /// that names nobody (or someone else) in a header still cannot approve its own
    /// agent's call.
    pub fn is_own(&self, person: &str) -> bool {
        self.own_people()
            .any(|own| own.eq_ignore_ascii_case(person.trim()))
    }

    /// Who decided, for a message: everyone a quorum's approval was given by, else the
    /// one approver (or "nobody").
    pub fn decided_by(&self) -> String {
        match self.approved_by.as_slice() {
            [_, _, ..] => self.approved_by.join(", "),
            _ => self.approver.clone().unwrap_or_else(|| "nobody".to_owned()),
        }
    }

    /// How far it is from being approved: approvals counted and needed, rejections, and
    /// whom it waits for.
    pub fn progress(&self) -> Progress {
        let approving: Vec<String> = self
            .votes
            .iter()
            .filter(|vote| {
                vote.approve && !(self.verdict.quorum.is_some() && self.is_own(&vote.approver))
            })
            .map(|vote| vote.approver.clone())
            .collect();
        let rejections = self.votes.iter().filter(|vote| !vote.approve).count();
        let rejections = u32::try_from(rejections).unwrap_or(u32::MAX);
        let escalation = self.verdict.escalation();
        let wildcards: &[String] = if self.escalated_at.is_some() {
            &escalation.escalate_members
        } else {
            &[]
        };
        let (have, need) = match &self.verdict.quorum {
            Some(quorum) => (quorum.have(&approving, wildcards), quorum.need),
            None => (
                u32::from(self.status.allows_running() || !approving.is_empty()),
                1,
            ),
        };
        let mut waiting_for = Vec::new();
        if have < need && self.status == Status::Pending {
            match &self.verdict.quorum {
                Some(quorum) if !quorum.each.is_empty() => {
                    waiting_for = quorum.waiting_for(&approving, wildcards);
                }
                _ => waiting_for.clone_from(&self.verdict.approvers),
            }
            if self.escalated_at.is_some() {
                for person in &escalation.escalate_to {
                    if !waiting_for.iter().any(|w| w.eq_ignore_ascii_case(person)) {
                        waiting_for.push(person.clone());
                    }
                }
            }
        }
        let approved_by = if self.approved_by.is_empty() {
            approving
        } else {
            self.approved_by.clone()
        };
        Progress {
            have,
            need,
            rejections,
            approved_by,
            waiting_for,
        }
    }

    /// The action that runs if approved: the asked action with the edits applied.
    pub fn effective_action(&self) -> Result<Action, ApprovalError> {
        match &self.edits {
            Some(edits) => apply_edits(&self.id, &self.action, edits),
            None => Ok(self.action.clone()),
        }
    }

    /// What a notifier or the inbox shows: everything but the raw params, which are
    /// replaced by their allow-listed preview.
    pub fn summary(&self) -> Value {
        let people = if self.verdict.approver_members.is_empty() {
            &self.verdict.approvers
        } else {
            &self.verdict.approver_members
        };
        json!({
            "id": self.id,
            "system": self.action.system,
            "verb": self.action.verb.as_str(),
            "target": self.action.target,
            "agent": self.action.agent,
            "actor": self.action.actor,
            "tier": self.verdict.tier.as_str(),
            "reasons": self.verdict.reasons,
            "rules_fired": self.verdict.rules_fired,
            "approvers": self.verdict.approvers,
            "approver_members": people,
            "hold": self.verdict.hold,
            "params_preview": params_preview(&self.action.params),
            // Where the call goes: method and URL (the gateway), server and tool (MCP).
            "method": self.action.extra.method,
            "url": self.action.extra.url.as_deref().map(redact_url_credentials),
            "server": self.action.extra.server,
            "tool": self.action.extra.tool_name,
            "digest": self.digest,
            "status": self.status.as_str(),
            "requested_at": format_ts(self.requested_at),
            "expires_at": format_ts(self.expires_at),
            "decided_at": self.decided_at.map(format_ts),
            "approver": self.approver,
            "channel": self.channel,
            "edits": self.edits,
            "note": self.note,
            "consumed": self.consumed,
            "use_by": self.use_by.map(format_ts),
            "approvals": self.progress().to_json(),
            "decisions": self.votes,
            "reminded_at": self.reminded_at.map(format_ts),
            "escalated_at": self.escalated_at.map(format_ts),
            "escalate_to": self.verdict.escalation().escalate_to,
        })
    }
}

impl ApprovalRequest {
    /// What the person deciding sees: [`ApprovalRequest::summary`] and the params, with
    /// the value under any key that names a credential (`password`, `token`, `secret`,
    /// `key`, `authorization`, `cookie`, `credential`, `signature`) replaced by its
    /// SHA-256 fingerprint: they decide on what the action does, not on its secrets.
    ///
    /// A held form body is shown as its fields; its raw text too, unless a field is a
    /// credential (the raw text would show it).
    pub fn approver_view(&self) -> Value {
        let mut view = self.summary();
        let mut params = mask_secrets(&self.action.params);
        let masked_field = self.action.params.as_object().is_some_and(|fields| {
            fields.keys().any(|key| {
                let lower = key.to_ascii_lowercase();
                SECRET_WORDS.iter().any(|word| lower.contains(word))
            })
        });
        if let Some(raw) = params.get_mut(RAW_BODY_KEY) {
            if masked_field && is_form(raw["content_type"].as_str()) {
                raw["text"] = json!("(withheld: a field above is a credential)");
            }
        }
        view["params"] = params;
        view
    }
}

/// One person's decision on a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Vote {
    /// Who (the registered approver's name).
    pub approver: String,
    /// Approve (`true`) or reject.
    pub approve: bool,
    /// Where (`cli`, `inbox`, `slack`, `teams`, `link`, …).
    pub channel: String,
    /// Their note.
    pub note: Option<String>,
    /// When.
    #[serde(serialize_with = "rfc3339")]
    pub at: SystemTime,
}

/// How far a request is from being approved ([`ApprovalRequest::progress`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// Approvals that count.
    pub have: u32,
    /// Approvals needed (1 without a quorum).
    pub need: u32,
    /// Rejections so far.
    pub rejections: u32,
    /// Who approved.
    pub approved_by: Vec<String>,
    /// The groups or people it waits for, while it waits.
    pub waiting_for: Vec<String>,
}

impl Progress {
    /// "1 of 2 approvals, waiting for finance".
    pub fn text(&self) -> String {
        let mut text = format!(
            "{} of {} approval{}",
            self.have,
            self.need,
            if self.need == 1 { "" } else { "s" }
        );
        if !self.waiting_for.is_empty() {
            text.push_str(", waiting for ");
            text.push_str(&self.waiting_for.join(", "));
        }
        text
    }

    /// `{have, need, rejections, approved_by, waiting_for, text}`, as the doors show it.
    pub fn to_json(&self) -> Value {
        json!({
            "have": self.have,
            "need": self.need,
            "rejections": self.rejections,
            "approved_by": self.approved_by,
            "waiting_for": self.waiting_for,
            "text": self.text(),
        })
    }
}

/// Words that mark a param as a credential.
const SECRET_WORDS: [&str; 9] = [
    "password",
    "passwd",
    "token",
    "secret",
    "key",
    "authorization",
    "cookie",
    "credential",
    "signature",
];

fn mask_secrets(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, inner)| {
                    let lower = key.to_ascii_lowercase();
                    let masked = if SECRET_WORDS.iter().any(|word| lower.contains(word)) {
                        let bytes = serde_json::to_vec(inner).unwrap_or_default();
                        json!(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
                    } else {
                        mask_secrets(inner)
                    };
                    (key.clone(), masked)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(mask_secrets).collect()),
        other => other.clone(),
    }
}

/// A person's answer to a stored request.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Approve (`true`) or reject.
    pub approve: bool,
    /// Who answers.
    pub approver: String,
    /// Where (`cli`, `inbox`, `slack`, `link`, `console`, …).
    pub channel: String,
    /// Edits to the params (a JSON merge patch object); only with an approval.
    pub edits: Option<Value>,
    /// A note.
    pub note: Option<String>,
    /// With an approval: approve the next calls like it too, within these bounds
    /// ([`super::GrantSpec`]).
    pub grant: Option<super::GrantSpec>,
}

impl Answer {
    /// An approval as `approver`, given on `channel`.
    pub fn approve(approver: impl Into<String>, channel: impl Into<String>) -> Self {
        Answer {
            approve: true,
            approver: approver.into(),
            channel: channel.into(),
            edits: None,
            note: None,
            grant: None,
        }
    }

    /// A rejection as `approver`, given on `channel`.
    pub fn reject(approver: impl Into<String>, channel: impl Into<String>) -> Self {
        Answer {
            approve: false,
            ..Answer::approve(approver, channel)
        }
    }

    /// Adds edits (a JSON merge patch on the params).
    pub fn with_edits(mut self, edits: Value) -> Self {
        self.edits = Some(edits);
        self
    }

    /// Adds a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    /// Approves the next calls like this one too, within `spec`.
    pub fn with_grant(mut self, spec: super::GrantSpec) -> Self {
        self.grant = Some(spec);
        self
    }
}

/// The action digest: lower-case hex SHA-256 of the RFC 8785 canonical form of
/// `{"system","verb","target","params","agent","actor","server","tool","method","url"}`
/// (absent fields as `null`): the whole call, where it goes (the MCP server and tool, or
/// the HTTP method and URL) as well as what it carries.
///
/// An approval is bound to this digest: an action that differs in any of these fields
/// cannot use it.
pub fn action_digest(action: &Action) -> Result<String, ApprovalError> {
    // Written member by member in RFC 8785 order: this runs on every write action, and
    // going through `json!` copied the params and sorted the names each time.
    // `the_digest_is_the_canonical_form_of_the_documented_object` holds it to the library.
    let mut canonical = CanonicalObject::with_capacity(256);
    canonical.str_or_null("actor", action.actor.as_deref());
    canonical.str_or_null("agent", action.agent.as_deref());
    canonical.str_or_null("method", action.extra.method.as_deref());
    canonical
        .value("params", &action.params)
        .map_err(ApprovalError::Canonical)?;
    canonical.str_or_null("server", action.extra.server.as_deref());
    canonical.str("system", &action.system);
    canonical.str_or_null("target", action.target.as_deref());
    canonical.str_or_null("tool", action.extra.tool_name.as_deref());
    canonical.str_or_null("url", action.extra.url.as_deref());
    canonical.str("verb", action.verb.as_str());
    Ok(to_hex(&Sha256::digest(canonical.finish()).into()))
}

/// Whether `approver` may decide on an action policy judged as `verdict`.
pub fn may_decide(verdict: &Verdict, approver: &str) -> bool {
    if verdict.approvers.is_empty() && verdict.approver_members.is_empty() {
        return true;
    }
    // `approver_members` has the groups resolved; a group's own name is not a person.
    let listed = if verdict.approver_members.is_empty() {
        &verdict.approvers
    } else {
        &verdict.approver_members
    };
    listed
        .iter()
        .any(|person| person.eq_ignore_ascii_case(approver.trim()))
}

/// Applies `edits`, a JSON merge patch (RFC 7396) object, to the action's params.
pub fn apply_edits(id: &str, action: &Action, edits: &Value) -> Result<Action, ApprovalError> {
    let Value::Object(patch) = edits else {
        return Err(ApprovalError::BadEdits {
            id: id.to_owned(),
            detail: "edits must be a JSON object (a merge patch on the params)".to_owned(),
        });
    };
    let mut edited = action.clone();
    if !edited.params.is_object() {
        edited.params = Value::Object(Map::new());
    }
    merge_patch(&mut edited.params, patch);
    Ok(edited)
}

/// RFC 7396 section 2: `null` removes a member, objects merge, anything else replaces.
fn merge_patch(target: &mut Value, patch: &Map<String, Value>) {
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(object) = target {
        for (key, value) in patch {
            match value {
                Value::Null => {
                    object.remove(key);
                }
                Value::Object(inner) => {
                    merge_patch(object.entry(key.clone()).or_insert(Value::Null), inner);
                }
                other => {
                    object.insert(key.clone(), other.clone());
                }
            }
        }
    }
}

pub(super) fn rfc3339<S: Serializer>(time: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_ts(*time))
}

pub(super) fn rfc3339_opt<S: Serializer>(
    time: &Option<SystemTime>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match time {
        Some(time) => s.serialize_str(&format_ts(*time)),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use attest_policy::{Decision, Risk, Verb};
    use proptest::strategy::Strategy;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_digest_ignores_key_order_and_covers_every_bound_field() {
        let a = Action::new("gmail", Verb::Send).with_params(json!({"to": "a@x.com", "n": 1}));
        let b = Action::new("gmail", Verb::Send).with_params(json!({"n": 1, "to": "a@x.com"}));
        assert_eq!(action_digest(&a).unwrap(), action_digest(&b).unwrap());
        for changed in [
            a.clone().with_target("t"),
            a.clone().with_agent("bot"),
            a.clone().with_actor("ann"),
            a.clone().with_params(json!({"to": "b@x.com", "n": 1})),
            Action::new("gmail", Verb::Reply).with_params(a.params.clone()),
            Action::new("outlook", Verb::Send).with_params(a.params.clone()),
            at(&a, |extra| extra.server = Some("github-fork".into())),
            at(&a, |extra| extra.tool_name = Some("delete_repo".into())),
            at(&a, |extra| extra.method = Some("DELETE".into())),
            at(&a, |extra| {
                extra.url = Some("https://api.github.com/repos/a/b".into())
            }),
        ] {
            assert_ne!(action_digest(&a).unwrap(), action_digest(&changed).unwrap());
        }
    }

    proptest::proptest! {
        // The digest is written by hand for speed; the library's canonical form of the
        // documented object is what it must equal, byte for byte.
        #[test]
        fn the_digest_is_the_canonical_form_of_the_documented_object(
            texts in proptest::collection::vec(
                proptest::option::of("[a-z\"\\\\\u{0}-\u{1f}\u{e000}\u{10000}é/ ]{0,6}"), 8),
            params in proptest::collection::btree_map(
                "[a-zA-Z\u{e000}\u{10000}_]{0,4}",
                proptest::prop_oneof![
                    proptest::num::i64::ANY.prop_map(|n| json!(n)),
                    proptest::num::f64::NORMAL.prop_map(|n| json!(n)),
                    "[ -~\u{7f}-\u{3ff}]{0,8}".prop_map(|t| json!(t)),
                    proptest::bool::ANY.prop_map(|b| json!([b, null, {"z": 1, "a": [2.5]}])),
                ],
                0..6,
            ),
        ) {
            let mut action = Action::new(texts[0].clone().unwrap_or_default(), Verb::Send)
                .with_params(Value::Object(params.into_iter().collect()));
            action.target = texts[1].clone();
            action.agent = texts[2].clone();
            action.actor = texts[3].clone();
            action.extra.server = texts[4].clone();
            action.extra.tool_name = texts[5].clone();
            action.extra.method = texts[6].clone();
            action.extra.url = texts[7].clone();
            let library = attest_ledger::canonical_bytes(&json!({
                "system": action.system,
                "verb": action.verb.as_str(),
                "target": action.target,
                "params": action.params,
                "agent": action.agent,
                "actor": action.actor,
                "server": action.extra.server,
                "tool": action.extra.tool_name,
                "method": action.extra.method,
                "url": action.extra.url,
            }))
            .unwrap();
            proptest::prop_assert_eq!(
                action_digest(&action).unwrap(),
                hex::encode(Sha256::digest(library))
            );
        }
    }

    #[test]
    fn the_approver_view_fingerprints_credentials() {
        let action = Action::new("crm", Verb::Update).with_params(json!({
            "name": "Ann", "api_key": "sk_live_1", "nested": {"Password": "hunter2"}, "list": [{"token": "t"}]
        }));
        let masked = mask_secrets(&action.params);
        assert_eq!(masked["name"], "Ann");
        let text = masked.to_string();
        for secret in ["sk_live_1", "hunter2", "\"t\""] {
            assert!(!text.contains(secret), "{text}");
        }
        assert!(masked["api_key"].as_str().unwrap().starts_with("sha256:"));
    }

    #[test]
    fn a_held_form_with_a_credential_field_is_shown_without_its_raw_text() {
        let params = crate::http_body::body_params(
            Some("application/x-www-form-urlencoded"),
            b"user=ann&password=hunter2",
        );
        let request = ApprovalRequest {
            id: "r".into(),
            action: Action::new("app", Verb::Create).with_params(params),
            digest: String::new(),
            verdict: Verdict::new(Decision::Ask, Risk::High, "r", "why"),
            requested_at: SystemTime::UNIX_EPOCH,
            expires_at: SystemTime::UNIX_EPOCH,
            decided_at: None,
            status: Status::Pending,
            approver: None,
            channel: None,
            edits: None,
            note: None,
            consumed: false,
            use_by: None,
            purged: false,
            notify_error: None,
            votes: Vec::new(),
            reminded_at: None,
            escalated_at: None,
            approved_by: Vec::new(),
            approved_digest: None,
            ask_row: None,
            outcome_row: None,
        };
        let view = request.approver_view().to_string();
        assert!(view.contains("ann") && !view.contains("hunter2"), "{view}");
    }

    fn at(action: &Action, change: impl FnOnce(&mut attest_policy::Extra)) -> Action {
        let mut moved = action.clone();
        change(&mut moved.extra);
        moved
    }

    #[test]
    fn edits_are_a_merge_patch() {
        let a = Action::new("crm", Verb::Update)
            .with_params(json!({"a": 1, "b": {"c": 2, "d": 3}, "e": 4}));
        let edited = apply_edits("x", &a, &json!({"a": 9, "b": {"c": null}, "e": null})).unwrap();
        assert_eq!(edited.params, json!({"a": 9, "b": {"d": 3}}));
        assert!(apply_edits("x", &a, &json!([1])).is_err());
    }

    #[test]
    fn only_listed_approvers_or_members_may_decide() {
        let mut verdict = Verdict::new(Decision::Ask, Risk::High, "r", "why");
        assert!(may_decide(&verdict, "anyone"));
        verdict.approvers = vec!["finance".into()];
        verdict.approver_members = vec!["ann@acme.com".into()];
        assert!(may_decide(&verdict, "Ann@acme.com"));
        assert!(!may_decide(&verdict, "bob@acme.com"));
        assert!(!may_decide(&verdict, "finance"));
    }
}
