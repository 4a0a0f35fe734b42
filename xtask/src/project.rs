//! What every artifact is named and stamped with: the version (the workspace's, which
//! the npm package must repeat), the commit, the distribution name, and the time.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

/// The distribution name on PyPI, npm and in Debian (docs/install.md).
pub(crate) const DIST_NAME: &str = "attest-agents";
/// The one target built here.
pub(crate) const TARGET: &str = "x86_64-unknown-linux-gnu";
/// The cargo profile of the shipped build (Cargo.toml says why it is lean).
/// Not `dist`: cargo writes a profile's build to target/PROFILE, and target/dist/ holds the artifacts.
pub(crate) const PROFILE: &str = "dist-release";

pub(crate) struct Project {
    pub(crate) root: PathBuf,
    pub(crate) dist_name: &'static str,
    pub(crate) version: String,
    pub(crate) commit: String,
    /// Seconds since 1970 every file in the archives is dated.
    pub(crate) epoch: u64,
}

impl Project {
    pub(crate) fn read(root: &Path) -> anyhow::Result<Project> {
        let manifest: toml::Table = read_toml(&root.join("Cargo.toml"))?;
        let version = manifest
            .get("workspace")
            .and_then(|w| w.get("package"))
            .and_then(|p| p.get("version"))
            .and_then(|v| v.as_str())
            .context("Cargo.toml has no [workspace.package] version")?
            .to_owned();
        check_one_version(root, &version)?;
        let commit = match std::env::var("ATTEST_COMMIT") {
            Ok(commit) => commit,
            Err(_) => git(root, &["rev-parse", "--short=12", "HEAD"])
                .context("no ATTEST_COMMIT and no Git checkout to name the commit")?,
        };
        let epoch = match std::env::var("SOURCE_DATE_EPOCH") {
            Ok(text) => text
                .trim()
                .parse()
                .with_context(|| format!("SOURCE_DATE_EPOCH={text:?} is not a number"))?,
            Err(_) => git(root, &["log", "-1", "--format=%ct"])
                .and_then(|t| t.parse().ok())
                .unwrap_or(0),
        };
        Ok(Project {
            root: root.to_path_buf(),
            dist_name: DIST_NAME,
            version,
            commit,
            epoch,
        })
    }

    /// The environment every tool xtask runs is given: the same commit and time.
    pub(crate) fn env(&self) -> [(&'static str, String); 2] {
        [
            ("ATTEST_COMMIT", self.commit.clone()),
            ("SOURCE_DATE_EPOCH", self.epoch.to_string()),
        ]
    }

    pub(crate) fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }
}

/// The workspace root: the parent of this crate's directory.
pub(crate) fn root() -> anyhow::Result<PathBuf> {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .map(Path::to_path_buf)
        .context("xtask's manifest directory has no parent")
}

/// The npm package and the changelog must name the workspace's version (the wheel and the
/// .deb take it from here; `attest --version` from cargo).
fn check_one_version(root: &Path, version: &str) -> anyhow::Result<()> {
    let package: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join("js/package.json")).context("cannot read js/package.json")?,
    )
    .context("js/package.json is not JSON")?;
    let npm = package
        .get("version")
        .and_then(|v| v.as_str())
        .unwrap_or("");
    if npm != version {
        anyhow::bail!("js/package.json is version {npm:?}, the workspace {version:?}");
    }
    let name = package.get("name").and_then(|v| v.as_str()).unwrap_or("");
    if name != DIST_NAME {
        anyhow::bail!("js/package.json names {name:?}, not {DIST_NAME}");
    }
    let changelog =
        std::fs::read_to_string(root.join("CHANGELOG.md")).context("cannot read CHANGELOG.md")?;
    if !changelog
        .lines()
        .any(|line| line.starts_with(&format!("## {version}")))
    {
        anyhow::bail!("CHANGELOG.md has no `## {version}` section");
    }
    Ok(())
}

pub(crate) fn read_toml(path: &Path) -> anyhow::Result<toml::Table> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.parse()
        .with_context(|| format!("{} is not TOML", path.display()))
}

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Runs a command to its end; its failure is an error naming it.
pub(crate) fn run(command: &mut Command) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("cannot start {command:?}"))?;
    if !status.success() {
        anyhow::bail!("{command:?} failed: {status}");
    }
    Ok(())
}

/// Runs a command and returns its standard output.
pub(crate) fn output(command: &mut Command) -> anyhow::Result<Vec<u8>> {
    let out = command
        .output()
        .with_context(|| format!("cannot start {command:?}"))?;
    if !out.status.success() {
        anyhow::bail!(
            "{command:?} failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(out.stdout)
}
