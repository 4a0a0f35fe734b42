//! The ledger entry, format v1: what one row's canonical body holds.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// What the caller records about one action; the ledger adds `v`, `seq`, `prev` and `ts`.
///
/// Raw params and results never appear here: only their SHA-256 and an allow-listed
/// preview. Optional fields are left out of the body when absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The action's unique id.
    pub action_id: String,
    /// The agent run the action belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The agent that asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// How `agent` was proven: `token` (a per-agent token), `jwt` (a token from the
    /// organisation's identity provider) or `unauthenticated` (none was given, and the
    /// door records such calls). Absent: the door has no agents configured, and the
    /// agent is whatever the caller named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_auth: Option<String>,
    /// The person the agent acts for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    /// The call as the surface saw it: MCP server and tool, HTTP method and URL
    /// (without query string or userinfo), or SDK path or function name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<Call>,
    /// The person whose connection was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The system acted on.
    pub system: String,
    /// The verb.
    pub verb: String,
    /// What was acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// `internal`, `known`, `external` or `none`.
    pub target_class: String,
    /// How system and verb were found (`manual`, `mcp`, `url`, `sdk`, `heuristic`).
    pub source: String,
    /// `act`, `ask`, `refuse` or `recorded`.
    pub decision: String,
    /// The risk tier.
    pub tier: String,
    /// Why, one line per rule that spoke.
    pub reasons: Vec<String>,
    /// The rules that fired, in order.
    pub rules_fired: Vec<String>,
    /// Lower-case hex SHA-256 of the canonical params.
    pub params_hash: String,
    /// Allow-listed, truncated params.
    pub params_preview: Map<String, Value>,
    /// The ids the result returned (the created or changed records), for a write that
    /// ran; fingerprints of nothing, just the ids as the vendor gave them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub result_ids: Vec<String>,
    /// The human decision, when one was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<Confirm>,
    /// Whether and how the action ran.
    pub execution: Execution,
    /// How the outcome was checked; absent when the action did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification: Option<Verification>,
    /// The idempotency key the caller sent with the call (on its intent row): a retry
    /// with the same key and the same call is given this call's outcome instead of
    /// running again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Present on the row of a retry that carried the idempotency key of a call that
    /// ran: that call, whose response the retry was given (or, refused under today's
    /// policy, was not). The retry itself did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<ReplayOf>,
    /// Present when the row was imported (`attest import`): the action happened
    /// elsewhere, and its decision, confirm, execution and verification are what the
    /// source says, not what Attest decided or checked. The row's own `ts` is when it
    /// was appended; the source's time is here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported: Option<Imported>,
    /// Present when the action ran in shadow mode: what policy decided, which was not
    /// enforced. The row's own `decision` is `act` (it ran); a shadow row is neither an
    /// approval nor a refusal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<Shadow>,
    /// Present on a row that issues or revokes a bounded grant (a person's approval of
    /// several later calls), and on the row of each call that ran under one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Grant>,
    /// Present when personal fields of this row are sealed under its subject's key
    /// (see [`crate::Ledger::seal`]): each such field reads `"sealed"` in the body, its
    /// value is here as ciphertext. Erasing the subject destroys the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<Sealed>,
    /// Present on an erasure row ([`crate::Ledger::erase`]): whose key was destroyed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erasure: Option<Erasure>,
}

/// A row's personal fields, sealed under one subject's key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    /// Each sealed field by its path (`target`, `params_preview.to`): base64 of the
    /// 12-byte nonce followed by the ChaCha20-Poly1305 ciphertext and tag of the field's
    /// canonical JSON, with `action_id`, a zero byte and the path as associated data.
    pub fields: std::collections::BTreeMap<String, String>,
    /// The subject's blind index: lower-case hex HMAC-SHA-256 of the subject under a
    /// secret kept beside the ledger.
    pub subject: String,
}

/// What an erasure row says: a subject's key was destroyed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Erasure {
    /// Who asked for it.
    pub requested_by: String,
    /// How many rows held fields sealed under the key.
    pub rows: u64,
    /// The subject's blind index (as in [`Sealed::subject`]).
    pub subject: String,
}

/// The call as the surface that governed it saw it. Every field is optional: an MCP
/// call names `server` and `tool`, an HTTP call `method` and `url`, an SDK call
/// `function`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// The SDK path or function name (`stripe.Refund.create`, `send_email`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// The HTTP method (`POST`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The MCP server's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The MCP tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The HTTP URL, without userinfo, query string or fragment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A coding agent's shell command: whether it runs inside `attest sandbox` (true), or
    /// as the agent runs it, judged by its text alone (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandboxed: Option<bool>,
}

impl Call {
    /// Whether no field is set.
    pub fn is_empty(&self) -> bool {
        self == &Call::default()
    }
}

/// The first call an idempotent retry was tied to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayOf {
    /// Its action id.
    pub action_id: String,
    /// Its outcome row.
    pub seq: u64,
}

/// Where an imported row's action came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Imported {
    /// When the action happened, as the source says (RFC 3339), if it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts: Option<String>,
}

/// The verdict policy gave a call that ran in shadow mode, unenforced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shadow {
    /// `ask` or `refuse`: what would have happened.
    pub decision: String,
    /// Policy's reasons, one line per rule that spoke.
    pub reasons: Vec<String>,
    /// The rules that fired, in order.
    pub rules_fired: Vec<String>,
}

/// A bounded grant, as a row names it: its own row (`issued`, `revoked`) or a call that
/// used it (`used`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The grant's id.
    pub id: String,
    /// `issued`, `revoked` or `used`.
    pub event: String,
    /// On `issued`: how many calls it covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    /// On `issued`: when it ends (RFC 3339 UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// On `issued`: the condition each call's params must meet (a CEL expression).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// On `issued`: the action id of the request it was approved on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// On `used`: which of its calls this was (1 for the first).
    #[serde(default, rename = "use", skip_serializing_if = "Option::is_none")]
    pub number: Option<u64>,
}

/// A person's answer to an `ask`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confirm {
    /// `approved`, `rejected`, `edited` or `expired`.
    pub outcome: String,
    /// Who answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approver: Option<String>,
    /// Where they answered (`auto`, `console`, `inbox`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Their note.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Everyone whose approval it ran on, when a quorum approved it (`approver` is the
    /// one whose approval met it). Absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
}

/// Whether the action ran, and a hash of what it returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Execution {
    /// `ok`, `failed`, `not_run`, `recorded`, `pending` (a person has been asked and
    /// has not answered yet; a later row with the same `action_id` records the outcome),
    /// or `intent` (cleared to run and recorded before the tool was called; a later row
    /// with the same `action_id` records the outcome).
    pub status: String,
    /// Lower-case hex SHA-256 of the canonical result, when it ran and returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_hash: Option<String>,
    /// Lower-case hex SHA-256 of the error message, when it failed. The message itself
    /// stays out: tools put tokens and bodies in their errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_hash: Option<String>,
}

/// How the outcome was checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    /// `verified`, `verified-custom`, `acknowledged`, `attested-only` or `unverified`.
    pub level: String,
    /// `read-back:<driver>`, `custom`, `ack` or `none`.
    pub method: String,
    /// Whether the check matched the intent, when a check ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<bool>,
    /// Ids and per-field results; never bodies or secrets.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub evidence: Map<String, Value>,
}

/// A whole entry as it is canonicalized and hashed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Entry<'a> {
    pub(crate) v: u32,
    pub(crate) seq: u64,
    pub(crate) prev: &'a str,
    pub(crate) ts: &'a str,
    #[serde(flatten)]
    pub(crate) record: &'a Record,
}

/// The fields verify reads back out of a stored body; the rest is covered by the hash.
#[derive(Debug, Deserialize)]
pub(crate) struct EntryView<'a> {
    pub(crate) v: u32,
    pub(crate) seq: u64,
    #[serde(borrow)]
    pub(crate) prev: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    pub(crate) ts: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    pub(crate) system: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    pub(crate) verb: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    pub(crate) agent: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) decision: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    pub(crate) verification: Option<LevelView<'a>>,
    #[serde(borrow, default)]
    pub(crate) run_id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    pub(crate) action_id: Option<std::borrow::Cow<'a, str>>,
    /// Read as any value: only whether its `status` is an intent's matters here.
    #[serde(default)]
    pub(crate) execution: Option<serde_json::Value>,
}

/// The one field of `verification` that is copied to a column.
#[derive(Debug, Deserialize)]
pub(crate) struct LevelView<'a> {
    #[serde(borrow)]
    pub(crate) level: std::borrow::Cow<'a, str>,
}
