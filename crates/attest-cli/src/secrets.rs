//! Secrets the binary reads (approver tokens, Slack signing secrets, link keys) and
//! writes (new approver tokens): from files only the owner can read, or from the
//! environment, never from arguments, which `ps` shows to every user of the machine.

use std::io::Write;
use std::path::Path;

use anyhow::Context;

/// The largest secret file read.
const MAX_SECRET_BYTES: u64 = 4096;

/// The secret in `file` if given, else in the environment variable `env`, else `None`.
/// A file that group or others may read is refused, naming the `chmod` to run.
pub(crate) fn read_secret(file: Option<&Path>, env: &str) -> anyhow::Result<Option<String>> {
    let text = match file {
        Some(path) => {
            refuse_shared(path)?;
            crate::config::read_text(path, MAX_SECRET_BYTES)?
        }
        None => match std::env::var(env) {
            Ok(text) => text,
            Err(std::env::VarError::NotPresent) => return Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => anyhow::bail!("${env} is not UTF-8"),
        },
    };
    let text = text.trim();
    Ok((!text.is_empty()).then(|| text.to_owned()))
}

/// Fails when `path` may be read by its group or by others.
#[cfg(unix)]
pub(crate) fn refuse_shared(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        anyhow::bail!(
            "{} holds a secret but is readable by others (mode {:o}): run `chmod 600 {}`",
            path.display(),
            mode & 0o777,
            path.display()
        );
    }
    Ok(())
}

/// Fails when `path` may be read by its group or by others (no such modes here).
#[cfg(not(unix))]
pub(crate) fn refuse_shared(_path: &Path) -> anyhow::Result<()> {
    Ok(())
}

/// Writes `text` to a new file at `path`, readable only by its owner; an existing file
/// is never overwritten.
pub(crate) fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Who may scrape metrics, from `--metrics-token-file`: a token file only its owner may
/// read; an empty file is an error, not "no token". Without a file, loopback peers only.
pub(crate) fn scrape_access(
    file: Option<&Path>,
) -> anyhow::Result<attest_doors::scrape::ScrapeAccess> {
    let Some(path) = file else {
        return Ok(attest_doors::scrape::ScrapeAccess::default());
    };
    let text = read_secret(Some(path), "")
        .with_context(|| "--metrics-token-file".to_owned())?
        .with_context(|| format!("--metrics-token-file: {} is empty", path.display()))?;
    Ok(attest_doors::scrape::ScrapeAccess::token(&text))
}
