//! `attest-ledger` is the record Attest keeps: a hash-chained, append-only ledger of
//! what agents did, in a format outsiders can check with a JCS library and SHA-256.
//!
//! It makes no decisions (that is `attest-policy`) and knows nothing of actions or
//! tools: callers hand it a [`Record`], and it adds `v`, `seq`, `prev` and `ts`,
//! canonicalizes, hashes, and stores.
//!
//! Beside the chain, and not part of its format, the store keeps window counts for
//! policy's budgets and rates ([`Ledger::reserve_windows`]): what ran per key within a
//! time window, checked and counted atomically across processes and hosts; idempotency
//! keys ([`Ledger::claim_key`]): a retried call with the same key is tied to the first
//! call's outcome, and runs once; recent calls by digest ([`Ledger::claim_call`]):
//! which write is in flight or ran lately, for retries and duplicate suppression; and
//! where each audit stream stands ([`Ledger::stream_cursor`]): the newest row a SIEM
//! acknowledged, under a lease so one streamer sends per sink.
//!
//! # Format v1
//!
//! Each row's body is one JSON object in RFC 8785 canonical form, stored byte for byte:
//!
//! - `"v": 1`; `"seq"`: 1, 2, 3, … with no gaps; `"prev"`: the lower-case hex SHA-256
//!   of the previous entry's body (64 zeros before seq 1); `"ts"`: RFC 3339 UTC;
//! - the [`Record`]'s fields, optional ones left out when absent.
//!
//! An action a person is asked about and answers later leaves two rows with the same
//! `action_id`: the ask (`"decision": "ask"`, `"execution": {"status": "pending"}`, no
//! `confirm`), then the outcome, whose `confirm` says who decided (`approved`, `edited`,
//! `rejected`, or `expired` with no approver) and on which channel. No field was added
//! for this: `pending` is a new value of `execution.status`.
//!
//! A write leaves an intent row before it runs (`"execution": {"status": "intent"}`, the
//! decision and any `confirm`, no `verification`), then its outcome row with the same
//! `action_id`; an intent that no later row of its action follows is an action that may
//! have run with no recorded outcome (a crash, a full disk). `intent` is a new value of
//! `execution.status`. A row written by `attest import` carries the optional
//! `"imported"` object (the source's `ts` inside); its decision and outcome fields are
//! the source's. Ledgers without either still verify and append.
//!
//! A row may also say what was touched: `"call"` (an object with any of `server` and
//! `tool` for an MCP call, `method` and `url` for an HTTP call — the URL without
//! userinfo, query string or fragment — and `function` for an SDK call), and
//! `"result_ids"` (an array of the ids a write's result returned). `target` names the
//! record with its id where the call says it (`deals/987654`, `o/r#12`).
//!
//! An intent row may carry `"idempotency_key"` (a string): the key its caller sent with
//! the call (`Idempotency-Key`, `idempotencyKey`, `idempotency_key=`). A retry with the
//! same key and the same call was given this call's outcome instead of running; the
//! key's claim and what a door replays live beside the chain, not in it
//! ([`Ledger::claim_key`]). The row of such a retry (execution `not_run`: it did not run
//! now) carries `"replay_of"` (an object: `action_id` and `seq`, the first call's outcome
//! row), whether it was given that outcome or, refused under the policy of its day, was
//! not.
//!
//! A row may carry `"agent_auth"` (a string: `token`, `jwt` or `unauthenticated`): how
//! the agent it names was authenticated, where agents are configured; absent, the
//! agent is the label the caller gave. A `confirm` may carry `"approvers"` (an array of
//! names): everyone whose approval a quorum ran on, `approver` being the one whose
//! approval met it. An outcome row may say `"confirm": {"outcome": "resolved"}`: a
//! person recorded how an intent without an outcome ended (`attest intents resolve`).
//!
//! A row may carry `"grant"` (an object): a bounded grant, a person's approval of several
//! later calls of one agent. Its `id` and `event` are always there. The grant's own row
//! (`"event": "issued"`, decision and execution `recorded`, the grant's id as its
//! `action_id`, the request's agent, system and verb, `confirm` naming who granted it)
//! adds `calls` (how many), `until` (RFC 3339 UTC), `when` (the CEL condition each call's
//! params must meet, when there is one) and `request` (the action id it was approved on);
//! a row with `"event": "revoked"` ends it; the row of each call that ran under it says
//! `"event": "used"` and `use` (1 for the first call), and its `confirm` names the grant's
//! approver on channel `grant`.
//!
//! A row's `call` may carry `"sandboxed"` (a boolean), on a coding agent's shell command
//! recorded by its hook: `true` when the command runs inside `attest sandbox` (the hook
//! rewrote the call, so the protected paths are read-only below its text), `false` when it
//! runs as the agent runs it, judged by its text alone.
//!
//! A row may carry `"sealed"` (an object): its personal fields sealed under the key of
//! the person they are about ([`Ledger::seal`]). Each such field (`target`, or a member of
//! `params_preview`) reads `"sealed"`; `fields` maps its path (`target`,
//! `params_preview.to`) to base64 of a 12-byte nonce and its ChaCha20-Poly1305 ciphertext
//! and tag (RFC 8439; the plaintext is the field's canonical JSON; the associated data is
//! the row's `action_id`, a zero byte and the path), and `subject` is the subject's blind
//! index (lower-case hex HMAC-SHA-256 under a secret kept beside the chain). The key lives
//! beside the chain too. An erasure row carries `"erasure"` (an object: `subject`, the
//! blind index; `requested_by`; `rows`, how many rows were sealed under the key): the key
//! was deleted in the same transaction. The hashed bytes never change, so an erased
//! ledger verifies as before; its fields read `"erased"` in every view.
//!
//! **The rule for additions.** A v1 body may gain fields; each new field is optional
//! (left out when absent, so rows that do not need it keep their old bytes) and
//! additive (it never changes what an existing field means). A verifier hashes the
//! stored bytes and never re-serialises them, so it ignores fields it does not know;
//! a ledger written by an older release still verifies and can be appended to, and an
//! older verifier still verifies a newer ledger. Changing an existing field's meaning,
//! or making a new field required, is a `"v": 2`. Every field added is listed here.
//!
//! The entry hash is SHA-256 over exactly those bytes. To check a ledger without this
//! crate: `attest export --format jsonl`, then for each line, SHA-256 the line's bytes
//! (without the newline) and compare with the next line's `prev`.
//!
//! A future `"v": 2` must keep `v`, `seq` and `prev` with these meanings, so a v1
//! verifier can at least walk the chain and say which rows it cannot read.
//!
//! The principal types:
//! - [`Ledger`]: the store (append, list, export, verify, copy): one SQLite file, or a
//!   tenant's chain in a PostgreSQL database (`Ledger::open` with a `postgres://` URL).
//!   Both store the same bodies, tree and checkpoints; a ledger copied between them
//!   ([`Ledger::copy_to`]) exports the same bytes and proves against the same roots.
//! - [`Filter`] and [`Counts`]: listings on indexed columns, and the counters kept
//!   with the entries.
//! - [`Archive`]: what a prune removed, still checkable and provable.
//! - [`Record`]: what the caller records about one action.
//! - [`VerifyReport`]: what verification found, first bad seq first.
//! - [`tiles`]: the ledger published as C2SP `tlog-tiles` (static files anyone can mirror),
//!   checked from those files alone, and cosigned by witnesses (`tlog-witness`).
//!
//! ```
//! use attest_ledger::{Execution, Ledger, LedgerOptions, Record};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let ledger = Ledger::open(dir.path().join("ledger.sqlite"), LedgerOptions::default())?;
//! let record = Record {
//!     action_id: "a1".into(), run_id: None, agent: Some("bot".into()), agent_auth: None, actor: None,
//!     call: None, owner: None, system: "gmail".into(), verb: "send".into(), target: None,
//!     target_class: "none".into(), source: "manual".into(), decision: "recorded".into(),
//!     tier: "high".into(), reasons: vec![], rules_fired: vec![],
//!     params_hash: "00".repeat(32), params_preview: Default::default(), result_ids: vec![], confirm: None,
//!     execution: Execution { status: "recorded".into(), result_hash: None, error_hash: None },
//!     verification: None, idempotency_key: None, replay_of: None, imported: None, shadow: None,
//!     grant: None,
//!     sealed: None,
//!     erasure: None,
//! };
//! let appended = ledger.append(&record)?;
//! assert_eq!(appended.seq, 1);
//! assert!(ledger.verify()?.is_intact());
//! # Ok(())
//! # }
//! ```

mod archive;
pub mod bundle;
mod calls;
mod canonical;
mod chain;
mod checkpoint;
mod checkpoints;
mod clock;
mod columns;
mod copy;
mod durability;
mod entry;
mod erasure;
mod error;
mod group;
mod idempotency;
mod intents;
mod jcs;
mod keys;
mod ledger;
mod merkle;
mod options;
mod pg;
mod pkcs11;
// The shared test helpers' skip reporting, for the fault-injection store's PostgreSQL half.
#[cfg(test)]
#[path = "../tests/it/peers.rs"]
mod peers;
mod private;
mod proofs;
mod prune;
mod query;
mod row;
mod source;
mod sqlite;
mod store;
mod stream;
pub mod tiles;
mod verify;
mod walk;
mod windows;

pub use archive::Archive;
pub use calls::{CallCheck, CallClaim, CallStep, HeldCall};
pub use canonical::{canonical_bytes, entry_hash, from_hex, to_hex, value_hash, Hash, GENESIS};
pub use checkpoint::{
    open_checkpoint, open_checkpoint_signed, open_note, read_checkpoint_unverified,
    sign_checkpoint, split_notes, CheckpointBody, CheckpointError, MAX_NOTE_BYTES,
};
pub use checkpoints::{StoredCheckpoint, VerifiedCheckpoint};
pub use clock::{format_ts, Clock, SystemClock};
pub use durability::Durability;
pub use entry::{
    Call, Confirm, Erasure, Execution, Grant, Imported, Record, ReplayOf, Sealed, Shadow,
    Verification, FORMAT_VERSION,
};
pub use erasure::{Erased, Revealer, SubjectKey, ERASED, SEALED};
pub use error::LedgerError;
pub use group::MAX_GROUP;
pub use idempotency::{KeyClaim, KeyId, KeyOutcome, KeyScope, KeyState, KeysPurged, Principal};
pub use intents::{OpenIntent, OpenIntents, INTENT};
pub use jcs::CanonicalObject;
pub use keys::{SigningKey, VerifierKey};
pub use ledger::Ledger;
pub use merkle::{leaf_hash, CompactRange, EMPTY_ROOT};
pub use options::LedgerOptions;
pub use pg::{check_tenant, off_runtime, PgConnection, PgDatabase};
pub use pkcs11::{generate_token_key, TokenKeyUri};
pub use proofs::{ConsistencyProof, InclusionProof, ProofError};
pub use prune::PruneReport;
pub use query::{Counts, Filter};
pub use row::{Appended, RowSummary, StoredRow};
pub use sqlite::{switch_to_wal, SCHEMA_VERSION};
pub use stream::StreamCursor;
pub use verify::{
    ChainChecker, CheckpointSummary, Problem, ProblemKind, VerifyOptions, VerifyReport,
};
pub use windows::{Reservation, WindowClaim};
