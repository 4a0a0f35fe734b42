//! `cargo xtask dist`: one release build of the workspace's shipped code, then every
//! artifact made from it into target/dist/ (docs/install.md says what each is):
//!
//! - the wheel (the Python engine and the `attest` command) and the sdist;
//! - the npm packages in napi-rs's layout (the main package, and the linux-x64-gnu
//!   package carrying the prebuilt addon and the `attest` command);
//! - the Debian package (binary, man page, completions, systemd units);
//! - the release archive;
//! - SHA256SUMS and SHA256SUMS.note (a signed note, as checkpoints are).
//!
//! The archive, the wheel and the .deb's contents are written with fixed owners, modes,
//! order and times (SOURCE_DATE_EPOCH, else the commit's time), so the same commit gives
//! the same bytes.

mod archive;
mod compile;
mod deb;
mod npm;
mod project;
mod sums;
mod wheel;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

const USAGE: &str = "usage: cargo xtask dist [--out DIR] [--skip-build]

  --out DIR      where the artifacts go [default: target/dist]
  --skip-build   package the release build already in target/ (no cargo build)

The signing key for SHA256SUMS: the file in ATTEST_DIST_KEY (a signed-note private key,
mode 0600, made by `attest keygen --out FILE --name NAME`); without it, a key made for
this build in target/dist-key/ (for CI and trying out, never for a release).";

fn run(args: Vec<String>) -> anyhow::Result<()> {
    let mut args = args.into_iter();
    if args.next().as_deref() != Some("dist") {
        anyhow::bail!("{USAGE}");
    }
    let root = project::root()?;
    let mut out = root.join("target/dist");
    let mut skip_build = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = PathBuf::from(args.next().context("--out needs a directory")?),
            "--skip-build" => skip_build = true,
            _ => anyhow::bail!("unknown argument {arg:?}\n{USAGE}"),
        }
    }
    dist(&root, &out, skip_build)
}

fn dist(root: &Path, out: &Path, skip_build: bool) -> anyhow::Result<()> {
    let started = Instant::now();
    let project = project::Project::read(root)?;
    println!(
        "dist: {} {} (commit {}), SOURCE_DATE_EPOCH={}",
        project.dist_name, project.version, project.commit, project.epoch
    );
    if !skip_build {
        compile::build(&project)?;
    }
    let built = compile::Built::split(&project)?;
    println!("dist: release build ready after {:.0?}", started.elapsed());
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("cannot empty {}", out.display()))?;
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let built_at = started.elapsed();
    let files = archive::ReleaseFiles::make(&project, &built)?;

    let mut artifacts = vec![
        timed("the archive", || {
            archive::write(&project, &built, &files, out)
        })?,
        built.copy_debug_info(&project, out)?,
        timed("the wheel", || wheel::write(&project, &built, out))?,
        timed("the sdist", || wheel::sdist(&project, out))?,
        timed("the .deb", || deb::write(&project, &built, &files, out))?,
    ];
    artifacts.extend(timed("the npm packages", || {
        npm::write(&project, &built, out)
    })?);
    let signed = sums::write(&project, &built, &artifacts, out)?;

    println!(
        "\ndist: in {} after {:.0?} (the release build and stripping {:.0?}, packaging {:.0?})",
        out.display(),
        started.elapsed(),
        built_at,
        started.elapsed() - built_at,
    );
    println!(
        "  {:>12}  attest (the stripped binary)",
        size(&built.binary)?
    );
    for path in artifacts.iter().chain(&signed) {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default();
        println!("  {:>12}  {name}", size(path)?);
    }
    Ok(())
}

/// Runs one packaging step and says how long it took.
fn timed<T>(what: &str, step: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    let started = Instant::now();
    let made = step()?;
    println!("dist: {what} in {:.1?}", started.elapsed());
    Ok(made)
}

/// A file's size in bytes and MB, for the summary.
fn size(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    Ok(format!("{:.1} MB", bytes as f64 / 1_000_000.0))
}
