//! `attest monitor --tiles URL --state FILE`: following a published log over time.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use attest_ledger::tiles::{
    check_consistency, check_new_entries, open_cosigned, TileError, TileHashes, TileStore,
};
use attest_ledger::{from_hex, to_hex, CheckpointBody, VerifierKey};

use crate::cli_tiles::MonitorArgs;
use crate::commands::tiles::{open_store, runtime};
use crate::config::{read_capped, trusted_keys, Config};
use crate::review::alerts::{Alert, Alerts};
use crate::terminal::escape;

/// What the monitor remembers: the last checkpoint it accepted.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct State {
    origin: String,
    size: u64,
    /// Lower-case hex.
    root: String,
    note: String,
}

/// Follows the log; an alert is printed and sent through the configured notifiers.
pub(crate) fn run(config: &Config, args: &MonitorArgs) -> anyhow::Result<ExitCode> {
    let trusted = trusted_keys(&args.trust)?;
    if trusted.is_empty() {
        anyhow::bail!("monitor needs the log's verifier key (--vkey, --vkey-file or ATTEST_VKEY)");
    }
    let alerts = Alerts::new(config.notifiers()?);
    let store = open_store(&args.tiles)?;
    loop {
        match check_once(store.as_ref(), &trusted, &args.state)? {
            Ok(message) => eprintln!("attest: {message}"),
            Err(detail) => {
                let log = store.describe();
                println!("ALERT: {}: {}", escape(&log), escape(&detail));
                if alerts.has_notifiers() {
                    let notice = Alert::LogMisbehaved { log, detail }.notice();
                    runtime()?.block_on(alerts.announce(&notice));
                }
                return Ok(ExitCode::from(1));
            }
        }
        if args.once {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_secs(args.interval.max(1)));
    }
}

/// One poll: `Ok(Ok(what happened))`, `Ok(Err(alert))` when the log misbehaved, `Err`
/// when it could not be read.
fn check_once(
    store: &dyn TileStore,
    trusted: &[VerifierKey],
    state_path: &Path,
) -> anyhow::Result<Result<String, String>> {
    let Some(note) = store.read("checkpoint")? else {
        return Ok(Err("the log has no checkpoint".to_owned()));
    };
    let new = match open_cosigned(&note, trusted, &[]) {
        Ok(opened) => opened.body,
        Err(err) => return Ok(Err(format!("the checkpoint does not verify: {err}"))),
    };
    // The tiles must lead to the signed root (a log serving other tiles than it signed).
    match TileHashes::new(store, new.size).root() {
        Ok(root) if root == new.root => {}
        Ok(_) => {
            return Ok(Err(format!(
                "the tiles of the tree of {} entries do not lead to its signed root",
                new.size
            )))
        }
        Err(err @ (TileError::Fetch { .. } | TileError::Io { .. })) => return Err(err.into()),
        Err(err) => return Ok(Err(format!("the tiles are unusable: {err}"))),
    }
    let old = read_state(state_path)?;
    let message = match &old {
        None => format!(
            "first checkpoint of {}: size {} root {} (base64, as the checkpoint note and \
             `attest verify` write it)",
            new.origin,
            new.size,
            // The note's third line is the root as C2SP writes it (base64).
            String::from_utf8_lossy(&note)
                .lines()
                .nth(2)
                .unwrap_or_default()
        ),
        Some(old) => {
            let old_body = CheckpointBody {
                origin: old.origin.clone(),
                size: old.size,
                root: from_hex(&old.root).context("the monitor state's root is not hex")?,
            };
            if let Err(reason) = check_consistency(store, &old_body, &new)? {
                return Ok(Err(format!(
                    "{reason}\n--- checkpoint accepted before ---\n{}--- checkpoint now ---\n{}",
                    old.note,
                    String::from_utf8_lossy(&note)
                )));
            }
            let problems = check_new_entries(store, &old_body, &new)?;
            if !problems.is_empty() {
                let listed: Vec<String> = problems.iter().map(ToString::to_string).collect();
                return Ok(Err(format!(
                    "the entries added after size {} do not check:\n  {}",
                    old.size,
                    listed.join("\n  ")
                )));
            }
            if old.size == new.size {
                format!("no new entries (size {})", new.size)
            } else {
                format!(
                    "size {} → {}: consistent (proved from the tiles), {} new entries checked",
                    old.size,
                    new.size,
                    new.size - old.size
                )
            }
        }
    };
    let state = State {
        origin: new.origin.clone(),
        size: new.size,
        root: to_hex(&new.root),
        note: String::from_utf8_lossy(&note).into_owned(),
    };
    write_state(state_path, &state)?;
    Ok(Ok(message))
}

fn read_state(path: &Path) -> anyhow::Result<Option<State>> {
    if !path.exists() {
        return Ok(None);
    }
    let bytes = read_capped(path, 1 << 20)?;
    Ok(Some(serde_json::from_slice(&bytes).with_context(|| {
        format!("{} is not a monitor state file", path.display())
    })?))
}

fn write_state(path: &Path, state: &State) -> anyhow::Result<()> {
    let mut temp = path.to_path_buf().into_os_string();
    temp.push(".tmp");
    let temp = std::path::PathBuf::from(temp);
    std::fs::write(&temp, serde_json::to_vec_pretty(state)?)
        .and_then(|()| std::fs::rename(&temp, path))
        .with_context(|| format!("cannot write {}", path.display()))
}
