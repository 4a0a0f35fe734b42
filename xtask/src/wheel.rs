//! The wheel: python/attest with the extension module from the one release build, and
//! the same stripped `attest` binary as a script in the wheel's data (pip puts it on the
//! virtualenv's PATH). Written here rather than by `maturin build`, which would compile
//! the extension a second time with other dependency features; the sdist is maturin's.
//!
//! Entries are sorted (dist-info last, RECORD last of all), dated SOURCE_DATE_EPOCH, with
//! fixed modes: the same inputs give the same bytes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use base64::Engine as _;
use sha2::{Digest, Sha256};
use zip::write::SimpleFileOptions;

use crate::archive::Entry;
use crate::compile::Built;
use crate::project::{read_toml, run, Project};

/// The CPython stable-ABI tag the extension is built for (pyo3's abi3-py310).
const PYTHON_TAG: &str = "cp310-abi3";

pub(crate) fn write(project: &Project, built: &Built, out: &Path) -> anyhow::Result<PathBuf> {
    let stem = format!(
        "{}-{}",
        project.dist_name.replace('-', "_"),
        project.version
    );
    let platform = format!("manylinux_{}_{}_x86_64", built.glibc.0, built.glibc.1);
    let tag = format!("{PYTHON_TAG}-{platform}");

    let mut entries = python_sources(&project.path("python/attest"))?;
    entries.push(Entry::new(
        "attest/_attest.abi3.so",
        read(&built.python)?,
        0o755,
    ));
    entries.push(Entry::new(
        format!("{stem}.data/scripts/attest"),
        read(&built.binary)?,
        0o755,
    ));
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let info = format!("{stem}.dist-info");
    entries.push(Entry::new(
        format!("{info}/METADATA"),
        metadata(project)?.into_bytes(),
        0o644,
    ));
    entries.push(Entry::new(
        format!("{info}/WHEEL"),
        format!(
            "Wheel-Version: 1.0\nGenerator: attest-xtask\nRoot-Is-Purelib: false\nTag: {tag}\n"
        )
        .into_bytes(),
        0o644,
    ));
    entries.push(Entry::new(
        format!("{info}/licenses/LICENSE"),
        read(&project.path("LICENSE"))?,
        0o644,
    ));
    let mut record = String::new();
    for entry in &entries {
        let digest =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(&entry.bytes));
        record.push_str(&format!(
            "{},sha256={digest},{}\n",
            entry.path,
            entry.bytes.len()
        ));
    }
    record.push_str(&format!("{info}/RECORD,,\n"));
    entries.push(Entry::new(
        format!("{info}/RECORD"),
        record.into_bytes(),
        0o644,
    ));

    let path = out.join(format!("{stem}-{tag}.whl"));
    std::fs::write(&path, zip_bytes(&entries, project.epoch)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// The source distribution, by maturin (it builds from source with pip and a Rust toolchain).
pub(crate) fn sdist(project: &Project, out: &Path) -> anyhow::Result<PathBuf> {
    let dir = out.join("sdist");
    run(Command::new(maturin(project))
        .current_dir(&project.root)
        .envs(project.env())
        .args(["sdist", "--manifest-path", "python/Cargo.toml", "--out"])
        .arg(&dir))?;
    let name = format!(
        "{}-{}.tar.gz",
        project.dist_name.replace('-', "_"),
        project.version
    );
    let to = out.join(&name);
    std::fs::rename(dir.join(&name), &to)
        .with_context(|| format!("maturin wrote no {name} in {}", dir.display()))?;
    std::fs::remove_dir_all(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
    Ok(to)
}

/// maturin: $MATURIN, else CI's test virtualenv's, else the one on PATH.
fn maturin(project: &Project) -> PathBuf {
    if let Some(path) = std::env::var_os("MATURIN") {
        return PathBuf::from(path);
    }
    let ci = project.path(".ci/pyvenv/bin/maturin");
    if ci.exists() {
        return ci;
    }
    PathBuf::from("maturin")
}

/// The package's Python files (no caches, no locally built module).
fn python_sources(dir: &Path) -> anyhow::Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for item in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = item?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let shipped = name.ends_with(".py") || name.ends_with(".pyi") || name == "py.typed";
        if path.is_file() && shipped {
            entries.push(Entry::new(format!("attest/{name}"), read(&path)?, 0o644));
        }
    }
    Ok(entries)
}

/// Core metadata 2.4 from the `[project]` table of pyproject.toml, README.md as the description.
fn metadata(project: &Project) -> anyhow::Result<String> {
    let pyproject = read_toml(&project.path("python/pyproject.toml"))?;
    let table = pyproject
        .get("project")
        .and_then(|p| p.as_table())
        .context("pyproject.toml has no [project]")?;
    let text = |key: &str| {
        table
            .get(key)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    if text("name") != project.dist_name {
        anyhow::bail!(
            "python/pyproject.toml names {:?}, not {}",
            text("name"),
            project.dist_name
        );
    }
    let mut out = format!(
        "Metadata-Version: 2.4\nName: {}\nVersion: {}\nSummary: {}\nLicense-Expression: Apache-2.0\nLicense-File: LICENSE\nRequires-Python: {}\n",
        project.dist_name,
        project.version,
        text("description"),
        text("requires-python"),
    );
    for classifier in table
        .get("classifiers")
        .and_then(|c| c.as_array())
        .into_iter()
        .flatten()
    {
        out.push_str(&format!(
            "Classifier: {}\n",
            classifier.as_str().unwrap_or_default()
        ));
    }
    if let Some(extras) = table
        .get("optional-dependencies")
        .and_then(|e| e.as_table())
    {
        for (extra, requirements) in extras {
            out.push_str(&format!("Provides-Extra: {extra}\n"));
            for requirement in requirements.as_array().into_iter().flatten() {
                let requirement = requirement.as_str().unwrap_or_default();
                out.push_str(&format!(
                    "Requires-Dist: {requirement}; extra == \"{extra}\"\n"
                ));
            }
        }
    }
    out.push_str("Description-Content-Type: text/markdown\n\n");
    out.push_str(&String::from_utf8_lossy(&read(&project.path("README.md"))?));
    Ok(out)
}

fn zip_bytes(entries: &[Entry], epoch: u64) -> anyhow::Result<Vec<u8>> {
    let time = zip_time(epoch)?;
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for entry in entries {
        let options = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .last_modified_time(time)
            .unix_permissions(entry.mode);
        writer.start_file(entry.path.as_str(), options)?;
        writer.write_all(&entry.bytes)?;
    }
    Ok(writer.finish()?.into_inner())
}

/// A zip time (1980 to 2107, two-second steps) for `epoch`, clamped into that range.
fn zip_time(epoch: u64) -> anyhow::Result<zip::DateTime> {
    const FIRST: u64 = 315_532_800; // 1980-01-01T00:00:00Z
    let secs = epoch.max(FIRST);
    let days = secs / 86_400;
    let rest = secs % 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    let year = u16::try_from(year).context("SOURCE_DATE_EPOCH is past a zip's range")?;
    zip::DateTime::from_date_and_time(
        year,
        month,
        day,
        (rest / 3600) as u8,
        (rest % 3600 / 60) as u8,
        (rest % 60) as u8,
    )
    .map_err(|e| anyhow::anyhow!("SOURCE_DATE_EPOCH does not fit a zip time: {e}"))
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_become_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(10_957), (2000, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_794), (2026, 12, 7));
    }
}
