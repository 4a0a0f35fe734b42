//! `attest anchor`: keeping checkpoint notes where the ledger's writers cannot rewrite
//! them (a file, a Git repository, an HTTP endpoint), and reading them back for
//! `attest verify --checkpoint`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::Context;
use attest_ledger::{split_notes, MAX_NOTE_BYTES};

use crate::cli::AnchorArgs;
use crate::commands::tiles::{display_url, http_client, is_url, runtime};
use crate::config::{read_capped, Config};

/// The file a Git anchor keeps the newest note in; its history holds every one.
const GIT_NOTE_FILE: &str = "checkpoint";

/// Longest anchor source read: a file or response of many notes.
const MAX_ANCHOR_BYTES: u64 = 1 << 26;

pub(crate) fn run(config: &Config, args: &AnchorArgs) -> anyhow::Result<ExitCode> {
    let ledger = config.open_ledger_read_only()?;
    let Some(latest) = ledger.latest_checkpoint()? else {
        anyhow::bail!("the ledger has no checkpoint yet; run `attest checkpoint`");
    };
    if let Some(path) = &args.file {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        file.write_all(latest.note.as_bytes())
            .and_then(|()| file.sync_all())
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!(
            "attest: appended the checkpoint at size {} to {}",
            latest.size,
            path.display()
        );
    }
    if let Some(repo) = &args.git {
        if commit_note(repo, &latest.note, latest.size, args.sign)? {
            eprintln!(
                "attest: committed the checkpoint at size {} to {}",
                latest.size,
                repo.display()
            );
        } else {
            eprintln!(
                "attest: {} already holds the checkpoint at size {}",
                repo.display(),
                latest.size
            );
        }
    }
    if let Some(url) = &args.url {
        let shown = post_note(url, &latest.note)?;
        eprintln!(
            "attest: posted the checkpoint at size {} to {shown}",
            latest.size
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `git -C repo args…`; the error names the command and shows git's message.
fn git(repo: &Path, args: &[&str]) -> anyhow::Result<Vec<u8>> {
    let output = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .context("cannot run git (is it installed?)")?;
    if !output.status.success() {
        anyhow::bail!(
            "git {} in {} failed: {}",
            args.join(" "),
            repo.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(output.stdout)
}

/// Commits `note` as the repository's `checkpoint` file; false if it already holds it.
fn commit_note(repo: &Path, note: &str, size: u64, sign: bool) -> anyhow::Result<bool> {
    if !repo.join(".git").exists() {
        std::fs::create_dir_all(repo)
            .with_context(|| format!("cannot create {}", repo.display()))?;
        git(repo, &["init", "-q"])?;
    }
    let path = repo.join(GIT_NOTE_FILE);
    if std::fs::read(&path).ok().as_deref() == Some(note.as_bytes()) {
        // Unchanged on disk; committed unless the index or HEAD says otherwise.
        let status = git(repo, &["status", "--porcelain", "--", GIT_NOTE_FILE])?;
        if status.is_empty() {
            return Ok(false);
        }
    }
    std::fs::write(&path, note).with_context(|| format!("cannot write {}", path.display()))?;
    git(repo, &["add", "--", GIT_NOTE_FILE])?;
    let message = format!("checkpoint at size {size}");
    let mut args = vec!["commit", "-q", "-m", &message];
    if sign {
        args.push("-S");
    }
    // A repository without a configured identity still takes the commit.
    let has_identity = git(repo, &["config", "user.email"]).is_ok();
    let mut command = Command::new("git");
    command.arg("-C").arg(repo);
    if !has_identity {
        command.args([
            "-c",
            "user.name=attest",
            "-c",
            "user.email=attest@localhost",
        ]);
    }
    let output = command
        .args(&args)
        .output()
        .context("cannot run git (is it installed?)")?;
    if !output.status.success() {
        anyhow::bail!(
            "git commit in {} failed: {}",
            repo.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(true)
}

/// POSTs `note` to `url`; returns the URL as it may be shown (no credentials).
fn post_note(url: &str, note: &str) -> anyhow::Result<String> {
    let parsed = reqwest::Url::parse(url).context("bad --url")?;
    let shown = display_url(&parsed);
    let client = http_client()?;
    runtime()?.block_on(async {
        let response = client
            .post(parsed)
            .header("content-type", "text/plain; charset=utf-8")
            .body(note.to_owned())
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("cannot post to {shown}: {}", e.without_url()))?;
        if !response.status().is_success() {
            anyhow::bail!("{shown} answered HTTP {}", response.status());
        }
        Ok(())
    })?;
    Ok(shown)
}

/// The checkpoint notes a `--checkpoint` source keeps, each named by where it came from:
/// a URL (GET, a body of notes), a Git repository (every committed version of its
/// `checkpoint` file), or a file of notes.
pub(crate) fn read_notes(source: &str) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut found = Vec::new();
    if is_url(source) {
        let parsed = reqwest::Url::parse(source).context("bad --checkpoint URL")?;
        let shown = display_url(&parsed);
        let client = http_client()?;
        let body = runtime()?.block_on(async {
            let response = client
                .get(parsed)
                .send()
                .await
                .map_err(|e| anyhow::anyhow!("cannot fetch {shown}: {}", e.without_url()))?;
            if !response.status().is_success() {
                anyhow::bail!("{shown} answered HTTP {}", response.status());
            }
            let body = response.bytes().await?;
            if body.len() as u64 > MAX_ANCHOR_BYTES {
                anyhow::bail!("{shown} sent over {MAX_ANCHOR_BYTES} bytes");
            }
            Ok(body.to_vec())
        })?;
        for note in split_notes(&body) {
            found.push((shown.clone(), note));
        }
    } else if Path::new(source).join(".git").exists() {
        let repo = Path::new(source);
        let log = git(repo, &["log", "--format=%H", "--", GIT_NOTE_FILE])?;
        for commit in String::from_utf8_lossy(&log).split_whitespace() {
            let spec = format!("{commit}:{GIT_NOTE_FILE}");
            let bytes = git(repo, &["show", &spec])?;
            for note in split_notes(&bytes) {
                found.push((
                    format!("{source}@{}", &commit[..commit.len().min(12)]),
                    note,
                ));
            }
        }
    } else {
        let bytes = read_capped(Path::new(source), MAX_ANCHOR_BYTES)?;
        for note in split_notes(&bytes) {
            found.push((source.to_owned(), note));
        }
    }
    if found.is_empty() {
        anyhow::bail!("{source} holds no checkpoint note");
    }
    found.retain(|(_, note)| note.len() <= MAX_NOTE_BYTES);
    Ok(found)
}
