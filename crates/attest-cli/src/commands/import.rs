//! `attest import`: record actions that already happened, from JSON lines, in one
//! transaction, holding rows rather than the parsed file (beyond `PARSE_ONCE_BYTES`).

use std::collections::HashMap;
use std::io::{BufRead, Read, Write};
use std::process::ExitCode;

use anyhow::Context;
use attest_core::{Attest, ImportItem};
use attest_ledger::{Confirm, Execution, Verification};
use attest_policy::{Action, Decision};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::cli::ImportArgs;
use crate::config::Config;
use crate::progress::Progress;

/// Longest line accepted: one action, params included.
const MAX_LINE: usize = 1 << 20;

/// Input up to this size is parsed once: the items its check pass makes are the ones
/// imported, held parsed between the two (an `attest export` of 14 MB imports in 83 MiB
/// peak RSS, the rows for the commit included). A larger input is parsed again as it is
/// imported, so what a long import holds is rows.
const PARSE_ONCE_BYTES: u64 = 16 << 20;

/// One line: the action's fields, optionally the result it had, and what the source
/// records of how it went (an `attest export` line carries all of these).
#[derive(Debug, Deserialize)]
struct Line {
    #[serde(flatten)]
    action: Action,
    #[serde(default)]
    result: Option<Value>,
    /// The id as an export spells it (`id` works too).
    #[serde(default)]
    action_id: Option<String>,
    #[serde(default)]
    ts: Option<String>,
    #[serde(default)]
    decision: Option<Decision>,
    #[serde(default)]
    confirm: Option<Confirm>,
    #[serde(default)]
    execution: Option<Execution>,
    #[serde(default)]
    verification: Option<Verification>,
    #[serde(default)]
    reasons: Option<Vec<String>>,
    #[serde(default)]
    params_hash: Option<String>,
    #[serde(default)]
    params_preview: Option<Map<String, Value>>,
}

pub(crate) fn run(config: &Config, args: &ImportArgs) -> anyhow::Result<ExitCode> {
    let name = args.file.display().to_string();
    // Standard input is read once into memory (its bytes, not parsed values). The
    // first pass checks every line, so a bad line imports nothing and leaves no ledger
    // behind. What it parsed is imported as it is while the input read stays within
    // PARSE_ONCE_BYTES; past that, a file is read a second time, turning each line
    // into its row as it goes, so what is held is rows, never the whole file parsed.
    let stdin = if name == "-" {
        // Line by line, each through the bound: an endless line is refused, not read.
        let mut input = std::io::stdin().lock();
        let mut bytes = Vec::new();
        let mut number = 0;
        while let Some(line) = next_line(&mut input, &name, number + 1)? {
            number += 1;
            bytes.extend_from_slice(&line);
            bytes.push(b'\n');
        }
        Some(bytes)
    } else {
        None
    };
    let open = || -> anyhow::Result<(Box<dyn BufRead + '_>, u64)> {
        match &stdin {
            Some(bytes) => Ok((Box::new(bytes.as_slice()), bytes.len() as u64)),
            None => {
                let file = std::fs::File::open(&args.file)
                    .with_context(|| format!("cannot open {name}"))?;
                let size = file.metadata().map(|m| m.len()).unwrap_or(0);
                Ok((Box::new(std::io::BufReader::new(file)), size))
            }
        }
    };
    let mut checking = Progress::new("checking", "bytes", args.progress, false);
    let mut kept = Some(Vec::new());
    let ids = each_item(open()?, &name, &mut checking, |number, read, item| {
        if read > PARSE_ONCE_BYTES {
            kept = None;
        }
        if let Some(kept) = kept.as_mut() {
            kept.push((number, item));
        }
        Ok(())
    })?;
    checking.finish();
    let Some(ids) = ids else {
        anyhow::bail!("{name} holds no actions");
    };
    let ledger = config.open_ledger(true)?;
    already_recorded(&ledger, &ids, &name)?;
    // Imported rows are sealed as a door's are: `personal:` applies to them too.
    let attest = Attest::builder()
        .ledger(ledger)
        .personal(config.settings.file.personal.clone())
        .build()?;
    let mut batch = attest.import();
    match kept {
        Some(items) => {
            let mut reading = Progress::new("importing", "actions", args.progress, false);
            let total = items.len() as u64;
            for (done, (number, item)) in (1u64..).zip(items) {
                batch
                    .push(item)
                    .with_context(|| format!("{name}:{number}"))?;
                if done.is_multiple_of(4096) || done == total {
                    reading.update(done, total);
                }
            }
            reading.finish();
        }
        None => {
            let mut reading = Progress::new("importing", "bytes", args.progress, false);
            each_item(open()?, &name, &mut reading, |_, _, item| {
                Ok(batch.push(item)?)
            })?;
            reading.finish();
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let receipts = runtime.block_on(batch.commit())?;
    let (first, last) = (
        receipts.first().map(|r| r.seq),
        receipts.last().map(|r| r.seq),
    );
    writeln!(
        std::io::stdout().lock(),
        "imported {} as seq {} to {} (marked imported; decisions and outcomes as the source records them)",
        crate::count::n_actions(receipts.len() as u64),
        first.unwrap_or_default(),
        last.unwrap_or_default()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// Each action line of `input` (of `size` bytes) given to `take` with its line number
/// and the bytes read through it, in order, checked:
/// every line parses, and an action id appears once (a stage, an intent or an ask
/// still pending, may be followed by a later line of the same action, as in an
/// export). Returns each id's last line, or `None` when there was no action.
fn each_item(
    (mut input, size): (Box<dyn BufRead + '_>, u64),
    name: &str,
    progress: &mut Progress,
    mut take: impl FnMut(usize, u64, ImportItem) -> anyhow::Result<()>,
) -> anyhow::Result<Option<HashMap<String, (usize, bool)>>> {
    let mut ids: HashMap<String, (usize, bool)> = HashMap::new();
    let (mut number, mut read, mut any) = (0, 0u64, false);
    // Every bad line is named (up to a bound) before anything is taken from the file.
    let mut bad: Vec<String> = Vec::new();
    while let Some(line) = next_line(&mut input, name, number + 1)? {
        number += 1;
        read += line.len() as u64 + 1;
        if number.is_multiple_of(4096) {
            progress.update(read.min(size), size);
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let mut parsed: Line = match serde_json::from_slice(&line) {
            Ok(parsed) => parsed,
            Err(err) => {
                bad.push(format!("{:#}", not_an_action(name, number, &line, &err)));
                continue;
            }
        };
        // How an agent was proven is a door's to say, when it checked a credential; a
        // source's line cannot prove it (an exported row's `agent_auth` is not kept).
        parsed.action.extra.agent_auth = None;
        let item = match to_item(parsed) {
            Ok(item) => item,
            Err(err) => {
                bad.push(format!("{name}:{number}: {err:#}"));
                continue;
            }
        };
        let id = &item.action.id;
        if !id.is_empty() {
            let stage = item
                .execution
                .as_ref()
                .is_some_and(|e| e.status == attest_core::INTENT || e.status == "pending");
            if let Some((first, false)) = ids.insert(id.clone(), (number, stage)) {
                bad.push(format!(
                    "{name}:{number}: action id {id:?} is also on line {first}; an action is imported once"
                ));
                continue;
            }
        }
        any = true;
        if bad.is_empty() {
            take(number, read, item).with_context(|| format!("{name}:{number}"))?;
        }
    }
    progress.update(size, size);
    if !bad.is_empty() {
        anyhow::bail!("{}", bad_lines(&bad));
    }
    Ok(any.then_some(ids))
}

/// How many bad lines one run names; the rest are counted.
const BAD_LINES_NAMED: usize = 20;

/// Every bad line of a file, named (the first [`BAD_LINES_NAMED`], then how many more),
/// so one run shows what to fix; nothing was imported.
fn bad_lines(bad: &[String]) -> String {
    let mut text = format!("{} bad line(s), nothing imported:\n", bad.len());
    for line in bad.iter().take(BAD_LINES_NAMED) {
        text.push_str("  ");
        text.push_str(line);
        text.push('\n');
    }
    if bad.len() > BAD_LINES_NAMED {
        text.push_str(&format!("  … and {} more\n", bad.len() - BAD_LINES_NAMED));
    }
    text.trim_end().to_owned()
}

/// The keys a line may hold: an action's, what a source records, and the rest of an
/// `attest export` line. Others are ignored, but named when the line does not parse
/// (a misspelt `sytem` is why `system` is missing).
const KNOWN_KEYS: &[&str] = &[
    "id",
    "system",
    "verb",
    "target",
    "target_class",
    "params",
    "actor",
    "owner",
    "agent",
    "agent_auth",
    "run_id",
    "risk",
    "source",
    "recognised",
    "extra",
    "result",
    "action_id",
    "ts",
    "decision",
    "confirm",
    "execution",
    "verification",
    "reasons",
    "params_hash",
    "params_preview",
    "v",
    "seq",
    "prev",
    "tier",
    "rules_fired",
    "result_ids",
    "imported",
    "call",
];

/// Why line `number` is not an action, at the place serde stopped: its column in that
/// line (serde counts lines inside the one line it was given, always "line 1"), and
/// the keys it holds that no action has.
fn not_an_action(name: &str, number: usize, line: &[u8], err: &serde_json::Error) -> anyhow::Error {
    let mut text = err.to_string();
    let place = format!(" at line {} column {}", err.line(), err.column());
    if let Some(cut) = text.rfind(&place) {
        text.truncate(cut);
    }
    let unknown: Vec<String> = serde_json::from_slice::<Map<String, Value>>(line)
        .map(|object| {
            object
                .keys()
                .filter(|key| !KNOWN_KEYS.contains(&key.as_str()))
                .map(|key| format!("`{}`", key.escape_debug()))
                .collect()
        })
        .unwrap_or_default();
    let hint = match unknown.as_slice() {
        [] => String::new(),
        [one] => format!("; the line has an unknown field {one}"),
        many => format!("; the line has unknown fields {}", many.join(", ")),
    };
    anyhow::anyhow!(
        "{name}:{number}:{}: not an action: {text}{hint} (an action needs at least \"system\" and \"verb\")",
        err.column()
    )
}

/// The next line without its newline, read through a bound: a line over [`MAX_LINE`]
/// is refused before it is read whole.
fn next_line(
    input: &mut impl BufRead,
    name: &str,
    number: usize,
) -> anyhow::Result<Option<Vec<u8>>> {
    let mut line = Vec::new();
    let limit = u64::try_from(MAX_LINE)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    input
        .take(limit)
        .read_until(b'\n', &mut line)
        .with_context(|| format!("{name}:{number}: cannot read"))?;
    if line.is_empty() {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
    } else if line.len() > MAX_LINE {
        anyhow::bail!("{name}:{number}: line is longer than the limit of {MAX_LINE} bytes");
    }
    Ok(Some(line))
}

/// A line's action and what its source records.
fn to_item(line: Line) -> anyhow::Result<ImportItem> {
    let mut action = line.action;
    match (line.action_id, action.id.is_empty()) {
        (Some(id), true) => action.id = id,
        (Some(id), false) if id != action.id => {
            anyhow::bail!("\"id\" {:?} and \"action_id\" {id:?} differ", action.id)
        }
        _ => {}
    }
    if let Some(ts) = &line.ts {
        humantime::parse_rfc3339(ts)
            .with_context(|| format!("\"ts\" {ts:?} is not an RFC 3339 UTC time"))?;
    }
    let params_given = !matches!(&action.params, Value::Null)
        && !matches!(&action.params, Value::Object(map) if map.is_empty());
    let mut item = ImportItem::new(action, line.result);
    item.ts = line.ts;
    item.decision = line.decision;
    item.confirm = line.confirm;
    item.execution = line.execution;
    item.verification = line.verification;
    item.reasons = line.reasons;
    if !params_given {
        if let Some(hash) = line.params_hash {
            if attest_ledger::from_hex(&hash).is_none() {
                anyhow::bail!("\"params_hash\" is not 64 lower-case hex digits");
            }
            item.params_hash = Some(hash);
            item.params_preview = line.params_preview;
        }
    }
    Ok(item)
}

/// Refuses ids the ledger already holds, naming the line and the row.
fn already_recorded(
    ledger: &attest_ledger::Ledger,
    ids: &HashMap<String, (usize, bool)>,
    name: &str,
) -> anyhow::Result<()> {
    #[derive(Deserialize)]
    struct Id<'a> {
        #[serde(borrow)]
        action_id: std::borrow::Cow<'a, str>,
    }
    if ids.is_empty() {
        return Ok(());
    }
    let mut found = None;
    ledger.for_each_row(1, |row| {
        if let Ok(id) = serde_json::from_slice::<Id<'_>>(row.body) {
            if let Some(&(line, _)) = ids.get(id.action_id.as_ref()) {
                found = Some((line, id.action_id.into_owned(), row.seq));
                return Ok(false);
            }
        }
        Ok(true)
    })?;
    match found {
        Some((line, id, seq)) => anyhow::bail!(
            "{name}:{line}: action id {id:?} is already in the ledger (seq {seq}); an action is imported once"
        ),
        None => Ok(()),
    }
}
