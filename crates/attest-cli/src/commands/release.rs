//! What the release packages are made of and checked with: shell completions, the man
//! page, and `attest verify-sums` for a downloaded release's signed SHA256SUMS.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;
use sha2::{Digest, Sha256};

use crate::cli::{Cli, CompletionShell, VerifySumsArgs};

/// Longest SHA256SUMS (or its note) read: a release lists a handful of files.
const MAX_SUMS_BYTES: u64 = 64 * 1024;

pub(crate) fn completions(shell: CompletionShell) -> anyhow::Result<ExitCode> {
    let shell = match shell {
        CompletionShell::Bash => clap_complete::Shell::Bash,
        CompletionShell::Zsh => clap_complete::Shell::Zsh,
        CompletionShell::Fish => clap_complete::Shell::Fish,
    };
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "attest", &mut out);
    std::io::stdout().lock().write_all(&out)?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn man() -> anyhow::Result<ExitCode> {
    let mut out = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut out)
        .context("cannot render the man page")?;
    std::io::stdout().lock().write_all(&out)?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn verify_sums(args: &VerifySumsArgs) -> anyhow::Result<ExitCode> {
    let trusted = crate::config::trusted_keys(&args.trust)?;
    if trusted.is_empty() {
        anyhow::bail!("no trusted key: pass the release's verifier key with --vkey or --vkey-file");
    }
    let sums = read_small(&args.dir.join("SHA256SUMS"))?;
    let note = read_small(&args.dir.join("SHA256SUMS.note"))?;
    let mut out = std::io::stdout().lock();
    let signer = match open_sums_note(&note, &sums, &trusted) {
        Ok(name) => name,
        Err(why) => {
            writeln!(out, "SHA256SUMS: NOT TRUSTED: {why}")?;
            return Ok(ExitCode::from(1));
        }
    };
    writeln!(out, "SHA256SUMS: signed by {signer}")?;
    let text = std::str::from_utf8(&sums).context("SHA256SUMS is not UTF-8")?;
    let (mut checked, mut failed) = (0usize, 0usize);
    for (number, line) in text.lines().enumerate() {
        let Some((want, name)) = parse_line(line) else {
            writeln!(out, "SHA256SUMS line {}: not `HASH  NAME`", number + 1)?;
            failed += 1;
            continue;
        };
        let path = args.dir.join(name);
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                writeln!(out, "{name}: not here, not checked")?;
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let got = sha256_of(file).with_context(|| format!("cannot read {}", path.display()))?;
        checked += 1;
        if got == want {
            writeln!(out, "{name}: OK")?;
        } else {
            writeln!(out, "{name}: FAILED (its SHA-256 is {got})")?;
            failed += 1;
        }
    }
    if failed > 0 || checked == 0 {
        if checked == 0 {
            writeln!(out, "no file SHA256SUMS lists is in {}", args.dir.display())?;
        }
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Opens SHA256SUMS.note: signed by a trusted key, and its text exactly `sums`. Returns
/// the name of the key that verified.
fn open_sums_note(
    note: &[u8],
    sums: &[u8],
    trusted: &[attest_ledger::VerifierKey],
) -> Result<String, String> {
    let (text, signed_by) =
        attest_ledger::open_note(note, trusted).map_err(|e| format!("SHA256SUMS.note: {e}"))?;
    if text != sums {
        return Err("SHA256SUMS.note signs another text than SHA256SUMS".to_owned());
    }
    signed_by
        .first()
        .map(|key| key.name().to_owned())
        .ok_or_else(|| "no trusted signature".to_owned())
}

/// `<64 hex>  <name>` (sha256sum's text mode) or `<64 hex> *<name>` (binary mode); a name
/// is a plain file name, never a path that leaves the directory.
fn parse_line(line: &str) -> Option<(String, &str)> {
    let (hash, rest) = line.split_once(' ')?;
    let name = rest.strip_prefix(' ').or_else(|| rest.strip_prefix('*'))?;
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && !name.starts_with('-');
    let hex = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
    (plain && hex).then(|| (hash.to_ascii_lowercase(), name))
}

fn sha256_of(mut file: std::fs::File) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

fn read_small(path: &Path) -> anyhow::Result<Vec<u8>> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    if len > MAX_SUMS_BYTES {
        anyhow::bail!(
            "{} is {len} bytes; refusing over {MAX_SUMS_BYTES}",
            path.display()
        );
    }
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_one_file_in_the_directory() {
        let hash = "ab".repeat(32);
        assert_eq!(
            parse_line(&format!("{hash}  attest.tar.gz")),
            Some((hash.clone(), "attest.tar.gz"))
        );
        assert_eq!(
            parse_line(&format!("{hash} *a.whl")),
            Some((hash.clone(), "a.whl"))
        );
        for bad in ["../etc/passwd", "/etc/passwd", "a/b", "..", "-rf", ""] {
            assert_eq!(parse_line(&format!("{hash}  {bad}")), None, "{bad}");
        }
        assert_eq!(parse_line("abc  short.tar.gz"), None);
    }
}
