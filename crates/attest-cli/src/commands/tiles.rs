//! Reading a published log (a directory or a URL prefix), and `attest verify --tiles`.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use attest_ledger::tiles::{
    verify_tiles, CosignerKey, DirStore, TileError, TileStore, TilesReport, VerifyTilesOptions,
};
use attest_ledger::VerifierKey;

use crate::terminal::escape;

/// Longest file fetched from a published log (a bodies file of 256 large entries).
const MAX_FETCH_BYTES: usize = 64 << 20;

/// True when `source` names an HTTP(S) URL rather than a path.
pub(crate) fn is_url(source: &str) -> bool {
    source.starts_with("http://") || source.starts_with("https://")
}

/// A URL with any user name and password removed, for messages.
pub(crate) fn display_url(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.to_string()
}

/// The HTTP client every tiles command uses: rustls, timeouts, no redirects to other
/// schemes beyond reqwest's defaults.
pub(crate) fn http_client() -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60))
        .build()
        .context("cannot build the HTTP client")
}

/// A single-threaded runtime for the blocking commands that make HTTP calls.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// A published log behind a URL prefix.
pub(crate) struct HttpStore {
    base: reqwest::Url,
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

impl HttpStore {
    pub(crate) fn new(base: &str) -> anyhow::Result<HttpStore> {
        let mut base = reqwest::Url::parse(base).with_context(|| "bad log URL".to_owned())?;
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        Ok(HttpStore {
            base,
            client: http_client()?,
            runtime: runtime()?,
        })
    }
}

impl TileStore for HttpStore {
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, TileError> {
        let fetch = |detail: String| TileError::Fetch {
            path: path.to_owned(),
            detail,
        };
        let url = self.base.join(path).map_err(|e| fetch(e.to_string()))?;
        self.runtime.block_on(async {
            let mut response = self
                .client
                .get(url)
                .send()
                .await
                .map_err(|e| fetch(e.without_url().to_string()))?;
            if response.status() == reqwest::StatusCode::NOT_FOUND {
                return Ok(None);
            }
            if !response.status().is_success() {
                return Err(fetch(format!("HTTP {}", response.status())));
            }
            let mut body = Vec::new();
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| fetch(e.without_url().to_string()))?
            {
                if body.len() + chunk.len() > MAX_FETCH_BYTES {
                    return Err(fetch(format!("over {MAX_FETCH_BYTES} bytes")));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Some(body))
        })
    }

    fn describe(&self) -> String {
        display_url(&self.base)
    }
}

/// The store a `--tiles` argument names: a URL prefix or a directory.
pub(crate) fn open_store(source: &str) -> anyhow::Result<Box<dyn TileStore>> {
    if is_url(source) {
        Ok(Box::new(HttpStore::new(source)?))
    } else {
        let dir = std::path::Path::new(source);
        if !dir.is_dir() {
            anyhow::bail!("{source} is not a directory (nor an http(s) URL)");
        }
        Ok(Box::new(DirStore::new(dir)))
    }
}

/// A progress bar on stderr (`{what} ▇▇▇ done/total entries`) when it is a terminal and
/// the output is not JSON.
pub(crate) fn progress_bar(what: &str, json: bool) -> Option<indicatif::ProgressBar> {
    (!json && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(&format!(
                "{what} {{bar:40}} {{pos}}/{{len}} entries ({{eta}})"
            ))
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    })
}

/// Parses `--witness-key` texts.
pub(crate) fn witness_keys(texts: &[String]) -> anyhow::Result<Vec<CosignerKey>> {
    texts
        .iter()
        .map(|text| CosignerKey::parse(text, "--witness-key").map_err(anyhow::Error::from))
        .collect()
}

/// `attest verify --tiles SOURCE`.
pub(crate) fn verify(
    source: &str,
    trusted: &[VerifierKey],
    witness_texts: &[String],
    min_witnesses: usize,
    json: bool,
) -> anyhow::Result<ExitCode> {
    if trusted.is_empty() {
        anyhow::bail!(
            "verify --tiles needs the log's verifier key (--vkey, --vkey-file or ATTEST_VKEY): \
             a published log is only as good as the key it is checked against"
        );
    }
    let witnesses = witness_keys(witness_texts)?;
    if min_witnesses > witnesses.len() {
        anyhow::bail!(
            "--witnesses {min_witnesses} needs at least that many --witness-key keys (got {})",
            witnesses.len()
        );
    }
    let store = open_store(source)?;
    let bar = progress_bar("checking tiles", json);
    let mut progress = |done: u64, total: u64| {
        if let Some(bar) = &bar {
            bar.set_length(total);
            bar.set_position(done);
        }
    };
    let report = verify_tiles(
        store.as_ref(),
        VerifyTilesOptions {
            trusted,
            witnesses: &witnesses,
            min_witnesses,
            progress: Some(&mut progress),
        },
    )
    .with_context(|| format!("cannot read the published log at {}", store.describe()))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let mut out = std::io::stdout().lock();
    if json {
        let mut value = serde_json::to_value(&report)?;
        value["ok"] = report.is_intact().into();
        serde_json::to_writer(&mut out, &value)?;
        writeln!(out)?;
    } else {
        print_report(&mut out, &report)?;
    }
    Ok(if report.is_intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_report(out: &mut impl Write, report: &TilesReport) -> std::io::Result<()> {
    if report.is_intact() {
        writeln!(
            out,
            "intact: {} checked from the tiles alone; checkpoint size {} root {} signed by {}",
            crate::commands::entries(report.checked),
            report.size,
            report.root,
            escape(report.signed_by.as_deref().unwrap_or_default())
        )?;
    } else {
        writeln!(
            out,
            "BROKEN: {} problem(s) in the published log",
            report.problems.len()
        )?;
        for problem in &report.problems {
            writeln!(out, "  {}", escape(&problem.to_string()))?;
        }
    }
    if !report.cosigned_by.is_empty() {
        let names: Vec<String> = report
            .cosigned_by
            .iter()
            .map(|n| escape(n).into_owned())
            .collect();
        writeln!(out, "cosigned by: {}", names.join(", "))?;
    }
    Ok(())
}
