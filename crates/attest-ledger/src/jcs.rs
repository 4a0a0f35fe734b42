//! A fast, exact RFC 8785 writer for what the ledger canonicalizes on every append: the
//! entry (its fixed keys written in sorted order by hand) and free-form JSON values
//! (previews, evidence, params and results to be hashed).
//!
//! The generic serializer of `serde_json_canonicalizer` goes through serde with a
//! buffer per key and a sort per object (~320 allocations for an entry); this writes
//! straight into one buffer. The library stays the oracle: the property tests in
//! `tests` require byte equality with it over generated entries and values, and
//! everything this writer does not handle itself (non-integral or very large numbers)
//! is handed to the library.
//!
//! RFC 8785 §3.2.2.2 (strings): only `"` and `\` and the C0 controls are escaped,
//! `\b \t \n \f \r` by name and the others as `\u00xx` in lower case; everything else is
//! written as UTF-8. §3.2.2.3 (numbers): ECMAScript's `Number.prototype.toString`,
//! which for an integer of magnitude at most 2^53 is its decimal digits. §3.2.3
//! (objects): members sorted by the UTF-16 code units of their names.

use serde_json::{Map, Number, Value};

use crate::entry::{
    Call, Confirm, Entry, Erasure, Execution, Grant, Imported, Sealed, Shadow, Verification,
};
use crate::LedgerError;

/// The largest integer every step of the ES6 number path keeps exact (2^53).
const EXACT_INTEGER: u64 = 1 << 53;

/// Appends the canonical bytes of `entry` to `out`.
///
/// The keys below are in RFC 8785 order (all ASCII, so byte order is UTF-16 order);
/// `canonical_entry_matches_the_library` keeps it honest.
pub(crate) fn write_entry(out: &mut Vec<u8>, entry: &Entry<'_>) -> Result<(), LedgerError> {
    let record = entry.record;
    let mut obj = Object::open(out);
    obj.str(out, "action_id", &record.action_id);
    obj.opt_str(out, "actor", record.actor.as_deref());
    obj.opt_str(out, "agent", record.agent.as_deref());
    obj.opt_str(out, "agent_auth", record.agent_auth.as_deref());
    if let Some(call) = &record.call {
        obj.key(out, "call");
        write_call(out, call);
    }
    if let Some(confirm) = &record.confirm {
        obj.key(out, "confirm");
        write_confirm(out, confirm);
    }
    obj.str(out, "decision", &record.decision);
    if let Some(erasure) = &record.erasure {
        obj.key(out, "erasure");
        write_erasure(out, erasure)?;
    }
    obj.key(out, "execution");
    write_execution(out, &record.execution);
    if let Some(grant) = &record.grant {
        obj.key(out, "grant");
        write_grant(out, grant)?;
    }
    obj.opt_str(out, "idempotency_key", record.idempotency_key.as_deref());
    if let Some(imported) = &record.imported {
        obj.key(out, "imported");
        write_imported(out, imported);
    }
    obj.opt_str(out, "owner", record.owner.as_deref());
    obj.str(out, "params_hash", &record.params_hash);
    obj.key(out, "params_preview");
    write_map(out, &record.params_preview)?;
    obj.str(out, "prev", entry.prev);
    obj.key(out, "reasons");
    write_strings(out, &record.reasons);
    if let Some(first) = &record.replay_of {
        obj.key(out, "replay_of");
        let mut inner = Object::open(out);
        inner.str(out, "action_id", &first.action_id);
        inner.key(out, "seq");
        write_u64(out, first.seq)?;
        out.push(b'}');
    }
    if !record.result_ids.is_empty() {
        obj.key(out, "result_ids");
        write_strings(out, &record.result_ids);
    }
    obj.key(out, "rules_fired");
    write_strings(out, &record.rules_fired);
    obj.opt_str(out, "run_id", record.run_id.as_deref());
    if let Some(sealed) = &record.sealed {
        obj.key(out, "sealed");
        write_sealed(out, sealed)?;
    }
    obj.key(out, "seq");
    write_u64(out, entry.seq)?;
    if let Some(shadow) = &record.shadow {
        obj.key(out, "shadow");
        write_shadow(out, shadow);
    }
    obj.str(out, "source", &record.source);
    obj.str(out, "system", &record.system);
    obj.opt_str(out, "target", record.target.as_deref());
    obj.str(out, "target_class", &record.target_class);
    obj.str(out, "tier", &record.tier);
    obj.str(out, "ts", entry.ts);
    obj.key(out, "v");
    write_u64(out, u64::from(entry.v))?;
    obj.str(out, "verb", &record.verb);
    if let Some(verification) = &record.verification {
        obj.key(out, "verification");
        write_verification(out, verification)?;
    }
    out.push(b'}');
    Ok(())
}

/// Appends the canonical bytes of a free-form JSON value to `out`.
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value) -> Result<(), LedgerError> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => write_number(out, number)?,
        Value::String(text) => write_str(out, text),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item)?;
            }
            out.push(b']');
        }
        Value::Object(map) => write_map(out, map)?,
    }
    Ok(())
}

fn write_call(out: &mut Vec<u8>, call: &Call) {
    let mut obj = Object::open(out);
    obj.opt_str(out, "function", call.function.as_deref());
    obj.opt_str(out, "method", call.method.as_deref());
    if let Some(sandboxed) = call.sandboxed {
        obj.key(out, "sandboxed");
        out.extend_from_slice(if sandboxed { b"true" } else { b"false" });
    }
    obj.opt_str(out, "server", call.server.as_deref());
    obj.opt_str(out, "tool", call.tool.as_deref());
    obj.opt_str(out, "url", call.url.as_deref());
    out.push(b'}');
}

fn write_confirm(out: &mut Vec<u8>, confirm: &Confirm) {
    let mut obj = Object::open(out);
    obj.opt_str(out, "approver", confirm.approver.as_deref());
    if !confirm.approvers.is_empty() {
        obj.key(out, "approvers");
        write_strings(out, &confirm.approvers);
    }
    obj.opt_str(out, "channel", confirm.channel.as_deref());
    obj.opt_str(out, "note", confirm.note.as_deref());
    obj.str(out, "outcome", &confirm.outcome);
    out.push(b'}');
}

fn write_execution(out: &mut Vec<u8>, execution: &Execution) {
    let mut obj = Object::open(out);
    obj.opt_str(out, "error_hash", execution.error_hash.as_deref());
    obj.opt_str(out, "result_hash", execution.result_hash.as_deref());
    obj.str(out, "status", &execution.status);
    out.push(b'}');
}

fn write_grant(out: &mut Vec<u8>, grant: &Grant) -> Result<(), LedgerError> {
    let mut obj = Object::open(out);
    if let Some(calls) = grant.calls {
        obj.key(out, "calls");
        write_u64(out, calls)?;
    }
    obj.str(out, "event", &grant.event);
    obj.str(out, "id", &grant.id);
    obj.opt_str(out, "request", grant.request.as_deref());
    obj.opt_str(out, "until", grant.until.as_deref());
    if let Some(number) = grant.number {
        obj.key(out, "use");
        write_u64(out, number)?;
    }
    obj.opt_str(out, "when", grant.when.as_deref());
    out.push(b'}');
    Ok(())
}

fn write_erasure(out: &mut Vec<u8>, erasure: &Erasure) -> Result<(), LedgerError> {
    let mut obj = Object::open(out);
    obj.str(out, "requested_by", &erasure.requested_by);
    obj.key(out, "rows");
    write_u64(out, erasure.rows)?;
    obj.str(out, "subject", &erasure.subject);
    out.push(b'}');
    Ok(())
}

fn write_sealed(out: &mut Vec<u8>, sealed: &Sealed) -> Result<(), LedgerError> {
    let mut obj = Object::open(out);
    obj.key(out, "fields");
    // The paths are names the configuration gives: the map writer escapes and sorts them
    // as RFC 8785 says (UTF-16 order), which a BTreeMap's byte order is not for every name.
    let fields: Map<String, Value> = sealed
        .fields
        .iter()
        .map(|(path, text)| (path.clone(), Value::String(text.clone())))
        .collect();
    write_map(out, &fields)?;
    obj.str(out, "subject", &sealed.subject);
    out.push(b'}');
    Ok(())
}

fn write_imported(out: &mut Vec<u8>, imported: &Imported) {
    let mut obj = Object::open(out);
    obj.opt_str(out, "ts", imported.ts.as_deref());
    out.push(b'}');
}

fn write_shadow(out: &mut Vec<u8>, shadow: &Shadow) {
    let mut obj = Object::open(out);
    obj.str(out, "decision", &shadow.decision);
    obj.key(out, "reasons");
    write_strings(out, &shadow.reasons);
    obj.key(out, "rules_fired");
    write_strings(out, &shadow.rules_fired);
    out.push(b'}');
}

fn write_verification(out: &mut Vec<u8>, verification: &Verification) -> Result<(), LedgerError> {
    let mut obj = Object::open(out);
    if !verification.evidence.is_empty() {
        obj.key(out, "evidence");
        write_map(out, &verification.evidence)?;
    }
    obj.str(out, "level", &verification.level);
    if let Some(matched) = verification.matched {
        obj.key(out, "matched");
        out.extend_from_slice(if matched { b"true" } else { b"false" });
    }
    obj.str(out, "method", &verification.method);
    out.push(b'}');
    Ok(())
}

fn write_strings(out: &mut Vec<u8>, items: &[String]) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, item);
    }
    out.push(b']');
}

/// An object's members sorted by the UTF-16 code units of their names (RFC 8785
/// §3.2.3), whatever order the map keeps them in.
fn write_map(out: &mut Vec<u8>, map: &Map<String, Value>) -> Result<(), LedgerError> {
    let mut members: Vec<(&String, &Value)> = map.iter().collect();
    members.sort_unstable_by(|(a, _), (b, _)| utf16_order(a, b));
    out.push(b'{');
    for (i, (name, value)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, name);
        out.push(b':');
        write_value(out, value)?;
    }
    out.push(b'}');
    Ok(())
}

/// UTF-16 code-unit order. It differs from UTF-8 byte order only between characters
/// at U+E000..=U+FFFF and characters above U+FFFF (surrogate pairs sort first).
fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    if a.is_ascii() || b.is_ascii() {
        // The first difference is at an ASCII byte of one side, and an ASCII unit sorts
        // below every other unit in both encodings.
        return a.as_bytes().cmp(b.as_bytes());
    }
    a.encode_utf16().cmp(b.encode_utf16())
}

fn write_number(out: &mut Vec<u8>, number: &Number) -> Result<(), LedgerError> {
    if let Some(n) = number.as_u64() {
        return write_u64(out, n);
    }
    match number.as_i64() {
        Some(n) if n.unsigned_abs() <= EXACT_INTEGER => {
            out.push(b'-');
            write_u64(out, n.unsigned_abs())
        }
        // Fractions, exponents and integers beyond 2^53: ECMAScript's formatting, the
        // library's way (through f64, as JavaScript would).
        _ => library(out, number),
    }
}

fn write_u64(out: &mut Vec<u8>, n: u64) -> Result<(), LedgerError> {
    if n > EXACT_INTEGER {
        return library(out, &n);
    }
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        // `rest % 10` is below 10, so the cast keeps it exact.
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
    Ok(())
}

fn library<T: serde::Serialize>(out: &mut Vec<u8>, value: &T) -> Result<(), LedgerError> {
    serde_json_canonicalizer::to_writer(value, out).map_err(LedgerError::Canonical)
}

/// A JSON string with RFC 8785's escapes (§3.2.2.2).
fn write_str(out: &mut Vec<u8>, text: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(text.len() + 2);
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut clean = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => &[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 15)],
            ],
            _ => continue,
        };
        out.extend_from_slice(&bytes[clean..i]);
        out.extend_from_slice(escape);
        clean = i + 1;
    }
    out.extend_from_slice(&bytes[clean..]);
    out.push(b'"');
}

/// RFC 8785 bytes of an object of a fixed shape, written member by member into one
/// buffer: for callers that canonicalize the same few fields on every call (the action
/// digest), where going through a `Value` would copy every member and sort the names.
///
/// Members must be given in RFC 8785 order (names sorted by UTF-16 code units) and names
/// must need no escaping; both are the caller's literals, checked in debug builds, and a
/// caller's test compares its bytes with [`crate::canonical_bytes`] of the same object.
pub struct CanonicalObject {
    out: Vec<u8>,
    object: Object,
    last: Option<&'static str>,
}

impl CanonicalObject {
    /// An empty object, its buffer sized for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> CanonicalObject {
        let mut out = Vec::with_capacity(capacity);
        let object = Object::open(&mut out);
        CanonicalObject {
            out,
            object,
            last: None,
        }
    }

    fn name(&mut self, name: &'static str) {
        debug_assert!(
            self.last.is_none_or(|last| utf16_order(last, name).is_lt()),
            "member {name:?} is out of RFC 8785 order"
        );
        debug_assert!(!name.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20));
        self.last = Some(name);
        self.object.key(&mut self.out, name);
    }

    /// A string member.
    pub fn str(&mut self, name: &'static str, value: &str) {
        self.name(name);
        write_str(&mut self.out, value);
    }

    /// A string member, or `null` when there is none.
    pub fn str_or_null(&mut self, name: &'static str, value: Option<&str>) {
        self.name(name);
        match value {
            Some(value) => write_str(&mut self.out, value),
            None => self.out.extend_from_slice(b"null"),
        }
    }

    /// A member holding any JSON value, canonicalized.
    pub fn value(&mut self, name: &'static str, value: &Value) -> Result<(), LedgerError> {
        self.name(name);
        write_value(&mut self.out, value)
    }

    /// The object's bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.out.push(b'}');
        self.out
    }
}

/// Writes an object's members with commas between them; names are ASCII literals
/// that need no escaping.
struct Object {
    first: bool,
}

impl Object {
    fn open(out: &mut Vec<u8>) -> Object {
        out.push(b'{');
        Object { first: true }
    }

    fn key(&mut self, out: &mut Vec<u8>, name: &'static str) {
        if !self.first {
            out.push(b',');
        }
        self.first = false;
        out.push(b'"');
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
    }

    fn str(&mut self, out: &mut Vec<u8>, name: &'static str, value: &str) {
        self.key(out, name);
        write_str(out, value);
    }

    fn opt_str(&mut self, out: &mut Vec<u8>, name: &'static str, value: Option<&str>) {
        if let Some(value) = value {
            self.str(out, name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Map, Value};

    use super::*;
    use crate::{Execution, Record};

    /// Strings that exercise every escape: controls, quotes, backslashes, DEL,
    /// non-ASCII, characters above U+E000 and above U+FFFF (the UTF-16 order cases).
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z_]{0,8}",
            "[\\x00-\\x20\"\\\\/\\x7f]{0,6}",
            "[a\u{80}\u{e9}\u{20ac}\u{e000}\u{fb33}\u{ffff}\u{10000}\u{1f600}]{0,6}",
            ".{0,12}",
        ]
    }

    fn number() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-(1i64 << 53)..=(1i64 << 53)).prop_map(Value::from),
            ((1u64 << 53) - 2..(1u64 << 53) + 3).prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            (-1e6f64..1e6).prop_map(Value::from),
            prop_oneof![Just(0.0), Just(-0.0), Just(1e21), Just(1e-7), Just(5e-324)]
                .prop_map(Value::from),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            number(),
            text().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((text(), inner), 0..6)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
    }

    fn map() -> impl Strategy<Value = Map<String, Value>> {
        proptest::collection::vec((text(), value()), 0..5)
            .prop_map(|members| members.into_iter().collect())
    }

    fn record() -> impl Strategy<Value = Record> {
        let ids = (
            text(),
            proptest::option::of(text()),
            proptest::option::of(text()),
            proptest::option::of(text()),
            proptest::option::of(text()),
            text(),
            text(),
            proptest::option::of(text()),
        );
        let kinds = (
            text(),
            text(),
            text(),
            text(),
            proptest::collection::vec(text(), 0..4),
            proptest::collection::vec(text(), 0..4),
            text(),
            map(),
        );
        let confirm = proptest::option::of(
            (
                text(),
                proptest::option::of(text()),
                proptest::option::of(text()),
                proptest::option::of(text()),
                proptest::collection::vec(text(), 0..3),
            )
                .prop_map(|(outcome, approver, channel, note, approvers)| Confirm {
                    outcome,
                    approver,
                    channel,
                    note,
                    approvers,
                }),
        );
        let execution = (
            text(),
            proptest::option::of(text()),
            proptest::option::of(text()),
        )
            .prop_map(|(status, result_hash, error_hash)| Execution {
                status,
                result_hash,
                error_hash,
            });
        let verification = proptest::option::of(
            (text(), text(), proptest::option::of(any::<bool>()), map()).prop_map(
                |(level, method, matched, evidence)| Verification {
                    level,
                    method,
                    matched,
                    evidence,
                },
            ),
        );
        let imported =
            proptest::option::of(proptest::option::of(text()).prop_map(|ts| Imported { ts }));
        let call = proptest::option::of(
            (
                proptest::option::of(text()),
                proptest::option::of(text()),
                proptest::option::of(text()),
                proptest::option::of(text()),
                proptest::option::of(text()),
                proptest::option::of(proptest::bool::ANY),
            )
                .prop_map(|(function, method, server, tool, url, sandboxed)| Call {
                    function,
                    method,
                    server,
                    tool,
                    url,
                    sandboxed,
                }),
        );
        let shadow = proptest::option::of(
            (
                text(),
                proptest::collection::vec(text(), 0..3),
                proptest::collection::vec(text(), 0..3),
            )
                .prop_map(|(decision, reasons, rules_fired)| Shadow {
                    decision,
                    reasons,
                    rules_fired,
                }),
        );
        let replay_of = proptest::option::of(
            (text(), 0..(1u64 << 53))
                .prop_map(|(action_id, seq)| crate::ReplayOf { action_id, seq }),
        );
        let grant = proptest::option::of(
            (
                (text(), text(), proptest::option::of(any::<u64>())),
                (
                    proptest::option::of(text()),
                    proptest::option::of(text()),
                    proptest::option::of(text()),
                    proptest::option::of(any::<u64>()),
                ),
            )
                .prop_map(|((id, event, calls), (until, when, request, number))| {
                    Grant {
                        id,
                        event,
                        calls,
                        until,
                        when,
                        request,
                        number,
                    }
                }),
        );
        let sealed = proptest::option::of(
            (
                proptest::collection::btree_map(text(), text(), 0..3),
                text(),
            )
                .prop_map(|(fields, subject)| crate::Sealed { fields, subject }),
        );
        let erasure = proptest::option::of((text(), 0..(1u64 << 53), text()).prop_map(
            |(requested_by, rows, subject)| crate::Erasure {
                requested_by,
                rows,
                subject,
            },
        ));
        let touched = (
            call,
            proptest::collection::vec(text(), 0..3),
            shadow,
            proptest::option::of(text()),
            replay_of,
            grant,
            sealed,
            erasure,
        );
        (
            ids,
            kinds,
            confirm,
            execution,
            verification,
            imported,
            touched,
        )
            .prop_map(
                |(
                    (action_id, run_id, agent, actor, owner, system, verb, target),
                    (
                        target_class,
                        source,
                        decision,
                        tier,
                        reasons,
                        rules_fired,
                        params_hash,
                        preview,
                    ),
                    confirm,
                    execution,
                    verification,
                    imported,
                    (call, result_ids, shadow, idempotency_key, replay_of, grant, sealed, erasure),
                )| Record {
                    action_id,
                    run_id,
                    agent_auth: agent.as_ref().map(|_| "jwt".to_owned()),
                    agent,
                    actor,
                    call,
                    owner,
                    system,
                    verb,
                    target,
                    target_class,
                    source,
                    decision,
                    tier,
                    reasons,
                    rules_fired,
                    params_hash,
                    params_preview: preview,
                    result_ids,
                    confirm,
                    execution,
                    verification,
                    idempotency_key,
                    replay_of,
                    imported,
                    shadow,
                    grant,
                    sealed,
                    erasure,
                },
            )
    }

    /// Runs `cases` generated inputs through `check` on a thread with a large stack: in
    /// an unoptimised build a generated entry's value tree, the writer and the oracle
    /// together can outgrow a test thread's 2 MiB (about one case in 20,000 overflowed).
    fn on_a_large_stack<S: Strategy + 'static>(
        strategy: fn() -> S,
        check: fn(S::Value) -> Result<(), TestCaseError>,
    ) {
        // Strategies are not `Send`: the thread makes its own.
        let run = move || {
            let mut runner =
                proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(512));
            if let Err(failure) = runner.run(&strategy(), check) {
                panic!("{failure}");
            }
        };
        let thread = std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(run)
            .unwrap();
        if let Err(panic) = thread.join() {
            std::panic::resume_unwind(panic);
        }
    }

    #[test]
    fn canonical_entry_matches_the_library() {
        on_a_large_stack(
            || {
                let seq = prop_oneof![
                    1u64..1_000_000,
                    Just(1u64 << 53),
                    Just((1u64 << 53) + 1),
                    Just(u64::MAX)
                ];
                (record(), seq, text(), text())
            },
            |(record, seq, prev, ts)| {
                let entry = Entry {
                    v: crate::FORMAT_VERSION,
                    seq,
                    prev: &prev,
                    ts: &ts,
                    record: &record,
                };
                let mut fast = Vec::new();
                write_entry(&mut fast, &entry).unwrap();
                same_as_the_library(&fast, &entry)
            },
        );
    }

    #[test]
    fn canonical_value_matches_the_library() {
        on_a_large_stack(value, |value| {
            let mut fast = Vec::new();
            write_value(&mut fast, &value).unwrap();
            same_as_the_library(&fast, &value)
        });
    }

    /// `fast` is the oracle's canonical form of `value`, byte for byte (shown as text
    /// first, so a failure reads).
    fn same_as_the_library(
        fast: &[u8],
        value: &impl serde::Serialize,
    ) -> Result<(), TestCaseError> {
        let oracle = serde_json_canonicalizer::to_vec(value).unwrap();
        prop_assert_eq!(
            String::from_utf8_lossy(fast),
            String::from_utf8_lossy(&oracle)
        );
        prop_assert_eq!(fast, &oracle[..]);
        Ok(())
    }

    /// The cases the UTF-16 shortcut must get right, against the library.
    #[test]
    fn member_order_is_utf16_order_at_the_edges() {
        let input = r#"{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7,"a\ud83d\ude00":8,"a\uffff":9,"a":10,"":11}"#;
        let value: Value = serde_json::from_str(input).unwrap();
        let mut fast = Vec::new();
        write_value(&mut fast, &value).unwrap();
        assert_eq!(fast, serde_json_canonicalizer::to_vec(&value).unwrap());
    }
}
