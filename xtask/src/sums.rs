//! SHA256SUMS over every artifact (sha256sum's format, so `sha256sum -c` reads it) and
//! SHA256SUMS.note: the same text as a C2SP signed note, signed with the release key as
//! checkpoints are signed, which `attest verify-sums --vkey KEY DIR` checks.
//!
//! The key: the file ATTEST_DIST_KEY names (a signed-note private key of mode 0600, from
//! `attest keygen`); without it, a key made for this build in target/dist-key/ (mode
//! 0600), good for CI and trying out, never for a release.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use sha2::{Digest, Sha256};
use signed_note::{Note, Signer, StandardSigner};

use crate::compile::Built;
use crate::project::{output, Project};

/// The name of a key made for one build (not a release key).
const BUILD_KEY_NAME: &str = "attest-release-unofficial";

/// Writes SHA256SUMS, SHA256SUMS.note and (for a key made here) its verifier key.
pub(crate) fn write(
    project: &Project,
    built: &Built,
    artifacts: &[PathBuf],
    out: &Path,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut sums = String::new();
    let mut names: Vec<(String, &PathBuf)> = artifacts
        .iter()
        .map(|p| {
            (
                p.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                p,
            )
        })
        .collect();
    names.sort();
    for (name, path) in names {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        sums.push_str(&format!(
            "{}  {name}\n",
            hex::encode(Sha256::digest(&bytes))
        ));
    }
    let (key_file, verifier) = key(project, built)?;
    let private = read_private(&key_file)?;
    let signer = StandardSigner::new(private.trim()).map_err(|e| {
        anyhow::anyhow!(
            "{} is not a signed-note private key: {e}",
            key_file.display()
        )
    })?;
    let mut note = Note::new(sums.as_bytes(), &[])
        .map_err(|e| anyhow::anyhow!("SHA256SUMS is not a valid note text: {e}"))?;
    note.add_sigs(&[&signer as &dyn Signer])
        .map_err(|e| anyhow::anyhow!("cannot sign SHA256SUMS: {e}"))?;

    let sums_path = out.join("SHA256SUMS");
    let note_path = out.join("SHA256SUMS.note");
    std::fs::write(&sums_path, &sums)?;
    std::fs::write(&note_path, note.to_bytes())?;
    println!(
        "dist: SHA256SUMS.note signed by {} (verifier key {})",
        signer.name(),
        verifier.display()
    );
    Ok(vec![sums_path, note_path])
}

/// The signing key file and its verifier key file.
fn key(project: &Project, built: &Built) -> anyhow::Result<(PathBuf, PathBuf)> {
    if let Some(path) = std::env::var_os("ATTEST_DIST_KEY") {
        let path = PathBuf::from(path);
        return Ok((path.clone(), path.with_extension("pub")));
    }
    let dir = project.path("target/dist-key");
    let path = dir.join(format!("{BUILD_KEY_NAME}.key"));
    if !path.exists() {
        println!(
            "dist: no ATTEST_DIST_KEY; making a key for this build in {}",
            dir.display()
        );
        output(
            Command::new(&built.binary)
                .env_remove("ATTEST_CONFIG")
                .current_dir(&project.root)
                .args(["keygen", "--name", BUILD_KEY_NAME, "--out"])
                .arg(&path),
        )?;
    }
    Ok((path.clone(), path.with_extension("pub")))
}

/// A private key's text; refuses a file that group or others may read.
fn read_private(path: &Path) -> anyhow::Result<String> {
    let mode = std::fs::metadata(path)
        .with_context(|| format!("cannot read the signing key {}", path.display()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        anyhow::bail!(
            "{} is readable by others (mode {:o}); chmod 600 it",
            path.display(),
            mode & 0o777
        );
    }
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}
